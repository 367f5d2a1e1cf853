#!/usr/bin/env bash
# Runs an MPI program of the shared-virtual-memory tests on this host:
#   dsm_run.sh NP PROGRAM ARGS...
# Open MPI over TCP on the loopback interface (so the network path is the
# one used between hosts), as root if need be, NP ranks even on fewer cores.
# When the last argument is "kill" the program's last rank kills itself
# mid-run: the run must then fail within 30 s with a message naming what
# happened (mpirun's, or trapkit's own timeout).
set -uo pipefail
np=$1
shift
mpi=(mpirun -np "$np" --oversubscribe --bind-to "${TK_DSM_BIND:-none}"
    --mca btl tcp,self --mca pml ob1 --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo)
[[ $(id -u) == 0 ]] && mpi+=(--allow-run-as-root)
# (mpirun passes on only the environment it is told to)
for v in $(compgen -e | grep -E '^(TRAPKIT_|TK_TEST_|ASAN_|UBSAN_|TSAN_|LSAN_|OMPI_MCA_)'); do mpi+=(-x "$v"); done
if [[ ${!#} != kill ]]; then
    exec timeout 240 "${mpi[@]}" "$@"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
timeout 60 "${mpi[@]}" "$@" >"$log" 2>&1
rc=$?
took=$(($(date +%s) - start))
cat "$log"
if ((rc == 0)); then
    echo "dsm_run: the run succeeded although a rank was killed" >&2
    exit 1
fi
if ((rc == 124 || took > 30)); then
    echo "dsm_run: the surviving ranks took ${took} s to end (more than 30)" >&2
    exit 1
fi
if ! grep -Eqi "signal 9|killed|trapkit dsm: rank .* not answered" "$log"; then
    echo "dsm_run: the run failed (status $rc) without saying a rank died" >&2
    exit 1
fi
echo "dsm_run: a rank killed: the run ended in ${took} s (status $rc), saying so"
