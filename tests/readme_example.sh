#!/usr/bin/env bash
# The README's example is examples/readme_example.c verbatim, and it runs as shown.
set -euo pipefail
src=$1 bin=$2
extracted=$(mktemp)
trap 'rm -f "$extracted"' EXIT
# The first ```c block of README.md.
awk '/^```c$/ {on=1; next} on && /^```$/ {exit} on {print}' "$src/README.md" >"$extracted"
if ! diff -u "$src/examples/readme_example.c" "$extracted"; then
    echo "FAIL: README.md's example differs from examples/readme_example.c"
    exit 1
fi
out=$("$bin")
echo "$out"
grep -Eq "^mechanism [a-z-]+: write to page 0x[0-9a-f]+ caught, value 'x'$" <<<"$out" || {
    echo "FAIL: unexpected output"
    exit 1
}
# And on the baseline mechanism.
out=$(TRAPKIT_BACKEND=posix "$bin")
grep -q "^mechanism posix: " <<<"$out" || { echo "FAIL: TRAPKIT_BACKEND=posix ignored: $out"; exit 1; }
echo "readme example: ok"
