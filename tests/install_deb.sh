#!/usr/bin/env bash
# `make deb`, and the package unpacked in a scratch root (dpkg -x) used as the
# README says: the example built with pkg-config (shared and static) and with
# CMake's find_package, and run; every man page rendered from the package.
#   install_deb.sh SOURCE_DIR BUILD_DIR
# Checked: the file name trapkit_<version>_<arch>.deb; its control fields and
# Depends as dpkg-shlibdeps computes them (libzydis4.0, libc6, libstdc++6); its
# shlibs and ldconfig; the files under /usr with the libraries in
# lib/<multiarch>, stripped; the man pages gzipped, their links resolving,
# each rendering (man -l) without a warning.
# The build is up to date when ctest runs: `make -o build` keeps make from
# building or configuring it again.
set -euo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export LC_ALL=C.UTF-8 MANWIDTH=80
fail() {
    echo "FAIL: $*"
    exit 1
}
check_output() {
    grep -Eq "^mechanism [a-z-]+: write to page 0x[0-9a-f]+ caught, value 'x'$" <<<"$1" ||
        fail "unexpected output: $1"
}

echo "== make deb"
rm -f "$build"/package/trapkit_*.deb
make -C "$src" --no-print-directory -o build BUILD="$build" deb >"$tmp/deb.log" 2>&1 ||
    fail "make deb: $(cat "$tmp/deb.log")"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:[A-Z]*=//p' "$build/CMakeCache.txt")
arch=$(dpkg --print-architecture)
deb=$build/package/trapkit_${version}_${arch}.deb
[[ -f $deb ]] || fail "no $deb: $(ls "$build/package")"
[[ ! -e $build/package/_CPack_Packages ]] || fail "make deb left its staging tree"

field() { dpkg-deb -f "$deb" "$1"; }
[[ $(field Package) == trapkit && $(field Version) == "$version" && $(field Architecture) == "$arch" ]] ||
    fail "control: $(dpkg-deb -f "$deb")"
[[ -n $(field Maintainer) && -n $(field Description) && $(field Section) == libdevel ]] ||
    fail "control: $(dpkg-deb -f "$deb")"
depends=$(field Depends)
echo "Depends: $depends"
for p in libzydis4.0 libc6 libstdc++6; do
    grep -qxF "$p" <<<"$(tr ',' '\n' <<<"$depends" | sed 's/^ *//; s/ .*//')" || fail "Depends lacks $p: $depends"
done
dpkg-deb -e "$deb" "$tmp/control"
grep -qx "libtrapkit 0 trapkit (>= $version)" "$tmp/control/shlibs" || fail "shlibs: $(cat "$tmp/control/shlibs")"
grep -qx "libtrapkit_eh 0 trapkit (>= $version)" "$tmp/control/shlibs" || fail "shlibs: $(cat "$tmp/control/shlibs")"
grep -q ldconfig "$tmp/control/postinst" || fail "postinst runs no ldconfig"

echo "== dpkg -x into a scratch root"
root=$tmp/root
dpkg -x "$deb" "$root"
triplet=$(gcc -print-multiarch)
L=$root/usr/lib/$triplet
for f in "$L/libtrapkit.so.0" "$L/libtrapkit.so" "$L/libtrapkit.a" "$L/libtrapkit_cxx.a" \
    "$L/libtrapkit_eh.so.0" "$L/pkgconfig/trapkit.pc" "$L/cmake/trapkit/trapkitConfig.cmake" \
    "$L/cmake/trapkit/trapkitConfigVersion.cmake" "$L/cmake/trapkit/trapkitTargets.cmake" \
    "$root/usr/include/trapkit/trapkit.h" "$root/usr/bin/trapkit" "$root/usr/bin/tksim" \
    "$root/usr/share/man/man7/trapkit.7.gz" "$root/usr/share/man/man1/trapkit.1.gz"; do
    [[ -e $f ]] || fail "the package lacks ${f#$root}"
done
[[ $(readlink "$L/libtrapkit.so.0") == libtrapkit.so.$version ]] || fail "libtrapkit.so.0 link"
for f in "$L/libtrapkit.so.$version" "$L/libtrapkit_eh.so.$version" "$root/usr/bin/trapkit"; do
    grep -q ", stripped" <<<"$(file -L "$f")" || fail "not stripped: $(file -L "$f")"
done
contents=$(dpkg-deb -c "$deb")
! grep -Eq " \./usr/(local|lib/cmake|lib/pkgconfig|lib/libtrapkit)" <<<"$contents" ||
    fail "files outside the Debian layout: $(grep -E '/usr/(local|lib/[^x])' <<<"$contents")"
grep -qx "trapkit $version" <<<"$("$root/usr/bin/trapkit" version)" || fail "trapkit version"
grep -q "usage: tksim" <<<"$("$root/usr/bin/tksim" --help)" || fail "tksim --help"

echo "== the man pages of the package"
pages=$(find "$src/man" -name '*.[1-8]' | wc -l)
found=0
while read -r page; do
    out=$(man --warnings=w -l "$page" 2>&1 >"$tmp/page.txt") || fail "man -l $page"
    [[ -z $out ]] || fail "${page#$root}: $out"
    grep -q "^NAME" "$tmp/page.txt" || fail "${page#$root}: nothing rendered"
    found=$((found + 1))
done < <(find "$root/usr/share/man" -type f -name '*.gz')
[[ $found == "$pages" ]] || fail "$found pages in the package, $pages in man/"
links=0
while read -r link; do
    [[ -f $link ]] || fail "${link#$root}: a link to nothing ($(readlink "$link"))"
    links=$((links + 1))
done < <(find "$root/usr/share/man" -type l)
((links > 40)) || fail "only $links links to man pages"
grep -q "tk_ckpt_start, tk_ckpt_instant, tk_ckpt_wait" <<<"$(man -M "$root/usr/share/man" tk_ckpt_wait)" ||
    fail "man tk_ckpt_wait does not find tk_ckpt_start(3)"
echo "$found pages, $links links"

echo "== the README example against the package"
mkdir "$tmp/app" && cd "$tmp/app"
cp "$src/examples/readme_example.c" example.c
export PKG_CONFIG_PATH=$L/pkgconfig
[[ $(pkg-config --modversion trapkit) == "$version" ]] || fail "pkg-config --modversion"
cc example.c $(pkg-config --cflags --libs trapkit) -o example
check_output "$(LD_LIBRARY_PATH=$L ./example)"
libs=$(LD_LIBRARY_PATH=$L ldd ./example)
grep -q "libtrapkit.so.0 => $L/" <<<"$libs" || fail "$libs"
cc example.c $(pkg-config --cflags trapkit) -Wl,-Bstatic $(pkg-config --static --libs trapkit) \
    -Wl,-Bdynamic -o example-static
check_output "$(./example-static)"
awk '/^```cmake$/ {on=1; next} on && /^```$/ {exit} on {print}' "$src/README.md" >CMakeLists.txt
cmake -S . -B build -DCMAKE_PREFIX_PATH="$root/usr" >"$tmp/cmake.log" 2>&1 &&
    cmake --build build >>"$tmp/cmake.log" 2>&1 || fail "$(cat "$tmp/cmake.log")"
grep -q "trapkit_DIR:PATH=$L/cmake/trapkit" build/CMakeCache.txt || fail "find_package found another trapkit"
check_output "$(build/example)"
echo "install deb: ok"
