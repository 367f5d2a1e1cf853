#!/usr/bin/env bash
# examples/kv-server's background compaction of its chain (README.md there):
#  - once the chain holds --compact-after incremental images, a thread
#    writes it as one full image, renames it over DIR/NAME and removes the
#    incremental images: the compacted chain restores the same data, and
#    images saved afterwards chain onto it
#  - a chain loaded at start is compacted only once the lazy restore has
#    verified every page
#  - a crash between the rename and the removal of the incremental images
#    leaves a chain that loads (they no longer chain onto DIR/NAME)
#  - a BGSAVE that completes during the compaction stays in the chain; a
#    full one makes the compaction give up (--compact-hold holds the
#    compaction before its rename until the test lets it go)
#  - kill -9 at random instants of compactions leaves the last completed
#    save, and no temporary file
# Usage: kv_compact.sh KV_SERVER_BINARY
server=$1
source "$(dirname "$0")/kv_lib.sh"

wait_saved() {
    wait_until 60 '[[ $(info_field rdb_bgsave_in_progress) == 0 ]]'
    [[ $(info_field rdb_last_bgsave_status) == ok ]] || { echo "BGSAVE failed"; exit 1; }
}
bgsave() { expect "Background saving started" BGSAVE; wait_saved; }
files() { (cd "$1" && ls | grep -v '\.err$\|\.out$' | sort | tr '\n' ' '); }
compactions() { info_field trapkit_compactions; }
wait_compacted() { # wait_compacted N: N compactions completed, none running
    wait_until 60 "[[ \$(compactions) == $1 && \$(info_field trapkit_compact_in_progress) == 0 ]]"
    [[ $(info_field trapkit_last_compact_status) == ok ]] || { echo "the compaction failed"; exit 1; }
}
# fill: 600 values of 64 KiB (about 40 MiB), each its own
fill() {
    python3 - "$port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"".join(b"*3\r\n$3\r\nSET\r\n$8\r\nbig:%04d\r\n$65536\r\n%s\r\n" % (i, b"%04d" % i * 16384)
                   for i in range(600)))
got = b""
while got.count(b"\r\n") < 600: got += s.recv(65536)
assert got == b"+OK\r\n" * 600, got[:100]
PY
}
# check_big [KEY=VALUE ...]: every big value is as filled, but those given
# (KEY=C*N: the byte C, N times; KEY=: deleted)
check_big() {
    python3 - "$port" "$@" <<'PY'
import re, socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
f = s.makefile("rb")
want = {b"big:%04d" % i: b"%04d" % i * 16384 for i in range(600)}
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    m = re.fullmatch(r"(.)\*(\d+)", v)  # KEY=C*N: the byte C, N times
    want[k.encode()] = (m.group(1) * int(m.group(2)) if m else v).encode() or None  # KEY=: deleted
for k, v in want.items():
    s.sendall(b"*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n" % (len(k), k))
    line = f.readline()
    got = f.read(int(line[1:]) + 2)[:-2] if line.startswith(b"$") and line != b"$-1\r\n" else None
    if got != v:
        print("GET %s: %r..., want %r..." % (k.decode(), (got or b"")[:20], (v or b"")[:20])); sys.exit(1)
PY
}

# ---- 1. compaction restores the same data; later images chain onto it
mkdir -p "$dir/a"
A=(--dir "$dir/a" --memory 128m --compact-after 2)
kv_start a1 "${A[@]}"
fill
expect OK SET s1 one
expect OK SET ttl v PX 3600000
bgsave
expect OK SET s1 uno
expect OK SET big:0007 seven
expect 1 DEL big:0008
bgsave
expect 3 RPUSH l a b c
bgsave # the second incremental image: the compaction starts
wait_compacted 1
[[ $(files "$dir/a") == "dump.tkimg " ]] || { echo "after the compaction: $(files "$dir/a")"; exit 1; }
[[ $(info_field trapkit_chain_incremental_images) == 0 ]] || { echo "INFO: incremental images left"; exit 1; }
grep -q "compacted the chain: a full image of .* replaces it and 2 incremental images" "$dir/a1.err" ||
    { echo "no word of the compaction"; exit 1; }
expect OK SET after compaction
bgsave # chains onto the compacted image
[[ $(files "$dir/a") == "dump.tkimg dump.tkimg.inc.4 " ]] || { echo "after a save: $(files "$dir/a")"; exit 1; }
kv_kill
kv_start a2 "${A[@]}"
grep -q "and 1 incremental images" "$dir/a2.err" || { cat "$dir/a2.err"; echo "want the compacted image and 1 incremental one"; exit 1; }
expect uno GET s1
expect compaction GET after
expect v GET ttl
pttl=$(cli PTTL ttl); ((pttl > 3000000 && pttl <= 3600000)) || { echo "PTTL ttl $pttl"; exit 1; }
[[ $(cli LRANGE l 0 -1 | tr '\n' ' ') == "a b c " ]] || { echo "LRANGE l: $(cli LRANGE l 0 -1)"; exit 1; }
check_big big:0007=seven big:0008=
expect 603 DBSIZE
kv_kill
echo "the compacted chain restores the same data; later images chain onto it: ok"
# --compact-percentage: the incremental images add up to 10% of the full one
kv_start a3 "${A[@]}" --compact-after 0 --compact-percentage 10 --compact-min-size 1m
kv_loaded
bgsave # full
python3 - "$port" <<'PY'
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"".join(b"*3\r\n$3\r\nSET\r\n$8\r\nbig:%04d\r\n$65536\r\n%s\r\n" % (i, b"B" * 65536)
                   for i in range(100)))
got = b""
while got.count(b"\r\n") < 100: got += s.recv(65536)
PY
bgsave # pages of 100 values of 64 KiB: more than 10% of the full image
wait_compacted 1
[[ $(files "$dir/a") == "dump.tkimg " ]] || { echo "after a compaction by size: $(files "$dir/a")"; exit 1; }
kv_kill
kv_start a4 "${A[@]}"
check_big $(for i in $(seq 0 99); do printf 'big:%04d=B*65536 ' $i; done)
kv_kill
echo "--compact-percentage: ok"

# ---- 2. a chain loaded at start: compacted only once every page is verified;
# a crash between the rename and the removals
mkdir -p "$dir/b"
kv_start b1 --dir "$dir/b" --memory 128m --compact-after 0 --compact-percentage 0
fill
bgsave
for i in 1 2 3; do
    expect OK SET gen $i
    bgsave
done
kv_kill
[[ $(files "$dir/b") == "dump.tkimg dump.tkimg.inc.2 dump.tkimg.inc.3 dump.tkimg.inc.4 " ]] ||
    { echo "without compaction: $(files "$dir/b")"; exit 1; }
cp -a "$dir/b" "$dir/b-chain"
B=(--dir "$dir/b" --memory 128m --compact-after 2)
kv_start b2 "${B[@]}" --restore-prefetch no # pages on fault only: loading until a save
expect 3 GET gen
[[ $(info_field loading) == 1 ]] || { echo "not loading"; exit 1; }
sleep 0.5 # several turns of the event loop's cron, which would start it
[[ $(compactions) == 0 && $(info_field trapkit_compact_in_progress) == 0 ]] ||
    { echo "a compaction started before every page was verified"; exit 1; }
[[ $(files "$dir/b") == "dump.tkimg dump.tkimg.inc.2 dump.tkimg.inc.3 dump.tkimg.inc.4 " ]] ||
    { echo "the chain changed while loading: $(files "$dir/b")"; exit 1; }
kv_kill
kv_start b3 "${B[@]}" # prefetched: the loaded chain is compacted once verified
expect 3 GET gen
kv_loaded
wait_compacted 1
[[ $(files "$dir/b") == "dump.tkimg " ]] || { echo "after compacting a loaded chain: $(files "$dir/b")"; exit 1; }
kv_kill
cp "$dir/b-chain/"dump.tkimg.inc.* "$dir/b/" # as if killed before they were removed
kv_start b4 "${B[@]}"
expect 3 GET gen
check_big
grep -q "and 0 incremental images" "$dir/b4.err" || { cat "$dir/b4.err"; echo "the old incremental images were loaded"; exit 1; }
[[ $(files "$dir/b") == "dump.tkimg " ]] || { echo "the old incremental images stay: $(files "$dir/b")"; exit 1; }
kv_kill
echo "a loaded chain is compacted once verified; a crash before the removals: ok"

# ---- 3. saves during a compaction (--compact-hold: it waits before its
# rename until the file exists, so the saves complete meanwhile however
# long the disk takes)
mkdir -p "$dir/c"
C=(--dir "$dir/c" --memory 128m --compact-after 2 --full-after 3 --compact-hold "$dir/c-go")
kv_start c1 "${C[@]}"
fill
bgsave
for g in 1 2; do
    expect OK SET gen $g
    bgsave
done
wait_until 30 '[[ $(info_field trapkit_compact_in_progress) == 1 ]]'
expect OK SET gen 3
expect OK SET big:0100 hundred
bgsave # incremental (seq 4), on the image of seq 3 the compaction writes
[[ $(info_field trapkit_compact_in_progress) == 1 ]] || { echo "the compaction ended before the save"; exit 1; }
touch "$dir/c-go"
wait_compacted 1
[[ $(files "$dir/c") == "dump.tkimg dump.tkimg.inc.4 " ]] || { echo "after the compaction: $(files "$dir/c")"; exit 1; }
[[ $(info_field trapkit_chain_incremental_images) == 1 ]] || { echo "INFO: want 1 incremental image"; exit 1; }
kv_kill
C=(--dir "$dir/c" --memory 128m --compact-after 2 --full-after 2 --compact-hold "$dir/c-go")
rm "$dir/c-go"
kv_start c2 "${C[@]}"
expect 3 GET gen
check_big big:0100=hundred
grep -q "and 1 incremental images" "$dir/c2.err" || { cat "$dir/c2.err"; echo "the save made during the compaction is not in the chain"; exit 1; }
kv_loaded
bgsave # full: a new server's first
for g in 4 5; do
    expect OK SET gen $g
    bgsave
done
wait_until 30 '[[ $(info_field trapkit_compact_in_progress) == 1 ]]'
expect OK SET gen 6
bgsave # the third image since the full one: --full-after 2 makes it full
[[ $(info_field trapkit_last_image_incremental) == 0 ]] || { echo "not a full image"; exit 1; }
[[ $(info_field trapkit_compact_in_progress) == 1 ]] || { echo "the compaction ended before the save"; exit 1; }
touch "$dir/c-go"
wait_until 30 '[[ $(info_field trapkit_compact_in_progress) == 0 ]]'
grep -q "the compaction is dropped" "$dir/c2.err" || { echo "the compaction was not dropped"; exit 1; }
[[ $(compactions) == 0 ]] || { echo "INFO: a compaction counted"; exit 1; }
[[ $(files "$dir/c") == "dump.tkimg " ]] || { echo "after the dropped compaction: $(files "$dir/c")"; exit 1; }
kv_kill
kv_start c3 "${C[@]}"
expect 6 GET gen
check_big big:0100=hundred
kv_kill
echo "saves during a compaction: an incremental one stays in the chain, a full one makes it give up: ok"

# ---- 4. kill -9 at random instants of compactions: up to the time one
# took here (a compaction starts at most 100 ms after the save that makes
# it due)
mkdir -p "$dir/k"
K=(--dir "$dir/k" --memory 128m --compact-after 2)
kv_start k0 "${K[@]}"
fill
bgsave
for gen in 1 2; do
    expect OK SET gen $gen
    bgsave
done
wait_compacted 1
took=$(sed -n 's/.*compacted the chain: .* in \([0-9]*\) ms$/\1/p' "$dir/k0.err")
declare -A seen=()
for i in $(seq 1 6); do
    kv_kill
    kv_start "k$i" "${K[@]}"
    expect "$gen" GET gen
    [[ ! -e $dir/k/dump.tkimg.tmp-compact ]] || { echo "round $i: the temporary file stayed"; exit 1; }
    kv_loaded
    bgsave # full
    for _ in 1 2; do
        gen=$((gen + 1))
        expect OK SET gen $gen
        bgsave
    done
    ms=$((RANDOM % (took + 100)))
    sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    kv_kill
    if [[ -e $dir/k/dump.tkimg.tmp-compact ]]; then
        seen[writing]=$((${seen[writing]:-0} + 1))
    elif [[ -e $dir/k/dump.tkimg.inc.3 ]]; then # a new server's images: seq 1, 2, 3
        seen[before, or before the removals]=$((${seen[before, or before the removals]:-0} + 1))
    else
        seen[after]=$((${seen[after]:-0} + 1))
    fi
done
kv_start kend "${K[@]}"
expect "$gen" GET gen
check_big
kv_kill
kv_check_log
echo "kill -9 during compactions (taking $took ms here): ok; killed: $(for k in "${!seen[@]}"; do printf '%s %s, ' "$k" "${seen[$k]}"; done)"
echo "kv_compact: ok"
