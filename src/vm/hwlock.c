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
 * The lock is taken in signal handlers, so it must cope with a handler that
 * interrupts its own thread while that thread holds it (a fault in an
 * asynchronous signal handler that ran inside tk_protect).  Such a nested
 * call cannot wait: it goes ahead without the lock, which is safe because its
 * own thread is the only one that could be inside, and it leaves a mark; the
 * interrupted holder, before releasing, re-applies the current states of its
 * own pages, since its remaining system calls may be older than the nested
 * ones.  A thread is identified by the address of a thread-local variable, so
 * no system call is needed.
 *
 * The lock word: 0 free, 1 held, 2 held with waiters (futex). [signal-safe]
 */
#include "arch/context.h"
#include "core/region_impl.h"
#include "os/linux/os.h"

static __thread char self_token __attribute__((tls_model("initial-exec")));

/* [signal-safe] */
bool tk__hw_lock(struct tk_region *r)
{
    uintptr_t self = (uintptr_t)&self_token;
    if (atomic_load_explicit(&r->rg_hw_owner, memory_order_relaxed) == self) {
        atomic_store(&r->rg_hw_nested, 1);
        return false;
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
    return true;
}

/* [signal-safe] */
int tk__hw_unlock(struct tk_region *r, bool held, size_t first, size_t n)
{
    if (!held) return 0;
    int err = 0;
    /* A nested call may have been overtaken by our older system calls. */
    if (atomic_exchange(&r->rg_hw_nested, 0) && n) err = tk__apply(r, first, n);
    atomic_store_explicit(&r->rg_hw_owner, 0, memory_order_relaxed);
    if (atomic_exchange(&r->rg_hw_lock, 0) == 2) tk__futex_wake(&r->rg_hw_lock, 1);
    return err;
}
