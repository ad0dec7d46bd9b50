"""Fixtures for the EduMatcher exchange processes: start the real binaries on
127.0.0.1 with free ports, and always stop them (even when a test fails)."""
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request

import pytest
import zmq


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def binary(name):
    build = os.environ.get("BUILD_DIR")
    if build:
        p = os.path.join(build, "bin", name)
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
