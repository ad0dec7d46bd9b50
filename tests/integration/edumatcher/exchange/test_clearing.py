"""edumatcher-clearing: trades published on `trade.executed` by a real ZeroMQ
publisher become positions and cash, queried over HTTP; a re-sent trade is
applied once; garbage is counted and ignored."""
import json

import zmq

from conftest import binary, free_port, http_get, wait_until


def test_positions_from_trades(procs, zctx):
    pub = zctx.socket(zmq.PUB)
    ep = f"tcp://127.0.0.1:{free_port()}"
    pub.bind(ep)
    hport = free_port()
    c = procs.start([binary("edumatcher-clearing"), "--engine-pub", ep, "--http-port",
                     str(hport), "--health", "", "--engine-query", ""])
    assert "edumatcher-clearing" in c.ready, c.stderr()

    first = b"TRADE tid=1 sym=ABC px=10.50 qty=100 buy=GW1 sell=GW2 buy_oid=2 sell_oid=1"
    def joined():
        # PUB/SUB joins asynchronously: re-send trade 1 (deduplicated by tid)
        pub.send_multipart([b"trade.executed", first])
        d = json.loads(http_get(hport, "/positions")[2])
        return d["trades"] == 1
    assert wait_until(joined, timeout=10, step=0.05), c.stderr()

    pub.send_multipart([b"trade.executed", b"TRADE tid=2 sym=ABC px=10.25 qty=40 buy=GW2 sell=GW1"])
    pub.send_multipart([b"trade.executed", b"not a trade"])
    pub.send_multipart([b"md.ABC", b"TRADE tid=3 sym=ABC px=1 qty=1 buy=X sell=Y"])  # not subscribed
    pub.send_multipart([b"trade.executed", b"TRADE tid=4 sym=XYZ px=5 qty=7 buy=GW3 sell=GW1"])

    def four():
        d = json.loads(http_get(hport, "/positions")[2])
        return d if d["last_tid"] == 4 else None
    d = wait_until(four, timeout=10, step=0.05)
    assert d, c.stderr()
    assert d["trades"] == 3
    acc = {(a["gw"], a["sym"]): a for a in d["accounts"]}
    assert acc[("GW1", "ABC")]["position"] == 60
    assert acc[("GW1", "ABC")]["cash"] == "-640.00"
    assert acc[("GW2", "ABC")]["position"] == -60
    assert acc[("GW2", "ABC")]["cash"] == "640.00"
    assert acc[("GW1", "XYZ")]["position"] == -7
    assert ("X", "ABC") not in acc
    assert sum(a["position"] for a in d["accounts"] if a["sym"] == "ABC") == 0

    only = json.loads(http_get(hport, "/positions?gw=GW1&sym=XYZ")[2])
    assert [(a["gw"], a["sym"]) for a in only["accounts"]] == [("GW1", "XYZ")]
    pub.close(linger=0)


def test_beacon_reaches_monitor(procs, zctx):
    """The clearing process publishes health beacons that the monitor lists."""
    health = f"tcp://127.0.0.1:{free_port()}"
    mport, cport = free_port(), free_port()
    m = procs.start([binary("edumatcher-monitor"), "--http-port", str(mport), "--health", health])
    assert "edumatcher-monitor" in m.ready
    c = procs.start([binary("edumatcher-clearing"), "--engine-pub",
                     f"tcp://127.0.0.1:{free_port()}", "--http-port", str(cport), "--health",
                     health, "--beacon-ms", "50", "--engine-query", ""])
    assert "edumatcher-clearing" in c.ready

    def listed():
        d = json.loads(http_get(mport, "/metrics.json")[2])
        return [p for p in d["processes"] if p["proc"] == "clearing"]
    p = wait_until(listed, timeout=10, step=0.1)
    assert p, m.stderr() + c.stderr()
    assert "trades" in p[0]["counters"]
    assert p[0]["gauges"]["accounts"] == 0
