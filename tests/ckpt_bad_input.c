/* tests/ckpt_bad_input.c - checkpoint images that are damaged, truncated,
 * of another version, incomplete or for another layout are refused with a
 * clear error and the memory is left untouched; bad arguments get -EINVAL;
 * the progress callback and statistics report what happened.
 */
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

#include "../src/apps/checkpoint/image.h"
#include "testutil.h"

static size_t ps, len;
static char dir[] = "/tmp/tk-ckbad-XXXXXX";

static int copy_of(int src, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0);
    struct stat sb;
    CHECK(fstat(src, &sb) == 0);
    char *buf = malloc((size_t)sb.st_size);
    CHECK(pread(src, buf, (size_t)sb.st_size, 0) == sb.st_size);
    CHECK(pwrite(fd, buf, (size_t)sb.st_size, 0) == sb.st_size);
    free(buf);
    return fd;
}

static void flip(int fd, off_t off)
{
    unsigned char b;
    CHECK(pread(fd, &b, 1, off) == 1);
    b ^= 0x10;
    CHECK(pwrite(fd, &b, 1, off) == 1);
}

/* restore must fail with err and a message containing what; the target
 * keeps its pattern */
static void refused(unsigned char *target, size_t tlen, int fd, int err, const char *what)
{
    memset(target, 0x77, tlen);
    struct tk_ckpt_area a = {target, tlen};
    int rc = tk_ckpt_restore(&a, 1, &fd, 1);
    if (rc != err || !strstr(tk_last_error(), what)) {
        fprintf(stderr, "expected %d with \"%s\", got %d: %s\n", err, what, rc, tk_last_error());
        exit(1);
    }
    for (size_t i = 0; i < tlen; i++) CHECK(target[i] == 0x77);
}

static int progress_calls, progress_final;
static void on_progress(const tk_ckpt_stats *st, void *arg)
{
    (void)arg;
    progress_calls++;
    if (!st->running) progress_final++;
    CHECK(st->pages_done <= st->pages_saved);
}

int main(void)
{
    ps = tk_test_page();
    len = 64 * ps;
    CHECK(mkdtemp(dir));
    unsigned char *mem =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *target =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    for (size_t i = 0; i < len; i++) mem[i] = (unsigned char)(i * 7 + 3);

    /* bad arguments */
    tk_ckpt *c;
    struct tk_ckpt_area bad = {mem + 1, len};
    tk_ckpt_config cfg = {.areas = &bad, .nareas = 1};
    CHECK_ERR(tk_ckpt_create(&cfg, &c), -EINVAL);
    bad = (struct tk_ckpt_area){mem, len + 1};
    CHECK_ERR(tk_ckpt_create(&cfg, &c), -EINVAL);
    /* memory not mapped (on every mechanism: posix, fork and
     * stop-the-world used to take it), and lengths past the address space */
    unsigned char *gone =
        mmap(NULL, 2 * len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(gone != MAP_FAILED && munmap(gone + len, len) == 0);
    for (int m = TK_CKPT_AUTO; m < TK_CKPT_COUNT_; m++) {
        cfg.mech = (enum tk_ckpt_mech)m;
        bad = (struct tk_ckpt_area){gone, 2 * len};
        CHECK_ERR(tk_ckpt_create(&cfg, &c), -EINVAL);
        CHECK(strstr(tk_last_error(), "not wholly mapped"));
        bad = (struct tk_ckpt_area){mem, (size_t)1 << 62};
        CHECK_ERR(tk_ckpt_create(&cfg, &c), -EINVAL);
        bad = (struct tk_ckpt_area){mem, SIZE_MAX - ps + 1};
        CHECK_ERR(tk_ckpt_create(&cfg, &c), -EINVAL);
    }
    cfg.mech = TK_CKPT_AUTO;
    munmap(gone, len);
    cfg.nareas = 0;
    CHECK_ERR(tk_ckpt_create(&cfg, &c), -EINVAL);
    struct tk_ckpt_area ok = {mem, len};
    cfg = (tk_ckpt_config){.areas = &ok, .nareas = 1, .mech = (enum tk_ckpt_mech)42};
    CHECK_ERR(tk_ckpt_create(&cfg, &c), -EINVAL);

    cfg = (tk_ckpt_config){.areas = &ok, .nareas = 1, .progress = on_progress};
    CHECK_OK(tk_ckpt_create(&cfg, &c));
    CHECK_ERR(tk_ckpt_start(c, -1, 0), -EINVAL);
    CHECK_ERR(tk_ckpt_start(c, 1, TK_CKPT_INCREMENTAL), -EINVAL); /* no TK_CKPT_TRACK */
    int pipefd[2];
    CHECK(pipe(pipefd) == 0);
    CHECK_ERR(tk_ckpt_start(c, pipefd[0], 0), -EINVAL); /* not a regular file */

    char path[128];
    /* opened with O_APPEND (pwrite would append: the header never at 0),
     * or read-only: refused before anything is written */
    snprintf(path, sizeof path, "%s/append.img", dir);
    int app = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    CHECK_ERR(tk_ckpt_start(c, app, 0), -EINVAL);
    CHECK(strstr(tk_last_error(), "O_APPEND"));
    int ro = open(path, O_RDONLY);
    CHECK_ERR(tk_ckpt_start(c, ro, 0), -EINVAL);
    CHECK(strstr(tk_last_error(), "open for writing"));
    close(ro);
    snprintf(path, sizeof path, "%s/good.img", dir);
    int good = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK_ERR(tk_ckpt_compact(&good, 1, app, 0), -EINVAL);
    CHECK(strstr(tk_last_error(), "O_APPEND"));
    close(app);
    tk_ckpt_stats st;
    CHECK_OK(tk_ckpt_snapshot(c, good, 0, &st));
    CHECK(st.pages_saved == 64 && st.pages_done == 64 && st.error == 0 && !st.running);
    CHECK(st.bytes_written >= 64 * ps + sizeof(struct tk_img_header));
    CHECK(progress_final == 1 && progress_calls >= 2);
    mem[5] = 99; /* after the snapshot: not in the image */
    CHECK_OK(tk_ckpt_destroy(c));

    /* the good image restores; into read-only memory (no region of
     * trapkit's: nothing would handle a store) it fails, not crashes */
    struct tk_ckpt_area t = {target, len};
    CHECK(mprotect(target, len, PROT_READ) == 0);
    CHECK(tk_ckpt_restore(&t, 1, &good, 1) == -EFAULT);
    CHECK(strstr(tk_last_error(), "cannot be written"));
    CHECK(mprotect(target, len, PROT_READ | PROT_WRITE) == 0);
    CHECK_OK(tk_ckpt_restore(&t, 1, &good, 1));
    CHECK(target[5] == (unsigned char)(5 * 7 + 3));
    CHECK(memcmp(target + 6, mem + 6, len - 6) == 0);
    tk_ckpt_image_info info;
    CHECK_OK(tk_ckpt_info(good, &info));
    CHECK(info.version == 2 && info.page_size == ps && !info.incremental && info.seq == 1);

    struct tk_img_header h;
    CHECK(pread(good, &h, sizeof h, 0) == sizeof h);

    /* truncated */
    int fd = copy_of(good, "trunc.img");
    CHECK(ftruncate(fd, (off_t)(h.dir_off + h.dir_len - 1)) == 0);
    refused(target, len, fd, -EINVAL, "truncated");
    CHECK(ftruncate(fd, 100) == 0);
    refused(target, len, fd, -EINVAL, "shorter than an image header");
    close(fd);

    /* a flipped bit in a page, in the directory, in the header */
    fd = copy_of(good, "page.img");
    flip(fd, (off_t)(h.data_off + 17 * ps + 123));
    refused(target, len, fd, -EINVAL, "page 17 is damaged");
    close(fd);
    fd = copy_of(good, "dir.img");
    flip(fd, (off_t)(h.dir_off + 3));
    refused(target, len, fd, -EINVAL, "directory is damaged");
    close(fd);
    fd = copy_of(good, "hdr.img");
    flip(fd, 40);
    refused(target, len, fd, -EINVAL, "header is damaged");
    close(fd);

    /* another version (with a valid checksum), not an image, incomplete */
    fd = copy_of(good, "version.img");
    struct tk_img_header h2 = h;
    h2.version = 3;
    tk__crc32c_init();
    h2.header_crc = tk__crc32c(0, &h2, offsetof(struct tk_img_header, header_crc));
    CHECK(pwrite(fd, &h2, sizeof h2, 0) == (ssize_t)sizeof h2);
    refused(target, len, fd, -EINVAL, "another format version");
    close(fd);
    fd = copy_of(good, "magic.img");
    CHECK(pwrite(fd, "NOTANIMG", 8, 0) == 8);
    refused(target, len, fd, -EINVAL, "bad magic");
    close(fd);
    fd = copy_of(good, "zero.img");
    static unsigned char zero[4096];
    CHECK(pwrite(fd, zero, sizeof zero, 0) == (ssize_t)sizeof zero);
    refused(target, len, fd, -EINVAL, "never completed");
    close(fd);

    /* another layout */
    {
        struct tk_ckpt_area small = {target, len - ps};
        memset(target, 0x77, len);
        CHECK_ERR(tk_ckpt_restore(&small, 1, &good, 1), -EINVAL);
        CHECK(strstr(tk_last_error(), "bytes in the image"));
        struct tk_ckpt_area two[2] = {{target, len / 2}, {target + len / 2, len / 2}};
        CHECK_ERR(tk_ckpt_restore(two, 2, &good, 1), -EINVAL);
        CHECK(strstr(tk_last_error(), "areas"));
        for (size_t i = 0; i < len; i++) CHECK(target[i] == 0x77);
    }

    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    printf("ok: damaged, truncated, foreign and mismatched images refused\n");
    return 0;
}
