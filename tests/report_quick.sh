#!/usr/bin/env bash
# Runs the quick report into a scratch directory and checks it.  The
# output is kept and printed after; on a failure its error lines come
# first, so that an excerpt of the test's output shows the cause.
# Usage: report_quick.sh TRAPKIT TESTS_DIR [--only LIST]
set -uo pipefail
trapkit=$1 here=$2
shift 2
only=("$@")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
log=$out/report.log
status=0
"$trapkit" report --quick --out "$out" --docs "$out/results.md" "${only[@]}" >"$log" 2>&1 ||
    status=$?
if [ "$status" -eq 0 ]; then
    python3 "$here/report_check.py" "$out" "${only[@]}" >>"$log" 2>&1 || status=$?
fi
if [ "$status" -ne 0 ]; then
    echo "report_quick: failed (status $status); its error lines first:"
    grep -n -E "FAIL|Error|Traceback|exited with status|failed|Killed|Aborted|Segmentation" "$log" |
        head -40
    echo "---- the whole output ----"
fi
cat "$log"
exit "$status"
