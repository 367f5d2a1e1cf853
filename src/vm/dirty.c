/* src/vm/dirty.c - DIRTY: the pages written since the previous call.
 *
 * Three ways, by mechanism:
 *
 * Trap-based (posix, uffd-sigbus, uffd-thread).  Every page starts an
 * interval write-protected and marked PS_TRACK.  The first write faults;
 * tk__dirty_fault() sets the page's bit, clears PS_TRACK and lifts the
 * protection, so later writes in the interval cost nothing.  tk_dirty()
 * takes the region's lock (vm/hwlock.c: faults and tk_protect calls wait),
 * re-protects the pages, takes the bitmap and releases the lock.
 * Writes to pages that were writable before the re-protection belong to the
 * old interval, and their bit is already set; writes after it fault and wait
 * for the lock, so they land in the new interval.
 *
 * Writes in flight.  Between the handling of a fault and the completion of
 * the faulting instruction (the thread still leaving the signal handler, or
 * preempted) a collection may come: reported then and protected again, the
 * page would fault and be reported a second time after the retry, for one
 * write.  Where the fault is delivered to the faulting thread (posix,
 * uffd-sigbus), tk__dirty_fault() completes the write itself under the lock
 * by emulating the instruction (arch/x86_64/insn.c: the moves, arithmetic,
 * atomics and string instructions compilers emit), so no collection can come
 * between.  An instruction it does not emulate (AVX stores, memory outside
 * the region) is counted in flight in rg_inflight[page] and returns with
 * the trap flag set; the SIGTRAP after the instruction (tk__dirty_step_done)
 * counts it complete.  A collection
 * holds back a page with writes in flight: it stays writable and its bit
 * set, and the next collection reports it, once.  A thread that leaves the
 * instruction by an escape (a signal handler's siglongjmp) never completes
 * it; its count is dropped when the thread next faults, and collections
 * hold a page back for at most TK_DIRTY_MAX_HOLD_MS (a second), so no write
 * is held back for ever.  On uffd-thread the faulting thread is woken by the
 * service thread and retries on its own, and on pagemap-scan the kernel
 * resolves the fault: nothing in user space sees the retry, and a write in
 * flight across a collection is reported by it and again by the next one.
 *
 * So the guarantee, tested by tests/mech_dirty_race.c: every write is
 * reported by the collection under way when it completed or by the next one,
 * never lost, never before it began; on posix and uffd-sigbus a page written
 * once is reported once (unless its thread was descheduled between the fault
 * and the retry for longer than TK_DIRTY_MAX_HOLD_MS); on uffd-thread and
 * pagemap-scan also by the collection its write was in flight across.
 *
 * pagemap-scan.  The region is registered with a UFFD_FEATURE_WP_ASYNC
 * userfaultfd: the kernel resolves a write fault on a write-protected page by
 * itself (no signal, no thread) and PAGEMAP_SCAN with PM_SCAN_WP_MATCHING
 * reports written pages and re-protects them atomically, page by page.
 *
 * soft-dirty.  /proc/self/pagemap bit 55, reset for the whole process by
 * writing "4" to /proc/self/clear_refs.  The kernel offers no atomic read and
 * reset, so a write between the two is lost; and resetting clears every
 * soft-dirty region of the process, so each collection first keeps all their
 * bits (sd_keep_all).  Only used when forced.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "arch/context.h"
#include "arch/x86_64/insn.h"
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

/* ---- writes in flight (see above) ---------------------------------------- */

#define X86_EFLAGS_TF 0x100
#define INFLIGHT_MASK 0xffffu
#define TK_DIRTY_MAX_HOLD_MS 1000
#define STEP_PAGES 4

/* rg_inflight[page]: writes in flight in the low 16 bits; in the high 16,
 * when collections began holding the page back (milliseconds, modulo 2^16,
 * 0 for not held). */
static uint32_t hold_clock(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    uint32_t ms = (uint32_t)((uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000) & 0xffff;
    return ms ? ms : 1;
}

/* The pages of the instruction this thread is single-stepping for DIRTY. */
struct dstep {
    int n;
    bool program_tf;  /* the trap flag was set before trapkit set it */
    uintptr_t pc, sp; /* the stepped instruction's */
    struct {
        struct tk_region *r;
        uint64_t id;
        uintptr_t addr;
        size_t page;
    } p[STEP_PAGES];
};
static __thread struct dstep dstep __attribute__((tls_model("initial-exec")));
static atomic_bool sigtrap_ready; /* trapkit handles SIGTRAP (see tk__dirty_start) */

/* How a write in flight is followed: 0 not at all (the retry may be reported
 * twice), 1 by single-stepping, 2 by emulating it under the lock where
 * insn.c can, else single-stepping.  Only benchmarks change it. */
int tk__dirty_inflight = 2;

/* Counts this thread's stepped writes complete (or abandoned).  A region
 * destroyed meanwhile is no longer listed, and its counts are gone with it.
 * [signal-safe] */
static void step_release(void)
{
    if (!dstep.n) return;
    tk__table_enter();
    for (int i = 0; i < dstep.n; i++) {
        struct tk_region *r = dstep.p[i].r;
        if (tk__table_find(dstep.p[i].addr) == r && r->rg_id == dstep.p[i].id && r->rg_inflight) {
            uint32_t was = atomic_fetch_sub(&r->rg_inflight[dstep.p[i].page], 1);
            TK_ASSERT(was & INFLIGHT_MASK);
            (void)was;
        }
    }
    tk__table_leave();
    dstep.n = 0;
}

/* Counts this thread's write to page in flight and sets the trap flag, so
 * the SIGTRAP after the instruction counts it complete.  Called with the
 * region's lock held.  [signal-safe] */
static void step_add(struct tk_region *r, size_t page, void *uc)
{
    if (!r->rg_inflight || !atomic_load(&sigtrap_ready) || !tk__dirty_inflight) return;
    greg_t *efl = &((ucontext_t *)uc)->uc_mcontext.gregs[REG_EFL];
    for (int i = 0; i < dstep.n; i++)
        if (dstep.p[i].r == r && dstep.p[i].page == page) return; /* counted */
    if (dstep.n == STEP_PAGES) return; /* the instruction's pages are not all counted */
    if (dstep.n == 0) {
        dstep.program_tf = (*efl & X86_EFLAGS_TF) != 0;
        dstep.pc = (uintptr_t)TK_CTX_PC(uc);
        dstep.sp = TK_CTX_SP(uc);
    }
    atomic_fetch_add(&r->rg_inflight[page], 1);
    dstep.p[dstep.n].r = r;
    dstep.p[dstep.n].id = r->rg_id;
    dstep.p[dstep.n].addr = r->rg_start + (page << r->rg_shift);
    dstep.p[dstep.n].page = page;
    dstep.n++;
    *efl |= X86_EFLAGS_TF;
}

/* Emulation (arch/x86_64/insn.c) of the faulting instruction under the
 * region's lock: its memory must lie in pages of r the states allow, so the
 * emulation cannot fault inside the lock. */
static bool emu_allowed(uintptr_t a, size_t len, bool write, void *ctx)
{
    struct tk_region *r = ctx;
    if (len == 0) return true;
    if (a < r->rg_start || a >= r->rg_end || len > r->rg_end - a) return false;
    for (size_t p = tk__page_index(r, a); p <= tk__page_index(r, a + len - 1); p++) {
        uint8_t st = atomic_load(&r->rg_state[p]);
        int user = st & PS_PROT_MASK;
        if (write ? user != TK_PROT_RW || (st & (PS_TRACK | PS_DECLINED)) : user == TK_PROT_NONE)
            return false;
    }
    return true;
}

static void *emu_map(uintptr_t a, size_t len, bool write, void *ctx)
{
    return emu_allowed(a, len, write, ctx) ? (void *)a : NULL;
}

/* Completes the faulting write now, under the region's lock, if the
 * instruction is one insn.c emulates.  [signal-safe] */
static bool complete_now(struct tk_region *r, void *uc)
{
    if (tk__dirty_inflight < 2 || atomic_load(&r->rg_gone)) return false;
    struct tk_insn d;
    if (!tk__insn_decode(uc, &d)) return false;
    struct tk_emu_ops ops = {emu_map, emu_allowed, r};
    return tk__insn_emulate(&d, uc, &ops);
}

/* The faulting thread's write to page, its fault handled: completed now, or
 * counted in flight until its single-step is done (uc NULL: a uffd service
 * thread, which cannot follow the retry).  Called with the region's lock
 * held.  [signal-safe] */
static void follow_write(struct tk_region *r, size_t page, void *uc)
{
    if (uc && !complete_now(r, uc)) step_add(r, page, uc);
}

/* [signal-safe] */
bool tk__dirty_step_done(void *uc)
{
    if (!dstep.n) return false;
    bool program_tf = dstep.program_tf;
    step_release();
    if (program_tf) return false;
    ((ucontext_t *)uc)->uc_mcontext.gregs[REG_EFL] &= ~(greg_t)X86_EFLAGS_TF;
    return true;
}

void tk__dirty_after_fork_child(struct tk_region *r)
{
    dstep.n = 0;
    if (r->rg_inflight)
        for (size_t i = 0; i < r->rg_npages; i++)
            if (atomic_load(&r->rg_inflight[i])) atomic_store(&r->rg_inflight[i], 0);
}

/* [signal-safe] */
bool tk__dirty_fault(struct tk_region *r, size_t page, void *uc)
{
    /* A step this thread has not finished: this instruction faulting again
     * on a further page (counted with it); another instruction in a signal
     * handler that interrupted it (its stack pointer lies below, or on
     * another stack: the step stays pending and this write is not counted);
     * or one left by an escape (released). */
    if (dstep.n && uc) {
        uintptr_t sp = TK_CTX_SP(uc);
        bool same = (uintptr_t)TK_CTX_PC(uc) == dstep.pc && sp == dstep.sp &&
                    (((ucontext_t *)uc)->uc_mcontext.gregs[REG_EFL] & X86_EFLAGS_TF);
        bool nested = !same && (sp < dstep.sp || sp - dstep.sp > ((uintptr_t)1 << 26));
        if (nested)
            uc = NULL;
        else if (!same)
            step_release();
    }

    tk_hw_guard g;
    tk__hw_lock_pages(r, &g, page, 1);
    uint8_t old = atomic_load(&r->rg_state[page]), nst;
    do {
        if ((old & PS_PROT_MASK) != TK_PROT_RW) {
            tk__hw_unlock(r, &g, page, 0); /* the user protected it meanwhile: theirs */
            return false;
        }
        if (!(old & PS_TRACK)) {
            /* another thread took this fault first: this write is in flight too */
            follow_write(r, page, uc);
            tk__hw_unlock(r, &g, page, 0);
            return true;
        }
        nst = old & (uint8_t)~PS_TRACK;
    } while (!atomic_compare_exchange_weak(&r->rg_state[page], &old, nst));

    atomic_fetch_or(&r->rg_dirty[page / 64], (uint64_t)1 << (page % 64));
    bool ok = tk__change(r, page, 1, old, nst) == 0 || degrade(r);
    if (ok) follow_write(r, page, uc);
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

/* soft-dirty: resetting the bits resets those of the whole process, so a
 * collection first keeps every soft-dirty region's bits in its rg_dirty.
 * The regions, under sd_lock (not taken in signal handlers). */
static pthread_mutex_t sd_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tk_region **sd_regions;
static size_t sd_n, sd_cap;
static int sd_keep_all(void);

static int sd_add(struct tk_region *r)
{
    pthread_mutex_lock(&sd_lock);
    if (sd_n == sd_cap) {
        size_t cap = sd_cap ? 2 * sd_cap : 8;
        struct tk_region **a = realloc(sd_regions, cap * sizeof *a);
        if (!a) {
            pthread_mutex_unlock(&sd_lock);
            return tk__fail(-ENOMEM, "tk_region_create: out of memory for DIRTY");
        }
        sd_regions = a;
        sd_cap = cap;
    }
    sd_regions[sd_n++] = r;
    pthread_mutex_unlock(&sd_lock);
    return 0;
}

static void sd_remove(struct tk_region *r)
{
    pthread_mutex_lock(&sd_lock);
    for (size_t i = 0; i < sd_n; i++)
        if (sd_regions[i] == r) sd_regions[i] = sd_regions[--sd_n];
    pthread_mutex_unlock(&sd_lock);
}

/* fork() takes sd_lock across (vm/fork.c): the child's list is whole */
void tk__dirty_before_fork(void)
{
    pthread_mutex_lock(&sd_lock);
}

void tk__dirty_after_fork(void)
{
    pthread_mutex_unlock(&sd_lock);
}

/* The bitmap, then the in-flight counts, in one mapping. */
static size_t dirty_bytes(const struct tk_region *r)
{
    return bitmap_words(r) * 8 + r->rg_npages * sizeof(uint32_t);
}

int tk__dirty_alloc(struct tk_region *r)
{
    void *b = mmap(NULL, dirty_bytes(r), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (b == MAP_FAILED) return tk__fail(-ENOMEM, "tk_region_create: out of memory for DIRTY");
    r->rg_dirty = b;
    r->rg_inflight = (_Atomic uint32_t *)((char *)b + bitmap_words(r) * 8);
    return 0;
}

void tk__dirty_free(struct tk_region *r)
{
    if (r->rg_mech == TK_MECH_SOFT_DIRTY && r->rg_dirty) sd_remove(r);
    if (r->rg_dirty) munmap((void *)r->rg_dirty, dirty_bytes(r));
    r->rg_dirty = NULL;
    r->rg_inflight = NULL;
}

int tk__dirty_start(struct tk_region *r)
{
    /* every DIRTY region, since a fork child may serve a pagemap-scan region
     * by traps (vm/fork.c) */
    if (!atomic_load(&sigtrap_ready)) {
        int err = tk__trap_claim(SIGTRAP);
        if (err) return err;
        atomic_store(&sigtrap_ready, true);
    }
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
        /* pages tk_discard dropped are reported from the bitmap: the
         * kernel forgets their soft-dirty bits with the pages */
        int err = tk__dirty_alloc(r);
        if (err) return err;
        if ((err = sd_add(r))) {
            tk__dirty_free(r);
            return err;
        }
        /* the region starts clean; the others keep theirs (above) */
        pthread_mutex_lock(&sd_lock);
        err = sd_keep_all();
        if (!err) err = tk__clear_soft_dirty();
        pthread_mutex_unlock(&sd_lock);
        for (size_t w = 0; w < bitmap_words(r); w++) atomic_store(&r->rg_dirty[w], 0);
        return err ? tk__failf(err, "tk_region_create: soft-dirty bits: %s", strerror(-err)) : 0;
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
 * the region wait, and concurrent collections take disjoint pages.  A page
 * with writes in flight is held back (see above): it stays writable and
 * dirty for the next collection. */
static int collect_traps(struct tk_region *r, uint64_t *bm)
{
    tk_hw_guard g;
    tk__hw_lock(r, &g);

    bool degraded = atomic_exchange(&r->rg_degraded, 0);
    size_t nw = bitmap_words(r);
    uint32_t now = 0;
    for (size_t w = 0; w < nw; w++) {
        bm[w] = atomic_load(&r->rg_dirty[w]);
        for (uint64_t bits = bm[w]; bits; bits &= bits - 1) {
            size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
            uint32_t f = atomic_load(&r->rg_inflight[i]), since = f >> 16;
            if (!(f & INFLIGHT_MASK)) {
                if (since) atomic_fetch_and(&r->rg_inflight[i], INFLIGHT_MASK);
                continue;
            }
            if (!now) now = hold_clock();
            if (!since) {
                atomic_fetch_add(&r->rg_inflight[i], now << 16);
            } else if (((now - since) & 0xffff) >= TK_DIRTY_MAX_HOLD_MS) {
                atomic_fetch_and(&r->rg_inflight[i], INFLIGHT_MASK); /* reported now */
                continue;
            }
            bm[w] &= ~((uint64_t)1 << (i % 64));
        }
    }
    for (size_t i = 0; i < r->rg_npages; i++) {
        bool held = (atomic_load(&r->rg_dirty[i / 64]) & ~bm[i / 64]) >> (i % 64) & 1;
        if (!held) atomic_fetch_or(&r->rg_state[i], PS_TRACK);
    }
    int err = tk__apply(r, 0, r->rg_npages);
    for (size_t w = 0; w < nw; w++) atomic_fetch_and(&r->rg_dirty[w], ~bm[w]);
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

/* Adds r's soft-dirty bits to its rg_dirty. */
static int sd_keep(struct tk_region *r)
{
    size_t hw = (size_t)sysconf(_SC_PAGESIZE), chunk = 4096;
    uint64_t ent[4096];
    for (uintptr_t a = r->rg_start; a < r->rg_end; a += chunk * hw) {
        size_t n = (r->rg_end - a) / hw < chunk ? (r->rg_end - a) / hw : chunk;
        int err = tk__pagemap_read(a, n, ent);
        if (err) return err;
        for (size_t i = 0; i < n; i++)
            if (ent[i] & ((uint64_t)1 << 55)) {
                size_t page = tk__page_index(r, a + i * hw);
                atomic_fetch_or(&r->rg_dirty[page / 64], (uint64_t)1 << (page % 64));
            }
    }
    return 0;
}

/* Every soft-dirty region's bits into its rg_dirty, before a reset.  Under
 * sd_lock. */
static int sd_keep_all(void)
{
    for (size_t i = 0; i < sd_n; i++) {
        int err = sd_keep(sd_regions[i]);
        if (err) return err;
    }
    return 0;
}

static int collect_soft_dirty(struct tk_region *r, uint64_t *bm)
{
    pthread_mutex_lock(&sd_lock);
    int err = sd_keep_all();
    if (!err) err = tk__clear_soft_dirty();
    pthread_mutex_unlock(&sd_lock);
    if (err)
        return tk__failf(err, "tk_dirty: soft-dirty bits (/proc/self/pagemap, clear_refs): %s",
                         strerror(-err));
    for (size_t w = 0; w < bitmap_words(r); w++) bm[w] |= atomic_exchange(&r->rg_dirty[w], 0);
    return 0;
}

/* [signal-safe] */
int tk_dirty_mark(tk_region *r, void *addr, size_t len)
{
    int cerr = tk__check_region(r, "tk_dirty_mark: the region is NULL",
                                "tk_dirty_mark: the region was destroyed");
    if (cerr) return cerr;
    if (!(r->rg_flags & TK_REGION_DIRTY))
        return tk__fail(-EINVAL, "tk_dirty_mark: the region was not created with TK_REGION_DIRTY");
    size_t first, n;
    if (tk__check_range(r, addr, len, &first, &n))
        return tk__fail(-EINVAL, "tk_dirty_mark: the range must lie in the region and be aligned "
                                 "to its logical page size");
    const char *gone = atomic_load(&r->rg_gone);
    if (gone) return tk__fail(-EFAULT, gone);
    if (r->rg_trap_dirty) {
        /* as a fault would: the bit set, the page no longer tracked and
         * open (unless the program's own protection closes it) */
        tk_hw_guard g;
        tk__hw_lock_pages(r, &g, first, n);
        for (size_t i = first; i < first + n; i++)
            if ((atomic_load(&r->rg_state[i]) & PS_PROT_MASK) == TK_PROT_RW)
                atomic_fetch_and(&r->rg_state[i], (uint8_t)~PS_TRACK);
        tk__dirty_mark(r, first, n);
        int err = tk__apply(r, first, n);
        tk__hw_unlock(r, &g, first, n);
        return err ? tk__fail(err, "tk_dirty_mark: the kernel refused to open the pages") : 0;
    }
    if (r->rg_mech == TK_MECH_PAGEMAP_SCAN) {
        /* the write protection lifted first: a collection between the two
         * finds the pages written, and the bits set after it report them
         * again (never too few: the next collection reports an unpopulated
         * page the kernel would not) */
        int err = tk__uffd_wp(r->rg_uffd, addr, len, false, false);
        if (err) return tk__fail(err, "tk_dirty_mark: the kernel refused to lift write protection");
    }
    /* soft-dirty: the kernel's bits cannot be set from user space, nor its
     * write faults avoided; the pages are reported from trapkit's bitmap */
    tk__dirty_mark(r, first, n);
    return 0;
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
