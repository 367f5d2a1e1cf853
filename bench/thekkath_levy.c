/* bench/thekkath_levy.c - Thekkath & Levy, Tables 1 and 2, rows for this
 * machine: delivering an exception to a null user-level handler and
 * returning from it.
 *
 *   deliver-simple    "Deliver Simple Exception to Null User Handler": ud2 -> SIGILL
 *   deliver-wp        "Deliver Write Prot. Exception To Null Handler": a store to a
 *                     read-only page
 *   (deliver-subpage  "Deliver Subpage Exception To Null Handler": bench/fast.c)
 *   return            "Return from Null Handler"
 *   round-trip        "Simple Exception Round-Trip Delivery and Return"
 *   round-trip-ratio  fast-signal's round trip over posix's for a simple
 *                     exception, per repetition (the two are interleaved, so
 *                     each ratio pairs runs made moments apart)
 *   null-syscall      the seed's yardstick, a null kernel call (getpid)
 *
 * Delivery is timed with the time-stamp counter from just before the
 * faulting instruction to the handler's first statement, return from its
 * last statement to the instruction after the fault; the round trip is the
 * whole loop; the TSC is read serialised (bench_tsc) and its figures are
 * null where it is not invariant.  The simple exceptions, on which the
 * fast return's goal is decided, get three times the repetitions (the
 * report decides a goal on the spread, not on one median).  The handler
 * steps over the faulting instruction, so no
 * protection changes.  Mechanisms: `posix` (sigaction handler, the
 * kernel's sigreturn), and trapkit's `trapkit-posix`, `uffd-sigbus` and
 * `pkeys` regions for the write-protection row.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <trapkit/trapkit.h>
#include <unistd.h>

#include "bench.h"
#include "touch.h"

static void raw_handler(int sig, siginfo_t *si, void *uc)
{
    bench_t_entry = bench_tsc();
    (void)sig;
    (void)si;
    if (!bench_skip_ud2(uc) && !bench_skip_touch(uc) && !bench_is_int3(uc)) signal(sig, SIG_DFL);
    bench_t_exit = bench_tsc();
}

static tk_action trap_handler(int sig, void *si, void *uc, void *arg)
{
    bench_t_entry = bench_tsc();
    (void)sig, (void)si, (void)arg;
    tk_action a = bench_skip_ud2(uc) || bench_is_int3(uc) ? TK_RESUME : TK_DECLINE;
    bench_t_exit = bench_tsc();
    return a;
}

static void do_ud2(volatile void *p)
{
    (void)p;
    bench_ud2();
}

static void do_int3(volatile void *p)
{
    (void)p;
    bench_int3();
}

static void install_raw(int sig, struct sigaction *saved)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = raw_handler;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, saved);
}

int main(int argc, char **argv)
{
    struct bench_opts o;
    bench_parse(argc, argv, &o);
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    long iters = o.quick ? 500 : 5000;
    bench_progress("thekkath-levy: exception delivery and return (TSC at %.3f GHz)",
                   bench_tsc_per_ns());

    /* simple exceptions: a breakpoint and an illegal instruction, by a
     * plain sigaction handler and by tk_trap_install with the fast return */
    unsigned fast_default = tk_fast_paths_available();
    struct simple_kind {
        const char *name;
        int sig;
        void (*raise_it)(volatile void *);
    } kinds[] = {{"int3", SIGTRAP, do_int3}, {"ud2", SIGILL, do_ud2}};
    enum { NK = 2 };
    struct bench_split simple[NK][2];
    memset(simple, 0, sizeof simple);
    int simple_reps = o.reps * 3 > 64 ? 64 : o.reps * 3;
    bench_progress("  simple exceptions: %d repetitions, posix and fast-signal interleaved",
                   simple_reps);
    for (int r = -1; r < simple_reps; r++)
        for (int k = 0; k < NK; k++)
            for (int fast = 0; fast < 2; fast++) {
                struct sigaction saved;
                if (fast) {
                    sigaction(kinds[k].sig, NULL, &saved);
                    tk_set_fast_paths(fast_default);
                    tk_trap_install(kinds[k].sig, trap_handler, NULL);
                } else {
                    install_raw(kinds[k].sig, &saved);
                }
                struct bench_split tmp;
                memset(&tmp, 0, sizeof tmp);
                bench_measure(r < 0 ? &tmp : &simple[k][fast], kinds[k].raise_it, NULL, iters);
                if (fast)
                    tk_trap_remove(kinds[k].sig);
                else
                    sigaction(kinds[k].sig, &saved, NULL);
            }

    /* write protection: posix by hand, and trapkit's regions */
    /* trapkit-posix: trapkit's dispatch with the fast paths off (the
     * kernel's return); fast-signal: the same region with them on; the
     * other mechanisms as a user gets them (fast paths on). */
    const char *ids[] = {"posix",       "trapkit-posix", "fast-signal",
                         "uffd-sigbus", "pkeys",         "fast-signal"};
    enum tk_mech tks[] = {TK_MECH_AUTO,        TK_MECH_POSIX, TK_MECH_POSIX,
                          TK_MECH_UFFD_SIGBUS, TK_MECH_PKEYS, TK_MECH_POSIX};
    bool fast_on[] = {false, false, true, true, true, true};
    unsigned flags[] = {0, 0, 0, 0, 0, TK_REGION_LIGHT}; /* the last: a light handler */
    enum { NM = 6 };
    struct bench_split wp[NM];
    memset(wp, 0, sizeof wp);
    char *pages[NM] = {0};
    tk_region *regions[NM] = {0};
    const char *reasons[NM] = {0};
    for (int i = 0; i < NM; i++) {
        if (tks[i] == TK_MECH_AUTO) {
            pages[i] = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            pages[i][0] = 1;
            mprotect(pages[i], ps, PROT_READ);
            continue;
        }
        tk_region_config c = {
            .len = ps, .mech = tks[i], .handler = bench_null_handler, .flags = flags[i]};
        if (tk_region_create(&c, &regions[i])) {
            reasons[i] = strdup(tk_last_error());
            continue;
        }
        pages[i] = tk_region_base(regions[i]);
        pages[i][0] = 1;
        tk_protect(regions[i], pages[i], ps, TK_PROT_READ);
    }
    for (int r = -1; r < o.reps; r++)
        for (int i = 0; i < NM; i++) {
            if (reasons[i]) continue;
            struct sigaction saved;
            if (tks[i] == TK_MECH_AUTO) install_raw(SIGSEGV, &saved);
            tk_set_fast_paths(fast_on[i] ? fast_default : 0);
            struct bench_split tmp;
            memset(&tmp, 0, sizeof tmp);
            bench_measure(r < 0 ? &tmp : &wp[i], bench_touch, pages[i], iters);
            if (tks[i] == TK_MECH_AUTO) sigaction(SIGSEGV, &saved, NULL);
        }

    const char *E_SIMPLE = "thekkath-levy/deliver-simple";
    const char *E_WP = "thekkath-levy/deliver-wp";
    const char *E_RET = "thekkath-levy/return";
    const char *E_ROUND = "thekkath-levy/round-trip";
    const char *simple_ids[2] = {"posix", "fast-signal"};
    for (int k = 0; k < NK; k++) {
        char p[96];
        snprintf(p, sizeof p, "\"exception\": \"%s\", \"versus\": \"posix\"", kinds[k].name);
        if (!(fast_default & TK_FAST_RETURN)) {
            bench_emit_null("thekkath-levy/round-trip-ratio", "fast-signal", p, "ratio", "x",
                            "the fast return is not possible here (shadow stack)");
            continue;
        }
        struct bench_fig ratio = {.n = 0}; /* before bench_emit sorts the figures */
        for (int r = 0; r < simple[k][0].round.n && r < simple[k][1].round.n; r++)
            bench_add(&ratio, simple[k][1].round.v[r] / simple[k][0].round.v[r]);
        bench_emit_ex("thekkath-levy/round-trip-ratio", "fast-signal", p, "ratio", "x", &ratio,
                      "\"derived\": true, \"derived_from\": [\"thekkath-levy/round-trip\"]");
    }
    for (int k = 0; k < NK; k++)
        for (int fast = 0; fast < 2; fast++) {
            char p[64];
            snprintf(p, sizeof p, "\"exception\": \"%s\"", kinds[k].name);
            if (fast && !(fast_default & TK_FAST_RETURN)) {
                const char *why = "the fast return is not possible here (shadow stack)";
                bench_emit_null(E_SIMPLE, simple_ids[fast], p, "time", "ns", why);
                bench_emit_null(E_RET, simple_ids[fast], p, "time", "ns", why);
                bench_emit_null(E_ROUND, simple_ids[fast], p, "time", "ns", why);
                continue;
            }
            bench_emit_tsc(E_SIMPLE, simple_ids[fast], p, "time", "ns", &simple[k][fast].deliver);
            bench_emit_tsc(E_RET, simple_ids[fast], p, "time", "ns", &simple[k][fast].ret);
            bench_emit(E_ROUND, simple_ids[fast], p, "time", "ns", &simple[k][fast].round);
        }
    for (int i = 0; i < NM; i++) {
        const char *p = flags[i] & TK_REGION_LIGHT
                            ? "\"exception\": \"write-protection\", \"light\": true"
                            : "\"exception\": \"write-protection\"";
        if (reasons[i]) {
            bench_emit_null(E_WP, ids[i], p, "time", "ns", reasons[i]);
            bench_emit_null(E_RET, ids[i], p, "time", "ns", reasons[i]);
            bench_emit_null(E_ROUND, ids[i], p, "time", "ns", reasons[i]);
            continue;
        }
        bench_emit_tsc(E_WP, ids[i], p, "time", "ns", &wp[i].deliver);
        bench_emit_tsc(E_RET, ids[i], p, "time", "ns", &wp[i].ret);
        bench_emit(E_ROUND, ids[i], p, "time", "ns", &wp[i].round);
    }
    /* a null system call, the seed's yardstick (Ultrix getpid: 12 us) */
    struct bench_fig sc = {.n = 0};
    for (int r = -1; r < o.reps; r++) {
        uint64_t t0 = bench_now_ns();
        for (long i = 0; i < iters * 10; i++) syscall(SYS_getpid);
        double v = (double)(bench_now_ns() - t0) / (double)(iters * 10);
        if (r >= 0) bench_add(&sc, v);
    }
    bench_emit("thekkath-levy/null-syscall", "posix", "\"call\": \"getpid\"", "time", "ns", &sc);
    return 0;
}
