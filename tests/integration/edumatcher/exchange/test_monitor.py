"""edumatcher-monitor: beacons published by a real ZeroMQ client become rates
and percentiles in JSON, Prometheus text and the HTML page; the HTTP server
refuses what it does not serve."""
import json
import socket
import time

import zmq
from prometheus_client.parser import text_string_to_metric_families

from conftest import binary, free_port, http_get, wait_until


def start_monitor(procs):
    hport = free_port()
    health = f"tcp://127.0.0.1:{free_port()}"
    m = procs.start([binary("edumatcher-monitor"), "--http-port", str(hport),
                     "--health", health, "--beacon-ms", "100"])
    assert "edumatcher-monitor" in m.ready, m.stderr()
    return m, hport, health


def beacon(seq, up_ms, msgs, pid=4242):
    return (f"health v=1 proc=fakeengine pid={pid} seq={seq} up_ms={up_ms} rss=1048576 "
            f"lat_n=10 lat_p50=2000 lat_p99=8000 lat_max=9000 c.msgs_in={msgs} "
            f"g.queue_depth=3").encode()


def parse_prometheus(text):
    """Families by name, through the reference client's own parser (it
    raises on text that breaks the format)."""
    return {f.name: f for f in text_string_to_metric_families(text)}


def sample(fams, name, **labels):
    for f in fams.values():
        for s in f.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in labels.items()):
                return s.value
    return None


HIST = ",".join(["4", "0", "0", "0", "0", "0", "6"] + ["0"] * 9 + ["1"])


def test_metrics_follow_prometheus_conventions(procs, zctx):
    m, hport, health = start_monitor(procs)
    pub = zctx.socket(zmq.PUB)
    pub.connect(health)
    line = (f"health v=1 proc=fakegw pid=77 seq=1 up_ms=1500 rss=2097152 lat_n=0 "
            f"lat_p50=0 lat_p99=0 lat_max=0 lat_cnt=11 lat_sum=3000000000 lat_h={HIST} "
            f"c.rejects=5 c.rate_limited=2 g.sessions=7").encode()

    def seen():
        pub.send_multipart([b"health.fakegw", line])
        fams = parse_prometheus(http_get(hport, "/metrics")[2].decode())
        return fams if sample(fams, "edumatcher_rejects_total", proc="fakegw") else None
    fams = wait_until(seen, timeout=10, step=0.1)
    assert fams, m.stderr()
    for f in fams.values():
        assert f.documentation, f.name            # every family has # HELP
        assert f.type in ("counter", "gauge", "histogram"), f.name
        for s in f.samples:
            assert "name" not in s.labels, s       # one metric name per counter
        assert "rate" not in f.name or f.name.endswith("rate_limited"), f.name
    assert fams["edumatcher_rejects"].type == "counter"
    assert sample(fams, "edumatcher_rate_limited_total", proc="fakegw") == 2
    assert sample(fams, "edumatcher_sessions", proc="fakegw") == 7
    assert sample(fams, "edumatcher_process_resident_memory_bytes", proc="fakegw") == 2097152
    assert sample(fams, "edumatcher_process_uptime_seconds", proc="fakegw") == 1.5
    h = fams["edumatcher_handle_latency_seconds"]
    assert h.type == "histogram"
    buckets = {float(s.labels["le"]): s.value for s in h.samples
               if s.name.endswith("_bucket") and s.labels["proc"] == "fakegw"}
    assert buckets[1e-06] == 4 and buckets[5e-05] == 4
    assert buckets[1e-4] == 10 and buckets[1.0] == 10 and buckets[float("inf")] == 11
    assert sample(fams, "edumatcher_handle_latency_seconds_count", proc="fakegw") == 11
    assert sample(fams, "edumatcher_handle_latency_seconds_sum", proc="fakegw") == 3.0
    # the monitor's own process, the standard names
    assert fams["process_cpu_seconds"].type == "counter"
    assert sample(fams, "process_resident_memory_bytes") > 0
    assert sample(fams, "process_open_fds") >= 3
    assert sample(fams, "process_start_time_seconds") > 1.5e9
    pub.close(linger=0)


def test_beacons_become_rates(procs, zctx):
    m, hport, health = start_monitor(procs)
    pub = zctx.socket(zmq.PUB)
    pub.connect(health)
    # 500 msgs per 1000 ms of sender uptime; sent until the monitor has two.
    def two_seen():
        for i in range(2):
            pub.send_multipart([b"health.fakeengine", beacon(i + 1, 1000 * (i + 1), 500 * (i + 1))])
        _, _, body = http_get(hport, "/metrics.json")
        d = json.loads(body)
        procs_ = {p["proc"]: p for p in d["processes"]}
        p = procs_.get("fakeengine")
        return p if p and p["msgs_per_s"]["1s"] is not None else None
    p = wait_until(two_seen, timeout=10, step=0.1)
    assert p, m.stderr()
    assert p["msgs_per_s"]["1s"] == 500.0
    assert p["lat_p50_ns"] == 2000 and p["lat_p99_ns"] == 8000
    assert p["queue_depth"] == 3
    assert p["rss"] == 1048576
    assert p["counters"]["msgs_in"]["total"] == 1000

    status, headers, body = http_get(hport, "/metrics")
    assert status == 200
    fams = parse_prometheus(body.decode())
    assert sample(fams, "edumatcher_msgs_in_total", proc="fakeengine") == 1000
    assert sample(fams, "edumatcher_queue_depth", proc="fakeengine") == 3
    # the monitor lists itself
    assert sample(fams, "edumatcher_up", proc="monitor") == 1

    status, headers, body = http_get(hport, "/")
    assert status == 200 and b"EduMatcher monitor" in body
    assert headers["Content-Type"].startswith("text/html")
    pub.close(linger=0)


def test_garbage_on_the_bus_is_counted_not_fatal(procs, zctx):
    m, hport, health = start_monitor(procs)
    pub = zctx.socket(zmq.PUB)
    pub.connect(health)
    def counted():
        pub.send_multipart([b"health.x", b"health v=1 proc=BAD"])
        pub.send_multipart([b"health.x", b"\xff\x00junk"])
        _, _, body = http_get(hport, "/metrics.json")
        mon = [p for p in json.loads(body)["processes"] if p["proc"] == "monitor"]
        return mon and mon[0]["counters"]["bad_beacons"]["total"] >= 2
    assert wait_until(counted, timeout=10, step=0.1)
    assert m.p.poll() is None
    pub.close(linger=0)


def raw(port, data, timeout=5.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(data)
        out = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return out
            out += chunk


def test_http_limits(procs):
    m, hport, health = start_monitor(procs)
    assert raw(hport, b"POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n").startswith(
        b"HTTP/1.1 405")
    assert raw(hport, b"GET / HTTP/1.1\r\nX: " + b"a" * 9000 + b"\r\n\r\n").startswith(
        b"HTTP/1.1 431")
    assert raw(hport, b"GARBAGE\r\n\r\n").startswith(b"HTTP/1.1 400")
    assert raw(hport, b"GET /nope HTTP/1.0\r\n\r\n").startswith(b"HTTP/1.1 404")
    # HEAD: headers only
    out = raw(hport, b"HEAD /healthz HTTP/1.0\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 200") and out.endswith(b"\r\n\r\n")
    # still serving
    assert http_get(hport, "/healthz")[2] == b"ok\n"


def test_health_rules_on_page_json_and_metrics(procs, zctx):
    """Queue depth over the limit and dropped messages raise alarms; a
    process that stops beaconing becomes stale; all three are in
    /rules.json and in /metrics, and the page has the table for them."""
    hport = free_port()
    health = f"tcp://127.0.0.1:{free_port()}"
    m = procs.start([binary("edumatcher-monitor"), "--http-port", str(hport),
                     "--health", health, "--beacon-ms", "100", "--queue-depth-max", "50"])
    assert "edumatcher-monitor" in m.ready, m.stderr()
    pub = zctx.socket(zmq.PUB)
    pub.connect(health)

    def line(proc, up_ms, depth, full):
        return (f"health v=1 proc={proc} pid=9 seq=1 up_ms={up_ms} rss=1048576 lat_n=0 "
                f"lat_p50=0 lat_p99=0 lat_max=0 c.bus_full={full} g.queue_depth={depth}").encode()

    def rules():
        return json.loads(http_get(hport, "/rules.json")[2])

    # calm: depth under the limit, no drops (two beacons so deltas exist)
    def calm_seen():
        pub.send_multipart([b"health.calm", line("calm", 100, 10, 4)])
        pub.send_multipart([b"health.calm", line("calm", 200, 10, 4)])
        r = rules().get("calm")
        return r
    r = wait_until(calm_seen, timeout=10, step=0.1)
    assert r, m.stderr()
    assert r["queue_depth"]["level"] == "ok" and r["queue_depth"]["value"] == 10
    assert r["dropped"]["level"] == "ok"

    # busy: over the limit, and 3 messages dropped between its beacons
    def busy_seen():
        pub.send_multipart([b"health.busy", line("busy", 100, 80, 1)])
        pub.send_multipart([b"health.busy", line("busy", 200, 80, 4)])
        r = rules().get("busy")
        return r if r and r["dropped"]["level"] == "alarm" else None
    r = wait_until(busy_seen, timeout=10, step=0.1)
    assert r, m.stderr()
    assert r["queue_depth"]["level"] == "alarm" and r["queue_depth"]["value"] == 80
    assert r["dropped"]["value"] == 3 and "bus_full" in r["dropped"]["reason"]

    # calm stops: 3 of its 100 ms intervals without a beacon is stale
    r = wait_until(lambda: rules()["calm"]["stale"]["level"] == "alarm", timeout=10, step=0.1)
    assert r, rules()

    fams = parse_prometheus(http_get(hport, "/metrics")[2].decode())
    assert sample(fams, "edumatcher_health_rule_level", proc="busy", rule="queue_depth") == 2
    assert sample(fams, "edumatcher_health_rule_level", proc="calm", rule="stale") == 2
    assert sample(fams, "edumatcher_health_rule_value", proc="busy", rule="dropped") == 3
    page = http_get(hport, "/")[2]
    assert b"Health rules" in page and b"/rules.json" in page
    pub.close(linger=0)

