// tests/cxx_check.hpp - CHECK for the C++ tests (exit 1 with the place).
#ifndef TK_TEST_CXX_CHECK_HPP
#define TK_TEST_CXX_CHECK_HPP

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

#include "trapkit/eh.h"

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                  \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

// Says which throw runtime ran the test; with TK_EXPECT_EH set, checks
// that it was trapkit's (libtrapkit_eh.so, linked or preloaded) and that
// its throws found call sites in its PC table.
inline void check_eh_runtime()
{
    auto get = reinterpret_cast<void (*)(tk_eh_stats *)>(dlsym(RTLD_DEFAULT, "tk_eh_get_stats"));
    if (!get) {
        printf("throw runtime: libstdc++ over libgcc's unwinder\n");
        CHECK(!getenv("TK_EXPECT_EH"));
        return;
    }
    tk_eh_stats s;
    get(&s);
    printf("throw runtime: trapkit's: %llu throws, %llu frames, %llu found in the PC table, "
           "%llu computed, %llu cleanups, %llu handlers, %llu handed to libgcc\n",
           (unsigned long long)s.throws, (unsigned long long)s.frames,
           (unsigned long long)s.cache_hits, (unsigned long long)s.cache_misses,
           (unsigned long long)s.cleanups, (unsigned long long)s.handlers,
           (unsigned long long)s.handed_off);
    CHECK(s.throws > 0 && s.cache_hits > 0 && s.handlers > 0 && s.cleanups > 0);
}

#endif
