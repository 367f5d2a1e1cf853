# tests/kv_lib.sh - what the kv-server tests share; sourced, not run.
# Sets: server (the binary), dir (a temporary directory, removed at exit);
# kv_start starts a server and sets pid and port; every server started is
# killed at exit.  A test fails with exit 1 and a message; the server's
# stderr is shown when it fails.
set -euo pipefail
for t in redis-cli python3; do
    command -v $t >/dev/null || { echo "missing $t (scripts/install-deps.sh installs it)"; exit 1; }
done
dir=$(mktemp -d)
chmod 755 "$dir"
pid= port= started=()
kv_cleanup() {
    local rc=$?
    for p in "${started[@]}"; do { kill -9 "$p" && wait "$p"; } 2>/dev/null || true; done
    if ((rc != 0)); then
        for f in "$dir"/*.err; do
            [[ -s $f ]] && { echo "== $f"; tail -n 40 "$f"; }
        done
    fi
    [[ -n ${KV_KEEP:-} ]] && echo "kept $dir" || rm -rf "$dir"
}
trap kv_cleanup EXIT
trap 'echo "$(basename "$0"): failed at line $LINENO" >&2' ERR

# A sanitizer build's server stops at its first report.
kv_check_log() {
    local f
    for f in "$dir"/*.err; do
        if [[ -e $f ]] && grep -q 'Sanitizer' "$f"; then
            cat "$f"; echo "kv-server: a sanitizer reported an error"; exit 1
        fi
    done
}

# kv_start NAME [OPTIONS...]: starts the server (--dir $dir unless
# OPTIONS give one; --port 0 unless they give one; --save "" unless they
# give save points or KV_DEFAULT_SAVE is set: no BGSAVE a test did not ask
# for, however slowly a sanitizer build runs it); waits until it
# listens.  Its output goes to $dir/NAME.out and .err.  KV_RUN_AS may hold
# a command prefix (setpriv ...).
kv_start() {
    local name=$1; shift
    kv_check_log
    rm -f "$dir/$name.out" "$dir/$name.err"
    local args=("$@")
    [[ " $* " == *" --dir "* ]] || args+=(--dir "$dir")
    [[ " $* " == *" --port "* ]] || args+=(--port 0)
    # KV_MECH: the checkpoint mechanism, where the test names none
    [[ -z ${KV_MECH:-} || " $* " == *" --mechanism "* ]] || args+=(--mechanism "$KV_MECH")
    [[ " $* " == *" --save "* || -n ${KV_DEFAULT_SAVE:-} ]] || args+=(--save "")
    ${KV_RUN_AS:-} "$server" "${args[@]}" >"$dir/$name.out" 2>"$dir/$name.err" &
    pid=$!
    started+=("$pid")
    for _ in $(seq 600); do # 30 s: a sanitizer build loads images slowly
        port=$(sed -n 's/.*listening on [0-9.]*:\([0-9]*\).*/\1/p' "$dir/$name.out" 2>/dev/null || true)
        [[ -n $port ]] && return 0
        kill -0 "$pid" 2>/dev/null || { cat "$dir/$name.err"; echo "kv-server ($name) did not start"; exit 1; }
        sleep 0.05
    done
    echo "kv-server ($name) did not say where it listens"; exit 1
}

# kv_start_fails NAME [OPTIONS...]: the server must exit non-zero at start
# without listening; its stderr is in $dir/NAME.err.
kv_start_fails() {
    local name=$1; shift
    rm -f "$dir/$name.out" "$dir/$name.err"
    local args=("$@") rc=0
    [[ " $* " == *" --dir "* ]] || args+=(--dir "$dir")
    [[ " $* " == *" --port "* ]] || args+=(--port 0)
    # KV_MECH: the checkpoint mechanism, where the test names none
    [[ -z ${KV_MECH:-} || " $* " == *" --mechanism "* ]] || args+=(--mechanism "$KV_MECH")
    timeout 60 ${KV_RUN_AS:-} "$server" "${args[@]}" >"$dir/$name.out" 2>"$dir/$name.err" || rc=$?
    if ((rc == 0 || rc == 124)) || grep -q listening "$dir/$name.out"; then
        cat "$dir/$name.out" "$dir/$name.err"
        echo "kv-server ($name) started (exit $rc); it must refuse"; exit 1
    fi
    kv_check_log
}

# kv_stop: kill -9 the current server and reap it.
kv_kill() {
    kill -9 "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# kv_wait_exit SECONDS: the current server must exit within SECONDS; sets rc.
kv_wait_exit() {
    local i
    for i in $(seq $(($1 * 20))); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.05
    done
    kill -0 "$pid" 2>/dev/null && { echo "kv-server did not exit within $1 s"; exit 1; }
    rc=0
    wait "$pid" 2>/dev/null || rc=$?
}

cli() { redis-cli -p "$port" "$@"; }
expect() { # expect WANT CMD...
    local want=$1; shift
    local got; got=$(cli "$@")
    [[ "$got" == "$want" ]] || { echo "redis-cli $*: got '$got', want '$want'"; exit 1; }
}
info_field() { # info_field NAME: the value of an INFO field
    cli INFO all | tr -d '\r' | sed -n "s/^$1://p"
}
# wait_until SECONDS 'SHELL CONDITION': until the condition (evaluated
# each time) holds
wait_until() {
    local s=$1; shift
    for _ in $(seq $((s * 20))); do
        eval "$1" && return 0
        sleep 0.05
    done
    echo "timed out after $s s waiting for: $1"; exit 1
}
# kv_loaded: the image loaded at start (lazily, by default) is wholly in
# place and verified: BGSAVE is refused until then
kv_loaded() { wait_until 60 '[[ $(info_field loading) == 0 ]]'; }
# the pid of a child of $1 (the fork mechanism's image writer), or nothing
child_of() { cat "/proc/$1/task/$1/children" 2>/dev/null | awk '{print $1}'; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
