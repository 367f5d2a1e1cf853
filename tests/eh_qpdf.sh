#!/usr/bin/env bash
# An existing C++ program run under trapkit's throw runtime: Debian's qpdf,
# which recovers from damaged PDF files by throwing and catching
# exceptions (QPDFExc) inside libqpdf.  Every run must print the same,
# exit the same and write the same file with libtrapkit_eh.so preloaded as
# without it, and the preloaded runs must have thrown through trapkit.
# Usage: eh_qpdf.sh LIBTRAPKIT_EH_SO
set -euo pipefail
lib=$(realpath "$1")
for t in qpdf python3; do
    command -v $t >/dev/null || { echo "missing $t (scripts/install-deps.sh installs it)"; exit 1; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cd "$dir"

# a 5-page PDF, a damaged copy (xref offsets, startxref and a stream
# length wrong) and a truncated one
python3 - <<'PY'
import re
objs = [b"<< /Type /Catalog /Pages 2 0 R >>"]
pages = 5
objs.append(b"<< /Type /Pages /Kids [%s] /Count %d >>"
            % (b" ".join(b"%d 0 R" % (3 + 2 * i) for i in range(pages)), pages))
for i in range(pages):
    content = b"BT /F1 24 Tf 72 720 Td (page %d) Tj ET" % (i + 1)
    objs.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents %d 0 R >>"
                % (4 + 2 * i))
    objs.append(b"<< /Length %d >>\nstream\n" % len(content) + content + b"\nendstream")
out = bytearray(b"%PDF-1.4\n")
offs = []
for n, o in enumerate(objs, 1):
    offs.append(len(out))
    out += b"%d 0 obj\n" % n + o + b"\nendobj\n"
x = len(out)
out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objs) + 1)
for o in offs:
    out += b"%010d 00000 n \n" % o
out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objs) + 1, x)
good = bytes(out)
open("good.pdf", "wb").write(good)
head, tail = good[:x], good[x:]
tail = re.sub(rb"(\d{10}) 00000 n", lambda m: b"%010d 00000 n" % (int(m.group(1)) + 3), tail)
tail = tail.replace(b"startxref\n%d" % x, b"startxref\n%d" % (x + 17))
head = head.replace(b"/Length 36", b"/Length 99", 1)
open("damaged.pdf", "wb").write(head + tail)
open("truncated.pdf", "wb").write(good[:700])
PY

run() { # run NAME PRELOAD? ARGS...: stdout+stderr and the exit status in NAME.*
    local name=$1 pre=$2; shift 2
    local rc=0
    if [[ $pre == yes ]]; then
        LD_PRELOAD=$lib TRAPKIT_EH_STATS=$dir/stats "$@" >"$name.out" 2>&1 || rc=$?
    else
        "$@" >"$name.out" 2>&1 || rc=$?
    fi
    echo "$rc" >"$name.rc"
}
fail=0
for f in good damaged truncated; do
    for cmd in check rewrite json; do
        case $cmd in
            check) args=(qpdf --check "$f.pdf") ;;
            rewrite) args=(qpdf --static-id "$f.pdf" "OUT.pdf") ;;
            json) args=(qpdf --json "$f.pdf") ;;
        esac
        for pre in no yes; do
            a=("${args[@]/OUT/$f-$cmd-$pre}")
            run "$f-$cmd-$pre" $pre "${a[@]}"
        done
        if ! cmp -s "$f-$cmd-no.out" "$f-$cmd-yes.out" || ! cmp -s "$f-$cmd-no.rc" "$f-$cmd-yes.rc"; then
            echo "FAIL: qpdf $cmd $f.pdf differs under trapkit's runtime"
            diff "$f-$cmd-no.out" "$f-$cmd-yes.out" | head -20 || true
            echo "exit $(cat "$f-$cmd-no.rc") vs $(cat "$f-$cmd-yes.rc")"
            fail=1
        fi
        if [[ $cmd == rewrite && -f $f-$cmd-no.pdf ]] && ! cmp -s "$f-$cmd-no.pdf" "$f-$cmd-yes.pdf"; then
            echo "FAIL: qpdf's rewritten $f.pdf differs under trapkit's runtime"
            fail=1
        fi
        ((fail)) || echo "qpdf $cmd $f.pdf: exit $(cat "$f-$cmd-no.rc"), the same with and without trapkit"
    done
done
[[ -s stats ]] || { echo "FAIL: libtrapkit_eh.so wrote no statistics: was it loaded?"; exit 1; }
throws=$(awk '{n += $2} END {print n}' stats)
echo "under trapkit: $throws exceptions thrown by qpdf over $(wc -l <stats) runs"
((throws > 0)) || { echo "FAIL: qpdf threw nothing through trapkit's runtime"; fail=1; }
exit $fail
