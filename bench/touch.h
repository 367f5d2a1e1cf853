/* bench/touch.h - a store whose fault a handler can step over.
 *
 * bench_touch(p) is one `movb $1, (%rdi)` followed by a return; a handler
 * that finds the faulting PC at bench_touch moves it to bench_touch_resume,
 * so a trap is measured without changing any protection (Appel & Li's TRAP
 * row, "useful for heap-overflow detection"). */
#ifndef TK_BENCH_TOUCH_H
#define TK_BENCH_TOUCH_H

#include <signal.h>
#include <stdbool.h>
#include <ucontext.h>

void bench_touch(volatile void *p);
extern char bench_touch_resume[];

/* Steps over the store if uc faulted in bench_touch. [signal-safe] */
static inline bool bench_skip_touch(void *ucv)
{
    ucontext_t *uc = ucv;
    if ((char *)uc->uc_mcontext.gregs[REG_RIP] != (char *)bench_touch) return false;
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)bench_touch_resume;
    return true;
}

/* bench_ud2() raises SIGILL (a "simple exception": no memory management
 * involved); a handler moves the PC from bench_ud2 to bench_ud2_resume. */
void bench_ud2(void);
extern char bench_ud2_resume[];

static inline bool bench_skip_ud2(void *ucv)
{
    ucontext_t *uc = ucv;
    if ((char *)uc->uc_mcontext.gregs[REG_RIP] != (char *)bench_ud2) return false;
    uc->uc_mcontext.gregs[REG_RIP] = (greg_t)bench_ud2_resume;
    return true;
}

/* bench_int3() raises SIGTRAP with a breakpoint; the kernel reports the PC
 * after the int3 (bench_int3_resume), so resuming needs no change. */
void bench_int3(void);
extern char bench_int3_resume[];

static inline bool bench_is_int3(void *ucv)
{
    ucontext_t *uc = ucv;
    return (char *)uc->uc_mcontext.gregs[REG_RIP] == (char *)bench_int3_resume;
}

/* Delivery and return timed on both sides: a handler stores the time-stamp
 * counter on entry (bench_t_entry) and just before it returns (bench_t_exit);
 * bench_measure() adds one repetition of iters exceptions raised by
 * raise_it(p) to s: mean delivery, mean return (TSC) and round trip (the
 * whole loop, wall clock), in ns. */
#include "bench.h"
extern volatile uint64_t bench_t_entry, bench_t_exit;
struct bench_split {
    struct bench_fig deliver, ret, round;
};
void bench_measure(struct bench_split *s, void (*raise_it)(volatile void *), volatile void *p,
                   long iters);

/* A null region handler for bench_measure: timestamps on entry and exit,
 * steps over bench_touch's store. */
#include <trapkit/region.h>
tk_action bench_null_handler(const tk_fault *f, void *arg);

#endif
