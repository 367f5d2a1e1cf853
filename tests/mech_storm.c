/* Fault storm: 8 threads write to pages a ninth thread keeps re-protecting,
 * until 100,000 faults have been handled or 150 s have passed (a slow
 * mechanism on a slow machine); at least 10,000 must have been (a tenth of the
 * target, which TK_TEST_STORM_FAULTS lowers for the ThreadSanitizer build,
 * where a fault costs a hundred times more; the counts of flagged faults
 * below are required of a full run only).  Many threads fault on the same
 * page at once; each must resume correctly (its write lands), and the handler must see
 * TK_FAULT_RESOLVED when another thread got there first: with 8 threads crowding onto 8 pages
 * some faults must have been flagged so over the run, and a fault flagged so must find the page
 * already open for its access (tk_protection) unless the re-protecting thread may have run
 * between the flag and the look.
 *
 * Whether it may have run is told by a sequence count the re-protecting thread makes odd while
 * it re-protects and even again after.  The handler compares the count now with one read
 * before the flag was set: read by the faulting thread before its write where the handler
 * runs in that thread (posix, uffd-sigbus, pagemap-scan), and on trapkit's service thread
 * (uffd-thread, TK_FAULT_THREAD) read when this thread's previous handler call ended, since
 * the service thread takes its events one after another and sets the flag of the next only
 * after.  (The faulting thread's own count would not do there: the service thread may serve
 * an event its thread has already left behind, woken by another fault's unprotect.) */
#include <pthread.h>
#include <time.h>
#include <stdatomic.h>
#include <string.h>
#include "testutil.h"

#define THREADS 8
#define NPAGES 64
#define TARGET_FAULTS 100000L

static atomic_long faults, resolved, unprotects;
static atomic_int stop;
static tk_region *region;

/* Odd while the re-protecting thread re-protects (see the top). */
static atomic_long reprotect_seq;
#define SEQ_UNKNOWN (-1L)
/* This thread's count from before the fault: set by a writer before each
 * write, by a service thread at the end of each handler call. */
static __thread long seq_before = SEQ_UNKNOWN;
/* Faults flagged TK_FAULT_RESOLVED whose page was looked at with no
 * re-protection possible since the flag; those that found it closed. */
static atomic_long resolved_checked, resolved_closed;
static atomic_int closed_prot;
static _Atomic(void *) closed_page;

/* The flag said the page allows the access; with no re-protection since,
 * only unprotects (to TK_PROT_RW) can have happened. */
static void check_resolved(const tk_fault *f)
{
    long before = seq_before;
    if (before == SEQ_UNKNOWN || (before & 1)) return;
    int prot = tk_protection(f->region, f->page);
    atomic_thread_fence(memory_order_seq_cst);
    if (atomic_load(&reprotect_seq) != before) return;
    atomic_fetch_add(&resolved_checked, 1);
    bool allows = f->access == TK_ACCESS_WRITE ? prot == TK_PROT_RW
                                               : prot == TK_PROT_READ || prot == TK_PROT_RW;
    if (!allows && atomic_fetch_add(&resolved_closed, 1) == 0) {
        atomic_store(&closed_prot, prot);
        atomic_store(&closed_page, f->page);
    }
}

static tk_action handle(const tk_fault *f)
{
    atomic_fetch_add(&faults, 1);
    if (f->flags & TK_FAULT_RESOLVED) {
        atomic_fetch_add(&resolved, 1);
        check_resolved(f);
        return TK_RESUME;
    }
    if (f->access != TK_ACCESS_WRITE) return TK_DECLINE;
    if (tk_unprot(f->region, f->page, tk_region_page_size(f->region)) < 0) return TK_DECLINE;
    atomic_fetch_add(&unprotects, 1);
    return TK_RESUME;
}

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    tk_action act = handle(f);
    /* the next event this service thread takes is flagged after this */
    if (f->flags & TK_FAULT_THREAD) seq_before = atomic_load(&reprotect_seq);
    return act;
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
        seq_before = atomic_load(&reprotect_seq);
        *slot = v + 1; /* only this thread writes this slot */
        w->writes++;
    }
    return NULL;
}

static long ms_since(const struct timespec *t0)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, 0);
    long target = TARGET_FAULTS;
    const char *env = getenv("TK_TEST_STORM_FAULTS");
    if (env && atol(env) > 0 && atol(env) < target) target = atol(env);
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
    struct timespec busy_from;
    clock_gettime(CLOCK_MONOTONIC, &busy_from);
    time_t deadline = time(NULL) + 150;
    while (atomic_load(&faults) < target && time(NULL) < deadline) {
        atomic_fetch_add(&reprotect_seq, 1);
        atomic_thread_fence(memory_order_seq_cst);
        CHECK_OK(tk_protn(region, base, NPAGES * ps, TK_PROT_READ));
        atomic_thread_fence(memory_order_seq_cst);
        atomic_fetch_add(&reprotect_seq, 1);
        rounds++;
        /* After every 5 ms of re-protecting, a quiet spell: the threads
         * crowd onto freshly re-protected pages with no re-protection under
         * way, so the faults flagged TK_FAULT_RESOLVED meanwhile can be
         * checked. */
        if (ms_since(&busy_from) >= 5) {
            nanosleep(&(struct timespec){0, 200 * 1000}, NULL);
            clock_gettime(CLOCK_MONOTONIC, &busy_from);
        }
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
    CHECK(atomic_load(&faults) >= target / 10);
    /* Eight threads on eight pages: another thread got there first at least
     * once (over a full run: a shortened one may see none on the uffd
     * mechanisms, where it is rarer). */
    bool full = target == TARGET_FAULTS;
    if (atomic_load(&resolved) == 0 && full) {
        fprintf(stderr, "FAIL: %ld faults, none flagged TK_FAULT_RESOLVED\n", atomic_load(&faults));
        return 1;
    }
    if (atomic_load(&resolved_closed) > 0) {
        fprintf(stderr,
                "FAIL: %ld of %ld faults flagged TK_FAULT_RESOLVED (and not re-protected since) "
                "found their page closed: page %p has protection %d\n",
                atomic_load(&resolved_closed), atomic_load(&resolved_checked),
                atomic_load(&closed_page), atomic_load(&closed_prot));
        return 1;
    }
    /* (the quiet spells make sure the look above was taken) */
    if (atomic_load(&resolved_checked) == 0 && full) {
        fprintf(stderr, "FAIL: %ld faults flagged TK_FAULT_RESOLVED, none checked\n",
                atomic_load(&resolved));
        return 1;
    }
    CHECK_OK(tk_region_destroy(region));
    printf("storm on %s: ok: %ld faults (%ld already resolved, %ld of them checked open), %ld "
           "unprotects, %ld re-protections\n",
           tk_mech_name(m), atomic_load(&faults), atomic_load(&resolved),
           atomic_load(&resolved_checked), atomic_load(&unprotects), rounds);
    return 0;
}
