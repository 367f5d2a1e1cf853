/* src/apps/zpage/zpage.c - compressed paging (trapkit/zpage.h).
 *
 * Per page, a state word (z_state[i], also the futex the page's waiters
 * sleep on), the compressed data or marker (z_slot[i]) and its length
 * (z_len[i]):
 *
 *   kind (bits 0-2)  UNTOUCHED  never touched: missing, reads as zeros
 *                    RESIDENT   in memory, read-write
 *                    SAMPLED    in memory, made inaccessible by the clock
 *                               hand's mprotect (areas without write
 *                               protection); a touch faults (on_sample) and
 *                               makes it RESIDENT again.  (Where the hand
 *                               holds pages, the kind of a page it is
 *                               copying, BUSY.)
 *                    COMPRESSED dropped; z_slot holds its data
 *                    MARKER     dropped; z_slot holds the 8-byte word it
 *                               is filled with
 *                    HELD       dropped by the clock hand, its data in the
 *                               run's buffer (z->held): a touch puts it back
 *                               from there (bring()); counted as resident
 *   BUSY (bit 3)     a thread is changing the page (bringing it back, or
 *                    the pager evicting it): everyone else waits
 *   WAITERS (bit 4)  someone sleeps on the word: wake it when BUSY clears
 *
 *   CLEAN (bit 5)    with RESIDENT, SAMPLED or HELD: the page came back
 *                    from z_slot by a read, and z_slot still holds what
 *                    it came back with (Wilson's compression cache keeps
 *                    clean pages' copies the same way).  The page is
 *                    writable; the pager compares it with the copy when it
 *                    evicts it (store()) and keeps the copy if it was not
 *                    written, with no compression
 *
 * Whoever sets BUSY (by compare-and-swap) owns the page until it clears
 * it; only the owner changes the kind, the slot or the page's memory.
 *
 * Eviction (the pager thread, never in a signal handler): where the area
 * has write protection, the hand holds runs of pages (hold_run: copied and
 * dropped, HELD) and a HELD page still untouched when the pager needs room
 * is compressed from its copy (evict_held), with no system call.  Without
 * it, a SAMPLED page (inaccessible, untouched since the hand passed) is
 * made BUSY, read through /proc/self/mem (which reads an inaccessible page
 * without opening it), compressed, stored, dropped (MADV_DONTNEED) and made
 * read-write again, so that its next touch is a single missing-page fault
 * (evict_run).  Bringing
 * back (on_missing, in the faulting thread's SIGBUS handler or on the
 * handler thread): the page is made BUSY, decompressed into a buffer on the
 * stack and placed by UFFDIO_COPY (a page kept uncompressed is placed from
 * its slot, with no copy of ours).  The old compressed data cannot be
 * freed there (no free() in a signal handler): it goes on a lock-free list
 * the pager frees.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <lz4.h>
#include <zstd.h>

#include "core/internal.h"
#include "core/region_impl.h"
#include "os/linux/os.h"
#include "trapkit/zpage.h"

#define PAGE 4096u

enum { Z_UNTOUCHED = 0, Z_RESIDENT, Z_SAMPLED, Z_COMPRESSED, Z_MARKER, Z_HELD };
#define Z_KIND 0x7
#define Z_BUSY 0x8
#define Z_WAITERS 0x10
#define Z_CLEAN 0x20      /* z_slot holds a copy of what the page came back with */
#define Z_RAW 0x80000000u /* z_len: stored uncompressed */

enum {
    DCTX_POOL = 16,
    RING_MAX = 4096,
    MIN_BUDGET_PAGES = 64,
    RUN = 32,
    HOLD_BATCH = 8,
    HOLD_SPAN = 32,
    HEAT = 16
};

struct tk_zpage {
    unsigned char *base;
    size_t len, npages;
    enum tk_zpage_codec codec;
    int level;
    enum tk_zpage_delivery delivery;
    tk_region *region;
    int uffd;
    atomic_int *state;
    _Atomic(void *) *slot; /* chunk, or the marker's word */
    uint32_t *zlen;
    unsigned char *heat; /* per page: passes of the hand that leave it alone (HEAT after a
                          * touch the hand caught) */

    /* the budget, in pages (0: none) and its marks */
    _Atomic size_t budget, high, hard, low;
    atomic_size_t resident;
    atomic_int evict_seq; /* bumped per eviction: the futex budget waiters sleep on */

    /* the pager; nothing it waits for may be held by a thread that waits
     * for it (a fault over the budget), so it takes no lock a program's
     * thread can hold when a signal interrupts it: only atomics and futexes */
    pthread_t pager;
    bool pager_started;
    atomic_int kick; /* the futex the pager sleeps on */
    atomic_bool stop;
    atomic_bool refused;        /* the kernel refuses to drop pages (mlock): no waits for room */
    bool said_refused;          /* ... and the pager said so on stderr */
    struct timespec refused_at; /* ... and last then: it waits a second before trying again */
    atomic_int pause_req;       /* fork(): the pager stops at a page boundary ... */
    atomic_int paused;          /* ... and says so here */
    pthread_mutex_t trim_lock;  /* one trim at a time */
    atomic_size_t trim_target;  /* pages; SIZE_MAX: none */
    atomic_int trim_gen, trim_done;
    size_t hand;
    size_t *ring; /* sampled runs of RUN pages, oldest first (a circular buffer) */
    size_t ring_cap, ring_head, ring_n;
    bool keep;                /* pages brought back by a read keep their copy (CLEAN) */
    unsigned char **held;     /* per run: its held pages' data, page k at k * PAGE (the pager's) */
    void *spare;              /* the pager's free run buffers (a list through their first word) */
    unsigned char *pager_buf; /* the pager's: a run's pages and one for store() */
    int memfd;                /* /proc/self/mem */
    int pidfd;                /* this process, for process_madvise; -1 where it is refused */
    bool wp;                  /* registered for write-protect faults too: the hand holds pages */
    ZSTD_CCtx *cctx;
    unsigned char *cbuf; /* the pager's compression buffer */

    /* the handler thread (TK_ZPAGE_THREAD) */
    pthread_t handler;
    bool handler_started;
    int stop_fd;

    /* zstd decompression contexts, for any thread (a signal handler too) */
    ZSTD_DCtx *dctx[DCTX_POOL];
    atomic_int dctx_free; /* bit i: dctx[i] is free */

    _Atomic(void *) garbage; /* chunks to free, a lock-free stack */

    atomic_uint_fast64_t n_compressed, n_markers, n_clean, stored, fault_ins, first_touches,
        evictions, sample_faults, waits;

    bool detached; /* a child of fork(): plain memory */
    struct tk_zpage *next;
};

static pthread_mutex_t areas_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tk_zpage *areas;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static const unsigned char zero_page[PAGE] __attribute__((aligned(PAGE)));

/* ---- page state ---------------------------------------------------------- */

/* Waits until the page's BUSY bit clears (or its word changes). [signal-safe] */
static void wait_page(struct tk_zpage *z, size_t i, int s)
{
    if (!(s & Z_WAITERS)) {
        if (!atomic_compare_exchange_strong(&z->state[i], &s, s | Z_WAITERS)) return;
        s |= Z_WAITERS;
    }
    tk__futex_wait(&z->state[i], s);
}

/* Ends the owner's hold on page i, giving it `kind`. [signal-safe] */
static void release_page(struct tk_zpage *z, size_t i, int kind)
{
    int old = atomic_exchange(&z->state[i], kind);
    if (old & Z_WAITERS) tk__futex_wake(&z->state[i], INT_MAX);
}

/* Makes the calling thread page i's owner (BUSY) if its state is still s.
 * Under TK_ZPAGE_SIGBUS, in a fault handler, the thread's asynchronous
 * signals wait until release_owned: a signal handler of this thread that
 * touched the page would wait for it for ever, and one that left by
 * siglongjmp would leave it owned (the handler thread keeps them blocked).
 * Returns whether the caller owns the page. [signal-safe] */
static bool own_page(struct tk_zpage *z, size_t i, int s, uint64_t *mask)
{
    bool defer = z->delivery == TK_ZPAGE_SIGBUS;
    if (defer) tk__defer_signals(mask);
    if (atomic_compare_exchange_strong(&z->state[i], &s, s | Z_BUSY)) return true;
    if (defer) tk__restore_signals(mask);
    return false;
}

/* Ends own_page's hold, giving the page `kind`. [signal-safe] */
static void release_owned(struct tk_zpage *z, size_t i, int kind, const uint64_t *mask)
{
    release_page(z, i, kind);
    if (z->delivery == TK_ZPAGE_SIGBUS) tk__restore_signals(mask);
}

/* release_owned() where the page is in place and the fault handler returns
 * to the faulting code next: under TK_ZPAGE_SIGBUS the signals stay
 * deferred until then, as the handler's return (trapkit's own, or
 * rt_sigreturn) gives the thread the interrupted code's mask anyway - one
 * system call less per fault.  [signal-safe] */
static void release_resolved(struct tk_zpage *z, size_t i, int kind)
{
    release_page(z, i, kind);
}

/* Pushes a chunk for the pager to free. [signal-safe] */
static void discard_chunk(struct tk_zpage *z, void *chunk)
{
    void *head = atomic_load(&z->garbage);
    do {
        memcpy(chunk, &head, sizeof head);
    } while (!atomic_compare_exchange_weak(&z->garbage, &head, chunk));
}

static void free_garbage(struct tk_zpage *z)
{
    void *c = atomic_exchange(&z->garbage, NULL);
    while (c) {
        void *next;
        memcpy(&next, c, sizeof next);
        atomic_fetch_sub(&z->stored, malloc_usable_size(c));
        free(c);
        c = next;
    }
}

/* ---- codecs -------------------------------------------------------------- */

/* Decompresses page i's data into dst.  0, or -EIO if the data does not
 * decompress to exactly one page (it always should).  [signal-safe] */
static int decompress(struct tk_zpage *z, size_t i, int kind, unsigned char *dst)
{
    void *src = atomic_load(&z->slot[i]);
    uint32_t n = z->zlen[i];
    if (kind == Z_MARKER) {
        uint64_t w = (uint64_t)(uintptr_t)src;
        for (size_t k = 0; k < PAGE; k += 8) memcpy(dst + k, &w, 8);
        return 0;
    }
    if (n & Z_RAW) {
        memcpy(dst, src, PAGE);
        return 0;
    }
    if (z->codec == TK_ZPAGE_LZ4)
        return LZ4_decompress_safe(src, (char *)dst, (int)n, PAGE) == PAGE ? 0 : -EIO;
    /* zstd: a context from the pool (created beforehand: decompressing into
     * a given buffer allocates nothing) */
    int k;
    for (;;) {
        int m = atomic_load(&z->dctx_free);
        if (!m) {
            tk__futex_wait(&z->dctx_free, 0);
            continue;
        }
        k = __builtin_ctz((unsigned)m);
        if (atomic_compare_exchange_weak(&z->dctx_free, &m, m & ~(1 << k))) break;
    }
    size_t r = ZSTD_decompressDCtx(z->dctx[k], dst, PAGE, src, n);
    if (!atomic_fetch_or(&z->dctx_free, 1 << k)) tk__futex_wake(&z->dctx_free, 1);
    return !ZSTD_isError(r) && r == PAGE ? 0 : -EIO;
}

/* The pager's: page contents in src -> kind and slot.  Returns the kind. */
static int compress(struct tk_zpage *z, const unsigned char *src, void **slot, uint32_t *len)
{
    uint64_t w;
    memcpy(&w, src, 8);
    size_t k = 8;
    for (; k < PAGE; k += 8) {
        uint64_t v;
        memcpy(&v, src + k, 8);
        if (v != w) break;
    }
    if (k == PAGE) {
        *slot = (void *)(uintptr_t)w;
        *len = 0;
        return Z_MARKER;
    }
    size_t n = PAGE;
    if (z->codec == TK_ZPAGE_LZ4) {
        int r = LZ4_compress_default((const char *)src, (char *)z->cbuf, PAGE,
                                     (int)LZ4_compressBound(PAGE));
        if (r > 0) n = (size_t)r;
    } else if (z->codec == TK_ZPAGE_ZSTD) {
        size_t r =
            ZSTD_compressCCtx(z->cctx, z->cbuf, ZSTD_compressBound(PAGE), src, PAGE, z->level);
        if (!ZSTD_isError(r)) n = r;
    }
    /* incompressible (or TK_ZPAGE_NONE): kept as it is */
    bool raw = n >= PAGE - 64;
    if (raw) n = PAGE;
    void *c = malloc(n < sizeof(void *) ? sizeof(void *) : n);
    if (!c) return -ENOMEM;
    memcpy(c, raw ? src : z->cbuf, n);
    atomic_fetch_add(&z->stored, malloc_usable_size(c));
    *slot = c;
    *len = (uint32_t)n | (raw ? Z_RAW : 0);
    return Z_COMPRESSED;
}

/* ---- bringing pages back ---------------------------------------------------- */

static void kick_pager(struct tk_zpage *z)
{
    if (atomic_exchange(&z->kick, 1) == 0) tk__futex_wake(&z->kick, 1);
}

/* Places one page at addr: a copy of src, or the zero page (src NULL).
 * EEXIST (the page is there: a racing placement the program made by
 * touching it some other way) counts as done, and sets *there if given.
 * [signal-safe] */
static int place(struct tk_zpage *z, unsigned char *addr, const void *src, bool *there)
{
    int saved = errno;
    int r = 0;
    /* nobody sleeps on the page under TK_ZPAGE_SIGBUS; the handler thread
     * wakes the faulting thread itself */
    uint64_t mode = UFFDIO_COPY_MODE_DONTWAKE;
    for (;;) {
        int e;
        if (src) {
            struct uffdio_copy c = {
                .dst = (uintptr_t)addr, .src = (uintptr_t)src, .len = PAGE, .mode = mode};
            e = ioctl(z->uffd, UFFDIO_COPY, &c);
        } else {
            struct uffdio_zeropage c = {.range = {.start = (uintptr_t)addr, .len = PAGE},
                                        .mode = UFFDIO_ZEROPAGE_MODE_DONTWAKE};
            e = ioctl(z->uffd, UFFDIO_ZEROPAGE, &c);
        }
        if (e == 0) break;
        if (errno == EEXIST) {
            if (there) *there = true;
            break;
        }
        if (errno == EAGAIN || errno == EINTR) continue;
        r = -errno;
        break;
    }
    errno = saved;
    return r;
}

/* The hand caught a touch of page i (sampled or held): it leaves the page
 * alone for the next HEAT passes.  [signal-safe] */
static void caught(struct tk_zpage *z, size_t i)
{
    __atomic_store_n(&z->heat[i], (unsigned char)HEAT, __ATOMIC_RELAXED);
}

/* Makes page i present for an access (write: a write).  Returns 0 when the
 * page is in place (or was placed by another thread meanwhile), or a
 * negative errno.  In the faulting thread's signal handler or on the
 * handler thread.  [signal-safe] */
static int bring(struct tk_zpage *z, size_t i, bool write)
{
    unsigned char *addr = z->base + i * PAGE;
    for (;;) {
        int s = atomic_load(&z->state[i]);
        if (s & Z_BUSY) {
            wait_page(z, i, s);
            continue;
        }
        int kind = s & Z_KIND;
        if (kind == Z_RESIDENT || kind == Z_SAMPLED) {
            /* In memory as far as the area knows: the program dropped it
             * itself (MADV_DONTNEED), so it reads as zeros (a copy kept of
             * it no longer matches: the pager sees that at eviction); or
             * another thread brought it back since this fault, and it is
             * there (EEXIST); or a write to one the hand write-protected
             * with the pages around it while it held them (hold_run).
             * Owned, so that the pager cannot evict it between the check
             * and the placing: a zero page placed over a page it had just
             * dropped would stand for the data it keeps. */
            uint64_t mask;
            if (!own_page(z, i, s, &mask)) continue;
            bool there = false;
            int r = place(z, addr, write ? zero_page : NULL, &there);
            if (r == 0 && there && write && z->wp)
                r = tk__uffd_wp(z->uffd, addr, PAGE, false, true);
            if (r == 0 || r == -ENOENT)
                release_resolved(z, i, s & ~Z_WAITERS);
            else
                release_owned(z, i, s & ~Z_WAITERS, &mask);
            return r == -ENOENT ? 0 : r;
        }
        if (kind == Z_HELD) {
            /* held by the hand (dropped, its data in the run's buffer): a
             * touch while it samples; the page counts as resident already */
            uint64_t mask;
            if (!own_page(z, i, s, &mask)) continue;
            const unsigned char *src = z->held[i / RUN] + i % RUN * PAGE;
            int r = place(z, addr, src, NULL);
            if (r != 0) {
                release_owned(z, i, s & ~Z_WAITERS, &mask);
                return r;
            }
            atomic_fetch_add(&z->sample_faults, 1);
            caught(z, i);
            release_resolved(z, i, Z_RESIDENT | (s & Z_CLEAN)); /* (a copy kept stays) */
            return 0;
        }
        /* The budget: wait for the pager while well over it (not while a
         * fork() pauses it: pager_main) */
        size_t hard = atomic_load(&z->hard);
        if (hard && atomic_load(&z->resident) >= hard) {
            int seq = atomic_load(&z->evict_seq);
            if (atomic_load(&z->resident) >= hard && !atomic_load(&z->pause_req) &&
                !atomic_load(&z->refused)) {
                atomic_fetch_add(&z->waits, 1);
                kick_pager(z);
                tk__futex_wait(&z->evict_seq, seq);
                continue;
            }
        }
        uint64_t mask;
        if (!own_page(z, i, s, &mask)) continue;
        int r;
        void *old = NULL;
        bool clean = false;
        if (kind == Z_UNTOUCHED) {
            r = place(z, addr, write ? zero_page : NULL, NULL);
            if (r == 0) atomic_fetch_add(&z->first_touches, 1);
        } else {
            unsigned char buf[PAGE] __attribute__((aligned(64)));
            /* a read keeps the copy (if the page is not written, evicting
             * it again needs no compression); a write drops it */
            clean = z->keep && !write;
            if (kind == Z_COMPRESSED && (z->zlen[i] & Z_RAW)) {
                /* kept as it was: the kernel copies it from its slot
                 * (ours while the page is BUSY) */
                r = place(z, addr, atomic_load(&z->slot[i]), NULL);
            } else {
                r = decompress(z, i, kind, buf);
                if (r == 0) r = place(z, addr, buf, NULL);
            }
            if (r == 0) {
                atomic_fetch_sub(kind == Z_COMPRESSED ? &z->n_compressed : &z->n_markers, 1);
                if (clean) {
                    atomic_fetch_add(&z->n_clean, 1);
                } else {
                    if (kind == Z_COMPRESSED) old = atomic_load(&z->slot[i]);
                    atomic_store(&z->slot[i], NULL);
                }
                atomic_fetch_add(&z->fault_ins, 1);
            }
        }
        if (r != 0) {
            release_owned(z, i, kind, &mask);
            return r;
        }
        size_t res = atomic_fetch_add(&z->resident, 1) + 1;
        release_resolved(z, i, Z_RESIDENT | (clean ? Z_CLEAN : 0));
        if (old) discard_chunk(z, old);
        size_t high = atomic_load(&z->high);
        if (high && res > high) kick_pager(z);
        return 0;
    }
}

/* Says that page i cannot be brought back (the thread then dies of the
 * signal, or the handler thread aborts). [signal-safe] */
static void die_page(struct tk_zpage *z, size_t i, int err)
{
    char num[24], *p = num + sizeof num;
    *--p = 0;
    size_t v = i;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    tk__write_stderr("trapkit zpage: cannot bring back page ");
    tk__write_stderr(p);
    tk__write_stderr(err == -EIO ? ": its compressed data is damaged\n"
                                 : ": the kernel refused UFFDIO_COPY\n");
}

/* SIGBUS of a missing page, in the faulting thread. [signal-safe] */
static tk_action on_missing(const tk_fault *f, void *arg)
{
    struct tk_zpage *z = arg;
    size_t i = (size_t)((unsigned char *)f->page - z->base) / PAGE;
    if (z->detached) return TK_DECLINE;
    int r = bring(z, i, f->access != TK_ACCESS_READ);
    if (r == 0) return TK_RESUME;
    die_page(z, i, r);
    return TK_DECLINE;
}

/* SIGSEGV on a page the clock hand made inaccessible (sampled, or another
 * page of a sampled run).  The page is owned while it is opened, so that
 * the pager neither evicts it nor samples it again between the check and
 * the opening (either would leave a sampled page open, and a write to it
 * lost when it is evicted); the thread's asynchronous signals wait
 * meanwhile, as in bring().  [signal-safe] */
static tk_action on_sample(const tk_fault *f, void *arg)
{
    struct tk_zpage *z = arg;
    size_t i = (size_t)((unsigned char *)f->page - z->base) / PAGE;
    for (;;) {
        int s = atomic_load(&z->state[i]);
        if (s & Z_BUSY) {
            wait_page(z, i, s);
            return TK_RESUME; /* the retry finds the page as the owner left it */
        }
        uint64_t mask;
        tk__defer_signals(&mask);
        if (!atomic_compare_exchange_strong(&z->state[i], &s, s | Z_BUSY)) {
            tk__restore_signals(&mask);
            continue;
        }
        int kind = s & Z_KIND;
        if (kind == Z_SAMPLED) {
            kind = Z_RESIDENT;
            atomic_fetch_add(&z->sample_faults, 1);
            caught(z, i);
        }
        /* Open already: the pager's eviction opened it after this fault
         * was raised; the retry finds the page as it left it.  Only an
         * instruction fetch faults on a page open for reading and writing:
         * not ours. */
        tk_action act = TK_RESUME;
        if (tk_protection(f->region, f->page) == TK_PROT_RW) {
            if (f->access == TK_ACCESS_EXEC) act = TK_DECLINE;
        } else if (tk_unprot(f->region, f->page, PAGE) != 0) {
            act = TK_DECLINE;
        }
        release_page(z, i, (s & ~(Z_KIND | Z_BUSY | Z_WAITERS)) | kind);
        tk__restore_signals(&mask);
        return act;
    }
}

/* A page fault, on the handler thread of TK_ZPAGE_THREAD. */
static void on_thread_fault(void *arg, uintptr_t addr, uint64_t flags)
{
    struct tk_zpage *z = arg;
    uintptr_t a = addr & ~(uintptr_t)(PAGE - 1);
    size_t i = (a - (uintptr_t)z->base) / PAGE;
    int r = bring(z, i, flags & UFFD_PAGEFAULT_FLAG_WRITE);
    if (r != 0) {
        die_page(z, i, r);
        abort();
    }
    tk__uffd_wake(z->uffd, (void *)a, PAGE);
}

/* The handler thread of TK_ZPAGE_THREAD. */
static void *handler_main(void *arg)
{
    struct tk_zpage *z = arg;
    tk__block_async_signals();
    tk__uffd_fault_loop(z->uffd, z->stop_fd, NULL, on_thread_fault, z);
    return NULL;
}

/* ---- the pager ------------------------------------------------------------ */

/* How many runs the hand keeps sampled. */
static size_t ring_target(const struct tk_zpage *z)
{
    size_t b = atomic_load(&z->budget);
    size_t t = (64 + (b ? b : z->npages) / 16) / RUN;
    if (t < 4) t = 4;
    /* (hold_run adds up to HOLD_BATCH runs at a time) */
    return t < z->ring_cap - HOLD_BATCH ? t : z->ring_cap - HOLD_BATCH;
}

/* The next stretch of set bits of mask at or after bit a: returns its
 * first bit (RUN if none) and sets *b past its last. */
static unsigned span(uint32_t mask, unsigned a, unsigned *b)
{
    while (a < RUN && !(mask >> a & 1)) a++;
    unsigned e = a;
    while (e < RUN && (mask >> e & 1)) e++;
    *b = e;
    return a;
}

/* Whether the hand may sample resident page i now: a page whose touch it
 * caught is left alone for that many passes. */
static bool cooled(struct tk_zpage *z, size_t i)
{
    unsigned char h = __atomic_load_n(&z->heat[i], __ATOMIC_RELAXED);
    if (!h) return true;
    __atomic_store_n(&z->heat[i], (unsigned char)(h - 1), __ATOMIC_RELAXED);
    return false;
}

/* Opens the stretches of run base's pages set in `open` (read-write). */
static void open_stretches(struct tk_zpage *z, size_t base, uint32_t open)
{
    for (unsigned a = 0, b; (a = span(open, a, &b)) < RUN; a = b)
        tk_protect(z->region, z->base + (base + a) * PAGE, (size_t)(b - a) * PAGE, TK_PROT_RW);
}

/* Advances the clock hand by runs of RUN pages until it has made the
 * resident pages of one run sampled (the whole run inaccessible, one
 * tk_protect), or gone round once.  Returns whether it did. */
static bool sample_run(struct tk_zpage *z)
{
    size_t nruns = (z->npages + RUN - 1) / RUN;
    for (size_t step = 0; step < nruns; step++) {
        size_t r = z->hand;
        z->hand = (z->hand + 1) % nruns;
        uint32_t mask = 0;
        size_t end = r * RUN + RUN > z->npages ? z->npages : r * RUN + RUN;
        for (size_t i = r * RUN; i < end; i++) {
            int s = atomic_load(&z->state[i]);
            if ((s & (Z_KIND | Z_BUSY)) == Z_RESIDENT && cooled(z, i) &&
                atomic_compare_exchange_strong(&z->state[i], &s, (s & ~Z_KIND) | Z_SAMPLED))
                mask |= 1u << (i - r * RUN);
        }
        if (!mask) continue;
        /* The whole run in one call, its dropped pages with it: a touch of
         * one of those faults twice (on_sample opens it, then it is
         * missing), where a call per stretch of resident pages would cost
         * the pager several calls and the kernel as many mappings to split
         * and merge again. */
        size_t base = r * RUN;
        if (tk_protect(z->region, z->base + base * PAGE, (end - base) * PAGE, TK_PROT_NONE) != 0) {
            /* the kernel refused (vm.max_map_count): these stay resident,
             * and what it may have protected is opened again - but for
             * pages sampled before (this run still in the ring): opening
             * those would let them be evicted while written */
            uint32_t open = 0;
            for (unsigned k = 0; k < end - base; k++) {
                int st = atomic_load(&z->state[base + k]);
                if (mask >> k & 1)
                    while ((st & (Z_KIND | Z_BUSY)) == Z_SAMPLED &&
                           !atomic_compare_exchange_weak(&z->state[base + k], &st,
                                                         (st & ~Z_KIND) | Z_RESIDENT)) {
                    }
                if ((mask >> k & 1) || (st & Z_KIND) != Z_SAMPLED) open |= 1u << k;
            }
            open_stretches(z, base, open);
            return false;
        }
        z->ring[(z->ring_head + z->ring_n) % z->ring_cap] = r;
        z->ring_n++;
        return true;
    }
    return false;
}

/* Which of pages [a, b) (b - a <= RUN) hold data: in memory, or swapped
 * out by the kernel (bit 0 of vec[k] for page a + k).  A page that holds
 * none the program dropped itself (MADV_DONTNEED): it reads as zeros.
 * mincore() cannot tell the two apart (a swapped page is "not resident"
 * to it); /proc/self/pagemap can (bits 63 present, 62 swapped).  The area
 * installs no userfaultfd marker in a dropped page's entry (no
 * UFFD_FEATURE_WP_UNPOPULATED), so "swapped" is a real swap entry.
 * 0 or a negative errno. */
static int populated(struct tk_zpage *z, size_t a, size_t b, unsigned char *vec)
{
    uint64_t e[RUN];
    size_t n = b - a;
    int pm = tk__pagemap_fd();
    if (pm < 0) return pm;
    off_t at = (off_t)((uintptr_t)(z->base + a * PAGE) / PAGE * sizeof e[0]);
    if (pread(pm, e, n * sizeof e[0], at) != (ssize_t)(n * sizeof e[0]))
        return errno ? -errno : -EIO;
    for (size_t k = 0; k < n; k++) vec[k] = (e[k] >> 62 & 3) != 0;
    return 0;
}

/* Whether page i (inaccessible, BUSY) holds data (populated()). */
static bool present(struct tk_zpage *z, size_t i)
{
    unsigned char v = 0;
    return populated(z, i, i + 1, &v) == 0 && v;
}

/* read_span's one page i, asked of the page map again first (a page the
 * program dropped reads as zeros).  0 or a negative errno. */
static int read_page(struct tk_zpage *z, size_t i, unsigned char *buf)
{
    for (int tries = 0; tries < 3; tries++) {
        unsigned char v;
        int err = populated(z, i, i + 1, &v);
        if (err) return err;
        if (!(v & 1)) {
            memset(buf, 0, PAGE);
            return 0;
        }
        if (pread(z->memfd, buf, PAGE, (off_t)(uintptr_t)(z->base + i * PAGE)) == PAGE) return 0;
    }
    return errno ? -errno : -EIO;
}

/* Reads pages [a, b) (inaccessible, BUSY) into buf, one pread of
 * /proc/self/mem per stretch of them populated (in memory or swapped out:
 * the read brings a swapped page back, with no userfaultfd fault); a page
 * missing (the program dropped it itself) reads as zeros.  The pread must not touch a
 * missing page: under TK_ZPAGE_THREAD the kernel would wait for the
 * handler thread, which waits for this BUSY page.  (A page the program
 * drops while the pager reads it is still such a wait: do not drop pages
 * of an area from one thread while others use it.)  0 or a negative
 * errno. */
static int read_span(struct tk_zpage *z, size_t a, size_t b, unsigned char *buf)
{
    unsigned char vec[RUN];
    int err = populated(z, a, b, vec);
    if (err) return err;
    for (size_t i = a; i < b;) {
        size_t j = i;
        while (j < b && (vec[j - a] & 1)) j++;
        if (j > i) {
            size_t len = (j - i) * PAGE;
            if (pread(z->memfd, buf + (i - a) * PAGE, len,
                      (off_t)(uintptr_t)(z->base + i * PAGE)) != (ssize_t)len) {
                /* the program dropped a page of it since (MADV_DONTNEED):
                 * page by page, one gone reading as zeros */
                for (size_t k = i; k < j; k++) {
                    int e = read_page(z, k, buf + (k - a) * PAGE);
                    if (e) return e;
                }
            }
        }
        for (i = j; i < b && !(vec[i - a] & 1); i++) memset(buf + (i - a) * PAGE, 0, PAGE);
    }
    return 0;
}

/* Drops the n stretches: one process_madvise for them all, where the
 * kernel allows it (Linux 6.13; from 6.16 it also flushes the TLBs once,
 * not once per stretch: each flush interrupts the program's CPUs), else a
 * madvise each.  A stretch the kernel refuses to drop (memory locked by
 * mlock or mlockall: EINVAL) keeps its pages: failed[k] says so, and the
 * count of them is returned; the pager then says so once on stderr and
 * waits a second before it tries again (drops_refused). */
static int drop_stretches(struct tk_zpage *z, const struct iovec *v, int n, bool *failed)
{
    int done = 0, nfailed = 0;
    for (int k = 0; k < n; k++) failed[k] = false;
    if (z->pidfd >= 0 && n > 1) {
        long r = syscall(SYS_process_madvise, z->pidfd, v, (size_t)n, MADV_DONTNEED, 0u);
        if (r < 0) {
            if (errno == EINVAL || errno == ENOSYS || errno == EPERM) {
                close(z->pidfd); /* (refused: not asked again) */
                z->pidfd = -1;
            }
        } else {
            /* all of it, or the stretches before a partial one */
            for (size_t left = (size_t)r; done < n && left >= v[done].iov_len; done++)
                left -= v[done].iov_len;
        }
    }
    for (; done < n; done++)
        if (madvise(v[done].iov_base, v[done].iov_len, MADV_DONTNEED) != 0) {
            failed[done] = true;
            nfailed++;
        }
    if (nfailed) {
        if (!z->said_refused)
            tk__write_stderr("trapkit zpage: the kernel refuses to drop pages of an area (locked "
                             "in memory by mlock or mlockall?): they stay resident, over the "
                             "budget\n");
        z->said_refused = true;
        clock_gettime(CLOCK_MONOTONIC, &z->refused_at);
        /* threads waiting for room go on: none may come */
        atomic_store(&z->refused, true);
        atomic_fetch_add(&z->evict_seq, 1);
        tk__futex_wake(&z->evict_seq, INT_MAX);
    } else if (n) {
        atomic_store(&z->refused, false);
    }
    return nfailed;
}

/* Whether a drop was refused less than a second ago (the pager waits). */
static bool drops_refused(struct tk_zpage *z)
{
    if (!atomic_load(&z->refused)) return false;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - z->refused_at.tv_sec) * 1000000000L + (t.tv_nsec - z->refused_at.tv_nsec) <
           1000000000L;
}

/* Counts n pages evicted and wakes the threads waiting for room; returns
 * n, or err if none went. */
static int evicted(struct tk_zpage *z, int n, int err)
{
    if (n) {
        atomic_fetch_sub(&z->resident, (size_t)n);
        atomic_fetch_add(&z->evictions, (uint64_t)n);
        atomic_fetch_add(&z->evict_seq, 1);
        tk__futex_wake(&z->evict_seq, INT_MAX);
    }
    return err && !n ? err : n;
}

/* Page i's data, in `page`, stored (the pager's): a copy kept of it
 * (CLEAN) if the page still matches it - decompressed into tmp and
 * compared, a third of a compression's time - else compressed anew.  A
 * page the program wrote, or dropped itself (read as zeros), no longer
 * matches.  Returns the kind (COMPRESSED or MARKER), or -ENOMEM: the copy
 * is gone then, and the page stays as it is. */
static int store(struct tk_zpage *z, size_t i, int s, const unsigned char *page, unsigned char *tmp)
{
    if (s & Z_CLEAN) {
        atomic_fetch_sub(&z->n_clean, 1);
        int kind = z->zlen[i] ? Z_COMPRESSED : Z_MARKER;
        if (decompress(z, i, kind, tmp) == 0 && memcmp(tmp, page, PAGE) == 0) return kind;
        void *old = atomic_load(&z->slot[i]);
        atomic_store(&z->slot[i], NULL);
        if (kind == Z_COMPRESSED) discard_chunk(z, old);
    }
    void *slot = NULL;
    uint32_t len = 0;
    int kind = compress(z, page, &slot, &len);
    if (kind < 0) return kind;
    atomic_store(&z->slot[i], slot);
    z->zlen[i] = len;
    return kind;
}

/* Evicts the pages of run r still sampled and untouched: each read,
 * compressed and stored, then dropped (drop_stretches) and the run made
 * accessible again (one tk_protect, or one per stretch around pages still
 * sampled that another thread owns).  Returns the number evicted, or a
 * negative errno. */
static int evict_run(struct tk_zpage *z, size_t r, unsigned char *buf)
{
    uint32_t mask = 0;
    int was[RUN];
    size_t end = r * RUN + RUN > z->npages ? z->npages : r * RUN + RUN;
    for (size_t i = r * RUN; i < end; i++) {
        int s = atomic_load(&z->state[i]);
        if ((s & (Z_KIND | Z_BUSY)) != Z_SAMPLED) continue;
        if (atomic_compare_exchange_strong(&z->state[i], &s, s | Z_BUSY)) {
            mask |= 1u << (i - r * RUN);
            was[i - r * RUN] = s;
        }
    }
    size_t base = r * RUN;
    /* what the run is opened for again at the end: all of it but the
     * pages still sampled that another thread owns (its fault opens them) */
    uint32_t open = 0;
    for (size_t i = base; i < end; i++) {
        int s = atomic_load(&z->state[i]);
        if ((mask >> (i - base) & 1) || (s & Z_KIND) != Z_SAMPLED) open |= 1u << (i - base);
    }
    if (!mask) {
        open_stretches(z, base, open);
        return 0;
    }
    int kinds[RUN], err = 0, n = 0;
    for (unsigned a = 0, b; (a = span(mask, a, &b)) < RUN; a = b) {
        int e = err ? err : read_span(z, base + a, base + b, buf);
        for (unsigned k = a; k < b; k++) {
            int kind = e ? e
                         : store(z, base + k, was[k], buf + (size_t)(k - a) * PAGE,
                                 buf + (size_t)RUN * PAGE);
            if (kind < 0) {
                err = kind;
                /* stays (with its copy, if the read failed) */
                kinds[k] = Z_RESIDENT | (e ? was[k] & Z_CLEAN : 0);
                continue;
            }
            atomic_fetch_add(kind == Z_MARKER ? &z->n_markers : &z->n_compressed, 1);
            kinds[k] = kind;
        }
    }
    /* the stretches of pages stored: dropped */
    struct iovec drop[RUN];
    unsigned first[RUN];
    bool failed[RUN];
    int ndrop = 0;
    for (unsigned a = 0, b; (a = span(mask, a, &b)) < RUN; a = b) {
        for (unsigned i = a; i < b;) {
            unsigned j = i;
            while (j < b && (kinds[j] & Z_KIND) != Z_RESIDENT) j++;
            if (j > i) {
                first[ndrop] = i;
                drop[ndrop++] = (struct iovec){z->base + (base + i) * PAGE, (size_t)(j - i) * PAGE};
            }
            for (i = j; i < b && (kinds[i] & Z_KIND) == Z_RESIDENT; i++) {
            }
        }
    }
    if (drop_stretches(z, drop, ndrop, failed))
        for (int d = 0; d < ndrop; d++) /* still in memory: resident, the copy kept */
            for (unsigned k = first[d]; failed[d] && k < first[d] + drop[d].iov_len / PAGE; k++) {
                atomic_fetch_sub(kinds[k] == Z_MARKER ? &z->n_markers : &z->n_compressed, 1);
                atomic_fetch_add(&z->n_clean, 1);
                kinds[k] = Z_RESIDENT | Z_CLEAN;
            }
    open_stretches(z, base, open);
    for (unsigned a = 0, b; (a = span(mask, a, &b)) < RUN; a = b) {
        for (unsigned k = a; k < b; k++) {
            if ((kinds[k] & Z_KIND) != Z_RESIDENT) n++;
            release_page(z, base + k, kinds[k]);
        }
    }
    return evicted(z, n, err);
}

/* ---- the hand holding pages ------------------------------------------------ */

/* A run's buffer for held pages (RUN pages), from the pager's spares. */
static unsigned char *take_buffer(struct tk_zpage *z)
{
    unsigned char *b = z->spare;
    if (b) {
        memcpy(&z->spare, b, sizeof z->spare);
        return b;
    }
    return aligned_alloc(PAGE, (size_t)RUN * PAGE);
}

static void give_buffer(struct tk_zpage *z, unsigned char *b)
{
    memcpy(b, &z->spare, sizeof z->spare);
    z->spare = b;
}

/* The clock hand's sampling where the area has write protection: the
 * resident pages of the next run with any are held - copied into a buffer
 * of the pager's and dropped - so that a touch of one is a missing-page
 * fault that puts it back from the buffer (bring()), and one still
 * untouched when the pager needs room is compressed from the buffer with
 * no further system call (evict_held).  No protection of the mapping
 * changes: mprotect would split and merge the area's mapping under the
 * address space's lock the program's own faults take, and each page the
 * program touched would cost it a call to open it again.
 *
 * While the pages are copied they are write-protected (one
 * UFFDIO_WRITEPROTECT over the stretch from the first to the last): a
 * write then faults and waits for the page (BUSY), as it must, since a
 * write between the copy and the drop would be lost.  A page in the
 * stretch that is not the hand's (being brought back meanwhile) may be
 * caught by the protection; its first write lifts it (bring()).  Returns
 * whether a run was held; the hand goes round at most once. */
static bool hold_run(struct tk_zpage *z)
{
    size_t nruns = (z->npages + RUN - 1) / RUN;
    size_t run[HOLD_BATCH];
    uint32_t mask[HOLD_BATCH], clean[HOLD_BATCH];
    int was[HOLD_BATCH][RUN];
    unsigned n = 0;
    /* the next runs with pages to hold, up to HOLD_BATCH of them within
     * HOLD_SPAN runs (one write protection and one drop for them all) */
    for (size_t step = 0; step < nruns && n < HOLD_BATCH; step++) {
        size_t r = z->hand;
        if (n && (r < run[n - 1] || r - run[0] >= HOLD_SPAN)) break; /* (or the hand went round) */
        z->hand = (z->hand + 1) % nruns;
        size_t base = r * RUN, end = base + RUN > z->npages ? z->npages : base + RUN;
        uint32_t m = 0, c = 0;
        for (size_t i = base; i < end; i++) {
            int s = atomic_load(&z->state[i]);
            if ((s & (Z_KIND | Z_BUSY)) == Z_RESIDENT && cooled(z, i) &&
                atomic_compare_exchange_strong(&z->state[i], &s,
                                               (s & ~Z_KIND) | Z_SAMPLED | Z_BUSY)) {
                m |= 1u << (i - base);
                if (s & Z_CLEAN) c |= 1u << (i - base);
                was[n][i - base] = s & ~Z_WAITERS;
            }
        }
        if (!m) continue;
        run[n] = r;
        mask[n] = m;
        clean[n] = c;
        n++;
    }
    if (!n) return false;
    unsigned char *buf[HOLD_BATCH];
    int err = 0;
    for (unsigned k = 0; k < n; k++) {
        buf[k] = z->held[run[k]] ? z->held[run[k]] : take_buffer(z);
        if (!buf[k]) err = -ENOMEM;
    }
    /* write-protected from the first page held to the last */
    unsigned char *lo = z->base + (run[0] * RUN + (unsigned)__builtin_ctz(mask[0])) * PAGE;
    unsigned char *hi =
        z->base + (run[n - 1] * RUN + 32u - (unsigned)__builtin_clz(mask[n - 1])) * PAGE;
    bool wp = !err && tk__uffd_wp(z->uffd, lo, (size_t)(hi - lo), true, true) == 0;
    if (!err && !wp) err = -EPERM;
    for (unsigned k = 0; k < n && !err; k++) {
        size_t base = run[k] * RUN;
        for (unsigned a = 0, b; !err && (a = span(mask[k], a, &b)) < RUN; a = b)
            err = read_span(z, base + a, base + b, buf[k] + (size_t)a * PAGE);
    }
    if (err) {
        /* (out of memory, or /proc/self/mem refused): they stay */
        if (wp) tk__uffd_wp(z->uffd, lo, (size_t)(hi - lo), false, false);
        for (unsigned k = 0; k < n; k++) {
            if (buf[k] && !z->held[run[k]]) give_buffer(z, buf[k]);
            for (unsigned j = 0; j < RUN; j++)
                if (mask[k] >> j & 1) release_page(z, run[k] * RUN + j, was[k][j]);
        }
        return false;
    }
    struct iovec drop[HOLD_BATCH * RUN / 2];
    int ndrop = 0;
    for (unsigned k = 0; k < n; k++) {
        size_t base = run[k] * RUN;
        z->held[run[k]] = buf[k];
        for (unsigned a = 0, b; (a = span(mask[k], a, &b)) < RUN; a = b) {
            unsigned char *at = z->base + (base + a) * PAGE;
            size_t len = (size_t)(b - a) * PAGE;
            if (ndrop && (unsigned char *)drop[ndrop - 1].iov_base + drop[ndrop - 1].iov_len == at)
                drop[ndrop - 1].iov_len += len; /* (across a run boundary) */
            else
                drop[ndrop++] = (struct iovec){at, len};
        }
    }
    bool failed[HOLD_BATCH * RUN / 2];
    int nfailed = drop_stretches(z, drop, ndrop, failed);
    /* pages of the stretch not held (passed over, or another thread's) lose
     * the protection again: one call, where each would otherwise fault on
     * its next write; so do pages the kernel would not drop */
    size_t held_pages = 0;
    for (unsigned k = 0; k < n; k++) held_pages += (size_t)__builtin_popcount(mask[k]);
    if (held_pages < (size_t)(hi - lo) / PAGE || nfailed)
        tk__uffd_wp(z->uffd, lo, (size_t)(hi - lo), false, false);
    for (unsigned k = 0; k < n; k++) {
        for (unsigned j = 0; j < RUN; j++) {
            if (!(mask[k] >> j & 1)) continue;
            unsigned char *at = z->base + (run[k] * RUN + j) * PAGE;
            bool kept = false; /* (a stretch the kernel would not drop) */
            for (int d = 0; nfailed && d < ndrop && !kept; d++)
                kept = failed[d] && at >= (unsigned char *)drop[d].iov_base &&
                       at < (unsigned char *)drop[d].iov_base + drop[d].iov_len;
            release_page(z, run[k] * RUN + j,
                         kept ? was[k][j] : Z_HELD | (clean[k] >> j & 1 ? Z_CLEAN : 0));
        }
        z->ring[(z->ring_head + z->ring_n) % z->ring_cap] = run[k];
        z->ring_n++;
    }
    return !nfailed;
}

/* Evicts the pages of run r the hand holds still untouched: compressed
 * from the run's buffer (a clean one's copy is there already), then the
 * buffer goes back to the spares.  A page a thread is putting back from
 * the buffer meanwhile is waited for.  Returns the number evicted, or a
 * negative errno (out of memory: the page is put back in place). */
static int evict_held(struct tk_zpage *z, size_t r, unsigned char *tmp)
{
    unsigned char *buf = z->held[r];
    if (!buf) return 0; /* (the run was in the ring twice) */
    size_t base = r * RUN, end = base + RUN > z->npages ? z->npages : base + RUN;
    int n = 0, err = 0;
    for (size_t i = base; i < end; i++) {
        int s = atomic_load(&z->state[i]);
        if ((s & Z_KIND) != Z_HELD) continue;
        if ((s & Z_BUSY) || !atomic_compare_exchange_strong(&z->state[i], &s, s | Z_BUSY)) {
            /* a thread puts it back from the buffer: wait, look again */
            if (s & Z_BUSY) wait_page(z, i, s);
            i--;
            continue;
        }
        int kind = store(z, i, s, buf + (i - base) * PAGE, tmp);
        if (kind < 0) {
            /* out of memory: back in place */
            err = kind;
            if (place(z, z->base + i * PAGE, buf + (i - base) * PAGE, NULL) != 0) {
                /* (cannot happen: the page is missing and ours); the
                 * buffer stays */
                release_page(z, i, Z_HELD);
                return err;
            }
            release_page(z, i, Z_RESIDENT);
            continue;
        }
        atomic_fetch_add(kind == Z_MARKER ? &z->n_markers : &z->n_compressed, 1);
        release_page(z, i, kind);
        n++;
    }
    z->held[r] = NULL;
    give_buffer(z, buf);
    return evicted(z, n, err);
}

/* Evicts until at most `target` pages are resident (or nothing more can
 * go), the runs sampled longest ago first. */
static void reclaim(struct tk_zpage *z, size_t target, unsigned char *buf)
{
    int idle_rounds = 0;
    size_t misses = 0; /* sampled runs found all touched since the last eviction */
    while (atomic_load(&z->resident) > target && !atomic_load(&z->stop)) {
        if (drops_refused(z)) break; /* (locked memory: not again for a second) */
        free_garbage(z);
        while (z->ring_n < ring_target(z) && (z->wp ? hold_run(z) : sample_run(z))) {
        }
        if (!z->ring_n) {
            /* every resident page is busy: let their owners finish */
            if (++idle_rounds > 1000) break;
            usleep(100);
            continue;
        }
        size_t run = z->ring[z->ring_head];
        z->ring_head = (z->ring_head + 1) % z->ring_cap;
        z->ring_n--;
        int r = z->wp ? evict_held(z, run, buf) : evict_run(z, run, buf);
        if (r < 0) {
            char msg[120];
            snprintf(msg, sizeof msg, "trapkit zpage: cannot evict pages of run %zu (%s)\n", run,
                     strerror(-r));
            tk__write_stderr(msg);
            break;
        }
        if (r) {
            idle_rounds = 0;
            misses = 0;
        } else if (++misses > 4 * (z->npages / RUN + 1)) {
            break; /* every page is touched as fast as the hand samples it */
        }
        if (atomic_load(&z->pause_req)) break; /* fork() */
    }
    free_garbage(z);
}

static void *pager_main(void *arg)
{
    struct tk_zpage *z = arg;
    tk__block_async_signals();
    unsigned char *buf = z->pager_buf;
    while (!atomic_load(&z->stop)) {
        if (atomic_load(&z->pause_req)) {
            atomic_store(&z->paused, 1);
            tk__futex_wake(&z->paused, INT_MAX);
            /* threads waiting for room go on over the budget meanwhile
             * (bring() does not wait while a pause is asked for): one may be
             * the thread that forks, touching the area in a fork handler or
             * a signal handler, which the pause would otherwise hold for
             * ever */
            atomic_fetch_add(&z->evict_seq, 1);
            tk__futex_wake(&z->evict_seq, INT_MAX);
            while (atomic_load(&z->pause_req)) tk__futex_wait(&z->pause_req, 1);
            atomic_store(&z->paused, 0);
            continue;
        }
        int gen = atomic_load(&z->trim_gen);
        size_t target = atomic_load(&z->trim_target);
        size_t high = atomic_load(&z->high);
        if (high && atomic_load(&z->resident) > high) {
            size_t low = atomic_load(&z->low);
            if (low < target) target = low;
        }
        if (target != SIZE_MAX) reclaim(z, target, buf);
        if (atomic_load(&z->pause_req)) continue;
        if (gen != atomic_load(&z->trim_done)) {
            /* the trim asked for by generation gen is done */
            atomic_store(&z->trim_target, SIZE_MAX);
            if (gen != atomic_load(&z->trim_gen)) continue; /* another came meanwhile */
            atomic_store(&z->trim_done, gen);
            tk__futex_wake(&z->trim_done, INT_MAX);
            continue;
        }
        /* sleep until kicked (a fault over the budget, a trim, fork, stop) */
        high = atomic_load(&z->high);
        if (atomic_exchange(&z->kick, 0) == 0 && !(high && atomic_load(&z->resident) > high) &&
            !atomic_load(&z->stop))
            tk__futex_wait(&z->kick, 0);
        atomic_store(&z->kick, 0);
    }
    return NULL;
}

/* The run buffers of held pages, and the spares. */
static void free_buffers(struct tk_zpage *z)
{
    if (z->held)
        for (size_t r = 0; r < (z->npages + RUN - 1) / RUN; r++) {
            free(z->held[r]);
            z->held[r] = NULL;
        }
    while (z->spare) {
        void *b = z->spare;
        memcpy(&z->spare, b, sizeof z->spare);
        free(b);
    }
}

/* ---- fork() ---------------------------------------------------------------- */

static void pause_pagers(void)
{
    pthread_mutex_lock(&areas_lock);
    for (struct tk_zpage *z = areas; z; z = z->next) {
        if (z->detached || !z->pager_started) continue;
        atomic_store(&z->pause_req, 1);
        kick_pager(z);
        while (!atomic_load(&z->paused)) tk__futex_wait(&z->paused, 0);
    }
}

static void resume_pagers(void)
{
    for (struct tk_zpage *z = areas; z; z = z->next) {
        if (z->detached || !z->pager_started) continue;
        atomic_store(&z->pause_req, 0);
        tk__futex_wake(&z->pause_req, INT_MAX);
    }
    pthread_mutex_unlock(&areas_lock);
}

/* In the child: every dropped page put back, the area plain memory. */
static void detach_child(struct tk_zpage *z)
{
    z->detached = true;
    z->pager_started = z->handler_started = false;
    pthread_mutex_init(&z->trim_lock, NULL);
    unsigned char buf[PAGE] __attribute__((aligned(64)));
    for (size_t i = 0; i < z->npages; i++) {
        int s = atomic_load(&z->state[i]);
        int kind = s & Z_KIND;
        unsigned char *addr = z->base + i * PAGE;
        if (i % RUN == 0) /* (a sampled run is inaccessible whole) */
            tk_unprot(z->region, addr, (z->npages - i < RUN ? z->npages - i : RUN) * PAGE);
        if ((kind == Z_COMPRESSED || kind == Z_MARKER) && !present(z, i)) {
            if (decompress(z, i, kind, buf) == 0) memcpy(addr, buf, PAGE);
        } else if (kind == Z_HELD && !present(z, i)) {
            memcpy(addr, z->held[i / RUN] + i % RUN * PAGE, PAGE);
        }
        if (atomic_load(&z->slot[i]) && z->zlen[i]) free(atomic_load(&z->slot[i]));
        atomic_store(&z->slot[i], NULL);
        atomic_store(&z->state[i], Z_RESIDENT);
    }
    free_buffers(z);
    /* the parent's userfaultfd is not the child's to use */
    close(z->uffd);
    z->uffd = -1;
    if (z->stop_fd >= 0) close(z->stop_fd);
    z->stop_fd = -1;
    if (z->pidfd >= 0) close(z->pidfd); /* (the parent's) */
    z->pidfd = -1;
    atomic_store(&z->budget, 0);
    atomic_store(&z->high, 0);
    atomic_store(&z->hard, 0);
}

static void child_after_fork(void)
{
    for (struct tk_zpage *z = areas; z; z = z->next)
        if (!z->detached) detach_child(z);
    pthread_mutex_unlock(&areas_lock);
}

static void install_atfork(void)
{
    pthread_atfork(pause_pagers, resume_pagers, child_after_fork);
}

/* ---- the API ---------------------------------------------------------------- */

static void set_marks(struct tk_zpage *z, size_t budget_pages)
{
    atomic_store(&z->budget, budget_pages);
    atomic_store(&z->low, budget_pages ? budget_pages - budget_pages / 64 : 0);
    atomic_store(&z->hard, budget_pages ? budget_pages + budget_pages / 8 : 0);
    atomic_store(&z->high, budget_pages);
}

static int check_budget(size_t budget, const char *who)
{
    if (budget && budget < (size_t)MIN_BUDGET_PAGES * PAGE)
        return tk__failf(-EINVAL,
                         "%s: budget %zu bytes is below the minimum of %u pages (%u bytes)", who,
                         budget, MIN_BUDGET_PAGES, MIN_BUDGET_PAGES * PAGE);
    return 0;
}

static void destroy_parts(struct tk_zpage *z)
{
    if (z->pager_started) {
        atomic_store(&z->stop, true);
        kick_pager(z);
        pthread_join(z->pager, NULL);
    }
    if (z->handler_started) {
        uint64_t one = 1;
        if (write(z->stop_fd, &one, sizeof one) < 0) abort();
        pthread_join(z->handler, NULL);
    }
    if (z->uffd >= 0) {
        tk__uffd_unregister(z->uffd, z->base, z->len);
        close(z->uffd);
    }
    if (z->stop_fd >= 0) close(z->stop_fd);
    if (z->region) tk_region_destroy(z->region);
    if (z->base) munmap(z->base, z->len);
    if (z->slot) {
        for (size_t i = 0; i < z->npages; i++)
            if (z->zlen && z->zlen[i]) free(atomic_load(&z->slot[i])); /* NULL or a chunk */
        free(z->slot);
    }
    free_garbage(z);
    free_buffers(z);
    free(z->held);
    if (z->state) munmap(z->state, z->npages * sizeof *z->state);
    free(z->zlen);
    free(z->heat);
    free(z->ring);
    if (z->memfd >= 0) close(z->memfd);
    if (z->pidfd >= 0) close(z->pidfd);
    ZSTD_freeCCtx(z->cctx);
    for (int k = 0; k < DCTX_POOL; k++) ZSTD_freeDCtx(z->dctx[k]);
    free(z->cbuf);
    free(z->pager_buf);
    pthread_mutex_destroy(&z->trim_lock);
    free(z);
}

int tk_zpage_create(const tk_zpage_config *cfg, tk_zpage **out)
{
    static const char who[] = "tk_zpage_create";
    if (!cfg || !out) return tk__fail(-EINVAL, "tk_zpage_create: NULL configuration or result");
    *out = NULL;
    if (cfg->len == 0 || cfg->len % PAGE)
        return tk__failf(-EINVAL, "%s: len %zu is not a positive multiple of the page (%u)", who,
                         cfg->len, PAGE);
    if ((long)sysconf(_SC_PAGESIZE) != PAGE)
        return tk__failf(-EOPNOTSUPP, "%s: the hardware page is %ld bytes, not 4096", who,
                         sysconf(_SC_PAGESIZE));
    int r = check_budget(cfg->budget, who);
    if (r) return r;
    if ((unsigned)cfg->codec > TK_ZPAGE_NONE)
        return tk__failf(-EINVAL, "%s: codec %d is none of TK_ZPAGE_LZ4, _ZSTD, _NONE", who,
                         (int)cfg->codec);
    if (cfg->codec == TK_ZPAGE_ZSTD ? (cfg->level < 0 || cfg->level > 19) : cfg->level != 0)
        return tk__failf(-EINVAL, "%s: level %d: zstd takes 1-19 (0: 1), the other codecs 0", who,
                         cfg->level);
    if ((unsigned)cfg->delivery > TK_ZPAGE_THREAD)
        return tk__failf(-EINVAL, "%s: delivery %d is neither TK_ZPAGE_SIGBUS nor TK_ZPAGE_THREAD",
                         who, (int)cfg->delivery);
    if (cfg->flags) return tk__failf(-EINVAL, "%s: unknown flags 0x%x", who, cfg->flags);

    const tk_probe_info *p = tk__probe();
    if (!p || p->uffd_access == TK_UFFD_NONE)
        return tk__failf(-EOPNOTSUPP, "%s: userfaultfd is not available to this process", who);
    if (cfg->delivery == TK_ZPAGE_SIGBUS && !tk_probe_has_uffd(p, UFFD_FEATURE_SIGBUS))
        return tk__failf(-EOPNOTSUPP,
                         "%s: this kernel's userfaultfd lacks UFFD_FEATURE_SIGBUS: use "
                         "TK_ZPAGE_THREAD",
                         who);

    /* Memory locked as it is mapped (mlockall(MCL_FUTURE)) is never
     * dropped.  Asked of one page before anything is mapped: under that
     * flag every mapping is populated and counts against RLIMIT_MEMLOCK,
     * so the area itself could fail for that reason (EAGAIN). */
    void *probe = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    int locked = probe == MAP_FAILED                        ? (errno == EAGAIN ? EAGAIN : 0)
                 : madvise(probe, PAGE, MADV_DONTNEED) != 0 ? errno
                                                            : 0;
    if (probe != MAP_FAILED) munmap(probe, PAGE);
    if (probe == MAP_FAILED && !locked)
        return tk__failf(-ENOMEM, "%s: cannot map a page: %s", who, strerror(errno));
    if (locked)
        return tk__failf(-EOPNOTSUPP,
                         "%s: the kernel will not drop pages of a new mapping (%s): this "
                         "process locks its memory (mlockall with MCL_FUTURE), so no page "
                         "could be compressed",
                         who, strerror(locked));

    struct tk_zpage *z = calloc(1, sizeof *z);
    if (!z) return tk__failf(-ENOMEM, "%s: out of memory", who);
    z->len = cfg->len;
    z->npages = cfg->len / PAGE;
    z->codec = cfg->codec;
    z->level = cfg->level ? cfg->level : 1;
    z->delivery = cfg->delivery;
    z->uffd = z->stop_fd = z->memfd = z->pidfd = -1;
    atomic_store(&z->trim_target, SIZE_MAX);
    pthread_mutex_init(&z->trim_lock, NULL);
    set_marks(z, cfg->budget / PAGE);
    if (cfg->budget / PAGE >= z->npages) set_marks(z, 0); /* the budget holds it all */

    r = tk__failf(-ENOMEM, "%s: no memory for the bookkeeping of %zu pages", who, z->npages);
    z->state = mmap(NULL, z->npages * sizeof *z->state, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (z->state == MAP_FAILED) {
        z->state = NULL;
        goto fail;
    }
    z->slot = calloc(z->npages, sizeof *z->slot);
    z->zlen = calloc(z->npages, sizeof *z->zlen);
    z->heat = calloc(z->npages, 1);
    z->ring_cap = RING_MAX;
    z->ring = calloc(z->ring_cap, sizeof *z->ring);
    z->cbuf = malloc(ZSTD_compressBound(PAGE) + LZ4_compressBound(PAGE));
    if (!z->slot || !z->zlen || !z->heat || !z->ring || !z->cbuf) goto fail;
    if (z->codec == TK_ZPAGE_ZSTD) {
        z->cctx = ZSTD_createCCtx();
        if (!z->cctx) goto fail;
        for (int k = 0; k < DCTX_POOL; k++)
            if (!(z->dctx[k] = ZSTD_createDCtx())) goto fail;
        atomic_store(&z->dctx_free, (1 << DCTX_POOL) - 1);
    }
    z->memfd = open("/proc/self/mem", O_RDONLY | O_CLOEXEC);
    if (z->memfd < 0) {
        r = tk__failf(-errno, "%s: /proc/self/mem: %s", who, strerror(errno));
        goto fail;
    }
    /* (refused before Linux 5.10: each stretch is dropped by madvise) */
    z->pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    z->base = mmap(NULL, z->len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (z->base == MAP_FAILED) {
        z->base = NULL;
        r = tk__failf(-ENOMEM, "%s: cannot map %zu bytes: %s", who, z->len, strerror(errno));
        goto fail;
    }
    /* Write protection that faults (not UFFD_FEATURE_WP_ASYNC, where the
     * kernel would let a write through unseen): the hand holds pages with
     * it (hold_run). */
    uint64_t feat = cfg->delivery == TK_ZPAGE_SIGBUS ? UFFD_FEATURE_SIGBUS : 0;
    z->uffd = tk__uffd_create(feat);
    if (z->uffd < 0) {
        /* out of descriptors or memory: that error; else what the probe
         * found was not there after all */
        int e =
            z->uffd == -EMFILE || z->uffd == -ENFILE || z->uffd == -ENOMEM ? z->uffd : -EOPNOTSUPP;
        r = tk__failf(e, "%s: userfaultfd: %s", who, strerror(-z->uffd));
        z->uffd = -1;
        goto fail;
    }
    /* write-protect faults too where the kernel has them */
    struct uffdio_register reg = {.range = {.start = (uintptr_t)z->base, .len = z->len},
                                  .mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP};
    z->wp = tk_probe_has_uffd(p, UFFD_FEATURE_PAGEFAULT_FLAG_WP) &&
            ioctl(z->uffd, UFFDIO_REGISTER, &reg) == 0 &&
            (reg.ioctls & (1ull << _UFFDIO_WRITEPROTECT));
    if (!z->wp) {
        tk__uffd_unregister(z->uffd, z->base, z->len);
        reg.mode = UFFDIO_REGISTER_MODE_MISSING;
    }
    if (!z->wp && ioctl(z->uffd, UFFDIO_REGISTER, &reg) < 0) {
        r = tk__failf(-errno, "%s: UFFDIO_REGISTER: %s", who, strerror(errno));
        goto fail;
    }
    /* the hand holds pages where it can write-protect them while it copies
     * them (z->wp), else it samples by mprotect (sample_run) */
    z->keep = !getenv("TRAPKIT_ZPAGE_NO_CLEAN");
    if (z->wp && !(z->held = calloc((z->npages + RUN - 1) / RUN, sizeof *z->held))) {
        r = tk__failf(-ENOMEM, "%s: no memory for the bookkeeping of %zu pages", who, z->npages);
        goto fail;
    }
    uint64_t need = (1ull << _UFFDIO_COPY) | (1ull << _UFFDIO_ZEROPAGE);
    if ((reg.ioctls & need) != need) {
        r = tk__failf(-EOPNOTSUPP, "%s: UFFDIO_COPY or UFFDIO_ZEROPAGE missing", who);
        goto fail;
    }
    tk_region_config rc = {
        .addr = z->base, .len = z->len, .handler = on_sample, .arg = z, .mech = TK_MECH_POSIX};
    r = tk_region_create(&rc, &z->region);
    if (r) {
        z->region = NULL;
        goto fail;
    }
    r = tk__region_on_missing(z->region, on_missing, z);
    if (r) goto fail;
    if (z->delivery == TK_ZPAGE_THREAD) {
        /* non-blocking: a fault message poll() saw can be gone by the read
         * (its thread woken by a placement of another's) */
        int fl = fcntl(z->uffd, F_GETFL);
        if (fl < 0 || fcntl(z->uffd, F_SETFL, fl | O_NONBLOCK) < 0) {
            r = tk__failf(-errno, "%s: fcntl of the userfaultfd: %s", who, strerror(errno));
            goto fail;
        }
        z->stop_fd = eventfd(0, EFD_CLOEXEC);
        if (z->stop_fd < 0) {
            r = tk__failf(-errno, "%s: eventfd for the handler thread: %s", who, strerror(errno));
            goto fail;
        }
        r = -pthread_create(&z->handler, NULL, handler_main, z);
        if (r) {
            r = tk__failf(r, "%s: the handler thread: %s", who, strerror(-r));
            goto fail;
        }
        z->handler_started = true;
    }
    /* (here, not in the thread: out of memory is an error of create's) */
    z->pager_buf = aligned_alloc(PAGE, (RUN + 1) * PAGE);
    if (!z->pager_buf) {
        r = tk__failf(-ENOMEM, "%s: no memory for the pager's buffer", who);
        goto fail;
    }
    r = -pthread_create(&z->pager, NULL, pager_main, z);
    if (r) {
        r = tk__failf(r, "%s: the pager thread: %s", who, strerror(-r));
        goto fail;
    }
    z->pager_started = true;

    pthread_once(&atfork_once, install_atfork);
    pthread_mutex_lock(&areas_lock);
    z->next = areas;
    areas = z;
    pthread_mutex_unlock(&areas_lock);
    *out = z;
    return 0;
fail:
    destroy_parts(z);
    return r;
}

int tk_zpage_destroy(tk_zpage *z)
{
    if (!z) return tk__fail(-EINVAL, "tk_zpage_destroy: NULL area");
    pthread_mutex_lock(&areas_lock);
    for (struct tk_zpage **p = &areas; *p; p = &(*p)->next)
        if (*p == z) {
            *p = z->next;
            break;
        }
    pthread_mutex_unlock(&areas_lock);
    destroy_parts(z);
    return 0;
}

void *tk_zpage_base(const tk_zpage *z)
{
    return z ? z->base : NULL;
}

size_t tk_zpage_len(const tk_zpage *z)
{
    return z ? z->len : 0;
}

int tk_zpage_trim(tk_zpage *z, size_t resident)
{
    if (!z) return tk__fail(-EINVAL, "tk_zpage_trim: NULL area");
    if (z->detached) return 0;
    pthread_mutex_lock(&z->trim_lock);
    atomic_store(&z->trim_target, resident / PAGE);
    int gen = atomic_fetch_add(&z->trim_gen, 1) + 1;
    kick_pager(z);
    for (;;) {
        int done = atomic_load(&z->trim_done);
        if (done == gen) break;
        tk__futex_wait(&z->trim_done, done);
    }
    pthread_mutex_unlock(&z->trim_lock);
    if (atomic_load(&z->refused) && atomic_load(&z->resident) > resident / PAGE)
        return tk__fail(-EBUSY, "tk_zpage_trim: the kernel will not drop pages of the area "
                                "(locked in memory by mlock?): they stay resident");
    return 0;
}

int tk_zpage_set_budget(tk_zpage *z, size_t budget)
{
    if (!z) return tk__fail(-EINVAL, "tk_zpage_set_budget: NULL area");
    int r = check_budget(budget, "tk_zpage_set_budget");
    if (r) return r;
    if (z->detached) return 0;
    set_marks(z, budget / PAGE >= z->npages ? 0 : budget / PAGE);
    kick_pager(z);
    return 0;
}

int tk_zpage_discard(tk_zpage *z, void *addr, size_t len)
{
    static const char who[] = "tk_zpage_discard";
    if (!z) return tk__failf(-EINVAL, "%s: NULL area", who);
    uintptr_t a = (uintptr_t)addr, lo = (uintptr_t)z->base;
    if (a % PAGE || len % PAGE || a < lo || a - lo > z->len || len > z->len - (a - lo))
        return tk__failf(-EINVAL, "%s: [%p, +%zu) is not whole pages of the area [%p, +%zu)", who,
                         addr, len, (void *)z->base, z->len);
    int locked = 0;
    if (z->detached) /* plain memory now */
        return len && madvise(addr, len, MADV_DONTNEED)
                   ? tk__failf(-errno, "%s: madvise: %s", who, strerror(errno))
                   : 0;
    for (size_t i = (a - lo) / PAGE; i < (a - lo + len) / PAGE; i++) {
        for (;;) {
            int s = atomic_load(&z->state[i]);
            if (s & Z_BUSY) {
                wait_page(z, i, s);
                continue;
            }
            uint64_t mask;
            if (!own_page(z, i, s, &mask)) continue;
            int kind = s & Z_KIND;
            void *copy = atomic_load(&z->slot[i]);
            bool chunk = copy && z->zlen[i] != 0; /* (a marker's slot is its word) */
            atomic_store(&z->slot[i], NULL);
            if (kind == Z_COMPRESSED || kind == Z_MARKER) {
                /* its data goes; its next touch is a first one (zeros) */
                atomic_fetch_sub(kind == Z_COMPRESSED ? &z->n_compressed : &z->n_markers, 1);
                kind = Z_UNTOUCHED;
            } else if (kind == Z_HELD) {
                /* dropped already, its data in the hand's buffer (which the
                 * pager frees when it reaches the run) */
                if (s & Z_CLEAN) atomic_fetch_sub(&z->n_clean, 1);
                atomic_fetch_sub(&z->resident, 1);
                kind = Z_UNTOUCHED;
            } else if (kind != Z_UNTOUCHED) {
                /* in memory (or in a run the clock hand samples): dropped as
                 * a madvise of the program's own drops it, and its clean
                 * copy with it */
                if (s & Z_CLEAN) atomic_fetch_sub(&z->n_clean, 1);
                if (madvise(z->base + i * PAGE, PAGE, MADV_DONTNEED) != 0) {
                    locked = errno; /* (mlock): it keeps its data */
                } else if (kind == Z_RESIDENT) {
                    atomic_fetch_sub(&z->resident, 1);
                    kind = Z_UNTOUCHED;
                }
            }
            release_owned(z, i, kind, &mask);
            if (chunk) discard_chunk(z, copy);
            break;
        }
    }
    if (locked)
        return tk__failf(-locked,
                         "%s: the kernel will not drop pages of [%p, +%zu) (%s): locked "
                         "in memory by mlock? They keep their data",
                         who, addr, len, strerror(locked));
    return 0;
}

int tk_zpage_stats_get(const tk_zpage *z, tk_zpage_stats *st)
{
    if (!z || !st) return tk__fail(-EINVAL, "tk_zpage_stats_get: NULL area or result");
    struct tk_zpage *m = (struct tk_zpage *)z;
    *st = (tk_zpage_stats){
        .pages = z->npages,
        .resident = atomic_load(&m->resident),
        .compressed = atomic_load(&m->n_compressed),
        .markers = atomic_load(&m->n_markers),
        .clean = atomic_load(&m->n_clean),
        .stored_bytes = atomic_load(&m->stored),
        .fault_ins = atomic_load(&m->fault_ins),
        .first_touches = atomic_load(&m->first_touches),
        .evictions = atomic_load(&m->evictions),
        .sample_faults = atomic_load(&m->sample_faults),
        .waits = atomic_load(&m->waits),
    };
    return 0;
}
