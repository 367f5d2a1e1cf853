#!/usr/bin/env python3
"""Shared virtual memory (trapkit/dsm.h) on Open MPI: ArgoDSM's kernels
(daxpy, stream's triad, matmul, matvec, a Jacobi stencil) on the DSM with
each protocol (ivy, rc) beside the same kernel written with MPI messages,
at 1, 2 and 4 ranks; and the protocol's costs beside an MPI ping-pong of
one page.  Runs bench/dsm_kernels.c under mpirun (tests/dsm_run.sh: TCP on
the loopback interface) and prints JSON lines (shared BENCHMARKING.md).

Repetitions are interleaved: each round runs every (ranks, mode) once, in
turn, each run the five kernels one after the other in one mpirun.  On this 2-core machine 4 ranks oversubscribe the cores
(each rank also has its service thread), which the figures' note says.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint import emit  # noqa: E402  (the benchmarks' figure output)

KERNELS = {  # size, iterations: full, quick
    "daxpy": ((4 << 20, 20), (1 << 18, 5)),
    "stream": ((4 << 20, 20), (1 << 18, 5)),
    "matmul": ((768, 1), (128, 1)),
    "matvec": ((4096, 20), (512, 5)),
    "jacobi": ((2048, 60), (256, 10)),
}
MODES = ["mpi", "ivy", "rc"]
NS = 1e9  # nanoseconds a second


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def run_all(a, np_, args, env=None):
    """One mpirun of bench_dsm_kernels: the JSON objects rank 0 printed."""
    cmd = [a.run, str(np_), a.kernels] + [str(x) for x in args]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, **(env or {})))
    lines = [x for x in p.stdout.splitlines() if x.startswith("{")]
    if p.returncode != 0 or not lines:
        raise RuntimeError(f"{' '.join(cmd[2:])} failed (status {p.returncode}): "
                           f"{(p.stderr or p.stdout)[-800:]}")
    return [json.loads(x) for x in lines]


def run(a, np_, args, env=None):
    return run_all(a, np_, args, env)[-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", required=True)
    ap.add_argument("--run", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--reps", type=int, default=0)
    a = ap.parse_args()
    reps = a.reps or (1 if a.quick else 4)
    ncpu = os.cpu_count() or 1

    # the protocol's costs: 2 ranks, rank 1 faulting on pages rank 0 holds
    pages = 50 if a.quick else 400
    micro = {p: [] for p in ("ivy", "rc")}
    for rnd in range(reps):
        for proto in ("ivy", "rc"):
            # (one fault a page: rc's read-ahead off, so each fault is timed alone)
            d = run(a, 2, ["micro", proto, pages], {"TRAPKIT_DSM_PREFETCH": "1"})
            micro[proto].append(d)
            log(f"dsm micro {proto} round {rnd + 1}/{reps}: read fault "
                f"{statistics.median(d['read']) * 1e6:.1f} us, write fault "
                f"{statistics.median(d['write']) * 1e6:.1f} us, ping-pong "
                f"{statistics.median(d['pingpong']) * 1e6:.1f} us ({d['mech']})")
    pp = []
    for proto, runs in micro.items():
        mech = runs[0]["mech"]
        note = (f"faults caught by {mech}; 2 ranks on one host over TCP (loopback); "
                "rc's read-ahead off")
        emit("dsm/remote-read-fault", proto, {"ranks": 2}, "time", "ns",
             [v * NS for d in runs for v in d["read"]], note=note)
        emit("dsm/write-fault", proto, {"ranks": 2}, "time", "ns",
             [v * NS for d in runs for v in d["write"]],
             note=note + ("; ivy: the page held read-only by both ranks, the other rank owning it: "
                     "its copy invalidated and the page moved" if proto == "ivy" else
                     "; rc: the page not cached (after an acquire): fetched from its home, "
                     "twinned and opened"))
        if proto == "rc":
            emit("dsm/diff", proto, {"ranks": 2}, "time", "ns",
                 [v * NS for d in runs for v in d["diff"]],
                 note=note + "; a page with 8 bytes changed: its diff made, sent, merged at the "
                        "home and acknowledged, per page, over a release of "
                        f"{pages} pages")
        pp += [v * NS for d in runs for v in d["pingpong"]]
    emit("dsm/page-pingpong", "mpi", {"ranks": 2}, "time", "ns", pp,
         note="MPI_Send/MPI_Recv of one page there and back, the same two ranks, in the same runs")
    for proto, runs in micro.items():
        emit("dsm/read-fault-over-pingpong", proto, {"ranks": 2}, "ratio", "x",
             [statistics.median(d["read"]) / statistics.median(d["pingpong"]) for d in runs],
             note="paired per run: a run's median read fault over its median ping-pong")

    # the kernels: one mpirun per ranks and mode runs each kernel in turn
    # (an mpirun's start takes longer than most kernels)
    res = {}
    specs = []
    for k, (full, quick) in KERNELS.items():
        size, iters = quick if a.quick else full
        specs += [k, size, iters]
    for rnd in range(reps):
        for nr in (1, 2, 4):
            for m in MODES:
                got = run_all(a, nr, [m] + specs)
                if [d["kernel"] for d in got] != list(KERNELS):
                    raise RuntimeError(f"{m} at {nr} ranks: ran {[d['kernel'] for d in got]}, "
                                       f"not {list(KERNELS)}")
                for d in got:
                    k = d["kernel"]
                    if not d["ok"]:
                        raise RuntimeError(f"{m} {k} at {nr} ranks: wrong result")
                    res.setdefault((k, nr, m), []).append(d)
                    log(f"dsm {k} ranks={nr} {m}: {d['seconds'] * 1e3:.1f} ms, "
                        f"{d['pages_in']} pages moved (round {rnd + 1}/{reps})")
    for (k, nr, m), runs in sorted(res.items()):
        size, iters = KERNELS[k][1 if a.quick else 0]
        over = (f"; {nr} ranks on {ncpu} cores: oversubscribed" if nr > ncpu else "")
        note = (f"size {size}, {iters} iteration(s), checked against a serial run"
                + (f"; faults caught by {runs[0]['mech']}" if m != "mpi" else "") + over)
        params = {"kernel": k, "ranks": nr}
        emit("dsm/kernel-time", m, params, "time", "s", [d["seconds"] for d in runs], note=note)
        if m != "mpi":
            emit("dsm/pages-moved", m, params, "count", "pages", [d["pages_in"] for d in runs])
            emit("dsm/kernel-over-mpi", m, params, "ratio", "x",
                 [d["seconds"] / b["seconds"] for d, b in zip(runs, res[(k, nr, "mpi")])],
                 note="paired per round: the run's time over the MPI version's of the same round")


if __name__ == "__main__":
    main()
