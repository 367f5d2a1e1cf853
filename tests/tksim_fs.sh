#!/usr/bin/env bash
# tksim's file system rules, with tests/tksim/fsroot.c: without --fs-root the
# program reads the host's files and every change is refused with EROFS
# (after the checks Linux makes first); with --fs-root ROOT nothing outside
# ROOT is reached, by "..", by symbolic links (absolute, relative, or made
# by the program) or by /proc.  The program's answers are compared with the
# rules' (below), and the files outside are checked untouched.
# Usage: tksim_fs.sh TKSIM FSROOT_PROGRAM
set -euo pipefail
tksim=$(realpath "$1") prog=$(realpath "$2")
[[ -x $prog ]] || { echo "missing $prog (built with riscv64-linux-gnu-gcc: scripts/install-deps.sh)"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # check NAME: compares $tmp/out with the rules on stdin
    if diff <(cat) "$tmp/out" >"$tmp/diff"; then
        echo "$1: as the rules say ($(wc -l <"$tmp/out") answers)"
    else
        echo "FAIL $1: (< the rules, > tksim)"; cat "$tmp/diff"; fail=1
    fi
}
tree() { (cd "$1" && find . -printf '%p %y %s %m\n' | sort); }

# the host's files, read-only: the answers below are those Linux gives on
# a read-only mount (checked on 6.x with a tmpfs remounted ro)
mkdir -p "$tmp/ro/dir"
echo "present text" >"$tmp/ro/present"
tree "$tmp/ro" >"$tmp/ro.before"
rc=0
(cd "$tmp/ro" && "$tksim" --quiet --functional "$prog" readonly "$tmp/ro" >"$tmp/out" 2>"$tmp/err") || rc=$?
[[ $rc == 0 ]] || { echo "FAIL readonly: exit status $rc: $(cat "$tmp/err")"; fail=1; }
cat >"$tmp/rules" <<'EOF'
access present R_OK: ok
access present W_OK: EROFS
access dir W_OK: EROFS
access nope F_OK: ENOENT
open present read-only: ok
read: 'present text
'
open present write-only: EROFS
open present read-write: EROFS
open present O_TRUNC: EROFS
open present O_CREAT read-only: ok
open dir O_TRUNC: EISDIR
open present O_CREAT|O_EXCL: EEXIST
open new O_CREAT: EROFS
open nodir/new O_CREAT: ENOENT
open dir write-only: EISDIR
mkdir dir: EEXIST
mkdir new: EROFS
unlink present: EROFS
unlink nope: EROFS
unlink .: EISDIR
rmdir dir: EROFS
rmdir .: EINVAL
rename present: EROFS
rename nope: EROFS
symlink: EROFS
open /dev/null write-only: ok
write /dev/null: 4
getcwd is tksim's: 1
chdir dir: ok
access ../present: ok
EOF
check "no --fs-root" <"$tmp/rules"
tree "$tmp/ro" | cmp -s - "$tmp/ro.before" || { echo "FAIL no --fs-root: the files changed"; fail=1; }
# the rules themselves, where this machine can show them: the program under
# qemu-riscv64 in a read-only tmpfs, in a user and mount namespace
if command -v qemu-riscv64 >/dev/null && unshare -rm true 2>/dev/null; then
    mkdir "$tmp/rom"
    unshare -rm sh -c 'mount -t tmpfs none "$1" && mkdir "$1/dir" && echo "present text" >"$1/present" &&
        mount -o remount,ro "$1" && cd "$1" && qemu-riscv64 "$2" readonly "$1"' sh "$tmp/rom" "$prog" >"$tmp/out" 2>&1 || true
    check "a read-only mount, under qemu-riscv64" <"$tmp/rules"
else
    echo "(no user namespaces or qemu-riscv64 here: the rules are not shown on a real read-only mount)"
fi

# a root, with ways out of it prepared
fs=$tmp/fs
mkdir -p "$fs/root/d"
echo secret >"$fs/secret"
ln -s / "$fs/root/abs"
ln -s .. "$fs/root/up"
ln -s ../secret "$fs/root/sec"
rc=0
"$tksim" --quiet --fs-root "$fs/root" "$prog" escape >"$tmp/out" 2>"$tmp/err" || rc=$?
[[ $rc == 0 ]] || { echo "FAIL escape: exit status $rc: $(cat "$tmp/err")"; fail=1; }
check "--fs-root" <<'EOF'
open ../secret: ENOENT
open /../secret: ENOENT
open d/../../secret: ENOENT
open up/secret: ENOENT
open sec: ENOENT
open abs/secret: ENOENT
open abs/../../secret: ENOENT
stat up/secret: ENOENT
access sec: ENOENT
open /proc/self/cwd/../secret: ENOENT
getcwd: /
chdir ..: ok
getcwd: /
chdir up/d: ok
getcwd: /d
open ../../../made O_CREAT: ok
chdir /: ok
mkdir up/newdir: ok
symlink mine -> /: ok
open mine/../secret: ENOENT
open mine/made: ok
rename made -> ../../moved: ok
unlink ../secret: ENOENT
unlink sec (the link): ok
open up/d/../../escaped O_CREAT: ok
readlink abs: '/'
readlink /proc/self/exe ends in /fsroot: 1
EOF
want="./abs l ./d d ./escaped f ./mine l ./moved f ./newdir d ./up l"
got=$(cd "$fs/root" && find . -mindepth 1 -printf '%p %y\n' | sort | tr '\n' ' ' | sed 's/ $//')
[[ $got == "$want" ]] || { echo "FAIL --fs-root: the root holds: $got (want $want)"; fail=1; }
got=$(ls -A "$fs" | tr '\n' ' ')
[[ $got == "root secret " && $(cat "$fs/secret") == secret ]] ||
    { echo "FAIL --fs-root: outside the root: $got"; fail=1; }
exit $fail
