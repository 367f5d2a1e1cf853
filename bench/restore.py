#!/usr/bin/python3
"""bench/restore.py - how fast examples/kv-server is back after a restart
from its image, lazily and eagerly, beside a real redis-server loading its
RDB of the same data; and the images' sizes.

The protocol, for each data size (1 GiB; 64 MiB with --quick):

1. Images.  kv-server is filled to the size with its own SET (keys
   key:%012d, 984-byte values: 1 KiB per entry; tk-loadgen --mode fill, as
   bench/checkpoint.py does) and SAVEs: its full image, the one every
   restore below starts from.  Then 1% of the keys are SET again and a
   BGSAVE writes an incremental image (its size is reported, then it is
   removed).  The full image is saved again with --compress yes (LZ4) from
   a server started on it.  redis-server is filled the same way and SAVEs
   its RDB (its defaults: rdbcompression yes); checkpoint/image-size gives
   the four files' sizes (mechanisms trapkit, trapkit-lz4,
   trapkit-incremental, redis-rdb).
2. Restores.  A server is started on its image; the client connects (every
   0.2 ms until the port listens) and sends GET of a key until the reply is
   its value (redis-server answers -LOADING while it loads; kv-server
   eager listens only once loaded).  checkpoint/restore-first-reply is the
   time from starting the process to that reply.  checkpoint/restore-resident
   is the time until the whole image is in memory: for kv-server lazy, until
   INFO persistence says loading:0 (polled every 2 ms); for eager kv-server
   and redis-server the first reply (they answer only once loaded).  Each
   is measured with the image in the page cache (cache=warm: read just
   before) and after dropping the caches (cache=dropped: sync, then
   echo 3 > /proc/sys/vm/drop_caches; root only).
3. Repetitions: n (3) rounds; in each round every system restores once with
   each cache, the systems' order rotated from round to round.  Each figure
   is the median of the n runs with their min and max; the ratios of lazy to
   eager (checkpoint/restore-first-reply-over-eager,
   checkpoint/restore-resident-over-eager) are paired per round.

Mechanisms: lazy (kv-server's default: pages arrive on fault while a
background thread prefetches the rest), eager (kv-server --eager-restore
yes: the whole chain read and verified before it listens), redis-server.
Results are JSON lines on stdout (BENCHMARKING.md); progress on stderr.
"""
import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import checkpoint as ck  # noqa: E402  (its RESP client, fill and output helpers)

MECHS = ["lazy", "eager", "redis-server"]
CACHES = ["warm", "dropped"]


def log(msg):
    ck.log(msg)


def start(cmd, err):
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(err, "w"))


def kv_cmd(a, d, port, mem, *extra):
    # (--save "": no save points, no save at shutdown)
    return [a.kv_server, "--port", str(port), "--dir", d, "--memory", f"{mem >> 20}m",
            "--save", ""] + list(extra)


def redis_cmd(d, port):
    return ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", d, "--dbfilename", "dump.rdb", "--daemonize", "no",
            "--logfile", os.path.join(d, "redis.log")]


def connect(port, p, deadline):
    while True:
        try:
            return ck.Client(port, timeout=600)
        except OSError:
            if p.poll() is not None:
                raise RuntimeError("the server exited")
            if time.monotonic() > deadline:
                raise RuntimeError("the server did not listen")
            time.sleep(0.0002)


def ready(port, p):
    """Waits until the server answers and has loaded (INFO loading:0)."""
    c = connect(port, p, time.monotonic() + 900)
    while True:
        try:
            if ck.info(c).get("loading", "0") == "0":
                return c
        except RuntimeError:  # -LOADING
            pass
        time.sleep(0.01)


def stop(p):
    if p.poll() is None:
        p.kill()
    p.wait()


def set_some(c, keys, n, rnd):
    """SETs n random keys of the data set, pipelined, to new values."""
    left = n
    while left:
        k = min(left, 1000)
        batch = []
        for _ in range(k):
            key = b"key:%012d" % rnd.randrange(keys)
            v = bytes(rnd.randrange(97, 123) for _ in range(16)) * (ck.VSIZE // 16)
            batch.append(b"*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(key), key,
                                                                            len(v), v))
        c.s.sendall(b"".join(batch))
        for _ in range(k):
            c.reply()
        left -= k


def images(a, size, keys, mem):
    """Makes the images; returns (kv dir, redis dir, {mechanism: bytes})."""
    kvd = os.path.join(a.work, "kv")
    rd = os.path.join(a.work, "redis")
    os.makedirs(kvd)
    os.makedirs(rd)
    sizes = {}
    port = ck.free_port()
    p = start(kv_cmd(a, kvd, port, mem), os.path.join(kvd, "server.err"))
    try:
        c = ready(port, p)
        t = ck.fill(a.loadgen, port, keys)
        c.cmd("SAVE")
        sizes["trapkit"] = os.path.getsize(os.path.join(kvd, "dump.tkimg"))
        log(f"    kv-server: filled {keys:,} keys in {t:.0f} s, full image "
            f"{sizes['trapkit'] / 2**20:.0f} MiB")
        set_some(c, keys, max(1, keys // 100), random.Random(1))
        c.cmd("BGSAVE")
        while ck.info(c).get("rdb_bgsave_in_progress") != "0":
            time.sleep(0.02)
        i = ck.info(c)
        if i.get("trapkit_last_image_incremental") == "1":
            sizes["trapkit-incremental"] = int(i["trapkit_last_image_bytes"])
        c.close()
    finally:
        stop(p)
    for f in os.listdir(kvd):  # the restores start from the full image alone
        if ".inc." in f:
            os.unlink(os.path.join(kvd, f))
    # the same image compressed: saved by a server started on it
    cd = os.path.join(a.work, "kv-lz4")
    os.makedirs(cd)
    os.link(os.path.join(kvd, "dump.tkimg"), os.path.join(cd, "dump.tkimg"))
    p = start(kv_cmd(a, cd, port, mem, "--compress", "yes"), os.path.join(cd, "server.err"))
    try:
        c = ready(port, p)
        c.cmd("SAVE")
        c.close()
        sizes["trapkit-lz4"] = os.path.getsize(os.path.join(cd, "dump.tkimg"))
    finally:
        stop(p)
        shutil.rmtree(cd, ignore_errors=True)
    port = ck.free_port()
    p = start(redis_cmd(rd, port), os.path.join(rd, "server.err"))
    try:
        c = ready(port, p)
        t = ck.fill(a.loadgen, port, keys)
        c.cmd("SAVE")
        c.close()
        sizes["redis-rdb"] = os.path.getsize(os.path.join(rd, "dump.rdb"))
        log(f"    redis-server: filled in {t:.0f} s, RDB {sizes['redis-rdb'] / 2**20:.0f} MiB")
    finally:
        stop(p)
    return kvd, rd, sizes


def drop_caches():
    subprocess.run(["sync"], check=False)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def can_drop():
    try:
        drop_caches()
        return None
    except OSError as e:
        return f"cannot drop the page cache here ({e.strerror}: needs root)"


def warm(path):
    with open(path, "rb") as f:
        while f.read(1 << 24):
            pass


def restore(a, mech, cache, kvd, rd, mem, keys):
    """One restore: (first reply s, resident s), or raises."""
    d = rd if mech == "redis-server" else kvd
    img = os.path.join(d, "dump.rdb" if mech == "redis-server" else "dump.tkimg")
    if cache == "warm":
        warm(img)
    else:
        drop_caches()
    port = ck.free_port()
    if mech == "redis-server":
        cmd = redis_cmd(d, port)
    else:
        cmd = kv_cmd(a, d, port, mem, *(["--eager-restore", "yes"] if mech == "eager" else []))
    key = b"key:%012d" % random.randrange(keys)
    err = os.path.join(a.work, f"{mech}.err")
    t0 = time.monotonic()
    p = start(cmd, err)
    try:
        try:
            c = connect(port, p, t0 + 900)
        except RuntimeError as e:
            raise RuntimeError(f"{mech}: {e}: {open(err).read()[-1000:]}")
        while True:
            try:
                v = c.cmd("GET", key)
                break
            except RuntimeError as e:
                if not str(e).startswith("LOADING"):
                    raise
        first = time.monotonic() - t0
        if v is None or len(v) != ck.VSIZE:
            raise RuntimeError(f"{mech}: GET {key!r} answered {v!r:.40}, not a value")
        if mech == "lazy":
            i = ck.info(c)
            if i.get("trapkit_restore") != "lazy":
                raise NotImplementedError("this kv-server restores eagerly only")
            while i.get("loading") != "0":
                time.sleep(0.002)
                i = ck.info(c)
            resident = time.monotonic() - t0
        else:
            resident = first
        c.close()
        if p.poll() is not None:
            raise RuntimeError(f"{mech} exited")
    finally:
        stop(p)
    return first, resident


def run_size(a, size):
    keys = int(size * 2**30) // ck.ENTRY
    mem = (int(keys * ck.ENTRY * 1.3) + (64 << 20)) & ~((1 << 20) - 1)
    log(f"  {size:g} GiB: {keys:,} keys")
    kvd, rd, sizes = images(a, size, keys, mem)
    for m in ("trapkit", "trapkit-lz4", "trapkit-incremental", "redis-rdb"):
        note = {"trapkit-incremental": "after SET of 1% of the keys",
                "redis-rdb": "redis-server's defaults (rdbcompression yes)"}.get(m)
        ck.emit("checkpoint/image-size", m, {"size_gib": size}, "size", "bytes",
                [sizes.get(m)], reason="not written", note=note)
    nodrop = can_drop()
    runs = {(m, c): [] for m in MECHS for c in CACHES}
    reason = {}
    for rnd in range(a.reps):
        order = MECHS[rnd % len(MECHS):] + MECHS[:rnd % len(MECHS)]
        for cache in CACHES:
            if cache == "dropped" and nodrop:
                continue
            for m in order:
                if m in reason:
                    runs[(m, cache)].append(None)
                    continue
                try:
                    r = restore(a, m, cache, kvd, rd, mem, keys)
                except NotImplementedError as e:
                    reason[m] = str(e)
                    r = None
                runs[(m, cache)].append(r)
                if r:
                    log(f"    round {rnd + 1} {cache:7} {m:12} first reply {r[0] * 1e3:8.1f} ms, "
                        f"resident {r[1] * 1e3:8.1f} ms")
    for cache in CACHES:
        p = {"size_gib": size, "cache": cache}
        why = nodrop if cache == "dropped" else None
        for m in MECHS:
            rs = runs[(m, cache)]
            for i, exp in enumerate(("restore-first-reply", "restore-resident")):
                ck.emit(f"checkpoint/{exp}", m, p, "time", "ns",
                        [r[i] * 1e9 if r else None for r in rs],
                        reason=why or reason.get(m))
        for i, exp in enumerate(("restore-first-reply", "restore-resident")):
            pairs = [lz[i] / eg[1] for lz, eg in zip(runs[("lazy", cache)], runs[("eager", cache)])
                     if lz and eg]
            ck.emit(f"checkpoint/{exp}-over-eager", "lazy", p, "ratio", "x", pairs,
                    reason=why or reason.get("lazy"),
                    note="lazy over eager's load time (its first reply), paired per round")
    shutil.rmtree(kvd, ignore_errors=True)
    shutil.rmtree(rd, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--kv-server", required=True)
    ap.add_argument("--loadgen", required=True, help="tk-loadgen")
    ap.add_argument("--quick", action="store_true", help="64 MiB, 2 rounds")
    ap.add_argument("--sizes", default=None, help="GiB, comma-separated (1)")
    ap.add_argument("--reps", type=int, default=None, help="rounds (3)")
    a = ap.parse_args()
    sizes = ([float(s) for s in a.sizes.split(",")] if a.sizes
             else [1 / 16] if a.quick else [1.0])
    a.reps = a.reps or (2 if a.quick else 3)
    if not shutil.which("redis-server"):
        sys.exit("restore: redis-server is missing (scripts/install-deps.sh installs it)")
    a.work = tempfile.mkdtemp(prefix="tk-restore-bench-", dir="/var/tmp")
    try:
        for size in sizes:
            shutil.rmtree(a.work, ignore_errors=True)
            os.makedirs(a.work)
            run_size(a, size)
    finally:
        shutil.rmtree(a.work, ignore_errors=True)


if __name__ == "__main__":
    main()
