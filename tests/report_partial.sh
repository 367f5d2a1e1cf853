#!/usr/bin/env bash
# A benchmark that fails part way: the report still runs the others and is
# still written, with what the failed one printed before, says which failed
# and why in results.json, results.md and index.html, and exits 1.
set -uo pipefail
trapkit=$1 here=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir "$dir/bench" "$dir/out"
line='{"experiment": "appel-li/add", "mechanism": "cpu", "params": {}, "metric": "time", "unit": "ns", "median": 1.0, "min": 1.0, "max": 1.0, "n": 1}'
# the first fails after one result, the second succeeds
printf '#!/bin/sh\necho %q\necho "bench: something broke" >&2\nexit 3\n' "$line" \
    >"$dir/bench/bench_appel_li"
printf '#!/bin/sh\necho %q\n' "${line/appel-li\/add/machine\/cycle}" >"$dir/bench/bench_thekkath_levy"
chmod +x "$dir/bench/"*
# Debian's python3 has matplotlib (scripts/install-deps.sh), as trapkit report uses it
py=/usr/bin/python3
[ -x "$py" ] || py=python3
"$py" "$here/../bench/report.py" --quick --bench-dir "$dir/bench" --trapkit "$trapkit" \
    --out "$dir/out" --docs "$dir/out/results.md" --only appel_li,thekkath_levy \
    --kernel-results /nonexistent --kernel-cxx-results /nonexistent >"$dir/log" 2>&1
status=$?
cat "$dir/log"
[ "$status" -eq 1 ] || fail "exit status $status, not 1"
grep -q "bench_appel_li exited with status 3" "$dir/log" || fail "the log does not say which failed"
grep -q "something broke" "$dir/log" || fail "the benchmark's own message is not shown"
grep -q "\[2/2\] done" "$dir/log" || fail "the benchmark after the failed one did not run"
python3 - "$dir/out" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1] + "/results.json"))
assert d["failed"] == [{"bench": "bench_appel_li", "status": 3, "results": 1}], d["failed"]
exps = {r["experiment"] for r in d["results"]}
assert {"appel-li/add", "machine/cycle"} <= exps, exps
md = open(sys.argv[1] + "/results.md").read()
assert "**bench_appel_li failed** (exit status 3)" in md
assert "bench_appel_li failed" in open(sys.argv[1] + "/index.html").read()
print("report_partial: ok")
PY
