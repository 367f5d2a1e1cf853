/* DIRTY with two regions: collecting one leaves the other's record alone
 * (soft-dirty resets the bits of the whole process, so trapkit keeps the
 * other regions' bits before each reset), and tk_discard'ed pages count as
 * written in each.  soft-dirty may report more than was written, never
 * less: the kernel marks a whole mapping soft-dirty when a new mapping (the
 * next region) extends it. */
#include <string.h>
#include <sys/mman.h>

#include "testutil.h"

#define NPAGES 8

static enum tk_mech m;

static bool dirty_is(tk_region *r, uint64_t want)
{
    return tk_test_dirty_is(r, m, want);
}

int main(int argc, char **argv)
{
    m = tk_test_mech(argc, argv, TK_REGION_DIRTY);
    size_t ps = tk_test_page();
    tk_region *a = tk_test_region(m, NPAGES, TK_REGION_DIRTY, NULL, NULL);
    char *pa = tk_region_base(a);
    tk_region *b = tk_test_region(m, NPAGES, TK_REGION_DIRTY, NULL, NULL);
    char *pb = tk_region_base(b);
    for (int round = 0; round < 3; round++) {
        pa[1 * ps] = 1;
        pb[2 * ps] = 2;
        CHECK(dirty_is(a, 1u << 1));
        pb[3 * ps] = 3;
        CHECK(dirty_is(b, 1u << 2 | 1u << 3));
        CHECK(dirty_is(a, 0));
        CHECK(dirty_is(b, 0));
        /* a region made now starts clean and takes nothing from the others */
        pa[4 * ps] = 4;
        tk_region *c = tk_test_region(m, NPAGES, TK_REGION_DIRTY, NULL, NULL);
        CHECK(dirty_is(c, 0));
        CHECK(dirty_is(a, 1u << 4));
        CHECK_OK(tk_region_destroy(c));
    }
    /* (last: on uffd-thread the kernel's removal event may mark the page
     * again after the collection that reported it) */
    CHECK_OK(tk_discard(b, pb + 5 * ps, ps));
    CHECK(dirty_is(a, 0));
    CHECK(dirty_is(b, 1u << 5));
    CHECK_OK(tk_region_destroy(a));
    CHECK_OK(tk_region_destroy(b));
    printf("two regions on %s: ok\n", tk_mech_name(m));
    return 0;
}
