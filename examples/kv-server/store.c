/* examples/kv-server/store.c - the in-area key-value store (see store.h). */
#include "store.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define KV_MAGIC_V1 0x31305254534b564bull /* "KVSTR01": power-of-two classes, one table */
#define KV_MAGIC 0x32305254534b564bull    /* "KVSTR02" */
#define NBINS 368
#define BLK_MIN 32
#define SMALL_BLOCK (64u << 10) /* blocks below this are taken from the top ... */
#define BIG_FREE (1u << 20)     /* ... of free blocks this big or more */
#define INUSE 1ull
#define DICT_MIN 4
#define KEYS_MIN 1024
#define ZSL_MAXLEVEL 32

/* ---- the layout ------------------------------------------------------- */
struct kv_dict {
    uint64_t table[2]; /* offsets of the bucket arrays; [1] only while rehashing */
    uint64_t size[2];  /* buckets, 0 or a power of two */
    uint64_t used[2];
    int64_t rehash; /* the next bucket of table[0] to move into table[1]; -1 if none */
};

/* Every entry of a hash table starts with this. */
struct kv_rec {
    uint64_t hash;
    uint64_t next; /* the next entry in the bucket */
    uint32_t klen;
    uint16_t koff; /* the key starts koff bytes into the entry */
    uint8_t type;  /* keyspace entries: enum kv_type */
    uint8_t level; /* sorted-set nodes: levels */
};

/* A key: its string's bytes follow the key; other types' values are
 * blocks of their own, at offset v. */
struct kv_obj {
    struct kv_rec r;
    int64_t expire; /* unix ms, 0 if none */
    uint64_t v;     /* a string's length, or the value's offset */
};

struct kv_lnode {
    uint64_t prev, next, len;
    char data[];
};

struct kv_list {
    uint64_t head, tail, len;
};

/* A hash's field: the value follows the field. */
struct kv_field {
    struct kv_rec r;
    uint64_t vlen;
};

struct kv_zlevel {
    uint64_t fwd, span;
};

struct kv_znode {
    struct kv_rec r;
    double score;
    uint64_t backward;
    struct kv_zlevel lv[]; /* r.level of them, then the member */
};

struct kv_zset {
    struct kv_dict d;
    uint64_t header, tail, length;
    uint64_t level;
};

struct kv_set {
    struct kv_dict d;
};

struct kv_hdr {
    uint64_t magic, len, seed;
    uint64_t heap_off, heap_end;
    uint64_t used;    /* bytes in allocated blocks */
    uint64_t free;    /* bytes in free blocks */
    uint64_t expires; /* keys with an expiry time */
    uint64_t expire_cursor;
    struct kv_dict keys;
    uint64_t bin_map[(NBINS + 63) / 64];
    uint64_t bin[NBINS]; /* the first free block of each size bin */
    /* values kv_unlink left to free (their keys, chained by r.next), and how
     * many; after the fields above, so that an area formatted before they
     * existed (zeros there) opens with none */
    uint64_t lazyfree, lazyfree_objects;
};

/* The process's handle on an area. */
struct kv_store {
    char *base;
    struct kv_hdr *h;
    int64_t now;
    uint64_t rng, expired;
    int64_t avg_ttl;    /* kv_avg_ttl's estimate, ms */
    bool hold_resize;   /* a snapshot runs: resize tables only when they must */
    bool hold_rehash;   /* the store is being loaded lazily: no rehash steps */
    kv_touch_fn *touch; /* kv_set_touch_hook's */
    void *touch_arg;
};

#define AT(s, off) ((void *)((s)->base + (off)))
#define OFF(s, p) ((uint64_t)((const char *)(p) - (s)->base))

static uint64_t rnd(struct kv_store *s)
{
    s->rng ^= s->rng << 13;
    s->rng ^= s->rng >> 7;
    s->rng ^= s->rng << 17;
    return s->rng;
}

/* ---- the heap --------------------------------------------------------- */
/* A block at offset b: a word (size | INUSE) at b and the same word at
 * b + size - 8; the payload between.  A free block's payload starts with
 * the offsets of the next and previous free blocks of its bin.  Words
 * marked in use, of size 0, stand before the first block and after the
 * last, so merging stops there. */
static uint64_t *word(struct kv_store *s, uint64_t off)
{
    return (uint64_t *)AT(s, off);
}

static uint64_t bsize(struct kv_store *s, uint64_t b)
{
    return *word(s, b) & ~15ull;
}

static void set_block(struct kv_store *s, uint64_t b, uint64_t size, uint64_t inuse)
{
    *word(s, b) = size | inuse;
    *word(s, b + size - 8) = size | inuse;
}

static unsigned bin_of(uint64_t size)
{
    if (size < 1024) return (unsigned)(size >> 4);
    unsigned l = 63u - (unsigned)__builtin_clzll(size);
    unsigned b = 64 + (l - 10) * 8 + (unsigned)((size >> (l - 3)) & 7);
    return b < NBINS ? b : NBINS - 1;
}

static void bin_insert(struct kv_store *s, uint64_t b, uint64_t size)
{
    struct kv_hdr *h = s->h;
    unsigned i = bin_of(size);
    uint64_t next = h->bin[i];
    word(s, b)[1] = next;
    word(s, b)[2] = 0;
    if (next) word(s, next)[2] = b;
    h->bin[i] = b;
    h->bin_map[i / 64] |= 1ull << (i % 64);
}

static void bin_remove(struct kv_store *s, uint64_t b, uint64_t size)
{
    struct kv_hdr *h = s->h;
    unsigned i = bin_of(size);
    uint64_t next = word(s, b)[1], prev = word(s, b)[2];
    if (prev)
        word(s, prev)[1] = next;
    else
        h->bin[i] = next;
    if (next) word(s, next)[2] = prev;
    if (!h->bin[i]) h->bin_map[i / 64] &= ~(1ull << (i % 64));
}

/* A free block of at least size bytes, left in its bin; 0 if none. */
static uint64_t free_lookup(struct kv_store *s, uint64_t size)
{
    struct kv_hdr *h = s->h;
    unsigned i = bin_of(size);
    if (i >= 64) { /* blocks of a bin differ in size: first fit, briefly */
        uint64_t b = h->bin[i];
        for (int k = 0; b && k < 32; k++, b = word(s, b)[1])
            if (bsize(s, b) >= size) return b;
        i++;
    } else if (h->bin[i]) {
        return h->bin[i];
    } else {
        i++;
    }
    /* any block of a larger bin fits */
    for (unsigned w = i / 64; w < (NBINS + 63) / 64; w++) {
        uint64_t bits = h->bin_map[w];
        if (w == i / 64) bits &= ~0ull << (i % 64);
        if (bits) return h->bin[w * 64 + (unsigned)__builtin_ctzll(bits)];
    }
    return 0;
}

/* A free block of at least size bytes, taken off its bin; 0 if none. */
static uint64_t find_free(struct kv_store *s, uint64_t size)
{
    uint64_t b = free_lookup(s, size);
    if (b) bin_remove(s, b, bsize(s, b));
    return b;
}

/* The size of the block that holds a payload of n bytes (its two boundary
 * words included, rounded to 16). */
static inline uint64_t block_for(uint64_t n)
{
    return (n + 16 + 15) & ~15ull;
}

/* Returns the payload's offset (8-byte aligned), 0 if no block fits. */
static uint64_t heap_alloc(struct kv_store *s, uint64_t n)
{
    struct kv_hdr *h = s->h;
    if (n > h->heap_end - h->heap_off) return 0;
    uint64_t size = block_for(n);
    if (size < BLK_MIN) size = BLK_MIN;
    uint64_t b = find_free(s, size);
    if (!b && h->lazyfree) { /* what UNLINK left may make room: free it now */
        kv_lazyfree_step(s, LONG_MAX);
        b = find_free(s, size);
    }
    if (!b) return 0;
    uint64_t have = bsize(s, b);
    if (have - size >= BLK_MIN && size < SMALL_BLOCK && have >= BIG_FREE) {
        /* a small block out of a big free one: from its end, so that small
         * blocks gather at the top and big ones at the bottom, and a small
         * one (a table, a key) is not left between a big value freed or
         * shrunk and the free space after it */
        set_block(s, b, have - size, 0);
        bin_insert(s, b, have - size);
        b += have - size;
    } else if (have - size >= BLK_MIN) {
        set_block(s, b + size, have - size, 0);
        bin_insert(s, b + size, have - size);
    } else {
        size = have;
    }
    set_block(s, b, size, INUSE);
    h->used += size;
    h->free -= size;
    return b + 8;
}

static uint64_t heap_alloc_zero(struct kv_store *s, uint64_t n)
{
    uint64_t p = heap_alloc(s, n);
    if (p) memset(AT(s, p), 0, n);
    return p;
}

static void heap_free(struct kv_store *s, uint64_t p)
{
    struct kv_hdr *h = s->h;
    uint64_t b = p - 8, size = bsize(s, b);
    h->used -= size;
    h->free += size;
    uint64_t next = *word(s, b + size);
    if (!(next & INUSE)) {
        bin_remove(s, b + size, next & ~15ull);
        size += next & ~15ull;
    }
    uint64_t prev = *word(s, b - 8);
    if (!(prev & INUSE)) {
        uint64_t ps = prev & ~15ull;
        bin_remove(s, b - ps, ps);
        b -= ps;
        size += ps;
    }
    set_block(s, b, size, 0);
    bin_insert(s, b, size);
}

/* Bytes the payload at p may hold. */
static uint64_t heap_usable(struct kv_store *s, uint64_t p)
{
    return bsize(s, p - 8) - 16;
}

/* The block at p now holds n bytes: if a quarter of it or more is left
 * over, the rest goes back to the free blocks (merged with a free one after
 * it), so that a value overwritten by a much smaller one in place does not
 * keep the larger one's memory. */
static void heap_shrink(struct kv_store *s, uint64_t p, uint64_t n)
{
    uint64_t b = p - 8, size = bsize(s, b), want = block_for(n);
    if (want < BLK_MIN) want = BLK_MIN;
    if (want >= size || size - want < BLK_MIN || (size - want) * 4 < size) return;
    set_block(s, b, want, INUSE);
    set_block(s, b + want, size - want, INUSE);
    heap_free(s, b + want + 8); /* (accounts for the rest as free) */
}

/* Grows the block at p to hold n bytes by taking in the free block after
 * it; false if that is not enough. */
static bool heap_grow(struct kv_store *s, uint64_t p, uint64_t n)
{
    struct kv_hdr *h = s->h;
    uint64_t b = p - 8, size = bsize(s, b), want = block_for(n);
    if (want <= size) return true;
    uint64_t next = *word(s, b + size);
    if (next & INUSE || size + (next & ~15ull) < want) return false;
    uint64_t ns = next & ~15ull, total = size + ns;
    bin_remove(s, b + size, ns);
    if (total - want >= BLK_MIN) {
        set_block(s, b + want, total - want, 0);
        bin_insert(s, b + want, total - want);
        total = want;
    }
    set_block(s, b, total, INUSE);
    h->used += total - size;
    h->free -= total - size;
    return true;
}

/* ---- hash tables ------------------------------------------------------ */
static uint64_t hash_bytes(uint64_t seed, const char *p, size_t n)
{
    uint64_t h = seed ^ (n * 0xff51afd7ed558ccdull);
    while (n >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        h = (h ^ v) * 0x100000001b3ull;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t v = 0;
    memcpy(&v, p, n);
    h = (h ^ v) * 0xc4ceb9fe1a85ec53ull;
    h ^= h >> 32;
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
    return h;
}

static uint64_t hash_key(struct kv_store *s, const char *k, size_t n)
{
    return hash_bytes(s->h->seed, k, n);
}

static struct kv_rec *rec(struct kv_store *s, uint64_t off)
{
    return (struct kv_rec *)AT(s, off);
}

static const char *rec_key(const struct kv_rec *r)
{
    return (const char *)r + r->koff;
}

static uint64_t *buckets(struct kv_store *s, struct kv_dict *d, int t)
{
    return (uint64_t *)AT(s, d->table[t]);
}

static uint64_t dict_count(const struct kv_dict *d)
{
    return d->used[0] + d->used[1];
}

/* Starts moving the entries into a table of size buckets (a power of
 * two); does nothing while a rehash runs or if there is no memory (the
 * table keeps working, with longer chains). */
static void dict_resize(struct kv_store *s, struct kv_dict *d, uint64_t size)
{
    if (d->rehash >= 0 || size == d->size[0]) return;
    uint64_t t = heap_alloc_zero(s, size * 8);
    if (!t) return;
    if (!d->size[0]) {
        d->table[0] = t;
        d->size[0] = size;
        return;
    }
    d->table[1] = t;
    d->size[1] = size;
    d->used[1] = 0;
    d->rehash = 0;
}

/* Sets a link (an entry's next, a bucket) only if it changes: an entry's
 * page is written only when its link is really different, so a snapshot
 * (and an incremental image) does not take it. */
static void set_link(uint64_t *link, uint64_t to)
{
    if (*link != to) *link = to;
}

/* Moves the chain of bucket j of table 0 into table 1, keeping the order
 * of the entries that go to the same bucket: an entry's next changes only
 * if the entry after it goes to another bucket, or it ends up before
 * entries already there.  A table grows by doubling, so a chain goes to
 * two buckets; it shrinks into one; the entries of a sublist are linked
 * as they come (at most 8 sublists at once, more are closed and linked
 * early: still right, with more links written). */
static void rehash_bucket(struct kv_store *s, struct kv_dict *d, uint64_t j)
{
    uint64_t *t0 = buckets(s, d, 0), *t1 = buckets(s, d, 1), mask1 = d->size[1] - 1;
    struct {
        uint64_t i, head, tail;
    } sub[8];
    int nsub = 0;
    for (uint64_t e = t0[j]; e;) {
        struct kv_rec *r = rec(s, e);
        uint64_t next = r->next, i = r->hash & mask1;
        int k = 0;
        while (k < nsub && sub[k].i != i) k++;
        if (k == nsub) {
            if (nsub == 8) { /* close the oldest sublist */
                set_link(&rec(s, sub[0].tail)->next, t1[sub[0].i]);
                set_link(&t1[sub[0].i], sub[0].head);
                memmove(sub, sub + 1, 7 * sizeof sub[0]);
                k = nsub = 7;
            }
            sub[k].i = i;
            sub[k].head = e;
            nsub++;
        } else {
            set_link(&rec(s, sub[k].tail)->next, e);
        }
        sub[k].tail = e;
        d->used[0]--;
        d->used[1]++;
        e = next;
    }
    for (int k = 0; k < nsub; k++) { /* each sublist before what the bucket holds */
        set_link(&rec(s, sub[k].tail)->next, t1[sub[k].i]);
        set_link(&t1[sub[k].i], sub[k].head);
    }
    t0[j] = 0;
}

/* Moves up to n buckets of a rehash (visiting at most 10n empty ones).
 * While a snapshot runs (hold_resize) a rehash under way waits, as Redis's
 * does while its save child runs: each step rewrites links in entries on
 * pages spread over the whole store, each a page the snapshot must copy
 * before the write goes on; lookups search both tables meanwhile.  It goes
 * on only if the new table is crowded too (five entries a bucket, where a
 * held table grows). */
static void dict_rehash(struct kv_store *s, struct kv_dict *d, int n)
{
    if (d->rehash < 0 || s->hold_rehash) return;
    if (s->hold_resize && dict_count(d) < d->size[1] * 5) return;
    int empty = n * 10;
    uint64_t *t0 = buckets(s, d, 0);
    while (n-- > 0 && d->used[0]) {
        while (t0[d->rehash] == 0) {
            d->rehash++;
            if (--empty == 0) return;
        }
        rehash_bucket(s, d, (uint64_t)d->rehash++);
    }
    if (d->used[0] == 0) {
        heap_free(s, d->table[0]);
        d->table[0] = d->table[1];
        d->size[0] = d->size[1];
        d->used[0] = d->used[1];
        d->table[1] = d->size[1] = d->used[1] = 0;
        d->rehash = -1;
    }
}

static uint64_t pow2_at_least(uint64_t n, uint64_t min)
{
    uint64_t p = min;
    while (p < n) p *= 2;
    return p;
}

static void dict_maybe_shrink(struct kv_store *s, struct kv_dict *d, uint64_t min)
{
    uint64_t n = dict_count(d);
    if (d->rehash < 0 && !s->hold_resize && !s->hold_rehash && d->size[0] > min &&
        n * 10 < d->size[0])
        dict_resize(s, d, pow2_at_least(n, min));
}

/* Where the link to the entry key is (a bucket or the previous entry's
 * next); NULL if absent.  *t: which table. */
static uint64_t *dict_link(struct kv_store *s, struct kv_dict *d, const char *key, size_t klen,
                           uint64_t hv, int *t)
{
    if (d->rehash >= 0) dict_rehash(s, d, 1);
    for (int k = 0; k < 2; k++) {
        if (!d->size[k]) break;
        uint64_t *link = &buckets(s, d, k)[hv & (d->size[k] - 1)];
        while (*link) {
            struct kv_rec *r = rec(s, *link);
            if (r->hash == hv && r->klen == klen && memcmp(rec_key(r), key, klen) == 0) {
                if (t) *t = k;
                return link;
            }
            link = &r->next;
        }
        if (d->rehash < 0) break;
    }
    return NULL;
}

static uint64_t dict_find(struct kv_store *s, struct kv_dict *d, const char *key, size_t klen,
                          uint64_t hv)
{
    uint64_t *link = dict_link(s, d, key, klen, hv, NULL);
    return link ? *link : 0;
}

/* Inserts the entry at e (its key absent).  Returns -1 if the table has no
 * bucket array and none can be made. */
static int dict_insert(struct kv_store *s, struct kv_dict *d, uint64_t e, uint64_t min)
{
    if (!d->size[0]) dict_resize(s, d, min);
    if (!d->size[0]) return -1;
    int t = d->rehash >= 0;
    uint64_t *b = &buckets(s, d, t)[rec(s, e)->hash & (d->size[t] - 1)];
    rec(s, e)->next = *b;
    *b = e;
    d->used[t]++;
    if (d->rehash < 0 && d->used[0] >= d->size[0] * (s->hold_resize || s->hold_rehash ? 5 : 1))
        dict_resize(s, d, d->size[0] * 2);
    return 0;
}

static void dict_unlink(struct kv_dict *d, uint64_t *link, struct kv_rec *r, int t)
{
    *link = r->next;
    d->used[t]--;
}

static void rec_set_key(struct kv_rec *r, uint64_t hv, const char *key, size_t klen, size_t koff)
{
    r->hash = hv;
    r->next = 0;
    r->klen = (uint32_t)klen;
    r->koff = (uint16_t)koff;
    memcpy((char *)r + koff, key, klen);
}

/* Tells the touch hook of a change to the key of the keyspace entry r. */
static void touched(struct kv_store *s, const struct kv_rec *r, bool deleted)
{
    if (s->touch) s->touch(s->touch_arg, rec_key(r), r->klen, deleted);
}

static uint64_t rev64(uint64_t v)
{
    v = ((v >> 1) & 0x5555555555555555ull) | ((v & 0x5555555555555555ull) << 1);
    v = ((v >> 2) & 0x3333333333333333ull) | ((v & 0x3333333333333333ull) << 2);
    v = ((v >> 4) & 0x0f0f0f0f0f0f0f0full) | ((v & 0x0f0f0f0f0f0f0f0full) << 4);
    return __builtin_bswap64(v);
}

static void scan_bucket(struct kv_store *s, uint64_t e, void (*fn)(void *, uint64_t), void *arg)
{
    while (e) {
        uint64_t next = rec(s, e)->next;
        fn(arg, e);
        e = next;
    }
}

/* Redis's dictScan: the cursor's bits reversed count up, so that growing
 * or shrinking the table between calls loses no entry. */
static uint64_t dict_scan(struct kv_store *s, struct kv_dict *d, uint64_t v,
                          void (*fn)(void *, uint64_t), void *arg)
{
    if (dict_count(d) == 0) return 0;
    if (d->rehash < 0) {
        uint64_t m0 = d->size[0] - 1;
        scan_bucket(s, buckets(s, d, 0)[v & m0], fn, arg);
        v |= ~m0;
        v = rev64(v);
        v++;
        return rev64(v);
    }
    int small = d->size[0] <= d->size[1] ? 0 : 1, large = 1 - small;
    uint64_t m0 = d->size[small] - 1, m1 = d->size[large] - 1;
    scan_bucket(s, buckets(s, d, small)[v & m0], fn, arg);
    do {
        scan_bucket(s, buckets(s, d, large)[v & m1], fn, arg);
        v |= ~m1;
        v = rev64(v);
        v++;
        v = rev64(v);
    } while (v & (m0 ^ m1));
    return v;
}

/* An entry chosen at random (from a random non-empty bucket); 0 if none. */
static uint64_t dict_random(struct kv_store *s, struct kv_dict *d)
{
    if (dict_count(d) == 0) return 0;
    if (d->rehash >= 0) dict_rehash(s, d, 1);
    uint64_t e = 0;
    while (!e) {
        uint64_t total = d->size[0] + d->size[1], i = rnd(s) % total;
        if (i < d->size[0]) {
            if (d->rehash >= 0 && (int64_t)i < d->rehash) continue;
            e = buckets(s, d, 0)[i];
        } else {
            e = buckets(s, d, 1)[i - d->size[0]];
        }
    }
    uint64_t len = 0;
    for (uint64_t x = e; x; x = rec(s, x)->next) len++;
    for (uint64_t k = rnd(s) % len; k; k--) e = rec(s, e)->next;
    return e;
}

/* Frees every entry (with free_entry, or as one block) and the tables. */
static void dict_free(struct kv_store *s, struct kv_dict *d)
{
    for (int t = 0; t < 2; t++) {
        if (!d->size[t]) continue;
        uint64_t *b = buckets(s, d, t);
        for (uint64_t i = 0; i < d->size[t]; i++)
            for (uint64_t e = b[i]; e;) {
                uint64_t next = rec(s, e)->next;
                heap_free(s, e);
                e = next;
            }
        heap_free(s, d->table[t]);
    }
    memset(d, 0, sizeof *d);
    d->rehash = -1;
}

/* The bytes of the heap blocks of the table and its entries. */
static uint64_t dict_bytes(struct kv_store *s, struct kv_dict *d)
{
    uint64_t n = 0;
    for (int t = 0; t < 2; t++) {
        if (!d->size[t]) continue;
        uint64_t *b = buckets(s, d, t);
        for (uint64_t i = 0; i < d->size[t]; i++)
            for (uint64_t e = b[i]; e; e = rec(s, e)->next) n += heap_usable(s, e);
        n += heap_usable(s, d->table[t]);
    }
    return n;
}

static void dict_init(struct kv_dict *d)
{
    memset(d, 0, sizeof *d);
    d->rehash = -1;
}

/* ---- the store -------------------------------------------------------- */
static struct kv_store *handle(void *area)
{
    struct kv_store *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->base = area;
    s->h = area;
    s->rng = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)s;
    return s;
}

static void format(struct kv_store *s, size_t len)
{
    struct kv_hdr *h = s->h;
    uint64_t seed = h->seed;
    memset(h, 0, sizeof *h);
    h->magic = KV_MAGIC;
    h->len = len;
    h->seed = seed ? seed : 0x2545f4914f6cdd1dull ^ rnd(s);
    h->heap_off = (sizeof *h + 4095) & ~4095ull;
    h->heap_end = len;
    dict_init(&h->keys);
    /* sentinels: an in-use word before the first block, another after the last */
    *word(s, h->heap_off) = INUSE;
    *word(s, h->heap_end - 8) = INUSE;
    uint64_t b = h->heap_off + 8, size = h->heap_end - 8 - b;
    set_block(s, b, size, 0);
    bin_insert(s, b, size);
    h->free = size;
}

struct kv_store *kv_format(void *area, size_t len)
{
    if (len < (1u << 20) || len % 4096) return NULL;
    struct kv_store *s = handle(area);
    if (!s) return NULL;
    s->h->seed = 0;
    format(s, len);
    return s;
}

struct kv_store *kv_open(void *area, size_t len, const char **why)
{
    struct kv_hdr *h = area;
    *why = NULL;
    if (h->magic == KV_MAGIC_V1)
        *why = "it holds a store of an older kv-server (format 1), which this one cannot read";
    else if (h->magic != KV_MAGIC)
        *why = "it holds no kv-server store";
    else if (h->len != len || h->heap_off < sizeof *h || h->heap_end != len ||
             h->heap_off >= h->heap_end || h->used + h->free + 16 != h->heap_end - h->heap_off ||
             (h->lazyfree != 0) != (h->lazyfree_objects != 0) ||
             (h->lazyfree && (h->lazyfree < h->heap_off || h->lazyfree >= h->heap_end)))
        *why = "its store's header is inconsistent";
    if (*why) return NULL;
    return handle(area);
}

void kv_hold_resize(struct kv_store *s, bool hold)
{
    s->hold_resize = hold;
}

void kv_hold_rehash(struct kv_store *s, bool hold)
{
    s->hold_rehash = hold;
}

void kv_set_touch_hook(struct kv_store *s, kv_touch_fn *fn, void *arg)
{
    s->touch = fn;
    s->touch_arg = arg;
}

void kv_set_now(struct kv_store *s, int64_t now_ms)
{
    s->now = now_ms;
}

void kv_reset_expired_total(struct kv_store *s)
{
    s->expired = 0;
}

uint64_t kv_expired_total(const struct kv_store *s)
{
    return s->expired;
}

uint64_t kv_count(const struct kv_store *s)
{
    return dict_count(&s->h->keys);
}

uint64_t kv_expires(const struct kv_store *s)
{
    return s->h->expires;
}

uint64_t kv_used(const struct kv_store *s)
{
    return s->h->heap_off + s->h->used;
}

uint64_t kv_free(const struct kv_store *s)
{
    return s->h->free;
}

void kv_flush(struct kv_store *s)
{
    format(s, s->h->len);
}

void kv_free_pages(struct kv_store *s, void (*fn)(void *addr, size_t len, void *arg), void *arg)
{
    const uint64_t pg = 4096;
    for (unsigned i = bin_of(2 * pg + 32); i < NBINS; i++)
        for (uint64_t b = s->h->bin[i]; b; b = word(s, b)[1]) {
            /* a free block keeps its size and links in its first three
             * words and its size in its last */
            uint64_t lo = (b + 24 + pg - 1) & ~(pg - 1), hi = (b + bsize(s, b) - 8) & ~(pg - 1);
            if (hi > lo) fn(AT(s, lo), hi - lo, arg);
        }
}

enum kv_type kv_obj_type(const kv_obj *o)
{
    return (enum kv_type)o->r.type;
}

void kv_obj_key(const kv_obj *o, const char **key, size_t *klen)
{
    *key = rec_key(&o->r);
    *klen = o->r.klen;
}

int64_t kv_obj_expire(const kv_obj *o)
{
    return o->expire;
}

bool kv_obj_expired(const struct kv_store *s, const kv_obj *o)
{
    return o->expire && o->expire <= s->now;
}

void kv_set_expire(struct kv_store *s, kv_obj *o, int64_t when_ms)
{
    if (!o->expire && when_ms) s->h->expires++;
    if (o->expire && !when_ms) s->h->expires--;
    if (o->expire != when_ms) touched(s, &o->r, false);
    o->expire = when_ms;
}

static struct kv_list *list_of(struct kv_store *s, const kv_obj *o)
{
    return (struct kv_list *)AT(s, o->v);
}

static void free_value(struct kv_store *s, kv_obj *o)
{
    switch (o->r.type) {
    case KV_LIST: {
        struct kv_list *l = list_of(s, o);
        for (uint64_t n = l->head; n;) {
            uint64_t next = ((struct kv_lnode *)AT(s, n))->next;
            heap_free(s, n);
            n = next;
        }
        heap_free(s, o->v);
        break;
    }
    case KV_SET:
    case KV_HASH:
        dict_free(s, &((struct kv_set *)AT(s, o->v))->d);
        heap_free(s, o->v);
        break;
    case KV_ZSET: {
        struct kv_zset *z = (struct kv_zset *)AT(s, o->v);
        dict_free(s, &z->d); /* the nodes */
        heap_free(s, z->header);
        heap_free(s, o->v);
        break;
    }
    default:
        break;
    }
}

static void delete_at(struct kv_store *s, uint64_t *link, int t, bool lazy)
{
    kv_obj *o = (kv_obj *)AT(s, *link);
    uint64_t off = *link;
    touched(s, &o->r, true);
    dict_unlink(&s->h->keys, link, &o->r, t);
    if (o->expire) s->h->expires--;
    if (lazy) {
        o->r.next = s->h->lazyfree;
        s->h->lazyfree = off;
        s->h->lazyfree_objects++;
    } else {
        free_value(s, o);
        heap_free(s, off);
    }
    dict_maybe_shrink(s, &s->h->keys, KEYS_MIN);
}

/* Frees up to *budget entries of the table (from its last bucket down, so
 * that what is left is a smaller table); true when it is all freed. */
static bool dict_free_some(struct kv_store *s, struct kv_dict *d, long *budget)
{
    for (int t = 1; t >= 0; t--) {
        if (!d->size[t]) continue;
        uint64_t *b = buckets(s, d, t);
        while (d->size[t] && *budget > 0) {
            uint64_t i = d->size[t] - 1;
            while (b[i] && *budget > 0) {
                uint64_t e = b[i];
                b[i] = rec(s, e)->next;
                heap_free(s, e);
                --*budget;
            }
            if (b[i]) return false;
            d->size[t]--;
        }
        if (d->size[t]) return false;
        heap_free(s, d->table[t]);
        d->table[t] = 0;
    }
    return true;
}

/* Frees up to *budget elements of the value; true when it is all freed
 * (its key's block included). */
static bool free_some(struct kv_store *s, kv_obj *o, long *budget)
{
    switch (o->r.type) {
    case KV_LIST: {
        struct kv_list *l = list_of(s, o);
        while (l->head && *budget > 0) {
            uint64_t next = ((struct kv_lnode *)AT(s, l->head))->next;
            heap_free(s, l->head);
            l->head = next;
            --*budget;
        }
        if (l->head) return false;
        break;
    }
    case KV_SET:
    case KV_HASH:
        if (!dict_free_some(s, &((struct kv_set *)AT(s, o->v))->d, budget)) return false;
        break;
    case KV_ZSET: {
        struct kv_zset *z = (struct kv_zset *)AT(s, o->v);
        if (!dict_free_some(s, &z->d, budget)) return false; /* the nodes */
        heap_free(s, z->header);
        break;
    }
    default:
        return true; /* (kv_unlink frees the others at once) */
    }
    heap_free(s, o->v);
    heap_free(s, OFF(s, o));
    return true;
}

bool kv_lazyfree_step(struct kv_store *s, long budget)
{
    struct kv_hdr *h = s->h;
    while (h->lazyfree && budget > 0) {
        kv_obj *o = (kv_obj *)AT(s, h->lazyfree);
        uint64_t next = o->r.next;
        if (!free_some(s, o, &budget)) break;
        h->lazyfree = next;
        h->lazyfree_objects--;
    }
    return h->lazyfree != 0;
}

uint64_t kv_lazyfree_pending(const struct kv_store *s)
{
    return s->h->lazyfree_objects;
}

uint64_t kv_obj_bytes(struct kv_store *s, const kv_obj *o)
{
    uint64_t n = heap_usable(s, OFF(s, o));
    switch (o->r.type) {
    case KV_LIST:
        n += heap_usable(s, o->v);
        for (uint64_t x = list_of(s, o)->head; x; x = ((struct kv_lnode *)AT(s, x))->next)
            n += heap_usable(s, x);
        break;
    case KV_SET:
    case KV_HASH:
        n += heap_usable(s, o->v) + dict_bytes(s, &((struct kv_set *)AT(s, o->v))->d);
        break;
    case KV_ZSET: {
        struct kv_zset *z = (struct kv_zset *)AT(s, o->v);
        n += heap_usable(s, o->v) + heap_usable(s, z->header) + dict_bytes(s, &z->d);
        break;
    }
    default:
        break;
    }
    return n;
}

kv_obj *kv_lookup(struct kv_store *s, const char *key, size_t klen)
{
    int t;
    uint64_t *link = dict_link(s, &s->h->keys, key, klen, hash_key(s, key, klen), &t);
    if (!link) return NULL;
    kv_obj *o = (kv_obj *)AT(s, *link);
    if (o->expire && o->expire <= s->now) {
        delete_at(s, link, t, false);
        s->expired++;
        return NULL;
    }
    return o;
}

kv_obj *kv_random_key(struct kv_store *s)
{
    for (;;) { /* each expired key found is deleted: the loop ends */
        uint64_t e = dict_random(s, &s->h->keys);
        if (!e) return NULL;
        kv_obj *o = (kv_obj *)AT(s, e);
        if (!o->expire || o->expire > s->now) return o;
        kv_delete_obj(s, o);
        s->expired++;
    }
}

kv_obj *kv_peek(struct kv_store *s, const char *key, size_t klen)
{
    uint64_t *link = dict_link(s, &s->h->keys, key, klen, hash_key(s, key, klen), NULL);
    return link ? (kv_obj *)AT(s, *link) : NULL;
}

bool kv_delete(struct kv_store *s, const char *key, size_t klen)
{
    int t;
    uint64_t *link = dict_link(s, &s->h->keys, key, klen, hash_key(s, key, klen), &t);
    if (!link) return false;
    delete_at(s, link, t, false);
    return true;
}

/* As Redis's lazyfree: a value of more than 64 elements is left to
 * kv_lazyfree_step */
bool kv_unlink(struct kv_store *s, const char *key, size_t klen)
{
    int t;
    uint64_t *link = dict_link(s, &s->h->keys, key, klen, hash_key(s, key, klen), &t);
    if (!link) return false;
    kv_obj *o = (kv_obj *)AT(s, *link);
    uint64_t n = 0;
    switch (o->r.type) {
    case KV_LIST:
        n = list_of(s, o)->len;
        break;
    case KV_SET:
    case KV_HASH:
    case KV_ZSET: {
        struct kv_dict *d = &((struct kv_set *)AT(s, o->v))->d; /* (a zset's starts so too) */
        n = d->used[0] + d->used[1];
        break;
    }
    default:
        break;
    }
    delete_at(s, link, t, n > 64);
    return true;
}

void kv_delete_obj(struct kv_store *s, kv_obj *o)
{
    kv_delete(s, rec_key(&o->r), o->r.klen);
}

/* A new key object of the type (not linked), with room for vlen bytes
 * after the key; 0 if no memory. */
static uint64_t new_obj(struct kv_store *s, const char *key, size_t klen, uint64_t hv,
                        enum kv_type type, size_t vlen)
{
    if (klen > UINT32_MAX) return 0;
    uint64_t off = heap_alloc(s, sizeof(kv_obj) + klen + vlen);
    if (!off) return 0;
    kv_obj *o = (kv_obj *)AT(s, off);
    rec_set_key(&o->r, hv, key, klen, sizeof(kv_obj));
    o->r.type = (uint8_t)type;
    o->r.level = 0;
    o->expire = 0;
    o->v = 0;
    return off;
}

kv_obj *kv_create(struct kv_store *s, const char *key, size_t klen, enum kv_type type)
{
    uint64_t hv = hash_key(s, key, klen);
    uint64_t off = new_obj(s, key, klen, hv, type, 0);
    if (!off) return NULL;
    kv_obj *o = (kv_obj *)AT(s, off);
    size_t vsize = type == KV_LIST   ? sizeof(struct kv_list)
                   : type == KV_ZSET ? sizeof(struct kv_zset)
                                     : sizeof(struct kv_set);
    uint64_t v = heap_alloc_zero(s, vsize);
    uint64_t header = 0;
    if (v && type == KV_ZSET) {
        size_t hsize = sizeof(struct kv_znode) + ZSL_MAXLEVEL * sizeof(struct kv_zlevel);
        header = heap_alloc_zero(s, hsize);
        if (!header) {
            heap_free(s, v);
            v = 0;
        }
    }
    if (!v) {
        heap_free(s, off);
        return NULL;
    }
    o->v = v;
    if (type == KV_SET || type == KV_HASH) dict_init(&((struct kv_set *)AT(s, v))->d);
    if (type == KV_ZSET) {
        struct kv_zset *z = (struct kv_zset *)AT(s, v);
        dict_init(&z->d);
        z->header = header;
        z->level = 1;
        ((struct kv_znode *)AT(s, header))->r.level = ZSL_MAXLEVEL;
    }
    if (dict_insert(s, &s->h->keys, off, KEYS_MIN) < 0) {
        free_value(s, o);
        heap_free(s, off);
        return NULL;
    }
    touched(s, &o->r, false);
    return o;
}

kv_obj *kv_rename(struct kv_store *s, kv_obj *o, const char *newkey, size_t nklen)
{
    uint64_t hv = hash_key(s, newkey, nklen);
    size_t vlen = o->r.type == KV_STRING ? o->v : 0;
    uint64_t off = new_obj(s, newkey, nklen, hv, (enum kv_type)o->r.type, vlen);
    if (!off) return NULL;
    kv_obj *n = (kv_obj *)AT(s, off);
    n->v = o->v;
    if (o->r.type == KV_STRING)
        memcpy((char *)n + sizeof *n + nklen, (char *)o + sizeof *o + o->r.klen, vlen);
    if (dict_insert(s, &s->h->keys, off, KEYS_MIN) < 0) {
        heap_free(s, off);
        return NULL;
    }
    n->expire = o->expire; /* the count of expiring keys stays: one moves */
    touched(s, &o->r, false);
    touched(s, &n->r, false);
    int t;
    uint64_t *link = dict_link(s, &s->h->keys, rec_key(&o->r), o->r.klen, o->r.hash, &t);
    uint64_t old = *link;
    dict_unlink(&s->h->keys, link, &o->r, t);
    heap_free(s, old);
    return n;
}

struct scan_ctx {
    struct kv_store *s;
    void (*fn)(void *, kv_obj *);
    void *arg;
};

static void scan_key(void *arg, uint64_t e)
{
    struct scan_ctx *x = arg;
    x->fn(x->arg, (kv_obj *)AT(x->s, e));
}

uint64_t kv_scan(struct kv_store *s, uint64_t cursor, void (*fn)(void *arg, kv_obj *o), void *arg)
{
    struct scan_ctx x = {s, fn, arg};
    return dict_scan(s, &s->h->keys, cursor, scan_key, &x);
}

struct expire_ctx {
    struct kv_store *s;
    size_t seen, n, timed, with_ttl;
    int64_t ttl_sum; /* of the keys seen that expire later */
    uint64_t hit[64];
};

static void note_expired(void *arg, uint64_t e)
{
    struct expire_ctx *x = arg;
    kv_obj *o = (kv_obj *)AT(x->s, e);
    x->seen++;
    x->with_ttl += o->expire != 0;
    if (o->expire && o->expire <= x->s->now && x->n < 64) {
        x->hit[x->n++] = e;
    } else if (o->expire > x->s->now) {
        x->ttl_sum += o->expire - x->s->now;
        x->timed++;
    }
}

size_t kv_expire_cycle(struct kv_store *s, size_t max_keys, size_t *with_ttl)
{
    struct kv_hdr *h = s->h;
    size_t deleted = 0;
    struct expire_ctx x = {.s = s};
    while (h->expires && x.seen < max_keys) {
        x.n = 0;
        h->expire_cursor = dict_scan(s, &h->keys, h->expire_cursor, note_expired, &x);
        for (size_t i = 0; i < x.n; i++) {
            kv_obj *o = (kv_obj *)AT(s, x.hit[i]);
            kv_delete(s, rec_key(&o->r), o->r.klen);
            s->expired++;
            deleted++;
        }
        if (h->expire_cursor == 0) break; /* a whole pass */
    }
    /* as Redis: the mean remaining time of the keys sampled, folded into
     * a running estimate (each cycle weighs 1/50) */
    if (!h->expires) {
        s->avg_ttl = 0;
    } else if (x.timed) {
        int64_t avg = x.ttl_sum / (int64_t)x.timed;
        s->avg_ttl = s->avg_ttl ? s->avg_ttl / 50 * 49 + avg / 50 : avg;
    }
    if (with_ttl) *with_ttl = x.with_ttl;
    return deleted;
}

int64_t kv_avg_ttl(const struct kv_store *s)
{
    return s->h->expires ? s->avg_ttl : 0;
}

bool kv_rehashing(const struct kv_store *s)
{
    return s->h->keys.rehash >= 0;
}

bool kv_make_room(struct kv_store *s, uint64_t n)
{
    struct kv_hdr *h = s->h;
    struct kv_dict *d = &h->keys;
    uint64_t size = block_for(n);
    if (n > h->heap_end - h->heap_off || free_lookup(s, size) != 0) return false;
    if (d->rehash >= 0 || s->hold_resize || s->hold_rehash || !d->size[0]) return false;
    /* the table's block and the free blocks either side of it */
    uint64_t tb = d->table[0] - 8, tsize = bsize(s, tb), around = tsize;
    uint64_t prev = *word(s, tb - 8), next = *word(s, tb + tsize);
    if (!(prev & INUSE)) around += prev & ~15ull;
    if (!(next & INUSE)) around += next & ~15ull;
    /* the heap's last block, free and not the table's neighbour: room for
     * the table at its end */
    uint64_t foot = *word(s, h->heap_end - 16), last = foot & ~15ull;
    uint64_t lb = h->heap_end - 8 - last;
    bool last_is_next = lb == tb + tsize;
    if ((foot & INUSE) || last < tsize + BLK_MIN || around - (last_is_next ? tsize : 0) < size)
        return false;
    bin_remove(s, lb, last);
    set_block(s, lb, last - tsize, 0);
    bin_insert(s, lb, last - tsize);
    uint64_t nb = lb + last - tsize;
    set_block(s, nb, tsize, INUSE);
    h->used += tsize;
    h->free -= tsize;
    memset(AT(s, nb + 8), 0, d->size[0] * 8);
    d->table[1] = nb + 8;
    d->size[1] = d->size[0];
    d->used[1] = 0;
    d->rehash = 0;
    while (d->rehash >= 0) dict_rehash(s, d, 1 << 16); /* (frees the old table) */
    return free_lookup(s, size) != 0;
}

bool kv_cron(struct kv_store *s)
{
    dict_rehash(s, &s->h->keys, 100);
    dict_maybe_shrink(s, &s->h->keys, KEYS_MIN);
    return s->h->keys.rehash >= 0 && !s->hold_rehash;
}

/* ---- strings ---------------------------------------------------------- */
static char *str_data(kv_obj *o)
{
    return (char *)o + sizeof *o + o->r.klen;
}

kv_obj *kv_str_set(struct kv_store *s, const char *key, size_t klen, const char *val, size_t vlen,
                   bool keep_ttl)
{
    uint64_t hv = hash_key(s, key, klen);
    int t;
    uint64_t *link = dict_link(s, &s->h->keys, key, klen, hv, &t);
    if (link) {
        uint64_t off = *link;
        kv_obj *o = (kv_obj *)AT(s, off);
        int64_t expire = keep_ttl ? o->expire : 0;
        if (o->r.type == KV_STRING && heap_usable(s, off) >= sizeof *o + klen + vlen) {
            memmove(str_data(o), val, vlen); /* val may be the old value's bytes */
            o->v = vlen;
            heap_shrink(s, off, sizeof *o + klen + vlen);
        } else {
            uint64_t n = new_obj(s, key, klen, hv, KV_STRING, vlen);
            if (!n) return NULL;
            kv_obj *no = (kv_obj *)AT(s, n);
            memcpy(str_data(no), val, vlen);
            no->v = vlen;
            no->expire = o->expire;
            no->r.next = o->r.next;
            *link = n;
            free_value(s, o);
            heap_free(s, off);
            o = no;
        }
        kv_set_expire(s, o, expire);
        touched(s, &o->r, false);
        return o;
    }
    uint64_t n = new_obj(s, key, klen, hv, KV_STRING, vlen);
    if (!n) return NULL;
    kv_obj *o = (kv_obj *)AT(s, n);
    memcpy(str_data(o), val, vlen);
    o->v = vlen;
    if (dict_insert(s, &s->h->keys, n, KEYS_MIN) < 0) {
        heap_free(s, n);
        return NULL;
    }
    touched(s, &o->r, false);
    return o;
}

void kv_str_get(const kv_obj *o, const char **val, size_t *vlen)
{
    *val = (const char *)o + sizeof *o + o->r.klen;
    *vlen = o->v;
}

kv_obj *kv_str_resize(struct kv_store *s, kv_obj *o, size_t len, char **data)
{
    uint64_t off = OFF(s, o), need = sizeof *o + o->r.klen + len;
    if (need > heap_usable(s, off) && !heap_grow(s, off, need)) {
        /* grow by half again, so that appending is amortized O(1) */
        uint64_t cap = need + need / 2;
        uint64_t n = heap_alloc(s, cap);
        if (!n) n = heap_alloc(s, need);
        if (!n) return NULL;
        memcpy(AT(s, n), o, sizeof *o + o->r.klen + (o->v < len ? o->v : len));
        int t;
        uint64_t *link = dict_link(s, &s->h->keys, rec_key(&o->r), o->r.klen, o->r.hash, &t);
        *link = n;
        heap_free(s, off);
        o = (kv_obj *)AT(s, n);
    }
    if (len > o->v) memset(str_data(o) + o->v, 0, len - o->v);
    o->v = len;
    *data = str_data(o);
    touched(s, &o->r, false);
    return o;
}

/* ---- lists ------------------------------------------------------------ */
static struct kv_lnode *lnode(struct kv_store *s, uint64_t off)
{
    return off ? (struct kv_lnode *)AT(s, off) : NULL;
}

size_t kv_list_len(struct kv_store *s, const kv_obj *o)
{
    return list_of(s, o)->len;
}

int kv_list_push(struct kv_store *s, kv_obj *o, bool tail, const char *v, size_t n)
{
    uint64_t off = heap_alloc(s, sizeof(struct kv_lnode) + n);
    if (!off) return -1;
    struct kv_list *l = list_of(s, o);
    struct kv_lnode *e = lnode(s, off);
    e->len = n;
    memcpy(e->data, v, n);
    if (tail) {
        e->prev = l->tail;
        e->next = 0;
        if (l->tail)
            lnode(s, l->tail)->next = off;
        else
            l->head = off;
        l->tail = off;
    } else {
        e->next = l->head;
        e->prev = 0;
        if (l->head)
            lnode(s, l->head)->prev = off;
        else
            l->tail = off;
        l->head = off;
    }
    l->len++;
    touched(s, &o->r, false);
    return 0;
}

kv_lnode *kv_list_at(struct kv_store *s, kv_obj *o, long long index)
{
    struct kv_list *l = list_of(s, o);
    if (index < 0) index += (long long)l->len;
    if (index < 0 || (uint64_t)index >= l->len) return NULL;
    uint64_t e;
    if ((uint64_t)index <= l->len / 2) {
        e = l->head;
        while (index--) e = lnode(s, e)->next;
    } else {
        e = l->tail;
        for (uint64_t k = l->len - 1 - (uint64_t)index; k; k--) e = lnode(s, e)->prev;
    }
    return lnode(s, e);
}

kv_lnode *kv_list_next(struct kv_store *s, kv_lnode *n)
{
    return lnode(s, n->next);
}

kv_lnode *kv_list_prev(struct kv_store *s, kv_lnode *n)
{
    return lnode(s, n->prev);
}

void kv_lnode_get(const kv_lnode *n, const char **v, size_t *len)
{
    *v = n->data;
    *len = n->len;
}

void kv_list_remove(struct kv_store *s, kv_obj *o, kv_lnode *n)
{
    struct kv_list *l = list_of(s, o);
    if (n->prev)
        lnode(s, n->prev)->next = n->next;
    else
        l->head = n->next;
    if (n->next)
        lnode(s, n->next)->prev = n->prev;
    else
        l->tail = n->prev;
    l->len--;
    heap_free(s, OFF(s, n));
    touched(s, &o->r, false);
}

int kv_list_set(struct kv_store *s, kv_obj *o, kv_lnode *n, const char *v, size_t len)
{
    uint64_t off = OFF(s, n);
    if (heap_usable(s, off) >= sizeof *n + len) { /* in place */
        memmove(n->data, v, len);
        n->len = len;
        heap_shrink(s, off, sizeof *n + len);
        touched(s, &o->r, false);
        return 0;
    }
    uint64_t noff = heap_alloc(s, sizeof *n + len);
    if (!noff) return -1;
    struct kv_list *l = list_of(s, o);
    struct kv_lnode *e = lnode(s, noff);
    e->prev = n->prev;
    e->next = n->next;
    e->len = len;
    memcpy(e->data, v, len);
    if (n->prev)
        lnode(s, n->prev)->next = noff;
    else
        l->head = noff;
    if (n->next)
        lnode(s, n->next)->prev = noff;
    else
        l->tail = noff;
    heap_free(s, off);
    touched(s, &o->r, false);
    return 0;
}

int kv_list_insert(struct kv_store *s, kv_obj *o, kv_lnode *n, bool after, const char *v,
                   size_t len)
{
    uint64_t off = heap_alloc(s, sizeof(struct kv_lnode) + len);
    if (!off) return -1;
    struct kv_list *l = list_of(s, o);
    struct kv_lnode *e = lnode(s, off);
    uint64_t noff = OFF(s, n);
    e->len = len;
    memcpy(e->data, v, len);
    if (after) {
        e->prev = noff;
        e->next = n->next;
        if (n->next)
            lnode(s, n->next)->prev = off;
        else
            l->tail = off;
        n->next = off;
    } else {
        e->next = noff;
        e->prev = n->prev;
        if (n->prev)
            lnode(s, n->prev)->next = off;
        else
            l->head = off;
        n->prev = off;
    }
    l->len++;
    touched(s, &o->r, false);
    return 0;
}

/* ---- sets ------------------------------------------------------------- */
static struct kv_dict *dict_of(struct kv_store *s, const kv_obj *o)
{
    return (struct kv_dict *)AT(s, o->v); /* the first member of kv_set and kv_zset */
}

size_t kv_set_card(struct kv_store *s, const kv_obj *o)
{
    return dict_count(dict_of(s, o));
}

int kv_set_add(struct kv_store *s, kv_obj *o, const char *m, size_t n)
{
    struct kv_dict *d = dict_of(s, o);
    uint64_t hv = hash_key(s, m, n);
    if (dict_find(s, d, m, n, hv)) return 0;
    if (n > UINT32_MAX) return -1;
    uint64_t off = heap_alloc(s, sizeof(struct kv_rec) + n);
    if (!off) return -1;
    rec_set_key(rec(s, off), hv, m, n, sizeof(struct kv_rec));
    if (dict_insert(s, d, off, DICT_MIN) < 0) {
        heap_free(s, off);
        return -1;
    }
    touched(s, &o->r, false);
    return 1;
}

static bool dict_remove(struct kv_store *s, struct kv_dict *d, const char *m, size_t n)
{
    int t;
    uint64_t *link = dict_link(s, d, m, n, hash_key(s, m, n), &t);
    if (!link) return false;
    uint64_t off = *link;
    dict_unlink(d, link, rec(s, off), t);
    heap_free(s, off);
    dict_maybe_shrink(s, d, DICT_MIN);
    return true;
}

bool kv_set_rem(struct kv_store *s, kv_obj *o, const char *m, size_t n)
{
    if (!dict_remove(s, dict_of(s, o), m, n)) return false;
    touched(s, &o->r, false);
    return true;
}

bool kv_set_has(struct kv_store *s, kv_obj *o, const char *m, size_t n)
{
    return dict_find(s, dict_of(s, o), m, n, hash_key(s, m, n)) != 0;
}

bool kv_set_random(struct kv_store *s, kv_obj *o, const char **m, size_t *n)
{
    uint64_t e = dict_random(s, dict_of(s, o));
    if (!e) return false;
    *m = rec_key(rec(s, e));
    *n = rec(s, e)->klen;
    return true;
}

struct member_ctx {
    struct kv_store *s;
    void (*fn)(void *, const char *, size_t);
    void *arg;
};

static void scan_member(void *arg, uint64_t e)
{
    struct member_ctx *x = arg;
    struct kv_rec *r = rec(x->s, e);
    x->fn(x->arg, rec_key(r), r->klen);
}

uint64_t kv_set_scan(struct kv_store *s, kv_obj *o, uint64_t cursor,
                     void (*fn)(void *arg, const char *m, size_t n), void *arg)
{
    struct member_ctx x = {s, fn, arg};
    return dict_scan(s, dict_of(s, o), cursor, scan_member, &x);
}

/* ---- hashes ----------------------------------------------------------- */
size_t kv_hash_len(struct kv_store *s, const kv_obj *o)
{
    return dict_count(dict_of(s, o));
}

static char *field_value(struct kv_field *f)
{
    return (char *)f + sizeof *f + f->r.klen;
}

int kv_hash_set(struct kv_store *s, kv_obj *o, const char *f, size_t fn, const char *v, size_t vn)
{
    struct kv_dict *d = dict_of(s, o);
    uint64_t hv = hash_key(s, f, fn);
    int t;
    uint64_t *link = dict_link(s, d, f, fn, hv, &t);
    if (link && heap_usable(s, *link) >= sizeof(struct kv_field) + fn + vn) {
        struct kv_field *e = (struct kv_field *)AT(s, *link);
        memmove(field_value(e), v, vn);
        e->vlen = vn;
        heap_shrink(s, *link, sizeof(struct kv_field) + fn + vn);
        touched(s, &o->r, false);
        return 0;
    }
    if (fn > UINT32_MAX) return -1;
    uint64_t off = heap_alloc(s, sizeof(struct kv_field) + fn + vn);
    if (!off) return -1;
    struct kv_field *e = (struct kv_field *)AT(s, off);
    rec_set_key(&e->r, hv, f, fn, sizeof *e);
    e->vlen = vn;
    memcpy(field_value(e), v, vn);
    if (link) { /* in the old one's place */
        uint64_t old = *link;
        e->r.next = rec(s, old)->next;
        *link = off;
        heap_free(s, old);
        touched(s, &o->r, false);
        return 0;
    }
    if (dict_insert(s, d, off, DICT_MIN) < 0) {
        heap_free(s, off);
        return -1;
    }
    touched(s, &o->r, false);
    return 1;
}

bool kv_hash_get(struct kv_store *s, kv_obj *o, const char *f, size_t fn, const char **v,
                 size_t *vn)
{
    uint64_t e = dict_find(s, dict_of(s, o), f, fn, hash_key(s, f, fn));
    if (!e) return false;
    struct kv_field *x = (struct kv_field *)AT(s, e);
    *v = field_value(x);
    *vn = x->vlen;
    return true;
}

bool kv_hash_del(struct kv_store *s, kv_obj *o, const char *f, size_t fn)
{
    if (!dict_remove(s, dict_of(s, o), f, fn)) return false;
    touched(s, &o->r, false);
    return true;
}

struct field_ctx {
    struct kv_store *s;
    void (*fn)(void *, const char *, size_t, const char *, size_t);
    void *arg;
};

static void scan_field(void *arg, uint64_t e)
{
    struct field_ctx *x = arg;
    struct kv_field *f = (struct kv_field *)AT(x->s, e);
    x->fn(x->arg, rec_key(&f->r), f->r.klen, field_value(f), f->vlen);
}

uint64_t kv_hash_scan(struct kv_store *s, kv_obj *o, uint64_t cursor,
                      void (*fn)(void *arg, const char *f, size_t fn, const char *v, size_t vn),
                      void *arg)
{
    struct field_ctx x = {s, fn, arg};
    return dict_scan(s, dict_of(s, o), cursor, scan_field, &x);
}

/* ---- sorted sets ------------------------------------------------------ */
/* Redis's skip list (t_zset.c), in offsets: the header node has every
 * level; lv[i].span counts the level-0 steps a forward link skips, so a
 * member's rank is the sum of the spans walked to reach it. */
static struct kv_zset *zset_of(struct kv_store *s, const kv_obj *o)
{
    return (struct kv_zset *)AT(s, o->v);
}

static struct kv_znode *znode(struct kv_store *s, uint64_t off)
{
    return off ? (struct kv_znode *)AT(s, off) : NULL;
}

static int member_cmp(const struct kv_znode *z, const char *m, size_t n)
{
    size_t zn = z->r.klen, k = zn < n ? zn : n;
    int c = memcmp(rec_key(&z->r), m, k);
    if (c) return c;
    return zn < n ? -1 : zn > n ? 1 : 0;
}

/* Whether z comes before (score, m). */
static bool zless(const struct kv_znode *z, double score, const char *m, size_t n)
{
    return z->score < score || (z->score == score && member_cmp(z, m, n) < 0);
}

static unsigned random_level(struct kv_store *s)
{
    unsigned level = 1;
    while ((rnd(s) & 0xffff) < 0x4000 && level < ZSL_MAXLEVEL) level++;
    return level;
}

size_t kv_zset_card(struct kv_store *s, const kv_obj *o)
{
    return zset_of(s, o)->length;
}

static void zsl_insert(struct kv_store *s, struct kv_zset *z, uint64_t xoff)
{
    struct kv_znode *x = znode(s, xoff), *hd = znode(s, z->header);
    const char *m = rec_key(&x->r);
    size_t n = x->r.klen;
    uint64_t update[ZSL_MAXLEVEL], rank[ZSL_MAXLEVEL];
    struct kv_znode *p = hd;
    for (int i = (int)z->level - 1; i >= 0; i--) {
        rank[i] = i == (int)z->level - 1 ? 0 : rank[i + 1];
        while (p->lv[i].fwd && zless(znode(s, p->lv[i].fwd), x->score, m, n)) {
            rank[i] += p->lv[i].span;
            p = znode(s, p->lv[i].fwd);
        }
        update[i] = OFF(s, p);
    }
    unsigned level = x->r.level;
    if (level > z->level) {
        for (unsigned i = (unsigned)z->level; i < level; i++) {
            rank[i] = 0;
            update[i] = z->header;
            hd->lv[i].span = z->length;
        }
        z->level = level;
    }
    for (unsigned i = 0; i < level; i++) {
        struct kv_znode *u = znode(s, update[i]);
        x->lv[i].fwd = u->lv[i].fwd;
        u->lv[i].fwd = xoff;
        x->lv[i].span = u->lv[i].span - (rank[0] - rank[i]);
        u->lv[i].span = (rank[0] - rank[i]) + 1;
    }
    for (unsigned i = level; i < z->level; i++) znode(s, update[i])->lv[i].span++;
    x->backward = update[0] == z->header ? 0 : update[0];
    if (x->lv[0].fwd)
        znode(s, x->lv[0].fwd)->backward = xoff;
    else
        z->tail = xoff;
    z->length++;
}

/* Takes x (present) out of the skip list. */
static void zsl_delete(struct kv_store *s, struct kv_zset *z, struct kv_znode *x)
{
    const char *m = rec_key(&x->r);
    size_t n = x->r.klen;
    uint64_t xoff = OFF(s, x), update[ZSL_MAXLEVEL];
    struct kv_znode *p = znode(s, z->header);
    for (int i = (int)z->level - 1; i >= 0; i--) {
        while (p->lv[i].fwd && zless(znode(s, p->lv[i].fwd), x->score, m, n))
            p = znode(s, p->lv[i].fwd);
        update[i] = OFF(s, p);
    }
    for (unsigned i = 0; i < z->level; i++) {
        struct kv_znode *u = znode(s, update[i]);
        if (u->lv[i].fwd == xoff) {
            u->lv[i].span += x->lv[i].span - 1;
            u->lv[i].fwd = x->lv[i].fwd;
        } else {
            u->lv[i].span -= 1;
        }
    }
    if (x->lv[0].fwd)
        znode(s, x->lv[0].fwd)->backward = x->backward;
    else
        z->tail = x->backward;
    struct kv_znode *hd = znode(s, z->header);
    while (z->level > 1 && hd->lv[z->level - 1].fwd == 0) z->level--;
    z->length--;
}

bool kv_zset_score(struct kv_store *s, kv_obj *o, const char *m, size_t n, double *score)
{
    uint64_t e = dict_find(s, &zset_of(s, o)->d, m, n, hash_key(s, m, n));
    if (!e) return false;
    *score = znode(s, e)->score;
    return true;
}

int kv_zset_add(struct kv_store *s, kv_obj *o, const char *m, size_t n, double score)
{
    struct kv_zset *z = zset_of(s, o);
    uint64_t hv = hash_key(s, m, n);
    int t;
    uint64_t *link = dict_link(s, &z->d, m, n, hv, &t);
    if (link && znode(s, *link)->score == score) return 0;
    if (n > UINT32_MAX) return -1;
    unsigned level = random_level(s);
    size_t koff = sizeof(struct kv_znode) + level * sizeof(struct kv_zlevel);
    uint64_t off = heap_alloc(s, koff + n);
    if (!off) return -1;
    struct kv_znode *x = znode(s, off);
    rec_set_key(&x->r, hv, m, n, koff);
    x->r.type = 0;
    x->r.level = (uint8_t)level;
    x->score = score;
    x->backward = 0;
    memset(x->lv, 0, level * sizeof(struct kv_zlevel));
    if (link) { /* a new score: the new node takes the old one's place */
        uint64_t old = *link;
        x->r.next = rec(s, old)->next;
        *link = off;
        zsl_delete(s, z, znode(s, old));
        heap_free(s, old);
        zsl_insert(s, z, off);
        touched(s, &o->r, false);
        return 0;
    }
    if (dict_insert(s, &z->d, off, DICT_MIN) < 0) {
        heap_free(s, off);
        return -1;
    }
    zsl_insert(s, z, off);
    touched(s, &o->r, false);
    return 1;
}

bool kv_zset_rem(struct kv_store *s, kv_obj *o, const char *m, size_t n)
{
    struct kv_zset *z = zset_of(s, o);
    int t;
    uint64_t *link = dict_link(s, &z->d, m, n, hash_key(s, m, n), &t);
    if (!link) return false;
    uint64_t off = *link;
    dict_unlink(&z->d, link, rec(s, off), t);
    zsl_delete(s, z, znode(s, off));
    heap_free(s, off);
    dict_maybe_shrink(s, &z->d, DICT_MIN);
    touched(s, &o->r, false);
    return true;
}

long long kv_zset_rank(struct kv_store *s, kv_obj *o, const char *m, size_t n)
{
    struct kv_zset *z = zset_of(s, o);
    uint64_t e = dict_find(s, &z->d, m, n, hash_key(s, m, n));
    if (!e) return -1;
    double score = znode(s, e)->score;
    uint64_t rank = 0;
    struct kv_znode *p = znode(s, z->header);
    for (int i = (int)z->level - 1; i >= 0; i--) {
        while (p->lv[i].fwd) {
            struct kv_znode *f = znode(s, p->lv[i].fwd);
            if (!(zless(f, score, m, n) || p->lv[i].fwd == e)) break;
            rank += p->lv[i].span;
            p = f;
        }
        if (OFF(s, p) == e) return (long long)rank - 1;
    }
    return -1;
}

kv_znode *kv_zset_at(struct kv_store *s, kv_obj *o, size_t rank)
{
    struct kv_zset *z = zset_of(s, o);
    if (rank >= z->length) return NULL;
    uint64_t want = rank + 1, traversed = 0;
    struct kv_znode *p = znode(s, z->header);
    for (int i = (int)z->level - 1; i >= 0; i--) {
        while (p->lv[i].fwd && traversed + p->lv[i].span <= want) {
            traversed += p->lv[i].span;
            p = znode(s, p->lv[i].fwd);
        }
        if (traversed == want) return p;
    }
    return NULL;
}

kv_znode *kv_zset_first_from(struct kv_store *s, kv_obj *o, double min, bool exclusive)
{
    struct kv_zset *z = zset_of(s, o);
    struct kv_znode *p = znode(s, z->header);
    for (int i = (int)z->level - 1; i >= 0; i--)
        while (p->lv[i].fwd) {
            double sc = znode(s, p->lv[i].fwd)->score;
            if (exclusive ? sc > min : sc >= min) break;
            p = znode(s, p->lv[i].fwd);
        }
    return znode(s, p->lv[0].fwd);
}

/* As kv_zset_first_from, by the members' bytes (Redis's zslFirstInLexRange
 * descends the same way). */
kv_znode *kv_zset_first_lex(struct kv_store *s, kv_obj *o, const char *m, size_t n, bool exclusive)
{
    struct kv_zset *z = zset_of(s, o);
    struct kv_znode *p = znode(s, z->header);
    for (int i = (int)z->level - 1; i >= 0; i--)
        while (p->lv[i].fwd) {
            int c = member_cmp(znode(s, p->lv[i].fwd), m, n);
            if (exclusive ? c > 0 : c >= 0) break;
            p = znode(s, p->lv[i].fwd);
        }
    return znode(s, p->lv[0].fwd);
}

kv_znode *kv_zset_next(struct kv_store *s, kv_znode *z)
{
    return znode(s, z->lv[0].fwd);
}

kv_znode *kv_zset_prev(struct kv_store *s, kv_znode *z)
{
    return znode(s, z->backward);
}

void kv_znode_get(const kv_znode *z, const char **m, size_t *n, double *score)
{
    *m = rec_key(&z->r);
    *n = z->r.klen;
    *score = z->score;
}

struct znode_ctx {
    struct kv_store *s;
    void (*fn)(void *, const char *, size_t, double);
    void *arg;
};

static void scan_znode(void *arg, uint64_t e)
{
    struct znode_ctx *x = arg;
    struct kv_znode *z = znode(x->s, e);
    x->fn(x->arg, rec_key(&z->r), z->r.klen, z->score);
}

uint64_t kv_zset_scan(struct kv_store *s, kv_obj *o, uint64_t cursor,
                      void (*fn)(void *arg, const char *m, size_t n, double score), void *arg)
{
    struct znode_ctx x = {s, fn, arg};
    return dict_scan(s, &zset_of(s, o)->d, cursor, scan_znode, &x);
}

bool kv_zset_random(struct kv_store *s, kv_obj *o, const char **m, size_t *n, double *score)
{
    uint64_t e = dict_random(s, &zset_of(s, o)->d);
    if (!e) return false;
    kv_znode_get(znode(s, e), m, n, score);
    return true;
}

bool kv_hash_random(struct kv_store *s, kv_obj *o, const char **f, size_t *fn, const char **v,
                    size_t *vn)
{
    uint64_t e = dict_random(s, dict_of(s, o));
    if (!e) return false;
    struct kv_field *x = (struct kv_field *)AT(s, e);
    *f = rec_key(&x->r);
    *fn = x->r.klen;
    *v = field_value(x);
    *vn = x->vlen;
    return true;
}
