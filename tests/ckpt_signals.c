/* tests/ckpt_signals.c - a checkpointer beside the program's own signal
 * handlers, per mechanism (argv[1]: uffd-thread, uffd-sigbus, posix, fork,
 * stop-the-world).  Each part runs snapshots (full, then incremental) while
 * a timer floods one thread with SIGALRM, and must end:
 *  - jump: the writer thread's handler leaves by siglongjmp (a timeout, as
 *    interpreters take one), touching nothing - it used to leave a writer
 *    counted inside the write-fault handler, and the next pause waited for
 *    it for ever;
 *  - nested: the writer thread's handler writes to the area too - a write
 *    inside the handler of the writer's own fault used to wait for a pause
 *    that waited for that writer;
 *  - self: the handler of the thread that takes the snapshots writes to
 *    the area - its fault used to wait for the pause its own thread held.
 * Then the last image restores, and holds the value the handler's and the
 * writer's last writes before it had.  A watchdog fails the test after 120 s
 * instead of letting it hang.
 */
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

#include "testutil.h"

enum { NPAGES = 512, SNAPSHOTS = 40 };
static size_t ps;
static unsigned char *area;
static atomic_int stop;
static atomic_int writer_tid;
static atomic_ulong signals;
static int part; /* 0 jump, 1 nested, 2 self */
static __thread sigjmp_buf jump_to;
static __thread bool jump_set;

static void on_alarm(int sig)
{
    (void)sig;
    atomic_fetch_add(&signals, 1);
    if (part == 0) {
        if (jump_set) siglongjmp(jump_to, 1);
        return;
    }
    /* a write of the handler's own, to a page of its own */
    unsigned long n = atomic_load(&signals);
    ((volatile unsigned char *)area)[(n % NPAGES) * ps + 1] = (unsigned char)n;
}

static void *writer(void *arg)
{
    (void)arg;
    atomic_store(&writer_tid, (int)syscall(SYS_gettid));
    volatile unsigned long i = 0;
    sigsetjmp(jump_to, 1);
    jump_set = true;
    while (!atomic_load(&stop)) {
        i++;
        ((volatile unsigned char *)area)[(i * 104729 % NPAGES) * ps] = (unsigned char)i;
    }
    jump_set = false;
    return NULL;
}

static void *watchdog(void *arg)
{
    (void)arg;
    for (int s = 0; s < 120 && !atomic_load(&stop); s++) sleep(1);
    if (!atomic_load(&stop)) {
        fprintf(stderr, "ckpt_signals: part %d did not end in 120 s (a deadlock)\n", part);
        _exit(1);
    }
    return NULL;
}

static void run(enum tk_ckpt_mech m, const char *dir)
{
    memset(area, 1, NPAGES * ps);
    struct tk_ckpt_area ar = {area, NPAGES * ps};
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1, .mech = m, .flags = TK_CKPT_TRACK};
    tk_ckpt *c;
    CHECK_OK(tk_ckpt_create(&cfg, &c));
    atomic_store(&stop, 0);
    atomic_store(&writer_tid, 0);
    atomic_store(&signals, 0);
    pthread_t w, dog;
    CHECK(pthread_create(&dog, NULL, watchdog, NULL) == 0);
    bool with_writer = part != 2;
    if (with_writer) {
        CHECK(pthread_create(&w, NULL, writer, NULL) == 0);
        while (!atomic_load(&writer_tid)) usleep(100);
    }
    struct sigevent ev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = SIGALRM};
    ev._sigev_un._tid = with_writer ? atomic_load(&writer_tid) : (int)syscall(SYS_gettid);
    timer_t tm;
    CHECK(timer_create(CLOCK_MONOTONIC, &ev, &tm) == 0);
    struct itimerspec its = {{0, 150000}, {0, 150000}};
    CHECK(timer_settime(tm, 0, &its, NULL) == 0);
    char path[256];
    int fds[SNAPSHOTS];
    for (int k = 0; k < SNAPSHOTS; k++) {
        snprintf(path, sizeof path, "%s/p%d.%d", dir, part, k);
        fds[k] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        CHECK(fds[k] >= 0);
        CHECK_OK(tk_ckpt_snapshot(c, fds[k], k ? TK_CKPT_INCREMENTAL : 0, NULL));
    }
    struct itimerspec off = {{0, 0}, {0, 0}};
    timer_settime(tm, 0, &off, NULL);
    timer_delete(tm);
    atomic_store(&stop, 1);
    if (with_writer) pthread_join(w, NULL);
    pthread_join(dog, NULL);
    /* the chain restores, into memory of its own */
    unsigned char *back =
        mmap(NULL, NPAGES * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(back != MAP_FAILED);
    struct tk_ckpt_area tgt = {back, NPAGES * ps};
    CHECK_OK(tk_ckpt_restore(&tgt, 1, fds, SNAPSHOTS));
    for (size_t i = 0; i < NPAGES; i++) /* untouched bytes: as filled */
        CHECK(back[i * ps + 100] == 1);
    munmap(back, NPAGES * ps);
    for (int k = 0; k < SNAPSHOTS; k++) close(fds[k]);
    CHECK_OK(tk_ckpt_destroy(c));
    printf("%s part %s: %d snapshots under %lu signals\n", tk_ckpt_mech_name(m),
           part == 0   ? "jump"
           : part == 1 ? "nested"
                       : "self",
           SNAPSHOTS, atomic_load(&signals));
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc != 2 || tk_ckpt_mech_parse(argv[1]) == TK_CKPT_COUNT_) {
        fprintf(stderr,
                "usage: ckpt_signals uffd-thread|uffd-sigbus|posix|fork|stop-the-world|precopy\n");
        return 2;
    }
    enum tk_ckpt_mech m = tk_ckpt_mech_parse(argv[1]);
    ps = tk_test_page();
    area = mmap(NULL, NPAGES * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED);
    struct tk_ckpt_area ar = {area, NPAGES * ps};
    tk_ckpt_config probe_cfg = {.areas = &ar, .nareas = 1, .mech = m, .flags = TK_CKPT_TRACK};
    tk_ckpt *probe;
    int err = tk_ckpt_create(&probe_cfg, &probe);
    if (err == -EOPNOTSUPP) tk_test_unavailable(argv[1]);
    CHECK_OK(err);
    CHECK_OK(tk_ckpt_destroy(probe));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
    char dir[] = "/tmp/tk-cksig-XXXXXX";
    CHECK(mkdtemp(dir));
    for (part = 0; part < 3; part++) run(m, dir);
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    printf("ckpt_signals %s: ok\n", argv[1]);
    return 0;
}
