/* Leaving fault handlers by siglongjmp, as runtimes do.  A region handler
 * escapes 100,000 times (half of them from a fault raised inside another
 * signal's handler), the stack-overflow handler escapes 2,000 times (from
 * recursion on a small thread stack), and afterwards: faults are still
 * handled (a handler that resumes), a handler that faults on its own page
 * still ends in the default action, and the region table still frees the
 * regions destroyed (their page-state mappings go away).  On uffd-thread the
 * region handler runs on trapkit's thread, where no jump into the faulting
 * thread is possible: the region part is skipped there. */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

#define ESCAPES 100000
#define OVERFLOWS 2000

static sigjmp_buf env;
static volatile long escapes, resumed;
static volatile int resume_mode;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    if (resume_mode) {
        resumed++;
        return tk_test_open(f);
    }
    escapes++;
    siglongjmp(env, 1);
}

static volatile char *target;
static void on_usr1(int sig)
{
    (void)sig;
    *target = 1; /* faults; the region handler escapes out of this handler too */
}

/* ---- stack overflow on a small thread stack ---- */
static __thread sigjmp_buf ovf_env;
static volatile long overflows;
static volatile long sink;

static tk_action on_overflow(const tk_fault *f, void *arg)
{
    (void)f;
    (void)arg;
    overflows++;
    siglongjmp(ovf_env, 1);
}

static long recurse(long n)
{
    volatile char pad[256];
    pad[0] = (char)n;
    long r = n > (1L << 40) ? 0 : recurse(n + 1) + pad[0];
    sink = r;
    return r;
}

static void *overflow_thread(void *arg)
{
    (void)arg;
    CHECK_OK(tk_altstack_install());
    for (int i = 0; i < OVERFLOWS; i++) {
        if (sigsetjmp(ovf_env, 1) == 0) recurse(0);
    }
    return NULL;
}

static tk_region *self_region;
static tk_action touch_own_page(const tk_fault *f, void *arg)
{
    (void)arg;
    *(volatile char *)f->page = 2; /* faults on the page being handled, forever */
    return TK_RESUME;
}

static void self_fault_child(void *arg)
{
    enum tk_mech m = *(enum tk_mech *)arg;
    self_region = tk_test_region(m, 1, 0, touch_own_page, NULL);
    char *p = tk_region_base(self_region);
    CHECK_OK(tk_prot1(self_region, p, TK_PROT_READ));
    p[0] = 1;
    _exit(3); /* not reached */
}

int main(int argc, char **argv)
{
    enum tk_mech m = tk_test_mech(argc, argv, 0);
    size_t ps = tk_test_page();

    if (m != TK_MECH_UFFD_THREAD) {
        tk_region *r = tk_test_region(m, 4, 0, on_fault, NULL);
        char *base = tk_region_base(r);
        target = base + ps;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr1;
        sigemptyset(&sa.sa_mask);
        CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
        CHECK_OK(tk_protn(r, base, 4 * ps, TK_PROT_READ));
        for (volatile long i = 0; i < ESCAPES; i++) {
            if (sigsetjmp(env, 1) == 0) {
                if (i % 2)
                    base[0] = 1;
                else
                    raise(SIGUSR1);
                fprintf(stderr, "FAIL: the write to a protected page went through\n");
                return 1;
            }
        }
        CHECK(escapes == ESCAPES);
        /* faults are still handled */
        resume_mode = 1;
        base[0] = 7;
        base[ps] = 8;
        CHECK(resumed == 2 && base[0] == 7 && base[ps] == 8);
        CHECK_OK(tk_region_destroy(r));
        printf("%s: %ld escapes from the region handler\n", argv[1], (long)escapes);
    }

    /* the stack-overflow handler, left by siglongjmp */
    CHECK_OK(tk_on_stack_overflow(on_overflow, NULL));
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t th;
    CHECK(pthread_create(&th, &attr, overflow_thread, NULL) == 0);
    CHECK(pthread_join(th, NULL) == 0);
    CHECK(overflows == OVERFLOWS);
    CHECK_OK(tk_on_stack_overflow(NULL, NULL));

    /* a handler faulting on its own page still crashes with SIGSEGV (or
     * SIGBUS where the fault arrives as one) */
    int st = tk_test_in_child(self_fault_child, &m);
    CHECK(WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGBUS));

    /* the table frees destroyed regions: their page-state mappings go */
    int before = (int)tk_test_mappings();
    for (int i = 0; i < 2000; i++) {
        tk_region *x = tk_test_region(m, 16, 0, on_fault, NULL);
        CHECK_OK(tk_region_destroy(x));
    }
    int after = (int)tk_test_mappings();
    printf("%s: %ld stack overflows escaped; mappings %d before 2000 regions, %d after\n", argv[1],
           (long)overflows, before, after);
    CHECK(after < before + 20);
    return 0;
}
