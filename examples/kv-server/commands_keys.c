/* examples/kv-server/commands_keys.c - the commands on keys whatever their
 * type: DEL, EXISTS, TYPE, RENAME, KEYS, SCAN, FLUSHALL, expiry and TTL. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "persist.h"
#include "server.h"

/* DEL; UNLINK the same, but a large value is freed in slices between the
 * event loop's turns (net.c), as Redis frees it in a background thread */
static void delete_keys(struct conn *c, struct arg *a, size_t argc, bool lazy)
{
    long long n = 0;
    for (size_t i = 1; i < argc; i++)
        if (lookup_key(&a[i]))
            n += lazy ? kv_unlink(server.kv, a[i].p, a[i].n) : kv_delete(server.kv, a[i].p, a[i].n);
    server.changes += (uint64_t)n;
    out_int(c, n);
}

void cmd_del(struct conn *c, struct arg *a, size_t argc)
{
    delete_keys(c, a, argc, false);
}

void cmd_unlink(struct conn *c, struct arg *a, size_t argc)
{
    delete_keys(c, a, argc, true);
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
    /* (rounded to the nearest second without overflow near LLONG_MAX, as
     * Redis's compiled (ttl+500)/1000 comes out) */
    if (abs) return out_int(c, ms ? e : (long long)(((__int128)e + 500) / 1000));
    int64_t ttl = e - now_ms;
    if (ttl < 0) ttl = 0;
    out_int(c, ms ? ttl : (long long)(((__int128)ttl + 500) / 1000));
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

/* COPY source destination [DB 0] [REPLACE]: the value and its expiry time
 * under the new name (built under a name of its own first, so that a
 * value the heap has no room for leaves the destination as it was).  A
 * server of one database: DB takes 0 only ("DB index is out of range",
 * as Redis's SELECT of a database it does not have). */
void cmd_copy(struct conn *c, struct arg *a, size_t argc)
{
    bool replace = false;
    for (size_t j = 3; j < argc; j++) {
        if (arg_is(&a[j], "REPLACE")) {
            replace = true;
        } else if (arg_is(&a[j], "DB") && j + 1 < argc) {
            long long db;
            if (!get_ll(c, &a[++j], &db)) return;
            if (db != 0) return out_err(c, "ERR DB index is out of range");
        } else {
            return out_syntax(c);
        }
    }
    if (a[1].n == a[2].n && memcmp(a[1].p, a[2].p, a[1].n) == 0)
        return out_err(c, "ERR source and destination objects are the same");
    kv_obj *o = lookup_key(&a[1]);
    if (!o) return out_int(c, 0);
    if (lookup_key(&a[2]) && !replace) return out_int(c, 0);
    o = lookup_key(&a[1]);
    struct keylist l = {0};
    enum kv_type t = kv_obj_type(o);
    int64_t expire = kv_obj_expire(o);
    char tmp[48];
    size_t tn = temp_key(tmp, sizeof tmp);
    kv_obj *n = value_snapshot(o, &l) ? value_restore(tmp, tn, t, &l) : NULL;
    free(l.buf);
    if (!n) return out_oom(c);
    if (expire) kv_set_expire(server.kv, n, expire);
    if (!replace_with(&a[2], tmp, tn)) return out_oom(c);
    server.changes++;
    out_int(c, 1);
}

void cmd_touch(struct conn *c, struct arg *a, size_t argc)
{
    long long n = 0;
    for (size_t i = 1; i < argc; i++) n += lookup_key(&a[i]) != NULL;
    out_int(c, n);
}

void cmd_randomkey(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    kv_obj *o = kv_random_key(server.kv);
    if (!o) return out_nil(c);
    const char *k;
    size_t kn;
    kv_obj_key(o, &k, &kn);
    out_bulk(c, k, kn);
}

/* The encoding Redis 7.0 would report for a value of this size, with its
 * default thresholds: a string "int" (an integer string2ll takes),
 * "embstr" (up to 44 bytes) or "raw"; a list "quicklist"; a set "intset"
 * (up to 512 integers) or "hashtable"; a hash "listpack" (up to 512 fields,
 * fields and values up to 64 bytes) or "hashtable"; a sorted set
 * "listpack" (up to 128 members of up to 64 bytes) or "skiplist".  (Redis
 * never converts back: a hash that grew past 128 fields stays "hashtable"
 * after it shrinks, and a string changed by APPEND or SETRANGE is "raw";
 * here the size now decides.) */
struct enc_check {
    size_t max;
    bool ok;
};

static void check_int(void *arg, const char *m, size_t n)
{
    long long v;
    struct enc_check *e = arg;
    if (!parse_ll(&(struct arg){m, n}, &v)) e->ok = false;
}

static void check_field(void *arg, const char *f, size_t fn, const char *v, size_t vn)
{
    struct enc_check *e = arg;
    if (fn > e->max || vn > e->max) e->ok = false;
}

static const char *encoding_of(kv_obj *o)
{
    const char *p;
    size_t n;
    long long v;
    uint64_t cursor = 0;
    struct enc_check e = {64, true}; /* hash-max-listpack-value, zset-max-listpack-value */
    switch (kv_obj_type(o)) {
    case KV_STRING:
        kv_str_get(o, &p, &n);
        return parse_ll(&(struct arg){p, n}, &v) ? "int" : n <= 44 ? "embstr" : "raw";
    case KV_LIST:
        return "quicklist";
    case KV_SET:
        if (kv_set_card(server.kv, o) > 512) return "hashtable";
        do cursor = kv_set_scan(server.kv, o, cursor, check_int, &e);
        while (cursor && e.ok);
        return e.ok ? "intset" : "hashtable";
    case KV_HASH:
        if (kv_hash_len(server.kv, o) > 512) return "hashtable";
        do cursor = kv_hash_scan(server.kv, o, cursor, check_field, &e);
        while (cursor && e.ok);
        return e.ok ? "listpack" : "hashtable";
    case KV_ZSET:
        if (kv_zset_card(server.kv, o) > 128) return "skiplist";
        for (kv_znode *z = kv_zset_at(server.kv, o, 0); z; z = kv_zset_next(server.kv, z)) {
            double d;
            kv_znode_get(z, &p, &n, &d);
            if (n > 64) return "skiplist";
        }
        return "listpack";
    default:
        return "none";
    }
}

void cmd_object_encoding(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o = lookup_key(&a[2]);
    if (!o) return out_nil(c);
    out_cstr(c, encoding_of(o));
}

/* OBJECT REFCOUNT: Redis's shared integers (0 to 9999, in a string of
 * "int" encoding) report INT_MAX; every other value 1. */
void cmd_object_refcount(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o = lookup_key(&a[2]);
    if (!o) return out_nil(c);
    const char *p;
    size_t n;
    long long v;
    if (kv_obj_type(o) == KV_STRING) {
        kv_str_get(o, &p, &n);
        if (parse_ll(&(struct arg){p, n}, &v) && v >= 0 && v < 10000) return out_int(c, INT_MAX);
    }
    out_int(c, 1);
}

/* OBJECT IDLETIME: kv-server keeps no access time for its keys (it would
 * be a write of the key's page on every read, in every incremental
 * image): 0, a key just used. */
void cmd_object_idletime(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    if (!lookup_key(&a[2])) return out_nil(c);
    out_int(c, 0);
}

/* OBJECT FREQ: as Redis without an LFU maxmemory-policy (noeviction) */
void cmd_object_freq(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    if (!lookup_key(&a[2])) return out_nil(c);
    out_err(c, "ERR An LFU maxmemory policy is not selected, access frequency not tracked. "
               "Please note that when switching between policies at runtime LRU and LFU data "
               "will take some time to adjust.");
}

void cmd_object_help(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    static const char *const lines[] = {
        "OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
        "HELP",
        "    Prints this help.",
    };
    out_help(c, lines, sizeof lines / sizeof lines[0]);
}

/* MEMORY USAGE key [SAMPLES count]: the bytes of the heap the key and its
 * value take in kv-server's store (every element counted: SAMPLES is
 * checked and otherwise not needed). */
void cmd_memory_usage(struct conn *c, struct arg *a, size_t argc)
{
    for (size_t j = 3; j < argc; j++) {
        long long samples;
        if (arg_is(&a[j], "SAMPLES") && j + 1 < argc) {
            if (!get_ll(c, &a[++j], &samples)) return;
            if (samples < 0) return out_syntax(c);
        } else {
            return out_syntax(c);
        }
    }
    kv_obj *o = lookup_key(&a[2]);
    if (!o) return out_nil(c);
    out_int(c, (long long)kv_obj_bytes(server.kv, o));
}

void cmd_memory_help(struct conn *c, struct arg *a, size_t argc)
{
    (void)a, (void)argc;
    static const char *const lines[] = {
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
        "HELP",
        "    Prints this help.",
    };
    out_help(c, lines, sizeof lines / sizeof lines[0]);
}
