/* tests/ckpt_compact.c - compaction (tk_ckpt_compact): a chain of a full
 * image and two incremental ones (compressed and not), compacted with and
 * without compression, restores byte-identical to the chain; the compacted
 * image is a full image with the newest one's sequence and lineage, so an
 * incremental image taken afterwards chains onto it (and the old
 * incremental images given after it are skipped); a damaged chain is
 * refused; an output that cannot grow fails with the write's error; the
 * compacted image restores lazily as well.
 */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

#include "../src/apps/checkpoint/image.h"
#include "testutil.h"

enum { NPAGES = 2048 };
static size_t ps, len;
static char dir[] = "/tmp/tk-compact-XXXXXX";

static int new_file(const char *name)
{
    char path[96];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    return fd;
}

static unsigned char *fresh(void)
{
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    return m;
}

static void restore_equals(const int *fds, size_t n, const unsigned char *want)
{
    unsigned char *back = fresh();
    struct tk_ckpt_area t = {back, len};
    CHECK_OK(tk_ckpt_restore(&t, 1, fds, n));
    CHECK(memcmp(back, want, len) == 0);
    munmap(back, len);
}

static void lazy_equals(const int *fds, size_t n, const unsigned char *want)
{
    unsigned char *back = fresh();
    struct tk_ckpt_area t = {back, len};
    tk_ckpt_lazy_config cfg = {.areas = &t, .nareas = 1, .fds = fds, .nfds = n};
    tk_ckpt_lazy *l;
    CHECK_OK(tk_ckpt_restore_lazy(&cfg, &l));
    CHECK_OK(tk_ckpt_lazy_destroy(l));
    CHECK(memcmp(back, want, len) == 0);
    munmap(back, len);
}

/* Some pages rewritten, some zeroed, some never populated written. */
static void change(unsigned char *a, uint64_t seed, size_t step)
{
    for (size_t p = seed % step; p < NPAGES; p += step) {
        if (p % 3 == 0)
            memset(a + p * ps, 0, ps);
        else
            for (size_t i = 0; i < ps; i += 32) a[p * ps + i] = (unsigned char)tk_test_rand(&seed);
    }
}

static void run(bool compress_chain)
{
    unsigned char *area = fresh(), *want = malloc(len);
    CHECK(want);
    /* the first half random and text, the rest never populated */
    uint64_t seed = 99;
    for (size_t p = 0; p < NPAGES / 2; p++)
        for (size_t i = 0; i < ps; i++)
            area[p * ps + i] =
                p % 2 ? (unsigned char)"abcdefgh"[i % 8] : (unsigned char)tk_test_rand(&seed);
    struct tk_ckpt_area ar = {area, len};
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1, .flags = TK_CKPT_TRACK};
    tk_ckpt *c;
    CHECK_OK(tk_ckpt_create(&cfg, &c));
    unsigned zf = compress_chain ? TK_CKPT_COMPRESS : 0;
    int chain[4];
    chain[0] = new_file("full");
    CHECK_OK(tk_ckpt_snapshot(c, chain[0], zf, NULL));
    change(area, 1, 5);
    chain[1] = new_file("incr1");
    CHECK_OK(tk_ckpt_snapshot(c, chain[1], zf | TK_CKPT_INCREMENTAL, NULL));
    change(area, 2, 7);
    chain[2] = new_file("incr2");
    CHECK_OK(tk_ckpt_snapshot(c, chain[2], zf | TK_CKPT_INCREMENTAL, NULL));
    memcpy(want, area, len);
    restore_equals(chain, 3, want);
    tk_ckpt_image_info newest, info;
    CHECK_OK(tk_ckpt_info(chain[2], &newest));

    for (int zc = 0; zc < 2; zc++) {
        int out = new_file(zc ? "compact.z" : "compact");
        CHECK_OK(tk_ckpt_compact(chain, 3, out, zc ? TK_CKPT_COMPRESS : 0));
        CHECK_OK(tk_ckpt_info(out, &info));
        CHECK(!info.incremental && info.compressed == (zc == 1) && info.version == 2);
        CHECK(info.seq == newest.seq && info.lineage == newest.lineage);
        CHECK(info.created_ns == newest.created_ns && info.pages_saved == NPAGES);
        printf("%s chain compacted%s: %lu bytes, %lu zero pages\n",
               compress_chain ? "compressed" : "uncompressed", zc ? " compressed" : "",
               (unsigned long)info.file_bytes, (unsigned long)info.pages_zero);
        restore_equals(&out, 1, want);
        lazy_equals(&out, 1, want);
        /* compacting a compacted image (and the old images after it, which
         * it covers) gives the same */
        int all[4] = {out, chain[1], chain[2]};
        restore_equals(all, 3, want);
        int again = new_file("again");
        CHECK_OK(tk_ckpt_compact(all, 3, again, 0));
        restore_equals(&again, 1, want);
        close(again);
        close(out);
    }

    /* an incremental image after compaction chains onto the compacted one */
    int out = new_file("compact2");
    CHECK_OK(tk_ckpt_compact(chain, 3, out, TK_CKPT_COMPRESS));
    change(area, 3, 11);
    chain[3] = new_file("incr3");
    CHECK_OK(tk_ckpt_snapshot(c, chain[3], zf | TK_CKPT_INCREMENTAL, NULL));
    memcpy(want, area, len);
    int two[2] = {out, chain[3]};
    restore_equals(two, 2, want);
    lazy_equals(two, 2, want);
    int five[5] = {out, chain[1], chain[2], chain[3]};
    restore_equals(five, 4, want);
    restore_equals(chain, 4, want);

    /* an output that cannot grow (a full disk, RLIMIT_FSIZE): the write's
     * error, at once (a failed write used to leave compaction copying
     * nothing forever), and the chain as it was */
    struct rlimit was;
    if (tk_test_fsize_limit(64 << 10, &was)) {
        for (int z = 0; z < 2; z++) {
            int full = new_file(z ? "no-room.z" : "no-room");
            CHECK_ERR(tk_ckpt_compact(chain, 4, full, z ? TK_CKPT_COMPRESS : 0), -EFBIG);
            CHECK(strstr(tk_last_error(), "writing the image failed"));
            close(full);
        }
        CHECK(setrlimit(RLIMIT_FSIZE, &was) == 0);
        restore_equals(chain, 4, want);
    }

    /* refused: a damaged page the chain restores, the output one of the
     * chain, an incremental image first */
    struct tk_img img;
    const char *msg;
    CHECK_OK(tk__img_open(chain[2], &img, true, &msg));
    uint64_t i = tk__bitmap_next(img.held, img.npages, 0), rank = 0, off;
    while (i < img.npages && tk__img_page(&img, i, &rank) != TK_IMG_DATA)
        i = tk__bitmap_next(img.held, img.npages, i + 1);
    CHECK(i < img.npages);
    uint32_t plen, crc;
    tk__img_where(&img, rank, &off, &plen, &crc);
    tk__img_close(&img);
    unsigned char b;
    CHECK(pread(chain[2], &b, 1, (off_t)(off + plen / 2)) == 1);
    b ^= 0x04;
    CHECK(pwrite(chain[2], &b, 1, (off_t)(off + plen / 2)) == 1);
    int bad = new_file("bad");
    CHECK_ERR(tk_ckpt_compact(chain, 4, bad, 0), -EINVAL);
    CHECK(strstr(tk_last_error(), "damaged") && strstr(tk_last_error(), "image 2"));
    CHECK_ERR(tk_ckpt_compact(chain, 4, chain[1], 0), -EINVAL);
    CHECK_ERR(tk_ckpt_compact(chain + 1, 3, bad, 0), -EINVAL);
    CHECK_ERR(tk_ckpt_compact(chain, 2, bad, 0x100), -EINVAL);
    close(bad);
    for (int k = 0; k < 4; k++) close(chain[k]);
    close(out);
    CHECK_OK(tk_ckpt_destroy(c));
    munmap(area, len);
    free(want);
}

/* A snapshot whose directory does not fit (the pages do): the write's
 * error at once.  The directory goes out through a 64 KiB buffer, and a
 * failed write used to leave it looping forever. */
static void directory_no_room(void)
{
    size_t n = 8192, big = n * ps; /* compressed: a 128 KiB directory */
    unsigned char *a = mmap(NULL, big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(a != MAP_FAILED);
    for (size_t p = 0; p < n; p++) memset(a + p * ps, (int)(p % 255) + 1, ps);
    struct tk_ckpt_area ar = {a, big};
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1, .flags = TK_CKPT_TRACK};
    tk_ckpt *c;
    CHECK_OK(tk_ckpt_create(&cfg, &c));
    int fits = new_file("dir-fits");
    CHECK_OK(tk_ckpt_snapshot(c, fits, TK_CKPT_COMPRESS, NULL));
    tk_ckpt_image_info info;
    CHECK_OK(tk_ckpt_info(fits, &info));
    CHECK(info.file_bytes > info.data_bytes + (128 << 10));
    struct rlimit was;
    if (tk_test_fsize_limit(info.file_bytes - (120 << 10), &was)) { /* in its first 64 KiB */
        int part = new_file("dir-no-room");
        CHECK_ERR(tk_ckpt_snapshot(c, part, TK_CKPT_COMPRESS, NULL), -EFBIG);
        CHECK(setrlimit(RLIMIT_FSIZE, &was) == 0);
        close(part);
    }
    /* after a failed snapshot the next one is full, asked incremental or
     * not (pages were marked saved without an image), and restores alone */
    memset(a + 5 * ps, 0xee, ps);
    int more = new_file("dir-more");
    CHECK_OK(tk_ckpt_snapshot(c, more, TK_CKPT_COMPRESS | TK_CKPT_INCREMENTAL, NULL));
    CHECK_OK(tk_ckpt_info(more, &info));
    CHECK(!info.incremental && info.pages_saved == n);
    unsigned char *want = malloc(big);
    CHECK(want);
    memcpy(want, a, big);
    memset(a, 0, big);
    CHECK_OK(tk_ckpt_restore(&ar, 1, &more, 1));
    CHECK(memcmp(a, want, big) == 0);
    close(fits);
    close(more);
    free(want);
    CHECK_OK(tk_ckpt_destroy(c));
    munmap(a, big);
}

int main(void)
{
    ps = tk_test_page();
    len = NPAGES * ps;
    CHECK(mkdtemp(dir));
    run(false);
    run(true);
    directory_no_room();
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    printf("ok\n");
    return 0;
}
