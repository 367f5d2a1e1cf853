"""tests/kv_blocking.py KV_PORT REDIS_PORT: the blocking pops and pub/sub,
which take several connections and time, against kv-server and a real
redis-server.

Each scenario runs on one server, then on the other, with connections of
its own; what it observes (the replies each client got, in the order it
got them) must be equal, and each asserts what the commands must do
whatever the server: the clients blocked on a key are served in the order
they blocked, by a push from another client or by one inside EXEC (after
EXEC), a timeout answers a null array within a generous bound, a blocked
client that disconnects is forgotten, a key deleted or given another type
leaves its clients waiting, BLMOVE serves on, CLIENT UNBLOCK and CLIENT
KILL end a wait; pub/sub delivers messages in the order published to
channel and pattern subscribers, PUBSUB counts them, and a subscriber that
reads nothing is disconnected once its output passes the limit (the servers
are started with a 1 MiB limit for pub/sub clients).  A step waits for a
client to block through INFO's blocked_clients, never by sleeping alone.
"""
import socket
import sys
import time

from kv_resp import Conn, Err, resp

kv_port, redis_port = int(sys.argv[1]), int(sys.argv[2])
failures = []


def info(conn, field):
    txt = conn.cmd("INFO", "all").decode()
    for line in txt.split("\r\n"):
        if line.startswith(field + ":"):
            return line.split(":", 1)[1]
    return None


def wait_blocked(ctl, n, what=""):
    """Until n clients are blocked (at most 10 s)."""
    for _ in range(1000):
        if int(info(ctl, "blocked_clients")) == n:
            return
        time.sleep(0.01)
    raise AssertionError("%s: blocked_clients never reached %d" % (what, n))


def expect(what, got, want):
    if got != want:
        raise AssertionError("%s: got %r, want %r" % (what, got, want))


def timed_reply(conn, limit=10):
    """The next reply and how long it took."""
    t = time.monotonic()
    conn.s.settimeout(limit)
    r = conn.reply()
    return r, time.monotonic() - t


def quiet(conn, secs=0.2):
    """Whether the connection got nothing for secs (a client still blocked)."""
    if len(conn.buf) > conn.pos:
        return False
    conn.s.settimeout(secs)
    try:
        conn.s.recv(1, socket.MSG_PEEK)
        return False
    except socket.timeout:
        return True
    finally:
        conn.s.settimeout(30)


def conns(port, n):
    return [Conn(port) for _ in range(n)]


# ---- the scenarios: each returns what it observed --------------------------
def fifo(port):
    """Three clients block on a list; a push of two serves the first two in
    the order they blocked, the third waits for the next push."""
    ctl, p, *w = conns(port, 5)
    ctl.cmd("FLUSHALL")
    for i, c in enumerate(w):
        c.send(resp("BLPOP", "q", "0"))
        wait_blocked(ctl, i + 1, "fifo")
    out = [p.cmd("RPUSH", "q", "a", "b"), w[0].reply(), w[1].reply()]
    expect("fifo: the first blocked, served first", out[1:], [[b"q", b"a"], [b"q", b"b"]])
    out.append(quiet(w[2]))
    expect("fifo: the third still waits", out[-1], True)
    wait_blocked(ctl, 1)
    out += [p.cmd("LPUSH", "q", "c"), w[2].reply(), p.cmd("EXISTS", "q"), info(ctl, "blocked_clients")]
    expect("fifo: the third served", out[-3:], [[b"q", b"c"], 0, "0"])
    return out


def several_keys(port):
    """A client blocked on several keys is served by the first written; the
    element popped from the end it asked for; keys named twice count once."""
    ctl, p, a, b = conns(port, 4)
    ctl.cmd("FLUSHALL")
    a.send(resp("BRPOP", "k1", "k2", "k1", "0"))
    wait_blocked(ctl, 1)
    b.send(resp("BLPOP", "k2", "0"))
    wait_blocked(ctl, 2)
    out = [p.cmd("RPUSH", "k2", "x", "y", "z"), a.reply(), b.reply(), p.cmd("LRANGE", "k2", "0", "-1")]
    expect("several keys", out[1:], [[b"k2", b"z"], [b"k2", b"x"], [b"y"]])
    return out


def timeouts(port):
    """Timeouts answer a null array (each blocking command), the earliest
    first; a client waiting for ever does not time out."""
    ctl, a, b, c, d, e, f = conns(port, 7)
    ctl.cmd("FLUSHALL")
    d.send(resp("BLPOP", "never", "0"))
    a.send(resp("BLPOP", "t1", "0.6"))
    b.send(resp("BZPOPMIN", "t2", "0.2"))
    c.send(resp("BLMOVE", "t3", "dst", "LEFT", "RIGHT", "0.4"))
    e.send(resp("BLMPOP", "0.3", "2", "t4", "t5", "LEFT", "COUNT", "3"))
    f.send(resp("BRPOPLPUSH", "t6", "dst", "0.1"))
    wait_blocked(ctl, 6, "timeouts")
    out = []
    for conn, least in ((f, 0.05), (b, 0.1), (e, 0.2), (c, 0.3), (a, 0.5)):
        r, took = timed_reply(conn)
        out.append(r)
        if r is not None or took > 5:
            raise AssertionError("timeouts: got %r after %.2f s" % (r, took))
    expect("timeouts: the one without one still waits", quiet(d), True)
    out.append(info(ctl, "blocked_clients"))
    expect("timeouts: one left blocked", out[-1], "1")
    d.close()
    wait_blocked(ctl, 0)
    return out


def exec_serves(port):
    """A push inside MULTI serves after EXEC, with what EXEC left; a push
    undone inside it serves nothing; inside MULTI a blocking pop does not
    block."""
    ctl, p, a = conns(port, 3)
    ctl.cmd("FLUSHALL")
    a.send(resp("BLPOP", "q", "0"))
    wait_blocked(ctl, 1)
    out = [p.cmd("MULTI"), p.cmd("RPUSH", "q", "a", "b"), p.cmd("LPOP", "q"), p.cmd("LLEN", "q")]
    expect("exec: still blocked while queued", quiet(a), True)
    out += [p.cmd("EXEC"), a.reply(), p.cmd("EXISTS", "q")]
    expect("exec: served after it", out[-3:], [[2, b"a", 1], [b"q", b"b"], 0])
    a.send(resp("BLPOP", "q", "0"))
    wait_blocked(ctl, 1)
    out += [p.cmd("MULTI"), p.cmd("RPUSH", "q", "x"), p.cmd("DEL", "q"), p.cmd("EXEC")]
    out.append(quiet(a))
    expect("exec: a push undone serves nothing", out[-1], True)
    out += [p.cmd("MULTI"), p.cmd("RPUSH", "q", "y"), p.cmd("PEXPIRE", "q", "0"), p.cmd("EXEC")]
    out.append(quiet(a))
    expect("exec: a push expired at once serves nothing", out[-1], True)
    out += [p.cmd("RPUSH", "q", "z"), a.reply()]
    expect("exec: then served", out[-1], [b"q", b"z"])
    # inside MULTI: no blocking, a null reply of each command's kind
    out += [p.cmd("MULTI")] + [p.cmd(*c) for c in (
        ("BLPOP", "e", "0"), ("BRPOPLPUSH", "e", "d", "0"), ("BLMOVE", "e", "d", "LEFT", "LEFT", "0"),
        ("BZPOPMIN", "e", "0"), ("BLMPOP", "0", "1", "e", "LEFT"), ("BZMPOP", "0", "1", "e", "MAX"),
        ("RPUSH", "e", "v"), ("BRPOP", "e", "0"))] + [p.cmd("EXEC")]
    return out


def disconnect(port):
    """A blocked client that goes away is forgotten: the next one is served,
    nothing is popped for it."""
    ctl, p, a, b = conns(port, 4)
    ctl.cmd("FLUSHALL")
    a.send(resp("BLPOP", "q", "0"))
    wait_blocked(ctl, 1)
    b.send(resp("BLPOP", "q", "0"))
    wait_blocked(ctl, 2)
    a.close()
    wait_blocked(ctl, 1, "disconnect")
    out = [p.cmd("RPUSH", "q", "x", "y"), b.reply(), p.cmd("LRANGE", "q", "0", "-1")]
    expect("disconnect", out[1:], [[b"q", b"x"], [b"y"]])
    # one that sent more commands after BLPOP, and closed
    c = Conn(port)
    c.send(resp("BLPOP", "q2", "0") + resp("SET", "after", "1"))
    wait_blocked(ctl, 1)
    c.close()
    wait_blocked(ctl, 0)
    out += [p.cmd("RPUSH", "q2", "v"), p.cmd("LLEN", "q2"), p.cmd("GET", "after")]
    expect("disconnect: nothing popped, nothing run", out[-2:], [1, None])
    return out


def pipelined(port):
    """Commands sent after a blocking one run once it is served, in order."""
    ctl, p, a = conns(port, 3)
    ctl.cmd("FLUSHALL")
    a.send(resp("BLPOP", "q", "0") + resp("PING") + resp("INCR", "n") + resp("BLPOP", "q", "0") +
           resp("GET", "n"))
    wait_blocked(ctl, 1)
    out = [p.cmd("GET", "n"), p.cmd("RPUSH", "q", "v"), a.reply(), a.reply(), a.reply()]
    wait_blocked(ctl, 1)
    out += [p.cmd("GET", "n"), p.cmd("RPUSH", "q", "w"), a.reply(), a.reply()]
    expect("pipelined", out, [None, 1, [b"q", b"v"], "PONG", 1, b"1", 1, [b"q", b"w"], b"1"])
    return out


def retyped(port):
    """A key deleted, or given another type, while clients wait: they wait
    on; a sorted set serves its own clients, a list its own."""
    ctl, p, a, b = conns(port, 4)
    ctl.cmd("FLUSHALL")
    a.send(resp("BLPOP", "k", "0"))
    wait_blocked(ctl, 1)
    b.send(resp("BZPOPMIN", "k", "0"))
    wait_blocked(ctl, 2)
    out = [p.cmd("SET", "k", "str"), quiet(a), p.cmd("DEL", "k"), p.cmd("ZADD", "k", "1", "m", "2", "n"),
           b.reply(), quiet(a), p.cmd("ZRANGE", "k", "0", "-1"), p.cmd("DEL", "k"),
           p.cmd("RPUSH", "k", "v"), a.reply(), p.cmd("EXISTS", "k")]
    expect("retyped", out, ["OK", True, 1, 2, [b"k", b"m", b"1"], True, [b"n"], 1, 1, [b"k", b"v"], 0])
    return out


def blmove_chain(port):
    """BLMOVE served pushes onto its destination, which serves its own
    client; a destination of another type: WRONGTYPE, the source as it was."""
    ctl, p, a, b = conns(port, 4)
    ctl.cmd("FLUSHALL")
    a.send(resp("BLMOVE", "src", "dst", "LEFT", "RIGHT", "0"))
    wait_blocked(ctl, 1)
    b.send(resp("BLPOP", "dst", "0"))
    wait_blocked(ctl, 2)
    out = [p.cmd("RPUSH", "src", "v1", "v2"), a.reply(), b.reply(), p.cmd("LRANGE", "src", "0", "-1"),
           p.cmd("EXISTS", "dst")]
    expect("blmove chain", out, [2, b"v1", [b"dst", b"v1"], [b"v2"], 0])
    p.cmd("DEL", "src")
    a.send(resp("BRPOPLPUSH", "src", "str", "0"))
    wait_blocked(ctl, 1)
    out += [p.cmd("SET", "str", "x"), p.cmd("RPUSH", "src", "w"), a.reply(), p.cmd("LRANGE", "src", "0", "-1")]
    expect("blmove wrongtype", out[-2:], [Err("WRONGTYPE Operation against a key holding the wrong kind of value"), [b"w"]])
    # a rotation onto itself
    a.send(resp("BLMOVE", "r", "r", "RIGHT", "LEFT", "0"))
    wait_blocked(ctl, 1)
    out += [p.cmd("RPUSH", "r", "1"), a.reply(), p.cmd("LRANGE", "r", "0", "-1")]
    return out


def counts(port):
    """BLMPOP and BZMPOP served with COUNT; the writes each counted."""
    ctl, p, a, b = conns(port, 4)
    ctl.cmd("FLUSHALL")
    a.send(resp("BLMPOP", "0", "2", "l1", "l2", "RIGHT", "COUNT", "2"))
    b.send(resp("BZMPOP", "0", "1", "z", "MAX", "COUNT", "5"))
    wait_blocked(ctl, 2)
    before = int(info(ctl, "rdb_changes_since_last_save"))
    out = [p.cmd("RPUSH", "l2", "a", "b", "c"), a.reply(), p.cmd("ZADD", "z", "1", "x", "2", "y"), b.reply()]
    out.append(int(info(ctl, "rdb_changes_since_last_save")) - before)
    a.send(resp("BLPOP", "l3", "0"))
    b.send(resp("BZPOPMAX", "z2", "0"))
    wait_blocked(ctl, 2)
    before = int(info(ctl, "rdb_changes_since_last_save"))
    out += [p.cmd("RPUSH", "l3", "a", "b"), a.reply(), p.cmd("ZADD", "z2", "1", "x", "2", "y"), b.reply()]
    out.append(int(info(ctl, "rdb_changes_since_last_save")) - before)
    return out


def unblock_kill(port):
    """CLIENT UNBLOCK: a timeout's reply, or an error; CLIENT KILL of a
    blocked client."""
    ctl, p, a = conns(port, 3)
    ctl.cmd("FLUSHALL")
    aid = a.cmd("CLIENT", "ID")
    out = [p.cmd("CLIENT", "UNBLOCK", aid)]
    a.send(resp("BLPOP", "q", "0"))
    wait_blocked(ctl, 1)
    out += [p.cmd("CLIENT", "UNBLOCK", aid), a.reply()]
    a.send(resp("BZPOPMIN", "q", "0"))
    wait_blocked(ctl, 1)
    out += [p.cmd("CLIENT", "UNBLOCK", aid, "ERROR"), a.reply(), p.cmd("CLIENT", "UNBLOCK", aid, "TIMEOUT")]
    expect("client unblock", out, [0, 1, None, 1, Err("UNBLOCKED client unblocked via CLIENT UNBLOCK"), 0])
    a.send(resp("BLPOP", "q", "0"))
    wait_blocked(ctl, 1)
    out += [p.cmd("CLIENT", "KILL", "ID", aid)]
    wait_blocked(ctl, 0)
    out += [p.cmd("RPUSH", "q", "v"), p.cmd("LLEN", "q")]
    expect("client kill", out[-3:], [1, 1, 1])
    return out


def bgsave(port):
    """A client blocked while a background save runs is served as ever."""
    ctl, p, a = conns(port, 3)
    ctl.cmd("FLUSHALL")
    ctl.cmd("SET", "x", "1")
    a.send(resp("BLPOP", "q", "0"))
    wait_blocked(ctl, 1)
    r = p.cmd("BGSAVE")
    out = [r.startswith("Background saving") if isinstance(r, str) else r, p.cmd("RPUSH", "q", "v"), a.reply()]
    for _ in range(500):
        if info(ctl, "rdb_bgsave_in_progress") == "0":
            break
        time.sleep(0.02)
    return out


def messages(conn, n):
    return [conn.reply() for _ in range(n)]


def pubsub(port):
    """Messages in the order published, to channel and pattern subscribers;
    PUBLISH counts the receivers; PUBSUB's counts; a subscriber that leaves
    is no longer counted."""
    ctl, p, s1, s2, s3 = conns(port, 5)
    out = [s1.cmd("SUBSCRIBE", "news"), s1.cmd("SUBSCRIBE", "sport", "news"),
           s2.cmd("PSUBSCRIBE", "n?ws"), s2.cmd("PSUBSCRIBE", "s*"), s3.cmd("SUBSCRIBE", "news")]
    s1.reply()
    out += [p.cmd("PUBLISH", "news", "m1"), p.cmd("PUBLISH", "sport", "m2"), p.cmd("PUBLISH", "other", "m3"),
            p.cmd("PUBLISH", "news", "m4")]
    expect("publish receivers", out[-4:], [3, 2, 0, 3])
    out += messages(s1, 3) + messages(s2, 3) + messages(s3, 2)
    expect("s1's messages", out[-8:-5], [[b"message", b"news", b"m1"], [b"message", b"sport", b"m2"],
                                          [b"message", b"news", b"m4"]])
    expect("s2's messages", out[-5:-2], [[b"pmessage", b"n?ws", b"news", b"m1"],
                                          [b"pmessage", b"s*", b"sport", b"m2"],
                                          [b"pmessage", b"n?ws", b"news", b"m4"]])
    out += [p.cmd("PUBSUB", "NUMSUB", "news", "sport", "nothing"), p.cmd("PUBSUB", "NUMPAT"),
            sorted(p.cmd("PUBSUB", "CHANNELS")), p.cmd("PUBSUB", "CHANNELS", "s*")]
    # subscribed mode: PING, refused commands, messages between replies
    s1.send(resp("PING", "x"))
    out += [s1.reply(), s1.cmd("GET", "k"), p.cmd("PUBLISH", "sport", "m5"), s1.reply(), s1.cmd("PING")]
    s3.close()
    for _ in range(500):
        if p.cmd("PUBSUB", "NUMSUB", "news")[1] == 1:
            break
        time.sleep(0.01)
    out += [p.cmd("PUBSUB", "NUMSUB", "news"), p.cmd("PUBLISH", "news", "m6"), s1.reply()]
    s2.reply()  # its pmessage for m5
    s2.reply()  # ... and m6
    out += [s1.cmd("UNSUBSCRIBE", "news"), s1.cmd("UNSUBSCRIBE", "sport"), s1.cmd("GET", "k"),
            s2.cmd("PUNSUBSCRIBE"), s2.reply(), s2.cmd("PING"), p.cmd("PUBSUB", "NUMPAT")]
    # a pattern's glob, and shard channels
    s2.cmd("PSUBSCRIBE", "a[bc]*\\?")
    out += [p.cmd("PUBLISH", "ab?", "1"), p.cmd("PUBLISH", "ac-x?", "2"), p.cmd("PUBLISH", "ad?", "3"),
            p.cmd("PUBLISH", "ab", "4"), s2.reply(), s2.reply(), s2.cmd("RESET"), s2.cmd("GET", "k")]
    s4 = Conn(port)
    out += [s4.cmd("SSUBSCRIBE", "sh"), p.cmd("SPUBLISH", "sh", "hi"), s4.reply(), p.cmd("PUBLISH", "sh", "no"),
            p.cmd("PUBSUB", "SHARDNUMSUB", "sh"), p.cmd("PUBSUB", "SHARDCHANNELS"), s4.cmd("SUNSUBSCRIBE"),
            s4.cmd("PING")]
    return out


def slow_subscriber(port):
    """A subscriber that reads nothing is disconnected once its unsent
    messages pass the limit (1 MiB here); the others get theirs."""
    ctl, p, good = conns(port, 3)
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(("127.0.0.1", port))
    slow.sendall(resp("SUBSCRIBE", "flood"))
    good.cmd("SUBSCRIBE", "flood")
    for _ in range(500):
        if p.cmd("PUBSUB", "NUMSUB", "flood")[1] == 2:
            break
        time.sleep(0.01)
    msg = "x" * 65536
    sent = 0
    for i in range(128):  # 8 MiB
        p.cmd("PUBLISH", "flood", msg)
        sent += 1
        r = good.reply()
        assert r[2] == msg.encode()
        if p.cmd("PUBSUB", "NUMSUB", "flood")[1] == 1:
            break
    out = [p.cmd("PUBSUB", "NUMSUB", "flood")]
    expect("slow subscriber disconnected", out[0], [b"flood", 1])
    slow.close()
    good.close()
    return out


def wait_cmd(port):
    """WAIT for replicas a server has none of: 0 at once for none, else 0
    once the timeout passes; CLIENT UNBLOCK ends one that waits for ever."""
    ctl, a, p = conns(port, 3)
    out = [a.cmd("WAIT", "0", "0")]
    a.send(resp("WAIT", "1", "300"))
    wait_blocked(ctl, 1, "wait")
    r, took = timed_reply(a)
    out.append(r)
    if r != 0 or took < 0.2 or took > 5:
        raise AssertionError("WAIT 1 300: %r after %.2f s" % (r, took))
    a.send(resp("WAIT", "2", "0"))
    wait_blocked(ctl, 1, "wait forever")
    out += [quiet(a), p.cmd("CLIENT", "UNBLOCK", aid(a, p)), a.reply()]
    return out


def aid(conn, other):
    """conn's client id, found from another connection (conn is blocked)."""
    for line in other.cmd("CLIENT", "LIST").decode().split("\n"):
        if "cmd=wait" in line:
            return line.split(" ")[0].split("=")[1]
    raise AssertionError("no client in WAIT")


SCENARIOS = [fifo, several_keys, timeouts, exec_serves, disconnect, pipelined, retyped, blmove_chain,
             counts, unblock_kill, bgsave, wait_cmd, pubsub, slow_subscriber]

for sc in SCENARIOS:
    got = {}
    for name, port in (("kv-server", kv_port), ("redis-server", redis_port)):
        try:
            got[name] = sc(port)
        except (AssertionError, EOFError, OSError) as e:
            failures.append("%s on %s: %s" % (sc.__name__, name, e))
            got[name] = "failed"
    if got["kv-server"] != got["redis-server"] and "failed" not in got.values():
        failures.append("%s: kv-server observed\n   %r\n redis-server observed\n   %r" %
                        (sc.__name__, got["kv-server"], got["redis-server"]))
    print("%-16s %s" % (sc.__name__, "differs or failed" if any(sc.__name__ in f for f in failures) else "ok"))

for f in failures:
    print("FAIL " + f)
sys.exit(1 if failures else 0)
