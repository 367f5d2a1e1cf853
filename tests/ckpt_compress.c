/* tests/ckpt_compress.c - compressed images (TK_CKPT_COMPRESS): an area of
 * incompressible, compressible, zero and never-populated pages restores
 * exactly, full and incremental, with writers copying pages while the
 * background thread is held still (their copies are compressed too) and
 * on fork; the image is smaller than the data, zero pages take no space,
 * and a damaged compressed page is refused with the memory untouched.
 */
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

#include "../src/apps/checkpoint/image.h"
#include "testutil.h"

enum { NPAGES = 4096 };
static size_t ps, len;
static atomic_bool held, release_it;

static void on_progress(const tk_ckpt_stats *st, void *arg)
{
    if (!arg || !st->running || atomic_load(&held)) return;
    atomic_store(&held, true);
    for (int i = 0; i < 30000 && !atomic_load(&release_it); i++) usleep(1000);
}

/* Quarter 0 random, 1 text, 2 zero (written), 3 never touched. */
static void fill(unsigned char *m, uint64_t seed)
{
    for (size_t p = 0; p < NPAGES / 4; p++)
        for (size_t i = 0; i < ps; i += 8) {
            uint64_t v = tk_test_xorshift(&seed);
            memcpy(m + p * ps + i, &v, 8);
        }
    for (size_t p = NPAGES / 4; p < NPAGES / 2; p++)
        for (size_t i = 0; i < ps; i++)
            m[p * ps + i] =
                (unsigned char)"the quick brown fox jumps over the lazy dog "[(i + p) % 44];
    memset(m + NPAGES / 2 * ps, 0, NPAGES / 4 * ps);
}

static void restore_equals(const int *fds, size_t n, const unsigned char *want)
{
    unsigned char *back =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(back != MAP_FAILED);
    memset(back, 0x5a, len);
    struct tk_ckpt_area t = {back, len};
    CHECK_OK(tk_ckpt_restore(&t, 1, fds, n));
    CHECK(memcmp(back, want, len) == 0);
    munmap(back, len);
}

static void run(enum tk_ckpt_mech m, const char *dir)
{
    unsigned char *area =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    unsigned char *want = malloc(len);
    CHECK(area != MAP_FAILED && want);
    fill(area, 42);
    memcpy(want, area, len);
    struct tk_ckpt_area ar = {area, len};
    tk_ckpt_config cfg = {.areas = &ar,
                          .nareas = 1,
                          .mech = m,
                          .flags = TK_CKPT_TRACK,
                          .progress = on_progress,
                          .progress_arg = m == TK_CKPT_FORK ? NULL : (void *)1};
    tk_ckpt *c;
    int err = tk_ckpt_create(&cfg, &c);
    if (err == -EOPNOTSUPP) {
        printf("%s: not available here\n", tk_ckpt_mech_name(m));
        return;
    }
    CHECK_OK(err);
    int fds[2];
    for (int s = 0; s < 2; s++) {
        char path[96];
        snprintf(path, sizeof path, "%s/%s.%d", dir, tk_ckpt_mech_name(m), s);
        fds[s] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        CHECK(fds[s] >= 0);
        atomic_store(&held, false);
        atomic_store(&release_it, false);
        unsigned flags = TK_CKPT_COMPRESS | (s ? TK_CKPT_INCREMENTAL : 0);
        CHECK_OK(tk_ckpt_start(c, fds[s], flags));
        if (m != TK_CKPT_FORK)
            while (!atomic_load(&held)) sched_yield();
        /* writers take pages over (the background thread is held): the
         * image keeps what was there at the instant */
        for (size_t p = 0; p < NPAGES; p += 3) area[p * ps + 100] ^= 0xa5;
        atomic_store(&release_it, true);
        tk_ckpt_stats st;
        CHECK_OK(tk_ckpt_wait(c, &st));
        CHECK(st.compressed && st.pages_done == st.pages_saved);
        struct stat sb;
        CHECK(fstat(fds[s], &sb) == 0);
        CHECK((uint64_t)sb.st_size == st.image_bytes);
        printf("%s %s: %lu pages with data (%lu by writers), %lu zero; %lu bytes of data "
               "(%.0f%% of the pages'), image %lu bytes\n",
               tk_ckpt_mech_name(m), s ? "incremental" : "full", (unsigned long)st.pages_saved,
               (unsigned long)st.pages_by_writers, (unsigned long)st.pages_zero,
               (unsigned long)st.data_bytes, 100.0 * st.data_bytes / (st.pages_saved * ps),
               (unsigned long)st.image_bytes);
        if (s == 0) {
            if (m != TK_CKPT_FORK) CHECK(st.pages_by_writers > 0);
            /* random pages as they are, text compressed, zero ones nothing */
            CHECK(st.data_bytes < (uint64_t)(NPAGES / 4 + NPAGES / 8) * ps);
            CHECK(st.data_bytes >= (uint64_t)(NPAGES / 4) * ps);
        }
        tk_ckpt_image_info info;
        CHECK_OK(tk_ckpt_info(fds[s], &info));
        CHECK(info.compressed && info.version == 2 && info.data_bytes == st.data_bytes);
        restore_equals(fds, (size_t)s + 1, want);
        memcpy(want, area, len); /* the next snapshot's instant */
    }

    /* a damaged compressed page: refused, memory untouched */
    struct tk_img_header h;
    CHECK(pread(fds[0], &h, sizeof h, 0) == sizeof h);
    struct tk_img_entry e;
    uint64_t words = (NPAGES + 63) / 64;
    /* data page 1324: a text page, compressed */
    CHECK(pread(fds[0], &e, sizeof e,
                (off_t)(h.dir_off + 2 * words * 8 + (NPAGES / 4 + 300) * sizeof e)) == sizeof e);
    CHECK(e.len > 0 && e.len < ps);
    unsigned char b;
    CHECK(pread(fds[0], &b, 1, (off_t)(e.off + e.len / 2)) == 1);
    b ^= 0x40;
    CHECK(pwrite(fds[0], &b, 1, (off_t)(e.off + e.len / 2)) == 1);
    unsigned char *back =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memset(back, 0x77, len);
    struct tk_ckpt_area t = {back, len};
    CHECK_ERR(tk_ckpt_restore(&t, 1, fds, 1), -EINVAL);
    CHECK(strstr(tk_last_error(), "is damaged"));
    for (size_t i = 0; i < len; i++) CHECK(back[i] == 0x77);
    munmap(back, len);
    CHECK_OK(tk_ckpt_destroy(c));
    close(fds[0]);
    close(fds[1]);
    munmap(area, len);
    free(want);
}

int main(void)
{
    ps = tk_test_page();
    len = NPAGES * ps;
    char dir[] = "/tmp/tk-ckz-XXXXXX";
    CHECK(mkdtemp(dir));
    run(TK_CKPT_UFFD_SIGBUS, dir);
    run(TK_CKPT_POSIX, dir);
    run(TK_CKPT_FORK, dir);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    printf("ok\n");
    return 0;
}
