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

/* Unlinks node from a doubly linked list whose links are its fields prev
 * and next and whose ends are head and tail (lvalues). */
#define DLIST_UNLINK(node, head, tail, prev, next)                                                 \
    do {                                                                                           \
        if ((node)->prev)                                                                          \
            (node)->prev->next = (node)->next;                                                     \
        else                                                                                       \
            (head) = (node)->next;                                                                 \
        if ((node)->next)                                                                          \
            (node)->next->prev = (node)->prev;                                                     \
        else                                                                                       \
            (tail) = (node)->prev;                                                                 \
    } while (0)

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
/* Runs a command checked and ready (EXEC runs its queue through it). */
void command_run(struct conn *c, const struct command *cmd, struct arg *a, size_t argc);
void store_cron(void); /* every 100 ms: active expiry, rehashing */
/* The bytes of the heap a CMD_DENYOOM command's arguments may need. */
uint64_t command_needs(const struct arg *a, size_t argc);
/* Whether need bytes of the heap are free, after removing expired keys if
 * they are not. */
bool memory_for(uint64_t need);
/* The number of commands in the table (COMMAND COUNT). */
size_t command_count(void);
/* COMMAND's view of the table: the i-th command (NULL past the last); a
 * command or "container|subcommand" by its lower-case name, NULL if none. */
const struct command *command_nth(size_t i);
const struct command *command_find(const char *name, size_t n);
/* Where a command's keys are, as Redis's COMMAND INFO gives them: the
 * first and last argument and the step between (last < 0 counts from the
 * end; 0 0 0: none), and whether others move with the arguments (a count
 * of keys, SORT's STORE). */
struct command_keys {
    int first, last, step;
    bool movable;
};
struct command_keys command_keys(const struct command *cmd);
/* Its flags as COMMAND INFO names them (write, readonly, denyoom, pubsub,
 * blocking, no_multi, movablekeys: those kv-server knows), into out[7]. */
size_t command_flags(const struct command *cmd, const char **out);
/* COMMAND GETKEYS: the indexes in a[] (a[0] the command's name, argc
 * checked against its arity) of its keys, into idx[argc]; -1 if the
 * arguments do not say where they are (a bad count of keys), or the
 * command has none. */
long command_getkeys(const struct command *cmd, const struct arg *a, size_t argc, size_t *idx);

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
/* The touch hook's part for WATCH (commands_common.c calls it). */
void watch_on_touch(const char *key, size_t klen, bool deleted);
bool watch_any(void); /* whether any key is watched */

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
void scan_members(struct conn *c, struct arg *a, size_t argc,
                  enum kv_type t); /* SSCAN, HSCAN, ZSCAN */
/* ZSCAN's step: the members and scores of the buckets at cursor, into l */
uint64_t zscan_step(kv_obj *o, uint64_t cursor, struct keylist *l);
/* ZRANDMEMBER's and HRANDFIELD's count [WITHSCORES|WITHVALUES] (with) */
bool get_rand_count(struct conn *c, struct arg *a, size_t argc, const char *with, long long *count,
                    bool *withx);

/* ---- commands_common.c: values copied.  A value built for a destination
 * (COPY, SORT ... STORE, ZUNIONSTORE ...) is built under a name no key has
 * (temp_key), then the destination deleted and the value renamed to it
 * (replace_with), so that a value the heap has no room for leaves the
 * destination as it was. */
size_t temp_key(char *buf, size_t cap); /* cap: 48 */
/* The value's elements into l, in process memory: a string's bytes; a
 * list's elements; a set's members; a hash's fields and values, a sorted
 * set's members and scores (a double's bytes) in pairs; false if no
 * memory. */
bool value_snapshot(kv_obj *o, struct keylist *l);
/* A new key of type t holding them (which must not exist); NULL, and no
 * key, if the heap has no room. */
kv_obj *value_restore(const char *key, size_t klen, enum kv_type t, const struct keylist *l);
/* Deletes dst and renames tmp to it; false (tmp deleted, dst gone) if no
 * memory for the rename. */
bool replace_with(const struct arg *dst, const char *tmp, size_t tn);

/* ---- commands_common.c: tables of byte strings in the process's memory
 * (the keys clients block on, pub/sub's channels and patterns): an entry
 * for each string, with what its user keeps there. */
struct strent {
    struct strent *next; /* in its bucket */
    uint64_t hash;
    void *head, *tail; /* its user's: a queue */
    size_t count;
    bool flag;           /* its user's */
    struct strent *link; /* its user's: another list */
    size_t len;
    char s[];
};
struct strtab {
    struct strent **b;
    size_t size, n; /* buckets (a power of two, or 0), entries */
};
struct strent *strtab_find(struct strtab *t, const char *s, size_t n);
struct strent *strtab_add(struct strtab *t, const char *s,
                          size_t n); /* found or new; NULL: no memory */
void strtab_del(struct strtab *t, struct strent *e);
/* Every entry, in no order: from NULL, until NULL (none may be added or
 * deleted meanwhile). */
struct strent *strtab_next(const struct strtab *t, const struct strent *e);

/* The store's touch hook is set while a key is watched or a client blocks
 * on one: called when either starts or ends. */
void touch_hook_update(void);

/* ---- commands_blocking.c: clients blocked on keys */
uint64_t blocking_clients(void);                         /* blocked now (INFO) */
void blocking_key_touched(const char *key, size_t klen); /* a key written: it may serve */
/* Serves the clients blocked on keys written since, in the order they
 * blocked: after each command (after EXEC, not inside it). */
void blocking_serve_ready(void);
bool blocking_has_ready(void);
/* The earliest blocked client's timeout (mono_ms), 0 if none; those timed
 * out by now get a null reply. */
int64_t blocking_next_deadline(void);
void blocking_timeouts(int64_t now);
/* A client that closes is blocked no more. */
void blocking_forget(struct conn *c);
/* CLIENT UNBLOCK: false if it was not blocked. */
bool blocking_unblock(struct conn *c, bool error);

/* ---- commands_pubsub.c: pub/sub */
void pubsub_forget(struct conn *c); /* a client that closes: unsubscribed from everything */
/* Its channels, patterns and shard channels (CLIENT LIST's sub, psub, ssub). */
void pubsub_counts(const struct conn *c, size_t *sub, size_t *psub, size_t *ssub);
uint64_t pubsub_channels(void);
uint64_t pubsub_patterns(void);
/* Whether a subscribed client (RESP2) may run the command. */
bool pubsub_allowed(const struct command *cmd);

/* ---- the commands, by file */
/* commands_strings.c */
command_fn cmd_get, cmd_set, cmd_setnx, cmd_setex, cmd_getset, cmd_getdel, cmd_getex, cmd_mget,
    cmd_mset, cmd_msetnx, cmd_incr, cmd_incrby, cmd_decrby, cmd_incrbyfloat, cmd_append, cmd_strlen,
    cmd_getrange, cmd_setrange;
/* commands_keys.c */
command_fn cmd_del, cmd_unlink, cmd_exists, cmd_type, cmd_rename, cmd_renamenx, cmd_keys, cmd_scan,
    cmd_dbsize, cmd_flushall, cmd_expire, cmd_pexpire, cmd_expireat, cmd_pexpireat, cmd_ttl,
    cmd_pttl, cmd_expiretime, cmd_pexpiretime, cmd_persist, cmd_copy, cmd_touch, cmd_randomkey,
    cmd_object_encoding, cmd_object_refcount, cmd_object_idletime, cmd_object_freq, cmd_object_help,
    cmd_memory_usage, cmd_memory_help;
/* commands_sort.c */
command_fn cmd_sort, cmd_sort_ro;
/* commands_bits.c */
command_fn cmd_setbit, cmd_getbit, cmd_bitcount, cmd_bitpos, cmd_bitop;
/* commands_lists.c */
command_fn cmd_lpush, cmd_rpush, cmd_lpushx, cmd_rpushx, cmd_lpop, cmd_rpop, cmd_lrange, cmd_llen,
    cmd_lindex, cmd_lset, cmd_ltrim, cmd_lrem, cmd_linsert, cmd_lpos, cmd_lmove, cmd_rpoplpush;
/* LMOVE's work, a[1] the source, a[2] the destination (the blocking forms') */
void lmove_generic(struct conn *c, struct arg *a, bool from_tail, bool to_tail);
/* Takes the list's first (or last: tail) element out, as the reply's next bulk */
void list_pop_out(struct conn *c, kv_obj *o, bool tail);
/* commands_blocking.c */
command_fn cmd_blpop, cmd_brpop, cmd_blmove, cmd_brpoplpush, cmd_bzpopmin, cmd_bzpopmax, cmd_blmpop,
    cmd_bzmpop, cmd_lmpop, cmd_zmpop;
/* commands_pubsub.c */
command_fn cmd_subscribe, cmd_unsubscribe, cmd_psubscribe, cmd_punsubscribe, cmd_ssubscribe,
    cmd_sunsubscribe, cmd_publish, cmd_spublish, cmd_pubsub_channels, cmd_pubsub_numsub,
    cmd_pubsub_numpat, cmd_pubsub_shardchannels, cmd_pubsub_shardnumsub, cmd_pubsub_help;
/* commands_sets.c */
command_fn cmd_sadd, cmd_srem, cmd_sismember, cmd_smismember, cmd_smembers, cmd_scard, cmd_spop,
    cmd_srandmember, cmd_sscan, cmd_sinter, cmd_sunion, cmd_sdiff, cmd_sinterstore, cmd_sunionstore,
    cmd_sdiffstore, cmd_smove, cmd_sintercard;
/* commands_hashes.c */
command_fn cmd_hset, cmd_hmset, cmd_hsetnx, cmd_hget, cmd_hmget, cmd_hdel, cmd_hlen, cmd_hexists,
    cmd_hstrlen, cmd_hgetall, cmd_hkeys, cmd_hvals, cmd_hincrby, cmd_hincrbyfloat, cmd_hscan,
    cmd_hrandfield;
/* commands_zsets.c */
command_fn cmd_zadd, cmd_zincrby, cmd_zrem, cmd_zscore, cmd_zmscore, cmd_zcard, cmd_zrank,
    cmd_zcount, cmd_zrange, cmd_zrevrange, cmd_zrangebyscore, cmd_zrevrangebyscore, cmd_zpopmin,
    cmd_zpopmax, cmd_zremrangebyscore, cmd_zremrangebyrank, cmd_zrangebylex, cmd_zrevrangebylex,
    cmd_zlexcount, cmd_zremrangebylex, cmd_zunion, cmd_zinter, cmd_zdiff, cmd_zunionstore,
    cmd_zinterstore, cmd_zdiffstore, cmd_zintercard, cmd_zrandmember, cmd_zscan, cmd_zrangestore;
/* commands_server.c */
command_fn cmd_ping, cmd_echo, cmd_time, cmd_info, cmd_config_get, cmd_config_resetstat,
    cmd_command, cmd_select, cmd_quit, cmd_bgsave, cmd_save, cmd_lastsave, cmd_shutdown,
    cmd_client_setname, cmd_client_getname, cmd_client_id, cmd_client_info, cmd_client_list,
    cmd_client_kill, cmd_client_unblock, cmd_client_help, cmd_reset, cmd_hello, cmd_auth,
    cmd_config_set, cmd_config_rewrite, cmd_config_help, cmd_slowlog_get, cmd_slowlog_len,
    cmd_slowlog_reset, cmd_slowlog_help, cmd_role, cmd_swapdb, cmd_lolwut, cmd_wait,
    cmd_command_count, cmd_command_docs, cmd_command_getkeys, cmd_command_help, cmd_command_info,
    cmd_command_list;

/* ---- commands_server.c: the slow log (SLOWLOG, CONFIG SET slowlog-*) */
struct slowlog_state {
    long long slower_than; /* microseconds; -1: none logged */
    long long max_len;
};
extern struct slowlog_state slowlog;
/* A command that took us microseconds, as the client sent it (logged if
 * it took at least slowlog-log-slower-than). */
void slowlog_push(struct conn *c, const struct arg *a, size_t argc, long long us);
void slowlog_trim(void); /* to slowlog-max-len */
/* commands_multi.c */
command_fn cmd_multi, cmd_exec, cmd_discard, cmd_watch, cmd_unwatch;

#endif
