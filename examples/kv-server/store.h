/* examples/kv-server/store.h - a key-value store that lives entirely in one
 * memory area, so a checkpoint of the area is a checkpoint of the data.
 *
 * Everything inside the area is addressed by offsets from its start, so an
 * image restores into an area mapped anywhere.  Layout: a header, an
 * open-addressing hash table of entry offsets, then a heap of entries
 * allocated in power-of-two size classes with free lists.
 */
#ifndef KV_STORE_H
#define KV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kv_store;

/* Formats the area (len bytes) as an empty store. */
struct kv_store *kv_format(void *area, size_t len);
/* Opens a store in an area that holds one (after a restore); NULL if the
 * area does not hold a valid store. */
struct kv_store *kv_open(void *area, size_t len);

/* Values: pointers into the area, valid until the next change. */
bool kv_get(struct kv_store *s, const char *key, size_t klen, const char **val, size_t *vlen);
/* Returns 0, or -1 when the store is full. */
int kv_set(struct kv_store *s, const char *key, size_t klen, const char *val, size_t vlen);
bool kv_del(struct kv_store *s, const char *key, size_t klen);
uint64_t kv_count(const struct kv_store *s);
void kv_flush(struct kv_store *s);
/* Bytes of the heap in use. */
uint64_t kv_used(const struct kv_store *s);

#endif
