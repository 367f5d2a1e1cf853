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

#if defined(__SANITIZE_ADDRESS__)
#define TK_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TK_ASAN 1
#endif
#endif
#ifdef TK_ASAN
void __asan_handle_no_return(void);
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
#ifdef TK_ASAN
    __asan_handle_no_return(); /* the handler's frames are abandoned */
#endif
    tk__arch_resume(uc);
}
