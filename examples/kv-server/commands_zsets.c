/* examples/kv-server/commands_zsets.c - the sorted set commands. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
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

static void out_znode(struct conn *c, kv_znode *z, bool scores)
{
    const char *m;
    size_t n;
    double d;
    kv_znode_get(z, &m, &n, &d);
    out_bulk(c, m, n);
    if (scores) out_double(c, d);
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
 * ZREVRANGEBYLEX: options, then their conflicts, then the range, then the
 * key, as Redis's zrangeGenericCommand checks them. */
static void zrange_generic(struct conn *c, struct arg *a, size_t argc, int by, bool rev)
{
    bool scores = false, limit = false, zrange = arg_is(&a[0], "zrange");
    long long offset = 0, count = -1;
    for (size_t j = 4; j < argc; j++) {
        if (arg_is(&a[j], "WITHSCORES")) {
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
    if (by == BY_RANK) {
        long long start, end;
        if (!get_ll(c, &a[2], &start) || !get_ll(c, &a[3], &end)) return;
        kv_obj *o;
        if (!lookup_typed(c, &a[1], KV_ZSET, &o)) return;
        long long len = o ? (long long)kv_zset_card(server.kv, o) : 0;
        if (!o || !clamp_range(len, &start, &end)) return out_array(c, 0);
        long long n = end - start + 1;
        out_array(c, (size_t)(n * (scores ? 2 : 1)));
        kv_znode *z = kv_zset_at(server.kv, o, (size_t)(rev ? len - 1 - start : start));
        for (long long i = 0; i < n; i++) {
            out_znode(c, z, scores);
            z = rev ? kv_zset_prev(server.kv, z) : kv_zset_next(server.kv, z);
        }
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
    if (!o || offset < 0 || count == 0) return out_array(c, 0);
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
    out_array(c, n * (scores ? 2 : 1));
    for (size_t i = 0; i < n; i++) {
        out_znode(c, z, scores);
        z = rev ? kv_zset_prev(server.kv, z) : kv_zset_next(server.kv, z);
    }
}

void cmd_zrange(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_RANK, false);
}

void cmd_zrevrange(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_RANK, true);
}

void cmd_zrangebyscore(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_SCORE, false);
}

void cmd_zrevrangebyscore(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_SCORE, true);
}

void cmd_zrangebylex(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_LEX, false);
}

void cmd_zrevrangebylex(struct conn *c, struct arg *a, size_t argc)
{
    zrange_generic(c, a, argc, BY_LEX, true);
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
