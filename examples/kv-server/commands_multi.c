/* examples/kv-server/commands_multi.c - transactions: MULTI, EXEC, DISCARD,
 * WATCH, UNWATCH, as Redis 7.0's (its multi.c).
 *
 * After MULTI a client's commands are checked as they come
 * (commands_execute: an unknown command, a wrong arity, SAVE or SHUTDOWN,
 * a write the heap has no room for is refused, and EXEC then fails with
 * EXECABORT) and queued, their arguments copied out of the input buffer.
 * EXEC runs the queue in one call: nothing else runs between its commands
 * in the single-threaded event loop, and a save's snapshot instant, always
 * taken between two commands (persist.h), never falls inside it.  They run
 * with EXEC's clock (as Redis fixes the time inside a transaction: no key
 * expires part way); the memory they need is checked once, for all of
 * them, before the first runs (Redis rejects such an EXEC, with EXECABORT,
 * when it is out of memory).  A BGSAVE inside it is scheduled, as Redis
 * does, to start after it.  The reply is an array of theirs (an error
 * among them for a command that fails as it runs).
 *
 * The queue's memory is bounded as a client's output is: a client whose
 * queued commands pass --client-output-buffer-limit (net.out_hard) is told
 * so and disconnected, its transaction discarded.  A client that
 * disconnects in MULTI has its queue freed.
 *
 * WATCH: the keys every client watches are in one table (in the process's
 * memory, not the store's); the store's touch hook (store.h), set while a
 * key is watched, tells of every change to a key - its value written, its
 * expiry time set or removed, the key deleted by a command or because it
 * expired - and marks the clients watching it, whose EXEC then replies a
 * null array.  A command that changes nothing touches nothing (SADD of a
 * member already there, ZADD XX of a missing member), as in Redis; LTRIM
 * that removes nothing still counts as a change there, and tells the table
 * itself (watch_touch_key).  As in Redis, a key watched after it expired
 * but before it was deleted counts as missing (its deletion changes
 * nothing); a watched key that expires before EXEC makes EXEC fail;
 * FLUSHALL changes the watched keys it deletes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "net.h"
#include "server.h"

/* A queued command: its arguments and their bytes in one block, at a. */
struct queued {
    const struct command *cmd;
    struct arg *a;
    size_t argc;
};

/* A key some client watches, in the table's bucket of its hash. */
struct wkey {
    struct wkey *next;
    struct watch *watchers;
    uint64_t hash;
    size_t klen;
    char key[];
};

/* A client watching a key: on the key's list and on the client's. */
struct watch {
    struct watch *next_of_key, *next_of_conn;
    struct conn *c;
    struct wkey *k;
    bool expired; /* the key had expired, not yet deleted, when watched */
};

static struct {
    struct wkey **b;
    size_t size, n; /* buckets (a power of two, or 0), keys */
} wt;

static uint64_t hash_key(const char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
    return h;
}

/* Where the link to the key's entry is, or the NULL link that ends its
 * bucket. */
static struct wkey **wkey_link(const char *key, size_t klen, uint64_t h)
{
    struct wkey **l = &wt.b[h & (wt.size - 1)];
    while (*l && !((*l)->hash == h && (*l)->klen == klen && !memcmp((*l)->key, key, klen)))
        l = &(*l)->next;
    return l;
}

static struct wkey *wkey_find(const char *key, size_t klen)
{
    return wt.n ? *wkey_link(key, klen, hash_key(key, klen)) : NULL;
}

/* Doubles the table when it holds as many keys as buckets; false if no
 * memory (the table keeps working, with longer chains, unless it has no
 * bucket at all). */
static bool table_grow(void)
{
    if (wt.n < wt.size) return true;
    size_t size = wt.size ? wt.size * 2 : 16;
    struct wkey **b = calloc(size, sizeof *b);
    if (!b) return wt.size > 0;
    for (size_t i = 0; i < wt.size; i++)
        for (struct wkey *k = wt.b[i], *next; k; k = next) {
            next = k->next;
            k->next = b[k->hash & (size - 1)];
            b[k->hash & (size - 1)] = k;
        }
    free(wt.b);
    wt.b = b;
    wt.size = size;
    return true;
}

/* A change to key (deleted: it is being deleted): its watchers' EXEC will
 * fail, except those that watched it expired, for whom its deletion is no
 * change. */
void watch_on_touch(const char *key, size_t klen, bool deleted)
{
    struct wkey *k = wkey_find(key, klen);
    for (struct watch *w = k ? k->watchers : NULL; w; w = w->next_of_key) {
        if (w->expired && deleted) {
            w->expired = false;
            continue;
        }
        w->c->watch_dirty = true;
    }
}

void watch_touch_key(const char *key, size_t klen)
{
    watch_on_touch(key, klen, false);
}

bool watch_any(void)
{
    return wt.n > 0;
}

void watch_touch_flush(void)
{
    for (size_t i = 0; i < wt.size && wt.n; i++)
        for (struct wkey *k = wt.b[i]; k; k = k->next) {
            if (!kv_peek(server.kv, k->key, k->klen)) continue;
            for (struct watch *w = k->watchers; w; w = w->next_of_key) {
                if (w->expired)
                    w->expired = false;
                else
                    w->c->watch_dirty = true;
            }
        }
}

/* false if there was no memory for it */
static bool watch_key(struct conn *c, const struct arg *key)
{
    for (struct watch *w = c->watches; w; w = w->next_of_conn)
        if (w->k->klen == key->n && !memcmp(w->k->key, key->p, key->n)) return true;
    if (!table_grow()) return false;
    uint64_t h = hash_key(key->p, key->n);
    struct wkey **l = wkey_link(key->p, key->n, h);
    struct watch *w = malloc(sizeof *w);
    if (!w) return false;
    if (!*l) {
        struct wkey *k = malloc(sizeof *k + key->n);
        if (!k) {
            free(w);
            return false;
        }
        *k = (struct wkey){.hash = h, .klen = key->n};
        memcpy(k->key, key->p, key->n);
        *l = k;
        wt.n++;
    }
    kv_obj *o = kv_peek(server.kv, key->p, key->n);
    *w = (struct watch){.next_of_key = (*l)->watchers,
                        .next_of_conn = c->watches,
                        .c = c,
                        .k = *l,
                        .expired = o && kv_obj_expired(server.kv, o)};
    (*l)->watchers = w;
    c->watches = w;
    touch_hook_update();
    return true;
}

static void unwatch_all(struct conn *c)
{
    for (struct watch *w = c->watches, *next; w; w = next) {
        next = w->next_of_conn;
        struct wkey *k = w->k;
        struct watch **l = &k->watchers;
        while (*l != w) l = &(*l)->next_of_key;
        *l = w->next_of_key;
        free(w);
        if (!k->watchers) {
            *wkey_link(k->key, k->klen, k->hash) = k->next;
            free(k);
            wt.n--;
        }
    }
    c->watches = NULL;
    c->watch_dirty = false;
    if (!wt.n) touch_hook_update(); /* nothing to tell WATCH */
}

/* ---- the queue --------------------------------------------------------- */
static void free_queue(struct conn *c)
{
    for (size_t i = 0; i < c->queue_n; i++) free(c->queue[i].a);
    free(c->queue);
    c->queue = NULL;
    c->queue_n = c->queue_cap = c->queue_bytes = 0;
}

void multi_flag_error(struct conn *c)
{
    if (c->in_multi) c->multi_error = true;
}

void multi_discard(struct conn *c)
{
    free_queue(c);
    c->in_multi = c->multi_error = false;
    unwatch_all(c);
}

bool multi_queue(struct conn *c, const struct command *cmd, const struct arg *a, size_t argc)
{
    size_t bytes = argc * sizeof(struct arg);
    for (size_t i = 0; i < argc; i++) bytes += a[i].n;
    unsigned long long max = net.out_normal.hard ? net.out_normal.hard : QUEUE_MAX_DEFAULT;
    if (c->queue_bytes + bytes + sizeof(struct queued) > max) {
        fprintf(stderr,
                "kv-server: client %lu disconnected: its transaction's queued commands passed "
                "the limit of %llu bytes (client-output-buffer-limit's normal hard limit, or "
                "256 MiB)\n",
                (unsigned long)c->id, max);
        multi_discard(c);
        out_err(c, "ERR Transaction discarded: its queued commands passed the client output "
                   "buffer limit");
        c->closing = true;
        return false;
    }
    if (c->queue_n == c->queue_cap) {
        size_t cap = c->queue_cap ? c->queue_cap * 2 : 8;
        struct queued *q = realloc(c->queue, cap * sizeof *q);
        if (!q) goto oom;
        c->queue = q;
        c->queue_cap = cap;
    }
    struct arg *v = malloc(bytes ? bytes : 1);
    if (!v) goto oom;
    char *p = (char *)(v + argc);
    for (size_t i = 0; i < argc; i++) {
        memcpy(p, a[i].p, a[i].n);
        v[i] = (struct arg){p, a[i].n};
        p += a[i].n;
    }
    c->queue[c->queue_n++] = (struct queued){cmd, v, argc};
    c->queue_bytes += bytes + sizeof(struct queued);
    return true;
oom:
    multi_flag_error(c);
    out_oom(c);
    return false;
}

/* ---- the commands ------------------------------------------------------ */
void cmd_multi(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    if (c->in_multi) return out_err(c, "ERR MULTI calls can not be nested");
    c->in_multi = true;
    out_ok(c);
}

void cmd_discard(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    if (!c->in_multi) return out_err(c, "ERR DISCARD without MULTI");
    multi_discard(c);
    out_ok(c);
}

void cmd_watch(struct conn *c, struct arg *a, size_t argc)
{
    if (c->in_multi) return out_err(c, "ERR WATCH inside MULTI is not allowed");
    for (size_t i = 1; i < argc; i++)
        if (!watch_key(c, &a[i])) return out_oom(c);
    out_ok(c);
}

void cmd_unwatch(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    unwatch_all(c);
    out_ok(c);
}

/* Whether a key the client watched (not expired then) has expired since:
 * a change, though no command has deleted it yet. */
static bool watched_key_expired(const struct conn *c)
{
    for (const struct watch *w = c->watches; w; w = w->next_of_conn) {
        if (w->expired) continue;
        kv_obj *o = kv_peek(server.kv, w->k->key, w->k->klen);
        if (o && kv_obj_expired(server.kv, o)) return true;
    }
    return false;
}

void cmd_exec(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    if (!c->in_multi) return out_err(c, "ERR EXEC without MULTI");
    uint64_t need = 0;
    for (size_t i = 0; i < c->queue_n; i++)
        if (c->queue[i].cmd->flags & CMD_DENYOOM)
            need += command_needs(c->queue[i].a, c->queue[i].argc);
    if (need && !memory_for(need)) {
        multi_discard(c);
        return out_err(c, "EXECABORT Transaction discarded because of: OOM command not allowed "
                          "when used memory > 'maxmemory'.");
    }
    if (c->multi_error) {
        multi_discard(c);
        return out_err(c, "EXECABORT Transaction discarded because of previous errors.");
    }
    if (c->watch_dirty || watched_key_expired(c)) {
        multi_discard(c);
        return out_str(c, "*-1\r\n");
    }
    /* the queue is the client's no more: the commands run outside MULTI,
     * and no longer watch (their own writes are theirs) */
    struct queued *q = c->queue;
    size_t n = c->queue_n;
    c->queue = NULL;
    c->queue_n = 0;
    multi_discard(c);
    out_array(c, n);
    in_exec = true;
    for (size_t i = 0; i < n; i++) {
        command_run(c, q[i].cmd, q[i].a, q[i].argc);
        free(q[i].a);
    }
    in_exec = false;
    free(q);
}
