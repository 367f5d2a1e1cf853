/* bench/scale.c - scale/prot1+unprot: the cost of one UNPROT plus one PROT1
 * of a random page, as the number of individually protected pages grows
 * from 1 to 1,000,000 (every other page of a region of twice that many, so
 * no two protected pages are adjacent and mprotect cannot merge them).
 *
 * Two series, in params.populated:
 *   true   (the main series) each protected page is written before it is
 *          protected, so it has a page-table entry that every protection
 *          change must rewrite, and a TLB entry to flush
 *   false  the pages are never touched: no page-table entries, nothing to
 *          flush, which is what a fresh MAP_NORESERVE mapping costs
 * each with params.threads 1 (the measuring thread alone) and 2 (one more
 * thread of the process spinning over its own memory on the other CPU, so
 * the kernel must shoot down TLBs on it at every change); never more busy
 * threads than CPUs: a count above bench_ncpus() is null with the reason.
 *
 * `posix` is the baseline by hand (mprotect); `trapkit-posix`, `uffd-sigbus`
 * and `uffd-thread` are trapkit regions.  mprotect splits the mapping at each
 * protected page and stops at vm.max_map_count: those figures are null with
 * the reason and the number of pages reached.  The page-table mechanisms
 * never split it.  The mechanisms' repetitions are interleaved; if
 * populating every mechanism's pages at once would need more than half the
 * available memory, they are measured in turn and the figures say so in a
 * note.
 */
#include <errno.h>
#include <stdbool.h>
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
    struct bench_fig fig[2]; /* by threads - 1 */
};

static size_t ps;

static int prot(struct mech *m, size_t page, bool ro)
{
    char *p = m->base + page * ps;
    if (m->tk == TK_MECH_AUTO)
        return mprotect(p, ps, ro ? PROT_READ : PROT_READ | PROT_WRITE) ? -errno : 0;
    return tk_prot1(m->r, p, ro ? TK_PROT_READ : TK_PROT_RW);
}

/* Protects every other page of 2n, writing each first if populated; fills
 * m->reason on failure. */
static void setup(struct mech *m, size_t n, bool populated)
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
        if (populated) *(volatile char *)(m->base + 2 * i * ps) = 1;
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

static void setup_or_release(struct mech *m, size_t n, bool populated)
{
    setup(m, n, populated);
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

/* MemAvailable of /proc/meminfo in bytes, or 0 if unreadable. */
static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[128];
    size_t kib = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kib) == 1) break;
    fclose(f);
    return kib * 1024;
}

#define EXP "scale/prot1+unprot"

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
    int ncpus = bench_ncpus();
    size_t budget = mem_available() / 2;
    bench_progress("scale: PROT1+UNPROT with 1 to %zu individually protected pages, populated "
                   "and untouched, 1 and 2 threads (%d CPUs)",
                   sizes[nsizes - 1], ncpus);
    char over[160];
    snprintf(over, sizeof over,
             "2 busy threads on %d CPU would measure the scheduler's time slices, not the TLB "
             "shootdowns: never more busy threads than CPUs",
             ncpus);
    for (size_t si = 0; si < nsizes; si++) {
        size_t n = sizes[si];
        for (int pop = 1; pop >= 0; pop--) {
            char params[2][96];
            for (int t = 0; t < 2; t++)
                snprintf(params[t], sizeof params[t],
                         "\"pages\": %zu, \"populated\": %s, \"threads\": %d", n,
                         pop ? "true" : "false", t + 1);
            bool done[NM] = {false}, split = false;
            for (;;) {
                /* a group of mechanisms whose populated pages fit in memory
                 * together (all of them, unless memory is short) */
                int group[NM], ng = 0, left = 0;
                for (int i = 0; i < NM; i++) {
                    if (done[i]) continue;
                    if (pop && ng > 0 && budget && (size_t)(ng + 1) * n * ps > budget) {
                        split = true;
                        left++;
                        continue;
                    }
                    done[i] = true;
                    setup_or_release(&mechs[i], n, pop);
                    if (mechs[i].reason[0]) {
                        for (int t = 0; t < 2; t++)
                            bench_emit_null(EXP, mechs[i].id, params[t], "time", "ns",
                                            mechs[i].reason);
                        continue;
                    }
                    group[ng++] = i;
                }
                for (int t = 0; t < 2 && ng > 0; t++) {
                    if (t + 1 > ncpus) continue;
                    for (int g = 0; g < ng; g++) mechs[group[g]].fig[t].n = 0;
                    bench_spinners_start(t);
                    for (int r = -1; r < o.reps; r++)
                        for (int g = 0; g < ng; g++) {
                            double v = run(&mechs[group[g]], n, iters, &seed);
                            if (r >= 0) bench_add(&mechs[group[g]].fig[t], v);
                        }
                    bench_spinners_stop();
                }
                for (int g = 0; g < ng; g++) {
                    struct mech *m = &mechs[group[g]];
                    for (int t = 0; t < 2; t++) {
                        if (t + 1 > ncpus)
                            bench_emit_null(EXP, m->id, params[t], "time", "ns", over);
                        else
                            bench_emit_ex(EXP, m->id, params[t], "time", "ns", &m->fig[t],
                                          split ? "\"note\": \"mechanisms measured in turn, not "
                                                  "interleaved: populating all of their pages "
                                                  "at once needs more than half the available "
                                                  "memory\""
                                                : NULL);
                    }
                    teardown(m, n);
                }
                if (!left) break;
            }
            bench_progress("  %zu pages, %s: done", n, pop ? "populated" : "untouched");
        }
    }
    return 0;
}
