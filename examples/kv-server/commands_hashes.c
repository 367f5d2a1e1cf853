/* examples/kv-server/commands_hashes.c - the hash commands. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "commands.h"
#include "net.h"
#include "server.h"

static void hset_generic(struct conn *c, struct arg *a, size_t argc, bool hmset)
{
    if (argc % 2 == 1) return out_arity_error(c, hmset ? "hmset" : "hset");
    kv_obj *o;
    lookup_create(c, &a[1], KV_HASH, &o);
    if (!o) return;
    long long created = 0;
    for (size_t i = 2; i < argc; i += 2) {
        int r = kv_hash_set(server.kv, o, a[i].p, a[i].n, a[i + 1].p, a[i + 1].n);
        if (r < 0) {
            drop_if_empty(o, kv_hash_len(server.kv, o));
            return out_oom(c);
        }
        created += r;
    }
    server.changes += (argc - 2) / 2;
    if (hmset)
        out_ok(c);
    else
        out_int(c, created);
}

void cmd_hset(struct conn *c, struct arg *a, size_t argc)
{
    hset_generic(c, a, argc, false);
}

void cmd_hmset(struct conn *c, struct arg *a, size_t argc)
{
    hset_generic(c, a, argc, true);
}

void cmd_hsetnx(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    lookup_create(c, &a[1], KV_HASH, &o);
    if (!o) return;
    const char *v;
    size_t vn;
    if (kv_hash_get(server.kv, o, a[2].p, a[2].n, &v, &vn)) return out_int(c, 0);
    if (kv_hash_set(server.kv, o, a[2].p, a[2].n, a[3].p, a[3].n) < 0) {
        drop_if_empty(o, kv_hash_len(server.kv, o));
        return out_oom(c);
    }
    server.changes++;
    out_int(c, 1);
}

void cmd_hget(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    const char *v;
    size_t vn;
    if (!o || !kv_hash_get(server.kv, o, a[2].p, a[2].n, &v, &vn)) return out_nil(c);
    out_bulk(c, v, vn);
}

void cmd_hmget(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    out_array(c, argc - 2);
    for (size_t i = 2; i < argc; i++) {
        const char *v;
        size_t vn;
        if (o && kv_hash_get(server.kv, o, a[i].p, a[i].n, &v, &vn))
            out_bulk(c, v, vn);
        else
            out_nil(c);
    }
}

void cmd_hdel(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    long long n = 0;
    for (size_t i = 2; o && i < argc; i++) n += kv_hash_del(server.kv, o, a[i].p, a[i].n);
    if (o) drop_if_empty(o, kv_hash_len(server.kv, o));
    server.changes += (uint64_t)n;
    out_int(c, n);
}

void cmd_hlen(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    out_int(c, o ? (long long)kv_hash_len(server.kv, o) : 0);
}

void cmd_hexists(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    const char *v;
    size_t vn;
    out_int(c, o && kv_hash_get(server.kv, o, a[2].p, a[2].n, &v, &vn));
}

void cmd_hstrlen(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    const char *v;
    size_t vn = 0;
    if (o) kv_hash_get(server.kv, o, a[2].p, a[2].n, &v, &vn);
    out_int(c, (long long)vn);
}

/* HGETALL, HKEYS, HVALS */
struct hash_out {
    struct conn *c;
    bool keys, vals;
};

static void out_field(void *arg, const char *f, size_t fn, const char *v, size_t vn)
{
    struct hash_out *h = arg;
    if (h->keys) out_bulk(h->c, f, fn);
    if (h->vals) out_bulk(h->c, v, vn);
}

static void hgetall_generic(struct conn *c, struct arg *a, bool keys, bool vals)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    if (!o) return out_array(c, 0);
    out_array(c, kv_hash_len(server.kv, o) * (keys && vals ? 2 : 1));
    struct hash_out h = {c, keys, vals};
    uint64_t cursor = 0;
    do cursor = kv_hash_scan(server.kv, o, cursor, out_field, &h);
    while (cursor);
}

void cmd_hgetall(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    hgetall_generic(c, a, true, true);
}

void cmd_hkeys(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    hgetall_generic(c, a, true, false);
}

void cmd_hvals(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    hgetall_generic(c, a, false, true);
}

void cmd_hincrby(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long by, v = 0;
    if (!get_ll(c, &a[3], &by)) return;
    kv_obj *o;
    lookup_create(c, &a[1], KV_HASH, &o);
    if (!o) return;
    const char *p;
    size_t n;
    if (kv_hash_get(server.kv, o, a[2].p, a[2].n, &p, &n) && !parse_ll(&(struct arg){p, n}, &v))
        return out_err(c, "ERR hash value is not an integer");
    if (add_overflows(v, by)) {
        drop_if_empty(o, kv_hash_len(server.kv, o));
        return out_err(c, "ERR increment or decrement would overflow");
    }
    v += by;
    char buf[24];
    int len = snprintf(buf, sizeof buf, "%lld", v);
    if (kv_hash_set(server.kv, o, a[2].p, a[2].n, buf, (size_t)len) < 0) {
        drop_if_empty(o, kv_hash_len(server.kv, o));
        return out_oom(c);
    }
    server.changes++;
    out_int(c, v);
}

void cmd_hincrbyfloat(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long double by, v = 0;
    if (!parse_ldouble(a[3].p, a[3].n, &by)) return out_err(c, ERR_NOT_FLOAT);
    if (isnan(by) || isinf(by)) return out_err(c, "ERR value is NaN or Infinity");
    kv_obj *o;
    lookup_create(c, &a[1], KV_HASH, &o);
    if (!o) return;
    const char *p;
    size_t n;
    if (kv_hash_get(server.kv, o, a[2].p, a[2].n, &p, &n) && !parse_ldouble(p, n, &v))
        return out_err(c, "ERR hash value is not a float");
    v += by;
    if (isnan(v) || isinf(v)) {
        drop_if_empty(o, kv_hash_len(server.kv, o));
        return out_err(c, "ERR increment would produce NaN or Infinity");
    }
    char buf[5200];
    int len = format_ldouble(buf, sizeof buf, v);
    if (kv_hash_set(server.kv, o, a[2].p, a[2].n, buf, (size_t)len) < 0) {
        drop_if_empty(o, kv_hash_len(server.kv, o));
        return out_oom(c);
    }
    server.changes++;
    out_bulk(c, buf, (size_t)len);
}

void cmd_hscan(struct conn *c, struct arg *a, size_t argc)
{
    scan_members(c, a, argc, KV_HASH);
}

/* HRANDFIELD key [count [WITHVALUES]]: one field (nil if none); with a
 * count, that many distinct fields (all if fewer), or with a negative
 * one that many with repeats. */
void cmd_hrandfield(struct conn *c, struct arg *a, size_t argc)
{
    long long count = 1;
    bool wv = false;
    if (argc >= 3 && !get_rand_count(c, a, argc, "WITHVALUES", &count, &wv)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_HASH, &o)) return;
    const char *f, *v;
    size_t fn, vn;
    if (argc == 2) {
        if (!o || !kv_hash_random(server.kv, o, &f, &fn, &v, &vn)) return out_nil(c);
        return out_bulk(c, f, fn);
    }
    if (!o || count == 0) return out_array(c, 0);
    size_t per = wv ? 2 : 1;
    if (count < 0) { /* with repeats */
        out_array(c, (size_t)-count * per);
        for (long long i = 0; i < -count && !c->dead; i++) {
            kv_hash_random(server.kv, o, &f, &fn, &v, &vn);
            out_bulk(c, f, fn);
            if (wv) out_bulk(c, v, vn);
        }
        return;
    }
    struct keylist l = {0};
    uint64_t cursor = 0;
    do cursor = kv_hash_scan(server.kv, o, cursor, collect_field, &l);
    while (cursor && !l.oom);
    size_t total = l.n / 2, want = (unsigned long long)count < total ? (size_t)count : total;
    struct arg *e = l.oom ? NULL : malloc(l.n * sizeof *e);
    if (!e) {
        free(l.buf);
        return out_oom(c);
    }
    for (size_t i = 0, off = 0; i < l.n; i++) keylist_next(&l, &off, &e[i].p, &e[i].n);
    out_array(c, want * per);
    for (size_t i = 0; i < want; i++) { /* a partial Fisher-Yates shuffle of the pairs */
        size_t j = i + (size_t)rand() % (total - i);
        struct arg t0 = e[2 * i], t1 = e[2 * i + 1];
        e[2 * i] = e[2 * j];
        e[2 * i + 1] = e[2 * j + 1];
        e[2 * j] = t0;
        e[2 * j + 1] = t1;
        out_bulk(c, e[2 * i].p, e[2 * i].n);
        if (wv) out_bulk(c, e[2 * i + 1].p, e[2 * i + 1].n);
    }
    free(e);
    free(l.buf);
}
