/* sim/workloads/jacobi.c - Jacobi relaxation of Laplace's equation on an
 * N x N grid of doubles, K sweeps, column by column (the grid is stored by
 * rows, so each step of a sweep moves a row further: a page per access
 * once a row is a page or more).
 * Usage: jacobi [N [K]]   (default 512 4) */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 512, k = argc > 2 ? atol(argv[2]) : 4;
    double *a = calloc((size_t)(n * n), sizeof *a), *b = calloc((size_t)(n * n), sizeof *b);
    if (!a || !b) return 1;
    for (long i = 0; i < n; i++) a[i] = b[i] = 100.0; /* a hot top edge */
    for (long it = 0; it < k; it++) {
        for (long j = 1; j < n - 1; j++)
            for (long i = 1; i < n - 1; i++)
                b[i * n + j] = 0.25 * (a[(i - 1) * n + j] + a[(i + 1) * n + j] + a[i * n + j - 1] +
                                       a[i * n + j + 1]);
        double *t = a;
        a = b;
        b = t;
    }
    double sum = 0;
    for (long i = 0; i < n * n; i++) sum += a[i] * (double)(i % 13);
    printf("jacobi: %ldx%ld, %ld sweeps, checksum %.6f\n", n, n, k, sum);
    return 0;
}
