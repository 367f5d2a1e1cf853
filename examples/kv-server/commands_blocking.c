/* examples/kv-server/commands_blocking.c - the blocking pops: BLPOP, BRPOP,
 * BLMOVE, BRPOPLPUSH, BZPOPMIN, BZPOPMAX, BLMPOP, BZMPOP, with LMPOP and
 * ZMPOP (their forms that never block), as redis-server 7.0's.
 *
 * A blocking pop takes from the first of its keys that holds a list (a
 * sorted set) at once; when none does, the client blocks: it runs nothing
 * more, its next commands waiting in its input, until it is served, its
 * timeout passes (a null array, *-1) or CLIENT UNBLOCK ends its wait.
 * Inside EXEC it never blocks: it answers as a timeout would (BLMOVE and
 * BRPOPLPUSH a null bulk, as Redis's).  The event loop goes on serving the
 * others meanwhile (net.c: a blocked client is read, so that its end is
 * seen, but its commands are not run).
 *
 * What clients wait for is in process memory, not in the store: for each
 * key the clients blocked on it, in the order they blocked.  The store's
 * touch hook (store.h) tells of every write to such a key, which is then
 * ready; after the command that wrote it (after EXEC, for those inside
 * one), each ready key that holds a list (a sorted set) serves its
 * clients of that type in order, an element (COUNT of them for BLMPOP,
 * BZMPOP) each, until it is empty (and deleted).  A client served by
 * BLMOVE pushes onto its destination, which may serve others in turn; one
 * whose destination holds another type gets WRONGTYPE, the source left as
 * it was.  A key deleted, or given another type, while clients wait is
 * only a key they still wait for.  Redis 7.0 marks a key ready only when
 * it is created: where a key a client waits for is overwritten (not
 * created) with a list or sorted set - SORT ... STORE or ZUNIONSTORE over
 * a string - Redis leaves the client waiting; here it is served.
 *
 * Writes counted (rdb_changes_since_last_save) as Redis 7.0 counts them:
 * a pop made at once counts as POP's; a client served later counts
 * nothing for BLPOP, BRPOP, BLMOVE and BRPOPLPUSH (the push counted), and
 * an element popped for BZPOPMIN, BZPOPMAX, BLMPOP and BZMPOP.
 *
 * The timeout: seconds as a float (Redis's string2ld), rounded up to a
 * millisecond; 0 waits for ever, as does a timeout too far to be reached;
 * one that is negative, or whose milliseconds overflow, is refused
 * ("timeout is negative", as Redis's conversion makes it).  Timeouts are
 * kept in a heap: the event loop wakes for the earliest.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "net.h"
#include "server.h"

enum bop { B_POP, B_MPOP, B_MOVE, B_ZPOP, B_ZMPOP, B_WAIT };

/* A client waiting on a key: on the key's queue. */
struct bwait {
    struct bwait *prev, *next;
    struct conn *c;
    struct strent *k;
};

struct blocked {
    enum bop op;
    bool tail;        /* the end popped (RIGHT), or the highest score (MAX) */
    bool to_tail;     /* B_MOVE: the end pushed */
    long long count;  /* B_MPOP, B_ZMPOP */
    int64_t deadline; /* mono_ms; 0: none */
    size_t heap_i;
    char *dst; /* B_MOVE's destination */
    size_t dstn;
    size_t n;
    struct bwait w[]; /* a wait on each of its keys, once each */
};

static struct strtab keys;                          /* the keys clients wait for: queues of bwait */
static struct strent *ready, **ready_tail = &ready; /* keys written since, in order */
static struct conn **heap;                          /* clients with a timeout, the earliest first */
static size_t heap_n, heap_cap;
static uint64_t nblocked;

uint64_t blocking_clients(void)
{
    return nblocked;
}

bool blocking_has_ready(void)
{
    return ready != NULL;
}

void blocking_key_touched(const char *key, size_t klen)
{
    struct strent *k = strtab_find(&keys, key, klen);
    if (!k || k->flag) return;
    k->flag = true;
    k->link = NULL;
    *ready_tail = k;
    ready_tail = &k->link;
}

/* ---- the timeouts' heap ------------------------------------------------ */
static int64_t deadline_at(size_t i)
{
    return heap[i]->blk->deadline;
}

static void heap_set(size_t i, struct conn *c)
{
    heap[i] = c;
    c->blk->heap_i = i;
}

static void heap_up(size_t i)
{
    struct conn *c = heap[i];
    while (i > 0 && heap[(i - 1) / 2]->blk->deadline > c->blk->deadline) {
        heap_set(i, heap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    heap_set(i, c);
}

static void heap_down(size_t i)
{
    struct conn *c = heap[i];
    for (;;) {
        size_t l = 2 * i + 1, m = l;
        if (l >= heap_n) break;
        if (l + 1 < heap_n && deadline_at(l + 1) < deadline_at(l)) m = l + 1;
        if (deadline_at(m) >= c->blk->deadline) break;
        heap_set(i, heap[m]);
        i = m;
    }
    heap_set(i, c);
}

static void heap_remove(struct conn *c)
{
    size_t i = c->blk->heap_i;
    if (i == SIZE_MAX) return;
    c->blk->heap_i = SIZE_MAX;
    struct conn *last = heap[--heap_n];
    if (i == heap_n) return;
    heap_set(i, last);
    heap_up(i);
    heap_down(last->blk->heap_i);
}

int64_t blocking_next_deadline(void)
{
    return heap_n ? deadline_at(0) : 0;
}

/* ---- blocking and unblocking ------------------------------------------- */
static void unblock(struct conn *c)
{
    struct blocked *b = c->blk;
    if (!b) return;
    for (size_t i = 0; i < b->n; i++) {
        struct bwait *w = &b->w[i];
        struct strent *k = w->k;
        DLIST_UNLINK(w, k->head, k->tail, prev, next);
        if (--k->count) continue;
        if (k->flag) /* off the ready list before it goes */
            for (struct strent **l = &ready; *l; l = &(*l)->link)
                if (*l == k) {
                    *l = k->link;
                    if (!*l) ready_tail = l;
                    break;
                }
        strtab_del(&keys, k);
    }
    heap_remove(c);
    free(b->dst);
    free(b);
    c->blk = NULL;
    nblocked--;
    touch_hook_update();
}

void blocking_forget(struct conn *c)
{
    unblock(c);
}

/* Blocks the client on the keys (each once, in their order) with what it
 * is to do once one is ready; false after replying -OOM. */
static bool block(struct conn *c, const struct arg *k, size_t n, int64_t deadline, enum bop op,
                  bool tail, bool to_tail, long long count, const struct arg *dst)
{
    struct blocked *b = calloc(1, sizeof *b + n * sizeof(struct bwait));
    if (!b) goto oom;
    *b = (struct blocked){.op = op,
                          .tail = tail,
                          .to_tail = to_tail,
                          .count = count,
                          .deadline = deadline,
                          .heap_i = SIZE_MAX};
    if (dst) {
        if (!(b->dst = malloc(dst->n ? dst->n : 1))) {
            free(b);
            goto oom;
        }
        memcpy(b->dst, dst->p, dst->n);
        b->dstn = dst->n;
    }
    if (deadline && heap_n == heap_cap) {
        size_t cap = heap_cap ? heap_cap * 2 : 64;
        struct conn **h = realloc(heap, cap * sizeof *h);
        if (!h) {
            free(b->dst);
            free(b);
            goto oom;
        }
        heap = h;
        heap_cap = cap;
    }
    c->blk = b;
    nblocked++;
    for (size_t i = 0; i < n; i++) {
        struct strent *e = strtab_add(&keys, k[i].p, k[i].n);
        if (!e) {
            unblock(c);
            goto oom;
        }
        if (e->tail && ((struct bwait *)e->tail)->c == c) continue; /* a key named twice */
        struct bwait *w = &b->w[b->n++];
        *w = (struct bwait){.prev = e->tail, .c = c, .k = e};
        if (e->tail)
            ((struct bwait *)e->tail)->next = w;
        else
            e->head = w;
        e->tail = w;
        e->count++;
    }
    if (deadline) {
        heap_n++;
        heap_set(heap_n - 1, c);
        heap_up(heap_n - 1);
    }
    touch_hook_update();
    return true;
oom:
    out_oom(c);
    return false;
}

/* The null reply of a blocking command that does not block (inside EXEC),
 * or times out. */
static void out_null_array(struct conn *c)
{
    out_str(c, "*-1\r\n");
}

/* A timeout's reply: a null array, or WAIT's count of replicas (none) */
static void out_timed_out(struct conn *c)
{
    if (c->blk->op == B_WAIT) return out_int(c, 0);
    out_null_array(c);
}

void blocking_timeouts(int64_t now)
{
    while (heap_n && deadline_at(0) <= now) {
        struct conn *c = heap[0];
        out_timed_out(c);
        unblock(c);
        net_wake(c);
    }
}

bool blocking_unblock(struct conn *c, bool error)
{
    if (!c->blk) return false;
    if (error)
        out_err(c, "UNBLOCKED client unblocked via CLIENT UNBLOCK");
    else
        out_timed_out(c);
    unblock(c);
    net_wake(c);
    return true;
}

/* ---- popping ----------------------------------------------------------- */
/* Pops from the list (sorted set) o under key for the command op, and
 * replies: BLPOP's [key, element], BLMPOP's [key, [elements]], BZPOPMIN's
 * [key, member, score], BZMPOP's [key, [[member, score], ...]].  A change
 * counted for each element, but for BLPOP served later (served). */
static void pop_reply(struct conn *c, const struct arg *key, kv_obj *o, enum bop op, bool tail,
                      long long count, bool served)
{
    bool zset = op == B_ZPOP || op == B_ZMPOP;
    size_t len = zset ? kv_zset_card(server.kv, o) : kv_list_len(server.kv, o);
    size_t n = op == B_POP || op == B_ZPOP       ? 1
               : (unsigned long long)count < len ? (size_t)count
                                                 : len;
    out_array(c, op == B_ZPOP ? 3 : 2);
    out_bulk(c, key->p, key->n);
    if (op == B_MPOP || op == B_ZMPOP) out_array(c, n);
    for (size_t i = 0; i < n; i++) {
        if (zset) {
            kv_znode *z = kv_zset_at(server.kv, o, tail ? kv_zset_card(server.kv, o) - 1 : 0);
            const char *m;
            size_t mn;
            double d;
            kv_znode_get(z, &m, &mn, &d);
            if (op == B_ZMPOP) out_array(c, 2);
            out_bulk(c, m, mn);
            out_double(c, d);
            kv_zset_rem(server.kv, o, m, mn);
        } else {
            list_pop_out(c, o, tail);
        }
    }
    if (!(served && op == B_POP)) server.changes += n;
    drop_if_empty(o, zset ? kv_zset_card(server.kv, o) : kv_list_len(server.kv, o));
}

/* ---- serving ----------------------------------------------------------- */
static enum kv_type op_type(enum bop op)
{
    return op == B_ZPOP || op == B_ZMPOP ? KV_ZSET : op == B_WAIT ? KV_NONE : KV_LIST;
}

/* The clients waiting on k, in the order they blocked, while it holds
 * elements of their type. */
static void serve_key(struct strent *k)
{
    const struct arg key = {k->s, k->len};
    kv_obj *o = lookup_key(&key);
    if (!o) return;
    enum kv_type t = kv_obj_type(o);
    for (struct bwait *w = k->head, *next; w; w = next) {
        next = w->next; /* (another client's: unblocking this one leaves it) */
        struct conn *c = w->c;
        struct blocked *b = c->blk;
        if (op_type(b->op) != t || c->dead) continue;
        bool last = !next; /* k goes with its last waiter */
        if (b->op == B_MOVE) {
            struct arg a[3] = {{"blmove", 6}, key, {b->dst, b->dstn}};
            uint64_t changes = server.changes;
            lmove_generic(c, a, b->tail, b->to_tail);
            server.changes = changes; /* (Redis 7.0 counts no change for it) */
        } else {
            pop_reply(c, &key, o, b->op, b->tail, b->count, true);
        }
        unblock(c);
        net_wake(c);
        if (last) return;
        if (!(o = lookup_key(&key)) || kv_obj_type(o) != t) return;
    }
}

void blocking_serve_ready(void)
{
    while (ready) {
        struct strent *k = ready;
        ready = k->link;
        if (!ready) ready_tail = &ready;
        k->flag = false;
        serve_key(k);
    }
}

/* ---- the commands ------------------------------------------------------ */
/* Redis's getTimeoutFromObjectOrReply: seconds (ms: milliseconds, an
 * integer), a deadline in mono_ms (0: none). */
static bool get_timeout_unit(struct conn *c, const struct arg *a, int64_t *deadline, bool in_ms)
{
    long long t = LLONG_MIN;
    if (in_ms) {
        if (!parse_ll(a, &t)) {
            out_err(c, "ERR timeout is not an integer or out of range");
            return false;
        }
    } else {
        long double s;
        if (!parse_ldouble(a->p, a->n, &s)) {
            out_err(c, "ERR timeout is not a float or out of range");
            return false;
        }
        /* in ms, rounded up (Redis's ceill); a conversion that overflows
         * gives x86's LLONG_MIN, as in Redis */
        long double ms = s * 1000.0L;
        if (ms > -9.2233720368547758e18L && ms < 9.2233720368547758e18L) {
            t = (long long)ms; /* (towards zero) */
            if ((long double)t < ms) t++;
        }
    }
    if (t < 0) {
        out_err(c, "ERR timeout is negative");
        return false;
    }
    int64_t now = mono_ms();
    *deadline = t == 0 || t > INT64_MAX - now ? 0 : now + t;
    return true;
}

static bool get_timeout(struct conn *c, const struct arg *a, int64_t *deadline)
{
    return get_timeout_unit(c, a, deadline, false);
}

/* The pop of BLPOP, BRPOP, BLMPOP, LMPOP, BZPOPMIN, BZPOPMAX, BZMPOP,
 * ZMPOP over the keys: from the first that exists (WRONGTYPE if it holds
 * another type), else a null array, or the client blocks (timeout, unless
 * NULL: the forms that never block). */
static void pop_or_block(struct conn *c, const struct arg *k, size_t n, const struct arg *timeout,
                         enum bop op, bool tail, long long count)
{
    int64_t deadline = 0;
    if (timeout && !get_timeout(c, timeout, &deadline)) return;
    for (size_t i = 0; i < n; i++) {
        kv_obj *o;
        if (!lookup_typed(c, &k[i], op_type(op), &o)) return;
        if (o) return pop_reply(c, &k[i], o, op, tail, count, false);
    }
    if (!timeout || in_exec) return out_null_array(c);
    block(c, k, n, deadline, op, tail, false, count, NULL);
}

/* BLPOP key [key ...] timeout, BRPOP */
void cmd_blpop(struct conn *c, struct arg *a, size_t argc)
{
    pop_or_block(c, &a[1], argc - 2, &a[argc - 1], B_POP, false, 1);
}

void cmd_brpop(struct conn *c, struct arg *a, size_t argc)
{
    pop_or_block(c, &a[1], argc - 2, &a[argc - 1], B_POP, true, 1);
}

/* BZPOPMIN key [key ...] timeout, BZPOPMAX */
void cmd_bzpopmin(struct conn *c, struct arg *a, size_t argc)
{
    pop_or_block(c, &a[1], argc - 2, &a[argc - 1], B_ZPOP, false, 1);
}

void cmd_bzpopmax(struct conn *c, struct arg *a, size_t argc)
{
    pop_or_block(c, &a[1], argc - 2, &a[argc - 1], B_ZPOP, true, 1);
}

/* LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count], ZMPOP ... MIN|MAX,
 * and BLMPOP timeout ..., BZMPOP timeout ...: numkeys, the end and COUNT
 * parsed first (Redis's lmpopGenericCommand), then the timeout. */
static void mpop_generic(struct conn *c, struct arg *a, size_t argc, size_t numkeys_at, bool zset)
{
    long long numkeys, count = -1;
    if (!parse_ll(&a[numkeys_at], &numkeys) || numkeys < 1)
        return out_err(c, "ERR numkeys should be greater than 0");
    if ((unsigned long long)numkeys >= argc - numkeys_at - 1) return out_syntax(c);
    size_t where = numkeys_at + (size_t)numkeys + 1;
    bool tail = arg_is(&a[where], zset ? "MAX" : "RIGHT");
    if (!tail && !arg_is(&a[where], zset ? "MIN" : "LEFT")) return out_syntax(c);
    for (size_t j = where + 1; j < argc; j++) {
        if (count == -1 && arg_is(&a[j], "COUNT") && j + 1 < argc) {
            if (!parse_ll(&a[++j], &count) || count < 1)
                return out_err(c, "ERR count should be greater than 0");
        } else {
            return out_syntax(c);
        }
    }
    if (count == -1) count = 1;
    pop_or_block(c, &a[numkeys_at + 1], (size_t)numkeys, numkeys_at == 2 ? &a[1] : NULL,
                 zset ? B_ZMPOP : B_MPOP, tail, count);
}

void cmd_lmpop(struct conn *c, struct arg *a, size_t argc)
{
    mpop_generic(c, a, argc, 1, false);
}

void cmd_blmpop(struct conn *c, struct arg *a, size_t argc)
{
    mpop_generic(c, a, argc, 2, false);
}

void cmd_zmpop(struct conn *c, struct arg *a, size_t argc)
{
    mpop_generic(c, a, argc, 1, true);
}

void cmd_bzmpop(struct conn *c, struct arg *a, size_t argc)
{
    mpop_generic(c, a, argc, 2, true);
}

/* BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout, BRPOPLPUSH
 * source destination timeout: LMOVE's when the source holds a list (the
 * destination's type checked then), else a block on the source (its
 * destination checked once served); inside EXEC a null bulk. */
static void blmove_generic(struct conn *c, struct arg *a, bool from_tail, bool to_tail,
                           const struct arg *timeout)
{
    int64_t deadline;
    if (!get_timeout(c, timeout, &deadline)) return;
    kv_obj *src;
    if (!lookup_typed(c, &a[1], KV_LIST, &src)) return;
    if (src) return lmove_generic(c, a, from_tail, to_tail);
    if (in_exec) return out_nil(c);
    block(c, &a[1], 1, deadline, B_MOVE, from_tail, to_tail, 1, &a[2]);
}

void cmd_blmove(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    bool from_tail = arg_is(&a[3], "RIGHT"), to_tail = arg_is(&a[4], "RIGHT");
    if ((!from_tail && !arg_is(&a[3], "LEFT")) || (!to_tail && !arg_is(&a[4], "LEFT")))
        return out_syntax(c);
    blmove_generic(c, a, from_tail, to_tail, &a[5]);
}

void cmd_brpoplpush(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    blmove_generic(c, a, true, false, &a[3]);
}

/* WAIT numreplicas timeout: a server without replicas acknowledges with
 * none - 0 at once when no replica is asked for (or inside EXEC), else once
 * the timeout (milliseconds; 0 for ever) passes, as Redis's would with no
 * replica connected. */
void cmd_wait(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long numreplicas;
    int64_t deadline;
    if (!get_ll(c, &a[1], &numreplicas)) return;
    if (!get_timeout_unit(c, &a[2], &deadline, true)) return;
    if (numreplicas <= 0 || in_exec) return out_int(c, 0);
    block(c, NULL, 0, deadline, B_WAIT, false, false, 0, NULL);
}
