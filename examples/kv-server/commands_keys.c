/* examples/kv-server/commands_keys.c - the commands on keys whatever their
 * type: DEL, EXISTS, TYPE, RENAME, KEYS, SCAN, FLUSHALL, expiry and TTL. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "persist.h"
#include "server.h"

void cmd_del(struct conn *c, struct arg *a, size_t argc)
{
    long long n = 0;
    for (size_t i = 1; i < argc; i++)
        if (lookup_key(&a[i])) n += kv_delete(server.kv, a[i].p, a[i].n);
    server.changes += (uint64_t)n;
    out_int(c, n);
}

void cmd_exists(struct conn *c, struct arg *a, size_t argc)
{
    long long n = 0;
    for (size_t i = 1; i < argc; i++) n += lookup_key(&a[i]) != NULL;
    out_int(c, n);
}

void cmd_type(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    out_fmt(c, "+%s\r\n", type_name(lookup_key(&a[1])));
}

static void rename_generic(struct conn *c, struct arg *a, bool nx)
{
    kv_obj *o = lookup_key(&a[1]);
    if (!o) return out_err(c, "ERR no such key");
    if (a[1].n == a[2].n && memcmp(a[1].p, a[2].p, a[1].n) == 0)
        return nx ? out_int(c, 0) : out_ok(c);
    if (lookup_key(&a[2])) {
        if (nx) return out_int(c, 0);
        kv_delete(server.kv, a[2].p, a[2].n);
        o = lookup_key(&a[1]);
    }
    if (!kv_rename(server.kv, o, a[2].p, a[2].n)) return out_oom(c);
    server.changes++;
    nx ? out_int(c, 1) : out_ok(c);
}

void cmd_rename(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    rename_generic(c, a, false);
}

void cmd_renamenx(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    rename_generic(c, a, true);
}

void cmd_dbsize(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    out_int(c, (long long)kv_count(server.kv));
}

/* FLUSHALL, FLUSHDB: a change for each key deleted (expired ones not yet
 * removed included), as redis-server 7.0 counts them without save points. */
void cmd_flushall(struct conn *c, struct arg *a, size_t argc)
{
    if (argc > 2 || (argc == 2 && !arg_is(&a[1], "SYNC") && !arg_is(&a[1], "ASYNC")))
        return out_syntax(c);
    server.changes += kv_count(server.kv);
    watch_touch_flush(); /* the store's flush tells its touch hook nothing */
    kv_flush(server.kv);
    persist_trim(); /* its memory given back, and out of the next image */
    out_ok(c);
}

/* EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT [NX|XX|GT|LT] */
static void expire_generic(struct conn *c, struct arg *a, size_t argc, bool secs, bool at)
{
    bool nx = false, xx = false, gt = false, lt = false;
    for (size_t j = 3; j < argc; j++) {
        if (arg_is(&a[j], "NX"))
            nx = true;
        else if (arg_is(&a[j], "XX"))
            xx = true;
        else if (arg_is(&a[j], "GT"))
            gt = true;
        else if (arg_is(&a[j], "LT"))
            lt = true;
        else {
            char buf[600];
            return out_err(c, "ERR Unsupported option %s",
                           resp_escape(buf, sizeof buf, a[j].p, a[j].n, 128));
        }
    }
    if (nx && (xx || gt || lt))
        return out_err(c, "ERR NX and XX, GT or LT options at the same time are not compatible");
    if (gt && lt) return out_err(c, "ERR GT and LT options at the same time are not compatible");
    long long when;
    if (!get_ll(c, &a[2], &when)) return;
    char name[16];
    snprintf(name, sizeof name, "%s%s%s", secs ? "" : "p", "expire", at ? "at" : "");
    if (secs) {
        if (when > LLONG_MAX / 1000 || when < LLONG_MIN / 1000)
            return out_err(c, "ERR invalid expire time in '%s' command", name);
        when *= 1000;
    }
    long long base = at ? 0 : now_ms;
    if (when > LLONG_MAX - base) return out_err(c, "ERR invalid expire time in '%s' command", name);
    when += base;
    kv_obj *o = lookup_key(&a[1]);
    if (!o) return out_int(c, 0);
    int64_t cur = kv_obj_expire(o);
    if ((nx && cur) || (xx && !cur) || (gt && (!cur || when <= cur)) || (lt && cur && when >= cur))
        return out_int(c, 0);
    server.changes++;
    if (when <= now_ms) {
        kv_delete_obj(server.kv, o);
        return out_int(c, 1);
    }
    kv_set_expire(server.kv, o, when);
    out_int(c, 1);
}

void cmd_expire(struct conn *c, struct arg *a, size_t argc)
{
    expire_generic(c, a, argc, true, false);
}

void cmd_pexpire(struct conn *c, struct arg *a, size_t argc)
{
    expire_generic(c, a, argc, false, false);
}

void cmd_expireat(struct conn *c, struct arg *a, size_t argc)
{
    expire_generic(c, a, argc, true, true);
}

void cmd_pexpireat(struct conn *c, struct arg *a, size_t argc)
{
    expire_generic(c, a, argc, false, true);
}

/* TTL, PTTL, EXPIRETIME, PEXPIRETIME */
static void ttl_generic(struct conn *c, struct arg *a, bool ms, bool abs)
{
    kv_obj *o = lookup_key(&a[1]);
    if (!o) return out_int(c, -2);
    int64_t e = kv_obj_expire(o);
    if (!e) return out_int(c, -1);
    if (abs) return out_int(c, ms ? e : (e + 500) / 1000);
    int64_t ttl = e - now_ms;
    if (ttl < 0) ttl = 0;
    out_int(c, ms ? ttl : (ttl + 500) / 1000);
}

void cmd_ttl(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    ttl_generic(c, a, false, false);
}

void cmd_pttl(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    ttl_generic(c, a, true, false);
}

void cmd_expiretime(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    ttl_generic(c, a, false, true);
}

void cmd_pexpiretime(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    ttl_generic(c, a, true, true);
}

void cmd_persist(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o = lookup_key(&a[1]);
    if (!o || !kv_obj_expire(o)) return out_int(c, 0);
    kv_set_expire(server.kv, o, 0);
    server.changes++;
    out_int(c, 1);
}

static void collect_key(void *arg, kv_obj *o)
{
    struct keylist *l = arg;
    if (kv_obj_expired(server.kv, o)) return;
    const char *k;
    size_t kn;
    kv_obj_key(o, &k, &kn);
    keylist_add(l, k, kn);
}

void cmd_keys(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    bool all = a[1].n == 1 && a[1].p[0] == '*';
    struct keylist l = {.pattern = all ? NULL : &a[1]};
    uint64_t cursor = 0;
    do cursor = kv_scan(server.kv, cursor, collect_key, &l);
    while (cursor && !l.oom);
    if (l.oom) {
        free(l.buf);
        return out_oom(c);
    }
    out_keylist(c, &l);
}

static void collect_any(void *arg, kv_obj *o)
{
    const char *k;
    size_t kn;
    kv_obj_key(o, &k, &kn);
    keylist_add(arg, k, kn);
}

/* As Redis: buckets until COUNT keys (before filtering) or 10*COUNT
 * buckets were visited; then MATCH, expired keys (deleted now) and TYPE
 * filter what was collected. */
void cmd_scan(struct conn *c, struct arg *a, size_t argc)
{
    uint64_t cursor;
    const struct arg *pattern;
    long long count;
    enum kv_type type = KV_NONE;
    if (!get_cursor(c, &a[1], &cursor)) return;
    if (!scan_options(c, a, argc, 2, &pattern, &count, &type)) return;
    struct keylist l = {0}, m = {0};
    long long steps = count * 10;
    do cursor = kv_scan(server.kv, cursor, collect_any, &l);
    while (cursor && (long long)l.n < count && --steps > 0 && !l.oom);
    const char *k;
    size_t kn;
    for (size_t off = 0; !l.oom && keylist_next(&l, &off, &k, &kn);) {
        if (pattern && !glob_match(pattern->p, pattern->n, k, kn)) continue;
        kv_obj *x = kv_lookup(server.kv, k, kn);
        if (!x || (type != KV_NONE && kv_obj_type(x) != type)) continue;
        keylist_add(&m, k, kn);
    }
    free(l.buf);
    if (l.oom || m.oom) {
        free(m.buf);
        return out_oom(c);
    }
    out_cursor(c, cursor);
    out_keylist(c, &m);
}
