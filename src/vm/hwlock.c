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
 * The lock is in stripes: each covers a run of the region's pages (1 <<
 * rg_hw_shift of them, at most TK_HW_STRIPES runs), and a change holds the
 * stripes its pages are in, taken in ascending order.  Changes of pages in
 * different stripes - a thread protecting a large area chunk by chunk
 * while the program's faults open single pages elsewhere - go on side by
 * side, as the kernel's own calls on disjoint ranges do (userfaultfd's
 * write-protection takes the address space's lock shared); a change of the
 * whole region (tk__hw_lock) holds every stripe.
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
 * A thread that finds itself already holding a stripe it needs (a
 * synchronous fault inside the critical section, which trapkit's own code
 * never raises) goes ahead without the lock rather than deadlock, and leaves
 * a mark (the thread's own); the holder, before releasing, re-applies the
 * current states of its own pages.
 *
 * A stripe's lock word: 0 free, 1 held, 2 held with waiters (futex).
 * [signal-safe]
 */
#include <signal.h>
#include <unistd.h>

#include "arch/context.h"
#include "core/region_impl.h"
#include "os/linux/os.h"

static __thread char self_token __attribute__((tls_model("initial-exec")));
/* a nested change went ahead inside this thread's holding */
static __thread bool nested_change __attribute__((tls_model("initial-exec")));
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

unsigned tk__hw_stripe_shift(size_t npages)
{
    unsigned shift = 0;
    while (shift < 63 && (npages - 1) >> shift >= TK_HW_STRIPES) shift++;
    return shift;
}

/* [signal-safe] */
unsigned tk__hw_stripes(const struct tk_region *r)
{
    return r->rg_npages ? (unsigned)((r->rg_npages - 1) >> r->rg_hw_shift) + 1 : 1;
}

/* [signal-safe] */
static void stripe_lock(struct tk_hw_stripe *s)
{
    int c = 0;
    if (atomic_compare_exchange_strong(&s->lock, &c, 1)) return;
    for (int spins = 0; spins < 100; spins++) {
        tk__cpu_relax();
        c = 0;
        if (atomic_load_explicit(&s->lock, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong(&s->lock, &c, 1))
            return;
    }
    while (atomic_exchange(&s->lock, 2) != 0) tk__futex_wait(&s->lock, 2);
}

/* [signal-safe] */
void tk__hw_lock_pages(struct tk_region *r, tk_hw_guard *g, size_t first, size_t n)
{
    g->deferred = tk__hwlock_defer_signals && !tk__async_signals_blocked;
    if (g->deferred) tk__defer_signals(&g->old_mask);
    if (r->rg_subpage) { /* a hardware page may span stripes: all of them */
        first = 0;
        n = r->rg_npages;
    }
    size_t last = n ? first + n - 1 : first;
    if (last >= r->rg_npages) last = r->rg_npages ? r->rg_npages - 1 : 0;
    if (first > last) first = last;
    unsigned s0 = (unsigned)(first >> r->rg_hw_shift), s1 = (unsigned)(last >> r->rg_hw_shift) + 1;
    uintptr_t self = (uintptr_t)&self_token;
    /* any stripe of the region held by this thread: nested (taking others
     * now could take them out of order) */
    unsigned all = tk__hw_stripes(r);
    for (unsigned k = 0; k < all; k++)
        if (atomic_load_explicit(&r->rg_hw[k].owner, memory_order_relaxed) == self) {
            nested_change = true;
            g->held = false;
            return;
        }
    for (unsigned k = s0; k < s1; k++) {
        stripe_lock(&r->rg_hw[k]);
        atomic_store_explicit(&r->rg_hw[k].owner, self, memory_order_relaxed);
    }
    g->s0 = s0;
    g->s1 = s1;
    g->held = true;
}

/* [signal-safe] */
void tk__hw_lock(struct tk_region *r, tk_hw_guard *g)
{
    tk__hw_lock_pages(r, g, 0, r->rg_npages);
}

/* [signal-safe] */
int tk__hw_unlock(struct tk_region *r, tk_hw_guard *g, size_t first, size_t n)
{
    int err = 0;
    if (g->held) {
        TK_ASSERT(atomic_load(&r->rg_hw[g->s0].owner) == (uintptr_t)&self_token);
        /* A nested call may have been overtaken by our older system calls. */
        bool nested = nested_change;
        nested_change = false;
        if (nested && n) err = tk__apply(r, first, n);
        for (unsigned k = g->s0; k < g->s1; k++) {
            atomic_store_explicit(&r->rg_hw[k].owner, 0, memory_order_relaxed);
            if (atomic_exchange(&r->rg_hw[k].lock, 0) == 2) tk__futex_wake(&r->rg_hw[k].lock, 1);
        }
        g->held = false;
    }
    if (g->deferred) tk__restore_signals(&g->old_mask);
    g->deferred = false;
    return err;
}
