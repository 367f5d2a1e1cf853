/* Signal handlers re-entering trapkit.  The main thread changes protections
 * in a loop (tk_protect, tk_unprot, tk_dirty) while a 200 us SIGALRM timer
 * and a real-time signal sent by another thread interrupt it; each signal
 * handler increments a counter on a page the loop keeps write-protected, so
 * its write faults into trapkit while the interrupted thread may be inside
 * trapkit holding the region's lock.  Nothing may deadlock (a watchdog fails
 * the test if the loop stops making progress for 30 s) and every handler's
 * increment must land exactly once. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

#define NPAGES 32
#define SECONDS 3

/* How many times each handler must have run.  ThreadSanitizer defers a
 * signal to the thread's next intercepted call and merges those that arrive
 * meanwhile, so a loop of mprotect calls sees few of them: there, a few
 * re-entries are what its race detection gets to check (a clean run saw 80
 * and 63 in a minute, others on uffd-thread 9 and 9, and 3 and 4 beside
 * the other TSan tests; in a blocking call it runs them at once, hence the
 * loop's sleeps there). */
#if defined(__SANITIZE_THREAD__)
#define MIN_HANDLERS_DEFERRED 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MIN_HANDLERS_DEFERRED 1
#endif
#endif
#ifdef MIN_HANDLERS_DEFERRED
#define MIN_HANDLERS 4
#endif
#ifndef MIN_HANDLERS
#define MIN_HANDLERS 100
#endif

static tk_region *region;
static char *base;
static size_t ps;
static atomic_long progress, alarms, rts, faults;
static atomic_int stop;
static pthread_t main_thread;

static tk_action on_fault(const tk_fault *f, void *arg)
{
    (void)arg;
    atomic_fetch_add(&faults, 1);
    if (f->flags & TK_FAULT_RESOLVED) return TK_RESUME;
    return tk_test_open(f);
}

/* Pages 0 and 1 hold the signal handlers' counters. */
static void on_alarm(int sig)
{
    (void)sig;
    volatile long *c = (volatile long *)(base + 0 * ps);
    *c += 1;
    atomic_fetch_add(&alarms, 1);
}

static void on_rt(int sig)
{
    (void)sig;
    volatile long *c = (volatile long *)(base + 1 * ps);
    *c += 1;
    atomic_fetch_add(&rts, 1);
}

/* Whether either handler has run MIN_HANDLERS times or fewer so far. */
static bool handlers_behind(void)
{
    return atomic_load(&alarms) <= MIN_HANDLERS || atomic_load(&rts) <= MIN_HANDLERS;
}

static void *sender(void *arg)
{
    (void)arg;
    struct timespec ts = {0, 150 * 1000};
    while (!atomic_load(&stop)) {
        pthread_kill(main_thread, SIGRTMIN);
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void *watchdog(void *arg)
{
    (void)arg;
    long last = -1;
    int still = 0;
    while (!atomic_load(&stop)) {
        sleep(1);
        long now = atomic_load(&progress);
        still = now == last ? still + 1 : 0;
        last = now;
        if (still >= 30) {
            fprintf(stderr, "FAIL: no progress for 30 s: deadlocked (alarms %ld, rt %ld)\n",
                    atomic_load(&alarms), atomic_load(&rts));
            _exit(1);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned flags = TK_REGION_DIRTY;
    enum tk_mech m = tk_test_mech(argc, argv, flags);
    ps = tk_test_page();
    region = tk_test_region(m, NPAGES, flags, on_fault, NULL);
    base = tk_region_base(region);
    memset(base, 0, NPAGES * ps);
    uint64_t bm[1];
    main_thread = pthread_self();

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
    sa.sa_handler = on_rt;
    CHECK(sigaction(SIGRTMIN, &sa, NULL) == 0);

    /* the other threads block both signals: only the main thread takes them */
    sigset_t both, old;
    sigemptyset(&both);
    sigaddset(&both, SIGALRM);
    sigaddset(&both, SIGRTMIN);
    pthread_sigmask(SIG_BLOCK, &both, &old);
    pthread_t snd, wd;
    CHECK(pthread_create(&wd, NULL, watchdog, NULL) == 0);
    CHECK(pthread_create(&snd, NULL, sender, NULL) == 0);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    struct itimerval it = {{0, 200}, {0, 200}};
    CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);

    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long rounds = 0;
    do {
        /* the counters' pages and others, one by one and in runs */
        for (size_t p = 0; p < NPAGES; p++) CHECK_OK(tk_prot1(region, base + p * ps, TK_PROT_READ));
        CHECK_OK(tk_protn(region, base + 2 * ps, 8 * ps, TK_PROT_RW));
        CHECK_OK(tk_protn(region, base, NPAGES * ps, TK_PROT_READ));
        CHECK_OK(tk_unprot(region, base + 4 * ps, 4 * ps));
        if (rounds % 8 == 0) CHECK_OK(tk_dirty(region, bm, 64));
        atomic_fetch_add(&progress, 1);
        rounds++;
        clock_gettime(CLOCK_MONOTONIC, &t);
#ifdef MIN_HANDLERS_DEFERRED
        /* ThreadSanitizer runs a deferred handler at once inside a blocking
         * call it intercepts: past SECONDS, with the handlers behind, each
         * round ends in a short sleep (the handlers then run there, beside
         * the ones run at the other intercepted calls inside trapkit) */
        if (t.tv_sec - t0.tv_sec >= SECONDS && handlers_behind()) {
            struct timespec nap = {0, 50 * 1000};
            nanosleep(&nap, NULL);
        }
#endif
        /* SECONDS, and on a loaded machine (or under a sanitizer, which
         * defers signals) until each handler has run MIN_HANDLERS times, up
         * to a minute */
    } while (t.tv_sec - t0.tv_sec < SECONDS || (handlers_behind() && t.tv_sec - t0.tv_sec < 60));

    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    atomic_store(&stop, 1);
    pthread_join(snd, NULL);
    pthread_join(wd, NULL);
    /* let any signal still pending land */
    struct timespec ms = {0, 10 * 1000 * 1000};
    nanosleep(&ms, NULL);

    long a = atomic_load(&alarms), r = atomic_load(&rts);
    long ca = *(volatile long *)(base + 0 * ps), cr = *(volatile long *)(base + 1 * ps);
    printf("%s: %ld rounds, %ld SIGALRM and %ld SIGRTMIN handlers, %ld faults\n", argv[1], rounds,
           a, r, atomic_load(&faults));
    CHECK(ca == a);
    CHECK(cr == r);
    CHECK(a > MIN_HANDLERS && r > MIN_HANDLERS);
    CHECK_OK(tk_region_destroy(region));
    return 0;
}
