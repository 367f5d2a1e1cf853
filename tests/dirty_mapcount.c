/* DIRTY on posix when the kernel cannot split the mapping any further:
 * writes to every other page of a large region make mprotect fail at
 * vm.max_map_count.  trapkit must not hang on the fault: the interval
 * degrades to "every writable page dirty" (a superset, nothing lost), says
 * so, and the next interval is exact again. */
#include <string.h>
#include "testutil.h"

int main(void)
{
    long max = 65530;
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    if (f) {
        if (fscanf(f, "%ld", &max) != 1) max = 65530;
        fclose(f);
    }
    size_t writes = (size_t)max / 2 + 1000; /* enough splits to run out */
    if (writes > 200000) {
        printf("SKIP: vm.max_map_count is %ld, too large to exhaust here\n", max);
        return TK_SKIP;
    }
    size_t ps = tk_test_page(), n = 2 * writes;
    tk_region *r = tk_test_region(TK_MECH_POSIX, n, TK_REGION_DIRTY, NULL, NULL);
    char *base = tk_region_base(r);
    size_t words = (n + 63) / 64;
    uint64_t *bm = calloc(words, 8);
    CHECK_OK(tk_dirty(r, bm, n));

    for (size_t i = 0; i < writes; i++) base[2 * i * ps] = 1; /* must not hang */
    long got = tk_dirty(r, bm, n);
    CHECK(got >= (long)writes);
    for (size_t i = 0; i < writes; i++) CHECK(bm[(2 * i) / 64] & (1ull << ((2 * i) % 64)));
    CHECK(got == (long)n); /* degraded: every page */
    CHECK(strstr(tk_last_error(), "max_map_count") != NULL);

    /* the next interval is exact again */
    base[5 * ps] = 2;
    base[777 * ps] = 2;
    CHECK(tk_dirty(r, bm, n) == 2);
    CHECK(bm[0] == (1ull << 5) && (bm[777 / 64] & (1ull << (777 % 64))));
    CHECK_OK(tk_region_destroy(r));
    free(bm);
    printf("dirty at vm.max_map_count: ok: %zu writes, degraded to all %zu pages, then exact\n",
           writes, n);
    return 0;
}
