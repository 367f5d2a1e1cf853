#!/usr/bin/env bash
# examples/kv-server's blocking pops and pub/sub against a real
# redis-server, with several connections (tests/kv_blocking.py), then
# through redis-cli.  Skips (77) without redis-server.
# Usage: kv_blocking.sh KV_SERVER_BINARY
server=$1
command -v redis-server >/dev/null || { echo "redis-server is missing (scripts/install-deps.sh installs it)"; exit 77; }
source "$(dirname "$0")/kv_lib.sh"
kv_start blocking --memory 64m --client-output-buffer-limit 1m
rport=$(free_port)
mkdir -p "$dir/redis"
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no --dir "$dir/redis" \
    --client-output-buffer-limit "pubsub 1mb 1mb 0" --daemonize no --logfile "$dir/redis.err" &
started+=($!)
wait_until 30 'redis-cli -p $rport PING >/dev/null 2>&1'
PYTHONPATH=$(dirname "$0") python3 "$(dirname "$0")/kv_blocking.py" "$port" "$rport"

# redis-cli: a timeout, a pop served by another client, messages
cli FLUSHALL >/dev/null
expect "" BLPOP nothing 0.1
out=$(cli BLPOP q 10 & sleep 0.5; cli RPUSH q v >/dev/null; wait)
[[ $out == $'q\nv' ]] || { echo "redis-cli BLPOP served: got '$out'"; exit 1; }
out=$(cli BZPOPMAX z 10 & sleep 0.5; cli ZADD z 1 a 2 b >/dev/null; wait)
[[ $out == $'z\nb\n2' ]] || { echo "redis-cli BZPOPMAX served: got '$out'"; exit 1; }
out=$(timeout 5 redis-cli -p "$port" SUBSCRIBE ch & sub=$!; sleep 0.5; cli PUBLISH ch hello >/dev/null; sleep 0.3; kill $sub 2>/dev/null; wait $sub || true)
[[ $out == $'subscribe\nch\n1\nmessage\nch\nhello' ]] || { echo "redis-cli SUBSCRIBE: got '$out'"; exit 1; }
expect 0 PUBSUB NUMPAT
# redis-cli with the newer commands: the same output from both servers
cli FLUSHALL >/dev/null
redis-cli -p "$rport" FLUSHALL >/dev/null
for c in "RPUSH l 3 1 2" "SORT l" "SORT l DESC LIMIT 0 2" "SORT l BY nosort GET #" "LMPOP 1 l RIGHT COUNT 2" \
         "ZADD z 1 a 2 b" "ZUNION 2 z z WITHSCORES" "ZINTERCARD 1 z" "ZRANGESTORE d z 0 -1" "ZRANDMEMBER z 5 WITHSCORES" \
         "OBJECT ENCODING z" "SETBIT b 7 1" "BITCOUNT b" "BITPOS b 1" "BITOP NOT nb b" "COPY l l2" "TOUCH l l2 x" \
         "HSET h f v" "HRANDFIELD h 1 WITHVALUES" "ROLE" "WAIT 0 0" "SWAPDB 0 0" "CONFIG SET slowlog-max-len 128" \
         "CONFIG GET slowlog-max-len" "PUBLISH nobody hi" "PUBSUB NUMSUB nobody" "BZPOPMIN z 0.1" "BLPOP none 0.1" \
         "CLIENT UNBLOCK 999999" "SLOWLOG GET 0" "ZSCAN z 0" "DEL l l2 z d b nb h"; do
    got=$(cli $c 2>&1); want=$(redis-cli -p "$rport" $c 2>&1)
    [[ $got == "$want" ]] || { echo "redis-cli $c: kv-server '$got', redis-server '$want'"; exit 1; }
done
kv_kill
kv_check_log
echo "kv_blocking: ok"
