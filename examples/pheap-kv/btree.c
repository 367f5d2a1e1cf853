/* examples/pheap-kv/btree.c - the B+tree of btree.h.  Nothing here knows
 * about files, logs or swizzling: the nodes are C structs whose pointer
 * fields are declared to the store once (kv_open), and every change is a
 * store to memory inside the caller's transaction.  A leaf holds its
 * values of up to INL bytes itself (a get reads one node, a put of such a
 * value writes one); a longer value is an object of its own. */
#include "btree.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <trapkit/error.h>

enum { FAN = 63, LEAF = KV_LEAF_ENTRIES, INL = 104 };

struct leaf;
struct inner {
    uint32_t n, pad; /* keys; children n + 1 */
    uint64_t pad2;
    unsigned char key[FAN][KV_KEY]; /* key[i]: the least key under child[i + 1] */
    void *child[FAN + 1];           /* inner nodes, or leaves at the last level */
};
struct leaf {
    uint32_t n, pad;
    struct leaf *next;
    unsigned char key[LEAF][KV_KEY];
    struct val *big[LEAF]; /* a value longer than INL, else NULL */
    uint16_t len[LEAF];    /* an inline value's length */
    uint16_t pad2;
    unsigned char inl[LEAF][INL];
};
_Static_assert(sizeof(struct leaf) <= 2048, "a leaf is one object of the store");
struct val {
    uint32_t len;
    unsigned char data[];
};
struct kvroot {
    void *top;       /* a leaf when height is 1 */
    uint64_t height; /* levels, leaves included */
    uint64_t count;
};

struct kv {
    tk_ph *ph;
    tk_ph_type_t t_inner, t_leaf, t_root;
    struct kvroot *root;
};

static void pad_key(unsigned char out[KV_KEY], const void *key, size_t klen)
{
    memset(out, 0, KV_KEY);
    if (key) memcpy(out, key, klen < KV_KEY ? klen : KV_KEY);
}

kv *kv_open(tk_ph *ph)
{
    kv *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->ph = ph;
    size_t inner_ptrs[FAN + 1], leaf_ptrs[LEAF + 1], root_ptrs[] = {offsetof(struct kvroot, top)};
    for (int i = 0; i <= FAN; i++) inner_ptrs[i] = offsetof(struct inner, child) + 8 * (size_t)i;
    leaf_ptrs[0] = offsetof(struct leaf, next);
    for (int i = 0; i < LEAF; i++) leaf_ptrs[i + 1] = offsetof(struct leaf, big) + 8 * (size_t)i;
    if (tk_ph_type(ph, "kv_inner", sizeof(struct inner), inner_ptrs, FAN + 1, &m->t_inner) ||
        tk_ph_type(ph, "kv_leaf", sizeof(struct leaf), leaf_ptrs, LEAF + 1, &m->t_leaf) ||
        tk_ph_type(ph, "kv_root", sizeof(struct kvroot), root_ptrs, 1, &m->t_root))
        goto fail;
    m->root = tk_ph_root(ph);
    if (!m->root) {
        if (tk_ph_begin(ph)) goto fail;
        struct kvroot *r = tk_ph_alloc(ph, m->t_root, 1);
        struct leaf *l = r ? tk_ph_alloc(ph, m->t_leaf, 1) : NULL;
        if (!l || tk_ph_set_root(ph, r)) {
            tk_ph_abort(ph);
            goto fail;
        }
        r->top = l;
        r->height = 1;
        if (tk_ph_commit(ph)) goto fail;
        m->root = r;
    }
    return m;
fail:
    free(m);
    return NULL;
}

void kv_close(kv *m)
{
    free(m);
}

uint64_t kv_count(kv *m)
{
    return m->root->count;
}

uint64_t kv_leaves(kv *m)
{
    void *p = m->root->top;
    for (uint64_t h = m->root->height; h > 1; h--) p = ((struct inner *)p)->child[0];
    uint64_t n = 0;
    for (struct leaf *l = p; l; l = l->next) n++;
    return n;
}

/* keys compare as bytes: as two big-endian words */
static inline int keycmp(const unsigned char *a, const unsigned char *b)
{
    uint64_t a0, a1, b0, b1;
    memcpy(&a0, a, 8);
    memcpy(&b0, b, 8);
    if (a0 != b0) return __builtin_bswap64(a0) < __builtin_bswap64(b0) ? -1 : 1;
    memcpy(&a1, a + 8, 8);
    memcpy(&b1, b + 8, 8);
    if (a1 != b1) return __builtin_bswap64(a1) < __builtin_bswap64(b1) ? -1 : 1;
    return 0;
}

/* the first i with key[i] > k (inner: the child to follow) */
static unsigned upper(const unsigned char (*keys)[KV_KEY], unsigned n, const unsigned char *k)
{
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (keycmp(keys[mid], k) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* the first i with key[i] >= k */
static unsigned lower(const unsigned char (*keys)[KV_KEY], unsigned n, const unsigned char *k)
{
    unsigned lo = 0, hi = n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        if (keycmp(keys[mid], k) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Asks for the cache lines a search of node p reads, all at once: the
 * search's own loads depend on each other, so each would otherwise wait
 * for the one before it to come from memory.  A leaf: its header, keys,
 * big and len (the first 6 lines); an inner node: all its keys. */
static inline void prefetch_node(const void *p, bool leaf)
{
    const char *c = p;
    unsigned lines = leaf ? 6 : (unsigned)(offsetof(struct inner, child) / 64);
    for (unsigned i = 0; i < lines; i++) __builtin_prefetch(c + 64 * i);
}

static struct leaf *find_leaf(kv *m, const unsigned char *k)
{
    void *p = m->root->top;
    for (uint64_t h = m->root->height; h > 1; h--) {
        struct inner *in = p;
        p = in->child[upper((const unsigned char(*)[KV_KEY])in->key, in->n, k)];
        prefetch_node(p, h == 2);
    }
    return p;
}

const void *kv_get(kv *m, const void *key, size_t klen, size_t *vlen)
{
    unsigned char k[KV_KEY];
    pad_key(k, key, klen);
    struct leaf *l = find_leaf(m, k);
    unsigned i = lower((const unsigned char(*)[KV_KEY])l->key, l->n, k);
    if (i == l->n || memcmp(l->key[i], k, KV_KEY)) return NULL;
    if (l->big[i]) {
        if (vlen) *vlen = l->big[i]->len;
        return l->big[i]->data;
    }
    if (vlen) *vlen = l->len[i];
    return l->inl[i];
}

/* Entry i of l gets the value (inline, or an object of its own): 0 or
 * -ENOSPC.  (Its old value, if any, is the caller's to free.) */
static int set_val(kv *m, struct leaf *l, unsigned i, const void *v, size_t len);

/* Moves n entries of a leaf from src[s] to dst[d] (memmove: they may overlap). */
static void move_entries(struct leaf *dst, unsigned d, struct leaf *src, unsigned s, unsigned n)
{
    memmove(dst->key[d], src->key[s], (size_t)n * KV_KEY);
    memmove(&dst->big[d], &src->big[s], (size_t)n * sizeof src->big[0]);
    memmove(&dst->len[d], &src->len[s], (size_t)n * sizeof src->len[0]);
    memmove(dst->inl[d], src->inl[s], (size_t)n * INL);
}

static int set_val(kv *m, struct leaf *l, unsigned i, const void *v, size_t len)
{
    if (len <= INL) {
        l->big[i] = NULL;
        l->len[i] = (uint16_t)len;
        memcpy(l->inl[i], v, len);
        return 0;
    }
    struct val *x = tk_ph_alloc(m->ph, TK_PH_BYTES, sizeof *x + len);
    if (!x) return -ENOSPC;
    x->len = (uint32_t)len;
    memcpy(x->data, v, len);
    l->big[i] = x;
    l->len[i] = 0;
    return 0;
}

/* Inserts into the subtree p of height h; on a split, *sep and *right say
 * what the parent must add.  1 added, 0 replaced, or a negative errno.
 * last: p is the rightmost node of its level.
 *
 * A full node splits in half, except where a key goes past the end of the
 * rightmost node (keys added in ascending order, as a bulk load does):
 * then the node stays full and the new key starts the node to its right,
 * so that such a load fills its pages (half-full ones would double the
 * store), as LMDB and SQLite split. */
static int insert(kv *m, void *p, uint64_t h, bool last, const unsigned char *k, const void *v,
                  size_t vlen, unsigned char *sep, void **right)
{
    *right = NULL;
    if (h == 1) {
        struct leaf *l = p;
        unsigned i = lower((const unsigned char(*)[KV_KEY])l->key, l->n, k);
        if (i < l->n && !memcmp(l->key[i], k, KV_KEY)) {
            struct val *old = l->big[i];
            int rc = set_val(m, l, i, v, vlen);
            if (rc) return rc;
            if (old) tk_ph_free(m->ph, old);
            return 0;
        }
        if (l->n == LEAF) { /* split: the upper half goes right */
            struct leaf *r = tk_ph_alloc(m->ph, m->t_leaf, 1);
            if (!r) return -ENOSPC;
            bool append = last && i == LEAF;
            unsigned keep = append ? LEAF : LEAF / 2 + 1;
            r->n = LEAF - keep;
            move_entries(r, 0, l, keep, r->n);
            l->n = keep;
            r->next = l->next;
            l->next = r;
            *right = r;
            if (append) { /* k starts the new leaf */
                memcpy(sep, k, KV_KEY);
                l = r;
                i = 0;
            } else {
                memcpy(sep, r->key[0], KV_KEY);
                if (i > keep || (i == keep && memcmp(k, r->key[0], KV_KEY) > 0)) {
                    l = r;
                    i -= keep;
                }
            }
        }
        move_entries(l, i + 1, l, i, l->n - i);
        memcpy(l->key[i], k, KV_KEY);
        int rc = set_val(m, l, i, v, vlen);
        if (rc) return rc;
        l->n++;
        return 1;
    }
    struct inner *in = p;
    unsigned i = upper((const unsigned char(*)[KV_KEY])in->key, in->n, k);
    unsigned char csep[KV_KEY];
    void *cright;
    int rc = insert(m, in->child[i], h - 1, last && i == in->n, k, v, vlen, csep, &cright);
    if (rc < 0 || !cright) return rc;
    /* the child split: csep and cright go in at i */
    if (in->n == FAN) {
        struct inner *r = tk_ph_alloc(m->ph, m->t_inner, 1);
        if (!r) return -ENOSPC;
        /* left keeps keys [0, keep); key[keep] goes up; appending, the
         * right node starts with the last child and the new one */
        unsigned keep = last && i == FAN ? FAN - 1 : FAN / 2;
        memcpy(sep, in->key[keep], KV_KEY);
        r->n = in->n - keep - 1;
        memcpy(r->key, in->key[keep + 1], (size_t)r->n * KV_KEY);
        memcpy(r->child, &in->child[keep + 1], (size_t)(r->n + 1) * sizeof r->child[0]);
        in->n = keep;
        *right = r;
        if (i > keep) {
            in = r;
            i -= keep + 1;
        }
    }
    memmove(in->key[i + 1], in->key[i], (size_t)(in->n - i) * KV_KEY);
    memmove(&in->child[i + 2], &in->child[i + 1], (size_t)(in->n - i) * sizeof in->child[0]);
    memcpy(in->key[i], csep, KV_KEY);
    in->child[i + 1] = cright;
    in->n++;
    return rc;
}

int kv_put(kv *m, const void *key, size_t klen, const void *val, size_t vlen)
{
    if (klen > KV_KEY || vlen > UINT32_MAX) return -EINVAL;
    unsigned char k[KV_KEY], sep[KV_KEY];
    pad_key(k, key, klen);
    void *right;
    struct kvroot *r = m->root;
    int rc = insert(m, r->top, r->height, true, k, val, vlen, sep, &right);
    if (rc < 0) return rc;
    if (right) { /* the root split */
        struct inner *top = tk_ph_alloc(m->ph, m->t_inner, 1);
        if (!top) return -ENOSPC;
        top->n = 1;
        memcpy(top->key[0], sep, KV_KEY);
        top->child[0] = r->top;
        top->child[1] = right;
        r->top = top;
        r->height++;
    }
    r->count += (uint64_t)rc;
    return 0;
}

int kv_del(kv *m, const void *key, size_t klen)
{
    unsigned char k[KV_KEY];
    pad_key(k, key, klen);
    struct leaf *l = find_leaf(m, k);
    unsigned i = lower((const unsigned char(*)[KV_KEY])l->key, l->n, k);
    if (i == l->n || memcmp(l->key[i], k, KV_KEY)) return 0;
    if (l->big[i]) {
        int rc = tk_ph_free(m->ph, l->big[i]);
        if (rc) return rc;
    }
    move_entries(l, i, l, i + 1, l->n - i - 1);
    l->n--;
    l->big[l->n] = NULL;
    m->root->count--;
    return 1;
}

size_t kv_scan(kv *m, const void *from, size_t flen, size_t n,
               int (*f)(const unsigned char key[KV_KEY], const void *val, size_t vlen, void *arg),
               void *arg)
{
    unsigned char k[KV_KEY];
    pad_key(k, from, from ? flen : 0);
    struct leaf *l = find_leaf(m, k);
    unsigned i = from ? lower((const unsigned char(*)[KV_KEY])l->key, l->n, k) : 0;
    size_t calls = 0;
    for (; l; l = l->next, i = 0)
        for (; i < l->n; i++) {
            calls++;
            const void *v = l->big[i] ? (const void *)l->big[i]->data : l->inl[i];
            size_t len = l->big[i] ? l->big[i]->len : l->len[i];
            if (f(l->key[i], v, len, arg) || (n && calls == n)) return calls;
        }
    return calls;
}
