/* Coexistence: faults trapkit does not take go to the handler installed
 * before it (SA_SIGINFO or plain), a sent SIGSEGV honours SIG_IGN, and with
 * SIG_DFL a genuine crash - a wild pointer, or a fault the region's handler
 * declines - still ends the process with SIGSEGV.  Each case runs in a fresh
 * process (this program run again with the case's name), so trapkit is not
 * initialised before the case installs its own handler. */
#include <setjmp.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "testutil.h"

static enum tk_mech mech;
static volatile sig_atomic_t prev_calls;
static volatile void *prev_addr;
static sigjmp_buf escape;
static char *wild; /* a page outside every region, made inaccessible */

static void prev_siginfo(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    prev_calls++;
    prev_addr = si->si_addr;
    CHECK(sig == SIGSEGV);
    siglongjmp(escape, 1);
}

static void prev_plain(int sig)
{
    prev_calls++;
    CHECK(sig == SIGSEGV);
    siglongjmp(escape, 1);
}

static tk_action decline_all(const tk_fault *f, void *arg)
{
    (void)f;
    (void)arg;
    return TK_DECLINE;
}

static tk_action unprot_all(const tk_fault *f, void *arg)
{
    (void)arg;
    return tk_test_open(f);
}

static void make_wild(void)
{
    wild = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(wild != MAP_FAILED);
}

/* The previous handler, installed before trapkit, gets what trapkit does not
 * take: a wild access, and a fault its region declines; trapkit's own faults
 * never reach it. */
static void with_previous(void *arg)
{
    bool siginfo = arg != NULL;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (siginfo) {
        sa.sa_sigaction = prev_siginfo;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    } else {
        sa.sa_handler = prev_plain;
        sa.sa_flags = SA_NODEFER;
    }
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    make_wild();

    size_t ps = tk_test_page();
    tk_region *ours = tk_test_region(mech, 4, 0, unprot_all, NULL);
    tk_region *theirs = tk_test_region(mech, 4, 0, decline_all, NULL);
    volatile char *a = tk_region_base(ours), *b = tk_region_base(theirs);

    /* trapkit's fault: handled, the previous handler never sees it */
    CHECK_OK(tk_prot1(ours, (void *)a, TK_PROT_READ));
    a[1] = 1;
    CHECK(a[1] == 1 && prev_calls == 0);

    /* a wild pointer: the previous handler */
    if (sigsetjmp(escape, 1) == 0) {
        *(volatile char *)(wild + 8) = 1;
        CHECK(!"the wild write did not fault");
    }
    CHECK(prev_calls == 1);
    if (siginfo) CHECK(prev_addr == wild + 8);

    /* declined by the region's handler: the previous handler, as a SIGSEGV */
    CHECK_OK(tk_prot1(theirs, (void *)(b + ps), TK_PROT_READ));
    if (sigsetjmp(escape, 1) == 0) {
        b[ps + 3] = 1;
        CHECK(!"the declined write completed");
    }
    CHECK(prev_calls == 2);
    if (siginfo) CHECK(prev_addr == b + ps + 3);

    /* trapkit keeps working after both */
    CHECK_OK(tk_prot1(ours, (void *)(a + ps), TK_PROT_NONE));
    CHECK(a[ps] == 0);
    CHECK(prev_calls == 2);
    /* and the declined page protects again normally */
    CHECK_OK(tk_unprot(theirs, (void *)(b + ps), ps));
    b[ps + 3] = 7;
    CHECK(b[ps + 3] == 7 && prev_calls == 2);
    exit(0);
}

/* SIG_IGN before trapkit: a SIGSEGV sent by kill() is ignored as it would
 * have been; a wild access still kills (the kernel forces it). */
static void with_ignore(void *arg)
{
    (void)arg;
    CHECK(signal(SIGSEGV, SIG_IGN) != SIG_ERR);
    CHECK_OK(tk_init());
    CHECK(kill(getpid(), SIGSEGV) == 0);
    CHECK(raise(SIGSEGV) == 0);
    make_wild();
    *(volatile char *)wild = 1;
    exit(0); /* not reached */
}

static void wild_write(void *arg)
{
    (void)arg;
    tk_region *r = tk_test_region(mech, 4, 0, unprot_all, NULL);
    (void)r;
    make_wild();
    *(volatile char *)wild = 1;
    exit(0);
}

static void declined_write(void *arg)
{
    (void)arg;
    tk_region *r = tk_test_region(mech, 4, 0, decline_all, NULL);
    volatile char *p = tk_region_base(r);
    CHECK_OK(tk_prot1(r, (void *)p, TK_PROT_READ));
    p[0] = 1;
    exit(0);
}

static void declined_read(void *arg)
{
    (void)arg;
    tk_region *r = tk_test_region(mech, 4, 0, decline_all, NULL);
    volatile char *p = tk_region_base(r);
    CHECK_OK(tk_prot1(r, (void *)p, TK_PROT_NONE));
    (void)p[0];
    exit(0);
}

static void sent_segv(void *arg)
{
    (void)arg;
    tk_region *r = tk_test_region(mech, 4, 0, unprot_all, NULL);
    (void)r;
    raise(SIGSEGV);
    exit(0);
}

static void expect(const char *what, int status, int sig)
{
    if (sig == 0) {
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "%s: child failed (status 0x%x)\n", what, status);
            exit(1);
        }
    } else if (!WIFSIGNALED(status) || WTERMSIG(status) != sig) {
        fprintf(stderr, "%s: expected death by signal %d, got status 0x%x\n", what, sig, status);
        exit(1);
    }
    printf("  %-44s ok\n", what);
}

static const struct {
    const char *name, *what;
    void (*fn)(void *);
    void *arg;
    int sig; /* expected terminating signal, 0 = clean exit */
} cases[] = {
    {"siginfo", "previous SA_SIGINFO handler", with_previous, (void *)1, 0},
    {"plain", "previous plain handler", with_previous, NULL, 0},
    {"ignore", "SIG_IGN: sent ignored, wild access kills", with_ignore, NULL, SIGSEGV},
    {"wild", "SIG_DFL: wild pointer crashes", wild_write, NULL, SIGSEGV},
    {"declined-write", "SIG_DFL: declined write crashes", declined_write, NULL, SIGSEGV},
    {"declined-read", "SIG_DFL: declined read crashes", declined_read, NULL, SIGSEGV},
    {"sent", "SIG_DFL: sent SIGSEGV kills", sent_segv, NULL, SIGSEGV},
};

int main(int argc, char **argv)
{
    if (argc == 3) { /* one case, in its own process */
        mech = tk_mech_parse(argv[1]);
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
            if (strcmp(argv[2], cases[i].name) == 0) {
                cases[i].fn(cases[i].arg);
                return 0;
            }
        fprintf(stderr, "unknown case %s\n", argv[2]);
        return 1;
    }
    mech = tk_test_mech(argc, argv, 0);
    printf("chaining on %s:\n", tk_mech_name(mech));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            char *args[] = {argv[0], argv[1], (char *)cases[i].name, NULL};
            execv("/proc/self/exe", args);
            _exit(127);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        expect(cases[i].what, status, cases[i].sig);
    }
    return 0;
}
