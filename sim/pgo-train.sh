#!/usr/bin/env bash
# The training runs for tksim's profile feedback (sim/CMakeLists.txt): the
# instrumented TKSIM runs each workload's small input with each scheme and
# a perfect TLB, writing its counts in DATA; they are renamed from the
# objects of FROM_DIR to those of TO_DIR (GCC names them after the object's
# path, with '/' as '#'), and DATA/trained marks the end.
# Usage: pgo-train.sh TKSIM WORKLOAD_DIR DATA FROM_DIR TO_DIR
set -euo pipefail
tksim=$1 wdir=$2 data=$3 from=$4 to=$5
cfg=$(dirname "$0")/configs/alpha21264.cfg
rm -rf "$data"
mkdir -p "$data"
declare -A args=([qsort]="3000" [map]="1500" [jacobi]="96 2" [matmul]="40" [hashtab]="20000")
for w in qsort map jacobi matmul hashtab; do
    for sets in "page_bits=30" "scheme=traditional tlb_entries=16" "scheme=append tlb_entries=16" \
        "scheme=prepend tlb_entries=16"; do
        s=()
        for x in $sets; do s+=(--set "$x"); done
        # shellcheck disable=SC2086 # (the workload's arguments are words)
        "$tksim" --quiet --config "$cfg" "${s[@]}" "$wdir/$w" ${args[$w]} >/dev/null
    done
done
for f in "$data"/*.gcda; do
    mv "$f" "${f//$from/$to}"
done
touch "$data/trained"
