/* tests/ckpt_memory.c - the memory a snapshot adds stays within the pages
 * written during it plus 16 MiB: a 64 MiB area, its background thread held
 * still (so nothing queued is written and given back meanwhile) while a
 * writer writes one page in four - each fault copying its neighbours too -
 * and then in a second snapshot every page; the process's anonymous resident
 * memory (RssAnon) is sampled throughout and its peak, less what it was
 * before tk_ckpt_start, must stay under the bound.  Per mechanism
 * (uffd-sigbus, uffd-thread, posix; one missing here is skipped).
 */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

#include "testutil.h"

enum { NPAGES = 16384 };
static atomic_bool held, release_it;

static void on_progress(const tk_ckpt_stats *st, void *arg)
{
    (void)arg;
    if (!st->running || atomic_load(&held)) return;
    atomic_store(&held, true);
    for (int i = 0; i < 60000 && !atomic_load(&release_it); i++) usleep(1000);
}

/* RssAnon of /proc/self/status, bytes. */
static long rss_anon(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY);
    CHECK(fd >= 0);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    CHECK(n > 0);
    buf[n] = 0;
    char *p = strstr(buf, "RssAnon:");
    CHECK(p);
    return atol(p + 8) * 1024;
}

static void run(enum tk_ckpt_mech m, const char *dir, bool strict)
{
    size_t ps = tk_test_page(), len = NPAGES * ps;
    unsigned char *area =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED);
    uint64_t seed = 5;
    for (size_t i = 0; i < len; i += 64) {
        uint64_t v = tk_test_xorshift(&seed);
        memcpy(area + i, &v, 8);
    }
    struct tk_ckpt_area ar = {area, len};
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1, .mech = m, .progress = on_progress};
    tk_ckpt *c;
    int err = tk_ckpt_create(&cfg, &c);
    if (err == -EOPNOTSUPP) {
        printf("%s: not available here\n", tk_ckpt_mech_name(m));
        munmap(area, len);
        return;
    }
    CHECK_OK(err);
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, tk_ckpt_mech_name(m));
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    for (int round = 0; round < 2; round++) {
        size_t stride = round == 0 ? 4 : 1; /* one page in four, then all */
        atomic_store(&held, false);
        atomic_store(&release_it, false);
        long before = rss_anon(), peak = before;
        CHECK_OK(tk_ckpt_start(c, fd, 0));
        while (!atomic_load(&held)) sched_yield();
        size_t written = 0;
        for (size_t p = 0; p < NPAGES; p += stride) {
            area[p * ps + 32]++;
            written++;
            if (written % 64 == 0) {
                long r = rss_anon();
                if (r > peak) peak = r;
            }
        }
        long r = rss_anon();
        if (r > peak) peak = r;
        atomic_store(&release_it, true);
        tk_ckpt_stats st;
        while (tk_ckpt_poll(c, &st) == 1) {
            r = rss_anon();
            if (r > peak) peak = r;
            usleep(200);
        }
        CHECK_OK(tk_ckpt_wait(c, &st));
        long extra = peak - before, bound = (long)(written * ps) + (16l << 20);
        printf("%s, %zu of %d pages written (one in %zu): peak extra memory %.1f MiB, bound "
               "%.1f MiB; %lu pages copied by the writer in %lu faults\n",
               tk_ckpt_mech_name(m), written, NPAGES, stride, extra / 1048576.0, bound / 1048576.0,
               (unsigned long)st.pages_by_writers, (unsigned long)st.faults);
        CHECK(st.pages_by_writers + st.pages_by_thread == NPAGES && st.pages_by_writers > 0);
        if (strict) CHECK(extra <= bound);
    }
    close(fd);
    CHECK_OK(tk_ckpt_destroy(c));
    munmap(area, len);
}

int main(void)
{
    /* a sanitizer's shadow memory grows with what is touched: the bound is
     * the library's, checked without one */
    bool strict = true;
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    strict = false;
#endif
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
    strict = false;
#endif
#endif
    char dir[] = "/tmp/tk-ckpt-memory-XXXXXX";
    CHECK(mkdtemp(dir));
    enum tk_ckpt_mech mechs[] = {TK_CKPT_UFFD_SIGBUS, TK_CKPT_UFFD_THREAD, TK_CKPT_POSIX};
    for (size_t i = 0; i < 3; i++) run(mechs[i], dir, strict);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    printf("ckpt_memory: ok\n");
    return 0;
}
