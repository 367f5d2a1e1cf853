/* src/vm/fork.c - regions in a child of fork().
 *
 * A child of fork() gets a copy of every region: the same address range, the
 * same page states and handlers.  mprotect'ed protections are part of the
 * mappings and survive; userfaultfd does not (without UFFD_FEATURE_EVENT_FORK
 * the kernel drops the child's registrations and write-protect bits, and the
 * parent's userfaultfds still act on the parent's pages).  So the child gets
 * what mprotect would have given it: each userfaultfd region is registered
 * again with a userfaultfd of the child's own and its protections are
 * re-applied from the page states, before fork() returns in the child (the
 * child has one thread then, so no access can slip in between).  A region
 * the child cannot register again (no userfaultfd, out of memory) is served
 * by mprotect from then on (rg_uffd TK_UFFD_LOST_IN_FORK): protections and
 * trap-based DIRTY work as on posix regions.
 *
 * So that the page states the child copies are not half-changed, the
 * parent's fork() waits for every region's lock (and the region table's)
 * and holds them across the fork, with its asynchronous signals deferred.
 *
 * DIRTY in a child: trap-based regions (posix, uffd-sigbus, uffd-thread)
 * carry on exactly: the child's first tk_dirty reports the pages written in
 * the current interval, in the parent before the fork and in the child
 * after.  pagemap-scan keeps its written bits in the page table, which the
 * child does not inherit: its first tk_dirty reports every page (more than
 * was written, never less), later ones are exact.
 */
#include <pthread.h>
#include <sys/mman.h>

#include "core/region_impl.h"
#include "os/linux/os.h"

static struct tk_region *const *fork_regions;
static size_t fork_n;
static uint64_t fork_mask;
static bool fork_blocked_before;

static void lock_all(void)
{
    tk__defer_signals(&fork_mask);
    fork_blocked_before = tk__async_signals_blocked;
    tk__async_signals_blocked = true;
    fork_regions = tk__table_fork_begin(&fork_n);
    for (size_t i = 0; i < fork_n; i++) {
        tk_hw_guard g;
        tk__hw_lock(fork_regions[i], &g);
    }
}

static void unlock_all(bool child)
{
    for (size_t i = 0; i < fork_n; i++) {
        tk_hw_guard g = {.held = true, .s0 = 0, .s1 = tk__hw_stripes(fork_regions[i])};
        tk__hw_unlock(fork_regions[i], &g, 0, 0);
    }
    tk__table_fork_end(child);
    tk__async_signals_blocked = fork_blocked_before;
    tk__restore_signals(&fork_mask);
}

/* Serves r by mprotect from now on (see above).  Trap-based DIRTY needs a
 * bitmap, which a pagemap-scan region lacks: it gets one, with every page
 * dirty for the interval under way. */
static void serve_by_mprotect(struct tk_region *r)
{
    r->rg_uffd = TK_UFFD_LOST_IN_FORK;
    if ((r->rg_flags & TK_REGION_DIRTY) && !r->rg_trap_dirty &&
        (r->rg_dirty || tk__dirty_alloc(r) == 0)) {
        tk__dirty_mark(r, 0, r->rg_npages);
        r->rg_trap_dirty = true;
    }
    (void)tk__apply(r, 0, r->rg_npages);
}

static void reestablish(struct tk_region *r)
{
    if (r->rg_uffd < 0) return;
    int fd = tk__uffd_for(r->rg_mech);
    if (fd < 0 || tk__uffd_register_wp(fd, (void *)r->rg_start, r->rg_len, NULL) < 0) {
        tk__write_stderr("trapkit: a region could not register its userfaultfd again in a child "
                         "of fork(); it is served by mprotect in the child\n");
        serve_by_mprotect(r);
        return;
    }
    r->rg_uffd = fd;
    if (r->rg_mech == TK_MECH_PAGEMAP_SCAN) {
        /* the first interval: every page (a region without DIRTY keeps no
         * such record) */
        if (r->rg_flags & TK_REGION_DIRTY) tk__dirty_mark(r, 0, r->rg_npages);
        if (tk__uffd_wp(fd, (void *)r->rg_start, r->rg_len, true, false) < 0) serve_by_mprotect(r);
        return;
    }
    if (tk__apply(r, 0, r->rg_npages) < 0) serve_by_mprotect(r);
}

static void prepare(void)
{
    tk__uffd_before_fork();
    tk__dirty_before_fork();
    lock_all();
}

static void in_parent(void)
{
    unlock_all(false);
    tk__dirty_after_fork();
}

static void in_child(void)
{
    tk__uffd_after_fork_child();
    tk__pagemap_forget();
    for (size_t i = 0; i < fork_n; i++) {
        tk__dirty_after_fork_child(fork_regions[i]);
        reestablish(fork_regions[i]);
    }
    unlock_all(true);
    tk__dirty_after_fork();
}

static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void register_handlers(void)
{
    pthread_atfork(prepare, in_parent, in_child);
}

void tk__fork_init(void)
{
    pthread_once(&fork_once, register_handlers);
}
