"""Clearing that survives restarts: under a stream of crossing orders, kill -9
clearing, the engine, or both, restart them, and /positions must equal the
sum of every trade the engine ever made. The engine's trades are read back by
id from its query socket (the same recovery path clearing uses); every trade
printed on trade.executed and every FILL printed to a trader is among them,
unchanged; the engine's market-data volume agrees with them too."""
import json
import signal
from collections import defaultdict
from decimal import Decimal

import pytest
import zmq

from conftest import http_get, wait_until


def engine_trades(zctx, query):
    """Every trade in the engine's log, from id 1, as {tid: line}."""
    req = zctx.socket(zmq.REQ)
    req.setsockopt(zmq.LINGER, 0)
    req.setsockopt(zmq.RCVTIMEO, 5000)
    req.connect(query)
    out, nxt = {}, 1
    try:
        while True:
            req.send_multipart([b"trades", str(nxt).encode()])
            topic, payload = req.recv_multipart()
            assert topic == b"trades", (topic, payload)
            lines = payload.decode().splitlines()
            if not lines:
                return out
            for l in lines:
                tid = int(fields(l)["tid"])
                assert tid == nxt, (tid, nxt)  # by id, no gap
                out[tid] = l
                nxt += 1
    finally:
        req.close()


def fields(line):
    return dict(w.split("=", 1) for w in line.split()[1:])


def positions_of(trades):
    """What clearing must show: per (gw, sym) position, bought, sold, cash."""
    acc = defaultdict(lambda: {"position": 0, "bought": 0, "sold": 0, "cash": Decimal(0),
                               "dec": 0})
    for line in trades.values():
        f = fields(line)
        px, qty = Decimal(f["px"]), int(f["qty"])
        dec = -px.as_tuple().exponent
        b, s = acc[(f["buy"], f["sym"])], acc[(f["sell"], f["sym"])]
        b["position"] += qty
        b["bought"] += qty
        b["cash"] -= px * qty
        s["position"] -= qty
        s["sold"] += qty
        s["cash"] += px * qty
        b["dec"] = s["dec"] = dec
    return {k: {"position": v["position"], "bought": v["bought"], "sold": v["sold"],
                "cash": f"{v['cash']:.{v['dec']}f}"} for k, v in acc.items()}


def clearing_positions(port):
    d = json.loads(http_get(port, "/positions")[2])
    return d["last_tid"], {(a["gw"], a["sym"]): {k: a[k] for k in ("position", "bought",
                                                                    "sold", "cash")}
                           for a in d["accounts"]}


def burst(a, b, tag, n):
    """n crossing pairs on ABC at two prices: n trades."""
    a.send(*[f"NEW cl={tag}a{i} sym=ABC side=B qty={1 + i % 3} px=100.0{i % 2}"
             for i in range(n)])
    b.send(*[f"NEW cl={tag}b{i} sym=ABC side=S qty={1 + i % 3} px=100.0{i % 2}"
             for i in range(n)])


def drain(sub):
    msgs = []
    while True:
        try:
            msgs.append(sub.recv_multipart(zmq.NOBLOCK))
        except zmq.Again:
            return msgs


def subscriber(zctx, x, trader, tag):
    """A SUB on the engine's trades and ABC market data, returned once its
    subscription is in place (market data of a book change arrived)."""
    sub = zctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 1000000)
    sub.setsockopt(zmq.LINGER, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"trade.executed")
    sub.setsockopt(zmq.SUBSCRIBE, b"md.ABC")
    sub.connect(x.pub)
    trader.send(f"NEW cl={tag} sym=ABC side=S qty=1 px=110.00")
    got = []
    assert wait_until(lambda: got.extend(drain(sub)) or any(t == b"md.ABC" for t, _ in got),
                      timeout=10, step=0.05)
    return sub, got


@pytest.mark.parametrize("victim", ["clearing", "engine", "both"])
def test_positions_equal_all_trades_after_kill(exchange, zctx, victim):
    x = exchange(clearing=True)
    a, b = x.trader("GWA"), x.trader("GWB")
    sub, live = subscriber(zctx, x, a, "j1")

    burst(a, b, "p", 150)
    printed = a.until_pong() + b.until_pong()
    burst(a, b, "k", 100)  # in flight at the kill
    if victim in ("clearing", "both"):
        x.clearing.p.send_signal(signal.SIGKILL)
        x.clearing.p.wait()
    if victim in ("engine", "both"):
        x.engine.p.send_signal(signal.SIGKILL)
        x.engine.p.wait()
    # trades made while clearing is down are only in the engine's log
    if victim == "clearing":
        burst(a, b, "d", 50)
        a.until_pong()
        x.clearing = x.start_clearing()
    if victim in ("engine", "both"):
        x.engine = x.start_engine()
    if victim == "both":
        x.clearing = x.start_clearing()
    live.extend(drain(sub))
    # A subscriber that joins now (one that lived through an engine restart
    # is not relied on to have re-joined in time).
    sub2, live2 = subscriber(zctx, x, a, "j2")
    burst(a, b, "q", 150)
    printed += a.until_pong() + b.until_pong()
    b.send("NEW cl=z sym=ABC side=B qty=1 px=90.00")  # a book change: fresh market data
    b.until_pong()

    trades = engine_trades(zctx, x.query)
    assert len(trades) >= 300, len(trades)
    want = positions_of(trades)

    def converged():
        last, got = clearing_positions(x.clearing_port)
        return (last, got) if last == max(trades) and got == want else None
    assert wait_until(converged, timeout=30, step=0.2), (clearing_positions(x.clearing_port),
                                                         max(trades), want,
                                                         x.clearing.stderr())
    # per symbol everything sums to zero (clearing_book.h invariant 1)
    assert sum(v["position"] for v in want.values()) == 0

    # The engine's market data counts the same volume.
    total = sum(int(fields(l)["qty"]) for l in trades.values())

    def volume_seen():
        live2.extend(drain(sub2))
        vols = [int(fields(p.decode())["volume"]) for t, p in live2 if t == b"md.ABC"]
        return vols and vols[-1] == total
    assert wait_until(volume_seen, timeout=10, step=0.1), (total, live2[-1:])

    # What was printed is what the engine has: trade.executed lines verbatim,
    # FILLs by trade id, price and quantity.
    printed_trades = [p.decode() for t, p in live + live2 if t == b"trade.executed"]
    assert len(printed_trades) >= 300, len(printed_trades)
    for l in printed_trades:
        assert trades[int(fields(l)["tid"])] == l
    fills = [fields(l) for l in printed if l.startswith("FILL")]
    assert len(fills) >= 300, len(fills)  # both sides of at least the first burst
    for f in fills:
        t = fields(trades[int(f["tid"])])
        assert (t["px"], t["qty"]) == (f["px"], f["qty"]), (f, t)
    sub.close()
    sub2.close()
