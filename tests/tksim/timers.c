/* Timers and select: setitimer and getitimer, the POSIX timers
 * (timer_create, timer_settime, timer_gettime, timer_getoverrun,
 * timer_delete), their signals taken blocked (sigpending, sigtimedwait),
 * and pselect6 (select).  With an argument, a timer's signal ends the
 * program by its default action: "alarm" (ITIMER_REAL in a busy loop),
 * "sleep" (in nanosleep), "pause" (in sigsuspend), "posix" (timer_create's
 * default SIGALRM), "virtual" (ITIMER_VIRTUAL's SIGVTALRM), "unblock"
 * (SIGALRM pending until it is unblocked), "select" (in select).  The
 * output and the exit status must equal qemu-riscv64's; times that differ
 * between runs are not printed, only checks on them.
 * Build: riscv64-linux-gnu-gcc -O2 -static -o timers timers.c */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/select.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "guest.h"

/* the output: write(2) on descriptor 1, one line a check */

/* "ok", or the errno's name (r: a raw call's -errno, or 0) */
static const char *res(long r)
{
    return r >= 0 ? "ok" : errname((int)-r);
}
#define E(call) res((call) < 0 ? -errno : 0) /* a glibc call's answer */

static long ns(clockid_t c)
{
    struct timespec t;
    clock_gettime(c, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

/* runs until the clock has moved on by ms milliseconds */
static void busy(long ms)
{
    long end = ns(CLOCK_MONOTONIC) + ms * 1000000L;
    while (ns(CLOCK_MONOTONIC) < end) {
    }
}

static void block(int sig, int how)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(how, &s, NULL);
}

static int wait_one(int sig, siginfo_t *si)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    return sigwaitinfo(&s, si);
}

static void itimers(void)
{
    struct itimerval v = {{0, 0}, {0, 0}}, o;
    out("getitimer: ITIMER_REAL unarmed = %s", E(getitimer(ITIMER_REAL, &o)));
    out(", zero %d; which 7 = %s\n", o.it_value.tv_sec == 0 && o.it_value.tv_usec == 0,
        E(getitimer(7, &o)));
    v.it_value.tv_usec = 1000000;
    out("setitimer: 1000000 us = %s", E(setitimer(ITIMER_REAL, &v, NULL)));
    v.it_value.tv_usec = -1;
    out(", -1 us = %s, which 7 = %s\n", E(setitimer(ITIMER_REAL, &v, NULL)),
        E(setitimer(7, &v, NULL)));

    v = (struct itimerval){{1, 500000}, {5, 0}};
    out("setitimer: ITIMER_REAL 5 s, every 1.5 s = %s", E(setitimer(ITIMER_REAL, &v, NULL)));
    getitimer(ITIMER_REAL, &o);
    long left = o.it_value.tv_sec * 1000000L + o.it_value.tv_usec;
    out(", getitimer: left in (0, 5 s] %d, interval %ld.%06ld\n", left > 0 && left <= 5000000,
        (long)o.it_interval.tv_sec, (long)o.it_interval.tv_usec);
    v = (struct itimerval){{0, 0}, {0, 0}};
    out("setitimer: disarmed = %s", E(setitimer(ITIMER_REAL, &v, &o)));
    left = o.it_value.tv_sec * 1000000L + o.it_value.tv_usec;
    out(", the old one had left (0, 5 s] %d", left > 0 && left <= 5000000);
    getitimer(ITIMER_REAL, &o);
    out(", now zero %d\n", o.it_value.tv_sec == 0 && o.it_value.tv_usec == 0);

    /* ignored: the expiry goes by */
    signal(SIGALRM, SIG_IGN);
    v.it_value.tv_usec = 1000;
    setitimer(ITIMER_REAL, &v, NULL);
    busy(3);
    out("SIGALRM ignored: a 1 ms timer expired, the program goes on\n");
    signal(SIGALRM, SIG_DFL);

    /* blocked: pending, then taken */
    block(SIGALRM, SIG_BLOCK);
    setitimer(ITIMER_REAL, &v, NULL);
    busy(3);
    sigset_t p;
    sigpending(&p);
    out("SIGALRM blocked: pending after the expiry %d", sigismember(&p, SIGALRM));
    siginfo_t si;
    out(", sigwaitinfo = %d", wait_one(SIGALRM, &si));
    sigpending(&p);
    out(" (si_signo %d), pending now %d\n", si.si_signo, sigismember(&p, SIGALRM));
    v.it_value.tv_usec = 2000;
    long t0 = ns(CLOCK_MONOTONIC);
    setitimer(ITIMER_REAL, &v, NULL);
    int s1 = wait_one(SIGALRM, &si);
    out("sigwaitinfo: a 2 ms timer's signal = %d, 2 ms or more went by %d\n", s1,
        ns(CLOCK_MONOTONIC) - t0 >= 2000000);
    v = (struct itimerval){{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &v, NULL);
    int got = 0;
    for (int k = 0; k < 3; k++) got += wait_one(SIGALRM, &si) == SIGALRM;
    v = (struct itimerval){{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &v, NULL);
    out("setitimer: every 1 ms, three signals taken %d\n", got);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGALRM);
    struct timespec ten = {0, 10000000};
    t0 = ns(CLOCK_MONOTONIC);
    out("sigtimedwait: no timer, 10 ms = %s", E(sigtimedwait(&s, &si, &ten)));
    out(", 10 ms or more went by %d\n", ns(CLOCK_MONOTONIC) - t0 >= 10000000);
    block(SIGALRM, SIG_UNBLOCK);
}

static void posix_timers(void)
{
    timer_t t;
    struct sigevent ev = {0};
    ev.sigev_notify = SIGEV_NONE;
    out("timer_create: CLOCK_MONOTONIC, SIGEV_NONE = %s",
        E(timer_create(CLOCK_MONOTONIC, &ev, &t)));
    out(", clock 99 = %s", E(timer_create(99, &ev, &t)));
    timer_t u;
    out(", CLOCK_MONOTONIC_RAW = %s\n", E(timer_create(CLOCK_MONOTONIC_RAW, &ev, &u)));
    struct itimerspec v = {{0, 0}, {5, 0}}, o;
    out("timer_settime: 5 s = %s", E(timer_settime(t, 0, &v, NULL)));
    timer_gettime(t, &o);
    long left = o.it_value.tv_sec * 1000000000L + o.it_value.tv_nsec;
    out(", timer_gettime: left in (0, 5 s] %d, overruns %d\n", left > 0 && left <= 5000000000L,
        timer_getoverrun(t));
    v = (struct itimerspec){{0, 1000000}, {0, 1000000}};
    timer_settime(t, 0, &v, NULL);
    busy(3);
    timer_gettime(t, &o);
    left = o.it_value.tv_sec * 1000000000L + o.it_value.tv_nsec;
    out("timer_settime: every 1 ms, 3 ms later the next in (0, 1 ms] %d, interval %ld\n",
        left > 0 && left <= 1000000, o.it_interval.tv_nsec);
    v.it_value.tv_nsec = 1000000000;
    out("timer_settime: 10^9 ns = %s, flags 2 = %s\n", E(timer_settime(t, 0, &v, NULL)),
        E(timer_settime(t, 2, &v, NULL)));
    out("timer_delete: %s, again = %s", E(timer_delete(t)), E(timer_delete(t)));
    out(", timer_gettime of it = %s\n", E(timer_gettime(t, &o)));

    /* SIGEV_SIGNAL, blocked and waited for: relative, then absolute */
    block(SIGUSR1, SIG_BLOCK);
    ev.sigev_notify = SIGEV_SIGNAL;
    ev.sigev_signo = SIGUSR1;
    timer_create(CLOCK_REALTIME, &ev, &t);
    v = (struct itimerspec){{0, 0}, {0, 2000000}};
    long t0 = ns(CLOCK_REALTIME);
    timer_settime(t, 0, &v, NULL);
    siginfo_t si;
    int sig = wait_one(SIGUSR1, &si);
    out("timer_create: SIGUSR1, 2 ms: sigwaitinfo = %d, si_code SI_TIMER %d, 2 ms went by %d\n",
        sig, si.si_code == SI_TIMER, ns(CLOCK_REALTIME) - t0 >= 2000000);
    long at = ns(CLOCK_REALTIME) + 3000000;
    v.it_value = (struct timespec){at / 1000000000L, at % 1000000000L};
    timer_settime(t, TIMER_ABSTIME, &v, NULL);
    sig = wait_one(SIGUSR1, &si);
    out("timer_settime: TIMER_ABSTIME 3 ms on: sigwaitinfo = %d, the time reached %d\n", sig,
        ns(CLOCK_REALTIME) >= at);
    timer_delete(t);
    block(SIGUSR1, SIG_UNBLOCK);
}

static void selects(void)
{
    int p[2];
    if (pipe(p) != 0) _exit(98);
    fd_set r, w;
    FD_ZERO(&r);
    FD_ZERO(&w);
    FD_SET(p[0], &r);
    FD_SET(p[1], &w);
    struct timeval zero = {0, 0};
    int n = select(p[1] + 1, &r, &w, NULL, &zero);
    out("select: an empty pipe = %d (read end %d, write end %d)", n, FD_ISSET(p[0], &r),
        FD_ISSET(p[1], &w));
    if (write(p[1], "x", 1) != 1) _exit(97);
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    struct timeval sec = {1, 0};
    n = select(p[0] + 1, &r, NULL, NULL, &sec);
    out(", after a write = %d (read end %d)\n", n, FD_ISSET(p[0], &r));
    FD_ZERO(&r);
    FD_SET(p[1] + 10, &r);
    out("select: a descriptor not open = %s", E(select(p[1] + 11, &r, NULL, NULL, &zero)));
    out(", nfds -1 = %s\n", E(select(-1, NULL, NULL, NULL, &zero)));
    struct timeval bad = {0, 1000000};
    out("select: 10^6 us = %s\n", E(select(0, NULL, NULL, NULL, &bad)));
    struct timeval ten = {0, 10000};
    long t0 = ns(CLOCK_MONOTONIC);
    n = select(0, NULL, NULL, NULL, &ten);
    out("select: no descriptors, 10 ms = %d, 10 ms or more went by %d, left %ld\n", n,
        ns(CLOCK_MONOTONIC) - t0 >= 10000000, (long)(ten.tv_sec * 1000000 + ten.tv_usec));
    FD_ZERO(&r);
    FD_SET(p[0], &r);
    if (read(p[0], &n, 1) != 1) _exit(96);
    t0 = ns(CLOCK_MONOTONIC);
    struct timespec ts = {0, 10000000};
    sigset_t m;
    sigemptyset(&m);
    n = pselect(p[0] + 1, &r, NULL, NULL, &ts, &m);
    out("pselect: an empty pipe, 10 ms, a mask = %d (read end %d), 10 ms or more went by %d\n", n,
        FD_ISSET(p[0], &r), ns(CLOCK_MONOTONIC) - t0 >= 10000000);
    close(p[0]);
    close(p[1]);
}

/* the cases a signal ends: what is printed before, then the end */
static int ends(const char *how)
{
    struct itimerval v = {{0, 0}, {0, 10000}};
    if (strcmp(how, "alarm") == 0) {
        out("alarm: ITIMER_REAL 10 ms = %s, then a busy loop\n", E(setitimer(ITIMER_REAL, &v, 0)));
        for (volatile unsigned long k = 0;; k++) {
        }
    } else if (strcmp(how, "sleep") == 0) {
        out("sleep: ITIMER_REAL 10 ms = %s, then a 5 s sleep\n", E(setitimer(ITIMER_REAL, &v, 0)));
        sleep(5);
    } else if (strcmp(how, "pause") == 0) {
        out("pause: ITIMER_REAL 10 ms = %s, then pause\n", E(setitimer(ITIMER_REAL, &v, 0)));
        pause();
    } else if (strcmp(how, "select") == 0) {
        out("select: ITIMER_REAL 10 ms = %s, then select for 5 s\n",
            E(setitimer(ITIMER_REAL, &v, 0)));
        struct timeval five = {5, 0};
        select(0, NULL, NULL, NULL, &five);
    } else if (strcmp(how, "virtual") == 0) {
        out("virtual: ITIMER_VIRTUAL 10 ms = %s, then a busy loop\n",
            E(setitimer(ITIMER_VIRTUAL, &v, 0)));
        for (volatile unsigned long k = 0;; k++) {
        }
    } else if (strcmp(how, "posix") == 0) {
        timer_t t;
        struct itimerspec s = {{0, 0}, {0, 10000000}};
        out("posix: timer_create = %s", E(timer_create(CLOCK_MONOTONIC, NULL, &t)));
        out(", 10 ms = %s, then a busy loop\n", E(timer_settime(t, 0, &s, NULL)));
        for (volatile unsigned long k = 0;; k++) {
        }
    } else if (strcmp(how, "unblock") == 0) {
        block(SIGALRM, SIG_BLOCK);
        v.it_value.tv_usec = 1000;
        setitimer(ITIMER_REAL, &v, 0);
        busy(3);
        out("unblock: SIGALRM blocked, the timer expired, still here\n");
        block(SIGALRM, SIG_UNBLOCK);
    }
    out("%s: not ended\n", how);
    return 1;
}

int main(int argc, char **argv)
{
    if (argc == 2) return ends(argv[1]);
    itimers();
    posix_timers();
    selects();
    out("done\n");
    return 0;
}
