#!/usr/bin/env bash
# tests/cli_probe.sh - `trapkit probe`, as a table and as JSON.
# usage: cli_probe.sh <path to the trapkit binary>
# Exit 0 pass, 1 fail.
set -u

tk=${1:?usage: cli_probe.sh <path to trapkit>}
fail=0
err() { echo "FAIL: $*" >&2; fail=1; }

tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT

# ---- the table ----------------------------------------------------------------
"$tk" probe >"$tmp/table" 2>"$tmp/table.err"
rc=$?
if [ $rc -ne 0 ]; then
    err "'trapkit probe' exited $rc"
    cat "$tmp/table.err" >&2
fi
for word in kernel "page size" userfaultfd PAGEMAP_SCAN pkeys max_map_count AT_MINSIGSTKSZ \
            "mechanism for each primitive" DIRTY MAP2 PAGESIZE; do
    grep -q -- "$word" "$tmp/table" || err "the table does not mention '$word'"
done
grep -q "multiples of $(getconf PAGESIZE)" "$tmp/table" || err "PAGESIZE row does not say the page size"
for m in posix uffd-sigbus uffd-thread pagemap-scan soft-dirty pkeys; do
    grep -Eq "^ +$m +(available|unavailable)" "$tmp/table" || err "no availability row for $m"
done

# A forced mechanism shows up as such.
TRAPKIT_BACKEND=posix "$tk" probe >"$tmp/forced" 2>/dev/null || err "'TRAPKIT_BACKEND=posix trapkit probe' failed"
grep -q "TRAPKIT_BACKEND *posix" "$tmp/forced" || err "forced mechanism not shown"

# ---- JSON -----------------------------------------------------------------------
"$tk" probe --json >"$tmp/json" 2>"$tmp/json.err"
rc=$?
if [ $rc -ne 0 ]; then
    err "'trapkit probe --json' exited $rc"
    cat "$tmp/json.err" >&2
fi
PAGESIZE=$(getconf PAGESIZE) MAX_MAP_COUNT=$(cat /proc/sys/vm/max_map_count 2>/dev/null || echo -1) \
python3 -c '
import json, os, sys
d = json.load(sys.stdin)
bad = []
def want(key, types):
    if key not in d:
        bad.append("missing key %s" % key)
    elif not isinstance(d[key], types) or (types is int and isinstance(d[key], bool)):
        bad.append("%s has type %s" % (key, type(d[key]).__name__))
for k in ("kernel_release", "cpu_model", "thp_mode", "uffd_access",
          "mech_trap", "mech_dirty", "mech_noaccess"):
    want(k, str)
for k in ("ncpus", "page_size", "uffd_features_mask", "uffd_ioctls_mask", "pkeys_available",
          "max_map_count", "map_count", "minsigstksz"):
    want(k, int)
for k in ("pagemap_scan", "soft_dirty", "pkeys_cpu", "pkeys_kernel", "madv_guard_install", "map2"):
    want(k, bool)
for k in ("huge_page_sizes", "uffd_features", "uffd_ioctls"):
    want(k, list)
if not bad:
    if d["page_size"] != int(os.environ["PAGESIZE"]):
        bad.append("page_size %d != getconf PAGESIZE %s" % (d["page_size"], os.environ["PAGESIZE"]))
    mmc = int(os.environ["MAX_MAP_COUNT"])
    if mmc >= 0 and d["max_map_count"] != mmc:
        bad.append("max_map_count %d != /proc/sys/vm/max_map_count %d" % (d["max_map_count"], mmc))
    if d["uffd_access"] not in ("none", "syscall", "device", "user-mode-only"):
        bad.append("uffd_access %r" % d["uffd_access"])
    if not all(isinstance(x, str) for x in d["uffd_features"]):
        bad.append("uffd_features holds non-strings")
    if d["uffd_access"] == "none" and d["uffd_features"]:
        bad.append("features without userfaultfd")
    if len(d["uffd_features"]) != bin(d["uffd_features_mask"]).count("1"):
        bad.append("uffd_features does not match uffd_features_mask")
    if not all(isinstance(x, int) and x > d["page_size"] for x in d["huge_page_sizes"]):
        bad.append("huge_page_sizes %r" % d["huge_page_sizes"])
    mechs = ("posix", "uffd-sigbus", "uffd-thread", "pagemap-scan", "soft-dirty", "pkeys")
    for k in ("mech_trap", "mech_dirty", "mech_noaccess"):
        if d[k] not in mechs:
            bad.append("%s %r" % (k, d[k]))
    if d["mech_noaccess"] != "posix":
        bad.append("mech_noaccess is not posix")
    if d["pkeys_kernel"] and not d["pkeys_cpu"]:
        bad.append("pkeys_kernel without pkeys_cpu")
    if d["minsigstksz"] < 1024:  # AT_MINSIGSTKSZ: 1776 without AVX-512
        bad.append("minsigstksz %d" % d["minsigstksz"])
for b in bad:
    print("FAIL: json: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
' <"$tmp/json" || err "the JSON output does not validate"
[ "$(tail -c 1 "$tmp/json" | od -An -c | tr -d ' ')" = '\n' ] || err "JSON output does not end with a newline"

# ---- usage errors -----------------------------------------------------------------
"$tk" probe --no-such-option >/dev/null 2>"$tmp/bad.err"
rc=$?
[ $rc -eq 2 ] || err "'probe --no-such-option' exited $rc, not 2"
[ -s "$tmp/bad.err" ] || err "'probe --no-such-option' printed nothing on stderr"
"$tk" no-such-command >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || err "'no-such-command' exited $rc, not 2"
"$tk" --no-such-option >/dev/null 2>&1
rc=$?
[ $rc -eq 2 ] || err "'--no-such-option' exited $rc, not 2"
"$tk" --help >/dev/null 2>&1 || err "'--help' failed"
"$tk" version | grep -Eq '^trapkit [0-9]+\.[0-9]+\.[0-9]+' || err "'version' does not print a version"

if [ $fail -eq 0 ]; then echo "cli_probe: ok"; fi
exit $fail
