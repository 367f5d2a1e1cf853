#!/usr/bin/env bash
# tksim refuses what it cannot run with a clear message and its own exit
# status (100 usage, 101 not a program it runs, 102 a guest fault), which it
# names on stderr, and stops a guest that faults at the faulting
# instruction; a program's own exit status (3, 4, 5...) is told apart from
# tksim's; an unsupported system call is reported and answered -ENOSYS.
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
    if [[ $rc != "$want" ]] || ! grep -q -- "$pat" "$dir/err" ||
        { (( want >= 100 )) && ! grep -q "(exit status $want)" "$dir/err"; }; then
        echo "FAIL tksim $*: exit $rc (want $want), stderr: $(cat "$dir/err")"; fail=1
    else
        echo "tksim $(basename -- "${@: -1}"): exit $rc, $(head -1 "$dir/err")"
    fi
}
expect 100 "usage"
expect 100 "unknown option" --frobnicate x
expect 100 "wants a number" --max-insns many x
expect 100 "wants a number of instructions from 1, not '-1'" --max-insns -1 "$wdir/qsort"
expect 100 "wants a number of instructions from 1, not '0'" --max-insns 0 "$wdir/qsort"
expect 100 "wants a number" --max-insns 99999999999999999999 "$wdir/qsort"
expect 100 "wants a number" --max-insns " 5" "$wdir/qsort"
expect 100 "needs a value" --max-insns
expect 101 "No such file" "$dir/nothere"
echo "just text" >"$dir/text"
expect 101 "not an ELF file" "$dir/text"
head -c 40 "$wdir/qsort" >"$dir/header"
expect 101 "a truncated ELF file" "$dir/header"
expect 101 "not a RISC-V program" /bin/true
head -c 200 "$wdir/qsort" >"$dir/truncated"
expect 101 "outside the file" "$dir/truncated"
printf 'int main(void){return 0;}\n' >"$dir/dyn.c"
riscv64-linux-gnu-gcc -o "$dir/dyn" "$dir/dyn.c"
expect 101 "dynamically linked\|not a static executable" "$dir/dyn"
# output files and --fs-root are checked before the program runs: qsort on
# ten million numbers would take minutes
start=$SECONDS
expect 100 "stats-json $dir/nodir/s.json: No such file or directory" --stats-json "$dir/nodir/s.json" "$wdir/qsort" 10000000
expect 100 "stats-json $dir: Is a directory" --functional --stats-json "$dir" "$wdir/qsort" 10000000
expect 100 "trace-pc $dir/nodir/t: No such file" --functional --trace-pc "$dir/nodir/t" "$wdir/qsort" 10000000
expect 100 "fs-root $dir/nothere: No such file or directory" --fs-root "$dir/nothere" "$wdir/qsort" 10000000
expect 100 "fs-root $dir/text: Not a directory" --fs-root "$dir/text" "$wdir/qsort" 10000000
(( SECONDS - start < 20 )) || { echo "FAIL: the bad output files took $((SECONDS - start)) s to be refused"; fail=1; }
# the program's own exit status, from exit_group and from exit, is its own:
# tksim says nothing
cat >"$dir/status.c" <<'C'
#include <stdlib.h>
#include <unistd.h>
#include <sys/syscall.h>
int main(int argc, char **argv)
{
    if (argc > 2) syscall(SYS_exit, atoi(argv[2])); /* exit, not exit_group */
    if (argc > 1 && argv[1][0] == 'u') return syscall(1, 0) == -1 ? 0 : 1; /* io_destroy */
    return atoi(argv[1]);
}
C
riscv64-linux-gnu-gcc -O2 -static -o "$dir/status" "$dir/status.c"
for st in 0 3 4 5 100 102; do
    for mode in --functional --quiet; do
        rc=0
        "$tksim" --quiet $mode "$dir/status" $st >"$dir/out" 2>"$dir/err" || rc=$?
        rc2=0
        "$tksim" --quiet $mode "$dir/status" exit $st >"$dir/out" 2>>"$dir/err" || rc2=$?
        if [[ $rc != "$st" || $rc2 != "$st" ]] || grep -q . "$dir/err"; then
            echo "FAIL: a program exiting $st ($mode): tksim exits $rc and $rc2, stderr: $(cat "$dir/err")"; fail=1
        else
            echo "tksim $mode status $st: exit $rc, and $rc2 by exit(2), nothing on stderr"
        fi
    done
done
expect 0 "unsupported system call 1 (io_destroy) at pc 0x[0-9a-f]*: the program gets -ENOSYS" "$dir/status" u
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
expect 102 "illegal instruction" "$dir/illegal"
expect 102 "access to unmapped memory (0x100000000)" "$dir/unmapped"
expect 102 "illegal instruction" --functional "$dir/illegal"
# configuration: the shipped file reads; bad files and values are refused
cfg=$(dirname "$0")/../sim/configs/alpha21264.cfg
expect 102 "illegal instruction" --config "$cfg" "$dir/illegal"
printf 'rob_size = 80\nwidth 4\n' >"$dir/bad1.cfg"
expect 100 "bad1.cfg:2: not 'key = value'" --config "$dir/bad1.cfg" "$dir/illegal"
printf 'rob_size = 80\nrob_sise = 96\n' >"$dir/bad2.cfg"
expect 100 "bad2.cfg:2: unknown parameter 'rob_sise'" --config "$dir/bad2.cfg" "$dir/illegal"
expect 100 "wants a whole number from 8" --set rob_size=2 "$dir/illegal"
expect 100 "wants traditional, append or prepend" --set scheme=sideways "$dir/illegal"
expect 100 "do not make whole sets" --set l1d_size=3000 "$dir/illegal"
expect 100 "cannot be read" --config "$dir/nothere.cfg" "$dir/illegal"
exit $fail
