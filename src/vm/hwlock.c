/* src/vm/hwlock.c - the per-region lock over page states and the hardware.
 *
 * A change of protection is two steps: swap the page's state, then issue the
 * system call that makes the hardware match.  Two threads changing the same
 * page could otherwise issue their calls in the opposite order of their swaps
 * and leave the hardware disagreeing with the state for good (a page the state
 * says is protected but that no longer traps).  So every change of a region's
 * states and hardware - tk_protect, the DIRTY fault path, tk_dirty's
 * re-protection, a declined uffd-thread fault - holds the region's lock.
 * mprotect serialises on the address space anyway, so little is lost.
 *
 * Signals are deferred while the lock is held.  The lock is taken by calls a
 * signal handler may make (tk_protect from a fault handler, the DIRTY fault
 * path when a handler writes a tracked page), so a handler that interrupts
 * its own thread inside the lock could otherwise neither wait for it (its
 * own thread holds it: deadlock) nor go ahead without it (the interrupted
 * holder's system calls, issued after the handler returns, would be older
 * than the handler's and could lift a protection the handler set; and on
 * uffd-thread the write would wait for the handler thread, which waits for
 * the lock).  So the lock blocks every asynchronous signal of the thread
 * before it is taken and restores the mask after it is released: a handler
 * runs before or after the critical section, never inside it.  Synchronous
 * signals (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP) stay deliverable: the
 * kernel kills a thread whose fault signal is blocked, and nothing inside the
 * critical section touches the program's memory.  The cost is two
 * rt_sigprocmask calls per lock, ~0.2-0.4 us here (bench/lock.c measures
 * tk_protect and a fault with and without).  Threads that keep asynchronous signals
 * blocked anyway (trapkit's uffd handler thread) skip the system calls.
 *
 * A thread that finds itself already holding the lock (a synchronous fault
 * inside the critical section, which trapkit's own code never raises) goes
 * ahead without it rather than deadlock, and leaves a mark; the holder, before
 * releasing, re-applies the current states of its own pages.
 *
 * The lock word: 0 free, 1 held, 2 held with waiters (futex). [signal-safe]
 */
#include <signal.h>
#include <unistd.h>

#include "arch/context.h"
#include "core/region_impl.h"
#include "os/linux/os.h"

static __thread char self_token __attribute__((tls_model("initial-exec")));
__thread bool tk__async_signals_blocked __attribute__((tls_model("initial-exec")));
bool tk__hwlock_defer_signals = true;

/* The kernel's signal set (64 bits on x86-64): every signal but the
 * synchronous ones. */
#define SIGBIT(s) ((uint64_t)1 << ((s)-1))
static const uint64_t async_signals =
    ~(SIGBIT(SIGSEGV) | SIGBIT(SIGBUS) | SIGBIT(SIGILL) | SIGBIT(SIGFPE) | SIGBIT(SIGTRAP) |
      SIGBIT(SIGKILL) | SIGBIT(SIGSTOP));

/* [signal-safe] */
void tk__defer_signals(uint64_t *old)
{
    tk__sigmask(SIG_BLOCK, &async_signals, old);
}

/* [signal-safe] */
void tk__restore_signals(const uint64_t *old)
{
    tk__sigmask(SIG_SETMASK, old, NULL);
}

/* [signal-safe] */
void tk__hw_lock(struct tk_region *r, tk_hw_guard *g)
{
    g->deferred = tk__hwlock_defer_signals && !tk__async_signals_blocked;
    if (g->deferred) tk__defer_signals(&g->old_mask);
    uintptr_t self = (uintptr_t)&self_token;
    if (atomic_load_explicit(&r->rg_hw_owner, memory_order_relaxed) == self) {
        atomic_store(&r->rg_hw_nested, 1);
        g->held = false;
        return;
    }
    int c = 0;
    if (!atomic_compare_exchange_strong(&r->rg_hw_lock, &c, 1)) {
        for (int spins = 0; spins < 100; spins++) {
            tk__cpu_relax();
            c = 0;
            if (atomic_load_explicit(&r->rg_hw_lock, memory_order_relaxed) == 0 &&
                atomic_compare_exchange_strong(&r->rg_hw_lock, &c, 1))
                goto held;
        }
        while (atomic_exchange(&r->rg_hw_lock, 2) != 0) tk__futex_wait(&r->rg_hw_lock, 2);
    }
held:
    atomic_store_explicit(&r->rg_hw_owner, self, memory_order_relaxed);
    g->held = true;
}

/* [signal-safe] */
int tk__hw_unlock(struct tk_region *r, tk_hw_guard *g, size_t first, size_t n)
{
    int err = 0;
    if (g->held) {
        TK_ASSERT(atomic_load(&r->rg_hw_owner) == (uintptr_t)&self_token);
        /* A nested call may have been overtaken by our older system calls. */
        if (atomic_exchange(&r->rg_hw_nested, 0) && n) err = tk__apply(r, first, n);
        atomic_store_explicit(&r->rg_hw_owner, 0, memory_order_relaxed);
        if (atomic_exchange(&r->rg_hw_lock, 0) == 2) tk__futex_wake(&r->rg_hw_lock, 1);
        g->held = false;
    }
    if (g->deferred) tk__restore_signals(&g->old_mask);
    g->deferred = false;
    return err;
}
