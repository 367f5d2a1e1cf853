/* src/core/fast.c - which fast paths are on (trapkit/fast.h).
 *
 * One process-wide word, read with a relaxed load on every fault.  The
 * default is every path the machine supports; TRAPKIT_FAST overrides it
 * once, the first time trapkit installs its handlers or reads the word.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "arch/context.h"
#include "core/internal.h"
#include "core/region_impl.h"
#include "os/linux/os.h"
#include "trapkit/fast.h"

#ifdef TK_ASAN_BUILD
void __asan_handle_no_return(void);
void __asan_unpoison_memory_region(void const volatile *addr, size_t size);

/* The end of the signal frame the kernel wrote for (si, uc): on x86-64 the
 * saved register state (its size in the fxsave area's software bytes) lies
 * above the ucontext and the siginfo.  [signal-safe] */
static uintptr_t signal_frame_end(const siginfo_t *si, const void *uc)
{
    uintptr_t end = si ? (uintptr_t)(si + 1) : 0;
    if ((uintptr_t)uc + sizeof(ucontext_t) > end) end = (uintptr_t)uc + sizeof(ucontext_t);
#if defined(__x86_64__)
    const unsigned char *fp = (const void *)((const ucontext_t *)uc)->uc_mcontext.fpregs;
    if (fp) {
        uint32_t sw[2]; /* struct _fpx_sw_bytes: magic1, extended_size */
        memcpy(sw, fp + 464, sizeof sw);
        uintptr_t fend = (uintptr_t)fp + (sw[0] == 0x46505853u ? sw[1] : 512);
        if (fend > end) end = fend;
    }
#endif
    return end;
}

void tk__asan_signal_frame(const siginfo_t *si, const void *uc)
{
    uintptr_t lo = (uintptr_t)uc < (uintptr_t)si ? (uintptr_t)uc : (uintptr_t)si;
    lo -= sizeof(void *); /* the return address the frame starts with */
    __asan_unpoison_memory_region((void *)lo, signal_frame_end(si, uc) - lo);
}
#endif

static _Atomic unsigned fast_paths;
static __thread uint64_t fast_returns __attribute__((tls_model("initial-exec")));

uint64_t tk_fast_return_count(void)
{
    return fast_returns;
}
static pthread_once_t fast_once = PTHREAD_ONCE_INIT;

unsigned tk_fast_paths_available(void)
{
    unsigned m = TK_FAST_EAGER | TK_FAST_SUBPAGE;
    if (tk__arch_can_fast_return()) m |= TK_FAST_RETURN;
    return m;
}

int tk_fast_parse(const char *text, unsigned *mask)
{
    if (!text) return -EINVAL;
    if (!strcmp(text, "off") || !strcmp(text, "none") || !strcmp(text, "0")) {
        *mask = 0;
        return 0;
    }
    if (!strcmp(text, "all") || !strcmp(text, "on") || !strcmp(text, "1")) {
        *mask = TK_FAST_ALL;
        return 0;
    }
    unsigned m = 0;
    const char *p = text;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 6 && !strncmp(p, "return", 6))
            m |= TK_FAST_RETURN;
        else if (n == 5 && !strncmp(p, "eager", 5))
            m |= TK_FAST_EAGER;
        else if (n == 7 && !strncmp(p, "subpage", 7))
            m |= TK_FAST_SUBPAGE;
        else
            return -EINVAL;
        p += n;
        if (*p == ',') p++;
    }
    *mask = m;
    return 0;
}

static void fast_init(void)
{
    unsigned m = tk_fast_paths_available();
    const char *env = getenv("TRAPKIT_FAST");
    unsigned want;
    if (env && tk_fast_parse(env, &want) == 0) m &= want;
    atomic_store_explicit(&fast_paths, m, memory_order_relaxed);
}

void tk__fast_init(void)
{
    pthread_once(&fast_once, fast_init);
}

/* [signal-safe] once tk__fast_init has run (tk__install_handlers does). */
unsigned tk_fast_paths(void)
{
    return atomic_load_explicit(&fast_paths, memory_order_relaxed);
}

int tk_set_fast_paths(unsigned mask)
{
    tk__fast_init();
    if (mask & ~TK_FAST_ALL)
        return tk__fail(-EINVAL, "tk_set_fast_paths: unknown bits in the mask");
    unsigned missing = mask & ~tk_fast_paths_available();
    if (missing)
        return tk__fail(-EOPNOTSUPP,
                        "tk_set_fast_paths: returning without rt_sigreturn is not possible "
                        "here (a shadow stack is enforced, or no extended-state frame)");
    atomic_store_explicit(&fast_paths, mask, memory_order_relaxed);
    return 0;
}

/* rt_sigprocmask(SIG_SETMASK) with the kernel's sigset size.  [signal-safe] */
static int tk__sigsetmask(const void *mask)
{
    return tk__sigmask(SIG_SETMASK, mask, NULL);
}

/* [signal-safe] */
void tk__fast_return(void *uc, const uint64_t *entry_mask)
{
    if (!(tk_fast_paths() & TK_FAST_RETURN) || !tk__arch_can_resume(uc, entry_mask)) return;
    /* The thread's mask is the interrupted code's when the kernel called
     * trapkit's handler directly (SA_NODEFER, empty sa_mask), but a handler
     * installed later may reach it by a tail call, so its sa_mask (and its
     * signal, without SA_NODEFER) would still be blocked: set the mask the
     * interrupted code had, as rt_sigreturn does.  One short system call. */
    if (tk__sigsetmask(&((ucontext_t *)uc)->uc_sigmask) != 0) return;
    fast_returns++;
#ifdef TK_ASAN_BUILD
    /* The handler's frames, between here and the signal frame, are
     * abandoned.  ASan's own call does nothing where it cannot tell the
     * stack's bounds (a handler nested in another): they are unpoisoned
     * here as well. */
    __asan_handle_no_return();
    /* (from below this frame: tk__arch_resume's own is abandoned too; not
     * below an alternate stack this runs on) */
    uintptr_t lo = (uintptr_t)__builtin_frame_address(0) - 1024;
    const stack_t *ss = &((ucontext_t *)uc)->uc_stack;
    uintptr_t ss_lo = (uintptr_t)ss->ss_sp, here = (uintptr_t)__builtin_frame_address(0);
    if (!(ss->ss_flags & SS_DISABLE) && here >= ss_lo && here - ss_lo < ss->ss_size && lo < ss_lo)
        lo = ss_lo;
    __asan_unpoison_memory_region((void *)lo, signal_frame_end(NULL, uc) - lo);
#endif
    tk__arch_resume(uc);
}
