#!/usr/bin/env python3
"""bench/jaleel_jacob.py - Jaleel & Jacob's Figures 3, 4 and 5 on tksim.

Runs every workload (sim/workloads: glibc's qsort, libstdc++'s std::map,
Jacobi relaxation, a matrix multiply, a chained hash table far larger than
any of the TLBs reach) on tksim with data TLBs of 16, 32, 64 and 128 entries
and each way of taking a miss (traditional, append, prepend), and once with
1 GiB pages (a handful of misses in the whole run: the "perfect TLB" of
Figure 5).  Then the sweep: for the hash table (64-entry TLB) and Jacobi
(16 entries), the resources an in-lined handler needs - integer issue-queue
entries, ROB entries, renaming registers - one at a time around the
21264-like configuration, all of them together ("window": ROB, issue
queues, renaming registers and load/store queues scaled by one factor),
the handler's instructions needing no issue-queue entry (handler_iq = 0),
and the latency of the memory behind the caches, which sets how much of the
run the TLB's misses are.  Every sweep point also runs with a perfect TLB,
so the share of the run the misses take, and the share of that in-lining
removes, can be told apart.  The simulator is deterministic, so each
configuration runs once (n = 1; a configuration the figures and the sweep
share runs once); two runs go at a time on two cores.  tksim's speed is
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
# the sweep: (workload, TLB entries, configuration key, its values), the
# 21264-like value among them; "window" scales every structure that holds
# instructions in flight (WINDOW_KEYS) by its value
SWEEP = [("hashtab", 64, "iq_int", [10, 20, 40, 80]),
         ("hashtab", 64, "rob_size", [40, 80, 160, 320]),
         ("hashtab", 64, "rename_int", [20, 41, 82, 164]),
         ("hashtab", 64, "handler_iq", [0, 1]),
         ("hashtab", 64, "window", [0.5, 1, 2, 4]),
         ("hashtab", 64, "mem_latency", [0, 20, 60, 120]),
         ("jacobi", 16, "rob_size", [40, 80, 160, 320]),
         ("jacobi", 16, "rename_int", [20, 41, 82, 164]),
         ("jacobi", 16, "window", [0.5, 1, 2, 4]),
         ("jacobi", 16, "mem_latency", [0, 20, 60, 120])]
SWEEP_QUICK = [("hashtab", 64, "rename_int", [20, 41]), ("hashtab", 64, "handler_iq", [0, 1]),
               ("jacobi", 16, "window", [1, 2]), ("jacobi", 16, "mem_latency", [20, 60])]
WINDOW_KEYS = ["rob_size", "iq_int", "iq_fp", "rename_int", "rename_fp", "load_queue",
               "store_queue"]


def config_values():
    """The configuration file's "key = value" lines."""
    vals = {}
    with open(CONFIG) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if "=" in line:
                k, v = (x.strip() for x in line.split("=", 1))
                vals[k] = v
    return vals


def sweep_sets(key, value, base):
    """The --set arguments for one sweep point."""
    if key != "window":
        return [f"{key}={value}"]
    return [f"{k}={max(1, round(int(base[k]) * value))}" for k in WINDOW_KEYS]


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
    base = config_values()
    for w, entries, key, values in (SWEEP_QUICK if a.quick else SWEEP):
        args = WORKLOADS[w][1 if a.quick else 0]
        for v in values:
            sets = sweep_sets(key, v, base)
            jobs.append((w, args, "perfect-tlb", (entries, key, v), ["page_bits=30"] + sets))
            for s in SCHEMES:
                jobs.append((w, args, s, (entries, key, v),
                             [f"scheme={s}", f"tlb_entries={entries}"] + sets))
    # a configuration the figures and the sweep share (the 21264-like point
    # of each knob) runs once: the same settings less those equal to the
    # configuration file's give the same run
    def same_run(w, args, sets):
        return (w, tuple(args), tuple(sorted(x for x in sets
                                             if base.get(x.split("=")[0]) != x.split("=")[1])))
    unique = {}
    for w, args, s, n, sets in jobs:
        unique.setdefault(same_run(w, args, sets), (w, args, sets))
    t0 = time.time()
    runs = {}
    # two simulations at once, never more than CPUs (each keeps one busy)
    workers = max(1, min(2, len(os.sched_getaffinity(0))))
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as ex:
        futs = {ex.submit(run, a.tksim, a.workloads, w, args, sets): k
                for k, (w, args, sets) in unique.items()}
        for i, f in enumerate(concurrent.futures.as_completed(futs), 1):
            k = futs[f]
            d = f.result()
            runs[k] = d
            print(f"jaleel-jacob: [{i}/{len(futs)}] {k[0]} {' '.join(k[2]) or '21264-like'}: "
                  f"CPI {d['cpi']:.3f}, {d['tlb_misses']} misses, {d['inlined']} in-lined, "
                  f"{d['flushed_per_miss']:.1f} flushed per miss, "
                  f"{d['cpu_ips'] / 1e6:.2f} M instructions/s of CPU ({time.time() - t0:.0f} s)",
                  file=sys.stderr, flush=True)
    results = {(w, s, n): runs[same_run(w, args, sets)] for w, args, s, n, sets in jobs}

    for (w, s, n), d in results.items():
        if not isinstance(n, tuple):
            continue
        entries, key, v = n
        p = {"workload": w, "tlb_entries": entries, "knob": key, "value": v}
        emit("jaleel-jacob/sweep-cpi", s, p, "cpi", "cycles/instruction", d["cpi"])
        if s not in ("traditional", "perfect-tlb"):
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
        for k, d in runs.items():
            by_w.setdefault(k[0], []).append(d[key])
        for w, v in sorted(by_w.items()):
            v.sort()
            r = {"experiment": "jaleel-jacob/sim-speed", "mechanism": "tksim",
                 "params": {"workload": w, "clock": clock}, "metric": "ips",
                 "unit": "instructions/s", "median": v[len(v) // 2], "min": v[0], "max": v[-1],
                 "n": len(v)}
            print(json.dumps(r), flush=True)


if __name__ == "__main__":
    main()
