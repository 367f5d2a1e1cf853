#!/bin/sh
# Runs a program of the ThreadSanitizer build: tsan_run.sh PROGRAM [ARGS...]
# GCC 12's TSan runtime expects at most 28 bits of mmap randomization; with
# more (vm.mmap_rnd_bits=32 on some kernels) it stops at start-up with
# "FATAL: ThreadSanitizer: unexpected memory mapping".  Address-space
# randomization switched off for the program (setarch -R, inherited by what
# it runs) avoids that on any machine, without changing its settings.
# Where personality() is refused (a container's seccomp filter), the program
# runs as it is.
if setarch -R true 2>/dev/null; then
    exec setarch -R "$@"
fi
exec "$@"
