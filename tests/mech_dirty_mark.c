/* tk_dirty_mark: the pages marked are reported by the next tk_dirty(),
 * exactly (soft-dirty: at least), together with the pages written; writes
 * to marked pages take no page fault until that collection (uffd-* before
 * Linux 6.3: one kernel fault each, never trapkit's), while writes
 * to the others do (counted with the kernel's page-fault counter, which
 * sees every fault: one trapkit handles, and one the kernel resolves alone
 * on pagemap-scan; a sanitizer's own may add one or two); after the
 * collection the marked pages are tracked again; a page the program
 * protected keeps its protection; writer threads racing marks and
 * collections lose no write; bad ranges are refused. */
#include <linux/perf_event.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "testutil.h"

#define NPAGES 64

static enum tk_mech m;
static size_t ps;
static atomic_long user_faults;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    atomic_fetch_add(&user_faults, 1);
    return tk_test_open(f);
}

/* tk_dirty(r) reported exactly `want` (soft-dirty: at least). */
static void dirty_is(tk_region *r, uint64_t want, const char *what)
{
    if (!tk_test_dirty_is(r, m, want)) {
        fprintf(stderr, "FAIL: %s\n", what);
        exit(1);
    }
}

/* The calling thread's page faults, every kind, or -1 without perf events. */
static int fault_counter(void)
{
    struct perf_event_attr a = {.type = PERF_TYPE_SOFTWARE,
                                .size = sizeof a,
                                .config = PERF_COUNT_SW_PAGE_FAULTS,
                                .exclude_hv = 1};
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
}

static long faults(int fd)
{
    long long v = 0;
    CHECK(read(fd, &v, sizeof v) == (ssize_t)sizeof v);
    return (long)v;
}

/* SIGBUS deliveries (uffd-sigbus's traps), counted by a handler installed
 * over trapkit's that passes each on to it, as a runtime's own would. */
static struct sigaction trapkit_sigbus;
static atomic_long sigbus_seen;

static void count_sigbus(int sig, siginfo_t *si, void *uc)
{
    atomic_fetch_add(&sigbus_seen, 1);
    trapkit_sigbus.sa_sigaction(sig, si, uc);
}

static void count_sigbus_over_trapkit(void)
{
    struct sigaction sa = {.sa_sigaction = count_sigbus, .sa_flags = SA_SIGINFO | SA_NODEFER};
    CHECK(sigaction(SIGBUS, &sa, &trapkit_sigbus) == 0);
    CHECK(trapkit_sigbus.sa_flags & SA_SIGINFO);
}

/* The calling thread's voluntary context switches. */
static long switches(void)
{
    struct rusage u;
    CHECK(getrusage(RUSAGE_THREAD, &u) == 0);
    return u.ru_nvcsw;
}

static void write_pages(char *base, unsigned first, unsigned n, char v)
{
    for (unsigned i = first; i < first + n; i++) ((volatile char *)base)[i * ps] = v;
}

/* ---- writers racing marks and collections -------------------------------- */

#define RACE_PAGES 64
struct race {
    tk_region *r;
    char *base;
    atomic_bool stop;
    /* per page: the writes done (by the writer) and the highest count a
     * collection may have seen when it reported the page */
    atomic_ulong written[RACE_PAGES];
};

static void *writer(void *arg)
{
    struct race *s = arg;
    uint64_t seed = 7;
    while (!atomic_load(&s->stop)) {
        unsigned p = (unsigned)(tk_test_xorshift(&seed) % RACE_PAGES);
        ((volatile char *)s->base)[p * ps + 8] = 1;
        atomic_fetch_add(&s->written[p], 1);
    }
    return NULL;
}

static void *marker(void *arg)
{
    struct race *s = arg;
    uint64_t seed = 11;
    while (!atomic_load(&s->stop)) {
        unsigned p = (unsigned)(tk_test_xorshift(&seed) % RACE_PAGES);
        unsigned n = 1 + (unsigned)(tk_test_xorshift(&seed) % 8);
        if (p + n > RACE_PAGES) n = RACE_PAGES - p;
        CHECK_OK(tk_dirty_mark(s->r, s->base + p * ps, n * ps));
    }
    return NULL;
}

/* A page whose write completed before a collection began is reported by
 * that collection or the next: after the threads stop, two collections
 * must together report every page written after the first one's start. */
static void race(void)
{
    static struct race s;
    s.r = tk_test_region(m, RACE_PAGES, TK_REGION_DIRTY, NULL, NULL);
    s.base = tk_region_base(s.r);
    uint64_t bm[RACE_PAGES / 64];
    pthread_t w, k;
    CHECK(pthread_create(&w, NULL, writer, &s) == 0);
    CHECK(pthread_create(&k, NULL, marker, &s) == 0);
    long rounds = tk_test_scaled(2000), lost = 0;
    for (long i = 0; i < rounds; i++) {
        unsigned long before[RACE_PAGES];
        for (unsigned p = 0; p < RACE_PAGES; p++) before[p] = atomic_load(&s.written[p]);
        /* pages written since `before` and complete before this call */
        CHECK(tk_dirty(s.r, bm, RACE_PAGES) >= 0);
        unsigned long after[RACE_PAGES];
        for (unsigned p = 0; p < RACE_PAGES; p++) after[p] = atomic_load(&s.written[p]);
        uint64_t bm2[RACE_PAGES / 64];
        CHECK(tk_dirty(s.r, bm2, RACE_PAGES) >= 0);
        for (unsigned p = 0; p < RACE_PAGES; p++) {
            bool rep = (bm[p / 64] | bm2[p / 64]) >> (p % 64) & 1;
            /* written between the two snapshots around the first call:
             * complete before the second call began, so reported by one */
            if (after[p] > before[p] + 1 && !rep && lost++ == 0)
                fprintf(stderr, "page %d written %lu times across a collection, not reported\n", p,
                        after[p] - before[p]);
        }
    }
    atomic_store(&s.stop, true);
    pthread_join(w, NULL);
    pthread_join(k, NULL);
    CHECK(lost == 0);
    CHECK_OK(tk_region_destroy(s.r));
}

int main(int argc, char **argv)
{
    m = tk_test_mech(argc, argv, TK_REGION_DIRTY);
    ps = tk_test_page();
    tk_region *r = tk_test_region(m, NPAGES, TK_REGION_DIRTY, on_fault, NULL);
    char *base = tk_region_base(r);

    /* bad input */
    CHECK_ERR(tk_dirty_mark(NULL, base, ps), -EINVAL);
    CHECK_ERR(tk_dirty_mark(r, base - ps, ps), -EINVAL);
    CHECK_ERR(tk_dirty_mark(r, base + NPAGES * ps, ps), -EINVAL);
    CHECK_ERR(tk_dirty_mark(r, base, (NPAGES + 1) * ps), -EINVAL);
    CHECK_ERR(tk_dirty_mark(r, base + 1, ps), -EINVAL);
    CHECK_ERR(tk_dirty_mark(r, base, ps / 2), -EINVAL);
    CHECK_ERR(tk_dirty_mark(r, base, 0), -EINVAL);
    tk_region *plain = tk_test_region(m, 4, 0, NULL, NULL);
    CHECK_ERR(tk_dirty_mark(plain, tk_region_base(plain), ps), -EINVAL);
    CHECK_OK(tk_region_destroy(plain));

    /* reported: a page marked before it was ever touched (no page-table
     * entry for the kernel to report) */
    CHECK_OK(tk_dirty_mark(r, base + 7 * ps, ps));
    dirty_is(r, 1ull << 7, "page 7 marked, never touched");
    dirty_is(r, 0, "nothing since");

    /* reported: marked pages, written or not, with the written ones */
    write_pages(base, 0, NPAGES, 1); /* every page populated */
    dirty_is(r, ~0ull, "populating");
    dirty_is(r, 0, "nothing written");
    CHECK_OK(tk_dirty_mark(r, base + 2 * ps, 4 * ps));
    write_pages(base, 40, 1, 2);
    dirty_is(r, 0xfull << 2 | 1ull << 40, "pages 2-5 marked, 40 written");
    dirty_is(r, 0, "the next interval");

    /* no fault for a write to a marked page; one for each other page */
    int fd = fault_counter();
    if (fd < 0) {
        printf("no perf events here (%s): the faults avoided are not counted\n", strerror(errno));
    } else {
        /* before Linux 6.3 a uffd write-protection lifted leaves the page
         * read-only: the kernel takes one fault of its own per page
         * (documented), where a trap would take a second one (uffd-sigbus)
         * or block the thread until the service thread answers (uffd-thread:
         * a voluntary context switch) */
        tk_probe_info pi;
        tk_probe(&pi);
        if (m == TK_MECH_UFFD_SIGBUS) count_sigbus_over_trapkit();
        bool ro_after_unprotect = (m == TK_MECH_UFFD_SIGBUS || m == TK_MECH_UFFD_THREAD) &&
                                  !pi.uffd_wp_unprotect_writable;
        for (int round = 0; round < 3; round++) {
            CHECK_OK(tk_dirty_mark(r, base, 16 * ps));
            long f0 = faults(fd), s0 = switches(), b0 = atomic_load(&sigbus_seen);
            write_pages(base, 0, 16, (char)(3 + round));
            long f1 = faults(fd), s1 = switches(), b1 = atomic_load(&sigbus_seen);
            write_pages(base, 16, 16, (char)(3 + round));
            long f2 = faults(fd), b2 = atomic_load(&sigbus_seen);
            if (m == TK_MECH_UFFD_SIGBUS) {
                CHECK(b1 == b0);      /* no trap for a marked page */
                CHECK(b2 - b1 >= 16); /* one for each other page */
            }
            if (m == TK_MECH_SOFT_DIRTY) {
                CHECK(f1 - f0 >= 16); /* the kernel's own faults stay (documented) */
            } else if (ro_after_unprotect) {
                if (f1 - f0 > 16 + 2 || s1 - s0 > 2)
                    fprintf(stderr,
                            "FAIL: %ld faults and %ld context switches writing 16 marked pages\n",
                            f1 - f0, s1 - s0);
                CHECK(f1 - f0 <= 16 + 2 && s1 - s0 <= 2);
            } else {
                /* none of the 16 (a sanitizer's own bookkeeping - TSan's
                 * trace - may fault once or twice meanwhile) */
                if (f1 - f0 > 2)
                    fprintf(stderr, "FAIL: %ld faults writing 16 marked pages\n", f1 - f0);
                CHECK(f1 - f0 <= 2);
            }
            CHECK(f2 - f1 >= 16); /* the unmarked pages are still tracked */
            dirty_is(r, 0xffffffffull, "16 marked and 16 written");
            /* tracked again after the collection */
            long f3 = faults(fd);
            write_pages(base, 0, 16, 9);
            CHECK(faults(fd) - f3 >= 16);
            dirty_is(r, 0xffffull, "the marked pages written in the next interval");
        }
        close(fd);
        if (m == TK_MECH_UFFD_SIGBUS) CHECK(sigaction(SIGBUS, &trapkit_sigbus, NULL) == 0);
    }
    CHECK(atomic_load(&user_faults) == 0); /* DIRTY's faults are trapkit's own */

    /* a page the program protected stays protected, and is reported */
    CHECK_OK(tk_protect(r, base + 50 * ps, ps, TK_PROT_READ));
    CHECK_OK(tk_dirty_mark(r, base + 48 * ps, 4 * ps));
    CHECK(tk_protection(r, base + 50 * ps) == TK_PROT_READ);
    dirty_is(r, 0xfull << 48, "pages 48-51 marked, 50 read-only");
    write_pages(base, 50, 1, 5); /* the handler opens it */
    CHECK(atomic_load(&user_faults) == 1);
    CHECK(tk_protection(r, base + 50 * ps) == TK_PROT_RW);
    dirty_is(r, 1ull << 50, "page 50 written once opened");
    CHECK(base[50 * ps] == 5 && base[2 * ps] == 9 && base[20 * ps] == 5);
    CHECK_OK(tk_region_destroy(r));

    if (m != TK_MECH_SOFT_DIRTY) race(); /* (soft-dirty loses racing writes: region.h) */
    printf("tk_dirty_mark on %s: ok\n", tk_mech_name(m));
    return 0;
}
