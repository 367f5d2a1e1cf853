/* src/vm/protect.c - PROT1, PROTN, UNPROT: from page states to the hardware.
 *
 * Each page's state (core/region_impl.h) says what the user asked for; hw_of()
 * turns it into what the mechanism must set: an mprotect protection and, for
 * the uffd mechanisms, whether the page is userfaultfd write-protected.  A
 * call changes the states with one compare-and-swap per page, then issues one
 * system call per run of pages whose setting changes the same way, so PROTN
 * over a uniform range costs one mprotect or one UFFDIO_WRITEPROTECT.
 */
#include <sys/mman.h>
#include <unistd.h>

#include "core/internal.h"
#include "core/region_impl.h"
#include "os/linux/os.h"
#include "os/linux/uffd.h"

struct hw {
    int prot; /* PROT_* for mprotect */
    bool wp;  /* userfaultfd write-protected */
};

/* The mprotect protection for each user protection (TK_PROT_*). */
const int tk__prot_of_user[4] = {PROT_NONE, PROT_READ, PROT_NONE, PROT_READ | PROT_WRITE};

/* [signal-safe] */
static struct hw hw_of(const struct tk_region *r, uint8_t st)
{
    int user = st & PS_PROT_MASK;
    struct hw h = {tk__prot_of_user[user], false};
    switch (r->rg_uffd == TK_UFFD_LOST_IN_FORK ? TK_MECH_POSIX : r->rg_mech) {
    case TK_MECH_UFFD_SIGBUS:
    case TK_MECH_UFFD_THREAD:
        h.prot = user == TK_PROT_NONE ? PROT_NONE : PROT_READ | PROT_WRITE;
        if (st & PS_DECLINED) h.prot = PROT_READ;
        h.wp = user != TK_PROT_RW || (st & PS_TRACK);
        /* the kernel dropped the write protection: mprotect holds the page,
         * and leaving this state must write-protect it again */
        if ((st & PS_MPROT) && h.wp) {
            if (h.prot != PROT_NONE) h.prot = PROT_READ;
            h.wp = false;
        }
        break;
    default:
        if ((st & PS_TRACK) && user == TK_PROT_RW) h.prot = PROT_READ;
        break;
    }
    return h;
}

/* Whether the userfaultfd write protection belongs to PROT1/UNPROT (on
 * pagemap-scan regions it belongs to DIRTY tracking). */
static bool traps_by_wp(const struct tk_region *r)
{
    return (r->rg_mech == TK_MECH_UFFD_SIGBUS || r->rg_mech == TK_MECH_UFFD_THREAD) &&
           r->rg_uffd >= 0;
}

static bool hw_eq(struct hw a, struct hw b)
{
    return a.prot == b.prot && a.wp == b.wp;
}

/* Whether userfaultfd write-protects pages that are not present
 * (UFFD_FEATURE_WP_UNPOPULATED, Linux 6.4).  [signal-safe]: the probe was
 * made when the region was created. */
static bool wp_unpopulated(void)
{
    return tk_probe_has_uffd(tk__probe(), UFFD_FEATURE_WP_UNPOPULATED);
}

/* Before 6.4 the write protection of a page that is not present is lost (its
 * first touch maps a fresh, writable page): make the pages present (the
 * shared zero page for those never written) before protecting them, as QEMU
 * and bdwgc do.  Populating needs a readable range: a page that may still be
 * no-access (from, or unknown when forced) is made read-only first, which
 * allows no more than the write-protected setting that follows.
 * [signal-safe] */
static int populate(void *addr, size_t len, struct hw from, bool force)
{
    int err = 0;
    if (force || from.prot == PROT_NONE) err = tk__mprotect(addr, len, PROT_READ);
    if (!err) err = tk__populate_read(addr, len);
    return err;
}

/* Sets the hardware of pages [first, first+n) from `from` to `to`.
 * [signal-safe] */
static int set_hw(struct tk_region *r, size_t first, size_t n, struct hw from, struct hw to,
                  bool force)
{
    void *addr = (void *)(r->rg_start + (first << r->rg_shift));
    size_t len = n << r->rg_shift;
    int err = 0;
    bool wp = traps_by_wp(r);
    /* Order: add write protection before lifting an mprotect, and lift it
     * after lowering one, so no instant allows more than both settings. */
    if (wp && to.wp && (force || !from.wp)) {
        if (to.prot != PROT_NONE && !wp_unpopulated()) err = populate(addr, len, from, force);
        if (!err) err = tk__uffd_wp(r->rg_uffd, addr, len, true, false);
    }
    if (!err && (force || from.prot != to.prot)) {
        err = tk__mprotect(addr, len, to.prot);
        if (err == -ENOMEM)
            return tk__fail(err, "tk_protect: mprotect failed with ENOMEM: splitting the mapping "
                                 "would exceed vm.max_map_count; per-page protection of this many "
                                 "pages needs a page-table mechanism (uffd-sigbus or uffd-thread)");
    }
    if (!err && wp && !to.wp && (force || from.wp))
        err = tk__uffd_wp(r->rg_uffd, addr, len, false, tk__uffd_serving);
    if (err) return tk__fail(err, "tk_protect: the system call changing the protection failed");
    return 0;
}

/* [signal-safe] */
int tk__apply(struct tk_region *r, size_t first, size_t n)
{
    if (r->rg_subpage) return tk__subpage_apply(r, first, n);
    size_t run = first;
    struct hw cur = hw_of(r, atomic_load(&r->rg_state[first]));
    for (size_t i = first + 1; i <= first + n; i++) {
        struct hw h = i < first + n ? hw_of(r, atomic_load(&r->rg_state[i])) : cur;
        if (i == first + n || !hw_eq(h, cur)) {
            int err = set_hw(r, run, i - run, cur, cur, true);
            if (err) return err;
            run = i;
            cur = h;
        }
    }
    return 0;
}

/* [signal-safe] */
int tk__change(struct tk_region *r, size_t first, size_t n, uint8_t from, uint8_t to)
{
    return set_hw(r, first, n, hw_of(r, from), hw_of(r, to), false);
}

/* Takes r's lock for a change the uffd service thread makes (a declined
 * fault, removed pages); false, and the lock not held, if r is being
 * destroyed.  The service thread may have found r before it left the table:
 * tk_region_destroy clears the magic under the lock before it gives the
 * memory back, so a change made under the lock either ends before that or
 * sees the region dead and does nothing.  [signal-safe] */
static bool lock_live(struct tk_region *r, tk_hw_guard *g, size_t first, size_t n)
{
    tk__hw_lock_pages(r, g, first, n);
    if (tk__region_live(r)) return true;
    tk__hw_unlock(r, g, 0, 0);
    return false;
}

/* [signal-safe] */
void tk__decline_wp(struct tk_region *r, size_t page)
{
    tk_hw_guard g;
    if (!lock_live(r, &g, page, 1)) return;
    atomic_fetch_or(&r->rg_state[page], PS_DECLINED);
    tk__apply(r, page, 1);
    tk__hw_unlock(r, &g, page, 1);
}

/* [signal-safe] */
int tk__check_range(struct tk_region *r, const void *addr, size_t len, size_t *first, size_t *n)
{
    uintptr_t a = (uintptr_t)addr;
    if (a < r->rg_start || a >= r->rg_end || len > r->rg_end - a)
        return tk__fail(-EINVAL, "tk_protect: the range is not inside the region");
    if ((a - r->rg_start) & (r->rg_page - 1) || len & (r->rg_page - 1) || len == 0)
        return tk__fail(-EINVAL, "tk_protect: address and length must be multiples of the region's "
                                 "logical page size");
    *first = tk__page_index(r, a);
    *n = len >> r->rg_shift;
    return 0;
}

static int protect(tk_region *r, void *addr, size_t len, int prot, bool lift_span);

/* A page's state `old` set to the user protection `prot` (its marks of a
 * declined fault and of mprotect holding it cleared).  [signal-safe] */
static uint8_t with_prot(uint8_t old, int prot)
{
    return (uint8_t)((old & ~(PS_PROT_MASK | PS_DECLINED | PS_MPROT)) | prot);
}

/* Whether a page in state `old`, set to `prot`, can join a run of pages
 * going from run_old to `prot` in the run's one system call: it ends as the
 * run's pages do, and starts as they do or as they end (open already).
 * [signal-safe] */
static bool joins_lift(const struct tk_region *r, uint8_t run_old, uint8_t old, int prot)
{
    struct hw to = hw_of(r, with_prot(run_old, prot));
    struct hw o = hw_of(r, old), n = hw_of(r, with_prot(old, prot));
    struct hw ro = hw_of(r, run_old);
    return hw_eq(n, to) && !to.wp && ro.wp && ro.prot == to.prot && (hw_eq(o, to) || hw_eq(o, ro));
}

/* [signal-safe] */
int tk_protect(tk_region *r, void *addr, size_t len, int prot)
{
    return protect(r, addr, len, prot, false);
}

/* [signal-safe] */
int tk__unprot_span(tk_region *r, void *addr, size_t len)
{
    return protect(r, addr, len, TK_PROT_RW, true);
}

/* tk_protect; with lift_span (tk__unprot_span), a page already open joins
 * the run of write-protected pages around it, so that the span is opened
 * with one system call where it would take one per run of protected pages:
 * the kernel leaves an open page as it is, and each call that changes a
 * page table flushes the TLB of every other CPU running the program, an
 * interrupt of that CPU (tens of microseconds in a virtual machine).
 * [signal-safe] */
static int protect(tk_region *r, void *addr, size_t len, int prot, bool lift_span)
{
    int cerr = tk__check_region(r, "tk_protect: the region is NULL",
                                "tk_protect: the region was destroyed");
    if (cerr) return cerr;
    const char *gone = atomic_load(&r->rg_gone);
    if (gone) return tk__fail(-EFAULT, gone);
    if (r->rg_mech == TK_MECH_PKEYS) {
        if (prot != TK_PROT_NONE && prot != TK_PROT_READ && prot != TK_PROT_RW)
            return tk__fail(-EINVAL, "tk_protect: protection must be TK_PROT_NONE, "
                                     "TK_PROT_READ or TK_PROT_RW");
        return tk__pkeys_protect(r, addr, len, prot);
    }
    size_t first = 0, n = 0;
    int err = tk__check_range(r, addr, len, &first, &n);
    if (err) return err;
    if (prot != TK_PROT_NONE && prot != TK_PROT_READ && prot != TK_PROT_RW)
        return tk__fail(-EINVAL, "tk_protect: protection must be TK_PROT_NONE, TK_PROT_READ or "
                                 "TK_PROT_RW");
    if (r->rg_subpage) return tk__subpage_protect(r, first, n, prot);
    tk_hw_guard g;
    tk__hw_lock_pages(r, &g, first, n);

    /* Swap each page's state; flush a run whenever the next page's state
     * differs.  If a system call fails, the pages of its run get their old
     * state back (and the hardware is made to match it as far as the kernel
     * lets us): what the call did not do, it did not record either. */
    size_t run = first;
    uint8_t run_old = 0, run_new = 0;
    size_t i;
    for (i = first; i < first + n && !err; i++) {
        uint8_t old = atomic_load(&r->rg_state[i]), nst;
        /* an open page joining the span's run leaves the run as it is */
        bool join = lift_span && i > first && old != run_old && joins_lift(r, run_old, old, prot);
        if (!join && i > first && old != run_old) {
            err = set_hw(r, run, i - run, hw_of(r, run_old), hw_of(r, run_new), false);
            if (err) break;
            run = i;
        }
        do {
            nst = with_prot(old, prot);
        } while (!atomic_compare_exchange_weak(&r->rg_state[i], &old, nst));
        if (join) continue;
        run_old = old;
        run_new = nst;
    }
    if (!err) err = set_hw(r, run, first + n - run, hw_of(r, run_old), hw_of(r, run_new), false);
    if (err) {
        for (size_t j = run; j < i; j++) {
            uint8_t expect = run_new;
            atomic_compare_exchange_strong(&r->rg_state[j], &expect, run_old);
        }
        tk__apply(r, run, i - run);
    }

    int uerr = tk__hw_unlock(r, &g, first, n);
    return err ? err : uerr;
}

/* [signal-safe] */
int tk_protection(tk_region *r, const void *addr)
{
    int cerr = tk__check_region(r, "tk_protection: the region is NULL",
                                "tk_protection: the region was destroyed");
    if (cerr) return cerr;
    if ((uintptr_t)addr < r->rg_start || (uintptr_t)addr >= r->rg_end)
        return tk__fail(-EINVAL, "tk_protection: the address is not inside the region");
    if (r->rg_mech == TK_MECH_PKEYS) return tk__pkeys_protection(r);
    return atomic_load(&r->rg_state[tk__page_index(r, (uintptr_t)addr)]) & PS_PROT_MASK;
}

/* [signal-safe] */
void tk__pages_removed(struct tk_region *r, size_t first, size_t n)
{
    tk_hw_guard g;
    if (!lock_live(r, &g, first, n)) return;
    for (size_t i = first; i < first + n; i++) atomic_fetch_or(&r->rg_state[i], PS_MPROT);
    (void)tk__apply(r, first, n);
    if (r->rg_trap_dirty) tk__dirty_mark(r, first, n);
    tk__hw_unlock(r, &g, first, n);
}

/* Lowers every page of [first, first+n) that the hardware leaves writable to
 * read-only by mprotect (inaccessible ones stay so), one call per run. */
static int hold_read_only(struct tk_region *r, size_t first, size_t n)
{
    size_t run = first;
    for (size_t i = first; i <= first + n; i++) {
        bool writable = i < first + n && hw_of(r, atomic_load(&r->rg_state[i])).prot & PROT_WRITE;
        if (writable) continue;
        if (i > run) {
            int err = tk__mprotect((void *)(r->rg_start + (run << r->rg_shift)),
                                   (i - run) << r->rg_shift, PROT_READ);
            if (err) return err;
        }
        run = i + 1;
    }
    return 0;
}

/* tk_discard: the pages' contents go (zeros, or the file's for a private
 * file mapping) and their protections stay.  On userfaultfd regions the
 * kernel drops a page's write protection with the page, so writes are held
 * off by mprotect while the pages are dropped and their protection is
 * applied again. */
int tk_discard(tk_region *r, void *addr, size_t len)
{
    int cerr = tk__check_region(r, "tk_discard: the region is NULL",
                                "tk_discard: the region was destroyed");
    if (cerr) return cerr;
    const char *gone = atomic_load(&r->rg_gone);
    if (gone) return tk__fail(-EFAULT, gone);
    size_t first = 0, n = 0;
    uintptr_t a = (uintptr_t)addr;
    if (r->rg_mech == TK_MECH_PKEYS) {
        if (a < r->rg_start || a >= r->rg_end || len > r->rg_end - a || len == 0 ||
            (a | len) & (size_t)(sysconf(_SC_PAGESIZE) - 1))
            return tk__fail(-EINVAL, "tk_discard: the range must lie in the region and be "
                                     "aligned to the hardware page");
    } else {
        int err = tk__check_range(r, addr, len, &first, &n);
        if (err)
            return tk__fail(err, r->rg_subpage ? "tk_discard: the range must lie in the region and "
                                                 "be aligned to the hardware page"
                                               : "tk_discard: the range must lie in the region and "
                                                 "be aligned to its logical page size");
        if (r->rg_subpage && (a | len) & (size_t)(sysconf(_SC_PAGESIZE) - 1))
            return tk__fail(-EINVAL, "tk_discard: a sub-page region drops whole hardware pages: "
                                     "align the range to the hardware page");
    }
    bool shared = r->rg_memfd >= 0, pkeys = r->rg_mech == TK_MECH_PKEYS;
    bool by_wp = r->rg_uffd >= 0;
    tk_hw_guard g;
    int err = 0;
    /* Writes wait (fault) until the protection is back.  The lock is not
     * held across madvise: on uffd-thread the kernel makes madvise wait
     * until a service thread has read its removal events (one per mapping
     * the range spans), and the service threads take the lock to handle
     * them (tk__pages_removed). */
    if (by_wp) {
        tk__hw_lock_pages(r, &g, first, n);
        err = hold_read_only(r, first, n);
        tk__hw_unlock(r, &g, 0, 0);
    }
    if (!err && madvise(addr, len, shared ? MADV_REMOVE : MADV_DONTNEED) < 0) err = -errno;
    if (!pkeys) {
        tk__hw_lock_pages(r, &g, first, n);
        if (by_wp || err) {
            int aerr = tk__apply(r, first, n);
            if (!err) err = aerr;
        }
        /* new contents: DIRTY reports them */
        if (r->rg_dirty && !err) tk__dirty_mark(r, first, n);
        tk__hw_unlock(r, &g, first, n);
    }
    if (err) return tk__fail(err, "tk_discard: the kernel refused to drop the pages");
    return 0;
}
