"""Fixtures for the EduMatcher exchange processes: start the real binaries on
127.0.0.1 with free ports, and always stop them (even when a test fails)."""
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.request

import pytest
import zmq


sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "support"))
from loopback_ports import free_port  # noqa: E402  (shared with the other conftest)


def binary(name):
    build = os.environ.get("BUILD_DIR")
    if build:
        # products in bin/, load generators in bench/bin/, test tools in tests/bin/
        for sub in ("bin", "bench/bin", "tests/bin"):
            p = os.path.join(build, sub, name)
            if os.path.exists(p):
                return p
    p = shutil.which(name)
    if not p:
        pytest.skip(f"{name} not built")
    return p


def wait_until(pred, timeout=10.0, step=0.02):
    """Poll pred() until it is truthy (returned) or the timeout passes (None)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(step)
    return None


def http_get(port, path, timeout=5.0):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=timeout) as r:
        return r.status, r.headers, r.read()


class Proc:
    def __init__(self, args, env=None):
        self.args = args
        self.log = tempfile.TemporaryFile()
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log,
                                  env=env, text=True)
        # Each process prints one line when it is ready.
        self.ready = self.p.stdout.readline()

    def stderr(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def stop(self, sig=None):
        if self.p.poll() is None:
            if sig is None:
                self.p.terminate()
            else:
                self.p.send_signal(sig)
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        self.p.stdout.close()
        return self.p.returncode


@pytest.fixture
def procs():
    """Start processes with procs.start([...]); all are stopped at the end."""
    started = []

    class Starter:
        def start(self, args):
            pr = Proc(args)
            started.append(pr)
            return pr

    yield Starter()
    for pr in reversed(started):
        pr.stop()


@pytest.fixture
def zctx():
    ctx = zmq.Context()
    yield ctx
    ctx.destroy(linger=0)


@pytest.fixture
def workdir():
    d = tempfile.mkdtemp(prefix="em-exchange-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


SYMBOLS = """SYMBOL sym=ABC tick=0.01 band=20 ref=100.00
SYMBOL sym=XYZ tick=0.5 lot=1
"""
OPS_TOKEN = "s3cret"


class Trader:
    """One ALF session over TCP, read line by line with timeouts."""

    def __init__(self, port, gw=None, token=None):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""
        if gw:
            self.send(f"LOGIN gw={gw}" + (f" token={token}" if token else ""))
            line = self.line()
            assert line == f"LOGGEDIN gw={gw}", line

    def send(self, *lines):
        self.sock.sendall("".join(l + "\n" for l in lines).encode())

    def line(self, timeout=10.0):
        self.sock.settimeout(timeout)
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode()

    def until_pong(self, timeout=10.0):
        """Send PING and return every line before its PONG (a barrier)."""
        self.send("PING")
        out = []
        while True:
            l = self.line(timeout)
            if l == "PONG":
                return out
            out.append(l)

    def expect_nothing(self, wait=0.3):
        self.sock.settimeout(wait)
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return True
        self.buf += data
        return False

    def close(self):
        self.sock.close()


class LinkClient:
    """A raw client of the engine's order link (edumatcher/bus/order_link.h):
    records `u32 len | u8 gwlen | gw | frames`, a hello (empty gw, the key)
    first. What a gateway does, without a gateway."""

    def __init__(self, endpoint, key=b"", hello=True):
        if endpoint.startswith("unix:"):
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.connect(endpoint[5:])
        else:
            host, port = endpoint[len("tcp://"):].rsplit(":", 1)
            self.sock = socket.create_connection((host, int(port)))
        self.buf = b""
        if hello:
            self.send(b"", key)

    def send(self, gw, payload):
        self.sock.sendall(struct.pack("<IB", 1 + len(gw) + len(payload), len(gw)) + gw + payload)

    def record(self, timeout=10):
        """The next record (gw, payload); None when the engine closed the link."""
        self.sock.settimeout(timeout)
        while True:
            if len(self.buf) >= 5:
                n, gl = struct.unpack_from("<IB", self.buf)
                if len(self.buf) >= 4 + n:
                    gw, payload = self.buf[5:5 + gl], self.buf[5 + gl:4 + n]
                    self.buf = self.buf[4 + n:]
                    return gw, payload
            try:
                data = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError):
                data = b""
            if not data:
                return None
            self.buf += data

    def closed(self, timeout=10):
        """True once the engine closed the link (what it sent before is skipped)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.record(timeout=max(0.1, deadline - time.time())) is None:
                return True
        return False

    def close(self):
        self.sock.close()


def frames(payload):
    """Split a record's payload into its binary frames (u16 length first)."""
    out = []
    while payload:
        (n,) = struct.unpack_from("<H", payload)
        out.append(payload[:n])
        payload = payload[n:]
    return out


class Exchange:
    """Engine + gateway (+ optional clearing and monitor) on free ports.
    hosted=True: no gateway process; the traders' sessions are hosted by the
    engine (--alf-port), which gets the gateway's arguments."""

    def __init__(self, procs, workdir, gateway_args=(), engine_args=(), clearing=False,
                 monitor=False, extra_symbols="", gateway_query=False, hosted=False):
        self.procs = procs
        self.hosted = hosted
        self.dir = workdir
        self.pub = f"tcp://127.0.0.1:{free_port()}"
        self.health = f"tcp://127.0.0.1:{free_port()}"
        self.query = f"tcp://127.0.0.1:{free_port()}"
        self.journal = os.path.join(workdir, "journal")
        # the engine's order link: its default, a socket file in the journal dir
        self.orders = f"unix:{self.journal}/orders.sock"
        self.symbols = os.path.join(workdir, "symbols.alf")
        with open(self.symbols, "w") as f:
            f.write(SYMBOLS + extra_symbols)
        self.tokens = os.path.join(workdir, "tokens")
        with open(self.tokens, "w") as f:
            f.write(f"OPS {OPS_TOKEN}\n")
        self.engine_args = list(engine_args)
        self.port = free_port()
        if hosted:
            self.engine_args += ["--alf-port", str(self.port), "--tokens-file", self.tokens,
                                 *gateway_args]
        self.monitor_port = None
        if monitor:
            self.monitor_port = free_port()
            procs.start([binary("edumatcher-monitor"), "--http-port", str(self.monitor_port),
                         "--health", self.health, "--beacon-ms", "100",
                         "--engine-pub", self.pub])
        self.engine = self.start_engine()
        self.gateway = None
        if not hosted:
            self.start_gateway(gateway_args, gateway_query)
        self.clearing_port = None
        self.clearing = None
        if clearing:
            self.clearing_port = free_port()
            self.clearing = self.start_clearing()

    def start_gateway(self, gateway_args, gateway_query):
        self.gateway = self.procs.start([binary("edumatcher-gateway"), "--port", str(self.port),
                                    "--engine-orders", self.orders, "--engine-pub", self.pub,
                                    "--health", self.health, "--tokens-file", self.tokens,
                                    "--beacon-ms", "100",
                                    *(["--engine-query", self.query] if gateway_query else []),
                                    *gateway_args])
        assert self.gateway.ready.startswith("edumatcher-gateway"), self.gateway.stderr()

    def start_clearing(self):
        c = self.procs.start([binary("edumatcher-clearing"), "--engine-pub", self.pub,
                              "--engine-query", self.query, "--recover-ms", "200",
                              "--http-port", str(self.clearing_port), "--health", self.health,
                              "--beacon-ms", "100"])
        assert c.ready.startswith("edumatcher-clearing"), c.stderr()
        return c

    def add_gateway(self, name):
        """Start one more gateway process on the same engine; returns its port."""
        port = free_port()
        g = self.procs.start([binary("edumatcher-gateway"), "--port", str(port),
                              "--engine-orders", self.orders, "--engine-pub", self.pub,
                              "--health", self.health, "--name", name])
        assert g.ready.startswith("edumatcher-gateway"), g.stderr()
        return port

    def start_engine(self):
        e = self.procs.start([binary("edumatcher-engine"), "--pub", self.pub, "--health", self.health, "--query", self.query,
                              "--journal-dir", self.journal,
                              "--symbols-file", self.symbols, "--beacon-ms", "100",
                              *self.engine_args])
        assert e.ready.startswith("edumatcher-engine"), e.stderr()
        if self.hosted:
            assert e.ready.split()[-2:] == ["alf", f"127.0.0.1:{self.port}"], e.ready
        return e

    def trader(self, gw=None, token=None):
        return Trader(self.port, gw, token)


@pytest.fixture
def exchange(procs, workdir):
    made = []

    def make(**kw):
        x = Exchange(procs, workdir if not made else tempfile.mkdtemp(dir=workdir), **kw)
        made.append(x)
        return x

    return make


@pytest.fixture(params=["gateway", "hosted"])
def exchange_both(request, exchange):
    """As `exchange`, once with a gateway process and once with the sessions
    hosted by the engine (--alf-port): the same scenario both ways."""
    hosted = request.param == "hosted"

    def make(**kw):
        return exchange(hosted=hosted, **kw)

    make.hosted = hosted
    return make


def replay(lines):
    """Run edumatcher-replay over `<gw> <message>` lines; return its output lines."""
    text = "".join("OPS " + l + "\n" for l in SYMBOLS.strip().splitlines())
    text += "".join(l + "\n" for l in lines)
    r = subprocess.run([binary("edumatcher-replay")], input=text.encode(), capture_output=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode().splitlines()
