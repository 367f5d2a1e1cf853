/* tests/ckpt_instant.c - TK_CKPT_CALLER_INSTANT and tk_ckpt_instant, on
 * every mechanism:
 * - a program that keeps running operations, each writing 512 pairs of
 *   pages far apart (first every pair's first page, then every second
 *   page), and calls tk_ckpt_instant between two operations: the image
 *   holds exactly the operations completed before the call that returned 1
 *   (every page of every pair holds that count), never half of one;
 * - tk_ckpt_wait takes the instant when the program has not;
 * - tk_ckpt_cancel while the snapshot waits for the instant: -ECANCELED
 *   from tk_ckpt_wait and tk_ckpt_instant, every page writable, the next
 *   snapshot full and exact;
 * - bad use: TK_CKPT_CALLER_INSTANT without TK_CKPT_ASYNC_START, and
 *   tk_ckpt_instant with no snapshot, are -EINVAL; fork and stop-the-world
 *   pass the instant in tk_ckpt_start (tk_ckpt_instant returns 1 at once).
 */
#include <fcntl.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

#include "testutil.h"

enum { NPAGES = 8192, PAIRS = 512, STRIDE = NPAGES / 2 / PAIRS };
static size_t ps, len;

static uint64_t *first_of(unsigned char *area, int j)
{
    return (uint64_t *)(area + (size_t)j * STRIDE * ps);
}

static uint64_t *second_of(unsigned char *area, int j)
{
    return (uint64_t *)(area + ((size_t)j * STRIDE + NPAGES / 2) * ps + 64);
}

/* One operation: sets every pair to k, first pages first. */
static void operation(unsigned char *area, uint64_t k)
{
    for (int j = 0; j < PAIRS; j++) *first_of(area, j) = k;
    for (int j = 0; j < PAIRS; j++) *second_of(area, j) = k;
}

static unsigned char *restored(int *fds, size_t n)
{
    unsigned char *back =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(back != MAP_FAILED);
    struct tk_ckpt_area t = {back, len};
    CHECK_OK(tk_ckpt_restore(&t, 1, fds, n));
    return back;
}

/* Every page of every pair in the chain of images holds k. */
static void image_holds(int *fds, size_t n, uint64_t k)
{
    unsigned char *back = restored(fds, n);
    for (int j = 0; j < PAIRS; j++) {
        if (*first_of(back, j) != k || *second_of(back, j) != k) {
            fprintf(stderr, "pair %d holds %llu and %llu, not %llu\n", j,
                    (unsigned long long)*first_of(back, j), (unsigned long long)*second_of(back, j),
                    (unsigned long long)k);
            exit(1);
        }
    }
    munmap(back, len);
}

static void run(enum tk_ckpt_mech m, int *fds)
{
    unsigned char *area =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED);
    memset(area, 1, len); /* every page populated: arming protects them all */
    struct tk_ckpt_area ar = {area, len};
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1, .mech = m, .flags = TK_CKPT_TRACK};
    tk_ckpt *c;
    int err = tk_ckpt_create(&cfg, &c);
    if (err == -EOPNOTSUPP) {
        printf("%s: not available here\n", tk_ckpt_mech_name(m));
        munmap(area, len);
        return;
    }
    CHECK_OK(err);
    bool own_instant = m != TK_CKPT_FORK && m != TK_CKPT_STOP;
    unsigned flags = TK_CKPT_ASYNC_START | TK_CKPT_CALLER_INSTANT;
    CHECK_ERR(tk_ckpt_instant(c), -EINVAL); /* no snapshot */
    CHECK_ERR(tk_ckpt_instant(NULL), -EINVAL);
    CHECK_ERR(tk_ckpt_start(c, fds[0], TK_CKPT_CALLER_INSTANT), -EINVAL);

    /* operations while the areas are armed; the instant between two */
    uint64_t k = 0;
    operation(area, ++k);
    tk_ckpt_stats st;
    for (int round = 0; round < 3; round++) {
        /* a full image, then incremental ones chained onto it */
        CHECK_OK(tk_ckpt_start(c, fds[round], round ? TK_CKPT_INCREMENTAL | flags : flags));
        uint64_t at = own_instant ? 0 : k, zeros = 0;
        while (!at) {
            int r = tk_ckpt_instant(c);
            CHECK(r == 0 || r == 1);
            if (r == 1) {
                at = k;
                CHECK(tk_ckpt_instant(c) == 1); /* and stays passed */
                break;
            }
            zeros++;
            operation(area, ++k);
        }
        CHECK(tk_ckpt_poll(c, &st) >= 0 && st.instant_monotonic_ns != 0);
        /* more operations while the pages are copied */
        for (int i = 0; i < 50 && tk_ckpt_poll(c, NULL) == 1; i++) operation(area, ++k);
        CHECK_OK(tk_ckpt_wait(c, &st));
        CHECK(tk_ckpt_instant(c) == 1);
        CHECK(st.incremental == (round > 0));
        image_holds(fds, (size_t)round + 1, at);
        if (round == 0)
            printf("%s: instant after %llu operations (%llu while arming), pause %.3f ms\n",
                   tk_ckpt_mech_name(m), (unsigned long long)at, (unsigned long long)zeros,
                   st.protect_pause_ns / 1e6);
        operation(area, ++k);
    }

    /* tk_ckpt_wait takes it */
    CHECK_OK(tk_ckpt_start(c, fds[0], flags));
    CHECK_OK(tk_ckpt_wait(c, &st));
    CHECK(st.instant_monotonic_ns != 0);
    image_holds(fds, 1, k);

    /* cancelled while the instant waits for the program */
    if (own_instant) {
        operation(area, ++k);
        CHECK_OK(tk_ckpt_start(c, fds[0], TK_CKPT_INCREMENTAL | flags));
        usleep(20000); /* armed by now, or soon: either way cancelled before the instant */
        CHECK(tk_ckpt_cancel(c) == 0);
        CHECK_ERR(tk_ckpt_wait(c, &st), -ECANCELED);
        CHECK(st.instant_monotonic_ns == 0);
        CHECK_ERR(tk_ckpt_instant(c), -ECANCELED);
        operation(area, ++k); /* writable: no fault waits */
        CHECK_OK(tk_ckpt_start(c, fds[0], TK_CKPT_INCREMENTAL | flags));
        while (tk_ckpt_instant(c) == 0) usleep(100);
        CHECK_OK(tk_ckpt_wait(c, &st));
        CHECK(!st.incremental); /* after a cancel: full */
        unsigned char *back = restored(fds, 1);
        CHECK(memcmp(back, area, len) == 0);
        munmap(back, len);
    }
    CHECK_OK(tk_ckpt_destroy(c));
    munmap(area, len);
}

int main(void)
{
    ps = tk_test_page();
    len = (size_t)NPAGES * ps;
    int fds[3];
    for (int i = 0; i < 3; i++) {
        char path[] = "/tmp/tk-ckpt-instant-XXXXXX";
        fds[i] = mkstemp(path);
        CHECK(fds[i] >= 0);
        unlink(path);
    }
    enum tk_ckpt_mech mechs[] = {TK_CKPT_UFFD_THREAD, TK_CKPT_UFFD_SIGBUS, TK_CKPT_POSIX,
                                 TK_CKPT_FORK,        TK_CKPT_STOP,        TK_CKPT_PRECOPY};
    for (size_t i = 0; i < sizeof mechs / sizeof mechs[0]; i++) run(mechs[i], fds);
    for (int i = 0; i < 3; i++) close(fds[i]);
    printf("ckpt_instant: ok\n");
    return 0;
}
