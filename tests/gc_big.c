/* tests/gc_big.c - a large heap of small objects: lists of 48-byte nodes
 * grown to a given size while collections run (started by the
 * allocations, as the heap grows), some of them rewritten and dropped
 * along the way; then minor and full collections, and every node checked
 * (its id and a sum of it, set when it was made).  The heap's mappings
 * must not grow with the written pages: with the pagemap-scan and
 * userfaultfd barriers they grow by the heap's chunks alone, however many
 * pages the program writes between collections.
 *
 *   gc_big BARRIER [MiB]     (default 256; `make soak` runs 16 GiB)
 *
 * BARRIER as TRAPKIT_GC_BARRIER (none, pagemap-scan, uffd-sigbus, posix,
 * ...); TRAPKIT_GC_CONCURRENT=1 adds the concurrent marker.  Progress on
 * stderr for each eighth of the heap built.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <trapkit/gc.h>
#include "testutil.h"

enum { LISTS = 4096, RUN = 256 }; /* RUN nodes in a row go to one list */

struct node {
    struct node *next;
    uint64_t id, sum;
};

static struct node **lists; /* a collector object, held by this static */
static uint64_t *counts;    /* malloc'd: nodes on each list */

static uint64_t sum_of(uint64_t id)
{
    return id * 0x9e3779b97f4a7c15ull ^ 0x5bd1e995u;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Every node of every list: the ids count down along a list, and each
 * node's sum matches its id.  Returns the nodes. */
static uint64_t check_all(void)
{
    uint64_t total = 0;
    for (int l = 0; l < LISTS; l++) {
        uint64_t n = 0, last = UINT64_MAX;
        for (const struct node *x = lists[l]; x; x = x->next, n++) {
            if (x->sum != sum_of(x->id) || x->id >= last || x->id / RUN % LISTS != (uint64_t)l) {
                fprintf(stderr,
                        "list %d, node %lu (%p): id %lu sum %lx: reclaimed while reachable\n", l,
                        (unsigned long)n, (const void *)x, (unsigned long)x->id,
                        (unsigned long)x->sum);
                exit(1);
            }
            last = x->id;
        }
        CHECK(n == counts[l]);
        total += n;
    }
    return total;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: gc_big BARRIER [MiB]\n");
        return 2;
    }
    uint64_t mib = argc > 2 ? strtoull(argv[2], NULL, 10) : 256;
    CHECK(mib > 0);
    setenv("TRAPKIT_GC_BARRIER", argv[1], 1);
    int err = tk_gc_init();
    if (err == -EOPNOTSUPP) tk_test_unavailable(argv[1]);
    CHECK_OK(err);
    size_t maps0 = (size_t)tk_test_mappings();
    double t0 = now_s();

    lists = tk_gc_malloc(LISTS * sizeof *lists);
    counts = calloc(LISTS, sizeof *counts);
    CHECK(lists && counts);
    /* MiB of live nodes, each in its class's slot */
    size_t slot = tk_gc_size(lists);
    struct node *probe = tk_gc_malloc(sizeof *probe);
    CHECK(probe && slot);
    slot = tk_gc_size(probe);
    probe = NULL;
    uint64_t want = (mib << 20) / slot, id = 0, seed = 42;
    uint64_t step = want / 8 ? want / 8 : 1;
    while (id < want) {
        uint64_t l = id / RUN % LISTS;
        struct node *n = tk_gc_malloc(sizeof *n);
        if (!n) {
            fprintf(stderr, "out of memory after %lu nodes: %s\n", (unsigned long)id,
                    tk_last_error());
            return 1;
        }
        n->id = id;
        n->sum = sum_of(id);
        n->next = lists[l];
        lists[l] = n;
        counts[l]++;
        id++;
        /* now and then an old node's list is cut short behind its head
         * (the old pages written: the barrier's work), and garbage */
        uint64_t r = tk_test_xorshift(&seed);
        if (r % 65536 == 0) {
            uint64_t k = (r >> 20) % LISTS;
            if (lists[k] && lists[k]->next && lists[k]->next->next) {
                uint64_t cut = 0;
                for (struct node *x = lists[k]->next->next; x; x = x->next) cut++;
                lists[k]->next->next = NULL;
                counts[k] -= cut;
            }
        }
        if (r % 16 == 0) CHECK(tk_gc_malloc_atomic(32 + (r >> 40) % 200));
        if (id % step == 0)
            fprintf(stderr, "  %lu of %lu MiB of nodes made, %.1f s\n",
                    (unsigned long)(id * slot >> 20), (unsigned long)mib, now_s() - t0);
    }
    tk_gc_collect_minor();
    tk_gc_collect_minor();
    uint64_t nodes = check_all();
    tk_gc_collect();
    CHECK(check_all() == nodes);
    tk_gc_stats st;
    tk_gc_get_stats(&st);
    size_t maps1 = (size_t)tk_test_mappings(), per = tk_gc_size(lists[0]); /* a node's slot */
    CHECK(per >= sizeof(struct node));
    printf("%s%s: %lu nodes (%lu MiB) live after %lu collections (%lu minor, %lu concurrent), "
           "heap %lu MiB, live %lu MiB, longest stop %.1f ms, markers %u, mappings %zu -> %zu, "
           "%.1f s\n",
           tk_gc_barrier(), tk_gc_concurrent() ? " (concurrent)" : "", (unsigned long)nodes,
           (unsigned long)(nodes * tk_gc_size(lists[0]) >> 20), (unsigned long)st.collections,
           (unsigned long)st.minor_collections, (unsigned long)st.concurrent_cycles,
           (unsigned long)(st.heap_bytes >> 20), (unsigned long)(st.live_bytes >> 20),
           st.max_pause_ns / 1e6, st.markers, maps0, maps1, now_s() - t0);
    /* every node is live, and little more */
    CHECK(st.live_bytes >= nodes * per);
    CHECK(st.live_bytes <= nodes * per + (16u << 20) + st.live_bytes / 50);
    CHECK(st.collections >= 3);
    /* the page-table barriers do not split the heap's mapping (each chunk
     * is a mapping of its own, 64 at most); the posix barrier does */
    if (strcmp(tk_gc_barrier(), "posix") != 0) CHECK(maps1 <= maps0 + 64 + 8);
    return 0;
}
