/* Fault storm: 8 threads write to pages a ninth thread keeps re-protecting,
 * until 100,000 faults have been handled or 150 s have passed (a slow
 * mechanism on a slow machine); at least 10,000 must have been.  Many threads fault on the same
 * page at once; each must resume correctly (its write lands), and the handler must see
 * TK_FAULT_RESOLVED when another thread got there first. */
#include <pthread.h>
#include <time.h>
#include <stdatomic.h>
#include <string.h>
#include "testutil.h"

#define THREADS 8
#define NPAGES 64
#define TARGET_FAULTS 100000
#define MIN_FAULTS 10000

static atomic_long faults, resolved, unprotects;
static atomic_int stop;
static tk_region *region;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    atomic_fetch_add(&faults, 1);
    if (f->flags & TK_FAULT_RESOLVED) {
        atomic_fetch_add(&resolved, 1);
        return TK_RESUME;
    }
    if (f->access != TK_ACCESS_WRITE) return TK_DECLINE;
    if (tk_unprot(f->region, f->page, tk_region_page_size(f->region)) < 0) return TK_DECLINE;
    atomic_fetch_add(&unprotects, 1);
    return TK_RESUME;
}

struct worker {
    int id;
    long writes;
    pthread_t th;
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(w->id + 1);
    size_t ps = tk_region_page_size(region);
    volatile long *base = tk_region_base(region);
    while (!atomic_load(&stop)) {
        /* all threads crowd onto a few pages to collide */
        size_t p = tk_test_rand(&seed) % (NPAGES / 8);
        volatile long *slot = base + (p * ps) / sizeof(long) + w->id;
        long v = *slot;
        *slot = v + 1; /* only this thread writes this slot */
        w->writes++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, 0);
    size_t ps = tk_test_page();
    region = tk_test_region(m, NPAGES, 0, on_fault, NULL);
    void *base = tk_region_base(region);
    CHECK_OK(tk_protn(region, base, NPAGES * ps, TK_PROT_READ));

    struct worker w[THREADS];
    for (int i = 0; i < THREADS; i++) {
        w[i].id = i;
        w[i].writes = 0;
        CHECK(pthread_create(&w[i].th, NULL, worker_main, &w[i]) == 0);
    }
    long rounds = 0;
    time_t deadline = time(NULL) + 150;
    while (atomic_load(&faults) < TARGET_FAULTS && time(NULL) < deadline) {
        CHECK_OK(tk_protn(region, base, NPAGES * ps, TK_PROT_READ));
        rounds++;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < THREADS; i++) pthread_join(w[i].th, NULL);

    /* Every write landed: each slot holds its thread's write count, summed
     * over pages. */
    volatile long *lb = base;
    for (int i = 0; i < THREADS; i++) {
        long sum = 0;
        for (size_t p = 0; p < NPAGES; p++) sum += lb[(p * ps) / sizeof(long) + i];
        if (sum != w[i].writes) {
            fprintf(stderr, "thread %d: %ld writes but %ld in memory\n", i, w[i].writes, sum);
            return 1;
        }
    }
    CHECK(atomic_load(&faults) >= MIN_FAULTS);
    CHECK_OK(tk_region_destroy(region));
    printf(
        "storm on %s: ok: %ld faults (%ld already resolved), %ld unprotects, %ld re-protections\n",
        tk_mech_name(m), atomic_load(&faults), atomic_load(&resolved), atomic_load(&unprotects),
        rounds);
    return 0;
}
