/* A handler that touches other protected pages: the fault it raises is
 * handled (nested) and the outer handler goes on.  A write to page 0 runs the
 * handler, which writes page 1 (write-protected) and reads page 2
 * (inaccessible) of the same region before opening page 0; each of those
 * faults is handled too.  On uffd-thread the handler runs on trapkit's
 * service thread, whose own faults must be served (by another service thread,
 * or in its own signal handler).  Repeated many times, from several threads.
 * Then a chain: the handler of each of CHAIN write-protected pages writes the
 * next page before it opens its own, so the faults nest CHAIN deep (more
 * than the 8 levels trapkit once passed on, fewer than the 72 it allows). */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "testutil.h"

#define ROUNDS 2000
#define THREADS 2
#define GROUP 4 /* pages per thread: 0 written, 1 write-protected, 2 inaccessible */

static tk_region *region;
static size_t ps;
static atomic_long outer, inner_write, inner_read;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    if (f->flags & TK_FAULT_RESOLVED) return TK_RESUME;
    char *base = tk_region_base(f->region);
    size_t idx = (size_t)((char *)f->page - base) / ps, first = idx - idx % GROUP;
    switch (idx % GROUP) {
    case 0: {
        atomic_fetch_add(&outer, 1);
        volatile char *w = base + (first + 1) * ps;
        volatile char *rd = base + (first + 2) * ps;
        *w = (char)(*w + 1); /* nested write fault */
        char v = *rd;        /* nested read fault */
        if (v != 42) return TK_DECLINE;
        return tk_test_open(f);
    }
    case 1:
        atomic_fetch_add(&inner_write, 1);
        return tk_test_open(f);
    case 2:
        atomic_fetch_add(&inner_read, 1);
        return tk_prot1(f->region, f->page, TK_PROT_READ) < 0 ? TK_DECLINE : TK_RESUME;
    default:
        return TK_DECLINE;
    }
}

static void *worker(void *arg)
{
    size_t first = (size_t)(uintptr_t)arg * GROUP;
    char *base = tk_region_base(region);
    for (int i = 0; i < ROUNDS; i++) {
        CHECK_OK(tk_prot1(region, base + first * ps, TK_PROT_READ));
        CHECK_OK(tk_prot1(region, base + (first + 1) * ps, TK_PROT_READ));
        CHECK_OK(tk_prot1(region, base + (first + 2) * ps, TK_PROT_NONE));
        base[first * ps] = (char)i; /* outer fault */
        CHECK(base[first * ps] == (char)i);
        CHECK(tk_protection(region, base + (first + 1) * ps) == TK_PROT_RW);
        CHECK(tk_protection(region, base + (first + 2) * ps) == TK_PROT_READ);
    }
    CHECK(base[(first + 1) * ps] == (char)ROUNDS);
    return NULL;
}

#define CHAIN 24
static atomic_long chained;

static tk_action on_chain(const tk_fault *f, void *arg)
{
    (void)arg;
    if (f->flags & TK_FAULT_RESOLVED) return TK_RESUME;
    char *base = tk_region_base(f->region);
    size_t idx = (size_t)((char *)f->page - base) / ps;
    atomic_fetch_add(&chained, 1);
    if (idx + 1 < CHAIN) base[(idx + 1) * ps] = (char)(idx + 2); /* nests one deeper */
    return tk_test_open(f);
}

static void test_chain(enum tk_mech m)
{
    tk_region *r = tk_test_region(m, CHAIN, 0, on_chain, NULL);
    char *base = tk_region_base(r);
    for (int round = 0; round < 20; round++) {
        CHECK_OK(tk_protn(r, base, CHAIN * ps, TK_PROT_READ));
        base[0] = 1;
        for (size_t k = 0; k < CHAIN; k++) {
            CHECK(base[k * ps] == (char)(k + 1));
            CHECK(tk_protection(r, base + k * ps) == TK_PROT_RW);
        }
    }
    CHECK(atomic_load(&chained) == 20 * CHAIN);
    printf("%ld faults nested %d deep\n", atomic_load(&chained), CHAIN);
    CHECK_OK(tk_region_destroy(r));
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, 0);
    ps = tk_test_page();
    region = tk_test_region(m, THREADS * GROUP, 0, on_fault, NULL);
    char *base = tk_region_base(region);
    memset(base, 0, THREADS * GROUP * ps);
    for (int t = 0; t < THREADS; t++) base[(t * GROUP + 2) * ps] = 42;
    pthread_t th[THREADS];
    for (int t = 0; t < THREADS; t++)
        CHECK(pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t) == 0);
    for (int t = 0; t < THREADS; t++) CHECK(pthread_join(th[t], NULL) == 0);
    printf("%s: %ld outer faults, %ld nested writes, %ld nested reads\n", argv[1],
           atomic_load(&outer), atomic_load(&inner_write), atomic_load(&inner_read));
    CHECK(atomic_load(&outer) == THREADS * ROUNDS);
    CHECK(atomic_load(&inner_write) == THREADS * ROUNDS);
    CHECK(atomic_load(&inner_read) == THREADS * ROUNDS);
    CHECK_OK(tk_region_destroy(region));
    test_chain(m);
    return 0;
}
