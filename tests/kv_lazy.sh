#!/usr/bin/env bash
# examples/kv-server's lazy restore (its default at start):
#  - the first GET is answered while the image's pages are still arriving
#    (--restore-prefetch no: pages only on fault, so INFO persistence says
#    loading:1 for as long as the test needs), every value exact
#  - while loading, BGSAVE is refused (the image must not be replaced before
#    every page of it was verified), BGSAVE SCHEDULE runs once loaded (and
#    under --restore-prefetch no has the rest of the image read in), SAVE
#    waits until loaded
#  - a damaged page found late (on fault, or by the background prefetch)
#    stops the server with a clear error (exit status 70) and no wrong value
#    is ever served; eagerly (--eager-restore yes) the image is refused at
#    start
# Usage: kv_lazy.sh KV_SERVER_BINARY
server=$1
source "$(dirname "$0")/kv_lib.sh"

# checks every key: each reply is the key's value, or the connection ends
# (the server stopped); prints how many were answered
check_all() { # check_all N [must-all]
    python3 - "$port" "$1" "${2:-}" <<'PY'
import socket, sys
port, n, must = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] == "must-all"
def val(i): return (b"value-%06d-" % i) * 300
ok = 0
try:
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb")
    for i in range(n):
        k = b"k:%06d" % i
        s.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k))
        line = f.readline()
        if not line:
            break
        assert line.startswith(b"$"), line
        body = f.read(int(line[1:]) + 2)
        if len(body) < int(line[1:]) + 2:
            break
        if body[:-2] != val(i):
            print("WRONG VALUE served for", k.decode()); sys.exit(1)
        ok += 1
except (ConnectionError, OSError):
    pass
if must and ok != n:
    print(f"only {ok} of {n} keys answered"); sys.exit(1)
print(ok)
PY
}

N=12000 # 12000 values of 3.3 KB: about 40 MiB
mkdir -p "$dir/l"
L=(--dir "$dir/l" --memory 128m)
kv_start fill "${L[@]}"
python3 - "$port" "$N" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
n = int(sys.argv[2])
for lo in range(0, n, 500):
    batch = []
    for i in range(lo, min(n, lo + 500)):
        k, v = b"k:%06d" % i, (b"value-%06d-" % i) * 300
        batch.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(k), k, len(v), v))
    s.sendall(b"".join(batch))
    got = b""
    while got.count(b"\r\n") < len(batch): got += s.recv(65536)
PY
expect OK SAVE
kv_kill
cp "$dir/l/dump.tkimg" "$dir/good.img"

# ---- 1. served while loading
kv_start lazy1 "${L[@]}" --restore-prefetch no
[[ $(info_field trapkit_restore) == lazy ]] || { echo "not a lazy restore"; exit 1; }
expect "$(python3 -c 'print(("value-%06d-" % 7) * 300)')" GET k:000007
[[ $(info_field loading) == 1 ]] || { echo "INFO loading is not 1 after the first GET"; exit 1; }
faults=$(info_field trapkit_loading_pages_by_fault)
((faults > 0)) || { echo "no page came by fault"; exit 1; }
perc=$(info_field loading_loaded_perc)
python3 -c "import sys; sys.exit(not 0 < float('$perc') < 100)" || { echo "loading_loaded_perc $perc"; exit 1; }
got=$(cli BGSAVE)
[[ $got == *"not possible while the dataset is still loading"* ]] || { echo "BGSAVE while loading: $got"; exit 1; }
[[ $(check_all $N must-all) == "$N" ]] || { echo "not every key answered exactly"; exit 1; }
expect OK SET new 1
[[ $(info_field loading) == 1 ]] || { echo "loading:0 before the free pages arrived (prefetch no)"; exit 1; }
[[ $(info_field rdb_bgsave_in_progress) == 0 ]] || { echo "a BGSAVE runs while loading"; exit 1; }
cmp -s "$dir/l/dump.tkimg" "$dir/good.img" || { echo "the image changed while loading"; exit 1; }
# a scheduled save under --restore-prefetch no reads the rest of the image
# in (nothing else would): it runs once every page is in place and verified
expect "Background saving scheduled" BGSAVE SCHEDULE
wait_until 30 '[[ $(info_field rdb_saves) == 1 ]]'
[[ $(info_field loading) == 0 ]] || { echo "loading after the scheduled save"; exit 1; }
loaded=$(grep -n "loaded every page" "$dir/lazy1.err" | cut -d: -f1)
started=$(grep -n "the scheduled background save starts" "$dir/lazy1.err" | cut -d: -f1)
[[ -n $loaded && -n $started ]] && ((loaded < started)) || { cat "$dir/lazy1.err"; echo "the save started before every page was verified"; exit 1; }
expect OK SAVE
wait_until 30 '[[ $(info_field rdb_saves) == 2 ]]'
kv_kill
kv_start lazy2 "${L[@]}"
expect 1 GET new
[[ $(check_all $N must-all) == "$N" ]] || { echo "not every key answered exactly after the save"; exit 1; }
wait_until 30 '[[ $(info_field loading) == 0 ]]'
grep -q "loaded every page" "$dir/lazy2.err" || { cat "$dir/lazy2.err"; echo "no word of the loading's end"; exit 1; }
kv_kill
echo "served while loading, saves wait for the whole image: ok"

# ---- 1b. an image saved in the middle of a rehash: while loading, the rehash
# makes no steps (each would read entries spread over the whole store, pages
# not loaded yet, which requests would wait for)
mkdir -p "$dir/r"
R=(--dir "$dir/r" --memory 128m)
mid=0
for attempt in 1 2 3 4 5; do
    rm -f "$dir/r/dump.tkimg"
    kv_start rfill "${R[@]}"
    # 8,000 keys, then in one write the ones past 8,192 (the keyspace grows
    # from 8,192 buckets to 16,384 there) and SAVE, before the server's cron
    # finishes the rehash
    python3 - "$port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
def cmd(*a):
    return b"*%d\r\n" % len(a) + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for x in a)
def run(batch, n):
    s.sendall(b"".join(batch))
    got = b""
    while got.count(b"\r\n") < n: got += s.recv(65536)
for lo in range(0, 8000, 500):
    run([cmd(b"SET", b"r:%06d" % i, b"x" * 3000) for i in range(lo, lo + 500)], 500)
run([cmd(b"SET", b"r:%06d" % i, b"x" * 3000) for i in range(8000, 8200)] + [cmd(b"SAVE")], 201)
PY
    kv_kill
    kv_start rlazy "${R[@]}" --restore-prefetch no
    if [[ $(info_field kv_keyspace_rehashing) == 1 ]]; then
        mid=1
        break
    fi
    kv_kill
done
((mid)) || { echo "no image saved in the middle of a rehash in 5 tries"; exit 1; }
expect "$(python3 -c 'print("x" * 3000)')" GET r:000123
before=$(info_field trapkit_loading_pages_by_fault)
sleep 0.5 # five of the server's cron rounds
after=$(info_field trapkit_loading_pages_by_fault)
[[ $(info_field kv_keyspace_rehashing) == 1 ]] || { echo "the rehash went on while loading"; exit 1; }
((after - before < 8)) || { echo "$((after - before)) pages came by fault while idle (a rehash step?)"; exit 1; }
expect OK SAVE # waits until loaded; then the rehash goes on
wait_until 30 '[[ $(info_field kv_keyspace_rehashing) == 0 ]]'
[[ $(cli DBSIZE) == 8200 ]] || { echo "DBSIZE $(cli DBSIZE) after the rehash"; exit 1; }
expect "$(python3 -c 'print("x" * 3000)')" GET r:008199
kv_kill
echo "no rehash steps while loading, the rehash goes on once loaded: ok"

# ---- 2. a damaged page found late stops the server; nothing wrong is served
python3 "$(dirname "$0")/kv_image.py" damage "$dir/good.img" "$dir/bad.img" 0.6
for how in fault prefetch; do
    mkdir -p "$dir/d-$how"
    cp "$dir/bad.img" "$dir/d-$how/dump.tkimg"
    opts=(--dir "$dir/d-$how" --memory 128m)
    [[ $how == fault ]] && opts+=(--restore-prefetch no)
    # the prefetch may find the page before the server listens: no kv_start
    port=
    # the thread that finds the page ends the process (exit status 70) with
    # trapkit's others running: ThreadSanitizer would call them leaked
    TSAN_OPTIONS="${TSAN_OPTIONS:-}:report_thread_leaks=0" \
        "$server" "${opts[@]}" --port 0 >"$dir/bad-$how.out" 2>"$dir/bad-$how.err" &
    pid=$!
    started+=("$pid")
    for _ in $(seq 600); do
        port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$dir/bad-$how.out" 2>/dev/null || true)
        [[ -n $port ]] || ! kill -0 "$pid" 2>/dev/null && break
        sleep 0.05
    done
    answered=0
    if [[ -n $port ]]; then
        answered=$(check_all $N) || { echo "$how: a wrong value was served"; exit 1; }
    fi
    ((answered < N)) || { echo "$how: every key answered from a damaged image"; exit 1; }
    kv_wait_exit 30
    ((rc == 70)) || { cat "$dir/bad-$how.err"; echo "$how: exit status $rc, want 70"; exit 1; }
    grep -q "^kv-server: the image [^ ]* cannot be loaded: page [0-9]*: .*; stopping: no data of a damaged image is served$" "$dir/bad-$how.err" ||
        { cat "$dir/bad-$how.err"; echo "$how: no clear error"; exit 1; }
    # said once, whole, although two threads may find the page at once
    (($(grep -c "cannot be loaded" "$dir/bad-$how.err") == 1)) ||
        { cat "$dir/bad-$how.err"; echo "$how: the error said more than once"; exit 1; }
    cmp -s "$dir/d-$how/dump.tkimg" "$dir/bad.img" || { echo "$how: the image changed"; exit 1; }
    echo "damaged page found by $how: stopped after $answered exact replies"
done
mkdir -p "$dir/d-eager"
cp "$dir/bad.img" "$dir/d-eager/dump.tkimg"
kv_start_fails bad-eager --dir "$dir/d-eager" --memory 128m --eager-restore yes
grep -q "cannot load" "$dir/bad-eager.err" || { cat "$dir/bad-eager.err"; echo "eager: no clear error"; exit 1; }
kv_check_log
echo "kv_lazy: ok"
