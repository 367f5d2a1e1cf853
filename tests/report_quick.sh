#!/usr/bin/env bash
# Runs the quick report into a scratch directory and checks it.
set -euo pipefail
trapkit=$1 here=$2
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$trapkit" report --quick --out "$out" --docs "$out/results.md"
python3 "$here/report_check.py" "$out"
