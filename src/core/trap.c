/* src/core/trap.c - user-level handlers for SIGTRAP, SIGILL and SIGFPE with
 * trapkit's delivery and fast return (trapkit/fast.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>

#include "core/region_impl.h"
#include "trapkit/fast.h"

struct trap_slot {
    _Atomic(tk_trap_handler) handler;
    _Atomic(void *) arg;
    struct sigaction old;
    bool installed;
    bool claimed; /* trapkit itself needs it (sub-page single-steps) */
};

#ifndef X86_EFLAGS_TF
#define X86_EFLAGS_TF 0x100 /* the trap flag */
#endif

static struct trap_slot slots[3];
static pthread_mutex_t trap_lock = PTHREAD_MUTEX_INITIALIZER;

static struct trap_slot *slot_of(int sig)
{
    switch (sig) {
    case SIGTRAP:
        return &slots[0];
    case SIGILL:
        return &slots[1];
    case SIGFPE:
        return &slots[2];
    default:
        return NULL;
    }
}

/* Whether a SIGTRAP is the trace trap after an instruction run with the
 * trap flag set: TRAP_TRACE, or TRAP_BRKPT with the trap flag set in the
 * interrupted context.  The kernel takes a debug exception whose status
 * (DR6) says nothing for an icebp instruction and reports TRAP_BRKPT; a
 * virtual machine that does not keep the guest's DR6 across an exit makes a
 * single-step look so, and the flags saved in the frame still have the trap
 * flag (an icebp run without it does not).  [signal-safe] */
static bool trace_trap(const siginfo_t *si, const void *uc)
{
    if (si->si_code == TRAP_TRACE) return true;
    return si->si_code == TRAP_BRKPT &&
           (((const ucontext_t *)uc)->uc_mcontext.gregs[REG_EFL] & X86_EFLAGS_TF);
}

/* The handler for the three signals.  [signal-safe] */
static void on_trap(int sig, siginfo_t *si, void *uc)
{
    tk__asan_signal_frame(si, uc);
    int saved_errno = errno;
    bool direct = TK_DELIVERED_BY_KERNEL();
    uint64_t entry_mask;
    memcpy(&entry_mask, &((ucontext_t *)uc)->uc_sigmask, sizeof entry_mask);
    bool stepped = false;
    bool trace = sig == SIGTRAP && trace_trap(si, uc);
    if (trace) {
        stepped = tk__dirty_step_done(uc);
        stepped |= tk__subpage_step_done(uc);
    }
    if (stepped) {
        errno = saved_errno;
        if (direct) tk__fast_return(uc, &entry_mask);
        return;
    }
    struct trap_slot *s = slot_of(sig);
    tk_trap_handler h = s ? atomic_load(&s->handler) : NULL;
    if (h && h(sig, si, uc, atomic_load(&s->arg)) == TK_RESUME) {
        errno = saved_errno;
        if (direct) tk__fast_return(uc, &entry_mask);
        return;
    }
    /* A trace trap nobody asked for: the trap flag trapkit set for a step it
     * had stopped counting (vm/dirty.c releases a step it takes for one left
     * by an escape).  With no handler to pass it to, its default action
     * would kill the program for nothing. */
    if (trace && s->old.sa_handler == SIG_DFL && !(s->old.sa_flags & SA_SIGINFO)) {
        ((ucontext_t *)uc)->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)X86_EFLAGS_TF;
        errno = saved_errno;
        return;
    }
    if (s) tk__chain(&s->old, sig, si, uc);
    errno = saved_errno;
}

/* Installs on_trap for s's signal; trap_lock held. */
static int install_slot(struct trap_slot *s, int sig)
{
    int err = 0;
    if (!s->installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_trap;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        if (sigaction(sig, &sa, &s->old) < 0)
            err = tk__fail(-errno, "tk_trap_install: sigaction failed");
        else
            s->installed = true;
    }
    return err;
}

int tk_trap_install(int sig, tk_trap_handler h, void *arg)
{
    struct trap_slot *s = slot_of(sig);
    if (!s || !h)
        return tk__fail(-EINVAL, "tk_trap_install: the signal must be SIGTRAP, SIGILL or SIGFPE "
                                 "and the handler not NULL (page faults go to regions)");
    int err = tk__install_handlers(); /* learns the kernel's trampoline */
    if (err) return err;
    pthread_mutex_lock(&trap_lock);
    err = install_slot(s, sig);
    if (!err) {
        atomic_store(&s->arg, arg);
        atomic_store(&s->handler, h);
    }
    pthread_mutex_unlock(&trap_lock);
    return err;
}

int tk__trap_claim(int sig)
{
    struct trap_slot *s = slot_of(sig);
    pthread_mutex_lock(&trap_lock);
    int err = install_slot(s, sig);
    if (!err) s->claimed = true;
    pthread_mutex_unlock(&trap_lock);
    return err;
}

int tk_trap_remove(int sig)
{
    struct trap_slot *s = slot_of(sig);
    if (!s)
        return tk__fail(-EINVAL, "tk_trap_remove: the signal must be SIGTRAP, SIGILL or SIGFPE");
    pthread_mutex_lock(&trap_lock);
    int err = 0;
    if (s->installed && !s->claimed) {
        if (sigaction(sig, &s->old, NULL) < 0)
            err = tk__fail(-errno, "tk_trap_remove: sigaction failed");
        else
            s->installed = false;
    }
    atomic_store(&s->handler, NULL);
    pthread_mutex_unlock(&trap_lock);
    return err;
}
