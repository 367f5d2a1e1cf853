/* examples/kv-server/store.c - the in-area key-value store. */
#include "store.h"

#include <string.h>

#define KV_MAGIC 0x31305254534b564bull /* "KVSTR01" */
#define NCLASS 27                      /* 32 B << 0..26 */
#define EMPTY 0
#define TOMB 1

struct kv_hdr {
    uint64_t magic, len, nbuckets, count, tombs;
    uint64_t table_off, heap_off, heap_top, heap_end, used;
    uint64_t free_head[NCLASS];
};

struct kv_entry {
    uint64_t hash;
    uint32_t klen, vlen;
    uint32_t cls, pad;
    char data[]; /* key, then value */
};

static struct kv_hdr *hdr(const struct kv_store *s)
{
    return (struct kv_hdr *)s;
}

static uint64_t *table(struct kv_store *s)
{
    return (uint64_t *)((char *)s + hdr(s)->table_off);
}

static struct kv_entry *entry(struct kv_store *s, uint64_t off)
{
    return (struct kv_entry *)((char *)s + off);
}

static uint64_t hash_bytes(const char *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (n * 0xff51afd7ed558ccdull);
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
    return h;
}

static unsigned class_of(size_t bytes)
{
    unsigned c = 0;
    while (((size_t)32 << c) < bytes) c++;
    return c;
}

static uint64_t heap_alloc(struct kv_store *s, unsigned c)
{
    struct kv_hdr *h = hdr(s);
    if (c >= NCLASS) return 0;
    uint64_t off = h->free_head[c];
    if (off) {
        memcpy(&h->free_head[c], (char *)s + off, 8);
    } else {
        uint64_t size = (uint64_t)32 << c;
        if (h->heap_top + size > h->heap_end) return 0;
        off = h->heap_top;
        h->heap_top += size;
    }
    h->used += (uint64_t)32 << c;
    return off;
}

static void heap_free(struct kv_store *s, uint64_t off, unsigned c)
{
    struct kv_hdr *h = hdr(s);
    memcpy((char *)s + off, &h->free_head[c], 8);
    h->free_head[c] = off;
    h->used -= (uint64_t)32 << c;
}

struct kv_store *kv_format(void *area, size_t len)
{
    struct kv_hdr *h = area;
    if (len < 1 << 20) return NULL;
    memset(h, 0, sizeof *h);
    uint64_t nb = 1;
    while (nb * 2 <= len / 128) nb *= 2;
    h->magic = KV_MAGIC;
    h->len = len;
    h->nbuckets = nb;
    h->table_off = 4096;
    memset((char *)area + h->table_off, 0, nb * 8);
    h->heap_off = (h->table_off + nb * 8 + 4095) & ~4095ull;
    h->heap_top = h->heap_off;
    h->heap_end = len;
    return area;
}

struct kv_store *kv_open(void *area, size_t len)
{
    struct kv_hdr *h = area;
    if (h->magic != KV_MAGIC || h->len != len || h->nbuckets == 0 ||
        (h->nbuckets & (h->nbuckets - 1)) || h->heap_top > h->heap_end || h->heap_end > len)
        return NULL;
    return area;
}

/* The bucket holding key, or where it would go (*found false). */
static uint64_t *find(struct kv_store *s, const char *key, size_t klen, uint64_t hv, bool *found)
{
    struct kv_hdr *h = hdr(s);
    uint64_t *t = table(s), mask = h->nbuckets - 1, *tomb = NULL;
    for (uint64_t i = hv & mask, n = 0; n < h->nbuckets; i = (i + 1) & mask, n++) {
        if (t[i] == EMPTY) {
            *found = false;
            return tomb ? tomb : &t[i];
        }
        if (t[i] == TOMB) {
            if (!tomb) tomb = &t[i];
            continue;
        }
        struct kv_entry *e = entry(s, t[i]);
        if (e->hash == hv && e->klen == klen && memcmp(e->data, key, klen) == 0) {
            *found = true;
            return &t[i];
        }
    }
    *found = false;
    return tomb;
}

bool kv_get(struct kv_store *s, const char *key, size_t klen, const char **val, size_t *vlen)
{
    bool found;
    uint64_t *b = find(s, key, klen, hash_bytes(key, klen), &found);
    if (!found) return false;
    struct kv_entry *e = entry(s, *b);
    *val = e->data + e->klen;
    *vlen = e->vlen;
    return true;
}

int kv_set(struct kv_store *s, const char *key, size_t klen, const char *val, size_t vlen)
{
    struct kv_hdr *h = hdr(s);
    if (klen > UINT32_MAX || vlen > UINT32_MAX) return -1;
    uint64_t hv = hash_bytes(key, klen);
    bool found;
    uint64_t *b = find(s, key, klen, hv, &found);
    size_t need = sizeof(struct kv_entry) + klen + vlen;
    if (found) {
        struct kv_entry *e = entry(s, *b);
        if (need <= ((size_t)32 << e->cls)) { /* in place */
            memcpy(e->data + klen, val, vlen);
            e->vlen = (uint32_t)vlen;
            return 0;
        }
    } else if (!b || (h->count + h->tombs + 1) * 100 > h->nbuckets * 85) {
        return -1;
    }
    unsigned c = class_of(need);
    uint64_t off = heap_alloc(s, c);
    if (!off) return -1;
    struct kv_entry *e = entry(s, off);
    e->hash = hv;
    e->klen = (uint32_t)klen;
    e->vlen = (uint32_t)vlen;
    e->cls = c;
    memcpy(e->data, key, klen);
    memcpy(e->data + klen, val, vlen);
    if (found) {
        struct kv_entry *old = entry(s, *b);
        heap_free(s, *b, old->cls);
    } else {
        if (*b == TOMB) h->tombs--;
        h->count++;
    }
    *b = off;
    return 0;
}

bool kv_del(struct kv_store *s, const char *key, size_t klen)
{
    bool found;
    uint64_t *b = find(s, key, klen, hash_bytes(key, klen), &found);
    if (!found) return false;
    struct kv_entry *e = entry(s, *b);
    heap_free(s, *b, e->cls);
    *b = TOMB;
    hdr(s)->count--;
    hdr(s)->tombs++;
    return true;
}

uint64_t kv_count(const struct kv_store *s)
{
    return hdr(s)->count;
}

uint64_t kv_used(const struct kv_store *s)
{
    return hdr(s)->used;
}

void kv_flush(struct kv_store *s)
{
    struct kv_hdr *h = hdr(s);
    kv_format(s, h->len);
}
