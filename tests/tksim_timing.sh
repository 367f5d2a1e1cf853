#!/usr/bin/env bash
# tksim's timing model: micro-programs whose timing is known exactly, the
# three TLB-miss schemes against each other and against a reference TLB
# model, repeatability, and the stuck-pipeline check.
# Usage: tksim_timing.sh TKSIM WORKLOAD_DIR
set -euo pipefail
tksim=$1 wdir=$2 src=$(dirname "$0")/tksim/micro.S
command -v riscv64-linux-gnu-gcc >/dev/null || { echo "missing riscv64-linux-gnu-gcc (scripts/install-deps.sh)"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
build() { riscv64-linux-gnu-gcc -nostdlib -static -march=rv64g -DKIND=$1 -DN=$2 -o "$dir/k$1n$2" -x assembler-with-cpp "$src"; }
# memory latency 0: the I-cache's first touches cost nothing, so the
# program's own timing shows alone
run() { # run KIND N [--set ...]: the JSON statistics in $dir/last.json
    local k=$1 n=$2; shift 2
    [[ -x $dir/k${k}n$n ]] || build "$k" "$n"
    "$tksim" --quiet --set mem_latency=0 "$@" --stats-json "$dir/last.json" "$dir/k${k}n$n"
}
get() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$dir/last.json" "$1"; }
fail=0
check() { # check WHAT GOT WANT
    if [[ $2 == "$3" ]]; then echo "ok: $1 = $2"; else echo "FAIL: $1 = $2, want $3"; fail=1; fi
}

# the cycles N more instructions add
delta() { # delta KIND N [--set ...]
    local k=$1 n=$2; shift 2
    run "$k" "$n" "$@"; local a; a=$(get cycles)
    run "$k" $((2 * n)) "$@"; local b; b=$(get cycles)
    echo $((b - a))
}
check "dependent adds: cycles for 1000 more" "$(delta 1 1000)" 1000
check "4 independent chains: cycles for 1000 more adds" "$(delta 2 1000)" 250
check "4 independent chains, 2 integer units: cycles for 1000 more" "$(delta 2 1000 --set int_units=2)" 500
check "dependent loads (load-to-use 3): cycles for 1000 more" "$(delta 3 1000)" 3000
check "dependent loads (load-to-use 5): cycles for 1000 more" "$(delta 3 1000 --set lat_load=5)" 5000
for scheme in traditional append prepend; do
    run 4 100 --set scheme=$scheme --set tlb_entries=16
    check "$scheme: DTLB misses touching 100 pages" "$(get tlb_misses)" 100
done

# The traditional scheme's cost of a miss, as the paper accounts for it
# (flush, handler, return, re-fetch), on a chain of misses: KIND 5's loop
# (ld, add, add, addi, bnez; each load's address depends on the one
# before) over pages that all miss a 16-entry TLB.  Against a perfect TLB
# (1 GiB pages: 5 cycles a step, the load's 3 and two adds), a miss adds
#    1  the load issues, misses the TLB, and reaches the head next cycle:
#       the miss is taken, the ROB and front end flushed
#  + 3  the handler's first instructions fetched, decoded, renamed; issue
#  + 11 its critical path to the TLB write: csrr, srli, slli, add (4 x 1),
#       the page-table entry's load (lat_load 3), srli, slli, or (3 x 1),
#       tk.tlbwr (1)
#  + 3  the handler's other instructions commit (4 a cycle) until its
#       return is at the head, where it executes (1)
#  + 1  fetch is redirected to the load that missed
#  + 3  the load fetched, decoded, renamed again; it issues (hits now)
#  = 22 cycles.  The handler's load is on its critical path: lat_load 5
# adds 2.  Committing 8 a cycle saves one cycle of the drain.  Flushed
# with each miss: the instructions fetched from the re-fetch to the next
# miss (9 cycles of 4 and 1 alternately, as a predicted-taken branch ends
# a fetch group: 24) less the 5 committed: 19; with lat_load 5 the load
# and the next one's address take 2 cycles more (5 more fetched): 24.
flushed() { python3 -c 'import json,sys; print(sum(json.load(open(sys.argv[1]))["flushed"].values()))' "$dir/last.json"; }
miss_cost() { # miss_cost [--set ...]: cycles each of 800 more misses adds, and instructions it flushes
    local a b pa pb fa fb
    run 5 800 --set tlb_entries=16 "$@"; a=$(get cycles); fa=$(flushed)
    run 5 1600 --set tlb_entries=16 "$@"; b=$(get cycles); fb=$(flushed)
    run 5 800 --set page_bits=30 "$@"; pa=$(get cycles)
    run 5 1600 --set page_bits=30 "$@"; pb=$(get cycles)
    python3 -c 'import sys; a,b,pa,pb,fa,fb=map(int,sys.argv[1:]); print("%g %g" % (((b-a)-(pb-pa))/800, (fb-fa)/800))' \
        "$a" "$b" "$pa" "$pb" "$fa" "$fb"
}
check "traditional: cycles a miss adds, flushed per miss" "$(miss_cost)" "22 19"
check "traditional, lat_load 5: cycles a miss adds, flushed per miss" "$(miss_cost --set lat_load=5)" "24 24"
check "traditional, commit 8 a cycle: cycles a miss adds" "$(miss_cost --set commit_width=8 | cut -d' ' -f1)" 21

# the workloads: every scheme commits the same instructions, ends in the
# same state and takes the misses a reference TLB takes
while read -r name args; do
    for repl in lru round-robin; do
        "$tksim" --quiet --functional --tlb-model --set tlb_entries=16 --set tlb_replacement=$repl \
            --stats-json "$dir/ref.json" "$wdir/$name" $args >/dev/null
        want_misses=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["tlb_misses"])' "$dir/ref.json")
        want_state=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["state_hash"])' "$dir/ref.json")
        want_insns=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["instructions"])' "$dir/ref.json")
        hashes=()
        for scheme in traditional append prepend; do
            "$tksim" --quiet --set scheme=$scheme --set tlb_entries=16 --set tlb_replacement=$repl \
                --stats-json "$dir/last.json" "$wdir/$name" $args >/dev/null
            check "$name $repl $scheme: DTLB misses (reference model)" "$(get tlb_misses)" "$want_misses"
            check "$name $repl $scheme: instructions" "$(get instructions)" "$want_insns"
            check "$name $repl $scheme: final state" "$(get state_hash)" "$want_state"
            check "$name $repl $scheme: stale completions" "$(get stale_completions)" 0
            hashes+=("$(get commit_hash)")
            [[ $scheme == traditional || $(get inlined) -gt 0 ]] || { echo "FAIL: $name $scheme in-lined nothing"; fail=1; }
        done
        check "$name $repl: committed stream the same under all three schemes" \
            "$(printf '%s\n' "${hashes[@]}" | sort -u | wc -l)" 1
    done
done <<'LIST'
qsort 3000
map 1500
LIST

# an access still executing when its program-order lookup misses (its page
# left the TLB after its probe) stops and starts again after the handler's
# TLB write: never twice in the executing list, so no entry finishes for a
# uop that is not executing as it started it (the hash table's in-lined
# runs have such accesses)
for scheme in append prepend; do
    for n in 16 64; do
        "$tksim" --quiet --set scheme=$scheme --set tlb_entries=$n --stats-json "$dir/last.json" \
            "$wdir/hashtab" 20000 >/dev/null
        check "hashtab $scheme $n: stale completions" "$(get stale_completions)" 0
    done
done

# repeatable: two runs give the same statistics (but the host time)
strip() { python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); [d.pop(k) for k in ("seconds", "ips", "cpu_seconds", "cpu_ips")]; print(json.dumps(d, sort_keys=True))' "$1"; }
"$tksim" --quiet --set scheme=prepend --stats-json "$dir/r1.json" "$wdir/map" 1500 >/dev/null
"$tksim" --quiet --set scheme=prepend --stats-json "$dir/r2.json" "$wdir/map" 1500 >/dev/null
check "two runs, the same statistics" "$(strip "$dir/r1.json")" "$(strip "$dir/r2.json")"
# the shipped configuration file is the built-in machine
"$tksim" --quiet --config "$(dirname "$0")/../sim/configs/alpha21264.cfg" --set scheme=prepend \
    --stats-json "$dir/r3.json" "$wdir/map" 1500 >/dev/null
check "sim/configs/alpha21264.cfg, the built-in values" "$(strip "$dir/r3.json")" "$(strip "$dir/r1.json")"

# a lost TLB fill: the pipeline is caught stuck, its state printed, exit 103
# (tksim's own status for it)
rc=0
"$tksim" --set inject_lost_fill=1 --set stuck_cycles=5000 "$wdir/qsort" 100 >/dev/null 2>"$dir/stuck.err" || rc=$?
check "a lost fill: exit status" "$rc" 103
grep -q "the pipeline is stuck" "$dir/stuck.err" && grep -q "rob\[0\]" "$dir/stuck.err" ||
    { echo "FAIL: no dump of the stuck pipeline"; cat "$dir/stuck.err"; fail=1; }
exit $fail
