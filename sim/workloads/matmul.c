/* sim/workloads/matmul.c - C = A x B for N x N doubles by the plain
 * triple loop (i, j, k: B is walked down its columns).
 * Usage: matmul [N]   (default 160) */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 160;
    double *a = malloc((size_t)(n * n) * sizeof *a), *b = malloc((size_t)(n * n) * sizeof *b),
           *c = malloc((size_t)(n * n) * sizeof *c);
    if (!a || !b || !c) return 1;
    for (long i = 0; i < n * n; i++) {
        a[i] = (double)(i % 17) / 16.0;
        b[i] = (double)(i % 23) / 8.0 - 1.0;
    }
    for (long i = 0; i < n; i++)
        for (long j = 0; j < n; j++) {
            double s = 0;
            for (long k = 0; k < n; k++) s += a[i * n + k] * b[k * n + j];
            c[i * n + j] = s;
        }
    double sum = 0;
    for (long i = 0; i < n * n; i++) sum += c[i] * (double)(i % 7 + 1);
    printf("matmul: %ldx%ld, checksum %.6f\n", n, n, sum);
    return 0;
}
