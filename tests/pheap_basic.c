/* tests/pheap_basic.c - the persistent heap on one mechanism (argv[1]),
 * with lazy swizzling if argv[2] is "lazy":
 * objects with pointers survive close and reopen at another address, pages
 * are read on first touch only, abort puts every page back (allocations and
 * growth included), a pointer outside the store is refused at commit, the
 * store grows past its first chunk, large objects, free and reuse, types
 * checked against the store, and a write outside a transaction stops the
 * program. */
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <string.h>
#include <sys/wait.h>
#include <trapkit/pheap.h>
#include <unistd.h>

#include "testutil.h"

struct node {
    int64_t key;
    struct node *next;
    char pad[40];
    struct node *other;
};

static char path[256];
static enum tk_mech mech;
static unsigned lazy; /* TK_PH_LAZY or 0 */

static tk_ph *open_store(unsigned flags, void *addr)
{
    tk_ph_config c = {.flags = flags | lazy, .mech = mech, .addr = addr, .max_size = 1ull << 30};
    tk_ph *ph;
    CHECK_OK(tk_ph_open(path, &c, &ph));
    return ph;
}

static tk_ph_type_t node_type(tk_ph *ph)
{
    size_t offs[] = {offsetof(struct node, next), offsetof(struct node, other)};
    tk_ph_type_t t;
    CHECK_OK(tk_ph_type(ph, "node", sizeof(struct node), offs, 2, &t));
    return t;
}

struct head {
    struct node *list;  /* a list of N nodes, keys 0..N-1 */
    struct node *array; /* a large object: M nodes, each other -> list node */
    int64_t n, m;
    char *bytes; /* 100 KiB of bytes */
};

static tk_ph_type_t head_type(tk_ph *ph)
{
    size_t offs[] = {offsetof(struct head, list), offsetof(struct head, array),
                     offsetof(struct head, bytes)};
    tk_ph_type_t t;
    CHECK_OK(tk_ph_type(ph, "head", sizeof(struct head), offs, 3, &t));
    return t;
}

enum { N = 60000, M = 3000 }; /* 60,000 x 64 bytes: more than one chunk */

static void verify(tk_ph *ph)
{
    struct head *h = tk_ph_root(ph);
    CHECK(h != NULL);
    CHECK((char *)h >= (char *)tk_ph_base(ph) &&
          (char *)h < (char *)tk_ph_base(ph) + tk_ph_size(ph));
    CHECK(h->n == N && h->m == M);
    int64_t k = N - 1;
    struct node **index = calloc(N, sizeof *index);
    for (struct node *p = h->list; p; p = p->next, k--) {
        CHECK(p->key == k);
        index[k] = p;
    }
    CHECK(k == -1);
    for (int64_t i = 0; i < M; i++) {
        CHECK(h->array[i].key == 1000000 + i);
        CHECK(h->array[i].other == index[(i * 7) % N]);
        CHECK(h->array[i].next == (i + 1 < M ? &h->array[i + 1] : NULL));
    }
    for (int i = 0; i < 100 * 1024; i++) CHECK(h->bytes[i] == (char)(i * 31));
    free(index);
}

static void build(tk_ph *ph)
{
    tk_ph_type_t nt = node_type(ph), ht = head_type(ph);
    CHECK_OK(tk_ph_begin(ph));
    struct head *h = tk_ph_alloc(ph, ht, 1);
    CHECK(h != NULL);
    struct node **index = calloc(N, sizeof *index);
    for (int64_t i = 0; i < N; i++) {
        struct node *p = tk_ph_alloc(ph, nt, 1);
        CHECK(p != NULL);
        p->key = i;
        p->next = h->list;
        h->list = p;
        index[i] = p;
    }
    h->array = tk_ph_alloc(ph, nt, M);
    CHECK(h->array != NULL);
    for (int64_t i = 0; i < M; i++) {
        h->array[i].key = 1000000 + i;
        h->array[i].other = index[(i * 7) % N];
        h->array[i].next = i + 1 < M ? &h->array[i + 1] : NULL;
    }
    h->bytes = tk_ph_alloc(ph, TK_PH_BYTES, 100 * 1024);
    CHECK(h->bytes != NULL);
    for (int i = 0; i < 100 * 1024; i++) h->bytes[i] = (char)(i * 31);
    h->n = N;
    h->m = M;
    CHECK_OK(tk_ph_set_root(ph, h));
    CHECK_OK(tk_ph_commit(ph));
    free(index);
}

int main(int argc, char **argv)
{
    mech = tk_test_mech(argc, argv, 0);
    lazy = argc > 2 && strcmp(argv[2], "lazy") == 0 ? TK_PH_LAZY : 0;
    snprintf(path, sizeof path, "/tmp/tk_pheap_basic.%d", (int)getpid());
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s.log", path);
    unlink(path);
    unlink(logpath);

    /* no store, no TK_PH_CREATE */
    tk_ph *ph;
    tk_ph_config c0 = {.mech = mech, .max_size = 1ull << 30};
    CHECK_ERR(tk_ph_open(path, &c0, &ph), -ENOENT);

    ph = open_store(TK_PH_CREATE, NULL);
    struct tk_ph_stats st;
    CHECK_OK(tk_ph_stats(ph, &st));
    CHECK(st.mech == mech);
    CHECK(tk_ph_root(ph) == NULL);
    /* a second open of the same store */
    tk_ph *other;
    CHECK_ERR(tk_ph_open(path, &c0, &other), -EBUSY);
    build(ph);
    verify(ph);
    CHECK(tk_ph_size(ph) > 2u << 20); /* grew past its first chunk */
    CHECK_OK(tk_ph_close(ph));

    /* reopened elsewhere: everything there, pointers at the new address */
    ph = open_store(0, (void *)(uintptr_t)(0x7e0000000000ull));
    CHECK(tk_ph_base(ph) == (void *)(uintptr_t)0x7e0000000000ull);
    CHECK_OK(tk_ph_stats(ph, &st));
    CHECK(st.pages_read == 0); /* nothing read before the first touch */
    struct head *h = tk_ph_root(ph);
    CHECK(h->n == N);
    CHECK_OK(tk_ph_stats(ph, &st));
    CHECK(st.pages_read > 0 && st.pages_read < 64);
    verify(ph);
    CHECK_OK(tk_ph_stats(ph, &st));
    CHECK(st.pointers_swizzled >= N + 2 * M);

    /* types: the same layout gives the same number; another is refused */
    tk_ph_type_t nt = node_type(ph);
    CHECK(nt >= 1);
    size_t bad[] = {0};
    tk_ph_type_t t2;
    CHECK_ERR(tk_ph_type(ph, "node", sizeof(struct node), bad, 1, &t2), -EINVAL);
    CHECK_ERR(tk_ph_type(ph, "odd", 24, (size_t[]){4}, 1, &t2), -EINVAL);

    /* abort: writes, allocations, growth, a new root, all undone */
    uint64_t size0 = tk_ph_size(ph);
    CHECK_OK(tk_ph_begin(ph));
    CHECK_ERR(tk_ph_begin(ph), -EBUSY);
    h->list->key = -5;
    h->array[17].other = NULL;
    for (int i = 0; i < 40000; i++) CHECK(tk_ph_alloc(ph, nt, 1) != NULL);
    CHECK(tk_ph_alloc(ph, TK_PH_BYTES, 1500000) != NULL);
    CHECK(tk_ph_size(ph) > size0);
    CHECK_OK(tk_ph_set_root(ph, NULL));
    CHECK_OK(tk_ph_abort(ph));
    CHECK(tk_ph_size(ph) == size0);
    CHECK(tk_ph_root(ph) == h);
    verify(ph);

    /* a pointer outside the store: refused, the transaction stays open */
    static struct node outside;
    CHECK_OK(tk_ph_begin(ph));
    struct node *was = h->array[5].other;
    h->array[5].other = &outside;
    CHECK_ERR(tk_ph_commit(ph), -EINVAL);
    CHECK(strstr(tk_last_error(), "outside the store") != NULL);
    h->array[5].other = h->list;
    CHECK_OK(tk_ph_commit(ph));
    CHECK(h->array[5].other == h->list);
    CHECK_OK(tk_ph_begin(ph));
    h->array[5].other = was;
    CHECK_OK(tk_ph_commit(ph));
    /* bad calls */
    CHECK_ERR(tk_ph_commit(ph), -EINVAL);
    CHECK_ERR(tk_ph_abort(ph), -EINVAL);
    CHECK(tk_ph_alloc(ph, nt, 1) == NULL);
    CHECK_OK(tk_ph_begin(ph));
    CHECK(tk_ph_alloc(ph, 60, 1) == NULL);
    CHECK_ERR(tk_ph_free(ph, &outside), -EINVAL);
    CHECK_ERR(tk_ph_free(ph, (char *)h->list + 8), -EINVAL);
    CHECK_ERR(tk_ph_set_root(ph, &outside), -EINVAL);
    /* free and reuse */
    struct node *second = h->list->next;
    h->list->next = second->next;
    CHECK_OK(tk_ph_free(ph, second));
    CHECK_ERR(tk_ph_free(ph, second), -EINVAL);
    struct node *again = tk_ph_alloc(ph, nt, 1);
    CHECK(again == second); /* its slot, zeroed */
    CHECK(again->key == 0 && again->next == NULL);
    again->key = N - 2;
    again->next = h->list->next;
    h->list->next = again;
    CHECK_OK(tk_ph_commit(ph));
    verify(ph);
    CHECK_OK(tk_ph_close(ph));

    /* a write outside a transaction stops the program */
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        tk_ph *p2 = open_store(0, NULL);
        struct head *h2 = tk_ph_root(p2);
        h2->n = 7; /* dies here */
        _exit(0);
    }
    int ws;
    CHECK(waitpid(pid, &ws, 0) == pid);
    CHECK(WIFSIGNALED(ws) && (WTERMSIG(ws) == SIGSEGV || WTERMSIG(ws) == SIGBUS));

    /* nothing of it reached the store; the reservation must hold it */
    tk_ph_config small = {.mech = mech, .max_size = 2u << 20};
    CHECK_ERR(tk_ph_open(path, &small, &ph), -EFBIG);
    ph = open_store(0, NULL);
    verify(ph);

    /* a child of fork(): it may exec; touching the store stops it (even a
     * page the parent has open in a transaction: its write must not reach
     * the parent); tk_ph_begin fails with -ECHILD; tk_ph_close releases
     * its copy and leaves the files alone */
    struct head *hp = tk_ph_root(ph);
    int64_t n_before = hp->n;
    CHECK_OK(tk_ph_begin(ph)); /* (a commit first: the applier thread waits in the parent) */
    hp->n = n_before;
    CHECK_OK(tk_ph_commit(ph));
    CHECK_OK(tk_ph_begin(ph));
    hp->n = n_before + 1; /* the root's page open in the transaction */
    for (int c = 0; c < 3; c++) {
        pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            if (c == 0) {
                execl("/bin/true", "true", (char *)NULL);
                _exit(3);
            }
            if (c == 1) {
                hp->n = 12345; /* dies here */
                _exit(0);
            }
            struct tk_ph_stats cst;
            if (tk_ph_begin(ph) != -ECHILD || tk_ph_commit(ph) != -ECHILD ||
                tk_ph_abort(ph) != -ECHILD || tk_ph_stats(ph, &cst) != 0)
                _exit(4);
            alarm(30); /* (a hang fails) */
            if (tk_ph_close(ph) != 0) _exit(5);
            _exit(0);
        }
        CHECK(waitpid(pid, &ws, 0) == pid);
        if (c == 1)
            CHECK(WIFSIGNALED(ws) && (WTERMSIG(ws) == SIGSEGV || WTERMSIG(ws) == SIGBUS));
        else
            CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
    }
    CHECK(hp->n == n_before + 1); /* the child's write did not reach it */
    CHECK_OK(tk_ph_commit(ph));
    CHECK_OK(tk_ph_close(ph));
    ph = open_store(0, NULL);
    CHECK(((struct head *)tk_ph_root(ph))->n == n_before + 1);
    CHECK_OK(tk_ph_begin(ph));
    ((struct head *)tk_ph_root(ph))->n = n_before;
    CHECK_OK(tk_ph_commit(ph));
    verify(ph);
    CHECK_OK(tk_ph_close(ph));
    unlink(path);
    unlink(logpath);
    printf("pheap_basic %s%s: passed\n", tk_mech_name(mech), lazy ? " lazy" : "");
    return 0;
}
