/* tests/pheap_lazy.c - lazy swizzling (TK_PH_LAZY) on one mechanism
 * (argv[1]): a pointer is swizzled when it is first loaded and never seen
 * as an offset; a page opens once its last pointer is swizzled; the forms
 * of load the emulator performs (MOV, MOVZX, CMP and ADD with memory, an
 * SSE load, LODS) and those it leaves to whole-page swizzling (REP MOVS,
 * glibc's memcpy) all read swizzled pointers; a page read often goes
 * eager; a write swizzles its page whole; threads traverse at once; and a store written lazily
 * reads back the same eagerly. */
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>
#include <time.h>
#include <stddef.h>
#include <string.h>
#include <trapkit/pheap.h>
#include <unistd.h>

#include "testutil.h"

struct lnode {
    int64_t key;
    struct lnode *next; /* the next node of the array */
    struct lnode *peer; /* a node of another page */
    uint8_t small;
    char pad[39];
};

enum { PER_PAGE = 4096 / sizeof(struct lnode), PAGES = 200, COUNT = PER_PAGE * PAGES };
_Static_assert(sizeof(struct lnode) == 64, "a page holds whole nodes");

struct lroot {
    struct lnode *nodes; /* COUNT nodes, one large object */
};

static char path[256];
static enum tk_mech mech;

static tk_ph *open_store(unsigned flags)
{
    tk_ph_config c = {.flags = flags, .mech = mech, .max_size = 1ull << 30};
    tk_ph *ph;
    CHECK_OK(tk_ph_open(path, &c, &ph));
    size_t no[] = {offsetof(struct lnode, next), offsetof(struct lnode, peer)};
    tk_ph_type_t t;
    CHECK_OK(tk_ph_type(ph, "lnode", sizeof(struct lnode), no, 2, &t));
    size_t ro[] = {offsetof(struct lroot, nodes)};
    CHECK_OK(tk_ph_type(ph, "lroot", sizeof(struct lroot), ro, 1, &t));
    return ph;
}

static size_t peer_of(size_t i)
{
    return (i * 7919 + 13) % COUNT;
}

static void build(void)
{
    tk_ph *ph = open_store(TK_PH_CREATE);
    size_t no[] = {offsetof(struct lnode, next), offsetof(struct lnode, peer)};
    tk_ph_type_t nt, rt;
    CHECK_OK(tk_ph_type(ph, "lnode", sizeof(struct lnode), no, 2, &nt));
    size_t ro[] = {offsetof(struct lroot, nodes)};
    CHECK_OK(tk_ph_type(ph, "lroot", sizeof(struct lroot), ro, 1, &rt));
    CHECK_OK(tk_ph_begin(ph));
    struct lroot *r = tk_ph_alloc(ph, rt, 1);
    struct lnode *a = tk_ph_alloc(ph, nt, COUNT);
    CHECK(r && a);
    for (size_t i = 0; i < COUNT; i++) {
        a[i].key = (int64_t)i * 3;
        a[i].next = i + 1 < COUNT ? &a[i + 1] : NULL;
        a[i].peer = &a[peer_of(i)];
        a[i].small = (uint8_t)(i * 5);
    }
    r->nodes = a;
    CHECK_OK(tk_ph_set_root(ph, r));
    CHECK_OK(tk_ph_commit(ph));
    CHECK_OK(tk_ph_close(ph));
}

static struct tk_ph_stats stats(tk_ph *ph)
{
    struct tk_ph_stats st;
    CHECK_OK(tk_ph_stats(ph, &st));
    return st;
}

/* the whole array through next and peer, every pointer checked against
 * the address computed from the array's base */
static void traverse(struct lnode *a)
{
    size_t i = 0;
    for (struct lnode *p = a; p; p = p->next, i++) {
        CHECK(p == &a[i]);
        CHECK(p->key == (int64_t)i * 3 && p->small == (uint8_t)(i * 5));
        CHECK(p->peer == &a[peer_of(i)]);
        CHECK(p->peer->key == (int64_t)peer_of(i) * 3);
    }
    CHECK(i == COUNT);
}

/* a system call given store memory: EFAULT until tk_ph_touch opens it
 * (pages 90-99 of the array, untouched so far) */
static void syscalls(tk_ph *ph, struct lnode *a)
{
    int p[2];
    CHECK(pipe(p) == 0);
    struct lnode *x = &a[90 * PER_PAGE + 3], got;
    CHECK(write(p[1], x, sizeof *x) == -1 && errno == EFAULT);
    CHECK_OK(tk_ph_touch(ph, x, sizeof *x, 0));
    CHECK(write(p[1], x, sizeof *x) == (ssize_t)sizeof *x);
    CHECK(read(p[0], &got, sizeof got) == (ssize_t)sizeof got);
    CHECK(got.key == x->key && got.next == &a[90 * PER_PAGE + 4]); /* (swizzled: an address) */
    /* into the store: in a transaction, once touched for writing */
    struct lnode *y = &a[92 * PER_PAGE + 5];
    int64_t was = y->key;
    CHECK_ERR(tk_ph_touch(ph, y, 8, 1), -EINVAL); /* (no transaction) */
    CHECK_OK(tk_ph_begin(ph));
    CHECK(write(p[1], &was, 8) == 8);
    /* (on uffd-thread a page read and opened is write-protected by
     * userfaultfd, whose thread catches the kernel's write as a first write) */
    ssize_t r = read(p[0], &y->key, 8);
    CHECK(r == -1 ? errno == EFAULT : mech == TK_MECH_UFFD_THREAD && r == 8);
    CHECK_OK(tk_ph_touch(ph, &y->key, 8, 1));
    close(p[0]); /* (whether the failed read took the bytes is the kernel's choice) */
    close(p[1]);
    CHECK(pipe(p) == 0);
    int64_t v = 4242;
    CHECK(write(p[1], &v, 8) == 8);
    CHECK(read(p[0], &y->key, 8) == 8);
    CHECK(y->key == 4242);
    CHECK_OK(tk_ph_abort(ph)); /* (a page opened by tk_ph_touch is put back too) */
    CHECK(y->key == was);
    /* a range reaching outside the store */
    CHECK_ERR(tk_ph_touch(ph, (char *)tk_ph_base(ph) + tk_ph_size(ph) - 8, 16, 0), -EINVAL);
    CHECK_ERR(tk_ph_touch(ph, &got, 8, 0), -EINVAL);
    CHECK_OK(tk_ph_touch(ph, x, 0, 0));
    close(p[0]);
    close(p[1]);
}

#ifndef __SANITIZE_THREAD__ /* (not run under TSan: see main) */
/* A program's signal handler reading the store while the code it
 * interrupted is reading the same pages in (a timer every 50 µs; the
 * handler reads the node the code is at, the store fresh): each must
 * finish (a handler that waited for the read it interrupted would wait
 * for ever). */
static struct lnode *sig_a;
static volatile long sig_reads, sig_bad;
static volatile size_t sig_at;

static void on_timer(int sig)
{
    (void)sig;
    size_t j = sig_at;
    if (sig_a[j].next != (j + 1 < COUNT ? &sig_a[j + 1] : NULL) ||
        (j != 5 && sig_a[j].peer != &sig_a[peer_of(j)])) /* (5's was changed above) */
        sig_bad++;
    sig_reads++;
}

static void signal_reads(unsigned flags)
{
    for (int round = 0; round < 5; round++) { /* (each its first touches) */
        tk_ph *ph = open_store(flags);
        sig_a = ((struct lroot *)tk_ph_root(ph))->nodes;
        struct sigaction sa = {.sa_handler = on_timer};
        sigemptyset(&sa.sa_mask);
        CHECK(sigaction(SIGALRM, &sa, NULL) == 0);
        struct itimerval it = {{0, 50}, {0, 50}};
        CHECK(setitimer(ITIMER_REAL, &it, NULL) == 0);
        struct timespec t0, t;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        long main_bad = 0;
        do {
            for (size_t i = 0; i < COUNT; i += 7) {
                sig_at = i;
                main_bad += sig_a[i].key != (int64_t)i * 3;
            }
            clock_gettime(CLOCK_MONOTONIC, &t);
        } while ((t.tv_sec - t0.tv_sec) * 1000000000 + (t.tv_nsec - t0.tv_nsec) < 200000000);
        struct itimerval off = {{0, 0}, {0, 0}};
        CHECK(setitimer(ITIMER_REAL, &off, NULL) == 0);
        signal(SIGALRM, SIG_DFL);
        CHECK(main_bad == 0 && sig_bad == 0);
        CHECK(sig_reads > 0);
        CHECK_OK(tk_ph_close(ph));
    }
}
#endif

static void *traverse_thread(void *a)
{
    traverse(a);
    return NULL;
}

int main(int argc, char **argv)
{
    mech = tk_test_mech(argc, argv, 0);
    snprintf(path, sizeof path, "/tmp/tk_pheap_lazy.%d", (int)getpid());
    char logpath[300];
    snprintf(logpath, sizeof logpath, "%s.log", path);
    unlink(path);
    unlink(logpath);
    build();

    tk_ph *ph = open_store(TK_PH_LAZY);
    struct lroot *r = tk_ph_root(ph);
    struct lnode *a = r->nodes; /* (the root's page: emulated, or eager) */
    CHECK((char *)a > (char *)tk_ph_base(ph) &&
          (char *)a < (char *)tk_ph_base(ph) + tk_ph_size(ph));
    struct tk_ph_stats s0 = stats(ph);

    /* one pointer used on each of 50 pages: 50 swizzled, not 50 pages' */
    for (size_t pg = 10; pg < 60; pg++) {
        size_t i = pg * PER_PAGE + 3;
        CHECK(a[i].next == &a[i + 1]);
    }
    struct tk_ph_stats s1 = stats(ph);
    CHECK(s1.pointers_swizzled - s0.pointers_swizzled == 50);
    CHECK(s1.loads_emulated - s0.loads_emulated >= 50);
    /* a non-pointer field of those pages: read, nothing swizzled */
    for (size_t pg = 10; pg < 60; pg++)
        CHECK(a[pg * PER_PAGE + 5].key == (int64_t)(pg * PER_PAGE + 5) * 3);
    struct tk_ph_stats s2 = stats(ph);
    CHECK(s2.pointers_swizzled == s1.pointers_swizzled);
    /* the same pointer again: already swizzled, the same address */
    CHECK(a[10 * PER_PAGE + 3].next == &a[10 * PER_PAGE + 4]);
    CHECK(stats(ph).pointers_swizzled == s2.pointers_swizzled);

    /* the forms of load, each on a page of its own */
    size_t i = 70 * PER_PAGE + 1;
    uint32_t z;
    __asm__ volatile("movzbl %1, %0" : "=r"(z) : "m"(a[i].small));
    CHECK(z == (uint8_t)(i * 5));
    i = 71 * PER_PAGE + 2;
    struct lnode *want = &a[i + 1];
    uint8_t eq;
    __asm__ volatile("cmpq %1, %2\n\tsete %0" : "=r"(eq) : "r"(want), "m"(a[i].next) : "cc");
    CHECK(eq == 1); /* a pointer compared in memory: swizzled before the compare */
    i = 72 * PER_PAGE + 3;
    int64_t sum = 5;
    __asm__ volatile("addq %1, %0" : "+r"(sum) : "m"(a[i].key) : "cc");
    CHECK(sum == 5 + (int64_t)i * 3);
    i = 73 * PER_PAGE + 4;
    uint64_t pair[2];
    __asm__ volatile("movdqu %1, %%xmm0\n\tmovdqu %%xmm0, %0"
                     : "=m"(pair)
                     : "m"(*(const char(*)[16]) & a[i].key)
                     : "xmm0");
    CHECK(pair[0] == (uint64_t)i * 3 && pair[1] == (uint64_t)(uintptr_t)&a[i + 1]);
    i = 74 * PER_PAGE + 5;
    uint64_t got;
    const void *src = &a[i].peer;
    __asm__ volatile("lodsq" : "=a"(got), "+S"(src) : : "memory");
    CHECK(got == (uint64_t)(uintptr_t)&a[peer_of(i)]);
    i = 75 * PER_PAGE + 6;
    struct lnode copy;
    void *dst = &copy;
    src = &a[i];
    size_t words = sizeof copy / 8;
    __asm__ volatile("rep movsq" : "+D"(dst), "+S"(src), "+c"(words) : : "memory");
    CHECK(copy.next == &a[i + 1] && copy.peer == &a[peer_of(i)] && copy.key == (int64_t)i * 3);
    i = 76 * PER_PAGE + 7;
    memcpy(&copy, &a[i], sizeof copy);
    CHECK(copy.next == &a[i + 1] && copy.peer == &a[peer_of(i)]);
    /* a page whose every pointer is used opens: then no load of it is
     * emulated (page 77's next and peer words, all of them) */
    for (size_t k = 77 * PER_PAGE; k < 78 * PER_PAGE; k++)
        CHECK(a[k].next == &a[k + 1] && a[k].peer == &a[peer_of(k)]);
    struct tk_ph_stats s3 = stats(ph);
    int64_t keys = 0;
    for (size_t k = 77 * PER_PAGE; k < 78 * PER_PAGE; k++) keys += a[k].key;
    CHECK(keys > 0);
    CHECK(stats(ph).loads_emulated == s3.loads_emulated);

    /* a page read often without using its pointers goes eager: the 16th
     * load that swizzles nothing swizzles the rest, and the page opens */
    uint64_t sw = stats(ph).pointers_swizzled;
    for (size_t k = 78 * PER_PAGE; k < 78 * PER_PAGE + 15; k++) CHECK(a[k].key == (int64_t)k * 3);
    CHECK(stats(ph).pointers_swizzled == sw);
    CHECK(a[78 * PER_PAGE + 20].small == (uint8_t)((78 * PER_PAGE + 20) * 5));
    CHECK(stats(ph).pointers_swizzled - sw == 2 * PER_PAGE);
    uint64_t em = stats(ph).loads_emulated;
    for (size_t k = 78 * PER_PAGE; k < 79 * PER_PAGE; k++) keys += a[k].key;
    CHECK(stats(ph).loads_emulated == em && keys > 0);

    /* a write to a page with pointers left: the page is swizzled whole */
    i = 80 * PER_PAGE + 1;
    uint64_t before = stats(ph).pointers_swizzled;
    CHECK_OK(tk_ph_begin(ph));
    a[i].key = -1;
    CHECK(stats(ph).pointers_swizzled - before == 2 * PER_PAGE);
    CHECK(a[i].next == &a[i + 1]);
    a[i].key = (int64_t)i * 3;
    a[i + 2].small = (uint8_t)((i + 2) * 5); /* (unchanged values, written) */
    CHECK_OK(tk_ph_commit(ph));

    syscalls(ph, a);

    /* four threads over the whole array at once, from pages half used */
    pthread_t th[4];
    for (int k = 0; k < 4; k++) CHECK(pthread_create(&th[k], NULL, traverse_thread, a) == 0);
    for (int k = 0; k < 4; k++) CHECK(pthread_join(th[k], NULL) == 0);
    traverse(a);
    struct tk_ph_stats s4 = stats(ph);
    CHECK(s4.pointers_swizzled - s0.pointers_swizzled ==
          2 * COUNT - 1); /* (the last next is NULL) */
    CHECK_OK(tk_ph_close(ph));

    /* written lazily, read eagerly (system calls too); and lazily again,
     * commit and all */
    ph = open_store(0);
    syscalls(ph, ((struct lroot *)tk_ph_root(ph))->nodes);
    traverse(((struct lroot *)tk_ph_root(ph))->nodes);
    CHECK(stats(ph).loads_emulated == 0);
    CHECK_OK(tk_ph_close(ph));
    ph = open_store(TK_PH_LAZY);
    a = ((struct lroot *)tk_ph_root(ph))->nodes;
    CHECK_OK(tk_ph_begin(ph));
    a[5].peer = &a[6];
    CHECK_OK(tk_ph_commit(ph));
    CHECK_OK(tk_ph_close(ph));
    ph = open_store(0);
    a = ((struct lroot *)tk_ph_root(ph))->nodes;
    CHECK(a[5].peer == &a[6] && a[4].peer == &a[peer_of(4)]);
    CHECK_OK(tk_ph_close(ph));

#ifndef __SANITIZE_THREAD__ /* (TSan runs handlers with every signal blocked: a fault in one       \
                               kills) */
    signal_reads(0);
    signal_reads(TK_PH_LAZY);
#endif

    unlink(path);
    unlink(logpath);
    printf("pheap_lazy %s: passed\n", tk_mech_name(mech));
    return 0;
}
