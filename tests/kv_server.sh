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
cleanup() { [[ -n $pid ]] && kill -9 $pid 2>/dev/null; rm -rf "$dir"; }
trap cleanup EXIT
trap 'echo "kv_server.sh ($mech): failed at line $LINENO" >&2' ERR

start() {
    # a new server writes new files: a restarted server's log must not be
    # read before the shell has truncated the previous one
    rm -f "$dir/out" "$dir/err"
    "$server" --port 0 --dir "$dir" --memory 256m --mechanism "$mech" >"$dir/out" 2>"$dir/err" &
    pid=$!
    for _ in $(seq 100); do
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
expect "ERR unknown command 'NOPE'" NOPE

# malformed input: an error, and the server keeps serving
python3 - "$port" <<'PY'
import socket, sys
port = int(sys.argv[1])
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
import random
random.seed(7)
for _ in range(30):
    junk = bytes(random.randrange(256) for _ in range(random.randrange(1, 5000)))
    talk(junk, True) if junk[:1] == b"*" else None
print("malformed input: ok")
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
grep -q "loaded $n keys" "$dir/err" || { cat "$dir/err"; echo "no load message"; exit 1; }

# kill -9 during a BGSAVE: an image always loads - the previous one unless
# the save had completed (256 MiB to write: it almost never has)
expect OK SET k1 v2
cli BGSAVE >/dev/null
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
echo "kv-server ($mech): ok"
