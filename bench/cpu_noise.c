/* bench/cpu_noise.c - how long a running thread can lose its CPU on this
 * machine when every CPU is busy: one thread per CPU spins reading the
 * time stamp counter for the given seconds and keeps the longest gap
 * between two readings (a timer interrupt, the kernel's work, or a
 * virtual machine's vCPU not run by the host).  A program whose threads
 * keep every CPU busy (a concurrent collector's marker beside the program)
 * sees stalls this long that are no one's pause.
 *
 *   cpu_noise [SECONDS]
 *
 * Prints one JSON object: cpus, seconds, max_gap_ms (the longest of all
 * threads), and gaps_over_half_ms (their number).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <x86intrin.h>

static double secs = 1, tsc_per_ms;

struct res {
    uint64_t max, over;
};

static void *spin(void *arg)
{
    struct res *r = arg;
    uint64_t start = __rdtsc(), last = start, end = start + (uint64_t)(secs * 1e3 * tsc_per_ms);
    uint64_t half = (uint64_t)(tsc_per_ms / 2);
    while (last < end) {
        uint64_t t = __rdtsc(), d = t - last;
        last = t;
        if (d > r->max) r->max = d;
        if (d > half) r->over++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1) secs = atof(argv[1]);
    if (!(secs > 0)) {
        fprintf(stderr, "usage: cpu_noise [SECONDS]\n");
        return 2;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    uint64_t r0 = __rdtsc();
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6 < 20);
    tsc_per_ms =
        (double)(__rdtsc() - r0) / ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    pthread_t *th = calloc((size_t)n, sizeof *th);
    struct res *rs = calloc((size_t)n, sizeof *rs);
    if (!th || !rs) return 1;
    for (long i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, spin, &rs[i]) != 0) return 1;
    uint64_t mx = 0, over = 0;
    for (long i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        if (rs[i].max > mx) mx = rs[i].max;
        over += rs[i].over;
    }
    printf("{\"cpus\": %ld, \"seconds\": %.1f, \"max_gap_ms\": %.3f, \"gaps_over_half_ms\": %lu}\n",
           n, secs, mx / tsc_per_ms, (unsigned long)over);
    return 0;
}
