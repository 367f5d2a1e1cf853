/* bench/gcbench.c - GCBench (after Boehm's description of Ellis and
 * Kovac's benchmark), one source for two collectors: built with
 * -DUSE_TRAPKIT_GC against trapkit's (<trapkit/gc_compat.h>), else
 * against bdwgc (<gc.h>).
 *
 * A tree of depth 18 is built and dropped (the heap stretched), a tree of
 * depth 16 and an array of 500,000 doubles stay live throughout, and for
 * depths 4, 6, ..., 16 as many trees as fill the stretched heap twice are
 * built top-down and bottom-up and dropped.  --live-mib N grows the
 * long-lived structure to about N MiB (more trees of depth 16, kept).
 * Pointers are stored into nodes with GC_WRITE: trapkit's software card
 * barrier (tk_gc_write) under TRAPKIT_GC_BARRIER=cards, a store and a
 * card's byte under its other barriers, a plain store with bdwgc.
 *
 *   gcbench [--incremental] [--live-mib N] [--pauses] [--store-cost]
 *
 * --incremental: GC_enable_incremental() (bdwgc: its incremental mode, the
 * mprotect write barrier; trapkit: generational with its best barrier).
 * --pauses: the time from each allocation's return to the next one's is
 * taken (rdtsc; the program does a few instructions between), and those
 * longer than 20 us are the pauses (a collection inside the allocation, or
 * the world stopped between): max and p99 of them; the timing itself
 * lengthens the run, so the total time comes from a run without it.  Prints one JSON object:
 * total_ms, collections, heap_mib, max_pause_ms, p99_pause_ms, pauses,
 * mappings_start and _end, maxrss_mib, pointer_stores (into nodes, through
 * GC_WRITE) and dirty_pages (trapkit: the written pages its barrier
 * reported).  --store-cost: only what a store through GC_WRITE costs
 * beyond a plain one (store_check_ns).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <x86intrin.h>

#ifdef USE_TRAPKIT_GC
#include <trapkit/gc_compat.h>
#define COLLECTOR "trapkit"
#else
#include <gc.h>
#define COLLECTOR "bdwgc"
#define GC_WRITE(lvalue, v) ((lvalue) = (v)) /* (bdwgc's barriers are the page table's) */
#endif

typedef struct Node0 {
    struct Node0 *left, *right;
    int i, j;
} Node;

enum { kStretchTreeDepth = 18, kLongLivedTreeDepth = 16, kArraySize = 500000 };
enum { kMinTreeDepth = 4, kMaxTreeDepth = 16 };

static int timing;
static unsigned long pointer_stores; /* into nodes (the card barrier's stores) */
#define STORE(lvalue, v) (pointer_stores++, GC_WRITE(lvalue, v))
static double tsc_per_us;
static uint64_t *pause_cycles;
static size_t npauses, pauses_cap;
static uint64_t pause_threshold, last_return;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static Node *new_node(Node *l, Node *r)
{
    Node *n;
    if (timing) {
        /* from the previous allocation's return to this one's: a collection
         * inside the allocation, and the world stopped anywhere between
         * (a concurrent collector's marker thread stops it at any point) */
        n = GC_MALLOC(sizeof(Node));
        uint64_t t = __rdtsc(), d = t - last_return;
        last_return = t;
        if (d > pause_threshold) {
            if (npauses == pauses_cap) {
                pauses_cap = pauses_cap ? pauses_cap * 2 : 1024;
                pause_cycles = realloc(pause_cycles, pauses_cap * sizeof *pause_cycles);
                if (!pause_cycles) abort();
            }
            pause_cycles[npauses++] = d;
        }
    } else {
        n = GC_MALLOC(sizeof(Node));
    }
    if (!n) {
        fprintf(stderr, "gcbench: out of memory\n");
        exit(1);
    }
    STORE(n->left, l);
    STORE(n->right, r);
    return n;
}

static int tree_size(int i)
{
    return (1 << (i + 1)) - 1;
}

static int num_iters(int i)
{
    return 2 * tree_size(kStretchTreeDepth) / tree_size(i);
}

/* Builds the tree below n top-down. */
static void populate(int depth, Node *n)
{
    if (depth <= 0) return;
    depth--;
    STORE(n->left, new_node(NULL, NULL));
    STORE(n->right, new_node(NULL, NULL));
    populate(depth, n->left);
    populate(depth, n->right);
}

/* Builds a tree bottom-up. */
static Node *make_tree(int depth)
{
    if (depth <= 0) return new_node(NULL, NULL);
    Node *l = make_tree(depth - 1), *r = make_tree(depth - 1);
    return new_node(l, r);
}

static void time_construction(int depth)
{
    int n = num_iters(depth);
    for (int i = 0; i < n; i++) {
        Node *t = new_node(NULL, NULL);
        populate(depth, t);
    }
    for (int i = 0; i < n; i++) {
        Node *t = make_tree(depth);
        (void)t;
    }
}

/* The mappings the process has (/proc/self/maps lines). */
static long mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    long n = 0;
    for (int c; (c = getc(f)) != EOF;) n += c == '\n';
    fclose(f);
    return n;
}

/* What a store through GC_WRITE costs beyond a plain one, in ns: 2^24
 * stores of each kind into the nodes of a small array, alternated five
 * times, the least of each. */
static double store_check_ns(void)
{
    enum { N = 1 << 12, REPS = 1 << 12 };
    Node **a = GC_MALLOC(sizeof *a * N);
    Node *v = new_node(NULL, NULL);
    if (!a || !v) return -1;
    for (int i = 0; i < N; i++) a[i] = new_node(NULL, NULL);
    double best[2] = {1e30, 1e30};
    for (int round = 0; round < 5; round++)
        for (int kind = 0; kind < 2; kind++) {
            double t0 = now_s();
            for (int r = 0; r < REPS; r++)
                for (int i = 0; i < N; i++) {
                    if (kind)
                        GC_WRITE(a[i]->left, v);
                    else
                        a[i]->left = v;
                    __asm__ volatile("" ::: "memory"); /* one store at a time */
                }
            double t = now_s() - t0;
            if (t < best[kind]) best[kind] = t;
        }
    return (best[1] - best[0]) * 1e9 / ((double)N * REPS);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The long-lived data: global, so both collectors see it as a root. */
static Node *long_lived[4096];
static double *array;

int main(int argc, char **argv)
{
    int incremental = 0, barrier_cost = 0;
    double live_mib = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--incremental"))
            incremental = 1;
        else if (!strcmp(argv[i], "--pauses"))
            timing = 1;
        else if (!strcmp(argv[i], "--store-cost"))
            barrier_cost = 1;
        else if (!strcmp(argv[i], "--live-mib") && i + 1 < argc)
            live_mib = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: gcbench [--incremental] [--live-mib N] [--pauses] "
                            "[--store-cost]\n");
            return 2;
        }
    }
    /* the TSC's rate, against the monotonic clock */
    double c0 = now_s();
    uint64_t r0 = __rdtsc();
    while (now_s() - c0 < 0.02) {
    }
    tsc_per_us = (double)(__rdtsc() - r0) / ((now_s() - c0) * 1e6);
    pause_threshold = (uint64_t)(20 * tsc_per_us);

    GC_INIT();
    if (incremental) GC_enable_incremental();
    if (barrier_cost) {
        printf("{\"collector\": \"%s\", \"store_check_ns\": %.3f}\n", COLLECTOR, store_check_ns());
        return 0;
    }
    long maps0 = mappings();
    double t0 = now_s();
    last_return = __rdtsc();

    Node *temp = make_tree(kStretchTreeDepth); /* stretch the heap */
    (void)temp;
    temp = NULL;

    /* the long-lived tree(s): one of depth 16 (~1 MiB), or trees enough
     * for --live-mib */
    size_t ntrees = 1;
    size_t per_tree = (size_t)tree_size(kLongLivedTreeDepth) * 32; /* bytes, a node's slot */
    if (live_mib > 0) ntrees = (size_t)(live_mib * 1048576 / per_tree) + 1;
    if (ntrees > sizeof long_lived / sizeof long_lived[0])
        ntrees = sizeof long_lived / sizeof long_lived[0];
    for (size_t k = 0; k < ntrees; k++) {
        long_lived[k] = new_node(NULL, NULL);
        populate(kLongLivedTreeDepth, long_lived[k]);
    }
    array = GC_MALLOC_ATOMIC(sizeof(double) * kArraySize);
    for (int i = 0; i < kArraySize / 2; i++) array[i] = 1.0 / i;
    last_return = __rdtsc(); /* (filling the array is the program's work, not a pause) */

    for (int d = kMinTreeDepth; d <= kMaxTreeDepth; d += 2) time_construction(d);

    if (!long_lived[0] || array[1000] != 1.0 / 1000) {
        fprintf(stderr, "gcbench: the long-lived data was lost\n");
        return 1;
    }
    double total = now_s() - t0;
    long dirty_pages = -1; /* the pages the barrier reported written (trapkit) */
#ifdef USE_TRAPKIT_GC
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    dirty_pages = (long)st.dirty_pages;
    fprintf(stderr,
            "gcbench: trapkit: %llu collections (%llu concurrent), world stopped at most %.3f ms "
            "(stopping it %.3f ms), %.1f ms in all; concurrent marking %.1f ms; %llu allocation "
            "waits\n",
            (unsigned long long)st.collections, (unsigned long long)st.concurrent_cycles,
            st.max_pause_ns / 1e6, st.max_handshake_ns / 1e6, st.total_pause_ns / 1e6,
            st.concurrent_mark_ns / 1e6, (unsigned long long)st.allocation_waits);
#endif
    long maps1 = mappings();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double maxp = 0, p99 = 0;
    if (npauses) {
        qsort(pause_cycles, npauses, sizeof *pause_cycles, cmp_u64);
        maxp = pause_cycles[npauses - 1] / tsc_per_us / 1e3;
        p99 = pause_cycles[(size_t)((npauses - 1) * 0.99)] / tsc_per_us / 1e3;
    }
    printf("{\"collector\": \"%s\", \"incremental\": %s, \"live_mib\": %.0f, \"total_ms\": %.1f, "
           "\"collections\": %zu, \"heap_mib\": %.1f, \"timed\": %s, \"pauses\": %zu, "
           "\"max_pause_ms\": %.3f, \"p99_pause_ms\": %.3f, \"mappings_start\": %ld, "
           "\"mappings_end\": %ld, \"maxrss_mib\": %.1f, \"pointer_stores\": %lu, "
           "\"dirty_pages\": %ld}\n",
           COLLECTOR, incremental ? "true" : "false", live_mib, total * 1e3, (size_t)GC_get_gc_no(),
           GC_get_heap_size() / 1048576.0, timing ? "true" : "false", npauses, maxp, p99, maps0,
           maps1, ru.ru_maxrss / 1024.0, pointer_stores, dirty_pages);
    return 0;
}
