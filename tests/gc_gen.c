/* tests/gc_gen.c - generational collection with a write barrier
 * (argv[1]: pagemap-scan, uffd-sigbus, uffd-thread, posix; a mechanism
 * this machine lacks is skipped).
 *
 * 1. Old objects (kept by a full collection) on pages not written since get
 *    a pointer to a young object each: the minor collection keeps every
 *    young one (it is reachable only through a page the barrier reported).
 * 2. Young garbage is reclaimed by a minor collection; old garbage is not
 *    (its marks are kept) but is by the next full one.
 * 3. A graph mutated at random (nodes allocated, stored into random fields
 *    of reachable nodes, fields and roots dropped), with minor collections
 *    and churn between: every node reachable from the roots is intact after
 *    each (its identity and checksum: a node freed too early is reused and
 *    overwritten), and after a full collection the collector's live size
 *    matches the reachable nodes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <trapkit/gc.h>
#include "testutil.h"

#define KEY 0x5a5a5a5a5a5a5a5aull
enum { N = 2000 };

struct node {
    struct node *kid[4];
    uint64_t id, sum; /* sum: a function of id, checked */
    uint64_t seen;    /* the walk that last visited it */
};

static void **links; /* weak links, in malloc'd memory (not scanned) */
static struct node *old[N];

__attribute__((noinline)) static void scrub(void)
{
    volatile char buf[16384];
    for (size_t i = 0; i < sizeof buf; i++) buf[i] = 0;
    __asm__ volatile("" : : "r"(buf) : "memory");
}

static size_t cleared(void)
{
    size_t n = 0;
    for (int i = 0; i < N; i++) n += links[i] == NULL;
    return n;
}

__attribute__((noinline)) static void give_young_kids(void)
{
    for (int i = 0; i < N; i++) {
        struct node *y = tk_gc_malloc(sizeof *y);
        CHECK(y);
        y->id = 1000000 + (uint64_t)i;
        y->sum = y->id * 31;
        links[i] = y;
        CHECK_OK(tk_gc_register_weak(&links[i], y));
        old[i]->kid[0] = y; /* the only pointer: in an old object */
    }
}

__attribute__((noinline)) static void young_garbage(void)
{
    for (int i = 0; i < N; i++) {
        void *y = tk_gc_malloc(48);
        CHECK(y);
        links[i] = y;
        CHECK_OK(tk_gc_register_weak(&links[i], y));
    }
}

static void test_old_to_young(void)
{
    for (int i = 0; i < N; i++) {
        old[i] = tk_gc_malloc(sizeof *old[i]);
        CHECK(old[i]);
        old[i]->id = (uint64_t)i;
    }
    scrub();
    tk_gc_collect(); /* now old; the barrier's interval starts */
    give_young_kids();
    scrub();
    tk_gc_collect_minor();
    for (int r = 0; r < 3; r++) {
        for (int k = 0; k < 20000; k++) CHECK(tk_gc_malloc(sizeof(struct node))); /* reuse */
        scrub();
        tk_gc_collect_minor();
    }
    printf("young objects only an old one points to: %zu of %d cleared\n", cleared(), N);
    CHECK(cleared() == 0);
    for (int i = 0; i < N; i++) {
        CHECK(old[i]->kid[0] == links[i]);
        CHECK(old[i]->kid[0]->id == 1000000 + (uint64_t)i &&
              old[i]->kid[0]->sum == old[i]->kid[0]->id * 31);
    }
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    CHECK(st.minor_collections >= 4);
    printf("minor collections %lu, dirty pages scanned %lu\n", (unsigned long)st.minor_collections,
           (unsigned long)st.dirty_pages);
}

static void test_young_and_old_garbage(void)
{
    young_garbage();
    scrub();
    tk_gc_collect_minor();
    printf("young garbage: %zu of %d cleared by a minor collection\n", cleared(), N);
    CHECK(cleared() >= N - 10);

    /* the old objects' young kids become garbage: old now (marked), kept by
     * minor collections, reclaimed by a full one */
    for (int i = 0; i < N; i++) {
        links[i] = old[i]->kid[0];
        CHECK_OK(tk_gc_register_weak(&links[i], links[i]));
    }
    scrub();
    tk_gc_collect_minor(); /* the kids are marked now: old */
    memset(old, 0, sizeof old);
    scrub();
    tk_gc_collect_minor();
    printf("old garbage: %zu of %d cleared by a minor collection\n", cleared(), N);
    CHECK(cleared() == 0);
    scrub();
    tk_gc_collect();
    printf("old garbage: %zu of %d cleared by a full collection\n", cleared(), N);
    CHECK(cleared() >= N - 10);
}

/* ---- a graph mutated at random ---- */
enum { ROOTS = 512, STEPS = 400000 };
static struct node *roots[ROOTS];
static uint64_t next_id = 1;

/* Walks the nodes reachable from n that this walk (epoch) has not seen,
 * checking each; counts them. */
static void check_tree(struct node *n, uint64_t epoch, size_t *count, struct node **stack)
{
    size_t sp = 0;
    if (n) stack[sp++] = n;
    while (sp) {
        struct node *x = stack[--sp];
        CHECK(x->sum == x->id * 2654435761u + 7);
        if (x->seen == epoch) continue;
        x->seen = epoch;
        (*count)++;
        for (int k = 0; k < 4; k++)
            if (x->kid[k]) {
                CHECK(sp < (size_t)STEPS);
                stack[sp++] = x->kid[k];
            }
    }
}

static size_t check_graph(uint64_t epoch)
{
    static struct node **stack;
    if (!stack) stack = malloc(sizeof *stack * STEPS);
    CHECK(stack);
    size_t count = 0;
    for (int r = 0; r < ROOTS; r++) check_tree(roots[r], epoch, &count, stack);
    return count;
}

static void test_random_graph(void)
{
    uint64_t seed = 42, epoch = 1;
    size_t minors_checked = 0;
    for (long step = 0; step < STEPS; step++) {
        uint64_t r = tk_test_xorshift(&seed);
        struct node *n = tk_gc_malloc(sizeof *n);
        CHECK(n);
        n->id = next_id++;
        n->sum = n->id * 2654435761u + 7;
        /* store it into a root, or into a field of a node reached from one */
        struct node *at = roots[r % ROOTS];
        for (int d = (int)((r >> 16) % 6); at && d > 0; d--) {
            struct node *k = at->kid[(r >> (20 + 2 * d)) % 4];
            if (!k) break;
            at = k;
        }
        if (!at || (r >> 40) % 8 == 0)
            roots[r % ROOTS] = n;
        else
            at->kid[(r >> 44) % 4] = n;
        if ((r >> 50) % 16 == 0) roots[(r >> 20) % ROOTS] = NULL; /* drop a tree */
        if ((r >> 54) % 4 == 0) CHECK(tk_gc_malloc_atomic(200));  /* churn */
        if (step % 20000 == 19999) {
            scrub();
            tk_gc_collect_minor();
            check_graph(epoch++);
            minors_checked++;
        }
    }
    scrub();
    tk_gc_collect();
    size_t reachable = check_graph(epoch);
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    printf("random graph: %zu minor collections checked, %zu nodes reachable, live %lu bytes "
           "(%lu per node)\n",
           minors_checked, reachable, (unsigned long)st.live_bytes,
           reachable ? (unsigned long)(st.live_bytes / reachable) : 0ul);
    /* every reachable node marked, and little else (the links[] objects
     * and stale words: a few per cent) */
    CHECK(st.live_bytes >= reachable * sizeof(struct node));
    CHECK(st.live_bytes <= reachable * 64 * 11 / 10 + (256u << 10));
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    setenv("TRAPKIT_GC_BARRIER", argv[1], 1);
    int err = tk_gc_init();
    if (err == -EOPNOTSUPP) tk_test_unavailable(argv[1]);
    CHECK_OK(err);
    CHECK(!strcmp(tk_gc_barrier(), argv[1]));
    links = calloc(N, sizeof *links);
    CHECK(links);
    test_old_to_young();
    test_young_and_old_garbage();
    test_random_graph();
    return 0;
}
