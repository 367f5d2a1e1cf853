#!/usr/bin/env bash
# examples/kv-server under a client that pipelines without pause:
#  - a flood that reads its replies: a second client's PINGs are answered
#    within a generous bound (1 s) all along
#  - a flood that never reads: the same, and the server's memory stays
#    bounded (it stops reading that client once 1 MiB of replies wait)
#  - replies held back that way all arrive, in order, once the client reads
#  - a client whose unsent replies would pass --client-output-buffer-limit
#    is disconnected; the others go on
#  - client-output-buffer-limit as Redis's: CONFIG GET/SET in its syntax,
#    no limit for normal clients by default (a 5 MiB reply arrives whole), a
#    subscriber over its soft limit for longer than its seconds disconnected
#  - a transaction's queued commands are bounded as the replies are: a
#    client queuing past the limit is told, disconnected and nothing of its
#    transaction runs; clients that disconnect inside MULTI have their
#    queues freed (the server does not grow by their sum)
# Usage: kv_flood.sh KV_SERVER_BINARY
server=$1
# (a sanitizer build's freed memory waits in its quarantine, 256 MiB by
# default: the checks of memory given back see it at 1 MiB)
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=1"
source "$(dirname "$0")/kv_lib.sh"
kv_start flood --memory 64m --client-output-buffer-limit 4m
KV_PORT=$port KV_PID=$pid PYTHONPATH=$(dirname "$0") python3 - <<'PY'
import os, socket, subprocess, sys, time
from kv_resp import Conn, Err, resp, rss_kib, check, fail, port_from_env
port, pid = port_from_env(), int(os.environ["KV_PID"])
BOUND = 1.0     # seconds: a PING answered later than this is a stall
RSS_GROWTH = 64 << 10  # KiB the server may grow by during a flood that never reads

# A flood client in its own process (so that it is not slowed by this
# one): 1 MiB blocks of pipelined commands, sent without pause; "read"
# also drains the replies in a thread.
FLOODER = r'''
import socket, sys, threading
port, mode = int(sys.argv[1]), sys.argv[2]
s = socket.create_connection(("127.0.0.1", port))
block = (b"PING\r\n" + b"*3\r\n$3\r\nSET\r\n$5\r\nflood\r\n$10\r\n0123456789\r\n" +
         b"*2\r\n$3\r\nGET\r\n$5\r\nflood\r\n") * 12000
def drain():
    while s.recv(1 << 20): pass
if mode == "read": threading.Thread(target=drain, daemon=True).start()
print("flooding", flush=True)
while True: s.sendall(block)
'''

def flood(mode):
    p = subprocess.Popen([sys.executable, "-c", FLOODER, str(port), mode], stdout=subprocess.PIPE)
    check(p.stdout.readline() == b"flooding\n", "the flood client did not start")
    time.sleep(0.3)  # let it fill the pipe
    return p

def measure(seconds, what):
    """PINGs from a second client for `seconds`; returns (count, worst latency, RSS peak)."""
    c = Conn(port, timeout=10)
    worst, n, peak = 0.0, 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t = time.monotonic()
        try:
            got = c.cmd("PING")
        except TimeoutError:
            fail("%s: a PING got no answer within 10 s" % what)
        dt = time.monotonic() - t
        check(got == "PONG", "%s: PING answered %r" % (what, got))
        worst, n = max(worst, dt), n + 1
        peak = max(peak, rss_kib(pid))
        time.sleep(0.01)
    c.close()
    return n, worst, peak

rss0 = rss_kib(pid)
for mode in ("read", "noread"):
    p = flood(mode)
    n, worst, peak = measure(4, "flood (%s)" % mode)
    p.kill(); p.wait()
    print("flood that %s: %d PINGs from another client, the slowest answered in %.1f ms; "
          "server RSS %d -> %d KiB" % ("reads its replies" if mode == "read" else "never reads",
                                       n, worst * 1e3, rss0, peak))
    check(worst < BOUND, "flood (%s): a PING waited %.2f s" % (mode, worst))
    check(n >= 50, "flood (%s): only %d PINGs answered in 4 s" % (mode, n))
    if mode == "noread":
        check(peak - rss0 < RSS_GROWTH,
              "flood that never reads: the server grew by %d KiB" % (peak - rss0))

# Replies held back until the client reads: all of them, in order.
c = Conn(port)
c.cmd("SET", "v", os.urandom(200 << 10))
v = c.cmd("GET", "v")
c.send(b"".join(resp("GET", "v") + resp("ECHO", str(i)) for i in range(300)))  # 60 MB of replies
time.sleep(1)
held = rss_kib(pid)
check(held - rss0 < RSS_GROWTH, "replies held back: the server grew by %d KiB" % (held - rss0))
for i in range(300):
    check(c.reply() == v and c.reply() == str(i).encode(), "reply %d held back" % i)
print("300 replies of 200 KiB held back while the client did not read (server RSS %d KiB), "
      "then all received in order" % held)

# The hard limit: a reply that would leave more than 4 MiB unsent.
c.cmd("SET", "huge", b"h" * (5 << 20))
other = Conn(port)
c.send(resp("GET", "huge"))
try:
    got = c.reply()
    fail("a 5 MiB reply above a 4 MiB limit was sent: %r" % got[:20])
except (EOFError, ConnectionResetError):
    pass
check(other.cmd("PING") == "PONG", "another client after the disconnection")
info = other.cmd("INFO", "stats").decode()
check("client_output_limit_disconnections:1" in info, info)
print("a client above the output limit disconnected; the others go on")

# MULTI's queue: 3.5 MiB of SETs queued and run by EXEC, within the limit;
# each value its own, as sent (the arguments were copied out of the input,
# whose buffer has been reused many times since)
val = b"q" * (64 << 10)
vals = [bytes([65 + i % 26]) * (64 << 10) + str(i).encode() for i in range(56)]
c = Conn(port)
check(c.cmd("MULTI") == "OK", "MULTI")
n = 56
got = c.pipeline([("SET", "q%d" % i, vals[i]) for i in range(n)])
check(got == ["QUEUED"] * n, "queued: %r" % set(got))
r = c.cmd("EXEC")
check(r == ["OK"] * n, "EXEC of 3.5 MiB: %r" % r[:3])
check(all(other.cmd("GET", "q%d" % i) == vals[i] for i in range(n)), "values set by EXEC")
other.cmd("DEL", *["q%d" % i for i in range(n)])
# past the limit: told, disconnected, nothing run
check(c.cmd("MULTI") == "OK", "MULTI")
c.send(b"".join(resp("SET", "q%d" % i, val) for i in range(80)) + resp("EXEC"))
replies = []
try:
    while True:
        replies.append(c.reply())
except (EOFError, ConnectionResetError):
    pass
check(len(replies) < 80 and replies[:-1] == ["QUEUED"] * (len(replies) - 1) and
      isinstance(replies[-1], Err) and "queued commands passed" in replies[-1],
      "a transaction past the limit: %d replies, the last %r" % (len(replies), replies[-1:]))
check(other.cmd("EXISTS", "q0") == 0, "a transaction past the limit ran")
print("a transaction queuing past the limit: told after %d commands, disconnected, nothing run"
      % (len(replies) - 1))
# clients gone inside MULTI: their queues freed
base = rss_kib(pid)
for k in range(24):
    q = Conn(port)
    q.cmd("MULTI")
    got = q.pipeline([("SET", "q%d" % i, val) for i in range(50)])
    check(got == ["QUEUED"] * 50, "queued: %r" % set(got))
    q.close()
    other.cmd("PING")
grown = rss_kib(pid) - base
check(grown < 32 << 10, "24 clients gone with 3 MiB queued each: the server grew by %d KiB" % grown)
check(other.cmd("EXISTS", "q0") == 0, "a transaction of a client gone ran")
print("24 clients gone inside MULTI with 3 MiB queued each: the server grew by %d KiB" % grown)

# client-output-buffer-limit as Redis has it: CONFIG GET shows both classes
got = other.cmd("CONFIG", "GET", "client-output-buffer-limit")
check(got == [b"client-output-buffer-limit",
              b"normal 4194304 0 0 slave 0 0 0 pubsub 4194304 0 0"], "CONFIG GET: %r" % got)
for bad in ("normal 1x 0 0", "normal 0 0", "bogus 0 0 0", "normal 0 0 -1"):
    r = other.cmd("CONFIG", "SET", "client-output-buffer-limit", bad)
    check(isinstance(r, Err) and "Invalid argument" in r, "CONFIG SET %r: %r" % (bad, r))
# no limit for normal clients (Redis's default): the 5 MiB reply arrives whole
check(other.cmd("CONFIG", "SET", "client-output-buffer-limit",
                "normal 0 0 0 replica 256mb 64mb 60 pubsub 32mb 8mb 60") == "OK", "CONFIG SET")
got = other.cmd("CONFIG", "GET", "client-output-buffer-limit")[1]
check(got == b"normal 0 0 0 slave 0 0 0 pubsub 33554432 8388608 60", "CONFIG GET: %r" % got)
c = Conn(port)
c.send(resp("GET", "huge"))
time.sleep(0.5)
check(c.reply() == b"h" * (5 << 20), "a 5 MiB reply without a normal limit")
print("without a normal class limit, a 5 MiB reply read late arrives whole")
# a subscriber that does not read, past the pubsub soft limit for over
# 1 s while messages keep coming: disconnected, though under no hard limit
check(other.cmd("CONFIG", "SET", "client-output-buffer-limit", "pubsub 0 1mb 1") == "OK", "SET")
before = int(other.info("client_output_limit_disconnections"))
sub = Conn(port)
sub.send(resp("SUBSCRIBE", "news"))
check(sub.reply() == [b"subscribe", b"news", 1], "SUBSCRIBE")
sub.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
msg = b"m" * (64 << 10)
end = time.monotonic() + 10
while time.monotonic() < end and other.cmd("PUBLISH", "news", msg) == 1:
    time.sleep(0.01)
check(other.cmd("PUBLISH", "news", msg) == 0, "the subscriber past its soft limit stayed")
check(int(other.info("client_output_limit_disconnections")) == before + 1, "not counted")
print("a subscriber over the pubsub soft limit for more than its second: disconnected")
PY
kv_kill
kv_check_log
echo "kv_flood: ok"
