/* tests/aseq_flood.c - data structures shared with signal handlers stay
 * intact under a flood of signals, and every signal is handled exactly
 * once (argv[1]: dyn-jump, dyn-fault or hyb-jump: the scheme of the
 * operations).
 *
 * The main thread moves K nodes around a LIFO stack and a FIFO queue and
 * increments a pair of words with a two-word compare-and-swap, millions of
 * times.  Three kinds of signals hit it meanwhile: a real-time signal
 * another thread queues as fast as it can (each carries a sequence number;
 * each must be handled exactly once), a standard signal a second thread
 * sends, and a high-frequency timer.  Every handler does the same
 * operations on the same structures.  At the end: every node is in exactly
 * one structure, both words equal the number of successful increments, and
 * every queued signal was handled once.
 *
 * Built with TK_ASEQ_UNPROTECTED (aseq_flood_unprotected), the same
 * operations run without protection and the test passes only if it sees
 * the corruption that protection prevents: so it can fail.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <trapkit/aseq.h>
#include <unistd.h>

#include "testutil.h"

enum { K = 64, NSEND = 50000 };

struct item {
    struct tk_aseq_node node;
    int id;
};
static struct item items[K];
static struct tk_aseq_stack stack;
static struct tk_aseq_queue queue;
static uint64_t pair[2];
static long incr_main, incr_handler;
static unsigned char seen[NSEND];
static volatile long rt_handled, usr_handled, timer_handled, dup_or_bad;
static atomic_long rt_sent; /* queued by send_rt */
static int scheme;
static pthread_t main_thread;
static atomic_bool stop_senders;
static volatile long sent_usr;

static void push(struct item *it)
{
    if (scheme == 0) tk_aseq_push_dyn_jump(&stack, &it->node);
    if (scheme == 1) tk_aseq_push_dyn_fault(&stack, &it->node);
    if (scheme == 2) tk_aseq_push(&stack, &it->node);
}
static struct item *pop(void)
{
    struct tk_aseq_node *n = scheme == 0   ? tk_aseq_pop_dyn_jump(&stack)
                             : scheme == 1 ? tk_aseq_pop_dyn_fault(&stack)
                                           : tk_aseq_pop(&stack);
    return (struct item *)n;
}
static void enq(struct item *it)
{
    if (scheme == 0) tk_aseq_enqueue_dyn_jump(&queue, &it->node);
    if (scheme == 1) tk_aseq_enqueue_dyn_fault(&queue, &it->node);
    if (scheme == 2) tk_aseq_enqueue(&queue, &it->node);
}
static struct item *deq(void)
{
    struct tk_aseq_node *n = scheme == 0   ? tk_aseq_dequeue_dyn_jump(&queue)
                             : scheme == 1 ? tk_aseq_dequeue_dyn_fault(&queue)
                                           : tk_aseq_dequeue(&queue);
    return (struct item *)n;
}
static bool cas2(uint64_t o0, uint64_t o1, uint64_t n0, uint64_t n1)
{
    return scheme == 0   ? tk_aseq_cas2_dyn_jump(pair, o0, o1, n0, n1)
           : scheme == 1 ? tk_aseq_cas2_dyn_fault(pair, o0, o1, n0, n1)
                         : tk_aseq_cas2(pair, o0, o1, n0, n1);
}

/* One round of everything; returns false if it saw the words disagree. */
static bool round_trip(volatile long *incr)
{
    struct item *it = pop();
    if (it) enq(it);
    it = deq();
    if (it) push(it);
    for (;;) {
        /* the two loads are not one sequence: a handler between them
         * makes them disagree, and the CAS2 fails and retries */
        uint64_t a = pair[0], b = pair[1];
        if (cas2(a, b, a + 1, b + 1)) {
            if (a != b) return false; /* both words were torn apart */
            break;
        }
    }
    __atomic_fetch_add(incr, 1, __ATOMIC_RELAXED); /* handlers nest */
    return true;
}

static void on_rt(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    int v = si->si_value.sival_int;
    if (si->si_code != SI_QUEUE || v < 0 || v >= NSEND || seen[v]++) dup_or_bad++;
    rt_handled++;
    if (!round_trip(&incr_handler)) dup_or_bad += 1000000;
}

static void on_usr(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    usr_handled++;
    if (!round_trip(&incr_handler)) dup_or_bad += 1000000;
}

static void on_timer(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    timer_handled++;
    if (!round_trip(&incr_handler)) dup_or_bad += 1000000;
}

/* Queues NSEND real-time signals as fast as the main thread takes them:
 * up to 4 at once in flight, so the main thread still gets to run between
 * them (a full queue would keep it in handlers for good). */
static void *send_rt(void *arg)
{
    uint64_t seed = 0x5eed;
    (void)arg;
    for (int v = 0; v < NSEND && !atomic_load(&stop_senders); v++) {
        while (v - rt_handled >= 4 && !atomic_load(&stop_senders)) sched_yield();
        union sigval sv = {.sival_int = v};
        while (pthread_sigqueue(main_thread, SIGRTMIN, sv) != 0) sched_yield(); /* queue full */
        atomic_fetch_add(&rt_sent, 1);
        for (uint64_t i = tk_test_xorshift(&seed) % 2000; i; i--) __builtin_ia32_pause();
    }
    return NULL;
}

static void *send_usr(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_senders)) {
        pthread_kill(main_thread, SIGUSR1);
        sent_usr++;
        sched_yield();
    }
    return NULL;
}

/* Counts the nodes in the two structures; false if one is lost, twice
 * there, or a list is broken. */
static bool nodes_intact(void)
{
    int count[K] = {0}, n = 0;
    for (struct tk_aseq_node *p = stack.top; p && n <= K; p = p->next, n++)
        count[((struct item *)p)->id]++;
    struct tk_aseq_node *last = NULL;
    for (struct tk_aseq_node *p = queue.head; p && n <= K; p = p->next, n++) {
        count[((struct item *)p)->id]++;
        last = p;
    }
    if (last != queue.tail) return false;
    for (int i = 0; i < K; i++)
        if (count[i] != 1) return false;
    return n == K;
}

int main(int argc, char **argv)
{
    const char *names[] = {"dyn-jump", "dyn-fault", "hyb-jump"};
    scheme = -1;
    for (int i = 0; i < 3; i++)
        if (argc > 1 && !strcmp(argv[1], names[i])) scheme = i;
    CHECK(scheme >= 0);
#ifndef TK_ASEQ_UNPROTECTED
    CHECK(tk_aseq_check(2) == 0);
#endif
    for (int i = 0; i < K; i++) {
        items[i].id = i;
        if (i % 2)
            push(&items[i]);
        else
            enq(&items[i]);
    }
    main_thread = pthread_self();
    CHECK_OK(tk_aseq_signal(SIGRTMIN, on_rt, NULL, SA_RESTART, 0));
    CHECK_OK(tk_aseq_signal(SIGUSR1, on_usr, NULL, SA_RESTART, 0));
    CHECK_OK(tk_aseq_signal(SIGRTMIN + 1, on_timer, NULL, SA_RESTART, 0));
    pthread_t t1, t2;
    CHECK(pthread_create(&t1, NULL, send_rt, NULL) == 0);
    CHECK(pthread_create(&t2, NULL, send_usr, NULL) == 0);
    timer_t tm;
    struct sigevent ev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGRTMIN + 1};
    ev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
    CHECK(timer_create(CLOCK_MONOTONIC, &ev, &tm) == 0);
    struct itimerspec its = {.it_interval = {0, 20000}, .it_value = {0, 20000}};
    CHECK(timer_settime(tm, 0, &its, NULL) == 0);

    long iters = 0;
    bool torn = false;
    time_t deadline = time(NULL) + 120;
    while ((iters < tk_test_scaled(1000000) || rt_handled < tk_test_scaled(NSEND)) &&
           time(NULL) < deadline) {
        if (!round_trip(&incr_main)) torn = true;
        iters++;
#ifdef TK_ASEQ_UNPROTECTED
        if (torn || dup_or_bad) break;
        if (iters % 4096 == 0) {
            /* no handler may run while the lists are walked */
            sigset_t all, old;
            sigfillset(&all);
            pthread_sigmask(SIG_BLOCK, &all, &old);
            bool ok = nodes_intact() && pair[0] == pair[1];
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            if (!ok) break;
        }
#endif
    }
    struct itimerspec off = {{0, 0}, {0, 0}};
    timer_settime(tm, 0, &off, NULL);
    atomic_store(&stop_senders, true);
    pthread_join(t2, NULL);
    pthread_join(t1, NULL);
    /* the real-time signals still queued (up to 4) arrive while the
     * sequences go on */
    for (time_t until = time(NULL) + 30; rt_handled < atomic_load(&rt_sent) && time(NULL) < until;)
        if (!round_trip(&incr_main)) torn = true;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* nothing more arrives while checking */

    bool nodes_ok = nodes_intact(),
         pair_ok = !torn && pair[0] == pair[1] && pair[0] == (uint64_t)(incr_main + incr_handler);
    bool intact = nodes_ok && pair_ok && dup_or_bad == 0;
    if (!intact)
        printf("nodes %s, pair %s, signals %s\n", nodes_ok ? "ok" : "lost or doubled",
               pair_ok ? "ok" : "torn", dup_or_bad ? "duplicated or torn in a handler" : "ok");
    tk_aseq_stats st;
    tk_aseq_get_stats(&st);
    printf("%s%s: %ld rounds; signals: %ld queued real-time, %ld SIGUSR1 (of %ld sent), %ld timer; "
           "%lu rolled forward, %lu at once; pair %lu/%lu, increments %ld; structures %s\n",
           names[scheme],
#ifdef TK_ASEQ_UNPROTECTED
           " (unprotected)",
#else
           "",
#endif
           iters, rt_handled, usr_handled, sent_usr, timer_handled, (unsigned long)st.rollforwards,
           (unsigned long)st.at_once, (unsigned long)pair[0], (unsigned long)pair[1],
           incr_main + incr_handler, intact ? "intact" : "CORRUPT");
#ifdef TK_ASEQ_UNPROTECTED
    CHECK(!intact); /* without protection the flood must break something */
    printf("ok: the unprotected build shows the corruption\n");
#else
    CHECK(intact);
    /* every queued signal handled exactly once; all NSEND unless the
     * deadline came first on a slow machine, and at least a fifth (of the
     * shortened count under TK_TEST_SCALE) */
    long sent = atomic_load(&rt_sent);
    CHECK(sent >= tk_test_scaled(NSEND) / 5);
    CHECK(rt_handled == sent);
    for (long v = 0; v < NSEND; v++) CHECK(seen[v] == (v < sent));
    CHECK(usr_handled > 0 && usr_handled <= sent_usr);
    CHECK(timer_handled > 0);
    CHECK(st.rollforwards > 0 && st.refused == 0);
    printf("ok\n");
#endif
    return 0;
}
