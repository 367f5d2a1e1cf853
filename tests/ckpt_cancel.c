/* tests/ckpt_cancel.c - tk_ckpt_cancel, the snapshot instant and
 * TK_CKPT_CLOSE_FDS, on every mechanism:
 * - a snapshot cancelled while its background thread is held still (or its
 *   fork child runs) reports -ECANCELED, leaves an image restore refuses,
 *   every page writable (no fault after it), and the next snapshot, asked to
 *   be incremental, is full and restores exactly;
 * - cancel with no snapshot running returns 1 and changes nothing;
 * - tk_ckpt_stats gives the instant: CLOCK_REALTIME as the image header's,
 *   CLOCK_MONOTONIC within tk_ckpt_start's call;
 * - TK_CKPT_ASYNC_START: the image exact, a cancel right after it;
 * - fork with TK_CKPT_CLOSE_FDS: the child holds neither a listening socket
 *   (the port can be bound again at once) nor a pipe of the program's.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

#include "testutil.h"

enum { NPAGES = 4096 };
static size_t ps, len;
static atomic_bool held, release_it;

static uint64_t now(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Holds the background thread at its first report until released. */
static void on_progress(const tk_ckpt_stats *st, void *arg)
{
    (void)arg;
    if (!st->running || atomic_load(&held)) return;
    atomic_store(&held, true);
    for (int i = 0; i < 30000 && !atomic_load(&release_it); i++) usleep(1000);
}

struct canceller {
    tk_ckpt *c;
    atomic_bool called;
    int ret;
};

static void *cancel_main(void *arg)
{
    struct canceller *k = arg;
    atomic_store(&k->called, true);
    k->ret = tk_ckpt_cancel(k->c);
    return NULL;
}

static void restore_equals(int fd, const unsigned char *want)
{
    unsigned char *back =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(back != MAP_FAILED);
    struct tk_ckpt_area t = {back, len};
    CHECK_OK(tk_ckpt_restore(&t, 1, &fd, 1));
    CHECK(memcmp(back, want, len) == 0);
    munmap(back, len);
}

static int open_image(const char *dir, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    return fd;
}

static void run(enum tk_ckpt_mech m, const char *dir)
{
    unsigned char *area =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *want = malloc(len);
    CHECK(area != MAP_FAILED && want);
    uint64_t seed = 7;
    for (size_t i = 0; i < len; i += 8) {
        uint64_t v = tk_test_xorshift(&seed);
        memcpy(area + i, &v, 8);
    }
    struct tk_ckpt_area ar = {area, len};
    tk_ckpt_config cfg = {
        .areas = &ar, .nareas = 1, .mech = m, .flags = TK_CKPT_TRACK, .progress = on_progress};
    tk_ckpt *c;
    int err = tk_ckpt_create(&cfg, &c);
    if (err == -EOPNOTSUPP) {
        printf("%s: not available here\n", tk_ckpt_mech_name(m));
        free(want);
        munmap(area, len);
        return;
    }
    CHECK_OK(err);
    CHECK(tk_ckpt_cancel(c) == 1); /* nothing running */
    CHECK_ERR(tk_ckpt_cancel(NULL), -EINVAL);

    /* a full snapshot, then an incremental one cancelled (tries: the
     * background thread must not have finished before the cancel) */
    int fd0 = open_image(dir, "full");
    tk_ckpt_stats st;
    atomic_store(&held, true); /* not held */
    CHECK_OK(tk_ckpt_snapshot(c, fd0, 0, &st));
    bool cancelled = false;
    int fd1 = open_image(dir, "cancelled");
    for (int attempt = 0; attempt < 5 && !cancelled; attempt++) {
        for (size_t p = 0; p < NPAGES; p += 2) area[p * ps + 8]++;
        /* held only where a background thread reports */
        atomic_store(&held, m == TK_CKPT_FORK || m == TK_CKPT_STOP);
        atomic_store(&release_it, false);
        CHECK_OK(tk_ckpt_start(c, fd1, TK_CKPT_INCREMENTAL));
        if (m != TK_CKPT_FORK && m != TK_CKPT_STOP)
            while (!atomic_load(&held)) sched_yield();
        /* writers copy pages while the thread is held */
        for (size_t p = 0; p < NPAGES; p += 8) area[p * ps + 16]++;
        struct canceller k = {.c = c};
        pthread_t t;
        CHECK(pthread_create(&t, NULL, cancel_main, &k) == 0);
        while (!atomic_load(&k.called)) sched_yield();
        usleep(100000); /* tk_ckpt_cancel has asked the thread to stop */
        atomic_store(&release_it, true);
        pthread_join(t, NULL);
        CHECK(k.ret == 0 || k.ret == 1);
        int werr = tk_ckpt_wait(c, &st);
        if (m == TK_CKPT_STOP) {
            CHECK(k.ret == 1 && werr == 0); /* done inside tk_ckpt_start */
            break;
        }
        if (k.ret == 1) {
            CHECK_OK(werr); /* completed first */
            continue;
        }
        cancelled = true;
        CHECK_ERR(werr, -ECANCELED);
        CHECK(st.error == -ECANCELED && !st.running);
        CHECK(strstr(tk_last_error(), "cancelled"));
        tk_ckpt_image_info info;
        CHECK(tk_ckpt_info(fd1, &info) == -EINVAL); /* no valid header */
        CHECK(tk_ckpt_cancel(c) == 1);              /* not again */
    }
    if (m != TK_CKPT_STOP) CHECK(cancelled);
    /* every page writable: writing them all takes no fault */
    for (size_t p = 0; p < NPAGES; p++) area[p * ps + 24]++;
    CHECK(tk_ckpt_poll(c, &st) == 0);
    memcpy(want, area, len);

    /* the next one, asked incremental, is full; its instant */
    int fd2 = open_image(dir, "next");
    atomic_store(&held, true); /* not held */
    uint64_t r0 = now(CLOCK_REALTIME), m0 = now(CLOCK_MONOTONIC);
    /* (stop-the-world was never cancelled: a full one asked) */
    CHECK_OK(tk_ckpt_start(c, fd2, m == TK_CKPT_STOP ? 0 : TK_CKPT_INCREMENTAL));
    uint64_t r1 = now(CLOCK_REALTIME), m1 = now(CLOCK_MONOTONIC);
    CHECK_OK(tk_ckpt_wait(c, &st));
    CHECK(!st.incremental);
    CHECK(st.instant_monotonic_ns >= m0 && st.instant_monotonic_ns <= m1);
    CHECK(st.instant_realtime_ns >= r0 && st.instant_realtime_ns <= r1);
    tk_ckpt_image_info info;
    CHECK_OK(tk_ckpt_info(fd2, &info));
    CHECK(info.created_ns == st.instant_realtime_ns && !info.incremental);
    restore_equals(fd2, want);

    /* TK_CKPT_ASYNC_START: tk_ckpt_start returns before the instant (the
     * background thread protects the areas); the image is exact; a cancel
     * right after it stops the snapshot once armed */
    int fd3 = open_image(dir, "async");
    uint64_t a0 = now(CLOCK_MONOTONIC);
    CHECK_OK(tk_ckpt_start(c, fd3, TK_CKPT_ASYNC_START));
    CHECK_OK(tk_ckpt_wait(c, &st));
    CHECK(st.instant_monotonic_ns >= a0 && st.instant_realtime_ns > 0);
    restore_equals(fd3, want);
    CHECK_OK(tk_ckpt_start(c, fd3, TK_CKPT_ASYNC_START));
    int k = tk_ckpt_cancel(c);
    CHECK(k == 0 || k == 1);
    CHECK(tk_ckpt_wait(c, &st) == (k == 0 ? -ECANCELED : 0));
    for (size_t p = 0; p < NPAGES; p++) area[p * ps + 40]++; /* writable */
    memcpy(want, area, len);
    CHECK_OK(tk_ckpt_snapshot(c, fd3, TK_CKPT_ASYNC_START, &st));
    restore_equals(fd3, want);
    close(fd3);
    printf("%s: cancelled, pages writable, next snapshot full and exact; asynchronous start\n",
           tk_ckpt_mech_name(m));
    CHECK_OK(tk_ckpt_destroy(c));
    close(fd0);
    close(fd1);
    close(fd2);
    free(want);
    munmap(area, len);
}

/* Whether process pid holds an fd open on the same file as ours. */
static bool holds(pid_t pid, int ours)
{
    struct stat a;
    CHECK(fstat(ours, &a) == 0);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (!d) return false;
    bool found = false;
    for (struct dirent *e; (e = readdir(d));) {
        char p[320];
        struct stat b;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        if (e->d_name[0] != '.' && stat(p, &b) == 0 && b.st_ino == a.st_ino && b.st_dev == a.st_dev)
            found = true;
    }
    closedir(d);
    return found;
}

/* The fork child of this process, if any. */
static pid_t child_of_self(void)
{
    char path[64], buf[256] = "";
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    int fd = open(path, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    return n > 0 ? (pid_t)atoi(buf) : 0;
}

static void close_fds(const char *dir)
{
    size_t big = 64u << 20; /* the child writes for a while */
    unsigned char *area =
        mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED);
    uint64_t seed = 9;
    for (size_t i = 0; i < big; i += 64) {
        uint64_t v = tk_test_xorshift(&seed);
        memcpy(area + i, &v, 8);
    }
    struct tk_ckpt_area ar = {area, big};
    int checked = 0;
    for (int with = 0; with < 2; with++) {
        tk_ckpt_config cfg = {
            .areas = &ar, .nareas = 1, .mech = TK_CKPT_FORK, .flags = with ? TK_CKPT_CLOSE_FDS : 0};
        tk_ckpt *c;
        CHECK_OK(tk_ckpt_create(&cfg, &c));
        int ls = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        CHECK(ls >= 0 && bind(ls, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(ls, 4) == 0);
        int pfd[2];
        CHECK(pipe(pfd) == 0);
        int fd = open_image(dir, "fork");
        CHECK_OK(tk_ckpt_start(c, fd, 0));
        pid_t child = child_of_self();
        bool image_held = child && holds(child, fd);
        bool ls_held = child && holds(child, ls), pipe_held = child && holds(child, pfd[1]);
        /* the child closes them right after fork: wait for it */
        for (int i = 0; i < 2000 && with && child && (ls_held || pipe_held); i++) {
            usleep(1000);
            ls_held = holds(child, ls);
            pipe_held = holds(child, pfd[1]);
        }
        bool alive = tk_ckpt_poll(c, NULL) == 1;
        if (child && alive) {
            checked++;
            CHECK(image_held);
            CHECK(ls_held == !with && pipe_held == !with);
        }
        if (with) CHECK(tk_ckpt_cancel(c) == 0 || !alive);
        tk_ckpt_wait(c, NULL);
        printf("fork %s TK_CKPT_CLOSE_FDS: the child %s the listening socket and the pipe\n",
               with ? "with" : "without", ls_held ? "held" : "did not hold");
        close(ls);
        close(pfd[0]);
        close(pfd[1]);
        close(fd);
        CHECK_OK(tk_ckpt_destroy(c));
    }
    CHECK(checked > 0);
    munmap(area, big);
}

int main(void)
{
    ps = tk_test_page();
    len = NPAGES * ps;
    char dir[] = "/tmp/tk-ckpt-cancel-XXXXXX";
    CHECK(mkdtemp(dir));
    enum tk_ckpt_mech mechs[] = {TK_CKPT_UFFD_THREAD, TK_CKPT_UFFD_SIGBUS, TK_CKPT_POSIX,
                                 TK_CKPT_FORK,        TK_CKPT_STOP,        TK_CKPT_PRECOPY};
    for (size_t i = 0; i < sizeof mechs / sizeof mechs[0]; i++) run(mechs[i], dir);
    close_fds(dir);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    printf("ckpt_cancel: ok\n");
    return 0;
}
