/* examples/kv-server/commands_sets.c - the set commands. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "net.h"
#include "server.h"

void cmd_sadd(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    lookup_create(c, &a[1], KV_SET, &o);
    if (!o) return;
    long long added = 0;
    for (size_t i = 2; i < argc; i++) {
        int r = kv_set_add(server.kv, o, a[i].p, a[i].n);
        if (r < 0) {
            drop_if_empty(o, kv_set_card(server.kv, o));
            return out_oom(c);
        }
        added += r;
    }
    server.changes += (uint64_t)added;
    out_int(c, added);
}

void cmd_srem(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    long long n = 0;
    for (size_t i = 2; o && i < argc; i++) n += kv_set_rem(server.kv, o, a[i].p, a[i].n);
    if (o) drop_if_empty(o, kv_set_card(server.kv, o));
    server.changes += (uint64_t)n;
    out_int(c, n);
}

void cmd_sismember(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    out_int(c, o && kv_set_has(server.kv, o, a[2].p, a[2].n));
}

void cmd_smismember(struct conn *c, struct arg *a, size_t argc)
{
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    out_array(c, argc - 2);
    for (size_t i = 2; i < argc; i++) out_int(c, o && kv_set_has(server.kv, o, a[i].p, a[i].n));
}

static void out_member(void *arg, const char *m, size_t n)
{
    out_bulk(arg, m, n);
}

void cmd_smembers(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    if (!o) return out_array(c, 0);
    out_array(c, kv_set_card(server.kv, o));
    uint64_t cursor = 0;
    do cursor = kv_set_scan(server.kv, o, cursor, out_member, c);
    while (cursor);
}

void cmd_scard(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    out_int(c, o ? (long long)kv_set_card(server.kv, o) : 0);
}

void cmd_spop(struct conn *c, struct arg *a, size_t argc)
{
    long long count = 1;
    if (argc > 3) return out_syntax(c);
    if (argc == 3 && !get_count(c, &a[2], &count)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    if (!o) return argc == 3 ? out_array(c, 0) : out_nil(c);
    size_t card = kv_set_card(server.kv, o);
    if ((unsigned long long)count > card) count = (long long)card;
    if (argc == 3) out_array(c, (size_t)count);
    for (long long i = 0; i < count; i++) {
        const char *m;
        size_t n;
        kv_set_random(server.kv, o, &m, &n);
        out_bulk(c, m, n);
        kv_set_rem(server.kv, o, m, n);
        server.changes++;
    }
    drop_if_empty(o, kv_set_card(server.kv, o));
}

/* SRANDMEMBER key [count]: a positive count gives distinct members, a
 * negative one |count| members that may repeat. */
void cmd_srandmember(struct conn *c, struct arg *a, size_t argc)
{
    long long count = 1;
    if (argc > 3) return out_syntax(c);
    if (argc == 3 && !get_ll(c, &a[2], &count)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_SET, &o)) return;
    const char *m;
    size_t n;
    if (argc == 2) {
        if (!o || !kv_set_random(server.kv, o, &m, &n)) return out_nil(c);
        return out_bulk(c, m, n);
    }
    if (!o || count == 0) return out_array(c, 0);
    if (count < 0) {
        if (count == LLONG_MIN) return out_err(c, "ERR value is out of range");
        out_array(c, (size_t)-count);
        for (long long i = 0; i < -count && !c->dead; i++) { /* (until the output limit) */
            kv_set_random(server.kv, o, &m, &n);
            out_bulk(c, m, n);
        }
        return;
    }
    struct keylist l = {0};
    uint64_t cursor = 0;
    do cursor = kv_set_scan(server.kv, o, cursor, collect_member, &l);
    while (cursor && !l.oom);
    size_t total = l.n, want = (unsigned long long)count < total ? (size_t)count : total;
    struct arg *v = l.oom ? NULL : malloc(total * sizeof *v);
    if (!v) {
        free(l.buf);
        return out_oom(c);
    }
    for (size_t i = 0, off = 0; i < total; i++) keylist_next(&l, &off, &v[i].p, &v[i].n);
    out_array(c, want);
    for (size_t i = 0; i < want; i++) { /* a partial Fisher-Yates shuffle */
        size_t j = i + (size_t)rand() % (total - i);
        struct arg t = v[i];
        v[i] = v[j];
        v[j] = t;
        out_bulk(c, v[i].p, v[i].n);
    }
    free(v);
    free(l.buf);
}

void cmd_sscan(struct conn *c, struct arg *a, size_t argc)
{
    scan_members(c, a, argc, KV_SET);
}

/* ---- SINTER, SUNION, SDIFF and their STORE forms, SINTERCARD, SMOVE ---- */
enum set_op { SET_INTER, SET_UNION, SET_DIFF };

/* The sets named by keys[0..n): every one looked up and type-checked
 * first, as Redis does (a missing key is an empty set, NULL); false after
 * replying WRONGTYPE or -OOM. */
static bool lookup_sets(struct conn *c, const struct arg *keys, size_t n, kv_obj ***sets)
{
    *sets = malloc((n ? n : 1) * sizeof **sets);
    if (!*sets) {
        out_oom(c);
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if (!lookup_typed(c, &keys[i], KV_SET, &(*sets)[i])) {
            free(*sets);
            return false;
        }
    /* a lookup may have deleted an expired key: the objects found before it
     * are looked up again (a change to the store may move nothing, but the
     * store promises pointers only until then) */
    for (size_t i = 0; i < n; i++) (*sets)[i] = lookup_key(&keys[i]);
    return true;
}

/* Whether the member is kept: every other set has it (SINTER), or none
 * of them does (SDIFF, whose first set is the one iterated). */
static bool member_kept(kv_obj **sets, size_t n, size_t skip, enum set_op op, const char *m,
                        size_t mn)
{
    for (size_t i = 0; i < n; i++) {
        if (i == skip) continue;
        bool has = sets[i] && kv_set_has(server.kv, sets[i], m, mn);
        if (op == SET_INTER ? !has : has) return false;
    }
    return true;
}

/* The members of op over the sets, into out (copied: the store may change
 * before they are used).  The set iterated is collected first: asking a
 * set whether it has a member may take a step of its rehash, and it may
 * be the set iterated (SINTER s s).  A union collects each set's members
 * and then drops the repeats. */
static void set_op_members(kv_obj **sets, size_t n, enum set_op op, long long limit,
                           struct keylist *out)
{
    size_t skip = 0;
    if (op == SET_INTER) { /* the smallest set iterated, the others asked */
        for (size_t i = 0; i < n; i++) {
            if (!sets[i]) return;
            if (kv_set_card(server.kv, sets[i]) < kv_set_card(server.kv, sets[skip])) skip = i;
        }
    }
    struct keylist all = {0};
    for (size_t i = 0; i < n && !all.oom; i++) {
        if (!sets[i] || (op != SET_UNION && i != skip)) continue;
        uint64_t cursor = 0;
        do cursor = kv_set_scan(server.kv, sets[i], cursor, collect_member, &all);
        while (cursor && !all.oom);
    }
    const char *k;
    size_t kn;
    if (op != SET_UNION) {
        for (size_t off = 0; !all.oom && keylist_next(&all, &off, &k, &kn);) {
            if (limit && (long long)out->n >= limit) break;
            if (member_kept(sets, n, skip, op, k, kn)) keylist_add(out, k, kn);
        }
        out->oom |= all.oom;
        free(all.buf);
        return;
    }
    /* repeats dropped through a set of hashes in process memory */
    size_t cap = 16;
    while (cap < all.n * 2) cap *= 2;
    struct {
        const char *k;
        size_t n;
    } *seen = all.oom ? NULL : calloc(cap, sizeof *seen);
    if (!seen) {
        out->oom = true;
        free(all.buf);
        return;
    }
    for (size_t off = 0; keylist_next(&all, &off, &k, &kn);) {
        uint64_t h = 0xcbf29ce484222325ull;
        for (size_t i = 0; i < kn; i++) h = (h ^ (unsigned char)k[i]) * 0x100000001b3ull;
        size_t i = h & (cap - 1);
        while (seen[i].k && !(seen[i].n == kn && memcmp(seen[i].k, k, kn) == 0))
            i = (i + 1) & (cap - 1);
        if (seen[i].k) continue;
        seen[i].k = k;
        seen[i].n = kn;
        keylist_add(out, k, kn);
    }
    free(seen);
    free(all.buf);
}

/* SINTER, SUNION, SDIFF key... (dst NULL), or their STORE forms: dst gets
 * the result as a new set (without an expiry time), replacing whatever it
 * held, or is deleted if the result is empty.  The set is built under a
 * name of its own (one no key has), then dst deleted and the set renamed
 * to it, so that a result the heap has no room for leaves dst as it was
 * (the rename needs a block the size of the object dst's delete freed). */
static void set_op_command(struct conn *c, const struct arg *keys, size_t n, enum set_op op,
                           const struct arg *dst)
{
    kv_obj **sets;
    if (!lookup_sets(c, keys, n, &sets)) return;
    struct keylist l = {0};
    set_op_members(sets, n, op, 0, &l);
    free(sets);
    if (l.oom) {
        free(l.buf);
        return out_oom(c);
    }
    if (!dst) return out_keylist(c, &l);
    if (l.n == 0) {
        free(l.buf);
        if (lookup_key(dst)) {
            kv_delete(server.kv, dst->p, dst->n);
            server.changes++;
        }
        return out_int(c, 0);
    }
    char tmp[48];
    size_t tn = 0;
    for (unsigned i = 0; !tn || kv_peek(server.kv, tmp, tn); i++)
        tn = (size_t)snprintf(tmp, sizeof tmp, "%ckv-server:set-op:%u", 0, i);
    kv_obj *o = kv_create(server.kv, tmp, tn, KV_SET);
    const char *k;
    size_t kn;
    for (size_t off = 0; o && keylist_next(&l, &off, &k, &kn);)
        if (kv_set_add(server.kv, o, k, kn) < 0) o = NULL;
    size_t card = l.n;
    free(l.buf);
    if (o) {
        kv_delete(server.kv, dst->p, dst->n);
        o = kv_rename(server.kv, kv_peek(server.kv, tmp, tn), dst->p, dst->n);
    }
    if (!o) {
        kv_delete(server.kv, tmp, tn);
        return out_oom(c);
    }
    server.changes++;
    out_int(c, (long long)card);
}

void cmd_sinter(struct conn *c, struct arg *a, size_t argc)
{
    set_op_command(c, &a[1], argc - 1, SET_INTER, NULL);
}

void cmd_sunion(struct conn *c, struct arg *a, size_t argc)
{
    set_op_command(c, &a[1], argc - 1, SET_UNION, NULL);
}

void cmd_sdiff(struct conn *c, struct arg *a, size_t argc)
{
    set_op_command(c, &a[1], argc - 1, SET_DIFF, NULL);
}

void cmd_sinterstore(struct conn *c, struct arg *a, size_t argc)
{
    set_op_command(c, &a[2], argc - 2, SET_INTER, &a[1]);
}

void cmd_sunionstore(struct conn *c, struct arg *a, size_t argc)
{
    set_op_command(c, &a[2], argc - 2, SET_UNION, &a[1]);
}

void cmd_sdiffstore(struct conn *c, struct arg *a, size_t argc)
{
    set_op_command(c, &a[2], argc - 2, SET_DIFF, &a[1]);
}

/* SINTERCARD numkeys key... [LIMIT limit] */
void cmd_sintercard(struct conn *c, struct arg *a, size_t argc)
{
    long long numkeys, limit = 0;
    if (!parse_ll(&a[1], &numkeys) || numkeys < 1)
        return out_err(c, "ERR numkeys should be greater than 0");
    if ((unsigned long long)numkeys > argc - 2)
        return out_err(c, "ERR Number of keys can't be greater than number of args");
    for (size_t j = 2 + (size_t)numkeys; j < argc; j++) {
        if (arg_is(&a[j], "LIMIT") && j + 1 < argc) {
            if (!parse_ll(&a[++j], &limit) || limit < 0)
                return out_err(c, "ERR LIMIT can't be negative");
        } else {
            return out_syntax(c);
        }
    }
    kv_obj **sets;
    if (!lookup_sets(c, &a[2], (size_t)numkeys, &sets)) return;
    struct keylist l = {0};
    set_op_members(sets, (size_t)numkeys, SET_INTER, limit, &l);
    free(sets);
    free(l.buf);
    if (l.oom) return out_oom(c);
    out_int(c, (long long)l.n);
}

/* SMOVE source destination member: added to the destination first, so
 * that an add that finds no memory changes nothing.  A change to each set
 * it changes (the destination's only if the member is new there). */
void cmd_smove(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *src = lookup_key(&a[1]), *dst = lookup_key(&a[2]);
    if (!src) return out_int(c, 0);
    if (kv_obj_type(src) != KV_SET || (dst && kv_obj_type(dst) != KV_SET)) return out_wrongtype(c);
    src = lookup_key(&a[1]);
    if (a[1].n == a[2].n && memcmp(a[1].p, a[2].p, a[1].n) == 0)
        return out_int(c, kv_set_has(server.kv, src, a[3].p, a[3].n));
    if (!kv_set_has(server.kv, src, a[3].p, a[3].n)) return out_int(c, 0);
    lookup_create(c, &a[2], KV_SET, &dst);
    if (!dst) return;
    int added = kv_set_add(server.kv, dst, a[3].p, a[3].n);
    if (added < 0) {
        drop_if_empty(dst, kv_set_card(server.kv, dst));
        return out_oom(c);
    }
    src = lookup_key(&a[1]);
    kv_set_rem(server.kv, src, a[3].p, a[3].n);
    drop_if_empty(src, kv_set_card(server.kv, src));
    server.changes += 1 + (uint64_t)added;
    out_int(c, 1);
}
