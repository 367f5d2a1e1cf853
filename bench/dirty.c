/* bench/dirty.c - dirty/per-page: the cost per dirtied page of DIRTY, that
 * is the first write to a page, the collection that reports it and the
 * re-protection for the next interval, with 1%, 10% and 100% of a region
 * (1 GiB; 64 MiB with --quick) written between collections.
 *
 * Mechanisms: `posix` is the baseline done by hand as a collector would
 * (mprotect the region read-only, a SIGSEGV handler that records the page
 * and unprotects it, then scan the record and re-protect); the others are
 * trapkit regions with TK_REGION_DIRTY forced to each mechanism.  Every
 * collection is checked against the pages written.
 *
 * Writing many pages in random order splits an mprotect'ed mapping into a
 * piece per page; at vm.max_map_count the kernel refuses, and page-by-page
 * tracking must give up for the interval and call every page dirty.  The
 * baseline's handler then does what a collector must (and notes it), and a
 * trapkit posix region does the same (tk_dirty reports every writable page
 * and tk_last_error() says so after the call).  Such a figure is not the
 * cost of tracking pages: both are null with the same reason, detected from
 * what each says happened - at 100% dirtied "every page" is also the right
 * answer, so the count alone cannot tell.
 *
 * dirty/write-completion: what makes a page written once be reported once
 * on posix and uffd-sigbus (src/vm/dirty.c, "Writes in flight") costs, at
 * 10% dirtied, in one run: the faulting write completed under the region's
 * lock by emulation (the default), by single-stepping it, or merely
 * retried (the old way: a collection racing the retry reports it twice).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <trapkit/trapkit.h>
#include <unistd.h>

#include "bench.h"

extern int tk__dirty_inflight; /* src/vm/dirty.c: 0 retry, 1 step, 2 emulate */

struct mech {
    const char *id;
    enum tk_mech tk; /* TK_MECH_AUTO: the hand-made baseline */
    char *base;
    tk_region *r;
    const char *reason;
};

static size_t ps, npages;
static uint64_t *bitmap;   /* what a collection returned */
static uint8_t *raw_dirty; /* baseline: one byte per page, set by the handler */
static char *raw_base;
static struct sigaction raw_saved;
static volatile int raw_failed;
static const char *const MAPCOUNT_REASON =
    "per-page mprotect exceeds vm.max_map_count: writing this many pages in random order "
    "splits the mapping into more pieces than the kernel allows, so the interval degrades "
    "to 'every page dirty' (the hand-made handler gave up page tracking; trapkit's tk_dirty "
    "said so in tk_last_error)";
/* what tk_dirty leaves in tk_last_error() when it degraded (src/vm/dirty.c) */
static const char *const DEGRADED_MSG = "reports every writable page";

static void raw_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    (void)uc;
    char *a = si->si_addr;
    if (a < raw_base || a >= raw_base + npages * ps) {
        signal(SIGSEGV, SIG_DFL);
        return;
    }
    size_t i = (size_t)(a - raw_base) / ps;
    raw_dirty[i] = 1;
    if (mprotect(raw_base + i * ps, ps, PROT_READ | PROT_WRITE) != 0) {
        /* vm.max_map_count: what a collector must then do - give up page
         * tracking for this interval, everything is dirty */
        raw_failed = 1;
        memset(raw_dirty, 1, npages);
        mprotect(raw_base, npages * ps, PROT_READ | PROT_WRITE);
    }
}

static long raw_collect(void)
{
    long n = 0;
    memset(bitmap, 0, (npages + 63) / 64 * 8);
    for (size_t i = 0; i < npages; i++)
        if (raw_dirty[i]) {
            bitmap[i / 64] |= 1ull << (i % 64);
            raw_dirty[i] = 0;
            n++;
        }
    mprotect(raw_base, npages * ps, PROT_READ);
    return n;
}

static void setup(struct mech *m)
{
    if (m->tk == TK_MECH_AUTO) {
        m->base =
            mmap(NULL, npages * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m->base == MAP_FAILED) {
            m->reason = "mmap failed";
            return;
        }
        memset(m->base, 1, npages * ps);
        raw_dirty = calloc(npages, 1);
        raw_base = m->base;
        mprotect(m->base, npages * ps, PROT_READ);
        return;
    }
    tk_region_config c = {.len = npages * ps, .mech = m->tk, .flags = TK_REGION_DIRTY};
    int err = tk_region_create(&c, &m->r);
    if (err) {
        m->reason = strdup(tk_last_error());
        return;
    }
    m->base = tk_region_base(m->r);
    memset(m->base, 1, npages * ps);
    tk_dirty(m->r, bitmap, npages);
}

/* One interval: write `count` pages from order[], collect; returns ns per
 * page, or -1 if the collection was wrong. */
static double interval(struct mech *m, const size_t *order, size_t count)
{
    struct sigaction sa;
    if (m->tk == TK_MECH_AUTO) {
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = raw_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &raw_saved);
    }
    if (m->tk != TK_MECH_AUTO)
        tk_dirty(m->r, NULL, 0); /* refused (-EINVAL): tk_last_error() no longer says
                                    "degraded" from an earlier interval */
    uint64_t t0 = bench_now_ns();
    for (size_t k = 0; k < count; k++) m->base[order[k] * ps + 8] += 1;
    long n = m->tk == TK_MECH_AUTO ? raw_collect() : tk_dirty(m->r, bitmap, npages);
    uint64_t t1 = bench_now_ns();
    if (m->tk == TK_MECH_AUTO) sigaction(SIGSEGV, &raw_saved, NULL);
    bool degraded =
        m->tk == TK_MECH_AUTO ? raw_failed != 0 : n >= 0 && strstr(tk_last_error(), DEGRADED_MSG);
    raw_failed = 0;
    /* check: at least the pages written; exactly them unless the interval
     * degraded (then every page: -2) */
    if (n < (long)count) return -1;
    for (size_t k = 0; k < count; k++)
        if (!(bitmap[order[k] / 64] & (1ull << (order[k] % 64)))) return -1;
    if (degraded) return n == (long)npages ? -2 : -1;
    if (n != (long)count) return -1;
    return (double)(t1 - t0) / (double)count;
}

static void completion(const struct bench_opts *o, struct mech *a, struct mech *b, size_t *order,
                       uint64_t *seed)
{
    struct mech *ms[2] = {a, b};
    static const char *const modes[3] = {"retry", "single-step", "emulate"};
    struct bench_fig figs[2][3];
    memset(figs, 0, sizeof figs);
    size_t count = npages / 10;
    bench_progress("dirty: completing the faulting write, 10%% dirtied");
    for (int r = -1; r < o->reps; r++) {
        for (size_t k = 0; k < count; k++) {
            size_t j = k + bench_rand(seed) % (npages - k), t = order[k];
            order[k] = order[j];
            order[j] = t;
        }
        for (int mode = 0; mode < 3; mode++)
            for (int i = 0; i < 2; i++) {
                if (ms[i]->reason) continue;
                tk__dirty_inflight = mode;
                double v = interval(ms[i], order, count);
                tk__dirty_inflight = 2;
                if (r >= 0 && v >= 0) bench_add(&figs[i][mode], v);
            }
    }
    for (int i = 0; i < 2; i++)
        for (int mode = 0; mode < 3; mode++) {
            char params[96];
            snprintf(params, sizeof params,
                     "\"completion\": \"%s\", \"fraction\": 0.10, \"region_mib\": %zu", modes[mode],
                     (npages * ps) >> 20);
            if (ms[i]->reason)
                bench_emit_null("dirty/write-completion", ms[i]->id, params, "time", "ns",
                                ms[i]->reason);
            else if (!figs[i][mode].n)
                bench_emit_null("dirty/write-completion", ms[i]->id, params, "time", "ns",
                                "a collection did not return exactly the pages written");
            else
                bench_emit("dirty/write-completion", ms[i]->id, params, "time", "ns",
                           &figs[i][mode]);
        }
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t bytes = o.quick ? (64u << 20) : (1u << 30);
    npages = bytes / ps;
    bitmap = calloc((npages + 63) / 64, 8);
    size_t *order = malloc(npages * sizeof *order);
    for (size_t i = 0; i < npages; i++) order[i] = i;
    uint64_t seed = 99;

    struct mech mechs[] = {
        {.id = "posix", .tk = TK_MECH_AUTO},
        {.id = "trapkit-posix", .tk = TK_MECH_POSIX},
        {.id = "uffd-sigbus", .tk = TK_MECH_UFFD_SIGBUS},
        {.id = "uffd-thread", .tk = TK_MECH_UFFD_THREAD},
        {.id = "pagemap-scan", .tk = TK_MECH_PAGEMAP_SCAN},
        {.id = "soft-dirty", .tk = TK_MECH_SOFT_DIRTY},
    };
    enum { NM = sizeof mechs / sizeof mechs[0] };
    const double fractions[] = {0.01, 0.10, 1.00};
    bench_progress("dirty: per-page cost over a %zu MiB region (%d repetitions, interleaved)",
                   bytes >> 20, o.reps);
    for (int i = 0; i < NM; i++) setup(&mechs[i]);

    for (size_t fi = 0; fi < 3; fi++) {
        size_t count = (size_t)(fractions[fi] * (double)npages);
        struct bench_fig figs[NM];
        memset(figs, 0, sizeof figs);
        const char *bad[NM] = {0};
        for (int r = -1; r < o.reps; r++) {
            /* the same random pages for every mechanism in this repetition */
            for (size_t k = 0; k < count; k++) {
                size_t j = k + bench_rand(&seed) % (npages - k), t = order[k];
                order[k] = order[j];
                order[j] = t;
            }
            for (int i = 0; i < NM; i++) {
                if (mechs[i].reason) continue;
                double v = interval(&mechs[i], order, count);
                if (v == -2) bad[i] = MAPCOUNT_REASON;
                if (v == -1) bad[i] = "a collection did not return exactly the pages written";
                if (r >= 0 && v >= 0) bench_add(&figs[i], v);
            }
            if (r < 0)
                bench_progress("  %3.0f%% dirtied: warm-up done", fractions[fi] * 100);
            else
                bench_progress("  %3.0f%% dirtied: repetition %d/%d", fractions[fi] * 100, r + 1,
                               o.reps);
        }
        char params[64];
        snprintf(params, sizeof params, "\"fraction\": %.2f, \"region_mib\": %zu", fractions[fi],
                 bytes >> 20);
        for (int i = 0; i < NM; i++) {
            if (mechs[i].reason)
                bench_emit_null("dirty/per-page", mechs[i].id, params, "time", "ns",
                                mechs[i].reason);
            else if (bad[i])
                bench_emit_null("dirty/per-page", mechs[i].id, params, "time", "ns", bad[i]);
            else
                bench_emit("dirty/per-page", mechs[i].id, params, "time", "ns", &figs[i]);
        }
    }
    completion(&o, &mechs[1], &mechs[2], order, &seed);
    return 0;
}
