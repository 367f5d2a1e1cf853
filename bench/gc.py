#!/usr/bin/env python3
"""bench/gc.py - trapkit's garbage collector beside bdwgc on GCBench and on
three more workloads, each one source built for both collectors
(bench/gcwork.h): GCBench (bench/gcbench.c: gcbench_trapkit, gcbench_bdwgc);
lisp (bench/gc_lisp.c: Thekkath & Levy's Table 4, Lisp operations on cons
cells and a 1 MB array of pointers whose elements are replaced at random);
trees (bench/gc_trees.c: Table 5's tree program, subtrees of a long-lived
tree and of short-lived ones destroyed and rebuilt); interp
(bench/gc_interp.c: a small Scheme interpreter running a fixed program).
The three are given as --workload NAME:TRAPKIT_EXE[:BDWGC_EXE].

Systems: bdwgc (non-incremental), bdwgc-incremental (GC_enable_incremental:
its mprotect barrier), trapkit (the world stopped for every collection, each
full), trapkit-generational (minor collections with the pagemap-scan
barrier, the world stopped), and trapkit's mostly-concurrent marking with
each write barrier this machine has (trapkit-pagemap-scan,
trapkit-uffd-sigbus, trapkit-posix, trapkit-cards; TRAPKIT_GC_CONCURRENT=1
and TRAPKIT_GC_BARRIER).  A system whose barrier this machine lacks (the
program exits 77) is reported as not measured, with the reason.
Heaps: GCBench's standard size (heap_mib 0: its long-lived data is ~5 MiB)
and the long-lived structure grown to 1 GiB (heap_mib 1024; not --quick);
the other workloads at their own size (heap_mib 0; --quick: a quarter of
their rounds, --scale 0.25).  Results carry params {"workload": NAME,
"heap_mib": N}, NAME gcbench, lisp, trees or interp.

Each round runs every system once untimed (gc/total-time: the program's own
time from the first allocation to the end) and once with every allocation
timed (gc/max-pause, gc/p99-pause: the times from one allocation's return to
the next one's longer than 20 us - a collection inside the allocation, or the
world stopped between; the timing lengthens that run, so the total comes from
the other; gc/world-stopped: the collector's own account of its longest stop
of the world, from the stop request to the restart - trapkit's statistics,
bdwgc's collection events PRE_STOP_WORLD to POST_START_WORLD, which leave out
the marking its incremental mode does inside allocations with the world
running; gc/pause-distribution: the allocation gaps by length, every round's
together, for the plot), the systems' order rotated from round to round; n
rounds (3; --quick 1), for each workload and heap in turn.  Each figure is
the median of the rounds with their min and max; the ratios to bdwgc's
(gc/total-time-over-bdwgc, gc/max-pause-over-bdwgc-incremental,
gc/max-pause-over-bdwgc, gc/world-stopped-over-bdwgc-incremental,
gc/world-stopped-over-bdwgc) are paired per round.  The workloads other than
GCBench print a checksum of their results, which must be the same on every
system (a system that differs is reported as failed).  Results are JSON
lines on stdout (BENCHMARKING.md); progress on stderr.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def out(r):
    print(json.dumps(r), flush=True)


def emit(exp, mech, params, metric, unit, values, reason=None, note=None):
    vals = [v for v in values if v is not None]
    r = {"experiment": exp, "mechanism": mech, "params": params, "metric": metric, "unit": unit}
    if vals:
        r.update(median=statistics.median(vals), min=min(vals), max=max(vals), n=len(vals))
    else:
        r.update(median=None, min=None, max=None, n=0, reason=reason or "not measured")
    if note and vals:
        r["note"] = note
    out(r)


class NotHere(RuntimeError):
    """The program's collector cannot be had on this machine (exit 77)."""


QUICK_SCALE = 0.25  # the workloads other than GCBench under --quick


def systems(trapkit, bdwgc):
    s = {"trapkit": ([trapkit], {"TRAPKIT_GC_BARRIER": "none", "TRAPKIT_GC_CONCURRENT": "0"}),
         "trapkit-generational": ([trapkit], {"TRAPKIT_GC_BARRIER": "pagemap-scan",
                                              "TRAPKIT_GC_CONCURRENT": "0"})}
    for b in ("pagemap-scan", "uffd-sigbus", "posix", "cards"):
        s["trapkit-" + b] = ([trapkit], {"TRAPKIT_GC_BARRIER": b, "TRAPKIT_GC_CONCURRENT": "1"})
    if bdwgc and os.path.exists(bdwgc):
        s["bdwgc"] = ([bdwgc], {})
        s["bdwgc-incremental"] = ([bdwgc, "--incremental"], {})
    return s


def run(cmd, env, args, timed):
    args = cmd + args + (["--pauses"] if timed else [])
    e = dict(os.environ)
    e.update(env)
    p = subprocess.run(args, capture_output=True, text=True, env=e, timeout=3600)
    if p.returncode == 77:
        raise NotHere(p.stderr.strip()[-300:])
    if p.returncode != 0:
        raise RuntimeError(p.stderr.strip()[-300:] or f"exit status {p.returncode}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def workload_arg(text):
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise argparse.ArgumentTypeError("NAME:TRAPKIT_EXE[:BDWGC_EXE]")
    return parts[0], parts[1], parts[2] if len(parts) == 3 else None


def measure(a, workload, live, sysd, args, reps):
    """Runs one workload at one heap on every system, reps rounds; emits its
    results."""
    names = list(sysd)
    res = {n: [] for n in names}
    why = {}
    noise, check = [], []
    for rnd in range(reps):
        if workload == "gcbench" and live == 0:
            # what a store through the card barrier costs beyond a plain one
            p = subprocess.run([a.trapkit, "--store-cost"], capture_output=True, text=True,
                               env=dict(os.environ, TRAPKIT_GC_BARRIER="cards"), timeout=600)
            if p.returncode == 0:
                check.append(json.loads(p.stdout)["store_check_ns"])
            if a.noise:
                # the machine's own stalls with every CPU busy (as the
                # concurrent marker and the program keep both)
                p = subprocess.run([a.noise, "1"], capture_output=True, text=True, timeout=60)
                if p.returncode == 0:
                    noise.append(json.loads(p.stdout)["max_gap_ms"])
                    log(f"    round {rnd + 1} every CPU busy: a thread lost its CPU for up to "
                        f"{noise[-1]:.2f} ms")
        order = names[rnd % len(names):] + names[:rnd % len(names)]
        for n in order:
            if n in why:
                res[n].append(None)
                continue
            cmd, env = sysd[n]
            try:
                plain = run(cmd, env, args, False)
                timed = run(cmd, env, args, True)
                sums = {plain.get("checksum"), timed.get("checksum")}
                if len(sums) > 1:
                    raise RuntimeError(f"checksums differ between runs: {sorted(sums)}")
            except NotHere as e:
                why[n] = f"not on this machine: {e}"
                log(f"    round {rnd + 1} {n}: {why[n]}")
                res[n].append(None)
                continue
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                msg = str(e)
                if "EOPNOTSUPP" in msg or "not supported" in msg.lower() or "lacks" in msg:
                    why[n] = f"not on this machine: {msg}"
                else:
                    why[n] = msg
                log(f"    round {rnd + 1} {n}: {why[n]}")
                res[n].append(None)
                continue
            res[n].append((plain, timed))
            log(f"    round {rnd + 1} {n:22} total {plain['total_ms']:8.1f} ms, "
                f"{plain['collections']} collections, heap {plain['heap_mib']:.0f} MiB; "
                f"pauses: max {timed['max_pause_ms']:.2f} ms, p99 {timed['p99_pause_ms']:.2f} ms")
    # the same results on every system: the checksum bdwgc's runs printed
    # (else the first system's), and any other is a failure
    sums = [r[0]["checksum"] for n in names for r in res[n] if r and "checksum" in r[0]]
    if sums:
        want = next((r[0]["checksum"] for r in res.get("bdwgc", []) if r), sums[0])
        for n in names:
            bad = [r[0]["checksum"] for r in res[n] if r and r[0].get("checksum") != want]
            if bad:
                why[n] = f"wrong results: checksum {bad[0]}, not {want}"
                log(f"    {n}: {why[n]}")
                res[n] = [None] * len(res[n])
    params = {"workload": workload, "heap_mib": live}
    if check:
        emit("gc/store-check", "trapkit-cards", {"workload": "gcbench"}, "latency", "ns", check,
             note="a store through tk_gc_write less a plain store, 2^24 of each, the least of 5")
    if noise:
        emit("gc/cpu-noise", "machine", {"cpus": "all busy"}, "time", "ns",
             [v * 1e6 for v in noise],
             note="the longest a spinning thread lost its CPU, one per CPU, 1 s (cpu_noise)")
    for n in names:
        rs = res[n]
        emit("gc/total-time", n, params, "time", "ns",
             [r[0]["total_ms"] * 1e6 if r else None for r in rs], reason=why.get(n))
        emit("gc/max-pause", n, params, "time", "ns",
             [r[1]["max_pause_ms"] * 1e6 if r else None for r in rs], reason=why.get(n),
             note="the longest time from an allocation's return to the next one's")
        emit("gc/world-stopped", n, params, "time", "ns",
             [r[1]["world_stopped_ms"] * 1e6 if r and r[1].get("world_stopped_ms") is not None
              else None for r in rs], reason=why.get(n),
             note="the collector's own longest stop of the world, from the stop request to the "
                  "restart (bdwgc: its collection events PRE_STOP_WORLD to POST_START_WORLD)")
        hists = [r[1]["pause_hist"] for r in rs if r and r[1].get("pause_hist")]
        if hists:
            # the pauses of every round together, for the distribution's plot
            edges = next(r[1]["pause_hist_edges_ms"] for r in rs if r and r[1].get("pause_hist"))
            out({"experiment": "gc/pause-distribution", "mechanism": n, "params": params,
                 "metric": "count", "unit": "pauses", "median": sum(map(sum, hists)),
                 "min": min(map(sum, hists)), "max": max(map(sum, hists)), "n": len(hists),
                 "edges_ms": edges, "counts": [sum(c) for c in zip(*hists)],
                 "note": "allocation gaps over 20 us by length, all rounds"})
        emit("gc/mappings-growth", n, params, "count", "mappings",
             [r[0]["mappings_end"] - r[0]["mappings_start"] if r else None for r in rs],
             reason=why.get(n), note="/proc/self/maps lines, end less start")
        emit("gc/peak-rss", n, params, "size", "bytes",
             [r[0]["maxrss_mib"] * 2**20 if r else None for r in rs], reason=why.get(n))
        emit("gc/pointer-stores", n, params, "count", "stores",
             [r[0].get("pointer_stores") if r else None for r in rs], reason=why.get(n))
        if n.startswith("trapkit") and n != "trapkit":
            emit("gc/dirty-pages", n, params, "count", "pages",
                 [r[0].get("dirty_pages") if r and r[0].get("dirty_pages", -1) >= 0 else None
                  for r in rs], reason=why.get(n),
                 note="written pages the barrier reported, all collections")
        emit("gc/p99-pause", n, params, "time", "ns",
             [r[1]["p99_pause_ms"] * 1e6 if r else None for r in rs], reason=why.get(n))
        emit("gc/collections", n, params, "count", "collections",
             [r[0]["collections"] if r else None for r in rs], reason=why.get(n))
        if n.startswith("trapkit"):
            emit("gc/minor-collections", n, params, "count", "collections",
                 [r[0]["minor_collections"] if r and r[0].get("minor_collections", -1) >= 0
                  else None for r in rs], reason=why.get(n),
                 note="of the collections, minor ones (the concurrent cycles are full)")
        if n.startswith("trapkit") and n != "trapkit":
            emit("gc/dirty-pages-per-collection", n, params, "count", "pages",
                 [r[0]["dirty_pages"] / r[0]["collections"]
                  if r and r[0].get("dirty_pages", -1) >= 0 and r[0]["collections"] else None
                  for r in rs], reason=why.get(n),
                 note="written pages the barrier reported per collection (derived)")
        emit("gc/heap", n, params, "size", "bytes",
             [r[0]["heap_mib"] * 2**20 if r else None for r in rs], reason=why.get(n))
    if "bdwgc" not in res:
        return
    for n in names:
        if n.startswith("bdwgc"):
            continue
        pairs = [(t, b) for t, b in zip(res[n], res["bdwgc"]) if t and b]
        emit("gc/total-time-over-bdwgc", n, params, "ratio", "x",
             [t[0]["total_ms"] / b[0]["total_ms"] for t, b in pairs],
             reason=why.get(n, "bdwgc not measured"), note="paired per round")
        emit("gc/max-pause-over-bdwgc", n, params, "ratio", "x",
             [t[1]["max_pause_ms"] / b[1]["max_pause_ms"] for t, b in pairs
              if b[1]["max_pause_ms"] > 0],
             reason=why.get(n, "bdwgc not measured"), note="paired per round")
        ip = [(t, b) for t, b in zip(res[n], res["bdwgc-incremental"]) if t and b]
        emit("gc/max-pause-over-bdwgc-incremental", n, params, "ratio", "x",
             [t[1]["max_pause_ms"] / b[1]["max_pause_ms"] for t, b in ip
              if b[1]["max_pause_ms"] > 0],
             reason=why.get(n, "bdwgc not measured"), note="paired per round")

        def stopped(ps):
            return [t[1]["world_stopped_ms"] / b[1]["world_stopped_ms"] for t, b in ps
                    if t[1].get("world_stopped_ms") is not None
                    and (b[1].get("world_stopped_ms") or 0) > 0]
        emit("gc/world-stopped-over-bdwgc", n, params, "ratio", "x", stopped(pairs),
             reason=why.get(n, "bdwgc not measured"), note="paired per round")
        emit("gc/world-stopped-over-bdwgc-incremental", n, params, "ratio", "x", stopped(ip),
             reason=why.get(n, "bdwgc not measured"), note="paired per round")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trapkit", required=True, help="gcbench_trapkit")
    ap.add_argument("--bdwgc", default=None, help="gcbench_bdwgc")
    ap.add_argument("--workload", type=workload_arg, action="append", default=[],
                    metavar="NAME:TRAPKIT_EXE[:BDWGC_EXE]",
                    help="another workload (gc_NAME_trapkit, gc_NAME_bdwgc)")
    ap.add_argument("--noise", default=None, help="cpu_noise")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=None)
    a = ap.parse_args()
    reps = a.reps or (1 if a.quick else 3)
    heaps = [0] if a.quick else [0, 1024]
    sysd = systems(a.trapkit, a.bdwgc)
    if "bdwgc" not in sysd:
        log("  gc: bdwgc's GCBench is not built (libgc-dev missing): trapkit alone")
    for live in heaps:
        log(f"  gc: GCBench, long-lived data {'standard' if not live else f'{live} MiB'}, "
            f"{len(sysd)} systems, {reps} rounds")
        measure(a, "gcbench", live, sysd, ["--live-mib", str(live)] if live else [], reps)
    for name, trapkit, bdwgc in a.workload:
        wsys = systems(trapkit, bdwgc)
        args = ["--scale", str(QUICK_SCALE)] if a.quick else []
        log(f"  gc: {name} (bench/gc_{name}.c){' at a quarter of its size' if a.quick else ''}, "
            f"{len(wsys)} systems, {reps} rounds")
        measure(a, name, 0, wsys, args, reps)


if __name__ == "__main__":
    main()
