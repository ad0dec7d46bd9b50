"""Fixtures: start the real gridsync-server on a free loopback port and stop
it afterwards, whatever the test's outcome."""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import redis

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "support"))
from loopback_ports import free_port  # noqa: E402  (shared with the other conftest)


def find_binary(name):
    build = os.environ.get("BUILD_DIR")
    if build:
        # products in bin/, load generators in bench/bin/, test tools in tests/bin/
        for sub in ("bin", "bench/bin", "tests/bin"):
            path = os.path.join(build, sub, name)
            if os.access(path, os.X_OK):
                return path
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} not built")
    return path


def wait_listening(proc, port, seconds=10):
    """True once proc accepts on 127.0.0.1:port; False if it exits first
    or does not listen within `seconds`."""
    deadline = time.monotonic() + seconds
    while proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)
    return False


class Server:
    """One gridsync-server process."""

    def __init__(self, *args):
        self.port = free_port()
        # A config file, if any, must be the first argument.
        lead = [a for a in args[:1] if not a.startswith("--")]
        rest = list(args[len(lead):])
        self.args = [find_binary("gridsync-server"), *lead, "--port", str(self.port), *rest]
        # The log goes to a file: a pipe nobody reads could fill and block
        # the server.
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        if not wait_listening(self.proc, self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"gridsync-server exited early: {self.output()}")
            self.stop()
            raise RuntimeError("gridsync-server did not start listening")

    def client(self, **kw):
        kw.setdefault("socket_timeout", 10)
        return redis.Redis(host="127.0.0.1", port=self.port, **kw)

    def sock(self):
        s = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return s

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def alive(self):
        return self.proc.poll() is None

    def stop(self, sig=signal.SIGTERM):
        """Stop the server; returns its exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


@pytest.fixture
def make_server(request):
    """make_server(*args) starts a server with extra options; all are
    stopped when the test ends."""
    started = []

    def make(*args):
        s = Server(*args)
        started.append(s)
        return s

    def stop_all():
        # Every server must exit cleanly (status 0: under ASan that also
        # means no leak and no memory error was found).
        failed = []
        for s in started:
            rc = s.stop()
            if rc != 0:
                failed.append(f"exit status {rc}:\n{s.output()[-4000:]}")
            s.log.close()
        assert not failed, "\n".join(failed)

    request.addfinalizer(stop_all)
    return make


@pytest.fixture
def server(make_server):
    return make_server()


@pytest.fixture
def r(server):
    c = server.client(decode_responses=True)
    yield c
    c.close()


def recv_until(sock, marker, limit=1 << 20):
    """Read until marker has been received (or the peer closes)."""
    data = b""
    while marker not in data and len(data) < limit:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    return data


def recv_all_until_closed(sock, limit=1 << 24):
    data = b""
    while len(data) < limit:
        try:
            chunk = sock.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    return data


@pytest.fixture
def raw(server):
    """A client that returns replies as the server sent them (no redis-py
    conversions), decoded to str."""
    c = server.client(decode_responses=True)
    c.response_callbacks = {}
    yield c
    c.close()
