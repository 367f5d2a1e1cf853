/* tests/aseq_basic.c - rollforward atomic sequences, one behaviour at a
 * time: deferral to the end with the handler's own siginfo and mask,
 * several pending signals of several kinds, priorities, the safety check
 * refusing sequences it cannot prove (and their signals running the plain
 * way), the user-level sigprocmask, and bad arguments.
 */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <trapkit/aseq.h>
#include <unistd.h>

#include "testutil.h"

static volatile int state;
static volatile int calls, calls_rt, calls_usr2, inside;
static volatile int last_signo, last_code, mask_had_usr2;

static void h_usr1(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    calls++;
    if (state == 1) inside++;
    last_signo = si->si_signo;
    last_code = si->si_code;
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    mask_had_usr2 = sigismember(&cur, SIGUSR2) && sigismember(&cur, sig);
}

static void h_rt(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    calls_rt++;
    if (state == 1) inside++;
}

static void h_usr2(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    calls_usr2++;
    if (state == 1) inside++;
}

/* ---- sequences the check must refuse ---- */
static volatile int mid;
static volatile long saw_mid;
static int unsafe_loop_line, unsafe_call_line;

TK_ASEQ_NO_SANITIZE __attribute__((noinline)) static void unsafe_loop(void)
{
    unsafe_loop_line = __LINE__ + 1;
    TK_ASEQ_HYB_JUMP(TK_ASEQ_ALL, {
        mid = 1;
        for (volatile int i = 0; i < 100; i++) {
        }
        mid = 0;
    });
}

TK_ASEQ_NO_SANITIZE __attribute__((noinline)) static void unsafe_call(void)
{
    unsafe_call_line = __LINE__ + 1;
    TK_ASEQ_DYN_FAULT(TK_ASEQ_ALL, {
        mid = 1;
        getppid();
        mid = 0;
    });
}

static void h_mid(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    if (mid) saw_mid++;
}

static pthread_t main_thread;
static atomic_bool stop;
static void *flood(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        pthread_kill(main_thread, SIGUSR1);
        for (int i = 0; i < 300; i++) __builtin_ia32_pause();
    }
    return NULL;
}

static bool kernel_blocks(int sig)
{
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    return sigismember(&cur, sig);
}

int main(void)
{
    /* bad arguments: refused, nothing installed */
    CHECK(tk_aseq_signal(SIGSEGV, h_usr1, NULL, 0, 0) == -EINVAL);
    CHECK(tk_aseq_signal(SIGKILL, h_usr1, NULL, 0, 0) == -EINVAL);
    CHECK(tk_aseq_signal(0, h_usr1, NULL, 0, 0) == -EINVAL);
    CHECK(tk_aseq_signal(NSIG, h_usr1, NULL, 0, 0) == -EINVAL);
    CHECK(tk_aseq_signal(SIGUSR1, h_usr1, NULL, SA_SIGINFO, 0) == -EINVAL);
    CHECK(tk_aseq_signal(SIGUSR1, h_usr1, NULL, 0, -1) == -EINVAL);
    CHECK(tk_aseq_signal(SIGUSR1, h_usr1, NULL, 0, TK_ASEQ_PRIO_MAX + 1) == -EINVAL);
    CHECK(strstr(tk_last_error(), "priority"));
    CHECK(tk_aseq_sigprocmask(99, NULL, NULL) == 0); /* no set: only reads */
    sigset_t one;
    sigemptyset(&one);
    CHECK(tk_aseq_sigprocmask(99, &one, NULL) == -EINVAL);

    /* a signal inside a Dyn/Jump sequence runs at its end, once, with its
     * own siginfo and mask */
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR2);
    CHECK_OK(tk_aseq_signal(SIGUSR1, h_usr1, &m, 0, 5));
    CHECK_OK(tk_aseq_signal(SIGRTMIN + 3, h_rt, NULL, 0, 5));
    CHECK_OK(tk_aseq_signal(SIGUSR2, h_usr2, NULL, 0, 9));
    TK_ASEQ_DYN_JUMP(TK_ASEQ_ALL, {
        state = 1;
        raise(SIGUSR1);
        state = 2;
    });
    state = 0;
    CHECK(calls == 1 && inside == 0);
    CHECK(last_signo == SIGUSR1 && last_code == SI_TKILL);
    CHECK(mask_had_usr2);
    CHECK(!kernel_blocks(SIGUSR1) && !kernel_blocks(SIGUSR2) && !kernel_blocks(SIGRTMIN + 3));

    /* several pending signals of several kinds, all during one sequence */
    calls = 0;
    TK_ASEQ_DYN_JUMP(TK_ASEQ_ALL, {
        state = 1;
        raise(SIGUSR1);
        raise(SIGRTMIN + 3);
        raise(SIGRTMIN + 3);
        raise(SIGUSR2);
        raise(SIGRTMIN + 3);
        state = 2;
    });
    state = 0;
    CHECK(calls == 1 && calls_rt == 3 && calls_usr2 == 1 && inside == 0);
    CHECK(!kernel_blocks(SIGUSR1) && !kernel_blocks(SIGRTMIN + 3));

    /* priorities: a sequence of level 6 defers SIGUSR1 (5), not SIGUSR2 (9) */
    calls = calls_usr2 = 0;
    TK_ASEQ_DYN_JUMP(6, {
        state = 1;
        raise(SIGUSR2);
        raise(SIGUSR1);
        state = 2;
    });
    state = 0;
    CHECK(calls_usr2 == 1 && calls == 1 && inside == 1); /* SIGUSR2 ran inside */

    tk_aseq_stats st;
    tk_aseq_get_stats(&st);
    CHECK(st.rollforwards == 3 && st.rolled[0] == 3);

    /* the check: the looping Hyb/Jump and the calling Dyn/Fault sequence
     * are reported with their file and line; their signals run at once */
    unsafe_loop();
    unsafe_call();
    int fds[2];
    CHECK(pipe(fds) == 0);
    CHECK(tk_aseq_check(fds[1]) == 2);
    close(fds[1]);
    char report[2048] = {0};
    CHECK(read(fds[0], report, sizeof report - 1) > 0);
    printf("%s", report);
    char want[64];
    snprintf(want, sizeof want, "aseq_basic.c:%d:", unsafe_loop_line);
    CHECK(strstr(report, want) && strstr(report, "backwards"));
    snprintf(want, sizeof want, "aseq_basic.c:%d:", unsafe_call_line);
    CHECK(strstr(report, want) && strstr(report, "a call"));
    tk_aseq_get_stats(&st);
    CHECK(st.unsafe == 2);

    CHECK_OK(tk_aseq_signal(SIGUSR1, h_mid, NULL, SA_RESTART, 0));
    main_thread = pthread_self();
    pthread_t th;
    CHECK(pthread_create(&th, NULL, flood, NULL) == 0);
    uint64_t refused0 = st.refused;
    /* until 20 of each have been seen (how many iterations that takes
     * depends on the machine and the build: up to a minute) */
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; saw_mid < 20 || st.refused - refused0 < 20; i++) {
        if (i % 2)
            unsafe_loop();
        else
            unsafe_call();
        tk_aseq_get_stats(&st);
        if (i % 4096 == 0) {
            clock_gettime(CLOCK_MONOTONIC, &t);
            if (t.tv_sec - t0.tv_sec > 60) break;
        }
    }
    atomic_store(&stop, true);
    pthread_join(th, NULL);
    printf("refused sequences: %lu signals ran at once inside them, %ld saw them half done\n",
           (unsigned long)(st.refused - refused0), saw_mid);
    CHECK(st.refused - refused0 >= 20 && saw_mid >= 20);

    /* the user-level sigprocmask */
    calls_rt = 0;
    CHECK_OK(tk_aseq_signal(SIGUSR1, h_usr1, NULL, 0, 0));
    sigset_t b, old;
    sigemptyset(&b);
    sigaddset(&b, SIGRTMIN + 3);
    CHECK_OK(tk_aseq_sigprocmask(SIG_BLOCK, &b, &old));
    CHECK(!sigismember(&old, SIGRTMIN + 3));
    CHECK(!kernel_blocks(SIGRTMIN + 3)); /* no system call yet */
    raise(SIGRTMIN + 3);
    raise(SIGRTMIN + 3);
    raise(SIGRTMIN + 3);
    CHECK(calls_rt == 0);
    CHECK(kernel_blocks(SIGRTMIN + 3)); /* raised lazily when the first came */
    calls = 0;
    raise(SIGUSR1); /* not masked: at once */
    CHECK(calls == 1);
    sigset_t now;
    CHECK_OK(tk_aseq_sigprocmask(SIG_BLOCK, NULL, &now));
    CHECK(sigismember(&now, SIGRTMIN + 3) && !sigismember(&now, SIGUSR1));
    CHECK_OK(tk_aseq_sigprocmask(SIG_UNBLOCK, &b, NULL));
    CHECK(calls_rt == 3);
    CHECK(!kernel_blocks(SIGRTMIN + 3));
    tk_aseq_get_stats(&st);
    CHECK(st.held == 1);
    /* SIG_SETMASK, and nothing held: no slow path */
    CHECK_OK(tk_aseq_sigprocmask(SIG_SETMASK, &b, NULL));
    CHECK_OK(tk_aseq_sigprocmask(SIG_SETMASK, &one, &old));
    CHECK(sigismember(&old, SIGRTMIN + 3));

    /* back to the default action */
    CHECK_OK(tk_aseq_signal(SIGRTMIN + 3, NULL, NULL, 0, 0));
    struct sigaction sa;
    CHECK(sigaction(SIGRTMIN + 3, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL);
    printf("ok\n");
    return 0;
}
