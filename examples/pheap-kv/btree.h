/* examples/pheap-kv/btree.h - an ordered key-value map kept in a trapkit
 * persistent heap (trapkit/pheap.h): a B+tree written as ordinary C structs
 * with ordinary pointers.  Keys are up to 16 bytes (compared as bytes, a
 * shorter key padded with zeros), values any length.  Every change is made
 * inside a transaction the caller opens (tk_ph_begin ... tk_ph_commit). */
#ifndef PHEAP_KV_BTREE_H
#define PHEAP_KV_BTREE_H

#include <stddef.h>
#include <stdint.h>
#include <trapkit/pheap.h>

#define KV_KEY 16

typedef struct kv kv;

/* Opens (creating if missing) the map held by the store's root.  NULL with
 * tk_last_error() on failure. */
kv *kv_open(tk_ph *ph);
void kv_close(kv *m);

/* The value of key: its bytes (valid until the next change) and length,
 * or NULL if absent. */
const void *kv_get(kv *m, const void *key, size_t klen, size_t *vlen);
/* Sets key to value (in a transaction): 0, or a negative errno. */
int kv_put(kv *m, const void *key, size_t klen, const void *val, size_t vlen);
/* Removes key (in a transaction): 1 removed, 0 absent, or a negative errno. */
int kv_del(kv *m, const void *key, size_t klen);
/* Calls f for each key from `from` (NULL: the first) in order, at most n
 * (0: all) or until f returns non-zero; the number of calls. */
size_t kv_scan(kv *m, const void *from, size_t flen, size_t n,
               int (*f)(const unsigned char key[KV_KEY], const void *val, size_t vlen, void *arg),
               void *arg);
uint64_t kv_count(kv *m);
/* How full the tree is: its leaves, and the entries one holds.  Keys
 * added in ascending order fill every leaf but the last. */
#define KV_LEAF_ENTRIES 15
uint64_t kv_leaves(kv *m);

#endif
