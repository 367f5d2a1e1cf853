#!/usr/bin/env bash
# tksim against qemu-riscv64: every workload (small inputs) must print the
# same, exit the same and commit the same number of instructions (qemu
# counts them with -singlestep -d nochain,exec: one "Trace" line per
# instruction executed).  Both runs get an empty environment and write
# their output to a file (stdio's buffering depends on what stdout is).
# Usage: tksim_qemu.sh TKSIM WORKLOAD_DIR
set -euo pipefail
tksim=$1 wdir=$2
command -v qemu-riscv64 >/dev/null || { echo "missing qemu-riscv64 (scripts/install-deps.sh installs qemu-user)"; exit 1; }
[[ -x $wdir/qsort ]] || { echo "missing the workloads in $wdir (riscv64-linux-gnu-gcc: scripts/install-deps.sh)"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
while read -r name args; do
    prog=$wdir/$name
    qrc=0
    qn=$(env -i qemu-riscv64 -singlestep -d nochain,exec -D /dev/fd/3 "$prog" $args 3>&1 >"$dir/q.out" | grep -c '^Trace') || qrc=$?
    trc=0
    env -i "$tksim" --quiet --stats-json "$dir/t.json" "$prog" $args >"$dir/t.out" || trc=$?
    tn=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["instructions"])' "$dir/t.json")
    if ! cmp -s "$dir/q.out" "$dir/t.out"; then
        echo "FAIL $name $args: output differs"; diff "$dir/q.out" "$dir/t.out" | head -5; fail=1
    elif [[ $qn != "$tn" ]]; then
        echo "FAIL $name $args: qemu committed $qn instructions, tksim $tn"; fail=1
    else
        echo "$name $args: $tn instructions, the same output ($(head -c 60 "$dir/t.out" | head -1))"
    fi
done <<'LIST'
qsort 3000
map 1500
jacobi 96 2
matmul 40
LIST
exit $fail
