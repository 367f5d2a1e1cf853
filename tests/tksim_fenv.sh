#!/usr/bin/env bash
# Reserved rounding modes (tests/tksim/fenv.c with an argument): an
# instruction whose rm field is 5 or 6, or 7 (dynamic) with frm holding 5-7,
# is an illegal instruction.  qemu-riscv64 dies of SIGILL (status 132) there;
# tksim, with the timing model and with --functional, must stop with its
# guest fault (status 102, "illegal instruction" on standard error) after
# the same output.  dyn4 (RMM through frm) is legal and must finish as under
# qemu-riscv64.
# Usage: tksim_fenv.sh TKSIM FENV_PROGRAM
set -euo pipefail
tksim=$(realpath "$1") prog=$(realpath "$2")
command -v qemu-riscv64 >/dev/null || { echo "missing qemu-riscv64 (scripts/install-deps.sh installs qemu-user)"; exit 1; }
[[ -x $prog ]] || { echo "missing $prog (built with riscv64-linux-gnu-gcc: scripts/install-deps.sh)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for case in rm5 rm6 dyn5 dyn6 dyn7 cvt5 fma6 fcvtw5 dyn4; do
    # (the status from inside a command substitution: bash's own report of
    # a death by signal goes to /dev/null too)
    qrc=$( { env -i qemu-riscv64 "$prog" "$case" >"$tmp/q.out" 2>/dev/null; echo $?; } 2>/dev/null)
    want_q=132 want_t=102
    [[ $case == dyn4 ]] && want_q=0 want_t=0
    if [[ $qrc != "$want_q" ]]; then
        echo "FAIL $case: qemu-riscv64's exit status $qrc, not $want_q (is this qemu a different one?)"
        fail=1
        continue
    fi
    for mode in timing functional; do
        targs=(--quiet)
        [[ $mode == functional ]] && targs+=(--functional)
        trc=0
        env -i "$tksim" "${targs[@]}" "$prog" "$case" >"$tmp/t.out" 2>"$tmp/t.err" || trc=$?
        if ! cmp -s "$tmp/q.out" "$tmp/t.out"; then
            echo "FAIL $case ($mode): the output differs from qemu-riscv64's (< qemu, > tksim):"
            diff "$tmp/q.out" "$tmp/t.out" | head -5 || true
            fail=1
        elif [[ $trc != "$want_t" ]]; then
            echo "FAIL $case ($mode): exit status $trc, not $want_t"
            head -3 "$tmp/t.err"
            fail=1
        elif ((want_t != 0)) && ! grep -q "illegal instruction" "$tmp/t.err"; then
            echo "FAIL $case ($mode): no illegal instruction reported:"
            head -3 "$tmp/t.err"
            fail=1
        else
            echo "$case ($mode): exit status $trc as qemu-riscv64's $qrc$( ((want_t != 0)) && echo " (SIGILL): $(cat "$tmp/t.err")")"
        fi
    done
done
exit $fail
