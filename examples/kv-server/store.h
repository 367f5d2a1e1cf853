/* examples/kv-server/store.h - a key-value store that lives entirely in one
 * memory area, so a checkpoint of the area is a checkpoint of the data.
 *
 * Everything inside the area is addressed by offsets from its start, never
 * by pointers, so an image restores into an area mapped at any address.
 * Layout: a header page (the allocator's bins, the keyspace's hash table
 * descriptor, counters), then a heap.
 *
 * The heap: blocks with a boundary tag (the block's size and an in-use bit)
 * at both ends, so a freed block merges with free neighbours at once and
 * no two free blocks are ever adjacent; free blocks sit in size bins (exact
 * 16-byte classes below 1 KiB, eight per power of two above), found through
 * a bitmap.  Memory freed by DEL serves any size again; after deleting
 * everything the heap is one free block (and the keyspace's table).
 *
 * Hash tables (the keyspace; each set, hash and sorted set): chained, with
 * power-of-two bucket arrays in the heap, grown when as many entries as
 * buckets and shrunk below 10% fill, rehashed incrementally into a second
 * array (a step per operation, and kv_cron's), as Redis's dict does.  A
 * rehash keeps the order of a bucket's entries that go to the same new
 * bucket and writes a link only where it changes, so most entries' pages
 * are not written (a write is a page the next incremental image holds).  A
 * delete unlinks its entry - there are no tombstones.  A cursor (Redis's
 * reverse-binary one) visits every entry present for a whole iteration at
 * least once, across resizes.
 *
 * Values: strings inline after their key; lists as doubly linked nodes;
 * sets and hashes as hash tables of members (fields with their values);
 * sorted sets as a skip list (Pugh; Redis's, with spans for ranks) whose
 * nodes are also the members of a hash table.  A key's expiry time is kept
 * with it, in absolute unix milliseconds, so it survives a restore.
 *
 * The store's clock (kv_set_now) is what "expired" means: a key whose
 * expiry time is not after it is gone - lookups delete it (lazy expiry), and
 * kv_expire_cycle deletes such keys as it walks the keyspace (active
 * expiry).
 *
 * Errors: -1 (or NULL) from a function that allocates means the heap had no
 * block for it; nothing was changed.  Pointers into the area (values,
 * members, nodes) are valid until the next change to the store.
 *
 * A touch hook (kv_set_touch_hook), when set, is told of every change to a
 * key: its value or expiry time changed, or the key deleted (by a command
 * or because it expired) - for WATCH.  kv_flush tells it nothing: its
 * caller knows every key goes.
 */
#ifndef KV_STORE_H
#define KV_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kv_type { KV_NONE, KV_STRING, KV_LIST, KV_SET, KV_HASH, KV_ZSET };

struct kv_store;
typedef struct kv_obj kv_obj;     /* a key and its value */
typedef struct kv_lnode kv_lnode; /* a list element */
typedef struct kv_znode kv_znode; /* a sorted-set member */

/* Formats the area (len bytes, page-aligned, at least 1 MiB) as an empty
 * store. */
struct kv_store *kv_format(void *area, size_t len);
/* Opens the store an area holds (after a restore); NULL, with *why saying
 * what is wrong, if it holds none of this version. */
struct kv_store *kv_open(void *area, size_t len, const char **why);

/* The time, in unix ms, that expiry is measured against. */
void kv_set_now(struct kv_store *s, int64_t now_ms);
/* While a snapshot runs (hold true), hash tables grow only at five
 * entries per bucket and never shrink, and a rehash under way makes no
 * steps (unless its new table holds five entries per bucket too), as Redis
 * holds them while its save child runs: a rehash writes every bucket array
 * page and entry, which the snapshot must then copy. */
void kv_hold_resize(struct kv_store *s, bool hold);
/* While the store is loaded lazily (hold true), a rehash under way makes no
 * steps and tables resize only as kv_hold_resize holds them: each step
 * reads the entries of buckets spread over the whole store, pages not
 * loaded yet, which a request would wait for; lookups search both tables
 * meanwhile. */
void kv_hold_rehash(struct kv_store *s, bool hold);
/* Keys deleted because they expired, since kv_format/kv_open. */
uint64_t kv_expired_total(const struct kv_store *s);
void kv_reset_expired_total(struct kv_store *s); /* CONFIG RESETSTAT */
/* The touch hook: fn(arg, key, klen, deleted) after a key's value or
 * expiry time changed or was created (deleted false), or as it is deleted
 * (deleted true); NULL: none. */
typedef void kv_touch_fn(void *arg, const char *key, size_t klen, bool deleted);
void kv_set_touch_hook(struct kv_store *s, kv_touch_fn *fn, void *arg);

/* ---- keys */
/* The key's object; NULL if there is none (an expired key is deleted). */
kv_obj *kv_lookup(struct kv_store *s, const char *key, size_t klen);
/* A key chosen at random (expired ones found are deleted), NULL if none. */
kv_obj *kv_random_key(struct kv_store *s);
/* The key's object even if it has expired (nothing is deleted): WATCH
 * tells an expired key from a missing one, as Redis does. */
kv_obj *kv_peek(struct kv_store *s, const char *key, size_t klen);
enum kv_type kv_obj_type(const kv_obj *o);
void kv_obj_key(const kv_obj *o, const char **key, size_t *klen);
/* The expiry time in unix ms, 0 if none. */
int64_t kv_obj_expire(const kv_obj *o);
/* The bytes of the heap the key and its value take (MEMORY USAGE). */
uint64_t kv_obj_bytes(struct kv_store *s, const kv_obj *o);
/* Whether the key has expired (for iterations, which do not delete). */
bool kv_obj_expired(const struct kv_store *s, const kv_obj *o);
/* Sets (when_ms > 0) or removes (0) the expiry time. */
void kv_set_expire(struct kv_store *s, kv_obj *o, int64_t when_ms);
bool kv_delete(struct kv_store *s, const char *key, size_t klen);
void kv_delete_obj(struct kv_store *s, kv_obj *o);
/* Deletes the key as kv_delete, but a value of more than 64 elements (a
 * list, set, hash or sorted set) is only unlinked: its memory stays in use
 * until kv_lazyfree_step frees it (Redis's UNLINK).  False if no such key. */
bool kv_unlink(struct kv_store *s, const char *key, size_t klen);
/* Frees up to `budget` elements of the values kv_unlink left; whether some
 * remain.  The list is in the area: a value unlinked before a snapshot is
 * freed after its restore. */
bool kv_lazyfree_step(struct kv_store *s, long budget);
uint64_t kv_lazyfree_pending(const struct kv_store *s); /* values left to free */
/* Gives o the name newkey (which must not exist), keeping its value and
 * expiry; returns the object under its new name, NULL on no memory. */
kv_obj *kv_rename(struct kv_store *s, kv_obj *o, const char *newkey, size_t nklen);
/* An empty list, set, hash or sorted set under key (which must not exist). */
kv_obj *kv_create(struct kv_store *s, const char *key, size_t klen, enum kv_type type);
uint64_t kv_count(const struct kv_store *s);   /* keys */
uint64_t kv_expires(const struct kv_store *s); /* keys with an expiry time */
uint64_t kv_used(const struct kv_store *s);    /* bytes of the area in use */
uint64_t kv_free(const struct kv_store *s);    /* bytes of the heap free */
void kv_flush(struct kv_store *s);
/* Calls fn with each run of whole pages inside the heap's free blocks
 * (their contents are nobody's: the pages may be dropped). */
void kv_free_pages(struct kv_store *s, void (*fn)(void *addr, size_t len, void *arg), void *arg);
/* Visits the keys of the buckets at cursor; returns the next cursor (0:
 * the iteration is complete).  fn must not change the store. */
uint64_t kv_scan(struct kv_store *s, uint64_t cursor, void (*fn)(void *arg, kv_obj *o), void *arg);
/* Active expiry: looks at up to max_keys keys, deleting the expired;
 * returns how many it deleted, and in *with_ttl (if not NULL) how many of
 * those it looked at had an expiry time (the deleted among them). */
size_t kv_expire_cycle(struct kv_store *s, size_t max_keys, size_t *with_ttl);
/* The mean time to live, in ms, of keys with an expiry time, estimated as
 * Redis does from the keys kv_expire_cycle visits; 0 before its first
 * visit or without such keys (INFO's avg_ttl). */
int64_t kv_avg_ttl(const struct kv_store *s);
/* Background work: a few steps (100 buckets) of the keyspace's incremental
 * rehash; whether it still runs. */
bool kv_cron(struct kv_store *s);
/* Whether the keyspace's table is being rehashed (INFO memory). */
bool kv_rehashing(const struct kv_store *s);
/* Where no free block holds n bytes but the keys' table stands between
 * free blocks that together would (after many deletions, the table placed
 * while the store was full): moves the table to the end of the heap's
 * last free block.  Not while a lookup's link into the table is held, a
 * snapshot runs or a lazy load goes on.  Whether it made the room. */
bool kv_make_room(struct kv_store *s, uint64_t n);

/* ---- strings */
/* Sets key to the string val (replacing any value); keeps the expiry time
 * if keep_ttl, else removes it. */
kv_obj *kv_str_set(struct kv_store *s, const char *key, size_t klen, const char *val, size_t vlen,
                   bool keep_ttl);
void kv_str_get(const kv_obj *o, const char **val, size_t *vlen);
/* Makes the string len bytes long (new bytes are zero), moving it if it
 * must; returns the object and *data its bytes, NULL on no memory. */
kv_obj *kv_str_resize(struct kv_store *s, kv_obj *o, size_t len, char **data);

/* ---- lists */
size_t kv_list_len(struct kv_store *s, const kv_obj *o);
int kv_list_push(struct kv_store *s, kv_obj *o, bool tail, const char *v, size_t n);
/* The element at index (0 first, -1 last), NULL if out of range. */
kv_lnode *kv_list_at(struct kv_store *s, kv_obj *o, long long index);
kv_lnode *kv_list_next(struct kv_store *s, kv_lnode *n);
kv_lnode *kv_list_prev(struct kv_store *s, kv_lnode *n);
void kv_lnode_get(const kv_lnode *n, const char **v, size_t *len);
void kv_list_remove(struct kv_store *s, kv_obj *o, kv_lnode *n);
/* Gives the element n the value v (moving it if it must grow): 0, -1 no
 * memory (n unchanged). */
int kv_list_set(struct kv_store *s, kv_obj *o, kv_lnode *n, const char *v, size_t len);
/* Inserts v before (after: after) the element n: 0, -1 no memory. */
int kv_list_insert(struct kv_store *s, kv_obj *o, kv_lnode *n, bool after, const char *v,
                   size_t len);

/* ---- sets */
size_t kv_set_card(struct kv_store *s, const kv_obj *o);
/* 1 added, 0 already a member, -1 no memory. */
int kv_set_add(struct kv_store *s, kv_obj *o, const char *m, size_t n);
bool kv_set_rem(struct kv_store *s, kv_obj *o, const char *m, size_t n);
bool kv_set_has(struct kv_store *s, kv_obj *o, const char *m, size_t n);
/* A member chosen at random (NULL if empty); valid until the next change. */
bool kv_set_random(struct kv_store *s, kv_obj *o, const char **m, size_t *n);
uint64_t kv_set_scan(struct kv_store *s, kv_obj *o, uint64_t cursor,
                     void (*fn)(void *arg, const char *m, size_t n), void *arg);

/* ---- hashes */
size_t kv_hash_len(struct kv_store *s, const kv_obj *o);
/* 1 a new field, 0 a field updated, -1 no memory. */
int kv_hash_set(struct kv_store *s, kv_obj *o, const char *f, size_t fn, const char *v, size_t vn);
bool kv_hash_get(struct kv_store *s, kv_obj *o, const char *f, size_t fn, const char **v,
                 size_t *vn);
bool kv_hash_del(struct kv_store *s, kv_obj *o, const char *f, size_t fn);
uint64_t kv_hash_scan(struct kv_store *s, kv_obj *o, uint64_t cursor,
                      void (*fn)(void *arg, const char *f, size_t fn, const char *v, size_t vn),
                      void *arg);
/* A field chosen at random, with its value; false if empty. */
bool kv_hash_random(struct kv_store *s, kv_obj *o, const char **f, size_t *fn, const char **v,
                    size_t *vn);

/* ---- sorted sets (by score, then member bytes) */
size_t kv_zset_card(struct kv_store *s, const kv_obj *o);
bool kv_zset_score(struct kv_store *s, kv_obj *o, const char *m, size_t n, double *score);
/* Adds the member or gives it a new score: 1 added, 0 updated, -1 no
 * memory. */
int kv_zset_add(struct kv_store *s, kv_obj *o, const char *m, size_t n, double score);
bool kv_zset_rem(struct kv_store *s, kv_obj *o, const char *m, size_t n);
/* The member's rank (0: lowest score), -1 if it is none. */
long long kv_zset_rank(struct kv_store *s, kv_obj *o, const char *m, size_t n);
/* The member of rank (0: lowest score), NULL if out of range. */
kv_znode *kv_zset_at(struct kv_store *s, kv_obj *o, size_t rank);
/* The first member whose score is >= min (> min if exclusive). */
kv_znode *kv_zset_first_from(struct kv_store *s, kv_obj *o, double min, bool exclusive);
/* The first member whose bytes are >= m (> m if exclusive), searched as if
 * the members were ordered by their bytes: they are when every score is
 * the same, as lexicographic ranges require (with scores that differ the
 * member found is one near the place, as Redis's is unspecified then). */
kv_znode *kv_zset_first_lex(struct kv_store *s, kv_obj *o, const char *m, size_t n, bool exclusive);
kv_znode *kv_zset_next(struct kv_store *s, kv_znode *z);
kv_znode *kv_zset_prev(struct kv_store *s, kv_znode *z);
void kv_znode_get(const kv_znode *z, const char **m, size_t *n, double *score);
/* The members with their scores, as kv_set_scan visits a set's. */
uint64_t kv_zset_scan(struct kv_store *s, kv_obj *o, uint64_t cursor,
                      void (*fn)(void *arg, const char *m, size_t n, double score), void *arg);
/* A member chosen at random, with its score; false if empty. */
bool kv_zset_random(struct kv_store *s, kv_obj *o, const char **m, size_t *n, double *score);

#endif
