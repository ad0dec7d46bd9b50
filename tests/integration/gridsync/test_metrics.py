"""gridsync-server's Prometheus endpoint (--metrics-port): scraped over HTTP
and read with the Prometheus project's own parser (prometheus_client), while
redis-py drives the node. Checks the conventions (HELP/TYPE on every family,
counters ending in _total, base units) and that the values move with what
clients do; in cluster mode, the Raft state per group."""
import urllib.request

import pytest
import redis

from conftest import free_port
from test_cluster import make_cluster  # noqa: F401  (the fixture)

parser = pytest.importorskip("prometheus_client.parser")


def scrape(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        assert r.status == 200
        assert r.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        text = r.read().decode()
    fams = {f.name: f for f in parser.text_string_to_metric_families(text)}
    return text, fams


def value(fams, family, sample=None, **labels):
    """The value of one sample of a family (sample: the full sample name,
    e.g. the _count of a histogram), None if absent."""
    f = fams.get(family)
    if f is None:
        return None
    for s in f.samples:
        if (sample is None or s.name == sample) and all(s.labels.get(k) == v
                                                        for k, v in labels.items()):
            return s.value
    return None


def test_conventions_and_values_move(make_server):
    mport = free_port()
    srv = make_server("--metrics-port", str(mport))
    text, fams = scrape(mport)
    # Every family has HELP and TYPE (the parser would call a family
    # without TYPE "unknown"), counters are _total, and the process_*
    # families every client library exports are there.
    for name, f in fams.items():
        assert f.type != "unknown", name
        assert f.documentation, name
    for line in text.splitlines():
        if line.startswith("# TYPE") and line.endswith(" counter"):
            assert line.split()[2].endswith("_total"), line
    for std in ("process_cpu_seconds", "process_resident_memory_bytes",
                "process_start_time_seconds", "process_open_fds"):
        assert std in fams, std
    hits0 = value(fams, "gridsync_keyspace_hits")
    misses0 = value(fams, "gridsync_keyspace_misses")

    r = srv.client()
    r.set("k", "v")
    for _ in range(5):
        assert r.get("k") == b"v"
    assert r.get("missing") is None
    r.set("t", "1", px=1)
    r.select(3)
    r.set("in3", "x")
    with pytest.raises(redis.ResponseError):
        r.execute_command("INCR", "in3")
    _, fams = scrape(mport)
    assert value(fams, "gridsync_keyspace_hits") == hits0 + 5
    assert value(fams, "gridsync_keyspace_misses") >= misses0 + 1
    assert value(fams, "gridsync_command_calls", cmd="get") == 6
    assert value(fams, "gridsync_command_calls", cmd="set") == 3
    assert value(fams, "gridsync_command_failed_calls", cmd="incr") == 1
    assert value(fams, "gridsync_error_replies", code="ERR") >= 1
    # the latency histogram: in seconds, cumulative, +Inf equals the count
    count = value(fams, "gridsync_command_duration_seconds",
                  "gridsync_command_duration_seconds_count", cmd="get")
    inf = value(fams, "gridsync_command_duration_seconds",
                "gridsync_command_duration_seconds_bucket", cmd="get", le="+Inf")
    total = value(fams, "gridsync_command_duration_seconds",
                  "gridsync_command_duration_seconds_sum", cmd="get")
    assert count == inf == 6
    assert 0 < total < 1.0
    buckets = [s for s in fams["gridsync_command_duration_seconds"].samples
               if s.name.endswith("_bucket") and s.labels["cmd"] == "get"]
    counts = [s.value for s in buckets]
    assert counts == sorted(counts)
    assert value(fams, "gridsync_db_keys", db="3") == 1
    assert value(fams, "gridsync_db_keys", db="0") >= 1
    assert value(fams, "gridsync_connected_clients") >= 1
    assert value(fams, "gridsync_memory_used_bytes") > 0
    # INFO and /metrics count the same things
    info = r.info("stats")
    _, fams = scrape(mport)
    assert value(fams, "gridsync_keyspace_hits") == info["keyspace_hits"]
    assert value(fams, "gridsync_connections_received") == info["total_connections_received"]


def test_metrics_port_in_use_fails_the_start(make_server):
    import socket
    import subprocess
    from conftest import find_binary
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        p = subprocess.run([find_binary("gridsync-server"), "--port", str(free_port()),
                            "--metrics-port", str(busy)], capture_output=True, timeout=30)
        assert p.returncode != 0
        assert b"metrics" in p.stdout + p.stderr


def test_config_get_and_bad_value(make_server):
    mport = free_port()
    srv = make_server("--metrics-port", str(mport))
    r = srv.client(decode_responses=True)
    assert r.config_get("metrics-port") == {"metrics-port": str(mport)}
    assert r.config_get("metrics-bind") == {"metrics-bind": "127.0.0.1"}


def test_cluster_raft_state_per_group(make_cluster):
    ports = {}

    def node_extra(nd):
        ports[nd.i] = free_port()
        return ["--metrics-port", str(ports[nd.i])]

    c = make_cluster(3, node_extra=node_extra)
    c.wait_settled()
    rc = c.rc()
    for i in range(20):
        rc.set(f"m{i}", i)
    rc.close()
    leaders = {}
    for nd in c.nodes:
        _, fams = scrape(ports[nd.i])
        assert value(fams, "gridsync_build_info", mode="cluster") == 1
        for s in fams["gridsync_raft_role"].samples:
            if s.labels["role"] == "leader" and s.value == 1:
                leaders.setdefault(s.labels["group"], []).append(nd.port)
        for s in fams["gridsync_raft_applied_index"].samples:
            commit = value(fams, "gridsync_raft_commit_index", group=s.labels["group"])
            assert 0 < s.value <= commit
        assert all(s.value >= 1 for s in fams["gridsync_raft_term"].samples)
    # every group has exactly one leader, the node it is preferred on
    assert len(leaders) == 3
    assert all(len(v) == 1 for v in leaders.values()), leaders
    assert sorted(v[0] for v in leaders.values()) == sorted(nd.port for nd in c.nodes)
