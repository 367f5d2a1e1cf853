/* examples/kv-server/commands_table.c - the commands kv-server knows, and
 * running one: the name (and a container's subcommand) looked up, the
 * arity checked, inside MULTI queued, the memory a write needs checked,
 * the store's clock set.
 *
 * Commands, answered as redis-server 7.0 answers them:
 *   strings   GET SET [NX|XX] [GET] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL] SETNX SETEX PSETEX
 *             GETSET GETDEL GETEX [EX s|PX ms|EXAT t|PXAT t|PERSIST] MGET MSET MSETNX INCR
 *             DECR INCRBY DECRBY INCRBYFLOAT APPEND STRLEN GETRANGE SUBSTR SETRANGE
 *             SETBIT GETBIT BITCOUNT [start end [BYTE|BIT]] BITPOS BITOP AND|OR|XOR|NOT
 *   keys      DEL UNLINK EXISTS TYPE RENAME RENAMENX KEYS SCAN [MATCH] [COUNT] [TYPE]
 *             DBSIZE FLUSHALL FLUSHDB EXPIRE PEXPIRE EXPIREAT PEXPIREAT [NX|XX|GT|LT]
 *             TTL PTTL EXPIRETIME PEXPIRETIME PERSIST COPY [DB 0] [REPLACE] TOUCH RANDOMKEY
 *             OBJECT ENCODING|REFCOUNT|IDLETIME|FREQ|HELP MEMORY USAGE|HELP
 *             SORT SORT_RO [BY pattern] [LIMIT o c] [GET pattern ...] [ASC|DESC] [ALPHA]
 *             [STORE dst]
 *   lists     LPUSH RPUSH LPUSHX RPUSHX LPOP RPOP [count] LRANGE LLEN LINDEX LSET LTRIM
 *             LREM LINSERT BEFORE|AFTER LPOS [RANK r] [COUNT n] [MAXLEN m]
 *             LMOVE LEFT|RIGHT LEFT|RIGHT RPOPLPUSH LMPOP
 *   blocking  BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP BZPOPMIN BZPOPMAX BZMPOP
 *   sets      SADD SREM SISMEMBER SMISMEMBER SMEMBERS SCARD SPOP SRANDMEMBER SSCAN SINTER
 *             SUNION SDIFF SINTERSTORE SUNIONSTORE SDIFFSTORE SMOVE SINTERCARD [LIMIT n]
 *   hashes    HSET HMSET HSETNX HGET HMGET HDEL HLEN HEXISTS HSTRLEN HGETALL HKEYS HVALS
 *             HINCRBY HINCRBYFLOAT HSCAN HRANDFIELD [count [WITHVALUES]]
 *   zsets     ZADD [NX|XX] [GT|LT] [CH] [INCR] ZINCRBY ZREM ZSCORE ZMSCORE ZCARD ZRANK
 *             ZREVRANK ZCOUNT ZRANGE [BYSCORE|BYLEX] [REV] [LIMIT o c] [WITHSCORES]
 *             ZREVRANGE ZRANGEBYSCORE ZREVRANGEBYSCORE ZRANGEBYLEX ZREVRANGEBYLEX ZLEXCOUNT
 *             ZPOPMIN ZPOPMAX ZREMRANGEBYSCORE ZREMRANGEBYRANK ZREMRANGEBYLEX ZMPOP
 *             ZUNION ZINTER ZDIFF [WEIGHTS w ...] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
 *             ZUNIONSTORE ZINTERSTORE ZDIFFSTORE ZINTERCARD [LIMIT n] ZRANGESTORE ZSCAN
 *             ZRANDMEMBER [count [WITHSCORES]]
 *   transactions  MULTI EXEC DISCARD WATCH UNWATCH
 *   pub/sub   SUBSCRIBE UNSUBSCRIBE PSUBSCRIBE PUNSUBSCRIBE SSUBSCRIBE SUNSUBSCRIBE PUBLISH
 *             SPUBLISH PUBSUB CHANNELS|NUMSUB|NUMPAT|SHARDCHANNELS|SHARDNUMSUB|HELP
 *   server    PING ECHO TIME INFO [server|clients|memory|persistence|stats|keyspace]
 *             CONFIG GET (save appendonly dir dbfilename port maxmemory maxmemory-policy
 *             databases proto-max-bulk-len maxclients slowlog-log-slower-than
 *             slowlog-max-len stop-writes-on-bgsave-error) CONFIG SET (save
 *             stop-writes-on-bgsave-error slowlog-log-slower-than slowlog-max-len
 *             maxclients appendonly no maxmemory-policy noeviction) CONFIG RESETSTAT|REWRITE|HELP
 *             SLOWLOG GET|LEN|RESET|HELP WAIT ROLE SWAPDB 0 0 LOLWUT COMMAND
 * [INFO|LIST|COUNT|GETKEYS|DOCS|HELP] CLIENT SETNAME|GETNAME|ID|INFO|LIST|KILL|UNBLOCK|HELP SELECT
 * 0 QUIT SAVE BGSAVE LASTSAVE SHUTDOWN [SAVE|NOSAVE] HELLO [2] AUTH RESET
 *
 * Each is in commands_TYPE.c (strings, keys, lists, sets, hashes, zsets,
 * multi, blocking, pubsub, bits, sort, server) as cmd_NAME (a subcommand's cmd_CONTAINER_SUB), or
 * as the cmd_ of the command it shares an implementation with (DECR: cmd_incr, PSETEX: cmd_setex,
 * FLUSHDB: cmd_flushall, SUBSTR: cmd_getrange, ZREVRANK: cmd_zrank).
 */
#include <stdio.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "commands.h"
#include "net.h"
#include "persist.h"
#include "server.h"

int64_t now_ms;
bool in_exec;

#define W CMD_WRITE
#define WM (CMD_WRITE | CMD_DENYOOM)
#define Q CMD_NOQUEUE
/* the containers' subcommands (Redis's CONFIG has more: SET, REWRITE, HELP) */
static const struct command config_subs[] = {
    {"config|get", -3, 0, cmd_config_get},
    {"config|set", -4, 0, cmd_config_set},
    {"config|resetstat", 2, 0, cmd_config_resetstat},
    {"config|rewrite", 2, 0, cmd_config_rewrite},
    {"config|help", 2, 0, cmd_config_help},
    {NULL},
};
static const struct command command_subs[] = {
    {"command|count", 2, 0, cmd_command_count},
    {"command|docs", -2, 0, cmd_command_docs},
    {"command|getkeys", -4, 0, cmd_command_getkeys},
    {"command|help", 2, 0, cmd_command_help},
    {"command|info", -2, 0, cmd_command_info},
    {"command|list", -2, 0, cmd_command_list},
    {NULL},
};
static const struct command slowlog_subs[] = {
    {"slowlog|get", -2, 0, cmd_slowlog_get},
    {"slowlog|len", 2, 0, cmd_slowlog_len},
    {"slowlog|reset", 2, 0, cmd_slowlog_reset},
    {"slowlog|help", 2, 0, cmd_slowlog_help},
    {NULL},
};
static const struct command client_subs[] = {
    {"client|setname", 3, 0, cmd_client_setname},
    {"client|getname", 2, 0, cmd_client_getname},
    {"client|id", 2, 0, cmd_client_id},
    {"client|info", 2, 0, cmd_client_info},
    {"client|list", -2, 0, cmd_client_list},
    {"client|kill", -3, 0, cmd_client_kill},
    {"client|unblock", -3, 0, cmd_client_unblock},
    {"client|help", 2, 0, cmd_client_help},
    {NULL},
};
static const struct command object_subs[] = {
    {"object|encoding", 3, 0, cmd_object_encoding}, {"object|refcount", 3, 0, cmd_object_refcount},
    {"object|idletime", 3, 0, cmd_object_idletime}, {"object|freq", 3, 0, cmd_object_freq},
    {"object|help", 2, 0, cmd_object_help},         {NULL},
};
static const struct command memory_subs[] = {
    {"memory|usage", -3, 0, cmd_memory_usage},
    {"memory|help", 2, 0, cmd_memory_help},
    {NULL},
};
static const struct command pubsub_subs[] = {
    {"pubsub|channels", -2, 0, cmd_pubsub_channels},
    {"pubsub|numsub", -2, 0, cmd_pubsub_numsub},
    {"pubsub|numpat", 2, 0, cmd_pubsub_numpat},
    {"pubsub|shardchannels", -2, 0, cmd_pubsub_shardchannels},
    {"pubsub|shardnumsub", -2, 0, cmd_pubsub_shardnumsub},
    {"pubsub|help", 2, 0, cmd_pubsub_help},
    {NULL},
};
static struct command commands[] = {
    /* strings */
    {"get", 2, 0, cmd_get},
    {"set", -3, WM, cmd_set},
    {"setnx", 3, WM, cmd_setnx},
    {"setex", 4, WM, cmd_setex},
    {"psetex", 4, WM, cmd_setex},
    {"getset", 3, WM, cmd_getset},
    {"getdel", 2, W, cmd_getdel},
    {"getex", -2, W, cmd_getex},
    {"mget", -2, 0, cmd_mget},
    {"mset", -3, WM, cmd_mset},
    {"msetnx", -3, WM, cmd_msetnx},
    {"incr", 2, WM, cmd_incr},
    {"decr", 2, WM, cmd_incr},
    {"incrby", 3, WM, cmd_incrby},
    {"decrby", 3, WM, cmd_decrby},
    {"incrbyfloat", 3, WM, cmd_incrbyfloat},
    {"append", 3, WM, cmd_append},
    {"strlen", 2, 0, cmd_strlen},
    {"getrange", 4, 0, cmd_getrange},
    {"substr", 4, 0, cmd_getrange},
    {"setrange", 4, WM, cmd_setrange},
    {"setbit", 4, WM, cmd_setbit},
    {"getbit", 3, 0, cmd_getbit},
    {"bitcount", -2, 0, cmd_bitcount},
    {"bitpos", -3, 0, cmd_bitpos},
    {"bitop", -4, WM, cmd_bitop},
    /* keys */
    {"del", -2, W, cmd_del},
    {"unlink", -2, W, cmd_unlink},
    {"exists", -2, 0, cmd_exists},
    {"type", 2, 0, cmd_type},
    {"rename", 3, W, cmd_rename},
    {"renamenx", 3, W, cmd_renamenx},
    {"keys", 2, 0, cmd_keys},
    {"scan", -2, 0, cmd_scan},
    {"dbsize", 1, 0, cmd_dbsize},
    {"flushall", -1, W, cmd_flushall},
    {"flushdb", -1, W, cmd_flushall},
    {"expire", -3, W, cmd_expire},
    {"pexpire", -3, W, cmd_pexpire},
    {"expireat", -3, W, cmd_expireat},
    {"pexpireat", -3, W, cmd_pexpireat},
    {"ttl", 2, 0, cmd_ttl},
    {"pttl", 2, 0, cmd_pttl},
    {"expiretime", 2, 0, cmd_expiretime},
    {"pexpiretime", 2, 0, cmd_pexpiretime},
    {"persist", 2, W, cmd_persist},
    {"copy", -3, WM, cmd_copy},
    {"touch", -2, 0, cmd_touch},
    {"randomkey", 1, 0, cmd_randomkey},
    {"object", -2, 0, NULL, object_subs},
    {"memory", -2, 0, NULL, memory_subs},
    {"sort", -2, WM, cmd_sort},
    {"sort_ro", -2, 0, cmd_sort_ro},
    /* lists */
    {"lpush", -3, WM, cmd_lpush},
    {"rpush", -3, WM, cmd_rpush},
    {"lpushx", -3, WM, cmd_lpushx},
    {"rpushx", -3, WM, cmd_rpushx},
    {"lpop", -2, W, cmd_lpop},
    {"rpop", -2, W, cmd_rpop},
    {"lrange", 4, 0, cmd_lrange},
    {"llen", 2, 0, cmd_llen},
    {"lindex", 3, 0, cmd_lindex},
    {"lset", 4, WM, cmd_lset},
    {"ltrim", 4, W, cmd_ltrim},
    {"lrem", 4, W, cmd_lrem},
    {"linsert", 5, WM, cmd_linsert},
    {"lpos", -3, 0, cmd_lpos},
    {"lmove", 5, WM, cmd_lmove},
    {"rpoplpush", 3, WM, cmd_rpoplpush},
    {"lmpop", -4, W, cmd_lmpop},
    {"blpop", -3, W, cmd_blpop},
    {"brpop", -3, W, cmd_brpop},
    {"blmove", 6, WM, cmd_blmove},
    {"brpoplpush", 4, WM, cmd_brpoplpush},
    {"blmpop", -5, W, cmd_blmpop},
    /* sets */
    {"sadd", -3, WM, cmd_sadd},
    {"srem", -3, W, cmd_srem},
    {"sismember", 3, 0, cmd_sismember},
    {"smismember", -3, 0, cmd_smismember},
    {"smembers", 2, 0, cmd_smembers},
    {"scard", 2, 0, cmd_scard},
    {"spop", -2, W, cmd_spop},
    {"srandmember", -2, 0, cmd_srandmember},
    {"sscan", -3, 0, cmd_sscan},
    {"sinter", -2, 0, cmd_sinter},
    {"sunion", -2, 0, cmd_sunion},
    {"sdiff", -2, 0, cmd_sdiff},
    {"sinterstore", -3, WM, cmd_sinterstore},
    {"sunionstore", -3, WM, cmd_sunionstore},
    {"sdiffstore", -3, WM, cmd_sdiffstore},
    {"smove", 4, W, cmd_smove},
    {"sintercard", -3, 0, cmd_sintercard},
    /* hashes */
    {"hset", -4, WM, cmd_hset},
    {"hmset", -4, WM, cmd_hmset},
    {"hsetnx", 4, WM, cmd_hsetnx},
    {"hget", 3, 0, cmd_hget},
    {"hmget", -3, 0, cmd_hmget},
    {"hdel", -3, W, cmd_hdel},
    {"hlen", 2, 0, cmd_hlen},
    {"hexists", 3, 0, cmd_hexists},
    {"hstrlen", 3, 0, cmd_hstrlen},
    {"hgetall", 2, 0, cmd_hgetall},
    {"hkeys", 2, 0, cmd_hkeys},
    {"hvals", 2, 0, cmd_hvals},
    {"hincrby", 4, WM, cmd_hincrby},
    {"hincrbyfloat", 4, WM, cmd_hincrbyfloat},
    {"hscan", -3, 0, cmd_hscan},
    {"hrandfield", -2, 0, cmd_hrandfield},
    /* sorted sets */
    {"zadd", -4, WM, cmd_zadd},
    {"zincrby", 4, WM, cmd_zincrby},
    {"zrem", -3, W, cmd_zrem},
    {"zscore", 3, 0, cmd_zscore},
    {"zmscore", -3, 0, cmd_zmscore},
    {"zcard", 2, 0, cmd_zcard},
    {"zrank", 3, 0, cmd_zrank},
    {"zrevrank", 3, 0, cmd_zrank},
    {"zcount", 4, 0, cmd_zcount},
    {"zrange", -4, 0, cmd_zrange},
    {"zrevrange", -4, 0, cmd_zrevrange},
    {"zrangebyscore", -4, 0, cmd_zrangebyscore},
    {"zrevrangebyscore", -4, 0, cmd_zrevrangebyscore},
    {"zpopmin", -2, W, cmd_zpopmin},
    {"zpopmax", -2, W, cmd_zpopmax},
    {"zremrangebyscore", 4, W, cmd_zremrangebyscore},
    {"zremrangebyrank", 4, W, cmd_zremrangebyrank},
    {"zrangebylex", -4, 0, cmd_zrangebylex},
    {"zrevrangebylex", -4, 0, cmd_zrevrangebylex},
    {"zlexcount", 4, 0, cmd_zlexcount},
    {"zremrangebylex", 4, W, cmd_zremrangebylex},
    {"zmpop", -4, W, cmd_zmpop},
    {"zunion", -3, 0, cmd_zunion},
    {"zinter", -3, 0, cmd_zinter},
    {"zdiff", -3, 0, cmd_zdiff},
    {"zunionstore", -4, WM, cmd_zunionstore},
    {"zinterstore", -4, WM, cmd_zinterstore},
    {"zdiffstore", -4, WM, cmd_zdiffstore},
    {"zintercard", -3, 0, cmd_zintercard},
    {"zrangestore", -5, WM, cmd_zrangestore},
    {"zrandmember", -2, 0, cmd_zrandmember},
    {"zscan", -3, 0, cmd_zscan},
    {"bzpopmin", -3, W, cmd_bzpopmin},
    {"bzpopmax", -3, W, cmd_bzpopmax},
    {"bzmpop", -5, W, cmd_bzmpop},
    /* pub/sub */
    {"subscribe", -2, 0, cmd_subscribe},
    {"unsubscribe", -1, 0, cmd_unsubscribe},
    {"psubscribe", -2, 0, cmd_psubscribe},
    {"punsubscribe", -1, 0, cmd_punsubscribe},
    {"ssubscribe", -2, 0, cmd_ssubscribe},
    {"sunsubscribe", -1, 0, cmd_sunsubscribe},
    {"publish", 3, 0, cmd_publish},
    {"spublish", 3, 0, cmd_spublish},
    {"pubsub", -2, 0, NULL, pubsub_subs},
    /* transactions */
    {"multi", 1, Q, cmd_multi},
    {"exec", 1, Q, cmd_exec},
    {"discard", 1, Q, cmd_discard},
    {"watch", -2, Q, cmd_watch},
    {"unwatch", 1, 0, cmd_unwatch},
    /* the server */
    {"ping", -1, 0, cmd_ping},
    {"echo", 2, 0, cmd_echo},
    {"time", 1, 0, cmd_time},
    {"info", -1, 0, cmd_info},
    {"config", -2, 0, NULL, config_subs},
    {"client", -2, 0, NULL, client_subs},
    {"command", -1, 0, cmd_command, command_subs},
    {"select", 2, 0, cmd_select},
    {"quit", -1, Q, cmd_quit},
    {"reset", 1, Q, cmd_reset},
    {"hello", -1, 0, cmd_hello},
    {"auth", -2, 0, cmd_auth},
    {"bgsave", -1, 0, cmd_bgsave},
    {"save", 1, CMD_NO_MULTI, cmd_save},
    {"lastsave", 1, 0, cmd_lastsave},
    {"shutdown", -1, CMD_NO_MULTI, cmd_shutdown},
    {"slowlog", -2, 0, NULL, slowlog_subs},
    {"role", 1, 0, cmd_role},
    {"swapdb", 3, W, cmd_swapdb},
    {"lolwut", -1, 0, cmd_lolwut},
    {"wait", 3, 0, cmd_wait},
};
#undef W
#undef WM
#undef Q
enum { NCOMMANDS = sizeof commands / sizeof commands[0] };

size_t command_count(void)
{
    return NCOMMANDS;
}

static int command_cmp(const void *a, const void *b)
{
    return strcmp(((const struct command *)a)->name, ((const struct command *)b)->name);
}

void commands_init(void)
{
    qsort(commands, NCOMMANDS, sizeof commands[0], command_cmp);
}

static const struct command *lookup_command(const struct arg *name)
{
    char low[32];
    if (name->n >= sizeof low || memchr(name->p, 0, name->n)) return NULL; /* ("GET\0x") */
    for (size_t i = 0; i < name->n; i++) {
        char ch = name->p[i];
        low[i] = ch >= 'A' && ch <= 'Z' ? (char)(ch + 32) : ch;
    }
    low[name->n] = 0;
    struct command key = {.name = low};
    return bsearch(&key, commands, NCOMMANDS, sizeof commands[0], command_cmp);
}

/* A container's subcommand named by a: "container|a", NULL if none. */
static const struct command *lookup_sub(const struct command *cmd, const struct arg *a)
{
    size_t pre = strlen(cmd->name) + 1;
    for (const struct command *s = cmd->subs; s->name; s++)
        if (arg_is(a, s->name + pre)) return s;
    return NULL;
}

/* ---- COMMAND's view of the table ------------------------------------- */
const struct command *command_nth(size_t i)
{
    return i < NCOMMANDS ? &commands[i] : NULL;
}

const struct command *command_find(const char *name, size_t n)
{
    const char *bar = memchr(name, '|', n);
    struct arg top = {name, bar ? (size_t)(bar - name) : n};
    const struct command *cmd = lookup_command(&top);
    if (!cmd || !bar) return cmd;
    if (!cmd->subs) return NULL;
    struct arg sub = {bar + 1, n - (size_t)(bar + 1 - name)};
    return lookup_sub(cmd, &sub);
}

/* Whether " name " is in list (names between spaces). */
static bool listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = strstr(list, name); p; p = strstr(p + 1, name))
        if (p > list && p[-1] == ' ' && p[n] == ' ') return true;
    return false;
}

/* Redis's key positions, by command (the default: the first argument) */
static const char no_keys[] =
    " keys scan dbsize flushall flushdb randomkey object memory lmpop blmpop sintercard zmpop "
    "zunion zinter zdiff zintercard bzmpop subscribe unsubscribe psubscribe punsubscribe publish "
    "pubsub multi exec discard unwatch ping echo time info config client command select quit "
    "reset hello auth bgsave save lastsave shutdown slowlog role swapdb lolwut wait ";
static const char all_keys[] = " mget del unlink exists touch watch sinter sunion sdiff "
                               "sinterstore sunionstore sdiffstore ssubscribe sunsubscribe ";
static const char two_keys[] =
    " rename renamenx copy lmove rpoplpush blmove brpoplpush smove zrangestore ";
static const char keys_then_timeout[] = " blpop brpop bzpopmin bzpopmax ";
/* numkeys, then the keys, after the arguments before it (destination key,
 * timeout) */
static const char numkeys_at_1[] = " lmpop sintercard zmpop zunion zinter zdiff zintercard ";
static const char numkeys_at_2[] = " blmpop bzmpop zunionstore zinterstore zdiffstore ";
static const char blocking[] = " blpop brpop blmove brpoplpush blmpop bzpopmin bzpopmax bzmpop ";
static const char pubsub[] =
    " subscribe unsubscribe psubscribe punsubscribe ssubscribe sunsubscribe publish spublish ";

struct command_keys command_keys(const struct command *cmd)
{
    const char *n = cmd->name;
    struct command_keys k = {1, 1, 1, false};
    if (strchr(n, '|')) k = (struct command_keys){0, 0, 0, false};
    if (!strcmp(n, "object|encoding") || !strcmp(n, "object|refcount") ||
        !strcmp(n, "object|idletime") || !strcmp(n, "object|freq") || !strcmp(n, "memory|usage"))
        k = (struct command_keys){2, 2, 1, false};
    else if (listed(no_keys, n))
        k = (struct command_keys){0, 0, 0, false};
    else if (listed(all_keys, n))
        k.last = -1;
    else if (!strcmp(n, "mset") || !strcmp(n, "msetnx"))
        k = (struct command_keys){1, -1, 2, false};
    else if (!strcmp(n, "bitop"))
        k = (struct command_keys){2, -1, 1, false};
    else if (listed(two_keys, n))
        k.last = 2;
    else if (listed(keys_then_timeout, n))
        k.last = -2;
    k.movable = listed(numkeys_at_1, n) || listed(numkeys_at_2, n) || !strcmp(n, "sort") ||
                !strcmp(n, "sort_ro");
    return k;
}

size_t command_flags(const struct command *cmd, const char **out)
{
    struct command_keys k = command_keys(cmd);
    const char *n = cmd->name;
    bool ps = listed(pubsub, n) || (!strncmp(n, "pubsub|", 7) && strcmp(n, "pubsub|help"));
    size_t nf = 0;
    if (cmd->flags & CMD_WRITE)
        out[nf++] = "write";
    else if (!ps && strcmp(n, "watch") && strcmp(n, "object|help") &&
             (k.first > 0 || k.movable || listed(" keys scan dbsize randomkey lolwut ", n)))
        out[nf++] = "readonly";
    if (cmd->flags & CMD_DENYOOM) out[nf++] = "denyoom";
    if (ps) out[nf++] = "pubsub";
    if (listed(blocking, n)) out[nf++] = "blocking";
    if (cmd->flags & CMD_NO_MULTI) out[nf++] = "no_multi";
    if (k.movable) out[nf++] = "movablekeys";
    return nf;
}

/* Where a count of keys says how many follow: keys from numkeys' argument
 * + 1; false if it is not a count of the arguments there are. */
static bool numkeys(const struct arg *a, size_t argc, size_t at, size_t *from, size_t *to)
{
    long long n;
    if (at >= argc || !parse_ll(&a[at], &n) || n <= 0 || (unsigned long long)n > argc - at - 1)
        return false;
    *from = at + 1;
    *to = at + (size_t)n;
    return true;
}

long command_getkeys(const struct command *cmd, const struct arg *a, size_t argc, size_t *idx)
{
    struct command_keys k = command_keys(cmd);
    size_t n = 0;
    const char *name = cmd->name;
    if (listed(numkeys_at_1, name) || listed(numkeys_at_2, name)) {
        size_t from, to;
        bool dst = strstr(name, "store") != NULL; /* Z...STORE's destination */
        if (!numkeys(a, argc, listed(numkeys_at_1, name) ? 1 : 2, &from, &to)) return -1;
        if (dst) idx[n++] = 1;
        for (size_t i = from; i <= to; i++) idx[n++] = i;
        return (long)n;
    }
    if (k.first == 0) return -1;
    size_t last = k.last >= 0 ? (size_t)k.last : argc + (size_t)k.last;
    if (k.last < 0 && (size_t)-k.last > argc) return -1;
    for (size_t i = (size_t)k.first; i <= last && i < argc; i += (size_t)k.step) idx[n++] = i;
    if (!strcmp(name, "sort")) { /* STORE's destination (the last), as Redis's sortGetKeys */
        size_t dst = 0;
        for (size_t i = 2; i < argc; i++) {
            if (arg_is(&a[i], "limit"))
                i += 2;
            else if (arg_is(&a[i], "get") || arg_is(&a[i], "by"))
                i += 1;
            else if (arg_is(&a[i], "store") && i + 1 < argc)
                dst = ++i;
        }
        if (dst) idx[n++] = dst;
    }
    return (long)n;
}

/* The command's time: the store's too, so that what expired is gone. */
static void set_now(void)
{
    now_ms = wall_ms();
    kv_set_now(server.kv, now_ms);
}

static void unknown_command(struct conn *c, struct arg *a, size_t argc)
{
    char name[600], args[700], one[600];
    size_t o = 0;
    args[0] = 0;
    /* (each cut at a NUL byte, as Redis's %.*s cuts it) */
    for (size_t i = 1; i < argc && o < 128; i++) {
        resp_escape(one, sizeof one, a[i].p, strnlen(a[i].p, a[i].n), 128 - o);
        o += (size_t)snprintf(args + o, sizeof args - o, "'%s' ", one);
    }
    out_err(c, "ERR unknown command '%s', with args beginning with: %s",
            resp_escape(name, sizeof name, a[0].p, strnlen(a[0].p, a[0].n), 128), args);
}

/* Removes expired keys until `need` bytes are free, for at most a
 * millisecond: a write is refused only when keys that have not expired
 * fill the memory, even when active expiry (store_cron) is behind, as on a
 * machine where the server gets little CPU.  Whether there is room now. */
static bool reclaim_expired(uint64_t need)
{
    int64_t start = wall_ms();
    while (need > kv_free(server.kv)) {
        if (!kv_expires(server.kv) || kv_expire_cycle(server.kv, 200, NULL) == 0) return false;
        if (wall_ms() - start >= 1) return need <= kv_free(server.kv);
    }
    return true;
}

uint64_t command_needs(const struct arg *a, size_t argc)
{
    uint64_t need = 0;
    for (size_t i = 1; i < argc; i++) need += a[i].n + 64;
    return need;
}

bool memory_for(uint64_t need)
{
    if (need > kv_free(server.kv) && kv_lazyfree_pending(server.kv))
        kv_lazyfree_step(server.kv, LONG_MAX);              /* what UNLINK left, freed now */
    if (need >= (64u << 10)) kv_make_room(server.kv, need); /* (the keys' table in the way) */
    return need <= kv_free(server.kv) || reclaim_expired(need);
}

static bool arity_ok(const struct command *cmd, size_t argc)
{
    return cmd->arity > 0 ? argc == (size_t)cmd->arity : argc >= (size_t)-cmd->arity;
}

/* As Redis's processCommand: a command refused (unknown, its arity, not
 * allowed in MULTI, no memory) while a client is in MULTI makes its EXEC
 * fail; EXEC's own arity error ends the transaction there. */
void commands_execute(struct conn *c, struct arg *a, size_t argc)
{
    server.total_commands++;
    c->last_ms = mono_ms();
    snprintf(c->lastcmd, sizeof c->lastcmd, "NULL");
    const struct command *cmd = lookup_command(&a[0]);
    if (!cmd) {
        multi_flag_error(c);
        return unknown_command(c, a, argc);
    }
    if (cmd->subs && argc >= 2) {
        const struct command *sub = lookup_sub(cmd, &a[1]);
        if (!sub) {
            char name[600], up[32];
            size_t i = 0;
            for (; cmd->name[i] && i < sizeof up - 1; i++)
                up[i] = (char)(cmd->name[i] >= 'a' && cmd->name[i] <= 'z' ? cmd->name[i] - 32
                                                                          : cmd->name[i]);
            up[i] = 0;
            multi_flag_error(c);
            return out_err(c, "ERR unknown subcommand '%s'. Try %s HELP.",
                           resp_escape(name, sizeof name, a[1].p, a[1].n, 128), up);
        }
        cmd = sub;
    }
    snprintf(c->lastcmd, sizeof c->lastcmd, "%s", cmd->name);
    if (!arity_ok(cmd, argc)) {
        if (cmd->fn == cmd_exec) {
            multi_discard(c);
            return out_err(c, "EXECABORT Transaction discarded because of: wrong number of "
                              "arguments for 'exec' command");
        }
        multi_flag_error(c);
        return out_arity_error(c, cmd->name);
    }
    if (c->subs && !pubsub_allowed(cmd)) { /* (in RESP2, the only protocol here) */
        /* (Redis's rejectCommand: EXEC refused is EXECABORT) */
        bool exec = cmd->fn == cmd_exec;
        if (exec)
            multi_discard(c);
        else
            multi_flag_error(c);
        return out_err(c,
                       "%s Can't execute '%s': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / "
                       "QUIT / RESET are allowed in this context",
                       exec ? "EXECABORT Transaction discarded because of:" : "ERR", cmd->name);
    }
    if (c->in_multi && (cmd->flags & CMD_NO_MULTI)) {
        multi_flag_error(c);
        return out_err(c, "ERR Command not allowed inside a transaction");
    }
    set_now();
    if ((cmd->flags & CMD_DENYOOM) && !memory_for(command_needs(a, argc))) {
        multi_flag_error(c);
        return out_oom_full(c);
    }
    if (((cmd->flags & CMD_WRITE) || cmd->fn == cmd_ping) && persist_writes_refused()) {
        multi_flag_error(c);
        return out_err(c,
                       "MISCONF kv-server is configured to save images (save points), but the "
                       "last save failed (%s). Commands that may modify the data set are "
                       "disabled, because stop-writes-on-bgsave-error is yes. The server's log "
                       "says more about the error.",
                       persist.save_error[0] ? persist.save_error : "see the log");
    }
    if (c->in_multi && !(cmd->flags & CMD_NOQUEUE)) {
        if (multi_queue(c, cmd, a, argc)) out_str(c, "+QUEUED\r\n");
        return;
    }
    command_run(c, cmd, a, argc);
    if (blocking_has_ready()) blocking_serve_ready(); /* (after EXEC, for those inside it) */
}

/* Runs the command, timed for the slow log (EXEC's commands are, each;
 * EXEC is not). */
void command_run(struct conn *c, const struct command *cmd, struct arg *a, size_t argc)
{
    if (cmd->fn == cmd_exec) return cmd->fn(c, a, argc);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    cmd->fn(c, a, argc);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    slowlog_push(c, a, argc,
                 (t1.tv_sec - t0.tv_sec) * 1000000LL + (t1.tv_nsec - t0.tv_nsec) / 1000);
}

/* Background work for the store, every 100 ms: expired keys (2,000 keys
 * looked at, then more in rounds of 200 while at least a quarter of the
 * keys with an expiry time among them had expired, as Redis's active
 * expiry decides it from the keys with one it samples; for at most 25 ms: a
 * quarter of the period, as Redis's may take.  The keys without one are
 * walked past: kv-server keeps no table of the keys with one) and a
 * millisecond of rehashing
 * (as Redis's activerehashing: a table of a million keys is rehashed in
 * seconds, not the quarter of an hour 100 buckets a turn would take; each
 * moved entry whose link changes is a page an incremental image holds, so
 * a rehash that drags on puts pages in image after image).  Not while a
 * save runs: its pages would be copied first. */
void store_cron(void)
{
    set_now();
    for (int round = 0; kv_expires(server.kv); round++) {
        size_t with_ttl, gone = kv_expire_cycle(server.kv, 200, &with_ttl);
        if (wall_ms() - now_ms >= 25) break;
        if (round >= 10 && gone * 4 < with_ttl) break;
        if (with_ttl == 0 && round >= 60) break; /* (keys with one are few: the next turn) */
    }
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int steps = persist.bgsave ? 1 : 1000;
    while (kv_cron(server.kv) && --steps > 0) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) >= 1000000) break;
    }
}
