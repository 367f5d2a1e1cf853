#!/usr/bin/env bash
# Every result code trapkit's sources, headers and man pages name (-EINVAL,
# -EMFILE, ...) has its own sentence in tk_strerror (src/core/error.c), not
# "unknown error".
# Usage: error_codes.sh SOURCE_DIR
set -euo pipefail
src=$1
codes=$(grep -rhoE -- '-E[A-Z]{3,}' "$src/src" "$src/include" "$src/man" "$src/cxx" | sort -u | sed 's/^-//')
missing=()
for e in $codes; do
    [[ $e == ENOTSUP ]] && e=EOPNOTSUPP # (the same number on Linux)
    grep -q "case $e:" "$src/src/core/error.c" || missing+=("$e")
done
if ((${#missing[@]})); then
    echo "tk_strerror has no sentence for: ${missing[*]}"
    exit 1
fi
echo "tk_strerror: a sentence for each of the $(echo "$codes" | wc -w) codes trapkit returns"
