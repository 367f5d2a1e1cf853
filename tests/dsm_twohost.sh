#!/usr/bin/env bash
# The shared virtual memory across two hosts, made on this machine: two
# network namespaces joined by a veth pair (10.77.0.1 and 10.77.0.2), and
# Open MPI's launcher given a hostfile of the two addresses and, as its
# remote shell, a script that enters the namespace of the host named
# instead of logging in to it.  The ranks then talk TCP over the veth pair
# only, as ranks on two machines do over their network.
#   dsm_twohost.sh PROGRAM ARGS...      (2 ranks, one a host)
# Needs root (namespaces); exits 77 (skipped) without it.
set -uo pipefail
if [[ $(id -u) != 0 ]] || ! command -v ip >/dev/null; then
    echo "dsm_twohost: needs root and iproute2 (ip netns): skipped"
    exit 77
fi
tag=tk$$
nsa=${tag}a nsb=${tag}b
dir=$(mktemp -d)
cleanup() {
    ip netns del "$nsa" 2>/dev/null
    ip netns del "$nsb" 2>/dev/null
    rm -rf "$dir"
}
trap cleanup EXIT
if ! ip netns add "$nsa" 2>/dev/null || ! ip netns add "$nsb"; then
    echo "dsm_twohost: cannot make network namespaces here: skipped"
    exit 77
fi
ip link add "${tag}va" type veth peer name "${tag}vb" || exit 1
ip link set "${tag}va" netns "$nsa" && ip link set "${tag}vb" netns "$nsb" || exit 1
ip -n "$nsa" addr add 10.77.0.1/24 dev "${tag}va" && ip -n "$nsb" addr add 10.77.0.2/24 dev "${tag}vb"
for n in "$nsa" "$nsb"; do ip -n "$n" link set lo up; done
ip -n "$nsa" link set "${tag}va" up && ip -n "$nsb" link set "${tag}vb" up || exit 1

# the "remote shell": host 10.77.0.1 is namespace a, 10.77.0.2 namespace b
cat >"$dir/rsh" <<EOF
#!/bin/sh
host=\$1
shift
case \$host in
10.77.0.1) ns=$nsa ;;
10.77.0.2) ns=$nsb ;;
*) echo "dsm_twohost rsh: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec \$ns /bin/sh -c "\$*"
EOF
chmod +x "$dir/rsh"
printf '10.77.0.1 slots=1\n10.77.0.2 slots=1\n' >"$dir/hosts"

mpi=(mpirun -np 2 --hostfile "$dir/hosts" --map-by node --allow-run-as-root
    --mca plm_rsh_agent "$dir/rsh" --mca btl tcp,self --mca pml ob1
    --mca btl_tcp_if_include 10.77.0.0/24 --mca oob_tcp_if_include 10.77.0.0/24)
for v in $(compgen -e | grep -E '^(TRAPKIT_|TK_TEST_|ASAN_|UBSAN_|LSAN_|OMPI_MCA_)'); do mpi+=(-x "$v"); done
out=$(timeout 120 ip netns exec "$nsa" "${mpi[@]}" "$@" 2>&1)
rc=$?
echo "$out"
# each rank says where it ran (its network namespace): two different ones
if ((rc == 0)); then
    n=$(grep -o 'net:\[[0-9]*\]' <<<"$out" | sort -u | wc -l)
    if ((n != 2)); then
        echo "dsm_twohost: the ranks ran in $n network namespaces, not 2" >&2
        exit 1
    fi
    echo "dsm_twohost: 2 ranks on two hosts (namespaces $nsa and $nsb, TCP over a veth pair): passed"
fi
exit $rc
