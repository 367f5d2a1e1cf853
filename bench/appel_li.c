/* bench/appel_li.c - Appel & Li, Table 1, on this machine, per mechanism.
 *
 *   appel-li/add                 one ADD, timed their way: a 20-instruction
 *                                loop of 18 adds, a compare and a branch
 *   appel-li/trap                a write fault whose handler changes no
 *                                protection (it steps over the store)
 *   appel-li/trap+prot1+unprot   access a random protected page; in the
 *                                handler protect another page and unprotect
 *                                this one (per fault)
 *   appel-li/trap+protn+unprot   protect 100 pages at once, write them in a
 *                                random order, the handler unprotects each
 *                                (per page)
 *   appel-li/map2, appel-li/pagesize   facts
 *   threads/trap+prot1+unprot    trap+prot1+unprot again with 1, 2 and 4
 *                                threads of the process running (the others
 *                                spin over their own memory, so a protection
 *                                change must shoot down their TLBs); never
 *                                more busy threads than this machine's CPUs
 *                                (bench_ncpus): a count above it is null
 *                                with the reason, as it would measure the
 *                                scheduler's time slices, not the shootdown
 *
 * Pages are written before timing starts, as in the paper.  Protection is
 * read-only and the accesses are writes, which every mechanism can express.
 * Mechanisms: `posix` is the baseline done as libsigsegv and Boehm GC do it
 * (SA_SIGINFO handler, mprotect), without trapkit; `trapkit-posix`,
 * `uffd-sigbus`, `uffd-thread` and `pkeys` are trapkit's regions.  The
 * repetitions of all mechanisms are interleaved.
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
#include "touch.h"

#define NPAGES 100
#define MAX_PKEYS 15

enum mode { M_SKIP, M_PROT1, M_PROTN };

struct mech {
    const char *id;
    enum tk_mech tk; /* TK_MECH_AUTO for the raw baseline */
    size_t n;        /* pages */
    char *pages[NPAGES];
    tk_region *region;        /* page-granular mechanisms */
    tk_region *pk[MAX_PKEYS]; /* pkeys: one region per page */
    const char *skip_reason, *protn_reason, *reason;
    struct sigaction saved;
};

static size_t ps;
static volatile enum mode mode;
static volatile size_t cur; /* the one unprotected page in M_PROT1 */
static struct mech *active;

/* ---- protection, for every kind of mechanism [signal-safe] ---- */
static size_t index_of(struct mech *m, char *addr)
{
    for (size_t i = 0; i < m->n; i++)
        if (addr >= m->pages[i] && addr < m->pages[i] + ps) return i;
    return (size_t)-1;
}

static int set_prot(struct mech *m, size_t i, bool ro)
{
    if (m->tk == TK_MECH_AUTO)
        return mprotect(m->pages[i], ps, ro ? PROT_READ : PROT_READ | PROT_WRITE) ? -errno : 0;
    if (m->tk == TK_MECH_PKEYS)
        return tk_protect(m->pk[i], m->pages[i], ps, ro ? TK_PROT_READ : TK_PROT_RW);
    return tk_prot1(m->region, m->pages[i], ro ? TK_PROT_READ : TK_PROT_RW);
}

static int set_all(struct mech *m, bool ro)
{
    if (m->tk == TK_MECH_AUTO)
        return mprotect(m->pages[0], m->n * ps, ro ? PROT_READ : PROT_READ | PROT_WRITE) ? -errno
                                                                                         : 0;
    if (m->tk == TK_MECH_PKEYS) {
        for (size_t i = 0; i < m->n; i++) set_prot(m, i, ro);
        return 0;
    }
    return tk_protn(m->region, m->pages[0], m->n * ps, ro ? TK_PROT_READ : TK_PROT_RW);
}

/* The work of every handler: what the experiment does on a fault. */
static bool on_fault_common(struct mech *m, char *addr, void *uc)
{
    switch (mode) {
    case M_SKIP:
        return uc && bench_skip_touch(uc);
    case M_PROT1: {
        size_t i = index_of(m, addr);
        if (i == (size_t)-1) return false;
        set_prot(m, cur, true);
        set_prot(m, i, false);
        cur = i;
        return true;
    }
    case M_PROTN: {
        size_t i = index_of(m, addr);
        return i != (size_t)-1 && set_prot(m, i, false) == 0;
    }
    }
    return false;
}

static void raw_handler(int sig, siginfo_t *si, void *uc)
{
    (void)sig;
    if (!on_fault_common(active, si->si_addr, uc)) signal(SIGSEGV, SIG_DFL);
}

static tk_action tk_handler(const tk_fault *f, void *arg)
{
    (void)arg;
    return on_fault_common(active, f->addr, f->ucontext) ? TK_RESUME : TK_DECLINE;
}

/* ---- setup ---- */
static void setup(struct mech *m)
{
    m->n = NPAGES;
    if (m->tk == TK_MECH_AUTO) {
        char *b =
            mmap(NULL, NPAGES * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (b == MAP_FAILED) {
            m->reason = "mmap failed";
            return;
        }
        for (size_t i = 0; i < NPAGES; i++) m->pages[i] = b + i * ps;
    } else if (m->tk == TK_MECH_PKEYS) {
        size_t k = 0;
        for (; k < MAX_PKEYS; k++) {
            tk_region_config c = {.len = ps, .mech = TK_MECH_PKEYS, .handler = tk_handler};
            int err = tk_region_create(&c, &m->pk[k]);
            if (err == -EOPNOTSUPP && k == 0) {
                m->reason = strdup(tk_last_error());
                return;
            }
            if (err) break;
            m->pages[k] = tk_region_base(m->pk[k]);
        }
        m->n = k;
        m->protn_reason = "a pkeys region opens as a whole: one page of a PROTN batch cannot be "
                          "unprotected alone (there are at most 15 keys)";
    } else {
        tk_region_config c = {.len = NPAGES * ps, .mech = m->tk, .handler = tk_handler};
        int err = tk_region_create(&c, &m->region);
        if (err) {
            m->reason = strdup(tk_last_error());
            return;
        }
        for (size_t i = 0; i < NPAGES; i++)
            m->pages[i] = (char *)tk_region_base(m->region) + i * ps;
        if (m->tk == TK_MECH_UFFD_THREAD)
            m->skip_reason = "the handler thread cannot move the faulting thread's PC, so a fault "
                             "cannot be resolved without changing a protection";
    }
    for (size_t i = 0; i < m->n; i++) memset(m->pages[i], 1, ps); /* written first */
}

static void begin(struct mech *m)
{
    active = m;
    if (m->tk == TK_MECH_AUTO) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = raw_handler;
        sa.sa_flags = SA_SIGINFO | SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, &m->saved);
    }
}

static void end(struct mech *m)
{
    if (m->tk == TK_MECH_AUTO) sigaction(SIGSEGV, &m->saved, NULL);
    active = NULL;
}

/* ---- experiments: each returns ns per unit, or -1 ---- */
static double run_skip(struct mech *m, long iters)
{
    mode = M_SKIP;
    set_prot(m, 0, true);
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; i++) bench_touch(m->pages[0]);
    uint64_t t1 = bench_now_ns();
    set_prot(m, 0, false);
    return (double)(t1 - t0) / (double)iters;
}

static double run_prot1(struct mech *m, long iters, uint64_t *seed)
{
    mode = M_PROT1;
    set_all(m, true);
    cur = 0;
    set_prot(m, 0, false);
    uint64_t t0 = bench_now_ns();
    for (long i = 0; i < iters; i++) {
        size_t p = bench_rand(seed) % (m->n - 1);
        if (p >= cur) p++; /* a protected page */
        *(volatile char *)(m->pages[p] + 64) += 1;
    }
    uint64_t t1 = bench_now_ns();
    set_all(m, false);
    return (double)(t1 - t0) / (double)iters;
}

static double run_protn(struct mech *m, long rounds, uint64_t *seed)
{
    mode = M_PROTN;
    size_t order[NPAGES];
    for (size_t i = 0; i < m->n; i++) order[i] = i;
    uint64_t total = 0;
    for (long r = 0; r < rounds; r++) {
        for (size_t i = m->n - 1; i > 0; i--) { /* a fresh random sequence */
            size_t j = bench_rand(seed) % (i + 1), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        uint64_t t0 = bench_now_ns();
        set_all(m, true);
        for (size_t i = 0; i < m->n; i++) *(volatile char *)(m->pages[order[i]] + 64) += 1;
        total += bench_now_ns() - t0;
    }
    return (double)total / (double)(rounds * (long)m->n);
}

/* One ADD: a loop of 18 adds (one of them the loop counter), a compare and
 * a branch; the loop's time divided by its 20 instructions.  The 17 other
 * adds form one dependent chain of register-register adds: recent Intel
 * cores fold chains of add-immediate at rename, which would time nothing. */
static double run_add(long loops)
{
    uint64_t t0 = bench_now_ns();
    long i = 0, acc = 0, one = 1;
    __asm__ volatile("1:\n\t"
                     "add $1, %0\n\t"
                     ".rept 17\n\t"
                     "add %3, %1\n\t"
                     ".endr\n\t"
                     "cmp %2, %0\n\t"
                     "jne 1b\n\t"
                     : "+r"(i), "+r"(acc)
                     : "r"(loops), "r"(one)
                     : "cc");
    uint64_t t1 = bench_now_ns();
    return (double)(t1 - t0) / ((double)loops * 20.0);
}

/* One cycle: a long dependent chain of register adds, one per cycle. */
static double run_cycle(long loops)
{
    uint64_t t0 = bench_now_ns();
    long i = 0, acc = 0, one = 1;
    __asm__ volatile("1:\n\t"
                     ".rept 100\n\t"
                     "add %3, %1\n\t"
                     ".endr\n\t"
                     "add $1, %0\n\t"
                     "cmp %2, %0\n\t"
                     "jne 1b\n\t"
                     : "+r"(i), "+r"(acc)
                     : "r"(loops), "r"(one)
                     : "cc");
    uint64_t t1 = bench_now_ns();
    return (double)(t1 - t0) / ((double)loops * 100.0);
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    ps = (size_t)sysconf(_SC_PAGESIZE);
    long iters = o.quick ? 300 : 3000, rounds = o.quick ? 3 : 30;
    uint64_t seed = 12345;

    bench_progress("appel-li: Table 1 (%d repetitions, interleaved)", o.reps);
    struct fig_add {
        struct bench_fig f;
    } add = {{.n = 0}};
    run_add(1000000); /* warm-up */
    for (int r = 0; r < o.reps; r++) bench_add(&add.f, run_add(o.quick ? 2000000 : 20000000));
    bench_emit("appel-li/add", "cpu", "", "time", "ns", &add.f);
    for (int r = 0; r < o.reps; r++) bench_add(&add.f, run_cycle(o.quick ? 200000 : 2000000));
    bench_emit("machine/cycle", "cpu", "", "time", "ns", &add.f);

    struct mech mechs[] = {
        {.id = "posix", .tk = TK_MECH_AUTO},
        {.id = "trapkit-posix", .tk = TK_MECH_POSIX},
        {.id = "uffd-sigbus", .tk = TK_MECH_UFFD_SIGBUS},
        {.id = "uffd-thread", .tk = TK_MECH_UFFD_THREAD},
        {.id = "pkeys", .tk = TK_MECH_PKEYS},
    };
    enum { NM = sizeof mechs / sizeof mechs[0] };
    struct bench_fig skip[NM], prot1[NM], protn[NM];
    memset(skip, 0, sizeof skip);
    memset(prot1, 0, sizeof prot1);
    memset(protn, 0, sizeof protn);
    for (int i = 0; i < NM; i++) setup(&mechs[i]);

    for (int r = -1; r < o.reps; r++) { /* r = -1: warm-up */
        for (int i = 0; i < NM; i++) {
            struct mech *m = &mechs[i];
            if (m->reason) continue;
            begin(m);
            double a = m->skip_reason ? -1 : run_skip(m, iters);
            double b = run_prot1(m, iters, &seed);
            double c = m->protn_reason ? -1 : run_protn(m, rounds, &seed);
            end(m);
            if (r < 0) continue;
            if (a >= 0) bench_add(&skip[i], a);
            bench_add(&prot1[i], b);
            if (c >= 0) bench_add(&protn[i], c);
        }
        if (r >= 0) bench_progress("  repetition %d/%d done", r + 1, o.reps);
    }
    for (int i = 0; i < NM; i++) {
        struct mech *m = &mechs[i];
        char params[64];
        snprintf(params, sizeof params, "\"pages\": %zu", m->n);
        if (m->reason) {
            bench_emit_null("appel-li/trap", m->id, "", "time", "ns", m->reason);
            bench_emit_null("appel-li/trap+prot1+unprot", m->id, "", "time", "ns", m->reason);
            bench_emit_null("appel-li/trap+protn+unprot", m->id, "", "time", "ns", m->reason);
            continue;
        }
        if (m->skip_reason)
            bench_emit_null("appel-li/trap", m->id, "", "time", "ns", m->skip_reason);
        else
            bench_emit("appel-li/trap", m->id, "", "time", "ns", &skip[i]);
        bench_emit("appel-li/trap+prot1+unprot", m->id, params, "time", "ns", &prot1[i]);
        if (m->protn_reason)
            bench_emit_null("appel-li/trap+protn+unprot", m->id, params, "time", "ns",
                            m->protn_reason);
        else
            bench_emit("appel-li/trap+protn+unprot", m->id, params, "time", "ns", &protn[i]);
    }

    /* The same with other threads of the process running, as many busy
     * threads as there are CPUs at most. */
    const int nthreads[] = {1, 2, 4};
    int ncpus = bench_ncpus();
    for (int t = 0; t < 3; t++) {
        char over[160];
        snprintf(over, sizeof over,
                 "%d busy threads on %d CPUs would measure the scheduler's time slices, not the "
                 "TLB shootdowns: never more busy threads than CPUs",
                 nthreads[t], ncpus);
        bool run_it = nthreads[t] <= ncpus;
        struct bench_fig figs[NM];
        memset(figs, 0, sizeof figs);
        if (run_it) {
            bench_spinners_start(nthreads[t] - 1);
            for (int r = -1; r < o.reps; r++)
                for (int i = 0; i < NM; i++) {
                    struct mech *m = &mechs[i];
                    if (m->reason) continue;
                    begin(m);
                    double v = run_prot1(m, iters, &seed);
                    end(m);
                    if (r >= 0) bench_add(&figs[i], v);
                }
            bench_spinners_stop();
            bench_progress("  %d thread(s) done", nthreads[t]);
        }
        for (int i = 0; i < NM; i++) {
            struct mech *m = &mechs[i];
            char params[64];
            snprintf(params, sizeof params, "\"threads\": %d, \"pages\": %zu", nthreads[t], m->n);
            if (m->reason)
                bench_emit_null("threads/trap+prot1+unprot", m->id, params, "time", "ns",
                                m->reason);
            else if (!run_it)
                bench_emit_null("threads/trap+prot1+unprot", m->id, params, "time", "ns", over);
            else
                bench_emit("threads/trap+prot1+unprot", m->id, params, "time", "ns", &figs[i]);
        }
    }

    /* MAP2 and PAGESIZE, as facts of this machine */
    tk_region *r2;
    tk_region_config c = {.len = 4 * ps, .flags = TK_REGION_MAP2};
    void *view = NULL;
    bool map2 = tk_region_create(&c, &r2) == 0 && tk_map2(r2, TK_PROT_RW, &view) == 0;
    bench_emit_value("appel-li/map2", "trapkit", "", "fact", "bool", map2 ? 1 : 0);
    bench_emit_value("appel-li/pagesize", "trapkit", "", "fact", "bytes", (double)ps);
    return 0;
}
