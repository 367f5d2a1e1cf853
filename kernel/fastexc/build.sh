#!/bin/bash
# kernel/fastexc/build.sh OUT - builds the fast-exception guest kernel.
#
# Debian's linux-source-6.1 (the tarball in /usr/src), with:
#   fastexc.c        -> arch/x86/kernel/fastexc.c   (the fast path)
#   fastexc.h        -> include/uapi/linux/fastexc.h (its interface; trapkit
#                       includes the same file)
#   linux-fastexc.h  -> include/linux/fastexc.h      (the kernel's hooks)
#   hooks.patch         the hooks in the fault, trap, signal, fork and prctl
#                       code, Kconfig and the mm/task fields
# and a small configuration: tinyconfig plus `config` here.  The result is
# OUT/bzImage; OUT/stamp records what it was built from, so a second run
# with the same inputs and source package does nothing.  CC may name a
# compiler wrapper (make kernel-test uses ccache when it is installed).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: build.sh OUT}
tarball=/usr/src/linux-source-6.1.tar.xz
mkdir -p "$out"
out=$(cd "$out" && pwd)

say() { echo "kernel-test: $*"; }
die() { echo "kernel-test: error: $*" >&2; exit 2; }

[[ -f $tarball ]] || die "$tarball is missing: scripts/install-deps.sh kernel-test installs linux-source-6.1"
for tool in make gcc flex bison bc; do
    command -v "$tool" >/dev/null || die "$tool is missing: scripts/install-deps.sh kernel-test installs it"
done

srcver=$(dpkg-query -W -f='${Version}' linux-source-6.1 2>/dev/null || stat -c %Y "$tarball")
stamp=$( (echo "$srcver"; cat "$here"/fastexc.c "$here"/fastexc.h "$here"/linux-fastexc.h \
          "$here"/hooks.patch "$here"/config "$here"/build.sh) | sha256sum | cut -c1-16)
if [[ -f $out/bzImage && -f $out/stamp && $(cat "$out/stamp") == "$stamp" ]]; then
    say "fast-exception kernel: up to date ($out/bzImage)"
    exit 0
fi

t0=$(date +%s)
src=$out/linux
say "fast-exception kernel: unpacking linux-source-6.1 $srcver"
rm -rf "$src" "$out/bzImage" "$out/stamp"
mkdir -p "$src"
tar -xf "$tarball" -C "$src" --strip-components=1
cp "$here/fastexc.c" "$src/arch/x86/kernel/fastexc.c"
cp "$here/fastexc.h" "$src/include/uapi/linux/fastexc.h"
cp "$here/linux-fastexc.h" "$src/include/linux/fastexc.h"
(cd "$src" && patch -p1 -s --no-backup-if-mismatch < "$here/hooks.patch") ||
    die "hooks.patch does not apply to linux-source-6.1 $srcver"

say "fast-exception kernel: configuring (tinyconfig + kernel/fastexc/config)"
make -s -C "$src" tinyconfig >/dev/null
"$src/scripts/kconfig/merge_config.sh" -m -O "$src" "$src/.config" "$here/config" >/dev/null
make -s -C "$src" olddefconfig
missing=$(grep '^CONFIG_' "$here/config" | while IFS= read -r line; do
    grep -qx -- "$line" "$src/.config" || echo "${line%%=*}"; done)
[[ -z $missing ]] || die "the kernel's configuration lacks: $missing"

jobs=$(nproc)
say "fast-exception kernel: building bzImage with $jobs jobs (10-25 minutes the first time)"
log=$out/build.log
cc=${CC:-gcc}
if ! make -C "$src" -j"$jobs" CC="$cc" bzImage > "$log" 2>&1; then
    tail -n 40 "$log" >&2
    die "the kernel build failed (log: $log)"
fi
cp "$src/arch/x86/boot/bzImage" "$out/bzImage"
echo "$stamp" > "$out/stamp"
rm -rf "$src" # 1.5 GB; a changed input unpacks afresh anyway (ccache keeps the objects)
say "fast-exception kernel: built in $(( $(date +%s) - t0 )) s ($out/bzImage)"
