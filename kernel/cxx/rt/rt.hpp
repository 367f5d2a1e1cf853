// kernel/cxx/rt/rt.hpp - what the runtime's files share.
#ifndef TKCXX_RT_HPP
#define TKCXX_RT_HPP
#include <stddef.h>
#include <stdint.h>

namespace tkcxx
{
extern long news; // objects from new not yet deleted
void *alloc(size_t n);
void release(void *p);
int run_constructors(); // 0, or what the failing constructor's call gave
void run_destructors();
} // namespace tkcxx

#endif
