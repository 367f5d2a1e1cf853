/* examples/kv-server/commands.h - the commands: the table that names them
 * (commands_table.c, with the list of commands and their replies), their
 * implementations by data type (commands_*.c), and the helpers they share
 * (commands_common.c).
 *
 * Each command replies as redis-server 7.0 does, errors word for word
 * (tests/kv_diff.py compares them).  A command flagged CMD_DENYOOM is
 * refused up front when the heap's free bytes are fewer than its arguments
 * need (about: their bytes and 64 per argument); a command that still runs
 * out of memory replies -OOM, having done what it did before it ran out
 * (MSET, multi-member ZADD and the like may be partly applied then).  A
 * command that changes the data set counts its writes in server.changes,
 * as Redis counts them in its dirty counter (rdb_changes_since_last_save).
 *
 * Inside MULTI (commands_multi.c) a command is checked (name, arity,
 * CMD_NO_MULTI, memory) and queued, its arguments copied; EXEC runs the
 * queue with one clock, nothing else between.
 */
#ifndef KV_COMMANDS_H
#define KV_COMMANDS_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "resp.h"
#include "store.h"

#define CMD_WRITE 0x1    /* may change the data set */
#define CMD_DENYOOM 0x2  /* may grow it */
#define CMD_NO_MULTI 0x4 /* refused inside MULTI (SAVE, SHUTDOWN) */
#define CMD_NOQUEUE 0x8  /* runs at once inside MULTI, not queued (EXEC, WATCH, ...) */

#define MAX_STRING (512ull << 20) /* Redis's proto-max-bulk-len: APPEND and SETRANGE */

#define ERR_NOT_INT "ERR value is not an integer or out of range"
#define ERR_NOT_FLOAT "ERR value is not a valid float"
#define ERR_TOO_BIG "ERR string exceeds maximum allowed size (proto-max-bulk-len)"

/* A command's implementation: a[0] is its name as the client sent it,
 * argc is at least what the table's arity allows. */
typedef void command_fn(struct conn *c, struct arg *a, size_t argc);

struct command {
    const char *name; /* lower case; a subcommand's "container|sub" */
    int arity;        /* > 0: exactly this many words, the name included; < 0: at least -arity */
    unsigned flags;   /* CMD_* */
    command_fn *fn;
    const struct command *subs; /* a container's (CLIENT, CONFIG) subcommands, NULL-named last */
};

/* ---- commands_table.c */
void commands_init(void); /* at start: sorts the table */
void commands_execute(struct conn *c, struct arg *a, size_t argc);
void store_cron(void); /* every 100 ms: active expiry, rehashing */
/* The bytes of the heap a CMD_DENYOOM command's arguments may need. */
uint64_t command_needs(const struct arg *a, size_t argc);
/* Whether need bytes of the heap are free, after removing expired keys if
 * they are not. */
bool memory_for(uint64_t need);

extern int64_t now_ms; /* the command's time, as the store sees it */
extern bool in_exec;   /* EXEC is running its queue */

/* ---- commands_multi.c: transactions */
/* Queues a command checked in MULTI (its arguments copied); false after
 * replying an error: no memory (EXEC will fail), or the queue would pass
 * the limit (the transaction is discarded, the client closed). */
bool multi_queue(struct conn *c, const struct command *cmd, const struct arg *a, size_t argc);
/* A command refused while queuing makes EXEC fail (EXECABORT). */
void multi_flag_error(struct conn *c);
/* Ends the transaction, its queue freed, and forgets the watched keys
 * (EXEC, DISCARD, a client closed). */
void multi_discard(struct conn *c);
/* Every watcher of key hears of a change to it (LTRIM that removes nothing
 * changes nothing in the store, yet counts as a change, as in Redis). */
void watch_touch_key(const char *key, size_t klen);
/* FLUSHALL: every watched key that exists is about to go. */
void watch_touch_flush(void);

/* ---- commands_common.c: arguments */
bool arg_is(const struct arg *a, const char *name); /* case-insensitive */
bool parse_ll(const struct arg *a, long long *out);
bool get_ll(struct conn *c, const struct arg *a, long long *out);    /* else replies */
bool get_count(struct conn *c, const struct arg *a, long long *out); /* >= 0, else replies */
bool parse_double(const char *p, size_t n, double *out);
bool parse_ldouble(const char *p, size_t n, long double *out);
int format_ldouble(char *buf, size_t cap, long double v);
bool clamp_range(long long len, long long *start, long long *end);
bool glob_match(const char *p, size_t pn, const char *s, size_t sn);

/* Whether v + by overflows a long long (INCRBY, HINCRBY). */
static inline bool add_overflows(long long v, long long by)
{
    return (by < 0 && v < 0 && by < LLONG_MIN - v) || (by > 0 && v > 0 && by > LLONG_MAX - v);
}

/* ---- commands_common.c: keys */
kv_obj *lookup_key(const struct arg *key);
bool lookup_typed(struct conn *c, const struct arg *key, enum kv_type t, kv_obj **o);
void lookup_create(struct conn *c, const struct arg *key, enum kv_type t, kv_obj **o);
void drop_if_empty(kv_obj *o, size_t len);
const char *type_name(const kv_obj *o);

/* ---- commands_common.c: keys and members collected (KEYS, SCAN, SSCAN,
 * HSCAN, SRANDMEMBER): their bytes, copied (a lookup of an expired key
 * would change the table being walked). */
struct keylist {
    char *buf;
    size_t len, cap, n;
    const struct arg *pattern; /* NULL: all */
    bool oom;
};

void keylist_add(struct keylist *l, const char *k, size_t kn);
bool keylist_next(const struct keylist *l, size_t *off, const char **k, size_t *kn);
void out_keylist(struct conn *c, struct keylist *l); /* and frees it */
void collect_member(void *keylist, const char *m, size_t n);
void collect_field(void *keylist, const char *f, size_t fn, const char *v, size_t vn);
bool get_cursor(struct conn *c, const struct arg *a, uint64_t *cursor);
bool scan_options(struct conn *c, struct arg *a, size_t argc, size_t first,
                  const struct arg **pattern, long long *count, enum kv_type *type);
void out_cursor(struct conn *c, uint64_t cursor);
void scan_members(struct conn *c, struct arg *a, size_t argc, enum kv_type t); /* SSCAN, HSCAN */

/* ---- the commands, by file */
/* commands_strings.c */
command_fn cmd_get, cmd_set, cmd_setnx, cmd_setex, cmd_getset, cmd_getdel, cmd_getex, cmd_mget,
    cmd_mset, cmd_msetnx, cmd_incr, cmd_incrby, cmd_decrby, cmd_incrbyfloat, cmd_append, cmd_strlen,
    cmd_getrange, cmd_setrange;
/* commands_keys.c */
command_fn cmd_del, cmd_exists, cmd_type, cmd_rename, cmd_renamenx, cmd_keys, cmd_scan, cmd_dbsize,
    cmd_flushall, cmd_expire, cmd_pexpire, cmd_expireat, cmd_pexpireat, cmd_ttl, cmd_pttl,
    cmd_expiretime, cmd_pexpiretime, cmd_persist;
/* commands_lists.c */
command_fn cmd_lpush, cmd_rpush, cmd_lpushx, cmd_rpushx, cmd_lpop, cmd_rpop, cmd_lrange, cmd_llen,
    cmd_lindex, cmd_lset, cmd_ltrim, cmd_lrem, cmd_linsert, cmd_lpos, cmd_lmove, cmd_rpoplpush;
/* commands_sets.c */
command_fn cmd_sadd, cmd_srem, cmd_sismember, cmd_smismember, cmd_smembers, cmd_scard, cmd_spop,
    cmd_srandmember, cmd_sscan, cmd_sinter, cmd_sunion, cmd_sdiff, cmd_sinterstore, cmd_sunionstore,
    cmd_sdiffstore, cmd_smove, cmd_sintercard;
/* commands_hashes.c */
command_fn cmd_hset, cmd_hmset, cmd_hsetnx, cmd_hget, cmd_hmget, cmd_hdel, cmd_hlen, cmd_hexists,
    cmd_hstrlen, cmd_hgetall, cmd_hkeys, cmd_hvals, cmd_hincrby, cmd_hincrbyfloat, cmd_hscan;
/* commands_zsets.c */
command_fn cmd_zadd, cmd_zincrby, cmd_zrem, cmd_zscore, cmd_zmscore, cmd_zcard, cmd_zrank,
    cmd_zcount, cmd_zrange, cmd_zrevrange, cmd_zrangebyscore, cmd_zrevrangebyscore, cmd_zpopmin,
    cmd_zpopmax, cmd_zremrangebyscore, cmd_zremrangebyrank, cmd_zrangebylex, cmd_zrevrangebylex,
    cmd_zlexcount, cmd_zremrangebylex;
/* commands_server.c */
command_fn cmd_ping, cmd_echo, cmd_time, cmd_info, cmd_config_get, cmd_config_resetstat,
    cmd_command, cmd_select, cmd_quit, cmd_bgsave, cmd_save, cmd_lastsave, cmd_shutdown,
    cmd_client_setname, cmd_client_getname, cmd_client_id;
/* commands_multi.c */
command_fn cmd_multi, cmd_exec, cmd_discard, cmd_watch, cmd_unwatch;

#endif
