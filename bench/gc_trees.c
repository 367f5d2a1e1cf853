/* bench/gc_trees.c - Thekkath & Levy's Table 5 tree program, one source for
 * two collectors (built as bench/gcbench.c is: bench/gcwork.h).
 *
 * Table 5 of the seed (Thekkath & Levy, ASPLOS 1994, section 4.1) weighs a
 * generational collector's software store checks against its page
 * protection faults for two Smalltalk programs measured by Hosking & Moss
 * (SOSP 1993): "Tree", "a synthetic benchmark based on tree creation and
 * destruction" (59,646 store checks against 864 page faults, break-even at
 * a fault cost under 14 us), and "Interactive" (a Smalltalk benchmark
 * suite).  The seed says no more of Tree's program; this one creates and
 * destroys trees so that both young and old trees are written:
 *
 * - a long-lived tree of depth 16 (65,535 nodes, 2 MiB) is built first and
 *   kept; each round destroys 4 of its subtrees, each chosen by a random
 *   path to a random depth of 6 to 12 (the link to it set to the new
 *   subtree, the old one garbage), and builds a new subtree of the same
 *   height in its place: a store into an old node of a pointer to a young
 *   one;
 * - each round also builds a tree of depth 12 (4,095 nodes), destroys and
 *   rebuilds 8 random subtrees of it (depth 2 to 8), checks it and drops it.
 *
 * Trees are built top-down, each node allocated before its children (a
 * collection while its children are built makes it older than they are).
 * A node holds a random value and the sum of its subtree's values; after a
 * subtree is replaced the sums on the path to it are updated (stores of
 * integers into old nodes).  Every pointer is stored through GC_WRITE.
 *
 *   gc_trees [--incremental] [--pauses] [--scale F]
 *
 * --scale F: F times 1,000 rounds.  Prints gcwork.h's JSON object with
 * scale and checksum (a hash of the sums of every subtree destroyed and
 * built, and of the long-lived tree at the end: the same on both
 * collectors).  Checked: every subtree destroyed and every tree dropped is
 * walked first, each node's sum against its value and its children's, and
 * at the end the long-lived tree whole (its node count too); a wrong one
 * exits 1.
 */
#define _GNU_SOURCE
#include <stdint.h>

#include "gcwork.h"

typedef struct Node {
    struct Node *left, *right;
    uint64_t val, sum; /* sum: of the values in the subtree below and here */
} Node;

#define STORE GCW_STORE

enum { kRounds = 1000, kLongLivedDepth = 16, kLongReplaced = 4 };
enum { kTempDepth = 12, kTempReplaced = 8 };

static uint64_t rng = 0x7ab1e5;

static uint64_t sum_of(const Node *n)
{
    return n ? n->sum : 0;
}

/* A complete tree of the given depth (0: none), built top-down. */
static Node *build(int depth)
{
    if (depth <= 0) return NULL;
    Node *n = gcw_malloc(sizeof *n);
    n->val = gcw_rand(&rng) % 1000000;
    STORE(n->left, build(depth - 1));
    STORE(n->right, build(depth - 1));
    n->sum = n->val + sum_of(n->left) + sum_of(n->right);
    return n;
}

static void fail(const char *what)
{
    fprintf(stderr, "gc_trees: %s is wrong\n", what);
    exit(1);
}

/* Walks a tree, checking every node's sum and the tree's shape (complete,
 * of the given depth); its number of nodes. */
static size_t check_tree(const Node *n, int depth, const char *what)
{
    if (depth == 0) {
        if (n) fail(what);
        return 0;
    }
    if (!n || n->sum != n->val + sum_of(n->left) + sum_of(n->right)) fail(what);
    return 1 + check_tree(n->left, depth - 1, what) + check_tree(n->right, depth - 1, what);
}

/* Destroys the subtree at a random path from root to the given depth of a
 * tree of depth tree_depth, and builds a new one in its place; the sums
 * of the subtree destroyed and of the one built, folded into *h. */
static void replace_subtree(Node *root, int tree_depth, int depth, uint64_t *h, const char *what)
{
    Node *path[32];
    Node *p = root;
    for (int d = 1; d < depth - 1; d++) {
        path[d - 1] = p;
        p = gcw_rand(&rng) & 1 ? p->right : p->left;
    }
    path[depth - 2] = p; /* the parent of the subtree */
    Node **link = gcw_rand(&rng) & 1 ? &p->right : &p->left;
    int height = tree_depth - depth + 1;
    check_tree(*link, height, what);
    uint64_t old = sum_of(*link);
    gcw_untimed(); /* (the walk was the program's own work) */
    Node *fresh = build(height);
    STORE(*link, fresh);
    for (int d = 0; d < depth - 1; d++) path[d]->sum += fresh->sum - old;
    *h = gcw_mix(gcw_mix(*h, old), fresh->sum);
}

/* The long-lived tree, reachable from this global. */
static Node *long_lived;

int main(int argc, char **argv)
{
    double scale = gcw_scaled_args(argc, argv, "gc_trees");
    size_t rounds = (size_t)(kRounds * scale + 0.5);
    if (rounds < 1) rounds = 1;

    gcw_setup("gc_trees");
    gcw_start();
    long_lived = build(kLongLivedDepth);
    uint64_t check = 0;
    for (size_t r = 0; r < rounds; r++) {
        for (int k = 0; k < kLongReplaced; k++)
            replace_subtree(long_lived, kLongLivedDepth, 6 + (int)(gcw_rand(&rng) % 7), &check,
                            "a long-lived subtree");

        Node *temp = build(kTempDepth);
        for (int k = 0; k < kTempReplaced; k++)
            replace_subtree(temp, kTempDepth, 2 + (int)(gcw_rand(&rng) % 7), &check,
                            "a short-lived subtree");
        check_tree(temp, kTempDepth, "a short-lived tree");
        check = gcw_mix(check, temp->sum);
        gcw_untimed();
    }
    gcw_stop();

    if (check_tree(long_lived, kLongLivedDepth, "the long-lived tree") !=
        (1u << kLongLivedDepth) - 1)
        fail("the long-lived tree's size");
    check = gcw_mix(check, long_lived->sum);
    char extra[96];
    snprintf(extra, sizeof extra, "\"scale\": %g, \"checksum\": \"%016llx\", ", scale,
             (unsigned long long)check);
    gcw_report(extra);
    return 0;
}
