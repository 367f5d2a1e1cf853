/* tests/pheap_readers.c MECH - reader processes (TK_PH_READONLY) beside a
 * writer: each sees exactly the state of the last commit made before it
 * opened, page for page, however much the writer commits and applies to
 * the store file meanwhile, and whenever it first touches the pages.
 *
 * Transaction g writes g into every word of NB one-page blocks and into the
 * root's gen: a reader whose blocks do not all hold its root's gen saw a
 * mixture of states.  The log limit is small, so without the readers' hold
 * every commit would be written into the store file at once.  Readers are
 * new programs (exec), each at its own address.  Covered:
 * - readers opened at different states, touching their pages only after
 *   many later commits;
 * - readers opened while commits go on, at random instants;
 * - a reader killed with SIGKILL holds nothing back afterwards;
 * - readers that overlap, one always open: the log does not grow without
 *   bound (what the oldest has seen is applied, and the log starts after
 *   it), and the store file keeps each reader's state;
 * - the writer closing and opening again while a reader holds old records
 *   back (they stay in the log; the writer still sees everything);
 * - in a reader, tk_ph_begin fails with -EROFS and a write stops the
 *   program with SIGSEGV;
 * - bad calls: TK_PH_READONLY with TK_PH_CREATE, a store without its log. */
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <trapkit/pheap.h>
#include <unistd.h>

#include "testutil.h"

enum { NB = 40, WORDS = 4096 / 8 };

struct root {
    int64_t gen;
    uint64_t *blk[NB];
};

static char path[256], logpath[300];
static enum tk_mech mech;

static tk_ph *open_store(unsigned flags, tk_ph_type_t *rt)
{
    tk_ph_config c = {.flags = flags, .mech = mech, .max_size = 1ull << 30, .log_limit = 64 << 10};
    tk_ph *ph;
    CHECK_OK(tk_ph_open(path, &c, &ph));
    size_t offs[NB];
    for (int i = 0; i < NB; i++) offs[i] = offsetof(struct root, blk) + 8 * (size_t)i;
    if (rt) CHECK_OK(tk_ph_type(ph, "root", sizeof(struct root), offs, NB, rt));
    return ph;
}

/* Transaction g. */
static void commit_gen(tk_ph *ph, int64_t g)
{
    CHECK_OK(tk_ph_begin(ph));
    struct root *r = tk_ph_root(ph);
    r->gen = g;
    for (int i = 0; i < NB; i++)
        for (int w = 0; w < WORDS; w++) r->blk[i][w] = (uint64_t)g;
    CHECK_OK(tk_ph_commit(ph));
}

/* Every block of r holds r->gen; else a message and false. */
static bool consistent(const struct root *r, const char *who)
{
    for (int i = 0; i < NB; i++)
        for (int w = 0; w < WORDS; w++)
            if (r->blk[i][w] != (uint64_t)r->gen) {
                fprintf(stderr, "%s: state %lld, but block %d word %d holds %llu\n", who,
                        (long long)r->gen, i, w, (unsigned long long)r->blk[i][w]);
                return false;
            }
    return true;
}

/* The reader program: opens the store read-only, reports its state on wfd,
 * waits for a byte on rfd (-1: does not wait), then reads every block. */
static int reader(int wfd, int rfd)
{
    tk_ph_config c = {.flags = TK_PH_READONLY, .mech = mech, .max_size = 1ull << 30};
    tk_ph *ph;
    int rc = tk_ph_open(path, &c, &ph);
    if (rc) {
        fprintf(stderr, "reader: tk_ph_open: %s\n", tk_last_error());
        return 3;
    }
    struct root *r = tk_ph_root(ph);
    int64_t g = r->gen;
    if (write(wfd, &g, sizeof g) != sizeof g) return 3;
    char go;
    if (rfd >= 0 && read(rfd, &go, 1) != 1) return 3;
    if (!consistent(r, "reader")) return 1;
    if (tk_ph_begin(ph) != -EROFS) {
        fprintf(stderr, "reader: tk_ph_begin did not fail with -EROFS\n");
        return 1;
    }
    if (tk_ph_alloc(ph, TK_PH_BYTES, 8) != NULL) return 1;
    CHECK_OK(tk_ph_close(ph));
    return 0;
}

struct child {
    pid_t pid;
    int from, to; /* its report; its go (-1: none) */
};

static struct child spawn(const char *argv0, bool wait_go, bool write_mode)
{
    int up[2], down[2] = {-1, -1};
    CHECK(pipe(up) == 0);
    if (wait_go) CHECK(pipe(down) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(up[0]);
        if (wait_go) close(down[1]);
        char w[16], r[16], asan[512];
        snprintf(w, sizeof w, "%d", up[1]);
        snprintf(r, sizeof r, "%d", wait_go ? down[0] : -1);
        const char *ao = getenv("ASAN_OPTIONS");
        snprintf(asan, sizeof asan, "%s%sverify_asan_link_order=0", ao ? ao : "", ao ? ":" : "");
        setenv("ASAN_OPTIONS", asan, 1);
        execl("/proc/self/exe", argv0, write_mode ? "--writer-bug" : "--reader", tk_mech_name(mech),
              path, w, r, (char *)NULL);
        _exit(4);
    }
    close(up[1]);
    if (wait_go) close(down[0]);
    return (struct child){pid, up[0], wait_go ? down[1] : -1};
}

static int64_t state_of(struct child c)
{
    int64_t g = -1;
    CHECK(read(c.from, &g, sizeof g) == sizeof g);
    return g;
}

static void finish(struct child c)
{
    if (c.to >= 0) {
        CHECK(write(c.to, "g", 1) == 1);
        close(c.to);
    }
    int ws;
    CHECK(waitpid(c.pid, &ws, 0) == c.pid);
    if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        fprintf(stderr, "a reader failed (status %d)\n", ws);
    CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    close(c.from);
}

/* The log is emptied into the store file once no reader holds it back
 * (the applier looks again every 50 ms; a commit wakes it). */
static void log_drains(tk_ph *ph, int64_t *g)
{
    struct tk_ph_stats st;
    for (int i = 0; i < 600; i++) {
        CHECK_OK(tk_ph_stats(ph, &st));
        if (st.log_bytes < (64 << 10)) return;
        commit_gen(ph, ++*g);
        usleep(20000);
    }
    fprintf(stderr, "the log still holds %llu bytes with no reader open\n",
            (unsigned long long)st.log_bytes);
    CHECK(false);
}

int main(int argc, char **argv)
{
    if (argc == 6 && (!strcmp(argv[1], "--reader") || !strcmp(argv[1], "--writer-bug"))) {
        mech = tk_mech_parse(argv[2]);
        snprintf(path, sizeof path, "%s", argv[3]);
        if (!strcmp(argv[1], "--reader")) return reader(atoi(argv[4]), atoi(argv[5]));
        tk_ph_config c = {.flags = TK_PH_READONLY, .mech = mech};
        tk_ph *ph;
        CHECK_OK(tk_ph_open(path, &c, &ph));
        struct root *r = tk_ph_root(ph);
        r->gen = 7; /* stops the program */
        return 0;
    }
    mech = tk_test_mech(argc, argv, 0);
    char dir[64];
    snprintf(dir, sizeof dir, "/tmp/tk_pheap_readers.%d", (int)getpid());
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/store", dir);
    snprintf(logpath, sizeof logpath, "%s.log", path);

    /* bad calls */
    tk_ph *ph;
    tk_ph_config bad = {.flags = TK_PH_READONLY | TK_PH_CREATE, .mech = mech};
    CHECK(tk_ph_open(path, &bad, &ph) == -EINVAL);
    bad.flags = TK_PH_READONLY;
    CHECK(tk_ph_open(path, &bad, &ph) == -ENOENT);

    tk_ph_type_t rt;
    ph = open_store(TK_PH_CREATE, &rt);
    CHECK_OK(tk_ph_begin(ph));
    struct root *r = tk_ph_alloc(ph, rt, 1);
    CHECK(r != NULL);
    for (int i = 0; i < NB; i++) CHECK((r->blk[i] = tk_ph_alloc(ph, TK_PH_BYTES, 4096)) != NULL);
    CHECK_OK(tk_ph_set_root(ph, r));
    CHECK_OK(tk_ph_commit(ph));
    int64_t g = 0;
    commit_gen(ph, ++g);

    /* a second writer is still refused */
    tk_ph_config w2 = {.mech = mech};
    tk_ph *other;
    CHECK(tk_ph_open(path, &w2, &other) == -EBUSY);

    /* readers at different states, reading after many more commits */
    struct child a = spawn(argv[0], true, false);
    CHECK(state_of(a) == g);
    for (int k = 0; k < 15; k++) commit_gen(ph, ++g);
    struct child b = spawn(argv[0], true, false);
    CHECK(state_of(b) == g);
    struct child killed = spawn(argv[0], true, false);
    CHECK(state_of(killed) == g);
    for (int k = 0; k < 15; k++) commit_gen(ph, ++g);
    struct tk_ph_stats st;
    CHECK_OK(tk_ph_stats(ph, &st));
    CHECK(st.log_bytes > 15 * (NB + 1) * 4096ull); /* held back, past its limit */
    finish(a);
    finish(b);
    kill(killed.pid, SIGKILL);
    waitpid(killed.pid, NULL, 0);
    close(killed.from);
    close(killed.to);
    log_drains(ph, &g);

    /* readers opening at random instants while commits go on */
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    struct child many[8];
    int64_t lo[8], hi[8];
    for (int k = 0; k < 8; k++) {
        for (int j = rand() % 4; j > 0; j--) commit_gen(ph, ++g);
        lo[k] = g;
        many[k] = spawn(argv[0], false, false);
        for (int j = rand() % 4; j > 0; j--) commit_gen(ph, ++g);
        int64_t s = state_of(many[k]);
        hi[k] = g;
        CHECK(s >= lo[k] && s <= hi[k]);
    }
    for (int k = 0; k < 8; k++) finish(many[k]);

    /* overlapping readers, one always open: the log stays bounded */
    struct child prev = spawn(argv[0], true, false);
    CHECK(state_of(prev) == g);
    for (int k = 0; k < 30; k++) {
        struct child next = spawn(argv[0], true, false);
        CHECK(state_of(next) == g);
        commit_gen(ph, ++g);
        commit_gen(ph, ++g);
        finish(prev);
        prev = next;
        usleep(20000);
    }
    /* 60 commits of 41 pages (10 MB) went by; only those after the open
     * reader's state (two) and less than half the log's limit of the rest
     * need stay */
    uint64_t bound = 6 * (NB + 1) * (4096 + 16) + (64 << 10);
    for (int i = 0; i < 250; i++) {
        CHECK_OK(tk_ph_stats(ph, &st));
        if (st.log_bytes <= bound) break;
        usleep(20000);
    }
    if (st.log_bytes > bound)
        fprintf(stderr, "the log holds %llu bytes behind a reader of two commits ago\n",
                (unsigned long long)st.log_bytes);
    CHECK(st.log_bytes <= bound);
    finish(prev);
    log_drains(ph, &g);

    /* the writer closes and opens again while a reader holds records back */
    struct child c = spawn(argv[0], true, false);
    int64_t held = state_of(c);
    CHECK(held == g);
    for (int k = 0; k < 10; k++) commit_gen(ph, ++g);
    CHECK_OK(tk_ph_close(ph));
    ph = open_store(0, &rt);
    r = tk_ph_root(ph);
    CHECK(r->gen == g); /* the writer sees everything */
    CHECK(consistent(r, "the writer after reopening"));
    for (int k = 0; k < 5; k++) commit_gen(ph, ++g);
    CHECK(consistent(tk_ph_root(ph), "the writer"));
    finish(c); /* (it checks it saw held, whole) */
    log_drains(ph, &g);
    CHECK_OK(tk_ph_close(ph));
    ph = open_store(0, &rt);
    CHECK(((struct root *)tk_ph_root(ph))->gen == g);
    CHECK(consistent(tk_ph_root(ph), "the writer after the last reopen"));

    /* in a reader, a write stops the program */
    struct child bug = spawn(argv[0], false, true);
    int ws;
    CHECK(waitpid(bug.pid, &ws, 0) == bug.pid);
    CHECK(WIFSIGNALED(ws) && (WTERMSIG(ws) == SIGSEGV || WTERMSIG(ws) == SIGBUS));
    close(bug.from);
    CHECK_OK(tk_ph_close(ph));

    printf("pheap_readers %s: %lld transactions, 13 readers\n", tk_mech_name(mech), (long long)g);
    unlink(path);
    unlink(logpath);
    rmdir(dir);
    return 0;
}
