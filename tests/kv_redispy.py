"""tests/kv_redispy.py PORT: examples/kv-server driven by redis-py, the way
a Python program uses Redis: plain commands through the client's own
encoding and reply parsing, pipelines (transactions by default), the
optimistic-locking helper Redis.transaction() with WATCH, several threads
each with its own connections incrementing one counter through it (no
increment lost), scan_iter, expiry, capped lists, set algebra and
sliding-window sorted sets, a work queue of blocking pops, pub/sub, and
the newer commands through the client's own methods.  Every check
compares with what the data must be; a wrong reply or a lost write fails
with what differed.
"""
import sys
import threading
import time

import redis

port = int(sys.argv[1])
r = redis.Redis(host="127.0.0.1", port=port, decode_responses=True, client_name="kv-redispy")


def check(what, got, want):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r}")


r.flushall()
check("ping", r.ping(), True)
check("client name", r.client_getname(), "kv-redispy")
check("client id", isinstance(r.client_id(), int), True)

# strings, numbers, expiry
check("set", r.set("s", "v1"), True)
check("set nx on existing", r.set("s", "v2", nx=True), None)
check("get", r.get("s"), "v1")
check("incr", r.incr("n", 5), 5)
check("incrbyfloat", r.incrbyfloat("f", 1.5), 1.5)
check("mset", r.mset({"a": "1", "b": "2"}), True)
check("mget", r.mget("a", "b", "missing"), ["1", "2", None])
check("setex", r.setex("t", 100, "x"), True)
check("ttl", 0 < r.ttl("t") <= 100, True)
check("getex persist", r.getex("t", persist=True), "x")
check("ttl after persist", r.ttl("t"), -1)
check("getex px", r.getex("t", px=50), "x")
time.sleep(0.2)
check("expired", r.get("t"), None)

# a capped list (LPUSH + LTRIM in one transaction), list edits
for i in range(30):
    with r.pipeline() as p:
        p.lpush("log", f"e{i}")
        p.ltrim("log", 0, 9)
        p.execute()
check("capped list", r.lrange("log", 0, -1), [f"e{i}" for i in range(29, 19, -1)])
check("lset", r.lset("log", 0, "first"), True)
check("linsert", r.linsert("log", "after", "first", "second"), 11)
check("lrem", r.lrem("log", 0, "second"), 1)
check("lpos", r.lpos("log", "e28"), 1)
check("lmove", r.lmove("log", "other", "RIGHT", "LEFT"), "e20")
check("rpoplpush", r.rpoplpush("log", "other"), "e21")
check("other", r.lrange("other", 0, -1), ["e21", "e20"])

# set algebra
r.sadd("s1", "a", "b", "c", "d")
r.sadd("s2", "c", "d", "e")
check("sinter", r.sinter("s1", "s2"), {"c", "d"})
check("sunion", r.sunion("s1", "s2"), {"a", "b", "c", "d", "e"})
check("sdiff", r.sdiff("s1", "s2"), {"a", "b"})
check("sinterstore", r.sinterstore("s3", ["s1", "s2"]), 2)
check("smembers s3", r.smembers("s3"), {"c", "d"})
check("smove", r.smove("s1", "s2", "a"), True)
check("sismember", (r.sismember("s1", "a"), r.sismember("s2", "a")), (False, True))

# a sliding window of events in a sorted set
now = 1000.0
for i in range(100):
    r.zadd("window", {f"ev{i}": now + i})
check("zremrangebyscore", r.zremrangebyscore("window", "-inf", now + 49), 50)
check("zcard", r.zcard("window"), 50)
check("zrangebyscore", r.zrangebyscore("window", now + 98, "+inf"), ["ev98", "ev99"])
check("zremrangebyrank", r.zremrangebyrank("window", 0, 9), 10)
check("first left", r.zrange("window", 0, 0, withscores=True), [("ev60", now + 60)])
r.zadd("lex", {w: 0 for w in ["apple", "banana", "cherry", "date"]})
check("zrangebylex", r.zrangebylex("lex", "[b", "(d"), ["banana", "cherry"])
check("zlexcount", r.zlexcount("lex", "-", "+"), 4)

# hashes
check("hset", r.hset("h", mapping={"x": "1", "y": "2"}), 2)
check("hgetall", r.hgetall("h"), {"x": "1", "y": "2"})
check("hincrby", r.hincrby("h", "x", 10), 11)

# a pipeline is a transaction: MULTI ... EXEC, the replies in order
with r.pipeline() as p:
    p.set("p1", "a").incr("p2").get("p1").delete("p1")
    check("pipeline", p.execute(), [True, 1, "a", 1])
# a command failing inside EXEC: its error in its place, the others done
with r.pipeline() as p:
    p.set("p3", "x").lpush("p3", "y").set("p4", "z")
    try:
        p.execute()
        sys.exit("pipeline with a WRONGTYPE command raised nothing")
    except redis.ResponseError as e:
        check("error inside EXEC", "WRONGTYPE" in str(e), True)
check("the others ran", (r.get("p3"), r.get("p4")), ("x", "z"))

# WATCH: a change by another client between WATCH and EXEC aborts EXEC
with r.pipeline() as p:
    p.watch("w")
    r.set("w", "changed")  # another connection of the pool
    p.multi()
    p.set("w", "mine")
    try:
        p.execute()
        sys.exit("EXEC ran although the watched key changed")
    except redis.WatchError:
        pass
check("watched key kept", r.get("w"), "changed")

# optimistic locking under contention: threads with their own clients each
# add to a counter by GET and SET in a WATCH transaction (Redis.transaction
# runs the function again after each WatchError); no increment may be lost
r.set("counter", 0)
THREADS, EACH = 4, 150
calls = [0] * THREADS


def worker(k):
    c = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)

    def add_one(pipe):
        calls[k] += 1
        v = int(pipe.get("counter"))
        time.sleep(0.001)  # the window in which another thread's write aborts this one
        pipe.multi()
        pipe.set("counter", v + 1)

    for _ in range(EACH):
        c.transaction(add_one, "counter")


ts = [threading.Thread(target=worker, args=(k,)) for k in range(THREADS)]
for t in ts:
    t.start()
for t in ts:
    t.join()
check("counter after contended transactions", int(r.get("counter")), THREADS * EACH)
retried = sum(calls) - THREADS * EACH
check("some transactions were aborted by another's write", retried > 0, True)
print(f"{THREADS * EACH} contended increments, {retried} run again after a WatchError")

# scan_iter sees every key once
for i in range(500):
    r.set(f"scan:{i}", i)
seen = list(r.scan_iter(match="scan:*", count=37))
check("scan_iter", sorted(seen), sorted(f"scan:{i}" for i in range(500)))
check("dbsize", r.dbsize() >= 500, True)

# a work queue: a worker blocked in BLPOP / BRPOPLPUSH, served by another
# connection's push; a timeout is None
q = redis.Redis(host="127.0.0.1", port=port, decode_responses=True)
got = []
worker = threading.Thread(target=lambda: got.append(q.blpop(["jobs:high", "jobs:low"], timeout=10)))
worker.start()
time.sleep(0.2)
r.rpush("jobs:low", "job1")
worker.join()
check("blpop served", got, [("jobs:low", "job1")])
check("blpop timeout", q.blpop("jobs:none", timeout=0.1), None)
r.rpush("jobs:low", "job2")
check("brpoplpush", q.brpoplpush("jobs:low", "jobs:busy", timeout=1), "job2")
check("blmove", q.blmove("jobs:busy", "jobs:done", 1, "LEFT", "RIGHT"), "job2")
r.zadd("tasks", {"t1": 5, "t2": 1})
check("bzpopmin", q.bzpopmin("tasks", timeout=1), ("tasks", "t2", 1.0))

# pub/sub: a subscriber gets what is published, by channel and pattern
sub = redis.Redis(host="127.0.0.1", port=port, decode_responses=True).pubsub()
sub.subscribe("news")
sub.psubscribe("sport.*")
for _ in range(2):
    check("subscribed", sub.get_message(timeout=1)["type"] in ("subscribe", "psubscribe"), True)
check("publish to a channel", r.publish("news", "hello"), 1)
check("publish to a pattern", r.publish("sport.tennis", "ace"), 1)
m1, m2 = sub.get_message(timeout=1), sub.get_message(timeout=1)
check("message", (m1["type"], m1["channel"], m1["data"]), ("message", "news", "hello"))
check("pmessage", (m2["type"], m2["pattern"], m2["channel"], m2["data"]), ("pmessage", "sport.*", "sport.tennis", "ace"))
check("pubsub numsub", r.pubsub_numsub("news"), [("news", 1)])
check("pubsub numpat", r.pubsub_numpat(), 1)
sub.close()

# keys, bits, sorted-set algebra, SORT, random picks
r.set("greeting", "hi")
check("copy", r.copy("greeting", "greeting2"), True)
check("object encoding", r.object("encoding", "greeting2"), "embstr")
check("touch", r.touch("greeting", "greeting2", "missing"), 2)
check("setbit", r.setbit("bits", 7, 1), 0)
check("bitcount", r.bitcount("bits"), 1)
check("bitpos", r.bitpos("bits", 1), 7)
r.zadd("za", {"a": 1, "b": 2})
r.zadd("zb", {"b": 3, "c": 4})
check("zunionstore", r.zunionstore("zu", ["za", "zb"], aggregate="MAX"), 3)
check("zunion", r.zrange("zu", 0, -1, withscores=True), [("a", 1.0), ("b", 3.0), ("c", 4.0)])
check("zinter", r.zinter(["za", "zb"], withscores=True), [("b", 5.0)])
check("zrandmember", sorted(r.zrandmember("zu", 5)), ["a", "b", "c"])
check("hrandfield", r.hrandfield("missing"), None)
r.rpush("nums", 3, 1, 2)
check("sort", r.sort("nums", desc=True), ["3", "2", "1"])
check("sort store", r.sort("nums", store="sorted"), 3)
check("sorted", r.lrange("sorted", 0, -1), ["1", "2", "3"])

# the connection and the server
check("client list", any(c["name"] == "kv-redispy" for c in r.client_list()), True)
check("client info", r.client_info()["name"], "kv-redispy")
check("config set", r.config_set("slowlog-max-len", 64), True)
check("config get", r.config_get("slowlog-max-len"), {"slowlog-max-len": "64"})
check("slowlog len", isinstance(r.slowlog_len(), int), True)
check("role", r.role()[0], "master")
check("wait", r.wait(0, 0), 0)
print("kv_redispy: ok")
