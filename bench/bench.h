/* bench/bench.h - what every trapkit benchmark shares.
 *
 * A benchmark prints one JSON object per figure on stdout (the format of
 * shared BENCHMARKING.md: experiment, mechanism, params, metric, unit,
 * median, min, max, n, and a reason when the figure could not be measured)
 * and a human-readable line per figure on stderr, which the report shows as
 * progress.  Times come from CLOCK_MONOTONIC around many iterations; each
 * figure is the median of at least 5 repetitions after a warm-up, with
 * competing mechanisms interleaved where a benchmark compares them.
 */
#ifndef TK_BENCH_H
#define TK_BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Options every benchmark takes: --quick (brief runs, for tests), --reps N. */
struct bench_opts {
    bool quick;
    int reps;
};
void bench_parse(int argc, char **argv, struct bench_opts *o);

static inline uint64_t bench_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A figure's repetitions: add one value per repetition, then emit. */
struct bench_fig {
    double v[64];
    int n;
};
void bench_add(struct bench_fig *f, double value);

/* params: a JSON object body without braces, e.g. "\"pages\": 100", or "". */
void bench_emit(const char *experiment, const char *mechanism, const char *params,
                const char *metric, const char *unit, struct bench_fig *f);
void bench_emit_value(const char *experiment, const char *mechanism, const char *params,
                      const char *metric, const char *unit, double value);
void bench_emit_null(const char *experiment, const char *mechanism, const char *params,
                     const char *metric, const char *unit, const char *reason);
/* The same with more fields: extra is a JSON object body without braces
 * (e.g. "\"derived\": true, \"derived_from\": [\"mosberger/signal\"]"),
 * or NULL.  A figure computed from other figures rather than measured says
 * so with "derived": true. */
void bench_emit_ex(const char *experiment, const char *mechanism, const char *params,
                   const char *metric, const char *unit, struct bench_fig *f, const char *extra);
void bench_emit_null_ex(const char *experiment, const char *mechanism, const char *params,
                        const char *metric, const char *unit, const char *reason,
                        const char *extra);

/* The time-stamp counter, read serialised at both ends: the lfence before
 * rdtsc waits for every earlier instruction to complete, the one after keeps
 * later instructions from starting before the counter is read, so a single
 * event between two readings is neither cut short nor padded by
 * out-of-order execution.  Every TSC reading of the benchmarks goes
 * through this one helper.  Its rate is measured against CLOCK_MONOTONIC
 * once per run (for figures of a few microseconds, split at a boundary the
 * clock cannot see across, such as signal delivery). */
static inline uint64_t bench_tsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("lfence\n\trdtsc\n\tlfence" : "=a"(lo), "=d"(hi)::"memory");
    return (uint64_t)hi << 32 | lo;
}
double bench_tsc_per_ns(void);

/* NULL if the TSC is invariant (CPUID leaf 0x80000007, EDX bit 8: constant
 * rate in every P-, C- and T-state), so its counts are cycles of one fixed
 * clock and convert to time; otherwise why figures taken with it are not
 * reported (emit them null with this reason). */
const char *bench_tsc_unusable(void);

/* bench_emit for a figure taken with the TSC: null with the reason of
 * bench_tsc_unusable() when the counter is not invariant. */
void bench_emit_tsc(const char *experiment, const char *mechanism, const char *params,
                    const char *metric, const char *unit, struct bench_fig *f);

/* CPUs this process may run on: the probe's count (trapkit probe, online
 * CPUs), or fewer if the affinity mask allows fewer.  No benchmark runs more
 * busy threads than this. */
int bench_ncpus(void);

/* k threads of this process spinning over their own 64 KiB each (so they
 * keep the process's page tables in use on their CPUs and a protection
 * change must shoot down their TLBs); bench_spinners_stop() joins them.
 * One set at a time; k at most 63. */
void bench_spinners_start(int k);
void bench_spinners_stop(void);

/* xorshift64* */
static inline uint64_t bench_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

/* Progress on stderr: "[name] message". */
void bench_progress(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
