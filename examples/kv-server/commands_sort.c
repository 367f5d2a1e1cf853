/* examples/kv-server/commands_sort.c - SORT and SORT_RO, as redis-server
 * 7.0's sortCommandGeneric.
 *
 *   SORT key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC]
 *        [ALPHA] [STORE destination]
 *
 * The elements of a list, set or sorted set (a missing key: none) are
 * sorted by their value as a double (strtod's; one that is not a number:
 * "One or more scores can't be converted into double"), or with ALPHA by
 * their bytes, or by the value of the key the BY pattern names for each
 * (its first '*' replaced by the element; "key->field" a hash's field; a
 * missing one sorts as 0, or first with ALPHA).  Equal scores are ordered
 * by the elements' bytes; equal ALPHA BY values keep the elements' order
 * (a list's; a set's and a sorted set's are each server's own, so there
 * their order may differ from Redis's).  BY a pattern without '*' does not
 * sort: a list and a sorted set in their order (DESC reversed), a set in
 * its own (sorted with ALPHA when STORE is given, as Redis makes it
 * deterministic).  GET patterns reply the values they name ("#" the
 * element, nil when missing) instead of the elements.  STORE puts the
 * result in a list (missing GET values as "") replacing the destination,
 * or deletes it when there are none, and replies the count; a change for
 * each element stored, as Redis counts them.  SORT_RO takes no STORE.
 *
 * Redis compares ALPHA elements with strcoll() in its locale (byte order in
 * the C locale); here they are compared as bytes.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "server.h"

struct sortel {
    const char *e; /* the element (in the copy of the elements) */
    size_t en;
    double score;
    char *cmp; /* ALPHA BY: the value sorted by; NULL if missing */
    size_t cmpn;
};

static struct {
    bool desc, alpha, by;
} so;

static int bytes_cmp(const char *a, size_t an, const char *b, size_t bn)
{
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : an < bn ? -1 : an > bn;
}

/* Redis's sortCompare */
static int sort_cmp(const struct sortel *a, const struct sortel *b)
{
    int c;
    if (!so.alpha) {
        c = a->score > b->score   ? 1
            : a->score < b->score ? -1
                                  : bytes_cmp(a->e, a->en, b->e, b->en);
    } else if (so.by) {
        if (!a->cmp || !b->cmp)
            c = a->cmp == b->cmp ? 0 : !a->cmp ? -1 : 1;
        else
            c = bytes_cmp(a->cmp, a->cmpn, b->cmp, b->cmpn);
    } else {
        c = bytes_cmp(a->e, a->en, b->e, b->en);
    }
    return so.desc ? -c : c;
}

/* A stable merge sort (glibc's qsort, which Redis calls, is one): equal
 * elements keep their order. */
static void merge_sort(struct sortel *v, struct sortel *tmp, size_t n)
{
    if (n < 2) return;
    size_t h = n / 2;
    merge_sort(v, tmp, h);
    merge_sort(v + h, tmp, n - h);
    size_t i = 0, j = h, k = 0;
    while (i < h && j < n) tmp[k++] = sort_cmp(&v[j], &v[i]) < 0 ? v[j++] : v[i++];
    while (i < h) tmp[k++] = v[i++];
    while (j < n) tmp[k++] = v[j++];
    memcpy(v, tmp, n * sizeof *v);
}

/* The value a BY or GET pattern names for the element (Redis's
 * lookupKeyByPattern): "#" the element; else the pattern's first '*'
 * replaced by it, and after the '*' "->field" (a field not empty) a
 * hash's field; a string's value.  Copied into *out (malloc'd; the caller
 * frees it); false if there is none (no '*', a missing key, another
 * type). */
static bool by_pattern(const struct arg *pat, const char *e, size_t en, char **out, size_t *outn)
{
    *out = NULL;
    *outn = 0;
    if (pat->n == 1 && pat->p[0] == '#') {
        if (!(*out = malloc(en ? en : 1))) return false;
        memcpy(*out, e, en);
        *outn = en;
        return true;
    }
    const char *star = memchr(pat->p, '*', pat->n), *field = NULL;
    if (!star) return false;
    size_t fieldn = 0;
    for (const char *q = star + 1; q + 1 < pat->p + pat->n; q++)
        if (q[0] == '-' && q[1] == '>') {
            if (q + 2 < pat->p + pat->n) {
                field = q + 2;
                fieldn = (size_t)(pat->p + pat->n - field);
            }
            break;
        }
    size_t pre = (size_t)(star - pat->p), post = pat->n - pre - 1 - (field ? fieldn + 2 : 0);
    char *key = malloc(pre + en + post + 1);
    if (!key) return false;
    memcpy(key, pat->p, pre);
    memcpy(key + pre, e, en);
    memcpy(key + pre + en, star + 1, post);
    kv_obj *o = lookup_key(&(struct arg){key, pre + en + post});
    free(key);
    const char *v;
    size_t vn;
    if (!o) return false;
    if (field) {
        if (kv_obj_type(o) != KV_HASH || !kv_hash_get(server.kv, o, field, fieldn, &v, &vn))
            return false;
    } else {
        if (kv_obj_type(o) != KV_STRING) return false;
        kv_str_get(o, &v, &vn);
    }
    if (!(*out = malloc(vn ? vn : 1))) return false;
    memcpy(*out, v, vn);
    *outn = vn;
    return true;
}

/* A score as Redis reads it: strtod over the whole value (leading spaces,
 * hex, inf taken); false if it is not one. */
static bool sort_score(const char *p, size_t n, double *d)
{
    char buf[128], *end;
    if (n >= sizeof buf) {
        char *big = malloc(n + 1);
        if (!big) return false;
        memcpy(big, p, n);
        big[n] = 0;
        errno = 0;
        *d = strtod(big, &end);
        bool ok = !*end && errno != ERANGE && !isnan(*d);
        free(big);
        return ok;
    }
    memcpy(buf, p, n);
    buf[n] = 0;
    errno = 0;
    *d = strtod(buf, &end);
    return !*end && errno != ERANGE && !isnan(*d);
}

static void sort_generic(struct conn *c, struct arg *a, size_t argc, bool readonly)
{
    bool desc = false, alpha = false, dontsort = false;
    long long limit_start = 0, limit_count = -1;
    const struct arg *by = NULL, *store = NULL;
    size_t *gets = malloc(argc * sizeof *gets), ngets = 0;
    if (!gets) return out_oom(c);
    for (size_t j = 2; j < argc; j++) {
        size_t left = argc - j - 1;
        if (arg_is(&a[j], "ASC")) {
            desc = false;
        } else if (arg_is(&a[j], "DESC")) {
            desc = true;
        } else if (arg_is(&a[j], "ALPHA")) {
            alpha = true;
        } else if (arg_is(&a[j], "LIMIT") && left >= 2) {
            if (!get_ll(c, &a[j + 1], &limit_start) || !get_ll(c, &a[j + 2], &limit_count))
                return free(gets);
            j += 2;
        } else if (!readonly && arg_is(&a[j], "STORE") && left >= 1) {
            store = &a[++j];
        } else if (arg_is(&a[j], "BY") && left >= 1) {
            by = &a[++j];
            dontsort = !memchr(by->p, '*', by->n);
        } else if (arg_is(&a[j], "GET") && left >= 1) {
            gets[ngets++] = ++j;
        } else {
            free(gets);
            return out_syntax(c);
        }
    }
    kv_obj *o = lookup_key(&a[1]);
    enum kv_type t = o ? kv_obj_type(o) : KV_LIST;
    if (t != KV_LIST && t != KV_SET && t != KV_ZSET) {
        free(gets);
        return out_wrongtype(c);
    }
    if (dontsort && t == KV_SET && store) { /* a set's order made deterministic */
        dontsort = false;
        alpha = true;
        by = NULL;
    }
    /* the elements, copied (a sorted set's in its order) */
    struct keylist l = {0};
    if (o) {
        if (t == KV_ZSET) {
            for (kv_znode *z = kv_zset_at(server.kv, o, 0); z && !l.oom;
                 z = kv_zset_next(server.kv, z)) {
                const char *m;
                size_t n;
                double d;
                kv_znode_get(z, &m, &n, &d);
                keylist_add(&l, m, n);
            }
        } else {
            value_snapshot(o, &l);
        }
    }
    size_t len = l.n;
    struct sortel *v = l.oom ? NULL : calloc(len ? len : 1, sizeof *v);
    if (!v) {
        free(gets);
        free(l.buf);
        return out_oom(c);
    }
    for (size_t i = 0, off = 0; i < len; i++) keylist_next(&l, &off, &v[i].e, &v[i].en);
    if (dontsort && desc && t != KV_SET) /* a list's or sorted set's order, reversed */
        for (size_t i = 0; i < len / 2; i++) {
            struct sortel x = v[i];
            v[i] = v[len - 1 - i];
            v[len - 1 - i] = x;
        }
    /* LIMIT, as Redis clamps it */
    long long start = limit_start < 0 ? 0 : limit_start, end;
    if (limit_count < 0)
        end = (long long)len - 1;
    else
        end = limit_count - 1 > (long long)len - start ? (long long)len : start + limit_count - 1;
    if (start >= (long long)len) {
        start = (long long)len - 1;
        end = (long long)len - 2;
    }
    if (end >= (long long)len) end = (long long)len - 1;
    bool bad_score = false, oom = false;
    if (!dontsort) {
        for (size_t i = 0; i < len && !oom; i++) {
            char *bv = NULL;
            size_t bn = 0;
            const char *p = v[i].e;
            size_t n = v[i].en;
            if (by) {
                if (!by_pattern(by, v[i].e, v[i].en, &bv, &bn)) continue;
                p = bv;
                n = bn;
            }
            if (alpha) {
                v[i].cmp = bv; /* (kept: freed with v) */
                v[i].cmpn = bn;
                continue;
            }
            if (!sort_score(p, n, &v[i].score)) bad_score = true;
            free(bv);
        }
        so.desc = desc;
        so.alpha = alpha;
        so.by = by != NULL;
        struct sortel *tmp = malloc((len ? len : 1) * sizeof *tmp);
        if (tmp)
            merge_sort(v, tmp, len);
        else
            oom = true;
        free(tmp);
    }
    size_t count = end >= start ? (size_t)(end - start + 1) : 0;
    size_t outputlen = ngets ? ngets * count : count;
    struct keylist res = {0};
    if (oom) {
        out_oom(c);
    } else if (bad_score) {
        out_err(c, "ERR One or more scores can't be converted into double");
    } else {
        if (!store) out_array(c, outputlen);
        for (long long j = start; j <= end && !res.oom; j++) {
            if (!ngets) {
                if (store)
                    keylist_add(&res, v[j].e, v[j].en);
                else
                    out_bulk(c, v[j].e, v[j].en);
            }
            for (size_t g = 0; g < ngets; g++) {
                char *gv;
                size_t gn;
                bool found = by_pattern(&a[gets[g]], v[j].e, v[j].en, &gv, &gn);
                if (store)
                    keylist_add(&res, found ? gv : "", found ? gn : 0);
                else if (found)
                    out_bulk(c, gv, gn);
                else
                    out_nil(c);
                free(gv);
            }
        }
    }
    if (store && !oom && !bad_score) {
        if (res.oom) {
            out_oom(c);
        } else if (!outputlen) {
            if (lookup_key(store)) {
                kv_delete(server.kv, store->p, store->n);
                server.changes++;
            }
            out_int(c, 0);
        } else {
            char tmpk[48];
            size_t tn = temp_key(tmpk, sizeof tmpk);
            if (value_restore(tmpk, tn, KV_LIST, &res) && replace_with(store, tmpk, tn)) {
                server.changes += outputlen;
                out_int(c, (long long)outputlen);
            } else {
                out_oom(c);
            }
        }
    }
    for (size_t i = 0; i < len; i++) free(v[i].cmp);
    free(v);
    free(res.buf);
    free(l.buf);
    free(gets);
}

void cmd_sort(struct conn *c, struct arg *a, size_t argc)
{
    sort_generic(c, a, argc, false);
}

void cmd_sort_ro(struct conn *c, struct arg *a, size_t argc)
{
    sort_generic(c, a, argc, true);
}
