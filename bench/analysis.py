"""Derived figures for the trapkit report: the seeds' normalisations and
break-even analyses recomputed from this run's measurements, and the goals.

Every derived figure is a result like the measured ones (experiment,
mechanism, params, metric, unit, median, min, max, n), under `analysis/...`
or the seed's own id, with `"derived": true` and `derived_from` naming what
it was computed from (the report marks such rows).  A figure taken from a
paper is never a row for this machine: it goes in the seeds' tables.

Goals are decided on the spread of the repetitions, never on one median
(GOAL_RULE, which the report prints).
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


def result(exp, mech, params, metric, unit, value, derived_from, reason=None, note=None):
    r = {"experiment": exp, "mechanism": mech, "params": params, "metric": metric, "unit": unit,
         "median": value, "min": value, "max": value, "n": 1 if value is not None else 0,
         "derived": True, "derived_from": derived_from}
    if note:
        r["note"] = note
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
    # one allocation per 50 instructions; the guard page costs one TRAP per
    # area.  The seed's own figures (the check's 4%, the guard page's 0.3%)
    # are the paper's, not this machine's: they are in the seeds' tables,
    # never a row here.  This machine's guard-page row is derived from its
    # TRAP and ADD with the seed's workload.
    ho = seeds.get("appel-li", {}).get("heap-overflow", {})
    if ho and add:
        cells = ho["region_bytes"] / ho["cell_bytes"]
        work = cells * ho["instructions_per_allocation"]
        note = (f"this machine's TRAP in ADDs over the seed's workload (Appel & Li section 3: a "
                f"{ho['region_bytes'] // 1024} KiB area of {ho['cell_bytes']}-byte cells, one "
                f"allocation per {ho['instructions_per_allocation']} instructions)")
        for m in sorted({r["mechanism"] for r in results if r["experiment"] == "appel-li/trap"}):
            trap = median(results, "appel-li/trap", m)
            v = 100.0 * (trap / add) / work if trap else None
            out.append(result("analysis/heap-overflow-overhead", m, {"detection": "guard-page"},
                              "ratio", "%", v, ["appel-li/trap", "appel-li/add",
                                                "seed section 3"],
                              "no TRAP figure for this mechanism", note=note))

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
    out += gc_table5(results)

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
            # the share of what the misses cost (traditional against a
            # perfect TLB) that in-lining removes: the paper's "TLB-miss
            # overhead cut by 10-40%"
            perfect = median(results, "jaleel-jacob/cpi", "perfect-tlb",
                             workload=p.get("workload"), tlb_entries=0)
            over = base["median"] - perfect if perfect and base["median"] else None
            out.append(result("analysis/jaleel-jacob-overhead-cut", m, dict(p), "percent", "%",
                              100 * (base["median"] - cpi) / over if cpi and over and
                              over > 0.01 * base["median"] else None,
                              ["jaleel-jacob/cpi"],
                              "the misses cost under 1% of the run: nothing to cut"))
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
    out += zpage_derived(results)
    out += guard_derived(results)
    out += lazy_derived(results)
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
                              ["machine/cycle", "seed table 5 counts"],
                              note="Hosking & Moss's counts and the seed's cycles per check, at "
                                   "this machine's cycle time"))
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


def gc_table5(results):
    """Thekkath & Levy's Table 5 question on trapkit's own collector: for
    GCBench, the program's pointer stores (each a store check under the card
    barrier, at its measured cost) against the pages the page-table barrier
    reported written (each a trap, or pagemap-scan's in-kernel fault, at the
    cost dirty/per-page measured with 1% of a region written).  The
    break-even is the cost of a page's barrier at which the two are equal."""
    out = []
    check = median(results, "gc/store-check", "trapkit-cards", workload="gcbench")
    if check is None:
        return out
    for heap in (0, 1024):
        stores = median(results, "gc/pointer-stores", "trapkit-generational",
                        workload="gcbench", heap_mib=heap)
        pages = median(results, "gc/dirty-pages", "trapkit-generational",
                       workload="gcbench", heap_mib=heap)
        if not (stores and pages):
            continue
        p = {"workload": "gcbench", "heap_mib": heap}
        out.append(result("analysis/gc-breakeven", "cpu", p, "latency", "ns",
                          stores * check / pages,
                          ["gc/pointer-stores", "gc/dirty-pages", "gc/store-check"],
                          note=f"{stores:.3g} pointer stores at {check:.2f} ns each against "
                               f"{pages:.3g} written pages (generational, pagemap-scan)"))
        for m in sorted({r["mechanism"] for r in results
                         if r["experiment"] == "dirty/per-page"}):
            per = median(results, "dirty/per-page", m, fraction=0.01)
            if per is None:
                continue
            out.append(result("analysis/gc-traps-over-checks", m, p, "ratio", "x",
                              pages * per / (stores * check),
                              ["dirty/per-page", "gc/pointer-stores", "gc/dirty-pages",
                               "gc/store-check"]))
    return out


def ratio_result(exp, mech, params, num, den, derived_from, note=None):
    """num / den (two results) as a derived ratio: the ratio of the medians,
    ranging over the worst pairings of their [min, max] (the figures were
    measured side by side in one run, not paired per repetition); null with
    the missing input's reason where either has no figure."""
    a, b = Span.of(num), Span.of(den)
    if a is None or b is None or b.lo <= 0:
        why = next((r.get("reason") for r in (num, den) if r and r.get("reason")), None)
        return result(exp, mech, params, "ratio", "x", None, derived_from,
                      reason=why or "an input figure is missing", note=note)
    r = a / b
    out = result(exp, mech, params, "ratio", "x", r.med, derived_from, note=note)
    out.update(min=r.lo, max=r.hi, n=min(num.get("n", 1), den.get("n", 1)))
    return out


def zpage_derived(results):
    """Compressed paging (bench/zpage.c): each fault path's p50 fault-in
    over the same path serving a plain copy (uncompressed; the bare floor's
    lz4 over its own plain copy), per data set; trapkit's paths and zram's
    over the bare floor of the same kind (what the library adds; where the
    kernel's swap-in stands against any path through a signal); lz4's
    Zipfian throughput over zram's under each budget."""
    out = []
    exp = "zpage/fault-in-p50"
    for d in sorted({r["params"]["data"] for r in results if r["experiment"] == exp},
                    key=lambda d: (ZPAGE_DATA.index(d) if d in ZPAGE_DATA else 9, d)):
        def measured(ratio_exp, m):
            """(bench/zpage.c pairs each repetition's figures itself)"""
            return find(results, ratio_exp, m, data=d) is not None

        base = find(results, exp, "uncompressed", data=d)
        for m in ("lz4", "lz4-thread", "zstd", "zram"):
            r = find(results, exp, m, data=d)
            if r and not measured("zpage/fault-in-p50-over-uncompressed", m):
                out.append(ratio_result("zpage/fault-in-p50-over-uncompressed", m, {"data": d},
                                        r, base, [exp]))
        floor, floor_lz4 = (find(results, exp, m, data=d)
                            for m in ("bare-sigbus", "bare-sigbus-lz4"))
        if (floor_lz4 and floor_lz4.get("median") is not None
                and not measured("zpage/fault-in-p50-over-uncompressed", "bare-sigbus-lz4")):
            out.append(ratio_result("zpage/fault-in-p50-over-uncompressed", "bare-sigbus-lz4",
                                    {"data": d}, floor_lz4, floor, [exp]))
        for m, den in (("uncompressed", floor), ("lz4", floor_lz4), ("zram", floor_lz4)):
            r = find(results, exp, m, data=d)
            if (r and den and den.get("median") is not None
                    and not measured("zpage/fault-in-p50-over-bare", m)):
                out.append(ratio_result("zpage/fault-in-p50-over-bare", m, {"data": d}, r, den,
                                        [exp]))
    exp = "zpage/zipf-throughput"
    for b in ("100%", "50%", "25%"):
        r = find(results, exp, "lz4", budget=b)
        if find(results, "zpage/zipf-throughput-over-zram", "lz4", budget=b):
            continue  # (measured, paired per repetition)
        if r:
            out.append(ratio_result("zpage/zipf-throughput-over-zram", "lz4", {"budget": b}, r,
                                    find(results, exp, "zram", budget=b), [exp]))
    return out


# Wasmtime's published comparison (shared NOTES.md), as a time ratio: never a
# row for this machine, only a note beside its rows
WASMTIME_NOTE = ("Wasmtime reports guard pages 2.09× faster than explicit bounds checks "
                 "(1.6-1.8× after check elimination): 0.48 (0.56-0.63) as this ratio; the "
                 "published figure, not measured here")


def guard_derived(results):
    """Guard pages (bench/guard.c): guard-page (and the hoisted no-check
    bound) over explicit-check, for the arena and the sandbox kernel; each
    sandbox path's ops/s with 2 threads over 1 thread's."""
    out = []
    for exp, mechs in (("guard/arena", ("guard-page", "no-check")),
                       ("guard/sandbox-kernel", ("guard-page",))):
        for r in [r for r in results if r["experiment"] == exp and r["mechanism"] in mechs]:
            out.append(ratio_result(f"{exp}-over-explicit-check", r["mechanism"],
                                    dict(r["params"]), r,
                                    find(results, exp, "explicit-check", **r["params"]), [exp],
                                    note=WASMTIME_NOTE if r["mechanism"] == "guard-page"
                                    else None))
    exp = "guard/sandbox-create"
    for m in ("mprotect", "madv-guard", "uffd"):
        for op in ("create", "reset"):
            one = find(results, exp, m, threads=1, op=op)
            if one:
                out.append(ratio_result("guard/sandbox-create-scaling", m, {"op": op},
                                        find(results, exp, m, threads=2, op=op), one, [exp],
                                        note="ops/s of 2 threads over 1 thread's (2 is perfect "
                                             "scaling)"))
    return out


def lazy_derived(results):
    """Lazy structures (bench/lazy.c): each trap figure over the explicit
    check's for the same structure or cell state."""
    out = []
    for exp in ("lazy/materialise", "lazy/future-read"):
        for r in [r for r in results if r["experiment"] == exp and r["mechanism"] == "trap"]:
            p = {k: v for k, v in r["params"].items() if k != "backend"}
            out.append(ratio_result(f"{exp}-over-explicit-check", "trap", dict(r["params"]), r,
                                    find(results, exp, "explicit-check", **p), [exp]))
    return out


# ------------------------------------------------------------ goals
GOAL_RULE = (
    "A goal is decided on the spread of the repetitions, never on one median: it is met only if "
    "it holds over the whole range of the measured figure (for an upper bound such as ≤ 0.5×, "
    "the range's max meets it), not met if it fails over the whole range, and not decided if the "
    "range straddles the goal or an input is a single run whose spread is unknown. A ratio of "
    "two figures measured side by side ranges over the worst pairings of their min and max; "
    "where the benchmark pairs each repetition (the fast return against posix's, interleaved), "
    "the range of the paired ratios is used. Each goal shows the median, then the range in "
    "brackets.")

MET, NOT_MET, UNDECIDED = "met", "not met", "not decided"


class Span:
    """A figure as median with [lo, hi], and whether it is a single run."""

    def __init__(self, med, lo, hi, single=False):
        self.med, self.lo, self.hi, self.single = med, lo, hi, single

    @classmethod
    def of(cls, r):
        """From a result (None if it has no median)."""
        if r is None or r.get("median") is None:
            return None
        m = r["median"]
        lo = r.get("min") if r.get("min") is not None else m
        hi = r.get("max") if r.get("max") is not None else m
        return cls(m, lo, hi, r.get("n", 1) < 2)

    def __truediv__(self, o):
        """Independent figures: the worst pairings of their ranges."""
        lo = self.lo / o.hi if o.hi else float("inf")
        hi = self.hi / o.lo if o.lo > 0 else float("inf")
        return Span(self.med / o.med if o.med else float("inf"), lo, hi,
                    self.single or o.single)

    def __sub__(self, o):
        return Span(self.med - o.med, self.lo - o.hi, self.hi - o.lo, self.single or o.single)

    def scale(self, k):
        return Span(self.med * k, self.lo * k, self.hi * k, self.single)

    def text(self, fmt="{:.2f}", suffix=""):
        return (f"{fmt.format(self.med)}{suffix} [{fmt.format(self.lo)}–{fmt.format(self.hi)}]"
                + (" (one run)" if self.single else ""))


def decide(span, target, upper=True):
    """met / not met / not decided for span against an upper (≤) or lower (≥) bound."""
    if span.single:
        return UNDECIDED
    if upper:
        return MET if span.hi <= target else NOT_MET if span.lo > target else UNDECIDED
    return MET if span.lo >= target else NOT_MET if span.hi < target else UNDECIDED


def combine(*statuses):
    if NOT_MET in statuses:
        return NOT_MET
    return MET if all(st == MET for st in statuses) else UNDECIDED


def goal(text, span, status, measured):
    return {"goal": text, "ratio": span.med, "ratio_min": span.lo, "ratio_max": span.hi,
            "measured": measured, "status": status,
            "met": True if status == MET else False if status == NOT_MET else None}


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
    m = {(t, k): Span.of(find(results, f"mosberger/{t}", k))
         for t in ("null", "lifo", "fifo") for k in ("unprotected", "hyb-jump", "sigprocmask", "cas")}
    if any(m[(t, k)] is None for t in ("null", "lifo", "fifo") for k in ("unprotected", "hyb-jump")):
        return None
    per_seq = {t: (m[(t, "hyb-jump")] - m[(t, "unprotected")]).scale(1 if t == "null" else 0.5)
               for t in ("null", "lifo", "fifo")}
    worst = Span(max(v.med for v in per_seq.values()), max(v.lo for v in per_seq.values()),
                 max(v.hi for v in per_seq.values()), any(v.single for v in per_seq.values()))
    hyb = m[("null", "hyb-jump")]
    vs_mask = m[("null", "sigprocmask")] / hyb if m[("null", "sigprocmask")] else None
    vs_cas = m[("null", "cas")] / hyb if m[("null", "cas")] else None
    status = combine(decide(worst, 2),
                     decide(vs_mask, 500, upper=False) if vs_mask else NOT_MET,
                     decide(vs_cas, 3, upper=False) if vs_cas else NOT_MET)
    return goal("hyb-jump within 2 cycles per sequence of unprotected, ≥ 500× cheaper than "
                "sigprocmask and ≥ 3× cheaper than cas", worst, status,
                f"{worst.text('{:+.2f}')} cycles per sequence at worst (null "
                f"{per_seq['null'].med:+.2f}, lifo {per_seq['lifo'].med:+.2f}, fifo "
                f"{per_seq['fifo'].med:+.2f}); "
                + (f"{vs_mask.text('{:.0f}', '×')} cheaper than sigprocmask" if vs_mask
                   else "no sigprocmask figure")
                + " and " + (f"{vs_cas.text('{:.1f}', '×')} than cas" if vs_cas else
                             "no cas figure")
                + f" on the null sequence ({hyb.med:.2f} cycles){note}")


def gylfason_goal(results, note):
    """trapkit's throw against libgcc's: a one-frame throw at most 0.2x,
    each extra frame at most 0.15x, each frame with a destructor at most
    0.3x (per-frame costs: the slope from 1 to 20 frames)."""
    def t(exp, mech, frames):
        return Span.of(find(results, exp, mech, frames=frames))

    one = {m: t("gylfason/throw-int", m, 1) for m in ("libgcc", "trapkit")}
    per = {m: (t("gylfason/throw-int", m, 20), t("gylfason/throw-int", m, 1))
           for m in ("libgcc", "trapkit")}
    dtor = {m: (t("gylfason/throw-with-destructors", m, 20),
                t("gylfason/throw-with-destructors", m, 1)) for m in ("libgcc", "trapkit")}
    vals = list(one.values()) + [v for p in per.values() for v in p] + \
        [v for p in dtor.values() for v in p]
    if any(v is None for v in vals):
        return None
    slope = {m: (per[m][0] - per[m][1]).scale(1 / 19) for m in per}
    dslope = {m: (dtor[m][0] - dtor[m][1]).scale(1 / 19) for m in dtor}
    r1 = one["trapkit"] / one["libgcc"]
    rx = slope["trapkit"] / slope["libgcc"] if slope["libgcc"].med > 0 else None
    rd = dslope["trapkit"] / dslope["libgcc"] if dslope["libgcc"].med > 0 else None
    status = combine(decide(r1, 0.2), decide(rx, 0.15) if rx else NOT_MET,
                     decide(rd, 0.3) if rd else NOT_MET)
    return goal("trapkit's throw ≤ 0.2× libgcc's through 1 frame, ≤ 0.15× per extra frame, "
                "≤ 0.3× per frame with a destructor", r1, status,
                f"1 frame {r1.text(suffix='×')} ({one['trapkit'].med:.0f} vs "
                f"{one['libgcc'].med:.0f} ns); per extra frame "
                + (rx.text(suffix='×') if rx else "–")
                + f" ({slope['trapkit'].med:.1f} vs {slope['libgcc'].med:.1f} ns); per frame "
                "with a destructor " + (rd.text(suffix='×') if rd else "–")
                + f" ({dslope['trapkit'].med:.1f} vs {dslope['libgcc'].med:.1f} ns){note}")


def tksim_goal(results, note):
    """tksim simulates at least 10 million instructions per second of its
    own CPU time on its slowest workload (getrusage: two runs share the two
    cores, so wall-clock time says less)."""
    speeds = {r["params"].get("workload"): Span.of(r) for r in results
              if r["experiment"] == "jaleel-jacob/sim-speed" and r["median"]
              and r["params"].get("clock", "cpu") == "cpu"}
    if not speeds:
        return None
    w, v = min(speeds.items(), key=lambda kv: kv[1].med)
    slowest = Span(v.med, min(x.lo for x in speeds.values()), min(x.hi for x in speeds.values()),
                   any(x.single for x in speeds.values()))
    return goal("tksim ≥ 10 million simulated instructions per second of its CPU time",
                slowest.scale(1 / 10e6), decide(slowest, 10e6, upper=False),
                f"{slowest.scale(1e-6).text()} M/s at worst ({w}); "
                + ", ".join(f"{k} {x.med / 1e6:.2f}" for k, x in sorted(speeds.items()))
                + f" M/s{note}")


def ratio_goal(results, text, exp, target, note, **params):
    """The best candidate mechanism's median over posix's, decided on the
    ranges."""
    b = best(results, exp, **params)
    base = find(results, exp, BASELINE, **params)
    if not b or not base or base.get("median") is None:
        return None
    r = Span.of(b) / Span.of(base)
    extra = f", {b['params'].get('pages')} pages" if b["params"].get("pages") else ""
    return goal(text, r, decide(r, target),
                f"{r.text(suffix='×')} ({b['mechanism']}{extra}: {b['median']:.0f} ns "
                f"[{b['min']:.0f}–{b['max']:.0f}] vs posix {base['median']:.0f} ns "
                f"[{base['min']:.0f}–{base['max']:.0f}]){note}")


def fast_return_goal(results, note):
    """Thekkath & Levy: the fast return against the kernel's, a breakpoint;
    decided on the paired ratios of the interleaved repetitions."""
    rt = {m: find(results, "thekkath-levy/round-trip", m, exception="int3")
          for m in ("posix", "fast-signal")}
    if not all(r and r["median"] for r in rt.values()):
        return None
    paired = find(results, "thekkath-levy/round-trip-ratio", "fast-signal", exception="int3")
    if paired and paired.get("median") is not None:
        r, how = Span.of(paired), f"paired over {paired['n']} interleaved repetitions"
    else:
        r, how = Span.of(rt["fast-signal"]) / Span.of(rt["posix"]), "ratio of the ranges"
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
    f, p = rt["fast-signal"], rt["posix"]
    return goal("fast-signal round trip ≤ 0.5× posix (thekkath-levy/round-trip, int3)", r,
                decide(r, 0.5),
                f"{r.text(suffix='×')} ({how}; {f['median']:.0f} ns [{f['min']:.0f}–"
                f"{f['max']:.0f}] vs posix {p['median']:.0f} ns [{p['min']:.0f}–{p['max']:.0f}])"
                f"{where}{note}")


def scale_goal(results, note):
    """PROT1+UNPROT flat within 2x from 1 to 1,000,000 pages, in the main
    series (pages populated), with every thread count measured here."""
    rows = [r for r in results if r["experiment"] == "scale/prot1+unprot"
            and r["params"].get("populated", True)]
    sizes = sorted({r["params"]["pages"] for r in rows})
    threads = sorted({r["params"].get("threads", 1) for r in rows if r["median"] is not None})
    flat = []
    for m in sorted({r["mechanism"] for r in rows} - NOT_CANDIDATES):
        worst = None
        for t in threads:
            vals = [Span.of(r) for r in rows if r["mechanism"] == m
                    and r["params"].get("threads", 1) == t]
            if len(vals) != len(sizes) or any(v is None for v in vals):
                worst = None
                break
            # max/min over the sizes: from the medians, and over the ranges
            sp = Span(max(v.med for v in vals) / min(v.med for v in vals),
                      max(1.0, max(v.lo for v in vals) / min(v.hi for v in vals)),
                      max(v.hi for v in vals) / min(v.lo for v in vals),
                      any(v.single for v in vals))
            if worst is None or sp.med > worst[0].med:
                worst = (sp, t)
        if worst:
            flat.append((worst[0].med, m, worst[0], worst[1]))
    if not flat:
        return None
    _, m, sp, t = min(flat)
    full = sizes and sizes[0] <= 1 and sizes[-1] >= 1000000
    status = decide(sp, 2) if full else UNDECIDED
    return goal("scale/prot1+unprot (pages populated) flat within 2× from 1 to 1,000,000 pages",
                sp, status,
                f"{sp.text(suffix='×')} max/min for {m} over {sizes[0]:,} to {sizes[-1]:,} "
                f"pages (worst of {', '.join(map(str, threads))} thread(s): {t})"
                + ("" if full else " (not the full range)") + note)


def goals(results, quick):
    note = " (quick run: rough)" if quick else ""
    g = [ratio_goal(results, "best dirty/per-page ≤ 0.1× posix at 1% dirtied", "dirty/per-page",
                    0.1, note, fraction=0.01),
         ratio_goal(results, "best appel-li/trap+prot1+unprot ≤ 0.5× posix",
                    "appel-li/trap+prot1+unprot", 0.5, note),
         fast_return_goal(results, note)]
    g += checkpoint_goals(results, note)
    g += restore_goals(results, note)
    g += [scale_goal(results, note), mosberger_goal(results, note), gylfason_goal(results, note),
          tksim_goal(results, note)]
    g += gc_goals(results, note)
    g += pheap_goals(results, note)
    g += dsm_goals(results, note)
    g += zpage_goals(results, note)
    g += [kernel_fastexc_goal(results), kernel_cxx_goal(results)]
    return [x for x in g if x]


def kernel_cxx_goal(results):
    """Gylfason & Hjalmtysson in the kernel (kernel/cxx): a one-frame throw
    with the runtime's three optimisations against none of them, in the
    same guest, in instructions; the seed cut 12.70 to 2.14 µs (0.169×)."""
    def t(mech, frames):
        r = find(results, "gylfason/kernel-throw-int", mech, frames=frames, where="kernel")
        return r["median"] if r and r["median"] else None
    on, off = t("tkcxx", 1), t("tkcxx-unoptimised", 1)
    if not (on and off):
        return None
    r = on / off
    per = ""
    on20, off20 = t("tkcxx", 20), t("tkcxx-unoptimised", 20)
    if on20 and off20:
        per = (f"; a frame more costs {(on20 - on) / 19:.0f} vs {(off20 - off) / 19:.0f} "
               f"(the seed: 0.35 vs 2.5 µs)")
    user = find(results, "gylfason/kernel-throw-int", "libgcc", frames=1, where="user")
    return goal("kernel C++ throw through one frame with the seed's three optimisations ≤ 0.169× "
                "its time without them (the seed's 2.14/12.70 µs; make kernel-test)", Span(r, r, r),
                MET if r <= 0.169 else NOT_MET,
                f"{r:.3f}× ({on:.0f} vs {off:.0f} instructions" + per
                + (f"; libgcc in a process of the guest: {user['median']:.0f}" if user else "")
                + ")")


def kernel_fastexc_goal(results):
    """Thekkath & Levy's kernel half (kernel/fastexc): the fast round trip
    against the stock signal's in the same guest, in instructions (qemu
    -icount: the counts repeat exactly, so the medians decide)."""
    rt = {m: find(results, "thekkath-levy/kernel-round-trip", m, kernel="fastexc")
          for m in ("fast-kernel", "signal+sigreturn", "signal+user-return")}
    f, s = rt["fast-kernel"], rt["signal+sigreturn"]
    if not (f and s and f["median"] and s["median"]):
        return None
    r = f["median"] / s["median"]
    u = rt["signal+user-return"]
    stock = find(results, "thekkath-levy/kernel-round-trip", "signal+sigreturn", kernel="debian12")
    return goal("fast-kernel round trip ≤ 0.25× the stock signal's, in instructions "
                "(make kernel-test)", Span(r, r, r), MET if r <= 0.25 else NOT_MET,
                f"{r:.3f}× ({f['median']:.0f} vs {s['median']:.0f} instructions in the patched "
                f"guest" + (f"; signal with trapkit's user-mode return {u['median']:.0f}" if u
                             else "")
                + (f"; Debian's own kernel: signal {stock['median']:.0f}" if stock else "")
                + ")")


def span_of(results, exp, mech, **params):
    """The Span of the result of exp for mech with these params, or None."""
    for r in results:
        if (r["experiment"] == exp and r["mechanism"] == mech and r["median"] is not None
                and all(r["params"].get(k) == v for k, v in params.items())):
            return Span.of(r)
    return None


def dsm_goals(results, note):
    """The shared virtual memory (bench/dsm.py): a remote read fault against
    an MPI ping-pong of one page, and the kernels against their MPI
    versions at 2 ranks, each measured in the same run."""
    def fig(exp, mech, **params):
        return span_of(results, exp, mech, **params)

    def judge(cands, target):
        """(label, ratio, text after it) against an upper bound: the rows,
        the status of them all, the worst ratio."""
        worst = max((r for _, r, _ in cands), key=lambda r: r.med, default=None)
        return ([f"{label} {r.text(suffix='×')}{tail}" for label, r, tail in cands],
                combine(*(decide(r, target) for _, r, _ in cands)), worst)

    out = []
    pp = fig("dsm/page-pingpong", "mpi")
    cands = []
    for m in ("ivy", "rc"):
        t = fig("dsm/remote-read-fault", m)
        if t and pp:  # (paired per run where there is the figure)
            cands.append((m, fig("dsm/read-fault-over-pingpong", m) or t / pp,
                          f" ({t.med / 1e3:.1f} µs)"))
    rows, status, worst = judge(cands, 3)
    if worst:
        out.append(goal("dsm remote read fault ≤ 3× an MPI ping-pong of one page (one host, "
                        "TCP)", worst, status,
                        f"{'; '.join(rows)} vs ping-pong {pp.med / 1e3:.1f} µs (paired per run)"
                        f"{note}"))
    for m in ("ivy", "rc"):
        cands = []
        for k in ("daxpy", "stream", "matmul", "matvec", "jacobi"):
            t, b = fig("dsm/kernel-time", m, kernel=k, ranks=2), \
                fig("dsm/kernel-time", "mpi", kernel=k, ranks=2)
            if t and b:  # (paired per round where there is the figure)
                cands.append((k, fig("dsm/kernel-over-mpi", m, kernel=k, ranks=2) or t / b, ""))
        rows, status, worst = judge(cands, 1.5)
        if worst:
            out.append(goal(f"dsm kernels within 1.5× of their MPI versions at 2 ranks ({m})",
                            worst, status, f"{'; '.join(rows)} (paired per round){note}"))
    return out


ZPAGE_DATA = ("kv", "python", "doc")


def zpage_goals(results, note):
    """Compressed paging (bench/zpage.c) beside the kernel's zram, each a
    ratio of figures measured in the same run: lz4's p50 fault-in on the kv
    set against the same fault path serving a plain copy and against zram;
    lz4's compression ratio against zram's on every data set; Zipfian
    throughput with a budget of half the heap against zram swap in a
    memory cgroup of that limit.  A figure that could not be measured (zram
    needs root, /dev/zram0 and a memory cgroup) leaves its goal not decided,
    with the reason: never met."""
    if not any(r["experiment"].startswith("zpage/") for r in results):
        return []

    def missing(*named):
        """"not measured (...)" for the (label, result) pairs without a
        figure, else None."""
        whys = [f"{label}: {(r or {}).get('reason') or 'not run'}" for label, r in named
                if Span.of(r) is None]
        return f"not measured ({'; '.join(whys)})" if whys else None

    def us(r):
        return Span.of(r).scale(1e-3).text(suffix=" µs")

    def kops(r):
        return Span.of(r).scale(1e-3).text("{:.0f}", "k ops/s")

    def one(text, a_label, a, b_label, b, target, upper, show, extra=""):
        gone = missing((a_label, a), (b_label, b))
        if gone:
            return goal(text, Span(None, None, None, True), UNDECIDED, gone + note)
        r = Span.of(a) / Span.of(b)
        return goal(text, r, decide(r, target, upper),
                    f"{r.text(suffix='×')} ({a_label} {show(a)} vs {b_label} {show(b)})"
                    f"{extra}{note}")

    def p50(m, d="kv"):
        return find(results, "zpage/fault-in-p50", m, data=d)

    def over(exp, num, den, d="kv"):
        """The ratio num/den of the set d: bench/zpage.c's paired one (each
        repetition's figures over the same repetition's) where it measured
        it, else from the two figures' ranges.  (Span or None, how)"""
        r = find(results, f"zpage/fault-in-p50-over-{exp}", num, data=d)
        if r and not r.get("derived") and Span.of(r):
            return Span.of(r), " (paired per repetition)"
        a, b = Span.of(p50(num, d)), Span.of(p50(den, d))
        return (a / b if a and b else None), ""

    def paired(text, a_label, b_label, exp, target, extra=""):
        gone = missing((a_label, p50(a_label)), (b_label, p50(b_label)))
        r, how = over(exp, a_label, b_label)
        if gone or r is None:
            return one(text, a_label, p50(a_label), b_label, p50(b_label), target, True, us,
                       extra)
        return goal(text, r, decide(r, target, True),
                    f"{r.text(suffix='×')}{how} ({a_label} {us(p50(a_label))} vs {b_label} "
                    f"{us(p50(b_label))}){extra}{note}")

    others = []
    for d in ZPAGE_DATA[1:]:
        r, _ = over("uncompressed", "lz4", "uncompressed", d)
        if r:
            others.append(f"{d} {r.text(suffix='×')}")
    # for information: the floor of any path through a signal, no library
    fl_ratio, _ = over("uncompressed", "bare-sigbus-lz4", "bare-sigbus")
    floor_ratio = (f"; the bare floor's own lz4 over its plain copy {fl_ratio.text(suffix='×')}"
                   if fl_ratio else "")
    fl_lz4 = Span.of(p50("bare-sigbus-lz4"))
    zr_floor, _ = over("bare", "zram", "bare-sigbus-lz4")
    lz_floor, _ = over("bare", "lz4", "bare-sigbus-lz4")
    floor_zram = (f"; the bare floor without the library (bare-sigbus-lz4) "
                  f"{fl_lz4.scale(1e-3).text(suffix=' µs')}: lz4 {lz_floor.text(suffix='×')} "
                  f"of it, zram {zr_floor.text(suffix='×')}"
                  if fl_lz4 and zr_floor and lz_floor else "")
    out = [paired("zpage lz4 fault-in p50 ≤ 1.5× the same path serving an uncompressed copy "
                  "(data kv)", "lz4", "uncompressed", "uncompressed", 1.5,
                  (f"; for information {', '.join(others)}" if others else "") + floor_ratio),
           paired("zpage lz4 fault-in p50 ≤ zram's (data kv)", "lz4", "zram", "zram", 1,
                  floor_zram)]

    # the compression ratio on each data set: met only if met on all
    parts, statuses, worst = [], [], None
    for d in ZPAGE_DATA:
        a, b = (find(results, "zpage/ratio", m, data=d) for m in ("lz4", "zram"))
        gone = missing(("lz4", a), ("zram", b))
        if gone:
            parts.append(f"{d}: {gone}")
            statuses.append(UNDECIDED)
            continue
        r = Span.of(a) / Span.of(b)
        statuses.append(decide(r, 1, upper=False))
        parts.append(f"{d}: {r.text(suffix='×')} ({a['median']:.2f} vs {b['median']:.2f})")
        if worst is None or r.med < worst.med:
            worst = r
    out.append(goal("zpage lz4 compression ratio ≥ zram's on the same data (each data set: "
                    + ", ".join(ZPAGE_DATA) + ")", worst or Span(None, None, None, True),
                    combine(*statuses), "; ".join(parts) + note))

    def zipf(m):
        return find(results, "zpage/zipf-throughput", m, budget="50%")

    text = ("zpage Zipfian throughput with a budget of 50% of the heap ≥ 2× zram swap's in a "
            "memory cgroup of that limit")
    paired = find(results, "zpage/zipf-throughput-over-zram", "lz4", budget="50%")
    r = Span.of(paired) if paired and not paired.get("derived") else None
    if r and not missing(("lz4", zipf("lz4")), ("zram", zipf("zram"))):
        out.append(goal(text, r, decide(r, 2, upper=False),
                        f"{r.text(suffix='×')} (lz4 {kops(zipf('lz4'))} vs zram "
                        f"{kops(zipf('zram'))}) (paired per repetition){note}"))
    else:
        out.append(one(text, "lz4", zipf("lz4"), "zram", zipf("zram"), 2, False, kops))
    return out


PHEAP_TRAPKIT = ("trapkit-eager", "trapkit-lazy")


def pheap_goals(results, note):
    """The persistent heap against LMDB (bench/pheap.c), each figure the
    best trapkit mechanism's over LMDB's, measured in the same run."""
    def fig(exp, mech, **params):
        return span_of(results, exp, mech, **params)

    def best(exp, higher=True, **params):
        c = [(m, fig(exp, m, **params)) for m in PHEAP_TRAPKIT]
        c = [(m, x) for m, x in c if x]
        if not c:
            return None, None
        return (max if higher else min)(c, key=lambda mx: mx[1].med)

    out = []
    m, t = best("pheap/random-read")
    l = fig("pheap/random-read", "lmdb")
    if t and l:
        r = t / l
        out.append(goal("pheap random reads ≥ 1.5× LMDB's", r, decide(r, 1.5, upper=False),
                        f"{r.text(suffix='×')} ({m} {t.med / 1e6:.2f} vs LMDB "
                        f"{l.med / 1e6:.2f} M/s){note}"))
    # the stores in use (every record read first); the fresh figures, each
    # commit's pages the open's first touches, are in the table beside them
    m, t = best("pheap/durable-commit", store="warm")
    ls = [x for x in (fig("pheap/durable-commit", "lmdb", store="warm"),
                      fig("pheap/durable-commit", "lmdb-writemap", store="warm")) if x]
    if t and ls:
        l = max(ls, key=lambda x: x.med)
        r = t / l
        out.append(goal("pheap one-put durable commits ≥ 2× the faster of LMDB's default and "
                        "WRITEMAP modes", r, decide(r, 2, upper=False),
                        f"{r.text(suffix='×')} ({m} {t.med:.0f}/s vs {l.med:.0f}/s, the stores "
                        f"warm){note}"))
    m, t = best("pheap/cold-open-first-read", higher=False)
    l = fig("pheap/cold-open-first-read", "lmdb")
    if t and l:
        r = t / l
        out.append(goal("pheap cold open of a 1 GiB store to the first read ≤ 0.5× LMDB's "
                        "(page cache dropped)", r, decide(r, 0.5),
                        f"{r.text(suffix='×')} ({m} {t.med / 1e6:.1f} ms vs LMDB "
                        f"{l.med / 1e6:.1f} ms){note}"))
    lost = [r for r in results if r["experiment"] == "pheap/lost-commits"
            and r["median"] is not None]
    if lost:
        worst = max(r["max"] for r in lost)
        trials = sum(r["params"].get("trials", 0) * r.get("n", 1) for r in lost)
        out.append(goal("pheap: no commit lost or torn at kill -9", Span(worst, worst, worst),
                        MET if worst == 0 else NOT_MET,
                        f"{worst:.0f} lost over {trials} kill -9 trials (make soak runs 1,000 "
                        f"per mechanism){note}"))
    return out


GC_CONCURRENT = ("trapkit-pagemap-scan", "trapkit-uffd-sigbus", "trapkit-posix")
GC_TRAPKIT = ("trapkit", "trapkit-generational") + GC_CONCURRENT
# bench/gc.py's workloads besides GCBench, as the goals name them
GC_WORKLOADS = {"lisp": "Table 4's Lisp operations and array", "trees": "Table 5's trees",
                "interp": "a Scheme interpreter"}


def gc_workload(r):
    return r["params"].get("workload", "gcbench")


def gc_goals(results, note):
    """The collector's goals (bench/gc.py, ratios paired per round), for one
    trapkit configuration on all of them: the mostly-concurrent one (with a
    page-table barrier) that meets the most of them, the shorter GCBench
    total time breaking a tie - on every workload and heap, total time
    within 1.2x of bdwgc's (non-incremental); for GCBench, max pause at most
    1/5 of bdwgc incremental's; with the 1 GiB live heap, at most 1/10 of
    bdwgc non-incremental's; and for each other workload measured, max
    pause at most 1/5 of bdwgc incremental's.  A pause is, as
    the goals define it, the time the program's threads are stopped, from
    the stop request to the restart (gc/world-stopped: each collector's own
    account); beside it each row gives the longest gap between two
    allocations as the program saw it (gc/max-pause: the collector's work
    inside an allocation, bdwgc incremental's marking steps among it, and
    the machine's own stalls with both CPUs busy, gc/cpu-noise)."""
    cands = [r for r in results if r["experiment"] == "gc/world-stopped-over-bdwgc-incremental"
             and r["mechanism"] in GC_CONCURRENT and gc_workload(r) == "gcbench"
             and r["params"].get("heap_mib") == 0 and r["median"] is not None]
    if not cands:
        return []
    pause = "max pause (world stopped)"
    targets = [
        ("gc: GCBench total time ≤ 1.2× bdwgc's", "gc/total-time-over-bdwgc", None, 1.2,
         "gcbench", 0),
        (f"gc: GCBench {pause} ≤ 1/5 of bdwgc incremental's",
         "gc/world-stopped-over-bdwgc-incremental", "gc/max-pause-over-bdwgc-incremental", 0.2,
         "gcbench", 0),
        (f"gc: {pause} with a 1 GiB live heap ≤ 1/10 of bdwgc's", "gc/world-stopped-over-bdwgc",
         "gc/max-pause-over-bdwgc", 0.1, "gcbench", 1024)]
    targets += [("gc: total time with a 1 GiB live heap ≤ 1.2× bdwgc's",
                 "gc/total-time-over-bdwgc", None, 1.2, "gcbench", 1024)]
    for w, what in GC_WORKLOADS.items():
        targets += [(f"gc: {w} ({what}) {pause} ≤ 1/5 of bdwgc incremental's",
                     "gc/world-stopped-over-bdwgc-incremental",
                     "gc/max-pause-over-bdwgc-incremental", 0.2, w, 0),
                    (f"gc: {w} ({what}) total time ≤ 1.2× bdwgc's", "gc/total-time-over-bdwgc",
                     None, 1.2, w, 0)]
    noise = [r for r in results if r["experiment"] == "gc/cpu-noise" and r["median"] is not None]

    def goals_for(mech):
        return [x for x in (one(mech, *t) for t in targets) if x]

    def one(mech, text, exp, gap_exp, target, workload, heap):
        def rows_of(e):
            return [r for r in results if r["experiment"] == e and r["mechanism"] in GC_TRAPKIT
                    and gc_workload(r) == workload and r["params"].get("heap_mib") == heap
                    and r["median"] is not None]
        rows = rows_of(exp)
        b = [r for r in rows if r["mechanism"] == mech]
        if not b:
            return None
        sp = Span.of(b[0])
        extra = ""
        if gap_exp:
            gap = [r for r in rows_of(gap_exp) if r["mechanism"] == mech]
            if gap:
                extra = (f"; the longest allocation gap {Span.of(gap[0]).text(suffix='×')} of "
                         "bdwgc's")
                if noise:
                    extra += (f" (the machine alone stalls a busy thread up to "
                              f"{noise[0]['median'] / 1e6:.1f} ms)")
        return goal(text, sp, decide(sp, target),
                    f"{sp.text(suffix='×')} ({mech}, mostly-concurrent; "
                    + ", ".join(f"{r['mechanism']} {r['median']:.2f}×" for r in rows)
                    + ")" + extra + note)

    def total(mech):
        t = [r["median"] for r in results if r["experiment"] == "gc/total-time-over-bdwgc"
             and r["mechanism"] == mech and gc_workload(r) == "gcbench"
             and r["params"].get("heap_mib") == 0 and r["median"] is not None]
        return t[0] if t else float("inf")

    by = {m: goals_for(m) for m in sorted({r["mechanism"] for r in cands})}
    chosen = max(by, key=lambda m: (sum(x["status"] == MET for x in by[m]), -total(m)))
    return by[chosen]


CKPT_TRAPKIT = ("uffd-thread", "uffd-sigbus", "posix")
CKPT_LOAD = 0.5  # the goals are at 50% of the slower server's capacity
CKPT_SIZES = (1.0, 4.0)


def checkpoint_goals(results, note):
    """The checkpoint issue's goals, open-loop at 50% load, SET, at each
    size measured (1 and 4 GiB; what --quick measured otherwise), from the
    ratios bench/checkpoint.py pairs per round: the snapshot against the same
    run's steady phase, and against redis-server's run in the same round."""
    rows = [r for r in results if r["experiment"].startswith("checkpoint/")
            and r["params"].get("offered_load") == CKPT_LOAD]
    if not rows:
        return []
    sizes = sorted({r["params"]["size_gib"] for r in rows if "size_gib" in r["params"]})
    if not any(s in CKPT_SIZES for s in sizes):
        sizes = sizes[-1:]
    else:
        sizes = list(CKPT_SIZES)

    def fig(exp, mech, size, **extra):
        return find(results, exp, mech, size_gib=size, offered_load=CKPT_LOAD, **extra)

    # trapkit's best mechanism: the lowest p99.9 snapshot/steady ratio
    # (the report runs one, the probe's choice; --full runs them all)
    cands = []
    for mech in CKPT_TRAPKIT:
        meds = [Span.of(fig("checkpoint/p99.9-snapshot-over-steady", mech, s, command="set"))
                for s in sizes]
        meds = [m.med for m in meds if m]
        if meds:
            cands.append((max(meds), mech))
    if not cands:
        return []
    mech = min(cands)[1]

    def size_text(s):
        return f"{s:g} GiB"

    def one(text, exp, target, detail):
        """A goal over every size: met only if met at each."""
        parts, statuses, worst = [], [], None
        for s in sizes:
            r = fig(exp, mech, s, command="set")
            sp = Span.of(r)
            if sp is None:
                why = (r or {}).get("reason") or "not run"
                parts.append(f"{size_text(s)}: not measured ({why})")
                statuses.append(UNDECIDED)
                continue
            st = decide(sp, target)
            statuses.append(st)
            parts.append(f"{size_text(s)}: {sp.text(suffix='×')}{detail(s)}")
            if worst is None or sp.med > worst.med:
                worst = sp
        if worst is None:
            worst = Span(None, None, None, True)
        return goal(f"{text} ({mech}, open loop at {CKPT_LOAD:.0%} load, SET)", worst,
                    combine(*statuses), "; ".join(parts) + " (paired per round)" + note)

    def ms(exp, m, s):
        sp = Span.of(fig(exp, m, s, command="set"))
        return f"{sp.med / 1e6:.3g} ms" if sp else "–"

    g = [one("checkpoint p99.9 during the snapshot ≤ 2× its own steady p99.9",
             "checkpoint/p99.9-snapshot-over-steady", 2,
             lambda s: f" ({ms('checkpoint/p99.9-during-snapshot', mech, s)} vs "
                       f"{ms('checkpoint/p99.9-steady', mech, s)} steady)")]
    if any(r["mechanism"] == "redis-fork" for r in rows):
        g.append(one("checkpoint p99.9 during the snapshot ≤ 0.5× redis-server's during its "
                     "BGSAVE", "checkpoint/p99.9-snapshot-over-redis", 0.5,
                     lambda s: f" ({ms('checkpoint/p99.9-during-snapshot', mech, s)} vs "
                               f"{ms('checkpoint/p99.9-during-snapshot', 'redis-fork', s)})"))
        g.append(one("checkpoint max latency during the snapshot ≤ 0.1× redis-server's max "
                     "during its BGSAVE", "checkpoint/max-snapshot-over-redis", 0.1,
                     lambda s: f" ({ms('checkpoint/max-during-snapshot', mech, s)} vs "
                               f"{ms('checkpoint/max-during-snapshot', 'redis-fork', s)})"))

    # peak extra memory against the pages written during the snapshot, the
    # worst trapkit mechanism at the largest size measured.  The pages
    # written: the write faults (each a page the program wrote; pages it
    # wrote again after a fault opened them are not counted, so the bound is
    # the strict side), else (older results) the pages the writers copied,
    # which also counts the rest of each block a fault copied
    worst = None
    for size in reversed(sizes):
        for m in CKPT_TRAPKIT:
            extra = Span.of(fig("checkpoint/extra-memory", m, size))
            pages = Span.of(fig("checkpoint/write-faults", m, size)) or \
                Span.of(fig("checkpoint/pages-by-writers", m, size))
            if extra is None or pages is None:
                continue
            bound = Span(pages.med * 4096 + (16 << 20), pages.lo * 4096 + (16 << 20),
                         pages.hi * 4096 + (16 << 20), pages.single)
            r = extra / bound
            if worst is None or r.med > worst[0].med:
                worst = (r, m, extra, pages, size)
        if worst:
            break
    if worst:
        r, m, extra, pages, size = worst
        g.append(goal("checkpoint peak extra memory ≤ pages written during the snapshot + 16 MiB",
                      r, decide(r, 1),
                      f"{r.text(suffix='×')}: worst {m}: {extra.med / 2**20:.1f} MiB vs "
                      f"{pages.med:.0f} pages written + 16 MiB ({size:g} GiB, {CKPT_LOAD:.0%} "
                      f"load){note}"))
    return g


RESTORE_SIZE = 1.0  # the restore goals are for a 1 GiB image


def restore_goals(results, note):
    """Lazy restore against eager (bench/restore.py), with the image in the
    page cache and after dropping it, from the ratios paired per round: the
    first reply within 0.01x of the eager load time, fully resident within
    1.1x.  At 1 GiB (the largest size measured otherwise)."""
    rows = [r for r in results if r["experiment"].startswith("checkpoint/restore-")]
    if not rows:
        return []
    sizes = sorted({r["params"].get("size_gib") for r in rows})
    size = RESTORE_SIZE if RESTORE_SIZE in sizes else sizes[-1]
    g = []
    for text, exp, target in (
            ("lazy restore: first GET answered within 0.01× of the eager load time",
             "checkpoint/restore-first-reply", 0.01),
            ("lazy restore: fully resident within 1.1× of the eager load time",
             "checkpoint/restore-resident", 1.1)):
        parts, statuses, worst = [], [], None
        for cache in ("warm", "dropped"):
            r = find(results, exp + "-over-eager", "lazy", size_gib=size, cache=cache)
            sp = Span.of(r)
            if sp is None:
                why = (r or {}).get("reason") or "not run"
                parts.append(f"{cache} cache: not measured ({why})")
                statuses.append(UNDECIDED)
                continue
            statuses.append(decide(sp, target))
            lz = Span.of(find(results, exp, "lazy", size_gib=size, cache=cache))
            eg = Span.of(find(results, "checkpoint/restore-first-reply", "eager", size_gib=size,
                              cache=cache))
            ms = (f" ({lz.med / 1e6:.3g} ms vs {eg.med / 1e6:.3g} ms)" if lz and eg else "")
            parts.append(f"{cache} cache: {sp.text(suffix='×')}{ms}")
            if worst is None or sp.med > worst.med:
                worst = sp
        if worst is None:
            worst = Span(None, None, None, True)
        g.append(goal(f"{text} ({size:g} GiB)", worst, combine(*statuses),
                      "; ".join(parts) + " (paired per round)" + note))
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
    ho = seeds.get("appel-li", {}).get("heap-overflow")
    if isinstance(ho, dict) and ho.get("overhead_check_percent") is not None:
        body = [["compare and branch per allocation",
                 f"{_cell(ho.get('check_instructions'))} instructions per allocation",
                 _cell(ho.get("overhead_check_percent"))],
                ["guard page (one TRAP per area)",
                 f"{_cell(ho.get('trap_cycles_typical'))} cycles per TRAP",
                 _cell(ho.get("overhead_trap_percent"))]]
        tables.append((f"Appel & Li section 3, heap-overflow detection (1991: a "
                       f"{ho.get('region_bytes', 0) // 1024} KiB area of "
                       f"{_cell(ho.get('cell_bytes'))}-byte cells, one allocation per "
                       f"{_cell(ho.get('instructions_per_allocation'))} instructions)",
                       ["detection", "cost", "overhead %"], body))
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
