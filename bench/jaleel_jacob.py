#!/usr/bin/env python3
"""bench/jaleel_jacob.py - Jaleel & Jacob's Figures 3, 4 and 5 on tksim.

Runs every workload (sim/workloads: glibc's qsort, libstdc++'s std::map,
Jacobi relaxation, a matrix multiply, a chained hash table far larger than
any of the TLBs reach) on tksim with data TLBs of 16, 32, 64 and 128 entries
and each way of taking a miss (traditional, append, prepend), and once with
1 GiB pages (a handful of misses in the whole run: the "perfect TLB" of
Figure 5).  Then, for the hash table with a 64-entry TLB, a sweep of the
three resources an in-lined handler needs - integer issue-queue entries,
ROB entries, renaming registers - one at a time around the 21264-like
configuration.  The simulator is deterministic, so each configuration runs
once (n = 1); two runs go at a time on two cores.  tksim's speed is
reported per workload, in simulated instructions per second of its own CPU
time (getrusage) and of wall-clock time, over all of the workload's runs.

Prints one JSON object per figure on stdout (shared BENCHMARKING.md),
progress on stderr.  --quick: small inputs, two TLB sizes.
"""
import argparse
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

SCHEMES = ["traditional", "append", "prepend"]
CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sim", "configs",
                      "alpha21264.cfg")
# inputs: large enough that 128 entries of 8 KiB pages (1 MiB) do not hold
# the data, small enough for a run of about ten seconds
WORKLOADS = {
    "qsort": (["40000"], ["3000"]),
    "map": (["15000"], ["1500"]),
    "jacobi": (["256", "6"], ["96", "2"]),
    "matmul": (["160"], ["40"]),
    "hashtab": (["100000"], ["20000"]),
}
# the sweep: (configuration key, its values), the 21264-like value among them
SWEEP_WORKLOAD, SWEEP_TLB = "hashtab", 64
SWEEP = [("iq_int", [10, 20, 40, 80]), ("rob_size", [40, 80, 160, 320]),
         ("rename_int", [20, 41, 82, 164])]
SWEEP_QUICK = [("iq_int", [20, 80]), ("rob_size", [80, 320]), ("rename_int", [41, 164])]


def emit(exp, mech, params, metric, unit, value, reason=None):
    r = {"experiment": exp, "mechanism": mech, "params": params, "metric": metric, "unit": unit,
         "median": value, "min": value, "max": value, "n": 1 if value is not None else 0}
    if value is None:
        r["reason"] = reason or "not measured"
    print(json.dumps(r), flush=True)


def run(tksim, wdir, workload, args, sets):
    with tempfile.NamedTemporaryFile(suffix=".json") as j:
        cmd = [tksim, "--quiet", "--config", CONFIG, "--stats-json", j.name]
        for s in sets:
            cmd += ["--set", s]
        cmd += [os.path.join(wdir, workload)] + args
        p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if p.returncode != 0:
            raise RuntimeError(f"tksim {' '.join(sets)} {workload}: exit {p.returncode}: "
                               f"{p.stderr.strip()[-300:]}")
        with open(j.name) as f:
            return json.load(f)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tksim", required=True)
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=1)  # accepted for the report's interface
    a = ap.parse_args()
    missing = [w for w in WORKLOADS if not os.access(os.path.join(a.workloads, w), os.X_OK)]
    if missing:
        sys.exit(f"jaleel_jacob: workloads not built in {a.workloads}: {missing} "
                 "(riscv64-linux-gnu-gcc: scripts/install-deps.sh)")
    sizes = [16, 64] if a.quick else [16, 32, 64, 128]
    jobs = []
    for w, (full, quick) in WORKLOADS.items():
        args = quick if a.quick else full
        jobs.append((w, args, "perfect-tlb", None, ["page_bits=30"]))
        for n in sizes:
            for s in SCHEMES:
                jobs.append((w, args, s, n, [f"scheme={s}", f"tlb_entries={n}"]))
    sargs = WORKLOADS[SWEEP_WORKLOAD][1 if a.quick else 0]
    for key, values in (SWEEP_QUICK if a.quick else SWEEP):
        for v in values:
            for s in SCHEMES:
                jobs.append((SWEEP_WORKLOAD, sargs, s, (SWEEP_TLB, key, v),
                             [f"scheme={s}", f"tlb_entries={SWEEP_TLB}", f"{key}={v}"]))
    t0 = time.time()
    results = {}
    # two simulations at once, never more than CPUs (each keeps one busy)
    workers = max(1, min(2, len(os.sched_getaffinity(0))))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        futs = {ex.submit(run, a.tksim, a.workloads, w, args, sets): (w, s, n)
                for w, args, s, n, sets in jobs}
        for i, f in enumerate(concurrent.futures.as_completed(futs), 1):
            w, s, n = futs[f]
            d = f.result()
            results[(w, s, n)] = d
            what = n if not isinstance(n, tuple) else f"{n[0]}, {n[1]} = {n[2]}"
            print(f"jaleel-jacob: [{i}/{len(jobs)}] {w} {s} {what or ''}: CPI {d['cpi']:.3f}, "
                  f"{d['tlb_misses']} misses, {d['inlined']} in-lined, "
                  f"{d['flushed_per_miss']:.1f} flushed per miss, "
                  f"{d['cpu_ips'] / 1e6:.2f} M instructions/s of CPU ({time.time() - t0:.0f} s)",
                  file=sys.stderr, flush=True)

    for (w, s, n), d in results.items():
        if not isinstance(n, tuple):
            continue
        entries, key, v = n
        p = {"workload": w, "tlb_entries": entries, "knob": key, "value": v}
        emit("jaleel-jacob/sweep-cpi", s, p, "cpi", "cycles/instruction", d["cpi"])
        if s != "traditional":
            emit("jaleel-jacob/sweep-inlined-fraction", s, p, "fraction", "ratio",
                 d["inlined"] / d["tlb_misses"] if d["tlb_misses"] else None, "no TLB miss")
    figures = {k: d for k, d in results.items() if not isinstance(k[2], tuple)}
    for (w, s, n), d in sorted(figures.items(), key=lambda kv: (kv[0][0], kv[0][2] or 0, kv[0][1])):
        if s == "perfect-tlb":
            emit("jaleel-jacob/cpi", s, {"workload": w, "tlb_entries": 0}, "cpi",
                 "cycles/instruction", d["cpi"])
            continue
        p = {"workload": w, "tlb_entries": n}
        misses = d["tlb_misses"]
        kinsns = d["instructions"] / 1000
        emit("jaleel-jacob/cpi", s, p, "cpi", "cycles/instruction", d["cpi"])
        emit("jaleel-jacob/tlb-misses", s, p, "misses_per_kilo_instruction", "misses",
             misses / kinsns if kinsns else None)
        emit("jaleel-jacob/flushed-per-miss", s, p, "flushed_per_miss", "instructions",
             d["flushed_per_miss"] if misses else None, "no TLB miss")
        emit("jaleel-jacob/rob-occupancy-at-miss", s, dict(p, when="detected"), "rob_entries",
             "entries", d["rob_occupancy_at_detect"] if d["detections"] else None, "no TLB miss")
        emit("jaleel-jacob/rob-occupancy-at-miss", s, dict(p, when="taken"), "rob_entries",
             "entries", d["rob_occupancy_at_miss"] if misses else None, "no TLB miss")
        # Figure 4: instructions flushed per instruction retired, by stage
        for stage, key in (("finished", "done"), ("executing", "issued"),
                           ("waiting-to-issue", "waiting"), ("before-rename", "frontend")):
            emit("jaleel-jacob/flushed-per-retired", s, dict(p, stage=stage), "ratio",
                 "flushed/retired", d["flushed"][key] / d["instructions"])
        if s == "traditional":
            emit("jaleel-jacob/inlined-fraction", s, p, "fraction", "ratio", None,
                 "the traditional scheme never in-lines")
        else:
            emit("jaleel-jacob/inlined-fraction", s, p, "fraction", "ratio",
                 d["inlined"] / misses if misses else None, "no TLB miss")
            for reason in ("rob", "iq", "registers", "lsq"):
                emit("jaleel-jacob/fallback-fraction", s, dict(p, reason=reason), "fraction",
                     "ratio", d["fallback"][reason] / misses if misses else None, "no TLB miss")
    # the simulator's speed over each workload's runs: simulated (committed)
    # instructions per second of its own CPU time, and of wall-clock time
    # (two runs share the two cores, and other work may share them too)
    for clock, key in (("cpu", "cpu_ips"), ("wall", "ips")):
        by_w = {}
        for (w, s, n), d in results.items():
            by_w.setdefault(w, []).append(d[key])
        for w, v in sorted(by_w.items()):
            v.sort()
            r = {"experiment": "jaleel-jacob/sim-speed", "mechanism": "tksim",
                 "params": {"workload": w, "clock": clock}, "metric": "ips",
                 "unit": "instructions/s", "median": v[len(v) // 2], "min": v[0], "max": v[-1],
                 "n": len(v)}
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
