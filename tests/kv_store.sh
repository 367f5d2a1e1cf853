#!/usr/bin/env bash
# examples/kv-server's store, which lives in the checkpointed area:
#  - memory freed by DEL serves other sizes: after filling a 16 MiB store
#    with values of many sizes and deleting them all, 1 MiB and 8 MiB values
#    fit; memory in use returns to where it started; a 10 MiB value
#    overwritten by one byte gives its memory back (another 10 MiB fits);
#    a SET refused because free memory is in holes says so; a 10 MiB value
#    fits right after everything is deleted (no turn of the event loop
#    between), the keys' table moved out of its way
#  - deleted keys leave nothing behind in the hash table: 1,000,000 SET/DEL
#    pairs of distinct keys in a 16 MiB store all succeed
#  - the table grows and shrinks; a SCAN that runs while keys are added
#    returns every key present throughout
#  - every type and every key's expiry time survive BGSAVE and a restart
#    (kill -9), in a store restored at another address; a key whose time
#    passed while the server was down is gone; active expiry deletes keys
#    nobody touches (also keys with a time few among keys without one)
#  - UNLINK of values of many elements answers at once and frees them in
#    slices after (lazyfree_pending_objects); a write that needs their
#    memory meanwhile gets it; values left to free in an image are freed
#    after the restart
#  - a transaction's writes are checked against the free memory as they are
#    queued (one too large: -OOM, and EXEC fails) and together at EXEC (too
#    large together: EXECABORT, none of them done), as Redis checks them
# Usage: kv_store.sh KV_SERVER_BINARY [MECHANISM]
server=$1 mech=${2:-uffd-thread}
source "$(dirname "$0")/kv_lib.sh"
kv_start small --memory 16m --mechanism "$mech"
KV_PORT=$port PYTHONPATH=$(dirname "$0") python3 - <<'PY'
import random
from kv_resp import Conn, Err, resp, check, fail, port_from_env
c = Conn(port_from_env(), timeout=120)
rng = random.Random(17)

def info(field):
    return int(c.info(field))

base = info("used_memory")
# ---- a 10 MiB value right after deleting everything (one pipeline: no
# background turn between them): the keys' table, placed while the store
# was full, must not stand in the middle of the free memory then
prng = random.Random(1)
for rnd in range(3):
    keys = ["v%d" % i for i in range(6000)]
    kept = [k for k in keys if c.cmd("SET", k, b"x" * prng.randrange(1, 20000)) == "OK"]
    prng.shuffle(kept)
    cmds = [("DEL",) + tuple(kept[j:j + 100]) for j in range(0, len(kept), 100)]
    got = c.pipeline(cmds + [("SET", "big", b"b" * (10 << 20)), ("DEL", "big")])
    check(got[-2] == "OK", "round %d: a 10 MiB SET right after deleting %d keys: %r"
          % (rnd, len(kept), got[-2]))
check(info("used_memory") - base < 64 << 10, "memory in use after the rounds")
print("a 10 MiB value right after deleting everything: ok (3 rounds)")

# ---- many sizes, then nothing, then large values
for rnd in range(3):
    sizes = [rng.choice([1, 7, 40, 100, 300, 1000, 3000, 20000]) for _ in range(6000)]
    keys = [b"k:%d:%d" % (rnd, i) for i in range(len(sizes))]
    got = c.pipeline([("SET", k, b"v" * n) for k, n in zip(keys, sizes)])
    oom = sum(1 for g in got if isinstance(g, Err))
    check(all(g == "OK" or g.startswith("OOM") for g in got), "SET replies: %r" % got[:3])
    # delete in a random order, so that freed blocks must merge with both neighbours
    order = list(keys)
    rng.shuffle(order)
    deleted = sum(c.pipeline([("DEL", k) for k in order]))
    check(deleted == len(keys) - oom, "deleted %d of %d" % (deleted, len(keys) - oom))
    check(c.cmd("DBSIZE") == 0, "DBSIZE after deleting everything")
    for mib in (1, 8):
        got = c.cmd("SET", "big", b"b" * (mib << 20))
        check(got == "OK", "round %d: a %d MiB SET after deleting everything: %r" % (rnd, mib, got))
        check(c.cmd("STRLEN", "big") == mib << 20, "STRLEN big")
        c.cmd("DEL", "big")
    used = info("used_memory")
    check(used - base < 64 << 10, "round %d: %d bytes still in use after deleting everything "
          "(%d at the start)" % (rnd, used, base))
print("memory freed by DEL serves other sizes: ok (3 rounds of 6,000 values of 1 B-20 KB "
      "deleted in random order, then 1 and 8 MiB values in a 16 MiB store)")

# ---- a value overwritten by a much smaller one gives its memory back
# (string, hash field, list element), and a small block (the keys' table)
# taken meanwhile is not left between it and the free space after it
for kind in ("string", "hash", "list"):
    big = b"x" * (10 << 20)
    if kind == "string":
        set_big, set_small = ("SET", "a", big), ("SET", "a", "x")
    elif kind == "hash":
        set_big, set_small = ("HSET", "a", "f", big), ("HSET", "a", "f", "x")
    else:
        c.cmd("RPUSH", "a", "e")
        set_big, set_small = ("LSET", "a", "0", big), ("LSET", "a", "0", "x")
    got = c.cmd(*set_big)
    check(got in ("OK", 1), "%s: a 10 MiB value in a 16 MiB store: %r" % (kind, got))
    c.cmd(*set_small)
    check(info("used_memory") - base < 64 << 10, "%s: %d bytes in use after the 10 MiB value was "
          "overwritten by one byte" % (kind, info("used_memory")))
    got = c.cmd("SET", "b", big)
    check(got == "OK", "%s: another 10 MiB value after the first shrank: %r" % (kind, got))
    check(c.cmd("DEL", "a", "b") == 2, "DEL a b")
print("a 10 MiB value overwritten by one byte gives its memory back (string, hash field, list "
      "element): ok")

# ---- fragmented free memory: the error says so.  Full of 100-byte values,
# then every other one deleted: half the store is free, in holes
n = 0
while True:
    got = c.pipeline([("SET", "f:%d" % i, b"v" * 100) for i in range(n, n + 5000)])
    n += 5000
    if any(isinstance(g, Err) for g in got):
        break
c.pipeline([("DEL", "f:%d" % i) for i in range(0, n, 2)])
for size in (4 << 10, 64 << 10, 1 << 20, 4 << 20):  # (a table shrunk may have left a hole)
    got = c.cmd("SET", "wide", b"w" * size)
    if got != "OK":
        break
check(isinstance(got, Err) and "fragmented" in got,
      "a %d-byte SET with half the store free in 100-byte holes: %r" % (size, got))
print("a SET no free block can hold, half the store free in holes: %r" % got[:60])
c.cmd("FLUSHALL")

# ---- transactions and the memory
OOM = "OOM command not allowed when used memory > 'maxmemory'."
got = c.pipeline([("MULTI",), ("SET", "t1", b"t" * (12 << 20)), ("SET", "t2", b"t" * (12 << 20)), ("EXEC",)])
check(got == ["OK", "QUEUED", "QUEUED", "EXECABORT Transaction discarded because of: " + OOM],
      "two 12 MiB SETs in one transaction in a 16 MiB store: %r" % [g[:80] for g in got])
got = c.pipeline([("MULTI",), ("SET", "t1", "x"), ("SET", "t2", b"t" * (20 << 20)), ("EXEC",)])
check(got == ["OK", "QUEUED", OOM, "EXECABORT Transaction discarded because of previous errors."],
      "a 20 MiB SET queued in a 16 MiB store: %r" % [g[:80] for g in got])
check(c.cmd("EXISTS", "t1", "t2") == 0, "a transaction refused for memory wrote")
# (5 MiB each: two fit on either side of any one small block the server's
# own tables may have taken in the middle of the store meanwhile - a hash
# table shrinking after the deletions above, on its own time)
got = c.pipeline([("MULTI",), ("SET", "t1", b"t" * (5 << 20)), ("SET", "t2", b"t" * (5 << 20)), ("EXEC",)])
check(got == ["OK", "QUEUED", "QUEUED", ["OK", "OK"]], "two 5 MiB SETs in one transaction: %r" % got[-1:])
check(c.cmd("DEL", "t1", "t2") == 2, "the transaction's keys")
print("transactions: writes too large alone refused as queued, too large together at EXEC: ok")

# ---- 1,000,000 SET/DEL pairs of distinct keys
N, BATCH = 1_000_000, 20_000
want = b"+OK\r\n:1\r\n" * BATCH
for start in range(0, N, BATCH):
    c.send(b"".join(resp("SET", "churn:%d" % i, "x" * 20) + resp("DEL", "churn:%d" % i)
                    for i in range(start, start + BATCH)))
    got = c._exact(len(want))
    if got != want:
        fail("SET/DEL pairs %d..%d: %r" % (start, start + BATCH, got[:200]))
check(c.cmd("DBSIZE") == 0, "DBSIZE after the pairs")
check(c.cmd("SET", "after", "1") == "OK", "a SET after 1,000,000 SET/DEL pairs")
check(info("used_memory") - base < 64 << 10, "memory in use after the pairs")
print("1,000,000 SET/DEL pairs of distinct keys in a 16 MiB store: ok")

# ---- growing and shrinking; SCAN while the table grows
c.pipeline([("SET", "g:%d" % i, "1") for i in range(20000)])
check(c.cmd("DBSIZE") == 20001, "DBSIZE after 20,000 keys")
present = {b"g:%d" % i for i in range(20000)} | {b"after"}
seen, cursor, added = set(), b"0", 0
while True:
    cursor, keys = c.cmd("SCAN", cursor, "COUNT", "50")
    seen.update(keys)
    # add keys as it goes, so that the table grows (and rehashes) mid-iteration
    c.pipeline([("SET", "h:%d" % (added + i), "1") for i in range(30)])
    added += 30
    if cursor == b"0":
        break
missing = present - seen
check(not missing, "SCAN missed %d keys present throughout (e.g. %r)" % (len(missing), list(missing)[:3]))
c.cmd("FLUSHALL")
check(info("used_memory") - base < 64 << 10, "memory in use after FLUSHALL")
c.pipeline([("SET", "s:%d" % i, "1") for i in range(50000)])
grown = info("used_memory")
c.pipeline([("DEL", "s:%d" % i) for i in range(50000)])
shrunk = info("used_memory")
check(shrunk - base < 64 << 10, "the table shrinks: %d bytes in use (%d with 50,000 keys)" % (shrunk, grown))
print("SCAN while %d keys were added returned all %d present throughout; the table shrank "
      "from %d to %d bytes in use" % (added, len(present), grown, shrunk))
PY
kv_kill

# ---- every type and expiry across BGSAVE and kill -9
kv_start types --memory 64m --mechanism "$mech"
KV_PORT=$port PYTHONPATH=$(dirname "$0") python3 - "$dir/state" <<'PY'
import json, sys, time
from kv_resp import Conn, check, port_from_env
c = Conn(port_from_env(), timeout=60)
now = time.time()
script = [("SET", "s", "string \x00\xff"), ("SET", "ttl:long", "1", "EX", "1000"), ("SET", "ttl:at", "1"),
          ("PEXPIREAT", "ttl:at", str(int(now * 1000) + 2000000)),
          ("RPUSH", "l", "a", "b", "c", "d"), ("LPUSH", "l", "z"),
          ("SADD", "set", "x", "y", "z"), ("HSET", "h", "f1", "v1", "f2", "v2"),
          ("ZADD", "z", "1.5", "a", "-2", "b", "1e10", "c"), ("EXPIRE", "h", "1000"),
          ("INCRBY", "n", "41"), ("APPEND", "s", " more")]
for cmd in script:
    got = c.cmd(*cmd)
    check(not isinstance(got, str) or not got.startswith(("ERR", "WRONG", "OOM")), "%r: %r" % (cmd, got))
for i in range(2000):  # with their own times, to be deleted by active expiry
    c.cmd("SET", "soon:%d" % i, "x", "PX", "200")
state = {"s": c.cmd("GET", "s").hex(), "l": [x.decode() for x in c.cmd("LRANGE", "l", "0", "-1")],
         "set": sorted(x.decode() for x in c.cmd("SMEMBERS", "set")),
         "h": sorted(x.decode() for x in c.cmd("HGETALL", "h")),
         "z": [x.decode() for x in c.cmd("ZRANGE", "z", "0", "-1", "WITHSCORES")],
         "n": c.cmd("GET", "n").decode(), "pexpiretime": c.cmd("PEXPIRETIME", "ttl:at"),
         "long": c.cmd("PEXPIRETIME", "ttl:long"), "h_at": c.cmd("PEXPIRETIME", "h")}
# active expiry: nothing touches those keys, yet they all go (DBSIZE looks at
# none); 8 keys of the script remain
for _ in range(600):
    if c.cmd("DBSIZE") <= 8:
        break
    time.sleep(0.1)
check(c.cmd("DBSIZE") == 8, "active expiry: %d keys left of 2,000 whose time has passed" % (c.cmd("DBSIZE") - 8))
info = c.cmd("INFO", "stats").decode()
expired = int(info.split("expired_keys:")[1].split("\r\n")[0])
check(expired == 2000, "expired_keys %d" % expired)
print("active expiry: %d keys deleted that no command touched" % expired)
# ... and where keys with a time are few among many without one: Redis
# samples only keys with one; kv-server walks past the others, and goes on
# while a quarter of those with one it met had expired (it used to stop
# when a quarter of all it looked at had not: a few hundred a second)
for k in range(0, 40000, 2000):
    c.pipeline([("SET", "keep:%d" % i, "v") for i in range(k, k + 2000)])
for k in range(0, 8000, 2000):
    c.pipeline([("SET", "few:%d" % i, "x", "PX", "300") for i in range(k, k + 2000)])
for _ in range(100):
    if c.cmd("DBSIZE") <= 40008:
        break
    time.sleep(0.1)
left = c.cmd("DBSIZE") - 40008
check(left == 0, "active expiry among 40,000 keys without a time: %d of 8,000 left after 10 s"
      % left)
for k in range(0, 40000, 2000):
    c.cmd("DEL", *["keep:%d" % i for i in range(k, k + 2000)])
check(c.cmd("DBSIZE") == 8, "DBSIZE after the keys without a time are deleted")
print("active expiry: 8,000 keys with a time among 40,000 without, deleted")
# a key whose time passes while the server is down, set just before the save
now = time.time()
check(c.cmd("SET", "ttl:short", "1", "PX", "5000") == "OK", "SET ttl:short")
info = c.cmd("INFO", "keyspace").decode()
check("expires=4" in info, "INFO keyspace: %r" % info)
# avg_ttl: Redis's estimate from the keys active expiry visits (it ran above)
check(int(info.split("avg_ttl=")[1].split("\r\n")[0]) > 0, "INFO keyspace avg_ttl: %r" % info)
check(c.cmd("BGSAVE") == "Background saving started", "BGSAVE")
for _ in range(600):
    if b"rdb_bgsave_in_progress:0" in c.cmd("INFO", "persistence"):
        break
    time.sleep(0.05)
state["short_until"] = now + 5.0
json.dump(state, open(sys.argv[1], "w"))
PY
kv_kill
# ttl:short's time passes while the server is down
python3 -c 'import json, sys, time; time.sleep(max(0, json.load(open(sys.argv[1]))["short_until"] + 0.2 - time.time()))' "$dir/state"
# restarted: the area maps wherever mmap puts it; the store holds offsets only
kv_start types2 --memory 64m --mechanism "$mech"
KV_PORT=$port PYTHONPATH=$(dirname "$0") python3 - "$dir/state" <<'PY'
import json, sys
from kv_resp import Conn, check, port_from_env
c = Conn(port_from_env(), timeout=60)
state = json.load(open(sys.argv[1]))
check(c.cmd("EXISTS", "ttl:short") == 0, "ttl:short outlived its time across the restart")
check(c.cmd("GET", "ttl:short") is None, "GET ttl:short")
# expiry times are absolute: the same instants after the restart
check(c.cmd("PEXPIRETIME", "ttl:long") == state["long"], "PEXPIRETIME ttl:long")
check(c.cmd("PEXPIRETIME", "ttl:at") == state["pexpiretime"], "PEXPIRETIME ttl:at")
check(c.cmd("PEXPIRETIME", "h") == state["h_at"], "PEXPIRETIME h")
ttl = c.cmd("TTL", "ttl:long")
check(0 < ttl <= 1000, "TTL ttl:long after the restart: %r" % ttl)
check(c.cmd("TTL", "s") == -1, "TTL s")
check(c.cmd("GET", "s").hex() == state["s"], "GET s")
check([x.decode() for x in c.cmd("LRANGE", "l", "0", "-1")] == state["l"], "LRANGE l")
check(sorted(x.decode() for x in c.cmd("SMEMBERS", "set")) == state["set"], "SMEMBERS set")
check(sorted(x.decode() for x in c.cmd("HGETALL", "h")) == state["h"], "HGETALL h")
check([x.decode() for x in c.cmd("ZRANGE", "z", "0", "-1", "WITHSCORES")] == state["z"], "ZRANGE z")
check(c.cmd("INCR", "n") == 42, "INCR n")
for cmd in (("TYPE", "l"), ("TYPE", "set"), ("TYPE", "h"), ("TYPE", "z"), ("TYPE", "s")):
    check(c.cmd(*cmd) == {"l": "list", "set": "set", "h": "hash", "z": "zset", "s": "string"}[cmd[1]], cmd)
check(c.cmd("DBSIZE") == 8, "DBSIZE %r" % c.cmd("DBSIZE"))
# the restored store keeps working: its tables and heap are whole
c.pipeline([("ZADD", "z", str(i), "m%d" % i) for i in range(3000)])
check(c.cmd("ZCARD", "z") == 3003, "ZCARD")
c.pipeline([("SADD", "set", "m%d" % i) for i in range(3000)])
check(c.cmd("SCARD", "set") == 3003, "SCARD")
print("every type and expiry times restored; the key whose time passed while the server was down "
      "is gone")
PY
kv_kill

# ---- UNLINK: large values freed after the reply, in slices
kv_start unlink --memory 64m --mechanism "$mech" --dbfilename unlink.img
KV_PORT=$port PYTHONPATH=$(dirname "$0") python3 - "$dir/unlink-state" <<'PY'
import json, sys, time
from kv_resp import Conn, Err, check, port_from_env
c = Conn(port_from_env(), timeout=120)
base = int(c.info("used_memory"))

def fill(n):
    for k in range(0, n, 1000):
        c.pipeline([("SADD", "set", *["m%d" % i for i in range(k, k + 1000)]),
                    ("RPUSH", "list", *["e%d" % i for i in range(k, k + 1000)]),
                    ("HSET", "hash", *[x for i in range(k, k + 1000) for x in ("f%d" % i, "v" * 40)]),
                    ("ZADD", "zset", *[x for i in range(k, k + 1000) for x in (str(i), "z%d" % i)])])

def pending():
    return int(c.info("lazyfree_pending_objects"))

def drained(what):
    for _ in range(1200):
        if pending() == 0:
            break
        time.sleep(0.05)
    check(pending() == 0, "%s: %d values still to free" % (what, pending()))
    used = int(c.info("used_memory"))
    check(used - base < 64 << 10, "%s: %d bytes in use after freeing, %d at the start" % (what, used, base))

fill(60000)
c.cmd("SADD", "small", "a", "b")  # (freed at once)
got = c.pipeline([("UNLINK", "set", "list", "hash", "zset", "small", "nokey"), ("INFO", "memory")])
check(got[0] == 5, "UNLINK: %r" % got[0])
left = int(got[1].decode().split("lazyfree_pending_objects:")[1].split("\r\n")[0])
check(1 <= left <= 4, "lazyfree_pending_objects right after UNLINK: %d" % left)
check(c.cmd("DBSIZE") == 0 and c.cmd("EXISTS", "set", "hash") == 0, "keys gone at once")
drained("UNLINK")
# a write that needs the memory being freed gets it at once
fill(60000)
used = int(c.info("used_memory"))
size = (64 << 20) - used + (4 << 20)  # more than is free: it needs what UNLINK left
check(used > 12 << 20 and size < (60 << 20) - base, "the values fill %d bytes" % used)
got = c.pipeline([("UNLINK", "set", "list", "hash", "zset"), ("SET", "big", b"x" * size)])
check(got == [4, "OK"], "a %d MiB SET right after UNLINK of %d MiB: %r" % (size >> 20, used >> 20, got))
check(pending() == 0, "the write freed what UNLINK left")
c.cmd("DEL", "big")
# an image taken with values left to free: they are freed after the restart
fill(30000)
got = c.pipeline([("UNLINK", "set", "list", "hash", "zset"), ("SAVE",), ("INFO", "memory")])
check(got[:2] == [4, "OK"], "UNLINK, SAVE: %r" % got[:2])
json.dump({"base": base}, open(sys.argv[1], "w"))
print("UNLINK: 4 values of 60,000 elements freed after the reply; a SET right after that "
      "needed their memory got it")
PY
kv_kill
kv_start unlink2 --memory 64m --mechanism "$mech" --dbfilename unlink.img
KV_PORT=$port PYTHONPATH=$(dirname "$0") python3 - "$dir/unlink-state" <<'PY'
import json, sys, time
from kv_resp import Conn, check, port_from_env
c = Conn(port_from_env(), timeout=120)
base = json.load(open(sys.argv[1]))["base"]
for _ in range(1200):
    if int(c.info("lazyfree_pending_objects")) == 0:
        break
    time.sleep(0.05)
used = int(c.info("used_memory"))
check(int(c.info("lazyfree_pending_objects")) == 0 and used - base < 64 << 10,
      "after the restart: %s values to free, %d bytes in use (%d empty)"
      % (c.info("lazyfree_pending_objects"), used, base))
check(c.cmd("DBSIZE") == 0, "DBSIZE after the restart")
check(c.cmd("SET", "big", b"y" * (50 << 20)) == "OK", "a 50 MiB SET after the restart")
print("values left to free in an image: freed after the restart")
PY
kv_kill
kv_check_log
echo "kv_store ($mech): ok"
