/* sim/workloads/qsort.c - glibc's qsort on N random integers.
 * Usage: qsort [N]   (default 200000) */
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 200000;
    int *v = malloc((size_t)n * sizeof *v);
    if (!v) return 1;
    unsigned s = 12345;
    for (long i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        v[i] = (int)(s >> 4);
    }
    qsort(v, (size_t)n, sizeof *v, cmp);
    unsigned long sum = 0;
    for (long i = 1; i < n; i++) {
        if (v[i - 1] > v[i]) {
            printf("not sorted at %ld\n", i);
            return 1;
        }
        sum = sum * 31 + (unsigned)v[i];
    }
    printf("qsort: %ld integers sorted, checksum %lu\n", n, sum);
    free(v);
    return 0;
}
