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

/* The time-stamp counter, and its rate measured against CLOCK_MONOTONIC
 * once per run (for figures of a few microseconds, split at a boundary the
 * clock cannot see across, such as signal delivery). */
static inline uint64_t bench_tsc(void)
{
    return __builtin_ia32_rdtsc();
}
double bench_tsc_per_ns(void);

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
