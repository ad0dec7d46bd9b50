"""edumatcher-monitor: beacons published by a real ZeroMQ client become rates
and percentiles in JSON, Prometheus text and the HTML page; the HTTP server
refuses what it does not serve."""
import json
import socket
import time

import zmq

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
    text = body.decode()
    assert 'edumatcher_counter_total{proc="fakeengine",name="msgs_in"} 1000' in text
    assert 'edumatcher_gauge{proc="fakeengine",name="queue_depth"} 3' in text
    # the monitor lists itself
    assert 'edumatcher_up{proc="monitor"} 1' in text

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
