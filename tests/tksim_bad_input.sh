#!/usr/bin/env bash
# tksim refuses what it cannot run with a clear message and its own exit
# status (100 usage, 101 not a program it runs, 102 a guest fault), which it
# names on stderr, and stops a guest that faults at the faulting
# instruction; a program's own exit status (3, 4, 5...) is told apart from
# tksim's; an unsupported system call (any number) is reported and answered
# -ENOSYS; hostile ELF headers, large mappings, the program's environment,
# --max-insns and the statistics file of a fault; tksim's own files with
# standard descriptors closed, a trace that cannot be written, --set before
# --config.
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
# an atomic access off its natural alignment faults (qemu-riscv64: SIGBUS)
cat >"$dir/misaligned.c" <<'C'
#include <stdint.h>
int main(int argc, char **argv)
{
    static uint64_t words[2];
    uintptr_t p = (uintptr_t)words + (uintptr_t)argc; /* 1 past a word */
    long old;
    if (argv[1][0] == 'a')
        __asm__ volatile("amoadd.w %0, %2, (%1)" : "=r"(old) : "r"(p), "r"(1L) : "memory");
    else
        __asm__ volatile("lr.d %0, (%1)" : "=r"(old) : "r"(p) : "memory");
    return (int)old;
}
C
riscv64-linux-gnu-gcc -O2 -static -o "$dir/misaligned" "$dir/misaligned.c"
expect 102 "misaligned atomic access" "$dir/misaligned" amo
expect 102 "misaligned atomic access" --functional "$dir/misaligned" lr
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
expect 100 "a directory, not a configuration file" --config "$dir" "$dir/illegal"
expect 100 "stuck_cycles = -1: wants a whole number" --set stuck_cycles=-1 "$dir/illegal"
expect 100 "shorter than a correct run may go without a commit" --set stuck_cycles=100 --set mem_latency=10000 "$dir/illegal"
expect 100 "tlb-model goes with --functional" --tlb-model "$dir/illegal"
# the caches' check sees every --set: their order does not matter
expect 102 "illegal instruction" --set line=4096 --set l1d_size=4096 --set l1d_assoc=1 "$dir/illegal"
expect 102 "illegal instruction" --set line=4096 --set l1d_assoc=1 --set l1d_size=4096 "$dir/illegal"
# a statistics file that cannot take a byte stops the run before it starts
[[ -w /dev/full ]] && expect 100 "stats-json /dev/full: No space left on device" --stats-json /dev/full "$wdir/qsort" 10000000
# ELF files whose offsets and sizes would overflow, a directory
python3 - "$wdir/qsort" "$dir" <<'PY'
import struct, sys
src, d = open(sys.argv[1], 'rb').read(), sys.argv[2]
phoff = struct.unpack_from('<Q', src, 32)[0]
phnum = struct.unpack_from('<H', src, 56)[0]
load = next(phoff + 56 * i for i in range(phnum) if struct.unpack_from('<I', src, phoff + 56 * i)[0] == 1)
def bad(name, *fields):
    b = bytearray(src)
    for fmt, off, v in fields: struct.pack_into(fmt, b, off, v)
    open(f"{d}/{name}", 'wb').write(b)
bad('bad_off', ('<Q', load + 8, 0xffffffffffffff00), ('<Q', load + 32, 0x100))   # p_offset + p_filesz wraps
bad('bad_phoff', ('<Q', 32, (1 << 64) - 56), ('<H', 56, 1))                       # e_phoff + the headers wrap
bad('bad_vaddr', ('<Q', load + 16, 0xfffffffffffff000), ('<Q', load + 40, 0x2000))  # p_vaddr + p_memsz wraps
PY
expect 101 "a loadable segment outside the file" "$dir/bad_off"
expect 101 "program headers outside the file" "$dir/bad_phoff"
expect 101 "a loadable segment outside the file or the address space" "$dir/bad_vaddr"
expect 101 "a directory" "$dir"
# a system call number of any size is answered -ENOSYS, reported once
cat >"$dir/bigsys.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <errno.h>
int main(int argc, char **argv)
{
    long r = syscall(strtol(argv[1], 0, 0));
    return r == -1 && errno == ENOSYS ? 0 : 1;
}
C
riscv64-linux-gnu-gcc -O2 -static -o "$dir/bigsys" "$dir/bigsys.c"
expect 0 "unsupported system call 18446744073709551615 (unknown)" "$dir/bigsys" -1
expect 0 "unsupported system call 9223372036854775807 (unknown)" "$dir/bigsys" 0x7fffffffffffffff
# mappings: a large reservation takes no host memory until touched, and
# address space unmapped is used again (200 GiB mapped and unmapped, 1 GiB
# at a time, in a 256 GiB guest space)
cat >"$dir/mm.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
int main(int argc, char **argv)
{
    unsigned long size = strtoul(argv[1], 0, 0);
    int n = atoi(argv[2]);
    for (int i = 0; i < n; i++) {
        char *r = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (r == MAP_FAILED) return 1;
        if (r[size / 2] != 0) return 2; /* fresh: zeros */
        r[size / 2] = 1;
        if (i + 1 < n) munmap(r, size);
    }
    return 0;
}
C
riscv64-linux-gnu-gcc -O2 -static -o "$dir/mm" "$dir/mm.c"
rss=$( { /usr/bin/time -f "%M" "$tksim" --quiet --functional "$dir/mm" 0x1000000000 1 >/dev/null; } 2>&1 | tail -1)
if (( rss > 200000 )); then echo "FAIL: a 64 GiB reservation took $rss KiB of host memory"; fail=1; else echo "tksim mm: 64 GiB reserved, $rss KiB resident"; fi
rc=0
"$tksim" --quiet --functional "$dir/mm" 0x40000000 200 || rc=$?
if [[ $rc != 0 ]]; then echo "FAIL: 200 mappings of 1 GiB, each unmapped before the next: exit $rc"; fail=1; else echo "tksim mm: 200 GiB mapped and unmapped, 1 GiB at a time"; fi
# the program's environment: empty unless given (-E, --host-env)
cat >"$dir/env.c" <<'C'
#include <stdio.h>
extern char **environ;
int main(void)
{
    for (char **e = environ; *e; e++) puts(*e);
    return 0;
}
C
riscv64-linux-gnu-gcc -O2 -static -o "$dir/env" "$dir/env.c"
got=$(TK_PROBE_VAR=host "$tksim" --quiet --functional "$dir/env")
[[ -z $got ]] || { echo "FAIL: the environment is not empty: $got"; fail=1; }
got=$(TK_PROBE_VAR=host "$tksim" --quiet -E A=1 --env B=2=3 -E A=4 "$dir/env" | tr '\n' ' ')
[[ $got == "B=2=3 A=4 " ]] || { echo "FAIL: -E gave '$got'"; fail=1; }
got=$(TK_PROBE_VAR=host "$tksim" --quiet --host-env -E TK_PROBE_VAR=given "$dir/env" | grep TK_PROBE_VAR)
[[ $got == "TK_PROBE_VAR=given" ]] || { echo "FAIL: --host-env with -E gave '$got'"; fail=1; }
expect 100 "wants NAME=VALUE" -E =x "$dir/env"
# --max-insns in the timing model stops as --functional does: exactly N
# committed, no instruction past them run (their writes included)
cat >"$dir/wloop.c" <<'C'
#include <unistd.h>
int main(void)
{
    for (int i = 0; i < 100000; i++) {
        char c = (char)('a' + i % 26);
        if (write(1, &c, 1) != 1) return 1;
    }
    return 0;
}
C
riscv64-linux-gnu-gcc -O2 -static -o "$dir/wloop" "$dir/wloop.c"
for n in 5000 7777; do
    f=$("$tksim" --quiet --functional --max-insns $n --stats-json "$dir/f.json" "$dir/wloop" | wc -c)
    t=$("$tksim" --quiet --max-insns $n --stats-json "$dir/t.json" "$dir/wloop" | wc -c)
    fi=$(jq -r '.instructions, .state_hash' "$dir/f.json" | tr '\n' ' ')
    ti=$(jq -r '.instructions, .state_hash' "$dir/t.json" | tr '\n' ' ')
    if [[ $f != "$t" || $fi != "$ti" || $ti != "$n "* ]]; then
        echo "FAIL: --max-insns $n: functional wrote $f bytes ($fi), timing $t ($ti)"; fail=1
    else
        echo "tksim --max-insns $n: $t bytes written, state $ti, as --functional"
    fi
done
# the statistics file: the program's name escaped; a fault recorded
cp "$dir/illegal" "$dir/we\"ird\\name"
for mode in --quiet --functional; do
    rc=0
    "$tksim" --quiet $mode --stats-json "$dir/s.json" "$dir/we\"ird\\name" 2>/dev/null || rc=$?
    if [[ $rc != 102 ]] || ! jq -e '.fault | test("illegal instruction")' "$dir/s.json" >/dev/null ||
        [[ $(jq -r .program "$dir/s.json") != "$dir/we\"ird\\name" ]]; then
        echo "FAIL: $mode: a fault's statistics file: $(cat "$dir/s.json")"; fail=1
    else
        echo "tksim $mode: a fault's statistics file names it: $(jq -c .fault "$dir/s.json")"
    fi
done
# tksim's own files never take a standard descriptor its caller closed:
# the statistics and trace files stay whole, and the guest finds the
# descriptor closed (its write(1) fails with EBADF, as under Linux)
printf '#include <errno.h>\n#include <unistd.h>\nint main(void) { return write(1, "x\\n", 2) < 0 && errno == EBADF ? 7 : 8; }\n' >"$dir/w1.c"
riscv64-linux-gnu-gcc -static -O2 -o "$dir/w1" "$dir/w1.c"
for mode in --quiet --functional; do
    rc=0
    "$tksim" --quiet $mode --stats-json "$dir/c.json" "$dir/w1" >&- || rc=$?
    if [[ $rc != 7 ]] || ! jq -e '.exit_code == 7' "$dir/c.json" >/dev/null 2>&1; then
        echo "FAIL: $mode with stdout closed: exit $rc, statistics: $(head -c 200 "$dir/c.json")"; fail=1
    else
        echo "tksim $mode, stdout closed: the guest's write(1) EBADF, the statistics whole"
    fi
done
rc=0
"$tksim" --stats-json "$dir/c.json" "$dir/w1" >/dev/null 2>&- || rc=$?
if [[ $rc != 8 ]] || ! jq -e '.exit_code == 8' "$dir/c.json" >/dev/null 2>&1; then
    echo "FAIL: stderr closed: exit $rc, statistics: $(head -c 200 "$dir/c.json")"; fail=1
else
    echo "tksim, stderr closed: its summary not in the statistics file"
fi
rc=0
"$tksim" --quiet --functional --trace-pc "$dir/t.tr" "$dir/w1" >&- || rc=$?
if [[ $rc != 7 ]] || grep -qv '^[0-9a-f]*$' "$dir/t.tr"; then
    echo "FAIL: stdout closed: exit $rc, the trace holds: $(grep -v '^[0-9a-f]*$' "$dir/t.tr" | head -3)"; fail=1
else
    echo "tksim --trace-pc, stdout closed: $(wc -l <"$dir/t.tr") PCs and nothing else"
fi
# a trace that cannot be written whole fails the run, with the reason
[[ -w /dev/full ]] && expect 100 "trace-pc /dev/full: No space left on device" --functional --trace-pc /dev/full "$dir/w1"
# --set is over the configuration files wherever it comes
printf 'tlb_entries = 32\n' >"$dir/t32.cfg"
"$tksim" --quiet --set tlb_entries=8 --config "$dir/t32.cfg" --stats-json "$dir/s8.json" "$dir/w1" >/dev/null || true
if [[ $(jq -r .tlb_entries "$dir/s8.json") != 8 ]]; then
    echo "FAIL: --set before --config: tlb_entries $(jq -r .tlb_entries "$dir/s8.json"), want 8"; fail=1
else
    echo "tksim --set tlb_entries=8 --config (32): 8"
fi
exit $fail
