#!/usr/bin/env bash
# tksim's replay of runs from an empty pipeline (--set memo=1, the default)
# must give exactly what simulating every cycle gives (memo=0): every
# workload with each scheme at a 16- and a 4-entry TLB, quick inputs, every
# counter of --stats-json but the timing fields compared.  TKSIM_MEMO_WORKLOADS
# names fewer (a sanitizer build takes the two that replay most).
# Usage: tksim_memo.sh TKSIM WORKLOAD_DIR
set -euo pipefail
tksim=$1 wdir=$2
cfg=$(dirname "$0")/../sim/configs/alpha21264.cfg
declare -A args=([qsort]="3000" [map]="1500" [jacobi]="96 2" [matmul]="40" [hashtab]="20000")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
strip() { python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("seconds", "ips", "cpu_seconds", "cpu_ips"):
    d.pop(k, None)
print(json.dumps(d, sort_keys=True))' "$1"; }
fails=0 n=0
for w in ${TKSIM_MEMO_WORKLOADS:-qsort map jacobi matmul hashtab}; do
    [[ -n ${args[$w]:-} ]] || { echo "FAIL: no workload $w"; exit 1; }
    for scheme in traditional append prepend; do
        for tlb in 16 4; do
            for m in 0 1; do
                # shellcheck disable=SC2086
                "$tksim" --quiet --config "$cfg" --stats-json "$tmp/$m.json" --set scheme=$scheme \
                    --set tlb_entries=$tlb --set memo=$m "$wdir/$w" ${args[$w]} > "$tmp/$m.out"
            done
            n=$((n + 1))
            if [[ $(strip "$tmp/0.json") != $(strip "$tmp/1.json") ]] ||
                ! cmp -s "$tmp/0.out" "$tmp/1.out"; then
                echo "FAIL: $w $scheme tlb_entries=$tlb: memo=1 differs from memo=0"
                diff <(strip "$tmp/0.json" | tr ',' '\n') <(strip "$tmp/1.json" | tr ',' '\n') | head -10
                fails=$((fails + 1))
            fi
        done
    done
done
echo "$n runs compared, $fails differ"
((fails == 0))
