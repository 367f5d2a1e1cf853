/* sim/workloads/hashtab.c - a chained hash table of N keys whose nodes are
 * allocated one by one (so a chain's nodes lie in unrelated pages), then
 * 2N lookups of random keys, half of them present: a pointer-heavy
 * program whose working set (about 40 bytes a key, 10 MiB at the default
 * N) is far beyond what a 128-entry TLB of 8 KiB pages maps (1 MiB).
 * Usage: hashtab [N]   (default 250000) */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct node {
    uint64_t key, value;
    struct node *next;
};

static uint64_t mix(uint64_t x) /* a 64-bit finaliser: the bucket */
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 250000;
    size_t nb = 1;
    while (nb < (size_t)n) nb <<= 1;
    struct node **bucket = calloc(nb, sizeof *bucket);
    if (!bucket) return 1;
    uint64_t s = 2463534242u;
    for (long i = 0; i < n; i++) { /* keys 2k + 1, k < n, in a scrambled order */
        struct node *e = malloc(sizeof *e);
        if (!e) return 1;
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        e->key = (((uint64_t)i * 2147483647u) % (uint64_t)n) * 2 + 1; /* a prime above n */
        e->value = s >> 16;
        size_t b = mix(e->key) & (nb - 1);
        e->next = bucket[b];
        bucket[b] = e;
    }
    uint64_t found = 0, sum = 0;
    for (long i = 0; i < 2 * n; i++) { /* odd keys are present, even ones not */
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t key = (s >> 20) % (2 * (uint64_t)n) + 1;
        for (struct node *e = bucket[mix(key) & (nb - 1)]; e; e = e->next)
            if (e->key == key) {
                found++;
                sum += e->value;
                break;
            }
    }
    printf("hashtab: %ld keys, %llu of %ld lookups found, checksum %llu\n", n,
           (unsigned long long)found, 2 * n, (unsigned long long)sum);
    return found > 0 ? 0 : 1;
}
