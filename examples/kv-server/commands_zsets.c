/* examples/kv-server/commands_zsets.c - the sorted set commands. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "net.h"
#include "server.h"

enum { Z_NX = 1, Z_XX = 2, Z_GT = 4, Z_LT = 8, Z_CH = 16, Z_INCR = 32 };

static void zadd_generic(struct conn *c, struct arg *a, size_t argc, int flags)
{
    size_t j = 2;
    for (; j < argc; j++) {
        if (arg_is(&a[j], "NX"))
            flags |= Z_NX;
        else if (arg_is(&a[j], "XX"))
            flags |= Z_XX;
        else if (arg_is(&a[j], "GT"))
            flags |= Z_GT;
        else if (arg_is(&a[j], "LT"))
            flags |= Z_LT;
        else if (arg_is(&a[j], "CH"))
            flags |= Z_CH;
        else if (arg_is(&a[j], "INCR"))
            flags |= Z_INCR;
        else
            break;
    }
    size_t elements = argc - j;
    if (elements % 2 || !elements) return out_syntax(c);
    elements /= 2;
    if ((flags & Z_NX) && (flags & Z_XX))
        return out_err(c, "ERR XX and NX options at the same time are not compatible");
    if (((flags & Z_GT) && (flags & Z_NX)) || ((flags & Z_LT) && (flags & Z_NX)) ||
        ((flags & Z_GT) && (flags & Z_LT)))
        return out_err(c, "ERR GT, LT, and/or NX options at the same time are not compatible");
    if ((flags & Z_INCR) && elements > 1)
        return out_err(c, "ERR INCR option supports a single increment-element pair");
    for (size_t i = 0; i < elements; i++) {
        double d;
        if (!parse_double(a[j + 2 * i].p, a[j + 2 * i].n, &d)) return out_err(c, ERR_NOT_FLOAT);
    }
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    if (!o) {
        if (flags & Z_XX) return (flags & Z_INCR) ? out_nil(c) : out_int(c, 0);
        if (!(o = kv_create(server.kv, a[1].p, a[1].n, KV_ZSET))) return out_oom(c);
    }
    long long added = 0, updated = 0, processed = 0;
    double result = 0;
    bool aborted = false;
    for (size_t i = 0; i < elements; i++) {
        const struct arg *m = &a[j + 2 * i + 1];
        double score, cur;
        parse_double(a[j + 2 * i].p, a[j + 2 * i].n, &score);
        bool exists = kv_zset_score(server.kv, o, m->p, m->n, &cur);
        if ((exists && (flags & Z_NX)) || (!exists && (flags & Z_XX))) {
            aborted = true;
            continue;
        }
        if (exists && (flags & Z_INCR)) {
            score += cur;
            if (isnan(score)) {
                drop_if_empty(o, kv_zset_card(server.kv, o));
                return out_err(c, "ERR resulting score is not a number (NaN)");
            }
        }
        if (exists && (((flags & Z_GT) && score <= cur) || ((flags & Z_LT) && score >= cur))) {
            aborted = true;
            continue;
        }
        /* stored without -0, as Redis's small sets keep scores as text ("0");
         * the reply has the score computed */
        int r = kv_zset_add(server.kv, o, m->p, m->n, score == 0 ? 0 : score);
        if (r < 0) {
            drop_if_empty(o, kv_zset_card(server.kv, o));
            return out_oom(c);
        }
        if (r == 1)
            added++;
        else if (score != cur)
            updated++;
        processed++;
        result = score;
    }
    drop_if_empty(o, kv_zset_card(server.kv, o));
    server.changes += (uint64_t)(added + updated);
    if (flags & Z_INCR) {
        if (aborted && !processed) return out_nil(c);
        return out_double(c, result);
    }
    out_int(c, (flags & Z_CH) ? added + updated : added);
}

void cmd_zadd(struct conn *c, struct arg *a, size_t argc)
{
    zadd_generic(c, a, argc, 0);
}

void cmd_zincrby(struct conn *c, struct arg *a, size_t argc)
{
    zadd_generic(c, a, argc, Z_INCR);
}

void cmd_zrem(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    long long n = 0;
    for (size_t i = 2; o && i < argc; i++) n += kv_zset_rem(server.kv, o, a[i].p, a[i].n);
    if (o) drop_if_empty(o, kv_zset_card(server.kv, o));
    server.changes += (uint64_t)n;
    out_int(c, n);
}

void cmd_zscore(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    double d;
    if (!o || !kv_zset_score(server.kv, o, a[2].p, a[2].n, &d)) return out_nil(c);
    out_double(c, d);
}

void cmd_zmscore(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    out_array(c, argc - 2);
    for (size_t i = 2; i < argc; i++) {
        double d;
        if (o && kv_zset_score(server.kv, o, a[i].p, a[i].n, &d))
            out_double(c, d);
        else
            out_nil(c);
    }
}

void cmd_zcard(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    out_int(c, o ? (long long)kv_zset_card(server.kv, o) : 0);
}

void cmd_zrank(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    long long r = o ? kv_zset_rank(server.kv, o, a[2].p, a[2].n) : -1;
    if (r < 0) return out_nil(c);
    bool rev = a[0].n == 8; /* zrevrank */
    out_int(c, rev ? (long long)kv_zset_card(server.kv, o) - 1 - r : r);
}

/* Where a range's members go: the reply, or (ZRANGESTORE) a list of
 * members and scores for the destination. */
struct zout {
    struct conn *c;
    bool scores;
    struct keylist *store;
};

static void zout_begin(struct zout *z, size_t n)
{
    if (!z->store) out_array(z->c, n * (z->scores ? 2 : 1));
}

static void out_znode(struct zout *z, kv_znode *x)
{
    const char *m;
    size_t n;
    double d;
    kv_znode_get(x, &m, &n, &d);
    if (z->store) {
        keylist_add(z->store, m, n);
        keylist_add(z->store, (const char *)&d, sizeof d);
        return;
    }
    out_bulk(z->c, m, n);
    if (z->scores) out_double(z->c, d);
}

/* ZRANGESTORE's end: the destination gets the members (a new sorted set)
 * or is deleted if there are none; their count */
static void zout_store(struct conn *c, const struct arg *dst, struct keylist *l)
{
    size_t n = l->n / 2;
    if (l->oom) {
        free(l->buf);
        return out_oom(c);
    }
    if (!n) {
        if (lookup_key(dst)) {
            kv_delete(server.kv, dst->p, dst->n);
            server.changes++;
        }
        return out_int(c, 0);
    }
    char tmp[48];
    size_t tn = temp_key(tmp, sizeof tmp);
    bool ok = value_restore(tmp, tn, KV_ZSET, l) && replace_with(dst, tmp, tn);
    free(l->buf);
    if (!ok) return out_oom(c);
    server.changes++;
    out_int(c, (long long)n);
}

/* A score range's end as ZRANGEBYSCORE takes it: "(" for exclusive */
static bool parse_score_bound(const struct arg *a, double *v, bool *excl)
{
    *excl = a->n && a->p[0] == '(';
    const char *p = a->p + *excl;
    size_t n = a->n - *excl;
    char buf[128];
    if (n >= sizeof buf) return false;
    memcpy(buf, p, n);
    buf[n] = 0;
    char *end;
    *v = strtod(buf, &end); /* as Redis's zslParseRange: "" is 0 */
    return !*end && !isnan(*v);
}

static bool above_min(double s, double min, bool minex)
{
    return minex ? s > min : s >= min;
}

static bool below_max(double s, double max, bool maxex)
{
    return maxex ? s < max : s <= max;
}

/* A lexicographic range's end as ZRANGEBYLEX takes it (Redis's
 * zslParseLexRangeItem): "-" below every member, "+" above, "[m" m
 * included, "(m" excluded; anything else is not one. */
struct lex_bound {
    const char *p;
    size_t n;
    int inf; /* -1: "-", 1: "+", 0: p */
    bool ex;
};

static bool parse_lex_bound(const struct arg *a, struct lex_bound *b)
{
    *b = (struct lex_bound){0};
    if (a->n == 0) return false;
    switch (a->p[0]) {
    case '+':
    case '-': /* (a NUL after it ends it, as in Redis's C string) */
        if (a->n > 1 && a->p[1]) return false;
        b->inf = a->p[0] == '+' ? 1 : -1;
        b->ex = true;
        return true;
    case '(':
    case '[':
        b->ex = a->p[0] == '(';
        b->p = a->p + 1;
        b->n = a->n - 1;
        return true;
    default:
        return false;
    }
}

static bool parse_lex_range(const struct arg *min, const struct arg *max, struct lex_bound *lo,
                            struct lex_bound *hi)
{
    return parse_lex_bound(min, lo) && parse_lex_bound(max, hi);
}

/* The member's bytes against the bound's: <0, 0, >0 (memcmp, then the
 * shorter first) */
static int lex_cmp(const char *m, size_t n, const struct lex_bound *b)
{
    if (b->inf) return -b->inf;
    int c = memcmp(m, b->p, n < b->n ? n : b->n);
    return c ? c : n < b->n ? -1 : n > b->n;
}

static bool lex_above_min(const char *m, size_t n, const struct lex_bound *min)
{
    int c = lex_cmp(m, n, min);
    return min->ex ? c > 0 : c >= 0;
}

static bool lex_below_max(const char *m, size_t n, const struct lex_bound *max)
{
    int c = lex_cmp(m, n, max);
    return max->ex ? c < 0 : c <= 0;
}

/* A range of a sorted set by score or by member bytes, and where it
 * starts: the first member in the range, or (last) its last. */
enum { BY_RANK, BY_SCORE, BY_LEX };
struct zrange {
    int by;
    double min, max;
    bool minex, maxex;
    struct lex_bound lo, hi;
};

static bool zrange_above_min(const struct zrange *r, kv_znode *z)
{
    const char *m;
    size_t n;
    double d;
    kv_znode_get(z, &m, &n, &d);
    return r->by == BY_SCORE ? above_min(d, r->min, r->minex) : lex_above_min(m, n, &r->lo);
}

static bool zrange_below_max(const struct zrange *r, kv_znode *z)
{
    const char *m;
    size_t n;
    double d;
    kv_znode_get(z, &m, &n, &d);
    return r->by == BY_SCORE ? below_max(d, r->max, r->maxex) : lex_below_max(m, n, &r->hi);
}

static kv_znode *zrange_first(const struct zrange *r, kv_obj *o)
{
    if (r->by == BY_SCORE) return kv_zset_first_from(server.kv, o, r->min, r->minex);
    if (r->lo.inf) return r->lo.inf < 0 ? kv_zset_at(server.kv, o, 0) : NULL;
    return kv_zset_first_lex(server.kv, o, r->lo.p, r->lo.n, r->lo.ex);
}

static kv_znode *zrange_last(const struct zrange *r, kv_obj *o)
{
    size_t card = kv_zset_card(server.kv, o);
    kv_znode *z; /* the first member past the range's end */
    if (r->by == BY_SCORE)
        z = kv_zset_first_from(server.kv, o, r->max, !r->maxex);
    else if (r->hi.inf)
        z = r->hi.inf > 0 ? NULL : kv_zset_at(server.kv, o, 0);
    else
        z = kv_zset_first_lex(server.kv, o, r->hi.p, r->hi.n, !r->hi.ex);
    return z ? kv_zset_prev(server.kv, z) : kv_zset_at(server.kv, o, card - 1);
}

/* ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count]
 * [WITHSCORES], ZREVRANGE, ZRANGEBYSCORE, ZREVRANGEBYSCORE, ZRANGEBYLEX,
 * ZREVRANGEBYLEX, and ZRANGESTORE dst (a[] from dst: a[1] its source, no
 * WITHSCORES): options, then their conflicts, then the range, then the
 * key, as Redis's zrangeGenericCommand checks them. */
static void zrange_generic(struct conn *c, struct arg *a, size_t argc, int by, bool rev,
                           bool zrange, const struct arg *dst)
{
    bool scores = false, limit = false;
    long long offset = 0, count = -1;
    struct keylist stored = {0};
    for (size_t j = 4; j < argc; j++) {
        if (!dst && arg_is(&a[j], "WITHSCORES")) {
            scores = true;
        } else if (arg_is(&a[j], "LIMIT") && j + 2 < argc) {
            if (!get_ll(c, &a[j + 1], &offset) || !get_ll(c, &a[j + 2], &count)) return;
            limit = true;
            j += 2;
        } else if (zrange && by == BY_RANK && arg_is(&a[j], "BYSCORE")) { /* (once) */
            by = BY_SCORE;
        } else if (zrange && by == BY_RANK && arg_is(&a[j], "BYLEX")) {
            by = BY_LEX;
        } else if (zrange && !rev && arg_is(&a[j], "REV")) {
            rev = true;
        } else {
            return out_syntax(c);
        }
    }
    if (limit && count != -1 && by == BY_RANK) /* (a count of -1, "no limit", is let through) */
        return out_err(c, "ERR syntax error, LIMIT is only supported in combination with "
                          "either BYSCORE or BYLEX");
    if (scores && by == BY_LEX)
        return out_err(c, "ERR syntax error, WITHSCORES not supported in combination with BYLEX");
    struct zout zo = {c, scores, dst ? &stored : NULL};
    if (by == BY_RANK) {
        long long start, end;
        if (!get_ll(c, &a[2], &start) || !get_ll(c, &a[3], &end)) return;
        kv_obj *o;
        if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
        long long len = o ? (long long)kv_zset_card(server.kv, o) : 0;
        if (!o || !clamp_range(len, &start, &end))
            return dst ? zout_store(c, dst, &stored) : out_array(c, 0);
        long long n = end - start + 1;
        zout_begin(&zo, (size_t)n);
        kv_znode *z = kv_zset_at(server.kv, o, (size_t)(rev ? len - 1 - start : start));
        for (long long i = 0; i < n; i++) {
            out_znode(&zo, z);
            z = rev ? kv_zset_prev(server.kv, z) : kv_zset_next(server.kv, z);
        }
        if (dst) zout_store(c, dst, &stored);
        return;
    }
    struct zrange r = {.by = by};
    const struct arg *lo = rev ? &a[3] : &a[2], *hi = rev ? &a[2] : &a[3];
    if (by == BY_SCORE &&
        (!parse_score_bound(lo, &r.min, &r.minex) || !parse_score_bound(hi, &r.max, &r.maxex)))
        return out_err(c, "ERR min or max is not a float");
    if (by == BY_LEX && !parse_lex_range(lo, hi, &r.lo, &r.hi))
        return out_err(c, "ERR min or max not valid string range item");
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    if (!o || offset < 0 || count == 0) return dst ? zout_store(c, dst, &stored) : out_array(c, 0);
    /* the range's first member in the order of the reply */
    kv_znode *z = rev ? zrange_last(&r, o) : zrange_first(&r, o);
    for (; z && offset > 0; offset--)
        z = rev ? kv_zset_prev(server.kv, z) : kv_zset_next(server.kv, z);
    /* count first, then reply */
    size_t n = 0;
    for (kv_znode *x = z; x && (count < 0 || (long long)n < count);
         x = rev ? kv_zset_prev(server.kv, x) : kv_zset_next(server.kv, x)) {
        if (rev ? !zrange_above_min(&r, x) : !zrange_below_max(&r, x)) break;
        n++;
    }
    zout_begin(&zo, n);
    for (size_t i = 0; i < n; i++) {
        out_znode(&zo, z);
        z = rev ? kv_zset_prev(server.kv, z) : kv_zset_next(server.kv, z);
    }
    if (dst) zout_store(c, dst, &stored);
}

void cmd_zrange(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_RANK, false, true, NULL);
}

void cmd_zrevrange(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_RANK, true, false, NULL);
}

void cmd_zrangebyscore(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_SCORE, false, false, NULL);
}

void cmd_zrevrangebyscore(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_SCORE, true, false, NULL);
}

void cmd_zrangebylex(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_LEX, false, false, NULL);
}

void cmd_zrevrangebylex(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_LEX, true, false, NULL);
}

/* ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count] */
void cmd_zrangestore(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a + 1, argc - 1, BY_RANK, false, true, &a[1]);
}

void cmd_zlexcount(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    struct zrange r = {.by = BY_LEX};
    if (!parse_lex_range(&a[2], &a[3], &r.lo, &r.hi))
        return out_err(c, "ERR min or max not valid string range item");
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    long long n = 0;
    for (kv_znode *z = o ? zrange_first(&r, o) : NULL; z && zrange_below_max(&r, z);
         z = kv_zset_next(server.kv, z))
        n++;
    out_int(c, n);
}

/* ZREMRANGEBYSCORE, ZREMRANGEBYRANK, ZREMRANGEBYLEX: the range parsed
 * first, then the key (0 if missing); a change for each member removed,
 * the key deleted with its last. */
static void zremrange_generic(struct conn *c, struct arg *a, int by)
{
    struct zrange r = {.by = by};
    long long start = 0, end = 0;
    if (by == BY_RANK && (!get_ll(c, &a[2], &start) || !get_ll(c, &a[3], &end))) return;
    if (by == BY_SCORE && (!parse_score_bound(&a[2], &r.min, &r.minex) ||
                           !parse_score_bound(&a[3], &r.max, &r.maxex)))
        return out_err(c, "ERR min or max is not a float");
    if (by == BY_LEX && !parse_lex_range(&a[2], &a[3], &r.lo, &r.hi))
        return out_err(c, "ERR min or max not valid string range item");
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    if (!o) return out_int(c, 0);
    long long removed = 0;
    if (by == BY_RANK) {
        if (!clamp_range((long long)kv_zset_card(server.kv, o), &start, &end)) return out_int(c, 0);
        for (; removed <= end - start; removed++) {
            const char *m;
            size_t n;
            double d;
            kv_znode_get(kv_zset_at(server.kv, o, (size_t)start), &m, &n, &d);
            kv_zset_rem(server.kv, o, m, n);
        }
    } else {
        for (kv_znode *z = zrange_first(&r, o), *next; z && zrange_below_max(&r, z); z = next) {
            next = kv_zset_next(server.kv, z); /* (another node: removing z moves nothing) */
            const char *m;
            size_t n;
            double d;
            kv_znode_get(z, &m, &n, &d);
            kv_zset_rem(server.kv, o, m, n);
            removed++;
        }
    }
    server.changes += (uint64_t)removed;
    drop_if_empty(o, kv_zset_card(server.kv, o));
    out_int(c, removed);
}

void cmd_zremrangebyscore(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    zremrange_generic(c, a, BY_SCORE);
}

void cmd_zremrangebyrank(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    zremrange_generic(c, a, BY_RANK);
}

void cmd_zremrangebylex(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    zremrange_generic(c, a, BY_LEX);
}

void cmd_zcount(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    double min, max;
    bool minex, maxex;
    if (!parse_score_bound(&a[2], &min, &minex) || !parse_score_bound(&a[3], &max, &maxex))
        return out_err(c, "ERR min or max is not a float");
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    long long n = 0;
    for (kv_znode *z = o ? kv_zset_first_from(server.kv, o, min, minex) : NULL; z;
         z = kv_zset_next(server.kv, z)) {
        const char *m;
        size_t mn;
        double d;
        kv_znode_get(z, &m, &mn, &d);
        if (!below_max(d, max, maxex)) break;
        n++;
    }
    out_int(c, n);
}

static void zpop_generic(struct conn *c, struct arg *a, size_t argc, bool max)
{
    long long count = 1;
    if (argc > 3) return out_syntax(c);
    if (argc == 3 && !get_count(c, &a[2], &count)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return; /* (WRONGTYPE before a count of 0) */
    if (!o || count == 0) return out_array(c, 0);
    size_t card = kv_zset_card(server.kv, o);
    if ((unsigned long long)count > card) count = (long long)card;
    out_array(c, (size_t)count * 2);
    for (long long i = 0; i < count; i++) {
        kv_znode *z = kv_zset_at(server.kv, o, max ? kv_zset_card(server.kv, o) - 1 : 0);
        const char *m;
        size_t n;
        double d;
        kv_znode_get(z, &m, &n, &d);
        out_bulk(c, m, n);
        out_double(c, d);
        kv_zset_rem(server.kv, o, m, n);
        server.changes++;
    }
    drop_if_empty(o, kv_zset_card(server.kv, o));
}

void cmd_zpopmin(struct conn *c, struct arg *a, size_t argc)
{
    zpop_generic(c, a, argc, false);
}

void cmd_zpopmax(struct conn *c, struct arg *a, size_t argc)
{
    zpop_generic(c, a, argc, true);
}

/* ---- ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD -------------- */
/* An element of a source or of the result: its member's bytes (in the
 * sources' copy, or the result's) and its score. */
struct zel {
    const char *m;
    size_t n;
    double score;
};

/* A source: a sorted set, or a set (every score 1), or a missing key
 * (empty); its elements copied into process memory. */
struct zsrc {
    const struct arg *key;
    enum kv_type type; /* KV_NONE: missing */
    size_t card;
    double weight;
};

static void add_member_score(void *arg, const char *m, size_t n)
{
    struct keylist *l = arg;
    double one = 1;
    keylist_add(l, m, n);
    keylist_add(l, (const char *)&one, sizeof one);
}

/* The source's elements, as value_snapshot's pairs */
static bool zsrc_elements(const struct zsrc *s, struct keylist *l)
{
    kv_obj *o = s->type == KV_NONE ? NULL : lookup_key(s->key);
    if (!o) return true;
    if (s->type == KV_ZSET) return value_snapshot(o, l);
    uint64_t cursor = 0;
    do cursor = kv_set_scan(server.kv, o, cursor, add_member_score, l);
    while (cursor && !l->oom);
    return !l->oom;
}

/* Whether the source holds the member, and its score */
static bool zsrc_find(const struct zsrc *s, const char *m, size_t n, double *score)
{
    kv_obj *o = s->type == KV_NONE ? NULL : lookup_key(s->key);
    if (!o) return false;
    if (s->type == KV_SET) {
        *score = 1;
        return kv_set_has(server.kv, o, m, n);
    }
    return kv_zset_score(server.kv, o, m, n, score);
}

enum { AGGR_SUM, AGGR_MIN, AGGR_MAX };

static void aggregate(double *target, double v, int aggr)
{
    if (aggr == AGGR_SUM) {
        *target += v;
        if (isnan(*target)) *target = 0; /* inf + -inf: 0, as in Redis */
    } else if (aggr == AGGR_MIN) {
        *target = v < *target ? v : *target;
    } else {
        *target = v > *target ? v : *target;
    }
}

static int zel_cmp(const void *x, const void *y)
{
    const struct zel *a = x, *b = y;
    if (a->score != b->score) return a->score < b->score ? -1 : 1;
    int c = memcmp(a->m, b->m, a->n < b->n ? a->n : b->n);
    return c ? c : a->n < b->n ? -1 : a->n > b->n;
}

/* A result being built: elements, and for a union an index of members. */
struct zres {
    struct zel *el;
    size_t n, cap;
    size_t *index, isize; /* open addressing: 1 + element, 0 empty */
    bool oom;
};

static uint64_t member_hash(const char *m, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)m[i]) * 0x100000001b3ull;
    return h;
}

static struct zel *zres_add(struct zres *r, const char *m, size_t n, double score)
{
    if (r->n == r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 64;
        struct zel *e = realloc(r->el, cap * sizeof *e);
        if (!e) {
            r->oom = true;
            return NULL;
        }
        r->el = e;
        r->cap = cap;
    }
    r->el[r->n] = (struct zel){m, n, score};
    return &r->el[r->n++];
}

/* The union's element for the member (added with score if new; *added) */
static struct zel *zres_union(struct zres *r, const char *m, size_t n, double score, bool *added)
{
    if ((r->n + 1) * 2 > r->isize) {
        size_t size = r->isize ? r->isize * 2 : 128;
        size_t *ix = calloc(size, sizeof *ix);
        if (!ix) {
            r->oom = true;
            return NULL;
        }
        for (size_t i = 0; i < r->n; i++) {
            size_t j = member_hash(r->el[i].m, r->el[i].n) & (size - 1);
            while (ix[j]) j = (j + 1) & (size - 1);
            ix[j] = i + 1;
        }
        free(r->index);
        r->index = ix;
        r->isize = size;
    }
    size_t j = member_hash(m, n) & (r->isize - 1);
    for (; r->index[j]; j = (j + 1) & (r->isize - 1)) {
        struct zel *e = &r->el[r->index[j] - 1];
        if (e->n == n && !memcmp(e->m, m, n)) {
            *added = false;
            return e;
        }
    }
    *added = true;
    struct zel *e = zres_add(r, m, n, score);
    if (e) r->index[j] = r->n;
    return e;
}

static int zsrc_by_card(const void *x, const void *y)
{
    const struct zsrc *a = x, *b = y;
    return a->card < b->card ? -1 : a->card > b->card;
}

enum zop { Z_UNION, Z_INTER, Z_DIFF };

/* ZUNION/ZINTER/ZDIFF numkeys key ... [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX]
 * [WITHSCORES], ZUNIONSTORE/ZINTERSTORE/ZDIFFSTORE destination numkeys ...,
 * ZINTERCARD numkeys key ... [LIMIT limit], as Redis's
 * zunionInterDiffGenericCommand: numkeys, then the keys' types (a set
 * counts as a sorted set of scores 1), then the options (ZDIFF takes
 * neither WEIGHTS nor AGGREGATE).  The sources are taken smallest first
 * (as Redis sorts them: a sum is added in that order); a weighted score
 * that is NaN (inf * 0) counts 0, as a sum of inf and -inf does.  A
 * destination gets the result (a new sorted set, without expiry time) or,
 * if it is empty, is deleted. */
static void zsetop_generic(struct conn *c, struct arg *a, size_t argc, size_t numkeys_at,
                           enum zop op, const struct arg *dst, bool card_only, const char *name)
{
    long long setnum, limit = 0;
    if (!get_ll(c, &a[numkeys_at], &setnum)) return;
    if (setnum < 1) return out_err(c, "ERR at least 1 input key is needed for '%s' command", name);
    if ((unsigned long long)setnum > argc - numkeys_at - 1) return out_syntax(c);
    struct zsrc *src = calloc((size_t)setnum, sizeof *src);
    if (!src) return out_oom(c);
    size_t j = numkeys_at + 1;
    for (long long i = 0; i < setnum; i++, j++) {
        kv_obj *o = lookup_key(&a[j]);
        src[i] = (struct zsrc){.key = &a[j], .weight = 1, .type = o ? kv_obj_type(o) : KV_NONE};
        if (o && src[i].type != KV_ZSET && src[i].type != KV_SET) {
            free(src);
            return out_wrongtype(c);
        }
    }
    int aggr = AGGR_SUM;
    bool withscores = false;
    while (j < argc) {
        size_t remaining = argc - j;
        if (op != Z_DIFF && !card_only && remaining >= (size_t)setnum + 1 &&
            arg_is(&a[j], "WEIGHTS")) {
            j++;
            for (long long i = 0; i < setnum; i++, j++)
                if (!parse_double(a[j].p, a[j].n, &src[i].weight)) {
                    free(src);
                    return out_err(c, "ERR weight value is not a float");
                }
        } else if (op != Z_DIFF && !card_only && remaining >= 2 && arg_is(&a[j], "AGGREGATE")) {
            if (arg_is(&a[j + 1], "SUM"))
                aggr = AGGR_SUM;
            else if (arg_is(&a[j + 1], "MIN"))
                aggr = AGGR_MIN;
            else if (arg_is(&a[j + 1], "MAX"))
                aggr = AGGR_MAX;
            else {
                free(src);
                return out_syntax(c);
            }
            j += 2;
        } else if (!dst && !card_only && arg_is(&a[j], "WITHSCORES")) {
            withscores = true;
            j++;
        } else if (card_only && remaining >= 2 && arg_is(&a[j], "LIMIT")) {
            if (!parse_ll(&a[j + 1], &limit) || limit < 0) {
                free(src);
                return out_err(c, "ERR LIMIT can't be negative");
            }
            j += 2;
        } else {
            free(src);
            return out_syntax(c);
        }
    }
    for (long long i = 0; i < setnum; i++) {
        kv_obj *o = lookup_key(src[i].key);
        src[i].card = !o                      ? 0
                      : src[i].type == KV_SET ? kv_set_card(server.kv, o)
                                              : kv_zset_card(server.kv, o);
    }
    /* smallest first (a stable sort: glibc's qsort, which Redis calls, is
     * a merge sort) */
    if (op != Z_DIFF)
        for (long long i = 1; i < setnum; i++)
            for (long long k = i; k > 0 && zsrc_by_card(&src[k - 1], &src[k]) > 0; k--) {
                struct zsrc t = src[k];
                src[k] = src[k - 1];
                src[k - 1] = t;
            }
    struct keylist *els = calloc((size_t)setnum, sizeof *els);
    struct zres r = {0};
    long long cardinality = 0;
    if (!els) r.oom = true;
    for (long long i = 0; !r.oom && i < setnum; i++) {
        if ((op == Z_UNION || i == 0) && !zsrc_elements(&src[i], &els[i])) r.oom = true;
        if (op != Z_UNION) break; /* the others are asked */
    }
    const char *m, *sp;
    size_t n, sn;
    for (long long i = 0; !r.oom && i < setnum; i++) {
        for (size_t off = 0; !r.oom && keylist_next(&els[i], &off, &m, &n);) {
            double s0;
            keylist_next(&els[i], &off, &sp, &sn);
            memcpy(&s0, sp, sizeof s0);
            if (op == Z_DIFF) {
                bool found = false;
                for (long long k = 1; k < setnum && !found; k++) {
                    double ignored;
                    found = zsrc_find(&src[k], m, n, &ignored);
                }
                if (!found) zres_add(&r, m, n, s0);
                continue;
            }
            double score = src[i].weight * s0;
            if (isnan(score)) score = 0;
            if (op == Z_UNION) {
                bool added;
                struct zel *e = zres_union(&r, m, n, score, &added);
                if (e && !added) aggregate(&e->score, score, aggr);
                continue;
            }
            long long k = 1;
            for (; k < setnum; k++) {
                double v;
                if (src[k].key->n == src[0].key->n &&
                    !memcmp(src[k].key->p, src[0].key->p, src[0].key->n))
                    v = s0; /* the same key as the one iterated */
                else if (!zsrc_find(&src[k], m, n, &v))
                    break;
                aggregate(&score, v * src[k].weight, aggr);
            }
            if (k < setnum) continue;
            if (card_only) {
                if (++cardinality == limit) break;
            } else {
                zres_add(&r, m, n, score);
            }
        }
        if (op != Z_UNION) break;
    }
    free(src);
    if (r.oom) goto done;
    if (card_only) {
        out_int(c, cardinality);
        goto done;
    }
    if (r.n) qsort(r.el, r.n, sizeof *r.el, zel_cmp);
    if (!dst) {
        out_array(c, r.n * (withscores ? 2 : 1));
        for (size_t i = 0; i < r.n; i++) {
            out_bulk(c, r.el[i].m, r.el[i].n);
            if (withscores) out_double(c, r.el[i].score);
        }
        goto done;
    }
    if (r.n == 0) {
        if (lookup_key(dst)) {
            kv_delete(server.kv, dst->p, dst->n);
            server.changes++;
        }
        out_int(c, 0);
        goto done;
    }
    char tmp[48];
    size_t tn = temp_key(tmp, sizeof tmp);
    kv_obj *o = kv_create(server.kv, tmp, tn, KV_ZSET);
    for (size_t i = 0; o && i < r.n; i++) /* (stored without -0, as ZADD stores) */
        if (kv_zset_add(server.kv, o, r.el[i].m, r.el[i].n,
                        r.el[i].score == 0 ? 0 : r.el[i].score) < 0) {
            kv_delete(server.kv, tmp, tn);
            o = NULL;
        }
    if (!o || !replace_with(dst, tmp, tn)) {
        r.oom = true;
        goto done;
    }
    server.changes++;
    out_int(c, (long long)r.n);
done:
    if (r.oom) out_oom(c);
    for (long long i = 0; els && i < setnum; i++) free(els[i].buf);
    free(els);
    free(r.el);
    free(r.index);
}

void cmd_zunion(struct conn *c, struct arg *a, size_t argc)
{
    zsetop_generic(c, a, argc, 1, Z_UNION, NULL, false, "zunion");
}

void cmd_zinter(struct conn *c, struct arg *a, size_t argc)
{
    zsetop_generic(c, a, argc, 1, Z_INTER, NULL, false, "zinter");
}

void cmd_zdiff(struct conn *c, struct arg *a, size_t argc)
{
    zsetop_generic(c, a, argc, 1, Z_DIFF, NULL, false, "zdiff");
}

void cmd_zunionstore(struct conn *c, struct arg *a, size_t argc)
{
    zsetop_generic(c, a, argc, 2, Z_UNION, &a[1], false, "zunionstore");
}

void cmd_zinterstore(struct conn *c, struct arg *a, size_t argc)
{
    zsetop_generic(c, a, argc, 2, Z_INTER, &a[1], false, "zinterstore");
}

void cmd_zdiffstore(struct conn *c, struct arg *a, size_t argc)
{
    zsetop_generic(c, a, argc, 2, Z_DIFF, &a[1], false, "zdiffstore");
}

void cmd_zintercard(struct conn *c, struct arg *a, size_t argc)
{
    zsetop_generic(c, a, argc, 1, Z_INTER, NULL, true, "zintercard");
}

/* ---- ZRANDMEMBER, ZSCAN ------------------------------------------------ */
/* ZRANDMEMBER key [count [WITHSCORES]], and HRANDFIELD's count: as Redis,
 * between -LONG_MAX and LONG_MAX, and within half of that with the
 * scores (values).  false after an error reply. */
bool get_rand_count(struct conn *c, struct arg *a, size_t argc, const char *with, long long *count,
                    bool *withx)
{
    if (!parse_ll(&a[2], count)) {
        out_err(c, ERR_NOT_INT);
        return false;
    }
    if (*count == LLONG_MIN) {
        out_err(c, "ERR value is out of range, value must between -9223372036854775807 and "
                   "9223372036854775807");
        return false;
    }
    if (argc > 4 || (argc == 4 && !arg_is(&a[3], with))) {
        out_syntax(c);
        return false;
    }
    *withx = argc == 4;
    if (*withx && (*count < -LLONG_MAX / 2 || *count > LLONG_MAX / 2)) {
        out_err(c, "ERR value is out of range");
        return false;
    }
    return true;
}

void cmd_zrandmember(struct conn *c, struct arg *a, size_t argc)
{
    long long count = 1;
    bool ws = false;
    if (argc >= 3 && !get_rand_count(c, a, argc, "WITHSCORES", &count, &ws)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
    const char *m;
    size_t n;
    double d;
    if (argc == 2) {
        if (!o || !kv_zset_random(server.kv, o, &m, &n, &d)) return out_nil(c);
        return out_bulk(c, m, n);
    }
    if (!o || count == 0) return out_array(c, 0);
    size_t per = ws ? 2 : 1;
    if (count < 0) { /* with repeats */
        out_array(c, (size_t)-count * per);
        for (long long i = 0; i < -count && !c->dead; i++) {
            kv_zset_random(server.kv, o, &m, &n, &d);
            out_bulk(c, m, n);
            if (ws) out_double(c, d);
        }
        return;
    }
    size_t total = kv_zset_card(server.kv, o),
           want = (unsigned long long)count < total ? (size_t)count : total;
    size_t *pick = malloc(total * sizeof *pick);
    if (!pick) return out_oom(c);
    for (size_t i = 0; i < total; i++) pick[i] = total - 1 - i;
    out_array(c, want * per);
    /* a partial Fisher-Yates shuffle of the ranks; all of them, when every
     * member is asked for, highest first (as Redis 7.0 answers then) */
    for (size_t i = 0; i < want; i++) {
        size_t j = want == total ? i : i + (size_t)rand() % (total - i), t = pick[i];
        pick[i] = pick[j];
        pick[j] = t;
        kv_znode_get(kv_zset_at(server.kv, o, pick[i]), &m, &n, &d);
        out_bulk(c, m, n);
        if (ws) out_double(c, d);
    }
    free(pick);
}

/* A score as ZSCAN shows it: a sorted set small enough for Redis's
 * listpack as it is stored there (d2string: an integer of up to 2^62 in
 * full), a larger one as ZRANGE's. */
static void scan_score(struct keylist *l, double d, bool small)
{
    char buf[64];
    int len;
    if (small && d > -4611686018427387903.0 && d < 4611686018427387903.0 && d == (long long)d)
        len = snprintf(buf, sizeof buf, "%lld", (long long)d);
    else if (isinf(d))
        len = snprintf(buf, sizeof buf, "%s", d > 0 ? "inf" : "-inf");
    else
        len = snprintf(buf, sizeof buf, "%.17g", d);
    keylist_add(l, buf, (size_t)len);
}

struct zscan_ctx {
    struct keylist *l;
    bool small;
};

static void collect_znode(void *arg, const char *m, size_t n, double score)
{
    struct zscan_ctx *x = arg;
    keylist_add(x->l, m, n);
    scan_score(x->l, score, x->small);
}

uint64_t zscan_step(kv_obj *o, uint64_t cursor, struct keylist *l)
{
    size_t card = kv_zset_card(server.kv, o);
    struct zscan_ctx x = {l, card <= 128};
    for (kv_znode *z = x.small ? kv_zset_at(server.kv, o, 0) : NULL; z;
         z = kv_zset_next(server.kv, z)) {
        const char *m;
        size_t n;
        double d;
        kv_znode_get(z, &m, &n, &d);
        if (n > 64) x.small = false;
    }
    return kv_zset_scan(server.kv, o, cursor, collect_znode, &x);
}

void cmd_zscan(struct conn *c, struct arg *a, size_t argc)
{
    scan_members(c, a, argc, KV_ZSET);
}
