/* bench/lock.c - what the region lock's signal deferral costs.
 *
 * Every change of protection holds the region's lock (src/vm/hwlock.c),
 * which blocks the thread's asynchronous signals while it is held (two
 * rt_sigprocmask calls per lock), so that a signal handler re-entering
 * trapkit never runs inside the critical section.  The lock as it was
 * before, without the deferral (unsafe against such handlers), stays
 * selectable for benchmarks by tk__hwlock_defer_signals; both are measured
 * here side by side, interleaved A B A B (plain, deferred) in 8 blocks per
 * figure in every repetition (so both see the same machine), after a warm-up
 * repetition, with three times the usual repetitions:
 *
 *   lock/tk-protect          one page made read-only, then read-write again,
 *                            alternating, in a loop (ns per tk_protect call)
 *   lock/fault+unprot        64 pages made read-only at once (not timed),
 *                            then each written: the handler unprotects the
 *                            page with tk_unprot (ns per fault: the round
 *                            trip a collector or checkpointer pays)
 *   lock/deferred-over-plain the deferred lock's figure over the plain one's,
 *                            paired repetition by repetition (derived)
 *   lock/deferral-cost       the deferred lock's figure less the plain one's,
 *                            paired the same way (ns, derived)
 *
 * params.lock is "deferred" (the lock as shipped) or "plain" (no deferral);
 * params.operation names the figure a derived row compares.  Mechanisms are
 * trapkit's regions forced to each one (the ids of `trapkit probe`, with
 * trapkit-posix for trapkit's own posix as in the other benchmarks: `posix`
 * is the hand-made baseline, which has no lock); pagemap-scan and soft-dirty
 * regions track DIRTY as they are made for.  A mechanism missing here is null
 * with the reason.  Every write is checked to have faulted exactly once.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <trapkit/trapkit.h>
#include <unistd.h>

#include "bench.h"

/* src/core/region_impl.h: false makes the region lock skip the deferral of
 * signals (benchmarks only). */
extern bool tk__hwlock_defer_signals;

#define NPAGES 64
/* each repetition alternates the two locks this many times per figure */
#define BLOCKS 8

enum { PLAIN, DEFERRED, NLOCK };
static const char *const lock_name[NLOCK] = {"plain", "deferred"};

struct mech {
    const char *id;
    enum tk_mech tk;
    unsigned flags;
    tk_region *r;
    char *base;
    const char *reason;     /* not measured at all */
    const char *fault_note; /* said beside the fault round trip's figures */
};

static size_t ps;
static atomic_long faults; /* handled by on_fault */

/* [signal-safe] */
static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    if (tk_unprot(f->region, f->page, ps) != 0) return TK_DECLINE;
    atomic_fetch_add_explicit(&faults, 1, memory_order_relaxed);
    return TK_RESUME;
}

static void setup(struct mech *m)
{
    tk_region_config c = {
        .len = NPAGES * ps, .mech = m->tk, .handler = on_fault, .flags = m->flags};
    if (m->tk == TK_MECH_PKEYS) {
        /* pkeys regions open as a whole and change the thread's rights in
         * PKRU: tk_protect takes no region lock there */
        c.len = ps;
        c.flags = 0;
        if (tk_region_create(&c, &m->r) != 0) {
            m->reason = strdup(tk_last_error());
            return;
        }
        tk_region_destroy(m->r);
        m->r = NULL;
        m->reason = "pkeys regions change the calling thread's rights (PKRU) without the region "
                    "lock: there is no deferral to measure";
        return;
    }
    if (tk_region_create(&c, &m->r) != 0) {
        m->reason = strdup(tk_last_error());
        return;
    }
    m->base = tk_region_base(m->r);
    memset(m->base, 1, NPAGES * ps); /* written first */
}

/* ns per tk_protect call, or -1 (m->reason set) */
static double run_protect(struct mech *m, long pairs)
{
    char *p = m->base;
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < pairs; i++) {
        if (tk_prot1(m->r, p, TK_PROT_READ) != 0 || tk_unprot(m->r, p, ps) != 0) {
            m->reason = strdup(tk_last_error());
            return -1;
        }
    }
    uint64_t t1 = bench_now_ns();
    return (double)(t1 - t0) / (double)(2 * pairs);
}

/* ns per fault, or -1 (m->reason set) */
static double run_fault(struct mech *m, long rounds)
{
    uint64_t total = 0;
    for (long r = 0; r < rounds; r++) {
        if (tk_protn(m->r, m->base, NPAGES * ps, TK_PROT_READ) != 0) {
            m->reason = strdup(tk_last_error());
            return -1;
        }
        atomic_store(&faults, 0);
        uint64_t t0 = bench_now_ns();
        for (size_t i = 0; i < NPAGES; i++) *(volatile char *)(m->base + i * ps + 64) += 1;
        total += bench_now_ns() - t0;
        long got = atomic_load(&faults);
        if (got != NPAGES) {
            char *why = malloc(160);
            snprintf(why, 160, "%ld faults were handled for %d writes to read-only pages", got,
                     NPAGES);
            m->reason = why;
            return -1;
        }
    }
    return (double)total / (double)(rounds * NPAGES);
}

/* The figures of both locks (copies: bench_emit sorts them, and the
 * paired rows need them in the order they were taken). */
static void emit_mech(const char *exp, struct mech *m, const char *note,
                      const struct bench_fig *figs)
{
    for (int l = 0; l < NLOCK; l++) {
        char params[64];
        snprintf(params, sizeof params, "\"lock\": \"%s\"", lock_name[l]);
        struct bench_fig f = figs[l];
        if (m->reason)
            bench_emit_null(exp, m->id, params, "time", "ns", m->reason);
        else
            bench_emit_ex(exp, m->id, params, "time", "ns", &f, note);
    }
}

/* The ratio and the difference of each repetition's pair. */
static void emit_paired(const char *exp, const char *op, struct mech *m, const char *note,
                        const struct bench_fig *figs)
{
    char params[64], extra[256];
    snprintf(params, sizeof params, "\"operation\": \"%s\"", op);
    snprintf(extra, sizeof extra, "\"derived\": true, \"derived_from\": [\"%s\"]%s%s", exp,
             note ? ", " : "", note ? note : "");
    if (m->reason) {
        bench_emit_null_ex("lock/deferred-over-plain", m->id, params, "ratio", "x", m->reason,
                           extra);
        bench_emit_null_ex("lock/deferral-cost", m->id, params, "time", "ns", m->reason, extra);
        return;
    }
    struct bench_fig ratio = {.n = 0}, cost = {.n = 0};
    for (int r = 0; r < figs[PLAIN].n && r < figs[DEFERRED].n; r++) {
        bench_add(&ratio, figs[DEFERRED].v[r] / figs[PLAIN].v[r]);
        bench_add(&cost, figs[DEFERRED].v[r] - figs[PLAIN].v[r]);
    }
    bench_emit_ex("lock/deferred-over-plain", m->id, params, "ratio", "x", &ratio, extra);
    bench_emit_ex("lock/deferral-cost", m->id, params, "time", "ns", &cost, extra);
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    ps = (size_t)sysconf(_SC_PAGESIZE);
    /* the difference is a few system calls: three times the repetitions */
    int reps = o.reps * 3 > 64 ? 64 : o.reps * 3;
    long pairs = o.quick ? 2000 : 16000, rounds = o.quick ? 16 : 160;

    struct mech mechs[] = {
        {.id = "trapkit-posix", .tk = TK_MECH_POSIX},
        {.id = "uffd-sigbus", .tk = TK_MECH_UFFD_SIGBUS},
        {.id = "uffd-thread",
         .tk = TK_MECH_UFFD_THREAD,
         .fault_note = "\"note\": \"the handler runs on trapkit's handler thread, which keeps "
                       "asynchronous signals blocked, so its tk_unprot makes no rt_sigprocmask "
                       "call with either lock\""},
        {.id = "pagemap-scan", .tk = TK_MECH_PAGEMAP_SCAN, .flags = TK_REGION_DIRTY},
        {.id = "soft-dirty", .tk = TK_MECH_SOFT_DIRTY, .flags = TK_REGION_DIRTY},
        {.id = "pkeys", .tk = TK_MECH_PKEYS},
    };
    enum { NM = sizeof mechs / sizeof mechs[0] };
    struct bench_fig prot[NM][NLOCK], fault[NM][NLOCK];
    memset(prot, 0, sizeof prot);
    memset(fault, 0, sizeof fault);
    for (int i = 0; i < NM; i++) setup(&mechs[i]);

    bench_progress("lock: tk_protect and a fault round trip, the region lock plain and deferring "
                   "signals (%d repetitions of %d interleaved blocks)",
                   reps, BLOCKS);
    for (int r = -1; r < reps; r++) { /* r = -1: warm-up */
        for (int i = 0; i < NM; i++) {
            struct mech *m = &mechs[i];
            double p[NLOCK] = {0, 0}, f[NLOCK] = {0, 0};
            for (int b = 0; b < BLOCKS && !m->reason; b++)
                for (int l = 0; l < NLOCK && !m->reason; l++) {
                    tk__hwlock_defer_signals = l == DEFERRED;
                    p[l] += run_protect(m, pairs / BLOCKS);
                }
            for (int b = 0; b < BLOCKS && !m->reason; b++)
                for (int l = 0; l < NLOCK && !m->reason; l++) {
                    tk__hwlock_defer_signals = l == DEFERRED;
                    f[l] += run_fault(m, rounds / BLOCKS);
                }
            tk__hwlock_defer_signals = true;
            if (r < 0 || m->reason) continue;
            for (int l = 0; l < NLOCK; l++) {
                bench_add(&prot[i][l], p[l] / BLOCKS);
                bench_add(&fault[i][l], f[l] / BLOCKS);
            }
        }
        if (r >= 0 && (r + 1) % 5 == 0) bench_progress("  repetition %d/%d done", r + 1, reps);
    }

    for (int i = 0; i < NM; i++) {
        struct mech *m = &mechs[i];
        emit_mech("lock/tk-protect", m, NULL, prot[i]);
        emit_mech("lock/fault+unprot", m, m->fault_note, fault[i]);
        emit_paired("lock/tk-protect", "tk-protect", m, NULL, prot[i]);
        emit_paired("lock/fault+unprot", "fault+unprot", m, m->fault_note, fault[i]);
    }
    for (int i = 0; i < NM; i++)
        if (mechs[i].r) tk_region_destroy(mechs[i].r);
    return 0;
}
