/* tests/gc_basic.c - the collector (src/apps/gc) keeps what is reachable
 * and reclaims what is not.
 *
 * Reachability is observed through weak links (cleared when their object
 * is found unreachable) and finalizers, so each check is of the collector's
 * own verdict.  Conservative scanning may keep a stale copy of a pointer
 * alive (a dead stack slot, a register), so checks of reclamation allow a
 * few survivors among many objects; checks of survival allow none.
 * Roots checked: the stack, a static variable, a range added with
 * tk_gc_add_roots, another thread's stack, another thread's register (the
 * pointer in r15 alone while the thread spins), interior pointers, chains
 * through the heap; not roots: malloc'd memory, atomic objects.  Then
 * finalizers (once, in order), weak links held in reclaimed objects, large
 * objects and the heap's growth under churn, realloc, and bad input to
 * tk_gc_free (refused, nothing touched).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <trapkit/gc.h>
#include "testutil.h"

enum { N = 1000 };

struct node {
    struct node *next;
    uint64_t value;
};

/* weak links, cleared when their object is reclaimed: in malloc'd memory,
 * which the collector does not scan (a link it scanned would keep its
 * object) */
static void **links;

static size_t cleared(void)
{
    size_t n = 0;
    for (int i = 0; i < N; i++) n += links[i] == NULL;
    return n;
}

/* Allocates N objects, each weakly linked from links[], keeping none
 * (unless keep, where they are stored). */
__attribute__((noinline)) static void make_weak(void **keep, bool atomic)
{
    for (int i = 0; i < N; i++) {
        void *p = atomic ? tk_gc_malloc_atomic(32) : tk_gc_malloc(32);
        CHECK(p);
        links[i] = p;
        CHECK_OK(tk_gc_register_weak(&links[i], p));
        if (keep) keep[i] = p;
    }
}

/* Clears the stack below the caller's frame of old pointers. */
__attribute__((noinline)) static void scrub(void)
{
    volatile char buf[16384]; /* volatile stores: the compiler keeps them and the call */
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = 0;
    __asm__ volatile("" : : "r"(buf) : "memory");
}

static void collect(void)
{
    scrub();
    tk_gc_collect();
}

static void *kept_static[N];

static void test_unreachable_and_static(void)
{
    make_weak(NULL, false);
    collect();
    printf("unreachable: %zu of %d cleared\n", cleared(), N);
    CHECK(cleared() >= N - 10);

    make_weak(kept_static, false);
    collect();
    collect();
    CHECK(cleared() == 0);
    for (int i = 0; i < N; i++) CHECK(links[i] == kept_static[i]);
    memset(kept_static, 0, sizeof kept_static);
    collect();
    CHECK(cleared() >= N - 10);
}

static void test_malloc_not_root_and_added_roots(void)
{
    void **heap = malloc(N * sizeof *heap);
    CHECK(heap);
    make_weak(heap, false);
    collect();
    printf("held by malloc'd memory: %zu of %d cleared\n", cleared(), N);
    CHECK(cleared() >= N - 10);

    make_weak(heap, false);
    CHECK_OK(tk_gc_add_roots(heap, heap + N));
    collect();
    CHECK(cleared() == 0);
    CHECK_OK(tk_gc_remove_roots(heap, heap + N));
    CHECK_ERR(tk_gc_remove_roots(heap, heap + N), -EINVAL);
    collect();
    CHECK(cleared() >= N - 10);
    free(heap);
}

static void test_atomic_not_scanned(void)
{
    /* pointers stored in an atomic object keep nothing */
    void **holder = tk_gc_malloc_atomic(N * sizeof(void *));
    CHECK(holder);
    make_weak(holder, false);
    collect();
    CHECK(cleared() >= N - 10);
    /* the same in a scanned object keeps them */
    void **scanned = tk_gc_malloc(N * sizeof(void *));
    CHECK(scanned);
    make_weak(scanned, false);
    collect();
    CHECK(cleared() == 0);
    /* and an interior pointer to the holder keeps the holder */
    void **volatile inside = scanned + N / 2;
    scanned = NULL;
    collect();
    CHECK(cleared() == 0);
    CHECK(tk_gc_base((void *)inside) == (void *)(inside - N / 2));
    inside = NULL;
}

static void test_chain(void)
{
    static struct node *head;
    head = NULL;
    for (int i = 0; i < 20000; i++) {
        struct node *n = tk_gc_malloc(sizeof *n);
        CHECK(n);
        n->value = (uint64_t)i * 2654435761u;
        n->next = head;
        head = n;
        if (i % 7 == 0) CHECK(tk_gc_malloc(48)); /* garbage between */
    }
    for (int round = 0; round < 3; round++) {
        collect();
        for (int k = 0; k < 50000; k++) CHECK(tk_gc_malloc(64)); /* churn */
    }
    int i = 19999;
    for (struct node *n = head; n; n = n->next, i--) CHECK(n->value == (uint64_t)i * 2654435761u);
    CHECK(i == -1);
    head = NULL;
}

/* ---- parallel marking ---- */
struct tnode {
    struct tnode *left, *right;
    uint64_t value;
};

static struct tnode *tree_build(int depth, uint64_t v)
{
    struct tnode *n = tk_gc_malloc(sizeof *n);
    CHECK(n);
    n->value = v;
    if (depth > 0) {
        n->left = tree_build(depth - 1, 2 * v);
        n->right = tree_build(depth - 1, 2 * v + 1);
    }
    return n;
}

static uint64_t tree_check(const struct tnode *n, int depth, uint64_t v)
{
    CHECK(n && n->value == v);
    if (depth == 0) return 1;
    return 1 + tree_check(n->left, depth - 1, 2 * v) + tree_check(n->right, depth - 1, 2 * v + 1);
}

/* Two markers: a tree and a large array (marked a page at a time, shared
 * between them) survive every collection whole, the weakly linked objects
 * only the array holds too, and garbage is still reclaimed; the helper
 * joins the marking (seen in the statistics at least once). */
static void test_parallel_marking(void)
{
    CHECK_ERR(tk_gc_set_markers(0), -EINVAL);
    CHECK_ERR(tk_gc_set_markers(9), -EINVAL);
    unsigned before = tk_gc_markers();
    CHECK(before >= 1 && before <= 8);
    CHECK_OK(tk_gc_set_markers(2));
    CHECK(tk_gc_markers() == 2);
    enum { DEPTH = 16, SLOTS = 1 << 18 };
    static struct tnode *tree;
    static void **array;
    tree = tree_build(DEPTH, 1);
    array = tk_gc_malloc(SLOTS * sizeof(void *)); /* 2 MiB: a run of pages */
    CHECK(array);
    make_weak(NULL, false);
    for (int i = 0; i < N; i++) array[(size_t)i * (SLOTS / N)] = links[i];
    bool shared = false;
    for (int attempt = 0; attempt < 100 && !(shared && attempt >= 5); attempt++) {
        make_weak(NULL, false); /* garbage: only weak links point to it */
        for (int i = 0; i < N; i++) array[(size_t)i * (SLOTS / N)] = NULL;
        collect();
        CHECK(cleared() >= N - 10);
        make_weak(NULL, false);
        for (int i = 0; i < N; i++) array[(size_t)i * (SLOTS / N)] = links[i];
        collect();
        CHECK(cleared() == 0);
        CHECK(tree_check(tree, DEPTH, 1) == (2u << DEPTH) - 1);
        tk_gc_stats st;
        tk_gc_get_stats(&st);
        CHECK(st.markers >= 1 && st.markers <= 2);
        if (st.markers == 2) shared = true;
    }
    if (!shared) fprintf(stderr, "the second marker never joined a marking in 100 collections\n");
    CHECK(shared);
    tree = NULL;
    array = NULL;
    CHECK_OK(tk_gc_set_markers(1));
    collect();
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    CHECK(st.markers == 1);
    CHECK_OK(tk_gc_set_markers(before));
}

/* ---- another thread's stack and registers ---- */
static atomic_int phase;
static volatile int go_on;
static uintptr_t hidden_out;
#define KEY 0x5a5a5a5a5a5a5a5aull

static void *stack_thread(void *arg)
{
    (void)arg;
    void *volatile mine[N];
    make_weak((void **)mine, false);
    atomic_store(&phase, 1);
    while (atomic_load(&phase) != 2) sched_yield();
    for (int i = 0; i < N; i++) CHECK(links[i] == mine[i]);
    return NULL;
}

__attribute__((noinline)) static uintptr_t make_hidden(void)
{
    void *p = tk_gc_malloc(64);
    CHECK(p);
    memset(p, 0xab, 64);
    links[0] = p;
    CHECK_OK(tk_gc_register_weak(&links[0], p));
    return (uintptr_t)p ^ KEY;
}

static void *register_thread(void *arg)
{
    (void)arg;
    uintptr_t hidden = make_hidden();
    scrub();
    /* the pointer lives in r15 only while the thread spins */
    __asm__ volatile("mov %[h], %%r15\n\t"
                     "xor %[k], %%r15\n\t"
                     "movl $1, %[ph]\n\t"
                     "1: pause\n\t"
                     "cmpl $0, %[go]\n\t"
                     "je 1b\n\t"
                     "xor %[k], %%r15\n\t"
                     "mov %%r15, %[out]\n\t"
                     "xor %%r15, %%r15\n\t"
                     : [out] "=m"(hidden_out), [ph] "=m"(phase)
                     : [h] "r"(hidden), [k] "r"((uintptr_t)KEY), [go] "m"(go_on)
                     : "r15", "memory");
    return NULL;
}

/* A thread stopped while it runs a signal handler on its alternate stack:
 * what its own stack holds (below the handler, where it was) is kept. */
static void on_usr1(int sig)
{
    (void)sig;
    atomic_store(&phase, 1);
    while (!go_on) __asm__ volatile("pause");
}

static void *altstack_thread(void *arg)
{
    (void)arg;
    stack_t ss = {.ss_sp = malloc(65536), .ss_size = 65536};
    CHECK(ss.ss_sp && sigaltstack(&ss, NULL) == 0);
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0);
    void *volatile mine[N];
    make_weak((void **)mine, false);
    raise(SIGUSR1); /* returns once main says go */
    for (int i = 0; i < N; i++) CHECK(links[i] == mine[i]);
    void *alt = ss.ss_sp;
    ss = (stack_t){.ss_flags = SS_DISABLE};
    CHECK(sigaltstack(&ss, NULL) == 0);
    free(alt);
    return NULL;
}

static void test_threads(void)
{
    for (int i = 0; i < N; i++) links[i] = NULL;
    atomic_store(&phase, 0);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, stack_thread, NULL) == 0);
    while (atomic_load(&phase) != 1) sched_yield();
    collect();
    collect();
    printf("another thread's stack: %zu of %d cleared\n", cleared(), N);
    CHECK(cleared() == 0);
    atomic_store(&phase, 2);
    CHECK(pthread_join(t, NULL) == 0);

    for (int i = 0; i < N; i++) links[i] = (void *)1;
    atomic_store(&phase, 0);
    go_on = 0;
    CHECK(pthread_create(&t, NULL, register_thread, NULL) == 0);
    while (atomic_load(&phase) != 1) sched_yield();
    for (int r = 0; r < 3; r++) {
        collect();
        for (int k = 0; k < 20000; k++) CHECK(tk_gc_malloc(64)); /* reuse what was freed */
    }
    CHECK(links[0] != NULL);
    go_on = 1;
    CHECK(pthread_join(t, NULL) == 0);
    unsigned char *p = (unsigned char *)(hidden_out ^ KEY);
    CHECK(p == links[0]);
    for (int i = 0; i < 64; i++) CHECK(p[i] == 0xab);

    for (int i = 0; i < N; i++) links[i] = NULL;
    atomic_store(&phase, 0);
    go_on = 0;
    CHECK(pthread_create(&t, NULL, altstack_thread, NULL) == 0);
    while (atomic_load(&phase) != 1) sched_yield();
    collect();
    collect();
    printf("a thread on its alternate signal stack: %zu of %d cleared\n", cleared(), N);
    CHECK(cleared() == 0);
    go_on = 1;
    CHECK(pthread_join(t, NULL) == 0);
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    CHECK(st.threads >= 1);
}

/* ---- finalizers ---- */
enum { PAIRS = 200 };
/* per pair: when a (the one that reaches b), b and the lone c were
 * finalized (the collection's number), 0 not yet; values: 1000 + pair for
 * a, 2000 + pair for b, 3000 + pair for c */
static int fin_a[PAIRS], fin_b[PAIRS], fin_c[PAIRS], fin_total, fin_round;

static void on_final(void *obj, void *arg)
{
    int v = (int)(uintptr_t)arg, k = v % 1000;
    CHECK(((struct node *)obj)->value == (uint64_t)v); /* still valid */
    int *slot = v < 2000 ? &fin_a[k] : v < 3000 ? &fin_b[k] : &fin_c[k];
    CHECK(*slot == 0); /* once */
    *slot = fin_round;
    fin_total++;
}

__attribute__((noinline)) static void make_finalizable(void)
{
    for (int k = 0; k < PAIRS; k++) {
        struct node *a = tk_gc_malloc(sizeof *a), *b = tk_gc_malloc(sizeof *b),
                    *c = tk_gc_malloc(sizeof *c);
        CHECK(a && b && c);
        a->value = 1000 + k, b->value = 2000 + k, c->value = 3000 + k;
        a->next = b;
        /* both orders of registration */
        if (k % 2) CHECK_OK(tk_gc_register_finalizer(b, on_final, (void *)(uintptr_t)(2000 + k)));
        CHECK_OK(tk_gc_register_finalizer(a, on_final, (void *)(uintptr_t)(1000 + k)));
        if (!(k % 2))
            CHECK_OK(tk_gc_register_finalizer(b, on_final, (void *)(uintptr_t)(2000 + k)));
        CHECK_OK(tk_gc_register_finalizer(c, on_final, (void *)(uintptr_t)(3000 + k)));
    }
}

static void test_finalizers(void)
{
    make_finalizable();
    for (fin_round = 1; fin_round <= 4; fin_round++) collect();
    int a = 0, b = 0, c = 0, b_first = 0;
    for (int k = 0; k < PAIRS; k++) {
        a += fin_a[k] == 1;
        c += fin_c[k] == 1;
        b += fin_b[k] != 0;
        /* b only after its a, at a later collection */
        if (fin_b[k] && (!fin_a[k] || fin_b[k] <= fin_a[k])) b_first++;
    }
    printf("finalized: %d of %d a's and %d c's at the first collection, %d b's by the fourth, "
           "%d b's before their a\n",
           a, PAIRS, c, b, b_first);
    CHECK(a >= PAIRS - 5 && c >= PAIRS - 5 && b >= PAIRS - 5);
    CHECK(b_first == 0);
    collect(); /* nothing twice: on_final checks each object's slot */
    CHECK(fin_total <= 3 * PAIRS);
    int x = 0;
    CHECK_ERR(tk_gc_register_finalizer(&x, on_final, NULL), -EINVAL);
}

/* ---- a weak link inside a reclaimed object is dropped, not written ---- */
enum { HOLDERS = 100 };
static void *targets[HOLDERS];
static uintptr_t hidden_holders[HOLDERS];

/* HOLDERS holders, each with a weak link to a target that lives on (in
 * targets[]) while the holder does not; also links[i] to each target. */
__attribute__((noinline)) static void links_in_garbage(void)
{
    for (int i = 0; i < HOLDERS; i++) {
        void **holder = tk_gc_malloc(64);
        void *target = tk_gc_malloc(64);
        CHECK(holder && target);
        holder[0] = target;
        CHECK_OK(tk_gc_register_weak(&holder[0], target));
        links[i] = target;
        CHECK_OK(tk_gc_register_weak(&links[i], target));
        targets[i] = target;
        hidden_holders[i] = (uintptr_t)holder ^ KEY; /* the address itself would keep it */
    }
}

static void test_weak_in_garbage(void)
{
    links_in_garbage();
    collect(); /* the holders are reclaimed: their links must go with them */
    /* objects of the holders' size until they have taken every holder's
     * place (kept as roots) */
    enum { MAX = 1 << 20 };
    void ***again = malloc(MAX * sizeof *again);
    size_t *at = malloc(HOLDERS * sizeof *at);
    CHECK(again && at);
    CHECK_OK(tk_gc_add_roots(again, again + MAX));
    size_t n = 0, found = 0;
    for (int i = 0; i < HOLDERS; i++) at[i] = MAX;
    while (n < MAX && found < HOLDERS - 5) {
        again[n] = tk_gc_malloc(64);
        CHECK(again[n]);
        again[n][0] = (void *)0x1234;
        for (int i = 0; i < HOLDERS; i++)
            if (((uintptr_t)again[n] ^ KEY) == hidden_holders[i]) at[i] = n, found++;
        n++;
    }
    printf("%zu of %d holders' slots used again after %zu objects\n", found, HOLDERS, n);
    CHECK(found >= HOLDERS - 5);
    memset(targets, 0, sizeof targets);
    collect(); /* the targets are reclaimed: links still registered would be cleared */
    size_t gone = 0;
    for (int i = 0; i < HOLDERS; i++) {
        gone += links[i] == NULL;
        if (at[i] < MAX) CHECK(again[at[i]][0] == (void *)0x1234);
    }
    printf("%zu of %d targets reclaimed, none of their dropped links written\n", gone, HOLDERS);
    CHECK(gone >= HOLDERS - 5);
    CHECK_OK(tk_gc_remove_roots(again, again + MAX));
    free(again);
    free(at);
}

/* ---- large objects, churn, realloc ---- */
static void test_large_and_churn(void)
{
    static char *big;
    big = tk_gc_malloc(3 << 20);
    CHECK(big);
    memset(big, 7, 3 << 20);
    for (int i = 0; i < 300; i++) {
        char *g = tk_gc_malloc(1 << 20); /* garbage at once */
        CHECK(g);
        g[0] = 1;
        if (i % 50 == 0) tk_gc_malloc_atomic(100000);
    }
    for (int i = 0; i < 200000; i++) CHECK(tk_gc_malloc(24 + (i % 5) * 100));
    collect();
    for (size_t i = 0; i < (3u << 20); i += 4096) CHECK(big[i] == 7);
    CHECK(tk_gc_size(big) >= (3u << 20));
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    printf("after churn: heap %.1f MiB, live %.1f MiB, %lu collections, %lu reclaimed\n",
           st.heap_bytes / 1048576.0, st.live_bytes / 1048576.0, (unsigned long)st.collections,
           (unsigned long)st.reclaimed_objects);
    /* 300 MiB and ~50 MiB of small objects went through a heap that stays small */
    CHECK(st.heap_bytes < (64u << 20));
    CHECK(st.collections >= 5);
    big = NULL;

    char *r = tk_gc_malloc(10);
    CHECK(r);
    strcpy(r, "abcdefghi");
    r = tk_gc_realloc(r, 5000);
    CHECK(r && !strcmp(r, "abcdefghi"));
    CHECK(tk_gc_size(r) >= 5000);
    char *r2 = tk_gc_realloc(r, 20);
    CHECK(r2 && !memcmp(r2, "abcdefghi", 10));
    CHECK(tk_gc_realloc(r2, 0) == NULL);
    CHECK_ERR(tk_gc_free(r2), -EINVAL); /* freed by realloc */
}

static void test_bad_free(void)
{
    int local;
    CHECK_ERR(tk_gc_free(&local), -EINVAL);
    printf("free of a stack address: %s\n", tk_last_error());
    CHECK(strstr(tk_last_error(), "not in the collector's heap"));
    char *p = tk_gc_malloc(100);
    CHECK(p);
    memset(p, 'x', 100);
    CHECK_ERR(tk_gc_free(p + 16), -EINVAL);
    CHECK(strstr(tk_last_error(), "inside an object"));
    CHECK(p[0] == 'x' && p[99] == 'x'); /* nothing touched */
    CHECK_OK(tk_gc_free(p));
    CHECK_ERR(tk_gc_free(p), -EINVAL);
    CHECK(strstr(tk_last_error(), "not a live object"));
    CHECK_OK(tk_gc_free(NULL));
    CHECK(tk_gc_realloc(&local, 10) == NULL);
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    CHECK(st.freed_objects >= 1);
}

/* The write barrier turned on over a heap in use (as GC_enable_incremental
 * does): the next collection is full, the ones after minor, and what was
 * kept stays kept. */
static void test_set_barrier(void)
{
    CHECK(!strcmp(tk_gc_barrier(), "none"));
    CHECK_ERR(tk_gc_set_barrier("pkeys"), -EINVAL);
    static struct node *keep[N];
    for (int i = 0; i < N; i++) {
        keep[i] = tk_gc_malloc(sizeof *keep[i]);
        CHECK(keep[i]);
        keep[i]->value = (uint64_t)i;
    }
    int err = tk_gc_set_barrier("auto");
    if (err == -EOPNOTSUPP) {
        printf("no write barrier here: %s\n", tk_last_error());
        return;
    }
    CHECK_OK(err);
    printf("write barrier: %s\n", tk_gc_barrier());
    CHECK(strcmp(tk_gc_barrier(), "none") && strcmp(tk_gc_barrier(), "auto"));
    CHECK_ERR(tk_gc_set_barrier("posix"), -EINVAL); /* on already */
    tk_gc_stats a, b, c;
    tk_gc_get_stats(&a);
    scrub();
    tk_gc_collect_minor(); /* full: the barrier did not see the writes before it */
    tk_gc_get_stats(&b);
    CHECK(b.minor_collections == a.minor_collections);
    for (int i = 0; i < N; i++) {
        struct node *y = tk_gc_malloc(sizeof *y); /* young, only an old object points to it */
        CHECK(y);
        y->value = 7000000 + (uint64_t)i;
        keep[i]->next = y;
    }
    scrub();
    tk_gc_collect_minor();
    for (int k = 0; k < 50000; k++) CHECK(tk_gc_malloc(sizeof(struct node)));
    tk_gc_get_stats(&c);
    CHECK(c.minor_collections > b.minor_collections);
    for (int i = 0; i < N; i++)
        CHECK(keep[i]->value == (uint64_t)i && keep[i]->next->value == 7000000 + (uint64_t)i);
    memset(keep, 0, sizeof keep);
}

int main(void)
{
    CHECK_OK(tk_gc_init());
    links = calloc(N, sizeof *links);
    CHECK(links);
    test_unreachable_and_static();
    test_malloc_not_root_and_added_roots();
    test_atomic_not_scanned();
    test_chain();
    test_parallel_marking();
    test_threads();
    test_finalizers();
    test_weak_in_garbage();
    test_large_and_churn();
    test_bad_free();
    test_set_barrier();
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    printf("%lu collections, max pause %.2f ms, %lu weak links cleared, %lu finalized\n",
           (unsigned long)st.collections, st.max_pause_ns / 1e6, (unsigned long)st.cleared_links,
           (unsigned long)st.finalized_objects);
    return 0;
}
