/* DIRTY with writers racing collection.  Two writer threads each write every
 * page of their half of the region exactly once per round, in a shuffled
 * order, while a collector calls tk_dirty() in a tight loop.  Per round every
 * page must be reported (never lost), by a collection no earlier than the one
 * under way when its write began and at last by the one that followed its
 * completion.  On posix and uffd-sigbus a page written once is reported
 * once: trapkit completes the write under its lock by emulation, or (for
 * an instruction it does not emulate: every fourth page is written by an
 * x87 store) a collection holds back a page whose write is in flight (its
 * fault handled, its instruction not yet completed).  On uffd-thread and
 * pagemap-scan nothing in user space sees the retry, and such a page is
 * reported again after it (region.h); the test counts those pages.
 * soft-dirty cannot be exact under concurrent writers (a write between the
 * read of the bits and their reset is lost, region.h): skipped there. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include "testutil.h"

#define NPAGES 512
#define WRITERS 2
#define MAX_ROUNDS 40
#define SECONDS 4

static tk_region *region;
static size_t ps;
static atomic_long seq;     /* the number of the collection under way (or last) */
static atomic_int round_no; /* the round the writers should do; -1 = stop */
static atomic_int writers_done;
static long began[NPAGES], completed[NPAGES]; /* seq around each page's write */
static int reports[NPAGES];
static long reported_at[NPAGES], first_report[NPAGES];

static void *writer(void *arg)
{
    int id = (int)(intptr_t)arg;
    uint64_t rng = 0x1234567ULL * (uint64_t)(id + 1);
    int done_round = 0;
    size_t order[NPAGES / WRITERS];
    for (;;) {
        int rn;
        while ((rn = atomic_load(&round_no)) == done_round) sched_yield();
        if (rn < 0) return NULL;
        size_t n = NPAGES / WRITERS;
        for (size_t i = 0; i < n; i++) order[i] = (size_t)id + i * WRITERS;
        for (size_t i = n - 1; i > 0; i--) {
            size_t j = tk_test_rand(&rng) % (i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (size_t i = 0; i < n; i++) {
            size_t p = order[i];
            began[p] = atomic_load(&seq);
            long *at = (long *)((char *)tk_region_base(region) + p * ps) + p % 64;
            if (p % 4 == 3) {
                /* an x87 store: not one trapkit emulates, so it single-steps */
                double v = rn * 1000 + 1;
                __asm__ volatile("fldl %1\n\tfstpl %0" : "=m"(*at) : "m"(v) : "memory");
            } else {
                *(volatile long *)at = rn * 1000 + 1;
            }
            completed[p] = atomic_load(&seq);
        }
        done_round = rn;
        atomic_fetch_add(&writers_done, 1);
    }
}

static void collect(uint64_t *bm)
{
    long k = atomic_fetch_add(&seq, 1) + 1;
    long n = tk_dirty(region, bm, NPAGES);
    CHECK(n >= 0);
    for (size_t p = 0; p < NPAGES; p++) {
        if (bm[p / 64] & ((uint64_t)1 << (p % 64))) {
            if (reports[p]++ == 0) first_report[p] = k;
            reported_at[p] = k;
        }
    }
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, TK_REGION_DIRTY);
    if (m == TK_MECH_SOFT_DIRTY) {
        printf("SKIP: soft-dirty loses a write racing its collection (by design, region.h)\n");
        return TK_SKIP;
    }
    ps = tk_test_page();
    region = tk_test_region(m, NPAGES, TK_REGION_DIRTY, NULL, NULL);
    uint64_t bm[NPAGES / 64];
    collect(bm);
    memset(reports, 0, sizeof reports);
    pthread_t th[WRITERS];
    for (int i = 0; i < WRITERS; i++)
        CHECK(pthread_create(&th[i], NULL, writer, (void *)(intptr_t)i) == 0);
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rounds = 0;
    long total_reports = 0, doubles = 0;
    for (int rn = 1; rn <= MAX_ROUNDS; rn++) {
        atomic_store(&writers_done, 0);
        atomic_store(&round_no, rn);
        while (atomic_load(&writers_done) < WRITERS) collect(bm);
        /* everything written: two more collections report the rest */
        collect(bm);
        collect(bm);
        for (size_t p = 0; p < NPAGES; p++) {
            doubles += reports[p] > 1;
            if (reports[p] < 1) {
                fprintf(stderr,
                        "FAIL: round %d: page %zu written (in collection %ld, completed by "
                        "%ld) and never reported\n",
                        rn, p, began[p], completed[p]);
                return 1;
            }
            if (first_report[p] < began[p] || reported_at[p] > completed[p] + 1) {
                fprintf(stderr,
                        "FAIL: round %d: page %zu reported by collection %ld; its write began "
                        "in %ld and completed by %ld\n",
                        rn, p, reported_at[p], began[p], completed[p]);
                return 1;
            }
        }
        memset(reports, 0, sizeof reports);
        total_reports += NPAGES;
        rounds = rn;
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec >= SECONDS) break;
    }
    atomic_store(&round_no, -1);
    for (int i = 0; i < WRITERS; i++) pthread_join(th[i], NULL);
    /* Only a writer descheduled for a second between its fault and its
     * retry would be reported twice. */
    bool exact = m == TK_MECH_POSIX || m == TK_MECH_UFFD_SIGBUS;
    if (exact && doubles > 0) {
        fprintf(stderr, "FAIL: %ld pages written once were reported more than once\n", doubles);
        return 1;
    }
    printf("%s: %d rounds, %ld collections, %ld page writes all reported, %ld of them more than "
           "once (in flight across a collection)\n",
           argv[1], rounds, atomic_load(&seq), total_reports, doubles);
    CHECK_OK(tk_region_destroy(region));
    return 0;
}
