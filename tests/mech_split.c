/* A region whose range the kernel keeps as several mappings: the user's own
 * madvise (MADV_DONTDUMP here) splits it without changing any protection,
 * and mprotect splits it too.  Protection, faults, DIRTY and unprotection
 * over the whole range work as on one mapping.  (Linux 6.1 refuses a
 * userfaultfd write-protect range that spans mappings; make kernel-test runs
 * this there.) */
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "testutil.h"

#define NPAGES 16

static atomic_int faults;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    atomic_fetch_add(&faults, 1);
    return tk_test_open(f);
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, TK_REGION_DIRTY);
    size_t ps = tk_test_page();
    tk_region *r = tk_test_region(m, NPAGES, TK_REGION_DIRTY, on_fault, NULL);
    char *b = tk_region_base(r);
    uint64_t bm[1];
    memset(b, 1, NPAGES * ps);
    CHECK_OK(tk_dirty(r, bm, 64));

    /* three mappings, then five */
    CHECK(madvise(b + 4 * ps, 4 * ps, MADV_DONTDUMP) == 0);
    CHECK_OK(tk_prot1(r, b + 12 * ps, TK_PROT_NONE));

    for (int round = 0; round < 3; round++) {
        CHECK_OK(tk_protn(r, b, 12 * ps, TK_PROT_READ));
        for (int p = 0; p < 12; p++) CHECK(tk_protection(r, b + p * ps) == TK_PROT_READ);
        int before = atomic_load(&faults);
        for (int p = 0; p < 12; p += 3) b[p * ps] = (char)(round + 2); /* each caught */
        CHECK(atomic_load(&faults) == before + 4);
        CHECK(b[12 * ps] == 1); /* no-access: caught, opened */
        CHECK(atomic_load(&faults) == before + 5);
        CHECK_OK(tk_unprot(r, b, NPAGES * ps));
        before = atomic_load(&faults);
        for (int p = 0; p < NPAGES; p++) b[p * ps + 1] = (char)round; /* none caught */
        CHECK(atomic_load(&faults) == before);
        /* every page written this interval, across all the mappings */
        CHECK(tk_dirty(r, bm, 64) == NPAGES && bm[0] == (1u << NPAGES) - 1);
        CHECK(tk_dirty(r, bm, 64) == 0);
        CHECK_OK(tk_prot1(r, b + 12 * ps, TK_PROT_NONE));
    }
    CHECK_OK(tk_region_destroy(r));
    printf("split on %s: ok\n", tk_mech_name(m));
    return 0;
}
