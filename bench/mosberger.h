/* bench/mosberger.h - what the two files of bench_mosberger share. */
#ifndef TK_BENCH_MOSBERGER_H
#define TK_BENCH_MOSBERGER_H

#include <stdint.h>

#include "bench.h"

typedef uint64_t (*runner)(long n);

#define BARRIER() __asm__ volatile("" ::: "memory")
#define TIMED(n, body)                                                                             \
    do {                                                                                           \
        uint64_t t0 = bench_tsc();                                                                 \
        for (long i = 0; i < (n); i++) {                                                           \
            body;                                                                                  \
            BARRIER();                                                                             \
        }                                                                                          \
        return bench_tsc() - t0;                                                                   \
    } while (0)

/* the LIFO and FIFO operations without protection (mosberger_unprot.c) */
uint64_t lifo_unprot(long n);
uint64_t fifo_unprot(long n);

#endif
