#!/usr/bin/env bash
# Installs the Debian packages trapkit needs to build, test and report.
# Idempotent: when everything is present it only checks, in well under a second.
# `install-deps.sh kernel-test` also installs what `make kernel-test` needs.
set -euo pipefail

# Packages, one per line, with what they are for.
PKGS=(
    gcc g++ make           # compilers (C11 library, C++17 runtime and simulator)
    cmake ninja-build      # build
    pkg-config             # the installed-package test builds against trapkit.pc
    dpkg-dev file          # make deb: dpkg-shlibdeps computes the package's dependencies
    man-db groff-base      # the man pages' test renders each (man -l, groff -ww, lexgrog)
    libzydis-dev           # x86-64 decoder: the atomic sequences' safety check
    liblz4-dev             # LZ4: compressed checkpoint images (TK_CKPT_COMPRESS), zpage
    libzstd-dev            # zstd: compressed paging's second codec (trapkit/zpage.h)
    libunwind-14           # LLVM's unwinder, compared with GCC's in the C++ exception benchmark
    libasan8 libubsan1     # the sanitizer build inside `make test`
    libtsan2               # the ThreadSanitizer build inside `make test` (gcc 12's runtime)
    clang-format           # `make format` / the formatting check
    python3                # tests that read JSON; the report generator
    python3-matplotlib     # the report's plots
    chromium               # the report test opens index.html headless
    redis-tools            # redis-cli and redis-benchmark against examples/kv-server
    redis-server           # the real redis-server the checkpoint benchmark compares with
    python3-redis          # redis-py, a client library run against examples/kv-server as its users run it
    qpdf                   # a C++ program that throws, run under trapkit's throw runtime
    gcc-riscv64-linux-gnu g++-riscv64-linux-gnu  # tksim's workloads (static RV64GC programs)
    qemu-user              # qemu-riscv64: the reference tksim is checked against
    libgc-dev              # bdwgc, the collector trapkit's is benchmarked against (GCBench)
    liblmdb-dev            # LMDB, the store trapkit's persistent heap is benchmarked against
    openmpi-bin libopenmpi-dev  # Open MPI: the shared virtual memory's transport (trapkit/dsm.h)
    iproute2               # ip netns: the shared virtual memory's test across two hosts
)
if [[ "${1:-}" == kernel-test ]]; then
    PKGS+=(
        qemu-system-x86    # boots Debian's own kernel packages (TCG) for `make kernel-test`
        busybox-static     # the guest's shell and tools, and cpio to pack its initramfs
        linux-source-6.1   # the fast exception path's guest kernel (kernel/fastexc/build.sh)
        flex bison bc libelf-dev  # what building that kernel needs
        ccache             # a rebuild of that kernel after a change in kernel/fastexc
        linux-headers-amd64  # kernel/cxx's module, built for linux-image-amd64 (the guests' kernel)
    )
fi

missing=()
for p in "${PKGS[@]}"; do
    [[ "$p" == \#* ]] && continue
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done

if ((${#missing[@]} == 0)); then
    exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null; then SUDO=sudo; else
        echo "install-deps: need root (or sudo) to install: ${missing[*]}" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
