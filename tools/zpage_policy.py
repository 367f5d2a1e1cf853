#!/usr/bin/env python3
"""tools/zpage_policy.py - what choosing victims better could do for the
Zipfian workload of bench/zpage.c, on a model of the pager's clock hand.

The page-reference stream is the benchmark's: 262,144 records of 256 bytes
(64 MiB, 16,384 pages), keys drawn by a Zipfian law of theta 0.99 and
scattered over the heap by the same multiplicative hash.  The model plays
it against:

  hand      the pager's clock hand (src/apps/zpage/zpage.c): runs of 32
            pages made inaccessible, a ring of about 64 + 1/16 of the budget
            of them, the oldest run's untouched pages evicted when the area
            is over its budget, down to 1/16 below it (as the pager did
            before it stopped at 1/64); a touch of any page of a sampled run
            is a protection fault (the sampled ones among them are the
            sampling faults the statistics count)
  hand-64   the same stopping 1/64 below the budget (the pager now)
  blind     the hand's order without sampling: every resident page of the
            run the hand reaches is evicted (no protection, no fault but
            fault-ins)
  lru, clock, ideal   least recently used, one-bit CLOCK over every access,
            and the budget's most popular pages kept for ever (what no
            policy that sees only faults can do)

and prints, per op, the pages brought back (fault-ins) and the protection
faults, with a cost per op from the given microseconds per fault-in and per
protection fault (--fault-in-us, --protection-us; measured on the machine
with perf, see docs/design.md).  Pure Python: about a minute for the
default 1.5 million ops.
"""
import argparse
import bisect
import collections
import itertools
import random

NREC, REC, PAGE, RUN = 262144, 256, 4096, 32
NPAGES = NREC * REC // PAGE


def stream(n, seed):
    p = [1 / (r ** 0.99) for r in range(1, NREC + 1)]
    total = sum(p)
    cum = list(itertools.accumulate(x / total for x in p))
    page = [((k * 0x9E3779B97F4A7C15) % (1 << 64)) % NREC * REC // PAGE for k in range(NREC)]
    rng = random.Random(seed)
    return [page[min(bisect.bisect_left(cum, rng.random()), NREC - 1)] for _ in range(n)], \
        page, p


def hand(seq, budget, low_div, blind=False):
    """The pager's hand: fault-ins, protection faults and sampling faults."""
    RES, SAM, OUT = 0, 1, 2
    st = [RES] * NPAGES
    prot = [False] * NPAGES
    nruns = NPAGES // RUN
    target = max(4, (64 + budget // 16) // RUN)
    low = budget - budget // low_div
    ring = collections.deque()
    state = {"hand": 0, "resident": NPAGES}

    def sample_run():
        for _ in range(nruns):
            r = state["hand"]
            state["hand"] = (r + 1) % nruns
            pages = range(r * RUN, r * RUN + RUN)
            if any(st[i] == RES for i in pages):
                for i in pages:
                    if st[i] == RES:
                        st[i] = SAM
                    prot[i] = not blind
                ring.append(r)
                return True
        return False

    def reclaim():
        idle = 0
        while state["resident"] > low:
            while len(ring) < target and sample_run():
                pass
            if not ring:
                break
            r = ring.popleft()
            n = 0
            for i in range(r * RUN, r * RUN + RUN):
                prot[i] = False
                if st[i] == SAM:
                    st[i] = OUT
                    n += 1
            state["resident"] -= n
            idle = 0 if n else idle + 1
            if idle > 4 * nruns:
                break

    reclaim()
    warm = len(seq) // 3
    fi = pf = sf = 0
    for t, x in enumerate(seq):
        if prot[x]:
            prot[x] = False
            pf += t >= warm
            if st[x] == SAM:
                st[x] = RES
                sf += t >= warm
        if st[x] == OUT:
            st[x] = RES
            state["resident"] += 1
            fi += t >= warm
            if state["resident"] > budget:
                reclaim()
    m = len(seq) - warm
    return fi / m, pf / m, sf / m


def lru(seq, budget):
    cache, warm, miss = collections.OrderedDict(), len(seq) // 3, 0
    for t, x in enumerate(seq):
        if x in cache:
            cache.move_to_end(x)
            continue
        miss += t >= warm
        cache[x] = True
        if len(cache) > budget:
            cache.popitem(last=False)
    return miss / (len(seq) - warm)


def clock(seq, budget):
    ref, ring, warm, miss = {}, collections.deque(), len(seq) // 3, 0
    for t, x in enumerate(seq):
        if x in ref:
            ref[x] = True
            continue
        miss += t >= warm
        while len(ref) >= budget:
            y = ring.popleft()
            if ref[y]:
                ref[y] = False
                ring.append(y)
            else:
                del ref[y]
        ref[x] = False
        ring.append(x)
    return miss / (len(seq) - warm)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ops", type=int, default=1_500_000)
    ap.add_argument("--budget", type=float, default=0.5, help="fraction of the heap (0.5)")
    ap.add_argument("--fault-in-us", type=float, default=14.0)
    ap.add_argument("--protection-us", type=float, default=20.0)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    budget = int(NPAGES * a.budget)
    seq, page, p = stream(a.ops, a.seed)
    pop = [0.0] * NPAGES
    for k in range(NREC):
        pop[page[k]] += p[k]
    total = sum(pop)
    ideal = 1 - sum(sorted(pop, reverse=True)[:budget]) / total

    def row(name, fi, pf=0.0, sf=None):
        cost = fi * a.fault_in_us + pf * a.protection_us
        extra = f" protection faults {pf:.4f} (sampling {sf:.4f})" if sf is not None else ""
        print(f"{name:8s} fault-ins {fi:.4f}{extra}  {cost:.2f} us/op in faults", flush=True)

    print(f"budget {budget} of {NPAGES} pages, {a.ops} ops (the first third left out)")
    for name, div, blind in (("hand", 16, False), ("hand-64", 64, False), ("blind", 64, True)):
        fi, pf, sf = hand(seq, budget, div, blind)
        row(name, fi, pf, sf)
    row("lru", lru(seq, budget))
    row("clock", clock(seq, budget))
    row("ideal", ideal)


if __name__ == "__main__":
    main()
