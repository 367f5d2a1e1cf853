/* bench/gcwork.h - what the garbage-collection workloads share (gcbench.c,
 * gc_lisp.c, gc_trees.c, gc_interp.c): each is one source built against
 * two collectors, with -DUSE_TRAPKIT_GC against trapkit's
 * (<trapkit/gc_compat.h>), else against bdwgc (<gc.h>), and each measures
 * and reports the same way:
 *
 *   gcw_option        --incremental and --pauses, the options all take
 *   gcw_setup         the TSC's rate, GC_INIT, GC_enable_incremental (a
 *                     collector this machine cannot give: exit 77, the reason
 *                     on stderr)
 *   gcw_start         the mappings and the clock at the first allocation
 *   gcw_malloc(_atomic) GC_MALLOC with --pauses' timing; exits when out of memory
 *   GCW_STORE         a pointer stored into a collector object through
 *                     GC_WRITE (trapkit's card barrier sees only those), counted
 *   gcw_untimed       the program's own work up to here was no pause
 *   gcw_stop          the total time, taken when the work is done
 *   gcw_report        one JSON line on stdout (and trapkit's own account of
 *                     its stops on stderr)
 *   gcw_rand, gcw_mix a fixed-seed PRNG and a hash, for results that are the
 *                     same on both collectors and on every run
 *
 * --incremental: GC_enable_incremental() (bdwgc: its incremental mode, the
 * mprotect write barrier; trapkit: mostly-concurrent marking with its best
 * barrier).  --pauses: the time from each allocation's return to the next
 * one's is taken (rdtsc; the program does a few instructions between), and
 * those longer than 20 us are the pauses (a collection inside the
 * allocation, or the world stopped between): max and p99 of them.  The
 * timing lengthens the run, so the total time comes from a run without it.
 *
 * The JSON object: collector, incremental, what the program adds (its
 * size, its checksum), total_ms, collections, heap_mib, timed, pauses,
 * max_pause_ms, p99_pause_ms, mappings_start and _end (/proc/self/maps
 * lines), maxrss_mib, pointer_stores (through GC_WRITE), dirty_pages and
 * minor_collections (trapkit: the written pages its barrier reported, its
 * minor collections; -1 with bdwgc), world_stopped_ms and
 * world_stopped_total_ms (the collector's own account of its stops of the
 * world: trapkit's statistics, bdwgc's collection events), and the pauses
 * by length (pause_hist: how many fell between each two of
 * pause_hist_edges_ms, the last past the last edge).
 *
 * Static inline functions and one static state: include it from one .c
 * file per program, after defining _GNU_SOURCE.
 */
#ifndef TK_BENCH_GCWORK_H
#define TK_BENCH_GCWORK_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <x86intrin.h>

#ifdef USE_TRAPKIT_GC
#include <trapkit/gc_compat.h>
#define GCW_COLLECTOR "trapkit"
#else
#include <gc.h>
#define GCW_COLLECTOR "bdwgc"
#define GC_WRITE(lvalue, v) ((lvalue) = (v)) /* (bdwgc's barriers are the page table's) */
#endif

static struct gcw_state {
    const char *prog; /* the program's name, for messages */
    int incremental, timing;
    unsigned long pointer_stores; /* through GCW_STORE */
    double tsc_per_us;
    uint64_t pause_threshold, last_return; /* TSC cycles */
    uint64_t *pause_cycles;                /* the pauses (malloc'd: not a root) */
    size_t npauses, pauses_cap;
    long maps0;
    double t0, total_s;
    uint64_t stw_start, stw_max, stw_total, stw_count; /* bdwgc's stops of the world (TSC) */
} gcw;

/* an allocation gap longer than this is a pause (20 us) */
#define GCW_PAUSE_MS 0.02

#define GCW_STORE(lvalue, v) (gcw.pointer_stores++, GC_WRITE(lvalue, v))

static inline double gcw_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The mappings the process has (/proc/self/maps lines). */
static inline long gcw_mappings(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return -1;
    long n = 0;
    for (int c; (c = getc(f)) != EOF;) n += c == '\n';
    fclose(f);
    return n;
}

/* 1 if arg is one of the options every workload takes. */
static inline int gcw_option(const char *arg)
{
    if (!strcmp(arg, "--incremental"))
        gcw.incremental = 1;
    else if (!strcmp(arg, "--pauses"))
        gcw.timing = 1;
    else
        return 0;
    return 1;
}

/* The options of a workload that takes --scale F besides the common ones;
 * returns F (1 by default), or exits 2 with the usage. */
static inline double gcw_scaled_args(int argc, char **argv, const char *prog)
{
    double scale = 1;
    for (int i = 1; i < argc; i++) {
        if (gcw_option(argv[i])) continue;
        if (!strcmp(argv[i], "--scale") && i + 1 < argc && atof(argv[i + 1]) > 0) {
            scale = atof(argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--incremental] [--pauses] [--scale F]\n", prog);
            exit(2);
        }
    }
    return scale;
}

#ifndef USE_TRAPKIT_GC
/* bdwgc's own account of its stops of the world, as trapkit's
 * tk_gc_stats: from before it stops the world to after it restarts it
 * (its incremental mode's marking inside allocations, with the world
 * running, is not in it: the allocation gaps are). */
static void GC_CALLBACK gcw_on_event(GC_EventType e)
{
    if (e == GC_EVENT_PRE_STOP_WORLD) {
        gcw.stw_start = __rdtsc();
    } else if (e == GC_EVENT_POST_START_WORLD && gcw.stw_start) {
        uint64_t d = __rdtsc() - gcw.stw_start;
        gcw.stw_start = 0;
        gcw.stw_total += d;
        gcw.stw_count++;
        if (d > gcw.stw_max) gcw.stw_max = d;
    }
}
#endif

static inline void gcw_setup(const char *prog)
{
    gcw.prog = prog;
    /* the TSC's rate, against the monotonic clock */
    double c0 = gcw_now_s();
    uint64_t r0 = __rdtsc();
    while (gcw_now_s() - c0 < 0.02) {
    }
    gcw.tsc_per_us = (double)(__rdtsc() - r0) / ((gcw_now_s() - c0) * 1e6);
    gcw.pause_threshold = (uint64_t)(GCW_PAUSE_MS * 1e3 * gcw.tsc_per_us);
#ifdef USE_TRAPKIT_GC
    /* (GC_INIT says nothing when the collector cannot be had: a barrier
     * TRAPKIT_GC_BARRIER names that this machine lacks) */
    int err = tk_gc_init();
    if (err) {
        fprintf(stderr, "%s: %s\n", prog, tk_last_error());
        exit(err == -EOPNOTSUPP ? 77 : 1);
    }
#endif
    GC_INIT();
#ifndef USE_TRAPKIT_GC
    GC_set_on_collection_event(gcw_on_event);
#endif
    if (gcw.incremental) GC_enable_incremental();
}

static inline void gcw_start(void)
{
    gcw.maps0 = gcw_mappings();
    gcw.t0 = gcw_now_s();
    gcw.last_return = __rdtsc();
}

/* From the previous allocation's return to this one's: a collection inside
 * the allocation, and the world stopped anywhere between (a concurrent
 * collector's marker thread stops it at any point). */
static inline void gcw_lap(void)
{
    uint64_t t = __rdtsc(), d = t - gcw.last_return;
    gcw.last_return = t;
    if (d > gcw.pause_threshold) {
        if (gcw.npauses == gcw.pauses_cap) {
            gcw.pauses_cap = gcw.pauses_cap ? gcw.pauses_cap * 2 : 1024;
            gcw.pause_cycles = realloc(gcw.pause_cycles, gcw.pauses_cap * sizeof(uint64_t));
            if (!gcw.pause_cycles) abort();
        }
        gcw.pause_cycles[gcw.npauses++] = d;
    }
}

/* The program did work of its own since the last allocation (filling an
 * array, checking a structure): not a pause. */
static inline void gcw_untimed(void)
{
    gcw.last_return = __rdtsc();
}

static inline void gcw_out_of_memory(void)
{
    fprintf(stderr, "%s: out of memory\n", gcw.prog);
    exit(1);
}

static inline void *gcw_malloc(size_t n)
{
    void *p = GC_MALLOC(n);
    if (gcw.timing) gcw_lap();
    if (!p) gcw_out_of_memory();
    return p;
}

/* An object the collector does not scan (no pointers in it); its contents
 * are not cleared. */
static inline void *gcw_malloc_atomic(size_t n)
{
    void *p = GC_MALLOC_ATOMIC(n);
    if (gcw.timing) gcw_lap();
    if (!p) gcw_out_of_memory();
    return p;
}

static inline void gcw_stop(void)
{
    gcw.total_s = gcw_now_s() - gcw.t0;
}

static inline int gcw_cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Prints the JSON line; extra is the program's own fields, each followed
 * by ", " (printed after "incremental"). */
static inline void gcw_report(const char *extra)
{
    long dirty_pages = -1, minors = -1; /* the pages the barrier reported written, the minor
                                         * collections (trapkit) */
#ifdef USE_TRAPKIT_GC
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    dirty_pages = (long)st.dirty_pages;
    minors = (long)st.minor_collections;
    fprintf(stderr,
            "%s: trapkit: %llu collections (%llu concurrent), world stopped at most %.3f ms "
            "(stopping it %.3f ms), %.1f ms in all; concurrent marking %.1f ms; %llu allocation "
            "waits\n",
            gcw.prog, (unsigned long long)st.collections, (unsigned long long)st.concurrent_cycles,
            st.max_pause_ns / 1e6, st.max_handshake_ns / 1e6, st.total_pause_ns / 1e6,
            st.concurrent_mark_ns / 1e6, (unsigned long long)st.allocation_waits);
#endif
    double stw_max_ms, stw_total_ms;
#ifdef USE_TRAPKIT_GC
    stw_max_ms = st.max_pause_ns / 1e6;
    stw_total_ms = st.total_pause_ns / 1e6;
#else
    stw_max_ms = gcw.stw_max / gcw.tsc_per_us / 1e3;
    stw_total_ms = gcw.stw_total / gcw.tsc_per_us / 1e3;
#endif
    long maps1 = gcw_mappings();
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double maxp = 0, p99 = 0;
    /* the pauses' distribution: how many were at least each edge (ms) and
     * shorter than the next */
    static const double edges[] = {GCW_PAUSE_MS, 0.05, 0.1, 0.2, 0.5, 1,   2,   5,
                                   10,           20,   50,  100, 200, 500, 1000};
    enum { NE = sizeof edges / sizeof edges[0] };
    size_t hist[NE] = {0};
    if (gcw.npauses) {
        qsort(gcw.pause_cycles, gcw.npauses, sizeof(uint64_t), gcw_cmp_u64);
        maxp = gcw.pause_cycles[gcw.npauses - 1] / gcw.tsc_per_us / 1e3;
        p99 = gcw.pause_cycles[(size_t)((gcw.npauses - 1) * 0.99)] / gcw.tsc_per_us / 1e3;
        for (size_t i = 0; i < gcw.npauses; i++) {
            double ms = gcw.pause_cycles[i] / gcw.tsc_per_us / 1e3;
            size_t b = 0;
            while (b + 1 < NE && ms >= edges[b + 1]) b++;
            hist[b]++;
        }
    }
    char hs[512], es[256];
    int hn = 0, en = 0;
    for (size_t b = 0; b < NE; b++) {
        hn += snprintf(hs + hn, sizeof hs - (size_t)hn, "%s%zu", b ? ", " : "", hist[b]);
        en += snprintf(es + en, sizeof es - (size_t)en, "%s%g", b ? ", " : "", edges[b]);
    }
    printf(
        "{\"collector\": \"%s\", \"incremental\": %s, %s\"total_ms\": %.1f, "
        "\"collections\": %zu, \"heap_mib\": %.1f, \"timed\": %s, \"pauses\": %zu, "
        "\"max_pause_ms\": %.3f, \"p99_pause_ms\": %.3f, \"mappings_start\": %ld, "
        "\"mappings_end\": %ld, \"maxrss_mib\": %.1f, \"pointer_stores\": %lu, "
        "\"dirty_pages\": %ld, \"minor_collections\": %ld, \"world_stopped_ms\": %.3f, "
        "\"world_stopped_total_ms\": %.1f, \"pause_hist_edges_ms\": [%s], \"pause_hist\": [%s]}\n",
        GCW_COLLECTOR, gcw.incremental ? "true" : "false", extra, gcw.total_s * 1e3,
        (size_t)GC_get_gc_no(), GC_get_heap_size() / 1048576.0, gcw.timing ? "true" : "false",
        gcw.npauses, maxp, p99, gcw.maps0, maps1, ru.ru_maxrss / 1024.0, gcw.pointer_stores,
        dirty_pages, minors, stw_max_ms, stw_total_ms, es, hs);
}

/* A fixed-seed PRNG (splitmix64): the same sequence on every run. */
static inline uint64_t gcw_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* A value folded into a running hash (results, never addresses). */
static inline uint64_t gcw_mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

#endif
