/* DIRTY exactness: over many rounds of random write patterns, the set
 * tk_dirty() returns equals the set written; also with the user's own
 * protections mixed in, logical pages larger than the hardware page, and
 * writer threads running during collection.
 *
 * Where no collection races a write (every part but the writer threads), a
 * page written once is reported by the next collection and by no later one:
 * reported twice or not at all fails.  With writers racing collection,
 * region.h promises that no write is lost and that a page written once is
 * reported once, or twice when its write was in flight across a collection
 * (its fault handled, its instruction not yet retried, when the collection
 * came); there every write must be reported by a collection that may see it,
 * no page may be reported that no write explains, and the pages reported
 * twice for one write are counted, not failed. */
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <string.h>
#include <time.h>
#include "testutil.h"

#define NPAGES 512
#define ROUNDS 60

/* Single-threaded, no collection racing a write: the pages the collection
 * reports (got, n of them) must be exactly those written once since the
 * previous one (want).  A page reported though not written since was
 * reported twice for one write. */
static void check_exact(const uint64_t *got, const uint64_t *want, size_t npages, long n,
                        const char *what, int round)
{
    long expect = 0, lost = 0, twice = 0;
    for (size_t p = 0; p < npages; p++) {
        bool g = got[p / 64] >> (p % 64) & 1, w = want[p / 64] >> (p % 64) & 1;
        if (w && !g && lost++ == 0)
            fprintf(stderr, "%s %d: page %zu was written and not reported\n", what, round, p);
        if (g && !w && twice++ == 0)
            fprintf(stderr,
                    "%s %d: page %zu reported though not written since the previous "
                    "collection (reported twice)\n",
                    what, round, p);
        expect += w;
    }
    if (lost || twice) {
        fprintf(stderr, "FAIL: %s %d: %ld pages not reported, %ld reported twice\n", what, round,
                lost, twice);
        exit(1);
    }
    CHECK(n == expect);
}

static void round_trip(tk_region *r, size_t npages, size_t page, uint64_t *seed)
{
    uint64_t want[NPAGES / 64] = {0}, got[NPAGES / 64];
    volatile char *base = tk_region_base(r);
    for (int round = 0; round < ROUNDS; round++) {
        memset(want, 0, sizeof want);
        /* 0%, a few, about half, or all pages */
        unsigned pct = (unsigned[]){0, 2, 50, 100}[round % 4];
        for (size_t i = 0; i < npages; i++) {
            if (tk_test_rand(seed) % 100 < pct) {
                size_t off = tk_test_rand(seed) % page;
                base[i * page + off] = (char)round;
                want[i / 64] |= (uint64_t)1 << (i % 64);
            } else if (tk_test_rand(seed) % 4 == 0) {
                (void)base[i * page + tk_test_rand(seed) % page]; /* reads do not count */
            }
        }
        long n = tk_dirty(r, got, npages);
        CHECK(n >= 0);
        check_exact(got, want, npages, n, "round_trip", round);
    }
    /* the last round's pages, written once, are not reported again */
    memset(want, 0, sizeof want);
    long n = tk_dirty(r, got, npages);
    CHECK(n >= 0);
    check_exact(got, want, npages, n, "round_trip, after the last round", ROUNDS);
}

/* Writers racing collection.  Each page belongs to one of WRITERS threads,
 * which writes its pages in random order, adding 1 to a counter at the
 * page's start.  Around every write the writer reads `seq`, the number of
 * the collection under way or last begun: a write that began after
 * collection b began and ended before collection c + 1 began may be reported
 * by collections b to c + 1 only, and must be by at least one of them.  Per
 * page the writer logs these windows (one entry for consecutive writes that
 * share one) for the collector to check against what it was told. */
#define WRITERS 2
#define COLLECTIONS 300      /* that report pages, and on until ... */
#define MIN_WRITES 20000     /* ... this many writes, */
#define MAX_COLLECTIONS 8192 /* ... this many collections */
#define MAX_SECONDS 10       /* ... or this long */
#define LOG 32               /* entries per page */
#define INTERVAL_WRITES 64   /* writes between collections, at least (or 2 ms) */

struct window {
    long b, c;          /* collections b .. c + 1 may report these writes */
    atomic_long writes; /* how many */
};

struct page_log {
    atomic_int busy;   /* its writer is between reading b and logging */
    atomic_ulong head; /* entries logged, by the writer */
    atomic_ulong tail; /* entries checked, by the collector */
    struct window e[LOG];
};

static struct {
    tk_region *r;
    atomic_int stop;
    atomic_long seq; /* the collection under way or last begun; the first is 1 */
    atomic_long writes;
    struct page_log log[NPAGES];
} wr;

static void *writer_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t seed = 0x1234567ULL * (uint64_t)(id + 1);
    volatile long *base = tk_region_base(wr.r);
    size_t per_page = tk_region_page_size(wr.r) / sizeof(long);
    while (!atomic_load(&wr.stop)) {
        size_t p = (size_t)id + WRITERS * (tk_test_rand(&seed) % (NPAGES / WRITERS));
        struct page_log *l = &wr.log[p];
        unsigned long h = atomic_load(&l->head);
        if (h - atomic_load(&l->tail) >= LOG - 1) {
            sched_yield(); /* the collector has yet to check this page's entries */
            continue;
        }
        atomic_store(&l->busy, 1);
        long b = atomic_load(&wr.seq);
        base[p * per_page] = base[p * per_page] + 1;
        atomic_thread_fence(memory_order_seq_cst);
        long c = atomic_load(&wr.seq);
        struct window *last = h ? &l->e[(h - 1) % LOG] : NULL;
        if (last && last->b == b && last->c == c) {
            atomic_fetch_add(&last->writes, 1);
        } else {
            struct window *e = &l->e[h % LOG];
            e->b = b;
            e->c = c;
            atomic_store(&e->writes, 1);
            atomic_store(&l->head, h + 1);
        }
        atomic_store(&l->busy, 0);
        atomic_fetch_add(&wr.writes, 1);
    }
    return NULL;
}

/* bit k of reported[p]: collection k reported page p */
static uint64_t reported[NPAGES][MAX_COLLECTIONS / 64];

static bool was_reported(size_t p, long k)
{
    return k >= 1 && k < MAX_COLLECTIONS && (reported[p][k / 64] >> (k % 64) & 1);
}

static struct {
    long explained[NPAGES]; /* page p's reports before this collection are checked */
    long prev_c[NPAGES];    /* the previous window of page p ends at prev_c + 1 */
    long page_writes[NPAGES];
    long windows, twice;
} ck;

/* Checks page p's windows that no write still to come can overlap, now that
 * collections 1 .. k are done (a write not yet logged, its writer not busy,
 * has b >= k).  final: the writers have stopped and collection k came after. */
static void check_page(size_t p, long k, bool final)
{
    struct page_log *l = &wr.log[p];
    if (atomic_load(&l->busy)) return; /* a write between b and its entry: next time */
    unsigned long head = atomic_load(&l->head), t;
    for (t = atomic_load(&l->tail); t < head; t++) {
        struct window *e = &l->e[t % LOG];
        if (!final && e->c + 2 > k) break; /* collection c + 1 may not be done */
        long lo = e->b, hi = e->c + 1, nw = atomic_load(&e->writes);
        /* never lost: some collection of the window reported the page */
        long n = 0;
        for (long j = lo; j <= hi; j++) n += was_reported(p, j);
        if (n == 0) {
            fprintf(stderr,
                    "FAIL: page %zu: %ld writes, begun after collection %ld began and done "
                    "before %ld began, reported by none of collections %ld..%ld\n",
                    p, nw, lo, hi, lo, hi);
            exit(1);
        }
        /* and no report that no write explains, before this window */
        for (long j = ck.explained[p]; j < lo; j++) {
            if (was_reported(p, j)) {
                fprintf(stderr,
                        "FAIL: page %zu reported by collection %ld, though no write to it "
                        "was under way (its windows: ..%ld, %ld..%ld)\n",
                        p, j, ck.prev_c[p] + 1, lo, hi);
                exit(1);
            }
        }
        /* One write, reported by two collections that no other window of
         * this page reaches (the previous ones end before explained, the next
         * begins at next_b, or at k or later if not logged yet): its write
         * was in flight across a collection. */
        long next_b = t + 1 < head ? l->e[(t + 1) % LOG].b : (final ? hi + 1 : k);
        long alone = 0;
        for (long j = lo > ck.explained[p] ? lo : ck.explained[p]; j <= hi && j < next_b; j++)
            alone += was_reported(p, j);
        if (nw == 1 && alone >= 2) ck.twice++;
        if (hi + 1 > ck.explained[p]) ck.explained[p] = hi + 1;
        ck.prev_c[p] = e->c;
        ck.page_writes[p] += nw;
        ck.windows++;
    }
    atomic_store(&l->tail, t);
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, TK_REGION_DIRTY);
    if (m == TK_MECH_SOFT_DIRTY) {
        /* soft-dirty cannot be exact with concurrent writers; single-threaded only */
    }
    uint64_t seed = 42;
    size_t ps = tk_test_page();

    /* Hardware pages. */
    tk_region *r = tk_test_region(m, NPAGES, TK_REGION_DIRTY, NULL, NULL);
    uint64_t bm[NPAGES / 64];
    CHECK(tk_dirty(r, bm, NPAGES) == 0); /* nothing written since creation */
    round_trip(r, NPAGES, ps, &seed);

    /* The user's protections do not hide writes from DIRTY. */
    volatile char *base = tk_region_base(r);
    CHECK_OK(tk_protn(r, (void *)base, 4 * ps, TK_PROT_READ));
    CHECK_OK(tk_unprot(r, (void *)base, 4 * ps));
    base[2 * ps] = 1;
    CHECK(tk_dirty(r, bm, NPAGES) == 1 && bm[0] == 4);
    CHECK(tk_dirty(r, bm, NPAGES) == 0); /* written once: not reported again */
    CHECK_ERR(tk_dirty(r, bm, NPAGES - 1), -EINVAL);
    CHECK_OK(tk_region_destroy(r));

    /* Logical pages of 4 hardware pages. */
    tk_region_config cfg = {
        .len = NPAGES * 4 * ps, .mech = m, .page_size = 4 * ps, .flags = TK_REGION_DIRTY};
    CHECK_OK(tk_region_create(&cfg, &r));
    CHECK(((uintptr_t)tk_region_base(r) & (4 * ps - 1)) == 0);
    round_trip(r, NPAGES, 4 * ps, &seed);
    CHECK_OK(tk_region_destroy(r));

    /* Not a DIRTY region. */
    r = tk_test_region(m, 4, 0, NULL, NULL);
    CHECK_ERR(tk_dirty(r, bm, NPAGES), -EINVAL);
    CHECK_OK(tk_region_destroy(r));

    if (m == TK_MECH_SOFT_DIRTY) {
        printf("dirty on %s: ok (single-threaded: soft-dirty cannot be exact under writers)\n",
               tk_mech_name(m));
        return 0;
    }

    /* Writers racing collection (see writer_main). */
    r = tk_test_region(m, NPAGES, TK_REGION_DIRTY, NULL, NULL);
    wr.r = r;
    for (size_t p = 0; p < NPAGES; p++) ck.prev_c[p] = -1;
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        CHECK(pthread_create(&th[i], NULL, writer_main, (void *)(intptr_t)i) == 0);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long k = 0, total_reported = 0, busy_collections = 0;
    for (;;) {
        k = atomic_fetch_add(&wr.seq, 1) + 1;
        long n = tk_dirty(r, bm, NPAGES);
        CHECK(n >= 0);
        total_reported += n;
        busy_collections += n > 0;
        for (size_t p = 0; p < NPAGES; p++)
            if (bm[p / 64] >> (p % 64) & 1) reported[p][k / 64] |= (uint64_t)1 << (k % 64);
        for (size_t p = 0; p < NPAGES; p++) check_page(p, k, false);
        /* Let the writers in before the next collection (they wait on the
         * region's lock while it runs, and a collector calling tk_dirty back
         * to back keeps them waiting: few collections would race a write):
         * sleep until they have done some writes, or for 2 ms. */
        struct timespec tw;
        clock_gettime(CLOCK_MONOTONIC, &tw);
        for (long w0 = atomic_load(&wr.writes); atomic_load(&wr.writes) - w0 < INTERVAL_WRITES;) {
            nanosleep(&(struct timespec){0, 20 * 1000}, NULL);
            clock_gettime(CLOCK_MONOTONIC, &t);
            if ((t.tv_sec - tw.tv_sec) * 1000000000L + t.tv_nsec - tw.tv_nsec > 2000000) break;
        }
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((busy_collections >= COLLECTIONS && atomic_load(&wr.writes) >= MIN_WRITES) ||
            k >= MAX_COLLECTIONS - 2 || t.tv_sec - t0.tv_sec >= MAX_SECONDS)
            break;
    }
    atomic_store(&wr.stop, 1);
    for (int i = 0; i < WRITERS; i++) pthread_join(th[i], NULL);
    /* After the writers stop, one collection reports the rest, and the
     * next nothing (a sequential part again: every write is done). */
    k = atomic_fetch_add(&wr.seq, 1) + 1;
    long n = tk_dirty(r, bm, NPAGES);
    CHECK(n >= 0);
    total_reported += n;
    for (size_t p = 0; p < NPAGES; p++)
        if (bm[p / 64] >> (p % 64) & 1) reported[p][k / 64] |= (uint64_t)1 << (k % 64);
    volatile long *lb = tk_region_base(r);
    size_t per_page = ps / sizeof(long);
    for (size_t p = 0; p < NPAGES; p++) {
        check_page(p, k, true);
        for (long j = ck.explained[p]; j <= k; j++) {
            if (was_reported(p, j)) {
                fprintf(stderr,
                        "FAIL: page %zu reported by collection %ld, though no write to it was "
                        "under way (its last writes were seen by collections ..%ld)\n",
                        p, j, ck.prev_c[p] + 1);
                return 1;
            }
        }
        /* every write landed */
        if (lb[p * per_page] != ck.page_writes[p]) {
            fprintf(stderr, "FAIL: page %zu: %ld writes logged, counter %ld\n", p,
                    ck.page_writes[p], lb[p * per_page]);
            return 1;
        }
    }
    if (atomic_load(&wr.writes) == 0) {
        fprintf(stderr, "FAIL: the writers wrote nothing in %ld collections\n", k);
        return 1;
    }
    n = tk_dirty(r, bm, NPAGES);
    if (n != 0) {
        fprintf(stderr,
                "FAIL: %ld pages reported again after the writers stopped and one "
                "collection reported their writes\n",
                n);
        return 1;
    }
    /* and exact again, single-threaded */
    round_trip(r, NPAGES, ps, &seed);
    CHECK_OK(tk_region_destroy(r));
    printf("dirty on %s: ok (%ld collections under %d writers, %ld of them reporting pages: %ld "
           "writes in %ld windows, %ld pages reported, all written; %ld page writes reported by "
           "two collections, in flight across one)\n",
           tk_mech_name(m), k, WRITERS, busy_collections, atomic_load(&wr.writes), ck.windows,
           total_reported, ck.twice);
    return 0;
}
