"""The launchers supervise: kill -9 of one process is reported, the process
is started again (or left down with --no-restart), and the rest serves.

scripts/gridsync-cluster and scripts/edumatcher are started as `make run`
starts them, on free ports and with their state in a temporary directory;
every wait below is for an event (a line from the launcher, an answer from
a server) with a generous deadline, never a fixed sleep.
"""
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request

import pytest
import redis

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
BUILD = os.environ.get("BUILD_DIR", os.path.join(ROOT, "build"))
DEADLINE = 120  # seconds: this machine is shared and loaded


def port_free(p):
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", p))
            return True
        except OSError:
            return False


def ephemeral_low():
    """The first port of the kernel's ephemeral range (32768 by default)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_base(offsets):
    """A base port b such that b + o is free for every offset o, all of
    them below the ephemeral range: a port in it may be taken by any
    outgoing connection (another node's, a client's) while a killed node
    is down, and the node could then not listen again."""
    top = ephemeral_low() - max(offsets)
    if top <= 2000:
        pytest.skip("no port range below the ephemeral ports")
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            b = s.getsockname()[1]
        b = 2000 + b % (top - 2000)
        if all(port_free(b + o) for o in offsets):
            return b
    pytest.skip("no free port range")


class Launcher:
    """A launcher in its own process group; its stderr is collected."""

    def __init__(self, args, state):
        env = dict(os.environ, BUILD_DIR=BUILD, STATE_DIR=str(state))
        self.proc = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, start_new_session=True)
        self.lines = []
        self.cv = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cv:
                self.lines.append(line.rstrip("\n"))
                self.cv.notify_all()
        with self.cv:
            self.cv.notify_all()

    def wait_line(self, text, after=0):
        """Index of the first line from `after` on that contains text."""
        end = time.monotonic() + DEADLINE
        with self.cv:
            while True:
                for i in range(after, len(self.lines)):
                    if text in self.lines[i]:
                        return i
                left = end - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not self._more():
                    raise AssertionError(f"no line {text!r}; got:\n" + "\n".join(self.lines))
                self.cv.wait(min(left, 1))

    def _more(self):
        return False

    def children(self):
        """pid -> command line of the launcher's child processes."""
        out = {}
        for d in os.listdir("/proc"):
            if not d.isdigit():
                continue
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
                if ppid == self.proc.pid:
                    with open(f"/proc/{d}/cmdline") as f:
                        out[int(d)] = f.read().replace("\0", " ")
            except (OSError, ValueError, IndexError):
                pass
        return out

    def child(self, needle):
        for pid, cmd in self.children().items():
            if needle in cmd:
                return pid
        raise AssertionError(f"no child running {needle!r}: {self.children()}")

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def until(fn, what, la=None):
    """fn() until true; on failure the launcher's last lines (la) say why."""
    end = time.monotonic() + DEADLINE
    last = None
    while time.monotonic() < end:
        try:
            v = fn()
            if v:
                return v
        except (redis.RedisError, OSError) as e:
            last = e
        time.sleep(0.2)
    said = "\n".join(la.lines[-40:]) if la else ""
    raise AssertionError(f"{what}: not within {DEADLINE}s (last error {last})\n{said}")


def cluster_serves(port, key, value):
    """SET then GET key through the node at port, following MOVED."""
    for _ in range(10):
        r = redis.Redis(port=port, socket_timeout=5)
        try:
            r.set(key, value)
            return r.get(key) == value.encode()
        except redis.ResponseError as e:
            msg = str(e)
            if msg.startswith("MOVED"):
                port = int(msg.split()[2].rsplit(":", 1)[1])
                continue
            if msg.startswith(("TRYAGAIN", "CLUSTERDOWN")):
                return False
            raise
    return False


@pytest.fixture
def gs_cluster(tmp_path):
    started = []

    def start(*extra):
        base = free_base([0, 1, 2, 10000, 10001, 10002, 20000, 20001, 20002])
        la = Launcher([os.path.join(ROOT, "scripts", "gridsync-cluster"), "up", "3", "--port",
                       str(base), *extra], tmp_path)
        started.append(la)
        la.wait_line("GridSync cluster of 3 nodes")
        until(lambda: cluster_serves(base, "warm", "1"), "the cluster serves")
        return la, base

    yield start
    for la in started:
        la.stop()


def test_gridsync_cluster_restarts_a_killed_node(gs_cluster):
    la, base = gs_cluster()
    victim = base + 1
    pid = la.child(f"--port {victim} ")
    os.kill(pid, signal.SIGKILL)
    i = la.wait_line(f"node-{victim} (pid {pid}) exited with status 137")
    la.wait_line(f"node-{victim} restarted", after=i)
    # The others serve while it comes back, and it serves again itself.
    until(lambda: cluster_serves(base, "k1", "v1"), "node 0 serves after the kill", la)
    until(lambda: cluster_serves(victim, "k2", "v2"), "the restarted node serves", la)
    assert la.proc.poll() is None
    # Each node's Prometheus endpoint is at its port + 20000.
    for p in (base, victim):
        with urllib.request.urlopen(f"http://127.0.0.1:{p + 20000}/metrics", timeout=10) as r:
            assert b'gridsync_raft_role{group="127.0.0.1:' in r.read()


def test_gridsync_cluster_no_restart_leaves_it_down(gs_cluster):
    la, base = gs_cluster("--no-restart")
    victim = base + 2
    pid = la.child(f"--port {victim} ")
    os.kill(pid, signal.SIGKILL)
    la.wait_line(f"node-{victim} left down (--no-restart)")
    until(lambda: cluster_serves(base, "k3", "v3"), "the two others serve")
    assert all(f"--port {victim} " not in c for c in la.children().values())
    assert la.proc.poll() is None


def alf(port, lines):
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall("".join(l + "\n" for l in lines).encode())
        buf = b""
        while buf.count(b"\n") < len(lines):
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
        return buf.decode()


def test_edumatcher_restarts_a_killed_engine(tmp_path):
    base = free_base([1, 2, 3, 100, 101, 102, 103, 180, 181])
    la = Launcher([os.path.join(ROOT, "scripts", "edumatcher"), "up", "--ports", str(base)],
                  tmp_path)
    try:
        la.wait_line("EduMatcher up:")
        out = alf(base + 1, ["LOGIN gw=GW1", "NEW cl=a1 sym=ABC side=B qty=10 px=100.00"])
        assert "ACK cl=a1 oid=1" in out, out
        pid = la.child("edumatcher-engine")
        os.kill(pid, signal.SIGKILL)
        i = la.wait_line(f"engine (pid {pid}) exited with status 137")
        la.wait_line("engine restarted", after=i)
        # The journal is under STATE_DIR, and the restarted engine replayed
        # it: the next order gets the next id.
        assert os.listdir(tmp_path / "em-journal")
        out = until(lambda: (lambda o: o if "ACK cl=a2" in o else None)(
            alf(base + 1, ["LOGIN gw=GW2", "NEW cl=a2 sym=ABC side=B qty=10 px=99.00"])),
            "the gateway serves through the restarted engine")
        assert "ACK cl=a2 oid=2" in out, out
        # the engine's own ALF port (hosted sessions) is back with it
        out = alf(base + 3, ["LOGIN gw=GW3", "NEW cl=a3 sym=ABC side=B qty=10 px=98.00"])
        assert "ACK cl=a3 oid=3" in out, out
        assert la.proc.poll() is None
    finally:
        la.stop()


def test_launcher_start_up_failure_exits_non_zero(tmp_path):
    # The gateway's port is taken: the launcher reports it and exits 1.
    base = free_base([1, 2, 3, 100, 101, 102, 103, 180, 181])
    with socket.socket() as s:
        s.bind(("127.0.0.1", base + 1))
        s.listen()
        la = Launcher([os.path.join(ROOT, "scripts", "edumatcher"), "up", "--ports", str(base)],
                      tmp_path)
        rc = la.proc.wait(timeout=DEADLINE)
    assert rc == 1, la.lines
    la.wait_line("gateway did not start")
    assert la.children() == {}
