/* kernel/cxx/include/tkcxx.h - between the module's C part (module.c, built
 * by kbuild against the kernel's headers) and its C++ part (the runtime in
 * rt/ and the tests, built freestanding by build.sh).
 *
 * Every call into C++ goes through tkcxx_call(), one at a time (module.c
 * holds a mutex): the runtime's state (the exceptions being handled, the
 * frame-state cache) is the module's, not a thread's. */
#ifndef TKCXX_H
#define TKCXX_H
#ifdef __KERNEL__
#include <linux/types.h>
#else
#include <stddef.h>
#include <stdint.h>
#endif
#ifdef __cplusplus
extern "C" {
#endif

/* ---- module.c, for the C++ part ---- */
void *tkk_alloc(size_t n);     /* kmalloc(GFP_KERNEL); NULL (quietly) when out of memory */
void tkk_free(void *p);        /* kfree */
void tkk_print(const char *s); /* one line to the kernel log (KERN_INFO) */
void tkk_warn(const char *s);  /* WARN(): the line and the kernel's backtrace */
__attribute__((noreturn)) void tkk_bug(const char *s); /* BUG(): the calling task ends */
uint64_t tkk_now(void);        /* ktime_get_ns(): instructions under qemu -icount shift=0 */
int tkk_snprintf(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* ---- the runtime (rt/), for module.c ---- */
/* The optimisations of the seed, each switchable (all on by default):
 * one_phase: one walk up the stack, cleanups run as it goes (off: a search
 * walk first, then a second one that runs them); inline_raise: __cxa_throw
 * starts the walk at the thrower (off: at __cxa_throw's own frame, as a
 * separate _Unwind_RaiseException would); cache: frame states and call-site
 * records kept by PC (off: the FDE searched for and its instructions run at
 * every frame). */
struct tkcxx_opts {
    int one_phase, inline_raise, cache;
    int trace; /* time stamps at each step of a throw, in tkcxx_stamps */
};
extern struct tkcxx_opts tkcxx_opts;
/* The steps of the last throw (with trace on), time-stamp counter readings:
 * __cxa_allocate_exception's start and end, the raise, the handler found
 * (the raise again with one walk), its frame's registers installed, and
 * __cxa_begin_catch's start and __cxa_end_catch's end. */
enum {
    TKCXX_T_ALLOC0,
    TKCXX_T_ALLOC1,
    TKCXX_T_RAISE,
    TKCXX_T_FOUND,
    TKCXX_T_INSTALL,
    TKCXX_T_BEGIN,
    TKCXX_T_END,
    TKCXX_T_N
};
extern uint64_t tkcxx_stamps[TKCXX_T_N];

/* At load, before anything else: the FDE table of the module's .eh_frame,
 * then the global constructors.  0, or -errno with the reason logged (a
 * constructor that throws: the ones before it are destroyed again). */
int tkcxx_load(void);
/* At unload: the global destructors (in the reverse order), the tables. */
void tkcxx_unload(void);
/* fn(arg) with an exception boundary: what fn lets escape is reported by
 * WARN() (its type and that it was not caught) and gives -EPROTO; a call of
 * std::terminate() (an exception leaving a noexcept function, or one
 * thrown while a destructor runs for another) gives -ECANCELED. */
int tkcxx_call(int (*fn)(void *), void *arg);
/* What the runtime holds now: objects from new not yet deleted, exceptions
 * not yet freed. */
struct tkcxx_counts {
    long news, exceptions, frames_cached;
    unsigned long throws, frames, cache_hits, cache_misses;
};
void tkcxx_get_counts(struct tkcxx_counts *c);
void tkcxx_flush_cache(void);

/* ---- the module's C++ entry points (tests/) ---- */
int tkcxx_run_tests(void *);
int tkcxx_run_bench(void *);
int tkcxx_uncaught(void *);   /* throws what nothing catches */
int tkcxx_terminates(void *); /* an exception leaves a noexcept function */
int tkcxx_throws_in_unwinding(void *); /* a destructor throws while unwinding runs it */
extern int tkcxx_ctor_throws; /* (module parameter) a global's constructor throws */
extern int tkcxx_dtor_throws; /* (module parameter) a global's destructor throws */
extern char *tkcxx_unit;      /* (module parameter) what the time-stamp counter counts */

#ifdef __cplusplus
}
#endif
#endif
