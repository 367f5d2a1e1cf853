#!/usr/bin/env bash
# One test program (tests/tksim/*.c) under tksim and under qemu-riscv64:
# the same output, the same exit status, and with --count the same number
# of instructions (qemu counts them with -singlestep -d nochain,exec: one
# "Trace" line per instruction).  tksim runs with the timing model and
# again with --functional.  Both get an empty environment and write their
# output to a file.  With --dirs each run starts in an empty directory of
# its own: qemu's working directory, tksim's --fs-root.  With --fault N the
# program ends by a fault it has no handler for: under qemu-riscv64 by the
# signal (exit status N), under tksim by its guest fault (exit status 102,
# said on standard error), after the same output.
# Usage: tksim_vs_qemu.sh [--count] [--dirs] [--qemu-cpu CPU] [--fault N] TKSIM PROGRAM [ARGS...]
set -euo pipefail
count=0 dirs=0 cpu=() fault=
while [[ $1 == --* ]]; do
    case $1 in
    --count) count=1 ;;
    --dirs) dirs=1 ;;
    --qemu-cpu) cpu=(-cpu "$2"); shift ;;
    --fault) fault=$2; shift ;;
    esac
    shift
done
tksim=$(realpath "$1") prog=$(realpath "$2"); shift 2
command -v qemu-riscv64 >/dev/null || { echo "missing qemu-riscv64 (scripts/install-deps.sh installs qemu-user)"; exit 1; }
[[ -x $prog ]] || { echo "missing $prog (built with riscv64-linux-gnu-gcc: scripts/install-deps.sh)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/q" "$tmp/t" "$tmp/f"
name=$(basename "$prog")
fail=0

qemu() { # qemu-riscv64 [OPTIONS...]: the program's status in q.rc
    cd "$tmp/q"
    local rc=0
    env -i qemu-riscv64 "${cpu[@]}" "$@" "$prog" "${args[@]}" >"$tmp/q.out" 2>"$tmp/q.err" || rc=$?
    echo $rc >"$tmp/q.rc"
}
args=("$@")
if (( count )); then
    qn=$(qemu -singlestep -d nochain,exec -D /dev/fd/3 3>&1 | grep -c '^Trace' || true)
else
    qemu
fi
qrc=$(cat "$tmp/q.rc")

for mode in timing functional; do
    targs=(--quiet --stats-json "$tmp/$mode.json")
    [[ $mode == functional ]] && targs+=(--functional)
    root=$tmp/t
    [[ $mode == functional ]] && root=$tmp/f
    (( dirs )) && targs+=(--fs-root "$root")
    trc=0
    (cd "$tmp" && env -i "$tksim" "${targs[@]}" "$prog" "${args[@]}" >"$tmp/t.out" 2>"$tmp/t.err") || trc=$?
    if ! cmp -s "$tmp/q.out" "$tmp/t.out"; then
        echo "FAIL $name ($mode): the output differs from qemu-riscv64's (< qemu, > tksim):"
        diff "$tmp/q.out" "$tmp/t.out" | head -20
        fail=1
    elif [[ -n $fault ]]; then
        if [[ $qrc != "$fault" ]]; then
            echo "FAIL $name ($mode): qemu-riscv64's exit status $qrc, not $fault"; fail=1
        elif [[ $trc != 102 ]] || ! grep -q "guest fault" "$tmp/t.err"; then
            echo "FAIL $name ($mode): exit status $trc, not tksim's guest fault (102):"
            head -5 "$tmp/t.err"; fail=1
        else
            echo "$name ($mode): the same output ($(wc -l <"$tmp/t.out") lines), the fault: qemu-riscv64's exit status $qrc, tksim's: $(head -1 "$tmp/t.err")"
        fi
    elif [[ $qrc != "$trc" ]]; then
        echo "FAIL $name ($mode): exit status $trc, qemu-riscv64's $qrc"; cat "$tmp/t.err"; fail=1
    elif grep -q . "$tmp/t.err" && ! cmp -s "$tmp/q.err" "$tmp/t.err"; then
        echo "FAIL $name ($mode): tksim said on stderr:"; head -5 "$tmp/t.err"; fail=1
    else
        tn=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["instructions"])' "$tmp/$mode.json")
        if (( count )) && [[ $qn != "$tn" ]]; then
            echo "FAIL $name ($mode): qemu-riscv64 ran $qn instructions, tksim $tn"; fail=1
        else
            echo "$name ($mode): the same output ($(wc -l <"$tmp/t.out") lines), exit status $trc, $tn instructions$( (( count )) && echo ", as qemu")"
        fi
    fi
done
exit $fail
