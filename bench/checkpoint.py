#!/usr/bin/python3
"""bench/checkpoint.py - examples/kv-server's BGSAVE by each checkpoint
mechanism, and a real redis-server's own BGSAVE, under open-loop load.

The protocol, for each data size (1 and 4 GiB; 64 MiB with --quick):

1. Fill.  kv-server and redis-server are each filled to the size with their
   own SET command (keys key:%012d, 984-byte random values: 1 KiB per entry
   in kv-server; tk-loadgen --mode fill).  kv-server then SAVEs a seed image
   and stops.  Where memory allows every server at once (1 and 4 GiB on
   this 24 GiB machine), one kv-server per mechanism starts from that image
   and stays up across the rounds with --incremental no, so each of its
   BGSAVEs is a full image of the same data, as the first after a start
   is; else each run starts a kv-server afresh from the image (hard-linked:
   a BGSAVE writes a new file and renames it), one kv-server and one
   redis-server at most resident at a time.  redis-server stays up for the size (its BGSAVE is always
   whole).  redis-server runs with rdbcompression no: its
   image raw like kv-server's (compressing these random values made its
   BGSAVE 2.5x as long here).
2. Capacity.  Each system (kv-server per mechanism, redis-server) is driven
   closed loop by tk-loadgen --mode closed (16 connections, one request
   outstanding on each, the same SET/GET mix): three consecutive runs of 2 s
   after a warm-up on one server (the one the rounds use, if kept up); checkpoint/capacity is their median [min, max].
   The base rate is the slower system's median capacity.
3. Snapshot runs.  At each offered load (a fraction of the base rate: one
   absolute rate, the same for every system), tk-loadgen sends open-loop
   (Poisson arrivals, 16 connections, 50% SET / 50% GET on random keys,
   latency from each request's scheduled send time) through: a warm-up
   (0.5 s, left out), a steady phase (3 s), BGSAVE until INFO says it is
   complete (the during-snapshot phase; it starts just before BGSAVE is sent,
   so a fork pause is inside it), then 3 s after.  A request belongs to the phase
   in which it was scheduled.  The machine's anonymous memory (AnonPages:
   the server's, its children's, each shared page once) is sampled every
   50 ms during the snapshot.
4. Repetitions: n (3) rounds; in each round every system runs once at each
   load, the systems' order rotated from round to round.  Each figure is the
   median of the n runs with their min and max; ratios (snapshot over
   steady, trapkit over redis-server) are paired per round (same round,
   adjacent in time) and their median [min, max] is given.

Report mode (the default, run by `make report`): the best trapkit mechanism
(the probe's choice for TRAP, uffd-sigbus here), fork and redis-server at 50%
load.  --full (`make bench-full`): every mechanism at 25%, 50% and 75%.
--quick: 64 MiB, short phases (the tests use it).

Results are JSON lines on stdout (BENCHMARKING.md); progress on stderr.
Experiments (params size_gib, offered_load, command set|get):
checkpoint/{p50,p99,p99.9,max}-{steady,during-snapshot} and
checkpoint/{p99.9,max}-after-snapshot (ns), the paired ratios
checkpoint/p99.9-snapshot-over-steady, checkpoint/p99.9-snapshot-over-redis,
checkpoint/max-snapshot-over-redis; checkpoint/capacity (params size_gib),
checkpoint/offered-rate, checkpoint/snapshot-duration (with one run's
per-interval latency timeline), checkpoint/lateness-p99 and lateness-max
(tk-loadgen's own send lateness), checkpoint/extra-memory,
checkpoint/pages-by-writers and checkpoint/write-faults (the pages the
program wrote that faulted: the memory goal's pages written) (params
size_gib, offered_load).  Mechanisms:
uffd-thread, uffd-sigbus, posix, fork, stop-the-world, precopy (kv-server) and
redis-fork (redis-server).
"""
import argparse
import glob
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

MECHS = ["uffd-thread", "uffd-sigbus", "posix", "fork", "stop-the-world", "precopy"]
TRAPKIT_MECHS = ["uffd-sigbus", "uffd-thread", "posix"]
REDIS = "redis-fork"
VSIZE = 984
ENTRY = 1024  # bytes per entry in kv-server (16-byte key, 984-byte value, header)
CONNS = 16
# kv-server kept up across the rounds: every BGSAVE a full image, as the
# first one after a start is
KV_RESIDENT_ARGS = ["--incremental", "no"]
SET_RATIO = 0.5
LATE_WARN_US = 1000  # tk-loadgen's p99 send lateness above this is noted beside a figure


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def out(r):
    print(json.dumps(r), flush=True)


def emit(exp, mech, params, metric, unit, values, reason=None, note=None, extra=None):
    """One figure from the runs' values: median with min and max, n runs;
    null with a reason when no run gave one."""
    vals = [v for v in values if v is not None]
    r = {"experiment": exp, "mechanism": mech, "params": params, "metric": metric, "unit": unit}
    if vals:
        r.update(median=statistics.median(vals), min=min(vals), max=max(vals), n=len(vals))
    else:
        r.update(median=None, min=None, max=None, n=0, reason=reason or "not measured")
    if note and vals:
        r["note"] = note
    if extra:
        r.update(extra)
    out(r)


# ---------------------------------------------------------------- RESP
class Client:
    def __init__(self, port, timeout=600):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            d = self.s.recv(1 << 20)
            if not d:
                raise ConnectionError("server closed the connection")
            self.buf += d
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+", b"-"):
            if t == b"-":
                raise RuntimeError(rest.decode())
            return rest.decode()
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                d = self.s.recv(1 << 20)
                if not d:
                    raise ConnectionError("server closed the connection")
                self.buf += d
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        if t == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RuntimeError(f"bad reply {line!r}")

    def cmd(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self.reply()

    def close(self):
        self.s.close()


def info(c):
    txt = c.cmd("INFO", "persistence").decode()
    return dict(l.strip().split(":", 1) for l in txt.splitlines() if ":" in l)


# ---------------------------------------------------------------- memory
def anon_bytes():
    """The machine's anonymous memory (AnonPages in /proc/meminfo): each
    page once, so the pages a fork's parent and child share copy-on-write
    count once and each copy made counts, as in PSS.  It is a read of the
    kernel's counters (~30 us); a process's PSS (smaps_rollup) is a walk of
    its page tables under its memory-map lock - 20-40 ms of kernel time per
    sample for a 1 GiB server here, 45-82 ms at 4 GiB, every 250 ms, beside
    the server it measured and under the same page tables' locks as its
    writers' faults.  The
    machine runs nothing else meanwhile but tk-loadgen and this script,
    whose memory does not change during a snapshot."""
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("AnonPages:"):
                return int(line.split()[1]) * 1024
    return 0


class Sampler(threading.Thread):
    def __init__(self, period=0.05):
        super().__init__(daemon=True)
        self.period, self.peak, self.stop = period, 0, False

    def run(self):
        while not self.stop:
            self.peak = max(self.peak, anon_bytes())
            time.sleep(self.period)


def mem_available():
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 0


# ---------------------------------------------------------------- servers
def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Server:
    """kv-server (by mechanism) or redis-server, started in workdir, where
    its image (dump.tkimg or dump.rdb) is loaded from if present."""

    def __init__(self, system, workdir, mem, kv, extra=()):
        self.system, self.dir = system, workdir
        self.port = free_port()
        self.err = os.path.join(workdir, "server.err")
        if system == REDIS:
            # rdbcompression no: its image raw like kv-server's (LZF on these random
            # values made its BGSAVE 2.5x as long here: the stronger baseline)
            cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--rdbcompression", "no",
                   "--dir", workdir, "--dbfilename", "dump.rdb",
                   "--daemonize", "no", "--logfile", os.path.join(workdir, "redis.log")]
        else:
            # (--save "": no save points, as redis-server above - only the
            # BGSAVEs the benchmark asks for)
            cmd = [kv, "--port", str(self.port), "--dir", workdir, "--memory", f"{mem >> 20}m",
                   "--save", "", "--mechanism", system] + list(extra)
        t0 = time.time()
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(self.err, "w"))
        deadline = time.time() + 900
        while time.time() < deadline:
            try:
                c = Client(self.port, timeout=30)
                try:
                    if c.cmd("PING") == "PONG" and info(c).get("loading", "0") == "0":
                        self.start_s = time.time() - t0
                        return
                finally:
                    c.close()
            except (OSError, RuntimeError):
                pass
            if self.p.poll() is not None:
                raise RuntimeError(f"{system} server exited: " + open(self.err).read()[-2000:])
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{system} server did not start within 900 s")

    def client(self):
        return Client(self.port)

    def stop(self):
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()


# ---------------------------------------------------------------- tk-loadgen
class Loadgen:
    def __init__(self, exe, port, args):
        self.p = subprocess.Popen([exe, "--port", str(port)] + [str(a) for a in args],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True)
        self.err = []
        self.t = threading.Thread(target=self._stderr, daemon=True)
        self.t.start()

    def _stderr(self):
        for line in self.p.stderr:
            self.err.append(line.rstrip())

    def next(self, t=None):
        """The next phase (--control), from instant t (time.monotonic(),
        CLOCK_MONOTONIC: tk-loadgen draws the boundary there even if it reads
        the line late)."""
        self.p.stdin.write(f"next {time.monotonic() if t is None else t:.6f}\n")
        self.p.stdin.flush()

    def result(self, timeout=600):
        if self.p.stdin and not self.p.stdin.closed:
            self.p.stdin.close()
        out = self.p.stdout.read()
        self.p.wait(timeout=timeout)
        self.t.join()
        if self.p.returncode != 0:
            raise RuntimeError(f"tk-loadgen exited with {self.p.returncode}: "
                               + " / ".join(self.err[-5:]))
        return json.loads(out)


def fill(lg, port, keys):
    t0 = time.time()
    p = subprocess.Popen([lg, "--port", str(port), "--mode", "fill", "--keys", str(keys),
                          "--connections", "4", "--depth", "64", "--value-size", str(VSIZE),
                          "--progress", "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    last = 0.0
    for line in p.stderr:
        if time.time() - last >= 10:
            last = time.time()
            log(f"      {line.strip()}")
    d = json.loads(p.stdout.read())
    p.wait()
    if p.returncode or d["errors"] or d["answered"] != keys:
        raise RuntimeError(f"filling failed: {d['answered']} of {keys} SETs answered, "
                           f"{d['errors']} errors")
    return time.time() - t0


def capacity(lg, port, keys, quick):
    """Closed-loop throughput (ops/s), three runs after a warm-up."""
    runs = []
    for i in range(3):
        d = Loadgen(lg, port, ["--mode", "closed", "--connections", CONNS, "--depth", 1,
                               "--duration", (0.8 if quick else 2.0) + (0.3 if i == 0 else 0),
                               "--warmup", 0.3 if i == 0 else 0, "--keys", keys,
                               "--value-size", VSIZE, "--set-ratio", SET_RATIO, "--interval", 0,
                               "--quiet"]).result()
        if d["errors"]:
            raise RuntimeError(f"capacity run: {d['errors']} errors")
        runs.append(d["total"]["ops_per_s"])
    return runs


# ---------------------------------------------------------------- one snapshot run
PHASES = ["steady", "during-snapshot", "after-snapshot"]


def kv_run(a, system, seed, mem, keys, rate, rng_seed):
    """kv-server started afresh from the seed image (hard-linked: BGSAVE
    writes a new file and renames it), one snapshot run, stopped."""
    run = tempfile.mkdtemp(prefix=f"run-{system}-", dir=a.work)
    seed_img = os.path.join(seed, "dump.tkimg")
    st = os.stat(seed_img)
    os.link(seed_img, os.path.join(run, "dump.tkimg"))
    srv = None
    try:
        srv = Server(system, run, mem, a.kv_server)
        r = snapshot_run(a, srv, keys, rate, rng_seed)
        r["start_s"] = srv.start_s
    finally:
        if srv:
            srv.stop()
        shutil.rmtree(run, ignore_errors=True)
    st2 = os.stat(seed_img)
    if (st2.st_size, st2.st_mtime_ns) != (st.st_size, st.st_mtime_ns):
        raise RuntimeError(f"{system} changed its image in place; the benchmark links the seed "
                           "image into each run and needs it unchanged")
    return r


def snapshot_run(a, srv, keys, rate, rng_seed):
    """Runs the load through the phases with one BGSAVE of the running
    server; returns a dict of what was measured."""
    lg = c = None
    try:
        lg = Loadgen(a.loadgen, srv.port,
                     ["--rate", f"{rate:.1f}", "--connections", CONNS, "--keys", keys,
                      "--value-size", VSIZE, "--set-ratio", SET_RATIO, "--warmup", a.warmup,
                      "--phases", ",".join(PHASES), "--interval", a.interval_ms, "--control",
                      "--warn-lateness", LATE_WARN_US, "--drain", 120, "--seed", rng_seed])
        time.sleep(a.warmup + a.before)
        c = srv.client()
        base = anon_bytes()
        sampler = Sampler()
        sampler.start()
        t0 = time.monotonic()
        t0_wall = time.time()
        lg.next(t0)  # -> during-snapshot, just before BGSAVE is sent
        c.cmd("BGSAVE")
        deadline = t0 + a.save_timeout
        while True:
            i = info(c)
            if i.get("rdb_bgsave_in_progress", "0") == "0":
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"BGSAVE still running after {a.save_timeout:.0f} s")
            time.sleep(0.02)
        t1 = time.monotonic()
        dur = t1 - t0
        lg.next(t1)  # -> after-snapshot
        sampler.stop = True
        sampler.join()
        if i.get("rdb_last_bgsave_status", "ok") != "ok":
            raise RuntimeError("BGSAVE failed: " + open(srv.err).read()[-500:])
        writers = (int(i["trapkit_last_pages_by_writers"])
                   if "trapkit_last_pages_by_writers" in i else None)
        faults = (int(i["trapkit_last_write_faults"])
                  if "trapkit_last_write_faults" in i else None)
        # kv-server's own view of the snapshot, for the round's line: the
        # instant's pause, the longest a writer's fault took, and when the
        # instant came after BGSAVE was sent
        server = {k[len("trapkit_last_"):]: int(i[k]) for k in
                  ("trapkit_last_pause_us", "trapkit_last_max_writer_stall_us",
                   "trapkit_last_snapshot_instant_ms") if k in i}
        if "snapshot_instant_ms" in server:
            server["snapshot_instant_ms"] -= int(t0_wall * 1000)
        time.sleep(a.after)
        lg.next()  # the end
        d = lg.result()
    finally:
        if c:
            c.close()
        if lg and lg.p.poll() is None:
            lg.p.kill()
            lg.p.wait()
        if srv.p.poll() is not None:
            raise RuntimeError(f"{srv.system} exited: " + open(srv.err).read()[-500:])
    ph = {p["name"]: p for p in d["phases"]}
    if list(ph) != ["warmup"] + PHASES:
        raise RuntimeError(f"tk-loadgen phases {list(ph)}")
    res = {"duration": dur, "extra_memory": max(0, sampler.peak - base), "writers": writers,
           "faults": faults, "server": server,
           "start_s": None, "errors": d["errors"], "lateness": d["lateness"],
           "warnings": [l for l in lg.err if "warning" in l], "phases": ph}
    # the per-interval timeline, from the start of the steady phase
    iv, w = d["intervals"], d["interval_s"]
    first = int(round(ph["steady"]["start_s"] / w))
    res["timeline"] = {
        "interval_s": w,
        "snapshot_s": [round(ph["during-snapshot"]["start_s"] - ph["steady"]["start_s"], 3),
                       round(ph["during-snapshot"]["end_s"] - ph["steady"]["start_s"], 3)],
        "n": iv["n"][first:], "p99_us": [round(x) for x in iv["p99_us"][first:]],
        "max_us": [round(x) for x in iv["max_us"][first:]],
        "late_max_us": [round(x) for x in iv["late_max_us"][first:]]}
    return res


# ---------------------------------------------------------------- one size
def filled(a, system, workdir, keys, mem):
    """A server of the kind started empty in workdir and filled with its own
    SET (tk-loadgen --mode fill)."""
    srv = Server(system, workdir, mem, a.kv_server)
    try:
        t = fill(a.loadgen, srv.port, keys)
        c = srv.client()
        n = c.cmd("DBSIZE")
        c.close()
        if n != keys:
            raise RuntimeError(f"{system} holds {n} keys after filling {keys}")
        log(f"    {'redis-server' if system == REDIS else 'kv-server'}: filled {keys:,} keys "
            f"in {t:.0f} s")
    except BaseException:
        srv.stop()
        raise
    return srv


def kv_seed(a, system, keys, mem):
    """kv-server filled, saved (SAVE) and stopped: the seed image every run
    starts from."""
    seed = os.path.join(a.work, "seed-kv")
    shutil.rmtree(seed, ignore_errors=True)
    os.makedirs(seed)
    srv = filled(a, system, seed, keys, mem)
    try:
        t1 = time.time()
        c = srv.client()
        c.cmd("SAVE")
        c.close()
        log(f"    kv-server: saved in {time.time() - t1:.0f} s")
    finally:
        srv.stop()
    return seed


def null_size(systems, size, loads, reason):
    for s in systems:
        emit("checkpoint/capacity", s, {"size_gib": size}, "throughput", "ops_per_s", [],
             reason)
        for load in loads:
            for cmd in ("set", "get"):
                p = {"size_gib": size, "offered_load": load, "command": cmd}
                for exp in ("p99.9-steady", "p99.9-during-snapshot", "max-during-snapshot"):
                    emit(f"checkpoint/{exp}", s, p, "time", "ns", [], reason)


def run_size(a, systems, size, loads):
    keys = int(size * 2**30) // ENTRY
    mem = (int(keys * ENTRY * 1.3) + (64 << 20)) & ~((1 << 20) - 1)
    kv = [s for s in systems if s != REDIS]
    # redis-server stays up for the whole size (its heap about 1.15x the
    # data) while kv-server runs (its area), either up to doubled by a fork
    # child's copies during a snapshot
    redis_mem = int(keys * ENTRY * 1.15) if REDIS in systems else 0
    need = (2 * mem if kv else 0) + (2 * redis_mem if not kv else redis_mem) + (1 << 30)
    avail = mem_available()
    if avail < need:
        reason = (f"not enough memory here for {size:g} GiB: {need / 2**30:.1f} GiB needed "
                  f"(redis-server, kv-server and a fork's copies), {avail / 2**30:.1f} GiB "
                  "available")
        log(f"  checkpoint: {size:g} GiB skipped: {reason}")
        null_size(systems, size, loads, reason)
        return
    disk = shutil.disk_usage(a.work).free
    if disk < 4 * keys * ENTRY * 1.3:
        reason = f"not enough disk for the images of {size:g} GiB ({disk / 2**30:.1f} GiB free)"
        log(f"  checkpoint: {size:g} GiB skipped: {reason}")
        null_size(systems, size, loads, reason)
        return

    # every kv-server kept up across the rounds (each BGSAVE a full image:
    # --incremental no) when memory allows it, else each run starts one
    # afresh from the seed image.  Kept up: every server's memory at once,
    # and one snapshot's copies at a time (a fork's, at most a whole copy
    # of the largest)
    resident_need = len(kv) * mem + redis_mem + max(mem, redis_mem) + (1 << 30)
    a.resident = bool(kv) and avail >= resident_need
    log(f"  checkpoint: {size:g} GiB ({keys:,} keys), systems {', '.join(systems)}, "
        f"loads {', '.join(f'{x:g}' for x in loads)}, {a.reps} rounds; kv-server "
        + ("kept up across the rounds" if a.resident else "started afresh for each run"))
    seed = kv_seed(a, kv[0], keys, mem) if kv else None
    redis = None
    if REDIS in systems:
        d = os.path.join(a.work, "redis")
        os.makedirs(d, exist_ok=True)
        redis = filled(a, REDIS, d, keys, mem)
    servers = {}
    try:
        if a.resident:
            for s in kv:
                run = tempfile.mkdtemp(prefix=f"kv-{s}-", dir=a.work)
                os.link(os.path.join(seed, "dump.tkimg"), os.path.join(run, "dump.tkimg"))
                servers[s] = Server(s, run, mem, a.kv_server, KV_RESIDENT_ARGS)
                log(f"    kv-server {s}: started in {servers[s].start_s:.1f} s")
        if redis:
            servers[REDIS] = redis
        measure_size(a, systems, size, loads, keys, mem, seed, servers)
    finally:
        for srv in servers.values():
            srv.stop()
        if redis:
            redis.stop()


def measure_size(a, systems, size, loads, keys, mem, seed, servers):
    # capacity of each system, the base rate from the slower one
    cap = {}
    for s in systems:
        if s in servers:
            cap[s] = capacity(a.loadgen, servers[s].port, keys, a.quick)
        else:
            run = tempfile.mkdtemp(prefix=f"cap-{s}-", dir=a.work)
            os.link(os.path.join(seed, "dump.tkimg"), os.path.join(run, "dump.tkimg"))
            srv = Server(s, run, mem, a.kv_server)
            try:
                cap[s] = capacity(a.loadgen, srv.port, keys, a.quick)
            finally:
                srv.stop()
                shutil.rmtree(run, ignore_errors=True)
        log(f"    capacity {s:15s} {statistics.median(cap[s]):9,.0f} ops/s "
            f"[{min(cap[s]):,.0f}-{max(cap[s]):,.0f}] (closed loop, {CONNS} connections)")
        emit("checkpoint/capacity", s, {"size_gib": size}, "throughput", "ops_per_s", cap[s],
             note=f"closed loop: {CONNS} connections with one request outstanding each, "
                  f"{SET_RATIO:.0%} SET; 3 consecutive runs on one server")
    slower = min(cap, key=lambda s: statistics.median(cap[s]))
    base = statistics.median(cap[slower])
    if a.base_rate:
        base = a.base_rate
        log(f"    base rate: {base:,.0f} ops/s (given)")
    else:
        log(f"    base rate: {base:,.0f} ops/s ({slower}'s capacity)")

    # the rounds: every system at every load, rotated
    runs = {(s, l): [None] * a.reps for s in systems for l in loads}
    fails = {}
    t_start = time.time()
    for rnd in range(a.reps):
        order = systems[rnd % len(systems):] + systems[:rnd % len(systems)]
        for li, load in enumerate(loads):
            rate = load * base
            for s in order:
                # the same request sequence for every system in a round
                rng_seed = 1 + rnd * len(loads) + li
                try:
                    if s in servers:
                        srv = servers[s]
                        try:
                            r = snapshot_run(a, srv, keys, rate, rng_seed)
                        finally:
                            # its image is not needed: free the page cache
                            # for the next run
                            for f in glob.glob(os.path.join(srv.dir, "*.rdb")):
                                os.unlink(f)
                        r["start_s"] = None
                    else:
                        r = kv_run(a, s, seed, mem, keys, rate, rng_seed)
                    # no dirty pages of this run left to write back during
                    # the next one
                    os.sync()
                except (RuntimeError, OSError, subprocess.TimeoutExpired, ValueError) as e:
                    fails.setdefault((s, load), []).append(str(e))
                    log(f"    round {rnd + 1}/{a.reps} {s:15s} {size:g} GiB at {load:.0%}: "
                        f"FAILED: {e}")
                    continue
                runs[(s, load)][rnd] = r
                st, du = r["phases"]["steady"]["set"], r["phases"]["during-snapshot"]["set"]
                log(f"    round {rnd + 1}/{a.reps} {s:15s} {size:g} GiB at {load:.0%} "
                    f"({rate:,.0f}/s): "
                    + (f"started in {r['start_s']:.1f} s, " if r["start_s"] else "")
                    + f"snapshot {r['duration']:.1f} s; SET p99.9 "
                    f"{st['p99_9_us'] / 1e3:.2f} ms steady -> {du['p99_9_us'] / 1e3:.2f} ms "
                    f"during, max {du['max_us'] / 1e3:.1f} ms; send lateness p99 "
                    f"{r['lateness']['p99_us'] / 1e3:.2f} ms"
                    + (f"; {r['errors']} errors" if r["errors"] else "")
                    + (f"; server: instant +{sv['snapshot_instant_ms']} ms, pause "
                       f"{sv['pause_us'] / 1e3:.2f} ms, longest fault "
                       f"{sv['max_writer_stall_us'] / 1e3:.2f} ms, {r['faults']:,} faults"
                       if len(sv := r["server"]) == 3 and r["faults"] is not None else "")
                    + f" ({time.time() - t_start:.0f} s)")
                for w in r["warnings"]:
                    log(f"      {w}")

    # the figures
    for load in loads:
        rate = load * base
        emit("checkpoint/offered-rate", "tk-loadgen", {"size_gib": size, "offered_load": load},
             "throughput", "ops_per_s", [rate],
             note=f"{load:g} of {slower}'s capacity (the slower system), the same for every "
                  "system; Poisson arrivals")
        for s in systems:
            rs = runs[(s, load)]
            ok = [r for r in rs if r]
            reason = ("every run failed: " + "; ".join(fails.get((s, load), [])[:2])) \
                if not ok else None
            pp = {"size_gib": size, "offered_load": load}
            late = max((r["lateness"]["p99_us"] for r in ok), default=0)
            note = (f"tk-loadgen's p99 send lateness reached {late / 1e3:.2f} ms in a run: the "
                    "generator fell behind its schedule (those latencies include it)"
                    if late > LATE_WARN_US else None)
            errs = sum(r["errors"] for r in ok)
            if errs:
                note = ((note + "; ") if note else "") + f"{errs} error replies or lost requests"
            failed = len(fails.get((s, load), []))
            if failed and ok:
                note = ((note + "; ") if note else "") + \
                    f"{failed} of {a.reps} runs failed: {fails[(s, load)][0]}"
            for cmd in ("set", "get"):
                p = dict(pp, command=cmd)
                for phase, pname in (("steady", "steady"), ("during-snapshot", "during-snapshot"),
                                     ("after-snapshot", "after-snapshot")):
                    stats = (("p50", "p50_us"), ("p99", "p99_us"), ("p99.9", "p99_9_us"),
                             ("max", "max_us"))
                    if phase == "after-snapshot":
                        stats = stats[2:]
                    for stat, key in stats:
                        emit(f"checkpoint/{stat}-{phase}", s, p, "time", "ns",
                             [r["phases"][pname][cmd][key] * 1e3 for r in ok], reason, note)
                # paired per round: the snapshot against the same run's steady phase
                emit("checkpoint/p99.9-snapshot-over-steady", s, p, "ratio", "x",
                     [r["phases"]["during-snapshot"][cmd]["p99_9_us"]
                      / r["phases"]["steady"][cmd]["p99_9_us"]
                      for r in ok if r["phases"]["steady"][cmd]["p99_9_us"] > 0], reason, note,
                     {"derived": True, "derived_from": [
                         "checkpoint/p99.9-during-snapshot", "checkpoint/p99.9-steady"],
                      "paired": "each run's own steady phase"})
                if s != REDIS and REDIS in systems:
                    red = runs[(REDIS, load)]
                    for exp, key in (("p99.9-snapshot-over-redis", "p99_9_us"),
                                     ("max-snapshot-over-redis", "max_us")):
                        vals = [r["phases"]["during-snapshot"][cmd][key]
                                / q["phases"]["during-snapshot"][cmd][key]
                                for r, q in zip(rs, red)
                                if r and q and q["phases"]["during-snapshot"][cmd][key] > 0]
                        emit(f"checkpoint/{exp}", s, p, "ratio", "x", vals,
                             reason or "no round with both this system's and redis-server's run",
                             note, {"derived": True, "derived_from": [
                                 f"checkpoint/{exp.split('-')[0]}-during-snapshot"],
                                 "paired": "redis-server's run in the same round"})
            # one representative run's timeline: the median run by SET p99.9
            # during the snapshot
            tl = None
            if ok:
                srt = sorted(ok, key=lambda r: r["phases"]["during-snapshot"]["set"]["p99_9_us"])
                pick = srt[(len(srt) - 1) // 2]
                tl = dict(pick["timeline"], round=rs.index(pick) + 1, rate=round(rate, 1))
            extra = {"timeline": tl} if tl else {}
            if a.all_timelines and ok:
                extra["timelines"] = [dict(r["timeline"], round=rs.index(r) + 1) for r in ok]
            emit("checkpoint/snapshot-duration", s, pp, "time", "ns",
                 [r["duration"] * 1e9 for r in ok], reason, None, extra or None)
            emit("checkpoint/lateness-p99", s, pp, "time", "ns",
                 [r["lateness"]["p99_us"] * 1e3 for r in ok], reason)
            emit("checkpoint/lateness-max", s, pp, "time", "ns",
                 [r["lateness"]["max_us"] * 1e3 for r in ok], reason)
            emit("checkpoint/extra-memory", s, pp, "memory", "bytes",
                 [r["extra_memory"] for r in ok], reason,
                 "peak anonymous memory of the machine (AnonPages: the server's and its "
                 "children's, a page shared copy-on-write once) during the snapshot, sampled "
                 "every 50 ms, less before it")
            if s != REDIS:
                emit("checkpoint/pages-by-writers", s, pp, "count", "pages",
                     [r["writers"] for r in ok], reason,
                     "pages the writers copied: the pages they wrote and the rest of each block")
                emit("checkpoint/write-faults", s, pp, "count", "pages",
                     [r["faults"] for r in ok if r["faults"] is not None], reason,
                     "write faults during the snapshot: each a page the program wrote (a "
                     "lower bound of the pages written)")


def best_mechanism(trapkit):
    """The probe's choice for TRAP when kv-server offers it, else uffd-sigbus."""
    try:
        d = json.loads(subprocess.run([trapkit, "probe", "--json"], capture_output=True,
                                      text=True, timeout=60, check=True).stdout)
        if d.get("mech_trap") in TRAPKIT_MECHS:
            return d["mech_trap"], f"the probe's choice for TRAP ({d['mech_trap']})"
        return "uffd-sigbus", f"the probe chose {d.get('mech_trap')}, which kv-server lacks"
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        return "uffd-sigbus", f"no probe ({e})"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kv-server", required=True)
    ap.add_argument("--loadgen", required=True, help="tk-loadgen")
    ap.add_argument("--trapkit", default=None, help="the trapkit command (its probe picks the "
                    "best mechanism)")
    ap.add_argument("--quick", action="store_true", help="64 MiB, short phases")
    ap.add_argument("--full", action="store_true",
                    help="every mechanism at 25%%, 50%% and 75%% load (also TK_BENCH_FULL=1)")
    ap.add_argument("--sizes", default=None, help="GiB, comma-separated")
    ap.add_argument("--loads", default=None, help="fractions of capacity, comma-separated")
    ap.add_argument("--mechanisms", default=None,
                    help="comma-separated, of: " + ", ".join(MECHS + [REDIS]))
    ap.add_argument("--reps", type=int, default=3, help="rounds (3)")
    ap.add_argument("--before", type=float, default=None, help="steady seconds before (3)")
    ap.add_argument("--after", type=float, default=None, help="seconds after (3)")
    ap.add_argument("--save-timeout", type=float, default=1200)
    ap.add_argument("--interval-ms", type=int, default=100,
                    help="the timeline's interval in milliseconds (100)")
    ap.add_argument("--base-rate", type=float, default=None,
                    help="the rate (ops/s) the loads are fractions of, instead of the slower "
                    "system's capacity (to compare runs of separate invocations)")
    ap.add_argument("--all-timelines", action="store_true",
                    help="every run's timeline in checkpoint/snapshot-duration, not only the "
                    "median run's")
    a = ap.parse_args()
    a.full = a.full or os.environ.get("TK_BENCH_FULL") == "1"
    if a.quick and a.full:
        ap.error("--quick and --full exclude each other")
    if a.reps < 1:
        ap.error("--reps must be at least 1")
    a.warmup = 0.5
    if a.before is None:
        a.before = 1.0 if a.quick else 3.0
    if a.after is None:
        a.after = 1.0 if a.quick else 3.0
    sizes = [float(x) for x in a.sizes.split(",")] if a.sizes else \
        ([1 / 16] if a.quick else [1.0, 4.0])
    loads = [float(x) for x in a.loads.split(",")] if a.loads else \
        ([0.25, 0.5, 0.75] if a.full else [0.5])
    if a.mechanisms:
        systems = a.mechanisms.split(",")
        for m in systems:
            if m not in MECHS + [REDIS]:
                ap.error(f"unknown mechanism {m!r}")
        why = "chosen on the command line"
    elif a.full:
        systems, why = MECHS + [REDIS], "every mechanism (--full)"
    else:
        best, why = best_mechanism(a.trapkit) if a.trapkit else ("uffd-sigbus", "no probe")
        systems = [best, "fork", REDIS]
        why = f"{best} ({why}), fork and redis-server"
    if REDIS in systems and not shutil.which("redis-server"):
        for s in sizes:
            null_size([REDIS], s, loads,
                      "redis-server is not installed (scripts/install-deps.sh installs it)")
        systems.remove(REDIS)
    log(f"  checkpoint: {why}; {'quick' if a.quick else 'full' if a.full else 'report'} mode, "
        f"{a.before:g} s steady before and {a.after:g} s after each BGSAVE")
    a.work = tempfile.mkdtemp(prefix="tk-ckpt-bench-")
    t0 = time.time()
    try:
        for size in sizes:
            if systems:
                run_size(a, systems, size, loads)
    finally:
        shutil.rmtree(a.work, ignore_errors=True)
    log(f"  checkpoint: done in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
