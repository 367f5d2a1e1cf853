/* MAP2 coherence both ways: a write through the region shows in the view and
 * a write through the view shows in the region, also while the region's pages
 * are protected (the view is not).  A read-only view cannot be written, and
 * DIRTY on a MAP2 region counts writes through the region. */
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include "testutil.h"

static volatile int faults;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    faults++;
    return tk_test_open(f);
}

/* A handler that fills a no-access page through the view, then opens it: the
 * Appel & Li use of MAP2 (a collector or pager works on pages the program
 * cannot touch). */
static char *fill_view;
static tk_action fill_then_open(const tk_fault *f, void *arg)
{
    (void)arg;
    size_t off = (size_t)((char *)f->page - (char *)tk_region_base(f->region));
    memset(fill_view + off, 0x5a, tk_region_page_size(f->region));
    faults++;
    return tk_test_open(f);
}

static sigjmp_buf escape;
static void on_segv(int sig)
{
    (void)sig;
    siglongjmp(escape, 1);
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, TK_REGION_MAP2);
    size_t ps = tk_test_page(), n = 32;
    tk_region *r = tk_test_region(m, n, TK_REGION_MAP2, on_fault, NULL);
    char *base = tk_region_base(r);
    char *view, *ro;
    CHECK_OK(tk_map2(r, TK_PROT_RW, (void **)&view));
    CHECK_OK(tk_map2(r, TK_PROT_READ, (void **)&ro));
    CHECK(view != base && ro != base && view != ro);

    /* region -> view */
    uint64_t seed = 7;
    for (size_t i = 0; i < n * ps; i += 64) base[i] = (char)tk_test_rand(&seed);
    CHECK(memcmp(base, view, n * ps) == 0 && memcmp(base, ro, n * ps) == 0);
    /* view -> region */
    for (size_t i = 8; i < n * ps; i += 64) view[i] = (char)tk_test_rand(&seed);
    CHECK(memcmp(base, view, n * ps) == 0 && memcmp(base, ro, n * ps) == 0);

    /* Protected pages: the view still reads and writes them, no fault. */
    CHECK_OK(tk_protn(r, base, n * ps, TK_PROT_NONE));
    for (size_t p = 0; p < n; p++) view[p * ps + 1] = (char)(p + 1);
    CHECK(faults == 0);
    for (size_t p = 0; p < n; p++) CHECK(ro[p * ps + 1] == (char)(p + 1));
    /* and the program sees the view's writes once it may look */
    for (size_t p = 0; p < n; p++) CHECK(((volatile char *)base)[p * ps + 1] == (char)(p + 1));
    CHECK(faults == (int)n);

    /* Read-only protection on the region; writes through the view. */
    CHECK_OK(tk_protn(r, base, n * ps, TK_PROT_READ));
    for (size_t p = 0; p < n; p++) view[p * ps + 2] = 9;
    for (size_t p = 0; p < n; p++) CHECK(base[p * ps + 2] == 9);
    CHECK(faults == (int)n);
    CHECK_OK(tk_unprot(r, base, n * ps));

    /* The read-only view cannot be written (plain SIGSEGV, not ours). */
    struct sigaction sa = {0}, old;
    sa.sa_handler = on_segv;
    sa.sa_flags = SA_NODEFER;
    CHECK(sigaction(SIGSEGV, &sa, &old) == 0);
    volatile bool wrote = true;
    if (sigsetjmp(escape, 1) == 0) {
        ((volatile char *)ro)[0] = 1;
    } else {
        wrote = false;
    }
    CHECK(!wrote);
    CHECK(sigaction(SIGSEGV, &old, NULL) == 0);
    CHECK_OK(tk_unmap2(r, ro));
    CHECK_ERR(tk_unmap2(r, ro), -EINVAL);
    CHECK_OK(tk_region_destroy(r)); /* also unmaps the remaining view */

    /* A handler filling protected pages through the view. */
    faults = 0;
    r = tk_test_region(m, n, TK_REGION_MAP2, fill_then_open, NULL);
    base = tk_region_base(r);
    CHECK_OK(tk_map2(r, TK_PROT_RW, (void **)&fill_view));
    CHECK_OK(tk_protn(r, base, n * ps, TK_PROT_NONE));
    for (size_t p = 0; p < n; p += 3) CHECK(((volatile char *)base)[p * ps + 100] == 0x5a);
    CHECK(faults == (int)((n + 2) / 3));
    CHECK_OK(tk_region_destroy(r));

    /* DIRTY on a MAP2 region reports writes through the region, not through
     * a view (a collector's own writes are not the program's). */
    tk_region_config dc = {.len = n * ps, .mech = m, .flags = TK_REGION_MAP2 | TK_REGION_DIRTY};
    int err = tk_region_create(&dc, &r);
    if (err == -EOPNOTSUPP) {
        printf("map2 + DIRTY on %s not available: %s\n", tk_mech_name(m), tk_last_error());
    } else {
        CHECK_OK(err);
        base = tk_region_base(r);
        CHECK_OK(tk_map2(r, TK_PROT_RW, (void **)&view));
        uint64_t bm[1];
        CHECK_OK(tk_dirty(r, bm, n));
        base[3 * ps] = 1;
        base[17 * ps + 5] = 1;
        view[9 * ps] = 1;
        CHECK(tk_dirty(r, bm, n) == 2);
        CHECK(bm[0] == ((1ull << 3) | (1ull << 17)));
        CHECK(view[3 * ps] == 1 && base[9 * ps] == 1);
        CHECK(tk_dirty(r, bm, n) == 0 && bm[0] == 0);
        CHECK_OK(tk_region_destroy(r));
    }

    /* Bad input. */
    tk_region *plain = tk_test_region(m, 2, 0, NULL, NULL);
    void *v;
    CHECK_ERR(tk_map2(plain, TK_PROT_RW, &v), -EINVAL);
    CHECK(strstr(tk_last_error(), "TK_REGION_MAP2") != NULL);
    CHECK_OK(tk_region_destroy(plain));

    printf("map2 on %s: ok\n", tk_mech_name(m));
    return 0;
}
