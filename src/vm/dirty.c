/* src/vm/dirty.c - DIRTY: the pages written since the previous call.
 *
 * Three ways, by mechanism:
 *
 * Trap-based (posix, uffd-sigbus, uffd-thread).  Every page starts an
 * interval write-protected and marked PS_TRACK.  The first write faults;
 * tk__dirty_fault() sets the page's bit, clears PS_TRACK and lifts the
 * protection, so later writes in the interval cost nothing.  tk_dirty()
 * takes the region's lock (vm/hwlock.c: faults and tk_protect calls wait),
 * re-protects every page, takes the bitmap and releases the lock.
 * Writes to pages that were writable before the re-protection belong to the
 * old interval, and their bit is already set; writes after it fault and wait
 * for the lock, so they land in the new interval.  Each write is reported in
 * exactly one interval in which it completed, save one race: a write whose
 * fault was handled (the page opened) but whose instruction had not yet been
 * retried when a collection came (its thread was preempted, or still leaving
 * the signal handler) is reported by that collection and, since the page is
 * protected again, by the one after its retry as well.  pagemap-scan has the
 * same window between the kernel's resolving of the fault and the retry.  So
 * the guarantee, tested by tests/mech_dirty_race.c: every write is reported
 * by the collection that follows its completion, never lost; a page written
 * once is reported once, or again by each collection its write was in flight
 * across (its thread preempted between the fault and the retry).
 *
 * pagemap-scan.  The region is registered with a UFFD_FEATURE_WP_ASYNC
 * userfaultfd: the kernel resolves a write fault on a write-protected page by
 * itself (no signal, no thread) and PAGEMAP_SCAN with PM_SCAN_WP_MATCHING
 * reports written pages and re-protects them atomically, page by page.
 *
 * soft-dirty.  /proc/self/pagemap bit 55, reset for the whole process by
 * writing "4" to /proc/self/clear_refs.  The kernel offers no atomic read and
 * reset, so a write between the two is lost; and resetting clears every
 * soft-dirty user of the process.  Only used when forced.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "arch/context.h"
#include "core/region_impl.h"
#include "os/linux/os.h"

/* The kernel refused to lift the protection of one page: with posix, the
 * mapping cannot be split further (vm.max_map_count).  Tracking page by page
 * is given up for the rest of this interval: every page is reported dirty
 * and made writable, which merges the mapping back, and the next tk_dirty()
 * re-arms page by page.  Reporting too much loses nothing; looping on the
 * fault would hang the program.  Returns whether the faulting page is now
 * writable.  Called with the region's lock held.  [signal-safe] */
static bool degrade(struct tk_region *r)
{
    for (size_t i = 0; i < r->rg_npages; i++) {
        uint8_t old = atomic_load(&r->rg_state[i]);
        if ((old & PS_PROT_MASK) != TK_PROT_RW) continue;
        atomic_fetch_or(&r->rg_dirty[i / 64], (uint64_t)1 << (i % 64));
        atomic_fetch_and(&r->rg_state[i], (uint8_t)~PS_TRACK);
    }
    atomic_store(&r->rg_degraded, 1);
    return tk__apply(r, 0, r->rg_npages) == 0;
}

/* [signal-safe] */
bool tk__dirty_fault(struct tk_region *r, size_t page)
{
    tk_hw_guard g;
    tk__hw_lock(r, &g);
    uint8_t old = atomic_load(&r->rg_state[page]), nst;
    do {
        if ((old & PS_PROT_MASK) != TK_PROT_RW) {
            tk__hw_unlock(r, &g, page, 0); /* the user protected it meanwhile: theirs */
            return false;
        }
        if (!(old & PS_TRACK)) {
            tk__hw_unlock(r, &g, page, 0); /* another thread took this fault first */
            return true;
        }
        nst = old & (uint8_t)~PS_TRACK;
    } while (!atomic_compare_exchange_weak(&r->rg_state[page], &old, nst));

    atomic_fetch_or(&r->rg_dirty[page / 64], (uint64_t)1 << (page % 64));
    bool ok = tk__change(r, page, 1, old, nst) == 0 || degrade(r);
    tk__hw_unlock(r, &g, page, 1);
    return ok;
}

static size_t bitmap_words(const struct tk_region *r)
{
    return (r->rg_npages + 63) / 64;
}

/* Re-protects every page for a new interval (trap-based). */
static int arm_all(struct tk_region *r)
{
    for (size_t i = 0; i < r->rg_npages; i++) atomic_fetch_or(&r->rg_state[i], PS_TRACK);
    return tk__apply(r, 0, r->rg_npages);
}

/* [signal-safe] */
void tk__dirty_mark(struct tk_region *r, size_t first, size_t n)
{
    for (size_t i = first; i < first + n; i++)
        atomic_fetch_or(&r->rg_dirty[i / 64], (uint64_t)1 << (i % 64));
}

int tk__dirty_alloc(struct tk_region *r)
{
    void *b = mmap(NULL, bitmap_words(r) * 8, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b == MAP_FAILED) return tk__fail(-ENOMEM, "tk_region_create: out of memory for DIRTY");
    r->rg_dirty = b;
    return 0;
}

void tk__dirty_free(struct tk_region *r)
{
    if (r->rg_dirty) munmap((void *)r->rg_dirty, bitmap_words(r) * 8);
    r->rg_dirty = NULL;
}

int tk__dirty_start(struct tk_region *r)
{
    if (r->rg_trap_dirty) {
        int err = tk__dirty_alloc(r);
        return err ? err : arm_all(r);
    }
    switch (r->rg_mech) {
    case TK_MECH_PAGEMAP_SCAN: {
        /* pages tk_discard dropped are reported from the bitmap */
        int err = tk__dirty_alloc(r);
        if (err) return err;
        err = tk__uffd_wp(r->rg_uffd, (void *)r->rg_start, r->rg_len, true, false);
        return err ? tk__failf(err, "tk_region_create: write-protecting for DIRTY failed: %s",
                               strerror(-err))
                   : 0;
    }
    case TK_MECH_SOFT_DIRTY: {
        int err = tk__clear_soft_dirty();
        return err ? tk__failf(err, "tk_region_create: /proc/self/clear_refs failed: %s",
                               strerror(-err))
                   : 0;
    }
    default:
        return tk__fail(-EINVAL, "tk_region_create: this mechanism cannot track DIRTY");
    }
}

static void set_bits(const struct tk_region *r, uint64_t *bm, uintptr_t start, uintptr_t end)
{
    if (start < r->rg_start) start = r->rg_start;
    if (end > r->rg_end) end = r->rg_end;
    if (start >= end) return;
    size_t a = tk__page_index(r, start), b = tk__page_index(r, end - 1);
    for (size_t i = a; i <= b; i++) bm[i / 64] |= (uint64_t)1 << (i % 64);
}

/* Under the region's lock (which also defers this thread's signals, so none
 * of its handlers runs inside the re-arming): faults and tk_protect calls on
 * the region wait, and concurrent collections take disjoint pages. */
static int collect_traps(struct tk_region *r, uint64_t *bm)
{
    tk_hw_guard g;
    tk__hw_lock(r, &g);

    bool degraded = atomic_exchange(&r->rg_degraded, 0);
    int err = arm_all(r);
    for (size_t w = 0; w < bitmap_words(r); w++) bm[w] = atomic_exchange(&r->rg_dirty[w], 0);
    if (degraded && !err)
        tk__fail(0, "tk_dirty: this interval reports every writable page: the kernel could not "
                    "split the mapping further (vm.max_map_count), so tracking page by page was "
                    "given up until this call; a page-table mechanism (pagemap-scan, uffd-*) "
                    "avoids it");

    tk__hw_unlock(r, &g, 0, 0);
    return err;
}

static int collect_pagemap(struct tk_region *r, uint64_t *bm)
{
    int pm = tk__pagemap_fd();
    if (pm < 0) return tk__failf(pm, "tk_dirty: cannot open /proc/self/pagemap: %s", strerror(-pm));
    struct page_region vec[256];
    uintptr_t at = r->rg_start;
    while (at < r->rg_end) {
        uintptr_t walk_end = r->rg_end;
        long n = tk__pagemap_scan(pm, at, r->rg_end, PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
                                  PAGE_IS_WRITTEN, PAGE_IS_WRITTEN, vec, 256, &walk_end);
        if (n < 0) return tk__failf((int)n, "tk_dirty: PAGEMAP_SCAN failed: %s", strerror((int)-n));
        for (long i = 0; i < n; i++) set_bits(r, bm, vec[i].start, vec[i].end);
        if (walk_end <= at) break;
        at = walk_end;
    }
    /* pages dropped by tk_discard, or every page in a fork child's first
     * interval (vm/fork.c) */
    for (size_t w = 0; w < bitmap_words(r); w++) bm[w] |= atomic_exchange(&r->rg_dirty[w], 0);
    return 0;
}

static int collect_soft_dirty(struct tk_region *r, uint64_t *bm)
{
    size_t hw = (size_t)sysconf(_SC_PAGESIZE), chunk = 4096;
    uint64_t ent[4096];
    for (uintptr_t a = r->rg_start; a < r->rg_end; a += chunk * hw) {
        size_t n = (r->rg_end - a) / hw < chunk ? (r->rg_end - a) / hw : chunk;
        int err = tk__pagemap_read(a, n, ent);
        if (err)
            return tk__failf(err, "tk_dirty: reading /proc/self/pagemap failed: %s",
                             strerror(-err));
        for (size_t i = 0; i < n; i++)
            if (ent[i] & ((uint64_t)1 << 55)) set_bits(r, bm, a + i * hw, a + (i + 1) * hw);
    }
    int err = tk__clear_soft_dirty();
    return err ? tk__failf(err, "tk_dirty: /proc/self/clear_refs failed: %s", strerror(-err)) : 0;
}

long tk_dirty(tk_region *r, uint64_t *bitmap, size_t nbits)
{
    int cerr =
        tk__check_region(r, "tk_dirty: the region is NULL", "tk_dirty: the region was destroyed");
    if (cerr) return cerr;
    if (!(r->rg_flags & TK_REGION_DIRTY))
        return tk__fail(-EINVAL, "tk_dirty: the region was not created with TK_REGION_DIRTY");
    if (!bitmap)
        return tk__failf(-EINVAL, "tk_dirty: the bitmap is NULL (it needs %zu bits, one per page)",
                         r->rg_npages);
    if (nbits < r->rg_npages)
        return tk__failf(-EINVAL, "tk_dirty: the bitmap has %zu bits; the region has %zu pages",
                         nbits, r->rg_npages);
    memset(bitmap, 0, bitmap_words(r) * 8);
    int err;
    if (r->rg_trap_dirty)
        err = collect_traps(r, bitmap);
    else if (r->rg_mech == TK_MECH_PAGEMAP_SCAN)
        err = collect_pagemap(r, bitmap);
    else
        err = collect_soft_dirty(r, bitmap);
    if (err) return err;
    long count = 0;
    for (size_t w = 0; w < bitmap_words(r); w++) count += __builtin_popcountll(bitmap[w]);
    return count;
}
