/* tests/ckpt_discard.c - tk_ckpt_discard, per mechanism (argv[1]:
 * uffd-thread, uffd-sigbus, posix, fork, stop-the-world): pages discarded
 * after a snapshot read as zero and take no memory; the next incremental
 * snapshot holds them as zero, so the chain restores them as zero over
 * whatever the target held; a full snapshot after a discard holds them as
 * zero with no data (where PAGEMAP_SCAN finds pages never populated); a
 * discarded page written again is in the next image with its new data;
 * while a snapshot runs the call is refused (-EBUSY) and changes nothing;
 * bad ranges are refused (-EINVAL); an image restored into the live
 * area, saved pages write-protected, rolls it back, and the next
 * incremental image holds the rolled-back pages.
 */
#include <fcntl.h>
#include <string.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <trapkit/checkpoint.h>
#include <trapkit/probe.h>
#include <unistd.h>

#include "testutil.h"

enum { NPAGES = 256, FROM = 10, TO = 100 };
static size_t ps;
static unsigned char *area, *back;

/* The byte page `page` is filled with (never 0). */
static int want_byte(size_t page, int tag)
{
    int b = (int)((tag + page) & 0xff);
    return b ? b : 1;
}

static void fill(unsigned char *p, int tag)
{
    for (size_t i = 0; i < NPAGES; i++) memset(p + i * ps, want_byte(i, tag), ps);
}

static bool page_is(const unsigned char *p, size_t page, int byte)
{
    for (size_t k = 0; k < ps; k++)
        if (p[page * ps + k] != byte) return false;
    return true;
}

static size_t resident(const unsigned char *p, size_t from, size_t to)
{
    unsigned char vec[NPAGES];
    CHECK(mincore((void *)(p + from * ps), (to - from) * ps, vec) == 0);
    size_t n = 0;
    for (size_t i = 0; i < to - from; i++) n += vec[i] & 1;
    return n;
}

static int image(const char *dir, int k)
{
    char path[96];
    snprintf(path, sizeof path, "%s/%d.img", dir, k);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    return fd;
}

int main(int argc, char **argv)
{
    if (argc != 2 || tk_ckpt_mech_parse(argv[1]) == TK_CKPT_COUNT_) {
        fprintf(stderr,
                "usage: ckpt_discard uffd-thread|uffd-sigbus|posix|fork|stop-the-world|precopy\n");
        return 2;
    }
    enum tk_ckpt_mech m = tk_ckpt_mech_parse(argv[1]);
    ps = tk_test_page();
    size_t len = NPAGES * ps;
    area = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    back = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED && back != MAP_FAILED);
    fill(area, 3);
    struct tk_ckpt_area ar = {area, len}, tgt = {back, len};
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1, .mech = m, .flags = TK_CKPT_TRACK};
    tk_ckpt *c;
    int err = tk_ckpt_create(&cfg, &c);
    if (err == -EOPNOTSUPP) tk_test_unavailable(argv[1]);
    CHECK_OK(err);
    tk_probe_info probe;
    CHECK_OK(tk_probe(&probe));
    char dir[] = "/tmp/tk-ckdiscard-XXXXXX";
    CHECK(mkdtemp(dir));
    int fds[4];

    /* bad ranges */
    CHECK_ERR(tk_ckpt_discard(NULL, area, ps), -EINVAL);
    CHECK_ERR(tk_ckpt_discard(c, area + 1, ps), -EINVAL);
    CHECK_ERR(tk_ckpt_discard(c, area, ps + 1), -EINVAL);
    CHECK_ERR(tk_ckpt_discard(c, area, 0), -EINVAL);
    CHECK_ERR(tk_ckpt_discard(c, area + len, ps), -EINVAL);
    CHECK_ERR(tk_ckpt_discard(c, area + len - ps, 2 * ps), -EINVAL);
    CHECK_ERR(tk_ckpt_discard(c, back, ps), -EINVAL);

    /* 0: full */
    fds[0] = image(dir, 0);
    CHECK_OK(tk_ckpt_snapshot(c, fds[0], 0, NULL));

    /* the discard: zero, unpopulated */
    CHECK_OK(tk_ckpt_discard(c, area + FROM * ps, (TO - FROM) * ps));
    CHECK(resident(area, FROM, TO) == 0); /* (before a read maps the zero page) */
    for (size_t p = FROM; p < TO; p++) CHECK(page_is(area, p, 0));
    for (size_t p = 0; p < NPAGES; p++)
        if (p < FROM || p >= TO) CHECK(page_is(area, p, want_byte(p, 3)));

    /* 1: incremental after it: the chain restores zero over 0x55 */
    fds[1] = image(dir, 1);
    tk_ckpt_stats st;
    CHECK_OK(tk_ckpt_snapshot(c, fds[1], TK_CKPT_INCREMENTAL, &st));
    printf("%s: incremental after discarding %d pages: %lu pages with data, %lu zero\n", argv[1],
           TO - FROM, (unsigned long)st.pages_saved, (unsigned long)st.pages_zero);
    memset(back, 0x55, len);
    CHECK_OK(tk_ckpt_restore(&tgt, 1, fds, 2));
    for (size_t p = 0; p < NPAGES; p++)
        CHECK(page_is(back, p, p >= FROM && p < TO ? 0 : want_byte(p, 3)));

    /* a discarded page written again, and one of the rest: in the next
     * incremental with their new data; the others still zero */
    memset(area + 50 * ps, 0x77, ps);
    memset(area + 200 * ps, 0x78, ps);
    fds[2] = image(dir, 2);
    CHECK_OK(tk_ckpt_snapshot(c, fds[2], TK_CKPT_INCREMENTAL, &st));
    memset(back, 0x55, len);
    CHECK_OK(tk_ckpt_restore(&tgt, 1, fds, 3));
    for (size_t p = 0; p < NPAGES; p++) {
        int want = p == 50 ? 0x77 : p == 200 ? 0x78 : p >= FROM && p < TO ? 0 : want_byte(p, 3);
        CHECK(page_is(back, p, want));
    }

    /* refused while a snapshot runs, the pages untouched */
    fds[3] = image(dir, 3);
    bool held = m != TK_CKPT_FORK && m != TK_CKPT_STOP; /* running until the instant */
    CHECK_OK(tk_ckpt_start(c, fds[3], held ? TK_CKPT_ASYNC_START | TK_CKPT_CALLER_INSTANT : 0));
    if (held || tk_ckpt_poll(c, NULL) == 1)
        CHECK_ERR(tk_ckpt_discard(c, area + 150 * ps, ps), -EBUSY);
    if (held) {
        int r;
        while ((r = tk_ckpt_instant(c)) == 0) usleep(100);
        CHECK(r == 1);
    }
    CHECK_OK(tk_ckpt_wait(c, &st));
    CHECK(page_is(area, 150, want_byte(150, 3)));
    /* 3: full after the discard: the discarded pages zero, no data where
     * the scan finds pages never populated (89 of them: page 50 was
     * written again) */
    printf("%s: full after it: %lu pages with data, %lu zero\n", argv[1],
           (unsigned long)st.pages_saved, (unsigned long)st.pages_zero);
    if (probe.pagemap_scan &&
        (m == TK_CKPT_UFFD_THREAD || m == TK_CKPT_UFFD_SIGBUS || m == TK_CKPT_POSIX))
        CHECK(st.pages_zero >= TO - FROM - 1);
    memset(back, 0x55, len);
    CHECK_OK(tk_ckpt_restore(&tgt, 1, &fds[3], 1));
    for (size_t p = 0; p < NPAGES; p++) {
        int want = p == 50 ? 0x77 : p == 200 ? 0x78 : p >= FROM && p < TO ? 0 : want_byte(p, 3);
        CHECK(page_is(back, p, want));
    }

    /* rolled back: image 3 restored into the live area, whose saved pages
     * the checkpointer keeps write-protected (the kernel cannot write
     * them: each is read aside and stored, a write the checkpointer sees),
     * after every page was changed; the next incremental image then holds
     * the rolled-back pages, and the chain restores them */
    for (size_t p = 0; p < NPAGES; p++) memset(area + p * ps, 0x33, ps);
    CHECK_OK(tk_ckpt_restore(&ar, 1, &fds[3], 1));
    for (size_t p = 0; p < NPAGES; p++) {
        int want = p == 50 ? 0x77 : p == 200 ? 0x78 : p >= FROM && p < TO ? 0 : want_byte(p, 3);
        CHECK(page_is(area, p, want));
    }
    int roll[2] = {fds[3], image(dir, 4)};
    CHECK_OK(tk_ckpt_snapshot(c, roll[1], TK_CKPT_INCREMENTAL, &st));
    memset(back, 0x55, len);
    CHECK_OK(tk_ckpt_restore(&tgt, 1, roll, 2));
    CHECK(memcmp(back, area, len) == 0);
    close(roll[1]);
    printf("%s: rolled back in place, and the next incremental image holds it\n", argv[1]);

    /* a file that cannot grow (RLIMIT_FSIZE): the snapshot fails with the
     * write's own error on every mechanism (the fork mechanism's child
     * passes its errno on; it used to be -EIO) */
    struct rlimit was;
    if (tk_test_fsize_limit(64 << 10, &was)) {
        int big = image(dir, 5);
        CHECK_ERR(tk_ckpt_snapshot(c, big, 0, &st), -EFBIG);
        CHECK(setrlimit(RLIMIT_FSIZE, &was) == 0);
        close(big);
    }

    CHECK_OK(tk_ckpt_destroy(c));
    for (int k = 0; k < 4; k++) close(fds[k]);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    printf("ok\n");
    return 0;
}
