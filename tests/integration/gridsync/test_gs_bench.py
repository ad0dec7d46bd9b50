"""gs-bench against a real redis-server and against misbehaving servers.

The load generator must count what it sends and what comes back exactly,
name the keys as documented, and survive any bytes a server sends.
"""

import json
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest
import redis

from conftest import free_port

TIMEOUT = 60


def gs_bench():
    # The build under test first: a gs-bench elsewhere on PATH may be older.
    path = None
    if os.environ.get("BUILD_DIR"):
        path = os.path.join(os.environ["BUILD_DIR"], "bench", "bin", "gs-bench")
    if not path or not os.access(path, os.X_OK):
        path = shutil.which("gs-bench")
    assert path and os.access(path, os.X_OK), "gs-bench is not built"
    return path




@pytest.fixture
def redis_port(request, tmp_path):
    port = free_port()
    proc = subprocess.Popen(["redis-server", "--port", str(port), "--bind", "127.0.0.1",
                             "--save", "", "--appendonly", "no", "--dir", str(tmp_path)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop():
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    request.addfinalizer(stop)
    client = redis.Redis(port=port)
    for _ in range(200):
        try:
            if client.ping():
                return port
        except redis.exceptions.ConnectionError:
            time.sleep(0.05)
    pytest.fail("redis-server did not start")


class FakeServer:
    """Accepts connections and answers every chunk it reads with `reply`."""

    def __init__(self, reply):
        self.reply = reply
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        self.stopping = False
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self):
        self.sock.settimeout(0.2)
        while not self.stopping:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            threading.Thread(target=self.answer, args=(conn,), daemon=True).start()

    def answer(self, conn):
        conn.settimeout(5)
        with conn:
            try:
                while not self.stopping:
                    data = conn.recv(65536)
                    if not data:
                        return
                    conn.sendall(self.reply(data))
            except OSError:
                return

    def close(self):
        self.stopping = True
        self.thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def fake_server(request):
    servers = []

    def make(reply):
        s = FakeServer(reply)
        servers.append(s)
        return s

    request.addfinalizer(lambda: [s.close() for s in servers])
    return make


def run(args, tmp_path):
    out = tmp_path / "result.json"
    proc = subprocess.run([gs_bench()] + args + ["--json", str(out)], capture_output=True,
                          text=True, timeout=TIMEOUT)
    result = json.loads(out.read_text()) if out.exists() else None
    return proc, result


def test_counts_every_request_and_loads_every_key(redis_port, tmp_path):
    proc, res = run(["--port", str(redis_port), "--keys", "500", "--load", "--requests", "3000",
                     "--warmup", "0", "--connections", "8", "--pipeline", "4"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    r = res["results"]
    assert r["loaded"] == 500
    assert r["requests"] == 3000
    assert r["gets"] + r["sets"] == 3000
    assert r["get_hits"] == r["gets"]  # the load phase made every GET hit
    assert r["errors"]["total"] == 0
    assert r["latency_us"]["p50"] <= r["latency_us"]["p99"] <= r["latency_us"]["max"]
    assert sum(count for _, _, count in r["buckets"]) == 3000
    client = redis.Redis(port=redis_port)
    assert client.dbsize() == 500
    assert client.exists("key:000000000000", "key:000000000499") == 2
    assert len(client.get("key:000000000123")) == 128


def test_same_seed_same_key_sequence(redis_port, tmp_path):
    # One connection, one request in flight: the key and command sequence
    # is the seed's alone, so the server ends in the same state.
    client = redis.Redis(port=redis_port)
    states = []
    for _ in range(2):
        client.flushall()
        proc, res = run(["--port", str(redis_port), "--keys", "100000", "--get-ratio", "0",
                         "--requests", "300", "--warmup", "0", "--connections", "1",
                         "--seed", "7"], tmp_path)
        assert proc.returncode == 0, proc.stderr
        states.append(sorted(client.keys("*")))
    assert states[0] == states[1]
    assert 1 < len(states[0]) < 300  # Zipf: hot keys repeat, but not only one


def test_open_loop_sends_what_the_schedule_says(redis_port, tmp_path):
    # 2000 requests/s for 1 s over 50 connections: exactly 2000 intended
    # sends fall in the window; each was either answered or reported unsent.
    proc, res = run(["--port", str(redis_port), "--rate", "2000", "--duration", "1",
                     "--warmup", "0"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    r = res["results"]
    assert r["requests"] + r["unsent"] == 2000
    assert r["errors"]["total"] == 0


def test_no_allocation_per_request(redis_port, tmp_path):
    # gs-bench's promise (invariant 1 of gs-bench.c): everything is
    # allocated at start-up, so ten times the requests make no more
    # allocations. valgrind counts them.
    if shutil.which("valgrind") is None:
        pytest.skip("valgrind not installed")
    counts = []
    for n in (300, 3000):
        proc = subprocess.run(["valgrind", "--tool=memcheck", "--error-exitcode=3", gs_bench(),
                               "--port", str(redis_port), "--requests", str(n), "--warmup", "0",
                               "--connections", "4", "--pipeline", "4", "--keys", "200",
                               "--load", "--json", str(tmp_path / "r.json")],
                              capture_output=True, text=True, timeout=TIMEOUT * 3)
        if "ASan runtime does not come first" in proc.stderr:
            pytest.skip("an ASan build cannot run under valgrind")
        assert proc.returncode == 0, proc.stderr[-2000:]
        usage = [line for line in proc.stderr.splitlines() if "total heap usage" in line]
        assert usage, proc.stderr[-2000:]
        counts.append(usage[0].split("total heap usage:")[1].split("allocs")[0].strip())
    assert counts[0] == counts[1]


def test_error_replies_are_counted(fake_server, tmp_path):
    srv = fake_server(lambda data: b"-ERR nope\r\n" * max(1, data.count(b"*")))
    proc, res = run(["--port", str(srv.port), "--requests", "400", "--warmup", "0",
                     "--connections", "2"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert res["results"]["requests"] == 400
    assert res["results"]["errors"]["error_replies"] == 400


def test_garbage_replies_close_connections_without_crashing(fake_server, tmp_path):
    srv = fake_server(lambda data: b"\x00garbage\xff\r\n")
    proc, res = run(["--port", str(srv.port), "--requests", "100", "--warmup", "0",
                     "--connections", "3"], tmp_path)
    assert proc.returncode == 1  # a clean failure, not a signal
    assert "every connection is closed" in proc.stderr


def test_memcache_protocol_against_a_fake(fake_server, tmp_path):
    def reply(data):
        out = b""
        for line in data.split(b"\r\n"):
            if line.startswith(b"get "):
                out += b"VALUE " + line[4:] + b" 0 3\r\nabc\r\nEND\r\n"
            elif line.startswith(b"set "):
                out += b"STORED\r\n"
        return out

    srv = fake_server(reply)
    proc, res = run(["--port", str(srv.port), "--protocol", "memcache", "--requests", "200",
                     "--warmup", "0", "--connections", "1", "--value-size", "16"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    r = res["results"]
    assert r["requests"] == 200
    assert r["get_hits"] == r["gets"]
    assert r["errors"]["total"] == 0


def test_against_gridsync_server(server, tmp_path):
    # The benchmark's own path through the real server: every request
    # answered with the right kind of reply, every GET a hit after --load.
    proc, res = run(["--port", str(server.port), "--keys", "2000", "--load", "--requests",
                     "5000", "--warmup", "0", "--pipeline", "8"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    r = res["results"]
    assert r["loaded"] == 2000
    assert r["requests"] == 5000
    assert r["get_hits"] == r["gets"]
    assert r["errors"]["total"] == 0
    assert server.client().dbsize() == 2000
