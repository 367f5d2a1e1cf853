/* PROT1, PROTN and UNPROT on one mechanism: a protected page traps on the
 * access it forbids, the handler sees the right address, page, access and
 * region, and after UNPROT the access completes. */
#include <stdatomic.h>
#include <string.h>
#include "testutil.h"

/* Written by the handler, read by the faulting code: atomics, since on
 * uffd-thread the handler runs on trapkit's thread and only the kernel
 * orders it with the faulting one. */
struct seen {
    atomic_int faults;
    _Atomic(void *) addr, page;
    _Atomic(enum tk_access) access;
    _Atomic(tk_region *) region;
};

static tk_action on_fault(const tk_fault *f, void *arg)
{
    struct seen *s = arg;
    s->faults++;
    s->addr = f->addr;
    s->page = f->page;
    s->access = f->access;
    s->region = f->region;
    if (tk_unprot(f->region, f->page, tk_region_page_size(f->region)) < 0) return TK_DECLINE;
    return TK_RESUME;
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, 0);
    size_t ps = tk_test_page();
    struct seen s = {0};
    tk_region *r = tk_test_region(m, 16, 0, on_fault, &s);
    volatile char *base = tk_region_base(r);

    /* PROT1 read-only: reads pass, a write traps once. */
    base[3 * ps + 10] = 1;
    CHECK_OK(tk_prot1(r, (void *)(base + 3 * ps), TK_PROT_READ));
    CHECK(tk_protection(r, (void *)(base + 3 * ps)) == TK_PROT_READ);
    CHECK(base[3 * ps + 10] == 1);
    CHECK(s.faults == 0);
    base[3 * ps + 17] = 42;
    CHECK(s.faults == 1);
    CHECK(s.addr == (void *)(base + 3 * ps + 17) ||
          (m == TK_MECH_UFFD_THREAD && s.page == (void *)(base + 3 * ps)));
    CHECK(s.page == (void *)(base + 3 * ps));
    CHECK(s.access == TK_ACCESS_WRITE);
    CHECK(s.region == r);
    CHECK(base[3 * ps + 17] == 42 && base[3 * ps + 10] == 1);
    CHECK(tk_protection(r, (void *)(base + 3 * ps)) == TK_PROT_RW);
    base[3 * ps + 18] = 43; /* no further trap */
    CHECK(s.faults == 1);

    /* PROTN no-access over 8 pages: a read traps on each. */
    for (int i = 4; i < 12; i++) base[i * ps] = (char)i;
    CHECK_OK(tk_protn(r, (void *)(base + 4 * ps), 8 * ps, TK_PROT_NONE));
    for (int i = 4; i < 12; i++) {
        int before = s.faults;
        CHECK(base[i * ps + 5] == 0 && base[i * ps] == (char)i);
        CHECK(s.faults == before + 1);
        CHECK(s.access == TK_ACCESS_READ);
        CHECK(s.page == (void *)(base + i * ps));
    }
    /* PROTN read-only over everything, then writes to each page trap once. */
    CHECK_OK(tk_protn(r, (void *)base, 16 * ps, TK_PROT_READ));
    int before = s.faults;
    for (int i = 0; i < 16; i++) base[i * ps + 1] = 7;
    CHECK(s.faults == before + 16);
    for (int i = 0; i < 16; i++) CHECK(base[i * ps + 1] == 7);

    /* Pages never touched are protected too (no population needed). */
    tk_region *r2 = tk_test_region(m, 4, 0, on_fault, &s);
    volatile char *b2 = tk_region_base(r2);
    CHECK_OK(tk_protn(r2, (void *)b2, 4 * ps, TK_PROT_READ));
    before = s.faults;
    b2[2 * ps] = 5;
    CHECK(s.faults == before + 1 && s.region == r2 && b2[2 * ps] == 5);
    CHECK_OK(tk_region_destroy(r2));

    /* Bad input: outside, unaligned, bad protection. */
    CHECK_ERR(tk_protect(r, (void *)(base + 16 * ps), ps, TK_PROT_READ), -EINVAL);
    CHECK_ERR(tk_protect(r, (void *)(base - ps), ps, TK_PROT_READ), -EINVAL);
    CHECK_ERR(tk_protect(r, (void *)(base + 1), ps, TK_PROT_READ), -EINVAL);
    CHECK_ERR(tk_protect(r, (void *)base, ps + 1, TK_PROT_READ), -EINVAL);
    CHECK_ERR(tk_protect(r, (void *)base, 17 * ps, TK_PROT_READ), -EINVAL);
    CHECK_ERR(tk_protect(r, (void *)base, ps, 2), -EINVAL);
    CHECK(strlen(tk_last_error()) > 0);
    CHECK_OK(tk_region_destroy(r));

    /* PAGESIZE: logical pages of 4 hardware pages.  The region is aligned to
     * them, a fault anywhere in one reports its start, and protections work
     * on whole logical pages only. */
    size_t lp = 4 * ps;
    tk_region_config lc = {
        .len = 8 * lp, .mech = m, .page_size = lp, .handler = on_fault, .arg = &s};
    tk_region *lr;
    CHECK_OK(tk_region_create(&lc, &lr));
    volatile char *lb = tk_region_base(lr);
    CHECK((uintptr_t)lb % lp == 0 && tk_region_page_size(lr) == lp);
    CHECK_OK(tk_prot1(lr, (void *)(lb + 2 * lp), TK_PROT_READ));
    for (int hp = 0; hp < 4; hp++) CHECK(tk_protection(lr, (void *)(lb + 2 * lp + hp * ps)) == 1);
    before = s.faults;
    lb[2 * lp + 3 * ps + 9] = 1; /* last hardware page of the logical page */
    CHECK(s.faults == before + 1 && s.page == (void *)(lb + 2 * lp));
    for (int hp = 0; hp < 4; hp++) lb[2 * lp + hp * ps] = 2; /* all open now */
    CHECK(s.faults == before + 1);
    lb[lp] = 3; /* neighbours were never protected */
    CHECK(s.faults == before + 1);
    CHECK_ERR(tk_protect(lr, (void *)(lb + ps), lp, TK_PROT_READ), -EINVAL);
    CHECK_ERR(tk_protect(lr, (void *)lb, ps, TK_PROT_READ), -EINVAL);
    CHECK_OK(tk_region_destroy(lr));
    printf("prot on %s: ok (%d faults)\n", tk_mech_name(m), atomic_load(&s.faults));
    return 0;
}
