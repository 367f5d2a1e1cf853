/* bench/gc_lisp.c - Thekkath & Levy's Table 4 workload, one source for two
 * collectors (built as bench/gcbench.c is: bench/gcwork.h).
 *
 * Table 4 of the seed (Thekkath & Levy, ASPLOS 1994, section 4.1) times two
 * synthetic C programs on the Xerox (Boehm-Demers-Weiser) collector made
 * generational and incremental, its write barrier the page protection:
 * "Lisp Operations", which "simulates the behavior of simple Lisp operators,
 * such as cons, car, and cdr" and "repeatedly creates large Lisp-like data
 * structures without explicit garbage collection" (about 80 collections,
 * over 2000 protection faults; 24 s of CPU with Ultrix's SIGSEGV against
 * 23 s with the fast exceptions, 4%), and "Array Test", which "creates a
 * large array (1 MB) and randomly replaces elements in the array", each
 * replacement making garbage and some faulting on a protected page: "many
 * more older-to-younger pointer stores than the first application" (about
 * 2000 faults; 2 s against 1.8 s, 10%).  The paper gives no more of either
 * program; this one runs both, interleaved, so that the array is old while
 * the lists make the garbage that starts collections.
 *
 * The Lisp part: cons cells (car, cdr), a car either a fixnum (odd, never
 * an object's address) or a list.  Each round builds a list of 1,000 to
 * 5,000 random fixnums, reverses it, maps a function over it, splits it
 * into sublists of 16 (a list of lists), reverses each sublist, flattens
 * them, appends one of 64 kept lists and drops the front half; the result
 * replaces a kept list (the lists share their tails, so cells of every age
 * stay reachable).  Lists are built front to back, the cdr of the last
 * cell set as each is added.  The array part: a collector object of 1 MiB
 * (131,072 pointers), each element a list of one to three cells; each round
 * replaces 256 random elements with new lists.  Every pointer is stored
 * through GC_WRITE.
 *
 *   gc_lisp [--incremental] [--pauses] [--scale F]
 *
 * --scale F: F times 1,000 rounds (some 450 MB of cells; about 50
 * collections with bdwgc, the paper's about 80).  Prints gcwork.h's JSON object
 * with scale and checksum (a hash of every round's result and of the array
 * and the kept lists at the end: the same on both collectors).  Checked:
 * each round's list lengths and sums against what was built, and at the end
 * every kept list and every array element against a copy of what was
 * stored in it (outside the collector's heap); a wrong one exits 1.
 */
#define _GNU_SOURCE
#include <stdint.h>

#include "gcwork.h"

typedef struct Cell {
    void *car; /* a fixnum, or a list */
    struct Cell *cdr;
} Cell;

#define FIX(n) ((void *)(((uintptr_t)(n) << 1) | 1))
#define FIXVAL(p) ((uint64_t)(uintptr_t)(p) >> 1)
#define STORE GCW_STORE

enum { kRounds = 1000, kKept = 64, kArrayLen = (1 << 20) / sizeof(void *), kReplaced = 256 };
enum { kChunk = 16 };

static uint64_t rng = 0x5eed1994;

static Cell *cons(void *car, Cell *cdr)
{
    Cell *c = gcw_malloc(sizeof *c);
    STORE(c->car, car);
    STORE(c->cdr, cdr);
    return c;
}

/* A list built front to back: the last cell's cdr set as each is added. */
typedef struct {
    Cell *head, *last;
} Builder;

static void push_back(Builder *b, void *car)
{
    Cell *c = cons(car, NULL);
    if (b->last)
        STORE(b->last->cdr, c);
    else
        b->head = c;
    b->last = c;
}

static Cell *random_list(size_t n, uint64_t *sum)
{
    Builder b = {0};
    for (size_t i = 0; i < n; i++) {
        uint64_t v = gcw_rand(&rng) % 1000000;
        *sum += v;
        push_back(&b, FIX(v));
    }
    return b.head;
}

static Cell *reverse(Cell *l)
{
    Cell *r = NULL;
    for (; l; l = l->cdr) r = cons(l->car, r);
    return r;
}

static uint64_t triple_plus_one(uint64_t v)
{
    return (3 * v + 1) % 1000003;
}

static Cell *map_fix(Cell *l, uint64_t (*f)(uint64_t))
{
    Builder b = {0};
    for (; l; l = l->cdr) push_back(&b, FIX(f(FIXVAL(l->car))));
    return b.head;
}

/* A copy of a followed by b itself (b's cells shared, as Lisp's append). */
static Cell *append(Cell *a, Cell *b)
{
    Builder r = {0};
    for (; a; a = a->cdr) push_back(&r, a->car);
    if (!r.head) return b;
    STORE(r.last->cdr, b);
    return r.head;
}

static Cell *drop(Cell *l, size_t n)
{
    while (l && n--) l = l->cdr;
    return l;
}

/* The list of l's elements in sublists of k (copies). */
static Cell *chunk(Cell *l, size_t k)
{
    Builder outer = {0};
    while (l) {
        Builder inner = {0};
        for (size_t i = 0; i < k && l; i++, l = l->cdr) push_back(&inner, l->car);
        push_back(&outer, inner.head);
    }
    return outer.head;
}

static Cell *map_reverse(Cell *ls)
{
    Builder b = {0};
    for (; ls; ls = ls->cdr) push_back(&b, reverse(ls->car));
    return b.head;
}

static Cell *flatten(Cell *ls)
{
    Builder b = {0};
    for (; ls; ls = ls->cdr)
        for (Cell *l = ls->car; l; l = l->cdr) push_back(&b, l->car);
    return b.head;
}

static size_t length(const Cell *l)
{
    size_t n = 0;
    for (; l; l = l->cdr) n++;
    return n;
}

/* A list's length and a hash of its fixnums in order. */
static size_t digest(const Cell *l, uint64_t *hash, uint64_t *sum)
{
    size_t n = 0;
    uint64_t h = 0, s = 0;
    for (; l; l = l->cdr, n++) {
        h = gcw_mix(h, FIXVAL(l->car));
        s += FIXVAL(l->car);
    }
    if (hash) *hash = h;
    if (sum) *sum = s;
    return n;
}

/* An array element: a list of 1-3 cells holding v, v + 1, ... */
static Cell *element(uint64_t v)
{
    Cell *l = NULL;
    for (int i = (int)(v % 3); i >= 0; i--) l = cons(FIX(v + (uint64_t)i), l);
    return l;
}

static int element_ok(const Cell *l, uint64_t v)
{
    for (uint64_t i = 0; i <= v % 3; i++, l = l->cdr)
        if (!l || FIXVAL(l->car) != v + i) return 0;
    return l == NULL;
}

static void fail(const char *what, size_t i)
{
    fprintf(stderr, "gc_lisp: %s (%zu) is wrong\n", what, i);
    exit(1);
}

/* The collector objects, reachable from these globals. */
static Cell **kept;  /* kKept lists */
static Cell **array; /* 1 MiB of pointers */

int main(int argc, char **argv)
{
    double scale = gcw_scaled_args(argc, argv, "gc_lisp");
    size_t rounds = (size_t)(kRounds * scale + 0.5);
    if (rounds < 1) rounds = 1;
    /* what was stored, outside the collector's heap */
    uint64_t *kept_hash = calloc(kKept, sizeof(uint64_t));
    size_t *kept_len = calloc(kKept, sizeof(size_t));
    uint64_t *array_val = calloc(kArrayLen, sizeof(uint64_t));
    if (!kept_hash || !kept_len || !array_val) return 1;

    gcw_setup("gc_lisp");
    gcw_start();
    kept = gcw_malloc(kKept * sizeof *kept);
    array = gcw_malloc(kArrayLen * sizeof *array);
    for (size_t i = 0; i < kArrayLen; i++) {
        array_val[i] = gcw_rand(&rng) % 1000000;
        STORE(array[i], element(array_val[i]));
    }
    uint64_t check = 0;
    for (size_t r = 0; r < rounds; r++) {
        size_t n = 1000 + gcw_rand(&rng) % 4001;
        uint64_t sum = 0;
        Cell *a = random_list(n, &sum);
        Cell *b = reverse(a);
        if (b->car != drop(a, n - 1)->car) fail("a reversed list", r);
        Cell *c = map_fix(b, triple_plus_one);
        Cell *g = chunk(c, kChunk);
        if (length(g) != (n + kChunk - 1) / kChunk) fail("a list of sublists", r);
        Cell *f = flatten(map_reverse(g));
        uint64_t csum, fsum;
        if (digest(c, NULL, &csum) != n || digest(f, NULL, &fsum) != n || csum != fsum)
            fail("a mapped, split and flattened list", r);
        size_t from = gcw_rand(&rng) % kKept, to = gcw_rand(&rng) % kKept;
        size_t len = n + kept_len[from];
        Cell *e = drop(append(f, kept[from]), len / 2);
        STORE(kept[to], e);
        kept_len[to] = digest(e, &kept_hash[to], NULL);
        if (kept_len[to] != len - len / 2) fail("a kept list", r);
        check = gcw_mix(gcw_mix(gcw_mix(check, sum), kept_len[to]), kept_hash[to]);
        gcw_untimed(); /* (the walks above were the program's own work) */

        for (int k = 0; k < kReplaced; k++) {
            size_t i = gcw_rand(&rng) % kArrayLen;
            array_val[i] = gcw_rand(&rng) % 1000000;
            STORE(array[i], element(array_val[i]));
        }
    }
    gcw_stop();

    for (size_t j = 0; j < kKept; j++) {
        uint64_t h;
        if (digest(kept[j], &h, NULL) != kept_len[j] || h != kept_hash[j]) fail("kept list", j);
        check = gcw_mix(check, h);
    }
    for (size_t i = 0; i < kArrayLen; i++) {
        if (!element_ok(array[i], array_val[i])) fail("array element", i);
        check = gcw_mix(check, array_val[i]);
    }
    char extra[96];
    snprintf(extra, sizeof extra, "\"scale\": %g, \"checksum\": \"%016llx\", ", scale,
             (unsigned long long)check);
    gcw_report(extra);
    free(kept_hash);
    free(kept_len);
    free(array_val);
    return 0;
}
