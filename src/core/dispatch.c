/* src/core/dispatch.c - fault dispatch (TRAP).
 *
 * trapkit installs one handler for SIGSEGV and one for SIGBUS (SA_SIGINFO |
 * SA_ONSTACK | SA_NODEFER | SA_RESTART), remembering what was there before.
 * A fault inside a region goes to the region (vm/fault.c: internal DIRTY
 * tracking first, then the user's handler); anything else, and anything a handler declines,
 * goes to the previous handler exactly as the kernel would have delivered it,
 * or, if that was SIG_DFL or SIG_IGN, to the default action: the disposition
 * is reset and the faulting instruction re-executes, so the process dies of
 * the same signal with a core dump, as if trapkit had never been there.
 *
 * SA_NODEFER lets a fault in a region be handled while another signal's
 * handler runs (a timer handler touching a protected heap).  A fault inside
 * trapkit's own handler at more than TK_MAX_NESTING levels, or with less
 * than altstack_reserve left below it on the alternate signal stack (a
 * nested fault: the first is handled on any), is passed on, so a handler
 * that faults on its own protected page crashes instead of recursing
 * forever, or running its frames off the end of an alternate stack into
 * whatever lies below it.
 *
 * Escapes.  A handler may never return: runtimes leave fault handlers by
 * siglongjmp or by throwing.  So nothing trapkit sets on entry may depend on
 * the handler returning.  The region table's reader section (core/table.c)
 * is left before a user's handler is called and entered again after it
 * returns (the region is looked up again: it may have been destroyed
 * meanwhile).  The thread's nesting levels are a small stack of the handler
 * frames still live: each entry first drops the levels the interrupted code
 * has left, recognised by the interrupted stack pointer lying at or above the
 * level's frame (stacks grow down, and a nested fault interrupts code running
 * below its outer handler's frame), or by the interrupted code running off
 * the alternate signal stack that holds the level's frame.
 *
 * Resuming: with TK_FAST_RETURN, a fault that resumes goes back to the
 * faulting instruction through tk__arch_resume (no rt_sigreturn) when the
 * kernel called on_fault directly - its return address is the signal
 * trampoline (sa_restorer) the kernel was given - and the context allows
 * it.  A fault inside a handler is handled the same way, one level deeper:
 * the nested fault returns fast to the handler, and the handler to the
 * program.
 */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "arch/context.h"
#include "core/region_impl.h"
#include "trapkit/fast.h"

/* (above the 64 sandbox calls and arena tries a thread may nest, each of
 * whose faults may interrupt the one before: a timer's handler making such
 * calls, under SA_NODEFER) */
#define TK_MAX_NESTING 72
#define TK_STACK_OVERFLOW_WINDOW (64 * 1024)

static struct sigaction old_segv, old_bus;
/* room a nested fault handled on the alternate signal stack must find
 * below itself: the next signal's frame (AT_MINSIGSTKSZ) and the handlers'
 * own frames */
static uintptr_t altstack_reserve = 8 * 1024;
void *tk__kernel_restorer; /* the trampoline the kernel returns handlers to */
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int install_result;

/* The room the kernel needs for a signal frame on this machine. */
static size_t min_sigstack(void)
{
    size_t min = getauxval(AT_MINSIGSTKSZ);
    return min < (size_t)MINSIGSTKSZ ? (size_t)MINSIGSTKSZ : min;
}

/* The thread's live trapkit fault handlers, innermost last: the address of
 * the handler's frame and the context it handles. */
struct level {
    uintptr_t frame;
    void *uc;
};
static __thread struct level levels[TK_MAX_NESTING] __attribute__((tls_model("initial-exec")));
static __thread int depth __attribute__((tls_model("initial-exec")));

/* Whether a handler frame at `frame` is still live for code running at
 * stack pointer sp; ss is the thread's alternate signal stack and
 * sp_on_altstack whether sp lies on it. [signal-safe] */
static bool level_live(uintptr_t frame, uintptr_t sp, const stack_t *ss, bool sp_on_altstack)
{
    if (frame <= sp) return false;
    bool frame_on_altstack =
        !(ss->ss_flags & SS_DISABLE) && ss->ss_size && frame - (uintptr_t)ss->ss_sp < ss->ss_size;
    return frame_on_altstack == sp_on_altstack || !frame_on_altstack;
}

/* Drops the levels that code at sp has left (by siglongjmp or a throw). */
static void drop_dead_levels(uintptr_t sp, const stack_t *ss, bool sp_on_altstack)
{
    while (depth > 0 && !level_live(levels[depth - 1].frame, sp, ss, sp_on_altstack)) depth--;
}

/* [signal-safe] */
void *tk__current_fault_uc(void)
{
    if (depth == 0) return NULL;
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    stack_t ss;
    if (sigaltstack(NULL, &ss) < 0) ss.ss_flags = SS_DISABLE;
    bool on = !(ss.ss_flags & SS_DISABLE) && sp - (uintptr_t)ss.ss_sp < ss.ss_size;
    for (int i = depth; i > 0; i--)
        if (level_live(levels[i - 1].frame, sp, &ss, on)) return levels[i - 1].uc;
    return NULL;
}

static _Atomic(tk_fault_handler) overflow_handler;
static _Atomic(void *) overflow_arg;
static _Atomic(tk_fault_handler) unclaimed_handler;
static _Atomic(void *) unclaimed_arg;
/* trapkit's own modules' handlers for faults outside every region
 * (tk__add_fault_hook), asked before the program's unclaimed handler */
#define TK_MAX_HOOKS 4
static _Atomic(tk_fault_handler) hooks[TK_MAX_HOOKS];

/* Passes a signal on to old, what was installed before trapkit.
 * [signal-safe] */
bool tk__chain(const struct sigaction *old, int sig, siginfo_t *si, void *uc)
{
    if (old->sa_flags & SA_SIGINFO) {
        old->sa_sigaction(sig, si, uc);
        return false;
    }
    if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        return false;
    }
    /* kill(), tgkill(), sigqueue(), or a trap whose instruction does not
     * trap again when re-executed (int3 and single-step leave the PC after
     * it): re-raised instead */
    bool sent = si->si_code <= 0 || sig == SIGTRAP;
    if (old->sa_handler == SIG_IGN && sent) return false;
    /* The default action: reset, and let the instruction fault again (or
     * re-raise a sent signal, delivered when this handler returns). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    if (sent) raise(sig);
    return !sent;
}

/* [signal-safe] */
static bool is_stack_overflow(uintptr_t addr, void *uc)
{
    uintptr_t sp = TK_CTX_SP(uc);
    return addr < sp + 4096 && addr + TK_STACK_OVERFLOW_WINDOW >= sp;
}

/* [signal-safe] */
int tk__route_fault(int sig, siginfo_t *si, void *uc)
{
    uintptr_t addr = (uintptr_t)si->si_addr;
    bool fault = si->si_code > 0;

    /* Levels the interrupted code has left are dead (see "Escapes"). */
    const stack_t *ss = &((ucontext_t *)uc)->uc_stack;
    uintptr_t isp = TK_CTX_SP(uc);
    bool isp_on_altstack = (ss->ss_flags & SS_ONSTACK) != 0;
    drop_dead_levels(isp, ss, isp_on_altstack);
    /* (a nested fault only: the first is handled on any alternate stack) */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    bool room = depth == 0 || (ss->ss_flags & SS_DISABLE) ||
                here - (uintptr_t)ss->ss_sp >= ss->ss_size ||
                here - (uintptr_t)ss->ss_sp >= altstack_reserve;

    if (fault && depth < TK_MAX_NESTING && room) {
        int my = depth++;
        levels[my].frame = here;
        levels[my].uc = uc;
        tk__table_enter();
        struct tk_region *r = tk__table_find(addr);
        tk_action act = TK_DECLINE;
        bool segv_prot =
            sig == SIGSEGV && (si->si_code == SEGV_ACCERR || si->si_code == SEGV_PKUERR);
        if (r) {
            if (segv_prot && (r->rg_flags & TK_REGION_LIGHT)) {
                act = tk__light_fault(r, addr, uc);
            } else if (sig == SIGSEGV && si->si_code == SEGV_ACCERR && r->rg_subpage) {
                act = tk__subpage_fault(r, addr, TK_CTX_ACCESS(uc), uc);
            } else if (segv_prot) {
                act = tk__handle_fault(r, addr, TK_CTX_ACCESS(uc), TK_CTX_PC(uc), uc,
                                       r->rg_mech == TK_MECH_PKEYS ? TK_MECH_PKEYS : TK_MECH_POSIX,
                                       0);
            } else if (sig == SIGBUS && si->si_code == BUS_ADRERR &&
                       r->rg_mech == TK_MECH_UFFD_SIGBUS) {
                /* userfaultfd with UFFD_FEATURE_SIGBUS: a write-protect fault */
                act = tk__handle_fault(r, addr, TK_ACCESS_WRITE, TK_CTX_PC(uc), uc,
                                       TK_MECH_UFFD_SIGBUS, 0);
                if (act == TK_DECLINE) {
                    /* Pass it on as the SIGSEGV an mprotect'ed page gives:
                     * the retry raises it (see tk__decline_wp). */
                    tk__decline_wp(r, tk__page_index(r, addr));
                    act = TK_RESUME;
                }
            } else if (sig == SIGBUS && si->si_code == BUS_ADRERR && atomic_load(&r->rg_missing)) {
                /* a missing page of an application's userfaultfd (SIGBUS mode) */
                tk_fault_handler mh = atomic_load(&r->rg_missing);
                uintptr_t pg = addr & ~((uintptr_t)r->rg_page - 1);
                tk_fault f = {.addr = (void *)addr,
                              .page = (void *)pg,
                              .pc = TK_CTX_PC(uc),
                              .region = r,
                              .access = TK_CTX_ACCESS(uc),
                              .mech = TK_MECH_POSIX,
                              .ucontext = uc};
                act = mh(&f, r->rg_missing_arg);
            }
        }
        tk__table_leave();
        if (!r && sig == SIGSEGV) {
            tk_fault_handler h = atomic_load(&overflow_handler);
            if (h && is_stack_overflow(addr, uc)) {
                tk_fault f = {.addr = (void *)addr,
                              .page = (void *)(addr & ~(uintptr_t)4095),
                              .pc = TK_CTX_PC(uc),
                              .access = TK_CTX_ACCESS(uc),
                              .mech = TK_MECH_POSIX,
                              .ucontext = uc};
                act = h(&f, atomic_load(&overflow_arg));
            }
        }
        if (act != TK_RESUME) {
            /* trapkit's modules' hooks (faults outside every region), then
             * the program's unclaimed-fault handler */
            tk_fault f = {.addr = (void *)addr,
                          .page = (void *)(addr & ~(uintptr_t)4095),
                          .pc = TK_CTX_PC(uc),
                          .access = TK_CTX_ACCESS(uc),
                          .flags = (unsigned)sig << 16 | (unsigned)(si->si_code & 0xffff),
                          .mech = TK_MECH_POSIX,
                          .ucontext = uc};
            for (int k = 0; k < TK_MAX_HOOKS && act != TK_RESUME && !r; k++) {
                tk_fault_handler hk = atomic_load(&hooks[k]);
                if (!hk) break;
                act = hk(&f, NULL);
            }
            tk_fault_handler uh = atomic_load(&unclaimed_handler);
            if (act != TK_RESUME && uh) act = uh(&f, atomic_load(&unclaimed_arg));
        }
        depth = my;
        if (act == TK_RESUME) return 1;
    } else if (fault && sig == SIGBUS && si->si_code == BUS_ADRERR) {
        /* Too deep: a uffd-sigbus write fault still crashes as the SIGSEGV
         * an mprotect'ed page gives (see tk__decline_wp). */
        tk__table_enter();
        struct tk_region *r = tk__table_find(addr);
        bool wp = r && r->rg_mech == TK_MECH_UFFD_SIGBUS;
        if (wp) tk__decline_wp(r, tk__page_index(r, addr));
        tk__table_leave();
        if (wp) return 2;
    }
    return 0;
}

/* The SIGSEGV and SIGBUS handler.  [signal-safe] */
static void on_fault(int sig, siginfo_t *si, void *uc)
{
    tk__asan_signal_frame(si, uc);
    /* Delivered by the kernel itself (not called by a handler that chains
     * to ours), so the thread's signal mask is the interrupted code's. */
    bool direct = TK_DELIVERED_BY_KERNEL();
    uint64_t entry_mask;
    memcpy(&entry_mask, &((ucontext_t *)uc)->uc_sigmask, sizeof entry_mask);
    int saved_errno = errno;
    int how = tk__route_fault(sig, si, uc);
    if (how) {
        errno = saved_errno;
        if (how == 1 && direct) tk__fast_return(uc, &entry_mask);
        return;
    }
    tk__chain(sig == SIGBUS ? &old_bus : &old_segv, sig, si, uc);
    errno = saved_errno;
}

/* [signal-safe] */
bool tk__pass_on_segv(siginfo_t *si, void *uc)
{
    return tk__chain(&old_segv, SIGSEGV, si, uc);
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    altstack_reserve = min_sigstack() + 4 * 1024;
    tk__fast_init();
    tk__fork_init();
    if (sigaction(SIGSEGV, &sa, &old_segv) < 0 || sigaction(SIGBUS, &sa, &old_bus) < 0) {
        install_result = tk__failf(-errno, "tk_init: sigaction failed: %s", strerror(errno));
        return;
    }
    /* glibc passes the kernel its own signal trampoline and reports it back */
    struct sigaction cur;
    if (sigaction(SIGSEGV, NULL, &cur) == 0 && cur.sa_sigaction == on_fault)
        tk__kernel_restorer = (void *)cur.sa_restorer;
}

int tk__install_handlers(void)
{
    pthread_once(&install_once, install);
    return install_result;
}

int tk_init(void)
{
    (void)tk__probe();
    return tk__install_handlers();
}

int tk_on_unclaimed_fault(tk_fault_handler h, void *arg)
{
    int err = h ? tk__install_handlers() : 0;
    if (err) return err;
    atomic_store(&unclaimed_arg, arg);
    atomic_store(&unclaimed_handler, h);
    return 0;
}

int tk__add_fault_hook(tk_fault_handler h)
{
    int err = tk__install_handlers();
    if (err) return err;
    for (int k = 0; k < TK_MAX_HOOKS; k++) {
        tk_fault_handler none = NULL;
        if (atomic_load(&hooks[k]) == h || atomic_compare_exchange_strong(&hooks[k], &none, h))
            return 0;
    }
    return tk__fail(-ENOSPC, "trapkit: no room for another fault hook");
}

int tk_on_stack_overflow(tk_fault_handler h, void *arg)
{
    int err = tk__install_handlers();
    if (err) return err;
    atomic_store(&overflow_arg, arg);
    atomic_store(&overflow_handler, h);
    return 0;
}

/* A thread's alternate stack from tk_altstack_install is freed when the
 * thread exits. */
static pthread_key_t altstack_key;
static pthread_once_t altstack_once = PTHREAD_ONCE_INIT;

static void altstack_free(void *p)
{
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && cur.ss_sp == p) {
        stack_t off = {.ss_flags = SS_DISABLE};
        sigaltstack(&off, NULL);
    }
    free(p);
}

static void altstack_key_init(void)
{
    (void)pthread_key_create(&altstack_key, altstack_free);
}

int tk_altstack_install(void)
{
    pthread_once(&altstack_once, altstack_key_init);
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE) && cur.ss_sp) return 0;
    size_t size = min_sigstack() + 32 * 1024;
    stack_t ss = {.ss_sp = malloc(size), .ss_size = size, .ss_flags = 0};
    if (!ss.ss_sp) return tk__fail(-ENOMEM, "tk_altstack_install: out of memory");
    if (sigaltstack(&ss, NULL) < 0) {
        int err = -errno;
        free(ss.ss_sp);
        return tk__failf(err, "tk_altstack_install: sigaltstack failed: %s", strerror(-err));
    }
    (void)pthread_setspecific(altstack_key, ss.ss_sp);
    return 0;
}

/* tk_prefault: make pages accessible for a system call by touching them from
 * user mode, so the region's handler runs as for any access. */
int tk_prefault(void *addr, size_t len, enum tk_access access)
{
    if (access != TK_ACCESS_READ && access != TK_ACCESS_WRITE)
        return tk__fail(-EINVAL, "tk_prefault: access must be TK_ACCESS_READ or TK_ACCESS_WRITE");
    size_t hw = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(hw - 1), end = (uintptr_t)addr + len;
    if (end < (uintptr_t)addr) return tk__fail(-EINVAL, "tk_prefault: range wraps around");
    for (; a < end; a += hw) {
        volatile unsigned char *p =
            (volatile unsigned char *)(a < (uintptr_t)addr ? addr : (void *)a);
        if (access == TK_ACCESS_WRITE)
            __atomic_fetch_add((unsigned char *)p, 0, __ATOMIC_RELAXED);
        else
            (void)*p;
    }
    return 0;
}
