"""tests/kv_diff.py KV_PORT REDIS_PORT [SEED]: the same commands to kv-server
and to a real redis-server; their replies must be equal.

First a written script (every command kv-server offers, its options, its
errors: wrong types, wrong argument counts, bad numbers, overflows), then
transactions (MULTI/EXEC/DISCARD, WATCH with a second connection to each
server changing keys, keys expiring), then the newer commands' scripts (the
blocking pops where they do not block, pub/sub on one connection, HELLO,
RESET, CLIENT; COPY, OBJECT, the bit commands; the sorted-set algebra,
ZSCAN, the random picks; SORT; CONFIG SET, SLOWLOG, WAIT ...), then random
sequences over a few keys of every type, some inside MULTI, some watched.
Replies whose order Redis does not define (SMEMBERS, KEYS, HGETALL, SUNION,
UNSUBSCRIBE from all, CONFIG GET ...) are compared as sets, inside EXEC's
reply too; sorted-set scores of -0 as 0 (Redis keeps the sign only in some
of its encodings); TTLs, expiry times and OBJECT IDLETIME within a second (each server took the
command at its own instant); SCAN, SSCAN, HSCAN and ZSCAN from cursor 0 by
iterating to the end and comparing what was returned; CLIENT ID, HELLO's id
and version, MEMORY USAGE by their type (each server's own); ZRANDMEMBER
and HRANDFIELD by what is certain of a random pick; SLOWLOG's entries
without their ids, times and addresses; CLIENT LIST by its fields.
"""
import random
import sys
import time

from kv_resp import Conn, Err

kv_port, redis_port = int(sys.argv[1]), int(sys.argv[2])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 11
kv, rd = Conn(kv_port), Conn(redis_port)
# second connections, for what other clients do between WATCH and EXEC;
# third ones that read the change counters
kv2, rd2 = Conn(kv_port), Conn(redis_port)
kv3, rd3 = Conn(kv_port), Conn(redis_port)
count_changes = False  # compare each command's count of changes too
compared = {"commands": 0, "errors": 0}
history = []
mismatches = []
queued = {}  # a connection in MULTI: the commands it queued

UNORDERED = {"SMEMBERS", "KEYS", "HKEYS", "HVALS", "SINTER", "SUNION", "SDIFF"}
# pub/sub's commands reply once per channel named (once if none is)
SUBSCRIBES = {"SUBSCRIBE", "PSUBSCRIBE", "SSUBSCRIBE", "UNSUBSCRIBE", "PUNSUBSCRIBE", "SUNSUBSCRIBE"}
PAIRS = {"HGETALL"}
TTLS = {"TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"}  # times: within a second
SCANS = {"SCAN": 1, "SSCAN": 2, "HSCAN": 2, "ZSCAN": 2}
RANDOMS = {"ZRANDMEMBER": "WITHSCORES", "HRANDFIELD": "WITHVALUES"}


def unsigned_zero(r):
    """b"-0" as b"0", inside lists and pairs too."""
    if isinstance(r, (list, tuple)):
        return type(r)(unsigned_zero(x) for x in r)
    return b"0" if r == b"-0" else r


def norm(cmd, r):
    name = cmd[0].upper()
    if name.startswith(("Z", "BZ")):
        # a score of -0: Redis keeps its sign in a skiplist-encoded sorted set
        # and loses it in a listpack (stored as the integer 0), so which one a
        # union or a pop shows depends on Redis's encoding of each set
        r = unsigned_zero(r)
    if isinstance(r, list) and name in UNORDERED:
        return sorted(r, key=repr)
    if isinstance(r, list) and name in PAIRS:
        return sorted(zip(r[::2], r[1::2]), key=repr)
    if isinstance(r, int) and name == "CLIENT" and str(cmd[1]).upper() == "ID":
        return "an id"
    if isinstance(r, int) and name == "MEMORY":  # each server's own accounting
        return "an int"
    if name in RANDOMS and len(cmd) > 2 and isinstance(r, list):
        # random picks: all of them (sorted) when count asked for more than
        # there are, else how many, and whether they are distinct
        count = int(cmd[2])
        items = list(zip(r[::2], r[1::2])) if len(cmd) > 3 else r
        if count > 0 and len(items) < count:
            return sorted(items)
        return ("picks", len(items), count < 0 or len(set(items)) == len(items))
    if name in RANDOMS and isinstance(r, bytes):
        return "a pick"
    if name == "SLOWLOG" and isinstance(r, list) and all(isinstance(e, list) and len(e) == 6 for e in r):
        return [[e[3], e[5]] for e in r]  # not the id, time, duration, address: each server's
    if name == "CONFIG" and isinstance(r, list) and str(cmd[1]).upper() == "GET":  # (Redis's dict order)
        return sorted(zip(r[::2], r[1::2]))
    if name == "LOLWUT" and isinstance(r, bytes):
        return r.split(b"ver.")[0]
    if name == "CLIENT" and isinstance(r, bytes) and str(cmd[1]).upper() in ("LIST", "INFO"):
        return [[f.split(b"=")[0] for f in line.split(b" ")] for line in r.split(b"\n")]  # the fields
    if name in SCANS and isinstance(r, list) and len(r) == 2 and r[0] == b"0":  # (in EXEC)
        return sorted(zip(r[1][::2], r[1][1::2])) if name in ("HSCAN", "ZSCAN") else sorted(r[1])
    if isinstance(r, list) and name == "HELLO" and len(r) == 14:  # the server's id and version
        return r[:3] + [b"a version"] + r[4:7] + ["an id"] + r[8:]
    if isinstance(r, list) and name == "PUBSUB" and len(cmd) > 1 and str(cmd[1]).upper() in (
            "CHANNELS", "SHARDCHANNELS"):
        return sorted(r)
    return r


def scan_all(conn, cmd):
    """Iterates SCAN/SSCAN/HSCAN from cursor 0 to cursor 0; returns the
    sorted elements.  Another cursor is only taken or refused: where it
    lands depends on each server's table."""
    pos = SCANS[cmd[0].upper()]
    cmd = list(cmd)
    r = conn.cmd(*cmd)
    if not isinstance(r, list) or cmd[pos] != "0":
        return r if isinstance(r, Err) else "a cursor taken"
    out = []
    while True:
        out += r[1]
        cmd[pos] = r[0]
        if r[0] == b"0":
            break
        r = conn.cmd(*cmd)
    if cmd[0].upper() in ("HSCAN", "ZSCAN"):
        return sorted(set(zip(out[::2], out[1::2])))
    return sorted(set(out))


def equal(cmd, a, b):
    name = cmd[0].upper()
    if name in TTLS and isinstance(a, int) and isinstance(b, int) and a >= 0 and b >= 0:
        return abs(a - b) <= (1000 if name.startswith("P") else 1)
    if (name == "OBJECT" and len(cmd) > 1 and str(cmd[1]).upper() == "IDLETIME" and
            isinstance(a, int) and isinstance(b, int)):  # seconds: each server's clock
        return abs(a - b) <= 1
    return a == b and type(a) is type(b)


def changes(conn):
    """INFO's rdb_changes_since_last_save: Redis's dirty counter."""
    txt = conn.cmd("INFO", "persistence").decode()
    return int(next(l.split(":")[1] for l in txt.split("\r\n") if l.startswith("rdb_changes_since_last_save:")))


def persistence(conn):
    """INFO persistence as a dict."""
    txt = conn.cmd("INFO", "persistence").decode()
    return dict(l.split(":", 1) for l in txt.split("\r\n") if ":" in l)


def saved(conn, saves, timeout=60):
    """Waits until conn's server has made more than `saves` saves (a BGSAVE
    scheduled by EXEC starts a moment later) and none is under way."""
    end = time.time() + timeout
    while time.time() < end:
        p = persistence(conn)
        if int(p["rdb_saves"]) > saves and p["rdb_bgsave_in_progress"] == "0":
            return
        time.sleep(0.02)
    raise SystemExit("a background save did not end in %d s" % timeout)


def same(cmd, who=0):
    """cmd to both servers, on the first connection to each (who 0) or the
    second (who 1); EXEC's reply is compared command by command.  With
    count_changes, the writes each counted (as Redis counts them in
    rdb_changes_since_last_save) must be equal too."""
    if count_changes:
        before = changes(kv3), changes(rd3)
        same_reply(cmd, who)
        counted = changes(kv3) - before[0], changes(rd3) - before[1]
        if counted[0] != counted[1]:
            mismatches.append((("changes counted by",) + tuple(cmd), counted[0], counted[1]))
        return
    same_reply(cmd, who)


def same_reply(cmd, who):
    name = cmd[0].upper()
    kc, rc = (kv, rd) if who == 0 else (kv2, rd2)
    if name in SCANS and who not in queued:
        a, b = scan_all(kc, cmd), scan_all(rc, cmd)
        if name == "ZSCAN":
            a, b = unsigned_zero(a), unsigned_zero(b)
    elif name in SUBSCRIBES and who not in queued and len(cmd) > 2:
        a, b = [kc.cmd(*cmd)], [rc.cmd(*cmd)]
        if not isinstance(b[0], Err):
            a += [kc.reply() for _ in cmd[2:]]
            b += [rc.reply() for _ in cmd[2:]]
    else:
        a, b = norm(cmd, kc.cmd(*cmd)), norm(cmd, rc.cmd(*cmd))
    compared["commands"] += 1
    compared["errors"] += isinstance(b, Err)
    if name == "EXEC" and isinstance(a, list) and isinstance(b, list) and \
            len(queued.get(who, ())) == len(a) == len(b):
        ok = all(equal(q, norm(q, x), norm(q, y)) for q, x, y in zip(queued[who], a, b))
    else:
        ok = equal(cmd, a, b)
    if name == "MULTI" and b == "OK":
        queued[who] = []
    elif name in ("EXEC", "DISCARD") or (isinstance(b, Err) and b.startswith("EXECABORT")):
        queued.pop(who, None)
    elif who in queued and b == "QUEUED":
        queued[who].append(cmd)
    history.append((cmd, b))
    if not ok:
        if not mismatches:  # what led to the first: the commands on its key before it
            key = cmd[1] if len(cmd) > 1 else None
            context = [h for h in history[:-1] if len(h[0]) > 1 and key in h[0][1:]][-12:]
            for h in context:
                print("   before: %r -> %r" % h)
        mismatches.append((cmd, a, b))
    return ok


def run(cmds):
    for cmd in cmds:
        same(cmd)


def run2(steps):
    """Steps of (who, command): who 0 or 1 the connection, ("sleep", s), or
    ("pipe", commands): sent at once on the first connections, so that each
    server runs them one after the other with nothing between (no active
    expiry: a key that expires among them stays until something looks)."""
    saves = (0, 0)
    for who, cmd in steps:
        if who == "sleep":
            time.sleep(cmd)
        elif who == "saves":  # the servers' counts of saves, before a BGSAVE
            saves = int(persistence(kv)["rdb_saves"]), int(persistence(rd)["rdb_saves"])
        elif who == "saved":  # both background saves done (one that ends later
            saved(kv, saves[0])  # would reset the change counters the next commands
            saved(rd, saves[1])  # compare)
        elif who == "pipe":
            a, b = kv.pipeline(cmd), rd.pipeline(cmd)
            for c, x, y in zip(cmd, a, b):
                compared["commands"] += 1
                history.append((c, y))
                if not equal(c, x, y):
                    mismatches.append((c, x, y))
        else:
            same(cmd, who)


big = "9223372036854775807"
script = [
    # strings and SET's options
    ("SET", "s", "hello"), ("GET", "s"), ("GET", "nothere"), ("SET", "s", "v", "NX"),
    ("SET", "s", "v2", "XX"), ("SET", "new", "v", "XX"), ("SET", "s", "v3", "NX", "XX"),
    ("SET", "s", "v4", "GET"), ("SET", "fresh", "v", "GET"), ("SET", "s", "v5", "NX", "GET"),
    ("SET", "s", "v6", "EX", "100"), ("TTL", "s"), ("SET", "s", "v7", "KEEPTTL"), ("TTL", "s"),
    ("SET", "s", "v8"), ("TTL", "s"), ("SET", "s", "v", "EX", "0"), ("SET", "s", "v", "EX", "-1"),
    ("SET", "s", "v", "PX", "abc"), ("SET", "s", "v", "EX", "10", "PX", "100"),
    ("SET", "s", "v", "EX", "10", "KEEPTTL"), ("SET", "s", "v", "EX"), ("SET", "s", "v", "FOO"),
    ("SET", "s", "v", "EX", big), ("SET", "s", "v", "PX", big), ("SET", "s", "v", "EXAT", "1"),
    ("GET", "s"), ("SET", "s", "v", "PXAT", "99999999999999"), ("PTTL", "s"), ("SET", "s"),
    ("SETNX", "s", "x"), ("SETNX", "sn", "x"), ("SETEX", "se", "100", "v"), ("TTL", "se"),
    ("SETEX", "se", "0", "v"), ("PSETEX", "pse", "100000", "v"), ("PTTL", "pse"),
    ("GETSET", "s", "gs"), ("GETSET", "gsnew", "x"), ("GETDEL", "gsnew"), ("GETDEL", "gsnew"),
    ("MSET", "m1", "a", "m2", "b"), ("MSET", "m1"), ("MSET", "m1", "a", "m2"),
    ("MGET", "m1", "m2", "nothere", "s"), ("MSETNX", "m1", "x", "m3", "y"),
    ("MSETNX", "m3", "x", "m4", "y"), ("MGET", "m3", "m4"),
    ("INCR", "n"), ("INCR", "n"), ("DECR", "n"), ("INCRBY", "n", "10"), ("DECRBY", "n", "3"),
    ("INCRBY", "n", "abc"), ("INCRBY", "n", "1.5"), ("INCR", "s"), ("SET", "n", big),
    ("INCR", "n"), ("SET", "n", "-" + big), ("DECR", "n"), ("DECR", "n"), ("DECRBY", "n", "1"),
    ("DECRBY", "x", "-9223372036854775808"), ("SET", "n", " 1"), ("INCR", "n"),
    ("SET", "n", "01"), ("INCR", "n"), ("SET", "n", "-0"), ("INCR", "n"), ("SET", "n", "+1"),
    ("INCR", "n"), ("INCRBY", "n2", "99999999999999999999"),
    ("INCRBYFLOAT", "f", "1.5"), ("INCRBYFLOAT", "f", "0.1"), ("INCRBYFLOAT", "f", "-1.6"),
    ("INCRBYFLOAT", "f", "1e3"), ("INCRBYFLOAT", "f", "abc"), ("INCRBYFLOAT", "f", "inf"),
    ("INCRBYFLOAT", "f", " 1"), ("INCRBYFLOAT", "f", "3.0e-5"), ("GET", "f"),
    ("SET", "f", "1.1"), ("INCRBYFLOAT", "f", "2.2"), ("INCRBYFLOAT", "s", "1"),
    ("APPEND", "ap", "abc"), ("APPEND", "ap", "def"), ("GET", "ap"), ("STRLEN", "ap"),
    ("STRLEN", "nothere"), ("GETRANGE", "ap", "0", "2"), ("GETRANGE", "ap", "-2", "-1"),
    ("GETRANGE", "ap", "4", "100"), ("GETRANGE", "ap", "5", "2"), ("GETRANGE", "ap", "-1", "-5"),
    ("GETRANGE", "ap", "-100", "1"), ("GETRANGE", "nothere", "0", "1"), ("SUBSTR", "ap", "1", "3"),
    ("GETRANGE", "ap", "a", "1"), ("SETRANGE", "ap", "1", "XY"), ("GET", "ap"),
    ("SETRANGE", "ap", "10", "Z"), ("GET", "ap"), ("SETRANGE", "sr", "3", "abc"), ("GET", "sr"),
    ("SETRANGE", "sr2", "3", ""), ("EXISTS", "sr2"), ("SETRANGE", "ap", "-1", "x"),
    ("SETRANGE", "ap", "536870912", "x"), ("APPEND", "l0", "x"),
    # keys
    ("DEL", "m1", "m2", "nothere"), ("EXISTS", "m1", "m3", "m3", "nothere"), ("TYPE", "m3"),
    ("TYPE", "nothere"), ("UNLINK", "m3"), ("RENAME", "m4", "m5"), ("GET", "m5"),
    ("RENAME", "nothere", "x"), ("RENAME", "m5", "m5"), ("RENAMENX", "m5", "ap"),
    ("RENAMENX", "m5", "m6"), ("RENAME", "m6", "ap"), ("GET", "ap"),
    ("EXPIRE", "ap", "100"), ("TTL", "ap"), ("PTTL", "ap"), ("PERSIST", "ap"), ("TTL", "ap"),
    ("PERSIST", "ap"), ("TTL", "nothere"), ("EXPIRE", "nothere", "10"), ("PEXPIRE", "ap", "100000"),
    ("PTTL", "ap"), ("EXPIRE", "ap", "50", "NX"), ("EXPIRE", "ap", "50", "XX"), ("TTL", "ap"),
    ("EXPIRE", "ap", "40", "GT"), ("EXPIRE", "ap", "60", "GT"), ("EXPIRE", "ap", "70", "LT"),
    ("EXPIRE", "ap", "30", "LT"), ("TTL", "ap"), ("EXPIRE", "ap", "10", "NX", "XX"),
    ("EXPIRE", "ap", "10", "GT", "LT"), ("EXPIRE", "ap", "10", "FOO"), ("EXPIRE", "ap", "x"),
    ("EXPIRE", "ap", big), ("PEXPIRE", "ap", big), ("EXPIREAT", "ap", "99999999999"),
    ("EXPIRETIME", "ap"), ("PEXPIRETIME", "ap"), ("EXPIRETIME", "s"), ("EXPIRETIME", "nothere"),
    ("PEXPIREAT", "ap", "99999999999999"), ("PEXPIRETIME", "ap"), ("PERSIST", "ap"),
    ("EXPIRE", "ap", "10", "GT"), ("EXPIRE", "ap", "10", "LT"), ("TTL", "ap"),
    ("SET", "gone", "x"), ("EXPIRE", "gone", "-1"), ("EXISTS", "gone"), ("SET", "gone", "x"),
    ("EXPIREAT", "gone", "1"), ("GET", "gone"), ("SET", "gone", "x"), ("PEXPIRE", "gone", "0"),
    ("TYPE", "gone"), ("DBSIZE",),
    # lists
    ("LPUSH", "l", "a", "b", "c"), ("RPUSH", "l", "d", "e"), ("LRANGE", "l", "0", "-1"),
    ("LLEN", "l"), ("LINDEX", "l", "0"), ("LINDEX", "l", "-1"), ("LINDEX", "l", "10"),
    ("LINDEX", "l", "x"), ("LRANGE", "l", "1", "2"), ("LRANGE", "l", "-2", "100"),
    ("LRANGE", "l", "3", "1"), ("LRANGE", "l", "-100", "-4"), ("LRANGE", "l", "5", "10"),
    ("LRANGE", "nothere", "0", "-1"), ("LPOP", "l"), ("RPOP", "l"), ("LPOP", "l", "2"),
    ("LPOP", "l", "0"), ("LPOP", "l", "-1"), ("LPOP", "l", "x"), ("LPOP", "l", "1", "2"),
    ("RPOP", "l", "5"), ("EXISTS", "l"), ("LPOP", "l"), ("LPOP", "l", "2"), ("RPOP", "l", "0"),
    ("LPUSHX", "l", "a"), ("RPUSHX", "l", "a"), ("RPUSH", "l", "x"), ("LPUSHX", "l", "y", "z"),
    ("RPUSHX", "l", "w"), ("LRANGE", "l", "0", "-1"), ("LLEN", "nothere"), ("LPUSH", "s", "x"),
    ("LLEN", "s"), ("LRANGE", "s", "0", "1"), ("LPOP", "s"), ("LINDEX", "s", "0"), ("LPUSH", "l"),
    # sets
    ("SADD", "set", "a", "b", "c", "a"), ("SADD", "set", "a"), ("SCARD", "set"),
    ("SISMEMBER", "set", "a"), ("SISMEMBER", "set", "z"), ("SISMEMBER", "nothere", "a"),
    ("SMISMEMBER", "set", "a", "z", "b"), ("SMEMBERS", "set"), ("SMEMBERS", "nothere"),
    ("SREM", "set", "a", "z"), ("SREM", "nothere", "a"), ("SCARD", "set"), ("SADD", "one", "x"),
    ("SPOP", "one"), ("SPOP", "one"), ("EXISTS", "one"), ("SADD", "one", "x"),
    ("SPOP", "one", "5"), ("SPOP", "nothere", "2"), ("SPOP", "set", "-1"), ("SPOP", "set", "0"),
    ("SPOP", "set", "1", "2"), ("SADD", "one", "y"), ("SRANDMEMBER", "one"),
    ("SRANDMEMBER", "one", "3"), ("SRANDMEMBER", "one", "-3"), ("SRANDMEMBER", "nothere"),
    ("SRANDMEMBER", "nothere", "3"), ("SREM", "set", "b", "c"), ("EXISTS", "set"),
    ("SADD", "s", "x"), ("SCARD", "s"), ("SMEMBERS", "l"), ("SISMEMBER", "l", "x"),
    # hashes
    ("HSET", "h", "f1", "v1", "f2", "v2"), ("HSET", "h", "f1", "w1", "f3", "v3"),
    ("HSET", "h", "f1"), ("HMSET", "h", "f4", "v4"), ("HMSET", "h", "f4"), ("HGET", "h", "f1"),
    ("HGET", "h", "nope"), ("HGET", "nothere", "f"), ("HMGET", "h", "f1", "nope", "f4"),
    ("HMGET", "nothere", "a"), ("HLEN", "h"), ("HEXISTS", "h", "f2"), ("HEXISTS", "h", "x"),
    ("HSTRLEN", "h", "f1"), ("HSTRLEN", "h", "x"), ("HGETALL", "h"), ("HKEYS", "h"),
    ("HVALS", "h"), ("HGETALL", "nothere"), ("HSETNX", "h", "f1", "x"), ("HSETNX", "h", "f9", "x"),
    ("HDEL", "h", "f1", "nope"), ("HINCRBY", "h", "n", "5"), ("HINCRBY", "h", "n", "-7"),
    ("HINCRBY", "h", "f2", "1"), ("HINCRBY", "h", "n", "x"), ("HINCRBY", "h", "n", big),
    ("HINCRBY", "h", "n", big), ("HINCRBYFLOAT", "h", "fl", "1.5"),
    ("HINCRBYFLOAT", "h", "fl", "2.25"), ("HINCRBYFLOAT", "h", "f2", "1"),
    ("HINCRBYFLOAT", "h", "fl", "x"), ("HINCRBYFLOAT", "h", "fl", "inf"), ("HGETALL", "h"),
    ("HDEL", "h", "f2", "f3", "f4", "f9", "n", "fl"), ("EXISTS", "h"), ("HINCRBY", "h2", "a", "1"),
    ("HGET", "s", "x"), ("HSET", "s", "a", "b"), ("HLEN", "s"), ("HGETALL", "l"),
    # sorted sets
    ("ZADD", "z", "1", "a", "2", "b", "3", "c"), ("ZADD", "z", "1.5", "a"), ("ZSCORE", "z", "a"),
    ("ZSCORE", "z", "x"), ("ZSCORE", "nothere", "a"), ("ZCARD", "z"), ("ZCARD", "nothere"),
    ("ZRANGE", "z", "0", "-1"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"),
    ("ZRANGE", "z", "1", "5"), ("ZRANGE", "z", "-2", "-1", "WITHSCORES"),
    ("ZRANGE", "z", "0", "-1", "REV"), ("ZREVRANGE", "z", "0", "1", "WITHSCORES"),
    ("ZRANGE", "z", "(1.5", "3", "BYSCORE"), ("ZRANGE", "z", "3", "1", "BYSCORE", "REV"),
    ("ZRANGE", "z", "-inf", "+inf", "BYSCORE", "LIMIT", "1", "1", "WITHSCORES"),
    ("ZRANGE", "z", "0", "1", "LIMIT", "0", "1"), ("ZRANGE", "z", "0", "1", "FOO"),
    ("ZRANGE", "z", "0", "-1", "LIMIT", "2", "-1", "WITHSCORES"), ("ZRANGE", "s", "0", "1", "LIMIT", "-4", "-1"),
    ("ZRANGEBYSCORE", "z", "-inf", "+inf"), ("ZRANGEBYSCORE", "z", "1.5", "(3", "WITHSCORES"),
    ("ZRANGEBYSCORE", "z", "(1.5", "+inf", "LIMIT", "0", "1"),
    ("ZRANGEBYSCORE", "z", "x", "1"), ("ZRANGEBYSCORE", "z", "5", "1"),
    ("ZREVRANGEBYSCORE", "z", "+inf", "-inf", "WITHSCORES"),
    ("ZREVRANGEBYSCORE", "z", "(3", "1.5"), ("ZCOUNT", "z", "-inf", "+inf"),
    ("ZCOUNT", "z", "(1.5", "3"), ("ZCOUNT", "z", "a", "3"), ("ZRANK", "z", "b"),
    ("ZREVRANK", "z", "b"), ("ZRANK", "z", "x"), ("ZMSCORE", "z", "a", "x", "c"),
    ("ZADD", "z", "NX", "10", "a", "4", "d"), ("ZADD", "z", "XX", "10", "a", "5", "e"),
    ("ZADD", "z", "CH", "1", "a", "2", "b", "9", "f"), ("ZADD", "z", "GT", "CH", "0", "a", "20", "b"),
    ("ZADD", "z", "LT", "CH", "0", "a", "30", "b"), ("ZADD", "z", "NX", "XX", "1", "a"),
    ("ZADD", "z", "GT", "LT", "1", "a"), ("ZADD", "z", "NX", "GT", "1", "a"),
    ("ZADD", "z", "INCR", "1", "a", "2", "b"), ("ZADD", "z", "INCR", "2.5", "a"),
    ("ZADD", "z", "INCR", "NX", "2.5", "a"), ("ZADD", "z", "INCR", "XX", "1", "zz"),
    ("ZADD", "z", "x", "a"), ("ZADD", "z", "1"), ("ZADD", "z", "1", "a", "2"),
    ("ZADD", "z", "nan", "a"), ("ZADD", "z", "inf", "i", "-inf", "j"),
    ("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("ZINCRBY", "z", "1", "a"), ("ZINCRBY", "z", "-inf", "i"),
    ("ZINCRBY", "z", "x", "a"), ("ZINCRBY", "z", "1", "new"), ("ZADD", "z", "0.1", "p"),
    ("ZINCRBY", "z", "0.2", "p"), ("ZSCORE", "z", "p"), ("ZADD", "z", "1e300", "q"),
    ("ZSCORE", "z", "q"), ("ZADD", "z", "-0", "r"), ("ZSCORE", "z", "r"),
    ("ZREM", "z", "a", "x"), ("ZPOPMIN", "z"), ("ZPOPMAX", "z"), ("ZPOPMIN", "z", "2"),
    ("ZPOPMIN", "z", "0"), ("ZPOPMIN", "z", "-1"), ("ZPOPMIN", "nothere"),
    ("ZPOPMIN", "z", "1", "2"), ("ZPOPMAX", "z", "100"), ("EXISTS", "z"),
    ("ZADD", "z2", "1", "a", "1", "b", "1", "c", "0", "d"), ("ZRANGE", "z2", "0", "-1", "WITHSCORES"),
    ("ZRANGEBYSCORE", "z2", "1", "1"), ("ZRANGE", "s", "0", "1"), ("ZADD", "s", "1", "a"),
    ("ZSCORE", "l", "a"),
    # KEYS and SCAN
    ("MSET", "key:1", "a", "key:2", "b", "key:10", "c", "kex", "d", "k[y]", "e", "K:1", "f"),
    ("KEYS", "*"), ("KEYS", "key:*"), ("KEYS", "key:?"), ("KEYS", "k[ae]y:*"), ("KEYS", "k[^e]*"),
    ("KEYS", "k[a-f]y*"), ("KEYS", "k\\[y\\]"), ("KEYS", "*:1*"), ("KEYS", "nomatch*"),
    ("KEYS", "[k"), ("KEYS", "key:1\\"), ("KEYS", "**1"), ("KEYS", "K*"),
    ("SCAN", "0"), ("SCAN", "0", "MATCH", "key:*"), ("SCAN", "0", "COUNT", "2"),
    ("SCAN", "0", "MATCH", "*1*", "COUNT", "1"), ("SCAN", "0", "TYPE", "zset"),
    ("SCAN", "0", "TYPE", "string", "MATCH", "k*"), ("SCAN", "x"), ("SCAN", "0", "COUNT", "0"),
    ("SCAN", "0", "FOO", "bar"), ("SCAN", "-1"),
    ("SADD", "bigset", *["m%d" % i for i in range(300)]), ("SSCAN", "bigset", "0"),
    ("SSCAN", "bigset", "0", "MATCH", "m1*", "COUNT", "7"), ("SSCAN", "nothere", "0"),
    ("HSET", "bighash", *[x for i in range(300) for x in ("f%d" % i, "v%d" % i)]),
    ("HSCAN", "bighash", "0"), ("HSCAN", "bighash", "0", "MATCH", "f2?", "COUNT", "3"),
    ("HSCAN", "s", "0"), ("SSCAN", "bighash", "0"),
    # the server
    ("PING",), ("PING", "hi"), ("PING", "a", "b"), ("ECHO", "x"), ("ECHO",), ("SELECT", "0"),
    ("SELECT", "x"), ("DBSIZE",), ("GET",), ("GET", "a", "b"), ("NOSUCHCOMMAND", "a", "b"),
    ("CONFIG", "GET", "appendonly"), ("CONFIG", "GET"), ("SET", "notz", "x"),
    ("ZPOPMIN", "notz", "0"), ("ZPOPMAX", "notz", "0"), ("FLUSHALL",), ("DBSIZE",), ("KEYS", "*"),
    ("FLUSHALL", "x"),
]


# the commands added with transactions: GETEX, the list, set and sorted-set
# commands that move, combine and trim, lexicographic ranges, CLIENT
script2 = [
    # GETEX
    ("SET", "g", "v"), ("GETEX", "g"), ("TTL", "g"), ("GETEX", "g", "EX", "100"), ("TTL", "g"),
    ("GETEX", "g", "PX", "200000"), ("PTTL", "g"), ("GETEX", "g", "PERSIST"), ("TTL", "g"),
    ("GETEX", "g", "PERSIST"), ("GETEX", "g", "EXAT", "99999999999"), ("EXPIRETIME", "g"),
    ("GETEX", "g", "PXAT", "99999999999999"), ("PEXPIRETIME", "g"), ("GETEX", "g", "EX", "1", "EX", "50"),
    ("TTL", "g"), ("GETEX", "g", "EX", "0"), ("GETEX", "g", "EX", "-1"), ("GETEX", "g", "EX", "x"),
    ("GETEX", "g", "PX", big), ("GETEX", "g", "EX", big), ("GETEX", "g", "EXAT", big),
    ("GETEX", "g", "PERSIST", "EX", "1"), ("GETEX", "g", "EX", "10", "PERSIST"),
    ("GETEX", "g", "EX", "10", "PX", "10"), ("GETEX", "g", "KEEPTTL"), ("GETEX", "g", "NX"),
    ("GETEX", "g", "EX"), ("GETEX", "g", "FOO"), ("GETEX", "nothere", "EX", "x"),
    ("GETEX", "nothere", "FOO"), ("GETEX", "nothere"), ("GETEX",), ("ex", "g"), ("GETEX", "g", "ex", "30"),
    ("TTL", "g"), ("GETEX", "g", "EXAT", "1"), ("EXISTS", "g"), ("SET", "g", "v"),
    ("GETEX", "g", "PXAT", "1"), ("EXISTS", "g"), ("LPUSH", "gl", "a"), ("GETEX", "gl"),
    ("GETEX", "gl", "EX", "x"), ("GETEX", "gl", "FOO"),
    # LSET LTRIM LREM LINSERT LPOS
    ("RPUSH", "l", "a", "b", "c", "a", "b", "a"), ("LSET", "l", "0", "A"), ("LSET", "l", "-1", "Z"),
    ("LSET", "l", "-6", "first"), ("LSET", "l", "6", "x"), ("LSET", "l", "-7", "x"),
    ("LSET", "l", "x", "x"), ("LSET", "nothere", "0", "x"), ("LSET", "nothere", "x", "x"),
    ("LSET", "g", "0", "x"), ("LSET", "gl", "0", "x" * 300), ("LRANGE", "gl", "0", "-1"),
    ("LSET", "gl", "0", ""), ("LRANGE", "l", "0", "-1"), ("LSET", "l"),
    ("RPUSH", "l", "a", "b", "a"), ("LPOS", "l", "a"), ("LPOS", "l", "b"), ("LPOS", "l", "zz"),
    ("LPOS", "l", "a", "RANK", "2"), ("LPOS", "l", "a", "RANK", "-1"), ("LPOS", "l", "a", "RANK", "-3"),
    ("LPOS", "l", "a", "RANK", "9"), ("LPOS", "l", "a", "COUNT", "0"), ("LPOS", "l", "a", "COUNT", "2"),
    ("LPOS", "l", "a", "COUNT", "0", "RANK", "-1"), ("LPOS", "l", "a", "COUNT", "1", "RANK", "-2"),
    ("LPOS", "l", "a", "MAXLEN", "3"), ("LPOS", "l", "a", "MAXLEN", "3", "COUNT", "0"),
    ("LPOS", "l", "a", "RANK", "-1", "MAXLEN", "2", "COUNT", "0"), ("LPOS", "l", "zz", "COUNT", "3"),
    ("LPOS", "l", "a", "RANK", "0"), ("LPOS", "l", "a", "RANK", "x"), ("LPOS", "l", "a", "COUNT", "-1"),
    ("LPOS", "l", "a", "COUNT", "x"), ("LPOS", "l", "a", "MAXLEN", "-1"), ("LPOS", "l", "a", "MAXLEN", "x"),
    ("LPOS", "l", "a", "RANK"), ("LPOS", "l", "a", "FOO"), ("LPOS", "l", "a", "COUNT", "2", "COUNT", "1"),
    ("LPOS", "l", "a", "RANK", "-9223372036854775808"),
    ("LPOS", "l", "a", "RANK", "-9223372036854775808", "COUNT", "2"),
    ("LPOS", "l", "a", "RANK", "9223372036854775807", "COUNT", "0"), ("LPOS", "l", "a", "RANK", "-" + big),
    ("LPOS", "nothere", "a"), ("LPOS", "nothere", "a", "COUNT", "1"), ("LPOS", "g", "a"),
    ("LPOS", "gl", "a", "RANK", "0"), ("LPOS", "l"),
    ("LINSERT", "l", "BEFORE", "a", "new"), ("LINSERT", "l", "after", "Z", "last"),
    ("LINSERT", "l", "AFTER", "first", "second"), ("LINSERT", "l", "BEFORE", "zz", "x"),
    ("LINSERT", "l", "MIDDLE", "a", "x"), ("LINSERT", "nothere", "BEFORE", "a", "x"),
    ("LINSERT", "nothere", "MIDDLE", "a", "x"), ("LINSERT", "g", "BEFORE", "a", "x"),
    ("LRANGE", "l", "0", "-1"), ("LINSERT", "l", "BEFORE", "a"),
    ("LREM", "l", "1", "a"), ("LREM", "l", "-1", "a"), ("LRANGE", "l", "0", "-1"), ("LREM", "l", "0", "b"),
    ("LREM", "l", "5", "zz"), ("LREM", "l", "x", "a"), ("LREM", "nothere", "1", "a"),
    ("LREM", "nothere", "x", "a"), ("LREM", "g", "1", "a"), ("LRANGE", "l", "0", "-1"),
    ("LREM", "l", "-" + big, "a"), ("RPUSH", "lr", "x", "x", "y", "x"), ("LREM", "lr", "-2", "x"),
    ("LRANGE", "lr", "0", "-1"), ("LREM", "lr", "0", "x"), ("LREM", "lr", "0", "y"), ("EXISTS", "lr"),
    ("RPUSH", "lt", *"abcdefgh"), ("LTRIM", "lt", "1", "-2"), ("LRANGE", "lt", "0", "-1"),
    ("LTRIM", "lt", "-3", "100"), ("LRANGE", "lt", "0", "-1"), ("LTRIM", "lt", "0", "-1"),
    ("LTRIM", "lt", "-100", "0"), ("LRANGE", "lt", "0", "-1"), ("LTRIM", "lt", "x", "1"),
    ("LTRIM", "lt", "0", "x"), ("LTRIM", "nothere", "0", "1"), ("LTRIM", "nothere", "x", "1"),
    ("LTRIM", "g", "0", "1"), ("LTRIM", "lt", "5", "1"), ("EXISTS", "lt"), ("RPUSH", "lt", "a", "b"),
    ("LTRIM", "lt", "2", "5"), ("EXISTS", "lt"), ("RPUSH", "lt", "a"), ("LTRIM", "lt", "0", "-2"),
    ("EXISTS", "lt"), ("LTRIM", "lt", "0"),
    # LMOVE RPOPLPUSH
    ("RPUSH", "src", "1", "2", "3"), ("LMOVE", "src", "dst", "LEFT", "RIGHT"),
    ("LMOVE", "src", "dst", "right", "left"), ("LRANGE", "src", "0", "-1"), ("LRANGE", "dst", "0", "-1"),
    ("LMOVE", "dst", "dst", "LEFT", "RIGHT"), ("LRANGE", "dst", "0", "-1"),
    ("LMOVE", "dst", "dst", "RIGHT", "LEFT"), ("LMOVE", "dst", "dst", "LEFT", "LEFT"),
    ("LMOVE", "dst", "dst", "RIGHT", "RIGHT"), ("LRANGE", "dst", "0", "-1"),
    ("LMOVE", "src", "dst", "LEFT", "LEFT"), ("EXISTS", "src"), ("LMOVE", "src", "dst", "LEFT", "LEFT"),
    ("LMOVE", "nothere", "g", "LEFT", "LEFT"), ("LMOVE", "dst", "g", "LEFT", "LEFT"),
    ("LMOVE", "g", "dst", "LEFT", "LEFT"), ("LMOVE", "dst", "x", "UP", "LEFT"),
    ("LMOVE", "dst", "x", "LEFT", "DOWN"), ("LMOVE", "nothere", "x", "UP", "LEFT"), ("LMOVE", "dst", "x"),
    ("RPOPLPUSH", "dst", "src"), ("RPOPLPUSH", "dst", "src"), ("RPOPLPUSH", "dst", "dst"),
    ("LRANGE", "src", "0", "-1"), ("LRANGE", "dst", "0", "-1"), ("RPOPLPUSH", "nothere", "src"),
    ("RPOPLPUSH", "src", "g"), ("RPOPLPUSH", "g", "src"), ("RPOPLPUSH", "src"),
    ("RPUSH", "one", "x"), ("RPOPLPUSH", "one", "one"), ("LRANGE", "one", "0", "-1"),
    ("LMOVE", "one", "one", "LEFT", "RIGHT"), ("RPOPLPUSH", "one", "two"), ("EXISTS", "one"),
    # set algebra, SMOVE, SINTERCARD
    ("SADD", "s1", "a", "b", "c", "d"), ("SADD", "s2", "c", "d", "e"), ("SADD", "s3", "a", "c", "e", "f"),
    ("SINTER", "s1", "s2"), ("SINTER", "s1", "s2", "s3"), ("SINTER", "s1"), ("SINTER", "s1", "nothere"),
    ("SINTER", "nothere", "g"), ("SINTER", "s1", "nothere", "g"), ("SINTER", "g"), ("SINTER",),
    ("SUNION", "s1", "s2"), ("SUNION", "s1", "s2", "s3", "nothere"), ("SUNION", "nothere"),
    ("SUNION", "s1", "g"), ("SUNION", "nothere", "g"), ("SDIFF", "s1", "s2"), ("SDIFF", "s1", "s2", "s3"),
    ("SDIFF", "s3", "s1"), ("SDIFF", "s1", "nothere"), ("SDIFF", "nothere", "s1"), ("SDIFF", "s1", "s1"),
    ("SDIFF", "nothere", "g"), ("SDIFF", "s1", "g"),
    ("SINTERSTORE", "d1", "s1", "s2"), ("SMEMBERS", "d1"), ("SINTERSTORE", "d1", "s1", "nothere"),
    ("EXISTS", "d1"), ("SINTERSTORE", "d1", "s1", "nothere"), ("SET", "d1", "str"), ("EXPIRE", "d1", "100"),
    ("SINTERSTORE", "d1", "s1", "s3"), ("TYPE", "d1"), ("TTL", "d1"), ("SMEMBERS", "d1"),
    ("SINTERSTORE", "s1", "s1", "s2"), ("SMEMBERS", "s1"), ("SINTERSTORE", "d1", "g", "s1"),
    ("SINTERSTORE", "d1"), ("SADD", "s1", "a", "b"),
    ("SUNIONSTORE", "d2", "s1", "s2", "s3"), ("SMEMBERS", "d2"), ("SUNIONSTORE", "d2", "nothere"),
    ("EXISTS", "d2"), ("SUNIONSTORE", "g", "s2"), ("TYPE", "g"), ("SMEMBERS", "g"),
    ("SUNIONSTORE", "d2", "s1", "gl"), ("SUNIONSTORE", "s2", "s2", "s1"), ("SMEMBERS", "s2"),
    ("SDIFFSTORE", "d3", "s2", "s1"), ("SMEMBERS", "d3"), ("SDIFFSTORE", "d3", "s1", "s1"),
    ("EXISTS", "d3"), ("SDIFFSTORE", "d3", "nothere", "s1"), ("SDIFFSTORE", "d3", "s3", "nothere"),
    ("SMEMBERS", "d3"), ("SDIFFSTORE", "d3", "s3", "gl"), ("SDIFFSTORE", "s3", "s3", "s1"), ("SMEMBERS", "s3"),
    ("SMOVE", "s1", "s4", "a"), ("SMEMBERS", "s1"), ("SMEMBERS", "s4"), ("SMOVE", "s1", "s4", "zz"),
    ("SMOVE", "s1", "s2", "b"), ("SMOVE", "s1", "s1", "c"), ("SMOVE", "s1", "s1", "zz"),
    ("SMOVE", "nothere", "gl", "a"), ("SMOVE", "s1", "gl", "c"), ("SMOVE", "gl", "s1", "c"),
    ("SMOVE", "s4", "s5", "a"), ("EXISTS", "s4"), ("SMEMBERS", "s5"), ("SMOVE", "s1", "s2"),
    ("SADD", "s6", "x", "y", "z"), ("SADD", "s7", "x", "y", "w"),
    ("SINTERCARD", "2", "s6", "s7"), ("SINTERCARD", "2", "s6", "s7", "LIMIT", "1"),
    ("SINTERCARD", "2", "s6", "s7", "limit", "0"), ("SINTERCARD", "1", "s6"), ("SINTERCARD", "1", "nothere"),
    ("SINTERCARD", "2", "s6", "nothere"), ("SINTERCARD", "2", "nothere", "gl"), ("SINTERCARD", "1", "gl"),
    ("SINTERCARD", "0", "s6"), ("SINTERCARD", "x", "s6"), ("SINTERCARD", "-1", "s6"),
    ("SINTERCARD", "9223372036854775808", "s6"), ("SINTERCARD", "3", "s6", "s7"),
    ("SINTERCARD", "1", "s6", "LIMIT", "-1"), ("SINTERCARD", "1", "s6", "LIMIT", "x"),
    ("SINTERCARD", "1", "s6", "FOO"), ("SINTERCARD", "1", "s6", "LIMIT"), ("SINTERCARD", "1", "s6", "s7"),
    ("SINTERCARD", "1"),
    # ZREMRANGEBY*, lexicographic ranges
    ("ZADD", "zr", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"), ("ZREMRANGEBYSCORE", "zr", "2", "(4"),
    ("ZRANGE", "zr", "0", "-1", "WITHSCORES"), ("ZREMRANGEBYSCORE", "zr", "10", "20"),
    ("ZREMRANGEBYSCORE", "zr", "5", "1"), ("ZREMRANGEBYSCORE", "zr", "x", "1"),
    ("ZREMRANGEBYSCORE", "zr", "(1", "(1"), ("ZREMRANGEBYSCORE", "nothere", "x", "1"),
    ("ZREMRANGEBYSCORE", "nothere", "1", "2"), ("ZREMRANGEBYSCORE", "g", "1", "2"),
    ("ZREMRANGEBYSCORE", "zr", "-inf", "+inf"), ("EXISTS", "zr"),
    ("ZADD", "zr", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"), ("ZREMRANGEBYRANK", "zr", "0", "0"),
    ("ZREMRANGEBYRANK", "zr", "-1", "-1"), ("ZRANGE", "zr", "0", "-1"), ("ZREMRANGEBYRANK", "zr", "5", "10"),
    ("ZREMRANGEBYRANK", "zr", "2", "1"), ("ZREMRANGEBYRANK", "zr", "x", "1"),
    ("ZREMRANGEBYRANK", "nothere", "0", "1"), ("ZREMRANGEBYRANK", "nothere", "x", "1"),
    ("ZREMRANGEBYRANK", "g", "0", "1"), ("ZREMRANGEBYRANK", "zr", "-100", "100"), ("EXISTS", "zr"),
    ("ZREMRANGEBYRANK", "zr", "0"),
    ("ZADD", "zl", "0", "a", "0", "b", "0", "c", "0", "d", "0", "e", "0", "ab", "0", "", "0", "B"),
    ("ZRANGEBYLEX", "zl", "-", "+"), ("ZRANGEBYLEX", "zl", "[a", "[c"), ("ZRANGEBYLEX", "zl", "(a", "(c"),
    ("ZRANGEBYLEX", "zl", "[ab", "+"), ("ZRANGEBYLEX", "zl", "-", "(b"), ("ZRANGEBYLEX", "zl", "[", "[a"),
    ("ZRANGEBYLEX", "zl", "(", "[a"), ("ZRANGEBYLEX", "zl", "[c", "[a"), ("ZRANGEBYLEX", "zl", "+", "-"),
    ("ZRANGEBYLEX", "zl", "-", "-"), ("ZRANGEBYLEX", "zl", "+", "+"), ("ZRANGEBYLEX", "zl", "[a", "[a"),
    ("ZRANGEBYLEX", "zl", "(a", "[a"), ("ZRANGEBYLEX", "zl", "-", "+", "LIMIT", "2", "3"),
    ("ZRANGEBYLEX", "zl", "-", "+", "LIMIT", "0", "-1"), ("ZRANGEBYLEX", "zl", "-", "+", "LIMIT", "-1", "2"),
    ("ZRANGEBYLEX", "zl", "-", "+", "LIMIT", "100", "2"), ("ZRANGEBYLEX", "zl", "-", "+", "LIMIT", "1", "0"),
    ("ZRANGEBYLEX", "zl", "-", "+", "LIMIT", "x", "1"), ("ZRANGEBYLEX", "zl", "-", "+", "LIMIT", "1"),
    ("ZRANGEBYLEX", "zl", "-", "+", "WITHSCORES"), ("ZRANGEBYLEX", "zl", "a", "+"),
    ("ZRANGEBYLEX", "zl", "", "+"), ("ZRANGEBYLEX", "zl", "+x", "+"), ("ZRANGEBYLEX", "zl", "-", "-x"),
    ("ZRANGEBYLEX", "zl", "-", "+", "REV"), ("ZRANGEBYLEX", "zl", "-", "+", "BYLEX"),
    ("ZRANGEBYLEX", "nothere", "-", "+"), ("ZRANGEBYLEX", "nothere", "x", "+"), ("ZRANGEBYLEX", "g", "-", "+"),
    ("ZRANGEBYLEX", "zl", "-"),
    ("ZREVRANGEBYLEX", "zl", "+", "-"), ("ZREVRANGEBYLEX", "zl", "[c", "[a"), ("ZREVRANGEBYLEX", "zl", "(c", "(a"),
    ("ZREVRANGEBYLEX", "zl", "+", "[d"), ("ZREVRANGEBYLEX", "zl", "(b", "-"), ("ZREVRANGEBYLEX", "zl", "-", "+"),
    ("ZREVRANGEBYLEX", "zl", "+", "-", "LIMIT", "1", "2"), ("ZREVRANGEBYLEX", "zl", "[zz", "[b"),
    ("ZREVRANGEBYLEX", "zl", "[", "-"), ("ZREVRANGEBYLEX", "zl", "x", "-"),
    ("ZRANGE", "zl", "[a", "[c", "BYLEX"), ("ZRANGE", "zl", "[c", "[a", "BYLEX", "REV"),
    ("ZRANGE", "zl", "-", "+", "BYLEX", "LIMIT", "1", "2"), ("ZRANGE", "zl", "+", "-", "REV", "BYLEX", "LIMIT", "0", "3"),
    ("ZRANGE", "zl", "-", "+", "BYLEX", "WITHSCORES"), ("ZRANGE", "zl", "0", "1", "BYLEX"),
    ("ZRANGE", "zl", "[a", "[b", "BYSCORE", "BYLEX"), ("ZRANGE", "zl", "0", "1", "BYLEX", "BYSCORE"),
    ("ZRANGE", "zl", "0", "1", "REV", "REV"), ("ZRANGE", "zl", "0", "1", "BYSCORE", "BYSCORE"),
    ("ZRANGE", "zl", "-", "+", "BYLEX", "BYLEX"), ("ZRANGE", "zl", "0", "1", "WITHSCORES", "WITHSCORES"),
    ("ZRANGEBYSCORE", "zl", "0", "1", "LIMIT", "0", "1", "LIMIT", "0", "2"),
    ("ZLEXCOUNT", "zl", "-", "+"), ("ZLEXCOUNT", "zl", "[a", "(c"), ("ZLEXCOUNT", "zl", "[c", "[a"),
    ("ZLEXCOUNT", "zl", "x", "+"), ("ZLEXCOUNT", "nothere", "-", "+"), ("ZLEXCOUNT", "nothere", "x", "+"),
    ("ZLEXCOUNT", "g", "-", "+"), ("ZLEXCOUNT", "zl", "-"),
    ("ZREMRANGEBYLEX", "zl", "[a", "(b"), ("ZRANGE", "zl", "0", "-1"), ("ZREMRANGEBYLEX", "zl", "(d", "+"),
    ("ZRANGE", "zl", "0", "-1"), ("ZREMRANGEBYLEX", "zl", "x", "+"), ("ZREMRANGEBYLEX", "nothere", "-", "+"),
    ("ZREMRANGEBYLEX", "nothere", "x", "+"), ("ZREMRANGEBYLEX", "g", "-", "+"), ("ZREMRANGEBYLEX", "zl", "-", "+"),
    ("EXISTS", "zl"), ("ZREMRANGEBYLEX", "zl", "-"),
    # CLIENT, SCAN's cursor
    ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME", "conn-1"), ("CLIENT", "GETNAME"), ("CLIENT", "ID"),
    ("CLIENT", "SETNAME", "a b"), ("CLIENT", "SETNAME", "a\nb"), ("CLIENT", "SETNAME", "\xc3\xa9"),
    ("CLIENT", "SETNAME", "~!"), ("CLIENT", "GETNAME"), ("CLIENT", "SETNAME", ""), ("CLIENT", "GETNAME"),
    ("client", "setname", "x"), ("CLIENT", "getName"), ("CLIENT", "SETNAME"), ("CLIENT", "SETNAME", "a", "b"),
    ("CLIENT", "GETNAME", "x"), ("CLIENT", "ID", "x"), ("CLIENT",), ("CLIENT", "FOO"), ("CLIENT", "FOO", "bar"),
    ("CLIENT", "SETINFO", "LIB-NAME", "redis-py"), ("CLIENT", "SETINFO", "lib-ver", "5.0.1"),
    ("CONFIG", "RESETSTAT"), ("CONFIG", "RESETSTAT", "x"), ("CONFIG", "FOO"), ("CONFIG",),
    ("SCAN", "-1"), ("SCAN", "x"), ("SCAN", "1.5"), ("SCAN", " 1"), ("SCAN", "18446744073709551616"),
    ("SCAN", "18446744073709551615"), ("SSCAN", "s6", "-1"), ("SSCAN", "s6", "x"), ("HSCAN", "nothere", "x"),
    ("FLUSHALL",),
]

# Transactions: (who, command), who 0 or 1 the connection (each server's
# first or second), or ("sleep", seconds).
# the blocking pops (as they answer without blocking: a list already
# there, a timeout, inside MULTI), pub/sub on one connection, the
# connection's commands (not HELLO 3: redis-server speaks RESP3 then,
# kv-server refuses it with -NOPROTO)
script3 = [
    ("RPUSH", "bl", "a", "b", "c", "d"), ("BLPOP", "bl", "0"), ("BRPOP", "bl", "0"), ("LRANGE", "bl", "0", "-1"),
    ("BLPOP", "nothere", "bl", "1"), ("BLPOP", "nothere", "0.01"), ("BRPOP", "nothere", "nothere2", "0.01"),
    ("BLPOP", "bl", "bl", "0"), ("EXISTS", "bl"), ("BLPOP", "bl", "-1"), ("BLPOP", "bl", "x"), ("BLPOP", "bl", ""),
    ("BLPOP", "bl", "inf"), ("BLPOP", "bl", "-inf"), ("BLPOP", "bl", "nan"), ("BLPOP", "bl", "1e30"),
    ("BLPOP", "bl", " 1"), ("BLPOP", "bl", "0.0001"), ("BLPOP", "bl", "1e-300"), ("BLPOP", "bl", "-0.0001x"),
    ("BLPOP", "bl"), ("BRPOP",), ("SET", "bs", "v"), ("BLPOP", "bs", "1"), ("BLPOP", "nothere", "bs", "1"),
    ("BLPOP", "bs", "-1"), ("BRPOP", "bs", "x"), ("RPUSH", "bl", "x"), ("BLPOP", "bl", "bs", "1"),
    ("RPUSH", "bm", "1", "2", "3"), ("BLMOVE", "bm", "bm2", "LEFT", "RIGHT", "0"),
    ("BLMOVE", "bm", "bm2", "right", "left", "0"), ("LRANGE", "bm2", "0", "-1"),
    ("BLMOVE", "nothere", "bm2", "LEFT", "LEFT", "0.01"), ("BLMOVE", "bm", "bm2", "UP", "LEFT", "0"),
    ("BLMOVE", "bm", "bm2", "LEFT", "LEFT", "-1"), ("BLMOVE", "bm", "bm2", "UP", "LEFT", "-1"),
    ("BLMOVE", "bm", "bs", "LEFT", "LEFT", "0"), ("BLMOVE", "bs", "bm", "LEFT", "LEFT", "0"),
    ("BLMOVE", "bm", "bm2", "LEFT", "LEFT"), ("BRPOPLPUSH", "bm", "bm2", "0"), ("EXISTS", "bm"),
    ("BRPOPLPUSH", "bm2", "bm2", "0"), ("LRANGE", "bm2", "0", "-1"), ("BRPOPLPUSH", "nothere", "bm2", "0.01"),
    ("BRPOPLPUSH", "bm2", "bs", "0"), ("BRPOPLPUSH", "bm2", "x", "-5"), ("BRPOPLPUSH", "bm2", "x"),
    ("ZADD", "bz", "1", "a", "2", "b", "3", "c"), ("BZPOPMIN", "bz", "0"), ("BZPOPMAX", "nothere", "bz", "0"),
    ("BZPOPMIN", "nothere", "0.01"), ("BZPOPMAX", "bz", "-1"), ("BZPOPMIN", "bs", "0"), ("RPUSH", "wl", "x"), ("BZPOPMIN", "wl", "0"),
    ("BZPOPMIN", "bz", "x"), ("BZPOPMIN", "bz"), ("BZPOPMAX", "bz", "bz", "0"), ("EXISTS", "bz"),
    # LMPOP, BLMPOP, ZMPOP, BZMPOP
    ("RPUSH", "ml", "a", "b", "c", "d", "e"), ("LMPOP", "1", "ml", "LEFT"), ("LMPOP", "2", "nothere", "ml", "RIGHT", "COUNT", "2"),
    ("LMPOP", "1", "ml", "left", "count", "100"), ("EXISTS", "ml"), ("LMPOP", "1", "ml", "LEFT"),
    ("LMPOP", "0", "ml", "LEFT"), ("LMPOP", "-1", "ml", "LEFT"), ("LMPOP", "x", "ml", "LEFT"), ("LMPOP", "2", "ml", "LEFT"),
    ("LMPOP", "1", "ml", "UP"), ("LMPOP", "1", "ml", "LEFT", "COUNT", "0"), ("LMPOP", "1", "ml", "LEFT", "COUNT", "-1"),
    ("LMPOP", "1", "ml", "LEFT", "COUNT", "x"), ("LMPOP", "1", "ml", "LEFT", "COUNT"),
    ("LMPOP", "1", "ml", "LEFT", "COUNT", "1", "COUNT", "1"), ("LMPOP", "1", "ml", "LEFT", "FOO"),
    ("LMPOP", "1", "bs", "LEFT"), ("LMPOP", "2", "ml", "bs", "LEFT"), ("LMPOP", "9999999999", "ml", "LEFT"),
    ("LMPOP", "1", "ml"), ("LMPOP", "1"), ("RPUSH", "ml", "a", "b"), ("BLMPOP", "0", "1", "ml", "RIGHT", "COUNT", "5"),
    ("BLMPOP", "0.01", "1", "ml", "LEFT"), ("BLMPOP", "x", "1", "ml", "LEFT"), ("BLMPOP", "-1", "1", "ml", "LEFT"),
    ("BLMPOP", "x", "0", "ml", "LEFT"), ("BLMPOP", "x", "1", "ml", "UP"), ("BLMPOP", "x", "1", "ml", "LEFT", "COUNT", "0"),
    ("BLMPOP", "0", "1", "bs", "LEFT"), ("BLMPOP", "0", "1", "ml"),
    ("ZADD", "mz", "1", "a", "2", "b", "3", "c"), ("ZMPOP", "1", "mz", "MIN"), ("ZMPOP", "2", "nothere", "mz", "MAX", "COUNT", "5"),
    ("ZMPOP", "1", "mz", "MIN"), ("ZMPOP", "1", "mz", "MID"), ("ZMPOP", "0", "mz", "MIN"), ("ZMPOP", "1", "bs", "MIN"),
    ("ZMPOP", "1", "mz", "MAX", "COUNT", "0"), ("ZMPOP", "1", "mz"), ("ZADD", "mz", "1", "a", "2", "b"),
    ("BZMPOP", "0", "1", "mz", "max", "count", "1"), ("BZMPOP", "0.01", "1", "nothere", "MIN"),
    ("BZMPOP", "-1", "1", "mz", "MIN"), ("BZMPOP", "0", "1", "mz", "MID"), ("BZMPOP", "0", "1", "wl", "MIN"),
    ("BZMPOP", "0", "1", "mz", "MIN", "COUNT", "2"), ("EXISTS", "mz"),
    # inside MULTI: never blocks
    ("MULTI",), ("BLPOP", "nothere", "0"), ("BRPOPLPUSH", "nothere", "d", "0"), ("BLMOVE", "nothere", "d", "LEFT", "LEFT", "0"),
    ("BZPOPMAX", "nothere", "0"), ("BLMPOP", "0", "1", "nothere", "LEFT"), ("BZMPOP", "0", "1", "nothere", "MAX"),
    ("RPUSH", "ml", "v"), ("BLPOP", "ml", "0"), ("BLPOP", "nothere", "-1"), ("EXEC",),
    ("MULTI",), ("BLPOP", "nothere"), ("EXEC",),
    # pub/sub on one connection (no subscriber elsewhere)
    ("PUBLISH", "ch", "m"), ("PUBLISH", "ch"), ("SPUBLISH", "ch", "m"), ("PUBSUB", "NUMSUB", "ch", "x"),
    ("PUBSUB", "NUMSUB"), ("PUBSUB", "NUMPAT"), ("PUBSUB", "CHANNELS"), ("PUBSUB", "CHANNELS", "*"),
    ("PUBSUB", "CHANNELS", "a", "b"), ("PUBSUB", "NUMPAT", "x"), ("PUBSUB", "SHARDCHANNELS"),
    ("PUBSUB", "SHARDNUMSUB", "ch"), ("PUBSUB", "HELP"), ("PUBSUB", "HELP", "x"), ("PUBSUB",), ("PUBSUB", "FOO"),
    ("SUBSCRIBE", "ch", "ch2", "ch"), ("PUBSUB", "NUMSUB", "ch", "ch2"), ("PUBSUB", "CHANNELS"), ("PUBLISH", "x", "y"),
    ("PING",), ("PING", "hi"), ("PING", "a", "b"), ("GET", "k"), ("CLIENT", "ID"), ("NOSUCH",), ("GET",),
    ("SUBSCRIBE",), ("PSUBSCRIBE", "c*", "d?"), ("PUBSUB", "NUMPAT"), ("PUNSUBSCRIBE", "d?"), ("PUNSUBSCRIBE",),
    ("UNSUBSCRIBE", "nothere"), ("UNSUBSCRIBE", "ch2"), ("SET", "k", "v"), ("UNSUBSCRIBE",), ("UNSUBSCRIBE",),
    ("PUNSUBSCRIBE",), ("GET", "k"), ("PUNSUBSCRIBE", "a", "b"), ("SSUBSCRIBE", "sh"), ("SUBSCRIBE", "c"),
    ("UNSUBSCRIBE", "c"), ("GET", "k"), ("SUNSUBSCRIBE",), ("GET", "k"), ("SSUBSCRIBE",),
    ("SUBSCRIBE", "r"), ("MULTI",), ("RESET",), ("GET", "k"), ("MULTI",), ("SUBSCRIBE", "m"), ("PSUBSCRIBE", "p"),
    ("SSUBSCRIBE", "s"), ("EXEC",), ("PING",), ("MULTI",), ("EXEC",), ("PING\x00x",), ("GET\x00", "k"),
    ("UNSUBSCRIBE",), ("RESET",), ("PUBSUB", "NUMPAT"), ("PING\x00",),
    # HELLO, AUTH, RESET, CLIENT
    ("HELLO",), ("HELLO", "2"), ("HELLO", "4"), ("HELLO", "1"), ("HELLO", "x"), ("HELLO", "-1"),
    ("HELLO", "2", "SETNAME", "hn"), ("CLIENT", "GETNAME"), ("HELLO", "2", "SETNAME", "a b"),
    ("HELLO", "2", "AUTH", "default", "pw"), ("HELLO", "2", "AUTH", "bob", "pw"), ("HELLO", "2", "AUTH", "default"),
    ("HELLO", "2", "FOO"), ("HELLO", "2", "SETNAME"), ("HELLO", "2", "setname", "a", "setname", "b"),
    ("CLIENT", "GETNAME"), ("HELLO", "2", "SETNAME", ""),
    ("CLIENT", "GETNAME"), ("AUTH",), ("AUTH", "x"), ("AUTH", "default", "x"), ("AUTH", "bob", "x"), ("AUTH", "a", "b", "c"),
    ("CLIENT", "SETNAME", "rn"), ("MULTI",), ("SET", "k", "v"), ("RESET",), ("EXEC",), ("CLIENT", "GETNAME"),
    ("RESET", "x"), ("WATCH", "k"), ("RESET",), ("UNWATCH",),
    ("CLIENT", "UNBLOCK"), ("CLIENT", "UNBLOCK", "x"), ("CLIENT", "UNBLOCK", "99999"), ("CLIENT", "UNBLOCK", "1", "foo"),
    ("CLIENT", "UNBLOCK", "1", "timeout"), ("CLIENT", "UNBLOCK", "1", "error", "x"), ("CLIENT", "KILL"),
    ("CLIENT", "KILL", "1.2.3.4:5"), ("CLIENT", "KILL", "ADDR", "1.2.3.4:5"), ("CLIENT", "KILL", "ID", "99999"),
    ("CLIENT", "KILL", "ID", "x"), ("CLIENT", "KILL", "ID", "0"), ("CLIENT", "KILL", "FOO", "bar"), ("CLIENT", "KILL", "ID"),
    ("CLIENT", "KILL", "SKIPME", "maybe"), ("CLIENT", "KILL", "TYPE", "pubsub"), ("CLIENT", "KILL", "TYPE", "bogus"),
    ("CLIENT", "KILL", "LADDR", "1.2.3.4:5"), ("CLIENT", "KILL", "USER", "nobody"),
    ("CLIENT", "KILL", "USER", "default", "ID", "99999"), ("CLIENT", "KILL", "ID", "1", "TYPE"),
    ("CLIENT", "LIST", "FOO"), ("CLIENT", "LIST", "TYPE", "bogus"), ("CLIENT", "LIST", "ID", "99998", "99999"),
    ("CLIENT", "LIST", "ID", "x"), ("CLIENT", "LIST", "TYPE", "pubsub"), ("CLIENT", "LIST", "TYPE", "master"),
    ("CLIENT", "INFO", "x"), ("CLIENT", "HELP", "x"),
    ("FLUSHALL",),
]


# COPY, TOUCH, RANDOMKEY, OBJECT, MEMORY, the bit commands
x64, x65 = "x" * 64, "x" * 65
script4 = [
    ("FLUSHALL",), ("RANDOMKEY",), ("SET", "a", "hello"), ("RANDOMKEY",), ("COPY", "a", "b"), ("GET", "b"),
    ("COPY", "a", "b"), ("COPY", "a", "b", "REPLACE"), ("COPY", "a", "a"), ("COPY", "nothere", "a"),
    ("COPY", "nothere", "nothere"), ("COPY", "a", "c", "DB", "0"), ("COPY", "a", "d", "db", "x"),
    ("COPY", "a", "e", "DB", "-1"), ("COPY", "a", "f", "DB", "99"), ("COPY", "a", "g", "FOO"),
    ("COPY", "a", "h", "REPLACE", "REPLACE"), ("COPY", "a", "i", "DB"), ("COPY", "a"),
    ("COPY", "a", "k", "DB", "0", "DB", "0"), ("EXPIRE", "a", "100"), ("COPY", "a", "j"), ("TTL", "j"),
    ("RPUSH", "l", "1", "2", "3"), ("COPY", "l", "l2"), ("LRANGE", "l2", "0", "-1"), ("RPUSH", "l2", "4"),
    ("LRANGE", "l", "0", "-1"), ("SADD", "s", "x", "y"), ("COPY", "s", "s2"), ("SMEMBERS", "s2"),
    ("HSET", "h", "f", "v", "g", "w"), ("COPY", "h", "h2"), ("HGETALL", "h2"),
    ("ZADD", "z", "1", "a", "2.5", "b", "-inf", "c"), ("COPY", "z", "z2"), ("ZRANGE", "z2", "0", "-1", "WITHSCORES"),
    ("COPY", "l", "a"), ("COPY", "l", "a", "REPLACE"), ("TYPE", "a"), ("TTL", "a"), ("COPY", "z", "s", "REPLACE"),
    ("TYPE", "s"),
    ("TOUCH", "a", "b", "nothere", "a"), ("TOUCH",), ("TOUCH", "nothere"),
    ("OBJECT", "ENCODING", "b"), ("OBJECT", "ENCODING", "nothere"), ("OBJECT", "REFCOUNT", "b"),
    ("OBJECT", "IDLETIME", "b"), ("OBJECT", "FREQ", "b"), ("OBJECT", "FREQ", "nothere"), ("OBJECT", "FOO", "b"),
    ("OBJECT", "ENCODING"), ("OBJECT", "ENCODING", "a", "b"), ("OBJECT",), ("OBJECT", "HELP"), ("OBJECT", "HELP", "x"),
    ("OBJECT", "REFCOUNT", "nothere"), ("OBJECT", "IDLETIME", "nothere"),
    ("SET", "i", "123"), ("OBJECT", "ENCODING", "i"), ("OBJECT", "REFCOUNT", "i"), ("SET", "i", "9999"),
    ("OBJECT", "REFCOUNT", "i"), ("SET", "i", "10000"), ("OBJECT", "REFCOUNT", "i"), ("SET", "i", "-1"),
    ("OBJECT", "ENCODING", "i"), ("OBJECT", "REFCOUNT", "i"), ("SET", "i", "007"), ("OBJECT", "ENCODING", "i"),
    ("SET", "i", big), ("OBJECT", "ENCODING", "i"), ("SET", "i", "9223372036854775808"), ("OBJECT", "ENCODING", "i"),
    ("SET", "i", " 1"), ("OBJECT", "ENCODING", "i"), ("SET", "e", "x" * 44), ("OBJECT", "ENCODING", "e"),
    ("SET", "e", "x" * 45), ("OBJECT", "ENCODING", "e"), ("INCR", "n"), ("OBJECT", "ENCODING", "n"),
    ("SET", "f", "1.5"), ("INCRBYFLOAT", "f", "1"), ("OBJECT", "ENCODING", "f"), ("APPEND", "ap", "x"),
    ("OBJECT", "ENCODING", "ap"), ("OBJECT", "ENCODING", "l"),
    ("SADD", "is", *range(512)), ("OBJECT", "ENCODING", "is"), ("SADD", "is", "512"), ("OBJECT", "ENCODING", "is"),
    ("SADD", "is2", "1", "-5"), ("OBJECT", "ENCODING", "is2"), ("SADD", "is2", "a"), ("OBJECT", "ENCODING", "is2"),
    ("SADD", "is3", "01"), ("OBJECT", "ENCODING", "is3"),
    ("HSET", "lh", *[x for i in range(512) for x in ("f%d" % i, "v")]), ("OBJECT", "ENCODING", "lh"),
    ("HSET", "lh", "g", "v"), ("OBJECT", "ENCODING", "lh"), ("HSET", "lh2", "f", x64), ("OBJECT", "ENCODING", "lh2"),
    ("HSET", "lh2", "g", x65), ("OBJECT", "ENCODING", "lh2"), ("HSET", "lh3", x65, "v"), ("OBJECT", "ENCODING", "lh3"),
    ("ZADD", "lz", *[x for i in range(128) for x in (str(i), "m%d" % i)]), ("OBJECT", "ENCODING", "lz"),
    ("ZADD", "lz", "1", "n"), ("OBJECT", "ENCODING", "lz"), ("ZADD", "lz2", "1", x64), ("OBJECT", "ENCODING", "lz2"),
    ("ZADD", "lz2", "1", x65), ("OBJECT", "ENCODING", "lz2"),
    ("MEMORY", "USAGE", "a"), ("MEMORY", "USAGE", "lz"), ("MEMORY", "USAGE", "nothere"),
    ("MEMORY", "USAGE", "a", "SAMPLES", "0"), ("MEMORY", "USAGE", "a", "SAMPLES", "x"),
    ("MEMORY", "USAGE", "a", "SAMPLES", "-1"), ("MEMORY", "USAGE", "a", "FOO"), ("MEMORY", "USAGE", "a", "SAMPLES"),
    ("MEMORY",), ("MEMORY", "FOO"), ("MEMORY", "USAGE"),
    # bits
    ("SETBIT", "bb", "7", "1"), ("GET", "bb"), ("SETBIT", "bb", "7", "0"), ("SETBIT", "bb", "7", "0"),
    ("SETBIT", "bb", "100", "1"), ("STRLEN", "bb"), ("GET", "bb"), ("SETBIT", "bb", "-1", "1"), ("SETBIT", "bb", "x", "1"),
    ("SETBIT", "bb", "1", "2"), ("SETBIT", "bb", "1", "-1"), ("SETBIT", "bb", "1", "x"),
    ("SETBIT", "bb", "4294967296", "0"), ("SETBIT", "l", "0", "1"), ("SETBIT", "l", "x", "1"), ("SETBIT", "bb"),
    ("EXPIRE", "bb", "100"), ("SETBIT", "bb", "1", "1"), ("TTL", "bb"),
    ("GETBIT", "bb", "100"), ("GETBIT", "bb", "101"), ("GETBIT", "bb", "1000000"), ("GETBIT", "nothere", "5"),
    ("GETBIT", "bb", "-1"), ("GETBIT", "bb", "4294967296"), ("GETBIT", "l", "0"), ("GETBIT", "nothere", "x"),
    ("GETBIT", "bb"),
    ("SET", "bs", "foobar"), ("BITCOUNT", "bs"), ("BITCOUNT", "bs", "0", "0"), ("BITCOUNT", "bs", "1", "1"),
    ("BITCOUNT", "bs", "1"), ("BITCOUNT", "bs", "1", "2", "3"), ("BITCOUNT", "bs", "5", "30", "BIT"),
    ("BITCOUNT", "bs", "5", "30", "byte"), ("BITCOUNT", "bs", "5", "30", "FOO"), ("BITCOUNT", "bs", "-2", "-1"),
    ("BITCOUNT", "bs", "3", "1"), ("BITCOUNT", "bs", "x", "1"), ("BITCOUNT", "nothere"), ("BITCOUNT", "nothere", "x", "y"),
    ("BITCOUNT", "bs", "-100", "-50"), ("BITCOUNT", "bs", "0", "-100"), ("BITCOUNT", "bs", "0", big, "BIT"),
    ("BITCOUNT", "bs", "-9223372036854775808", "-1", "BIT"), ("BITCOUNT", "bs", "-5", "-1", "BIT"),
    ("BITCOUNT", "bs", big, big), ("BITCOUNT", "l"), ("BITCOUNT", "bs", "-1", "-2"), ("BITCOUNT",),
    ("SET", "big", b"\xff" * 100), ("BITCOUNT", "big"), ("BITCOUNT", "big", "3", "900", "BIT"),
    ("SETBIT", "zb", "15", "0"), ("BITOP", "NOT", "ff", "zb"), ("BITPOS", "ff", "0"), ("BITPOS", "ff", "1"),
    ("BITPOS", "ff", "0", "0", "-1"), ("BITPOS", "ff", "0", "1"), ("BITPOS", "ff", "0", "3", "BIT"),
    ("BITPOS", "ff", "0", "3", "-1", "BIT"), ("BITPOS", "zb", "1"), ("BITPOS", "zb", "1", "0", "-1"),
    ("BITPOS", "bs", "1"), ("BITPOS", "bs", "0"), ("BITPOS", "bs", "2"), ("BITPOS", "bs", "x"), ("BITPOS", "bs", "1", "2"),
    ("BITPOS", "bs", "1", "2", "-1"), ("BITPOS", "bs", "1", "2", "-1", "BIT"), ("BITPOS", "bs", "1", "7", "15", "bit"),
    ("BITPOS", "bs", "0", "1", "BIT"), ("BITPOS", "bs", "1", "2", "-1", "FOO"), ("BITPOS", "bs", "1", "x", "-1", "FOO"),
    ("BITPOS", "bs", "1", "x"), ("BITPOS", "bs", "1", "1", "x"), ("BITPOS", "bs", "1", "1", "2", "3"),
    ("BITPOS", "nothere", "1"), ("BITPOS", "nothere", "0"), ("BITPOS", "nothere", "0", "x"), ("BITPOS", "nothere", "2"),
    ("BITPOS", "bs", "1", "100"), ("BITPOS", "bs", "1", "3", "1"), ("BITPOS", "bs", "0", "-1", "-1"),
    ("BITPOS", "bs", "1", "1", "2", "3", "4"), ("BITPOS", "l", "1"), ("BITPOS", "l", "3"), ("BITPOS", "bs", "1", "-3", "-1", "BIT"),
    ("BITPOS", "bs", "0", "46", "100", "BIT"), ("BITPOS", "ff", "0", "15", "15", "BIT"), ("BITPOS", "big", "0"),
    ("BITPOS", "big", "0", "0", "-1"), ("BITPOS", "big", "0", "17", "-1", "BIT"), ("BITPOS", "bs"),
    ("SET", "em", ""), ("BITPOS", "em", "0"), ("BITPOS", "em", "1"), ("BITCOUNT", "em"), ("BITPOS", "em", "0", "0"),
    ("BITOP", "AND", "d", "bs", "ff"), ("GET", "d"), ("BITOP", "OR", "d", "bs", "nothere"), ("GET", "d"),
    ("BITOP", "XOR", "d", "bs", "bs"), ("GET", "d"), ("BITOP", "NOT", "d", "bs"), ("GET", "d"),
    ("BITOP", "not", "d", "bs", "ff"), ("BITOP", "FOO", "d", "bs"), ("BITOP", "AND", "d"), ("BITOP", "AND", "d", "l"),
    ("BITOP", "AND", "d", "nothere"), ("EXISTS", "d"), ("BITOP", "AND", "d", "nothere"), ("BITOP", "AND", "d", "nothere", "l"),
    ("BITOP", "AND",), ("BITOP", "OR", "d", "em"), ("BITOP", "xor", "d", "bs", "ff", "big"), ("GET", "d"),
    ("EXPIRE", "d", "100"), ("BITOP", "AND", "d", "bs"), ("TTL", "d"), ("BITOP", "OR", "l", "bs"), ("TYPE", "l"),
    ("FLUSHALL",),
]


# the sorted-set algebra, ZRANGESTORE, ZSCAN, ZRANDMEMBER, HRANDFIELD
script5 = [
    ("FLUSHALL",), ("ZADD", "z1", "1", "a", "2", "b", "3", "c"), ("ZADD", "z2", "10", "b", "20", "c", "30", "d"),
    ("SADD", "s", "c", "d", "e"), ("SET", "str", "x"), ("SADD", "is", "1", "2", "3"),
    ("ZUNIONSTORE", "d", "2", "z1", "z2"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"), ("ZUNION", "2", "z1", "z2", "WITHSCORES"),
    ("ZUNION", "2", "z1", "z2"), ("ZINTER", "2", "z1", "z2", "WITHSCORES"), ("ZINTER", "2", "z1", "z2"),
    ("ZDIFF", "2", "z1", "z2", "WITHSCORES"), ("ZDIFF", "2", "z2", "z1"), ("ZUNION", "2", "z1", "s", "WITHSCORES"),
    ("ZINTER", "3", "z1", "z2", "s", "WITHSCORES"), ("ZDIFF", "2", "s", "z1", "WITHSCORES"), ("ZUNION", "2", "is", "s", "WITHSCORES"),
    ("ZUNION", "2", "z1", "z2", "WEIGHTS", "2", "0.5", "WITHSCORES"), ("ZUNION", "2", "z1", "z2", "AGGREGATE", "MIN", "WITHSCORES"),
    ("ZUNION", "2", "z1", "z2", "aggregate", "max", "WITHSCORES"), ("ZINTER", "2", "z1", "z2", "WEIGHTS", "-1", "1", "AGGREGATE", "MIN", "WITHSCORES"),
    ("ZINTER", "2", "z1", "z2", "AGGREGATE", "MAX", "WEIGHTS", "1", "2", "WITHSCORES"), ("ZUNION", "0", "z1"), ("ZUNION", "-1", "z1"),
    ("ZUNION", "x", "z1"), ("ZUNION", "3", "z1", "z2"), ("ZUNION", "2", "z1", "str"), ("ZUNION", "2", "str", "z1", "FOO"),
    ("ZUNION", "2", "z1", "nothere", "WITHSCORES"), ("ZUNION", "2", "z1", "z2", "WEIGHTS", "1"), ("ZUNION", "2", "z1", "z2", "WEIGHTS", "1", "x"),
    ("ZUNION", "2", "z1", "z2", "AGGREGATE", "foo"), ("ZUNION", "2", "z1", "z2", "AGGREGATE"), ("ZUNION", "2", "z1", "z2", "FOO"),
    ("ZUNIONSTORE", "d", "2", "z1", "z2", "WITHSCORES"), ("ZDIFF", "2", "z1", "z2", "WEIGHTS", "1", "2"),
    ("ZDIFF", "2", "z1", "z2", "AGGREGATE", "SUM"), ("ZDIFFSTORE", "d", "1", "nothere"), ("EXISTS", "d"),
    ("ZINTERCARD", "2", "z1", "z2"), ("ZINTERCARD", "2", "z1", "z2", "LIMIT", "1"), ("ZINTERCARD", "2", "z1", "z2", "LIMIT", "0"),
    ("ZINTERCARD", "0", "z1"), ("ZINTERCARD", "2", "z1", "z2", "WITHSCORES"), ("ZINTERCARD", "2", "z1", "z2", "LIMIT", "-1"),
    ("ZINTERCARD", "2", "z1", "z2", "LIMIT", "x"), ("ZINTERCARD", "1", "str"), ("ZINTERCARD", "2", "z1", "s"),
    ("ZINTERCARD", "2", "z1", "z2", "WEIGHTS", "1", "1"), ("ZINTERCARD", "1", "nothere"),
    ("ZINTERSTORE", "d", "2", "z1", "s"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"), ("ZINTERSTORE", "d", "2", "z1", "nothere"),
    ("EXISTS", "d"), ("ZINTERSTORE", "d", "2", "z1", "nothere"), ("ZUNIONSTORE",), ("ZUNION",), ("ZUNION", "1"),
    ("ZUNION", "9999999999999999999", "z1"), ("ZDIFFSTORE", "d", "0", "z1"), ("ZINTERSTORE", "d", "0", "z1"),
    ("ZUNION", "2", "z1", "z2", "WEIGHTS", "inf", "-inf", "WITHSCORES"), ("ZADD", "zi", "1", "a"),
    ("ZUNION", "2", "zi", "zi", "WEIGHTS", "inf", "-inf", "WITHSCORES"), ("ZINTER", "2", "zi", "zi", "WEIGHTS", "inf", "-inf", "WITHSCORES"),
    ("ZINTER", "2", "zi", "zi", "WEIGHTS", "inf", "-inf", "AGGREGATE", "MAX", "WITHSCORES"),
    ("ZUNION", "1", "z1", "WITHSCORES", "WITHSCORES"), ("ZUNION", "1", "z1", "WEIGHTS", "nan"),
    ("ZUNION", "1", "z1", "WEIGHTS", "0", "WITHSCORES"), ("ZUNION", "1", "z1", "WEIGHTS", "-1", "WITHSCORES"),
    ("ZUNIONSTORE", "neg", "1", "z1", "WEIGHTS", "-0"), ("ZRANGE", "neg", "0", "-1", "WITHSCORES"),
    ("ZUNION", "1", "zi", "WEIGHTS", "-0", "WITHSCORES"), ("ZINTER", "2", "z1", "z1", "WITHSCORES"),
    ("ZDIFF", "2", "z1", "z1"), ("ZDIFFSTORE", "z1c", "2", "z1", "zi"), ("ZRANGE", "z1c", "0", "-1", "WITHSCORES"),
    ("SET", "d", "str"), ("EXPIRE", "d", "100"), ("ZUNIONSTORE", "d", "1", "z1"), ("TYPE", "d"), ("TTL", "d"),
    ("ZUNIONSTORE", "z1", "2", "z1", "z2"), ("ZRANGE", "z1", "0", "-1", "WITHSCORES"), ("ZINTERSTORE", "z1", "1", "str"),
    ("ZADD", "big1", *[x for i in range(300) for x in (str(i % 17), "m%d" % i)]),
    ("ZADD", "big2", *[x for i in range(0, 300, 2) for x in (str(i % 5), "m%d" % i)]),
    ("ZUNION", "2", "big1", "big2", "WITHSCORES"), ("ZINTER", "2", "big1", "big2", "WEIGHTS", "0.1", "0.7", "WITHSCORES"),
    ("ZDIFF", "2", "big1", "big2", "WITHSCORES"), ("ZINTERCARD", "2", "big1", "big2", "LIMIT", "10"),
    ("ZUNIONSTORE", "bigu", "2", "big1", "big2", "AGGREGATE", "MAX"), ("ZRANGE", "bigu", "0", "-1", "WITHSCORES"),
    # ZRANGESTORE
    ("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d"), ("ZRANGESTORE", "d", "z", "0", "-1"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
    ("ZRANGESTORE", "d", "z", "1", "2", "REV"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
    ("ZRANGESTORE", "d", "z", "(1", "3", "BYSCORE", "LIMIT", "1", "1"), ("ZRANGE", "d", "0", "-1", "WITHSCORES"),
    ("ZRANGESTORE", "d", "z", "[a", "[c", "BYLEX"), ("ZRANGESTORE", "d", "z", "+", "-", "BYLEX", "REV", "LIMIT", "0", "2"),
    ("ZRANGE", "d", "0", "-1"), ("ZRANGESTORE", "d", "z", "0", "-1", "WITHSCORES"), ("ZRANGESTORE", "d", "z", "5", "10"),
    ("EXISTS", "d"), ("ZRANGESTORE", "d", "z", "5", "10"), ("ZRANGESTORE", "d", "nothere", "0", "-1"),
    ("ZRANGESTORE", "d", "str", "0", "-1"), ("ZRANGESTORE", "d", "z", "0"), ("ZRANGESTORE", "d", "z", "x", "1"),
    ("ZRANGESTORE", "d", "z", "0", "1", "LIMIT", "0", "1"), ("ZRANGESTORE", "d", "z", "a", "b", "BYSCORE"),
    ("ZRANGESTORE", "d", "z", "a", "b", "BYLEX"), ("ZRANGESTORE", "d", "z", "0", "-1", "FOO"),
    ("ZRANGESTORE", "z", "z", "1", "2"), ("ZRANGE", "z", "0", "-1", "WITHSCORES"), ("SET", "d", "x"),
    ("ZRANGESTORE", "d", "z", "0", "0"), ("TYPE", "d"),
    # ZSCAN
    ("ZSCAN", "z1", "0"), ("ZSCAN", "z1", "0", "MATCH", "[ab]"), ("ZSCAN", "bigu", "0"), ("ZSCAN", "bigu", "0", "COUNT", "7"),
    ("ZSCAN", "bigu", "0", "MATCH", "m1*"), ("ZSCAN", "z1", "x"), ("ZSCAN", "str", "0"), ("ZSCAN", "nothere", "0"),
    ("ZSCAN", "z1", "0", "COUNT", "0"), ("ZSCAN", "z1", "0", "FOO"), ("ZSCAN", "z1", "0", "MATCH"), ("ZSCAN", "z1"),
    ("ZSCAN", "nothere", "0", "FOO"), ("ZSCAN", "nothere", "x"), ("SSCAN", "nothere", "0", "FOO"),
    ("HSCAN", "nothere", "0", "COUNT", "0"), ("SSCAN", "str", "0", "FOO"),
    ("ZADD", "zf", "1e17", "a", "0.1", "b", "-0", "c", "123456789012345678", "d", "-inf", "e", "1e-5", "f"),
    ("ZSCAN", "zf", "0"), ("ZADD", "zf", *[x for i in range(130) for x in ("5", "f%d" % i)]), ("ZSCAN", "zf", "0", "COUNT", "1000"),
    # ZRANDMEMBER, HRANDFIELD
    ("ZRANDMEMBER", "nothere"), ("ZRANDMEMBER", "nothere", "5"), ("ZRANDMEMBER", "nothere", "5", "WITHSCORES"),
    ("ZRANDMEMBER", "z", "0"), ("ZRANDMEMBER", "zi"), ("ZRANDMEMBER", "zi", "1"), ("ZRANDMEMBER", "z", "x"),
    ("ZRANDMEMBER", "z", "1", "FOO"), ("ZRANDMEMBER", "z", "1", "WITHSCORES", "x"), ("ZRANDMEMBER", "z", "-9223372036854775808"),
    ("ZRANDMEMBER", "z", "-9223372036854775807", "WITHSCORES"), ("ZRANDMEMBER", "z", "4611686018427387904", "WITHSCORES"),
    ("ZRANDMEMBER", "z", "10", "WITHSCORES"), ("ZRANDMEMBER", "z", "10"), ("ZRANDMEMBER", "z", "1", "withscores"),
    ("ZRANDMEMBER", "z", "-5", "WITHSCORES"), ("ZRANDMEMBER", "z", "-5"), ("ZRANDMEMBER", "bigu", "20"),
    ("ZRANDMEMBER", "bigu", "20", "WITHSCORES"), ("ZRANDMEMBER", "bigu", "-20"), ("ZRANDMEMBER", "z"), ("ZRANDMEMBER", "str"),
    ("ZRANDMEMBER", "str", "1"), ("ZRANDMEMBER",),
    ("HSET", "h", "f", "v", "g", "w", "k", "x"), ("HRANDFIELD", "h"), ("HRANDFIELD", "h", "-3"), ("HRANDFIELD", "h", "5", "WITHVALUES"),
    ("HRANDFIELD", "h", "2", "WITHVALUES"), ("HRANDFIELD", "h", "-7", "withvalues"), ("HRANDFIELD", "h", "1", "WITHSCORES"),
    ("HRANDFIELD", "nothere"), ("HRANDFIELD", "nothere", "1"), ("HRANDFIELD", "str"), ("HRANDFIELD", "str", "1"),
    ("HRANDFIELD", "h", "-9223372036854775808"), ("HRANDFIELD", "h", "-4611686018427387904", "WITHVALUES"),
    ("HRANDFIELD", "h", "x"), ("HRANDFIELD", "h", "1", "2", "3"), ("HRANDFIELD", "h", "0"), ("HRANDFIELD", "bighash", "3"),
    ("HSET", "bh", *[x for i in range(600) for x in ("f%d" % i, "v%d" % i)]), ("HRANDFIELD", "bh", "1000", "WITHVALUES"),
    ("HRANDFIELD", "bh", "50", "WITHVALUES"), ("HRANDFIELD", "bh", "-50"), ("HRANDFIELD",),
    ("FLUSHALL",),
]


# SORT, SORT_RO (sets sorted only where their order cannot show: Redis's
# and kv-server's iteration orders differ)
script6 = [
    ("FLUSHALL",), ("RPUSH", "l", "3", "1", "2", "10", "-1"), ("SORT", "l"), ("SORT", "l", "DESC"), ("SORT", "l", "ALPHA"),
    ("SORT", "l", "LIMIT", "1", "2"), ("SORT", "l", "LIMIT", "-5", "2"), ("SORT", "l", "LIMIT", "10", "2"),
    ("SORT", "l", "LIMIT", "0", "-1"), ("SORT", "l", "LIMIT", "x", "1"), ("SORT", "l", "LIMIT", "1", "x"),
    ("SORT", "l", "LIMIT", "1"), ("SORT", "l", "FOO"), ("SORT", "l", "LIMIT", "4", "0"), ("SORT", "l", "LIMIT", "5", "1"),
    ("SORT", "l", "LIMIT", "1", "9223372036854775807"), ("SORT", "l", "ASC", "DESC", "ASC"), ("SORT", "l", "alpha", "desc"),
    ("RPUSH", "la", "b", "a", "c", "B", ""), ("SORT", "la"), ("SORT", "la", "ALPHA"), ("SORT", "la", "ALPHA", "DESC"),
    ("MSET", "w_3", "30", "w_1", "10", "w_2", "5", "w_10", "1", "w_b", "2", "w_a", "1"), ("SORT", "l", "BY", "w_*"),
    ("SORT", "l", "BY", "w_*", "GET", "#", "GET", "w_*"), ("SORT", "l", "BY", "nosort"), ("SORT", "l", "BY", "nosort", "DESC"),
    ("SORT", "l", "BY", "nosort", "DESC", "LIMIT", "1", "2"), ("SORT", "l", "BY", "nosort", "LIMIT", "3", "10"),
    ("SORT", "l", "GET", "nothere"), ("SORT", "l", "GET", "#", "GET", "w_*->f"), ("HSET", "h_1", "f", "x", "g", "7"),
    ("HSET", "h_3", "f", "y", "g", "-2"), ("SORT", "l", "BY", "h_*->f", "ALPHA", "GET", "h_*->f"),
    ("SORT", "l", "BY", "h_*->g", "GET", "#", "GET", "h_*->g"), ("SORT", "l", "BY", "h_*->f", "GET", "#"),
    ("SORT", "l", "BY", "h_*->", "GET", "#"), ("SORT", "l", "GET", "h_*->"), ("SORT", "l", "GET", "*"), ("SORT", "l", "GET", "##"),
    ("SORT", "l", "BY", "w_*", "DESC", "LIMIT", "0", "3", "GET", "#"), ("SORT", "l", "BY", "w_*", "LIMIT", "1", "2"),
    ("SORT", "la", "BY", "w_*", "ALPHA"), ("SORT", "la", "BY", "w_*"), ("SORT", "la", "BY", "w_*", "ALPHA", "DESC"),
    ("SET", "x_*_a", "1"), ("SORT", "la", "BY", "x_*_*", "GET", "x_*_*"),
    ("SORT", "l", "STORE", "dst"), ("LRANGE", "dst", "0", "-1"), ("SORT", "nothere"), ("SORT", "nothere", "STORE", "dst"),
    ("EXISTS", "dst"), ("SORT", "nothere", "STORE", "dst"), ("SET", "str", "x"), ("SORT", "str"), ("SORT", "str", "FOO"),
    ("SORT", "l", "BY", "w_*", "STORE", "dst2", "GET", "#", "GET", "w_*"), ("LRANGE", "dst2", "0", "-1"),
    ("SORT", "l", "LIMIT", "10", "1", "STORE", "dst2"), ("EXISTS", "dst2"), ("SET", "dst3", "x"), ("EXPIRE", "dst3", "100"),
    ("SORT", "l", "STORE", "dst3"), ("TYPE", "dst3"), ("TTL", "dst3"), ("SORT", "l", "STORE", "l"), ("LRANGE", "l", "0", "-1"),
    ("SORT_RO", "l", "STORE", "x"), ("SORT_RO", "l", "DESC"), ("SORT_RO", "l", "BY", "w_*", "GET", "#"), ("SORT_RO", "str"),
    ("SORT",), ("SORT_RO",), ("SORT", "l", "STORE"), ("SORT", "l", "BY"), ("SORT", "l", "GET"),
    ("SADD", "s", "c", "a", "b"), ("SORT", "s", "BY", "nosort", "STORE", "d3"), ("LRANGE", "d3", "0", "-1"),
    ("SORT", "s", "ALPHA"), ("SORT", "s", "ALPHA", "DESC", "LIMIT", "1", "5"), ("SORT", "s"), ("SORT", "s", "BY", "w_*"),
    ("SADD", "ns", "5", "-3", "1.5", "10"), ("SORT", "ns"), ("SORT", "ns", "DESC"), ("SORT", "ns", "BY", "w_*", "GET", "#"),
    ("ZADD", "z", "3", "a", "1", "b", "2", "c"), ("SORT", "z", "BY", "nosort"), ("SORT", "z", "BY", "nosort", "DESC", "LIMIT", "0", "2"),
    ("SORT", "z", "ALPHA"), ("SORT", "z", "BY", "w_*"), ("SORT", "z", "BY", "nosort", "STORE", "d4"), ("LRANGE", "d4", "0", "-1"),
    ("RPUSH", "bad", "1", "x"), ("SORT", "bad"), ("SORT", "bad", "STORE", "bd"), ("EXISTS", "bd"), ("SORT", "bad", "ALPHA"),
    ("RPUSH", "e", "", " 5", "0x10", "inf", "-inf", "1e3"), ("SORT", "e"), ("SORT", "e", "DESC"), ("RPUSH", "e2", "nan"),
    ("SORT", "e2"), ("RPUSH", "e3", "1e-400"), ("SORT", "e3"), ("RPUSH", "dup", "2", "1", "2", "1"), ("SORT", "dup"),
    ("RPUSH", "big", *[str((i * 7919) % 1000) for i in range(500)]), ("SORT", "big"), ("SORT", "big", "ALPHA", "LIMIT", "100", "10"),
    ("SORT", "big", "DESC", "LIMIT", "490", "100"), ("SORT", "big", "BY", "nosort", "LIMIT", "250", "3"),
    ("FLUSHALL",),
]


# the server's and the connection's commands: CONFIG SET, SLOWLOG, WAIT,
# ROLE, SWAPDB, LOLWUT, CLIENT LIST's fields
script7 = [
    ("CONFIG", "SET"), ("CONFIG", "SET", "foo"), ("CONFIG", "SET", "foo", "bar"), ("CONFIG", "SET", "save"),
    ("CONFIG", "SET", "save", "900 1"), ("CONFIG", "GET", "save"), ("CONFIG", "SET", "save", "900"),
    ("CONFIG", "SET", "save", "x 1"), ("CONFIG", "SET", "save", "900 1 300"), ("CONFIG", "SET", "save", "3600 1 300 100 60 10000"),
    ("CONFIG", "GET", "save"), ("CONFIG", "SET", "save", ""), ("CONFIG", "GET", "save"),
    ("CONFIG", "SET", "save", "900 1", "save", "300 10"), ("CONFIG", "SET", "SAVE", "", "save", ""),
    ("CONFIG", "SET", "appendonly", "maybe"), ("CONFIG", "SET", "appendonly", "no"), ("CONFIG", "SET", "appendonly", "NO"),
    ("CONFIG", "SET", "maxmemory-policy", "foo"), ("CONFIG", "SET", "maxmemory-policy", "noeviction"),
    ("CONFIG", "SET", "slowlog-log-slower-than", "x"), ("CONFIG", "SET", "slowlog-log-slower-than", "-2"),
    ("CONFIG", "SET", "slowlog-max-len", "-1"), ("CONFIG", "SET", "slowlog-max-len", "10", "foo", "1"),
    ("CONFIG", "SET", "maxclients", "0"), ("CONFIG", "SET", "maxclients", "x"), ("CONFIG", "SET", "save", "900 1", "x"),
    ("CONFIG", "SET", "slowlog-max-len", "5", "slowlog-log-slower-than", "20000"), ("CONFIG", "GET", "slowlog*"),
    ("CONFIG", "SET", "slowlog-max-len", "x", "slowlog-log-slower-than", "30000"), ("CONFIG", "GET", "slowlog-log-slower-than"),
    ("CONFIG", "SET", "slowlog-max-len", "128", "slowlog-log-slower-than", "10000"), ("CONFIG", "REWRITE"),
    ("CONFIG", "REWRITE", "x"), ("CONFIG", "HELP"), ("CONFIG", "HELP", "x"), ("CONFIG", "RESETSTAT"),
    ("CONFIG", "SET", "Slowlog-Max-Len", "128"),
    # the slow log, every command in it
    ("CONFIG", "SET", "slowlog-log-slower-than", "0"), ("SLOWLOG", "RESET"), ("SET", "a", "b"), ("GET", "a"),
    ("SLOWLOG", "GET", "2"), ("SLOWLOG", "LEN"), ("AUTH", "x"), ("AUTH", "bob", "pw"), ("HELLO", "2", "AUTH", "default", "pw"),
    ("CLIENT", "SETNAME", "slow"), ("ECHO", "x" * 200), ("RPUSH", "l", *range(40)), ("SLOWLOG", "GET", "6"),
    ("MULTI",), ("INCR", "n"), ("GET", "n"), ("EXEC",), ("SLOWLOG", "GET", "3"), ("SLOWLOG", "GET", "-1"),
    ("SLOWLOG", "GET", "0"), ("SLOWLOG", "GET", "-2"), ("SLOWLOG", "GET", "x"), ("SLOWLOG", "GET", "1", "2"),
    ("SLOWLOG", "LEN", "x"), ("SLOWLOG",), ("SLOWLOG", "FOO"), ("SLOWLOG", "HELP"), ("SLOWLOG", "RESET", "x"),
    ("CONFIG", "SET", "slowlog-max-len", "2"), ("SLOWLOG", "LEN"), ("CONFIG", "SET", "slowlog-log-slower-than", "-1"),
    ("SET", "a", "c"), ("SLOWLOG", "LEN"), ("CONFIG", "SET", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128"),
    ("SLOWLOG", "RESET"), ("SLOWLOG", "LEN"), ("CLIENT", "SETNAME", ""),
    # ROLE, SWAPDB, WAIT, LOLWUT, CLIENT LIST
    ("ROLE",), ("ROLE", "x"), ("SWAPDB",), ("SWAPDB", "0"), ("SWAPDB", "0", "0"), ("SWAPDB", "x", "1"), ("SWAPDB", "0", "x"),
    ("SWAPDB", "-1", "0"), ("SWAPDB", "16", "x"), ("SWAPDB", "1.5", "0"), ("SWAPDB", "2147483648", "0"),
    ("WAIT",), ("WAIT", "0"), ("WAIT", "0", "0"), ("WAIT", "x", "0"), ("WAIT", "0", "x"), ("WAIT", "0", "-1"), ("WAIT", "-1", "10"),
    ("WAIT", "1", "10"), ("WAIT", "5", "20"), ("WAIT", "1", "1.5"), ("MULTI",), ("WAIT", "1", "0"), ("EXEC",),
    ("LOLWUT",), ("LOLWUT", "x"), ("LOLWUT", "VERSION", "x"), ("LOLWUT", "VERSION", "7"),
    ("CLIENT", "LIST"), ("CLIENT", "INFO"), ("CLIENT", "LIST", "TYPE", "normal"), ("CLIENT", "LIST", "ID", "999999"),
    ("FLUSHALL",),
]


tx_script = [
    (0, ("MULTI",)), (0, ("SET", "t", "1")), (0, ("INCR", "t")), (0, ("LPUSH", "t", "x")), (0, ("GET", "t")),
    (0, ("GETEX", "t", "EX", "100")), (0, ("RPUSH", "tl", "a", "b")), (0, ("LMOVE", "tl", "tl2", "LEFT", "LEFT")),
    (0, ("SADD", "ts", "a", "b")), (0, ("SMEMBERS", "ts")), (0, ("ZADD", "tz", "1", "a")), (0, ("EXEC",)),
    (0, ("TTL", "t")), (0, ("MULTI",)), (0, ("EXEC",)), (0, ("MULTI",)), (0, ("MULTI",)), (0, ("SET", "t", "2")),
    (0, ("EXEC",)), (0, ("GET", "t")), (0, ("EXEC",)), (0, ("DISCARD",)),
    # refused while queuing: EXECABORT, nothing runs
    (0, ("MULTI",)), (0, ("SET", "t", "3")), (0, ("NOSUCHCOMMAND", "a")), (0, ("SET", "t", "4")), (0, ("EXEC",)),
    (0, ("GET", "t")), (0, ("MULTI",)), (0, ("SET", "t")), (0, ("EXEC",)), (0, ("EXEC",)),
    (0, ("MULTI",)), (0, ("SAVE",)), (0, ("SET", "t", "5")), (0, ("EXEC",)), (0, ("MULTI",)),
    (0, ("SHUTDOWN", "NOSAVE")), (0, ("EXEC",)), (0, ("MULTI",)), (0, ("CLIENT", "NOSUCH")), (0, ("EXEC",)),
    (0, ("MULTI",)), (0, ("CLIENT", "GETNAME", "x")), (0, ("EXEC",)), (0, ("MULTI",)), (0, ("DISCARD", "x")),
    (0, ("EXEC",)), (0, ("MULTI",)), (0, ("MULTI", "x")), (0, ("EXEC",)), (0, ("MULTI",)), (0, ("WATCH",)),
    (0, ("EXEC",)), (0, ("MULTI",)), (0, ("SET", "t", "6")), (0, ("EXEC", "x")), (0, ("EXEC",)),
    (0, ("GET", "t")), (0, ("EXEC", "x")), (0, ("DISCARD", "x")), (0, ("MULTI", "x")), (0, ("UNWATCH", "x")),
    # refused at once but not queued, the transaction goes on
    (0, ("MULTI",)), (0, ("WATCH", "t")), (0, ("MULTI",)), (0, ("SET", "t", "7")), (0, ("EXEC",)), (0, ("GET", "t")),
    # errors as the queue runs: in EXEC's reply, the rest done
    (0, ("SET", "str", "x")), (0, ("MULTI",)), (0, ("INCR", "str")), (0, ("LPUSH", "str", "1")),
    (0, ("SET", "str2", "y")), (0, ("PING", "a", "b")), (0, ("LSET", "nothere", "0", "x")),
    (0, ("GETEX", "str", "EX", "x")), (0, ("ZADD", "tz", "x", "a")), (0, ("SELECT", "0")),
    (0, ("CLIENT", "SETNAME", "in-tx")), (0, ("CLIENT", "GETNAME")), (0, ("UNWATCH",)), (0, ("EXEC",)),
    (0, ("GET", "str2")), (0, ("CLIENT", "GETNAME")),
    # DISCARD
    (0, ("MULTI",)), (0, ("SET", "t", "8")), (0, ("DISCARD",)), (0, ("GET", "t")), (0, ("DISCARD",)),
    # WATCH: another client's write makes EXEC fail
    (0, ("SET", "w", "1")), (0, ("WATCH", "w")), (1, ("SET", "w", "2")), (0, ("MULTI",)), (0, ("INCR", "w")),
    (0, ("EXEC",)), (0, ("GET", "w")),
    (0, ("WATCH", "w")), (1, ("SET", "w", "2")), (0, ("MULTI",)), (0, ("INCR", "w")), (0, ("EXEC",)),
    # ... made in MULTI, before EXEC
    (0, ("WATCH", "w")), (0, ("MULTI",)), (0, ("INCR", "w")), (1, ("INCR", "w")), (0, ("EXEC",)), (0, ("GET", "w")),
    # a key not changed: EXEC runs
    (0, ("WATCH", "w")), (1, ("GET", "w")), (1, ("SET", "other", "x")), (0, ("MULTI",)), (0, ("INCR", "w")),
    (0, ("EXEC",)), (0, ("GET", "w")), (0, ("EXEC",)),
    # its own write counts too; so do several keys, one changed
    (0, ("WATCH", "w")), (0, ("SET", "w", "9")), (0, ("MULTI",)), (0, ("INCR", "w")), (0, ("EXEC",)),
    (0, ("WATCH", "w", "w2", "w3")), (1, ("LPUSH", "w3", "a")), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    # changes that change nothing, and ones that do
    (0, ("SADD", "ws", "a")), (0, ("WATCH", "ws", "nokey")), (1, ("SADD", "ws", "a")), (1, ("DEL", "nokey")),
    (1, ("SREM", "ws", "zz")), (1, ("PERSIST", "ws")), (1, ("EXPIRE", "nokey", "10")), (0, ("MULTI",)),
    (0, ("PING",)), (0, ("EXEC",)),
    (0, ("WATCH", "nokey")), (1, ("SET", "nokey", "x")), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("WATCH", "ws")), (1, ("EXPIRE", "ws", "100")), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("WATCH", "ws")), (1, ("SMOVE", "ws", "ws2", "a")), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("WATCH", "ws2")), (1, ("SINTERSTORE", "ws2", "ws2")), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("RPUSH", "wl", "a", "b")), (0, ("WATCH", "wl")), (1, ("LTRIM", "wl", "0", "-1")), (0, ("MULTI",)),
    (0, ("PING",)), (0, ("EXEC",)),
    (0, ("WATCH", "wl")), (1, ("LREM", "wl", "0", "zz")), (1, ("LINSERT", "wl", "BEFORE", "zz", "x")),
    (1, ("LPOS", "wl", "a")), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("WATCH", "wl")), (1, ("LMOVE", "wl", "wl", "LEFT", "LEFT")), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("WATCH", "wl")), (1, ("LSET", "wl", "0", "a")), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("ZADD", "wz", "0", "a", "0", "b")), (0, ("WATCH", "wz")), (1, ("ZREMRANGEBYLEX", "wz", "(b", "+")),
    (1, ("ZADD", "wz", "XX", "1", "zz")), (1, ("ZREMRANGEBYSCORE", "wz", "5", "6")), (0, ("MULTI",)),
    (0, ("PING",)), (0, ("EXEC",)),
    (0, ("WATCH", "wz")), (1, ("ZREMRANGEBYRANK", "wz", "0", "0")), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("SET", "wg", "v")), (0, ("WATCH", "wg")), (1, ("GETEX", "wg")), (1, ("GETEX", "wg", "PERSIST")),
    (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("WATCH", "wg")), (1, ("GETEX", "wg", "EX", "100")), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    # another client's transaction changes it
    (0, ("WATCH", "w")), (1, ("MULTI",)), (1, ("INCR", "w")), (1, ("EXEC",)), (0, ("MULTI",)), (0, ("PING",)),
    (0, ("EXEC",)),
    # UNWATCH, DISCARD and a failed EXEC forget the keys
    (0, ("WATCH", "w")), (0, ("UNWATCH",)), (1, ("INCR", "w")), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("WATCH", "w")), (0, ("MULTI",)), (0, ("DISCARD",)), (1, ("INCR", "w")), (0, ("MULTI",)), (0, ("PING",)),
    (0, ("EXEC",)),
    (0, ("WATCH", "w")), (1, ("INCR", "w")), (0, ("MULTI",)), (0, ("EXEC",)), (1, ("INCR", "w")), (0, ("MULTI",)),
    (0, ("PING",)), (0, ("EXEC",)),
    # both clients watching the same key
    (0, ("WATCH", "w")), (1, ("WATCH", "w")), (1, ("MULTI",)), (1, ("INCR", "w")), (1, ("EXEC",)),
    (0, ("MULTI",)), (0, ("INCR", "w")), (0, ("EXEC",)), (0, ("GET", "w")),
    # a watched key that expires: EXEC fails; one already expired when
    # watched is a missing key, and its deletion no change
    # (watched before it expires, with half a second to spare: the host may
    # stall the test between the two commands)
    (0, ("SET", "we", "1", "PX", "500")), (0, ("WATCH", "we")), ("sleep", 0.65), (0, ("MULTI",)), (0, ("PING",)),
    (0, ("EXEC",)),
    (0, ("SET", "we", "1", "PX", "500")), (0, ("WATCH", "we")), ("sleep", 0.65), (1, ("GET", "we")),
    (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("SET", "we", "1", "PX", "50")), ("sleep", 0.15), (0, ("WATCH", "we")), (0, ("MULTI",)), (0, ("PING",)),
    (0, ("EXEC",)),
    (0, ("SET", "we", "1", "PX", "50")), ("sleep", 0.15), (0, ("WATCH", "we")), (1, ("SET", "we", "2")),
    (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("SET", "we", "1", "EX", "100")), (0, ("WATCH", "we")), (1, ("PEXPIRE", "we", "1")), ("sleep", 0.05),
    (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    # ... the same with nothing between that would delete the key (six
    # SUNIONSTOREs of 300,000 members take the 50 ms it needs to expire,
    # about twice over on a fast host; 50 ms, so that a stall of the host
    # between the SET and the WATCH sent with it does not expire it first):
    # EXEC sees it expired; watched once expired, it is still missing to EXEC
    (0, ("SADD", "burn", *range(300000))),
    ("pipe", [("SET", "we", "1", "PX", "50"), ("WATCH", "we")] +
     [("SUNIONSTORE", "burn2", "burn")] * 6 + [("MULTI",), ("PING",), ("EXEC",)]),
    ("pipe", [("SET", "we", "1", "PX", "50")] + [("SUNIONSTORE", "burn2", "burn")] * 6 +
     [("WATCH", "we"), ("MULTI",), ("PING",), ("EXEC",)]),
    ("pipe", [("SET", "we", "1", "PX", "50")] + [("SUNIONSTORE", "burn2", "burn")] * 6 +
     [("WATCH", "we"), ("GET", "we"), ("MULTI",), ("PING",), ("EXEC",)]),
    (0, ("DEL", "burn", "burn2")),
    # FLUSHALL changes the watched keys that exist (the expired key gone
    # first: FLUSHALL counts the keys it deletes, and whether active expiry
    # already took it is each server's timing)
    (0, ("DEL", "we")), (0, ("WATCH", "nokey2")), (1, ("FLUSHALL",)), (0, ("MULTI",)), (0, ("PING",)), (0, ("EXEC",)),
    (0, ("SET", "fk", "1")), (0, ("WATCH", "fk")), (1, ("FLUSHALL",)), (0, ("MULTI",)), (0, ("PING",)),
    (0, ("EXEC",)),
    (0, ("SET", "fk", "1")), (0, ("WATCH", "fk", "nokey2")), (0, ("MULTI",)), (0, ("FLUSHALL",)),
    (0, ("SET", "fk", "2")), (0, ("EXEC",)), (0, ("GET", "fk")),
    # SAVE and SHUTDOWN are refused in MULTI; BGSAVE is scheduled after EXEC
    ("saves", None), (0, ("MULTI",)), (0, ("BGSAVE",)), (0, ("EXEC",)), ("saved", None),
]


def random_commands(rng, n):
    """n commands over keys k0..k6; four in five use a key of the command's own
    type (k0, k1 strings, k2 a list, k3 a set, k4 a hash, k5 a sorted set).
    k7 is a sorted set whose scores are all 0, for lexicographic ranges
    (with scores that differ their result is unspecified)."""
    own = {"s": ["k0", "k1"], "l": ["k2"], "S": ["k3"], "h": ["k4"], "z": ["k5"], "Z": ["k7"], "*": None}
    # one value in ten is one of the malformed or extreme ones
    vals = ["0", "1", "-5", "10", "3.5", "abc", "", "1e3", "xyz" * 5]
    ints = ["0", "1", "2", "-1", "-2", "5", "3", "-3", "10"]
    floats = ["0", "1", "-1", "1.5", "-2.5", "inf", "-inf", "(1", "(2.5", "0.1", "7", "-0", "2"]
    odd = ["x", "", big, "-" + big, " 7", "007", "nan", "1e308", "99999999999999999999", "-0"]
    pick = lambda good: rng.choice(odd) if rng.random() < 0.1 else rng.choice(good)
    v = lambda: pick(vals)
    i = lambda: pick(ints)
    f = lambda: pick(floats)
    m = lambda: "m%d" % rng.randrange(40)
    lm = lambda: "m%d" % rng.randrange(8)  # list elements: few, so that they repeat
    key = lambda: "k%d" % rng.randrange(7)
    rc = lambda: rng.choice(["0", "1", "2", "-1", "-3", "5", "10", "-10", "x"])  # (a huge one: a huge reply)
    end = lambda: rng.choice(["LEFT", "RIGHT", "left", "right"] + ["UP"] * (rng.random() < 0.05))
    lex = lambda: pick(["-", "+", "[m1", "(m1", "[m2", "(m25", "[m3", "[m", "(m39", "[", "[m10"]
                       if rng.random() > 0.1 else ["x", "", "+x", "-1"])
    gens = {
        "s": [lambda k: ("SET", k, v()), lambda k: ("SET", k, v(), rng.choice(["NX", "XX", "GET"])),
              lambda k: ("GET", k), lambda k: ("INCR", k), lambda k: ("INCRBY", k, i()),
              lambda k: ("DECRBY", k, i()), lambda k: ("INCRBYFLOAT", k, f()),
              lambda k: ("APPEND", k, v()), lambda k: ("STRLEN", k),
              lambda k: ("GETRANGE", k, i(), i()), lambda k: ("SETRANGE", k, rng.choice(["0", "3", "-1", "x"]), v()),
              lambda k: ("MSET", k, v(), "k1", v()), lambda k: ("MGET", k, "k1", "k2"),
              lambda k: ("GETSET", k, v()), lambda k: ("GETDEL", k), lambda k: ("SETNX", k, v()),
              lambda k: ("MSETNX", k, v(), "k9", v()),
              lambda k: ("SETBIT", k, rng.choice(["0", "7", "9", "30", "100", "-1", "x"]), rng.choice(["0", "1", "1", "2"])),
              lambda k: ("GETBIT", k, rng.choice(["0", "3", "9", "40", "x"])),
              lambda k: ("BITCOUNT", k, *rng.choice([(), (i(), i()), (i(), i(), rng.choice(["BIT", "BYTE"]))])),
              lambda k: ("BITPOS", k, rng.choice(["0", "1"]), *rng.choice([(), (i(),), (i(), i()), (i(), i(), "BIT")])),
              lambda k: ("BITOP", rng.choice(["AND", "OR", "XOR", "NOT"]), rng.choice(["k1", key()]), k,
                         *rng.choice([(), ("k1",), ("k0", "k9")])),
              lambda k: ("GETEX", k, *rng.choice([(), ("EX", "1000"), ("PX", "2000000"), ("PERSIST",),
                                                  ("EXAT", "1"), ("PXAT", big), ("EX", i()), ("EXAT", "99999999999")]))],
        "l": [lambda k: ("LPUSH", k, m(), m()), lambda k: ("RPUSH", k, m(), m(), m()),
              lambda k: ("LPUSHX", k, m()), lambda k: ("RPUSHX", k, m()), lambda k: ("LPOP", k),
              lambda k: ("RPOP", k, i()), lambda k: ("LPOP", k, i()), lambda k: ("LRANGE", k, i(), i()),
              lambda k: ("LLEN", k), lambda k: ("LINDEX", k, i()),
              lambda k: ("RPUSH", k, lm(), lm(), lm()), lambda k: ("LSET", k, i(), lm()),
              lambda k: ("LTRIM", k, rng.choice(["0", "1", "-3", "-5"]), rng.choice(["-1", "-2", "5", "8"])),
              lambda k: ("LREM", k, i(), lm()), lambda k: ("LINSERT", k, rng.choice(["BEFORE", "AFTER"]), lm(), lm()),
              lambda k: ("LPOS", k, lm(), *rng.choice([(), ("RANK", i()), ("COUNT", i()), ("RANK", "-1", "COUNT", "0"),
                                                       ("RANK", "2", "COUNT", "2", "MAXLEN", "4"), ("MAXLEN", i())])),
              lambda k: ("LMOVE", k, rng.choice([k, "k2", key()]), end(), end()),
              lambda k: ("RPOPLPUSH", k, rng.choice([k, "k2", key()])),
              # (k may hold a set: no order of its own shows - BY nosort only
              # with STORE, no ALPHA BY, whose ties keep the set's order)
              lambda k: (rng.choice(["SORT", "SORT_RO"]), k, *rng.choice([(), ("ALPHA",), ("DESC", "ALPHA"), ("BY", "k*"),
                         ("ALPHA", "GET", "#", "GET", "k*"), ("LIMIT", i(), i(), "ALPHA"), ("BY", "k*", "DESC", "LIMIT", i(), i())])),
              lambda k: ("SORT", k, "BY", "nosort", *rng.choice([(), ("DESC",), ("LIMIT", i(), i())]), "STORE", rng.choice(["k6", key()])),
              lambda k: ("SORT", k, "ALPHA", *rng.choice([(), ("DESC",), ("LIMIT", "1", "3")]), "STORE", rng.choice(["k6", key()])),
              # the blocking pops: at once, or a null after 10 ms
              lambda k: (rng.choice(["BLPOP", "BRPOP"]), k, *rng.sample(["k2", "k6", key()], rng.randrange(2)), "0.01"),
              lambda k: ("BLMOVE", k, rng.choice([k, "k2", key()]), end(), end(), "0.01"),
              lambda k: ("BRPOPLPUSH", k, rng.choice([k, "k2", key()]), "0.01"),
              lambda k: ("LMPOP", "2", k, rng.choice(["k2", "k6", key()]), end(), *rng.choice([(), ("COUNT", i())])),
              lambda k: ("BLMPOP", "0.01", "1", k, end(), *rng.choice([(), ("COUNT", i())]))],
        "S": [lambda k: ("SADD", k, m(), m(), m()), lambda k: ("SREM", k, m(), m()),
              lambda k: ("SISMEMBER", k, m()), lambda k: ("SMEMBERS", k), lambda k: ("SCARD", k),
              lambda k: ("SMISMEMBER", k, m(), m()),
              lambda k: (rng.choice(["SINTER", "SUNION", "SDIFF"]), k, *rng.sample(["k3", "k6", key()], rng.randrange(3))),
              lambda k: (rng.choice(["SINTERSTORE", "SUNIONSTORE", "SDIFFSTORE"]), rng.choice(["k6", key()]), k,
                         *rng.sample(["k3", "k6", key()], rng.randrange(3))),
              lambda k: ("SMOVE", k, rng.choice(["k3", "k6", key()]), m()),
              lambda k: ("SINTERCARD", "2", k, rng.choice(["k3", "k6", key()]), *rng.choice([(), ("LIMIT", i())])),
              lambda k: ("SORT", k, *rng.choice([("ALPHA",), ("ALPHA", "DESC", "LIMIT", i(), i()), (), ("BY", "k*"),
                                                 ("BY", "nosort", "STORE", rng.choice(["k6", key()]))]))],
        "h": [lambda k: ("HSET", k, m(), v(), m(), v()), lambda k: ("HGET", k, m()),
              lambda k: ("HDEL", k, m(), m()), lambda k: ("HGETALL", k), lambda k: ("HLEN", k),
              lambda k: ("HINCRBY", k, m(), i()), lambda k: ("HINCRBYFLOAT", k, m(), f()),
              lambda k: ("HMGET", k, m(), m()), lambda k: ("HKEYS", k), lambda k: ("HVALS", k),
              lambda k: ("HSETNX", k, m(), v()), lambda k: ("HEXISTS", k, m()),
              lambda k: ("HSTRLEN", k, m()), lambda k: ("HMSET", k, m(), v()),
              lambda k: ("HRANDFIELD", k, *rng.choice([(), (rc(),), (rc(), "WITHVALUES"), ("100", "WITHVALUES")]))],
        "z": [lambda k: ("ZADD", k, f(), m(), f(), m()),
              lambda k: ("ZADD", k, *rng.choice([("NX",), ("XX",), ("CH",), ("GT", "CH"), ("LT",), ("INCR",), ("XX", "INCR")]), f(), m()),
              lambda k: ("ZINCRBY", k, f(), m()), lambda k: ("ZREM", k, m(), m()), lambda k: ("ZSCORE", k, m()),
              lambda k: ("ZCARD", k), lambda k: ("ZRANGE", k, i(), i(), *rng.choice([(), ("WITHSCORES",), ("REV",), ("REV", "WITHSCORES")])),
              lambda k: ("ZRANGE", k, f(), f(), "BYSCORE", *rng.choice([(), ("REV",), ("LIMIT", "1", "3"), ("WITHSCORES",)])),
              lambda k: ("ZRANGEBYSCORE", k, f(), f(), *rng.choice([(), ("WITHSCORES",), ("LIMIT", "1", "2"), ("LIMIT", "0", "-1")])),
              lambda k: ("ZREVRANGEBYSCORE", k, f(), f(), *rng.choice([(), ("WITHSCORES",), ("LIMIT", "2", "3")])),
              lambda k: ("ZREVRANGE", k, i(), i()), lambda k: ("ZCOUNT", k, f(), f()),
              lambda k: ("ZPOPMIN", k, *rng.choice([(), ("2",)])), lambda k: ("ZPOPMAX", k, *rng.choice([(), ("3",)])),
              lambda k: ("ZRANK", k, m()), lambda k: ("ZREVRANK", k, m()), lambda k: ("ZMSCORE", k, m(), m()),
              lambda k: ("ZREMRANGEBYSCORE", k, f(), f()), lambda k: ("ZREMRANGEBYRANK", k, i(), i()),
              lambda k: (rng.choice(["BZPOPMIN", "BZPOPMAX"]), k, *rng.sample(["k5", "k6", key()], rng.randrange(2)), "0.01"),
              lambda k: ("ZMPOP", "2", k, rng.choice(["k5", "k6", key()]), rng.choice(["MIN", "MAX", "max"]),
                         *rng.choice([(), ("COUNT", i())])),
              lambda k: ("BZMPOP", "0.01", "1", k, rng.choice(["MIN", "MAX"]), *rng.choice([(), ("COUNT", i())])),
              lambda k: (rng.choice(["ZUNION", "ZINTER", "ZDIFF"]), "2", k, rng.choice(["k5", "k7", "k3", key()]),
                         *rng.choice([(), ("WITHSCORES",), ("WEIGHTS", f(), f(), "WITHSCORES"),
                                      ("AGGREGATE", rng.choice(["MIN", "MAX", "SUM"]), "WITHSCORES")])),
              lambda k: (rng.choice(["ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE"]), rng.choice(["k6", "k5", key()]), "2", k,
                         rng.choice(["k5", "k7", "k3", key()]), *rng.choice([(), ("WEIGHTS", f(), f()), ("AGGREGATE", "MAX")])),
              lambda k: ("ZINTERCARD", "2", k, rng.choice(["k5", "k7", "k3", key()]), *rng.choice([(), ("LIMIT", i())])),
              lambda k: ("ZRANGESTORE", rng.choice(["k6", key()]), k, i(), i(), *rng.choice([(), ("REV",)])),
              lambda k: ("ZRANGESTORE", rng.choice(["k6", key()]), k, f(), f(), "BYSCORE", *rng.choice([(), ("LIMIT", "1", "2")])),
              lambda k: ("ZSCAN", k, "0", "COUNT", "1000", *rng.choice([(), ("MATCH", "m1*")])),
              lambda k: ("ZRANDMEMBER", k, *rng.choice([(), (rc(),), (rc(), "WITHSCORES"), ("100", "WITHSCORES")]))],
        "Z": [lambda k: ("ZADD", k, "0", m(), "0", m(), "0", m()), lambda k: ("ZREM", k, m()),
              lambda k: ("ZRANGEBYLEX", k, lex(), lex(), *rng.choice([(), ("LIMIT", "1", "3"), ("LIMIT", "0", "-1")])),
              lambda k: ("ZREVRANGEBYLEX", k, lex(), lex(), *rng.choice([(), ("LIMIT", "2", "2")])),
              lambda k: ("ZRANGE", k, lex(), lex(), "BYLEX", *rng.choice([(), ("REV",), ("LIMIT", "1", "2")])),
              lambda k: ("ZLEXCOUNT", k, lex(), lex()), lambda k: ("ZREMRANGEBYLEX", k, lex(), lex()),
              lambda k: ("ZRANGE", k, "0", "-1")],
        "*": [lambda k: ("DEL", k, "k1"), lambda k: ("EXISTS", k, "k1"), lambda k: ("TYPE", k),
              lambda k: ("RENAME", k, "k%d" % rng.randrange(7)), lambda k: ("RENAMENX", k, "k%d" % rng.randrange(7)),
              lambda k: ("EXPIRE", k, rng.choice(["1000", "2000", "-1"]), *rng.choice([(), ("NX",), ("XX",), ("GT",), ("LT",)])),
              lambda k: ("PERSIST", k), lambda k: ("TTL", k), lambda k: ("EXPIRETIME", k),
              lambda k: ("DBSIZE",), lambda k: ("KEYS", rng.choice(["*", "k[0-2]", "k?", "*3"])),
              lambda k: ("COPY", k, key(), *rng.choice([(), ("REPLACE",), ("DB", "0")])),
              lambda k: ("TOUCH", k, key())],
    }
    weights = {"s": 4, "l": 4, "S": 3, "h": 3, "z": 4, "Z": 2, "*": 1}
    kinds = list(weights)
    type_of = {"s": "string", "l": "list", "S": "set", "h": "hash", "z": "zset"}
    for _ in range(n):
        kind = rng.choices(kinds, [weights[x] for x in kinds])[0]
        if kind == "Z":
            k = "k7"
        elif own[kind] and rng.random() < 0.8:
            k = rng.choice(own[kind])
            # a key of another type now (RENAME, SET ... made it so): mostly
            # deleted first, so that most commands take their normal path
            # (asked on the second connection: the first may be in MULTI)
            if rd2.cmd("TYPE", k) not in ("none", type_of[kind]) and rng.random() < 0.7:
                yield ("DEL", k)
        else:
            k = key()
        yield rng.choice(gens[kind])(k)


def with_transactions(rng, cmds):
    """The commands, a few of them at a time inside MULTI ... EXEC (or
    DISCARD), some of those with keys WATCHed first (the commands between
    may change them)."""
    cmds = iter(cmds)
    for cmd in cmds:
        if rng.random() < 0.03:
            if rng.random() < 0.5:
                yield ("WATCH", *rng.sample(["k%d" % i for i in range(8)], rng.randrange(1, 4)))
                for _ in range(rng.randrange(3)):
                    yield next(cmds, ("PING",))
            yield ("MULTI",)
            yield cmd
            for _ in range(rng.randrange(6)):
                yield next(cmds, ("PING",))
            yield ("DISCARD",) if rng.random() < 0.1 else ("EXEC",)
        else:
            yield cmd


def bulk_script(rng):
    """Large values of each type: a sorted set with ties well past Redis's
    small encoding, a long list, a large hash and set."""
    pairs = [x for i in range(1000) for x in (str(rng.randrange(100)), "m%d" % i)]
    out = [("ZADD", "bz", *pairs), ("ZCARD", "bz"), ("ZRANGE", "bz", "0", "-1", "WITHSCORES"),
           ("ZRANGE", "bz", "500", "510"), ("ZREVRANGE", "bz", "0", "9", "WITHSCORES"),
           ("ZRANGEBYSCORE", "bz", "10", "20", "LIMIT", "5", "10"), ("ZCOUNT", "bz", "(10", "20"),
           ("ZREVRANGEBYSCORE", "bz", "(50", "-inf", "LIMIT", "3", "7", "WITHSCORES"),
           ("ZRANGE", "bz", "(30", "40", "BYSCORE", "REV", "WITHSCORES")]
    out += [("ZRANK", "bz", "m%d" % i) for i in range(0, 1000, 37)]
    out += [("ZREVRANK", "bz", "m%d" % i) for i in range(5, 1000, 41)]
    out += [("ZREM", "bz", *["m%d" % i for i in range(0, 1000, 3)]), ("ZPOPMIN", "bz", "50"),
            ("ZPOPMAX", "bz", "50"), ("ZINCRBY", "bz", "1000", "m1"), ("ZRANGE", "bz", "0", "-1", "WITHSCORES")]
    out += [("RPUSH", "bl", *["e%d" % i for i in range(1000)]), ("LPUSH", "bl", "x", "y"),
            ("LRANGE", "bl", "100", "200"), ("LINDEX", "bl", "777"), ("LINDEX", "bl", "-300"),
            ("LPOP", "bl", "100"), ("RPOP", "bl", "100"), ("LRANGE", "bl", "-50", "-1"), ("LLEN", "bl")]
    out += [("HSET", "bh", *[x for i in range(500) for x in ("f%d" % i, "v%d" % i)]), ("HLEN", "bh"),
            ("HGETALL", "bh"), ("HDEL", "bh", *["f%d" % i for i in range(0, 500, 2)]), ("HKEYS", "bh"),
            ("SADD", "bs", *["s%d" % i for i in range(700)]), ("SCARD", "bs"), ("SMEMBERS", "bs"),
            ("SREM", "bs", *["s%d" % i for i in range(0, 700, 3)]), ("SMEMBERS", "bs"),
            ("SSCAN", "bs", "0", "COUNT", "20"), ("HSCAN", "bh", "0", "MATCH", "f1*"),
            ("SCAN", "0", "COUNT", "3"), ("DEL", "bz", "bl", "bh", "bs")]
    return out


def command_table():
    """COMMAND INFO of every command kv-server lists (subcommands too) beside
    redis-server's: the arity, the key positions and the flags kv-server
    knows must be Redis's; COMMAND GETKEYS on commands whose keys move with
    their arguments, and its errors."""
    known = {"write", "readonly", "denyoom", "pubsub", "blocking", "no_multi", "movablekeys"}
    names = [n.decode() for n in kv.cmd("COMMAND", "LIST")]
    check = [n for n in names if n != "sort_ro"] + ["sort_ro"]
    for name in check:
        a, b = kv.cmd("COMMAND", "INFO", name)[0], rd.cmd("COMMAND", "INFO", name)[0]
        compared["commands"] += 1
        if b is None:
            mismatches.append((("COMMAND", "INFO", name), a, "(unknown to redis-server)"))
            continue
        mine = (a[1], sorted(set(a[2]) & known), a[3], a[4], a[5])
        theirs = (b[1], sorted(set(b[2]) & known), b[3], b[4], b[5])
        if mine != theirs:
            mismatches.append((("COMMAND", "INFO", name), mine, theirs))
    if len(names) < 170 or "object|encoding" not in names or "get" not in names:
        mismatches.append((("COMMAND", "LIST"), names, "(170 commands or more)"))
    run([("COMMAND", "GETKEYS", *c.split()) for c in [
        "zunion 2 a b", "zunionstore d 2 a b", "zunion x a", "zunion 3 a b", "zunionstore d 0 a",
        "zinterstore d 1 a WEIGHTS 2", "zdiff 1 a", "zintercard 2 a b LIMIT 1", "sintercard 1 a",
        "lmpop 2 a b LEFT", "blmpop 0 2 a b LEFT", "bzmpop 0 1 a MIN", "zmpop 1 a MAX COUNT 2",
        "ping x", "foo a", "get a b", "set a", "get a", "mset a 1 b 2", "msetnx a 1",
        "blpop a b 0", "bzpopmax a 0", "rename a b", "bitop AND d a b", "object encoding k",
        "memory usage k", "sort k BY x STORE d", "sort k LIMIT 0 store GET store STORE e",
        "sort k store", "sort_ro k", "del a b c", "watch a b", "spublish ch m", "lmove a b LEFT RIGHT",
        "getkeys a b"]])
    run([("COMMAND", "INFO", "nosuch"), ("COMMAND", "GETKEYS", "get"), ("COMMAND", "COUNT", "x"),
         ("COMMAND", "NOSUCH"), ("COMMAND", "LIST", "FILTERBY", "NOSUCH", "x"),
         ("COMMAND", "LIST", "x")])
    for pattern in ("zrange*", "object|*", "nosuch*"):  # (in no defined order)
        cmd = ("COMMAND", "LIST", "FILTERBY", "PATTERN", pattern)
        a, b = kv.cmd(*cmd), rd.cmd(*cmd)
        compared["commands"] += 1
        if sorted(a) != sorted(b):
            mismatches.append((cmd, a, b))


kv.cmd("FLUSHALL")
rd.cmd("FLUSHALL")
command_table()
run(script)
count_changes = True  # (for the commands added with transactions, and one random round)
run(script2)
run2(tx_script)
run(script3)
count_changes = True
run(script4)
run(script5)
run(script6)
count_changes = False
run(script7)
count_changes = False
run(bulk_script(random.Random(seed)))
scripted = compared["commands"]
rng = random.Random(seed)
for rnd in range(10):
    count_changes = rnd == 0
    run(with_transactions(rng, random_commands(rng, 1000)))
    count_changes = False
    run([("KEYS", "*")] + [(c, "k%d" % i) for i in range(8) for c in ("TYPE", "TTL")])
    # the whole state, type by type
    for i in range(8):
        key = "k%d" % i
        t = rd.cmd("TYPE", key)
        run([{"string": ("GET", key), "list": ("LRANGE", key, "0", "-1"),
              "set": ("SMEMBERS", key), "hash": ("HGETALL", key),
              "zset": ("ZRANGE", key, "0", "-1", "WITHSCORES"), "none": ("EXISTS", key)}[t]])
shown = set()
for cmd, a, b in mismatches:  # the first of each command's
    if cmd[:2] in shown or len(shown) >= 40:
        continue
    shown.add(cmd[:2])
    print("MISMATCH %r\n   kv-server:    %r\n   redis-server: %r" % (cmd, a, b))
print("%d commands compared (%d scripted, the rest random with seed %d), %d of them errors; "
      "%d replies differ" % (compared["commands"], scripted, seed, compared["errors"],
                             len(mismatches)))
sys.exit(1 if mismatches else 0)
