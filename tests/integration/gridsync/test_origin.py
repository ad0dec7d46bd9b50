"""Read-through origin with request coalescing (issue #6), end to end.

A real gridsync-server (started by conftest.py's make_server) with --origin
pointing at a stub origin in this test (Python's threaded http.server) that counts the requests it gets and
answers by the key's first word after a delay:

  slow-*     200 "value-of-<key>" after SLOW seconds
  missing-*  404 after SLOW seconds
  boom-*     500 after SLOW seconds
  hang-*     200 after HANG seconds, longer than the server's origin-timeout
  short-*    200 with Cache-Control: max-age=1
  block-*    200 once the test sets origin.release (or after HANG * 6)

"Concurrent" requests are sent on many connections before any reply is
read, so they all reach the server while the origin is still answering the
first; nothing here depends on threads being scheduled in time, and no
assertion is on a duration.
"""
import http.server
import os
import shutil
import socket
import subprocess
import threading
import time

import pytest
import redis

from conftest import free_port

SLOW = 0.4
HANG = 5.0
TIMEOUT_MS = 2000
NEGATIVE_TTL_MS = 1000




def server_binary():
    build = os.environ.get("BUILD_DIR")
    if build:
        path = os.path.join(build, "bin", "gridsync-server")
        if os.path.exists(path):
            return path
    path = shutil.which("gridsync-server")
    assert path, "gridsync-server not found (BUILD_DIR or PATH)"
    return path


class Origin:
    """The stub origin: a threaded HTTP server on a free port."""

    def __init__(self):
        self.counts = {}
        self.lock = threading.Lock()
        self.release = threading.Event()
        origin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                with origin.lock:
                    origin.counts[self.path] = origin.counts.get(self.path, 0) + 1
                key = self.path[len("/items/"):]
                status, headers, body = 200, {}, ("value-of-" + key).encode()
                if key.startswith("slow"):
                    time.sleep(SLOW)
                elif key.startswith("missing"):
                    time.sleep(SLOW)
                    status, body = 404, b"no such item"
                elif key.startswith("boom"):
                    time.sleep(SLOW)
                    status, body = 500, b"internal error"
                elif key.startswith("hang"):
                    time.sleep(HANG)
                elif key.startswith("block"):
                    origin.release.wait(HANG * 6)
                elif key.startswith("short"):
                    headers["Cache-Control"] = "public, max-age=1"
                try:
                    self.send_response(status)
                    for k, v in headers.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the server gave up on us (timeout): fine

        class Server(http.server.ThreadingHTTPServer):
            request_queue_size = 256  # the default 5 drops concurrent connects
            daemon_threads = True
            block_on_close = False

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def count(self, key):
        with self.lock:
            return self.counts.get("/items/" + key, 0)

    def close(self):
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def origin_args(origin, *extra):
    return ["--origin", "http://127.0.0.1:%d/items/{key}" % origin.port,
            "--origin-timeout", str(TIMEOUT_MS),
            "--origin-negative-ttl", str(NEGATIVE_TTL_MS),
            "--origin-ttl", "60000", *extra]


def info(node):
    return node.client().info("origin")


@pytest.fixture
def origin(request):
    o = Origin()
    request.addfinalizer(o.close)
    return o


@pytest.fixture
def node(make_server, origin):
    """A gridsync-server (conftest.py: stopped after the test, and it must
    exit with status 0, which under ASan also means no leak) reading
    through the stub origin."""
    return make_server(*origin_args(origin))


def concurrent(node, n, *command):
    """Send `command` on n connections, then read every reply. Returns the
    replies (an exception object for an error reply)."""
    conns = [redis.Connection(port=node.port, socket_timeout=10) for _ in range(n)]
    try:
        for c in conns:
            c.connect()
        for c in conns:
            c.send_command(*command)
        out = []
        for c in conns:
            try:
                out.append(c.read_response())
            except redis.exceptions.ResponseError as e:
                out.append(e)
        return out
    finally:
        for c in conns:
            c.disconnect()


def test_hundred_concurrent_gets_cost_one_fetch(origin, node):
    replies = concurrent(node, 100, "GET", "slow-hot")
    assert replies == [b"value-of-slow-hot"] * 100
    assert origin.count("slow-hot") == 1
    stats = info(node)
    assert stats["origin_fetches"] == 1
    assert stats["origin_coalesced_waiters"] == 99
    # Filled: the next GET is a plain hit.
    assert node.client().get("slow-hot") == b"value-of-slow-hot"
    assert origin.count("slow-hot") == 1
    # CONFIG RESETSTAT zeroes the origin's counters too.
    node.client().config_resetstat()
    stats = info(node)
    assert stats["origin_fetches"] == 0 and stats["origin_latency_max_usec"] == 0


def test_error_reaches_every_waiter_and_is_not_cached(origin, node):
    replies = concurrent(node, 20, "GET", "boom-1")
    assert all(isinstance(r, redis.exceptions.ResponseError) for r in replies)
    assert all("origin error: HTTP 500" in str(r) for r in replies)
    assert origin.count("boom-1") == 1
    with pytest.raises(redis.exceptions.ResponseError):
        node.client().get("boom-1")
    assert origin.count("boom-1") == 2
    assert node.client().exists("boom-1") == 0


def test_timeout_reaches_every_waiter_and_is_not_cached(origin, node):
    replies = concurrent(node, 10, "GET", "hang-1")
    assert all(isinstance(r, redis.exceptions.ResponseError) for r in replies)
    assert all("origin timeout" in str(r) for r in replies)
    assert origin.count("hang-1") == 1
    with pytest.raises(redis.exceptions.ResponseError, match="origin timeout"):
        node.client().get("hang-1")
    assert origin.count("hang-1") == 2
    assert info(node)["origin_timeouts"] == 2


def test_not_found_is_nil_and_remembered(origin, node):
    assert concurrent(node, 5, "GET", "missing-1") == [None] * 5
    assert origin.count("missing-1") == 1
    # Within the negative TTL: nil without asking the origin.
    assert node.client().get("missing-1") is None
    assert origin.count("missing-1") == 1
    assert info(node)["origin_negative_hits"] == 1
    # After it, the origin is asked again.
    time.sleep(NEGATIVE_TTL_MS / 1000.0 + 0.3)
    assert node.client().get("missing-1") is None
    assert origin.count("missing-1") == 2


def test_client_disconnect_while_waiting(origin, node):
    quitter = socket.create_connection(("127.0.0.1", node.port))
    quitter.sendall(b"GET slow-d\r\n")
    stayer = redis.Connection(port=node.port, socket_timeout=10)
    stayer.connect()
    stayer.send_command("GET", "slow-d")
    quitter.close()  # while the fetch is in flight
    assert stayer.read_response() == b"value-of-slow-d"
    stayer.disconnect()
    assert origin.count("slow-d") == 1
    assert node.client().ping()
    assert info(node)["origin_cancelled_waiters"] == 1


def read_replies(sock, n):
    """Read n RESP2 replies of the simple kinds (+ - : $) from sock."""
    f = sock.makefile("rb")
    out = []
    for _ in range(n):
        line = f.readline()
        assert line, "connection closed"
        if line[:1] == b"$":
            size = int(line[1:])
            out.append(None if size < 0 else f.read(size + 2)[:-2])
        else:
            out.append(line.rstrip(b"\r\n"))
    return out


def test_pipelined_replies_stay_in_order(origin, node):
    with socket.create_connection(("127.0.0.1", node.port), timeout=10) as s:
        # The first GET waits on the origin; the others are answered at
        # once but must not overtake it. A second miss waits too.
        s.sendall(b"GET slow-p1\r\nSET x 1\r\nGET x\r\nGET slow-p2\r\nPING\r\n")
        assert read_replies(s, 5) == [b"value-of-slow-p1", b"+OK", b"1", b"value-of-slow-p2",
                                      b"+PONG"]
    assert origin.count("slow-p1") == 1 and origin.count("slow-p2") == 1


@pytest.mark.parametrize("behind", ["big values", "many misses"])
def test_replies_held_behind_a_fetch_count_toward_the_output_limit(make_server, origin, behind):
    """A client that pipelines behind a miss whose fetch is pending must
    not make the server buffer more than client-output-buffer-limit for
    it: the replies held back count as its output. It is disconnected
    while the origin has still not answered."""
    node = make_server(*origin_args(origin, "--origin-timeout", "60000",
                                    "--client-output-buffer-limit", "1mb"))
    c = node.client()
    c.set("big", b"x" * 100000)
    victim = socket.create_connection(("127.0.0.1", node.port), timeout=10)
    try:
        victim.sendall(b"CLIENT ID\r\n")
        vid = int(read_replies(victim, 1)[0][1:])
        if behind == "big values":  # 3 MB of replies behind one miss
            victim.sendall(b"GET block-1\r\n" + b"GET big\r\n" * 30)
        else:  # 30000 held misses, coalesced on one fetch
            victim.sendall(b"GET block-2\r\n" * 30000)
        deadline = time.monotonic() + 60
        while str(vid) in [str(x["id"]) for x in c.client_list()]:
            assert time.monotonic() < deadline, "still connected: held output is not limited"
            time.sleep(0.05)
        assert not origin.release.is_set()  # closed while the fetch was pending
        assert c.ping()
    finally:
        victim.close()


def test_mget_fetches_each_missing_key_once(origin, node):
    c = node.client()
    c.set("present", "pv")
    got = c.mget("slow-m1", "slow-m2", "present", "slow-m1", "missing-m")
    assert got == [b"value-of-slow-m1", b"value-of-slow-m2", b"pv", b"value-of-slow-m1", None]
    assert origin.count("slow-m1") == 1
    assert origin.count("slow-m2") == 1
    assert origin.count("missing-m") == 1
    # All present now, but for the 404: no more origin requests.
    assert c.mget("slow-m1", "slow-m2", "missing-m") == [b"value-of-slow-m1",
                                                         b"value-of-slow-m2", None]
    assert origin.count("slow-m1") == 1 and origin.count("missing-m") == 1
    # All present: the plain path. Present keys before a miss: counted once.
    assert c.mget("present", "slow-m1") == [b"pv", b"value-of-slow-m1"]
    hits = c.info("stats")["keyspace_hits"]
    assert c.mget("present", "slow-m2", "slow-m3") == [b"pv", b"value-of-slow-m2",
                                                       b"value-of-slow-m3"]
    assert c.info("stats")["keyspace_hits"] == hits + 2
    assert origin.count("slow-m3") == 1


def test_ttl_from_cache_control_max_age(origin, node):
    c = node.client()
    assert c.get("short-1") == b"value-of-short-1"
    assert 0 < c.pttl("short-1") <= 1000
    assert c.get("slow-t") == b"value-of-slow-t"
    assert 59000 < c.pttl("slow-t") <= 60000  # the configured origin-ttl


def test_coalescing_can_be_switched_off(origin, node):
    c = node.client()
    c.config_set("origin-coalesce", "no")
    assert c.config_get("origin-coalesce") == {"origin-coalesce": "no"}
    assert concurrent(node, 10, "GET", "slow-c") == [b"value-of-slow-c"] * 10
    assert origin.count("slow-c") == 10
    c.config_set("origin-coalesce", "yes")
    assert concurrent(node, 10, "GET", "slow-c2") == [b"value-of-slow-c2"] * 10
    assert origin.count("slow-c2") == 1


def test_beyond_limit_and_queue_is_an_error(make_server, origin):
    n = make_server(*origin_args(origin, "--origin-max-fetches", "1", "--origin-queue", "0"))
    first = redis.Connection(port=n.port, socket_timeout=10)
    first.connect()
    first.send_command("GET", "slow-b1")
    # Same key: joins the running fetch. Another key: no slot, no queue.
    second = n.client()
    deadline = time.monotonic() + 5
    while info(n)["origin_in_flight"] == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    with pytest.raises(redis.exceptions.ResponseError, match="origin busy"):
        second.get("slow-b2")
    assert first.read_response() == b"value-of-slow-b1"
    first.disconnect()
    assert info(n)["origin_rejected"] == 1


def test_bad_origin_template_fails_the_start(origin):
    proc = subprocess.run([server_binary(), "--port", str(free_port()), "--origin",
                           "http://127.0.0.1:1/no-key-here"], capture_output=True, timeout=10)
    assert proc.returncode != 0


def test_exec_with_a_miss_replies_in_order(origin, node):
    """A GET inside EXEC that misses waits on the origin like any other
    (docs/gridsync.md, Transactions): the EXEC array arrives complete and
    in order, and the transaction's other commands have run."""
    r = node.client()
    with r.pipeline() as p:
        p.set("x", "1").get("slow-tx").incr("x").get("x")
        assert p.execute() == [True, b"value-of-slow-tx", 2, b"2"]
    assert origin.count("slow-tx") == 1
