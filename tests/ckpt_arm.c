/* tests/ckpt_arm.c - tk_ckpt_start protects the areas in steps while the
 * program writes, and pauses writers only for the last step: a writer
 * writing as fast as it can through the whole start (reopening pages
 * already armed) still gets an image that is a prefix of its writes; the
 * pause (protect_pause_ns) is a small part of the protection
 * (protect_ns); pages never populated are held as zero, not written
 * (PAGEMAP_SCAN, Linux 6.7; without it they are holes of the file), and a
 * restore leaves them zero.  Per
 * mechanism (uffd-sigbus, uffd-thread, posix; a missing one is skipped),
 * full and incremental.
 *
 * "ckpt_arm swap" (root): the same with a swap file of its own and half
 * the populated pages swapped out (MADV_PAGEOUT) before the snapshot: a
 * swapped-out page holds data, a never-populated page write-protected
 * (which PAGEMAP_SCAN calls swapped too) holds none.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysinfo.h>
#include <trapkit/checkpoint.h>
#include <trapkit/probe.h>
#include <unistd.h>

#include "testutil.h"

enum { NPAGES = 16384, POPULATED = 12288, MAXLOG = 1 << 22 };
static size_t ps;
static uint64_t *area;
static atomic_bool stop;
static uint32_t *logp; /* page of write n (the word is the page's first) */
static atomic_long nwrites;
static uint64_t tag;   /* this run's, in each value's top bits */
static uint64_t *base; /* each page's word before this run */
static bool swapping;  /* half the populated pages swapped out before each snapshot */

/* One writer: write n puts n+1 into the first word of a random populated
 * page, after logging it. */
static void *writer(void *arg)
{
    uint64_t seed = (uint64_t)(uintptr_t)arg | 1;
    long n = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed) && n < MAXLOG) {
        uint32_t page = (uint32_t)(tk_test_xorshift(&seed) % POPULATED);
        logp[n] = page;
        atomic_signal_fence(memory_order_seq_cst);
        __atomic_store_n(&area[(size_t)page * (ps / 8)], tag | ((uint64_t)n + 1), __ATOMIC_RELEASE);
        n++;
        atomic_store_explicit(&nwrites, n, memory_order_relaxed);
    }
    return NULL;
}

/* img must be the state after the first N writes of this run, for some
 * N. */
static long check_prefix(const uint64_t *img)
{
    long maxn = 0;
    for (size_t p = 0; p < POPULATED; p++) {
        uint64_t v = img[p * (ps / 8)];
        if ((v & ~0xffffffffffffull) == tag && (long)(v & 0xffffffffffffull) > maxn)
            maxn = (long)(v & 0xffffffffffffull);
    }
    static uint64_t *replay;
    if (!replay) replay = calloc(POPULATED, 8);
    for (size_t p = 0; p < POPULATED; p++) replay[p] = base[p];
    for (long n = 0; n < maxn; n++) replay[logp[n]] = tag | ((uint64_t)n + 1);
    for (size_t p = 0; p < POPULATED; p++)
        if (replay[p] != img[p * (ps / 8)]) {
            fprintf(stderr, "page %zu: image %#lx, after %ld writes %#lx: not a prefix\n", p,
                    (unsigned long)img[p * (ps / 8)], maxn, (unsigned long)replay[p]);
            exit(1);
        }
    return maxn;
}

static bool run(enum tk_ckpt_mech m, bool scan)
{
    size_t len = NPAGES * ps;
    struct sysinfo si;
    bool exact = geteuid() == 0 || (sysinfo(&si) == 0 && si.totalswap == 0);
    area = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED);
    /* the first POPULATED pages written, the rest never touched */
    for (size_t p = 0; p < POPULATED; p++) memset((char *)area + p * ps, 0x11, ps);
    for (size_t p = 0; p < POPULATED; p++) base[p] = area[p * (ps / 8)];
    struct tk_ckpt_area ar = {area, len};
    tk_ckpt_config cfg = {.areas = &ar, .nareas = 1, .mech = m, .flags = TK_CKPT_TRACK};
    tk_ckpt *c;
    int err = tk_ckpt_create(&cfg, &c);
    if (err == -EOPNOTSUPP) {
        printf("%s: not available here (%s)\n", tk_ckpt_mech_name(m), tk_last_error());
        munmap(area, len);
        return false;
    }
    CHECK_OK(err);
    char dir[] = "/tmp/tk-ckarm-XXXXXX";
    CHECK(mkdtemp(dir));
    int fds[2];
    unsigned char *back =
        mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(back != MAP_FAILED);
    struct tk_ckpt_area tgt = {back, len};
    for (int s = 0; s < 2; s++) {
        char path[64];
        snprintf(path, sizeof path, "%s/%d.img", dir, s);
        fds[s] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        CHECK(fds[s] >= 0);
        atomic_store(&stop, false);
        atomic_store(&nwrites, 0);
        tag = (uint64_t)(s + 1) << 48;
        pthread_t th;
        CHECK(pthread_create(&th, NULL, writer, (void *)(uintptr_t)(s + 7)) == 0);
        while (atomic_load(&nwrites) < 1000) usleep(100);
        if (swapping) {
            CHECK(madvise(area, POPULATED / 2 * ps, MADV_PAGEOUT) == 0);
            unsigned char *vec = malloc(POPULATED / 2);
            CHECK(vec && mincore(area, POPULATED / 2 * ps, vec) == 0);
            size_t out = 0;
            for (size_t p = 0; p < POPULATED / 2; p++) out += !(vec[p] & 1);
            free(vec);
            printf("%zu of %d pages swapped out\n", out, POPULATED / 2);
        }
        tk_ckpt_stats st;
        CHECK_OK(tk_ckpt_snapshot(c, fds[s], s ? TK_CKPT_INCREMENTAL : 0, &st));
        atomic_store(&stop, true);
        pthread_join(th, NULL);
        printf("%s %s: protected in %.2f ms over %u round%s, pause %.3f ms; %lu pages with data, "
               "%lu zero; %lu writes by the writer during the snapshot's faults\n",
               tk_ckpt_mech_name(m), s ? "incremental" : "full", st.protect_ns / 1e6,
               st.protect_rounds, st.protect_rounds == 1 ? "" : "s", st.protect_pause_ns / 1e6,
               (unsigned long)st.pages_saved, (unsigned long)st.pages_zero,
               (unsigned long)st.faults);
        CHECK(st.protect_pause_ns <= st.protect_ns && st.protect_rounds >= 1);
        CHECK(st.pause_ns == st.protect_pause_ns);
        if (s == 0) {
            /* the never-populated pages: zero, no data (where there is
             * swap, only a process that may read swap entries' types
             * from /proc/self/pagemap tells them from swapped-out pages) */
            if (scan && exact) CHECK(st.pages_zero == NPAGES - POPULATED);
            if (scan && !exact) CHECK(st.pages_zero <= NPAGES - POPULATED);
            CHECK(st.pages_saved + st.pages_zero == NPAGES);
            if (scan && exact) CHECK(st.data_bytes == (uint64_t)POPULATED * ps);
            struct stat sb;
            CHECK(fstat(fds[s], &sb) == 0);
            CHECK((uint64_t)sb.st_size == st.image_bytes);
            /* on disk: the populated pages and little more */
            if (exact) CHECK((uint64_t)sb.st_blocks * 512 < (uint64_t)(POPULATED + 1024) * ps);
        }
        /* the restored chain is a prefix of this snapshot's writes; the
         * never-populated pages are zero and stay unpopulated */
        memset(back, 0x55, POPULATED * ps);
        memset(back + (NPAGES - 8) * ps, 0x55, 8 * ps); /* dirty in the zero part too */
        CHECK_OK(tk_ckpt_restore(&tgt, 1, fds, (size_t)s + 1));
        long n = check_prefix((const uint64_t *)back);
        CHECK(n >= 1000);
        for (size_t p = 0; p < POPULATED; p++) base[p] = area[p * (ps / 8)];
        for (size_t p = POPULATED; p < NPAGES; p++) {
            const uint64_t *w = (const uint64_t *)(back + p * ps);
            for (size_t i = 0; i < ps / 8; i++) CHECK(w[i] == 0);
        }
    }
    CHECK_OK(tk_ckpt_destroy(c));
    for (int s = 0; s < 2; s++) close(fds[s]);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0);
    munmap(back, len);
    munmap(area, len);
    return true;
}

int main(int argc, char **argv)
{
    ps = tk_test_page();
    if (argc > 1 && strcmp(argv[1], "swap") == 0) {
        tk_test_swap_on("ckpt");
        swapping = true;
    } else if (argc > 1) {
        fprintf(stderr, "usage: ckpt_arm [swap]\n");
        return 2;
    }
    logp = malloc(MAXLOG * sizeof *logp);
    base = malloc(POPULATED * 8);
    CHECK(logp && base);
    tk_probe_info p;
    CHECK_OK(tk_probe(&p));
    bool scan = p.pagemap_scan;
    if (!scan) printf("no PAGEMAP_SCAN here: pages never populated are holes of the file\n");
    static const enum tk_ckpt_mech mechs[] = {TK_CKPT_UFFD_SIGBUS, TK_CKPT_UFFD_THREAD,
                                              TK_CKPT_POSIX};
    int ran = 0;
    for (size_t i = 0; i < sizeof mechs / sizeof mechs[0]; i++) ran += run(mechs[i], scan);
    CHECK(ran > 0);
    printf("ok\n");
    return 0;
}
