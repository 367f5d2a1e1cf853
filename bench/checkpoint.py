#!/usr/bin/python3
"""bench/checkpoint.py - examples/kv-server's BGSAVE by each checkpoint
mechanism, and a real redis-server's own BGSAVE, under redis-benchmark load.

For each data size and mechanism: load the data (keys key:%012d, 984-byte
random values: 1 KiB per entry in the server), run redis-benchmark (SET and
GET, random keys, 50 clients, without and with pipelining) in steady state,
then again while a BGSAVE runs, and sample the memory of the server and its
children (PSS) during the snapshot.  Latency percentiles come from
redis-benchmark's own distribution.  Results are JSON lines on stdout
(BENCHMARKING.md), progress on stderr.

Experiments: checkpoint/p50-steady, p99-steady, p99.9-steady, max-steady,
ops-steady and the same -during-snapshot, checkpoint/snapshot-duration,
checkpoint/extra-memory (bytes), with params size_gib, pipeline, command.
Mechanisms: uffd-thread, uffd-sigbus, posix, fork, stop-the-world (kv-server)
and redis-fork (redis-server).
"""
import argparse
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time

MECHS = ["uffd-thread", "uffd-sigbus", "posix", "fork", "stop-the-world"]
VSIZE = 984
KEY = "key:%012d"


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def emit(exp, mech, params, metric, unit, value, reason=None):
    r = {"experiment": exp, "mechanism": mech, "params": params, "metric": metric, "unit": unit,
         "median": value, "min": value, "max": value, "n": 1 if value is not None else 0}
    if value is None:
        r["reason"] = reason or "not measured"
    print(json.dumps(r), flush=True)


# ---------------------------------------------------------------- RESP
class Client:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=600)
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
                self.buf += self.s.recv(1 << 20)
            v, self.buf = self.buf[:n], self.buf[n + 2:]
            return v
        if t == b"*":
            return [self.reply() for _ in range(int(rest))]
        raise RuntimeError(f"bad reply {line!r}")

    def cmd(self, *args):
        self.s.sendall(encode(args))
        return self.reply()


def encode(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


def load(port, nkeys):
    """SET nkeys keys with random values, pipelined."""
    c = Client(port)
    pool = os.urandom(VSIZE * 64 + 4096)
    batch = 2000
    t0 = time.time()
    for start in range(0, nkeys, batch):
        n = min(batch, nkeys - start)
        parts = []
        for i in range(start, start + n):
            off = (i * 7919) % (len(pool) - VSIZE)
            k = (KEY % i).encode()
            parts.append(b"*3\r\n$3\r\nSET\r\n$16\r\n%s\r\n$%d\r\n%s\r\n" %
                         (k, VSIZE, pool[off:off + VSIZE]))
        c.s.sendall(b"".join(parts))
        for _ in range(n):
            c.reply()
        if start // batch % 200 == 0:
            log(f"      loaded {start + n:,} of {nkeys:,} keys ({time.time() - t0:.0f} s)")
    c.s.close()


def info(port):
    c = Client(port)
    txt = c.cmd("INFO", "persistence").decode()
    c.s.close()
    return dict(l.split(":", 1) for l in txt.splitlines() if ":" in l)


# ---------------------------------------------------------------- redis-benchmark
def parse_benchmark(out):
    """{command: {p50, p99, p99.9, max (ms), ops}} from redis-benchmark's report."""
    res = {}
    parts = re.split(r"====== ([\w ]+) ======", out)
    for name, body in zip(parts[1::2], parts[2::2]):
        rows = [(float(p), float(ms)) for p, ms in
                re.findall(r"^\s*([\d.]+)% <= ([\d.]+) milliseconds", body, re.M)]
        rps = re.search(r"throughput summary: ([\d.]+) requests per second", body)
        if not rows or not rps:
            continue
        # the percentile distribution comes first; stop at the cumulative one
        pct = []
        for p, ms in rows:
            if pct and p < pct[-1][0]:
                break
            pct.append((p, ms))

        def at(q):
            for p, ms in pct:
                if p >= q:
                    return ms
            return pct[-1][1]
        res[name.strip().lower()] = {"p50": at(50.0), "p99": at(99.0), "p99.9": at(99.9),
                                     "max": pct[-1][1], "ops": float(rps.group(1))}
    return res


def run_benchmark(port, n, keys, pipeline):
    cmd = ["redis-benchmark", "-p", str(port), "-t", "set,get", "-n", str(int(n)), "-r",
           str(keys), "-d", str(VSIZE), "-P", str(pipeline), "-c", "50"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1800).stdout
    return parse_benchmark(out.replace("\r", "\n"))


# ---------------------------------------------------------------- memory
def tree(pid):
    pids = [pid]
    for t in glob.glob(f"/proc/{pid}/task/*/children"):
        try:
            for c in open(t).read().split():
                pids += tree(int(c))
        except OSError:
            pass
    return pids


def pss(pid):
    total = 0
    for p in tree(pid):
        try:
            for line in open(f"/proc/{p}/smaps_rollup"):
                if line.startswith("Pss:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            pass
    return total


class Sampler(threading.Thread):
    def __init__(self, pid):
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop = pid, 0, False

    def run(self):
        while not self.stop:
            self.peak = max(self.peak, pss(self.pid))
            time.sleep(0.05)


# ---------------------------------------------------------------- servers
class Server:
    def __init__(self, kind, mech, workdir, mem, kv):
        self.kind, self.mech, self.dir = kind, mech, workdir
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()
        if kind == "kv":
            cmd = [kv, "--port", str(self.port), "--dir", workdir, "--memory", f"{mem >> 20}m",
                   "--mechanism", mech]
        else:
            cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", workdir, "--dbfilename", "dump.rdb",
                   "--daemonize", "no", "--logfile", os.path.join(workdir, "redis.log")]
        self.p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL,
                                  stderr=open(os.path.join(workdir, f"{kind}.err"), "w"))
        for _ in range(2400):
            try:
                Client(self.port).cmd("PING")
                return
            except (OSError, RuntimeError):
                if self.p.poll() is not None:
                    raise RuntimeError(f"{kind} server exited: " +
                                       open(os.path.join(workdir, f"{kind}.err")).read())
                time.sleep(0.05)
        raise RuntimeError("server did not start")

    def bgsave(self):
        """Starts a BGSAVE; returns the time it was started."""
        c = Client(self.port)
        t = time.time()
        c.cmd("BGSAVE")
        c.s.close()
        return t

    def wait_save(self, t0):
        while True:
            i = info(self.port)
            if i.get("rdb_bgsave_in_progress", "0").strip() == "0":
                if i.get("rdb_last_bgsave_status", "ok").strip() != "ok":
                    raise RuntimeError("BGSAVE failed")
                return time.time() - t0
            time.sleep(0.01)

    def stop(self):
        self.p.kill()
        self.p.wait()


def measure(srv, size_gib, keys, pipelines, quick):
    mech = srv.mech if srv.kind == "kv" else "redis-fork"
    est = None
    for pl in pipelines:
        params = {"size_gib": size_gib, "pipeline": pl}
        n_steady = (20000 if quick else 200000) * (4 if pl > 1 else 1)
        steady = run_benchmark(srv.port, n_steady, keys, pl)
        if est is None:
            est = 2.5 * size_gib  # about what 1 GiB takes here; measured from then on
        # a run sized to last about as long as the snapshot (at most 10 s)
        ops = min(v["ops"] for v in steady.values()) if steady else 50000
        n = max(5000, int(ops * min(est, 10.0) / 2))
        base = pss(srv.p.pid)
        sampler = Sampler(srv.p.pid)
        sampler.start()
        # the load starts first, so the pause at the start of the snapshot is in it
        box = {}
        bench = threading.Thread(target=lambda: box.update(r=run_benchmark(srv.port, n, keys, pl)))
        bench.start()
        time.sleep(0.05)
        t0 = srv.bgsave()
        dur = srv.wait_save(t0)
        bench.join()
        during = box.get("r", {})
        sampler.stop = True
        sampler.join()
        est = dur
        for cmd in ("set", "get"):
            p = dict(params, command=cmd)
            for phase, res in (("steady", steady), ("during-snapshot", during)):
                r = res.get(cmd)
                for stat in ("p50", "p99", "p99.9", "max"):
                    emit(f"checkpoint/{stat}-{phase}", mech, p, "time", "ns",
                         r[stat] * 1e6 if r else None, "redis-benchmark gave no figure")
                emit(f"checkpoint/ops-{phase}", mech, p, "throughput", "ops_per_s",
                     r["ops"] if r else None, "redis-benchmark gave no figure")
        emit("checkpoint/snapshot-duration", mech, params, "time", "ns", dur * 1e9)
        if srv.kind == "kv":
            by_writers = int(info(srv.port).get("trapkit_last_pages_by_writers", "0"))
            emit("checkpoint/pages-by-writers", mech, params, "count", "pages", by_writers)
        emit("checkpoint/extra-memory", mech, params, "memory", "bytes",
             max(0, sampler.peak - base))
        log(f"    {mech:15s} {size_gib:g} GiB, pipeline {pl:2d}: snapshot {dur:.2f} s, "
            f"SET p99.9 {steady.get('set', {}).get('p99.9', 0):.2f} -> "
            f"{during.get('set', {}).get('p99.9', 0):.2f} ms, extra memory "
            f"{max(0, sampler.peak - base) / 2**20:.0f} MiB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--kv-server", required=True)
    ap.add_argument("--sizes", default=None, help="GiB, comma-separated")
    ap.add_argument("--pipelines", default="1,16", help="redis-benchmark -P values, comma-separated")
    ap.add_argument("--mechanisms", default=",".join(MECHS + ["redis-fork"]),
                    help="comma-separated, of: " + ", ".join(MECHS + ["redis-fork"]))
    a = ap.parse_args()
    chosen = a.mechanisms.split(",")
    for m in chosen:
        if m not in MECHS + ["redis-fork"]:
            ap.error(f"unknown mechanism {m!r}")
    sizes = [float(x) for x in a.sizes.split(",")] if a.sizes else \
        ([1 / 16] if a.quick else [1.0, 4.0])
    pipelines = [int(x) for x in a.pipelines.split(",")]
    have_redis = shutil.which("redis-server") and shutil.which("redis-benchmark")
    if not shutil.which("redis-benchmark"):
        for s in sizes:
            emit("checkpoint/snapshot-duration", "uffd-thread", {"size_gib": s}, "time", "ns", None,
                 "redis-benchmark is not installed (scripts/install-deps.sh installs it)")
        return
    work = tempfile.mkdtemp(prefix="tk-ckpt-bench-")
    try:
        for size in sizes:
            data = int(size * 2**30)
            keys = data // 1024
            mem = (int(data * 1.3) + (64 << 20)) & ~((1 << 20) - 1)
            log(f"  checkpoint: {size:g} GiB ({keys:,} keys)")
            # load once into kv-server and save; each mechanism starts from the image
            seed_dir = os.path.join(work, "seed")
            os.makedirs(seed_dir, exist_ok=True)
            srv = Server("kv", "uffd-thread", seed_dir, mem, a.kv_server)
            load(srv.port, keys)
            Client(srv.port).cmd("SAVE")
            srv.stop()
            for mech in [m for m in MECHS if m in chosen]:
                d = os.path.join(work, mech)
                os.makedirs(d, exist_ok=True)
                shutil.copy(os.path.join(seed_dir, "dump.tkimg"), os.path.join(d, "dump.tkimg"))
                srv = Server("kv", mech, d, mem, a.kv_server)
                try:
                    measure(srv, size, keys, pipelines, a.quick)
                finally:
                    srv.stop()
                    shutil.rmtree(d, ignore_errors=True)
            shutil.rmtree(seed_dir, ignore_errors=True)
            if "redis-fork" not in chosen:
                pass
            elif have_redis:
                d = os.path.join(work, "redis")
                os.makedirs(d, exist_ok=True)
                srv = Server("redis", None, d, mem, a.kv_server)
                try:
                    load(srv.port, keys)
                    measure(srv, size, keys, pipelines, a.quick)
                finally:
                    srv.stop()
                    shutil.rmtree(d, ignore_errors=True)
            else:
                emit("checkpoint/snapshot-duration", "redis-fork", {"size_gib": size}, "time", "ns",
                     None, "redis-server is not installed (scripts/install-deps.sh installs it)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
