#!/usr/bin/env bash
# redis-benchmark's default run - every test in it - against examples/kv-server:
# each test's line must be there and no error or warning (redis-benchmark
# stops at an error reply).  The tests it runs are those it runs against a
# real redis-server when one is installed, and at least redis-benchmark 7.0's
# default list.  Then the same with pipelining and random keys.
# Usage: kv_benchmark.sh KV_SERVER_BINARY
server=$1
command -v redis-benchmark >/dev/null || { echo "missing redis-benchmark (scripts/install-deps.sh installs it)"; exit 1; }
source "$(dirname "$0")/kv_lib.sh"

# runs redis-benchmark; its output, one line per test, in $dir/$1.txt
bench() {
    local name=$1; shift
    local rc=0
    timeout 280 redis-benchmark "$@" >"$dir/$name.raw" 2>&1 || rc=$?
    tr '\r' '\n' <"$dir/$name.raw" | grep -v 'rps=' | sed 's/^ *//' | grep -v '^$' >"$dir/$name.txt" || true
    if ((rc != 0)); then cat "$dir/$name.txt"; echo "redis-benchmark $*: exit status $rc"; exit 1; fi
}
tests_of() { sed -n 's/^\(.*\): [0-9.]* requests per second.*/\1/p' "$1"; }

want=("PING_INLINE" "PING_MBULK" "SET" "GET" "INCR" "LPUSH" "RPUSH" "LPOP" "RPOP" "SADD" "HSET"
      "SPOP" "ZADD" "ZPOPMIN" "LPUSH (needed to benchmark LRANGE)" "LRANGE_100 (first 100 elements)"
      "LRANGE_300 (first 300 elements)" "LRANGE_500 (first 500 elements)"
      "LRANGE_600 (first 600 elements)" "MSET (10 keys)")
if command -v redis-server >/dev/null; then
    rport=$(free_port)
    mkdir -p "$dir/redis"
    redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir/redis" \
        --daemonize no --logfile "$dir/redis.err" &
    rpid=$!
    started+=($rpid)
    wait_until 30 'redis-cli -p $rport PING >/dev/null 2>&1'
    bench redis -p "$rport" -n 2000 -q
    mapfile -t want < <(tests_of "$dir/redis.txt")
    kill "$rpid"
    ((${#want[@]} >= 20)) || { cat "$dir/redis.txt"; echo "redis-benchmark ran only ${#want[@]} tests against redis-server"; exit 1; }
fi

kv_start bench --memory 256m
for run in "default:-n 2000 -q" "pipelined:-n 20000 -q -P 16 -r 1000"; do
    name=${run%%:*}
    read -ra opts <<<"${run#*:}"
    bench "$name" -p "$port" "${opts[@]}"
    if grep -E -i 'error|warning|ERR ' "$dir/$name.txt"; then
        echo "redis-benchmark ($name) reported the errors above"; exit 1
    fi
    declare -A have=()
    while IFS= read -r t; do have[$t]=1; done < <(tests_of "$dir/$name.txt")
    for t in "${want[@]}"; do
        [[ -n ${have[$t]:-} ]] || { cat "$dir/$name.txt"; echo "redis-benchmark ($name): no line for $t"; exit 1; }
    done
    unset have
    echo "redis-benchmark ${opts[*]}: all ${#want[@]} tests ran, no error:"
    sed 's/^/  /' "$dir/$name.txt"
done
expect PONG PING
kv_kill
kv_check_log
echo "kv_benchmark: ok"
