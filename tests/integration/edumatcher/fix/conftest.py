"""Fixtures for the FIX gateway tests: the exchange fixtures of ../exchange
(engine and ALF gateway on free ports), plus edumatcher-fix on the same
engine, a QuickFIX initiator (em-qf-client) driven line by line, and a raw
FIX socket for what QuickFIX would never send."""
import importlib.util
import os
import queue
import socket
import subprocess
import threading
import time

import pytest

_spec = importlib.util.spec_from_file_location(
    "em_exchange_conftest", os.path.join(os.path.dirname(__file__), "..", "exchange",
                                         "conftest.py"))
ex = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ex)

procs = ex.procs
workdir = ex.workdir
binary = ex.binary
free_port = ex.free_port

SOH = "\x01"
FIX_TOKEN = "fixpw"


def fields(msg):
    """'8=FIX.4.4|9=..|35=8|...' -> {tag: value} (the last of a repeated tag)."""
    out = {}
    for f in msg.strip("|").split("|"):
        if "=" in f:
            k, v = f.split("=", 1)
            out[int(k)] = v
    return out


class FixGateway:
    def __init__(self, x, procs, store, port=None, args=()):
        self.port = port or free_port()
        self.store = store
        self.p = procs.start([binary("edumatcher-fix"), "--port", str(self.port),
                              "--engine-orders", x.orders, "--engine-pub", x.pub,
                              "--health", x.health, "--tokens-file", x.tokens,
                              "--store-dir", store, "--beacon-ms", "100", *args])
        assert self.p.ready.startswith("edumatcher-fix"), self.p.stderr()


class QF:
    """em-qf-client: every line it prints is kept; wait() scans for one."""

    def __init__(self, port, sender, password, store, hb=30, reset="Y"):
        self.p = subprocess.Popen(
            [binary("em-qf-client"), "127.0.0.1", str(port), sender, "EDUMATCHER", password,
             str(hb), store, reset],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
            bufsize=1)
        self.lines = []
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()
        self.seen = 0

    def _read(self):
        for line in self.p.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def _pull(self, timeout):
        try:
            line = self.q.get(timeout=timeout)
        except queue.Empty:
            return False
        if line is None:
            raise EOFError("em-qf-client ended")
        self.lines.append(line)
        return True

    def wait(self, pred, timeout=15.0, what="a line"):
        """The first line from the cursor on for which pred(kind, fields) holds;
        the cursor moves past it."""
        end = time.monotonic() + timeout
        while True:
            while self.seen < len(self.lines):
                line = self.lines[self.seen]
                self.seen += 1
                kind, _, rest = line.partition(" ")
                fl = fields(rest) if kind in ("IN", "OUT", "APP") else {}
                if pred(kind, fl):
                    return fl if fl else line
            left = end - time.monotonic()
            if left <= 0 or not self._pull(left):
                raise AssertionError(f"no {what} in:\n" + "\n".join(self.lines[-40:]))

    def app(self, msgtype, timeout=15.0, **match):
        """The next application message of msgtype whose fields match."""
        want = {int(k[1:]): str(v) for k, v in match.items()}

        def pred(kind, f):
            return (kind == "APP" and f.get(35) == msgtype and
                    all(f.get(k) == v for k, v in want.items()))
        return self.wait(pred, timeout, f"APP 35={msgtype} {match}")

    def incoming(self, msgtype, timeout=15.0, **match):
        want = {int(k[1:]): str(v) for k, v in match.items()}

        def pred(kind, f):
            return (kind == "IN" and f.get(35) == msgtype and
                    all(f.get(k) == v for k, v in want.items()))
        return self.wait(pred, timeout, f"IN 35={msgtype} {match}")

    def logon(self, timeout=15.0):
        return self.wait(lambda k, f: k == "LOGON", timeout, "LOGON")

    def send(self, msgtype, **tags):
        body = "|".join(f"{k[1:]}={v}" for k, v in tags.items())
        self.p.stdin.write(f"send {msgtype} {body}\n")
        self.p.stdin.flush()

    def command(self, text):
        self.p.stdin.write(text + "\n")
        self.p.stdin.flush()

    def stop(self):
        if self.p.poll() is None:
            try:
                self.p.stdin.write("quit\n")
                self.p.stdin.flush()
                self.p.wait(timeout=10)
            except (BrokenPipeError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait()


class RawFix:
    """A FIX session by hand: frames what it is given (right BodyLength and
    CheckSum unless told otherwise) and reads whole messages back."""

    def __init__(self, port, sender="RAW1", target="EDUMATCHER"):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.sender, self.target, self.seq, self.buf = sender, target, 1, b""

    @staticmethod
    def frame(body):
        body = body.replace("|", SOH)
        m = f"8=FIX.4.4{SOH}9={len(body.encode())}{SOH}" + body
        return (m + f"10={sum(m.encode()) % 256:03d}{SOH}").encode()

    def send(self, msgtype, extra="", seq=None, sender=None, target=None):
        s = self.seq if seq is None else seq
        if seq is None:
            self.seq += 1
        body = (f"35={msgtype}|49={sender or self.sender}|56={target or self.target}|34={s}|"
                f"52=20261201-12:00:00.000|{extra}")
        self.sock.sendall(self.frame(body))

    def logon(self, hb=30, extra=""):
        self.send("A", f"98=0|108={hb}|141=Y|{extra}")
        return self.read()

    def read(self, timeout=10.0):
        """The next whole message as {tag: value}, or None at end of stream."""
        self.sock.settimeout(timeout)
        while True:
            i = self.buf.find(b"\x0110=")
            if i >= 0 and len(self.buf) >= i + 8:
                msg, self.buf = self.buf[:i + 8], self.buf[i + 8:]
                return fields(msg.decode().replace(SOH, "|"))
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buf += chunk

    def read_type(self, msgtype, timeout=10.0):
        while True:
            m = self.read(timeout)
            if m is None or m.get(35) == msgtype:
                return m

    def close(self):
        self.sock.close()


@pytest.fixture
def fixx(procs, workdir):
    """An exchange (engine + ALF gateway) with a FIX gateway on it; traders
    FIX1 and FIX2 have the password FIX_TOKEN."""
    x = ex.Exchange(procs, workdir)
    with open(x.tokens, "a") as f:
        f.write(f"FIX1 {FIX_TOKEN}\nFIX2 {FIX_TOKEN}\n")
    store = os.path.join(workdir, "fix-store")
    x.fix = FixGateway(x, procs, store)
    x.fix_store = store
    x.procs_ref = procs
    clients = []

    def qf(sender="FIX1", password=FIX_TOKEN, hb=30, reset="Y", store=None):
        c = QF(x.fix.port, sender, password,
               store or os.path.join(workdir, f"qf-{sender}-{len(clients)}"), hb, reset)
        clients.append(c)
        return c

    x.qf = qf
    yield x
    for c in clients:
        c.stop()
