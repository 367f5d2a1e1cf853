/* Memory the kernel changes behind trapkit's back.  tk_discard drops pages
 * (they read as zeros) and keeps their protection on every mechanism: the
 * next write to a read-only page is caught, an inaccessible page stays so,
 * and with DIRTY the dropped pages count as written.  A plain
 * madvise(MADV_DONTNEED) keeps the protection on posix (it belongs to the
 * mapping) and is noticed on uffd-thread (the pages are protected again);
 * munmap and mremap of a uffd-thread region's memory make later calls fail
 * with -EFAULT.  Each write after a tk_discard reaches the handler once,
 * even with the kernel's removal events handled late.  (On uffd-sigbus and
 * pagemap-scan a plain madvise is not noticed: region.h says so, and
 * nothing here expects it.) */
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "testutil.h"

#define NPAGES 8

static atomic_int faults, calls;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    if (f->flags & TK_FAULT_RESOLVED) return TK_RESUME;
    atomic_fetch_add(&faults, 1);
    return tk_test_open(f);
}

static tk_action count_calls(const tk_fault *f, void *arg)
{
    (void)arg;
    atomic_fetch_add(&calls, 1);
    return tk_test_open(f);
}

/* Read-only pages dropped, then each written at once, many times over: on
 * uffd-thread the service thread may handle the removal event (holding the
 * pages by mprotect) while the writes fault.  The handler is called once per
 * write, never a second time for the same write. */
static void once_per_write(enum tk_mech m)
{
    enum { N = 32, ROUNDS = 300 };
    size_t ps = tk_test_page();
    tk_region *r = tk_test_region(m, N, 0, count_calls, NULL);
    char *b = tk_region_base(r);
    for (int round = 0; round < ROUNDS; round++) {
        CHECK_OK(tk_protn(r, b, N * ps, TK_PROT_READ));
        CHECK_OK(tk_discard(r, b, N * ps));
        atomic_store(&calls, 0);
        for (int i = 0; i < N; i++) b[i * ps] = (char)round;
        if (atomic_load(&calls) != N)
            fprintf(stderr, "round %d: %d handler calls for %d writes\n", round,
                    atomic_load(&calls), N);
        CHECK(atomic_load(&calls) == N);
    }
    CHECK_OK(tk_region_destroy(r));
}

/* munmap and mremap return once the service thread has read their event,
 * which it then handles (region.h: the window after the call): tk_prot1
 * until it says so, for at most 2 s. */
static int prot1_after_event(tk_region *r, char *at)
{
    int err = 0;
    for (int i = 0; i < 200; i++) {
        err = tk_prot1(r, at, TK_PROT_READ);
        if (err) break;
        usleep(10 * 1000);
    }
    return err;
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, TK_REGION_DIRTY);
    size_t ps = tk_test_page();
    tk_region *r = tk_test_region(m, NPAGES, TK_REGION_DIRTY, on_fault, NULL);
    char *b = tk_region_base(r);
    uint64_t bm[1];
    memset(b, 7, NPAGES * ps);

    /* tk_discard keeps a read-only page read-only, and zeroes it */
    CHECK_OK(tk_prot1(r, b + 1 * ps, TK_PROT_READ));
    CHECK_OK(tk_prot1(r, b + 2 * ps, TK_PROT_NONE));
    CHECK_OK(tk_dirty(r, bm, 64));
    CHECK_OK(tk_discard(r, b + 1 * ps, 3 * ps));
    CHECK(tk_protection(r, b + 1 * ps) == TK_PROT_READ);
    CHECK(tk_protection(r, b + 2 * ps) == TK_PROT_NONE);
    CHECK(tk_protection(r, b + 3 * ps) == TK_PROT_RW);
    CHECK(b[1 * ps] == 0 && b[1 * ps + ps - 1] == 0 && b[3 * ps] == 0 && b[4 * ps] == 7);
    int before = atomic_load(&faults);
    b[1 * ps] = 1; /* caught */
    CHECK(atomic_load(&faults) == before + 1);
    CHECK(b[2 * ps] == 0); /* still inaccessible: caught */
    CHECK(atomic_load(&faults) == before + 2);
    /* DIRTY: the dropped pages count as written */
    CHECK(tk_dirty(r, bm, 64) >= 0);
    CHECK((bm[0] & 0xe) == 0xe);
    CHECK_ERR(tk_discard(r, b + 1, ps), -EINVAL);
    CHECK_ERR(tk_discard(r, b, (NPAGES + 1) * ps), -EINVAL);
    CHECK_ERR(tk_discard(NULL, b, ps), -EINVAL);

    /* a plain madvise behind trapkit's back */
    if (m == TK_MECH_POSIX || m == TK_MECH_UFFD_THREAD) {
        CHECK_OK(tk_prot1(r, b + 5 * ps, TK_PROT_READ));
        CHECK(madvise(b + 5 * ps, ps, MADV_DONTNEED) == 0);
        CHECK(b[5 * ps] == 0);
        /* uffd-thread protects the pages again just after madvise returns
         * (region.h): give its service thread that moment */
        if (m == TK_MECH_UFFD_THREAD) usleep(100 * 1000);
        before = atomic_load(&faults);
        b[5 * ps] = 1; /* still caught */
        CHECK(atomic_load(&faults) == before + 1);
        CHECK(tk_protection(r, b + 5 * ps) == TK_PROT_RW);
        /* and the page is an ordinary one again after its next tk_protect */
        CHECK_OK(tk_prot1(r, b + 5 * ps, TK_PROT_READ));
        b[5 * ps] = 2;
        CHECK(atomic_load(&faults) == before + 2 && b[5 * ps] == 2);
    }
    once_per_write(m);
    printf("%s: tk_discard keeps protections%s\n", argv[1],
           m == TK_MECH_UFFD_THREAD ? "; madvise, munmap and mremap noticed" : "");
    if (m == TK_MECH_UFFD_THREAD) {
        /* munmap of part of the region: later calls say so */
        CHECK(munmap(b + 7 * ps, ps) == 0);
        CHECK_ERR(prot1_after_event(r, b), -EFAULT);
        CHECK(strstr(tk_last_error(), "behind trapkit's back"));
        CHECK_OK(tk_region_destroy(r));
        /* mremap moving a region's memory */
        r = tk_test_region(m, NPAGES, 0, on_fault, NULL);
        b = tk_region_base(r);
        void *to =
            mremap(b, 2 * ps, 2 * ps, MREMAP_MAYMOVE | MREMAP_FIXED,
                   (char *)mmap(NULL, 2 * ps, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
        CHECK(to != MAP_FAILED);
        CHECK_ERR(prot1_after_event(r, b + 4 * ps), -EFAULT);
        CHECK(strstr(tk_last_error(), "behind trapkit's back"));
        munmap(to, 2 * ps);
    }
    CHECK_OK(tk_region_destroy(r));
    return 0;
}
