"""The descriptor limit, as Redis's adjustOpenFilesLimit handles it: at
start the server raises its soft RLIMIT_NOFILE to maxclients + 32, and
where it cannot, it reduces maxclients to what the limit holds (so that
clients over it get Redis's "max number of clients reached" instead of a
failed accept) or refuses to start. CONFIG SET maxclients checks the same.
Each case runs Debian's redis-server under the same limit and compares."""
import os
import resource
import shutil
import signal
import socket
import subprocess
import tempfile

import pytest
import redis

from conftest import find_binary, free_port, wait_listening

RESERVED = 32


def no_raise_prefix():
    """As root the process could raise its hard limit; take that away."""
    if os.geteuid() == 0:
        if not shutil.which("setpriv"):
            pytest.skip("setpriv is needed to run a server without CAP_SYS_RESOURCE")
        return ["setpriv", "--bounding-set", "-sys_resource", "--inh-caps", "-sys_resource"]
    return []


class Limited:
    """A server process started under RLIMIT_NOFILE (soft, hard)."""

    def __init__(self, kind, soft, hard, prefix):
        self.port = free_port()
        if kind == "redis":
            exe = shutil.which("redis-server")
            if not exe:
                pytest.skip("redis-server is not installed")
            args = [exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                    "--appendonly", "no"]
        else:
            args = [find_binary("gridsync-server"), "--port", str(self.port)]
        self.log = tempfile.TemporaryFile()

        def limit():
            resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))

        self.proc = subprocess.Popen(prefix + args, stdout=self.log, stderr=subprocess.STDOUT,
                                     preexec_fn=limit)
        # a server refusing to start exits: the test reads its status
        if not wait_listening(self.proc, self.port) and self.proc.poll() is None:
            self.stop()
            raise RuntimeError(f"{kind} did not start listening")

    def client(self):
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=10,
                           decode_responses=True)

    def output(self):
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def nofile(self):
        with open(f"/proc/{self.proc.pid}/limits") as f:
            for line in f:
                if line.startswith("Max open files"):
                    return int(line.split()[3]), int(line.split()[4])
        raise AssertionError("no Max open files line")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


@pytest.fixture
def limited():
    started = []

    def make(kind, soft, hard, prefix=()):
        s = Limited(kind, soft, hard, list(prefix))
        started.append(s)
        return s

    yield make
    for s in started:
        s.stop()


def config_set(c, value):
    try:
        return c.config_set("maxclients", value)
    except redis.ResponseError as e:
        return "-" + str(e)


def test_a_low_ulimit_reduces_maxclients_as_redis_does(limited):
    prefix = no_raise_prefix()
    servers = {k: limited(k, 200, 200, prefix) for k in ("redis", "gridsync")}
    seen, clients = {}, {}
    for kind, s in servers.items():
        c = clients[kind] = s.client()
        seen[kind] = (c.config_get("maxclients"), config_set(c, "1000"),
                      c.config_get("maxclients"), config_set(c, "100"),
                      c.config_get("maxclients"), config_set(c, str(200 - RESERVED)))
    assert seen["gridsync"] == seen["redis"], seen
    assert seen["gridsync"][0] == {"maxclients": str(200 - RESERVED)}
    assert "try with 168" in seen["gridsync"][1]
    log = servers["gridsync"].output()
    assert "maxclients has been reduced to 168 to compensate for low ulimit" in log, log
    assert "Failed applying new configuration" in log, log

    # The limit is real: clients beyond it are told, none fails to connect.
    gs = servers["gridsync"]
    socks, refused = [], 0
    try:
        for _ in range(200 - RESERVED + 8):
            s = socket.create_connection(("127.0.0.1", gs.port), timeout=10)
            socks.append(s)
            s.sendall(b"PING\r\n")
            got = s.recv(100)
            if got.startswith(b"-ERR max number of clients reached"):
                refused += 1
            else:
                assert got == b"+PONG\r\n", got
    finally:
        for s in socks:
            s.close()
    # 168 clients fit: the test's own, still open, and 167 of these
    assert refused == 9, refused
    assert clients["gridsync"].ping()
    for c in clients.values():
        c.close()
    assert gs.proc.poll() is None


def test_the_soft_limit_is_raised_to_what_maxclients_needs(limited):
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    need = 10000 + RESERVED
    if hard != resource.RLIM_INFINITY and hard < need:
        pytest.skip(f"the hard descriptor limit here is {hard}, below {need}")
    servers = {k: limited(k, 256, hard) for k in ("redis", "gridsync")}
    for kind, s in servers.items():
        soft, _ = s.nofile()
        assert soft == need, (kind, soft)
        c = s.client()
        assert c.config_get("maxclients") == {"maxclients": "10000"}, kind
        c.close()
    assert f"Increased maximum number of open files to {need} (it was originally set to 256)." \
        in servers["gridsync"].output()


def test_a_ulimit_with_no_room_for_clients_stops_the_start(limited):
    prefix = no_raise_prefix()
    for kind in ("redis", "gridsync"):
        s = limited(kind, 20, 20, prefix)
        assert s.proc.wait(timeout=10) == 1, kind
        assert ("Your current 'ulimit -n' of 20 is not enough for the server to start. "
                "Please increase your open file limit to at least 10032. Exiting.") in s.output()
