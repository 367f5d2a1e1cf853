// tests/cxx_check.hpp - CHECK for the C++ tests (exit 1 with the place).
#ifndef TK_TEST_CXX_CHECK_HPP
#define TK_TEST_CXX_CHECK_HPP

#include <cstdio>
#include <cstdlib>

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

#endif
