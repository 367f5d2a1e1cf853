#!/usr/bin/env bash
# tksim on the benchmark's inputs where TLB misses are densest (a 16-entry
# TLB, std::map and Jacobi), every scheme: each run must finish (a stuck
# pipeline exits 103 with its state) with the reference TLB model's misses.
# Usage: tksim_stress.sh TKSIM WORKLOAD_DIR
set -euo pipefail
tksim=$1 wdir=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail=0
get() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
while read -r name args; do
    "$tksim" --quiet --functional --tlb-model --set tlb_entries=16 --stats-json "$dir/ref.json" \
        "$wdir/$name" $args >/dev/null
    want=$(get "$dir/ref.json" tlb_misses)
    for scheme in traditional append prepend; do
        rc=0
        "$tksim" --quiet --set scheme=$scheme --set tlb_entries=16 --stats-json "$dir/t.json" \
            "$wdir/$name" $args >/dev/null 2>"$dir/err" || rc=$?
        if [[ $rc != 0 ]]; then
            echo "FAIL: $name $args, $scheme: exit $rc"; head -20 "$dir/err"; fail=1; continue
        fi
        got=$(get "$dir/t.json" tlb_misses)
        [[ $got == "$want" ]] || { echo "FAIL: $name $scheme: $got misses, the reference $want"; fail=1; }
        echo "$name $args, $scheme: $got misses, $(get "$dir/t.json" inlined) in-lined, CPI $(get "$dir/t.json" cpi)"
    done
done <<'LIST'
map 15000
jacobi 256 6
LIST
exit $fail
