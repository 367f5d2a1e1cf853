/* tests/ckpt_yield.c - the background thread yields to the program and the
 * program never waits for it: it runs at SCHED_IDLE (the caller's priority
 * with TK_CKPT_FAIR), and while it is held still in the middle of a snapshot
 * a writer writes every page of the area at once (copying each itself);
 * the image is still the state at the snapshot instant, and TK_CKPT_TIMING
 * says where the writer's faults spent their time.  Per mechanism
 * (uffd-sigbus, uffd-thread, posix; one missing here is skipped).
 */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

#include "testutil.h"

enum { NPAGES = 2048 };
static atomic_int policy = -1; /* the background thread's, seen from its progress callback */
static atomic_bool held, release_it;

static void on_progress(const tk_ckpt_stats *st, void *arg)
{
    (void)arg;
    if (!st->running || atomic_load(&held)) return;
    atomic_store(&policy, sched_getscheduler(0));
    atomic_store(&held, true);
    /* hold the background thread still until the writer is done */
    for (int i = 0; i < 30000 && !atomic_load(&release_it); i++) usleep(1000);
}

static double secs(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static bool run(enum tk_ckpt_mech m, unsigned flags)
{
    size_t ps = tk_test_page(), len = NPAGES * ps;
    unsigned char *area =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *want = malloc(len);
    CHECK(area != MAP_FAILED && want);
    for (size_t i = 0; i < len; i++) area[i] = (unsigned char)(i * 7 + i / ps);
    memcpy(want, area, len);
    struct tk_ckpt_area ar = {area, len};
    tk_ckpt_config cfg = {.areas = &ar,
                          .nareas = 1,
                          .mech = m,
                          .flags = TK_CKPT_TIMING | flags,
                          .progress = on_progress};
    tk_ckpt *c;
    int err = tk_ckpt_create(&cfg, &c);
    if (err == -EOPNOTSUPP) {
        printf("%s: not available here (%s)\n", tk_ckpt_mech_name(m), tk_last_error());
        munmap(area, len);
        free(want);
        return false;
    }
    CHECK_OK(err);
    char path[] = "/tmp/tk-ckyield-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);
    atomic_store(&held, false);
    atomic_store(&release_it, false);
    atomic_store(&policy, -1);

    CHECK_OK(tk_ckpt_start(c, fd, 0));
    double t0 = secs();
    while (!atomic_load(&held) && secs() - t0 < 20) usleep(100);
    CHECK(atomic_load(&held));
    /* the background thread is held: every page is written now */
    tk_ckpt_stats mid;
    CHECK(tk_ckpt_poll(c, &mid) == 1);
    double w0 = secs();
    for (size_t p = 0; p < NPAGES; p++) area[p * ps + 8] ^= 0xff;
    double took = secs() - w0;
    atomic_store(&release_it, true);
    tk_ckpt_stats st;
    CHECK_OK(tk_ckpt_wait(c, &st));
    printf("%s%s: background thread held after %lu pages; the writer wrote all %d pages in "
           "%.1f ms, copying %lu; fault path %.2f ms (copy %.2f, open %.2f, waits %.2f)\n",
           tk_ckpt_mech_name(m), flags & TK_CKPT_FAIR ? " (fair)" : "",
           (unsigned long)mid.pages_done, NPAGES, took * 1e3, (unsigned long)st.pages_by_writers,
           st.stall_total_ns / 1e6, st.stall_copy_ns / 1e6, st.stall_unprot_ns / 1e6,
           (st.stall_pause_ns + st.stall_page_ns) / 1e6);
    CHECK(took < 10.0); /* no wait for the held thread (a few us per page) */
    CHECK(st.pages_by_writers >= NPAGES - mid.pages_done - 64);
    CHECK(st.pages_by_thread + st.pages_by_writers == NPAGES);
    CHECK(atomic_load(&policy) == ((flags & TK_CKPT_FAIR) ? SCHED_OTHER : SCHED_IDLE));
    /* a fault copies the pages of its block of 16 still to be copied */
    CHECK(st.faults * 16 >= st.pages_by_writers && st.faults < st.pages_by_writers);
    CHECK(st.stall_total_ns > 0 && st.stall_copy_ns > 0);
    CHECK(st.stall_unprot_ns > 0);
    CHECK(st.stall_pause_ns + st.stall_page_ns + st.stall_copy_ns + st.stall_unprot_ns <=
          st.stall_total_ns + 1000000);
    CHECK(st.thread_cpu_ns > 0 && st.thread_io_ns > 0);

    /* the image holds the state at the instant */
    unsigned char *back =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(back != MAP_FAILED);
    struct tk_ckpt_area tgt = {back, len};
    CHECK_OK(tk_ckpt_restore(&tgt, 1, &fd, 1));
    CHECK(memcmp(back, want, len) == 0);
    CHECK_OK(tk_ckpt_destroy(c));
    close(fd);
    munmap(back, len);
    munmap(area, len);
    free(want);
    return true;
}

int main(void)
{
    static const enum tk_ckpt_mech mechs[] = {TK_CKPT_UFFD_SIGBUS, TK_CKPT_UFFD_THREAD,
                                              TK_CKPT_POSIX};
    int ran = 0;
    for (size_t i = 0; i < sizeof mechs / sizeof mechs[0]; i++) ran += run(mechs[i], 0);
    CHECK(run(TK_CKPT_POSIX, TK_CKPT_FAIR));
    CHECK(ran > 0);
    printf("ok\n");
    return 0;
}
