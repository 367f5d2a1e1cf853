/* A million pages protected and unprotected one by one.  The page-table
 * mechanisms (uffd-*) do it without splitting the mapping; mprotect-based
 * ones split a VMA per change and reach vm.max_map_count, where trapkit must
 * fail with -ENOMEM and a message that says why and what to use instead,
 * keeping every protection made before. */
#include <stdatomic.h>
#include <string.h>
#include "testutil.h"

#define NPAGES (1u << 20)

/* atomic: on uffd-thread the handler runs on trapkit's thread */
static atomic_long faults;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    faults++;
    return tk_test_open(f);
}

static long max_map_count(void)
{
    FILE *f = fopen("/proc/sys/vm/max_map_count", "r");
    long v = 65530;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1) v = 65530;
        fclose(f);
    }
    return v;
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, 0);
    size_t ps = tk_test_page();
    tk_region *r = tk_test_region(m, NPAGES, 0, on_fault, NULL);
    char *base = tk_region_base(r);
    long maps0 = tk_test_mappings();
    bool page_table = m == TK_MECH_UFFD_SIGBUS || m == TK_MECH_UFFD_THREAD;

    /* every other page, one call each: the worst case for VMAs */
    size_t done = 0;
    int err = 0;
    for (size_t p = 0; p < NPAGES; p += 2) {
        err = tk_prot1(r, base + p * ps, TK_PROT_READ);
        if (err) break;
        done = p + 2;
    }
    if (page_table) {
        CHECK_OK(err);
        CHECK(tk_test_mappings() - maps0 < 8); /* no split */
    } else {
        if ((long)NPAGES / 2 < max_map_count()) {
            printf("SKIP: vm.max_map_count is %ld, more than this test can exhaust\n",
                   max_map_count());
            return TK_SKIP;
        }
        CHECK_ERR(err, -ENOMEM);
        CHECK(strstr(tk_last_error(), "max_map_count") != NULL);
        CHECK(strstr(tk_last_error(), "uffd") != NULL);
        printf("%s: per-page mprotect stops after %zu pages: %s\n", tk_mech_name(m), done / 2,
               tk_last_error());
        /* what was done before stays done; the failed page kept its state */
        CHECK(tk_protection(r, base) == TK_PROT_READ);
        CHECK(tk_protection(r, base + (done - 2) * ps) == TK_PROT_READ);
        CHECK(tk_protection(r, base + done * ps) == TK_PROT_RW);
        long before = faults;
        base[(done - 2) * ps] = 1;
        CHECK(faults == before + 1);
        base[done * ps] = 1;
        CHECK(faults == before + 1);
        /* one PROTN over everything merges the mappings again */
        CHECK_OK(tk_protn(r, base, (size_t)NPAGES * ps, TK_PROT_READ));
        CHECK_OK(tk_unprot(r, base, (size_t)NPAGES * ps));
        CHECK_OK(tk_region_destroy(r));
        printf("million on %s: ok (clear error at vm.max_map_count)\n", tk_mech_name(m));
        return 0;
    }

    /* then the rest, and every page individually again */
    for (size_t p = 1; p < NPAGES; p += 2) CHECK_OK(tk_prot1(r, base + p * ps, TK_PROT_READ));
    uint64_t seed = 42;
    for (int i = 0; i < 1000; i++) {
        size_t p = tk_test_rand(&seed) % NPAGES;
        CHECK(tk_protection(r, base + p * ps) == TK_PROT_READ);
    }
    /* writes to protected pages fault, once each */
    long touched = 0;
    for (size_t p = 0; p < NPAGES; p += NPAGES / 1024, touched++) base[p * ps + 1] = 1;
    CHECK(faults == touched);
    /* unprotect one by one */
    for (size_t p = 0; p < NPAGES; p++) CHECK_OK(tk_unprot(r, base + p * ps, ps));
    CHECK(tk_test_mappings() - maps0 < 8);
    seed = 43;
    for (int i = 0; i < 1000; i++) base[(tk_test_rand(&seed) % NPAGES) * ps] = 2;
    CHECK(faults == touched);
    CHECK_OK(tk_region_destroy(r));
    printf("million on %s: ok: %u pages protected and unprotected one by one, %ld faults\n",
           tk_mech_name(m), NPAGES, touched);
    return 0;
}
