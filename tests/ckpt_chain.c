/* tests/ckpt_chain.c - checkpoints taken while threads write at random
 * restore to a consistent cut, full and in incremental chains of 12, per
 * mechanism (argv[1]: uffd-thread, uffd-sigbus, posix, fork,
 * stop-the-world).
 *
 * Each writer thread owns the words i ≡ t (mod T) of the area, so every
 * page is written by every thread, and logs each write (word, value).  A
 * value encodes the thread and the write's sequence number.  An image is
 * consistent at an instant exactly when, for every thread, the words it
 * owns equal the state after some prefix of its writes: the test finds the
 * prefix from the largest sequence number present and replays the log to
 * check every word.  Successive images must cut each thread no earlier
 * than the one before.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <trapkit/checkpoint.h>
#include <unistd.h>

#include "testutil.h"

/* SNAPS snapshots; the build that counts the pages writers take over from
 * the background thread, and their copies into a pool slot written and
 * used again, goes on (up to SNAPS_MAX) until it has seen both */
enum { T = 4, SNAPS = 12, SNAPS_MAX = 48, MAXLOG = 1 << 20 };
#ifdef TK_CKPT_TEST_TAKEOVER
extern atomic_long tk__ckpt_takeovers, tk__ckpt_reused;
#endif
static size_t words, area_len;
static uint64_t *area;
static atomic_bool stop;

struct writer {
    int t;
    uint64_t *pos; /* word index of write n */
    long n;        /* writes done */
    uint64_t seed;
};
static struct writer W[T];

static void *write_loop(void *arg)
{
    struct writer *w = arg;
    size_t mine = words / T;
    while (!atomic_load_explicit(&stop, memory_order_relaxed) && w->n < MAXLOG) {
        size_t k = tk_test_xorshift(&w->seed) % mine;
        size_t word = k * T + (size_t)w->t;
        w->pos[w->n] = word;
        /* the log entry first, then the store: a store in the image has its entry */
        atomic_signal_fence(memory_order_seq_cst);
        __atomic_store_n(&area[word], ((uint64_t)(w->t + 1) << 48) | (uint64_t)(w->n + 1),
                         __ATOMIC_RELEASE);
        w->n++;
        for (int k = 0; k < 40; k++) __builtin_ia32_pause(); /* spread the writes over the run */
    }
    return NULL;
}

/* Checks that img (a restored copy of the area) is a per-thread prefix;
 * returns each thread's prefix length in cut[]. */
static void check_cut(const uint64_t *img, long cut[T], const long prev[T], int snap)
{
    for (int t = 0; t < T; t++) {
        long maxn = 0;
        for (size_t w = (size_t)t; w < words; w += T) {
            uint64_t v = img[w];
            if (v == 0) continue;
            CHECK((int)(v >> 48) == t + 1);
            long n = (long)(v & 0xffffffffffffull);
            if (n > maxn) maxn = n;
        }
        CHECK(maxn <= W[t].n);
        /* replay the first maxn writes: the last write to each word wins */
        static uint64_t *replay;
        if (!replay) replay = calloc(words, 8);
        for (size_t w = (size_t)t; w < words; w += T) replay[w] = 0;
        for (long n = 0; n < maxn; n++)
            replay[W[t].pos[n]] = ((uint64_t)(t + 1) << 48) | (uint64_t)(n + 1);
        for (size_t w = (size_t)t; w < words; w += T)
            if (replay[w] != img[w]) {
                fprintf(stderr,
                        "snapshot %d: thread %d's words are not a prefix of its writes "
                        "(word %zu: image %#lx, after %ld writes %#lx)\n",
                        snap, t, w, (unsigned long)img[w], maxn, (unsigned long)replay[w]);
                exit(1);
            }
        CHECK(maxn >= prev[t]);
        cut[t] = maxn;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2) return 1;
    enum tk_ckpt_mech m = tk_ckpt_mech_parse(argv[1]);
    CHECK(m != TK_CKPT_COUNT_);
    size_t ps = tk_test_page();
    area_len = 1024 * ps;
    words = area_len / 8;
    area = mmap(NULL, area_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(area != MAP_FAILED);
    memset(area, 0, area_len);
    struct tk_ckpt_area ar = {area, area_len};
    /* the background thread at the writers' priority: they spin on every
     * CPU, and an idle-priority one would wait until they stop
     * (tests/ckpt_yield.c has it idle) */
    tk_ckpt_config cfg = {
        .areas = &ar, .nareas = 1, .mech = m, .flags = TK_CKPT_TRACK | TK_CKPT_FAIR};
#ifdef TK_CKPT_TEST_TAKEOVER
    /* a fault copies its own page only: with its 16-page block, the
     * writers' first 64 faults take every page before the background
     * thread reaches one */
    setenv("TRAPKIT_CKPT_BLOCK", "1", 1);
#endif
    tk_ckpt *c;
    int err = tk_ckpt_create(&cfg, &c);
    if (err == -EOPNOTSUPP) tk_test_unavailable(argv[1]);
    CHECK_OK(err);

    char dir[] = "/tmp/tk-ckpt-XXXXXX";
    CHECK(mkdtemp(dir));
    int fds[SNAPS_MAX], nsnaps = 0;
    for (int t = 0; t < T; t++) {
        W[t] = (struct writer){.t = t, .pos = malloc(MAXLOG * 8), .seed = 0x1234567ull * (t + 1)};
        CHECK(W[t].pos);
    }
    pthread_t th[T];
    for (int t = 0; t < T; t++) CHECK(pthread_create(&th[t], NULL, write_loop, &W[t]) == 0);

    tk_ckpt_stats st[SNAPS_MAX];
    for (int s = 0; s < SNAPS_MAX; s++) {
#ifdef TK_CKPT_TEST_TAKEOVER
        if (s >= SNAPS && atomic_load(&tk__ckpt_takeovers) > 0 && atomic_load(&tk__ckpt_reused) > 0)
            break;
#else
        if (s >= SNAPS) break;
#endif
        nsnaps = s + 1;
        usleep(2000);
        char path[64];
        snprintf(path, sizeof path, "%s/%d.img", dir, s);
        fds[s] = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
        CHECK(fds[s] >= 0);
        CHECK_OK(tk_ckpt_snapshot(c, fds[s], s ? TK_CKPT_INCREMENTAL : 0, &st[s]));
        CHECK(!st[s].running && st[s].error == 0);
        CHECK(st[s].seq == (uint64_t)s + 1);
        CHECK(st[s].incremental == (s > 0));
        CHECK(st[s].pages_done == st[s].pages_saved);
        if (m != TK_CKPT_FORK)
            CHECK(st[s].pages_by_thread + st[s].pages_by_writers == st[s].pages_saved);
        if (st[s].pages_by_writers > 0) CHECK(st[s].max_stall_ns > 0 && st[s].faults > 0);
        if (s == 0) CHECK(st[s].pages_saved == 1024);
        /* all-zero pages are holes of the file, not written */
        CHECK(st[s].data_bytes == st[s].pages_saved * ps && st[s].pages_zero == 0);
        CHECK(st[s].image_bytes > st[s].data_bytes && st[s].bytes_written > 0);
    }
    atomic_store(&stop, true);
    for (int t = 0; t < T; t++) pthread_join(th[t], NULL);

    long total = 0, by_writers = 0, incr_pages = 0;
    for (int t = 0; t < T; t++) total += W[t].n;
    for (int s = 0; s < nsnaps; s++) {
        by_writers += (long)st[s].pages_by_writers;
        if (s) incr_pages += (long)st[s].pages_saved;
    }
    printf("%s: %ld writes during %d snapshots; %ld pages copied by writers, %ld pages in the "
           "incremental images\n",
           argv[1], total, nsnaps, by_writers, incr_pages);
    CHECK(total > 0);
#ifdef TK_CKPT_TEST_TAKEOVER
    printf("%ld pages taken over from the background thread, %ld copies into a slot used "
           "before\n",
           atomic_load(&tk__ckpt_takeovers), atomic_load(&tk__ckpt_reused));
    CHECK(atomic_load(&tk__ckpt_takeovers) > 0);
    CHECK(atomic_load(&tk__ckpt_reused) > 0);
#endif

    /* every chain restores to a consistent cut, each no earlier than the last */
    uint64_t *img =
        mmap(NULL, area_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    struct tk_ckpt_area target = {img, area_len};
    long prev[T] = {0}, cut[T];
    for (int s = 0; s < nsnaps; s++) {
        memset(img, 0xee, area_len);
        CHECK_OK(tk_ckpt_restore(&target, 1, fds, (size_t)s + 1));
        check_cut(img, cut, prev, s);
        memcpy(prev, cut, sizeof prev);
        tk_ckpt_image_info info;
        CHECK_OK(tk_ckpt_info(fds[s], &info));
        CHECK(info.seq == (uint64_t)s + 1 && info.incremental == (s > 0));
        CHECK(info.pages_total == 1024 && info.nareas == 1 && info.area_len[0] == area_len);
    }
    /* the last cut is the state at the end for no thread that wrote after */
    printf("%s: %d chains restore to consistent cuts (last cut: %ld %ld %ld %ld writes)\n", argv[1],
           nsnaps, cut[0], cut[1], cut[2], cut[3]);

    /* a chain with a gap or out of order is refused, memory untouched */
    memset(img, 0x5a, area_len);
    int gap[3] = {fds[0], fds[1], fds[3]};
    CHECK_ERR(tk_ckpt_restore(&target, 1, gap, 3), -EINVAL);
    CHECK(strstr(tk_last_error(), "missing or out of order"));
    int swapped[3] = {fds[0], fds[2], fds[1]};
    CHECK_ERR(tk_ckpt_restore(&target, 1, swapped, 3), -EINVAL);
    int incr_first[1] = {fds[1]};
    CHECK_ERR(tk_ckpt_restore(&target, 1, incr_first, 1), -EINVAL);
    for (size_t i = 0; i < words; i++) CHECK(img[i] == 0x5a5a5a5a5a5a5a5aull);

    CHECK_OK(tk_ckpt_destroy(c));
    /* the area is plain memory again */
    area[0] = 1;
    for (int s = 0; s < nsnaps; s++) {
        char path[64];
        snprintf(path, sizeof path, "%s/%d.img", dir, s);
        unlink(path);
        close(fds[s]);
    }
    rmdir(dir);
    for (int t = 0; t < T; t++) free(W[t].pos);
    printf("ok\n");
    return 0;
}
