#!/usr/bin/env bash
# examples/kv-server with the unmodified redis-cli and redis-benchmark:
# commands, malformed input, BGSAVE and reload, kill -9 during BGSAVE.
# Usage: kv_server.sh KV_SERVER_BINARY MECHANISM
set -euo pipefail
server=$1 mech=$2
for t in redis-cli redis-benchmark python3; do
    command -v $t >/dev/null || { echo "missing $t (scripts/install-deps.sh installs it)"; exit 1; }
done
dir=$(mktemp -d)
pid=
cleanup() {
    local rc=$?
    [[ -n $pid ]] && kill -9 $pid 2>/dev/null
    if ((rc != 0)) && [[ -s $dir/err ]]; then echo "kv-server's stderr:"; cat "$dir/err"; fi
    rm -rf "$dir"
}
trap cleanup EXIT
trap 'echo "kv_server.sh ($mech): failed at line $LINENO" >&2' ERR

# A sanitizer build's server stops at its first report; one that came just
# before the server was killed is caught here.
check_log() {
    if grep -q 'Sanitizer' "$dir/err" 2>/dev/null; then
        cat "$dir/err"; echo "kv-server: a sanitizer reported an error"; exit 1
    fi
}

start() {
    check_log
    # a new server writes new files: a restarted server's log must not be
    # read before the shell has truncated the previous one
    rm -f "$dir/out" "$dir/err"
    "$server" --port 0 --dir "$dir" --memory 256m --mechanism "$mech" >"$dir/out" 2>"$dir/err" &
    pid=$!
    for _ in $(seq 600); do # 30 s: loading the image takes a while in a sanitizer build
        port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$dir/out" 2>/dev/null || true)
        [[ -n $port ]] && return 0
        kill -0 $pid 2>/dev/null || { cat "$dir/err"; echo "kv-server did not start"; exit 1; }
        sleep 0.05
    done
    echo "kv-server did not say where it listens"; exit 1
}
cli() { redis-cli -p "$port" "$@"; }
expect() { # expect WANT CMD...
    local want=$1; shift
    local got; got=$(cli "$@")
    [[ "$got" == "$want" ]] || { echo "redis-cli $*: got '$got', want '$want'"; exit 1; }
}
loaded() { # the image loaded at start (lazily) is wholly in place: BGSAVE may run
    for _ in $(seq 600); do
        cli INFO persistence | grep -q '^loading:0' && return 0
        sleep 0.05
    done
    echo "still loading after 30 s"; exit 1
}
wait_save() { # wait until LASTSAVE moves past $1 and no save runs
    for _ in $(seq 600); do
        local info; info=$(cli INFO persistence)
        if [[ $(cli LASTSAVE) -gt $1 ]] || grep -q 'rdb_bgsave_in_progress:0' <<<"$info" && \
           grep -q "rdb_changes_since_last_save:0" <<<"$info"; then return 0; fi
        sleep 0.05
    done
    echo "BGSAVE did not finish"; exit 1
}

start
expect PONG PING
expect OK SET greeting hello
expect hello GET greeting
expect 1 INCR counter
expect 2 INCR counter
expect "ERR value is not an integer or out of range" INCR greeting
expect 2 EXISTS greeting counter nothere
expect 2 DBSIZE
expect 1 DEL counter
expect 1 DBSIZE
expect "abc" ECHO abc
expect "" GET nothere
expect "ERR wrong number of arguments for 'get' command" GET
expect "ERR unknown command 'NOPE', with args beginning with: " NOPE

# malformed input: an error, and the server keeps serving.  First some
# inputs whose error is known; then random and malformed RESP in batches
# (random bytes, truncated and mutated commands, bad and huge lengths,
# binary garbage, valid commands interleaved, whose answers are checked),
# each on its own connection.  After every batch the server must be alive,
# answer PING, and return every value set before (binary values set at the
# start and those the valid commands set), byte for byte.  The seed is
# KV_FUZZ_SEED (default 7).
python3 - "$port" "$pid" <<'PY'
import os, random, socket, sys
port, pid = int(sys.argv[1]), int(sys.argv[2])
def fail(msg):
    sys.exit("malformed input: FAIL: " + msg)
def talk(data, expect_close):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.sendall(data)
    got = b""
    try:
        while True:
            b = s.recv(65536)
            if not b: break
            got += b
            if not expect_close and got.endswith(b"\r\n"): break
    except socket.timeout:
        pass
    s.close()
    return got
for bad, what in [(b"*abc\r\n", b"invalid multibulk length"),
                  (b"*1\r\n$99999999999\r\n", b"invalid bulk length"),
                  (b"*2\r\n$3\r\nGET\r\n:5\r\n", b"expected '$'"),
                  (b"*1\r\n$4\r\nPINGxx", b"not terminated by CRLF"),
                  (b"*-5\r\n*1\r\n$4\r\nPING\r\n", b"PONG")]:
    got = talk(bad, bad.startswith(b"*1\r\n$9") or b"abc" in bad or b":5" in bad or b"xx" in bad)
    assert what in got, (bad, got)

seed = int(os.environ.get("KV_FUZZ_SEED", "7"))
rng = random.Random(seed)
BATCHES, PER_BATCH = 40, 50
INTENDED = BATCHES * PER_BATCH
MAX_BULK, MAX_ARGS, MAX_INLINE = 512 << 20, 2**31 - 1, 64 << 10  # examples/kv-server/resp.h

def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out

class Reader:
    """RESP2 replies: b"+OK" / b"-ERR .." / b":5" as their line, bulk strings
    as bytes (None for nil), arrays as lists."""
    def __init__(self, s): self.s, self.buf, self.pos = s, bytearray(), 0
    def fill(self):
        b = self.s.recv(1 << 20)
        if not b: raise EOFError("the server closed the connection")
        if self.pos > (1 << 20): del self.buf[:self.pos]; self.pos = 0
        self.buf += b
    def line(self):
        while (end := self.buf.find(b"\r\n", self.pos)) < 0: self.fill()
        l, self.pos = bytes(self.buf[self.pos:end]), end + 2
        return l
    def exact(self, n):
        while len(self.buf) - self.pos < n: self.fill()
        d, self.pos = bytes(self.buf[self.pos:self.pos + n]), self.pos + n
        return d
    def reply(self):
        l = self.line()
        if l[:1] in (b"+", b"-", b":"): return l
        if l[:1] == b"$":
            n = int(l[1:])
            if n < 0: return None
            d = self.exact(n + 2)
            if d[-2:] != b"\r\n": fail("bulk reply not terminated by CRLF: %r" % d[-10:])
            return d[:-2]
        if l[:1] == b"*": return [self.reply() for _ in range(int(l[1:]))]
        fail("not a RESP reply: %r" % l[:80])

def short(v):
    return v[:60] + b"..." if isinstance(v, bytes) and len(v) > 60 else v

def connect():
    try:
        return socket.create_connection(("127.0.0.1", port), timeout=10)
    except OSError as e:
        fail("cannot connect: %s (server %s)" % (e, "alive" if alive() else "dead"))

def alive():
    try:
        with open("/proc/%d/stat" % pid) as f: state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")

def value():
    """A binary value, with the bytes RESP cares about (CR, LF, NUL, '*', '$')."""
    n = rng.choices([0, 1, 2, rng.randrange(3, 100), rng.randrange(100, 3000), 70000],
                    [1, 1, 1, 6, 4, 1])[0]
    d = bytearray(rng.randbytes(n))
    for _ in range(min(n // 5, 300)): d[rng.randrange(n)] = rng.choice(b"\r\n\0*$-:+")
    return bytes(d)

# Words that would empty the data set or start a 256 MiB save: a fuzz input
# that happens to contain one is made again.
FORBIDDEN = (b"flush", b"del", b"save", b"shutdown")
def allowed(data):
    low = data.lower()
    return not any(w in low for w in FORBIDDEN)

known = {}  # key -> the value the server must return

def set_known(pairs):
    s = connect(); r = Reader(s)
    s.sendall(b"".join(resp(b"SET", k, v) for k, v in pairs))
    for k, v in pairs:
        got = r.reply()
        if got != b"+OK": fail("SET %r: %r" % (k, got))
        known[k] = v
    s.close()

def check(when):
    """The server is alive, answers PING, and every known key has its value."""
    if not alive(): fail("the server died " + when)
    s = connect(); r = Reader(s)
    keys = list(known)
    s.sendall(resp(b"PING") + b"".join(resp(b"GET", k) for k in keys))
    try:
        got = r.reply()
        if got != b"+PONG": fail("PING %s: %r" % (when, got))
        for k in keys:
            got = r.reply()
            if got != known[k]:
                fail("GET %r %s: got %r, want %r" % (k, when, short(got), short(known[k])))
    except (EOFError, OSError) as e:
        fail("checking %s: %s (server %s)" % (when, e, "alive" if alive() else "dead"))
    s.close()

# ---- the inputs: each returns (bytes, whether the reply must be a protocol error)
# (the commands fuzzed name only keys of their own, fz:mut:*, so that no
# mutation of theirs can touch the keys checked)
def valid_command():
    k = b"fz:mut:%d" % rng.randrange(50)
    return rng.choice([lambda: resp(b"SET", k, value()), lambda: resp(b"GET", k),
                       lambda: resp(b"INCR", k), lambda: resp(b"ECHO", value()),
                       lambda: resp(b"EXISTS", k, b"fz:mut:0"), lambda: resp(b"PING"),
                       lambda: resp(b"DBSIZE"), lambda: b"PING\r\n",
                       lambda: b"GET " + k + b"\r\n"])()

def g_random():
    return rng.randbytes(rng.randrange(1, 5000)), False
def g_random_star():
    return b"*" + rng.randbytes(rng.randrange(0, 5000)), False
def g_structured():  # garbage from the protocol's own bytes
    return bytes(rng.choice(b"*$\r\n0123456789-+: ") for _ in range(rng.randrange(1, 400))), False
def g_truncated():
    d = b"".join(valid_command() for _ in range(rng.randrange(1, 4)))
    return d[:rng.randrange(1, len(d))], False
def g_mutated():
    d = bytearray(b"".join(valid_command() for _ in range(rng.randrange(1, 4))))
    for _ in range(rng.randrange(1, 5)):
        i = rng.randrange(len(d) + 1)
        op = rng.randrange(4)
        if op == 0 and i < len(d): d[i] = rng.randrange(256)
        elif op == 1 and i < len(d): del d[i]
        elif op == 2: d[i:i] = bytes([rng.choice(b"\r\n*$-0123456789")])
        else: d[i:i] = d[max(0, i - rng.randrange(1, 20)):i]
    return bytes(d), False
def g_bad_multibulk():
    n = rng.choice([b"abc", b"", b"-", b"1x", b" 1", b"+5", b"0x10", b"1.5", b"9" * 25,
                    b"%d" % (MAX_ARGS + 1), b"%d" % (2**63 - 1), b"12345678901234567890",
                    b"9999999999999999999"])
    return b"*" + n + rng.choice([b"\r\n", b"\n"]), True
def g_bad_bulk():
    n = rng.choice([b"-1", b"-5", b"abc", b"", b"1x", b"%d" % (MAX_BULK + 1), b"99999999999",
                    b"%d" % (2**63 - 1), b"9" * 25, b"9999999999999999999"])
    return b"*%d\r\n" % rng.randrange(1, 5) + b"$" + n + b"\r\n", True
def g_not_bulk():
    return b"*2\r\n$3\r\nGET\r\n" + rng.choice([b":5\r\n", b"+x\r\n", b"*1\r\n", b"x", b"-"]), True
def g_unterminated():
    return b"*1\r\n$4\r\nPING" + rng.choice([b"xx", b"\n\n", b"\rx", b"ab\r\n"]), True
def g_huge_bulk():  # announced up to the limit, a little sent, then EOF
    n = rng.choice([MAX_BULK, MAX_BULK - 1, 50_000_000, 1 << 20])
    return b"*1\r\n$%d\r\n" % n + rng.randbytes(rng.randrange(0, 200_000)), False
def g_huge_array():
    n = rng.choice([MAX_ARGS, MAX_ARGS - 1, 100_000, 1000])
    return b"*%d\r\n" % n + b"$1\r\nx\r\n" * rng.randrange(0, 3000), False
def g_long_line():  # no newline within the inline limit
    head = rng.choice([b"A", b"*1", b"*1\r\n$"])
    return head + b"1" * (MAX_INLINE + rng.randrange(1, 40000)), False
def g_inline_junk():
    words = [b"GET", b"SET", b"PING", b"ECHO", b"\"x", b"'", b"\t", b"", b"fz:mut:1", b"\xff\xfe"]
    return b" ".join(rng.choice(words) for _ in range(rng.randrange(1, 12))) + b"\r\n", False
def g_mixed():  # valid and invalid pipelined on one connection
    parts = [valid_command() if rng.random() < 0.5 else rng.choice(GARBAGE)()[0]
             for _ in range(rng.randrange(2, 8))]
    return b"".join(parts), False

GARBAGE = [g_random, g_random_star, g_structured, g_truncated, g_mutated, g_bad_multibulk,
           g_bad_bulk, g_not_bulk, g_unterminated, g_huge_bulk, g_huge_array, g_long_line,
           g_inline_junk, g_mixed]

stats = {"inputs": 0, "bytes": 0, "cut short": 0, "protocol errors": 0, "valid answered": 0}
per_kind = {}

def send_input(kind, data, want_error, prefix=b"", want=()):
    """One connection: `prefix` (valid commands) first, their replies checked
    against `want`, then `data`, then EOF; the server must close the connection."""
    s = connect()
    sent = 0
    try:
        if prefix:
            s.sendall(prefix)
            sent += len(prefix)
            r = Reader(s)
            for w in want:
                got = r.reply()
                if got != w:
                    fail("%s: valid command answered %r, want %r" % (kind, short(got), short(w)))
                stats["valid answered"] += 1
        try:
            view = memoryview(data)
            while view:
                n = s.send(view)
                sent += n
                view = view[n:]
        except (BrokenPipeError, ConnectionResetError):
            stats["cut short"] += 1  # the server rejected it and closed the connection
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        got = b""
        try:
            while True:
                b = s.recv(65536)
                if not b: break
                got += b
        except ConnectionResetError:
            pass
    except socket.timeout:
        fail("%s: the server neither answered nor closed the connection within 10 s "
             "(input %r...)" % (kind, data[:80]))
    except EOFError:
        fail("%s: the server closed the connection before answering valid commands" % kind)
    except OSError as e:
        fail("%s: %s (server %s)" % (kind, e, "alive" if alive() else "dead"))
    finally:
        s.close()
    if want_error and b"-ERR Protocol error" not in got:
        fail("%s: %r answered %r, want a protocol error" % (kind, data[:80], got[:200]))
    stats["protocol errors"] += b"-ERR Protocol error" in got
    if sent == 0: fail("%s: nothing sent" % kind)
    stats["inputs"] += 1
    stats["bytes"] += sent
    per_kind[kind] = per_kind.get(kind, 0) + 1

def interleaved(conn):
    """Valid commands whose answers are known, then garbage, on one connection."""
    cmds, want, new = [], [], {}
    for j in range(rng.randrange(1, 6)):
        key = b"fz:ok:%d:%d" % (conn, j)
        kind = rng.randrange(6)
        if kind == 0:
            v = value(); cmds.append(resp(b"SET", key, v)); want.append(b"+OK"); new[key] = v
        elif kind == 1:
            cmds += [resp(b"INCR", key), resp(b"INCR", key)]; want += [b":1", b":2"]
            new[key] = b"2"
        elif kind == 2:
            v = value(); cmds.append(resp(b"ECHO", v)); want.append(v)
        elif kind == 3:
            cmds.append(rng.choice([resp(b"PING"), b"PING\r\n"])); want.append(b"+PONG")
        elif kind == 4:
            k = rng.choice(list(known)); cmds.append(resp(b"GET", k)); want.append(known[k])
        else:
            cmds.append(resp(b"EXISTS", b"kv-keep:0", b"fz:nothere")); want.append(b":1")
    while True:
        data, want_error = rng.choice(GARBAGE)()
        if allowed(data): break
    send_input("valid+garbage", data, False, b"".join(cmds), want)
    known.update(new)

set_known([(b"kv-keep:%d" % i, value()) for i in range(40)] +
          [(b"kv-keep:text", b"hello"), (b"kv-keep:empty", b"")])
check("before the malformed input")
conn = 0
for batch in range(BATCHES):
    for _ in range(PER_BATCH):
        conn += 1
        if rng.random() < 0.2:
            interleaved(conn)
            continue
        gen = rng.choice(GARBAGE)
        while True:
            data, want_error = gen()
            if allowed(data): break
        send_input(gen.__name__[2:], data, want_error)
    check("after batch %d of %d" % (batch + 1, BATCHES))

missing = [g.__name__[2:] for g in GARBAGE if g.__name__[2:] not in per_kind]
if stats["inputs"] < INTENDED or missing:
    fail("%d inputs sent, %d intended%s" % (stats["inputs"], INTENDED,
         "; never sent: " + ", ".join(missing) if missing else ""))
print("malformed input: ok: %d inputs sent (%d bytes; seed %d), %d of them answered with a "
      "protocol error, %d cut short by the server; %d valid commands among them answered "
      "right; after each of %d batches the server answered PING and all %d keys set before" %
      (stats["inputs"], stats["bytes"], seed, stats["protocol errors"], stats["cut short"],
       stats["valid answered"], BATCHES, len(known)))
print("  per kind: " + ", ".join("%s %d" % kv for kv in sorted(per_kind.items())))
PY
expect PONG PING

# BGSAVE, then kill -9 and reload
expect OK SET k1 v1
redis-benchmark -p "$port" -t set,get,incr -n 3000 -r 1000 -q >/dev/null 2>&1
before=$(cli LASTSAVE)
sleep 1.1
expect "Background saving started" BGSAVE
wait_save "$before"
[[ -f "$dir/dump.tkimg" ]] || { echo "no image after BGSAVE"; exit 1; }
n=$(cli DBSIZE)
kill -9 $pid; wait $pid 2>/dev/null || true; pid=
start
expect v1 GET k1
expect "$n" DBSIZE
grep -Eq "(loaded|loading \(lazily, while serving\)) $n keys" "$dir/err" || { cat "$dir/err"; echo "no load message"; exit 1; }

# kill -9 during a BGSAVE: an image always loads - the previous one unless
# the save had completed (256 MiB to write: it almost never has)
expect OK SET k1 v2
loaded
expect "Background saving started" BGSAVE
kill -9 $pid; wait $pid 2>/dev/null || true; pid=
start
got=$(cli GET k1)
case $got in
    v1) echo "killed during BGSAVE: the previous image loaded" ;;
    v2) echo "killed after BGSAVE completed: the new image loaded" ;;
    *) echo "after kill -9 during BGSAVE: GET k1 = '$got'"; exit 1 ;;
esac
expect "$n" DBSIZE

# SAVE, a short redis-benchmark run with pipelining
expect OK SET k1 v3
expect OK SAVE
redis-benchmark -p "$port" -t set,get -n 5000 -P 8 -q >/dev/null 2>&1
expect PONG PING
kill -TERM $pid; wait $pid 2>/dev/null || true; pid=
start
expect v3 GET k1
kill -TERM $pid; wait $pid 2>/dev/null || true; pid=
check_log
echo "kv-server ($mech): ok"
