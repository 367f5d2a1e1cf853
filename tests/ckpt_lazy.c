/* tests/ckpt_lazy.c - lazy restore (tk_ckpt_restore_lazy) of a chain (a
 * full image and an incremental one, compressed and not, with random, text,
 * zero and never-populated pages):
 * - exact, with threads reading random pages while the prefetch thread
 *   runs, every page they see already right;
 * - a page touched before anything else brought it in (no prefetch) is
 *   right, and is the only page in place;
 * - a damaged data page: the error function gets -EBADMSG and its index,
 *   and the thread that touched it never sees it (a forked child); the
 *   default error function ends the process with 70; with prefetch,
 *   tk_ckpt_lazy_wait reports it;
 * - a bad chain is refused before the memory is touched; populated areas
 *   are refused (-EEXIST), and so is a second lazy restore or a
 *   checkpointer over areas still being restored (-EBUSY).
 * With TRAPKIT_PROBE_MASK=uffd (no userfaultfd) the restore is eager and
 * done at once, a damaged chain refused.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

#include "../src/apps/checkpoint/image.h"
#include "testutil.h"

enum { NPAGES = 4096, THREADS = 4 };
static size_t ps, len;
static bool lazy_expected; /* userfaultfd there (not masked) */
static char dir[] = "/tmp/tk-lazy-XXXXXX";

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

static unsigned char *fresh(void)
{
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(m != MAP_FAILED);
    return m;
}

static bool untouched(unsigned char *m)
{
    unsigned char vec[NPAGES];
    CHECK(mincore(m, len, vec) == 0);
    for (size_t i = 0; i < NPAGES; i++)
        if (vec[i] & 1) return false;
    return true;
}

/* A chain of two images (full, then incremental) in fds; want is the state
 * the chain restores. */
static void make_chain(int fds[2], unsigned char *want, bool compress, const char *name)
{
    unsigned char *area = fresh();
    fill(area, 42);
    struct tk_ckpt_area ar = {area, len};
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1, .mech = TK_CKPT_AUTO, .flags = TK_CKPT_TRACK};
    tk_ckpt *c;
    CHECK_OK(tk_ckpt_create(&cfg, &c));
    for (int s = 0; s < 2; s++) {
        char path[96];
        snprintf(path, sizeof path, "%s/%s.%d", dir, name, s);
        fds[s] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        CHECK(fds[s] >= 0);
        unsigned flags = (compress ? TK_CKPT_COMPRESS : 0) | (s ? TK_CKPT_INCREMENTAL : 0);
        CHECK_OK(tk_ckpt_snapshot(c, fds[s], flags, NULL));
        if (s == 0) {
            /* between the two: random pages rewritten, text pages zeroed,
             * never-populated ones written */
            uint64_t seed = 7;
            for (size_t p = 1; p < NPAGES; p += 7) {
                unsigned char *pg = area + p * ps;
                if (p < NPAGES / 4 || p >= NPAGES / 2)
                    for (size_t i = 0; i < ps; i += 64) pg[i] = (unsigned char)tk_test_rand(&seed);
                else
                    memset(pg, 0, ps);
            }
        }
    }
    memcpy(want, area, len);
    CHECK_OK(tk_ckpt_destroy(c));
    munmap(area, len);
}

/* ---- exact, with readers racing the prefetch thread ---------------------- */
struct reader {
    const unsigned char *area, *want;
    uint64_t seed;
    long checked;
};

static void *reader_main(void *arg)
{
    struct reader *r = arg;
    for (int k = 0; k < 600; k++) {
        size_t p = tk_test_rand(&r->seed) % NPAGES;
        CHECK(memcmp(r->area + p * ps, r->want + p * ps, ps) == 0);
        r->checked++;
    }
    return NULL;
}

static uint64_t data_pages(const unsigned char *want)
{
    uint64_t n = 0;
    for (size_t p = 0; p < NPAGES; p++) {
        const unsigned char *pg = want + p * ps;
        if (pg[0] || memcmp(pg, pg + 1, ps - 1)) n++;
    }
    return n;
}

static void exact(const int fds[2], const unsigned char *want)
{
    unsigned char *back = fresh();
    struct tk_ckpt_area t = {back, len};
    tk_ckpt_lazy_config cfg = {.areas = &t, .nareas = 1, .fds = fds, .nfds = 2};
    tk_ckpt_lazy *l;
    CHECK_OK(tk_ckpt_restore_lazy(&cfg, &l));
    pthread_t th[THREADS];
    struct reader rd[THREADS];
    for (int i = 0; i < THREADS; i++) {
        rd[i] = (struct reader){back, want, (uint64_t)i * 7919 + 1, 0};
        CHECK(pthread_create(&th[i], NULL, reader_main, &rd[i]) == 0);
    }
    for (int i = 0; i < THREADS; i++) CHECK(pthread_join(th[i], NULL) == 0);
    tk_ckpt_lazy_stats st;
    CHECK_OK(tk_ckpt_lazy_wait(l, &st));
    CHECK(st.done && st.error == 0 && st.eager == !lazy_expected);
    CHECK(st.pages_total == NPAGES && st.pages_resident == NPAGES);
    CHECK(st.pages_by_fault + st.pages_by_prefetch == NPAGES);
    /* data pages are those the chain holds data for: at least the non-zero ones */
    CHECK(st.pages_verified >= data_pages(want) && st.pages_verified <= NPAGES);
    CHECK(st.start_ns && st.done_ns >= st.start_ns);
    CHECK(tk_ckpt_lazy_poll(l, NULL) == 0);
    CHECK(memcmp(back, want, len) == 0);
    printf("  exact: %lu pages by fault, %lu by prefetch, %lu verified%s\n",
           (unsigned long)st.pages_by_fault, (unsigned long)st.pages_by_prefetch,
           (unsigned long)st.pages_verified, st.eager ? " (eager)" : "");
    CHECK_OK(tk_ckpt_lazy_destroy(l));
    /* ordinary memory afterwards: written, discarded (zero) */
    memset(back, 0xcd, ps);
    CHECK(madvise(back, ps, MADV_DONTNEED) == 0);
    CHECK(back[0] == 0 && back[ps - 1] == 0);
    munmap(back, len);
}

/* ---- a first touch before anything else ---------------------------------- */
static void first_touch(const int fds[2], const unsigned char *want)
{
    unsigned char *back = fresh();
    struct tk_ckpt_area t = {back, len};
    tk_ckpt_lazy_config cfg = {
        .areas = &t, .nareas = 1, .fds = fds, .nfds = 2, .flags = TK_CKPT_LAZY_NO_PREFETCH};
    tk_ckpt_lazy *l;
    CHECK_OK(tk_ckpt_restore_lazy(&cfg, &l));
    tk_ckpt_lazy_stats st;
    if (lazy_expected) {
        CHECK(tk_ckpt_lazy_poll(l, &st) == 1);
        CHECK(st.pages_resident == 0 && st.first_fault_ns == 0 && !st.done);
        /* a second restore over the same areas, and a checkpointer: busy */
        tk_ckpt_lazy *l2;
        CHECK_ERR(tk_ckpt_restore_lazy(&cfg, &l2), -EBUSY);
        tk_ckpt_config cc = {.areas = &t, .nareas = 1, .mech = TK_CKPT_POSIX};
        tk_ckpt *c;
        CHECK_ERR(tk_ckpt_create(&cc, &c), -EBUSY);
    }
    size_t p1 = 1234 % (NPAGES / 4), p2 = NPAGES / 4 + 77, p3 = NPAGES - 3; /* data, data, zero */
    CHECK(memcmp(back + p1 * ps, want + p1 * ps, ps) == 0);
    back[p2 * ps + 5] ^= 0xff; /* a write fault brings it in first */
    back[p2 * ps + 5] ^= 0xff;
    CHECK(memcmp(back + p2 * ps, want + p2 * ps, ps) == 0);
    CHECK(memcmp(back + p3 * ps, want + p3 * ps, ps) == 0);
    CHECK_OK(tk_ckpt_lazy_poll(l, &st));
    if (lazy_expected) {
        printf("  first touch: %lu resident, %lu by fault\n", (unsigned long)st.pages_resident,
               (unsigned long)st.pages_by_fault);
        CHECK(st.pages_resident == 3 && st.pages_by_fault == 3 && st.pages_by_prefetch == 0);
        CHECK(st.first_fault_ns >= st.start_ns && !st.done);
        unsigned char vec[NPAGES];
        CHECK(mincore(back, len, vec) == 0);
        for (size_t i = 0; i < NPAGES; i++) CHECK(!(vec[i] & 1) || i == p1 || i == p2 || i == p3);
    }
    CHECK_OK(tk_ckpt_lazy_wait(l, &st)); /* brings in the rest itself */
    CHECK(st.done && st.pages_resident == NPAGES);
    if (lazy_expected) CHECK(st.pages_by_fault == 3 && st.pages_by_prefetch == NPAGES - 3);
    CHECK(memcmp(back, want, len) == 0);
    { /* done: the areas are ordinary memory, a checkpointer may be made */
        tk_ckpt_config cc = {.areas = &t, .nareas = 1, .mech = TK_CKPT_POSIX};
        tk_ckpt *c;
        CHECK_OK(tk_ckpt_create(&cc, &c));
        CHECK_OK(tk_ckpt_destroy(c));
    }
    CHECK_OK(tk_ckpt_lazy_destroy(l));
    munmap(back, len);
}

/* ---- a damaged page -------------------------------------------------------- */
static int report_fd = -1;

static void on_error_exit(int err, uint64_t page, const char *msg, void *arg)
{
    (void)arg;
    int64_t rec[2] = {err, (int64_t)page};
    if (write(report_fd, rec, sizeof rec) != sizeof rec) _exit(2);
    if (write(report_fd, msg, strlen(msg)) < 0) _exit(2);
    _exit(71);
}

struct damaged {
    const int *fds;
    size_t bad;
    bool use_default;
};

static void touch_bad(void *arg)
{
    const struct damaged *d = arg;
    unsigned char *back = fresh();
    struct tk_ckpt_area t = {back, len};
    tk_ckpt_lazy_config cfg = {.areas = &t,
                               .nareas = 1,
                               .fds = d->fds,
                               .nfds = 2,
                               .flags = TK_CKPT_LAZY_NO_PREFETCH,
                               .on_error = d->use_default ? NULL : on_error_exit};
    tk_ckpt_lazy *l;
    CHECK_OK(tk_ckpt_restore_lazy(&cfg, &l));
    volatile unsigned char *p = back + d->bad * ps;
    unsigned char v = p[100]; /* never returns with the page */
    (void)v;
    if (write(report_fd, "served", 6) < 0) _exit(3);
    _exit(1);
}

struct recorded {
    _Atomic int calls, err;
    _Atomic uint64_t page;
};

static void on_error_record(int err, uint64_t page, const char *msg, void *arg)
{
    struct recorded *r = arg;
    (void)msg;
    /* slow to record: tk_ckpt_lazy_wait must still return after it */
    struct timespec d = {0, 30 * 1000 * 1000};
    nanosleep(&d, NULL);
    atomic_store(&r->err, err);
    atomic_store(&r->page, page);
    atomic_fetch_add(&r->calls, 1);
}

static void damaged(int fds[2], const unsigned char *want, bool compress)
{
    /* page 5 (random data) comes from the full image: a byte of its data flipped */
    size_t bad = 5;
    struct tk_img img;
    const char *msg;
    CHECK_OK(tk__img_open(fds[0], &img, true, &msg));
    uint64_t rank, off;
    uint32_t plen, crc;
    CHECK(tk__img_page(&img, bad, &rank) == TK_IMG_DATA);
    tk__img_where(&img, rank, &off, &plen, &crc);
    tk__img_close(&img);
    unsigned char b;
    CHECK(pread(fds[0], &b, 1, (off_t)(off + plen / 2)) == 1);
    b ^= 0x10;
    CHECK(pwrite(fds[0], &b, 1, (off_t)(off + plen / 2)) == 1);

    if (!lazy_expected) {
        unsigned char *back = fresh();
        struct tk_ckpt_area t = {back, len};
        tk_ckpt_lazy_config cfg = {.areas = &t, .nareas = 1, .fds = fds, .nfds = 2};
        tk_ckpt_lazy *l;
        CHECK_ERR(tk_ckpt_restore_lazy(&cfg, &l), -EINVAL);
        CHECK(strstr(tk_last_error(), "damaged"));
        CHECK(untouched(back));
        munmap(back, len);
    } else {
        /* the thread touching it never goes on: the error function ends it */
        for (int dflt = 0; dflt < 2; dflt++) {
            int pfd[2];
            CHECK(pipe(pfd) == 0);
            report_fd = pfd[1];
            struct damaged d = {fds, bad, dflt == 1};
            int status = tk_test_in_child(touch_bad, &d);
            close(pfd[1]);
            char buf[512] = {0};
            ssize_t n = read(pfd[0], buf, sizeof buf - 1);
            close(pfd[0]);
            CHECK(WIFEXITED(status));
            if (dflt) {
                CHECK(WEXITSTATUS(status) == 70 && n == 0);
            } else {
                CHECK(WEXITSTATUS(status) == 71);
                int64_t rec[2];
                CHECK(n > (ssize_t)sizeof rec);
                memcpy(rec, buf, sizeof rec);
                CHECK(rec[0] == -EBADMSG && rec[1] == (int64_t)bad);
                CHECK(strstr(buf + sizeof rec, "damaged") && strstr(buf + sizeof rec, "page 5"));
                printf("  damaged page: %s\n", buf + sizeof rec);
            }
        }
        /* with prefetch: the error is found and reported; the good pages
         * touched are right */
        unsigned char *back = fresh();
        struct tk_ckpt_area t = {back, len};
        struct recorded rec = {0};
        tk_ckpt_lazy_config cfg = {.areas = &t,
                                   .nareas = 1,
                                   .fds = fds,
                                   .nfds = 2,
                                   .on_error = on_error_record,
                                   .arg = &rec};
        tk_ckpt_lazy *l;
        CHECK_OK(tk_ckpt_restore_lazy(&cfg, &l));
        CHECK(memcmp(back + 3000 * ps, want + 3000 * ps, ps) == 0);
        /* the error is known (its function still running) before the wait */
        while (tk_ckpt_lazy_poll(l, NULL) == 1) {
            struct timespec d = {0, 1000 * 1000};
            nanosleep(&d, NULL);
        }
        tk_ckpt_lazy_stats st;
        CHECK_ERR(tk_ckpt_lazy_wait(l, &st), -EBADMSG);
        CHECK(st.error == -EBADMSG && st.bad_page == bad && !st.done);
        CHECK(atomic_load(&rec.calls) >= 1 && atomic_load(&rec.err) == -EBADMSG &&
              atomic_load(&rec.page) == bad);
        CHECK(st.pages_resident < NPAGES);
        CHECK_ERR(tk_ckpt_lazy_destroy(l), -EBADMSG);
        munmap(back, len);
    }
    (void)compress;
    /* put it back */
    b ^= 0x10;
    CHECK(pwrite(fds[0], &b, 1, (off_t)(off + plen / 2)) == 1);
}

/* ---- refused before anything is touched ------------------------------------ */
static void refused(const int fds[2])
{
    unsigned char *back = fresh();
    struct tk_ckpt_area t = {back, len};
    tk_ckpt_lazy *l;
    int rev[2] = {fds[1], fds[0]};
    tk_ckpt_lazy_config cfg = {.areas = &t, .nareas = 1, .fds = rev, .nfds = 2};
    CHECK_ERR(tk_ckpt_restore_lazy(&cfg, &l), -EINVAL); /* starts with an incremental one */
    CHECK(strstr(tk_last_error(), "incremental"));
    cfg.fds = fds;
    cfg.nfds = 1;
    struct tk_ckpt_area half = {back, len / 2};
    cfg.areas = &half;
    CHECK_ERR(tk_ckpt_restore_lazy(&cfg, &l), -EINVAL); /* another layout */
    /* a damaged header */
    char path[96];
    snprintf(path, sizeof path, "%s/bad", dir);
    int bad = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    CHECK(bad >= 0);
    unsigned char hdr[4096];
    CHECK(pread(fds[0], hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr);
    hdr[40] ^= 1;
    CHECK(pwrite(bad, hdr, sizeof hdr, 0) == (ssize_t)sizeof hdr);
    cfg.areas = &t;
    cfg.fds = &bad;
    CHECK_ERR(tk_ckpt_restore_lazy(&cfg, &l), -EINVAL);
    CHECK(strstr(tk_last_error(), "header"));
    close(bad);
    CHECK(untouched(back));
    /* populated areas */
    back[ps * 10] = 1;
    cfg.fds = fds;
    cfg.nfds = 2;
    CHECK_ERR(tk_ckpt_restore_lazy(&cfg, &l), -EEXIST);
    munmap(back, len);
}

int main(void)
{
    ps = tk_test_page();
    len = NPAGES * ps;
    tk_probe_info pi;
    tk_probe(&pi);
    lazy_expected = pi.uffd_access != TK_UFFD_NONE;
    printf("userfaultfd %s: the restore is %s\n", lazy_expected ? "there" : "masked",
           lazy_expected ? "lazy" : "eager");
    CHECK(mkdtemp(dir));
    unsigned char *want = malloc(len);
    CHECK(want);
    for (int compress = 0; compress < 2; compress++) {
        printf("%s images:\n", compress ? "compressed" : "uncompressed");
        int fds[2];
        make_chain(fds, want, compress, compress ? "z" : "raw");
        for (int round = 0; round < 3; round++) exact(fds, want);
        first_touch(fds, want);
        damaged(fds, want, compress);
        exact(fds, want); /* the damage undone */
        if (!compress) refused(fds);
        close(fds[0]);
        close(fds[1]);
    }
    free(want);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    printf("ok\n");
    return 0;
}
