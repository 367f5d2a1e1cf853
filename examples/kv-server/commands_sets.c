/* examples/kv-server/commands_sets.c - the set commands. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
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
        for (long long i = 0; i < -count; i++) {
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
