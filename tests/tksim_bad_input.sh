#!/usr/bin/env bash
# tksim refuses what it cannot run with a clear message and its own exit
# status (2 usage, 3 not a program it runs, 4 a guest fault), and stops a
# guest that faults at the faulting instruction.
# Usage: tksim_bad_input.sh TKSIM WORKLOAD_DIR
set -euo pipefail
tksim=$1 wdir=$2
command -v riscv64-linux-gnu-gcc >/dev/null || { echo "missing riscv64-linux-gnu-gcc (scripts/install-deps.sh)"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
expect() { # expect STATUS PATTERN ARGS...
    local want=$1 pat=$2; shift 2
    local rc=0
    "$tksim" --quiet "$@" >"$dir/out" 2>"$dir/err" || rc=$?
    if [[ $rc != "$want" ]] || ! grep -q -- "$pat" "$dir/err"; then
        echo "FAIL tksim $*: exit $rc (want $want), stderr: $(cat "$dir/err")"; fail=1
    else
        echo "tksim $(basename -- "${@: -1}"): exit $rc, $(head -1 "$dir/err")"
    fi
}
expect 2 "usage"
expect 2 "unknown option" --frobnicate x
expect 2 "wants a number" --max-insns many x
expect 3 "No such file" "$dir/nothere"
echo "just text" >"$dir/text"
expect 3 "not an ELF file" "$dir/text"
head -c 40 "$wdir/qsort" >"$dir/header"
expect 3 "a truncated ELF file" "$dir/header"
expect 3 "not a RISC-V program" /bin/true
head -c 200 "$wdir/qsort" >"$dir/truncated"
expect 3 "outside the file" "$dir/truncated"
printf 'int main(void){return 0;}\n' >"$dir/dyn.c"
riscv64-linux-gnu-gcc -o "$dir/dyn" "$dir/dyn.c"
expect 3 "dynamically linked\|not a static executable" "$dir/dyn"
cat >"$dir/faults.S" <<'ASM'
        .globl _start
_start: la t0, which
        ld t0, 0(t0)          # argc-free switch: the word below picks the fault
        bnez t0, 1f
        .word 0               # an illegal instruction
1:      li t1, 0x100000000
        ld t2, 0(t1)          # an unmapped address
which:  .dword WHICH
ASM
riscv64-linux-gnu-gcc -nostdlib -static -DWHICH=0 -o "$dir/illegal" -x assembler-with-cpp "$dir/faults.S"
riscv64-linux-gnu-gcc -nostdlib -static -DWHICH=1 -o "$dir/unmapped" -x assembler-with-cpp "$dir/faults.S"
expect 4 "illegal instruction" "$dir/illegal"
expect 4 "access to unmapped memory (0x100000000)" "$dir/unmapped"
# configuration: the shipped file reads; bad files and values are refused
cfg=$(dirname "$0")/../sim/configs/alpha21264.cfg
expect 4 "illegal instruction" --config "$cfg" "$dir/illegal"
printf 'rob_size = 80\nwidth 4\n' >"$dir/bad1.cfg"
expect 2 "bad1.cfg:2: not 'key = value'" --config "$dir/bad1.cfg" "$dir/illegal"
printf 'rob_size = 80\nrob_sise = 96\n' >"$dir/bad2.cfg"
expect 2 "bad2.cfg:2: unknown parameter 'rob_sise'" --config "$dir/bad2.cfg" "$dir/illegal"
expect 2 "wants a whole number from 8" --set rob_size=2 "$dir/illegal"
expect 2 "wants traditional, append or prepend" --set scheme=sideways "$dir/illegal"
expect 2 "do not make whole sets" --set l1d_size=3000 "$dir/illegal"
expect 2 "cannot be read" --config "$dir/nothere.cfg" "$dir/illegal"
exit $fail
