#!/usr/bin/env bash
# kernel/cxx/build.sh OUT KVER - builds tkcxx.ko for the kernel KVER (its
# headers in /usr/src/linux-headers-KVER, from Debian's linux-headers-KVER)
# into OUT, and tkcxx-user, the measurements' user-space twin (the same
# code against g++'s own runtime, static).
#
# The C++ part is compiled freestanding with the kernel's code model and
# its rules (no red zone, no SSE, no stack protector, 8-byte stack
# alignment), with unwind tables, and partially linked by kcxx.lds into
# cxx.o; kbuild then builds module.c and links the two (cxx.o as a
# shipped object).
set -euo pipefail
if (($# != 2)); then
    echo "usage: $0 OUT KVER" >&2
    exit 2
fi
out=$1 kver=$2
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
kdir=/usr/src/linux-headers-$kver
if [[ ! -f $kdir/Makefile ]]; then
    echo "kernel/cxx/build.sh: no headers for $kver in $kdir (apt-get install linux-headers-$kver)" >&2
    exit 1
fi
mkdir -p "$out/obj"
CXX=${CXX:-g++}
gccinc=$($CXX -print-file-name=include)
kflags=(-std=gnu++17 -O2 -g -nostdinc -nostdinc++ -isystem "$gccinc" -I "$here/include"
    -ffreestanding -fno-pic -mcmodel=kernel -mno-red-zone -mgeneral-regs-only -mno-sse -mno-mmx
    -mno-avx -mpreferred-stack-boundary=3 -fno-stack-protector -fno-common -fno-threadsafe-statics
    -fno-strict-aliasing -fexceptions -fasynchronous-unwind-tables -fno-jump-tables
    -fcf-protection=none -fno-builtin-malloc -Wall -Wextra -Wno-unused-parameter
    -DTK_CFI_REMEMBER=2) # (g++ nests DW_CFA_remember_state once: a kernel stack is 16 KiB)
srcs=("$root/cxx/cfi.cpp" "$here/rt/abi.cpp" "$here/rt/eh.cpp" "$here/tests/conformance.cpp"
    "$here/tests/bench.cpp")
objs=()
for s in "${srcs[@]}"; do
    o=$out/obj/$(basename "${s%.*}").o
    $CXX "${kflags[@]}" -c "$s" -o "$o"
    objs+=("$o")
done
$CXX -c -o "$out/obj/eh_S.o" "$here/rt/eh.S"
objs+=("$out/obj/eh_S.o")
ld -r -T "$here/kcxx.lds" -o "$out/cxx.o_shipped" "${objs[@]}"
# what the C++ part calls must be the module's own or the kernel's exports
undef=$(nm -u "$out/cxx.o_shipped" | awk '{print $2}' | grep -v -x -E \
    'tkk_(alloc|free|print|warn|bug|now|snprintf)|tkcxx_(ctor_throws|dtor_throws|unit)|mem(cpy|move|set|cmp)|str(len|cmp)' || true)
if [[ -n $undef ]]; then
    echo "kernel/cxx/build.sh: the C++ part needs symbols neither it nor the kernel defines:" >&2
    echo "$undef" >&2
    exit 1
fi
cp "$here/Kbuild" "$here/module.c" "$out/"
# (modpost reads each object's .cmd for the CRCs of what it exports:
# cxx.o exports nothing)
echo "savedcmd_cxx.o := cp cxx.o_shipped cxx.o" >"$out/.cxx.o.cmd"
mkdir -p "$out/include"
cp "$here/include/tkcxx.h" "$out/include/"
make -s -C "$kdir" M="$(cd "$out" && pwd)" modules
# the user-space twin: the measurements against g++'s own runtime
$CXX -std=gnu++17 -O2 -static -DTKCXX_USER -iquote "$here/include" -o "$out/tkcxx-user" \
    "$here/tests/bench.cpp"
echo "kernel/cxx/build.sh: $out/tkcxx.ko for $kver, and $out/tkcxx-user"
