/* tests/fast_regs.c - every register intact across a resumed fault.
 *
 * regs_run() (tests/regs.h, in assembly) loads random values into every general
 * register but RSP, the flags (CF PF AF ZF SF DF OF), MXCSR, the x87
 * control word, the vector registers (xmm0-15, ymm0-15 with AVX, zmm0-31 and
 * k0-7 with AVX-512) and the 128-byte red zone below RSP, then stores to a
 * protected page.  The region's handler dirties the vector and FP state
 * (memset, floating point) and opens the page; after the store regs_run
 * saves everything again and the test compares.  Run once per mechanism
 * (argv[1]: posix, uffd-sigbus, pkeys, fast-kernel), with TRAPKIT_FAST on and off, in
 * four settings: plain, on an alternate signal stack, under a flood of
 * SIGALRM whose handler dirties the same state, and with a nested fault in
 * the handler.
 */
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "testutil.h"

#include "regs.h"
extern char regs_fault[];

static tk_region *ra, *rb;
static volatile long faults, nested_faults;
static volatile int nest_mode;

/* a light handler: nothing but trapkit's documented calls */
static tk_action handler_light(const tk_fault *f, void *arg)
{
    (void)arg;
    if (f->pc != (void *)regs_fault) return TK_DECLINE;
    faults++;
    return tk_unprot(f->region, f->page, tk_region_page_size(f->region)) ? TK_DECLINE : TK_RESUME;
}

static tk_action handler_b(const tk_fault *f, void *arg)
{
    (void)arg;
    nested_faults++;
    dirty_fp_state();
    return tk_test_open(f);
}

static tk_action handler_a(const tk_fault *f, void *arg)
{
    (void)arg;
    if (f->pc != (void *)regs_fault) return TK_DECLINE;
    faults++;
    dirty_fp_state();
    if (nest_mode) {
        /* a fault inside the handler, resumed before this one */
        volatile char *b = tk_region_base(rb);
        b[8] = 1;
    }
    return tk_test_open(f);
}

static void on_alarm(int sig)
{
    (void)sig;
    dirty_fp_state();
}

static void run(const char *setting, long iters)
{
    char *page = tk_region_base(ra);
    size_t len = tk_region_page_size(ra);
    long before = faults;
    for (long i = 0; i < iters; i++) {
        randomise(page);
        CHECK_OK(tk_protect(ra, page, len, TK_PROT_READ));
        if (nest_mode)
            CHECK_OK(tk_protect(rb, tk_region_base(rb), tk_region_page_size(rb), TK_PROT_READ));
        regs_run();
        compare(setting, i);
    }
    CHECK(faults - before == iters);
}

int main(int argc, char **argv)
{
    if (argc < 2) return 1;
    enum tk_mech m = tk_mech_parse(argv[1]);
    CHECK(m != TK_MECH_COUNT_);
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw"))
        level = 2;
    else if (__builtin_cpu_supports("avx"))
        level = 1;
    size_t ps = tk_test_page();
    tk_region_config c = {.len = ps, .handler = handler_a, .mech = m};
    int err = tk_region_create(&c, &ra);
    if (err == -EOPNOTSUPP) tk_test_unavailable(argv[1]);
    if (err == -ENOSPC) {
        printf("skipped: %s regions are not available here: %s\n", argv[1], tk_last_error());
        return TK_SKIP;
    }
    CHECK_OK(err);
    c.handler = handler_b;
    CHECK_OK(tk_region_create(&c, &rb));
    const char *env = getenv("TRAPKIT_FAST");
    bool fast_on = (tk_fast_paths() & TK_FAST_RETURN) != 0;
    CHECK(fast_on == !(env && !strcmp(env, "off")) ||
          !(tk_fast_paths_available() & TK_FAST_RETURN));
    printf("%s, vector level %d, fast return %s\n", argv[1], level, fast_on ? "on" : "off");
    /* fast-kernel faults never reach the signal path's fast return: the
     * kernel entered trapkit without a signal, and it always returns in
     * user mode */
    bool counted = strcmp(argv[1], "fast-kernel") != 0;
    if (!counted) fast_on = false;

    uint64_t fast0 = tk_fast_return_count();
    run("plain", 300);
    uint64_t fast1 = tk_fast_return_count();
    CHECK(fast_on ? fast1 - fast0 == 300 : fast1 == fast0);

    /* on an alternate signal stack */
    CHECK_OK(tk_altstack_install());
    run("altstack", 300);
    stack_t off = {.ss_flags = SS_DISABLE}, was;
    CHECK(sigaltstack(&off, &was) == 0);
    free(was.ss_sp); /* tk_altstack_install's, now unused */

    /* under a flood of SIGALRM whose handler dirties the same state */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
    struct itimerval it = {{0, 20}, {0, 20}};
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
    run("signal flood", 3000);
    struct itimerval stop = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &stop, NULL);

    /* a nested fault inside the handler */
    nest_mode = 1;
    long n0 = nested_faults;
    run("nested", 300);
    CHECK(nested_faults - n0 == 300);
    nest_mode = 0;
    /* (on the alternate stack the fast return may be declined: not counted) */
    if (fast_on) CHECK(tk_fast_return_count() - fast1 >= 3000 + 600);

    /* a light region's handler, straight from the dispatcher */
    tk_region *normal = ra;
    c.handler = handler_light;
    c.flags = TK_REGION_LIGHT;
    CHECK_OK(tk_region_create(&c, &ra));
    uint64_t fast2 = tk_fast_return_count();
    run("light", 300);
    CHECK(fast_on ? tk_fast_return_count() - fast2 == 300 : tk_fast_return_count() == fast2);
    CHECK_OK(tk_region_destroy(ra));
    ra = normal;

    CHECK_OK(tk_region_destroy(rb));
    CHECK_OK(tk_region_destroy(ra));
    printf("ok: %ld faults, registers intact\n", (long)faults);
    return 0;
}
