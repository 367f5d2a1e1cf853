#!/usr/bin/env bash
# tksim's speed, two builds side by side: each figure run of
# bench/jaleel_jacob.py (a perfect TLB; 16, 32, 64 and 128 entries with
# each scheme; --quick: its small inputs, 16 and 64 entries) with the
# alpha21264 configuration, run by OLD then NEW in turn, one run at a time
# (so both see the same load).  Prints per workload the median, least and
# most simulated instructions per second of tksim's own CPU time (the
# --stats-json cpu_ips), in millions, over the workload's runs.
# Usage: sim/speed.sh [--quick] OLD_TKSIM NEW_TKSIM WORKLOAD_DIR [WORKLOAD...]
set -euo pipefail
quick=0
if [[ ${1:-} == --quick ]]; then
    quick=1
    shift
fi
if (($# < 3)); then
    echo "usage: $0 [--quick] OLD_TKSIM NEW_TKSIM WORKLOAD_DIR [WORKLOAD...]" >&2
    exit 2
fi
old=$1 new=$2 wdir=$3
shift 3
workloads=${*:-qsort map jacobi matmul hashtab}
cfg=$(dirname "$0")/configs/alpha21264.cfg
if ((quick)); then
    declare -A args=([qsort]="3000" [map]="1500" [jacobi]="96 2" [matmul]="40" [hashtab]="20000")
    sizes="16 64"
else
    declare -A args=([qsort]="40000" [map]="15000" [jacobi]="256 6" [matmul]="160" [hashtab]="100000")
    sizes="16 32 64 128"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
summary() { # the values on stdin: median (least-most), in millions
    sort -g | awk '{v[NR] = $1} END {printf "%6.2f (%5.2f-%5.2f)", v[int((NR + 1) / 2)] / 1e6, v[1] / 1e6, v[NR] / 1e6}'
}
printf "%-8s %-22s %-22s %s\n" workload "old M instr/s (CPU)" "new M instr/s (CPU)" runs
for w in $workloads; do
    runs=("page_bits=30")
    for n in $sizes; do
        for s in traditional append prepend; do runs+=("scheme=$s tlb_entries=$n"); done
    done
    : >"$tmp/old"
    : >"$tmp/new"
    for r in "${runs[@]}"; do
        sets=()
        for x in $r; do sets+=(--set "$x"); done
        for b in old new; do
            bin=$old
            [[ $b == new ]] && bin=$new
            # shellcheck disable=SC2086 # (the workload's arguments are words)
            "$bin" --quiet --config "$cfg" --stats-json "$tmp/run.json" "${sets[@]}" "$wdir/$w" ${args[$w]} >/dev/null
            jq -r .cpu_ips "$tmp/run.json" >>"$tmp/$b"
        done
    done
    printf "%-8s %-22s %-22s %d\n" "$w" "$(summary <"$tmp/old")" "$(summary <"$tmp/new")" "${#runs[@]}"
done
