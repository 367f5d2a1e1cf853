#!/usr/bin/env bash
# examples/kv-server's persistence, as Redis users rely on it:
#  - an image that exists but cannot be opened or read (permission denied
#    to a non-root server, a directory, a read error (EIO), a dangling
#    symbolic link, a truncated file) stops the server at start with a
#    clear error and leaves the image as it was: never an empty start
#  - the fork mechanism's child keeps no socket: a server restarted on the
#    same port while the child of a killed server still runs can listen
#  - writes made during a BGSAVE still count as unsaved after it completes;
#    LASTSAVE is when the last save completed, the snapshot instant is
#    reported apart
#  - SHUTDOWN [SAVE|NOSAVE] [NOW] [FORCE] [ABORT], SIGTERM with and without save points (Redis's
#    by default), a save
#    that fails at shutdown keeps the server running; save points save;
#    a failed background save makes writes fail with MISCONF where save
#    points are set, until a save succeeds (stop-writes-on-bgsave-error)
#  - a missing --dir, a bad --port and a FIFO for an image refuse the start;
#    a save point while the image loads without prefetch saves; clients past
#    the descriptors get redis-server's error; active expiry keeps up
#  - FLUSHALL gives the memory back: the next image, incremental or full,
#    holds none of the old data, and the server's RSS drops
#  - BGSAVE's image holds the data as at BGSAVE, none of the writes sent
#    after it
# Usage: kv_persist.sh KV_SERVER_BINARY
server=$1
source "$(dirname "$0")/kv_lib.sh"

# ---- 1. images that cannot be opened or read
kv_start seed --mechanism posix
expect OK SET keep me
expect OK SAVE
expect 1 DBSIZE
kv_kill
cp "$dir/dump.tkimg" "$dir/golden"
same_image() { cmp -s "$dir/dump.tkimg" "$dir/golden" || { echo "the image changed"; exit 1; }; }
refused() { # refused NAME PATTERN: the log of the refused start says PATTERN
    grep -q -- "$2" "$dir/$1.err" || { cat "$dir/$1.err"; echo "$1: no '$2' on stderr"; exit 1; }
}

if [[ $(id -u) == 0 ]]; then
    # root reads any file: run the server as nobody, in a directory it owns
    chown -R nobody:nogroup "$dir"
    as_user="setpriv --reuid=nobody --regid=nogroup --clear-groups"
else
    as_user=
fi
chmod 000 "$dir/dump.tkimg"
KV_RUN_AS=$as_user kv_start_fails noperm --mechanism posix
refused noperm "cannot open the image $dir/dump.tkimg: Permission denied"
chmod 644 "$dir/dump.tkimg"
same_image
# the same user starts, with the image readable (posix: userfaultfd is for root here)
KV_RUN_AS=$as_user kv_start asuser --mechanism posix
expect me GET keep
kv_kill
same_image
chown -R "$(id -u):$(id -g)" "$dir"

# the image path is a directory
mkdir -p "$dir/d/dump.tkimg"
kv_start_fails isdir --dir "$dir/d" --mechanism posix
refused isdir "is not a regular file"
[[ -d $dir/d/dump.tkimg ]] || { echo "the directory was replaced"; exit 1; }
# a read error: /proc/self/mem is a regular file whose read at offset 0
# (an address never mapped) fails with EIO - the kernel's own read error,
# no injection in the server
mkdir -p "$dir/e"
ln -s /proc/self/mem "$dir/e/dump.tkimg"
kv_start_fails eio --dir "$dir/e" --mechanism posix
refused eio "cannot read the image $dir/e/dump.tkimg: Input/output error"
[[ -L $dir/e/dump.tkimg ]] || { echo "the symbolic link was replaced"; exit 1; }
# a symbolic link to nothing
mkdir -p "$dir/l"
ln -s "$dir/l/nothere" "$dir/l/dump.tkimg"
kv_start_fails dangling --dir "$dir/l" --mechanism posix
refused dangling "a symbolic link to nothing"
# a truncated image
mkdir -p "$dir/t"
head -c 3000 "$dir/golden" >"$dir/t/dump.tkimg"
kv_start_fails truncated --dir "$dir/t" --mechanism posix
refused truncated "truncated"
# no image at all: an empty start
mkdir -p "$dir/n"
kv_start empty --dir "$dir/n" --mechanism posix
expect 0 DBSIZE
kv_kill
echo "images that cannot be read: ok"

# Fills the store with about 96 MiB, so that writing an image takes a while.
fill() {
    python3 - "$port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
v = b"x" * (1 << 20)
s.sendall(b"".join(b"*3\r\n$3\r\nSET\r\n$6\r\nbig:%02d\r\n$%d\r\n%s\r\n" % (i, len(v), v)
                   for i in range(96)))
got = b""
while got.count(b"\r\n") < 96: got += s.recv(65536)
assert got == b"+OK\r\n" * 96, got[:200]
PY
}
# Starts a BGSAVE and stops the fork mechanism's child at once (SIGSTOP), so
# that it stays alive as long as the test needs; sets child.  Tries again if
# the save completed before its child could be stopped.
bgsave_stopped() {
    for attempt in 1 2 3 4 5; do
        expect "Background saving started" BGSAVE
        child=$(python3 - "$pid" <<'PY'
import os, signal, sys, time
pid = sys.argv[1]
t = time.time()
while time.time() - t < 5:
    try:
        kids = open("/proc/%s/task/%s/children" % (pid, pid)).read().split()
    except OSError:
        kids = []
    if kids:
        os.kill(int(kids[0]), signal.SIGSTOP)
        print(kids[0]); break
PY
)
        [[ -n $child ]] && [[ $(info_field rdb_bgsave_in_progress) == 1 ]] && return 0
        [[ -n $child ]] && kill -CONT "$child" 2>/dev/null
        wait_until 60 '[[ $(info_field rdb_bgsave_in_progress) == 0 ]]'
        echo "(the save completed before its child was stopped: again)"
    done
    echo "could not catch the fork child of a BGSAVE"; exit 1
}

# ---- 4. the fork child keeps no socket
P=$(free_port)
mkdir -p "$dir/f"
# every image full: an incremental one after the SAVE would be written
# before its child could be stopped
kv_start fork1 --dir "$dir/f" --port "$P" --mechanism fork --memory 256m --incremental no
fill
expect OK SET k old
expect OK SAVE
expect OK SET k new
idle=$(python3 -c 'import socket,sys; s=socket.create_connection(("127.0.0.1",int(sys.argv[1]))); import time; time.sleep(30)' "$P" &
       echo $!)
sleep 0.2
bgsave_stopped
sockets=$(ls -l "/proc/$child/fd" | grep -c 'socket:' || true)
((sockets == 0)) || { ls -l "/proc/$child/fd"; echo "the fork child holds $sockets sockets"; exit 1; }
kill -9 "$pid"; wait "$pid" 2>/dev/null || true
kill "$idle" 2>/dev/null || true
# right away, on the same port, while the child still lives
kill -0 "$child" || { echo "the child is gone"; exit 1; }
kv_start fork2 --dir "$dir/f" --port "$P" --mechanism fork --memory 256m
expect old GET k
kill -CONT "$child" 2>/dev/null || true
kill -9 "$child" 2>/dev/null || true
kv_kill
echo "the fork child keeps no socket: ok (restarted on port $P with the child alive)"

# ---- 3. changes made during a BGSAVE, LASTSAVE and the snapshot instant
mkdir -p "$dir/c"
kv_start changes --dir "$dir/c" --mechanism fork --memory 256m
fill
bgsave_stopped
for i in 1 2 3 4 5; do expect OK SET during:$i x; done
sleep 1.1 # LASTSAVE (completion) and the snapshot instant differ by at least this
t_cont=$(date +%s)
kill -CONT "$child"
wait_until 60 '[[ $(info_field rdb_bgsave_in_progress) == 0 ]]'
[[ $(info_field rdb_last_bgsave_status) == ok ]] || { echo "BGSAVE failed"; exit 1; }
changes=$(info_field rdb_changes_since_last_save)
((changes == 5)) || { echo "rdb_changes_since_last_save $changes after a BGSAVE during which 5 writes were made, want 5"; exit 1; }
lastsave=$(cli LASTSAVE)
((lastsave >= t_cont)) || { echo "LASTSAVE $lastsave is before the save completed ($t_cont)"; exit 1; }
instant=$(info_field trapkit_last_snapshot_instant_ms)
((instant / 1000 < t_cont)) || { echo "the snapshot instant $instant is not before the child ran on ($t_cont)"; exit 1; }
kv_kill
echo "changes during BGSAVE, LASTSAVE, snapshot instant: ok"

# ---- SHUTDOWN and SIGTERM
mkdir -p "$dir/s"
S=(--dir "$dir/s")
kv_start sd1 "${S[@]}"
expect OK SET base 1
expect OK SAVE
expect OK SET x 1
cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
kv_wait_exit 30
((rc == 0)) || { echo "SHUTDOWN NOSAVE: exit status $rc"; exit 1; }
kv_start sd2 "${S[@]}"
expect 1 GET base
expect "" GET x
expect OK SET y 1
cli SHUTDOWN SAVE >/dev/null 2>&1 || true
kv_wait_exit 60
((rc == 0)) || { echo "SHUTDOWN SAVE: exit status $rc"; exit 1; }
# a save that cannot be written: SHUTDOWN SAVE refuses to exit, SHUTDOWN
# SAVE FORCE exits all the same; ABORT: no shutdown in progress (Redis 7.0)
kv_start sd2b "${S[@]}"
expect 1 GET y
mkdir "$dir/s/dump.tkimg.tmp" # (where a save writes: opening it fails)
expect "ERR No shutdown in progress." SHUTDOWN ABORT
expect "ERR syntax error" SHUTDOWN ABORT NOW
expect "ERR Errors trying to SHUTDOWN. Check logs." SHUTDOWN SAVE NOW
expect 1 GET y
cli SHUTDOWN SAVE FORCE >/dev/null 2>&1 || true
kv_wait_exit 30
((rc == 0)) || { echo "SHUTDOWN SAVE FORCE: exit status $rc"; exit 1; }
rmdir "$dir/s/dump.tkimg.tmp"
kv_start sd3 "${S[@]}" --save ""
expect 1 GET y
# no save points: SIGTERM exits without saving, as redis-server --save "" does
expect OK SET w 1
kill -TERM "$pid"
kv_wait_exit 30
((rc == 0)) || { echo "SIGTERM: exit status $rc"; exit 1; }
# the default save points are Redis's: SIGTERM saves
KV_DEFAULT_SAVE=1 kv_start sd3b "${S[@]}"
expect "" GET w
[[ $(cli CONFIG GET save | tr '\n' '|') == "save|3600 1 300 100 60 10000|" ]] ||
    { echo "CONFIG GET save by default: $(cli CONFIG GET save)"; exit 1; }
expect OK SET v 1
kill -TERM "$pid"
kv_wait_exit 60
((rc == 0)) || { echo "SIGTERM with the default save points: exit status $rc"; exit 1; }
kv_start sd4 "${S[@]}" --save "3600 1 300 100"
expect 1 GET v
[[ $(cli CONFIG GET save | tr '\n' '|') == "save|3600 1 300 100|" ]] || { echo "CONFIG GET save: $(cli CONFIG GET save)"; exit 1; }
expect OK SET z 1
kill -TERM "$pid"
kv_wait_exit 60
((rc == 0)) || { echo "SIGTERM with save points: exit status $rc"; exit 1; }
kv_start sd5 "${S[@]}"
expect 1 GET z
kv_kill
# a save that fails at shutdown: the server keeps serving
mkdir -p "$dir/gone"
kv_start sd6 --dir "$dir/gone" --save "3600 1"
expect OK SET q 1
rm -rf "$dir/gone"
expect "ERR Errors trying to SHUTDOWN. Check logs." SHUTDOWN SAVE
expect PONG PING
kill -TERM "$pid"
sleep 1
kill -0 "$pid" || { echo "SIGTERM with a failing save: the server exited"; exit 1; }
expect PONG PING
grep -q "cannot exit" "$dir/sd6.err" || { echo "no word of the failed save"; exit 1; }
cli SHUTDOWN NOSAVE >/dev/null 2>&1 || true
kv_wait_exit 30
((rc == 0)) || { echo "SHUTDOWN NOSAVE after a failed save: exit status $rc"; exit 1; }
echo "SHUTDOWN [SAVE|NOSAVE] and SIGTERM: ok"

# ---- save points
mkdir -p "$dir/p"
kv_start sp --dir "$dir/p" --save "1 2"
expect OK SET a 1
expect OK SET b 1
wait_until 30 '[[ -f $dir/p/dump.tkimg ]]'
wait_until 30 '[[ $(info_field rdb_changes_since_last_save) == 0 ]]'
kv_kill
kv_start sp2 --dir "$dir/p"
expect 2 DBSIZE
kv_kill
# a background save that fails, with save points: writes (and PING) get
# MISCONF until a save succeeds (stop-writes-on-bgsave-error, as Redis)
mkdir -p "$dir/m"
kv_start mc --dir "$dir/m" --save "3600 1"
expect OK SET a 1
rm -rf "$dir/m"
[[ $(cli BGSAVE) == ERR* ]] || { echo "BGSAVE into a missing directory did not fail"; exit 1; }
[[ $(info_field rdb_last_bgsave_status) == err ]] || { echo "INFO: the failed BGSAVE is not err"; exit 1; }
misconf() { [[ $(cli "$@") == "MISCONF kv-server is configured to save images"*"cannot open"* ]] ||
    { echo "redis-cli $*: $(cli "$@"), want MISCONF with the save's error"; exit 1; }; }
misconf SET b 1
misconf PING
misconf FLUSHALL
expect 1 GET a
printf 'MULTI\nSET b 1\nEXEC\n' | cli | grep -q "^EXECABORT" || { echo "MULTI: a refused write did not abort EXEC"; exit 1; }
grep -q "background save failed\|cannot open" "$dir/mc.err" || { cat "$dir/mc.err"; echo "no word of the failed save"; exit 1; }
expect OK CONFIG SET stop-writes-on-bgsave-error no
expect OK SET b 1
expect OK CONFIG SET stop-writes-on-bgsave-error yes
misconf SET b 2
mkdir -p "$dir/m"
expect "Background saving started" BGSAVE
wait_until 30 '[[ $(info_field rdb_bgsave_in_progress) == 0 ]]'
[[ $(info_field rdb_last_bgsave_status) == ok ]] || { echo "BGSAVE into the directory again failed"; exit 1; }
expect OK SET b 2
expect PONG PING
kv_kill
# without save points nothing is refused
mkdir -p "$dir/m2"
kv_start mc2 --dir "$dir/m2" --save ""
rm -rf "$dir/m2"
[[ $(cli BGSAVE) == ERR* ]] || { echo "BGSAVE into a missing directory did not fail"; exit 1; }
expect OK SET b 1
expect PONG PING
kv_kill
echo "a failed background save: MISCONF with save points, until a save succeeds: ok"
# ---- start-up checks: a missing --dir, a bad --port, a FIFO for an image
kv_start_fails nodir --dir "$dir/no/such/dir"
refused nodir "--dir $dir/no/such/dir: No such file or directory"
kv_start_fails badport --port 17024x
refused badport "--port takes a port number"
mkdir -p "$dir/fifo"
mkfifo "$dir/fifo/dump.tkimg"
kv_start_fails fifo --dir "$dir/fifo"
refused fifo "is not a regular file"
echo "start-up checks: ok"

# ---- a save point while the image loads without prefetch: the rest of the
# image is read in, the save runs, and a write made meanwhile survives kill -9
mkdir -p "$dir/np"
kv_start np1 --dir "$dir/np" --mechanism posix
for i in $(seq 1 300); do echo "SET k$i v$i"; done | cli >/dev/null
expect OK SAVE
kv_kill
kv_start np2 --dir "$dir/np" --restore-prefetch no --save "1 1"
expect OK SET written-while-loading 1
wait_until 30 '[[ $(info_field rdb_saves) -ge 1 ]]'
grep -q "the rest of it is read in now" "$dir/np2.err" || { cat "$dir/np2.err"; echo "no word of reading the rest"; exit 1; }
kv_kill
kv_start np3 --dir "$dir/np"
expect 1 GET written-while-loading
expect v300 GET k300
kv_kill
echo "save points under --restore-prefetch no: ok"

# ---- clients past the descriptors the server may open: told so, as
# redis-server tells them, while the others are served
mkdir -p "$dir/mc"
(ulimit -n 64 && kv_start mc --dir "$dir/mc" && echo "$pid $port" >"$dir/mc.pid" && wait "$pid") &
wait_until 30 '[[ -s $dir/mc.pid ]]'
read -r mc_pid mc_port <"$dir/mc.pid"
python3 - "$mc_port" <<'PY'
import socket, sys, time
port = int(sys.argv[1])
conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
time.sleep(0.5)
last = conns[-1]
last.settimeout(10)
last.sendall(b"PING\r\n")
got = last.recv(100)
assert got == b"-ERR max number of clients reached\r\n", got
first = conns[0]
first.settimeout(10)
first.sendall(b"PING\r\n")
assert first.recv(100) == b"+PONG\r\n"
PY
[[ $(redis-cli -p "$mc_port" INFO stats | tr -d '\r' | sed -n 's/^rejected_connections://p') -gt 0 ]] || { echo "no rejected_connections"; exit 1; }
kill -9 "$mc_pid"
echo "maxclients: ok"

# ---- keys written with a short expiry never make writes fail: 300,000 keys
# of PX 300 in batches of 20,000 every 0.35 s, into 32 MiB that hold about
# 100,000 of them at once (a write finding the memory full removes expired
# keys first)
mkdir -p "$dir/ex"
kv_start ex --dir "$dir/ex" --memory 32m
python3 - "$port" <<'PY'
import socket, sys, time
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
v = "x" * 200
bad = 0
for b in range(15):
    s.sendall("".join(f"SET e{b * 20000 + i} {v} PX 300\r\n" for i in range(20000)).encode())
    got = b""
    while got.count(b"\r\n") < 20000:
        chunk = s.recv(1 << 20)
        assert chunk, "connection closed"
        got += chunk
    bad += sum(1 for line in got.split(b"\r\n")[:20000] if line != b"+OK")
    time.sleep(0.35)
assert bad == 0, f"{bad} writes refused: expired keys not removed"
PY
kv_kill
# ... and active expiry removes them with no command touching them: 300,000
# keys of PX 300 gone (expired_keys) within 5 s, in a store with room for all
kv_start ex2 --dir "$dir/ex" --memory 512m
python3 -c '
for i in range(300000):
    print(f"SET e{i} x PX 300")' | cli --pipe >"$dir/ex2.pipe" 2>&1 || { cat "$dir/ex2.pipe"; exit 1; }
wait_until 5 '[[ $(info_field expired_keys) -ge 300000 ]]'
[[ $(cli DBSIZE) -eq 0 ]] || { echo "DBSIZE $(cli DBSIZE) after every key expired"; exit 1; }
kv_kill
echo "active expiry: ok"

# ---- FLUSHALL gives the memory back and the next image holds none of the
# old data: full images (their zero pages are holes of the file), and an
# incremental one restored over a full one; the server's RSS drops too
mkdir -p "$dir/fl"
blocks() { echo $(( $(stat -c %b "$1") * 512 / 1024 )); } # KiB on disk
rss() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }
kv_start fl --dir "$dir/fl" --memory 256m --incremental yes --full-after 64
python3 -c '
for i in range(60000):
    print(f"SET key{i} {str(i) * 200}")' | cli --pipe >"$dir/fl.pipe" 2>&1
expect OK SAVE
full=$(blocks "$dir/fl/dump.tkimg")
rss_full=$(rss)
expect OK FLUSHALL
rss_flushed=$(rss)
expect OK SET after flush
expect OK SAVE
incs=("$dir"/fl/dump.tkimg.inc*)
[[ -e ${incs[0]} ]] || { ls -l "$dir/fl"; echo "no incremental image after FLUSHALL"; exit 1; }
kv_kill
kv_start fl2 --dir "$dir/fl" --incremental no
expect 1 DBSIZE
expect flush GET after
expect OK SAVE
empty=$(blocks "$dir/fl/dump.tkimg")
kv_kill
echo "FLUSHALL: the image took $full KiB with 60,000 keys and $empty KiB after it; RSS $rss_full -> $rss_flushed KiB"
(( empty * 10 < full )) || { echo "the image did not shrink after FLUSHALL"; exit 1; }
(( rss_flushed * 2 < rss_full )) || { echo "FLUSHALL gave no memory back"; exit 1; }
# ... and a FLUSHALL during a background save does so once the save is done
kv_start fl3 --dir "$dir/fl" --memory 256m --incremental no
kv_loaded
python3 -c '
for i in range(60000):
    print(f"SET key{i} {str(i) * 200}")' | cli --pipe >"$dir/fl3.pipe" 2>&1
rss_full=$(rss)
expect "Background saving started" BGSAVE
expect OK FLUSHALL
wait_until 30 '[[ $(info_field rdb_bgsave_in_progress) == 0 ]]'
sleep 0.2
rss_flushed=$(rss)
kv_kill
echo "FLUSHALL during a background save: RSS $rss_full -> $rss_flushed KiB once it was done"
(( rss_flushed * 2 < rss_full )) || { echo "FLUSHALL during BGSAVE gave no memory back"; exit 1; }

# ---- BGSAVE's image holds the data as they were at BGSAVE: writes sent
# right after it (in the same pipeline: FLUSHALL, then new keys) are not in
# it, on each mechanism whose instant comes after BGSAVE replies
for mech in uffd-thread posix; do
    mkdir -p "$dir/bi-$mech"
    kv_start "bi-$mech" --dir "$dir/bi-$mech" --mechanism "$mech" --memory 256m
    python3 -c '
for i in range(50000):
    print(f"SET k{i} {str(i) * 100}")' | cli --pipe >"$dir/bi.pipe" 2>&1
    expect OK SET marker before
    python3 - "$port" <<'PY'
import socket, sys
port = int(sys.argv[1])
a = socket.create_connection(("127.0.0.1", port))
a.sendall(b"BGSAVE\r\n")
assert a.recv(100).startswith(b"+Background saving started")
a.sendall(b"FLUSHALL\r\nSET marker after\r\nSET later 1\r\n")
got = b""
while got.count(b"\r\n") < 3:
    got += a.recv(100)
assert got == b"+OK\r\n+OK\r\n+OK\r\n", got
PY
    wait_until 60 '[[ $(info_field rdb_bgsave_in_progress) == 0 ]]'
    [[ $(info_field rdb_last_bgsave_status) == ok ]] || { echo "the BGSAVE failed"; exit 1; }
    expect after GET marker
    kv_kill
    kv_start "bi2-$mech" --dir "$dir/bi-$mech" --mechanism "$mech" --memory 256m
    expect before GET marker
    expect "" GET later
    expect 50001 DBSIZE
    kv_loaded # (a BGSAVE while the image still loads is refused)
    # a client that sends a write while it waits and closes at once: its
    # write is done all the same (after the instant)
    python3 - "$port" <<'PY'
import socket, sys
port = int(sys.argv[1])
a = socket.create_connection(("127.0.0.1", port))
a.sendall(b"BGSAVE\r\n")
assert a.recv(100).startswith(b"+Background saving started")
b = socket.create_connection(("127.0.0.1", port))
b.sendall(b"SET fire 1\r\n")
b.close()
PY
    wait_until 60 '[[ $(info_field rdb_bgsave_in_progress) == 0 ]]'
    wait_until 5 '[[ $(cli GET fire) == 1 ]]'
    kv_kill
    # while the instant is still to come (--instant-hold keeps it back),
    # BGSAVE's client waits for its reply and its next command, and every
    # other client is served: its writes are before the instant, in the image
    rm -f "$dir/bi-$mech/go"
    kv_start "bi3-$mech" --dir "$dir/bi-$mech" --mechanism "$mech" --memory 256m \
        --instant-hold "$dir/bi-$mech/go"
    kv_loaded
    python3 - "$port" "$dir/bi-$mech/go" <<'PY'
import socket, sys, time
port, go = int(sys.argv[1]), sys.argv[2]
a = socket.create_connection(("127.0.0.1", port))
a.sendall(b"BGSAVE\r\nSET marker after2\r\n")
b = socket.create_connection(("127.0.0.1", port))
def ask(cmd):  # one reply: a status line, or a bulk string's data
    b.sendall(cmd)
    got = b""
    while b"\r\n" not in got:
        got += b.recv(65536)
    if not got.startswith(b"$"):
        return got
    n = int(got[1:got.index(b"\r\n")])
    while len(got) < got.index(b"\r\n") + 2 + n + 2:
        got += b.recv(65536)
    return got
for i in range(20):
    assert ask(b"SET other%d x\r\n" % i) == b"+OK\r\n"
assert ask(b"GET marker\r\n") == b"$6\r\nbefore\r\n"
assert b"rdb_bgsave_in_progress:1" in ask(b"INFO persistence\r\n")
a.setblocking(False)
try:
    early = a.recv(100)
except BlockingIOError:
    early = b""
assert early == b"", early  # no reply before the instant
a.setblocking(True)
open(go, "w").close()
got = b""
while got.count(b"\r\n") < 2:
    got += a.recv(100)
assert got == b"+Background saving started\r\n+OK\r\n", got
PY
    wait_until 60 '[[ $(info_field rdb_bgsave_in_progress) == 0 ]]'
    [[ $(info_field rdb_last_bgsave_status) == ok ]] || { echo "the held BGSAVE failed"; exit 1; }
    kv_kill
    kv_start "bi4-$mech" --dir "$dir/bi-$mech" --mechanism "$mech" --memory 256m
    expect before GET marker
    expect x GET other19
    kv_kill
done
echo "BGSAVE's image holds the data as at BGSAVE, not the writes after it: ok"

kv_check_log
echo "kv_persist: ok"
