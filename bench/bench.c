#include "bench.h"

#include <cpuid.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trapkit/probe.h>

void bench_parse(int argc, char **argv, struct bench_opts *o)
{
    o->quick = false;
    o->reps = 5; /* BENCHMARKING.md: at least 5 */
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0) {
            o->quick = true;
        } else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            o->reps = atoi(argv[++i]);
        } else {
            fprintf(stderr, "usage: %s [--quick] [--reps N]\n", argv[0]);
            exit(2);
        }
    }
    if (o->quick && o->reps > 5) o->reps = 5;
    if (o->reps < 1) o->reps = 1;
    if (o->reps > 64) o->reps = 64;
}

void bench_add(struct bench_fig *f, double value)
{
    if (f->n < (int)(sizeof f->v / sizeof f->v[0])) f->v[f->n++] = value;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_head(const char *experiment, const char *mechanism, const char *params,
                       const char *metric, const char *unit)
{
    printf("{\"experiment\": \"%s\", \"mechanism\": \"%s\", \"params\": {%s}, \"metric\": \"%s\", "
           "\"unit\": \"%s\"",
           experiment, mechanism, params ? params : "", metric, unit);
}

static void print_extra(const char *extra)
{
    if (extra && *extra) printf(", %s", extra);
}

void bench_emit_ex(const char *experiment, const char *mechanism, const char *params,
                   const char *metric, const char *unit, struct bench_fig *f, const char *extra)
{
    if (f->n == 0) {
        bench_emit_null_ex(experiment, mechanism, params, metric, unit, "no repetition completed",
                           extra);
        return;
    }
    qsort(f->v, (size_t)f->n, sizeof f->v[0], cmp_double);
    double med = f->n % 2 ? f->v[f->n / 2] : (f->v[f->n / 2 - 1] + f->v[f->n / 2]) / 2;
    print_head(experiment, mechanism, params, metric, unit);
    printf(", \"median\": %.6g, \"min\": %.6g, \"max\": %.6g, \"n\": %d", med, f->v[0],
           f->v[f->n - 1], f->n);
    print_extra(extra);
    printf("}\n");
    fflush(stdout);
    fprintf(stderr, "  %-32s %-14s %-22s %12.4g %s  (min %.4g, max %.4g, n %d)\n", experiment,
            mechanism, params ? params : "", med, unit, f->v[0], f->v[f->n - 1], f->n);
    f->n = 0;
}

void bench_emit(const char *experiment, const char *mechanism, const char *params,
                const char *metric, const char *unit, struct bench_fig *f)
{
    bench_emit_ex(experiment, mechanism, params, metric, unit, f, NULL);
}

void bench_emit_value(const char *experiment, const char *mechanism, const char *params,
                      const char *metric, const char *unit, double value)
{
    struct bench_fig f = {.n = 0};
    bench_add(&f, value);
    bench_emit(experiment, mechanism, params, metric, unit, &f);
}

static void json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            printf("\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            printf("\\u%04x", *s);
        else
            putchar(*s);
    }
    putchar('"');
}

void bench_emit_null_ex(const char *experiment, const char *mechanism, const char *params,
                        const char *metric, const char *unit, const char *reason, const char *extra)
{
    print_head(experiment, mechanism, params, metric, unit);
    printf(", \"median\": null, \"min\": null, \"max\": null, \"n\": 0, \"reason\": ");
    json_string(reason);
    print_extra(extra);
    printf("}\n");
    fflush(stdout);
    fprintf(stderr, "  %-32s %-14s %-22s %12s     (%s)\n", experiment, mechanism,
            params ? params : "", "-", reason);
}

void bench_emit_null(const char *experiment, const char *mechanism, const char *params,
                     const char *metric, const char *unit, const char *reason)
{
    bench_emit_null_ex(experiment, mechanism, params, metric, unit, reason, NULL);
}

void bench_progress(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

double bench_tsc_per_ns(void)
{
    static double rate;
    if (rate > 0) return rate;
    uint64_t n0 = bench_now_ns(), c0 = bench_tsc();
    while (bench_now_ns() - n0 < 50000000) {
    }
    uint64_t n1 = bench_now_ns(), c1 = bench_tsc();
    rate = (double)(c1 - c0) / (double)(n1 - n0);
    return rate;
}

const char *bench_tsc_unusable(void)
{
    unsigned a, b, c, d;
    if (__get_cpuid_max(0x80000000u, NULL) < 0x80000007u)
        return "the CPU does not report whether its time-stamp counter is invariant (no CPUID "
               "leaf 0x80000007), so TSC counts are not reported as cycles or time";
    __cpuid(0x80000007u, a, b, c, d);
    (void)a, (void)b, (void)c;
    if (!(d & (1u << 8)))
        return "the time-stamp counter is not invariant here (CPUID 0x80000007 EDX bit 8 clear): "
               "its rate may change with the CPU's frequency and power states, so TSC counts are "
               "not reported as cycles or time";
    return NULL;
}

void bench_emit_tsc(const char *experiment, const char *mechanism, const char *params,
                    const char *metric, const char *unit, struct bench_fig *f)
{
    const char *why = bench_tsc_unusable();
    if (why) {
        bench_emit_null(experiment, mechanism, params, metric, unit, why);
        f->n = 0;
    } else {
        bench_emit(experiment, mechanism, params, metric, unit, f);
    }
}

int bench_ncpus(void)
{
    static int n;
    if (n > 0) return n;
    tk_probe_info p;
    tk_probe(&p);
    n = p.ncpus > 0 ? p.ncpus : 1;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0 && CPU_COUNT(&set) < n)
        n = CPU_COUNT(&set);
    return n;
}

static atomic_int spin_on;
static pthread_t spin_th[63];
static int spin_n;

static void *spinner(void *arg)
{
    (void)arg;
    volatile char *buf = calloc(64 * 1024, 1);
    unsigned long x = 0;
    while (atomic_load_explicit(&spin_on, memory_order_relaxed))
        for (size_t i = 0; i < 64 * 1024; i += 64) x += buf[i]++;
    free((void *)buf);
    return (void *)x;
}

void bench_spinners_start(int k)
{
    atomic_store(&spin_on, 1);
    spin_n = 0;
    for (int i = 0; i < k && i < 63; i++)
        if (pthread_create(&spin_th[spin_n], NULL, spinner, NULL) == 0) spin_n++;
}

void bench_spinners_stop(void)
{
    atomic_store(&spin_on, 0);
    for (int i = 0; i < spin_n; i++) pthread_join(spin_th[i], NULL);
    spin_n = 0;
}
