/* examples/kv-server/commands_lists.c - the list commands. */
#include <stdlib.h>

#include "commands.h"
#include "server.h"

static void push_generic(struct conn *c, struct arg *a, size_t argc, bool tail, bool only_existing)
{
    kv_obj *o;
    if (only_existing) {
        if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
        if (!o) return out_int(c, 0);
    } else {
        lookup_create(c, &a[1], KV_LIST, &o);
        if (!o) return;
    }
    for (size_t i = 2; i < argc; i++) {
        if (kv_list_push(server.kv, o, tail, a[i].p, a[i].n) < 0) {
            drop_if_empty(o, kv_list_len(server.kv, o));
            return out_oom(c);
        }
        server.changes++;
    }
    out_int(c, (long long)kv_list_len(server.kv, o));
}

void cmd_lpush(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, false, false);
}

void cmd_rpush(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, true, false);
}

void cmd_lpushx(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, false, true);
}

void cmd_rpushx(struct conn *c, struct arg *a, size_t argc)
{
    push_generic(c, a, argc, true, true);
}

static void pop_generic(struct conn *c, struct arg *a, size_t argc, bool tail)
{
    long long count = 1;
    if (argc > 3) return out_arity_error(c, tail ? "rpop" : "lpop");
    if (argc == 3 && !get_count(c, &a[2], &count)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o) return argc == 3 ? out_str(c, "*-1\r\n") : out_nil(c);
    if (argc == 3 && count == 0) return out_array(c, 0);
    size_t len = kv_list_len(server.kv, o);
    if ((unsigned long long)count > len) count = (long long)len;
    if (argc == 3) out_array(c, (size_t)count);
    for (long long i = 0; i < count; i++) {
        kv_lnode *e = kv_list_at(server.kv, o, tail ? -1 : 0);
        const char *v;
        size_t vn;
        kv_lnode_get(e, &v, &vn);
        out_bulk(c, v, vn);
        kv_list_remove(server.kv, o, e);
        server.changes++;
    }
    drop_if_empty(o, kv_list_len(server.kv, o));
}

void cmd_lpop(struct conn *c, struct arg *a, size_t argc)
{
    pop_generic(c, a, argc, false);
}

void cmd_rpop(struct conn *c, struct arg *a, size_t argc)
{
    pop_generic(c, a, argc, true);
}

void cmd_lrange(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    long long start, end;
    if (!get_ll(c, &a[2], &start) || !get_ll(c, &a[3], &end)) return;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o || !clamp_range((long long)kv_list_len(server.kv, o), &start, &end))
        return out_array(c, 0);
    out_array(c, (size_t)(end - start + 1));
    kv_lnode *e = kv_list_at(server.kv, o, start);
    for (long long i = start; i <= end; i++, e = kv_list_next(server.kv, e)) {
        const char *v;
        size_t vn;
        kv_lnode_get(e, &v, &vn);
        out_bulk(c, v, vn);
    }
}

void cmd_llen(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    out_int(c, o ? (long long)kv_list_len(server.kv, o) : 0);
}

void cmd_lindex(struct conn *c, struct arg *a, size_t argc)
{
    (void)argc;
    kv_obj *o;
    if (!lookup_typed(c, &a[1], KV_LIST, &o)) return;
    if (!o) return out_nil(c);
    long long i;
    if (!get_ll(c, &a[2], &i)) return;
    kv_lnode *e = kv_list_at(server.kv, o, i);
    if (!e) return out_nil(c);
    const char *v;
    size_t vn;
    kv_lnode_get(e, &v, &vn);
    out_bulk(c, v, vn);
}
