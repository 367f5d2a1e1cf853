/* bench/scale.c - scale/prot1+unprot: the cost of one UNPROT plus one PROT1
 * of a random page, as the number of individually protected pages grows
 * from 1 to 1,000,000 (every other page of a region of twice that many, so
 * no two protected pages are adjacent and mprotect cannot merge them).
 *
 * `posix` is the baseline by hand (mprotect); `trapkit-posix`, `uffd-sigbus`
 * and `uffd-thread` are trapkit regions.  mprotect splits the mapping at each
 * protected page and stops at vm.max_map_count: those figures are null with
 * the reason and the number of pages reached.  The page-table mechanisms
 * never split it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <trapkit/trapkit.h>
#include <unistd.h>

#include "bench.h"

struct mech {
    const char *id;
    enum tk_mech tk;
    char *base;
    tk_region *r;
    char reason[256];
};

static size_t ps;

static int prot(struct mech *m, size_t page, bool ro)
{
    char *p = m->base + page * ps;
    if (m->tk == TK_MECH_AUTO)
        return mprotect(p, ps, ro ? PROT_READ : PROT_READ | PROT_WRITE) ? -errno : 0;
    return tk_prot1(m->r, p, ro ? TK_PROT_READ : TK_PROT_RW);
}

/* Protects every other page of 2n; fills m->reason on failure. */
static void setup(struct mech *m, size_t n)
{
    m->reason[0] = 0;
    size_t len = 2 * n * ps;
    if (m->tk == TK_MECH_AUTO) {
        m->base = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m->base == MAP_FAILED) {
            snprintf(m->reason, sizeof m->reason, "mmap failed: %s", strerror(errno));
            m->base = NULL;
            return;
        }
    } else {
        tk_region_config c = {.len = len, .mech = m->tk};
        if (tk_region_create(&c, &m->r)) {
            snprintf(m->reason, sizeof m->reason, "%s", tk_last_error());
            m->r = NULL;
            return;
        }
        m->base = tk_region_base(m->r);
    }
    for (size_t i = 0; i < n; i++) {
        int err = prot(m, 2 * i, true);
        if (err) {
            snprintf(m->reason, sizeof m->reason,
                     "%s after %zu individually protected pages (vm.max_map_count)",
                     err == -ENOMEM ? "mprotect fails with ENOMEM" : strerror(-err), i);
            return;
        }
    }
}

static void teardown(struct mech *m, size_t n);

static void setup_or_release(struct mech *m, size_t n)
{
    setup(m, n);
    if (m->reason[0]) teardown(m, n); /* give back the map count for the others */
}

static void teardown(struct mech *m, size_t n)
{
    if (m->tk == TK_MECH_AUTO) {
        if (m->base) munmap(m->base, 2 * n * ps);
    } else if (m->r) {
        tk_region_destroy(m->r);
    }
    m->base = NULL;
    m->r = NULL;
}

static double run(struct mech *m, size_t n, long iters, uint64_t *seed)
{
    uint64_t t0 = bench_now_ns();
    for (long k = 0; k < iters; k++) {
        size_t p = 2 * (bench_rand(seed) % n);
        prot(m, p, false);
        prot(m, p, true);
    }
    return (double)(bench_now_ns() - t0) / (double)iters;
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    ps = (size_t)sysconf(_SC_PAGESIZE);
    long iters = o.quick ? 500 : 5000;
    uint64_t seed = 7;
    struct mech mechs[] = {
        {.id = "posix", .tk = TK_MECH_AUTO},
        {.id = "trapkit-posix", .tk = TK_MECH_POSIX},
        {.id = "uffd-sigbus", .tk = TK_MECH_UFFD_SIGBUS},
        {.id = "uffd-thread", .tk = TK_MECH_UFFD_THREAD},
    };
    enum { NM = sizeof mechs / sizeof mechs[0] };
    const size_t sizes[] = {1, 10, 100, 1000, 10000, 100000, 1000000};
    size_t nsizes = o.quick ? 5 : 7; /* --quick stops at 10,000 pages */
    bench_progress("scale: PROT1+UNPROT with 1 to %zu individually protected pages",
                   sizes[nsizes - 1]);
    for (size_t si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        for (int i = 0; i < NM; i++) setup_or_release(&mechs[i], n);
        struct bench_fig figs[NM];
        memset(figs, 0, sizeof figs);
        for (int r = -1; r < o.reps; r++)
            for (int i = 0; i < NM; i++) {
                if (mechs[i].reason[0]) continue;
                double v = run(&mechs[i], n, iters, &seed);
                if (r >= 0) bench_add(&figs[i], v);
            }
        char params[64];
        snprintf(params, sizeof params, "\"pages\": %zu", n);
        for (int i = 0; i < NM; i++) {
            if (mechs[i].reason[0])
                bench_emit_null("scale/prot1+unprot", mechs[i].id, params, "time", "ns",
                                mechs[i].reason);
            else
                bench_emit("scale/prot1+unprot", mechs[i].id, params, "time", "ns", &figs[i]);
            teardown(&mechs[i], n);
        }
    }
    return 0;
}
