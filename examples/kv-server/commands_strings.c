/* examples/kv-server/commands_strings.c - the string commands: GET, SET and its
 * options, the counters, APPEND, ranges. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "server.h"

void cmd_get(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    if (!o) return out_nil(c);
    const char *v;
    size_t vn;
    kv_str_get(o, &v, &vn);
    out_bulk(c, v, vn);
}

/* SET's options, parsed as Redis's parseExtendedStringArgumentsOrReply does */
enum {
    SET_NX = 1,
    SET_XX = 2,
    SET_GET = 4,
    SET_KEEPTTL = 8,
    SET_EX = 16,
    SET_PX = 32,
    SET_EXAT = 64,
    SET_PXAT = 128
};

/* Sets key to val with SET's flags and expiry argument (exp, or NULL). */
static void set_generic(struct conn *c, const struct arg *key, const struct arg *val, int flags,
                        const struct arg *exp, const char *cmd, bool reply_ok)
{
    int64_t when = 0;
    if (exp) {
        long long ms;
        if (!get_ll(c, exp, &ms)) return;
        bool secs = flags & (SET_EX | SET_EXAT);
        if (ms <= 0 || (secs && ms > LLONG_MAX / 1000))
            return out_err(c, "ERR invalid expire time in '%s' command", cmd);
        if (secs) ms *= 1000;
        if (flags & (SET_EX | SET_PX)) {
            if (ms > LLONG_MAX - now_ms)
                return out_err(c, "ERR invalid expire time in '%s' command", cmd);
            ms += now_ms;
        }
        when = ms;
    }
    kv_obj *o = lookup_key(key);
    char *old = NULL; /* SET ... GET: the old value, copied before it is replaced */
    size_t oldn = 0;
    if (flags & SET_GET) {
        if (o && kv_obj_type(o) != KV_STRING) return out_wrongtype(c);
        if (o) {
            const char *v;
            kv_str_get(o, &v, &oldn);
            if (!(old = malloc(oldn ? oldn : 1))) return out_oom(c);
            memcpy(old, v, oldn);
        }
    }
    if (!(((flags & SET_NX) && o) || ((flags & SET_XX) && !o))) {
        kv_obj *n = kv_str_set(server.kv, key->p, key->n, val->p, val->n, flags & SET_KEEPTTL);
        if (!n) {
            free(old);
            return out_oom(c);
        }
        if (when) kv_set_expire(server.kv, n, when);
        server.changes++;
        if (reply_ok && !(flags & SET_GET)) out_ok(c);
    } else if (!(flags & SET_GET)) {
        out_nil(c);
    }
    if (flags & SET_GET) {
        if (o)
            out_bulk(c, old, oldn);
        else
            out_nil(c);
    }
    free(old);
}

/* The flag of the expiry option o names (EX, PX, EXAT, PXAT), 0 if it
 * names none or the options so far (ttl: their flags) exclude it: SET's
 * and GETEX's. */
static int expiry_option(const struct arg *o, int ttl)
{
    static const struct {
        const char *name;
        int flag;
    } opts[] = {{"EX", SET_EX}, {"PX", SET_PX}, {"EXAT", SET_EXAT}, {"PXAT", SET_PXAT}};
    for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++)
        if (arg_is(o, opts[i].name)) return ttl & ~opts[i].flag ? 0 : opts[i].flag;
    return 0;
}

void cmd_set(struct conn *c, struct arg *a, size_t argc)
{
    int flags = 0;
    const struct arg *exp = NULL;
    for (size_t j = 3; j < argc; j++) {
        const struct arg *o = &a[j];
        bool next = j + 1 < argc;
        int ttl = flags & (SET_EX | SET_PX | SET_EXAT | SET_PXAT | SET_KEEPTTL);
        if (arg_is(o, "NX") && !(flags & SET_XX)) {
            flags |= SET_NX;
        } else if (arg_is(o, "XX") && !(flags & SET_NX)) {
            flags |= SET_XX;
        } else if (arg_is(o, "GET")) {
            flags |= SET_GET;
        } else if (arg_is(o, "KEEPTTL") && !(ttl & ~SET_KEEPTTL)) {
            flags |= SET_KEEPTTL;
        } else if (next && expiry_option(o, ttl)) {
            flags |= expiry_option(o, ttl);
            exp = &a[++j];
        } else {
            return out_syntax(c);
        }
    }
    set_generic(c, &a[1], &a[2], flags, exp, "set", true);
}

void cmd_setnx(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o = lookup_key(&a[1]);
    if (o) return out_int(c, 0);
    if (!kv_str_set(server.kv, a[1].p, a[1].n, a[2].p, a[2].n, false)) return out_oom(c);
    server.changes++;
    out_int(c, 1);
}

void cmd_setex(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    bool ms = a[0].n == 6; /* psetex */
    set_generic(c, &a[1], &a[3], ms ? SET_PX : SET_EX, &a[2], ms ? "psetex" : "setex", true);
}

void cmd_getset(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    set_generic(c, &a[1], &a[2], SET_GET, NULL, "getset", false);
}

void cmd_getdel(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    if (!o) return out_nil(c);
    const char *v;
    size_t vn;
    kv_str_get(o, &v, &vn);
    out_bulk(c, v, vn);
    kv_delete_obj(server.kv, o);
    server.changes++;
}

/* GETEX key [EX s|PX ms|EXAT t|PXAT t|PERSIST]: the options parsed first
 * (a syntax error before anything), then the key (nil if missing, whatever
 * the time says), then the time (an invalid one after WRONGTYPE).  A time
 * of EXAT or PXAT already past deletes the key after the reply. */
void cmd_getex(struct conn *c, struct arg *a, size_t argc)
{
    int flags = 0;
    bool persist = false;
    const struct arg *exp = NULL;
    for (size_t j = 2; j < argc; j++) {
        const struct arg *o = &a[j];
        bool next = j + 1 < argc;
        int ttl = flags & (SET_EX | SET_PX | SET_EXAT | SET_PXAT);
        if (arg_is(o, "PERSIST") && !ttl) {
            persist = true;
        } else if (next && !persist && expiry_option(o, ttl)) {
            flags |= expiry_option(o, ttl);
            exp = &a[++j];
        } else {
            return out_syntax(c);
        }
    }
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    if (!o) return out_nil(c);
    long long when = 0;
    if (exp) {
        if (!get_ll(c, exp, &when)) return;
        bool secs = flags & (SET_EX | SET_EXAT);
        if (when <= 0 || (secs && when > LLONG_MAX / 1000))
            return out_err(c, "ERR invalid expire time in 'getex' command");
        if (secs) when *= 1000;
        if (flags & (SET_EX | SET_PX)) {
            if (when > LLONG_MAX - now_ms)
                return out_err(c, "ERR invalid expire time in 'getex' command");
            when += now_ms;
        }
    }
    const char *v;
    size_t vn;
    kv_str_get(o, &v, &vn);
    out_bulk(c, v, vn);
    if (exp && (flags & (SET_EXAT | SET_PXAT)) && when <= now_ms) {
        kv_delete_obj(server.kv, o);
        server.changes++;
    } else if (exp) {
        kv_set_expire(server.kv, o, when);
        server.changes++;
    } else if (persist && kv_obj_expire(o)) {
        kv_set_expire(server.kv, o, 0);
        server.changes++;
    }
}

void cmd_mget(struct conn *c, struct arg *a, size_t argc)
{
    out_array(c, argc - 1);
    for (size_t i = 1; i < argc; i++) {
        kv_obj *o = lookup_key(&a[i]);
        if (!o || kv_obj_type(o) != KV_STRING) {
            out_nil(c);
            continue;
        }
        const char *v;
        size_t vn;
        kv_str_get(o, &v, &vn);
        out_bulk(c, v, vn);
    }
}

static void mset_generic(struct conn *c, struct arg *a, size_t argc, bool nx)
{
    if (argc % 2 == 0) return out_arity_error(c, nx ? "msetnx" : "mset");
    if (nx)
        for (size_t i = 1; i < argc; i += 2)
            if (lookup_key(&a[i])) return out_int(c, 0);
    for (size_t i = 1; i < argc; i += 2) {
        if (!kv_str_set(server.kv, a[i].p, a[i].n, a[i + 1].p, a[i + 1].n, false))
            return out_oom(c);
        server.changes++;
    }
    if (nx)
        out_int(c, 1);
    else
        out_ok(c);
}

void cmd_mset(struct conn *c, struct arg *a, size_t argc)
{
    mset_generic(c, a, argc, false);
}

void cmd_msetnx(struct conn *c, struct arg *a, size_t argc)
{
    mset_generic(c, a, argc, true);
}

static void incr_generic(struct conn *c, const struct arg *key, long long by)
{
    kv_obj *o;
    if (!lookup_typed(c, key, KV_STRING, &o)) return;
    long long v = 0;
    if (o) {
        const char *p;
        size_t n;
        kv_str_get(o, &p, &n);
        if (!parse_ll(&(struct arg){p, n}, &v)) return out_err(c, ERR_NOT_INT);
    }
    if (add_overflows(v, by)) return out_err(c, "ERR increment or decrement would overflow");
    v += by;
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%lld", v);
    if (!kv_str_set(server.kv, key->p, key->n, buf, (size_t)n, true)) return out_oom(c);
    server.changes++;
    out_int(c, v);
}

void cmd_incr(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    incr_generic(c, &a[1], a[0].p[0] == 'd' || a[0].p[0] == 'D' ? -1 : 1);
}

void cmd_incrby(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long by;
    if (!get_ll(c, &a[2], &by)) return;
    incr_generic(c, &a[1], by);
}

void cmd_decrby(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long by;
    if (!get_ll(c, &a[2], &by)) return;
    if (by == LLONG_MIN) return out_err(c, "ERR decrement would overflow");
    incr_generic(c, &a[1], -by);
}

void cmd_incrbyfloat(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    long double v = 0, by;
    if (o) {
        const char *p;
        size_t n;
        kv_str_get(o, &p, &n);
        if (!parse_ldouble(p, n, &v)) return out_err(c, ERR_NOT_FLOAT);
    }
    if (!parse_ldouble(a[2].p, a[2].n, &by)) return out_err(c, ERR_NOT_FLOAT);
    v += by;
    if (isnan(v) || isinf(v)) return out_err(c, "ERR increment would produce NaN or Infinity");
    char buf[5200];
    int n = format_ldouble(buf, sizeof buf, v);
    if (!kv_str_set(server.kv, a[1].p, a[1].n, buf, (size_t)n, true)) return out_oom(c);
    server.changes++;
    out_bulk(c, buf, (size_t)n);
}

void cmd_append(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    if (!o) {
        if (!kv_str_set(server.kv, a[1].p, a[1].n, a[2].p, a[2].n, false)) return out_oom(c);
        server.changes++;
        return out_int(c, (long long)a[2].n);
    }
    const char *p;
    size_t n;
    kv_str_get(o, &p, &n);
    if (n + a[2].n > MAX_STRING) return out_err(c, ERR_TOO_BIG);
    char *d;
    if (!(o = kv_str_resize(server.kv, o, n + a[2].n, &d))) return out_oom(c);
    memcpy(d + n, a[2].p, a[2].n);
    server.changes++;
    out_int(c, (long long)(n + a[2].n));
}

void cmd_strlen(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    const char *p;
    size_t n = 0;
    if (o) kv_str_get(o, &p, &n);
    out_int(c, (long long)n);
}

void cmd_getrange(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long start, end;
    if (!get_ll(c, &a[2], &start) || !get_ll(c, &a[3], &end)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    if (!o) return out_bulk(c, "", 0);
    const char *p;
    size_t n;
    kv_str_get(o, &p, &n);
    long long len = (long long)n;
    if (start < 0 && end < 0 && start > end) return out_bulk(c, "", 0);
    if (start < 0) start += len;
    if (end < 0) end += len;
    if (start < 0) start = 0;
    if (end < 0) end = 0;
    if (end >= len) end = len - 1;
    if (start > end || len == 0) return out_bulk(c, "", 0);
    out_bulk(c, p + start, (size_t)(end - start + 1));
}

void cmd_setrange(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long off;
    if (!get_ll(c, &a[2], &off)) return;
    if (off < 0) return out_err(c, "ERR offset is out of range");
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_STRING, &o)) return;
    const char *p;
    size_t n = 0;
    if (o) kv_str_get(o, &p, &n);
    if (a[3].n == 0) return out_int(c, (long long)n);
    if ((unsigned long long)off + a[3].n > MAX_STRING) return out_err(c, ERR_TOO_BIG);
    if (!o && !(o = kv_str_set(server.kv, a[1].p, a[1].n, "", 0, false))) return out_oom(c);
    size_t len = (size_t)off + a[3].n > n ? (size_t)off + a[3].n : n;
    char *d;
    if (!(o = kv_str_resize(server.kv, o, len, &d))) return out_oom(c);
    memcpy(d + off, a[3].p, a[3].n);
    server.changes++;
    out_int(c, (long long)len);
}
