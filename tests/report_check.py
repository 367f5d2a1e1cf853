#!/usr/bin/env python3
"""Checks a quick report: results.json is complete and well-formed (its
structure, never its times), docs were written, and index.html renders in
headless Chromium with every table and every image loaded.

Usage: report_check.py OUT [--only LIST]: with --only (the report's own
option, comma-separated benchmarks), only those benchmarks' figures are
expected, and the figures derived across benchmarks (analysis/*, the goals,
the seeds' tables) are not."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

out = sys.argv[1]
only = None
if len(sys.argv) == 4 and sys.argv[2] == "--only":
    only = set(sys.argv[3].split(","))
elif len(sys.argv) != 2:
    sys.exit("usage: report_check.py OUT [--only LIST]")
errors = []
# the benchmark (bench/report.py's name) that writes an experiment's figures
SOURCE = {"appel-li": "appel_li", "threads": "appel_li", "machine": "appel_li",
          "thekkath-levy": "thekkath_levy", "subpage": "fast", "eager": "fast",
          "checkpoint": "checkpoint", "scale": "scale", "dirty": "dirty", "lock": "lock",
          "mosberger": "mosberger", "gylfason": "gylfason", "jaleel-jacob": "jaleel_jacob",
          "pheap": "pheap", "gc": "gc", "dsm": "dsm", "zpage": "zpage", "guard": "guard",
          "lazy": "lazy"}


def expected_here(exp):
    """Whether this run is expected to have the experiment's figures."""
    if only is None:
        return True
    src = exp.split("/")[0]
    if exp.startswith("checkpoint/restore-") or exp == "checkpoint/image-size":
        return "restore" in only
    return src in SOURCE and SOURCE[src] in only


def err(msg):
    errors.append(msg)
    print("FAIL:", msg)


with open(os.path.join(out, "results.json")) as f:
    doc = json.load(f)

for key in ("machine", "results", "generated", "goals", "failed"):
    if key not in doc:
        err(f"results.json has no '{key}'")
for f in doc.get("failed", []):
    err(f"{f.get('bench')} failed (exit status {f.get('status')})")
machine = doc.get("machine", {})
for key in ("kernel_release", "cpu_model", "page_size", "uffd_access", "max_map_count",
            "mech_trap", "mech_dirty"):
    if key not in machine:
        err(f"machine (trapkit probe --json) has no '{key}'")

REQUIRED = {"experiment": str, "mechanism": str, "params": dict, "metric": str, "unit": str,
            "n": int}
results = doc.get("results", [])
for i, r in enumerate(results):
    for k, t in REQUIRED.items():
        if not isinstance(r.get(k), t):
            err(f"result {i} ({r.get('experiment')}): '{k}' missing or not {t.__name__}")
    for k in ("median", "min", "max"):
        if k not in r:
            err(f"result {i} ({r.get('experiment')}): no '{k}'")
    if r.get("median") is None:
        if not r.get("reason"):
            err(f"result {i} ({r.get('experiment')}, {r.get('mechanism')}): null without reason")
    else:
        if not all(isinstance(r.get(k), (int, float)) for k in ("median", "min", "max")):
            err(f"result {i}: median/min/max not numbers")
        elif not r["min"] <= r["median"] <= r["max"]:
            err(f"result {i} ({r['experiment']}): min <= median <= max does not hold")
        if r.get("n", 0) < 1:
            err(f"result {i}: a figure with n < 1")
    if not re.fullmatch(r"[a-z0-9-]+/[a-z0-9+.\-]+", r.get("experiment", "")):
        err(f"result {i}: experiment id '{r.get('experiment')}' is not <source>/<name>")


def has(exp, mech=None, **params):
    return any(r["experiment"] == exp and (mech is None or r["mechanism"] == mech)
               and all(r["params"].get(k) == v for k, v in params.items()) for r in results)


EXPECTED = [
    ("appel-li/add", "cpu", {}), ("machine/cycle", "cpu", {}),
    ("appel-li/map2", "trapkit", {}), ("appel-li/pagesize", "trapkit", {}),
    ("thekkath-levy/deliver-simple", "posix", {"exception": "int3"}),
    ("thekkath-levy/deliver-simple", "fast-signal", {"exception": "ud2"}),
    ("thekkath-levy/round-trip", "fast-signal", {"exception": "int3"}),
    ("thekkath-levy/return", "fast-signal", {"exception": "write-protection"}),
    ("thekkath-levy/deliver-subpage", None, {}),
    ("thekkath-levy/return", "posix", {}),
    ("thekkath-levy/round-trip", "uffd-sigbus", {}), ("thekkath-levy/deliver-wp", "pkeys", {}),
    ("thekkath-levy/null-syscall", "posix", {}),
    ("analysis/heap-overflow-breakeven", "posix", {}),
    ("analysis/swizzling-breakeven", "posix", {}),
    ("analysis/heap-overflow-overhead", "posix", {"detection": "guard-page"}),
    ("thekkath-levy/deliver-subpage", "fast-signal", {"subpage": 1024}),
    ("subpage/open-access", "emulate", {}), ("subpage/open-access", "single-step", {}),
    ("eager/trap+record", "uffd-sigbus", {"eager": True}),
    ("eager/trap+record", "posix", {"eager": False}),
    ("checkpoint/p99.9-during-snapshot", "fork", {"offered_load": 0.5, "command": "set"}),
    ("checkpoint/p99.9-steady", "redis-fork", {"offered_load": 0.5, "command": "get"}),
    ("checkpoint/max-during-snapshot", "redis-fork", {"offered_load": 0.5, "command": "set"}),
    ("checkpoint/p99.9-snapshot-over-redis", "fork", {"command": "set"}),
    ("checkpoint/max-snapshot-over-redis", "fork", {"command": "set"}),
    ("checkpoint/p99.9-snapshot-over-steady", "redis-fork", {"command": "set"}),
    ("checkpoint/capacity", "redis-fork", {}), ("checkpoint/offered-rate", "tk-loadgen", {}),
    ("checkpoint/snapshot-duration", "fork", {"offered_load": 0.5}),
    ("checkpoint/lateness-p99", "redis-fork", {"offered_load": 0.5}),
    ("checkpoint/extra-memory", "fork", {"offered_load": 0.5}),
    ("checkpoint/restore-first-reply", "lazy", {"cache": "warm"}),
    ("checkpoint/restore-first-reply", "eager", {"cache": "dropped"}),
    ("checkpoint/restore-resident", "redis-server", {"cache": "warm"}),
    ("checkpoint/restore-first-reply-over-eager", "lazy", {"cache": "dropped"}),
    ("checkpoint/restore-resident-over-eager", "lazy", {"cache": "warm"}),
    ("checkpoint/image-size", "trapkit", {}), ("checkpoint/image-size", "trapkit-lz4", {}),
    ("checkpoint/image-size", "trapkit-incremental", {}), ("checkpoint/image-size", "redis-rdb", {}),
    ("analysis/table5-breakeven", "cpu", {"program": "Tree"}),
    ("analysis/table5-exceptions-over-checks", "posix", {"program": "Interactive"}),
    ("mosberger/rollforward", "dyn-jump", {}),
    ("gylfason/throw-int", "trapkit", {"frames": 20}),
    ("gylfason/throw-with-destructors", "trapkit", {"frames": 1}),
    ("gylfason/breakdown", "libgcc", {"part": "search"}),
    ("gylfason/breakdown", "trapkit", {"part": "cleanup"}),
    ("jaleel-jacob/sim-speed", "tksim", {"workload": "qsort", "clock": "cpu"}),
    ("jaleel-jacob/sim-speed", "tksim", {"workload": "hashtab", "clock": "wall"}),
    ("jaleel-jacob/sweep-cpi", "traditional", {"workload": "hashtab", "knob": "handler_iq"}),
    ("jaleel-jacob/sweep-cpi", "perfect-tlb", {"workload": "hashtab", "knob": "rename_int"}),
    ("jaleel-jacob/sweep-cpi", "prepend", {"workload": "jacobi", "knob": "window"}),
    ("jaleel-jacob/sweep-cpi", "append", {"workload": "jacobi", "knob": "mem_latency"}),
    ("analysis/jaleel-jacob-overhead-cut", "prepend", {"workload": "hashtab", "tlb_entries": 16}),
    ("jaleel-jacob/sweep-inlined-fraction", "append", {"workload": "hashtab", "knob": "rename_int"}),
    ("analysis/jaleel-jacob-flushed-cut", "prepend", {"workload": "map", "tlb_entries": 16}),
    ("analysis/jaleel-jacob-time-cut", "append", {"workload": "jacobi", "tlb_entries": 64}),
    ("mosberger/breakeven-rate", "hyb-jump", {"versus": "sigprocmask"}),
    ("dsm/remote-read-fault", "ivy", {"ranks": 2}), ("dsm/remote-read-fault", "rc", {"ranks": 2}),
    ("dsm/write-fault", "ivy", {"ranks": 2}), ("dsm/diff", "rc", {"ranks": 2}),
    ("dsm/page-pingpong", "mpi", {"ranks": 2}),
]
for k in ("daxpy", "stream", "matmul", "matvec", "jacobi"):
    for nr in (1, 2, 4):
        for mech in ("mpi", "ivy", "rc"):
            EXPECTED.append(("dsm/kernel-time", mech, {"kernel": k, "ranks": nr}))
# compressed paging beside zram (a zram figure null with its reason where zram
# cannot be set up), guard pages against explicit checks, lazy structures
for d in ("kv", "python", "doc"):
    for mech in ("lz4", "zstd", "uncompressed", "lz4-thread", "zram"):
        for exp in ("zpage/fault-in-p50", "zpage/fault-in-p99"):
            EXPECTED.append((exp, mech, {"data": d}))
    for mech in ("lz4", "zstd", "zram"):
        EXPECTED.append(("zpage/ratio", mech, {"data": d}))
    EXPECTED.append(("zpage/fault-in-p50-over-uncompressed", "lz4", {"data": d}))
for b in ("100%", "50%", "25%"):
    for mech in ("lz4", "zram"):
        EXPECTED.append(("zpage/zipf-throughput", mech, {"budget": b}))
    EXPECTED.append(("zpage/zipf-throughput-over-zram", "lz4", {"budget": b}))
EXPECTED.append(("zpage/zipf-throughput", "unlimited", {"budget": "none"}))
for kib in (64, 1024):
    for work in (0, 48):
        for mech in ("guard-page", "explicit-check", "no-check"):
            EXPECTED.append(("guard/arena", mech, {"nursery_kib": kib, "work": work}))
        EXPECTED.append(("guard/arena-over-explicit-check", "guard-page",
                         {"nursery_kib": kib, "work": work}))
for mech in ("guard-page", "explicit-check"):
    EXPECTED.append(("guard/sandbox-kernel", mech, {}))
EXPECTED.append(("guard/sandbox-kernel-over-explicit-check", "guard-page", {}))
for mech in ("mprotect", "madv-guard", "uffd"):
    for op in ("create", "reset"):
        for t in (1, 2):
            EXPECTED.append(("guard/sandbox-create", mech, {"threads": t, "op": op}))
        EXPECTED.append(("guard/sandbox-create-scaling", mech, {"op": op}))
for st in ("array", "stack"):
    EXPECTED.append(("lazy/materialise", "explicit-check", {"structure": st}))
    backends = ("posix", "uffd-sigbus", "uffd-thread") + (("uffd-missing",) if st == "array"
                                                           else ())
    for be in backends:
        EXPECTED.append(("lazy/materialise", "trap", {"structure": st, "backend": be}))
        EXPECTED.append(("lazy/materialise-over-explicit-check", "trap",
                         {"structure": st, "backend": be}))
for st in ("full", "full-beside-empty", "empty"):
    EXPECTED.append(("lazy/future-read", "explicit-check", {"state": st}))
    EXPECTED.append(("lazy/future-read-over-explicit-check", "trap", {"state": st}))
EXPECTED.append(("lazy/future-read", "trap", {"state": "full"}))
EXPECTED.append(("lazy/future-read", "trap", {"state": "full-beside-empty", "backend": "posix"}))
for be in ("posix", "uffd-sigbus", "uffd-thread"):
    EXPECTED.append(("lazy/future-read", "trap", {"state": "empty", "backend": be}))
for mech in ("unprotected", "sigprocmask", "rt-sigprocmask", "aseq-sigprocmask", "flag", "cas",
             "dyn-jump", "dyn-fault", "hyb-jump"):
    for test in ("null", "lifo", "fifo"):
        EXPECTED.append((f"mosberger/{test}", mech, {}))
for mech in ("posix", "trapkit-posix", "uffd-sigbus", "uffd-thread", "pkeys"):
    for exp in ("appel-li/trap", "appel-li/trap+prot1+unprot", "appel-li/trap+protn+unprot"):
        EXPECTED.append((exp, mech, {}))
    for t in (1, 2, 4):
        EXPECTED.append(("threads/trap+prot1+unprot", mech, {"threads": t}))
    EXPECTED.append(("appel-li/figure2", mech, {"benchmark": "prot1"}))
for mech in ("posix", "trapkit-posix", "uffd-sigbus", "uffd-thread", "pagemap-scan", "soft-dirty"):
    for frac in (0.01, 0.1, 1.0):
        EXPECTED.append(("dirty/per-page", mech, {"fraction": frac}))
for mech in ("trapkit-posix", "uffd-sigbus"):
    for how in ("retry", "single-step", "emulate"):
        EXPECTED.append(("dirty/write-completion", mech, {"completion": how, "fraction": 0.1}))
for mech in ("traditional", "append", "prepend"):
    for wl in ("qsort", "map", "jacobi", "matmul", "hashtab"):
        for n in (16, 64):
            for exp in ("jaleel-jacob/cpi", "jaleel-jacob/tlb-misses", "jaleel-jacob/flushed-per-miss",
                        "jaleel-jacob/inlined-fraction"):
                EXPECTED.append((exp, mech, {"workload": wl, "tlb_entries": n}))
for mech in ("posix", "trapkit-posix", "uffd-sigbus", "uffd-thread"):
    for pages in (1, 10, 100, 1000, 10000):
        for populated in (True, False):
            for t in (1, 2):
                EXPECTED.append(("scale/prot1+unprot", mech,
                                 {"pages": pages, "populated": populated, "threads": t}))
# the region lock with and without its signal deferral, and their paired ratio and difference
for mech in ("trapkit-posix", "uffd-sigbus", "uffd-thread", "pagemap-scan", "soft-dirty", "pkeys"):
    for exp in ("lock/tk-protect", "lock/fault+unprot"):
        for lock in ("plain", "deferred"):
            EXPECTED.append((exp, mech, {"lock": lock}))
    for op in ("tk-protect", "fault+unprot"):
        EXPECTED.append(("lock/deferred-over-plain", mech, {"operation": op}))
        EXPECTED.append(("lock/deferral-cost", mech, {"operation": op}))
for exc in ("int3", "ud2"):
    EXPECTED.append(("thekkath-levy/round-trip-ratio", "fast-signal",
                     {"exception": exc, "versus": "posix"}))
for exp, mech, params in EXPECTED:
    if expected_here(exp) and not has(exp, mech, **params):
        err(f"missing figure: {exp} {mech or ''} {params or ''}")
# the checkpoint benchmark runs the probe's best trapkit mechanism beside
# fork and redis-server, each latency figure over its repetitions
if expected_here("checkpoint/p99.9-during-snapshot") and \
        not any(has("checkpoint/p99.9-during-snapshot", m, command="set")
                for m in ("uffd-sigbus", "uffd-thread", "posix")):
    err("missing figure: checkpoint/p99.9-during-snapshot of a trapkit mechanism")
for r in results:
    if r["experiment"] == "checkpoint/p99.9-during-snapshot" and r.get("median") is not None \
            and r.get("n", 0) < 3:
        err(f"checkpoint/p99.9-during-snapshot {r['mechanism']}: n={r.get('n')}, not 3 runs")
# and keeps one run's latency timeline per system, plotted with the BGSAVE shaded
tl = [r for r in results if r["experiment"] == "checkpoint/snapshot-duration" and r.get("timeline")]
if expected_here("checkpoint/snapshot-duration"):
    if not tl or not all(set(r["timeline"]) >= {"interval_s", "snapshot_s", "max_us", "p99_us"}
                         for r in tl):
        err("checkpoint/snapshot-duration carries no latency timeline")
    elif not any(f.startswith("checkpoint-timeline-") for f in os.listdir(out)):
        err("no checkpoint-timeline-*.png plot")

# never more busy threads than CPUs (a figure above the count is null with the reason)
ncpus = machine.get("ncpus") or 1
for r in results:
    t = r.get("params", {}).get("threads")
    if isinstance(t, int) and t > ncpus and r.get("median") is not None and not r.get("note"):
        err(f"{r['experiment']} {r['mechanism']}: measured with {t} threads on {ncpus} CPUs")
# derived figures say so; the seeds' figures are never rows for this machine
for r in results:
    if r["experiment"].startswith("analysis/") and r.get("derived") is not True:
        err(f"{r['experiment']} {r['mechanism']}: a derived figure without \"derived\": true")
    if r.get("derived") is True and not r.get("derived_from"):
        err(f"{r['experiment']} {r['mechanism']}: derived without derived_from")
    if r["experiment"] in ("lock/deferred-over-plain", "lock/deferral-cost") and \
            r.get("derived") is not True:
        err(f"{r['experiment']} {r['mechanism']}: a paired lock figure without \"derived\": true")
if has("analysis/heap-overflow-overhead", "cpu", detection="check"):
    err("analysis/heap-overflow-overhead has the seed's 4% check as a row for this CPU")

goals = doc.get("goals", [])
# 13, and the collector's where its chosen configuration's ratios to bdwgc
# were measured (the configuration bench/analysis.py gc_goals names): two at
# GCBench's standard size (what --quick measures), two with the 1 GiB live
# heap, and two for each other workload (max pause against bdwgc
# incremental's, total time against bdwgc's)
gc_mechs = ("trapkit-pagemap-scan", "trapkit-uffd-sigbus", "trapkit-posix")


def gc_ratio(exp, mech, workload, heap):
    return any(r["experiment"] == exp and r["mechanism"] == mech
               and r["params"].get("workload") == workload and r["params"].get("heap_mib") == heap
               and r.get("median") is not None for r in results)


gc_cands = [r for r in results if r["experiment"] == "gc/world-stopped-over-bdwgc-incremental"
            and r["mechanism"] in gc_mechs and r["params"].get("workload") == "gcbench"
            and r["params"].get("heap_mib") == 0 and r.get("median") is not None]
expected = 13
if gc_cands:
    # the configuration the goals name (bench/analysis.py gc_goals chooses it)
    named = [m.group(1) for g in goals if g.get("goal", "").startswith("gc: ")
             for m in [re.search(r"\((trapkit-[a-z-]+), mostly-concurrent", g.get("measured", ""))]
             if m]
    gc_mech = named[0] if named else min(gc_cands, key=lambda r: r["median"])["mechanism"]
    expected += sum(gc_ratio(exp, gc_mech, w, heap) for exp, w, heap in (
        ("gc/total-time-over-bdwgc", "gcbench", 0),
        ("gc/world-stopped-over-bdwgc-incremental", "gcbench", 0),
        ("gc/world-stopped-over-bdwgc", "gcbench", 1024),
        ("gc/total-time-over-bdwgc", "gcbench", 1024),
        ("gc/world-stopped-over-bdwgc-incremental", "lisp", 0),
        ("gc/total-time-over-bdwgc", "lisp", 0),
        ("gc/world-stopped-over-bdwgc-incremental", "trees", 0),
        ("gc/total-time-over-bdwgc", "trees", 0),
        ("gc/world-stopped-over-bdwgc-incremental", "interp", 0),
        ("gc/total-time-over-bdwgc", "interp", 0)))
    # the quick report runs the other workloads too, where bdwgc is built
    if any(r["experiment"] == "gc/total-time" and r["mechanism"] == "bdwgc" for r in results):
        for w in ("lisp", "trees", "interp"):
            if not any(r["experiment"] == "gc/total-time" and r["params"].get("workload") == w
                       for r in results):
                err(f"no gc/total-time rows for the {w} workload")
# the persistent heap's four (random reads, durable commits, cold open, lost
# commits) where its benchmark ran
if any(r["experiment"].startswith("pheap/") for r in results):
    expected += 4
# the shared virtual memory's three (a remote read fault against a
# ping-pong; the kernels against MPI with each protocol) where it ran
if any(r["experiment"].startswith("dsm/") for r in results):
    expected += 3
# compressed paging's four (fault-in against uncompressed and against zram,
# the compression ratio against zram's, Zipfian throughput at a 50% budget
# against zram's), each not decided with the reason where zram was not measured
if any(r["experiment"].startswith("zpage/") for r in results):
    expected += 4
    for g in goals:
        if g.get("goal", "").startswith("zpage") and "not measured" in g.get("measured", "") \
                and g.get("status") == "met":
            err(f"goal {g['goal']!r} is met though a figure was not measured")
# the kernel's fast exception path's, where `make kernel-test` measured it
# (bench/report.py reads build-kernel/fastexc-results.jsonl)
if any(r["experiment"] == "thekkath-levy/kernel-round-trip" and r["mechanism"] == "fast-kernel"
       for r in results):
    expected += 1
# and the C++ module's (build-kernel/cxx-results.jsonl)
if {"tkcxx", "tkcxx-unoptimised"} <= {r["mechanism"] for r in results
                                      if r["experiment"] == "gylfason/kernel-throw-int"}:
    expected += 1
if only is None and len(goals) != expected:
    err(f"expected {expected} goals, found {len(goals)}: {[g.get('goal') for g in goals]}")
for g in goals:
    if not {"goal", "measured", "met", "ratio", "status"} <= set(g):
        err(f"goal without goal/measured/met/ratio/status: {g}")
    elif g["status"] not in ("met", "not met", "not decided"):
        err(f"goal status {g['status']!r} is not met, not met or not decided")

for f in ("index.html",):
    if not os.path.exists(os.path.join(out, f)):
        err(f"no {f}")
page = open(os.path.join(out, "index.html")).read()
for title in ("Appel &amp; Li Table 1", "Thekkath &amp; Levy Table 2", "Thekkath &amp; Levy Table 5",
              "Mosberger, Druschel &amp; Peterson Table 1"):
    if only is None and title not in page:
        err(f"index.html lacks the seeds' table {title!r}")
docs = os.path.join(out, "results.md")
if not os.path.exists(docs) or "## Goals" not in open(docs).read():
    err("results.md missing or without its Goals section")
else:
    md = open(docs).read()
    if "not decided" not in md:
        err("results.md does not state how goals are decided")
    if "(derived)" not in md:
        err("results.md marks no figure as derived")
    if expected_here("lock/deferred-over-plain") and (
            not re.search(r"^### lock/deferred-over-plain$", md, re.M)
            or "signal handler re-entering trapkit" not in md):
        err("results.md lacks the region lock's section (its rows and what they mean)")
    # every figure with repetitions shows [min, max]: the NULL test's rows
    row = re.search(r"^### mosberger/null\n\n(?:.*\n){2}(\|.*)$", md, re.M)
    if expected_here("mosberger/null") and (
            not row or not re.search(r"\[[^]]+, [^]]+\]", row.group(1))):
        err("results.md does not show [min, max] beside the medians (mosberger/null)")

# Run with kernel features hidden (TRAPKIT_PROBE_MASK, as on Linux 6.1): the
# report says so, and the mechanism missing there is n/a with its reason.
mask = os.environ.get("TRAPKIT_PROBE_MASK")
if mask:
    if machine.get("probe_mask") != mask:
        err(f"results.json's machine has probe_mask {machine.get('probe_mask')!r}, not {mask!r}")
    md = open(docs).read() if os.path.exists(docs) else ""
    if f"TRAPKIT_PROBE_MASK={mask}" not in md:
        err("results.md does not say which kernel features were hidden")
    if "pagemap_scan" in mask or "wp_async" in mask:
        for r in results:
            if r.get("mechanism") == "pagemap-scan" and r.get("median") is not None:
                err(f"{r['experiment']} has a pagemap-scan figure though the probe hides it")
                break
        if "UFFD_FEATURE_WP_ASYNC (Linux 6.7) is missing" not in md and \
                "PAGEMAP_SCAN ioctl (Linux 6.7) is missing" not in md:
            err("results.md does not say why pagemap-scan is n/a")

# index.html in headless Chromium: every table rendered, every image loaded
chromium = shutil.which("chromium") or shutil.which("chromium-browser")
if not chromium:
    err("chromium is not installed (scripts/install-deps.sh installs it)")
else:
    with tempfile.TemporaryDirectory() as ud:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
               "--no-first-run", "--disable-background-networking", "--disable-component-update",
               "--disable-sync", f"--user-data-dir={ud}", "--virtual-time-budget=5000",
               "--dump-dom", "file://" + os.path.abspath(os.path.join(out, "index.html"))]
        dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    body = re.search(r"<body([^>]*)>", dom)
    attrs = dict(re.findall(r'(data-[a-z-]+)="(\d+)"', body.group(1))) if body else {}
    images, loaded = int(attrs.get("data-images", -1)), int(attrs.get("data-images-loaded", -1))
    tables = int(attrs.get("data-tables", -1))
    html_tables = open(os.path.join(out, "index.html")).read().count("<table")
    if images < (7 if only is None else 1):
        err(f"index.html shows {images} images in Chromium, expected "
            + ("the 7 plots" if only is None else "a plot"))
    if loaded != images:
        err(f"only {loaded} of {images} images loaded in Chromium")
    if tables < 10 or tables != html_tables:
        err(f"Chromium rendered {tables} tables, the file has {html_tables}")
    print(f"chromium: {tables} tables, {loaded}/{images} images loaded")

print(f"report check: {len(results)} results, {len(errors)} problems")
sys.exit(1 if errors else 0)
