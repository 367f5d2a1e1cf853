/* tests/ckpt_abi.c - a program built against the TRAPKIT_0 version node,
 * whose tk_ckpt_stats ended at duration_ns, keeps working with the library
 * of today: it binds tk_ckpt_poll, tk_ckpt_wait and tk_ckpt_snapshot at
 * TRAPKIT_0 (as the linker did then), and those fill that struct only: the
 * bytes after it are untouched, its fields right.  The default versions fill
 * the struct of today.  Linked against libtrapkit.so (the versions are the
 * shared library's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

/* tk_ckpt_stats as the TRAPKIT_0 node's programs were built with it */
struct stats_v0 {
    uint64_t seq;
    bool incremental, running;
    int error;
    uint64_t pages_total, pages_saved, pages_done, pages_by_thread, pages_by_writers, faults,
        pause_ns, max_stall_ns, bytes_written, duration_ns;
};

int poll_v0(tk_ckpt *c, struct stats_v0 *st);
int wait_v0(tk_ckpt *c, struct stats_v0 *st);
int snapshot_v0(tk_ckpt *c, int fd, unsigned flags, struct stats_v0 *st);
__asm__(".symver poll_v0, tk_ckpt_poll@TRAPKIT_0");
__asm__(".symver wait_v0, tk_ckpt_wait@TRAPKIT_0");
__asm__(".symver snapshot_v0, tk_ckpt_snapshot@TRAPKIT_0");

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);               \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

struct guarded {
    struct stats_v0 st;
    unsigned char canary[512];
};

static void check_guard(const struct guarded *g)
{
    for (size_t i = 0; i < sizeof g->canary; i++) CHECK(g->canary[i] == 0xc5);
}

int main(void)
{
    CHECK(offsetof(tk_ckpt_stats, thread_cpu_ns) == sizeof(struct stats_v0));
    size_t ps = (size_t)sysconf(_SC_PAGESIZE), len = 256 * ps;
    unsigned char *area =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED);
    memset(area, 0x3c, len);
    struct tk_ckpt_area ar = {area, len};
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1, .mech = TK_CKPT_POSIX};
    tk_ckpt *c;
    CHECK(tk_ckpt_create(&cfg, &c) == 0);
    char path[] = "/tmp/tk-ckpt-abi-XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0);
    unlink(path);

    struct guarded g;
    memset(&g, 0xc5, sizeof g);
    CHECK(snapshot_v0(c, fd, 0, &g.st) == 0);
    check_guard(&g);
    CHECK(g.st.seq == 1 && !g.st.running && g.st.error == 0 && g.st.pages_total == 256 &&
          g.st.pages_saved == 256 && g.st.pages_done == 256 && g.st.duration_ns > 0);
    memset(&g, 0xc5, sizeof g);
    CHECK(wait_v0(c, &g.st) == 0);
    check_guard(&g);
    CHECK(g.st.seq == 1 && g.st.pages_done == 256);
    memset(&g, 0xc5, sizeof g);
    CHECK(poll_v0(c, &g.st) == 0);
    check_guard(&g);
    CHECK(g.st.seq == 1 && g.st.bytes_written >= 256 * ps);
    CHECK(poll_v0(c, NULL) == 0 && wait_v0(c, NULL) == 0);
    CHECK(poll_v0(NULL, &g.st) == -EINVAL);

    /* the default versions fill the whole struct of today */
    tk_ckpt_stats st;
    memset(&st, 0, sizeof st);
    CHECK(tk_ckpt_snapshot(c, fd, 0, &st) == 0);
    CHECK(st.seq == 2 && st.instant_realtime_ns > 0 && st.instant_monotonic_ns > 0 &&
          st.image_bytes > 0);
    CHECK(tk_ckpt_destroy(c) == 0);
    close(fd);
    printf("ckpt_abi: the TRAPKIT_0 versions fill %zu bytes, the default ones %zu: ok\n",
           sizeof(struct stats_v0), sizeof(tk_ckpt_stats));
    return 0;
}
