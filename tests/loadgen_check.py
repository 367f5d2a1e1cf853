#!/usr/bin/env python3
"""tk-loadgen (bench/loadgen.c) checked against servers whose behaviour is known.

  loadgen_check.py TK_LOADGEN stall    a tiny RESP server (here) that stalls for
                                       a known time at a known instant: the stall
                                       must show fully (max >= the stall, about
                                       rate x stall slow requests, in the phase
                                       and the intervals where it happened)
  loadgen_check.py TK_LOADGEN redis    redis-server at a low rate: small p50, no
                                       errors (skipped, 77, without redis-server)
  loadgen_check.py TK_LOADGEN options  bad options: a clear error, status 2

Asserts behaviour, never a speed: the bounds are wide enough for a busy
2-core machine.
"""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

LG = sys.argv[1]
WHAT = sys.argv[2]
failures = []


def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg, flush=True)
    if not cond:
        failures.append(msg)


# ------------------------------------------------------------ a stalling server
class StallServer(threading.Thread):
    """Answers SET with +OK and GET with a 3-byte bulk string, one thread, one
    loop; `DEBUG SLEEP s` (as redis-server has it) stops the whole loop for s
    seconds, and the stall's start and end (CLOCK_MONOTONIC) are kept."""

    def __init__(self):
        super().__init__(daemon=True)
        self.ls = socket.socket()
        self.ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.ls.bind(("127.0.0.1", 0))
        self.ls.listen(64)
        self.port = self.ls.getsockname()[1]
        self.stalls = []
        self.requests = 0

    def run(self):
        import selectors
        sel = selectors.DefaultSelector()
        self.ls.setblocking(False)
        sel.register(self.ls, selectors.EVENT_READ)
        bufs = {}
        while True:
            for key, _ in sel.select():
                s = key.fileobj
                if s is self.ls:
                    c, _ = s.accept()
                    c.setblocking(True)
                    c.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sel.register(c, selectors.EVENT_READ)
                    bufs[c] = b""
                    continue
                try:
                    d = s.recv(1 << 16)
                except OSError:
                    d = b""
                if not d:
                    sel.unregister(s)
                    s.close()
                    continue
                bufs[s] += d
                out = []
                while True:
                    args, rest = parse(bufs[s])
                    if args is None:
                        break
                    bufs[s] = rest
                    self.requests += 1
                    cmd = args[0].upper()
                    if cmd == b"DEBUG" and len(args) == 3 and args[1].upper() == b"SLEEP":
                        t = time.monotonic()
                        time.sleep(float(args[2]))
                        self.stalls.append((t, time.monotonic()))
                        out.append(b"+OK\r\n")
                    elif cmd == b"SET":
                        out.append(b"+OK\r\n")
                    elif cmd == b"GET":
                        out.append(b"$3\r\nabc\r\n")
                    else:
                        out.append(b"-ERR unknown command\r\n")
                if out:
                    s.sendall(b"".join(out))


def parse(buf):
    """One RESP array of bulk strings from buf: (args, rest) or (None, buf)."""
    if not buf.startswith(b"*"):
        if buf:
            raise RuntimeError(f"not RESP: {buf[:20]!r}")
        return None, buf
    nl = buf.find(b"\r\n")
    if nl < 0:
        return None, buf
    n, pos, args = int(buf[1:nl]), nl + 2, []
    for _ in range(n):
        nl = buf.find(b"\r\n", pos)
        if nl < 0:
            return None, buf
        ln = int(buf[pos + 1:nl])
        if len(buf) < nl + 2 + ln + 2:
            return None, buf
        args.append(buf[nl + 2:nl + 2 + ln])
        pos = nl + 2 + ln + 2
    return args, buf[pos:]


def command(port, *args):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() for x in args)))
    r = s.recv(1024)
    s.close()
    return r


def run_phases(port, extra, steps):
    """Runs tk-loadgen with phases; steps is [(seconds to wait, action)]
    done in order, each action followed by SIGUSR1.  Returns its JSON."""
    p = subprocess.Popen([LG, "--port", str(port)] + extra, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        for wait, action in steps:
            time.sleep(wait)
            if action:
                action()
            p.send_signal(signal.SIGUSR1)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    sys.stderr.write(err)
    check(p.returncode == 0, f"tk-loadgen exits 0 (got {p.returncode})")
    return json.loads(out)


def stall_test():
    srv = StallServer()
    srv.start()
    rate, stall, slow_ms = 1000, 0.5, 50
    stall_thread = []

    def do_stall():
        # from another connection, a moment into the phase, so the whole
        # stall is inside it
        def go():
            time.sleep(0.2)
            command(srv.port, "DEBUG", "SLEEP", str(stall))
        t = threading.Thread(target=go)
        t.start()
        stall_thread.append(t)

    d = run_phases(srv.port, ["--rate", str(rate), "--connections", "8", "--keys", "1000",
                              "--value-size", "100", "--phases", "before,stall,after",
                              "--slow", str(slow_ms * 1000), "--interval", "50",
                              "--warn-lateness", "20000"],
                   [(1.5, do_stall), (1.5, None), (1.0, None)])
    note_lateness(d)
    for t in stall_thread:
        t.join()
    check(len(srv.stalls) == 1, "the server stalled once")
    st0, st1 = srv.stalls[0]
    real = st1 - st0
    check(real >= stall, f"the stall lasted {real:.3f} s")
    ph = {p["name"]: p for p in d["phases"]}
    check(list(ph) == ["before", "stall", "after"], f"three phases: {list(ph)}")
    check(d["errors"] == 0 and d["unanswered"] == 0, f"no errors ({d['errors']}, "
          f"{d['unanswered']} unanswered)")
    s = ph["stall"]["all"]
    open_slow = s["slow"]
    # the first request scheduled in the stall is sent at most one interval
    # (1/rate) after it begins and waits for all of the rest of it; 5 ms
    # allow for the server's own clock read around its sleep
    full = (real - 1 / rate - 0.005) * 1e6
    check(s["max_us"] >= full, f"max in the stall phase {s['max_us'] / 1e3:.1f} ms >= "
          f"the stall {real * 1e3:.1f} ms less one interval and 5 ms")
    check(d["total"]["max_us"] >= full, "the total's max too")
    # every request scheduled during the stall (but for the last slow_ms of
    # it) waits more than slow_ms: rate x (stall - slow) of them
    expect = rate * (real - slow_ms / 1e3)
    check(0.75 * expect <= s["slow"] <= 1.25 * expect + 30,
          f"slow requests in the stall phase: {s['slow']}, expected about {expect:.0f} "
          f"(rate x stall)")
    check(ph["before"]["all"]["max_us"] < stall * 1e6 / 2,
          f"before the stall the max is small ({ph['before']['all']['max_us'] / 1e3:.1f} ms)")
    check(ph["after"]["all"]["max_us"] < stall * 1e6 / 2,
          f"after the stall the max is small ({ph['after']['all']['max_us'] / 1e3:.1f} ms)")
    # the intervals put the slow requests where the stall was; a request
    # still waiting in the server's queue when the stall began is slow too,
    # and it was sent at most the longest wait before the stall ago
    iv, w, t0 = d["intervals"], d["interval_s"], d["t0_monotonic_s"]
    queued = ph["before"]["all"]["max_us"] / 1e6
    slow_at = [i * w for i, n in enumerate(iv["slow"]) if n]
    check(slow_at and min(slow_at) >= st0 - t0 - w - queued and max(slow_at) <= st1 - t0 + w,
          f"the intervals with slow requests ({min(slow_at or [0]):.2f}-{max(slow_at or [0]):.2f}"
          f" s) lie within the stall ({st0 - t0:.2f}-{st1 - t0:.2f} s)")
    check(max(iv["max_us"]) >= stall * 1e6 * 0.9, "an interval's max shows the stall")
    check(sum(iv["n"]) + sum(iv["errors"]) == d["sent"], "the intervals count every request")
    # the phase boundaries are the signals' instants
    check(ph["stall"]["start_s"] <= st0 - t0 <= ph["stall"]["end_s"], "the stall is in its phase")
    n = d["sent"]
    dur = ph["after"]["end_s"]
    check(0.85 * rate * dur <= n <= 1.15 * rate * dur, f"{n} sent in {dur:.2f} s at {rate}/s")

    # --control: a phase change named by its instant, written when the phase
    # begins but read late because the generator was not running (stopped
    # here for 0.1 s): the boundary is where the line says, the stall falls
    # wholly in its phase, and the generator's lateness shows the gap
    p = subprocess.Popen([LG, "--port", str(srv.port), "--rate", str(rate), "--connections", "8",
                          "--keys", "1000", "--value-size", "100", "--control", "--quiet",
                          "--phases", "before,stall,after", "--slow", str(slow_ms * 1000),
                          "--warn-lateness", "1000000"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    time.sleep(1.0)
    p.send_signal(signal.SIGSTOP)
    t_stall = time.monotonic()
    p.stdin.write(f"next {t_stall:.6f}\n")
    p.stdin.flush()
    # the server answers what was sent before the stop first (it may lag on
    # a busy machine), so that the stall holds no request of the first phase
    time.sleep(0.05)
    th = threading.Thread(target=command, args=(srv.port, "DEBUG", "SLEEP", str(stall)))
    th.start()
    time.sleep(0.05)
    p.send_signal(signal.SIGCONT)
    th.join()
    time.sleep(0.3)
    p.stdin.write(f"next {time.monotonic():.6f}\n")
    p.stdin.flush()
    time.sleep(0.5)
    p.stdin.write("stop\n")
    p.stdin.flush()
    d = json.loads(p.communicate(timeout=60)[0])
    ph = {x["name"]: x for x in d["phases"]}
    note_lateness({"phases": [ph["before"], ph["after"]]})  # the stop is on purpose
    t0 = d["t0_monotonic_s"]
    check(abs(ph["stall"]["start_s"] - (t_stall - t0)) < 0.001,
          f"--control: the stall phase starts at the instant given "
          f"({ph['stall']['start_s']:.3f} s vs {t_stall - t0:.3f} s)")
    check(ph["stall"]["all"]["max_us"] >= stall * 1e6 and ph["before"]["all"]["max_us"] < stall *
          1e6 / 2, f"--control: the stall is in its phase (max {ph['stall']['all']['max_us'] / 1e3:.0f}"
          f" ms), not before it ({ph['before']['all']['max_us'] / 1e3:.1f} ms)")
    check(ph["stall"]["lateness"]["max_us"] >= 70000,
          f"--control: the stopped generator's lateness shows "
          f"({ph['stall']['lateness']['max_us'] / 1e3:.0f} ms)")
    expect = rate * (stall - slow_ms / 1e3)
    check(0.75 * expect <= ph["stall"]["all"]["slow"] <= 1.25 * expect + 30,
          f"--control: {ph['stall']['all']['slow']} slow requests in the stall phase, expected "
          f"about {expect:.0f}")

    # a fixed-duration run through the same stall, closed loop: the stall
    # shows as about one slow request per connection (what open loop avoids)
    p = subprocess.Popen([LG, "--port", str(srv.port), "--mode", "closed", "--connections", "4",
                          "--duration", "2", "--slow", str(slow_ms * 1000), "--quiet"],
                         stdout=subprocess.PIPE, text=True)
    time.sleep(0.7)
    command(srv.port, "DEBUG", "SLEEP", str(stall))
    d = json.loads(p.communicate(timeout=60)[0])
    check(d["total"]["max_us"] >= stall * 1e6 * 0.9, "closed loop: the max shows the stall")
    check(d["total"]["slow"] < open_slow / 5, f"closed loop: only {d['total']['slow']} slow "
          f"requests through the same stall (open loop: {open_slow})")
    check(d["total"]["ops_per_s"] > 0, "closed loop reports a throughput")


def redis_test():
    if not shutil.which("redis-server"):
        print("redis-server is not installed: skipped")
        sys.exit(77)
    work = tempfile.mkdtemp(prefix="tk-loadgen-")
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    srv = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                            "--save", "", "--appendonly", "no", "--dir", work],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                if b"PONG" in command(port, "PING"):
                    break
            except OSError:
                time.sleep(0.05)
        f = subprocess.run([LG, "--port", str(port), "--mode", "fill", "--keys", "20000",
                            "--connections", "2"], capture_output=True, text=True, timeout=120)
        fd = json.loads(f.stdout)
        check(f.returncode == 0 and fd["errors"] == 0 and fd["answered"] == 20000,
              "fill: 20000 SETs answered without error")
        dbsize = command(port, "DBSIZE")
        check(dbsize.strip() == b":20000", f"redis-server holds the 20000 keys ({dbsize!r})")
        r = subprocess.run([LG, "--port", str(port), "--rate", "500", "--duration", "3",
                            "--warmup", "0.5", "--keys", "20000", "--connections", "8",
                            "--arrival", "uniform"],
                           capture_output=True, text=True, timeout=120)
        sys.stderr.write(r.stderr)
        d = json.loads(r.stdout)
        check(r.returncode == 0, "tk-loadgen exits 0")
        check(d["errors"] == 0 and d["unanswered"] == 0 and d["connections_lost"] == 0,
              f"no errors ({d['errors']})")
        check([p["name"] for p in d["phases"]] == ["warmup", "run"], "warm-up, then the run")
        t = d["total"]
        check(t["p50_us"] < 20000, f"p50 {t['p50_us']:.0f} us is small")
        check(1200 * 0.9 <= t["count"] <= 1250 * 1.1, f"{t['count']} requests at 500/s for 2.5 s")
        check(d["total_set"]["count"] > 0 and d["total_get"]["count"] > 0, "both SET and GET")
        check(t["p50_us"] <= t["p99_us"] <= t["p99_9_us"] <= t["max_us"],
              "p50 <= p99 <= p99.9 <= max")
        check(len(d["intervals"]["n"]) in range(29, 32), "30 intervals of 100 ms")
    finally:
        srv.kill()
        srv.wait()
        shutil.rmtree(work, ignore_errors=True)


def options_test():
    bad = [
        ([], "--port is required"),
        (["--port", "1"], "--mode open needs --rate"),
        (["--port", "1", "--rate", "abc"], "--rate wants a number"),
        (["--port", "1", "--rate", "-5"], "--rate must be between"),
        (["--port", "1", "--rate", "10", "--connections", "0"], "--connections must be between"),
        (["--port", "1", "--rate", "10", "--mode", "sideways"], "--mode is open, closed or fill"),
        (["--port", "1", "--rate", "10", "--arrival", "bursty"], "--arrival is poisson or uniform"),
        (["--port", "1", "--rate", "10", "--frobnicate"], "unknown option '--frobnicate'"),
        (["--port", "1", "--rate"], "--rate needs a value"),
        (["--port", "1", "--mode", "closed"], "--mode closed needs --duration"),
        (["--port", "1", "--rate", "10", "--set-ratio", "1.5"], "--set-ratio must be between"),
        (["--port", "1", "--keys", "5000", "--key-digits", "3", "--rate", "1"],
         "needs more than --key-digits"),
        (["--port", "1", "--rate", "10", "stray"], "unexpected argument 'stray'"),
    ]
    for args, msg in bad:
        r = subprocess.run([LG] + args, capture_output=True, text=True, timeout=10)
        check(r.returncode == 2 and msg in r.stderr and not r.stdout,
              f"{' '.join(args) or '(none)'}: status {r.returncode}, says {r.stderr.splitlines()[0] if r.stderr else ''!r}")
    # nothing listens there: a clear error, status 1
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = subprocess.run([LG, "--port", str(port), "--rate", "10", "--duration", "1"],
                       capture_output=True, text=True, timeout=10)
    check(r.returncode == 1 and "cannot connect" in r.stderr, "no server: 'cannot connect', 1")
    r = subprocess.run([LG, "--help"], capture_output=True, text=True, timeout=10)
    check(r.returncode == 0 and "--rate" in r.stdout, "--help prints the options")


def attempts(test, tries=5):
    """Runs test up to `tries` times while its checks fail on a machine too
    busy to tell: the stall checks need the generator itself on schedule
    (its own send lateness under 50 ms), which other work on a shared 2-CPU
    machine can prevent; a run with the generator on schedule decides.  If
    the generator fell behind in every try, nothing was decided: the test
    says so and is skipped (status 77), neither passed nor failed."""
    global failures, busy
    for i in range(tries):
        failures, busy = [], 0.0
        test()
        if not failures or busy < 50000:
            return
        if i + 1 < tries:
            print(f"-- the generator fell {busy / 1e3:.0f} ms behind its schedule (a busy machine): "
                  f"again ({i + 2} of {tries})", flush=True)
    print(f"-- the generator fell {busy / 1e3:.0f} ms behind its schedule in every one of {tries} "
          f"tries: the machine is too busy to tell; skipped ({len(failures)} checks undecided)",
          flush=True)
    sys.exit(77)


busy = 0.0


def note_lateness(d):
    global busy
    busy = max([busy, d.get("lateness", {}).get("max_us", 0)] +
               [p.get("lateness", {}).get("max_us", 0) for p in d.get("phases", [])])


if WHAT == "stall":
    attempts(stall_test)
else:
    {"redis": redis_test, "options": options_test}[WHAT]()
print(f"{len(failures)} failed" if failures else "all checks passed")
sys.exit(1 if failures else 0)
