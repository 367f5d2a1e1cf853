/* Opening a span of pages in one call (tk__unprot_span, what the
 * checkpointer's helper uses to open copied pages among those writers
 * opened already): every page of the span ends open whatever it was -
 * write-protected, open already, read-only by itself, no-access - and
 * writes to it no longer trap; pages outside the span keep their
 * protection and trap as before. */
#include <stdatomic.h>
#include <string.h>
#include "testutil.h"

int tk__unprot_span(struct tk_region *r, void *addr, size_t len); /* src/core/internal.h */

static atomic_int faults;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    faults++;
    return tk_test_open(f);
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, 0);
    size_t ps = tk_test_page();
    enum { N = 48 };
    tk_region *r = tk_test_region(m, N, 0, on_fault, NULL);
    volatile char *base = tk_region_base(r);
    for (int i = 0; i < N; i++) base[i * ps] = (char)i;

    /* write-protected, with open pages scattered among them (as writers
     * leave them), a no-access one and a run of open ones */
    CHECK_OK(tk_protn(r, (void *)base, N * ps, TK_PROT_READ));
    int open_ones[] = {5, 9, 10, 11, 30, 31, 32, 33};
    for (size_t k = 0; k < sizeof open_ones / sizeof *open_ones; k++)
        CHECK_OK(tk_unprot(r, (void *)(base + open_ones[k] * ps), ps));
    CHECK_OK(tk_prot1(r, (void *)(base + 20 * ps), TK_PROT_NONE));
    CHECK(faults == 0);

    /* the span [4, 40): starts on a protected page, holds every kind */
    CHECK_OK(tk__unprot_span(r, (void *)(base + 4 * ps), 36 * ps));
    for (int i = 4; i < 40; i++) CHECK(tk_protection(r, (void *)(base + i * ps)) == TK_PROT_RW);
    for (int i = 4; i < 40; i++) {
        CHECK(base[i * ps] == (char)i);
        base[i * ps + 1] = (char)(i + 1);
    }
    CHECK(faults == 0);

    /* outside it: still read-only, and a write traps once per page */
    int outside[] = {0, 3, 40, 47};
    for (size_t k = 0; k < sizeof outside / sizeof *outside; k++) {
        int i = outside[k];
        CHECK(tk_protection(r, (void *)(base + i * ps)) == TK_PROT_READ);
        int before = faults;
        base[i * ps + 1] = 7;
        CHECK(faults == before + 1);
        CHECK(base[i * ps] == (char)i && base[i * ps + 1] == 7);
    }

    /* a span of open pages only, and one starting and ending open */
    CHECK_OK(tk__unprot_span(r, (void *)(base + 4 * ps), 4 * ps));
    CHECK_OK(tk_protn(r, (void *)(base + 41 * ps), 4 * ps, TK_PROT_READ));
    CHECK_OK(tk_unprot(r, (void *)(base + 41 * ps), ps));
    CHECK_OK(tk_unprot(r, (void *)(base + 44 * ps), ps));
    CHECK_OK(tk__unprot_span(r, (void *)(base + 41 * ps), 4 * ps));
    int before = faults;
    for (int i = 41; i < 45; i++) base[i * ps + 2] = 1;
    CHECK(faults == before);

    /* bad input, as tk_unprot */
    CHECK(tk__unprot_span(r, (void *)(base + 1), ps) == -EINVAL);
    CHECK(tk__unprot_span(r, (void *)(base + N * ps), ps) == -EINVAL);
    tk_region_destroy(r);
    return 0;
}
