"""tests/kv_resp.py - a RESP2 client for the kv-server tests (no dependencies).

Replies: simple strings as str, errors as Err (a str), integers as int, bulk
strings as bytes (None for nil), arrays as lists (None for a nil array).
"""
import os
import socket


class Err(str):
    """An error reply."""


def resp(*args):
    """A command as a RESP array of bulk strings."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Conn:
    def __init__(self, port, timeout=30, host="127.0.0.1"):
        self.s = socket.create_connection((host, port), timeout=timeout)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()
        self.pos = 0

    def close(self):
        self.s.close()

    def _fill(self):
        b = self.s.recv(1 << 20)
        if not b:
            raise EOFError("the server closed the connection")
        if self.pos > (1 << 20):
            del self.buf[:self.pos]
            self.pos = 0
        self.buf += b

    def _line(self):
        while (end := self.buf.find(b"\r\n", self.pos)) < 0:
            self._fill()
        line, self.pos = bytes(self.buf[self.pos:end]), end + 2
        return line

    def _exact(self, n):
        while len(self.buf) - self.pos < n:
            self._fill()
        d, self.pos = bytes(self.buf[self.pos:self.pos + n]), self.pos + n
        return d

    def reply(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t == b"+":
            return rest.decode("latin-1")
        if t == b"-":
            return Err(rest.decode("latin-1"))
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            d = self._exact(n + 2)
            assert d[-2:] == b"\r\n", "bulk reply not terminated by CRLF"
            return d[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.reply() for _ in range(n)]
        raise AssertionError("not a RESP reply: %r" % line[:80])

    def send(self, data):
        self.s.sendall(data)

    def cmd(self, *args):
        self.s.sendall(resp(*args))
        return self.reply()

    def pipeline(self, cmds):
        self.s.sendall(b"".join(resp(*c) for c in cmds))
        return [self.reply() for _ in cmds]

    def info(self, field):
        """The value of an INFO field, as the server writes it (a string)."""
        txt = self.cmd("INFO", "all").decode()
        return next(l.split(":", 1)[1] for l in txt.split("\r\n") if l.startswith(field + ":"))

    def raw(self, data):
        """Sends raw bytes; returns everything the server sends until it closes
        the connection or is quiet for a second."""
        self.s.sendall(data)
        got = b""
        self.s.settimeout(1)
        try:
            while True:
                b = self.s.recv(65536)
                if not b:
                    break
                got += b
        except (socket.timeout, ConnectionResetError):
            pass
        return got


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def fail(msg):
    raise SystemExit("FAIL: " + msg)


def check(cond, msg):
    if not cond:
        fail(msg)


def port_from_env():
    return int(os.environ["KV_PORT"])
