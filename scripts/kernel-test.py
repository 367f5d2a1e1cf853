#!/usr/bin/env python3
"""make kernel-test: trapkit's tests on kernels other than the one running here.

Each guest is a kernel from a Debian package, booted under qemu-system-x86_64
(TCG: nested KVM does not work on the machines we run on) with an initramfs
that holds busybox, the test programs of a build directory (stripped), the
shared libraries they load and a plan: every test ctest knows whose program is
an ELF file, with its arguments, environment and working directory, exactly
as ctest runs it.  The guest runs them one after another, prints each result
on its serial console and powers off; this script shows progress, keeps the
console log, prints a summary and exits 0 only if every test passed or was
skipped for a reason the guest allows.

In the guest, TK_TEST_EXPECT_MECHS names the mechanisms its kernel must give:
a test of one of them that finds it unavailable fails instead of skipping.

The guest `fastexc` boots Debian's linux-source-6.1 with kernel/fastexc (the
fast exception path, built by kernel/fastexc/build.sh and cached in
build-kernel/fastexc) and runs tests/fastexc_kernel there; `debian12-icount`
runs the same program on Debian's own kernel.  Both count instructions
(qemu -icount shift=0: the guest's TSC advances one per instruction), and
the run ends that part with the line
`fast-kernel round trip: N instructions; stock signal: M instructions; ratio R`.

The guest `debian12-cxx` loads kernel/cxx's module (C++ with exceptions,
RTTI and global objects: built by kernel/cxx/build.sh against Debian's
headers for that kernel) into Debian's own kernel: its tests, a throw nothing
catches and std::terminate, a global constructor that throws (the load must
fail cleanly) and a global destructor that throws (the unload goes on), 100 loads and unloads without a leak, then its measurements
and the same code in a user process of the guest (instructions).  The
results go to build-kernel/cxx-results.jsonl for the report.

usage: scripts/kernel-test.py [--build DIR] [--guest NAME] [--part fastexc|cxx|suite|all]
                              [--tests REGEX] [--exclude REGEX] [--list]
"""
import argparse
import gzip
import json
import os
import re
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# The guests.  `package` is a Debian binary package holding /boot/vmlinuz-*,
# or a metapackage whose first linux-image-* dependency is one.  `expect` are
# the mechanisms that kernel must offer (with -cpu max, TCG gives the guest
# protection keys).  `skip_ok` are the mechanisms its tests may skip.
# `build` instead of `package`: a script that builds the kernel into a
# directory (cached) and leaves bzImage there.  `tests`: the tests that guest
# runs (a regex).  `icount`: the guest counts instructions.  `env`: more
# environment for its tests.  `part`: fastexc (the fast exception path),
# cxx (the C++ module: `module` is the script that builds it) or suite
# (trapkit's tests).
GUESTS = {
    "fastexc": {
        "what": "Debian's linux-source-6.1 with kernel/fastexc, the fast exception path "
        "(tinyconfig + kernel/fastexc/config)",
        "build": "kernel/fastexc/build.sh",
        "expect": [],
        "tests": r"^fastexc_kernel$",
        "icount": True,
        "env": ["TK_TEST_EXPECT_FASTEXC=1"],
        "part": "fastexc",
    },
    "fastexc-mech": {
        "what": "the same kernel: trapkit's mechanism tests on fast-kernel",
        "build": "kernel/fastexc/build.sh",
        "cache_as": "fastexc",
        "expect": ["posix", "fast-kernel"],
        "tests": r"\.fast-kernel(\.fast-o(n|ff))?$",
        "env": [],
        "part": "fastexc",
    },
    "debian12-icount": {
        "what": "Debian 12's own kernel (6.1), counting instructions: the stock signal path",
        "package": "linux-image-amd64",
        "expect": [],
        "tests": r"^fastexc_kernel$",
        "icount": True,
        "env": [],
        "part": "fastexc",
    },
    "debian12-cxx": {
        "what": "Debian 12's own kernel (6.1), counting instructions: kernel/cxx, C++ with "
        "exceptions in a module",
        "package": "linux-image-amd64",
        "module": "kernel/cxx/build.sh",
        "expect": [],
        "icount": True,
        "part": "cxx",
    },
    "debian12": {
        "what": "Debian 12's own kernel (6.1): no WP_UNPOPULATED, WP_ASYNC, PAGEMAP_SCAN or "
        "UFFDIO_MOVE; soft-dirty bits and protection keys",
        "package": "linux-image-amd64",
        "expect": ["posix", "uffd-sigbus", "uffd-thread", "soft-dirty", "pkeys"],
        "part": "suite",
    },
}
GUEST_ORDER = ["fastexc", "fastexc-mech", "debian12-icount", "debian12-cxx", "debian12"]

# Test names never run in a guest: the runs that hide kernel features from
# the probe imitate an older kernel on this one (in a guest the kernel is the
# older one); tksim's compare it with qemu-riscv64, which the guest lacks,
# and do not depend on the kernel.
NOT_IN_GUEST = r"\.linux-6\.1$|^tksim"

# Tests that check what QEMU's TCG does not emulate as the CPU does; they
# are left out of every guest, and the summary says why.
EMULATOR_LIMITS = {
    r"^aseq_regs$": "TCG takes interrupts only between translation blocks, so no signal lands "
    "inside an atomic sequence for it to roll forward",
    r"^fast_subpage\.": "QEMU 7.2's TCG loses the parity flag when it single-steps (TF) a locked "
    "read-modify-write of unaligned memory, which the test's misaligned lock inc does",
}

TIMEOUT_SCALE = 3  # TCG runs the guest's instructions several times slower
# ... so the long tests do an eighth of their rounds, faults and seconds
GUEST_ENV = ["TK_TEST_SCALE=8", "TK_TEST_STORM_FAULTS=12500"]


def log(msg):
    print(f"kernel-test: {msg}", flush=True)


def die(msg):
    print(f"kernel-test: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(2)


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, text=True, **kw)


# ---------------------------------------------------------------- the kernel
def resolve_package(name):
    """A metapackage (linux-image-amd64) to the image package it depends on."""
    for attempt in range(2):
        p = subprocess.run(["apt-cache", "depends", name], capture_output=True, text=True)
        if p.returncode == 0 and p.stdout.strip():
            for line in p.stdout.splitlines():
                m = re.match(r"\s*Depends:\s*(linux-image-\S+)", line)
                if m:
                    return m.group(1)
            return name
        if attempt == 0:
            log("apt knows no " + name + ": apt-get update")
            run(["apt-get", "update", "-qq"])
    die(f"apt cannot find the package {name}")


def build_kernel(guest, cache):
    """Runs the guest's build script (it keeps its own cache); returns its bzImage."""
    out = os.path.join(cache, GUESTS[guest].get("cache_as", guest))
    script = os.path.join(ROOT, GUESTS[guest]["build"])
    env = dict(os.environ)
    if shutil.which("ccache") and "CC" not in env:
        env["CC"] = "ccache gcc"
    if subprocess.run([script, out], env=env).returncode != 0:
        die(f"{GUESTS[guest]['build']} failed")
    return GUESTS[guest]["build"], os.path.join(out, "bzImage")


def fetch_kernel(guest, cache):
    """Downloads and unpacks the guest's kernel package once; returns its vmlinuz."""
    if "build" in GUESTS[guest]:
        return build_kernel(guest, cache)
    pkg = resolve_package(GUESTS[guest]["package"])
    kdir = os.path.join(cache, pkg)
    boot = os.path.join(kdir, "boot")
    if not os.path.isdir(boot):
        os.makedirs(kdir, exist_ok=True)
        log(f"downloading {pkg}")
        run(["apt-get", "download", "-q", pkg], cwd=kdir, stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        debs = [f for f in os.listdir(kdir) if f.endswith(".deb")]
        if len(debs) != 1:
            die(f"apt-get download {pkg} left {debs} in {kdir}")
        tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", os.path.join(kdir, debs[0])],
                               stdout=subprocess.PIPE)
        run(["tar", "-x", "-C", kdir, "--wildcards", "./boot/*"], stdin=tar.stdout)
        if tar.wait() != 0:
            die(f"dpkg-deb could not unpack {debs[0]}")
        os.unlink(os.path.join(kdir, debs[0]))
    images = [f for f in os.listdir(boot) if f.startswith("vmlinuz-")]
    if len(images) != 1:
        die(f"{pkg} holds {images} in /boot, expected one vmlinuz")
    return pkg, os.path.join(boot, images[0])


# ---------------------------------------------------------------- the plan
# programs that run a script (the guest has the test programs, not the
# interpreters' libraries)
INTERPRETERS = r"(python[0-9.]*|bash|sh|dash|perl[0-9.]*)$"


def is_elf(path):
    """An x86-64 ELF file (a program or library the guest can load)."""
    try:
        with open(path, "rb") as f:
            h = f.read(20)
        return h[:4] == b"\x7fELF" and int.from_bytes(h[18:20], "little") == 62
    except OSError:
        return False


def ctest_plan(build, include, exclude, left_out, only=None):
    p = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"],
                       capture_output=True, text=True, check=True)
    tests = []
    for t in json.loads(p.stdout)["tests"]:
        name, cmd = t["name"], t.get("command") or []
        if not cmd or not is_elf(cmd[0]) or re.match(INTERPRETERS, os.path.basename(cmd[0])):
            continue  # scripts need bash, python, redis...: the host's tests
        if re.search(NOT_IN_GUEST, name) or (exclude and re.search(exclude, name)):
            continue
        if include and not re.search(include, name):
            continue
        if only and not re.search(only, name):
            continue
        why = [w for pat, w in EMULATOR_LIMITS.items() if re.search(pat, name)]
        if why:
            left_out.append((name, why[0]))
            continue
        props = {pr["name"]: pr["value"] for pr in t.get("properties", [])}
        tests.append({
            "name": name,
            "command": cmd,
            "env": list(props.get("ENVIRONMENT", [])),
            "skip": int(props.get("SKIP_RETURN_CODE", 77)),
            "timeout": int(float(props.get("TIMEOUT", 1500)) * TIMEOUT_SCALE),
            "cwd": props.get("WORKING_DIRECTORY", os.path.dirname(cmd[0])),
        })
    return tests


# ---------------------------------------------------------------- the initramfs
class Cpio:
    """A gzip'd newc cpio archive, as the kernel unpacks into its rootfs."""

    def __init__(self, path):
        self.out = gzip.open(path, "wb", compresslevel=1)
        self.ino = 1
        self.dirs = set()

    def _entry(self, name, mode, data=b""):
        name = name.lstrip("/")
        hdr = "070701" + "".join(f"{v:08x}" for v in (
            self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0))
        self.ino += 1
        blob = hdr.encode() + name.encode() + b"\0"
        blob += b"\0" * (-len(blob) % 4)
        self.out.write(blob + data + b"\0" * (-len(data) % 4))

    def dir(self, path):
        parts = path.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d and d not in self.dirs:
                self.dirs.add(d)
                self._entry(d, stat.S_IFDIR | 0o755)

    def file(self, path, data, mode=0o755):
        self.dir(os.path.dirname(path))
        self._entry(path, stat.S_IFREG | mode, data)

    def close(self):
        self._entry("TRAILER!!!", 0)
        self.out.close()


def shared_libs(elf):
    """The files the dynamic loader maps for an ELF program or library."""
    p = subprocess.run(["ldd", elf], capture_output=True, text=True)
    libs = []
    for line in p.stdout.splitlines():
        m = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
        if m:
            libs.append(m.group(1))
    return libs


INIT = r"""#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin HOME=/tmp
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
# (a build tree under /tmp is in the initramfs: no tmpfs over it then; the
# root file system is writable anyway)
[ -n "$(ls -A /tmp 2>/dev/null)" ] || mount -t tmpfs tmp /tmp
ulimit -c 0
echo "KT-KERNEL $(uname -r) cpus=$(nproc)"
kt_run() {
    name=$1 skip=$2 t=$3 wd=$4
    shift 4
    echo "KT-BEGIN $name"
    start=$(cat /proc/uptime)
    (cd "$wd" && exec timeout -s KILL "$t" env -i PATH=/bin HOME=/tmp "$@") >/tmp/kt.out 2>&1
    rc=$?
    end=$(cat /proc/uptime)
    secs=$(echo "${start%% *} ${end%% *}" | awk '{printf "%.1f", $2 - $1}')
    grep -E '^(KT-SAY |KT-JSON |fast-kernel round trip:)' /tmp/kt.out
    if [ $rc -eq "$skip" ]; then
        grep -i -m 3 skip /tmp/kt.out | sed 's/^/  | /'
        echo "KT-END $name skip $secs"
    elif [ $rc -eq 0 ]; then
        echo "KT-END $name pass $secs"
    else
        tail -n 60 /tmp/kt.out | sed 's/^/  | /'
        echo "KT-END $name fail:$rc $secs"
    fi
}
. /kt/plan.sh
echo KT-DONE
@HALT@
"""


def build_initramfs(path, tests, guest, cli):
    """Packs busybox, /init, the plan and every file the tests name; the
    plan first has the trapkit tool say what it finds in the guest."""
    expect = ",".join(GUESTS[guest]["expect"])
    files = {cli}
    lines = [f"{shlex.quote(cli)} probe 2>&1 | sed 's/^/  : /'"]
    for t in tests:
        env = t["env"] + GUEST_ENV + GUESTS[guest].get("env", [])
        if GUESTS[guest].get("icount"):
            env.append("TK_FASTEXC_UNIT=instructions")
        if not any(e.startswith("TK_TEST_EXPECT_MECHS=") for e in env):
            env.append("TK_TEST_EXPECT_MECHS=" + expect)
        for tok in t["command"] + [v for e in env for v in re.split(r"[=:]", e)]:
            if tok.startswith("/") and os.path.isfile(tok):
                files.add(tok)
        lines.append("kt_run " + " ".join(shlex.quote(str(a)) for a in (
            t["name"], t["skip"], t["timeout"], t["cwd"], *env, *t["command"])))
    cpio = Cpio(path)
    for d in ("proc", "sys", "dev", "tmp", "kt"):
        cpio.dir(d)
    cpio.file("/bin/busybox", open(shutil.which("busybox"), "rb").read())
    # a kernel without ACPI cannot power the machine off: it resets, and
    # qemu's -no-reboot ends
    halt = "reboot -f" if "build" in GUESTS[guest] else "poweroff -f"
    cpio.file("/init", INIT.replace("@HALT@", halt).encode())
    cpio.file("/kt/plan.sh", ("\n".join(lines) + "\n").encode(), 0o644)
    for t in tests:
        cpio.dir(t["cwd"])
    libs = set()
    with tempfile.TemporaryDirectory() as tmp:
        for f in sorted(files):
            if is_elf(f):
                libs.update(shared_libs(f))
                stripped = os.path.join(tmp, "s")
                run(["objcopy", "--strip-debug", f, stripped])
                cpio.file(f, open(stripped, "rb").read(), os.stat(f).st_mode & 0o777)
            else:
                cpio.file(f, open(f, "rb").read(), os.stat(f).st_mode & 0o777)
        for lib in sorted(libs - files):
            cpio.file(lib, open(os.path.realpath(lib), "rb").read())
    cpio.close()
    return len(files), len(libs - files)


# ---------------------------------------------------------------- the C++ module
def build_module(guest, pkg, cache):
    """Builds the guest's module against the headers of its kernel package
    (installed when missing); returns the build directory."""
    kver = pkg[len("linux-image-"):]
    if not os.path.isfile(f"/usr/src/linux-headers-{kver}/Makefile"):
        log(f"installing linux-headers-{kver}")
        run(["apt-get", "install", "-y", "-q", f"linux-headers-{kver}"],
            stdout=subprocess.DEVNULL)
    out = os.path.join(cache, f"cxx-{kver}")
    if subprocess.run([os.path.join(ROOT, GUESTS[guest]["module"]), out, kver]).returncode != 0:
        die(f"{GUESTS[guest]['module']} failed")
    return out


# The module's steps in the guest: (name, shell command, what it must show).
# Each runs with the kernel log cleared before and copied to the console
# after (KT-KLOG lines); judge_cxx() decides.
CXX_LOADS = 100
CXX_STEPS = [
    ("tkcxx.tests", "insmod /kt/tkcxx.ko run=tests && rmmod tkcxx"),
    # (under each combination of the runtime's switches, the log read after
    # each: 40 warnings with their backtraces overflow the kernel's buffer)
    ("tkcxx.uncaught", "for m in 0 1 2 3 4 5 6 7; do insmod /kt/tkcxx.ko run=none uncaught=1 "
     "opts=$m && rmmod tkcxx || exit 1; dmesg -c | sed 's/^\\[[^]]*\\] //; s/^/KT-KLOG /'; done"),
    ("tkcxx.global-throws", "! insmod /kt/tkcxx.ko run=none ctor_throws=1 && "
     "insmod /kt/tkcxx.ko run=none dtor_throws=1 && rmmod tkcxx"),
    ("tkcxx.load-unload", f"i=0; while [ $i -lt {CXX_LOADS} ]; do "
     "insmod /kt/tkcxx.ko run=none && rmmod tkcxx || exit 1; i=$((i + 1)); done"),
    ("tkcxx.bench", "insmod /kt/tkcxx.ko run=bench unit=insn && rmmod tkcxx"),
    ("tkcxx.user", "TKCXX_UNIT=insn /kt/tkcxx-user"),
]
CXX_PLAN = r"""
dmesg -n 1
kt_step() {
    name=$1
    echo "KT-BEGIN $name"
    dmesg -c >/dev/null
    start=$(cat /proc/uptime)
    sh -c "$2" >/tmp/kt.out 2>&1
    rc=$?
    end=$(cat /proc/uptime)
    sed 's/^/KT-OUT /' /tmp/kt.out
    dmesg -c | sed 's/^\[[^]]*\] //; s/^/KT-KLOG /'
    secs=$(echo "${start%% *} ${end%% *}" | awk '{printf "%.1f", $2 - $1}')
    echo "KT-END $name rc:$rc $secs"
}
"""


def build_cxx_initramfs(path, modout):
    cpio = Cpio(path)
    for d in ("proc", "sys", "dev", "tmp", "kt"):
        cpio.dir(d)
    cpio.file("/bin/busybox", open(shutil.which("busybox"), "rb").read())
    cpio.file("/init", INIT.replace("@HALT@", "poweroff -f").encode())
    lines = [CXX_PLAN] + [f"kt_step {shlex.quote(n)} {shlex.quote(c)}" for n, c in CXX_STEPS]
    cpio.file("/kt/plan.sh", ("\n".join(lines) + "\n").encode(), 0o644)
    for f in ("tkcxx.ko", "tkcxx-user"):
        cpio.file("/kt/" + f, open(os.path.join(modout, f), "rb").read())
    cpio.close()


def judge_cxx(name, rc, lines):
    """What is wrong with one step of the module (empty: it passed)."""
    # (a step may copy the log itself, when it writes more than the buffer holds)
    lines = [l[7:] if l.startswith("KT-OUT KT-KLOG ") else l for l in lines]
    klog = [l[8:] for l in lines if l.startswith("KT-KLOG ")]
    out = [l[7:] for l in lines if l.startswith("KT-OUT ")]
    warns = [l for l in klog if "WARNING:" in l]
    ours = [l for l in warns if "tkk_warn" in l]
    bad = [l for l in klog if re.search(r"\b(BUG:|Oops|Kernel panic|general protection fault|"
                                        r"kernel BUG|KASAN|UBSAN)", l)]
    unloaded = [l for l in klog if l.startswith("tkcxx: unloaded:")]
    wrong = []
    if rc != 0:
        wrong.append(f"the step's commands gave {rc}")
    if bad:
        wrong.append("the kernel reported: " + bad[0])
    if any("FAILED" in l or "LEAK" in l for l in klog + out):
        wrong.append("the module said: " + next(l for l in klog + out
                                                if "FAILED" in l or "LEAK" in l))
    # (busybox's insmod tries finit_module, then init_module: a load that
    # fails is tried twice, and each attempt says what it left)
    failed_loads = len([l for l in klog if l.startswith("tkcxx: not loaded:")])
    want_warns = {"tkcxx.uncaught": 5 * 8, "tkcxx.global-throws": failed_loads + 1}.get(name, 0)
    if len(warns) != want_warns or len(ours) != len(warns):
        wrong.append(f"{len(warns)} kernel warnings ({len(ours)} the module's), "
                     f"expected {want_warns} of the module's")
    if name == "tkcxx.global-throws" and not failed_loads:
        wrong.append("the load whose constructor throws did not fail")
    if name.startswith("tkcxx.") and name != "tkcxx.user":
        loads = {"tkcxx.load-unload": CXX_LOADS, "tkcxx.uncaught": 8}.get(name, 1) + failed_loads
        clean = [l for l in unloaded if "0 objects from new and 0 exceptions" in l]
        if len(unloaded) != loads or len(clean) != loads:
            wrong.append(f"{len(clean)} of {loads} unloads left nothing behind "
                         f"({len(unloaded)} unloads seen)")
    if name == "tkcxx.tests" and not any("tkcxx tests: passed" in l for l in klog):
        wrong.append("no line says the tests passed")
    if name == "tkcxx.global-throws" and not any("a global constructor failed" in l for l in klog):
        wrong.append("the failed load was not reported")
    if name in ("tkcxx.bench", "tkcxx.user") and not any("KT-JSON " in l for l in klog + out):
        wrong.append("no measurement came out")
    return wrong


# ---------------------------------------------------------------- the guest
KERNEL_TROUBLE = re.compile(r"\b(BUG:|WARNING:|Oops|Kernel panic|general protection fault|"
                            r"kernel BUG|Call Trace:)")


def boot(vmlinuz, initramfs, tests, logpath, wall_limit, icount=False, said=None):
    # -icount shift=0: the guest's clock and TSC advance one per instruction;
    # with one CPU (a second one never comes up under -icount: the boot
    # waits for it by the clock)
    accel = ["-icount", "shift=0"] if icount else []
    smp = "1" if icount else "2"
    cmd = ["qemu-system-x86_64", "-accel", "tcg", *accel, "-cpu", "max", "-smp", smp, "-m", "2G",
           "-nographic", "-no-reboot", "-kernel", vmlinuz, "-initrd", initramfs,
           "-append", "console=ttyS0 quiet panic=-1 oops=panic"]
    results, kernel, trouble, done = {}, None, [], False
    total = len(tests)
    t0 = time.monotonic()
    with open(logpath, "w") as logf:
        q = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        deadline = t0 + wall_limit
        for raw in q.stdout:
            line = raw.decode(errors="replace").replace("\r", "").rstrip("\n")
            logf.write(line + "\n")
            at = line.find("KT-")  # after whatever the firmware left on the line
            if at > 0:
                line = line[at:]
            if line.startswith("KT-KERNEL "):
                kernel = line[10:]
                log(f"guest up after {time.monotonic() - t0:.0f} s: {kernel}")
            elif line.startswith("KT-END "):
                _, name, status, secs = line.split()
                results[name] = (status, float(secs))
                log(f"[{len(results)}/{total}] {name}: {status} ({secs} s)")
                if said is not None:
                    said.append(line)
            elif line.startswith("KT-BEGIN "):
                if said is not None:
                    said.append(line)
            elif line.startswith(("KT-KLOG ", "KT-OUT ")):
                if said is not None:
                    said.append(line)
                text = line
                while text.startswith(("KT-KLOG ", "KT-OUT ")):
                    text = text[text.index(" ") + 1:]
                if text.startswith("KT-SAY "):
                    print("    " + text[7:], flush=True)
            elif line.startswith("  | ") or line.startswith("  : "):
                print("    " + line[4:], flush=True)
            elif line.startswith("KT-JSON "):
                if said is not None:
                    said.append(line)
            elif line.startswith("KT-SAY ") or line.startswith("fast-kernel round trip:"):
                text = line[7:] if line.startswith("KT-SAY ") else line
                print("    " + text, flush=True)
                if said is not None:
                    said.append(text)
            elif line == "KT-DONE":
                done = True
            elif KERNEL_TROUBLE.search(line):
                trouble.append(line)
                print("    guest kernel: " + line, flush=True)
            if time.monotonic() > deadline:
                log(f"the guest ran past {wall_limit} s: stopping it")
                q.kill()
                break
        q.wait()
    return kernel, results, done, trouble


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--guest", action="append", choices=GUEST_ORDER)
    ap.add_argument("--part", choices=["fastexc", "cxx", "suite", "all"], default="all",
                    help="the fast exception path's guests, the C++ module's, trapkit's tests "
                    "in Debian's kernel, or all of them (the default)")
    ap.add_argument("--tests", help="run only the tests whose name matches this regex")
    ap.add_argument("--exclude", help="leave out the tests whose name matches this regex")
    ap.add_argument("--cache", default=os.path.join(ROOT, "build-kernel"))
    ap.add_argument("--wall", type=int, default=7200, help="seconds a guest may run in all")
    ap.add_argument("--list", action="store_true", help="print the plan and stop")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    if not os.path.isfile(os.path.join(build, "CTestTestfile.cmake")):
        die(f"{build} is not a built trapkit tree (make build)")
    for tool in ("qemu-system-x86_64", "busybox", "objcopy", "apt-get", "dpkg-deb"):
        if not shutil.which(tool):
            die(f"{tool} is missing: scripts/install-deps.sh kernel-test installs it")
    guests = a.guest or [g for g in GUEST_ORDER if a.part in ("all", GUESTS[g]["part"])]
    plans, left_out = {}, []
    for guest in guests:
        if GUESTS[guest]["part"] == "cxx":
            plans[guest] = [{"name": n, "command": ["sh", "-c", c]} for n, c in CXX_STEPS]
            continue
        plans[guest] = ctest_plan(build, a.tests, a.exclude,
                                  left_out if GUESTS[guest]["part"] == "suite" else [],
                                  GUESTS[guest].get("tests"))
        if not plans[guest]:
            die(f"no test to run in the guest {guest}")
    if a.list:
        for guest in guests:
            print(f"{guest}:")
            for t in plans[guest]:
                print(" ", t["name"], " ".join(t["command"]))
        return 0
    os.makedirs(a.cache, exist_ok=True)
    cli = os.path.join(build, "trapkit")
    failed = False
    said = {}
    t_start = time.monotonic()
    for guest in guests:
        g, tests = GUESTS[guest], plans[guest]
        t_guest = time.monotonic()
        log(f"guest {guest}: {g['what']}")
        pkg, vmlinuz = fetch_kernel(guest, a.cache)
        initramfs = os.path.join(a.cache, guest + ".cpio.gz")
        if g["part"] == "cxx":
            build_cxx_initramfs(initramfs, build_module(guest, pkg, a.cache))
            log(f"{pkg}: the module and {len(tests)} steps")
        else:
            nfiles, nlibs = build_initramfs(initramfs, tests, guest, cli)
            log(f"{pkg}: {len(tests)} tests, {nfiles} programs and {nlibs} libraries in "
                f"{os.path.getsize(initramfs) >> 20} MiB")
        logpath = os.path.join(a.cache, guest + ".log")
        said[guest] = []
        kernel, results, done, trouble = boot(vmlinuz, initramfs, tests, logpath, a.wall,
                                              g.get("icount", False), said[guest])
        if g["part"] == "cxx":
            results = cxx_results(results, said[guest])
        passed = [n for n, (s, _) in results.items() if s == "pass"]
        skipped = [n for n, (s, _) in results.items() if s == "skip"]
        bad = [f"{n} ({s})" for n, (s, _) in results.items() if s not in ("pass", "skip")]
        missing = [t["name"] for t in tests if t["name"] not in results]
        print(f"\n== {guest}: {kernel or 'did not boot'} ({time.monotonic() - t_guest:.0f} s) ==")
        print(f"passed {len(passed)}, skipped {len(skipped)}, failed {len(bad)}, "
              f"not run {len(missing)} (console log: {logpath})")
        for n in skipped:
            print(f"  skipped: {n}")
        if g["part"] == "suite":
            for n, why in left_out:
                print(f"  left out: {n}: {why}")
        for n in bad:
            print(f"  FAILED: {n}")
        for n in missing[:20]:
            print(f"  NOT RUN: {n}")
        for t in trouble:
            print(f"  guest kernel: {t}")
        if bad or missing or trouble or not done:
            failed = True
        if guest == "debian12-icount" or (guest == "fastexc" and "debian12-icount" not in guests):
            fast_part_summary(said, a.cache)
        if g["part"] == "cxx":
            cxx_summary(said[guest], a.cache)
    log(f"done in {time.monotonic() - t_start:.0f} s" + (": FAILED" if failed else ""))
    return 1 if failed else 0


def cxx_results(results, said):
    """The module's steps judged: pass, or fail with the reasons printed."""
    judged, name, lines = {}, None, []
    for line in said:
        if line.startswith("KT-BEGIN "):
            name, lines = line.split()[1], []
        elif line.startswith("KT-END ") and name:
            status, secs = results.get(name, ("rc:?", 0.0))
            rc = int(status[3:]) if status[3:].lstrip("-").isdigit() else -1
            wrong = judge_cxx(name, rc, lines)
            for w in wrong:
                print(f"  {name}: {w}")
            if wrong:  # what the step printed and the kernel logged, last
                for l in lines[-25:]:
                    print(f"  | {l}")
            judged[name] = ("pass" if not wrong else "fail", secs)
            name = None
        elif name:
            lines.append(line)
    return judged


def cxx_summary(said, cache):
    """The module's measurements: to cache/cxx-results.jsonl for the report,
    and a line on the one-frame throw."""
    records = []
    for line in said:
        at = line.find("KT-JSON ")
        if at >= 0:
            try:
                records.append(json.loads(line[at + 8:]))
            except ValueError:
                continue
    if not records:
        return
    path = os.path.join(cache, "cxx-results.jsonl")
    with open(path, "w") as f:
        for r in records:
            f.write(json.dumps(r) + "\n")
    print(f"\n== C++ in the kernel (instructions, qemu -icount shift=0): {len(records)} results "
          f"in {path} ==")

    def med(exp, mech, where, **params):
        for r in records:
            if (r["experiment"] == exp and r["mechanism"] == mech
                    and r["params"].get("where") == where
                    and all(r["params"].get(k) == v for k, v in params.items())):
                return r["median"]
        return None

    def table(title, rows, cols, cell):
        print(f"\n{title}")
        print("  " + "".join(f"{c:>18}" for c in [""] + [h for h, _ in cols]))
        for row in rows:
            vals = [cell(row, c) for _, c in cols]
            print("  " + f"{row!s:>18}" + "".join(f"{'-' if v is None else v:>18}" for v in vals))

    kern = "gylfason/kernel-"
    table("Table 1: dynamic_cast<B *> of an A * (instructions)", ["B", "C", "D", "E"],
          [("kernel (tkcxx)", ("tkcxx", "kernel")), ("process (libgcc)", ("libgcc", "user"))],
          lambda row, c: med(kern + "dynamic-cast", c[0], c[1], **{"class": row}))
    configs = [("tkcxx", "tkcxx"), ("no one-phase", "tkcxx-no-one-phase"),
               ("no inline raise", "tkcxx-no-inline-raise"), ("no cache", "tkcxx-no-cache"),
               ("unoptimised", "tkcxx-unoptimised")]
    table("Table 2: a one-frame throw in the kernel, by part (instructions)",
          ["allocation", "search", "unwind", "install", "catch"], configs,
          lambda row, c: med(kern + "breakdown", c, "kernel", part=row))
    cols = [("tkcxx", ("tkcxx", "kernel")), ("no cache", ("tkcxx-no-cache", "kernel")),
            ("1-phase only", ("tkcxx-one-phase-only", "kernel")),
            ("unoptimised", ("tkcxx-unoptimised", "kernel")), ("libgcc, process", ("libgcc", "user")),
            ("error code", ("error-code", "kernel"))]
    frames = sorted({r["params"]["frames"] for r in records if "frames" in r["params"]
                     and r["experiment"] == kern + "throw-int"})
    for exp, what in (("throw-int", ""), ("throw-with-destructors",
                                          ", a destructor in every frame")):
        table(f"Tables 3 and 4{what}: an int thrown and caught N frames up (instructions)", frames,
              cols, lambda row, c: med(kern + exp, c[0], c[1], frames=row))
    steps = [("none", "tkcxx-unoptimised"), ("one phase", "tkcxx-one-phase-only"),
             ("+ inline raise", "tkcxx-no-cache"), ("+ cache", "tkcxx")]
    vals = [(n, med(kern + "throw-int", m, "kernel", frames=1)) for n, m in steps]
    if all(v for _, v in vals):
        print("\nthe optimisations one after another, a one-frame throw: " +
              " -> ".join(f"{n} {v}" for n, v in vals) +
              f" ({vals[-1][1] / vals[0][1]:.3f}x; the seed: 12.70 -> 6 -> 2.14 us, 0.169x)")


def fast_part_summary(said, cache):
    """The fast exception path's figures from both guests, and its last line;
    their result records go to cache/fastexc-results.jsonl for the report."""
    print("\n== the fast exception path (instructions, qemu -icount shift=0) ==")
    records = []
    for guest in ("debian12-icount", "fastexc"):
        if said.get(guest):
            print(f"{guest}:")
            for line in said[guest]:
                if line.startswith("KT-JSON "):
                    try:
                        r = json.loads(line[8:])
                    except ValueError:
                        continue
                    r["params"]["kernel"] = "debian12" if guest == "debian12-icount" else guest
                    records.append(r)
                elif not line.startswith(("fast-kernel round trip:", "KT-BEGIN ", "KT-END ",
                                           "KT-KLOG ", "KT-OUT ")):
                    print("  " + line)
    if records:
        path = os.path.join(cache, "fastexc-results.jsonl")
        with open(path, "w") as f:
            for r in records:
                f.write(json.dumps(r) + "\n")
        print(f"({len(records)} results in {path}: `make report` includes them)")
    last = [l for l in said.get("fastexc", []) if l.startswith("fast-kernel round trip:")]
    print(last[-1] if last else "fast-kernel round trip: not measured (the fastexc guest failed)",
          flush=True)


if __name__ == "__main__":
    sys.exit(main())
