/* examples/kv-server/commands_common.c - what the commands share
 * (commands.h): their arguments parsed as Redis parses them, typed key
 * lookups, glob patterns, and the collecting of keys and members that
 * KEYS, SCAN, SSCAN, HSCAN and SRANDMEMBER reply from. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "commands.h"
#include "server.h"

/* ---- arguments --------------------------------------------------------- */
bool arg_is(const struct arg *a, const char *name)
{
    return a->n == strlen(name) && strncasecmp(a->p, name, a->n) == 0;
}

/* A decimal integer as Redis's string2ll takes it: no sign but '-', no
 * leading zero, no space, within a long long. */
bool parse_ll(const struct arg *a, long long *out)
{
    const char *p = a->p;
    size_t n = a->n;
    if (n == 0 || n > 20) return false;
    if (n == 1 && p[0] == '0') {
        *out = 0;
        return true;
    }
    size_t i = p[0] == '-';
    if (i == n || p[i] < '1' || p[i] > '9') return false;
    unsigned long long v = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return false;
        if (v > (ULLONG_MAX - (unsigned)(p[i] - '0')) / 10) return false;
        v = v * 10 + (unsigned)(p[i] - '0');
    }
    if (p[0] == '-') {
        if (v > (unsigned long long)LLONG_MAX + 1) return false;
        *out = (long long)(0 - v);
    } else {
        if (v > LLONG_MAX) return false;
        *out = (long long)v;
    }
    return true;
}

bool get_ll(struct conn *c, const struct arg *a, long long *out)
{
    if (parse_ll(a, out)) return true;
    out_err(c, ERR_NOT_INT);
    return false;
}

/* Redis's getPositiveLongFromObjectOrReply: a count >= 0 */
bool get_count(struct conn *c, const struct arg *a, long long *out)
{
    if (parse_ll(a, out) && *out >= 0) return true;
    out_err(c, "ERR value is out of range, must be positive");
    return false;
}

/* Redis's string2d: all of it a number (inf allowed), no leading space,
 * no NaN, no overflow. */
bool parse_double(const char *p, size_t n, double *out)
{
    char buf[128];
    if (n == 0 || n >= sizeof buf || is_space(p[0])) return false;
    memcpy(buf, p, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    double v = strtod(buf, &end);
    if (*end || end != buf + n || isnan(v) || (errno == ERANGE && (isinf(v) || v == 0)))
        return false;
    *out = v;
    return true;
}

/* Redis's string2ld */
bool parse_ldouble(const char *p, size_t n, long double *out)
{
    char buf[5120];
    if (n == 0 || n >= sizeof buf || is_space(p[0])) return false;
    memcpy(buf, p, n);
    buf[n] = 0;
    char *end;
    errno = 0;
    long double v = strtold(buf, &end);
    if (*end || end != buf + n || isnan(v) || (errno == ERANGE && (isinf(v) || v == 0)))
        return false;
    *out = v;
    return true;
}

/* A long double as Redis's ld2string(LD_STR_HUMAN) writes it. */
int format_ldouble(char *buf, size_t cap, long double v)
{
    int l = snprintf(buf, cap, "%.17Lf", v);
    if (l <= 0 || (size_t)l >= cap) return 0;
    if (strchr(buf, '.')) {
        while (buf[l - 1] == '0') l--;
        if (buf[l - 1] == '.') l--;
    }
    if (l == 2 && buf[0] == '-' && buf[1] == '0') {
        buf[0] = '0';
        l = 1;
    }
    return l;
}

/* The range start..end (negative from the end) of a sequence of len
 * elements, clamped as LRANGE and ZRANGE do; false if empty. */
bool clamp_range(long long len, long long *start, long long *end)
{
    if (*start < 0) *start += len;
    if (*end < 0) *end += len;
    if (*start < 0) *start = 0;
    if (*start > *end || *start >= len) return false;
    if (*end >= len) *end = len - 1;
    return true;
}

/* ---- keys -------------------------------------------------------------- */
kv_obj *lookup_key(const struct arg *key)
{
    return kv_lookup(server.kv, key->p, key->n);
}

/* The key's object if it is of type t (NULL if there is none); false,
 * and NULL, after replying WRONGTYPE. */
bool lookup_typed(struct conn *c, const struct arg *key, enum kv_type t, kv_obj **o)
{
    *o = lookup_key(key);
    if (*o && kv_obj_type(*o) != t) {
        *o = NULL;
        out_wrongtype(c);
        return false;
    }
    return true;
}

/* Like lookup_typed, creating an empty value of type t if there is none;
 * *o is NULL after an error reply. */
void lookup_create(struct conn *c, const struct arg *key, enum kv_type t, kv_obj **o)
{
    if (!lookup_typed(c, key, t, o)) return;
    if (!*o) {
        *o = kv_create(server.kv, key->p, key->n, t);
        if (!*o) out_oom(c);
    }
}

/* Deletes a list, set, hash or sorted set left empty, as Redis does. */
void drop_if_empty(kv_obj *o, size_t len)
{
    if (len == 0) kv_delete_obj(server.kv, o);
}

/* TYPE's names, by enum kv_type */
static const char *const type_names[] = {"none", "string", "list", "set", "hash", "zset"};

const char *type_name(const kv_obj *o)
{
    return type_names[o ? kv_obj_type(o) : KV_NONE];
}

/* ---- glob patterns ----------------------------------------------------- */
/* Redis's stringmatchlen: glob-style * ? [abc] [^a-z] and \ escapes;
 * bounded by the lengths (the bytes are not NUL-terminated). */
static bool match_impl(const char *p, size_t pn, const char *s, size_t sn, bool nocase, bool *skip)
{
    while (pn && sn) {
        switch (p[0]) {
        case '*':
            while (pn > 1 && p[1] == '*') p++, pn--;
            if (pn == 1) return true;
            while (sn) {
                if (match_impl(p + 1, pn - 1, s, sn, nocase, skip)) return true;
                if (*skip) return false;
                s++, sn--;
            }
            *skip = true; /* no later start can match either */
            return false;
        case '?':
            s++, sn--;
            break;
        case '[': {
            p++, pn--;
            bool not = pn && p[0] == '^', match = false;
            if (not ) p++, pn--;
            for (;;) {
                if (pn >= 2 && p[0] == '\\') {
                    p++, pn--;
                    if (p[0] == s[0]) match = true;
                } else if (pn && p[0] == ']') {
                    break;
                } else if (pn == 0) {
                    p--, pn++;
                    break;
                } else if (pn >= 3 && p[1] == '-') {
                    int lo = (unsigned char)p[0], hi = (unsigned char)p[2],
                        ch = (unsigned char)s[0];
                    if (lo > hi) {
                        int t = lo;
                        lo = hi;
                        hi = t;
                    }
                    if (nocase) lo = tolower(lo), hi = tolower(hi), ch = tolower(ch);
                    p += 2, pn -= 2;
                    if (ch >= lo && ch <= hi) match = true;
                } else if (nocase ? tolower((unsigned char)p[0]) == tolower((unsigned char)s[0])
                                  : p[0] == s[0]) {
                    match = true;
                }
                p++, pn--;
            }
            if (not ) match = !match;
            if (!match) return false;
            s++, sn--;
            break;
        }
        case '\\':
            if (pn >= 2) p++, pn--;
            /* fall through */
        default:
            if (nocase ? tolower((unsigned char)p[0]) != tolower((unsigned char)s[0])
                       : p[0] != s[0])
                return false;
            s++, sn--;
            break;
        }
        p++, pn--;
        if (sn == 0) {
            while (pn && *p == '*') p++, pn--;
            break;
        }
    }
    return pn == 0 && sn == 0;
}

bool glob_match(const char *p, size_t pn, const char *s, size_t sn)
{
    bool skip = false;
    return match_impl(p, pn, s, sn, false, &skip);
}

/* ---- keys and members collected ---------------------------------------- */
void keylist_add(struct keylist *l, const char *k, size_t kn)
{
    if (l->pattern && !glob_match(l->pattern->p, l->pattern->n, k, kn)) return;
    if (l->len + kn + sizeof(size_t) > l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4096;
        while (cap < l->len + kn + sizeof(size_t)) cap *= 2;
        char *nb = realloc(l->buf, cap);
        if (!nb) {
            l->oom = true;
            return;
        }
        l->buf = nb;
        l->cap = cap;
    }
    memcpy(l->buf + l->len, &kn, sizeof kn);
    memcpy(l->buf + l->len + sizeof kn, k, kn);
    l->len += sizeof kn + kn;
    l->n++;
}

/* The entry at *off, and *off past it; false after the last. */
bool keylist_next(const struct keylist *l, size_t *off, const char **k, size_t *kn)
{
    if (*off >= l->len) return false;
    memcpy(kn, l->buf + *off, sizeof *kn);
    *k = l->buf + *off + sizeof *kn;
    *off += sizeof *kn + *kn;
    return true;
}

void out_keylist(struct conn *c, struct keylist *l)
{
    out_array(c, l->n);
    const char *k;
    size_t kn;
    for (size_t off = 0; keylist_next(l, &off, &k, &kn);) out_bulk(c, k, kn);
    free(l->buf);
}

void collect_member(void *keylist, const char *m, size_t n)
{
    keylist_add(keylist, m, n);
}

void collect_field(void *keylist, const char *f, size_t fn, const char *v, size_t vn)
{
    keylist_add(keylist, f, fn);
    keylist_add(keylist, v, vn);
}

/* SCAN's cursor, as Redis's parseScanCursorOrReply takes it */
bool get_cursor(struct conn *c, const struct arg *a, uint64_t *cursor)
{
    char buf[32];
    if (a->n == 0 || a->n >= sizeof buf || is_space(a->p[0])) goto bad;
    memcpy(buf, a->p, a->n);
    buf[a->n] = 0;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(buf, &end, 10);
    if (*end || errno == ERANGE) goto bad;
    *cursor = v;
    return true;
bad:
    out_err(c, "ERR invalid cursor");
    return false;
}

/* SCAN, SSCAN, HSCAN's options from a[first]; false after an error reply */
bool scan_options(struct conn *c, struct arg *a, size_t argc, size_t first,
                  const struct arg **pattern, long long *count, enum kv_type *type)
{
    *pattern = NULL;
    *count = 10;
    for (size_t j = first; j < argc; j++) {
        bool more = j + 1 < argc;
        if (arg_is(&a[j], "COUNT") && more) {
            if (!get_ll(c, &a[j + 1], count)) return false;
            if (*count < 1) {
                out_syntax(c);
                return false;
            }
            j++;
        } else if (arg_is(&a[j], "MATCH") && more) {
            *pattern = &a[++j];
            if ((*pattern)->n == 1 && (*pattern)->p[0] == '*') *pattern = NULL;
        } else if (type && arg_is(&a[j], "TYPE") && more) {
            *type = KV_NONE;
            for (int t = 1; t < 6; t++)
                if (arg_is(&a[j + 1], type_names[t])) *type = (enum kv_type)t;
            if (*type == KV_NONE) *type = (enum kv_type)99; /* matches nothing */
            j++;
        } else {
            out_syntax(c);
            return false;
        }
    }
    return true;
}

void out_cursor(struct conn *c, uint64_t cursor)
{
    char buf[24];
    int n = snprintf(buf, sizeof buf, "%llu", (unsigned long long)cursor);
    out_array(c, 2);
    out_bulk(c, buf, (size_t)n);
}

/* SSCAN, HSCAN and ZSCAN: a step of the cursor as SCAN's; MATCH filters
 * members (fields) after.  As Redis's: the cursor parsed, then the key
 * looked up (a missing one an empty scan, whatever the options), then the
 * options. */
void scan_members(struct conn *c, struct arg *a, size_t argc, enum kv_type t)
{
    uint64_t cursor;
    const struct arg *pattern;
    long long count;
    if (!get_cursor(c, &a[2], &cursor)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], t, &o)) return;
    if (!o) {
        out_cursor(c, 0);
        return out_array(c, 0);
    }
    if (!scan_options(c, a, argc, 3, &pattern, &count, NULL)) return;
    struct keylist l = {0}, m = {0};
    size_t per = t == KV_SET ? 1 : 2;
    long long steps = count * 10;
    do {
        cursor = t == KV_SET    ? kv_set_scan(server.kv, o, cursor, collect_member, &l)
                 : t == KV_HASH ? kv_hash_scan(server.kv, o, cursor, collect_field, &l)
                                : zscan_step(o, cursor, &l);
    } while (cursor && (long long)(l.n / per) < count && --steps > 0 && !l.oom);
    const char *e[2];
    size_t en[2];
    for (size_t off = 0; !l.oom && keylist_next(&l, &off, &e[0], &en[0]);) {
        if (per == 2) keylist_next(&l, &off, &e[1], &en[1]);
        if (pattern && !glob_match(pattern->p, pattern->n, e[0], en[0])) continue;
        for (size_t k = 0; k < per; k++) keylist_add(&m, e[k], en[k]);
    }
    free(l.buf);
    if (l.oom || m.oom) {
        free(m.buf);
        return out_oom(c);
    }
    out_cursor(c, cursor);
    out_keylist(c, &m);
}

/* ---- tables of byte strings in the process's memory -------------------- */
static uint64_t strtab_hash(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

static struct strent **strtab_link(struct strtab *t, const char *s, size_t n, uint64_t h)
{
    struct strent **l = &t->b[h & (t->size - 1)];
    while (*l && !((*l)->hash == h && (*l)->len == n && !memcmp((*l)->s, s, n))) l = &(*l)->next;
    return l;
}

struct strent *strtab_find(struct strtab *t, const char *s, size_t n)
{
    return t->n ? *strtab_link(t, s, n, strtab_hash(s, n)) : NULL;
}

struct strent *strtab_add(struct strtab *t, const char *s, size_t n)
{
    struct strent *e = strtab_find(t, s, n);
    if (e) return e;
    if (t->n >= t->size) { /* doubled at one entry per bucket */
        size_t size = t->size ? t->size * 2 : 16;
        struct strent **b = calloc(size, sizeof *b);
        if (!b && !t->size) return NULL;
        if (b) {
            for (size_t i = 0; i < t->size; i++)
                for (struct strent *x = t->b[i], *next; x; x = next) {
                    next = x->next;
                    x->next = b[x->hash & (size - 1)];
                    b[x->hash & (size - 1)] = x;
                }
            free(t->b);
            t->b = b;
            t->size = size;
        }
    }
    if (!(e = calloc(1, sizeof *e + n))) return NULL;
    e->hash = strtab_hash(s, n);
    e->len = n;
    memcpy(e->s, s, n);
    struct strent **l = &t->b[e->hash & (t->size - 1)];
    e->next = *l;
    *l = e;
    t->n++;
    return e;
}

void strtab_del(struct strtab *t, struct strent *e)
{
    *strtab_link(t, e->s, e->len, e->hash) = e->next;
    free(e);
    if (--t->n == 0) { /* nothing left: the buckets go too */
        free(t->b);
        t->b = NULL;
        t->size = 0;
    }
}

struct strent *strtab_next(const struct strtab *t, const struct strent *e)
{
    if (e && e->next) return e->next;
    for (size_t i = e ? (e->hash & (t->size - 1)) + 1 : 0; i < t->size; i++)
        if (t->b[i]) return t->b[i];
    return NULL;
}

/* ---- the store's touch hook: WATCH and the blocked clients ------------- */
static void key_touched(void *arg, const char *key, size_t klen, bool deleted)
{
    (void)arg;
    watch_on_touch(key, klen, deleted);
    if (!deleted) blocking_key_touched(key, klen);
}

void touch_hook_update(void)
{
    bool need = watch_any() || blocking_clients() > 0;
    kv_set_touch_hook(server.kv, need ? key_touched : NULL, NULL);
}

/* ---- values copied (COPY, and the commands that build a value under a
 * name of their own before it replaces the destination's) --------------- */
size_t temp_key(char *buf, size_t cap)
{
    size_t n = 0;
    for (unsigned i = 0; !n || kv_peek(server.kv, buf, n); i++)
        n = (size_t)snprintf(buf, cap, "%ckv-server:tmp:%u", 0, i);
    return n;
}

static void collect_score(struct keylist *l, const char *m, size_t n, double d)
{
    keylist_add(l, m, n);
    keylist_add(l, (const char *)&d, sizeof d);
}

bool value_snapshot(kv_obj *o, struct keylist *l)
{
    const char *p;
    size_t n;
    double d;
    uint64_t cursor = 0;
    switch (kv_obj_type(o)) {
    case KV_STRING:
        kv_str_get(o, &p, &n);
        keylist_add(l, p, n);
        break;
    case KV_LIST:
        for (kv_lnode *e = kv_list_at(server.kv, o, 0); e && !l->oom;
             e = kv_list_next(server.kv, e)) {
            kv_lnode_get(e, &p, &n);
            keylist_add(l, p, n);
        }
        break;
    case KV_SET:
        do cursor = kv_set_scan(server.kv, o, cursor, collect_member, l);
        while (cursor && !l->oom);
        break;
    case KV_HASH:
        do cursor = kv_hash_scan(server.kv, o, cursor, collect_field, l);
        while (cursor && !l->oom);
        break;
    case KV_ZSET:
        for (kv_znode *z = kv_zset_at(server.kv, o, 0); z && !l->oom;
             z = kv_zset_next(server.kv, z)) {
            kv_znode_get(z, &p, &n, &d);
            collect_score(l, p, n, d);
        }
        break;
    default:
        break;
    }
    return !l->oom;
}

kv_obj *value_restore(const char *key, size_t klen, enum kv_type t, const struct keylist *l)
{
    const char *p, *q = NULL;
    size_t n, qn = 0, off = 0;
    if (t == KV_STRING) {
        if (!keylist_next(l, &off, &p, &n)) p = "", n = 0;
        return kv_str_set(server.kv, key, klen, p, n, false);
    }
    kv_obj *o = kv_create(server.kv, key, klen, t);
    bool ok = o != NULL;
    while (ok && keylist_next(l, &off, &p, &n)) {
        switch (t) {
        case KV_LIST:
            ok = kv_list_push(server.kv, o, true, p, n) >= 0;
            break;
        case KV_SET:
            ok = kv_set_add(server.kv, o, p, n) >= 0;
            break;
        case KV_HASH:
            keylist_next(l, &off, &q, &qn);
            ok = kv_hash_set(server.kv, o, p, n, q, qn) >= 0;
            break;
        case KV_ZSET: {
            double d;
            keylist_next(l, &off, &q, &qn);
            memcpy(&d, q, sizeof d);
            ok = kv_zset_add(server.kv, o, p, n, d) >= 0;
            break;
        }
        default:
            break;
        }
    }
    if (ok) return o;
    if (o) kv_delete(server.kv, key, klen);
    return NULL;
}

bool replace_with(const struct arg *dst, const char *tmp, size_t tn)
{
    kv_delete(server.kv, dst->p, dst->n);
    kv_obj *o = kv_rename(server.kv, kv_peek(server.kv, tmp, tn), dst->p, dst->n);
    if (!o) kv_delete(server.kv, tmp, tn);
    return o != NULL;
}
