/* tests/gc_threads.c - four threads allocate and rewire their own graphs
 * at once while collections (started by whichever thread's allocation
 * crosses the threshold: full and minor, or with TRAPKIT_GC_CONCURRENT=1
 * cycles of the marker thread running beside them) stop them; each thread
 * checks every node it can reach, over and over, against a shadow of the
 * graph: every link also holds the id its target had when it was made
 * (outside the target), so a node reclaimed while reachable and handed
 * out again - or overwritten - fails the check.  Pointers are stored into
 * nodes with tk_gc_write.  argv[1]: the write barrier (none, pagemap-scan,
 * uffd-sigbus, uffd-thread, posix, cards; one this machine lacks is
 * skipped); argv[2]: seconds (default 3).  With TRAPKIT_GC_STOP=safepoints
 * the threads stop at their allocations and at the tk_gc_safepoint calls
 * of the checks, and the main thread waits inside tk_gc_do_blocking.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <trapkit/gc.h>
#include "testutil.h"

enum { T = 4, ROOTS = 256, STACK = 1 << 20 };

struct node {
    struct node *kid[2];
    uint64_t kid_id[2]; /* the shadow: each kid's id when it was linked */
    uint64_t id, sum, seen;
};

static struct node *roots[T][ROOTS];
static uint64_t root_id[T][ROOTS]; /* the shadow of the roots */
static atomic_bool stop;
static atomic_long checks, allocated;

static uint64_t sum_of(uint64_t id)
{
    return id * 0x9e3779b97f4a7c15ull + 3;
}

/* Checks every node reachable from thread t's roots; returns how many. */
static size_t check(int t, uint64_t epoch, struct node **stack)
{
    size_t n = 0, sp = 0;
    for (int r = 0; r < ROOTS; r++) {
        if (roots[t][r]) {
            if (roots[t][r]->id != root_id[t][r]) {
                fprintf(stderr, "thread %d: root %d's node %p has id %lu, not %lu: reclaimed\n", t,
                        r, (void *)roots[t][r], (unsigned long)roots[t][r]->id,
                        (unsigned long)root_id[t][r]);
                exit(1);
            }
            stack[sp++] = roots[t][r];
        }
        while (sp) {
            struct node *x = stack[--sp];
            if (x->sum != sum_of(x->id)) {
                fprintf(stderr,
                        "thread %d: node %p (id %lu) overwritten: reclaimed while reachable\n", t,
                        (void *)x, (unsigned long)x->id);
                exit(1);
            }
            if (x->seen == epoch) continue;
            x->seen = epoch;
            if (++n % 1024 == 0) tk_gc_safepoint();
            for (int k = 0; k < 2; k++)
                if (x->kid[k]) {
                    if (x->kid[k]->id != x->kid_id[k]) {
                        fprintf(stderr,
                                "thread %d: node %lu's kid %p has id %lu, not %lu: reclaimed while "
                                "reachable\n",
                                t, (unsigned long)x->id, (void *)x->kid[k],
                                (unsigned long)x->kid[k]->id, (unsigned long)x->kid_id[k]);
                        exit(1);
                    }
                    CHECK(sp < STACK);
                    stack[sp++] = x->kid[k];
                }
        }
    }
    return n;
}

static void *mutator(void *arg)
{
    int t = (int)(intptr_t)arg;
    struct node **stack = malloc(sizeof *stack * STACK);
    CHECK(stack);
    uint64_t seed = 0x1234567ull * (uint64_t)(t + 1), id = (uint64_t)t << 48, epoch = 0;
    long step = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        uint64_t r = tk_test_xorshift(&seed);
        struct node *n = tk_gc_malloc(sizeof *n);
        CHECK(n);
        n->id = ++id;
        n->sum = sum_of(n->id);
        struct node *at = roots[t][r % ROOTS];
        for (int d = (int)((r >> 12) % 8); at && d > 0; d--) {
            struct node *k = at->kid[(r >> (16 + d)) & 1];
            if (!k) break;
            at = k;
        }
        if (!at || (r >> 30) % 8 == 0) {
            roots[t][r % ROOTS] = n;
            root_id[t][r % ROOTS] = n->id;
        } else {
            tk_gc_write(&at->kid[(r >> 34) & 1], n); /* (the cards barrier sees it) */
            at->kid_id[(r >> 34) & 1] = n->id;
        }
        if ((r >> 40) % 32 == 0) roots[t][(r >> 20) % ROOTS] = NULL;
        if ((r >> 46) % 4 == 0) CHECK(tk_gc_malloc_atomic(100 + (r >> 50) % 400));
        if (++step % 4096 == 0) {
            check(t, ++epoch, stack);
            atomic_fetch_add(&checks, 1);
        }
    }
    atomic_fetch_add(&allocated, step);
    check(t, ++epoch, stack);
    free(stack);
    return NULL;
}

static void *sleep_until(void *arg)
{
    const struct timespec *ts = arg;
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, ts, NULL) == EINTR) {
    }
    return NULL;
}

static void *join(void *arg)
{
    CHECK(pthread_join(*(pthread_t *)arg, NULL) == 0);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    double secs = argc > 2 ? atof(argv[2]) : 3;
    setenv("TRAPKIT_GC_BARRIER", argv[1], 1);
    int err = tk_gc_init();
    if (err == -EOPNOTSUPP) tk_test_unavailable(argv[1]);
    CHECK_OK(err);
    if (strcmp(tk_gc_stop(), "safepoints") == 0) {
        /* no signal is needed to stop them: the collector's are blocked */
        sigset_t m;
        sigemptyset(&m);
        sigaddset(&m, SIGPWR);
        sigaddset(&m, SIGXCPU);
        CHECK(pthread_sigmask(SIG_BLOCK, &m, NULL) == 0);
    }
    pthread_t th[T];
    for (int t = 0; t < T; t++)
        CHECK(pthread_create(&th[t], NULL, mutator, (void *)(intptr_t)t) == 0);
    /* collections stop this thread too (a signal): sleep to a deadline */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)secs;
    ts.tv_nsec += (long)((secs - (time_t)secs) * 1e9);
    if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
    /* (under safepoints, a registered thread waits inside tk_gc_do_blocking) */
    tk_gc_do_blocking(sleep_until, &ts);
    /* and on until ten collections have run (a loaded machine is slower),
     * for a minute at most */
    for (int i = 0; i < 600; i++) {
        tk_gc_stats st;
        tk_gc_get_stats(&st);
        if (st.collections >= 10 && (!tk_gc_concurrent() || st.concurrent_cycles >= 5)) break;
        struct timespec tenth;
        clock_gettime(CLOCK_MONOTONIC, &tenth);
        tenth.tv_nsec += 100000000;
        if (tenth.tv_nsec >= 1000000000) tenth.tv_sec++, tenth.tv_nsec -= 1000000000;
        tk_gc_do_blocking(sleep_until, &tenth);
    }
    atomic_store(&stop, true);
    for (int t = 0; t < T; t++) tk_gc_do_blocking(join, &th[t]);
    tk_gc_collect();
    struct node **stack = malloc(sizeof *stack * STACK);
    CHECK(stack);
    size_t reachable = 0;
    for (int t = 0; t < T; t++) reachable += check(t, 1ull << 62, stack);
    free(stack);
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    printf("%s%s%s: %ld nodes allocated by %d threads, %ld checks, %lu collections (%lu minor, %lu "
           "concurrent; %lu allocations waited for the marker), max pause %.2f ms; %zu reachable "
           "at the end, live %lu bytes\n",
           tk_gc_barrier(), tk_gc_concurrent() ? " (concurrent)" : "",
           strcmp(tk_gc_stop(), "safepoints") == 0 ? " (safepoints)" : "", atomic_load(&allocated),
           T, atomic_load(&checks), (unsigned long)st.collections,
           (unsigned long)st.minor_collections, (unsigned long)st.concurrent_cycles,
           (unsigned long)st.allocation_waits, st.max_pause_ns / 1e6, reachable,
           (unsigned long)st.live_bytes);
    CHECK(st.collections >= 10);
    if (tk_gc_concurrent()) CHECK(st.concurrent_cycles >= 5);
    CHECK(st.live_bytes >= reachable * 48);
    CHECK(st.live_bytes <= reachable * 64 * 11 / 10 + (1u << 20));
    return 0;
}
