#!/usr/bin/env bash
# `make install` and `make uninstall`, and README.md's "Use it in your program"
# against the installed copy, as a user would run it.
#   install_make.sh SOURCE_DIR BUILD_DIR
# - make install PREFIX=$HOME/opt/trapkit (a scratch HOME): the files are there,
#   ldconfig is run when root, and the hint about rpath / LD_LIBRARY_PATH is
#   printed (ldconfig is a stand-in that logs its calls: the test leaves the
#   system's cache alone);
# - the README's commands, each checked to be in README.md word for word: the
#   example built with pkg-config, with an rpath, without one (it must fail to
#   start, then run with LD_LIBRARY_PATH), with CMake's find_package (the
#   README's CMakeLists.txt), statically with pkg-config --static (and a
#   program of atomic sequences, which needs the shared Zydis); `cc -static`
#   fails, on Zydis, as the README says;
# - the man pages are found through their links; trapkit runs;
# - make install DESTDIR=... stages the default prefix without ldconfig, and
#   make uninstall (both ways) leaves no file and no directory of trapkit's.
# The build is up to date when ctest runs: `make -o build` keeps make from
# building or configuring it again.
set -euo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export HOME=$tmp/home LC_ALL=C
mkdir -p "$HOME"
ldlog=$tmp/ldconfig.log
cat >"$tmp/ldconfig" <<EOF
#!/bin/sh
echo "ldconfig \$*" >>"$ldlog"
EOF
chmod +x "$tmp/ldconfig"
fail() {
    echo "FAIL: $*"
    exit 1
}
mk() { make -C "$src" --no-print-directory -o build -o deps BUILD="$build" LDCONFIG="$tmp/ldconfig" "$@"; }
# a command of the README, word for word, run here
readme() {
    grep -qF -- "$1" "$src/README.md" || fail "README.md no longer says: $1"
    echo "\$ $1"
    eval "$1"
}
check_output() {
    grep -Eq "^mechanism [a-z-]+: write to page 0x[0-9a-f]+ caught, value 'x'$" <<<"$1" ||
        fail "unexpected output: $1"
}

echo "== make install PREFIX=\$HOME/opt/trapkit"
mk install PREFIX="$HOME/opt/trapkit" >"$tmp/install.log" 2>&1 || {
    cat "$tmp/install.log"
    fail "make install"
}
P=$HOME/opt/trapkit
for f in lib/libtrapkit.so.0 lib/libtrapkit.so lib/libtrapkit.a lib/libtrapkit_cxx.a \
    lib/libtrapkit_eh.so.0 include/trapkit/trapkit.h include/trapkit/aseq.h \
    include/trapkit/exception.hpp lib/pkgconfig/trapkit.pc lib/cmake/trapkit/trapkitConfig.cmake \
    lib/cmake/trapkit/trapkitTargets.cmake bin/trapkit bin/tksim share/man/man1/trapkit.1 \
    share/man/man1/tksim.1 share/man/man7/trapkit.7 share/man/man3/tk_protect.3 \
    lib/libtrapkit_dsm.a lib/pkgconfig/trapkit-dsm.pc include/trapkit/dsm.h share/man/man3/tk_dsm.3; do
    [[ -e $P/$f ]] || fail "make install did not install $f"
done
[[ $(readlink "$P/share/man/man3/tk_prot1.3") == tk_protect.3 ]] || fail "no link tk_prot1.3"
if [[ $(id -u) == 0 ]]; then
    grep -qx "ldconfig " "$ldlog" || fail "make install as root did not run ldconfig"
fi
grep -q "the dynamic linker does not search $P/lib: link with -Wl,-rpath,$P/lib or run with LD_LIBRARY_PATH=$P/lib" \
    "$tmp/install.log" || fail "no hint about rpath and LD_LIBRARY_PATH: $(cat "$tmp/install.log")"
grep -qx "trapkit [0-9.]*" <<<"$("$P/bin/trapkit" version)" || fail "installed trapkit version"
grep -q "tk_protect, tk_prot1" <<<"$(man -M "$P/share/man" tk_prot1 2>/dev/null)" ||
    fail "man tk_prot1 does not find tk_protect(3)"

mkdir "$tmp/app" && cd "$tmp/app"
cp "$src/examples/readme_example.c" example.c
readme 'export PKG_CONFIG_PATH=$HOME/opt/trapkit/lib/pkgconfig'
echo "== pkg-config, no rpath: fails to start, runs with LD_LIBRARY_PATH"
readme 'cc example.c $(pkg-config --cflags --libs trapkit) -o example'
if grep -q "libtrapkit.so.0 " <<<"$(/sbin/ldconfig -p)"; then
    echo "(a trapkit is installed on this system: the failure without rpath is not checked)"
else
    if ./example >"$tmp/out" 2>&1; then fail "ran without rpath or LD_LIBRARY_PATH"; fi
    grep -q "libtrapkit.so.0: cannot open shared object file" "$tmp/out" || fail "$(cat "$tmp/out")"
fi
check_output "$(readme 'LD_LIBRARY_PATH=$HOME/opt/trapkit/lib ./example')"
echo "== pkg-config with an rpath"
readme 'cc example.c $(pkg-config --cflags --libs trapkit) -Wl,-rpath,$HOME/opt/trapkit/lib -o example'
check_output "$(./example)"
grep -q "libtrapkit.so.0 => $P/lib/libtrapkit.so.0" <<<"$(ldd ./example)" || fail "$(ldd ./example)"

echo "== CMake find_package, the README's CMakeLists.txt"
awk '/^```cmake$/ {on=1; next} on && /^```$/ {exit} on {print}' "$src/README.md" >CMakeLists.txt
grep -q "find_package(trapkit" CMakeLists.txt || fail "no CMakeLists.txt in README.md"
readme 'cmake -S . -B build -DCMAKE_PREFIX_PATH=$HOME/opt/trapkit && cmake --build build && build/example' \
    >"$tmp/out" 2>&1 || fail "$(cat "$tmp/out")"
check_output "$(tail -n1 "$tmp/out")"
sed -i 's/trapkit::trapkit)/trapkit::trapkit_static)/' CMakeLists.txt
rm -rf build
cmake -S . -B build -DCMAKE_PREFIX_PATH="$P" >/dev/null && cmake --build build >/dev/null
check_output "$(build/example)"
! grep -q libtrapkit <<<"$(ldd build/example)" || fail "trapkit::trapkit_static linked libtrapkit.so"

echo "== static: pkg-config --static"
readme 'cc example.c $(pkg-config --cflags trapkit) -Wl,-Bstatic $(pkg-config --static --libs trapkit) -Wl,-Bdynamic -o example'
check_output "$(./example)"
! grep -q libtrapkit <<<"$(ldd ./example)" || fail "the static link uses libtrapkit.so"
# atomic sequences: their check needs Zydis, which stays a shared library
cat >aseq.c <<'EOF'
#include <stdio.h>
#include <trapkit/aseq.h>
static long counter;
int main(void)
{
    TK_ASEQ_HYB_JUMP(TK_ASEQ_ALL, { counter = counter + 1; });
    tk_aseq_stats st;
    tk_aseq_get_stats(&st);
    printf("%ld %llu %d\n", counter, (unsigned long long)st.sequences, tk_aseq_check(2));
    return 0;
}
EOF
# the shared virtual memory: tk_dsm(3)'s example, built with pkg-config
# trapkit-dsm and run on 3 ranks (each adds 1 under a lock)
awk '/^\.SH EXAMPLES/ {on=1; next} on && /^\.nf/ {nf=1; next} nf && /^\.fi/ {exit} nf {print}' \
    "$src/man/man3/tk_dsm.3" | sed 's/\\e/\\/g' >dsm.c
grep -q tk_dsm_alloc dsm.c || fail "no example in tk_dsm.3"
mpicc -O2 dsm.c $(pkg-config --cflags --libs trapkit-dsm) -o dsm || fail "the tk_dsm(3) example does not build"
ranks=$("$src/tests/dsm_run.sh" 3 ./dsm 2>&1) || fail "the tk_dsm(3) example: $ranks"
[[ $ranks == 3 ]] || fail "the tk_dsm(3) example printed $ranks, not 3"
cc -O2 aseq.c $(pkg-config --cflags trapkit) -Wl,-Bstatic $(pkg-config --static --libs trapkit) \
    -Wl,-Bdynamic -o aseq
# one increment, one sequence registered, none failing the check
[[ $(./aseq) == "1 1 0" ]] || fail "aseq: $(./aseq)"
dyn=$(objdump -p aseq)
grep -q "NEEDED *libZydis.so" <<<"$dyn" || fail "aseq does not load Zydis"
! grep -q "NEEDED *libtrapkit" <<<"$dyn" || fail "aseq needs libtrapkit.so"
echo "== cc -static: impossible without a static Zydis"
if cc -static example.c $(pkg-config --cflags trapkit) $(pkg-config --static --libs trapkit) \
    -o example-static >"$tmp/out" 2>&1; then
    fail "cc -static succeeded: README.md says it cannot"
fi
grep -q "attempted static link of dynamic object .*libZydis.so.4.0" "$tmp/out" || fail "$(cat "$tmp/out")"
grep -qF 'attempted static link of dynamic object libZydis.so.4.0' "$src/README.md" ||
    fail "README.md does not say why cc -static fails"

echo "== make uninstall PREFIX=\$HOME/opt/trapkit"
: >"$ldlog"
mk uninstall PREFIX="$P" >"$tmp/uninstall.log" 2>&1 || fail "$(cat "$tmp/uninstall.log")"
[[ ! -e $P ]] || fail "left behind: $(find "$P" | head)"
if [[ $(id -u) == 0 ]]; then grep -qx "ldconfig " "$ldlog" || fail "uninstall did not run ldconfig"; fi

echo "== make install DESTDIR=stage (PREFIX /usr/local), make uninstall"
: >"$ldlog"
stage=$tmp/stage
mk install DESTDIR="$stage" >"$tmp/install.log" 2>&1 || fail "$(cat "$tmp/install.log")"
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:[A-Z]*=//p' "$build/CMakeCache.txt")
[[ -e $stage/usr/local/$libdir/libtrapkit.so.0 && -e $stage/usr/local/bin/trapkit ]] ||
    fail "DESTDIR install: $(find "$stage" | head)"
[[ ! -s $ldlog ]] || fail "a DESTDIR install ran ldconfig: $(cat "$ldlog")"
! grep -q "dynamic linker" "$tmp/install.log" || fail "hint given for a DESTDIR install"
# the staged tree works where it is (trapkit.pc and the CMake package are relocatable)
PKG_CONFIG_PATH=$stage/usr/local/$libdir/pkgconfig
cc example.c $(pkg-config --cflags --libs trapkit) -Wl,-rpath,"$(pkg-config --variable=libdir trapkit)" -o staged
check_output "$(./staged)"
mk uninstall DESTDIR="$stage" >"$tmp/uninstall.log" 2>&1 || fail "$(cat "$tmp/uninstall.log")"
left=$(find "$stage" ! -type d)
[[ -z $left ]] || fail "make uninstall left: $left"
left=$(find "$stage" -type d -name 'trapkit*')
[[ -z $left ]] || fail "make uninstall left directories: $left"
[[ ! -s $ldlog ]] || fail "a DESTDIR uninstall ran ldconfig"
echo "install make: ok"
