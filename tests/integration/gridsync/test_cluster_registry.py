"""GridSync's DynamoDB registry (--registry) against a real dynalite
(installed by scripts/install-deps into BUILD/node), started on a free port.

What is checked: a node registers and heartbeats, and its item's expiry
passes once it is killed; a stopped node records a leave event; three nodes
started with only --registry and --cluster-size 3 form a cluster that serves
SET/GET through RedisCluster; a malformed URL, an unreachable registry and
rejected credentials stop the node at start with a non-zero status; throttling,
5xx and timeouts injected by a fault proxy are retried while the cluster keeps
serving. Waits are bounded polls; nothing asserts a duration."""
import http.client
import http.server
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest
from redis.cluster import RedisCluster

from conftest import find_binary, free_port
from test_cluster import RAFT_OFFSET, pick_base
from test_cluster_join import RESHARD

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))


def find_dynalite():
    if not shutil.which("node"):
        pytest.skip("node (Node.js) is not installed: run scripts/install-deps")
    for build in (os.environ.get("BUILD_DIR"), os.path.join(REPO, "build")):
        if build:
            path = os.path.join(build, "node", "node_modules", ".bin", "dynalite")
            if os.access(path, os.X_OK):
                return path
    path = shutil.which("dynalite")
    if not path:
        pytest.skip("dynalite is not installed: run scripts/install-deps")
    return path


def wait_port(port, proc, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited early")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"{what} did not listen")


def ddb(port, op, body):
    """One DynamoDB call (dynalite checks the signature's shape, not its value)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", "/", json.dumps(body), {
        "Content-Type": "application/x-amz-json-1.0",
        "X-Amz-Target": f"DynamoDB_20120810.{op}",
        "Authorization": "AWS4-HMAC-SHA256 Credential=test/20260101/us-east-1/dynamodb/"
                         "aws4_request, SignedHeaders=host, Signature=00",
        "X-Amz-Date": "20260101T000000Z"})
    r = c.getresponse()
    data = json.loads(r.read() or b"{}")
    c.close()
    return r.status, data


def items(port, table):
    status, data = ddb(port, "Scan", {"TableName": table, "ConsistentRead": True})
    if status != 200:
        return []
    return [{k: list(v.values())[0] for k, v in it.items()} for it in data.get("Items", [])]


@pytest.fixture
def dynalite():
    path = find_dynalite()
    port = free_port()
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(["node", path, "--port", str(port)], stdout=log,
                            stderr=subprocess.STDOUT)
    try:
        wait_port(port, proc, "dynalite")
        yield port
    finally:
        proc.kill()
        proc.wait()
        log.close()


class FaultProxy:
    """HTTP proxy to dynalite that answers the next `count` requests with a
    fault instead: "throttle" (400 ThrottlingException), "5xx" (503),
    "slow" (holds the request past the client's timeout, then forwards),
    "badcreds" (400 UnrecognizedClientException, for every request)."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.mode, self.count, self.injected, self.forwarded = None, 0, 0, 0
        self.lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/x-amz-json-1.0")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with proxy.lock:
                    mode = proxy.mode if proxy.count > 0 or proxy.mode == "badcreds" else None
                    if mode:
                        proxy.count -= 1
                        proxy.injected += 1
                if mode == "throttle":
                    return self.reply(400, {"__type": "com.amazonaws.dynamodb.v20120810#"
                                            "ThrottlingException", "message": "slow down"})
                if mode == "5xx":
                    return self.reply(503, {"__type": "ServiceUnavailable"})
                if mode == "badcreds":
                    return self.reply(400, {"__type": "com.amazon.coral.service#"
                                            "UnrecognizedClientException",
                                            "message": "The security token included in the "
                                            "request is invalid."})
                if mode == "slow":
                    time.sleep(3)
                c = http.client.HTTPConnection("127.0.0.1", proxy.upstream, timeout=10)
                hdrs = {k: v for k, v in self.headers.items() if k.lower() != "host"}
                c.request("POST", "/", body, hdrs)
                r = c.getresponse()
                data = r.read()
                c.close()
                with proxy.lock:
                    proxy.forwarded += 1
                try:
                    self.send_response(r.status)
                    self.send_header("Content-Type", "application/x-amz-json-1.0")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (timeout): it retries

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def inject(self, mode, count):
        with self.lock:
            self.mode, self.count, self.injected = mode, count, 0

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def proxy(dynalite):
    p = FaultProxy(dynalite)
    yield p
    p.close()


class RegNodes:
    """gridsync-server nodes with --registry, stopped (and checked) at the end."""

    def __init__(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.procs = []

    def start(self, port, registry, *extra, wait=True):
        log = tempfile.TemporaryFile()
        env = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test")
        proc = subprocess.Popen(
            [find_binary("gridsync-server"), "--bind", "127.0.0.1", "--port", str(port),
             "--cluster-enabled", "yes", "--registry", registry,
             "--dir", os.path.join(self.tmp.name, str(port)), *extra],
            stdout=log, stderr=subprocess.STDOUT, env=env)
        proc.log = log
        proc.port = port
        self.procs.append(proc)
        if wait:
            wait_port(port, proc, "gridsync-server")
        return proc

    @staticmethod
    def output(proc):
        proc.log.seek(0)
        return proc.log.read().decode(errors="replace")

    def close(self):
        failed = []
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    failed.append(f"{p.port} hung")
                if p.returncode != 0:
                    failed.append(f"{p.port} exit {p.returncode}:\n{self.output(p)[-3000:]}")
        self.tmp.cleanup()
        assert not failed, "\n".join(failed)


@pytest.fixture
def nodes():
    n = RegNodes()
    yield n
    n.close()


def wait_until(cond, what, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def node_item(port, table, addr):
    return next((it for it in items(port, table) if it["pk"] == f"node#{addr}"), None)


def single(nodes, registry, port, *extra):
    return nodes.start(port, registry, "--cluster-size", "1", "--cluster-replicas", "1",
                       "--registry-heartbeat", "100", "--registry-ttl", "1000", *extra)


def test_registration_heartbeat_and_expiry(dynalite, nodes):
    port = pick_base(1, 1)
    addr = f"127.0.0.1:{port}"
    proc = single(nodes, f"dynamodb://127.0.0.1:{dynalite}/gsreg", port)
    first = wait_until(lambda: node_item(dynalite, "gsreg", addr), "registration")
    assert int(first["expires_ms"]) > int(first["heartbeat_ms"])
    # Heartbeats: the item is put again with a later time.
    wait_until(lambda: int(node_item(dynalite, "gsreg", addr)["heartbeat_ms"]) >
               int(first["heartbeat_ms"]), "a heartbeat")
    assert any(it["pk"].startswith("event#") and it["kind"] == "join" and it["addr"] == addr
               for it in items(dynalite, "gsreg"))
    # kill -9: no more heartbeats, so the registration's expiry passes.
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    last = node_item(dynalite, "gsreg", addr)
    wait_until(lambda: time.time() * 1000 > int(last["expires_ms"]) + 50, "the expiry")
    assert node_item(dynalite, "gsreg", addr)["heartbeat_ms"] == last["heartbeat_ms"]


def test_stop_records_a_leave(dynalite, nodes):
    port = pick_base(1, 1)
    addr = f"127.0.0.1:{port}"
    proc = single(nodes, f"dynamodb://127.0.0.1:{dynalite}/gsreg", port)
    first = wait_until(lambda: node_item(dynalite, "gsreg", addr), "registration")
    # A heartbeat: the node runs (it handles SIGTERM once it serves).
    wait_until(lambda: int(node_item(dynalite, "gsreg", addr)["heartbeat_ms"]) >
               int(first["heartbeat_ms"]), "a heartbeat")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0
    assert any(it.get("kind") == "leave" and it["addr"] == addr
               for it in items(dynalite, "gsreg"))


def test_three_nodes_discover_each_other(dynalite, nodes):
    base = pick_base(3, 3)
    reg = f"dynamodb://127.0.0.1:{dynalite}/gsreg3"
    procs = [nodes.start(base + i, reg, "--cluster-size", "3", "--cluster-replicas", "3")
             for i in range(3)]
    rc = wait_until(lambda: cluster_client(base), "the cluster")
    for i in range(100):
        assert rc.set(f"key:{i}", f"value:{i}")
    for i in range(100):
        assert rc.get(f"key:{i}") == f"value:{i}"
    rc.close()
    peers = [f"127.0.0.1:{base + i}" for i in range(3)]
    for p in procs:
        assert "registry: cluster-peers " + ",".join(sorted(peers)) in nodes.output(p)
    # Waiting for the others refreshed the registrations but recorded one join each.
    joins = [it["addr"] for it in items(dynalite, "gsreg3") if it.get("kind") == "join"]
    assert sorted(joins) == sorted(peers)


def cluster_client(base):
    try:
        rc = RedisCluster(host="127.0.0.1", port=base, decode_responses=True,
                          socket_timeout=10, cluster_error_retry_attempts=10)
        rc.set("probe", "1")
        return rc
    except Exception:
        return None


def start_fails(nodes, registry, *extra):
    port = free_port()
    proc = nodes.start(port, registry, "--cluster-size", "1", "--cluster-replicas", "1",
                       *extra, wait=False)
    try:
        rc = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise AssertionError("the node did not give up")
    return rc, nodes.output(proc)


def test_malformed_url_fails_at_start(nodes):
    rc, out = start_fails(nodes, "dynamodb://127.0.0.1/no-port")
    assert rc != 0 and "expected dynamodb://HOST:PORT/TABLE" in out


def test_unreachable_registry_fails_at_start(nodes):
    rc, out = start_fails(nodes, f"dynamodb://127.0.0.1:{free_port()}/gsreg")
    assert rc != 0 and "registry" in out and "onnect" in out


def test_rejected_credentials_fail_at_start(proxy, nodes):
    proxy.inject("badcreds", 0)
    rc, out = start_fails(nodes, f"dynamodb://127.0.0.1:{proxy.port}/gsreg")
    assert rc != 0 and "UnrecognizedClientException" in out


@pytest.mark.parametrize("mode,count", [("throttle", 6), ("5xx", 6), ("slow", 2)])
def test_registry_faults_are_retried_and_the_cluster_serves(proxy, nodes, mode, count):
    port = pick_base(1, 1)
    addr = f"127.0.0.1:{port}"
    reg = f"dynamodb://127.0.0.1:{proxy.port}/gsregf"
    single(nodes, reg, port)
    wait_until(lambda: node_item(proxy.upstream, "gsregf", addr), "registration")
    c = RedisCluster(host="127.0.0.1", port=port, decode_responses=True, socket_timeout=10)
    proxy.inject(mode, count)
    before = int(node_item(proxy.upstream, "gsregf", addr)["heartbeat_ms"])
    i = 0
    # The cluster keeps serving while the registry fails...
    while proxy.count > 0:
        assert c.set(f"k{i}", str(i)) and c.get(f"k{i}") == str(i)
        i += 1
        time.sleep(0.01)
    assert proxy.injected == count
    # ...and heartbeats resume once it answers again.
    wait_until(lambda: int(node_item(proxy.upstream, "gsregf", addr)["heartbeat_ms"]) > before
               and proxy.count == 0, "a heartbeat after the faults")
    assert c.get("k0") == "0"
    c.close()


def test_membership_changes_are_recorded(dynalite, nodes):
    """A node added with scripts/gridsync-reshard: every node records the
    change (an event with the node and the new version) and its current
    membership (membership#<addr>) in the registry."""
    base = pick_base(4, 3)
    reg = f"dynamodb://127.0.0.1:{dynalite}/gsregm"
    first = [f"127.0.0.1:{base + i}" for i in range(3)]
    for i in range(3):
        nodes.start(base + i, reg, "--cluster-peers", ",".join(first))
    rc = wait_until(lambda: cluster_client(base), "the cluster")
    rc.close()
    new = f"127.0.0.1:{base + 3}"
    nodes.start(base + 3, reg, "--cluster-peers", ",".join(first + [new]), "--cluster-join", "yes")
    out = subprocess.run(
        ["/usr/bin/python3", RESHARD, "add", new, "--nodes", ",".join(first), "--timeout", "60"],
        capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    everyone = sorted(first + [new])

    def recorded():
        its = items(dynalite, "gsregm")
        events = {it["addr"] for it in its if it.get("kind") == "add" and it.get("node") == new
                  and it.get("version") == "1"}
        members = {it["pk"][len("membership#"):]: it for it in its
                   if it["pk"].startswith("membership#")}
        return (events == set(everyone) and set(members) == set(everyone)
                and all(m["version"] == "1" and sorted(m["nodes"].split(",")) == everyone
                        for m in members.values()))

    wait_until(recorded, "the membership change in the registry")
