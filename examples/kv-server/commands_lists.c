/* examples/kv-server/commands_lists.c - the list commands. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "server.h"

static void push_generic(struct conn *c, struct arg *a, size_t argc, bool tail, bool only_existing)
{
    kv_obj *o;
    if (only_existing) {
        if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
        if (!o) return out_int(c, 0);
    } else {
        lookup_create(c, &a[1], KV_LIST, &o);
        if (!o) return;
    }
    for (size_t i = 2; i < argc; i++) {
        if (kv_list_push(server.kv, o, tail, a[i].p, a[i].n) < 0) {
            drop_if_empty(o, kv_list_len(server.kv, o));
            return out_oom(c);
        }
        server.changes++;
    }
    out_int(c, (long long)kv_list_len(server.kv, o));
}

void cmd_lpush(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, false, false);
}

void cmd_rpush(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, true, false);
}

void cmd_lpushx(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, false, true);
}

void cmd_rpushx(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, true, true);
}

void list_pop_out(struct conn *c, kv_obj *o, bool tail)
{
    kv_lnode *e = kv_list_at(server.kv, o, tail ? -1 : 0);
    const char *v;
    size_t vn;
    kv_lnode_get(e, &v, &vn);
    out_bulk(c, v, vn);
    kv_list_remove(server.kv, o, e);
}

static void pop_generic(struct conn *c, struct arg *a, size_t argc, bool tail)
{
    long long count = 1;
    if (argc > 3) return out_arity_error(c, tail ? "rpop" : "lpop");
    if (argc == 3 && !get_count(c, &a[2], &count)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o) return argc == 3 ? out_str(c, "*-1\r\n") : out_nil(c);
    if (argc == 3 && count == 0) return out_array(c, 0);
    size_t len = kv_list_len(server.kv, o);
    if ((unsigned long long)count > len) count = (long long)len;
    if (argc == 3) out_array(c, (size_t)count);
    for (long long i = 0; i < count; i++) {
        list_pop_out(c, o, tail);
        server.changes++;
    }
    drop_if_empty(o, kv_list_len(server.kv, o));
}

void cmd_lpop(struct conn *c, struct arg *a, size_t argc)
{
    pop_generic(c, a, argc, false);
}

void cmd_rpop(struct conn *c, struct arg *a, size_t argc)
{
    pop_generic(c, a, argc, true);
}

void cmd_lrange(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long start, end;
    if (!get_ll(c, &a[2], &start) || !get_ll(c, &a[3], &end)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o || !clamp_range((long long)kv_list_len(server.kv, o), &start, &end))
        return out_array(c, 0);
    out_array(c, (size_t)(end - start + 1));
    kv_lnode *e = kv_list_at(server.kv, o, start);
    for (long long i = start; i <= end; i++, e = kv_list_next(server.kv, e)) {
        const char *v;
        size_t vn;
        kv_lnode_get(e, &v, &vn);
        out_bulk(c, v, vn);
    }
}

void cmd_llen(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    out_int(c, o ? (long long)kv_list_len(server.kv, o) : 0);
}

void cmd_lindex(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o) return out_nil(c);
    long long i;
    if (!get_ll(c, &a[2], &i)) return;
    kv_lnode *e = kv_list_at(server.kv, o, i);
    if (!e) return out_nil(c);
    const char *v;
    size_t vn;
    kv_lnode_get(e, &v, &vn);
    out_bulk(c, v, vn);
}

/* LSET key index element: the key looked up first, then the index
 * parsed. */
void cmd_lset(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o) return out_err(c, "ERR no such key");
    long long i;
    if (!get_ll(c, &a[2], &i)) return;
    kv_lnode *e = kv_list_at(server.kv, o, i);
    if (!e) return out_err(c, "ERR index out of range");
    if (kv_list_set(server.kv, o, e, a[3].p, a[3].n) < 0) return out_oom(c);
    server.changes++;
    out_ok(c);
}

/* LTRIM key start stop: the elements outside the range removed (all of
 * them if it is empty, and the key with them).  Each removed counts as a
 * change; a trim that removes nothing is still a change to a WATCHer, as
 * in Redis. */
void cmd_ltrim(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long start, end;
    if (!get_ll(c, &a[2], &start) || !get_ll(c, &a[3], &end)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o) return out_ok(c);
    long long len = (long long)kv_list_len(server.kv, o), ltrim, rtrim;
    if (clamp_range(len, &start, &end)) {
        ltrim = start;
        rtrim = len - end - 1;
    } else {
        ltrim = len;
        rtrim = 0;
    }
    for (long long i = 0; i < ltrim; i++) kv_list_remove(server.kv, o, kv_list_at(server.kv, o, 0));
    for (long long i = 0; i < rtrim; i++)
        kv_list_remove(server.kv, o, kv_list_at(server.kv, o, -1));
    watch_touch_key(a[1].p, a[1].n);
    server.changes += (uint64_t)(ltrim + rtrim);
    drop_if_empty(o, kv_list_len(server.kv, o));
    out_ok(c);
}

/* LREM key count element: count > 0 removes the first count equal to
 * element from the head, < 0 from the tail, 0 all. */
void cmd_lrem(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long count;
    if (!get_ll(c, &a[2], &count)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o) return out_int(c, 0);
    bool tail = count < 0;
    unsigned long long want = tail ? 0ull - (unsigned long long)count : (unsigned long long)count;
    long long removed = 0;
    kv_lnode *e = kv_list_at(server.kv, o, tail ? -1 : 0);
    while (e) {
        kv_lnode *next = tail ? kv_list_prev(server.kv, e) : kv_list_next(server.kv, e);
        const char *v;
        size_t vn;
        kv_lnode_get(e, &v, &vn);
        if (vn == a[3].n && memcmp(v, a[3].p, vn) == 0) {
            kv_list_remove(server.kv, o, e); /* (next is another node: still valid) */
            removed++;
            if (want && (unsigned long long)removed == want) break;
        }
        e = next;
    }
    server.changes += (uint64_t)removed;
    drop_if_empty(o, kv_list_len(server.kv, o));
    out_int(c, removed);
}

/* LINSERT key BEFORE|AFTER pivot element: the new length, -1 if there is
 * no pivot, 0 if there is no key. */
void cmd_linsert(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    bool after = arg_is(&a[2], "AFTER");
    if (!after && !arg_is(&a[2], "BEFORE")) return out_syntax(c);
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o) return out_int(c, 0);
    for (kv_lnode *e = kv_list_at(server.kv, o, 0); e; e = kv_list_next(server.kv, e)) {
        const char *v;
        size_t vn;
        kv_lnode_get(e, &v, &vn);
        if (vn != a[3].n || memcmp(v, a[3].p, vn) != 0) continue;
        if (kv_list_insert(server.kv, o, e, after, a[4].p, a[4].n) < 0) return out_oom(c);
        server.changes++;
        return out_int(c, (long long)kv_list_len(server.kv, o));
    }
    out_int(c, -1);
}

/* LPOS key element [RANK rank] [COUNT num] [MAXLEN len], as Redis's
 * lposCommand: a negative rank searches from the tail; COUNT 0 is every
 * match; MAXLEN 0 the whole list.  (RANK of LLONG_MIN is Redis's
 * -LONG_MIN: still negative, so every match from the tail on qualifies and
 * COUNT's test overflows - no limit.) */
void cmd_lpos(struct conn *c, struct arg *a, size_t argc)
{
    long long rank = 1, count = -1, maxlen = 0;
    for (size_t j = 3; j < argc; j++) {
        bool more = j + 1 < argc;
        if (arg_is(&a[j], "RANK") && more) {
            if (!get_ll(c, &a[++j], &rank)) return;
            if (rank == 0)
                return out_err(c, "ERR RANK can't be zero: use 1 to start from the first match, "
                                  "2 from the second ... or use negative to start from the end "
                                  "of the list");
        } else if (arg_is(&a[j], "COUNT") && more) {
            if (!parse_ll(&a[++j], &count) || count < 0)
                return out_err(c, "ERR COUNT can't be negative");
        } else if (arg_is(&a[j], "MAXLEN") && more) {
            if (!parse_ll(&a[++j], &maxlen) || maxlen < 0)
                return out_err(c, "ERR MAXLEN can't be negative");
        } else {
            return out_syntax(c);
        }
    }
    bool tail = rank < 0, unlimited = rank == LLONG_MIN;
    if (unlimited)
        rank = 1;
    else if (tail)
        rank = -rank;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o) return count != -1 ? out_array(c, 0) : out_nil(c);
    /* the matches' indexes first (the reply's length comes before them) */
    long long len = (long long)kv_list_len(server.kv, o), index = 0, matches = 0, found = -1;
    long long *idx = NULL;
    size_t n = 0, cap = 0;
    for (kv_lnode *e = kv_list_at(server.kv, o, tail ? -1 : 0);
         e && (maxlen == 0 || index < maxlen);
         e = tail ? kv_list_prev(server.kv, e) : kv_list_next(server.kv, e), index++) {
        const char *v;
        size_t vn;
        kv_lnode_get(e, &v, &vn);
        if (vn != a[2].n || memcmp(v, a[2].p, vn) != 0) continue;
        if (++matches < rank) continue;
        found = tail ? len - index - 1 : index;
        if (count == -1) break;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            long long *ni = realloc(idx, cap * sizeof *ni);
            if (!ni) {
                free(idx);
                return out_oom(c);
            }
            idx = ni;
        }
        idx[n++] = found;
        if (count && !unlimited && matches - rank + 1 >= count) break;
    }
    if (count == -1) return found < 0 ? out_nil(c) : out_int(c, found);
    out_array(c, n);
    for (size_t i = 0; i < n; i++) out_int(c, idx[i]);
    free(idx);
}

/* LMOVE source destination LEFT|RIGHT LEFT|RIGHT, RPOPLPUSH: the element
 * is pushed onto the destination before it leaves the source, so that a
 * push that finds no memory changes nothing (the same list turns round
 * alike either way). */
void lmove_generic(struct conn *c, struct arg *a, bool from_tail, bool to_tail)
{
    kv_obj *src, *dst;
    if (!lookup_typed(c, &a[1], KV_LIST, &src)) return;
    if (!src) return out_nil(c);
    if (!lookup_typed(c, &a[2], KV_LIST, &dst)) return;
    const char *v;
    size_t vn;
    kv_lnode_get(kv_list_at(server.kv, src, from_tail ? -1 : 0), &v, &vn);
    char *val = malloc(vn ? vn : 1); /* its bytes move as the list changes */
    if (!val) return out_oom(c);
    memcpy(val, v, vn);
    bool same = a[1].n == a[2].n && memcmp(a[1].p, a[2].p, a[1].n) == 0;
    if (!same || from_tail != to_tail) {
        lookup_create(c, &a[2], KV_LIST, &dst);
        if (!dst) return free(val);
        if (kv_list_push(server.kv, dst, to_tail, val, vn) < 0) {
            drop_if_empty(dst, kv_list_len(server.kv, dst));
            free(val);
            return out_oom(c);
        }
        src = lookup_key(&a[1]);
        kv_list_remove(server.kv, src, kv_list_at(server.kv, src, from_tail ? -1 : 0));
        drop_if_empty(src, kv_list_len(server.kv, src));
    } else { /* the same end of the same list: nothing moves, yet it is a change */
        watch_touch_key(a[1].p, a[1].n);
    }
    server.changes++;
    out_bulk(c, val, vn);
    free(val);
}

static bool parse_end(const struct arg *a, bool *tail)
{
    *tail = arg_is(a, "RIGHT");
    return *tail || arg_is(a, "LEFT");
}

void cmd_lmove(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    bool from_tail, to_tail;
    if (!parse_end(&a[3], &from_tail) || !parse_end(&a[4], &to_tail)) return out_syntax(c);
    lmove_generic(c, a, from_tail, to_tail);
}

void cmd_rpoplpush(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    lmove_generic(c, a, true, false);
}
