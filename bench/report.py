#!/usr/bin/env python3
"""trapkit report: run the benchmarks, then write report/results.json,
report/index.html (tables and plots) and docs/results.md.

Run through `trapkit report [--quick]` or `make report`; `--quick` runs every
experiment briefly (the tests use it).  Results follow shared
BENCHMARKING.md: one object per figure with experiment, mechanism, params,
metric, unit, median, min, max, n, and a reason where a figure could not be
measured here.
"""
import argparse
import datetime
import html
import json
import os
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import analysis  # noqa: E402  (bench/analysis.py: derived figures and goals)

BENCHES = [
    ("appel_li", "Appel & Li Table 1 and threads/trap+prot1+unprot"),
    ("thekkath_levy", "Thekkath & Levy Tables 1-2: exception delivery and return"),
    ("fast", "fast paths: sub-page delivery and completion, eager amplification"),
    ("checkpoint", "checkpoint: kv-server's BGSAVE (trapkit's best mechanism and fork) and "
                   "redis-server's, under open-loop load (tk-loadgen)"),
    ("restore", "restore: kv-server restarted from its image, lazily and eagerly, beside "
                "redis-server loading its RDB; image sizes"),
    ("scale", "scale/prot1+unprot from 1 to 1,000,000 protected pages, populated and untouched, "
              "1 and 2 threads"),
    ("dirty", "dirty/per-page with 1%, 10% and 100% of the region dirtied"),
    ("lock", "lock: tk_protect and a fault round trip with the region lock deferring signals "
             "and without"),
    ("mosberger", "Mosberger, Druschel & Peterson Table 1: atomic sequences against signal "
                  "handlers"),
    ("gylfason", "Gylfason & Hjalmtysson: C++ throws through 1-20 frames, dynamic_cast, "
                 "system-call errors"),
    ("jaleel_jacob", "Jaleel & Jacob Figures 3-5 on tksim: TLB misses taken traditionally, "
                     "appended, prepended"),
    ("pheap", "the persistent heap (examples/pheap-kv's B+tree) beside LMDB: reads, one-put "
              "durable commits, cold open, kill -9 trials"),
    ("gc", "garbage collection: GCBench, Thekkath & Levy's Lisp, array and tree workloads and a "
           "Scheme interpreter on trapkit's collector (each write barrier) and bdwgc"),
    ("dsm", "shared virtual memory on Open MPI: ArgoDSM's kernels on the ivy and rc protocols "
            "beside plain MPI at 1, 2 and 4 ranks; a remote fault beside an MPI ping-pong"),
    ("zpage", "compressed paging (trapkit/zpage.h) beside zram swap: fault-in latency and "
              "compression ratio on three data sets, a Zipfian key-value workload under budgets"),
    ("guard", "guard pages (trapkit/guard.h) against compare-and-branch: a bump allocator's "
              "overflow check, a sandbox kernel's bounds checks; sandboxes created and reset"),
    ("lazy", "lazy structures (trapkit/lazy.h): arrays and stacks materialised on first touch, "
             "futures read, by trap and by explicit check"),
]

MECH_ORDER = ["cpu", "posix", "trapkit-posix", "fast-signal", "uffd-sigbus", "uffd-thread",
              "pagemap-scan", "soft-dirty", "pkeys", "fork", "stop-the-world", "precopy", "redis-fork",
              "trapkit", "unprotected", "sigprocmask", "rt-sigprocmask", "aseq-sigprocmask",
              "flag", "cas", "rseq", "dyn-jump", "dyn-fault", "hyb-jump", "at-once", "libgcc",
              "llvm-libunwind", "error-code", "traditional", "append", "prepend", "perfect-tlb",
              "tksim", "bdwgc", "bdwgc-incremental", "trapkit-pagemap-scan", "trapkit-uffd-sigbus",
              "trapkit-posix", "trapkit-eager", "trapkit-lazy", "lmdb", "lmdb-writemap", "mpi", "ivy",
              "rc", "uncompressed", "lz4", "lz4-thread", "bare-sigbus", "bare-sigbus-lz4", "zstd", "zram", "unlimited", "guard-page",
              "trap", "explicit-check", "no-check", "mprotect", "madv-guard", "uffd"]


def log(msg):
    print(msg, flush=True)


def run_bench(exe, quick, label):
    """Runs one benchmark, echoing its progress; returns the results it
    printed (all of them, or those before it failed) and its exit status."""
    cmd = [exe] + (["--quick"] if quick else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def echo():
        for line in proc.stderr:
            print(f"    {label}| {line.rstrip()}", flush=True)

    t = threading.Thread(target=echo, daemon=True)
    t.start()
    out = proc.stdout.read()
    proc.wait()
    t.join()
    results = []
    for line in out.splitlines():
        line = line.strip()
        if line:
            results.append(json.loads(line))
    return results, proc.returncode


def probe(trapkit):
    out = subprocess.run([trapkit, "probe", "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


# ---------------------------------------------------------------- formatting
def fmt_ns(v):
    if v is None:
        return "–"
    if v < 0:  # a difference of two figures
        return "-" + fmt_ns(-v)
    if v >= 1e9:
        return f"{v / 1e9:.3g} s"
    if v >= 1e6:
        return f"{v / 1e6:.3g} ms"
    if v >= 1e3:
        return f"{v / 1e3:.3g} µs"
    return f"{v:.3g} ns"


def fmt_num(v, unit):
    if v is None:
        return "–"
    if unit == "ns":
        return fmt_ns(v)
    if unit == "bool":
        return "yes" if v else "no"
    if unit == "bytes":
        for div, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if v >= div:
                return f"{v / div:.3g} {suffix}"
        return f"{int(v)} B"
    if unit in ("ops_per_s", "ops/s"):
        return f"{v:,.0f}/s"
    if unit in ("ratio", "adds", "x"):
        return f"{v:.3g}"
    return f"{v:.4g} {unit}"


def fmt_value(r):
    if r.get("median") is None:
        return None
    return fmt_num(r["median"], r["unit"])


def has_range(r):
    """Whether a figure has a spread to show: repetitions with a min and max."""
    return (r.get("median") is not None and r.get("n", 0) > 1 and r.get("min") is not None
            and r.get("max") is not None)


def fmt_range(r):
    """"[min, max]" in the figure's unit (numbers only for bare units)."""
    return f"[{fmt_num(r['min'], r['unit'])}, {fmt_num(r['max'], r['unit'])}]"


def table_notes(cells):
    """What a table's cells say beside their value: the reasons of the n/a
    cells, which figures are derived (and from what), and notes.  Returns
    (reasons, derived, notes), each a sorted list of (text, mechanisms)."""
    def grouped(pairs):
        by = {}
        for text, mech in pairs:
            by.setdefault(text, [])
            if mech not in by[text]:
                by[text].append(mech)
        return sorted(by.items())
    reasons = grouped((c.get("reason") or "", c["mechanism"]) for c in cells
                      if c.get("median") is None)
    derived = grouped((", ".join(c.get("derived_from") or []) or "other figures", c["mechanism"])
                      for c in cells if c.get("derived") and c.get("median") is not None)
    notes = grouped((c["note"], c["mechanism"]) for c in cells
                    if c.get("note") and c.get("median") is not None)
    return reasons, derived, notes


def params_key(p):
    return json.dumps(p, sort_keys=True)


def params_text(p):
    if not p:
        return ""
    return ", ".join(f"{k}={json.dumps(v) if isinstance(v, bool) else v}" for k, v in p.items())


def mech_sort(m):
    return (MECH_ORDER.index(m) if m in MECH_ORDER else len(MECH_ORDER), m)


def experiment_table(results, exp):
    """Rows = params, columns = mechanisms."""
    rs = [r for r in results if r["experiment"] == exp]
    mechs = sorted({r["mechanism"] for r in rs}, key=mech_sort)
    rows = []
    seen = []
    for r in rs:
        k = params_key(r["params"])
        if k not in seen:
            seen.append(k)
    for k in seen:
        cells = []
        for m in mechs:
            hit = [r for r in rs if r["mechanism"] == m and params_key(r["params"]) == k]
            cells.append(hit[0] if hit else None)
        rows.append((json.loads(k), cells))
    return mechs, rows


def html_table(results, exp):
    mechs, rows = experiment_table(results, exp)
    out = ["<table>", "<tr><th>params</th>" + "".join(f"<th>{html.escape(m)}</th>" for m in mechs)
           + "</tr>"]
    for params, cells in rows:
        tds = []
        for c in cells:
            if c is None:
                tds.append("<td></td>")
            elif c.get("median") is None:
                tds.append(f"<td class='na' title='{html.escape(c.get('reason', ''))}'>n/a</td>")
            else:
                rng = f"<br><small>{html.escape(fmt_range(c))}</small>" if has_range(c) else ""
                mark = " <small class='derived'>(derived)</small>" if c.get("derived") else ""
                tds.append(f"<td>{html.escape(fmt_value(c))}{mark}{rng}</td>")
        out.append(f"<tr><td>{html.escape(params_text(params))}</td>{''.join(tds)}</tr>")
    out.append("</table>")
    cells = [c for _, cs in rows for c in cs if c is not None]
    reasons, derived, notes = table_notes(cells)
    items = [f"<li>derived for <b>{html.escape(', '.join(ms))}</b>: computed from "
             f"{html.escape(t)}, not measured</li>" for t, ms in derived]
    items += [f"<li>note for <b>{html.escape(', '.join(ms))}</b>: {html.escape(t)}</li>"
              for t, ms in notes]
    items += [f"<li>n/a for <b>{html.escape(', '.join(ms))}</b>: {html.escape(t)}</li>"
              for t, ms in reasons]
    if items:
        out.append("<ul class='reasons'>" + "".join(items) + "</ul>")
    return "\n".join(out)


def md_table(results, exp):
    """Rows = params, columns = mechanisms; each figure with repetitions as
    median [min, max]; derived figures marked (derived)."""
    mechs, rows = experiment_table(results, exp)
    out = ["| params | " + " | ".join(mechs) + " |", "|---" * (len(mechs) + 1) + "|"]
    for params, cells in rows:
        vals = []
        for c in cells:
            if c is None:
                vals.append("")
            elif c.get("median") is None:
                vals.append("n/a")
            else:
                v = fmt_value(c)
                if has_range(c):
                    v += " " + fmt_range(c)
                if c.get("derived"):
                    v += " (derived)"
                vals.append(v)
        out.append(f"| {params_text(params)} | " + " | ".join(vals) + " |")
    cells = [c for _, cs in rows for c in cs if c is not None]
    reasons, derived, notes = table_notes(cells)
    lines = [f"- derived for {', '.join(ms)}: computed from {t}, not measured"
             for t, ms in derived]
    lines += [f"- note for {', '.join(ms)}: {t}" for t, ms in notes]
    lines += [f"- n/a for {', '.join(ms)}: {t}" for t, ms in reasons]
    if lines:
        out.append("")
        out += lines
    return "\n".join(out)


# ---------------------------------------------------------------- plots
def checkpoint_plots(results, outdir):
    """Latency over time through one BGSAVE per system (bench/checkpoint.py
    keeps one run's per-interval records with checkpoint/snapshot-duration),
    one figure per size at 50% load (or the load nearest it)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results if r["experiment"] == "checkpoint/snapshot-duration"
            and r.get("timeline")]
    plots = []
    for size in sorted({r["params"]["size_gib"] for r in rows}):
        loads = sorted({r["params"]["offered_load"] for r in rows
                        if r["params"]["size_gib"] == size})
        load = min(loads, key=lambda x: abs(x - 0.5))
        sel = sorted([r for r in rows if r["params"]["size_gib"] == size
                      and r["params"]["offered_load"] == load],
                     key=lambda r: mech_sort(r["mechanism"]))
        fig, axes = plt.subplots(len(sel), 1, figsize=(10, 2.3 * len(sel) + 0.6), sharey=True,
                                 squeeze=False)
        rate = sel[0]["timeline"].get("rate", 0)
        for ax, r in zip(axes[:, 0], sel):
            tl = r["timeline"]
            w = tl["interval_s"]
            t = [i * w for i in range(len(tl["max_us"]))]
            ax.axvspan(tl["snapshot_s"][0], tl["snapshot_s"][1], color="tab:orange", alpha=0.15,
                       label="BGSAVE")
            ax.plot(t, [max(v, 1) / 1e3 for v in tl["max_us"]], lw=0.8, color="tab:red",
                    label="max per 100 ms")
            ax.plot(t, [max(v, 1) / 1e3 for v in tl["p99_us"]], lw=0.8, color="tab:blue",
                    label="p99 per 100 ms")
            ax.set_yscale("log")
            ax.set_ylabel("latency (ms)")
            ax.set_title(f"{r['mechanism']}, round {tl.get('round', '?')}: BGSAVE "
                         f"{tl['snapshot_s'][1] - tl['snapshot_s'][0]:.1f} s (median of the "
                         f"rounds {r['median'] / 1e9:.1f} s)", fontsize=9)
            ax.legend(fontsize=7, loc="upper right")
        axes[-1, 0].set_xlabel("seconds from the start of the steady phase")
        fig.suptitle(f"Latency through a BGSAVE: {size:g} GiB, open loop at {rate:,.0f} "
                     f"requests/s ({load:.0%} of the slower system's capacity)", fontsize=10)
        fig.tight_layout()
        fname = f"checkpoint-timeline-{size:g}gib.png"
        fig.savefig(os.path.join(outdir, fname), dpi=100)
        plt.close(fig)
        plots.append((fname, f"Checkpointing {size:g} GiB under open-loop load ({rate:,.0f} "
                      "requests/s, the same for every system): the max and p99 latency of the "
                      "requests scheduled in each 100 ms, counted from their scheduled send time, "
                      "in one run per system (the round whose SET p99.9 during the snapshot is "
                      "the median); the shaded band is the BGSAVE, from the command until INFO "
                      "reports it complete. Log scale."))
    return plots


def gc_plots(results, outdir):
    """The allocation gaps by length (bench/gc.py's gc/pause-distribution),
    a panel per workload and heap, a line per system."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results if r["experiment"] == "gc/pause-distribution" and r.get("counts")]
    keys = sorted({(r["params"]["workload"], r["params"]["heap_mib"]) for r in rows},
                  key=lambda k: (k[0] != "gcbench", k))
    if not keys:
        return []
    fig, axes = plt.subplots(1, len(keys), figsize=(4.2 * len(keys), 4), squeeze=False,
                             sharey=True)
    for ax, (w, heap) in zip(axes[0], keys):
        for r in sorted([r for r in rows if r["params"]["workload"] == w
                         and r["params"]["heap_mib"] == heap],
                        key=lambda r: mech_sort(r["mechanism"])):
            edges, counts = r["edges_ms"], r["counts"]
            # pauses at least as long as each edge: a survival curve
            longer = [sum(counts[i:]) for i in range(len(edges))]
            style = "--" if r["mechanism"].startswith("bdwgc") else "-"
            ax.step(edges, [c if c else float("nan") for c in longer], style, where="post",
                    label=r["mechanism"], lw=1)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("pause at least (ms)")
        ax.set_title(f"{w}" + (f", {heap} MiB live" if heap else ""), fontsize=9)
    axes[0][0].set_ylabel("pauses, all rounds")
    axes[0][-1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fname = "gc-pauses.png"
    fig.savefig(os.path.join(outdir, fname), dpi=100)
    plt.close(fig)
    return [(fname, "Garbage collection: how many allocation gaps (the time from one "
             "allocation's return to the next one's, over 20 µs: the collector's work, the world "
             "stopped, and the machine's own stalls) were at least each length, every round "
             "together, per system and workload. Log scales; bdwgc dashed.")]


def grouped_range_bars(ax, groups, series, fig, scale=1.0):
    """One group of bars per group label, one bar per series label, each the
    median of fig(group, series) (a result or None) with its [min, max] as
    an error bar; an n/a figure leaves its bar out, marked n/a, and a series
    with no figure in any group is left out of the legend (its colour kept,
    the same series' in each panel)."""
    w = 0.8 / max(1, len(series))
    for j, label in enumerate(series):
        xs, ys, lo, hi, seen = [], [], [], [], False
        for i, g in enumerate(groups):
            r = fig(g, label)
            x = i + (j - (len(series) - 1) / 2) * w
            if r is None:
                continue
            seen = True
            if r.get("median") is None:
                ax.text(x, 0.02, "n/a", ha="center", va="bottom", fontsize=6, rotation=90,
                        transform=ax.get_xaxis_transform())
                continue
            m = r["median"] * scale
            xs.append(x)
            ys.append(m)
            lo.append(m - (r["min"] if r.get("min") is not None else r["median"]) * scale)
            hi.append((r["max"] if r.get("max") is not None else r["median"]) * scale - m)
        if xs:
            ax.bar(xs, ys, w, yerr=[lo, hi], capsize=2, color=f"C{j}", label=label)
        elif seen:  # every figure n/a: its colour in the legend, no bar
            ax.bar([float("nan")], [float("nan")], w, color=f"C{j}", label=f"{label} (n/a)")
    ax.set_xticks(range(len(groups)))


def zpage_plots(results, outdir):
    """Compressed paging: fault-in p50 (with p99) and compression ratio per
    data set, Zipfian throughput per budget."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not any(r["experiment"].startswith("zpage/") for r in results):
        return []
    data = [d for d in ("kv", "python", "doc") if any(
        r["experiment"] == "zpage/fault-in-p50" and r["params"].get("data") == d
        for r in results)]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.2))
    ax = axes[0]
    mechs = ["bare-sigbus", "uncompressed", "bare-sigbus-lz4", "lz4", "lz4-thread", "zstd", "zram"]
    grouped_range_bars(ax, data, mechs,
                       lambda d, m: analysis.find(results, "zpage/fault-in-p50", m, data=d), 1e-3)
    w = 0.8 / len(mechs)
    for j, m in enumerate(mechs):
        pts = [(i + (j - (len(mechs) - 1) / 2) * w,
                analysis.find(results, "zpage/fault-in-p99", m, data=d))
               for i, d in enumerate(data)]
        pts = [(x, r["median"] / 1e3) for x, r in pts if r and r.get("median") is not None]
        ax.plot([x for x, _ in pts], [v for _, v in pts], "k_", markersize=8,
                label="p99" if j == 0 else None)
    ax.set_xticklabels(data)
    ax.set_ylabel("µs per page fault-in (bar p50, - p99)")
    ax.set_title("fault-in, pages touched in random order", fontsize=10)
    ax.legend(fontsize=7)
    ax = axes[1]
    grouped_range_bars(ax, data, ["lz4", "zstd", "zram"],
                       lambda d, m: analysis.find(results, "zpage/ratio", m, data=d))
    ax.set_xticklabels(data)
    ax.set_ylabel("bytes over compressed bytes")
    ax.set_title("compression ratio", fontsize=10)
    ax.legend(fontsize=7)
    ax = axes[2]
    budgets = ["100%", "50%", "25%"]
    grouped_range_bars(ax, budgets, ["lz4", "zram"],
                       lambda b, m: analysis.find(results, "zpage/zipf-throughput", m, budget=b),
                       1e-6)
    un = analysis.find(results, "zpage/zipf-throughput", "unlimited")
    if un and un.get("median") is not None:
        ax.axhline(un["median"] / 1e6, color="black", linewidth=0.8, linestyle="--",
                   label="unlimited (plain memory)")
    ax.set_yscale("log")
    ax.set_xticklabels([f"budget {b}" for b in budgets])
    ax.set_ylabel("million operations/s (log)")
    ax.set_title("Zipfian reads and writes of 256-byte records", fontsize=10)
    ax.legend(fontsize=7)
    fig.suptitle("Compressed paging (trapkit/zpage.h) beside zram swap")
    fig.tight_layout()
    fname = "zpage.png"
    fig.savefig(os.path.join(outdir, fname), dpi=100)
    plt.close(fig)
    return [(fname, "Compressed paging beside zram: the median fault-in of a page (bars, with "
             "[min, max] of the repetitions; the dash is the p99) and the compression ratio on "
             "each data set, and Zipfian throughput with the heap under a budget of 100%, 50% "
             "and 25% of its size (log scale; dashed: plain memory, no limit); zpage's lz4 is "
             "the pager with faults served in the faulting thread, uncompressed the same path "
             "serving a plain copy; bare-sigbus and bare-sigbus-lz4 the floor of a fault path "
             "through a signal, without the library")]


def guard_plots(results, outdir):
    """Guard pages: time over the explicit check's (arena, sandbox kernel),
    and sandboxes created and reset per second by path and thread count."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not any(r["experiment"].startswith("guard/") for r in results):
        return []
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [3, 2]})
    cfgs = [r["params"] for r in results if r["experiment"] == "guard/arena-over-explicit-check"
            and r["mechanism"] == "guard-page"]
    groups = [("guard/arena-over-explicit-check", p) for p in cfgs]
    groups += [("guard/sandbox-kernel-over-explicit-check", r["params"]) for r in results
               if r["experiment"] == "guard/sandbox-kernel-over-explicit-check"
               and r["mechanism"] == "guard-page"]
    grouped_range_bars(ax, groups, ["guard-page", "no-check"],
                       lambda g, m: analysis.find(results, g[0], m, **g[1]))
    ax.set_xticklabels([f"arena {p['nursery_kib']} KiB\nwork {p['work']}" if "arena" in e
                        else f"sandbox kernel\nn={p.get('n')}" for e, p in groups], fontsize=8)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(1 / 2.09, color="tab:red", linewidth=0.8, linestyle="--",
               label="Wasmtime, published: guard pages 2.09× faster")
    ax.set_ylabel("time over explicit-check's")
    ax.set_title("guard page against compare-and-branch (below 1: faster)", fontsize=10)
    ax.legend(fontsize=7)
    keys = [(op, t) for op in ("create", "reset") for t in (1, 2)]
    grouped_range_bars(bx, keys, ["mprotect", "madv-guard", "uffd"],
                       lambda k, m: analysis.find(results, "guard/sandbox-create", m, op=k[0],
                                                  threads=k[1]), 1e-3)
    bx.set_xticklabels([f"{op}\n{t} thread{'s' if t > 1 else ''}" for op, t in keys], fontsize=8)
    bx.set_ylabel("thousand sandboxes/s, all threads")
    bx.set_title("sandboxes created and reset per second", fontsize=10)
    bx.legend(fontsize=7)
    fig.suptitle("Guard pages (trapkit/guard.h)")
    fig.tight_layout()
    fname = "guard.png"
    fig.savefig(os.path.join(outdir, fname), dpi=100)
    plt.close(fig)
    return [(fname, "Guard pages: the bump allocator (by nursery size and the work between "
             "allocations) and the sandbox kernel, time over the explicit check's, with the "
             "hoisted no-check loop as the bound (the dashed line is Wasmtime's published "
             "ratio, not measured here); sandboxes created and reset per second by path, 1 and "
             "2 threads. Bars are medians with [min, max]")]


def lazy_plots(results, outdir):
    """Lazy structures: ns per page materialised, ns per future read, by
    trap (each backend) and by explicit check."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not any(r["experiment"].startswith("lazy/") for r in results):
        return []
    backends = ["uffd-missing", "posix", "uffd-sigbus", "uffd-thread"]
    series = ["explicit-check"] + [f"trap {b}" for b in backends]

    def fig_of(exp, key):
        def get(g, s):
            if s == "explicit-check":
                return analysis.find(results, exp, s, **{key: g})
            return analysis.find(results, exp, "trap", **{key: g, "backend": s.split()[1]}) or (
                analysis.find(results, exp, "trap", **{key: g}) if s == "trap posix" else None)
        return get

    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 4.2))
    grouped_range_bars(ax, ["array", "stack"], series, fig_of("lazy/materialise", "structure"),
                       1e-3)
    ax.set_xticklabels(["array (read once)", "stack (pushes)"])
    ax.set_ylabel("µs per page materialised")
    ax.set_title("materialise on first touch", fontsize=10)
    ax.legend(fontsize=7)
    states = ["full", "full-beside-empty", "empty"]
    grouped_range_bars(bx, states, series, fig_of("lazy/future-read", "state"))
    bx.set_yscale("log")
    bx.set_xticklabels(states)
    bx.set_ylabel("ns per read (log)")
    bx.set_title("futures read", fontsize=10)
    bx.legend(fontsize=7)
    fig.suptitle("Lazy structures (trapkit/lazy.h): trap against explicit check")
    fig.tight_layout()
    fname = "lazy.png"
    fig.savefig(os.path.join(outdir, fname), dpi=100)
    plt.close(fig)
    return [(fname, "Lazy structures: the cost per page of an array or stack brought into "
             "being on first touch, and of reading a future (full, full beside an empty cell "
             "on the same hardware page, empty until a producer fills it; log scale), by trap "
             "on each backend and by an explicit check before each access. Bars are medians "
             "with [min, max]; the full cells' trap reads are plain loads (no backend)")]


def make_plots(results, seeds, outdir):
    """Returns [(file, caption)]."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plots = []

    def med(exp, mech, **params):
        for r in results:
            if r["experiment"] == exp and r["mechanism"] == mech and all(
                    r["params"].get(k) == v for k, v in params.items()):
                return r["median"]
        return None

    def mechs_of(exp):
        return sorted({r["mechanism"] for r in results if r["experiment"] == exp}, key=mech_sort)

    def grouped_bars(mechs, series, ylabel, title, fname, caption, width=8, log=False,
                     small_labels=False):
        """One group of bars per mechanism, one bar per (label, values) series."""
        fig, ax = plt.subplots(figsize=(width, 4))
        w = 0.8 / max(1, len(series))
        for j, (label, vals) in enumerate(series):
            ax.bar([i + j * w for i in range(len(mechs))], vals, w, label=label)
        if log:
            ax.set_yscale("log")
        ax.set_xticks([i + w for i in range(len(mechs))])
        if small_labels:
            ax.set_xticklabels(mechs, fontsize=8, rotation=20)
        else:
            ax.set_xticklabels(mechs)
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, fname), dpi=100)
        plt.close(fig)
        plots.append((fname, caption))

    # 1. Appel & Li Table 1 on this machine
    exps = ["appel-li/trap", "appel-li/trap+prot1+unprot", "appel-li/trap+protn+unprot"]
    mechs = mechs_of("appel-li/trap+prot1+unprot")
    grouped_bars(mechs, [(e.split("/")[1], [(med(e, m) or 0) / 1000 for m in mechs]) for e in exps],
                 "µs per fault (per page for PROTN)", "Appel & Li Table 1 on this machine",
                 "appel-li-table1.png", "Appel & Li Table 1 on this machine, per mechanism")

    # the DSM's kernels over their MPI versions
    dk = [r for r in results if r["experiment"] == "dsm/kernel-time"]
    if dk:
        kernels = sorted({r["params"]["kernel"] for r in dk})
        ranks = sorted({r["params"]["ranks"] for r in dk})
        fig, axes = plt.subplots(1, len(ranks), figsize=(4 * len(ranks), 4), sharey=True)
        if len(ranks) == 1:
            axes = [axes]
        for ax, nr in zip(axes, ranks):
            for j, m in enumerate(("ivy", "rc")):
                vals = []
                for k in kernels:
                    t, b = med("dsm/kernel-time", m, kernel=k, ranks=nr), \
                        med("dsm/kernel-time", "mpi", kernel=k, ranks=nr)
                    vals.append(t / b if t and b else 0)
                ax.bar([i + j * 0.4 for i in range(len(kernels))], vals, 0.4, label=m)
            ax.axhline(1.0, color="black", linewidth=0.8)
            ax.axhline(1.5, color="red", linewidth=0.8, linestyle="--")
            ax.set_xticks([i + 0.2 for i in range(len(kernels))])
            ax.set_xticklabels(kernels, fontsize=8)
            ax.set_title(f"{nr} rank{'s' if nr > 1 else ''}")
        axes[0].set_ylabel("time over the MPI version's")
        axes[0].legend()
        fig.suptitle("ArgoDSM's kernels on trapkit/dsm.h (ivy, rc) over plain MPI")
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "dsm-kernels.png"), dpi=100)
        plt.close(fig)
        plots.append(("dsm-kernels.png", "The DSM's kernels over their hand-written MPI "
                      "versions (1 = as fast; the dashed line is the goal's 1.5 at 2 ranks)"))

    # 2. Figure 2: ADDs per PROT+TRAP+UNPROT, 1991 machines beside today's
    fig2 = [f for f in analysis.figure2(results, seeds) if f["prot1"] or f["protn"]]
    if fig2:
        labels = [f["label"] for f in fig2]
        fig, ax = plt.subplots(figsize=(9, max(3, 0.32 * len(labels))))
        ax.barh(range(len(labels)), [f["protn"] or 0 for f in fig2], color="black",
                label="TRAP+PROTN+UNPROT")
        ax.barh(range(len(labels)),
                [max(0, (f["prot1"] or 0) - (f["protn"] or 0)) for f in fig2],
                left=[f["protn"] or 0 for f in fig2], color="white", edgecolor="black",
                label="additional for PROT1")
        ax.set_yticks(range(len(labels)))
        ax.set_yticklabels(labels, fontsize=8)
        ax.set_xscale("log")
        ax.set_xlabel("ADD instructions per PROT + TRAP + UNPROT")
        ax.set_title("Appel & Li Figure 2: 1991 machines and this one")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "appel-li-figure2.png"), dpi=100)
        plt.close(fig)
        plots.append(("appel-li-figure2.png", "Instructions (ADDs) per protection fault, "
                      "normalised as Appel & Li's Figure 2"))

    # 3. dirty/per-page
    mechs = [m for m in mechs_of("dirty/per-page")
             if any(med("dirty/per-page", m, fraction=f) for f in (0.01, 0.1, 1.0))]
    fracs = sorted({r["params"]["fraction"] for r in results
                    if r["experiment"] == "dirty/per-page"})
    if mechs and fracs:
        fig, ax = plt.subplots(figsize=(8, 4))
        w = 0.8 / len(fracs)
        for j, f in enumerate(fracs):
            vals = [(med("dirty/per-page", m, fraction=f) or 0) for m in mechs]
            ax.bar([i + j * w for i in range(len(mechs))], vals, w, label=f"{f:.0%} dirtied")
        ax.set_xticks([i + w for i in range(len(mechs))])
        ax.set_xticklabels(mechs)
        ax.set_yscale("log")
        ax.set_ylabel("ns per dirtied page")
        ax.set_title("dirty/per-page: first write + collection + re-protection")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "dirty-per-page.png"), dpi=100)
        plt.close(fig)
        plots.append(("dirty-per-page.png", "Cost per dirtied page, by mechanism and fraction"))

    # 4. scale: pages populated (the main series) and untouched, 1 and 2 threads
    mechs = mechs_of("scale/prot1+unprot")
    if mechs:
        srows = [r for r in results if r["experiment"] == "scale/prot1+unprot"]
        fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
        styles = {1: "-", 2: "--"}
        for ax, pop in zip(axes, (True, False)):
            colors = {}
            for m in mechs:
                for t in sorted({r["params"].get("threads", 1) for r in srows}):
                    sel = [r for r in srows if r["mechanism"] == m
                           and r["params"].get("populated", True) == pop
                           and r["params"].get("threads", 1) == t]
                    pts = sorted((r["params"]["pages"], r["median"]) for r in sel
                                 if r["median"] is not None)
                    if not pts:
                        continue
                    line, = ax.plot([p for p, _ in pts], [v for _, v in pts],
                                    styles.get(t, ":"), marker="o", color=colors.get(m),
                                    label=f"{m}, {t} thread{'s' if t > 1 else ''}")
                    colors[m] = line.get_color()
                    fails = [r["params"]["pages"] for r in sel if r["median"] is None]
                    if fails:
                        ax.plot([min(fails)], [pts[-1][1]], marker="x", markersize=12,
                                color=line.get_color(), linestyle="none")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("individually protected pages")
            ax.set_title("pages populated (written before protecting)" if pop
                         else "pages never touched")
            ax.legend(fontsize=6)
        axes[0].set_ylabel("ns per PROT1 + UNPROT")
        fig.suptitle("scale/prot1+unprot (x: mprotect stops at vm.max_map_count; dashed: a second "
                     "thread running)")
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "scale.png"), dpi=100)
        plt.close(fig)
        plots.append(("scale.png", "PROT1 + UNPROT cost as protected pages grow: populated pages "
                      "(the main series) and untouched ones, with the measuring thread alone "
                      "and with a second thread running (TLB shootdowns)"))

    # 5. Thekkath & Levy: delivery and return, stacked
    rows = []
    for label, exc, dexp in (("int3", "int3", "thekkath-levy/deliver-simple"),
                             ("write-protect", "write-protection", "thekkath-levy/deliver-wp")):
        for m in mechs_of(dexp):
            d = med(dexp, m, exception=exc)
            ret = med("thekkath-levy/return", m, exception=exc)
            if d is not None and ret is not None:
                rows.append((f"{label}\n{m}", d / 1000, ret / 1000))
    if rows:
        fig, ax = plt.subplots(figsize=(9, 4))
        xs = range(len(rows))
        ax.bar(xs, [r[1] for r in rows], 0.6, label="delivery (kernel to handler)")
        ax.bar(xs, [r[2] for r in rows], 0.6, bottom=[r[1] for r in rows],
               label="return (handler to program)")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([r[0] for r in rows], fontsize=8)
        ax.set_ylabel("µs")
        ax.set_title("Thekkath & Levy Tables 1-2 on this machine: delivery and return")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "thekkath-levy.png"), dpi=100)
        plt.close(fig)
        plots.append(("thekkath-levy.png", "Exception delivery and return, the kernel's "
                      "return (posix, trapkit-posix) against trapkit's fast return"))

    # 6. Mosberger Table 1: cycles per test, log scale
    mechs = mechs_of("mosberger/null")
    if mechs:
        grouped_bars(mechs, [(t, [med(f"mosberger/{t}", m) or 0 for m in mechs])
                             for t in ("null", "lifo", "fifo")],
                     "cycles per test (log)",
                     "Mosberger Table 1 on this machine: protecting a sequence from signal handlers",
                     "mosberger.png", "Atomic sequences: NULL, LIFO and FIFO per mechanism "
                     "(log scale; rseq cannot express the FIFO)", width=10, log=True,
                     small_labels=True)

    # 7. threads
    mechs = mechs_of("threads/trap+prot1+unprot")
    threads = sorted({r["params"]["threads"] for r in results
                      if r["experiment"] == "threads/trap+prot1+unprot"
                      and r["median"] is not None})
    if mechs and threads:
        grouped_bars(mechs, [(f"{t} thread(s)",
                              [(med("threads/trap+prot1+unprot", m, threads=t) or 0) / 1000
                               for m in mechs]) for t in threads],
                     "µs per fault", "threads/trap+prot1+unprot: other threads running",
                     "threads.png", "TRAP+PROT1+UNPROT with "
                     + " and ".join(str(t) for t in threads) + " busy threads (at most one per "
                     "CPU; the other threads spin over their own memory)")

    # 8. Gylfason & Hjalmtysson: a throw by frames, per runtime (dotted: a
    # destructor in every frame), beside Table 2's parts of a one-frame throw
    def throw_figure(fname, exps, series, scale, unit, title, bexp, parts, bm, blabels, btitle):
        fig, (ax, bx) = plt.subplots(1, 2, figsize=(11, 4))
        for i, (label, match) in enumerate(series):
            for exp, style in zip(exps, ("-", ":")):
                pts = sorted((r["params"]["frames"], r["median"]) for r in results
                             if r["experiment"] == exp and match(r) and r["median"] is not None)
                if pts:
                    ax.plot([p for p, _ in pts], [v / scale for _, v in pts], style, marker=".",
                            color=f"C{i}", label=label if style == "-" else None)
        ax.set_yscale("log")
        ax.set_xlabel("frames between throw and catch")
        ax.set_ylabel(f"{unit} per throw (log)")
        ax.set_title(f"{title} (dotted: a destructor a frame)")
        ax.legend(fontsize=6)
        bottom = [0.0] * len(bm)
        for part in parts:
            vals = [med(bexp, m, part=part) or 0 for m in bm]
            bx.bar(range(len(bm)), vals, 0.5, bottom=bottom, label=part)
            bottom = [b + v for b, v in zip(bottom, vals)]
        bx.set_xticks(list(range(len(bm))))
        bx.set_xticklabels(blabels, fontsize=7)
        bx.set_ylabel(f"{'ns' if scale == 1000 else unit} per one-frame throw")
        bx.set_title(btitle)
        bx.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, fname), dpi=100)
        plt.close(fig)

    mechs = [m for m in mechs_of("gylfason/throw-int") if m != "error-code"]
    if mechs:
        bm = [m for m in ("libgcc", "trapkit") if med("gylfason/breakdown", m, part="cleanup")]
        throw_figure("gylfason.png", ("gylfason/throw-int", "gylfason/throw-with-destructors"),
                     [(m, lambda r, m=m: r["mechanism"] == m) for m in mechs], 1000, "µs",
                     "C++ throws on this machine", "gylfason/breakdown",
                     ["allocation", "search", "cleanup", "install", "catch"], bm, bm,
                     "Table 2: where a throw's time goes")
        plots.append(("gylfason.png", "C++ throws through 1-20 frames per runtime, and the "
                      "parts of a one-frame throw (Gylfason & Hjalmtysson Table 2)"))

    # 8b. the same in the kernel (kernel/cxx, make kernel-test): per configuration
    kt = [r for r in results if r["experiment"] == "gylfason/kernel-throw-int"]
    if kt:
        series = sorted({(r["mechanism"], r["params"].get("where")) for r in kt
                         if not (r["mechanism"] == "error-code"
                                 and r["params"].get("where") == "user")})
        bm = [m for m in ("tkcxx", "tkcxx-no-one-phase", "tkcxx-no-inline-raise", "tkcxx-no-cache",
                          "tkcxx-unoptimised")
              if med("gylfason/kernel-breakdown", m, part="unwind") is not None]
        throw_figure("gylfason-kernel.png",
                     ("gylfason/kernel-throw-int", "gylfason/kernel-throw-with-destructors"),
                     [(f"{m} ({w})", lambda r, m=m, w=w: r["mechanism"] == m
                       and r["params"].get("where") == w) for m, w in series], 1, "instructions",
                     "C++ throws in the kernel module", "gylfason/kernel-breakdown",
                     ["allocation", "search", "unwind", "install", "catch"], bm,
                     [m.replace("tkcxx-", "") for m in bm], "Table 2 in the kernel")
        plots.append(("gylfason-kernel.png", "C++ in a kernel module (kernel/cxx, measured by "
                      "`make kernel-test` in Debian's kernel under qemu -icount): throws through "
                      "1-20 frames with the runtime's optimisations all on (tkcxx), each off, all "
                      "off, against libgcc in a process of the same guest and error codes; and "
                      "the parts of a one-frame throw"))

    # 9. Jaleel & Jacob Figures 3-5: flushed per miss, by stage, CPI by TLB size
    jj = [r for r in results if r["experiment"] == "jaleel-jacob/cpi"]
    if jj:
        workloads = sorted({r["params"]["workload"] for r in jj})
        sizes = sorted({r["params"]["tlb_entries"] for r in jj if r["params"]["tlb_entries"]})
        schemes = ["traditional", "append", "prepend"]
        fig, axes = plt.subplots(1, 3, figsize=(15, 4))
        ax = axes[0]
        n = 64 if 64 in sizes else sizes[0]
        w = 0.8 / len(schemes)
        for j, s in enumerate(schemes):
            ax.bar([i + j * w for i in range(len(workloads))],
                   [med("jaleel-jacob/flushed-per-miss", s, workload=wl, tlb_entries=n) or 0
                    for wl in workloads], w, label=s)
        ax.set_xticks([i + w for i in range(len(workloads))])
        ax.set_xticklabels(workloads)
        ax.set_ylabel("instructions flushed per miss")
        ax.set_title(f"Figure 3: flushed per miss ({n}-entry TLB)")
        ax.legend(fontsize=7)
        ax = axes[1]
        stages = ["finished", "executing", "waiting-to-issue", "before-rename"]
        labels, bottoms = [], []
        bars = {st: [] for st in stages}
        for wl in workloads:
            for s in ("traditional", "prepend"):
                labels.append(f"{wl}\n{s[:4]}")
                for st in stages:
                    bars[st].append(med("jaleel-jacob/flushed-per-retired", s, workload=wl,
                                        tlb_entries=n, stage=st) or 0)
        bottom = [0.0] * len(labels)
        for st in stages:
            ax.bar(range(len(labels)), bars[st], 0.7, bottom=bottom, label=st)
            bottom = [b + v for b, v in zip(bottom, bars[st])]
        ax.set_xticks(range(len(labels)))
        ax.set_xticklabels(labels, fontsize=6)
        ax.set_ylabel("flushed / retired")
        ax.set_title(f"Figure 4: where flushed instructions were ({n} entries)")
        ax.legend(fontsize=7)
        ax = axes[2]
        for wl in workloads:
            for s, style in (("traditional", "-"), ("append", "--"), ("prepend", ":")):
                pts = [(z, med("jaleel-jacob/cpi", s, workload=wl, tlb_entries=z)) for z in sizes]
                pts = [(z, v) for z, v in pts if v]
                if pts:
                    ax.plot([z for z, _ in pts], [v for _, v in pts], style, marker="o",
                            label=f"{wl} {s}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("TLB entries")
        ax.set_ylabel("CPI (user instructions)")
        ax.set_title("Figure 5: CPI by TLB size")
        ax.legend(fontsize=5, ncol=2)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "jaleel-jacob.png"), dpi=100)
        plt.close(fig)
        plots.append(("jaleel-jacob.png", "Jaleel & Jacob Figures 3-5 on tksim: instructions "
                      "flushed per TLB miss, the stage they had reached, CPI by TLB size"))

    # 10. Jaleel & Jacob: what in-lining needs and what it can save - one
    # resource at a time, all of them together, and the memory's latency
    sw = [r for r in results if r["experiment"] == "jaleel-jacob/sweep-cpi"]
    if sw:
        order = ["iq_int", "rob_size", "rename_int", "handler_iq", "window", "mem_latency"]
        knobs = [k for k in order if any(r["params"]["knob"] == k for r in sw)]
        titles = {"iq_int": "integer issue-queue entries", "rob_size": "ROB entries",
                  "rename_int": "integer renaming registers",
                  "handler_iq": "handler takes issue-queue entries (0 no, 1 yes)",
                  "window": "window scale (ROB, issue queues, renaming\nregisters, "
                            "load/store queues x the 21264's)",
                  "mem_latency": "memory latency behind the caches (cycles)"}
        fig, axes = plt.subplots(3, len(knobs), figsize=(4.2 * len(knobs), 10), squeeze=False)
        for c, k in enumerate(knobs):
            pts = [r for r in sw if r["params"]["knob"] == k]
            wls = sorted({(r["params"]["workload"], r["params"]["tlb_entries"]) for r in pts})
            values = sorted({r["params"]["value"] for r in pts})
            ax, bx, cx = axes[0][c], axes[1][c], axes[2][c]
            for (wl, n), color in zip(wls, ("tab:blue", "tab:red", "tab:green")):
                def cpi(s, v, wl=wl):
                    return med("jaleel-jacob/sweep-cpi", s, workload=wl, knob=k, value=v)
                for s, style in (("append", "--"), ("prepend", ":")):
                    cut, frac = [], []
                    for v in values:
                        base, x = cpi("traditional", v), cpi(s, v)
                        cut.append(100 * (1 - x / base) if base and x else float("nan"))
                        f = med("jaleel-jacob/sweep-inlined-fraction", s, workload=wl, knob=k,
                                value=v)
                        frac.append(100 * f if f is not None else float("nan"))
                    ax.plot(values, cut, style, color=color, marker="o", label=f"{wl} ({n}) {s}")
                    bx.plot(values, frac, style, color=color, marker="o", label=f"{wl} ({n}) {s}")
                share = []
                for v in values:
                    t, p = cpi("traditional", v), cpi("perfect-tlb", v)
                    share.append(100 * (1 - p / t) if t and p else float("nan"))
                cx.plot(values, share, "-", color=color, marker="o", label=f"{wl} ({n})")
            ax.axhspan(5, 25, color="tab:green", alpha=0.08, label="paper: prepend 5-25%")
            ax.axhspan(5, 10, color="tab:orange", alpha=0.12, label="paper: append 5-10%")
            for a_ in (ax, bx, cx):
                if k not in ("handler_iq", "mem_latency"):
                    a_.set_xscale("log", base=2)
                a_.set_xticks(values)
                a_.set_xticklabels([str(v) for v in values])
            ax.legend(fontsize=6)
            cx.legend(fontsize=6)
            ax.set_title(titles[k], fontsize=9)
            ax.set_ylabel("execution time cut vs traditional (%)")
            bx.set_ylabel("misses in-lined (%)")
            cx.set_ylabel("run time the misses take, traditional (%)")
            cx.set_xlabel(titles[k], fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(outdir, "jaleel-jacob-sweep.png"), dpi=100)
        plt.close(fig)
        plots.append(("jaleel-jacob-sweep.png", "Jaleel & Jacob on tksim, what decides the cut: "
                      "the hash table (64-entry TLB) and Jacobi (16 entries) as the integer issue "
                      "queue, the ROB and the integer renaming registers grow one at a time from "
                      "the 21264-like 20, 80 and 41, all together (window), with the handler "
                      "needing no issue-queue entry, and as the memory's latency changes; the "
                      "bottom row is the share of the traditional run the TLB's misses take "
                      "(against a perfect TLB). docs/tksim.md explains it"))
    return plots


# ---------------------------------------------------------------- documents
SECTIONS = [
    ("Appel & Li, Table 1", ["appel-li/add", "appel-li/trap", "appel-li/trap+prot1+unprot",
                             "appel-li/trap+protn+unprot", "appel-li/map2", "appel-li/pagesize",
                             "appel-li/figure2"]),
    ("Thekkath & Levy, Tables 1-2", [
        "thekkath-levy/deliver-simple",
        "thekkath-levy/deliver-wp",
        "thekkath-levy/deliver-subpage",
        "thekkath-levy/return",
        "thekkath-levy/round-trip", "thekkath-levy/round-trip-ratio",
        "thekkath-levy/null-syscall"]),
    ("Fast paths", ["subpage/open-access", "eager/trap+record"]),
    ("Thekkath & Levy in the kernel (kernel/fastexc; `make kernel-test`, guest instructions)", [
        "thekkath-levy/kernel-round-trip", "thekkath-levy/kernel-step"]),
    ("Checkpointing (examples/kv-server and redis-server under open-loop load)", [
        "checkpoint/p99.9-steady", "checkpoint/p99.9-during-snapshot",
        "checkpoint/max-during-snapshot", "checkpoint/p99.9-snapshot-over-steady",
        "checkpoint/p99.9-snapshot-over-redis", "checkpoint/max-snapshot-over-redis",
        "checkpoint/capacity", "checkpoint/offered-rate", "checkpoint/snapshot-duration",
        "checkpoint/lateness-p99", "checkpoint/lateness-max",
        "checkpoint/p50-steady", "checkpoint/p99-steady", "checkpoint/max-steady",
        "checkpoint/p50-during-snapshot", "checkpoint/p99-during-snapshot",
        "checkpoint/p99.9-after-snapshot", "checkpoint/max-after-snapshot",
        "checkpoint/extra-memory", "checkpoint/pages-by-writers"]),
    ("Restoring (examples/kv-server restarted from its image, and redis-server from its RDB)", [
        "checkpoint/restore-first-reply", "checkpoint/restore-resident",
        "checkpoint/restore-first-reply-over-eager", "checkpoint/restore-resident-over-eager",
        "checkpoint/image-size"]),
    ("DIRTY", ["dirty/per-page", "dirty/write-completion"]),
    ("Mosberger, Druschel & Peterson, Table 1 (cycles of the time-stamp counter)", [
        "mosberger/null", "mosberger/lifo", "mosberger/fifo", "mosberger/signal",
        "mosberger/rollforward", "mosberger/breakeven-rate"]),
    ("Scale", ["scale/prot1+unprot"]),
    ("Threads", ["threads/trap+prot1+unprot"]),
    ("The region lock's signal deferral", [
        "lock/tk-protect", "lock/fault+unprot", "lock/deferred-over-plain", "lock/deferral-cost"]),
    ("Gylfason & Hjalmtysson, Tables 1-4 (C++ exceptions)", [
        "gylfason/throw-int", "gylfason/throw-object", "gylfason/throw-with-destructors",
        "gylfason/breakdown", "gylfason/dynamic-cast", "gylfason/syscall-error",
        "gylfason/first-throw", "gylfason/throughput"]),
    ("Gylfason & Hjalmtysson in the kernel (kernel/cxx; `make kernel-test`, guest instructions)", [
        "gylfason/kernel-throw-int", "gylfason/kernel-throw-with-destructors",
        "gylfason/kernel-breakdown", "gylfason/kernel-dynamic-cast"]),
    ("Jaleel & Jacob, Figures 3-5 (tksim, an Alpha 21264-like core)", [
        "jaleel-jacob/flushed-per-miss", "jaleel-jacob/flushed-per-retired", "jaleel-jacob/cpi",
        "jaleel-jacob/tlb-misses", "jaleel-jacob/inlined-fraction", "jaleel-jacob/fallback-fraction",
        "jaleel-jacob/rob-occupancy-at-miss", "jaleel-jacob/sweep-cpi",
        "jaleel-jacob/sweep-inlined-fraction", "jaleel-jacob/sim-speed"]),
    ("Garbage collection (GCBench, the seeds' workloads, an interpreter; trapkit and bdwgc)", [
        "gc/total-time", "gc/max-pause", "gc/p99-pause", "gc/world-stopped", "gc/collections",
        "gc/minor-collections", "gc/heap", "gc/peak-rss", "gc/mappings-growth", "gc/cpu-noise",
        "gc/pointer-stores", "gc/dirty-pages", "gc/dirty-pages-per-collection", "gc/store-check", "gc/total-time-over-bdwgc",
        "gc/max-pause-over-bdwgc", "gc/max-pause-over-bdwgc-incremental",
        "gc/world-stopped-over-bdwgc", "gc/world-stopped-over-bdwgc-incremental"]),
    ("Persistent heap (examples/pheap-kv on trapkit/pheap.h, and LMDB)", [
        "pheap/random-insert", "pheap/random-read", "pheap/sequential-read",
        "pheap/durable-commit", "pheap/cold-open-first-read", "pheap/cold-open-touch-all",
        "pheap/store-size", "pheap/lost-commits", "pheap/swizzle-page", "pheap/trap",
        "pheap/swizzle-pointer", "pheap/swizzle", "pheap/swizzle-model",
        "pheap/swizzle-breakeven"]),
    ("Shared virtual memory (trapkit/dsm.h on Open MPI)", [
        "dsm/remote-read-fault", "dsm/write-fault", "dsm/diff", "dsm/page-pingpong",
        "dsm/read-fault-over-pingpong", "dsm/kernel-time", "dsm/kernel-over-mpi",
        "dsm/pages-moved"]),
    ("Compressed paging (trapkit/zpage.h, and zram)", [
        "zpage/fault-in-p50", "zpage/fault-in-p99", "zpage/fault-in-p50-over-uncompressed",
        "zpage/fault-in-p50-over-zram", "zpage/fault-in-p50-over-bare",
        "zpage/ratio", "zpage/zipf-throughput", "zpage/zipf-throughput-over-zram",
        "zpage/zipf-fault-ins-per-op", "zpage/zipf-time-per-fault-in",
        "zpage/zipf-sampling-faults-per-op", "zpage/zipf-resident-pages"]),
    ("Guard pages (trapkit/guard.h)", [
        "guard/arena", "guard/arena-over-explicit-check", "guard/sandbox-kernel",
        "guard/sandbox-kernel-over-explicit-check", "guard/sandbox-create",
        "guard/sandbox-create-scaling"]),
    ("Lazy structures (trapkit/lazy.h)", [
        "lazy/materialise", "lazy/materialise-over-explicit-check", "lazy/future-read",
        "lazy/future-read-over-explicit-check"]),
    ("Break-even analyses, recomputed", None),  # every analysis/* experiment
]

# What a section's rows mean, said under its title (keyed by the title).
SECTION_TEXT = {
    "Gylfason & Hjalmtysson in the kernel (kernel/cxx; `make kernel-test`, guest instructions)":
        "kernel/cxx/tests/bench.cpp in tkcxx.ko, loaded into Debian 12's own kernel under qemu "
        "-icount shift=0 (the time-stamp counter counts instructions), and the same file built "
        "as a process of that guest against g++'s runtime (where: user, mechanism libgcc). "
        "Mechanisms: tkcxx, the module's runtime with the seed's three optimisations (one walk "
        "that runs cleanups as it goes, the raise in-lined into __cxa_throw, the frame-state "
        "cache by PC); tkcxx-no-one-phase, -no-inline-raise, -no-cache: one of them off; "
        "tkcxx-one-phase-only; tkcxx-unoptimised: all off (a search walk, then a cleaning "
        "walk, from __cxa_throw's own frame, the FDE searched for and its instructions run at "
        "every frame); error-code: the same frames returning an error instead. kernel-breakdown "
        "is Table 2 from the runtime's own time stamps (search is the first walk; unwind is "
        "the one walk, or the second, to the handler's install). Medians of 15 runs, warm.",
    "Compressed paging (trapkit/zpage.h, and zram)":
        "bench/zpage.c. Three data sets of the same size (pages): kv, a key-value heap of "
        "text-like JSON records; python, the anonymous memory of a Python interpreter that built "
        "a large object graph; doc, the text files of /usr/share/doc. fault-in-p50 and -p99: "
        "every page of the set dropped, then each touched once in random order and each touch "
        "timed; per repetition the median and the 99th percentile, then the median [min, max] "
        "of the repetitions (each repetition runs every path once, starting at another each "
        "time). lz4 and zstd are trapkit/zpage.h's pager with that codec (faults "
        "served in the faulting thread), lz4-thread the same with the userfaultfd's handler "
        "thread, uncompressed the same fault path serving a plain copy (what compression adds "
        "is lz4 over it), zram the set in plain memory pushed to swap on /dev/zram0 (lz4) with "
        "MADV_PAGEOUT and touched the same way. bare-sigbus and bare-sigbus-lz4 are the floor "
        "of any fault path through a signal, with no library: the set missing from an area "
        "registered with the benchmark's own userfaultfd (UFFD_FEATURE_SIGBUS) and a SIGBUS "
        "handler that places each page with UFFDIO_COPY from a plain copy, or after "
        "LZ4_decompress_safe into a buffer on its stack; fault-in-p50-over-bare is trapkit's "
        "path (uncompressed over bare-sigbus, lz4 over bare-sigbus-lz4) and zram's (over "
        "bare-sigbus-lz4) over that floor. The fault-in-p50-over- ratios (over-zram: lz4's over "
        "zram's) are measured: each repetition's p50 over the same repetition's, then the "
        "median [min, max] of those ratios. ratio: the set's bytes over its compressed "
        "form's (zram: mem_used_total of /sys/block/zram0, its own overhead included). "
        "zipf-throughput: reads and writes of 256-byte records picked by a Zipfian law (theta "
        "0.99, keys scattered over the heap of heap_mib) in a child process, the heap under a "
        "budget of 100%, 50% and 25% of its size: a zpage area with that budget (lz4), or plain "
        "memory in a memory cgroup (v1) of that limit and 1 MiB for the child's other pages "
        "swapping to zram (zram); unlimited is "
        "plain memory with no limit. zipf-fault-ins-per-op: pages brought back per op in "
        "those runs (zpage's fault-ins, zram's swap-ins: the child's major faults); "
        "zipf-time-per-fault-in: the run's time per op over the unlimited run's of the same "
        "repetition, per page brought back (a fault-in's whole cost to the workload); "
        "zipf-sampling-faults-per-op: zpage's clock-hand faults (zram's reclaim reads "
        "accessed bits instead); zipf-resident-pages: the heap's pages in memory at the end "
        "of a run (zpage's count, mincore for zram's). zipf-throughput-over-zram is measured: "
        "each repetition's lz4 run over the zram run right after it, then the median [min, "
        "max] of those ratios. zram needs root, an unused "
        "/dev/zram0 and a memory cgroup v1 hierarchy: the benchmark sets them up and puts them "
        "back; where it cannot, the zram figures are n/a with the reason.",
    "Guard pages (trapkit/guard.h)":
        "bench/guard.c. guard/arena: Appel & Li section 3's heap-overflow detection, measured: "
        "a bump allocator of object_bytes cells in a nursery of nursery_kib (64 KiB, the seed's, "
        "and 1024) that a collector empties when full, ns per allocation, with work dependent "
        "ALU operations between two allocations (48: the seed's new cell every 50 "
        "instructions). guard-page: tk_arena_alloc, no compare, one fault per nursery; "
        "explicit-check: tk_arena_alloc_checked, a compare and branch per allocation; no-check: "
        "the same loop with the limit check hoisted out (a lower bound, not an allocator). The "
        "seed's arithmetic (the check 2 instructions of 50, 4%; a trap per 16k cells, 0.3%) is "
        "what these rows measure. guard/sandbox-kernel: a product of two n x n uint32 matrices "
        "and a gather-scatter histogram of it on a sandbox's linear memory through 32-bit "
        "offsets, as WebAssembly code does, ns per run: guard-page, plain loads and stores (the "
        "guard region is the check); explicit-check, each access compares the offset with the "
        "memory's size first. The -over-explicit-check rows are time over explicit-check's "
        "(below 1: the guard page is faster), derived from the medians over the worst pairings "
        "of the ranges; Wasmtime's published comparison is in their notes, never a row. "
        "guard/sandbox-create: sandboxes per second, all threads together, per path (mprotect, "
        "madv-guard, uffd): op create is tk_sandbox_create of 64 KiB in a 4 GiB + 2 GiB "
        "reservation, first and last page written, tk_sandbox_destroy; op reset is a pooling "
        "runtime's slot cycle on a thread's own sandbox (16 pages written, grown by 16, those "
        "written, tk_sandbox_reset). guard/sandbox-create-scaling is 2 threads' ops/s over 1 "
        "thread's (2 would be perfect scaling). Medians of the repetitions, the variants "
        "interleaved in each; each run checks its result.",
    "Lazy structures (trapkit/lazy.h)":
        "bench/lazy.c, Thekkath & Levy section 4.2: memory that materialises on first touch "
        "beside the explicit check a program would otherwise make before each access. "
        "lazy/materialise, ns per page brought into being: structure array, a fresh lazily "
        "computed array read once, a word a page, its callback writing 8 words of the page "
        "(trap: trapkit's lazy array on each backend; explicit-check: fresh memory and a flag "
        "byte per page tested before each read); structure stack, 8-byte pushes onto a stack "
        "trimmed back before each repetition (trap: the lazy stack, grown by its guard page's "
        "fault; explicit-check: each push compares the stack pointer with the limit and opens "
        "the next page with mprotect). Both include the kernel's first touch of each page. "
        "lazy/future-read, ns per read of a cell: state full, reads of full cells (trap: plain "
        "loads, nothing traps; explicit-check: an acquire load of the state compared with FULL "
        "first); full-beside-empty (posix only), full 64-byte cells sharing each hardware page "
        "with an empty one, so each load faults and trapkit's sub-page emulation completes it; "
        "empty, a consumer reads an empty cell and a producer fills it once the consumer is "
        "blocked, from the read to its return (explicit-check: the state tested and a futex "
        "wait on it). The -over-explicit-check rows are trap over explicit-check for the same "
        "structure or state (below 1: the trap is cheaper), derived from the medians over the "
        "worst pairings of the ranges. Medians of the repetitions, trap and explicit variants "
        "interleaved; every read checked.",
    "Shared virtual memory (trapkit/dsm.h on Open MPI)":
        "bench/dsm.py running bench/dsm_kernels.c under mpirun (Open MPI, TCP on the loopback "
        "interface). ivy: sequential consistency, one writer per page, a distributed manager "
        "(Li's IVY); rc: release consistency, many writers, twins and diffs; mpi: the same "
        "kernel written with MPI messages (Allgatherv, Sendrecv of halo rows). "
        "remote-read-fault: rank 1 reads one byte of each of 400 pages rank 0 holds, per "
        "page; write-fault: ivy, the page read-only on both ranks and owned by the other "
        "(its copy invalidated and the page moved), rc, a page not cached after an acquire "
        "(fetched, twinned, opened); diff: a release's diff per page (8 bytes changed: made, "
        "sent, merged at the home, acknowledged); page-pingpong: MPI_Send and MPI_Recv of one "
        "page there and back between the same two ranks in the same runs. kernel-time: from a "
        "barrier after each rank set up its part to a barrier after the last iteration, the "
        "longest rank's; each run's result is checked against the kernel run serially. "
        "Each rank works on its home part (block placement); pages-moved counts the pages "
        "the ranks received while timed. Medians of interleaved rounds (each round every "
        "rank count and system in turn, one mpirun running the five kernels one after the "
        "other in one DSM) with min and max; 4 ranks oversubscribe "
        "this machine's 2 cores (each rank also has its service thread).",
    "Persistent heap (examples/pheap-kv on trapkit/pheap.h, and LMDB)":
        "bench/pheap.c. The same ordered map of 16-byte keys and 100-byte values in each: "
        "examples/pheap-kv's B+tree (C structs with pointers in a trapkit store; trapkit-eager: "
        "a page's pointers are swizzled when it is first read; trapkit-lazy: TK_PH_LAZY, each "
        "pointer when it is first loaded; for random-read the same store opened beside the "
        "first as a reader) "
        "and LMDB (Debian's liblmdb, one B+tree). One thread. random-insert adds the records in "
        "random order, 10,000 a durable "
        "transaction; random-read gets every key once in random order, warm; sequential-read "
        "reads all in key order; durable-commit: transactions of one put of a new key, each "
        "durable when its commit returns (LMDB by default, and with MDB_WRITEMAP), store fresh "
        "the first after an open (trapkit's commits then read their pages first), warm after "
        "every record was read (the goal's); cold-open-first-read: a new "
        "process opens a store of size_gib (its records added in key order, 10,000 a "
        "transaction, to both) whose files were dropped from the page cache "
        "(posix_fadvise) and reads one record, cold-open-touch-all then every record; "
        "store-size: the files' blocks on disk (trapkit's log file included); lost-commits: "
        "kill -9 of a process making one-put commits at a random instant, then the commits it "
        "had reported done that the reopened store lacks, summed over the trials (make soak "
        "runs 1,000 trials per mechanism of tests/pheap_crash). Medians of the rounds, the "
        "systems interleaved in each; --quick: 100,000 records and a 64 MiB store. "
        "Thekkath & Levy's Figure 4: swizzle-page is a first touch per page of pages of 512 "
        "pointers and of 512 plain words (trap, pread from the page cache, swizzling; warm), "
        "trap a first touch of a trapkit region whose handler only opens the page; "
        "swizzle-pointer (derived) is the difference per pointer, s (the median over the rounds "
        "of each round's pair, run side by side). swizzle is measured: a store of pages of the "
        "seed's 50 pointers, opened afresh eagerly and with TK_PH_LAZY (warm in the page "
        "cache), a fraction of each page's pointers loaded; time per page. swizzle-model "
        "derives the same from the parts, as the seed's Figure 4 does: eager swizzling's cost "
        "per page (the page's touch without pointers + 50 s) and lazy swizzling's (the touch + "
        "a trap and s for each pointer used); swizzle-breakeven is the fraction of a page's "
        "pointers used below which lazy would be cheaper, s / (t + s).",
    "Garbage collection (GCBench, the seeds' workloads, an interpreter; trapkit and bdwgc)":
        "bench/gc.py. Each workload one source built against trapkit's collector (src/apps/gc) "
        "and against Debian's bdwgc (bench/gcwork.h): gcbench is GCBench after Boehm's "
        "description (bench/gcbench.c; heap_mib 0 its standard size, 1024 its long-lived data "
        "grown to 1 GiB); lisp is Thekkath & Levy's Table 4, Lisp operations on cons cells "
        "interleaved with a 1 MB array of pointers whose elements are replaced at random "
        "(bench/gc_lisp.c); trees is Table 5's tree program, subtrees of a long-lived tree and "
        "of short-lived ones destroyed and rebuilt (bench/gc_trees.c); interp is a small "
        "Scheme interpreter running a fixed program (bench/gc_interp.c). The last three check "
        "that every system computed the same results (a checksum); --quick runs them at a "
        "quarter of their size. "
        "trapkit: the world stopped for every collection, each full; trapkit-generational: "
        "minor collections, the pagemap-scan barrier, the world stopped; trapkit-<barrier>: "
        "mostly-concurrent marking (a marker thread beside the program, the page table as the "
        "write barrier, the world stopped twice a cycle for a moment); bdwgc-incremental: "
        "GC_enable_incremental (its mprotect barrier). Total time from the first allocation to "
        "the end in a run without timing; a pause is a time from one allocation's return to "
        "the next one's longer than 20 µs (a collection inside the allocation, or the world "
        "stopped between), from a second run with every allocation timed by rdtsc; "
        "gc/world-stopped is the collector's own account of its longest stop of the world, "
        "from the stop request to the restart (the goals' pause): trapkit's statistics, and "
        "bdwgc's collection events PRE_STOP_WORLD to POST_START_WORLD, which leave out the "
        "marking its incremental mode does inside allocations with the world running (the "
        "allocation gaps include it); the plot shows the allocation gaps by length. "
        "gc/mappings-growth: lines of /proc/self/maps at the end less "
        "after set-up (trapkit's heap grows by chunks, each a mapping of its own). "
        "trapkit-cards: the software card-marking barrier (every workload stores its pointers "
        "through GC_WRITE), mostly-concurrent. gc/pointer-stores and gc/dirty-pages are the counts "
        "Thekkath & Levy's Table 5 weighs (analysis/gc-breakeven, analysis/gc-traps-over-checks "
        "under the break-even analyses). "
        "gc/cpu-noise: the longest a thread spinning on each CPU lost its CPU in a second "
        "(bench/cpu_noise.c): with every CPU busy - the concurrent marker beside the program - "
        "the machine itself stalls a thread this long, which a pause figure then includes. "
        "Ratios paired per round.",
    "Restoring (examples/kv-server restarted from its image, and redis-server from its RDB)":
        "bench/restore.py. kv-server is filled to size_gib with 1 KiB entries by its own SET "
        "(tk-loadgen --mode fill) and SAVEs its full image; redis-server is filled the same way "
        "and SAVEs its RDB (its defaults). checkpoint/restore-first-reply is the time from "
        "starting the server to its first correct reply to GET of a random key (the client "
        "connects every 0.2 ms; redis-server answers -LOADING until it has loaded); "
        "checkpoint/restore-resident the time until the whole image is in memory: lazy, until "
        "INFO persistence says loading:0 (polled every 2 ms); eager kv-server and redis-server "
        "answer only once loaded, so theirs is the first reply. lazy is kv-server's default "
        "(pages arrive on fault while a background thread prefetches the rest, each page's "
        "CRC checked as it arrives), eager is --eager-restore yes (the chain read and verified "
        "before it listens). cache=warm: the image read just before, in the page cache; "
        "cache=dropped: after sync and echo 3 > /proc/sys/vm/drop_caches. Each figure is the "
        "median of 3 rounds (the systems' order rotated each round) with [min, max]; the "
        "-over-eager ratios are lazy over eager's load time, paired per round. "
        "checkpoint/image-size: trapkit is the full image, trapkit-lz4 the same saved with "
        "--compress yes, trapkit-incremental an incremental image after SET of 1% of the keys, "
        "redis-rdb redis-server's RDB of the same entries (rdbcompression yes, its default).",
    "Jaleel & Jacob, Figures 3-5 (tksim, an Alpha 21264-like core)":
        "tksim is deterministic: each configuration runs once (n = 1), so min = max. "
        "tlb_entries 0 is the perfect TLB (1 GiB pages). jaleel-jacob/sweep-* vary one "
        "resource (knob, value) around the 21264-like configuration for one workload; window "
        "scales the ROB, the issue queues, the renaming registers and the load/store queues "
        "together. analysis/jaleel-jacob-overhead-cut is the share of what the misses cost "
        "(traditional against the perfect TLB) that in-lining removes; the time cut is that "
        "share times the part of the run the misses take. docs/tksim.md compares tksim's "
        "in-lining rules with the paper's and explains where the paper's bands appear. "
        "jaleel-jacob/sim-speed: simulated instructions per second of tksim's CPU time "
        "(clock=cpu) and of wall-clock time (clock=wall), median over the workload's runs.",
    "Checkpointing (examples/kv-server and redis-server under open-loop load)":
        "Columns are kv-server checkpointing by each trapkit mechanism (the report runs the "
        "probe's choice for TRAP and fork; make bench-full runs all five at 25%, 50% and 75% "
        "load) and redis-fork, a real redis-server doing its own BGSAVE (rdbcompression no: a raw "
        "image like kv-server's, and a shorter BGSAVE than its default). Both are filled to "
        "size_gib with 1 KiB entries by their own SET and stay up across the rounds of the "
        "size (kv-server started from the image it saved, each BGSAVE a full image; where "
        "memory is short each kv-server run starts afresh from that image), so its first "
        "round is the first snapshot after a start. tk-loadgen (bench/loadgen.c) sends "
        "requests open loop: Poisson arrivals at one "
        "absolute rate for every system, offered_load times the slower system's capacity "
        "(checkpoint/offered-rate), over 16 connections, half SET and half GET on random keys; "
        "a request's latency runs from its scheduled send time to its reply, so a stall counts "
        "for every request it delays. Each run has a warm-up (left out), 3 s steady (the "
        "-steady figures), the BGSAVE from the instant the command is sent until INFO (polled "
        "every 20 ms) says it is complete (-during-snapshot; a fork pause is inside it) and 3 s "
        "after (-after-snapshot); a request counts in the phase in which it was scheduled "
        "(--quick: 64 MiB, 1 s steady and after). Latency figures are of that "
        "phase's requests of the given command; each is the median of 3 runs (rounds, the "
        "systems' order rotated each round) with [min, max] over the runs. The -over- ratios "
        "are paired: each run's snapshot against its own steady phase, and against "
        "redis-server's run of the same round; their median [min, max] is over the rounds. "
        "checkpoint/capacity is closed loop (16 connections, one request outstanding each, "
        "the same mix): the median of 3 consecutive runs on one server, not interleaved. "
        "checkpoint/lateness-p99 and -max are tk-loadgen's own delay in sending against its "
        "schedule over a whole run: when it is large the generator (sharing 2 CPUs with the "
        "server) fell behind and the latencies include that delay (a note says so). "
        "snapshot-duration is BGSAVE to completion; extra-memory the peak rise of the machine's "
        "anonymous memory during it (AnonPages of /proc/meminfo, sampled every 50 ms: the "
        "server's and its children's, a page shared copy-on-write counted once, as in PSS; "
        "reading a server's PSS walks its page tables, 20-40 ms of kernel time per 1 GiB, "
        "which perturbed the run it measured); pages-by-writers the pages the server's own "
        "writes copied.",
    "The region lock's signal deferral":
        "Every change of protection (tk_protect, tk_prot1, tk_unprot and the fault path's own) "
        "holds its region's lock, which defers the thread's asynchronous signals while held (two "
        "rt_sigprocmask calls), so that a signal handler re-entering trapkit never runs inside "
        "the critical section (it used to deadlock there). These rows are the cost of that "
        "safety: lock=deferred is the lock as shipped, lock=plain the lock without the deferral "
        "(unsafe; selectable by the benchmark only), interleaved in one run. lock/tk-protect is "
        "per call, lock/fault+unprot per write fault whose handler calls tk_unprot (what a "
        "collector or checkpointer pays); lock/deferred-over-plain and lock/deferral-cost pair "
        "each repetition (derived). On uffd-thread the handler runs on trapkit's own thread, "
        "which keeps signals blocked, so that round trip makes no extra call.",
}

MACHINE_KEYS = [("kernel_release", "kernel release"), ("cpu_model", "CPU"), ("ncpus", "CPUs"),
                ("page_size", "page size"), ("thp_mode", "THP"), ("uffd_access", "userfaultfd"),
                ("pagemap_scan", "PAGEMAP_SCAN"), ("soft_dirty", "soft-dirty"),
                ("pkeys_cpu", "pkeys (CPU)"), ("max_map_count", "vm.max_map_count"),
                ("minsigstksz", "AT_MINSIGSTKSZ"), ("mech_trap", "trapkit's choice for TRAP"),
                ("mech_dirty", "trapkit's choice for DIRTY")]


def machine_rows(machine):
    rows = []
    for k, label in MACHINE_KEYS:
        v = machine.get(k)
        if v is None and isinstance(machine.get("machine"), dict):
            v = machine["machine"].get(k)
        if isinstance(v, bool):
            v = "yes" if v else "no"
        if v is not None:
            rows.append((label, v))
    return rows


def section_exps(results, exps):
    if exps is None:
        seen = []
        for r in results:
            if r["experiment"].startswith("analysis/") and r["experiment"] not in seen:
                seen.append(r["experiment"])
        return seen
    present = {r["experiment"] for r in results}
    return [e for e in exps if e in present]


def goal_status(g):
    """met, not met or not decided (analysis.GOAL_RULE)."""
    if g.get("status"):
        return g["status"]
    return "not decided" if g.get("met") is None else "met" if g["met"] else "not met"


def write_html(path, doc, plots, goals, seeds_html):
    r = doc["results"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>trapkit report</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em}"
        "table{border-collapse:collapse;margin:.5em 0 1em}td,th{border:1px solid #bbb;"
        "padding:.25em .6em;text-align:right}th{background:#eee}td:first-child{text-align:left}"
        "td.na{color:#999}.reasons{font-size:.85em;color:#555}img{max-width:100%}"
        ".goal-met{color:#060}.goal-missed{color:#a00}.goal-undecided{color:#a60}"
        ".derived{color:#555}</style></head><body>",
        "<h1>trapkit report</h1>",
        f"<p>Generated {html.escape(doc['generated'])} by <code>{html.escape(doc['command'])}"
        f"</code>{' (quick: brief runs, figures are rough)' if doc['quick'] else ''}"
        f"{html.escape(mask_note(doc))}. "
        "Every figure is the median of the repetitions ([min, max] below it), measured side by "
        "side in this run; <code>posix</code> is the baseline done by hand as libsigsegv and Boehm "
        "GC do it, the others are trapkit's mechanisms. n/a cells say why on hover and below the "
        "table; figures computed from other figures are marked (derived), and the seeds' own "
        "figures are only in their own tables at the end, never rows for this machine.</p>",
        "<h2>Machine</h2><table>",
    ]
    for label, v in machine_rows(doc["machine"]):
        parts.append(f"<tr><td>{html.escape(label)}</td><td>{html.escape(str(v))}</td></tr>")
    parts.append("</table>")
    for f in doc.get("failed", []):
        parts.append(f"<p class='goal-missed'><b>{html.escape(f['bench'])} failed</b> (exit "
                     f"status {f['status']}): only the {f['results']} results it printed before "
                     "are in this report; the command's output says why.</p>")
    parts.append(f"<h2>Goals</h2><p>{html.escape(analysis.GOAL_RULE)}</p>"
                 "<table><tr><th>goal</th><th>measured</th><th>status</th></tr>")
    for g in goals:
        st = goal_status(g)
        cls = {"met": "goal-met", "not met": "goal-missed"}.get(st, "goal-undecided")
        parts.append(f"<tr><td>{html.escape(g['goal'])}</td><td>{html.escape(g['measured'])}</td>"
                     f"<td class='{cls}'>{html.escape(st)}</td></tr>")
    parts.append("</table>")
    parts.append("<h2>Plots</h2>")
    for f, cap in plots:
        parts.append(f"<figure><img src='{html.escape(f)}' alt='{html.escape(cap)}'>"
                     f"<figcaption>{html.escape(cap)}</figcaption></figure>")
    for title, exps in SECTIONS:
        exps = section_exps(r, exps)
        if not exps:
            continue
        parts.append(f"<h2>{html.escape(title)}</h2>")
        if title in SECTION_TEXT:
            parts.append(f"<p>{html.escape(SECTION_TEXT[title])}</p>")
        for e in exps:
            parts.append(f"<h3>{html.escape(e)}</h3>")
            parts.append(html_table(r, e))
    if seeds_html:
        parts.append("<h2>The seeds' own figures</h2>")
        parts.append(seeds_html)
    parts.append(
        "<script>window.addEventListener('load',function(){var im=document.images,ok=0;"
        "for(var i=0;i<im.length;i++)if(im[i].complete&&im[i].naturalWidth>0)ok++;"
        "document.body.setAttribute('data-images-loaded',ok);"
        "document.body.setAttribute('data-images',im.length);"
        "document.body.setAttribute('data-tables',document.querySelectorAll('table').length);"
        "});</script></body></html>")
    with open(path, "w") as f:
        f.write("\n".join(parts))


def mask_note(doc):
    """Says which kernel features the probe was told to hide."""
    mask = doc.get("machine", {}).get("probe_mask")
    return (f" — with TRAPKIT_PROBE_MASK={mask}: these kernel features were hidden, as on an "
            f"older kernel" if mask else "")


def write_md(path, doc, goals, seeds_md=()):
    r = doc["results"]
    m = dict(machine_rows(doc["machine"]))
    lines = [
        "# trapkit results",
        "",
        "Written by `make report` (`trapkit report`); do not edit by hand. The full report, with "
        "plots, is report/index.html; every figure is in report/results.json.",
        "",
        f"Generated {doc['generated']} on {m.get('CPU', '?')}, {m.get('CPUs', '?')} CPUs, Linux "
        f"{m.get('kernel release', '?')}{' — quick run, rough figures' if doc['quick'] else ''}"
        f"{mask_note(doc)}. "
        "Each figure is the median of its repetitions followed by [min, max] (interleaved unless "
        "its section says otherwise); `posix` is "
        "the hand-made baseline (sigaction + mprotect, as libsigsegv and Boehm GC do it). Figures "
        "computed from other figures are marked (derived); the seeds' own figures are only in "
        "their own tables at the end, never rows for this machine.",
        "",
    ]
    for f in doc.get("failed", []):
        lines += [f"**{f['bench']} failed** (exit status {f['status']}): only the {f['results']} "
                  "results it printed before are here; the command's output says why.", ""]
    lines += [
        "## Goals",
        "",
        analysis.GOAL_RULE,
        "",
        "| goal | measured | status |",
        "|---|---|---|",
    ]
    for g in goals:
        lines.append(f"| {g['goal']} | {g['measured']} | {goal_status(g)} |")
    for title, exps in SECTIONS:
        exps = section_exps(r, exps)
        if not exps:
            continue
        lines += ["", f"## {title}"]
        if title in SECTION_TEXT:
            lines += ["", SECTION_TEXT[title]]
        for e in exps:
            lines += ["", f"### {e}", "", md_table(r, e)]
    if seeds_md:
        lines += ["", "## The seeds' own figures", "",
                  "Transcribed from the papers into bench/data/seeds.json (see bench/data/SEEDS.md)."]
        lines += list(seeds_md)
    lines.append("")
    with open(path, "w") as f:
        f.write("\n".join(lines))


def kernel_results(path, prefix="thekkath-levy/"):
    """The figures `make kernel-test` measured in its guests (counted in
    instructions under qemu -icount), if it was run: those of experiments
    named prefix*."""
    if not path or not os.path.exists(path):
        log("kernel figures: `make kernel-test` has not been run (no " + str(path) + ")")
        return []
    out = []
    with open(path) as f:
        for line in f:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if r.get("unit") == "insn" and r.get("experiment", "").startswith(prefix):
                for k in ("min", "max"):
                    if r.get(k) is None:
                        r[k] = r.get("median")
                out.append(r)
    log(f"kernel figures: {len(out)} from {path} "
        f"({time.strftime('%Y-%m-%d %H:%M', time.localtime(os.path.getmtime(path)))})")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="run every experiment briefly")
    ap.add_argument("--bench-dir", required=True, help="where the bench_* programs are")
    ap.add_argument("--trapkit", required=True, help="the trapkit command (for the probe)")
    ap.add_argument("--out", default="report", help="report directory")
    ap.add_argument("--docs", default=None, help="where to write results.md ('' for nowhere)")
    ap.add_argument("--seeds", default=os.path.join(HERE, "data", "seeds.json"))
    ap.add_argument("--only", default=None, help="comma-separated benchmarks to run")
    ap.add_argument("--kernel-results",
                    default=os.path.join(os.path.dirname(HERE), "build-kernel",
                                         "fastexc-results.jsonl"),
                    help="the fast exception path's figures from `make kernel-test`, if run")
    ap.add_argument("--kernel-cxx-results",
                    default=os.path.join(os.path.dirname(HERE), "build-kernel",
                                         "cxx-results.jsonl"),
                    help="the C++ module's figures from `make kernel-test`, if run")
    a = ap.parse_args()

    os.makedirs(a.out, exist_ok=True)
    start = time.time()
    log(f"trapkit report{' --quick' if a.quick else ''}: {len(BENCHES)} benchmarks -> {a.out}/")
    machine = probe(a.trapkit)
    results = []
    benches = [b for b in BENCHES if not a.only or b[0] in a.only.split(",")]
    failed = []
    for i, (name, desc) in enumerate(benches, 1):
        log(f"[{i}/{len(benches)}] {desc}")
        t0 = time.time()
        got, status = run_bench(os.path.join(a.bench_dir, "bench_" + name), a.quick, name)
        results += got
        if status != 0:
            # the others still run and the report is still written, with
            # what this one measured before it failed; the command fails
            failed.append({"bench": "bench_" + name, "status": status, "results": len(got)})
            log(f"[{i}/{len(benches)}] FAILED: bench_{name} exited with status {status} after "
                f"{len(got)} results ({time.time() - t0:.1f} s); going on with the others")
        else:
            log(f"[{i}/{len(benches)}] done in {time.time() - t0:.1f} s")

    results += kernel_results(a.kernel_results)
    results += kernel_results(a.kernel_cxx_results, "gylfason/kernel-")
    seeds = {}
    if os.path.exists(a.seeds):
        with open(a.seeds) as f:
            seeds = json.load(f)
    results += analysis.derived(results, seeds)
    goals = analysis.goals(results, a.quick)
    doc = {
        "machine": machine,
        "generated": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "trapkit report" + (" --quick" if a.quick else ""),
        "quick": a.quick,
        "duration_s": round(time.time() - start, 1),
        "goals": goals,
        "failed": failed,
        "results": results,
    }
    with open(os.path.join(a.out, "results.json"), "w") as f:
        json.dump(doc, f, indent=1)
    log("plots ...")
    plots = (make_plots(results, seeds, a.out) + checkpoint_plots(results, a.out)
             + gc_plots(results, a.out) + zpage_plots(results, a.out)
             + guard_plots(results, a.out) + lazy_plots(results, a.out))
    write_html(os.path.join(a.out, "index.html"), doc, plots, goals,
               analysis.seeds_html(seeds))
    if a.docs:
        write_md(a.docs, doc, goals, analysis.seeds_md(seeds))
    log(f"report written in {time.time() - start:.0f} s: {a.out}/results.json, {a.out}/index.html"
        + (f", {a.docs}" if a.docs else ""))
    for g in goals:
        log(f"  goal: {g['goal']}: {g['measured']} ({goal_status(g)})")
    if failed:
        for f in failed:
            log(f"FAILED: {f['bench']} exited with status {f['status']} (its output above says "
                f"why; {f['results']} of its results are in the report)")
        sys.exit(1)


if __name__ == "__main__":
    main()
