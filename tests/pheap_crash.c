/* tests/pheap_crash.c MECH TRIALS - kill -9 at random instants of a
 * write-heavy run of a persistent heap: every reopen must give exactly the
 * state of the last transaction the child reported committed, or of the
 * one after it (its commit was under way: durable or not), and nothing of
 * any other.
 *
 * Transaction n (n = 1, 2, ...) is a pure function of n: it sets the
 * counter to n, writes 8 of the 200 cells (which ones and what from n),
 * allocates a blob of a size and contents given by n at the head of a
 * list and frees the blob 40 behind it, and, one in five, aborts a
 * transaction that scribbles over everything first.  The child reports n
 * on a pipe when tk_ph_commit(n) has returned: that pipe is the record kept
 * outside the store.  The parent replays the same functions to know what
 * the store must hold.  The log limit is small, so the log is applied to
 * the store file often and kills land during applications too.
 *
 * The child is a new program (exec), so its store lies at another address
 * than the parent's: a pointer the store kept as an address instead of an
 * offset would not survive.
 *
 * With a third argument, the path of libtk_powercut.so (tests/powercut.c),
 * each kill is a power cut: the child runs with the shim preloaded, and
 * before the reopen the writes it had not synced are undone at random,
 * sector by sector (tk_powercut), as a disk may lose them. */
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <trapkit/pheap.h>
#include <unistd.h>

#include "powercut.h"
#include "testutil.h"

enum { CELLS = 200, KEEP = 40 };

struct blob {
    struct blob *next;
    int64_t n, len;
    unsigned char *data; /* plain bytes (TK_PH_BYTES) */
};

struct root {
    int64_t n;
    int64_t cell[CELLS];
    struct blob *blobs;
};

static char path[256];
static enum tk_mech mech;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static int cell_of(int64_t n, int j)
{
    return (int)(mix((uint64_t)n * 8 + (uint64_t)j) % CELLS);
}
static size_t blob_len(int64_t n)
{
    return (size_t)(mix((uint64_t)n) % 6000);
}
static unsigned char blob_byte(int64_t n, size_t i)
{
    return (unsigned char)(n * 131 + i * 7);
}

static tk_ph *open_store(unsigned flags, tk_ph_type_t *rt, tk_ph_type_t *bt)
{
    tk_ph_config c = {.flags = flags, .mech = mech, .max_size = 1ull << 30, .log_limit = 256 << 10};
    tk_ph *ph;
    CHECK_OK(tk_ph_open(path, &c, &ph));
    size_t roffs[] = {offsetof(struct root, blobs)},
           boffs[] = {offsetof(struct blob, next), offsetof(struct blob, data)};
    CHECK_OK(tk_ph_type(ph, "root", sizeof(struct root), roffs, 1, rt));
    CHECK_OK(tk_ph_type(ph, "blob", sizeof(struct blob), boffs, 2, bt));
    return ph;
}

/* Transaction n on the store (the child). */
static tk_ph_type_t blob_type;

static void tx(tk_ph *ph, struct root *r, int64_t n)
{
    if (n % 5 == 0) { /* one aborted first */
        CHECK_OK(tk_ph_begin(ph));
        r->n = -1;
        for (int i = 0; i < CELLS; i++) r->cell[i] = -1;
        struct blob *b = tk_ph_alloc(ph, TK_PH_BYTES, 3000);
        CHECK(b != NULL);
        r->blobs = NULL;
        CHECK_OK(tk_ph_abort(ph));
    }
    CHECK_OK(tk_ph_begin(ph));
    r->n = n;
    for (int j = 0; j < 8; j++) r->cell[cell_of(n, j)] = n * 8 + j;
    size_t len = blob_len(n);
    struct blob *b = tk_ph_alloc(ph, blob_type, 1);
    CHECK(b != NULL);
    b->data = len ? tk_ph_alloc(ph, TK_PH_BYTES, len) : NULL;
    CHECK(!len || b->data);
    b->n = n;
    b->len = (int64_t)len;
    for (size_t i = 0; i < len; i++) b->data[i] = blob_byte(n, i);
    b->next = r->blobs;
    r->blobs = b;
    /* the blob KEEP behind goes */
    struct blob *p = b;
    for (int k = 0; k < KEEP - 1 && p; k++) p = p->next;
    if (p && p->next) {
        if (p->next->data) CHECK_OK(tk_ph_free(ph, p->next->data));
        CHECK_OK(tk_ph_free(ph, p->next));
        p->next = NULL;
    }
    CHECK_OK(tk_ph_commit(ph));
}

/* The store must be exactly the state after transaction n. */
static void verify(struct root *r, int64_t n, const int64_t *cell)
{
    CHECK(r->n == n);
    for (int i = 0; i < CELLS; i++) CHECK(r->cell[i] == cell[i]);
    int64_t k = n;
    int count = 0;
    for (struct blob *b = r->blobs; b; b = b->next, k--, count++) {
        CHECK(b->n == k);
        CHECK(b->len == (int64_t)blob_len(k));
        for (size_t i = 0; i < (size_t)b->len; i++) CHECK(b->data[i] == blob_byte(k, i));
    }
    CHECK(count == (n < KEEP ? n : KEEP));
}

/* The child: transactions from the store's counter on, each reported on
 * fd when its commit has returned, until it is killed. */
static void child(int fd)
{
    tk_ph_type_t rt2;
    tk_ph *p = open_store(0, &rt2, &blob_type);
    struct root *rr = tk_ph_root(p);
    for (int64_t m = rr->n + 1;; m++) {
        tx(p, rr, m);
        if (write(fd, &m, sizeof m) != sizeof m) _exit(3);
    }
}

int main(int argc, char **argv)
{
    if (argc == 5 && !strcmp(argv[1], "--child")) { /* exec'd with the power-cut shim */
        mech = tk_mech_parse(argv[2]);
        snprintf(path, sizeof path, "%s", argv[3]);
        child(atoi(argv[4]));
    }
    mech = tk_test_mech(argc, argv, 0);
    int trials = argc > 2 ? atoi(argv[2]) : 50;
    const char *shim = argc > 3 ? argv[3] : NULL; /* power cuts, not only kills */
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tk_pheap_crash.%d", (int)getpid());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/store", dir);
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s.log", path);
    unlink(path);
    unlink(logpath);
    tk_ph_type_t rt, bt;
    tk_ph *ph = open_store(TK_PH_CREATE, &rt, &bt);
    CHECK_OK(tk_ph_begin(ph));
    struct root *r = tk_ph_alloc(ph, rt, 1);
    CHECK(r != NULL);
    CHECK_OK(tk_ph_set_root(ph, r));
    CHECK_OK(tk_ph_commit(ph));
    CHECK_OK(tk_ph_close(ph));

    int64_t cell[CELLS] = {0}, n = 0; /* the state after transaction n */
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    int under_way = 0, replays = 0;
    long cut_sectors = 0;
    for (int t = 0; t < trials; t++) {
        int fds[2];
        CHECK(pipe(fds) == 0);
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            char fdarg[16], asan[512];
            snprintf(fdarg, sizeof fdarg, "%d", fds[1]);
            if (shim) {
                setenv("LD_PRELOAD", shim, 1);
                setenv("TK_POWERCUT_DIR", dir, 1);
            }
            /* (a sanitizer build: its runtime need not come first) */
            const char *ao = getenv("ASAN_OPTIONS");
            snprintf(asan, sizeof asan, "%s%sverify_asan_link_order=0", ao ? ao : "",
                     ao ? ":" : "");
            setenv("ASAN_OPTIONS", asan, 1);
            execl("/proc/self/exe", argv[0], "--child", tk_mech_name(mech), path, fdarg,
                  (char *)NULL);
            _exit(4);
        }
        close(fds[1]);
        struct timespec d = {0, (long)(1 + rand() % 60) * 1000000L};
        nanosleep(&d, NULL);
        kill(pid, SIGKILL);
        int ws;
        CHECK(waitpid(pid, &ws, 0) == pid);
        CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL); /* it never failed by itself */
        int64_t last = n, m;
        while (read(fds[0], &m, sizeof m) == sizeof m) {
            CHECK(m == last + 1);
            last = m;
        }
        close(fds[0]);
        if (shim) { /* the power goes as the process dies: unsynced writes may be lost */
            long a = tk_powercut(path, (unsigned)rand()),
                 b = tk_powercut(logpath, (unsigned)rand());
            cut_sectors += (a > 0 ? a : 0) + (b > 0 ? b : 0); /* (-1: nothing written) */
        }
        /* what the store must hold: last, or last + 1 */
        for (; n < last;) {
            n++;
            for (int j = 0; j < 8; j++) cell[cell_of(n, j)] = n * 8 + j;
        }
        ph = open_store(0, &rt, &bt);
        struct tk_ph_stats st;
        CHECK_OK(tk_ph_stats(ph, &st));
        replays += st.replayed > 0;
        r = tk_ph_root(ph);
        if (r->n == last + 1) { /* its commit was under way when it died */
            n++;
            for (int j = 0; j < 8; j++) cell[cell_of(n, j)] = n * 8 + j;
            under_way++;
        }
        if (r->n != n)
            fprintf(stderr,
                    "trial %d: the store holds transaction %lld; %lld was the last reported\n", t,
                    (long long)r->n, (long long)last);
        verify(r, n, cell);
        CHECK_OK(tk_ph_close(ph));
    }
    printf("pheap_crash %s: %d %s, %lld transactions, %d reopens found a commit under way "
           "durable, %d replayed the log, %ld unsynced sectors lost\n",
           tk_mech_name(mech), trials, shim ? "power cuts" : "kills", (long long)n, under_way,
           replays, cut_sectors);
    unlink(path);
    unlink(logpath);
    rmdir(dir);
    return 0;
}
