#include "bench.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void bench_parse(int argc, char **argv, struct bench_opts *o)
{
    o->quick = false;
    o->reps = 7;
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

void bench_emit(const char *experiment, const char *mechanism, const char *params,
                const char *metric, const char *unit, struct bench_fig *f)
{
    if (f->n == 0) {
        bench_emit_null(experiment, mechanism, params, metric, unit, "no repetition completed");
        return;
    }
    qsort(f->v, (size_t)f->n, sizeof f->v[0], cmp_double);
    double med = f->n % 2 ? f->v[f->n / 2] : (f->v[f->n / 2 - 1] + f->v[f->n / 2]) / 2;
    print_head(experiment, mechanism, params, metric, unit);
    printf(", \"median\": %.6g, \"min\": %.6g, \"max\": %.6g, \"n\": %d}\n", med, f->v[0],
           f->v[f->n - 1], f->n);
    fflush(stdout);
    fprintf(stderr, "  %-32s %-14s %-22s %12.4g %s  (min %.4g, max %.4g, n %d)\n", experiment,
            mechanism, params ? params : "", med, unit, f->v[0], f->v[f->n - 1], f->n);
    f->n = 0;
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

void bench_emit_null(const char *experiment, const char *mechanism, const char *params,
                     const char *metric, const char *unit, const char *reason)
{
    print_head(experiment, mechanism, params, metric, unit);
    printf(", \"median\": null, \"min\": null, \"max\": null, \"n\": 0, \"reason\": ");
    json_string(reason);
    printf("}\n");
    fflush(stdout);
    fprintf(stderr, "  %-32s %-14s %-22s %12s     (%s)\n", experiment, mechanism,
            params ? params : "", "-", reason);
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
