/* tests/fast_paths.c - the fast-path switches, tk_trap_install, when the
 * fast return must not be taken, and eager amplification.  Run with
 * TRAPKIT_FAST=on and =off: behaviour is the same, only the counters of
 * fast returns differ.
 */
#include <setjmp.h>
#include <stdatomic.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "testutil.h"

static bool fast_on;

/* ---- switches ----------------------------------------------------------- */
static void test_switches(void)
{
    unsigned m;
    CHECK(tk_fast_parse("off", &m) == 0 && m == 0);
    CHECK(tk_fast_parse("all", &m) == 0 && m == TK_FAST_ALL);
    CHECK(tk_fast_parse("return,subpage", &m) == 0 && m == (TK_FAST_RETURN | TK_FAST_SUBPAGE));
    CHECK(tk_fast_parse("eager", &m) == 0 && m == TK_FAST_EAGER);
    CHECK(tk_fast_parse("return,bogus", &m) == -EINVAL);
    CHECK(tk_fast_parse("", &m) == 0 && m == 0);
    unsigned now = tk_fast_paths();
    CHECK_ERR(tk_set_fast_paths(0x80), -EINVAL);
    CHECK(tk_fast_paths() == now);
    CHECK_OK(tk_set_fast_paths(0));
    CHECK(tk_fast_paths() == 0);
    CHECK_OK(tk_set_fast_paths(now));
    CHECK(tk_fast_paths() == now);
}

/* ---- tk_trap_install ---------------------------------------------------- */
void trap_int3(void);
void trap_ud2(void);
extern char trap_ud2_end[];
long trap_div(long a, long b);
extern char trap_div_insn[], trap_div_end[];
__asm__(".text\n"
        ".globl trap_int3\n"
        "trap_int3: int3\n"
        "    ret\n"
        ".globl trap_ud2\n"
        "trap_ud2: ud2\n"
        ".globl trap_ud2_end\n"
        "trap_ud2_end: ret\n"
        ".globl trap_div\n"
        "trap_div: mov %rdi, %rax\n"
        "    cqo\n"
        ".globl trap_div_insn\n"
        "trap_div_insn: idivq %rsi\n"
        ".globl trap_div_end\n"
        "trap_div_end: ret\n");

static volatile int traps_seen;

static tk_action on_trap(int sig, void *si, void *ucv, void *arg)
{
    (void)si;
    (void)arg;
    ucontext_t *uc = ucv;
    greg_t *ip = &uc->uc_mcontext.gregs[REG_RIP];
    traps_seen++;
    if (sig == SIGTRAP) return TK_RESUME; /* the PC is past the int3 already */
    if (sig == SIGILL && *ip == (greg_t)trap_ud2) {
        *ip = (greg_t)trap_ud2_end;
        return TK_RESUME;
    }
    if (sig == SIGFPE && *ip == (greg_t)trap_div_insn) {
        uc->uc_mcontext.gregs[REG_RAX] = -1; /* x / 0 := -1 */
        *ip = (greg_t)trap_div_end;
        return TK_RESUME;
    }
    return TK_DECLINE;
}

static int child_status(void (*fn)(void))
{
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        fn();
        _exit(0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid);
    return st;
}

static void raise_unknown_ud2(void)
{
    CHECK_OK(tk_trap_install(SIGILL, on_trap, NULL));
    __asm__ volatile("ud2"); /* not trap_ud2: declined, the default action */
}

static void test_traps(void)
{
    CHECK_ERR(tk_trap_install(SIGSEGV, on_trap, NULL), -EINVAL);
    CHECK_ERR(tk_trap_install(SIGUSR1, on_trap, NULL), -EINVAL);
    CHECK_ERR(tk_trap_install(SIGILL, NULL, NULL), -EINVAL);
    CHECK_OK(tk_trap_install(SIGTRAP, on_trap, NULL));
    CHECK_OK(tk_trap_install(SIGILL, on_trap, NULL));
    CHECK_OK(tk_trap_install(SIGFPE, on_trap, NULL));
    uint64_t f0 = tk_fast_return_count();
    for (int i = 0; i < 100; i++) {
        trap_int3();
        trap_ud2();
        CHECK(trap_div(42, 0) == -1);
        CHECK(trap_div(42, 2) == 21);
    }
    CHECK(traps_seen == 300);
    uint64_t fast = tk_fast_return_count() - f0;
    CHECK(fast_on ? fast == 300 : fast == 0);
    CHECK_OK(tk_trap_remove(SIGTRAP));
    CHECK_OK(tk_trap_remove(SIGILL));
    CHECK_OK(tk_trap_remove(SIGFPE));
    struct sigaction cur;
    sigaction(SIGILL, NULL, &cur);
    CHECK(cur.sa_handler == SIG_DFL);

    /* a trap the handler declines gets the default action */
    int st = child_status(raise_unknown_ud2);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGILL);
}

/* ---- when the kernel must return ---------------------------------------- */
static tk_region *region;
static volatile int edit_mask;

static tk_action open_page(const tk_fault *f, void *arg)
{
    (void)arg;
    if (edit_mask) sigaddset(&((ucontext_t *)f->ucontext)->uc_sigmask, SIGUSR1);
    return tk_test_open(f);
}

static struct sigaction trapkit_sa;
static volatile int after_chain;
/* Another runtime's handlers, installed after trapkit with SIGUSR2 in their
 * sa_mask and without SA_NODEFER, passing faults on to trapkit: one by a
 * call with work after it (which must run), one by a plain call in tail
 * position (which the compiler may turn into a jump). */
static void chaining_handler(int sig, siginfo_t *si, void *uc)
{
    trapkit_sa.sa_sigaction(sig, si, uc);
    after_chain++;
}
static void tail_chaining_handler(int sig, siginfo_t *si, void *uc)
{
    trapkit_sa.sa_sigaction(sig, si, uc);
}

static bool blocked(int sig)
{
    sigset_t cur;
    sigprocmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, sig);
}

static void test_slow_cases(void)
{
    size_t ps = tk_test_page();
    region = tk_test_region(TK_MECH_POSIX, 1, 0, open_page, NULL);
    char *p = tk_region_base(region);

    /* a handler that edits uc_sigmask: the kernel applies it */
    edit_mask = 1;
    CHECK_OK(tk_protect(region, p, ps, TK_PROT_READ));
    uint64_t f0 = tk_fast_return_count();
    p[0] = 1;
    CHECK(tk_fast_return_count() == f0);
    CHECK(blocked(SIGUSR1));
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    edit_mask = 0;

    /* called by another handler with a wider mask: trapkit returns to it,
     * and the interrupted code gets its own mask back */
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = chaining_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaddset(&sa.sa_mask, SIGUSR2);
    CHECK(sigaction(SIGSEGV, &sa, &trapkit_sa) == 0);
    for (int i = 0; i < 10; i++) {
        CHECK_OK(tk_protect(region, p, ps, TK_PROT_READ));
        f0 = tk_fast_return_count();
        p[1] = (char)i;
        CHECK(p[1] == i);
        CHECK(tk_fast_return_count() == f0);
        CHECK(after_chain == i + 1);
        CHECK(!blocked(SIGUSR2));
        CHECK(!blocked(SIGSEGV));
    }
    sa.sa_sigaction = tail_chaining_handler;
    CHECK(sigaction(SIGSEGV, &sa, NULL) == 0);
    for (int i = 0; i < 10; i++) {
        CHECK_OK(tk_protect(region, p, ps, TK_PROT_READ));
        p[1] = (char)(i + 20);
        CHECK(p[1] == i + 20);
        CHECK(!blocked(SIGUSR2));
        CHECK(!blocked(SIGSEGV));
    }
    CHECK(sigaction(SIGSEGV, &trapkit_sa, NULL) == 0);

    /* and straight from the kernel again */
    CHECK_OK(tk_protect(region, p, ps, TK_PROT_READ));
    f0 = tk_fast_return_count();
    p[2] = 1;
    CHECK(tk_fast_return_count() - f0 == (fast_on ? 1u : 0u));
    CHECK_OK(tk_region_destroy(region));
}

/* ---- eager amplification ------------------------------------------------ */
struct seen {
    int prot;
    unsigned flags;
    int calls;
    bool decline;
};

static tk_action record_only(const tk_fault *f, void *arg)
{
    struct seen *s = arg;
    s->prot = tk_protection(f->region, f->page);
    s->flags = f->flags;
    s->calls++;
    return s->decline ? TK_DECLINE : TK_RESUME; /* no protection change here */
}

static tk_region *eager_region;
static void previous_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    /* a declined fault: its page has its old protection back */
    _exit(tk_protection(eager_region, tk_region_base(eager_region)) == TK_PROT_READ ? 42 : 43);
}

static void eager_decline(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = previous_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    static struct seen s = {.decline = true};
    tk_region_config c = {.len = tk_test_page(),
                          .handler = record_only,
                          .arg = &s,
                          .mech = TK_MECH_POSIX,
                          .flags = TK_REGION_EAGER};
    CHECK_OK(tk_region_create(&c, &eager_region));
    char *p = tk_region_base(eager_region);
    CHECK_OK(tk_protect(eager_region, p, tk_test_page(), TK_PROT_READ));
    p[0] = 1;
    _exit(1);
}

static void test_eager(enum tk_mech m)
{
    size_t ps = tk_test_page();
    struct seen s = {0};
    tk_region_config c = {
        .len = 4 * ps, .handler = record_only, .arg = &s, .mech = m, .flags = TK_REGION_EAGER};
    tk_region *r;
    int err = tk_region_create(&c, &r);
    if (err == -EOPNOTSUPP || err == -ENOSPC) {
        printf("eager on %s: not available here (%s)\n", tk_mech_name(m), tk_last_error());
        return;
    }
    CHECK_OK(err);
    bool eager = (tk_fast_paths() & TK_FAST_EAGER) != 0;
    size_t len = m == TK_MECH_PKEYS ? 4 * ps : ps;
    volatile char *p = tk_region_base(r);

    /* a write to a read-only page */
    CHECK_OK(tk_protect(r, (void *)p, len, TK_PROT_READ));
    p[0] = 7;
    atomic_signal_fence(memory_order_seq_cst); /* s changed in the handler */
    CHECK(p[0] == 7 && s.calls == 1);
    CHECK(tk_protection(r, (void *)p) == TK_PROT_RW);
    CHECK(eager ? s.prot == TK_PROT_RW && (s.flags & TK_FAULT_AMPLIFIED)
                : s.prot == TK_PROT_READ && !(s.flags & TK_FAULT_AMPLIFIED));

    /* a read of an inaccessible page opens it for reading only (not pkeys:
     * its rights are the region's, and the rest of it stays as it was) */
    if (m == TK_MECH_POSIX) {
        CHECK_OK(tk_protect(r, (void *)p, len, TK_PROT_NONE));
        atomic_signal_fence(memory_order_seq_cst);
        CHECK(p[0] == 7 && s.calls == 2);
        CHECK(tk_protection(r, (void *)p) == TK_PROT_READ);
        CHECK(eager ? s.prot == TK_PROT_READ : s.prot == TK_PROT_NONE);
        p[0] = 8; /* and a write after it */
        atomic_signal_fence(memory_order_seq_cst);
        CHECK(s.calls == 3 && tk_protection(r, (void *)p) == TK_PROT_RW);
    }
    CHECK_OK(tk_region_destroy(r));
    printf("eager on %s: ok (%s)\n", tk_mech_name(m), eager ? "before the handler" : "after it");
}

/* ---- the alternate stack, pkeys eager reads, SIGTRAP with sub-pages ---- */
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1u << 31)
#endif
static void test_autodisarm(void)
{
    size_t ps = tk_test_page();
    tk_region *r = tk_test_region(TK_MECH_POSIX, 1, 0, open_page, NULL);
    stack_t ss = {.ss_sp = malloc(65536), .ss_size = 65536, .ss_flags = SS_AUTODISARM}, old;
    if (sigaltstack(&ss, &old) != 0) { /* kernel without SS_AUTODISARM */
        free(ss.ss_sp);
        CHECK_OK(tk_region_destroy(r));
        return;
    }
    volatile char *p = tk_region_base(r);
    CHECK_OK(tk_protect(r, (void *)p, ps, TK_PROT_NONE));
    p[0] = 1; /* handled on the alternate stack, which disarms itself meanwhile */
    stack_t cur;
    CHECK(sigaltstack(NULL, &cur) == 0);
    CHECK(!(cur.ss_flags & SS_DISABLE)); /* re-armed by the return */
    stack_t off = {.ss_flags = SS_DISABLE};
    CHECK(sigaltstack(&off, NULL) == 0);
    free(ss.ss_sp);
    CHECK_OK(tk_region_destroy(r));
}

static struct seen pk_seen;
static void test_eager_pkeys_read(void)
{
    size_t ps = tk_test_page();
    tk_region_config c = {.len = ps,
                          .handler = record_only,
                          .arg = &pk_seen,
                          .mech = TK_MECH_PKEYS,
                          .flags = TK_REGION_EAGER};
    tk_region *r;
    if (tk_region_create(&c, &r) != 0) return; /* no PKU here */
    volatile int *p = tk_region_base(r);
    CHECK_OK(tk_protect(r, (void *)p, ps, TK_PROT_NONE));
    int v = *p; /* a read: opened read-only (eagerly or after the handler) */
    atomic_signal_fence(memory_order_seq_cst); /* pk_seen changed in the handler */
    CHECK(pk_seen.calls == 1 && tk_protection(r, (void *)p) == TK_PROT_READ);
    *p = v + 1; /* so a write still reaches the handler */
    atomic_signal_fence(memory_order_seq_cst);
    CHECK(pk_seen.calls == 2 && tk_protection(r, (void *)p) == TK_PROT_RW && *p == v + 1);
    CHECK_OK(tk_region_destroy(r));
}

static volatile int user_traps;
static tk_action count_trap(int sig, void *si, void *uc, void *arg)
{
    (void)sig, (void)si, (void)uc, (void)arg;
    user_traps++;
    return TK_RESUME;
}

static void test_sigtrap_with_subpages(void)
{
    /* a sub-page region makes trapkit handle SIGTRAP for its single-steps;
     * other SIGTRAPs still reach the program's handler */
    size_t ps = tk_test_page();
    tk_region_config c = {.len = ps, .handler = open_page, .page_size = 512};
    tk_region *r;
    CHECK_OK(tk_region_create(&c, &r));
    CHECK_OK(tk_trap_install(SIGTRAP, count_trap, NULL));
    raise(SIGTRAP);
    trap_int3();
    CHECK(user_traps == 2);
    CHECK_OK(tk_trap_remove(SIGTRAP));
    CHECK_OK(tk_region_destroy(r));
}

/* ---- light regions -------------------------------------------------- */
static volatile int light_calls;
static tk_action light_open(const tk_fault *f, void *arg)
{
    (void)arg;
    light_calls++;
    if (f->access != TK_ACCESS_WRITE) return TK_DECLINE;
    return tk_unprot(f->region, f->page, tk_region_page_size(f->region)) ? TK_DECLINE : TK_RESUME;
}

static tk_region *light_region;
static void light_decline(void)
{
    volatile char *p = tk_region_base(light_region);
    CHECK_OK(tk_protect(light_region, (void *)p, tk_test_page(), TK_PROT_NONE));
    (void)p[0]; /* a read: declined, the default action */
}

static tk_action light_self(const tk_fault *f, void *arg)
{
    (void)arg;
    ((volatile char *)f->page)[1] = 1; /* faults on its own page again */
    return TK_RESUME;
}

static void light_recursive(void)
{
    tk_region_config c = {.len = tk_test_page(), .handler = light_self, .flags = TK_REGION_LIGHT};
    tk_region *r;
    CHECK_OK(tk_region_create(&c, &r));
    CHECK_OK(tk_protect(r, tk_region_base(r), tk_test_page(), TK_PROT_READ));
    ((volatile char *)tk_region_base(r))[0] = 1;
}

static void test_light(void)
{
    size_t ps = tk_test_page();
    tk_region *r;
    tk_region_config c = {.len = ps, .handler = light_open, .flags = TK_REGION_LIGHT};
    c.flags = TK_REGION_LIGHT | TK_REGION_DIRTY;
    CHECK_ERR(tk_region_create(&c, &r), -EINVAL);
    c.flags = TK_REGION_LIGHT | TK_REGION_EAGER;
    CHECK_ERR(tk_region_create(&c, &r), -EINVAL);
    c.flags = TK_REGION_LIGHT;
    c.handler = NULL;
    CHECK_ERR(tk_region_create(&c, &r), -EINVAL);
    c.handler = light_open;
    enum tk_mech mechs[] = {TK_MECH_POSIX, TK_MECH_UFFD_SIGBUS, TK_MECH_PKEYS};
    for (int m = 0; m < 3; m++) {
        c.mech = mechs[m];
        int err = tk_region_create(&c, &r);
        if (err == -EOPNOTSUPP || err == -ENOSPC) continue;
        CHECK_OK(err);
        volatile char *p = tk_region_base(r);
        int errno_before = errno = 4242;
        for (int i = 0; i < 100; i++) {
            CHECK_OK(tk_protect(r, (void *)p, ps, TK_PROT_READ));
            p[i] = (char)i;
            CHECK(p[i] == (char)i);
        }
        CHECK(light_calls >= 100);
        CHECK(errno == errno_before);
        light_calls = 0;
        CHECK_OK(tk_region_destroy(r));
    }
    c.mech = TK_MECH_POSIX;
    CHECK_OK(tk_region_create(&c, &light_region));
    int st = child_status(light_decline);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    st = child_status(light_recursive);
    if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV)) fprintf(stderr, "status %#x\n", st);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV);
    CHECK_OK(tk_region_destroy(light_region));
    printf("light regions: ok\n");
}

int main(void)
{
    CHECK_OK(tk_init());
    const char *env = getenv("TRAPKIT_FAST");
    fast_on = (tk_fast_paths() & TK_FAST_RETURN) != 0;
    if (env && !strcmp(env, "off")) CHECK(tk_fast_paths() == 0);
    test_switches();
    test_traps();
    test_slow_cases();
    test_eager(TK_MECH_POSIX);
    test_eager(TK_MECH_UFFD_SIGBUS);
    test_eager(TK_MECH_UFFD_THREAD);
    test_eager(TK_MECH_PKEYS);
    test_light();
    test_autodisarm();
    test_eager_pkeys_read();
    test_sigtrap_with_subpages();
    int st = child_status(eager_decline);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 42);
    printf("ok: fast paths %s\n", fast_on ? "on" : "off");
    return 0;
}
