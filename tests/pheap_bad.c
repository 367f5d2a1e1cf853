/* tests/pheap_bad.c MECH - a persistent heap given bad files: not a store,
 * an empty file, a damaged superblock, another format version, a truncated
 * store, a torn record at the end of the log (dropped: the last whole
 * commit is there), a damaged record followed by committed ones (refused),
 * a page whose pointer points outside the store (the program stops when it
 * touches it), bad arguments.  Every refusal must leave both files exactly
 * as they were. */
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <trapkit/pheap.h>
#include <unistd.h>

#include "testutil.h"

struct item {
    int64_t v;
    struct item *next;
};

static char path[256], logpath[300];
static enum tk_mech mech;

static int try_open(tk_ph **ph)
{
    tk_ph_config c = {.mech = mech, .max_size = 1ull << 30};
    return tk_ph_open(path, &c, ph);
}

static tk_ph *must_open(unsigned flags)
{
    tk_ph_config c = {.flags = flags, .mech = mech, .max_size = 1ull << 30};
    tk_ph *ph;
    CHECK_OK(tk_ph_open(path, &c, &ph));
    return ph;
}

static tk_ph_type_t item_type(tk_ph *ph)
{
    size_t offs[] = {offsetof(struct item, next)};
    tk_ph_type_t t;
    CHECK_OK(tk_ph_type(ph, "item", sizeof(struct item), offs, 1, &t));
    return t;
}

enum { GROW = 1, EMPTY = 2 };

/* A new store whose root is a list of one item of value 1; then, in a
 * child that dies without closing (the log keeps them), k more
 * transactions, transaction i setting the head's value to 1 + i (how:
 * GROW, the first also adds 3 MiB to the store; EMPTY, each is preceded by
 * one that writes nothing). */
static void make_store_how(int k, int how)
{
    unlink(path);
    unlink(logpath);
    tk_ph *ph = must_open(TK_PH_CREATE);
    tk_ph_type_t t = item_type(ph);
    CHECK_OK(tk_ph_begin(ph));
    struct item *a = tk_ph_alloc(ph, t, 1), *b = tk_ph_alloc(ph, t, 1);
    CHECK(a && b);
    a->v = 1;
    a->next = b;
    b->v = 100;
    CHECK_OK(tk_ph_set_root(ph, a));
    CHECK_OK(tk_ph_commit(ph));
    CHECK_OK(tk_ph_close(ph));
    if (k == 0) return;
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        tk_ph *p = must_open(0);
        struct item *r = tk_ph_root(p);
        for (int i = 1; i <= k; i++) {
            if (how & EMPTY) {
                CHECK_OK(tk_ph_begin(p));
                CHECK_OK(tk_ph_commit(p));
            }
            CHECK_OK(tk_ph_begin(p));
            r->v = 1 + i;
            if ((how & GROW) && i == 1) {
                for (int j = 0; j < 3; j++) CHECK(tk_ph_alloc(p, TK_PH_BYTES, 1 << 20) != NULL);
                CHECK(tk_ph_size(p) > 2u << 20);
            }
            CHECK_OK(tk_ph_commit(p));
        }
        _exit(0); /* no close: the log is not applied */
    }
    int ws;
    CHECK(waitpid(pid, &ws, 0) == pid && WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}

static void make_store(int k)
{
    make_store_how(k, 0);
}

/* where the log's records end: the log is written ahead of them (zeros),
 * so its size says nothing (record headers: magic, then len at byte 32) */
static char *slurp(const char *p, size_t *n);

static size_t records_end(void)
{
    size_t len;
    char *buf = slurp(logpath, &len);
    size_t at = 4096;
    for (;;) {
        uint32_t magic;
        uint64_t n;
        if (at + 64 > len) break;
        memcpy(&magic, buf + at, 4);
        memcpy(&n, buf + at + 32, 8);
        if (magic != 0x4c504b54u || n < 64 || at + n > len) break;
        at += n;
    }
    free(buf);
    return at;
}

static int64_t head_value(void)
{
    tk_ph *ph = must_open(0);
    item_type(ph);
    struct item *r = tk_ph_root(ph);
    CHECK(r && r->next && r->next->v == 100 && r->next->next == NULL);
    int64_t v = r->v;
    CHECK_OK(tk_ph_close(ph));
    return v;
}

static char *slurp(const char *p, size_t *n)
{
    int fd = open(p, O_RDONLY);
    CHECK(fd >= 0);
    struct stat st;
    CHECK(fstat(fd, &st) == 0);
    char *b = malloc((size_t)st.st_size + 1);
    CHECK(read(fd, b, (size_t)st.st_size) == st.st_size);
    close(fd);
    *n = (size_t)st.st_size;
    return b;
}

/* Opening must fail with err and leave both files as they were. */
static void refused(int err, const char *says)
{
    size_t n1, n2, m1, m2;
    char *s1 = slurp(path, &n1), *l1 = slurp(logpath, &m1);
    tk_ph *ph;
    int rc = try_open(&ph);
    if (rc != err) {
        fprintf(stderr, "open gave %d (%s), expected %d\n", rc, tk_last_error(), err);
        exit(1);
    }
    if (says && !strstr(tk_last_error(), says)) {
        fprintf(stderr, "message \"%s\" lacks \"%s\"\n", tk_last_error(), says);
        exit(1);
    }
    char *s2 = slurp(path, &n2), *l2 = slurp(logpath, &m2);
    CHECK(n1 == n2 && !memcmp(s1, s2, n1));
    CHECK(m1 == m2 && !memcmp(l1, l2, m1));
    free(s1), free(s2), free(l1), free(l2);
}

static void patch(const char *p, off_t off, const void *bytes, size_t n)
{
    int fd = open(p, O_WRONLY);
    CHECK(fd >= 0);
    CHECK(pwrite(fd, bytes, n, off) == (ssize_t)n);
    close(fd);
}

static void flip(const char *p, off_t off)
{
    int fd = open(p, O_RDWR);
    CHECK(fd >= 0);
    unsigned char c;
    CHECK(pread(fd, &c, 1, off) == 1);
    c ^= 0x5a;
    CHECK(pwrite(fd, &c, 1, off) == 1);
    close(fd);
}

int main(int argc, char **argv)
{
    mech = tk_test_mech(argc, argv, 0);
    snprintf(path, sizeof path, "/tmp/tk_pheap_bad.%d", (int)getpid());
    snprintf(logpath, sizeof logpath, "%s.log", path);

    /* not a store; empty: refused, and no log made beside it */
    unlink(path);
    unlink(logpath);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    CHECK(fd >= 0 && write(fd, "hello, world\n", 13) == 13);
    close(fd);
    tk_ph *ph0;
    for (int i = 0; i < 2; i++) {
        CHECK_ERR(try_open(&ph0), -EINVAL);
        CHECK(strstr(tk_last_error(), "not a trapkit store") != NULL);
        CHECK(access(logpath, F_OK) != 0);
        CHECK(truncate(path, 0) == 0);
    }

    /* a sound store first */
    make_store(0);
    CHECK(head_value() == 1);

    /* damaged superblock: its size */
    make_store(0);
    flip(path, 16);
    refused(-EUCLEAN, "superblock is damaged");
    /* another version */
    make_store(0);
    uint32_t v2 = 2;
    patch(path, 8, &v2, 4);
    refused(-EPROTONOSUPPORT, "version 2");
    /* truncated */
    make_store(0);
    CHECK(truncate(path, 1 << 20) == 0);
    refused(-EUCLEAN, "truncated");

    /* the log: three commits not applied; open replays them */
    make_store(3);
    size_t loglen;
    loglen = records_end();
    CHECK(loglen > 0);
    CHECK(head_value() == 4);
    /* a torn tail: the third record cut in half is dropped */
    make_store(3);
    loglen = records_end();
    CHECK(truncate(logpath, (off_t)(loglen - loglen / 6)) == 0);
    CHECK(head_value() == 3);
    /* a damaged second record with a sound third after it: refused */
    make_store(3);
    loglen = records_end();
    flip(logpath, (off_t)(loglen / 2));
    refused(-EUCLEAN, "damaged at offset");
    /* damage in the last record alone is a torn tail */
    make_store(3);
    flip(logpath, (off_t)(loglen - 100));
    CHECK(head_value() == 3);
    /* a transaction that grew the store, not yet applied: the replay makes
     * the file as long as the store (it used to be refused as truncated) */
    make_store_how(3, GROW);
    CHECK(head_value() == 4);
    /* transactions that wrote nothing between them: nothing logged for them
     * (an empty record used to read as damage) */
    make_store_how(3, EMPTY);
    CHECK(head_value() == 4);
    /* a log with no header yet (made, and the process killed before it was
     * written), or empty: a new log */
    make_store(0);
    CHECK(truncate(logpath, 0) == 0);
    CHECK(truncate(logpath, 4096) == 0);
    CHECK(head_value() == 1);
    CHECK(truncate(logpath, 0) == 0);
    CHECK(head_value() == 1);

    /* a page whose pointer points outside the store: the program stops
     * with a message when it touches it, and not before */
    make_store(0);
    tk_ph *ph = must_open(0);
    item_type(ph);
    struct item *r = tk_ph_root(ph);
    uint64_t off = (uint64_t)((char *)&r->next - (char *)tk_ph_base(ph));
    CHECK_OK(tk_ph_close(ph));
    uint64_t wild = 1ull << 50;
    patch(path, (off_t)off, &wild, 8);
    int ws;
    for (unsigned lazy = 0; lazy <= TK_PH_LAZY; lazy += TK_PH_LAZY) { /* eager, then lazy */
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            tk_ph *p = must_open(lazy);
            item_type(p);
            if (tk_ph_size(p) == 0) _exit(4);
            struct item *x = tk_ph_root(p); /* reads the superblock: fine */
            (void)x->v;                     /* the damaged page */
            _exit(0);
        }
        CHECK(waitpid(pid, &ws, 0) == pid);
        CHECK(WIFSIGNALED(ws) && (WTERMSIG(ws) == SIGSEGV || WTERMSIG(ws) == SIGBUS));
    }

    /* a damaged descriptor (a slab's slot size 0): the program stops when
     * it reads the page, and does not follow it (eager or lazy) */
    make_store(0);
    ph = must_open(0);
    item_type(ph);
    r = tk_ph_root(ph);
    uint64_t q = (uint64_t)((char *)r - (char *)tk_ph_base(ph)) / 4096;
    CHECK_OK(tk_ph_close(ph));
    uint16_t zero = 0;
    patch(path, (off_t)((q / 512 * 512 + (q % 512) / 64) * 4096 + (q % 64) * 64 + 2), &zero, 2);
    for (unsigned lazy = 0; lazy <= TK_PH_LAZY; lazy += TK_PH_LAZY) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            tk_ph *p = must_open(lazy);
            item_type(p);
            struct item *x = tk_ph_root(p);
            printf("%lld\n", (long long)x->v);
            _exit(0);
        }
        CHECK(waitpid(pid, &ws, 0) == pid);
        CHECK(WIFSIGNALED(ws) && (WTERMSIG(ws) == SIGSEGV || WTERMSIG(ws) == SIGBUS));
    }

    /* bad arguments */
    tk_ph_config c = {.mech = mech, .max_size = 3u << 20};
    CHECK_ERR(tk_ph_open(path, &c, &ph), -EINVAL);
    c.max_size = 1ull << 30;
    c.addr = (void *)0x10001000;
    CHECK_ERR(tk_ph_open(path, &c, &ph), -EINVAL);
    /* lazy swizzling tells offsets from addresses by the store's size: its
     * addresses must lie above it */
    c.addr = (void *)0x20000000;
    c.flags = TK_PH_LAZY;
    CHECK_ERR(tk_ph_open(path, &c, &ph), -EINVAL);
    CHECK(strstr(tk_last_error(), "lazy") != NULL);
    c.addr = NULL;
    c.flags = 0x80;
    CHECK_ERR(tk_ph_open(path, &c, &ph), -EINVAL);
    CHECK(strstr(tk_last_error(), "unknown flags") != NULL);
    c.flags = 0;
    c.mech = TK_MECH_PKEYS;
    CHECK_ERR(tk_ph_open(path, &c, &ph), -EINVAL);
    CHECK_ERR(tk_ph_open(NULL, NULL, &ph), -EINVAL);
    CHECK_ERR(tk_ph_close(NULL), -EINVAL);
    CHECK_ERR(tk_ph_begin(NULL), -EINVAL);

    unlink(path);
    unlink(logpath);
    printf("pheap_bad %s: passed\n", tk_mech_name(mech));
    return 0;
}
