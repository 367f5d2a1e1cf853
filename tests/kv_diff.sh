#!/usr/bin/env bash
# examples/kv-server against a real redis-server: the same commands to both
# (tests/kv_diff.py: a script of every command, option and error, then
# random sequences), replies equal.  Skips (77) without redis-server.
# Usage: kv_diff.sh KV_SERVER_BINARY
server=$1
command -v redis-server >/dev/null || { echo "redis-server is missing (scripts/install-deps.sh installs it)"; exit 77; }
source "$(dirname "$0")/kv_lib.sh"
kv_start diff --memory 64m
rport=$(free_port)
mkdir -p "$dir/redis"
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir/redis" \
    --daemonize no --logfile "$dir/redis.err" &
started+=($!)
wait_until 30 'redis-cli -p $rport PING >/dev/null 2>&1'
echo "$(redis-server --version | cut -d' ' -f1-3) against kv-server"
for seed in ${KV_DIFF_SEEDS:-11 12 13}; do
    PYTHONPATH=$(dirname "$0") python3 "$(dirname "$0")/kv_diff.py" "$port" "$rport" "$seed"
done
kv_kill
kv_check_log
echo "kv_diff: ok"
