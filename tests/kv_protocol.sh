#!/usr/bin/env bash
# examples/kv-server's protocol edge cases:
#  - an error reply never carries a client's bytes as they came: CR LF in an
#    unknown command's name or arguments cannot inject a reply; other
#    non-printable bytes are escaped; long names are cut
#  - inline commands are split as redis-cli and Redis split them (quotes,
#    escapes), with no limit on the word count below the 64 KiB line limit
#  - lengths that overflow are protocol errors, never wrapped around
#  - a command arriving a byte at a time, or a large argument in pieces, is
#    parsed exactly
# Usage: kv_protocol.sh KV_SERVER_BINARY
server=$1
source "$(dirname "$0")/kv_lib.sh"
kv_start proto --memory 128m
KV_PORT=$port PYTHONPATH=$(dirname "$0") python3 - <<'PY'
import time
from kv_resp import Conn, Err, resp, check, fail, port_from_env
port = port_from_env()

def replies(data, n):
    """Sends data on a new connection; reads n replies, then checks that
    nothing more comes within a second."""
    c = Conn(port)
    c.send(data)
    out = [c.reply() for _ in range(n)]
    c.s.settimeout(1)
    try:
        extra = c.s.recv(65536)
    except TimeoutError:
        extra = b""
    check(not extra and c.pos == len(c.buf), "%r: more than %d replies: %r" % (data[:60], n, extra))
    c.close()
    return out

# ---- error replies carry no raw client bytes
r = replies(resp(b"AB\r\n+OK\r\nx", b"y\r\n:1") + resp("PING"), 2)
check(isinstance(r[0], Err) and r[1] == "PONG", "CR LF in a command name: %r" % r)
check("\r" not in r[0] and "\n" not in r[0], "raw CR/LF in %r" % r[0])
check(r[0] == r"ERR unknown command 'AB\x0d\x0a+OK\x0d\x0ax', with args beginning with: 'y\x0d\x0a:1' ",
      "unknown command reply: %r" % r[0])
# (cut at a NUL byte, as Redis's %.128s cuts it)
r = replies(resp(b"N\x01\xff\x7f\x00z", b"a\x00b") + resp(b"CONFIG", b"\r\n-ERR fake\r\n"), 2)
check(r[0] == r"ERR unknown command 'N\x01\xff\x7f', with args beginning with: 'a' ", r[0])
check(r[1].startswith(r"ERR unknown subcommand '\x0d\x0a-ERR fake\x0d\x0a'"), r[1])
r = replies(resp(b"X" * 5000, b"a" * 5000, b"b"), 1)
check(len(r[0]) < 600 and r[0].startswith("ERR unknown command '" + "X" * 128 + "'"),
      "a long unknown name is cut at 128 bytes: %d bytes" % len(r[0]))
r = replies(b"NOPE \"a\\r\\nb\"\r\n", 1)
check(r[0] == r"ERR unknown command 'NOPE', with args beginning with: 'a\x0d\x0ab' ", r[0])
print("error replies: ok")

# ---- inline commands
r = replies(b'SET "a b" "c d"\r\nGET "a b"\r\nGET \'a b\'\r\n', 3)
check(r == ["OK", b"c d", b"c d"], "quoted words: %r" % r)
r = replies(b'ECHO "\\x41\\x42\\n\\r\\t\\b\\a\\\\\\"q"\r\nECHO \'it\\\'s\'\r\nECHO ""\r\n', 3)
check(r == [b"AB\n\r\t\b\a\\\"q", b"it's", b""], "escapes: %r" % r)
r = replies(b"\r\n  \t \r\nPING\r\n", 1)
check(r == ["PONG"], "blank lines are skipped: %r" % r)
for bad in [b'ECHO "abc\r\n', b"ECHO 'abc\r\n", b'ECHO "a"b\r\n', b"ECHO 'a'b\r\n"]:
    c = Conn(port)
    got = c.raw(bad)
    check(got == b"-ERR Protocol error: unbalanced quotes in request\r\n",
          "%r: %r" % (bad, got))
# many words: every one counts, up to the line limit and with no cut at 64
c = Conn(port)
c.pipeline([("SET", "w%d" % i, "1") for i in range(5000)])
for n in (63, 64, 65, 200, 5000):
    c.send(b"EXISTS " + b" ".join(b"w%d" % i for i in range(n)) + b"\r\n")
    got = c.reply()
    check(got == n, "EXISTS with %d words inline: %r" % (n, got))
long_line = b"EXISTS " + b" ".join(b"w%d" % (i % 5000) for i in range(9000)) + b"\r\n"
check(len(long_line) < 64 << 10, "the line is below the inline limit")
c.send(long_line)
check(c.reply() == 9000, "9000 words inline")
c = Conn(port)
got = c.raw(b"EXISTS " + b"w1 " * 30000 + b"\r\n")
check(got == b"-ERR Protocol error: too big inline request\r\n", "a line above 64 KiB: %r" % got[:80])
print("inline commands: ok")

# ---- lengths that overflow
for bad, what in [(b"*9999999999999999999\r\n", b"invalid multibulk length"),
                  (b"*18446744073709551617\r\n", b"invalid multibulk length"),
                  (b"*-9223372036854775809\r\n", b"invalid multibulk length"),
                  (b"*2147483648\r\n", b"invalid multibulk length"),
                  (b"*1\r\n$9999999999999999999\r\n", b"invalid bulk length"),
                  (b"*1\r\n$18446744073709551617\r\n", b"invalid bulk length"),
                  (b"*1\r\n$9223372036854775808\r\n", b"invalid bulk length"),
                  (b"*1\r\n$-9223372036854775808\r\n", b"invalid bulk length"),
                  (b"*1\r\n$536870913\r\n", b"invalid bulk length"),
                  (b"*1\r\n$-1\r\n", b"invalid bulk length"),
                  (b"*1\r\n$ 5\r\n", b"invalid bulk length"),
                  (b"*+1\r\n", b"invalid multibulk length"),
                  (b"*01\r\n", b"invalid multibulk length"),  # leading zeros, as Redis
                  (b"*-0\r\n", b"invalid multibulk length"),
                  (b"*1\r\n$04\r\n", b"invalid bulk length"),
                  (b"*1\r\n$-0\r\n", b"invalid bulk length"),
                  (b"*" + b"1" * 70000, b"too big mbulk count string"),
                  (b"*1\r\n$" + b"1" * 70000, b"too big bulk count string")]:
    c = Conn(port)
    got = c.raw(bad)
    check(got == b"-ERR Protocol error: " + what + b"\r\n", "%r: %r" % (bad[:40], got[:100]))
print("overflowing lengths: ok")
# Redis 7.0's limits, not older ones: more than 1,048,576 arguments, an
# argument of more than 64 MiB
c = Conn(port)
c.send(b"*1100001\r\n$6\r\nEXISTS\r\n" + b"$3\r\nnil\r\n" * 1100000)
check(c.reply() == 0, "EXISTS with 1,100,000 keys")
arg = b"e" * (70 << 20)
c.send(b"*2\r\n$4\r\nECHO\r\n$%d\r\n" % len(arg) + arg + b"\r\n")
check(c.reply() == arg, "ECHO of a 70 MiB argument")
del arg
check(c.cmd("CONFIG", "GET", "proto-max-bulk-len") == [b"proto-max-bulk-len", b"536870912"],
      "proto-max-bulk-len")
print("1,100,000 arguments and a 70 MiB one: ok")
c = Conn(port)
check(c.raw(b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n") == b"+PONG\r\n", "empty commands skipped")

# ---- parsing across reads
c = Conn(port)
cmd = resp("SET", "split", "x" * 100) + resp("GET", "split") + b"PING\r\n"
for i in range(len(cmd)):
    c.send(cmd[i:i + 1])
    if i % 37 == 0:
        time.sleep(0.001)
check([c.reply(), c.reply(), c.reply()] == ["OK", b"x" * 100, "PONG"], "a byte at a time")
big = bytes(range(256)) * (40 << 12)  # 40 MiB
head = b"*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%d\r\n" % len(big)
c.send(head)
for off in range(0, len(big), 3 << 20):
    c.send(big[off:off + (3 << 20)])
c.send(b"\r\n")
check(c.reply() == "OK", "a 40 MiB value")
check(c.cmd("GET", "big") == big, "the 40 MiB value back")
check(c.cmd("DEL", "big") == 1, "DEL big")
print("parsing across reads: ok")
PY
kv_kill
kv_check_log
echo "kv_protocol: ok"
