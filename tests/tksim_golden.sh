#!/usr/bin/env bash
# tksim's simulated results, recorded once and compared after a change that
# must not alter them (a speed-up of the simulator): every workload with
# every scheme at 16 and 64 TLB entries, a perfect TLB, and the sweep's
# settings and other edge settings on hashtab, with the quick inputs of
# bench/jaleel_jacob.py (--full: its full inputs).  The --stats-json output
# is kept without its timing fields (seconds, ips, cpu_seconds, cpu_ips),
# with the exit status; nothing is stored in the tree.
# Usage: tksim_golden.sh [--full] record|compare TKSIM WORKLOAD_DIR DIR
set -euo pipefail
full=0
if [[ ${1:-} == --full ]]; then
    full=1
    shift
fi
mode=$1 tksim=$2 wdir=$3 dir=$4
cfg=$(dirname "$0")/../sim/configs/alpha21264.cfg
case $mode in record | compare) ;; *) echo "usage: $0 [--full] record|compare TKSIM WORKLOAD_DIR DIR" >&2; exit 2 ;; esac
if ((full)); then
    declare -A args=([qsort]="40000" [map]="15000" [jacobi]="256 6" [matmul]="160" [hashtab]="100000")
else
    declare -A args=([qsort]="3000" [map]="1500" [jacobi]="96 2" [matmul]="40" [hashtab]="20000")
fi
sizes="16 64"
((full)) && sizes="16 32 64 128"

# the runs: NAME WORKLOAD SETTINGS...
runs=()
for w in qsort map jacobi matmul hashtab; do
    runs+=("$w.perfect $w page_bits=30")
    for n in $sizes; do
        for s in traditional append prepend; do
            runs+=("$w.$s.$n $w scheme=$s tlb_entries=$n")
        done
    done
done
sweep=(iq_int=10 iq_int=80 rob_size=40 rob_size=320 rename_int=20 rename_int=164 handler_iq=0
    append_after_frontend=1 load_queue=4 store_queue=2 tlb_replacement=round-robin mem_latency=0
    commit_width=8 fetch_width=2 iq_fp=2 lat_load=5)
for s in traditional append prepend; do
    for k in "${sweep[@]}"; do
        runs+=("hashtab.$s.64.$k hashtab scheme=$s tlb_entries=64 $k")
    done
    for w in map matmul; do
        runs+=("$w.$s.16.handler_iq=0 $w scheme=$s tlb_entries=16 handler_iq=0")
        runs+=("$w.$s.16.rob_size=40 $w scheme=$s tlb_entries=16 rob_size=40")
    done
    # the stuck-pipeline check: the run stops with the same state dumped
    runs+=("qsort.$s.16.lost qsort scheme=$s tlb_entries=16 inject_lost_fill=1 stuck_cycles=5000")
done

one() { # one NAME WORKLOAD SETTINGS...: NAME.json (no timing), NAME.err, NAME.rc
    local name=$1 w=$2 out=$3
    shift 3
    local sets=()
    for s in "$@"; do sets+=(--set "$s"); done
    local rc=0
    "$tksim" --quiet --config "$cfg" --stats-json "$out/$name.raw" "${sets[@]}" "$wdir/$w" ${args[$w]} \
        >/dev/null 2>"$out/$name.err" || rc=$?
    echo "$rc" >"$out/$name.rc"
    if [[ -s $out/$name.raw ]]; then
        jq -S 'del(.seconds, .ips, .cpu_seconds, .cpu_ips)' "$out/$name.raw" >"$out/$name.json"
        jq -r '"\(.cpu_ips)"' "$out/$name.raw" >"$out/$name.speed"
    fi
    rm -f "$out/$name.raw"
}

if [[ $mode == record ]]; then
    out=$dir
else
    out=$(mktemp -d)
    trap 'rm -rf "$out"' EXIT
fi
mkdir -p "$out"
# two at a time
for r in "${runs[@]}"; do
    read -r name w rest <<<"$r"
    while (($(jobs -rp | wc -l) >= 2)); do wait -n; done
    one "$name" "$w" "$out" $rest &
done
wait
echo "tksim_golden: ${#runs[@]} runs"
# no executing-list entry may finish for a uop not executing as it started
# it (the counter is tksim's own consistency check)
stale=$(cat "$out"/*.json | jq -s 'map(.stale_completions // 0) | add')
if ((stale != 0)); then
    echo "FAIL: $stale stale completions:" $(grep -l '"stale_completions": [1-9]' "$out"/*.json)
    exit 1
fi
if [[ $mode == record ]]; then exit 0; fi
fail=0
for r in "${runs[@]}"; do
    read -r name _ <<<"$r"
    for ext in json rc err; do
        [[ -e $dir/$name.$ext || -e $out/$name.$ext ]] || continue
        if ! cmp -s "$dir/$name.$ext" "$out/$name.$ext"; then
            echo "DIFFERS: $name.$ext"
            diff "$dir/$name.$ext" "$out/$name.$ext" | head -10 || true
            fail=1
        fi
    done
done
if ((fail)); then exit 1; fi
echo "tksim_golden: all identical"
# the slowest runs' speed (instructions per second of CPU)
for r in "${runs[@]}"; do
    read -r name _ <<<"$r"
    [[ -e $out/$name.speed ]] && echo "$(cat "$out/$name.speed") $name"
done | sort -g | head -5
