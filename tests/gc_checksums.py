#!/usr/bin/env python3
"""Runs each garbage-collection workload (bench/gc_<name>.c) built for
trapkit's collector and for bdwgc at one scale and checks that both print
the same checksum of their results: the program computed the same thing on
both collectors.  trapkit's build runs each way it collects (the world
stopped, generational, mostly-concurrent on pagemap-scan and on the card
barrier; a barrier this machine lacks is left out).

    gc_checksums.py [--scale F] NAME TRAPKIT_EXE BDWGC_EXE [NAME ...]
"""
import json
import os
import subprocess
import sys

TRAPKIT_MODES = (
    ("stop-the-world", {"TRAPKIT_GC_BARRIER": "none", "TRAPKIT_GC_CONCURRENT": "0"}),
    ("generational", {"TRAPKIT_GC_BARRIER": "pagemap-scan", "TRAPKIT_GC_CONCURRENT": "0"}),
    ("concurrent", {"TRAPKIT_GC_BARRIER": "pagemap-scan", "TRAPKIT_GC_CONCURRENT": "1"}),
    ("cards", {"TRAPKIT_GC_BARRIER": "cards", "TRAPKIT_GC_CONCURRENT": "1"}),
)


def run(exe, scale, env=None, extra=()):
    """The workload's JSON object, None if it skipped (exit 77)."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([exe, "--scale", str(scale), *extra], capture_output=True, text=True,
                       env=e, timeout=240)
    if p.returncode == 77:
        print(f"  {os.path.basename(exe)} skipped: {p.stderr.strip()}")
        return None
    if p.returncode != 0:
        sys.exit(f"FAIL: {os.path.basename(exe)} {' '.join(extra)} {env or ''}: exit status "
                 f"{p.returncode}: {p.stderr.strip()[-500:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    args = sys.argv[1:]
    scale = 0.1
    if args[:1] == ["--scale"]:
        scale, args = float(args[1]), args[2:]
    if not args or len(args) % 3:
        sys.exit(__doc__)
    failed = False
    for i in range(0, len(args), 3):
        name, trapkit, bdwgc = args[i:i + 3]
        want = run(bdwgc, scale)["checksum"]
        if run(bdwgc, scale, extra=("--incremental",))["checksum"] != want:
            sys.exit(f"FAIL: {name}: bdwgc's checksum differs between plain and incremental")
        print(f"{name}: bdwgc {want}")
        for mode, env in TRAPKIT_MODES:
            r = run(trapkit, scale, env)
            if r is None:
                continue
            ok = r["checksum"] == want
            failed |= not ok
            print(f"{name}: trapkit {mode}: {r['checksum']} {'ok' if ok else 'DIFFERS'}")
    if failed:
        sys.exit("FAIL: trapkit's results differ from bdwgc's")


if __name__ == "__main__":
    main()
