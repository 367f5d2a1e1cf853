#!/usr/bin/env bash
# examples/kv-server driven by redis-py (Debian's python3-redis), the way a
# Python program uses Redis (tests/kv_redispy.py).  Skips (77) where no
# Python has redis-py.
# Usage: kv_redispy.sh KV_SERVER_BINARY
server=$1
py=
for p in /usr/bin/python3 python3; do
    if "$p" -c 'import redis' 2>/dev/null; then py=$p; break; fi
done
[[ -n $py ]] || { echo "redis-py is missing (scripts/install-deps.sh installs python3-redis)"; exit 77; }
source "$(dirname "$0")/kv_lib.sh"
kv_start redispy --memory 64m
"$py" "$(dirname "$0")/kv_redispy.py" "$port"
kv_kill
kv_check_log
echo "kv_redispy: ok"
