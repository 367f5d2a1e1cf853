/* bench/gcbench.c - GCBench (after Boehm's description of Ellis and
 * Kovac's benchmark), one source for two collectors: built with
 * -DUSE_TRAPKIT_GC against trapkit's (<trapkit/gc_compat.h>), else
 * against bdwgc (<gc.h>).
 *
 * A tree of depth 18 is built and dropped (the heap stretched), a tree of
 * depth 16 and an array of 500,000 doubles stay live throughout, and for
 * depths 4, 6, ..., 16 as many trees as fill the stretched heap twice are
 * built top-down and bottom-up and dropped.  --live-mib N grows the
 * long-lived structure to about N MiB (more trees of depth 16, kept).
 * Pointers are stored into nodes with GC_WRITE: trapkit's software card
 * barrier (tk_gc_write) under TRAPKIT_GC_BARRIER=cards, a store and a
 * card's byte under its other barriers, a plain store with bdwgc.
 *
 *   gcbench [--incremental] [--live-mib N] [--pauses] [--store-cost]
 *
 * --incremental, --pauses and the JSON object it prints (live_mib, then
 * the keys every workload prints): bench/gcwork.h.  --store-cost: only
 * what a store through GC_WRITE costs beyond a plain one (store_check_ns).
 */
#define _GNU_SOURCE
#include "gcwork.h"

typedef struct Node0 {
    struct Node0 *left, *right;
    int i, j;
} Node;

enum { kStretchTreeDepth = 18, kLongLivedTreeDepth = 16, kArraySize = 500000 };
enum { kMinTreeDepth = 4, kMaxTreeDepth = 16 };

#define STORE GCW_STORE /* into nodes (the card barrier's stores) */

static Node *new_node(Node *l, Node *r)
{
    Node *n = gcw_malloc(sizeof(Node));
    STORE(n->left, l);
    STORE(n->right, r);
    return n;
}

static int tree_size(int i)
{
    return (1 << (i + 1)) - 1;
}

static int num_iters(int i)
{
    return 2 * tree_size(kStretchTreeDepth) / tree_size(i);
}

/* Builds the tree below n top-down. */
static void populate(int depth, Node *n)
{
    if (depth <= 0) return;
    depth--;
    STORE(n->left, new_node(NULL, NULL));
    STORE(n->right, new_node(NULL, NULL));
    populate(depth, n->left);
    populate(depth, n->right);
}

/* Builds a tree bottom-up. */
static Node *make_tree(int depth)
{
    if (depth <= 0) return new_node(NULL, NULL);
    Node *l = make_tree(depth - 1), *r = make_tree(depth - 1);
    return new_node(l, r);
}

static void time_construction(int depth)
{
    int n = num_iters(depth);
    for (int i = 0; i < n; i++) {
        Node *t = new_node(NULL, NULL);
        populate(depth, t);
    }
    for (int i = 0; i < n; i++) {
        Node *t = make_tree(depth);
        (void)t;
    }
}

/* What a store through GC_WRITE costs beyond a plain one, in ns: 2^24
 * stores of each kind into the nodes of a small array, alternated five
 * times, the least of each. */
static double store_check_ns(void)
{
    enum { N = 1 << 12, REPS = 1 << 12 };
    Node **a = GC_MALLOC(sizeof *a * N);
    Node *v = new_node(NULL, NULL);
    if (!a || !v) return -1;
    for (int i = 0; i < N; i++) a[i] = new_node(NULL, NULL);
    double best[2] = {1e30, 1e30};
    for (int round = 0; round < 5; round++)
        for (int kind = 0; kind < 2; kind++) {
            double t0 = gcw_now_s();
            for (int r = 0; r < REPS; r++)
                for (int i = 0; i < N; i++) {
                    if (kind)
                        GC_WRITE(a[i]->left, v);
                    else
                        a[i]->left = v;
                    __asm__ volatile("" ::: "memory"); /* one store at a time */
                }
            double t = gcw_now_s() - t0;
            if (t < best[kind]) best[kind] = t;
        }
    return (best[1] - best[0]) * 1e9 / ((double)N * REPS);
}

/* The long-lived data: global, so both collectors see it as a root. */
static Node *long_lived[4096];
static double *array;

int main(int argc, char **argv)
{
    int barrier_cost = 0;
    double live_mib = 0;
    for (int i = 1; i < argc; i++) {
        if (gcw_option(argv[i])) continue;
        if (!strcmp(argv[i], "--store-cost"))
            barrier_cost = 1;
        else if (!strcmp(argv[i], "--live-mib") && i + 1 < argc)
            live_mib = atof(argv[++i]);
        else {
            fprintf(stderr, "usage: gcbench [--incremental] [--live-mib N] [--pauses] "
                            "[--store-cost]\n");
            return 2;
        }
    }
    gcw_setup("gcbench");
    if (barrier_cost) {
        printf("{\"collector\": \"%s\", \"store_check_ns\": %.3f}\n", GCW_COLLECTOR,
               store_check_ns());
        return 0;
    }
    gcw_start();

    Node *temp = make_tree(kStretchTreeDepth); /* stretch the heap */
    (void)temp;
    temp = NULL;

    /* the long-lived tree(s): one of depth 16 (~1 MiB), or trees enough
     * for --live-mib */
    size_t ntrees = 1;
    size_t per_tree = (size_t)tree_size(kLongLivedTreeDepth) * 32; /* bytes, a node's slot */
    if (live_mib > 0) ntrees = (size_t)(live_mib * 1048576 / per_tree) + 1;
    if (ntrees > sizeof long_lived / sizeof long_lived[0])
        ntrees = sizeof long_lived / sizeof long_lived[0];
    for (size_t k = 0; k < ntrees; k++) {
        long_lived[k] = new_node(NULL, NULL);
        populate(kLongLivedTreeDepth, long_lived[k]);
    }
    array = GC_MALLOC_ATOMIC(sizeof(double) * kArraySize);
    for (int i = 0; i < kArraySize / 2; i++) array[i] = 1.0 / i;
    gcw_untimed(); /* (filling the array is the program's work, not a pause) */

    for (int d = kMinTreeDepth; d <= kMaxTreeDepth; d += 2) time_construction(d);

    if (!long_lived[0] || array[1000] != 1.0 / 1000) {
        fprintf(stderr, "gcbench: the long-lived data was lost\n");
        return 1;
    }
    gcw_stop();
    char extra[64];
    snprintf(extra, sizeof extra, "\"live_mib\": %.0f, ", live_mib);
    gcw_report(extra);
    return 0;
}
