"""Derived figures for the trapkit report: the seeds' normalisations and
break-even analyses recomputed from this run's measurements, and the goals.

Every derived figure is a result like the measured ones (experiment,
mechanism, params, metric, unit, median, min, max, n), under `analysis/...`
or the seed's own id, with `derived_from` naming what it was computed from.
"""
import html

BASELINE = "posix"
NOT_CANDIDATES = {"posix", "trapkit-posix", "cpu", "trapkit"}


def find(results, exp, mech=None, **params):
    for r in results:
        if r["experiment"] != exp or (mech is not None and r["mechanism"] != mech):
            continue
        if all(r["params"].get(k) == v for k, v in params.items()):
            return r
    return None


def median(results, exp, mech=None, **params):
    r = find(results, exp, mech, **params)
    return r["median"] if r else None


def result(exp, mech, params, metric, unit, value, derived_from, reason=None):
    r = {"experiment": exp, "mechanism": mech, "params": params, "metric": metric, "unit": unit,
         "median": value, "min": value, "max": value, "n": 1 if value is not None else 0,
         "derived_from": derived_from}
    if value is None:
        r["reason"] = reason or "an input figure is missing"
    return r


def cycle_ns(results):
    return median(results, "machine/cycle", "cpu")


# ------------------------------------------------------------ Appel & Li
def seed_table1(seeds):
    t = seeds.get("appel-li", {}).get("table1", {})
    return t.get("rows", []) if isinstance(t, dict) else []


def figure2(results, seeds):
    """ADDs per PROT+TRAP+UNPROT: the 1991 machines (from the seed's Table
    1) and this machine's mechanisms.  [{label, prot1, protn, today}]"""
    rows = []
    for row in seed_table1(seeds):
        v = row.get("values", {})
        add = v.get("add")
        if not add:
            continue
        p1, pn = v.get("trap+prot1+unprot"), v.get("trap+protn+unprot")
        if p1 is None and pn is None:
            continue
        rows.append({"label": f"{row.get('machine', '?')} {row.get('os', '')} (1991)".strip(),
                     "prot1": p1 / add if p1 else None, "protn": pn / add if pn else None,
                     "today": False})
    add = median(results, "appel-li/add", "cpu")
    if add:
        mechs = sorted({r["mechanism"] for r in results
                        if r["experiment"] == "appel-li/trap+prot1+unprot"})
        for m in mechs:
            p1 = median(results, "appel-li/trap+prot1+unprot", m)
            pn = median(results, "appel-li/trap+protn+unprot", m)
            # a mechanism this machine lacks keeps its row, with the reason
            why = next((r.get("reason") for r in results
                        if r["experiment"] == "appel-li/trap+prot1+unprot"
                        and r["mechanism"] == m and r.get("reason")), None)
            rows.append({"label": f"this machine, {m}", "prot1": p1 / add if p1 else None,
                         "protn": pn / add if pn else None, "today": True, "reason": why})
    return rows


def derived(results, seeds):
    out = []
    add = median(results, "appel-li/add", "cpu")
    cyc = cycle_ns(results)
    # Figure 2, this machine
    for f in figure2(results, seeds):
        if not f["today"]:
            continue
        mech = f["label"].split(", ", 1)[1]
        for bench, v in (("prot1", f["prot1"]), ("protn", f["protn"])):
            out.append(result("appel-li/figure2", mech, {"benchmark": bench}, "ratio", "adds", v,
                              ["appel-li/add", f"appel-li/trap+{bench}+unprot"],
                              f.get("reason") or "not measured for this mechanism"))

    # Appel & Li section 3: heap-overflow detection by a guard page instead
    # of a compare and branch per allocation.  The guard page pays one TRAP
    # per collection; the check pays two instructions per allocation.  The
    # guard wins when a collection comes after more than TRAP / (2 ADD)
    # allocations.
    for m in sorted({r["mechanism"] for r in results if r["experiment"] == "appel-li/trap"}):
        trap = median(results, "appel-li/trap", m)
        v = trap / (2 * add) if trap and add else None
        out.append(result("analysis/heap-overflow-breakeven", m, {}, "count", "allocations", v,
                          ["appel-li/trap", "appel-li/add"],
                          "no TRAP figure for this mechanism"))

    # The seed's worked example: a 64 KiB allocation area of 8-byte cells,
    # one allocation per 50 instructions; the check costs 2 instructions per
    # allocation, the guard page one TRAP per area (the seed: 4% vs 0.3%).
    ho = seeds.get("appel-li", {}).get("heap-overflow", {})
    if ho and add:
        cells = ho["region_bytes"] / ho["cell_bytes"]
        work = cells * ho["instructions_per_allocation"]
        out.append(result("analysis/heap-overflow-overhead", "cpu", {"detection": "check"},
                          "ratio", "%", 100.0 * ho["check_instructions"] /
                          ho["instructions_per_allocation"], ["seed section 3"]))
        for m in sorted({r["mechanism"] for r in results if r["experiment"] == "appel-li/trap"}):
            trap = median(results, "appel-li/trap", m)
            v = 100.0 * (trap / add) / work if trap else None
            out.append(result("analysis/heap-overflow-overhead", m, {"detection": "guard-page"},
                              "ratio", "%", v, ["appel-li/trap", "appel-li/add",
                                                "seed section 3"],
                              "no TRAP figure for this mechanism"))

    # Thekkath & Levy Figures 3-4: pointer swizzling by exceptions beats a
    # software residency check of c cycles used u times when c*u exceeds the
    # exception's cost in cycles.  Here: the write-protection round trip.
    for m in sorted({r["mechanism"] for r in results if r["experiment"] ==
                     "thekkath-levy/round-trip"}):
        rt = median(results, "thekkath-levy/round-trip", m,
                    exception="write-protection")
        v = rt / cyc if rt and cyc else None
        out.append(result("analysis/swizzling-breakeven", m, {"c_times_u": "cycles"}, "count",
                          "cycles", v,
                          ["thekkath-levy/round-trip",
                           "machine/cycle"], "no round-trip figure for this mechanism"))
        for c in (1, 2, 5, 10):
            out.append(result("analysis/swizzling-breakeven-uses", m, {"check_cycles": c},
                              "count", "uses", v / c if v else None,
                              ["analysis/swizzling-breakeven"],
                              "no round-trip figure for this mechanism"))
    out += table5(results, seeds)

    # Jaleel & Jacob: what append and prepend save against traditional, per
    # workload and TLB size (Figures 3 and 5 as percentages, as the text
    # gives them)
    jj = [r for r in results if r["experiment"] == "jaleel-jacob/cpi"
          and r["mechanism"] == "traditional"]
    for base in jj:
        p = base["params"]
        for m in ("append", "prepend"):
            cpi = median(results, "jaleel-jacob/cpi", m, **p)
            out.append(result("analysis/jaleel-jacob-time-cut", m, dict(p), "percent", "%",
                              100 * (1 - cpi / base["median"]) if cpi and base["median"] else None,
                              ["jaleel-jacob/cpi"], "no CPI for this configuration"))
            f0 = median(results, "jaleel-jacob/flushed-per-miss", "traditional", **p)
            f1 = median(results, "jaleel-jacob/flushed-per-miss", m, **p)
            out.append(result("analysis/jaleel-jacob-flushed-cut", m, dict(p), "percent", "%",
                              100 * (1 - f1 / f0) if f0 and f1 is not None else None,
                              ["jaleel-jacob/flushed-per-miss"], "no TLB miss in this configuration"))

    # Gylfason & Hjalmtysson Table 2: each part's share of a one-frame throw
    parts = ("allocation", "search", "cleanup", "install", "catch")
    for m in ("libgcc", "trapkit"):
        vals = {p: median(results, "gylfason/breakdown", m, part=p) for p in parts}
        total = sum(v for v in vals.values() if v)
        for p in parts:
            v = vals[p]
            out.append(result("analysis/gylfason-table2-share", m, {"part": p}, "share", "%",
                              100 * v / total if v is not None and total else None,
                              ["gylfason/breakdown"],
                              "one phase: no search of its own" if m == "trapkit" and p == "search"
                              else "no breakdown for this runtime"))
    return out


def table5(results, seeds):
    """Thekkath & Levy Table 5: store checks against page-protection
    exceptions for generational GC, with Hosking & Moss's counts."""
    t5 = seeds.get("thekkath-levy", {}).get("table5", {})
    consts = t5.get("inputs") if isinstance(t5, dict) else None
    out = []
    if not consts:
        return out
    cyc = cycle_ns(results)
    # y < c*x / (f*t): the exception cost below which page protection wins,
    # in today's cycles.
    for c in consts:
        stores, pages = c.get("stores"), c.get("pages_dirtied")
        check = c.get("check_cycles", 5)
        if cyc and stores and pages:
            out.append(result("analysis/table5-breakeven", "cpu",
                              {"program": c.get("program", "?"), "check_cycles": check},
                              "latency", "ns", stores * check * cyc / pages,
                              ["machine/cycle", "seed table 5 counts"]))
    for m in sorted({r["mechanism"] for r in results
                     if r["experiment"] == "thekkath-levy/deliver-wp"}):
        exc = median(results, "thekkath-levy/round-trip", m,
                     exception="write-protection")
        for c in consts:
            stores, pages = c.get("stores"), c.get("pages_dirtied")
            check = c.get("check_cycles", 5)
            if not (exc and cyc and stores and pages):
                continue
            checks_cost = stores * check
            exc_cost = pages * exc / cyc
            out.append(result("analysis/table5-exceptions-over-checks", m,
                              {"program": c.get("program", "?")}, "ratio", "x",
                              exc_cost / checks_cost,
                              ["thekkath-levy/round-trip",
                               "machine/cycle", "seed table 5 counts"]))
    return out


# ------------------------------------------------------------ goals
def best(results, exp, **params):
    cands = [r for r in results if r["experiment"] == exp and r["mechanism"] not in NOT_CANDIDATES
             and r["median"] is not None
             and all(r["params"].get(k) == v for k, v in params.items())]
    return min(cands, key=lambda r: r["median"]) if cands else None


def mosberger_goal(results, note):
    """hyb-jump within 2 cycles per sequence of unprotected (every test),
    at least 500x cheaper than sigprocmask and 3x cheaper than cas (the
    null test: the cost of the protection alone, the paper's overhead per
    sequence)."""
    m = {(t, k): median(results, f"mosberger/{t}", k)
         for t in ("null", "lifo", "fifo") for k in ("unprotected", "hyb-jump", "sigprocmask", "cas")}
    if any(m[(t, k)] is None for t in ("null", "lifo", "fifo") for k in ("unprotected", "hyb-jump")):
        return None
    per_seq = {t: (m[(t, "hyb-jump")] - m[(t, "unprotected")]) / (1 if t == "null" else 2)
               for t in ("null", "lifo", "fifo")}
    worst = max(per_seq.values())
    vs_mask = m[("null", "sigprocmask")] / m[("null", "hyb-jump")] if m[("null", "sigprocmask")] else None
    vs_cas = m[("null", "cas")] / m[("null", "hyb-jump")] if m[("null", "cas")] else None
    met = worst <= 2 and (vs_mask or 0) >= 500 and (vs_cas or 0) >= 3
    return {"goal": "hyb-jump within 2 cycles per sequence of unprotected, ≥ 500× cheaper than "
                    "sigprocmask and ≥ 3× cheaper than cas", "ratio": worst,
            "measured": f"{worst:+.2f} cycles per sequence at worst (null {per_seq['null']:+.2f}, "
                        f"lifo {per_seq['lifo']:+.2f}, fifo {per_seq['fifo']:+.2f}); "
                        f"{vs_mask or 0:.0f}× cheaper than sigprocmask and {vs_cas or 0:.1f}× than cas "
                        f"on the null sequence ({m[('null', 'hyb-jump')]:.2f} vs "
                        f"{m[('null', 'sigprocmask')] or 0:.0f} and {m[('null', 'cas')] or 0:.1f} "
                        f"cycles){note}", "met": met}


def gylfason_goal(results, note):
    """trapkit's throw against libgcc's: a one-frame throw at most 0.2x,
    each extra frame at most 0.15x, each frame with a destructor at most
    0.3x (per-frame costs: the slope from 1 to 20 frames)."""
    def t(exp, mech, frames):
        return median(results, exp, mech, frames=frames)

    one = {m: t("gylfason/throw-int", m, 1) for m in ("libgcc", "trapkit")}
    per = {m: (t("gylfason/throw-int", m, 20), t("gylfason/throw-int", m, 1))
           for m in ("libgcc", "trapkit")}
    dtor = {m: (t("gylfason/throw-with-destructors", m, 20),
                t("gylfason/throw-with-destructors", m, 1)) for m in ("libgcc", "trapkit")}
    vals = list(one.values()) + [v for p in per.values() for v in p] + \
        [v for p in dtor.values() for v in p]
    if any(v is None for v in vals):
        return None
    slope = {m: (per[m][0] - per[m][1]) / 19 for m in per}
    dslope = {m: (dtor[m][0] - dtor[m][1]) / 19 for m in dtor}
    r1 = one["trapkit"] / one["libgcc"]
    rx = slope["trapkit"] / slope["libgcc"] if slope["libgcc"] > 0 else None
    rd = dslope["trapkit"] / dslope["libgcc"] if dslope["libgcc"] > 0 else None
    met = r1 <= 0.2 and rx is not None and rx <= 0.15 and rd is not None and rd <= 0.3
    return {"goal": "trapkit's throw ≤ 0.2× libgcc's through 1 frame, ≤ 0.15× per extra frame, "
                    "≤ 0.3× per frame with a destructor", "ratio": r1,
            "measured": f"1 frame {r1:.2f}× ({one['trapkit']:.0f} vs {one['libgcc']:.0f} ns); "
                        f"per extra frame {rx or 0:.2f}× ({slope['trapkit']:.1f} vs "
                        f"{slope['libgcc']:.1f} ns); per frame with a destructor {rd or 0:.2f}× "
                        f"({dslope['trapkit']:.1f} vs {dslope['libgcc']:.1f} ns){note}",
            "met": met}


def tksim_goal(results, note):
    """tksim simulates at least 2 million instructions per second per host
    core (the slowest workload's median; two runs share the two cores)."""
    speeds = {r["params"].get("workload"): r["median"] for r in results
              if r["experiment"] == "jaleel-jacob/sim-speed" and r["median"]}
    if not speeds:
        return None
    w, v = min(speeds.items(), key=lambda kv: kv[1])
    return {"goal": "tksim ≥ 2 million simulated instructions per second per host core",
            "ratio": v / 2e6,
            "measured": f"{v / 1e6:.2f} M/s at worst ({w}); "
                        + ", ".join(f"{k} {x / 1e6:.2f}" for k, x in sorted(speeds.items()))
                        + f" M/s{note}", "met": v >= 2e6}


def goals(results, quick):
    g = []
    note = " (quick run: rough)" if quick else ""

    b = best(results, "dirty/per-page", fraction=0.01)
    base = median(results, "dirty/per-page", BASELINE, fraction=0.01)
    if b and base:
        ratio = b["median"] / base
        g.append({"goal": "best dirty/per-page ≤ 0.1× posix at 1% dirtied", "ratio": ratio,
                  "measured": f"{ratio:.2f}× ({b['mechanism']}: {b['median']:.0f} ns vs posix "
                              f"{base:.0f} ns){note}", "met": ratio <= 0.1})

    b = best(results, "appel-li/trap+prot1+unprot")
    base = median(results, "appel-li/trap+prot1+unprot", BASELINE)
    if b and base:
        ratio = b["median"] / base
        extra = f", {b['params'].get('pages')} pages" if b["params"].get("pages") else ""
        g.append({"goal": "best appel-li/trap+prot1+unprot ≤ 0.5× posix", "ratio": ratio,
                  "measured": f"{ratio:.2f}× ({b['mechanism']}{extra}: {b['median']:.0f} ns vs "
                              f"posix {base:.0f} ns){note}", "met": ratio <= 0.5})

    # Thekkath & Levy: the fast return against the kernel's, a breakpoint
    rt = {m: find(results, "thekkath-levy/round-trip", m, exception="int3")
          for m in ("posix", "fast-signal")}
    if all(r and r["median"] for r in rt.values()):
        ratio = rt["fast-signal"]["median"] / rt["posix"]["median"]
        d = median(results, "thekkath-levy/deliver-simple", "fast-signal", exception="int3")
        ret = {m: median(results, "thekkath-levy/return", m, exception="int3")
               for m in ("posix", "fast-signal")}
        sc = median(results, "thekkath-levy/null-syscall", "posix")
        where = ""
        if d and ret["fast-signal"] and ret["posix"]:
            where = (f"; delivery {d:.0f} ns (the kernel: exception entry, signal frame with the "
                     f"XSAVE area, handler setup) is {100 * d / rt['fast-signal']['median']:.0f}% "
                     f"of the fast round trip; the return fell from {ret['posix']:.0f} to "
                     f"{ret['fast-signal']:.0f} ns and still makes one rt_sigprocmask"
                     + (f" (a null system call: {sc:.0f} ns)" if sc else ""))
        g.append({"goal": "fast-signal round trip ≤ 0.5× posix (thekkath-levy/round-trip, int3)",
                  "ratio": ratio,
                  "measured": f"{ratio:.2f}× ({rt['fast-signal']['median']:.0f} ns vs posix "
                              f"{rt['posix']['median']:.0f} ns){where}{note}",
                  "met": ratio <= 0.5})

    g += checkpoint_goals(results, note)

    rows = [r for r in results if r["experiment"] == "scale/prot1+unprot"]
    sizes = sorted({r["params"]["pages"] for r in rows})
    flat = []
    for m in sorted({r["mechanism"] for r in rows} - NOT_CANDIDATES):
        vals = [r["median"] for r in rows if r["mechanism"] == m]
        if vals and all(v is not None for v in vals) and len(vals) == len(sizes):
            flat.append((max(vals) / min(vals), m))
    if flat:
        ratio, m = min(flat)
        full = sizes and sizes[0] <= 1 and sizes[-1] >= 1000000
        rng = f"{sizes[0]:,} to {sizes[-1]:,} pages"
        g.append({"goal": "scale/prot1+unprot flat within 2× from 1 to 1,000,000 pages",
                  "ratio": ratio,
                  "measured": f"{ratio:.2f}× max/min for {m} over {rng}"
                              + ("" if full else " (not the full range)") + note,
                  "met": ratio <= 2 and bool(full)})
    mg = mosberger_goal(results, note)
    if mg:
        g.append(mg)
    gg = gylfason_goal(results, note)
    if gg:
        g.append(gg)
    tg = tksim_goal(results, note)
    if tg:
        g.append(tg)
    return g


CKPT_TRAPKIT = ("uffd-thread", "uffd-sigbus", "posix")


def checkpoint_goals(results, note):
    """The checkpoint issue's goals, at the largest size, SET, no pipelining."""
    rows = [r for r in results if r["experiment"].startswith("checkpoint/")]
    sizes = sorted({r["params"].get("size_gib") for r in rows if r["params"].get("size_gib")})
    if not sizes:
        return []
    size = sizes[-1]
    p = {"size_gib": size, "pipeline": 1, "command": "set"}

    def m(exp, mech, **extra):
        return median(results, exp, mech, **dict(p, **extra))
    cands = []
    for mech in CKPT_TRAPKIT:
        d, s = m("checkpoint/p99.9-during-snapshot", mech), m("checkpoint/p99.9-steady", mech)
        if d and s:
            cands.append((d / s, mech, d, s))
    g = []
    where = f"{size:g} GiB, SET, no pipelining"
    if cands:
        ratio, mech, d, s = min(cands)
        g.append({"goal": "checkpoint p99.9 during the snapshot ≤ 2× steady state",
                  "ratio": ratio, "measured": f"{ratio:.2f}× ({mech}: {d / 1e6:.2f} ms vs "
                                              f"{s / 1e6:.2f} ms steady; {where}){note}",
                  "met": ratio <= 2})
        red = m("checkpoint/p99.9-during-snapshot", "redis-fork")
        if red:
            r2 = d / red
            g.append({"goal": "checkpoint p99.9 during the snapshot ≤ 1/10 of redis-server's "
                              "during its BGSAVE", "ratio": r2,
                      "measured": f"{r2:.2f}× ({mech}: {d / 1e6:.2f} ms vs redis-server "
                                  f"{red / 1e6:.2f} ms; {where}){note}", "met": r2 <= 0.1})
    pp = {"size_gib": size, "pipeline": 1}
    worst = None
    for mech in CKPT_TRAPKIT:
        extra = median(results, "checkpoint/extra-memory", mech, **pp)
        pages = median(results, "checkpoint/pages-by-writers", mech, **pp)
        if extra is None or pages is None:
            continue
        bound = pages * 4096 + (16 << 20)
        ratio = extra / bound
        if worst is None or ratio > worst[0]:
            worst = (ratio, mech, extra, pages)
    if worst:
        ratio, mech, extra, pages = worst
        g.append({"goal": "checkpoint peak extra memory ≤ pages written during the snapshot "
                          "+ 16 MiB", "ratio": ratio,
                  "measured": f"worst {mech}: {extra / 2**20:.1f} MiB vs {pages:.0f} pages "
                              f"written + 16 MiB ({where}){note}", "met": ratio <= 1})
    return g


# ------------------------------------------------------------ seeds
def _cell(v):
    return "–" if v is None or v == "" else str(v)


def seeds_tables(seeds):
    """The seeds' own figures as [(title, header, rows)], rows of strings."""
    tables = []
    rows = seed_table1(seeds)
    if rows:
        cols = ["add", "trap", "trap+prot1+unprot", "trap+protn+unprot", "map2", "pagesize"]
        marks = {"estimated": "†", "mprotect-bug": "*"}
        body = []
        for r in rows:
            v, fl = r.get("values", {}), r.get("flags", {})
            body.append([str(r.get("machine", "")), str(r.get("os", ""))]
                        + [marks.get(fl.get(c), "") + _cell(v.get(c)) for c in cols])
        tables.append(("Appel & Li Table 1 (1991, µs; † estimated, * SunOS 4.0 mprotect "
                       "does not flush the TLB)", ["machine", "os"] + cols, body))
    for key, title in (("table1", "Thekkath & Levy Table 1 (1994, µs)"),
                       ("table2", "Thekkath & Levy Table 2 (1994, µs, 25 MHz R3000)")):
        t = seeds.get("thekkath-levy", {}).get(key)
        if not isinstance(t, dict) or not t.get("rows"):
            continue
        cols = t.get("columns", [])
        body = [[str(r.get("operation", ""))] + [_cell(r.get("values", {}).get(c)) for c in cols]
                for r in t["rows"]]
        tables.append((title, ["operation"] + cols, body))
    t = seeds.get("mosberger", {}).get("table1")
    if isinstance(t, dict) and t.get("rows"):
        cols = t.get("columns", [])
        body = [[str(r.get("technique", ""))] + [_cell(r.get("values", {}).get(c)) for c in cols]
                for r in t["rows"]]
        tables.append(("Mosberger, Druschel & Peterson Table 1 (1996, cycles per test)",
                       ["technique"] + cols, body))
    g = seeds.get("gylfason", {})
    if g.get("table3") and g.get("table4"):
        body = [[str(a["frames"]), _cell(b.get("us")), _cell(a.get("us"))]
                for a, b in zip(g["table3"]["rows"], g["table4"]["rows"])]
        tables.append(("Gylfason & Hjalmtysson Tables 3-4 (2004, µs per throw of an int, "
                       "Pentium 3 1 GHz)", ["frames", "GNU g++ runtime", "their runtime"], body))
    if g.get("table2"):
        body = [[r["portion"], _cell(r["pct"])] for r in g["table2"]["rows"]]
        tables.append(("Gylfason & Hjalmtysson Table 2 (where a GNU g++ throw's time goes)",
                       ["portion", "%"], body))
    if g.get("table1"):
        body = [[r["class"], _cell(r["depth"]), _cell(r["us"])] for r in g["table1"]["rows"]]
        tables.append(("Gylfason & Hjalmtysson Table 1 (dynamic_cast<B*>, µs)",
                       ["object", "depth", "µs"], body))
    jr = seeds.get("jaleel-jacob", {}).get("ranges")
    if jr:
        body = [[r["what"], (f"{_cell(r['low'])}" if r["low"] == r["high"]
                             else f"{_cell(r['low'])}-{_cell(r['high'])}") + " " + r["unit"]]
                for r in jr]
        tables.append(("Jaleel & Jacob, the ranges their text gives (2001, simulated Alpha "
                       "21264-like core)", ["what", "reported"], body))
    t5 = seeds.get("thekkath-levy", {}).get("table5", {})
    if isinstance(t5, dict) and t5.get("inputs"):
        body = [[str(c.get("program", "")), _cell(c.get("stores")), _cell(c.get("pages_dirtied")),
                 _cell(c.get("check_cycles")), "y < " + _cell(c.get("seed_breakeven_us")) + " µs"]
                for c in t5["inputs"]]
        tables.append(("Thekkath & Levy Table 5 (Hosking & Moss's counts, 25 MHz)",
                       ["program", "store checks (c)", "page exceptions (t)", "cycles per check (x)",
                        "break-even"], body))
    return tables


def seeds_html(seeds):
    out = []
    for title, header, rows in seeds_tables(seeds):
        out.append(f"<h3>{html.escape(title)}</h3><table><tr>"
                   + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>")
        for row in rows:
            out.append("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>")
        out.append("</table>")
    return "\n".join(out)


def seeds_md(seeds):
    out = []
    for title, header, rows in seeds_tables(seeds):
        out += ["", f"### {title}", "", "| " + " | ".join(header) + " |",
                "|" + "---|" * len(header)]
        out += ["| " + " | ".join(row) + " |" for row in rows]
    return out
