"""EduMatcher end to end: real engine, gateway, clearing and monitor processes
on loopback, driven by ALF sessions over TCP and a pyzmq subscriber."""
import json
import os
import random
import signal
import struct
import time

import pytest
import zmq

import subprocess

from conftest import OPS_TOKEN, LinkClient, Trader, binary, frames, http_get, replay, wait_until


def scenario(rng, n):
    """A deterministic order flow for two traders on ABC: resting orders,
    crossings, cancels, replaces, an IOC and a market order."""
    steps = []
    live = {"GW1": [], "GW2": []}
    for i in range(n):
        gw = "GW1" if i % 2 == 0 else "GW2"
        r = rng.random()
        if r < 0.15 and live[gw]:
            cl = live[gw].pop(rng.randrange(len(live[gw])))
            steps.append((gw, f"CANCEL cl={cl}"))
        elif r < 0.22 and live[gw]:
            cl = rng.choice(live[gw])
            steps.append((gw, f"REPLACE cl={cl} qty={rng.randint(1, 30)}"))
        elif r < 0.27:
            steps.append((gw, f"NEW cl={gw.lower()}m{i} sym=ABC side={rng.choice('BS')} "
                              f"qty={rng.randint(1, 5)} type=MKT"))
        else:
            cl = f"{gw.lower()}o{i}"
            px = 100 + rng.randint(-5, 5) / 100
            tif = "IOC" if rng.random() < 0.1 else "GTC"
            steps.append((gw, f"NEW cl={cl} sym=ABC side={rng.choice('BS')} "
                              f"qty={rng.randint(1, 20)} px={px:.2f} tif={tif}"))
            live[gw].append(cl)
    return steps


def test_gateway_events_match_replay(exchange_both):
    """Orders through gateway and engine produce, per trader, exactly the
    events edumatcher-replay prints for the same input."""
    x = exchange_both()
    traders = {gw: x.trader(gw) for gw in ("GW1", "GW2")}
    live = {"GW1": [], "GW2": []}
    replay_in = ["GW1 LOGIN gw=GW1", "GW2 LOGIN gw=GW2"]
    # One message at a time, each followed by a PING barrier on both
    # sessions, so the interleaving is the one replay sees.
    for gw, line in scenario(random.Random(7), 120):
        traders[gw].send(line)
        replay_in.append(f"{gw} {line}")
        for g, t in traders.items():
            live[g] += t.until_pong()
            replay_in.append(f"{g} PING")
    expected = {"GW1": [], "GW2": []}
    for l in replay(replay_in):
        gw, ev = l.split(" ", 1)
        if ev not in ("PONG",) and not ev.startswith("LOGGEDIN"):
            expected[gw].append(ev)
    assert live["GW1"] == expected["GW1"]
    assert live["GW2"] == expected["GW2"]
    assert any(e.startswith("FILL") for e in live["GW1"])  # the scenario trades


def test_trades_and_throttled_market_data_on_the_bus(exchange, zctx):
    x = exchange(engine_args=["--md-interval-ms", "300"], clearing=True)
    sub = zctx.socket(zmq.SUB)
    sub.connect(x.pub)
    for t in (b"trade.", b"md."):
        sub.setsockopt(zmq.SUBSCRIBE, t)
    a, b = x.trader("GW1"), x.trader("GW2")

    # The subscription joins asynchronously: trade until one is seen.
    def first_trade():
        a.send("NEW cl=w sym=ABC side=B qty=1 px=100.00")
        b.send("NEW cl=w sym=ABC side=S qty=1 px=100.00")
        a.until_pong(), b.until_pong()
        return sub.poll(200) and sub.recv_multipart()
    msg = wait_until(first_trade, timeout=10, step=0)
    assert msg, "no trade.executed received"
    while sub.poll(400):
        sub.recv_multipart()  # drain what the join loop produced

    start = time.monotonic()
    a.send(*[f"NEW cl=s{i} sym=ABC side=S qty=2 px=100.0{i % 3}" for i in range(30)])
    a.until_pong()
    b.send("NEW cl=big sym=ABC side=B qty=60 px=100.02")
    fills = [l for l in b.until_pong() if l.startswith("FILL")]
    assert len(fills) == 30
    trades, mds = [], []
    # collect the 30 trades, then one more md interval for the last update
    deadline = time.monotonic() + 10
    quiet_until = None
    while time.monotonic() < deadline:
        if len(trades) == 30 and quiet_until is None:
            quiet_until = time.monotonic() + 0.8
        if quiet_until and time.monotonic() > quiet_until:
            break
        if sub.poll(50):
            topic, payload = sub.recv_multipart()
            (trades if topic == b"trade.executed" else mds).append(payload.decode())
    elapsed_ms = (time.monotonic() - start) * 1000
    assert len(trades) == 30
    t0 = trades[0].split()
    assert t0[0] == "TRADE" and "sym=ABC" in t0 and "buy=GW2" in t0 and "sell=GW1" in t0
    assert "qty=2" in t0
    # throttled: at most one md.ABC per interval, never one per trade
    assert mds and all(m.startswith("MD sym=ABC ") for m in mds)
    assert "phase=CONTINUOUS last=100.02" in mds[-1]  # the last trade's price
    assert len(mds) <= elapsed_ms / 300 + 2
    assert len(mds) < len(trades)
    # the clearing process saw every trade
    def cleared():
        d = json.loads(http_get(x.clearing_port, "/positions?sym=ABC")[2])
        acc = {a_["gw"]: a_ for a_ in d["accounts"]}
        return acc if acc.get("GW2", {}).get("bought") == 60 else None
    acc = wait_until(cleared, timeout=10, step=0.1)
    assert acc, "clearing did not see the trades"
    assert acc["GW1"]["position"] + acc["GW2"]["position"] == 0


def test_cancel_on_disconnect(exchange_both):
    x = exchange_both()
    a = x.trader("GW1")
    a.send("NEW cl=r1 sym=ABC side=S qty=5 px=100.00 tif=GTC",
           "NEW cl=r2 sym=ABC side=S qty=5 px=100.01")
    assert [l.split()[0] for l in a.until_pong()] == ["ACK", "ACK"]
    a.close()
    b = x.trader("GW2")
    # the DISCONNECT travels gateway -> engine; retry until the book is empty
    def book_empty():
        b.send("NEW cl=probe sym=ABC side=B qty=1 px=100.01 tif=IOC")
        lines = b.until_pong()
        return lines if not any(l.startswith("FILL") for l in lines) else None
    lines = wait_until(book_empty, timeout=10, step=0.05)
    assert lines and lines[0].startswith("ACK")
    # the same gw can log in again (on this gateway) and has no live orders
    a2 = x.trader("GW1")
    a2.send("CANCEL cl=r1")
    assert a2.until_pong() == ["REJECT cl=r1 reason=UNKNOWN_ORDER"]


def test_disabled_gateway_and_operator_session(exchange_both):
    x = exchange_both()
    t = x.trader("GW5")
    t.send("NEW cl=k1 sym=ABC side=B qty=1 px=99.00")
    assert t.until_pong()[0].startswith("ACK cl=k1")
    # no token, wrong token: refused
    bad = x.trader()
    bad.send("LOGIN gw=OPS")
    assert bad.line() == "REJECT reason=AUTH"
    bad.send(f"LOGIN gw=OPS token=wrong")
    assert bad.line() == "REJECT reason=AUTH"
    ops = x.trader("OPS", OPS_TOKEN)
    ops.send("GATEWAY gw=GW5 enabled=0", "HALT sym=NOPE")
    assert ops.until_pong() == ["OK", "REJECT reason=UNKNOWN_SYMBOL"]
    t.send("NEW cl=k2 sym=ABC side=B qty=1 px=99.00", "CANCEL cl=k1")
    assert t.until_pong() == ["REJECT cl=k2 reason=GATEWAY_DISABLED",
                              "CANCELED cl=k1 oid=1 qty=1 cum=0 reason=USER"]
    # traders cannot send operator messages
    t.send("GATEWAY gw=GW5 enabled=1")
    assert t.until_pong() == ["REJECT reason=AUTH"]


def test_rate_limit(exchange_both):
    x = exchange_both(gateway_args=["--rate-limit", "10", "--rate-burst", "5"])
    t = x.trader("GW1")
    t.send(*[f"NEW cl=q{i} sym=ABC side=B qty=1 px=99.00" for i in range(40)])
    lines = []
    while len(lines) < 40:
        lines.append(t.line())
    acks = [l for l in lines if l.startswith("ACK")]
    limited = [l for l in lines if l.endswith("reason=RATE_LIMIT")]
    assert len(acks) + len(limited) == 40
    assert len(acks) >= 5 and limited
    assert limited[0].startswith("REJECT cl=q")  # cl is echoed
    # the session survives and recovers as tokens refill
    assert wait_until(lambda: t.until_pong() == [], timeout=10, step=0.2) is not None


def test_malformed_lines_get_rejects_and_the_session_survives(exchange_both):
    x = exchange_both()
    t = x.trader()
    t.send("NEW cl=early sym=ABC side=B qty=1 px=99.00")
    assert t.line() == "REJECT cl=early reason=NOT_LOGGED_IN"
    t.send("LOGIN gw=lower")
    assert t.line() == "REJECT reason=BAD_VALUE"
    t.send("LOGIN gw=GW7")
    assert t.line() == "LOGGEDIN gw=GW7"
    t.send("FOO bar=1",
           "NEW cl=m1",
           "NEW cl=m2 sym=ABC side=X qty=1 px=1",
           "NEW cl=m3 sym=ABC side=B qty=1 px=1 px=2",
           "CANCEL cl=m4 nope=1",
           "NEW cl=" + "x" * 2000,
           "",
           "LOGIN gw=GW7",
           "NEW cl=ok sym=ABC side=B qty=1 px=99.00")
    got = t.until_pong()
    assert got == ["REJECT reason=SYNTAX",
                   "REJECT cl=m1 reason=MISSING_FIELD",
                   "REJECT cl=m2 reason=BAD_VALUE",
                   "REJECT cl=m3 reason=SYNTAX",
                   "REJECT cl=m4 reason=SYNTAX",
                   "REJECT reason=LINE_TOO_LONG",
                   "REJECT reason=AUTH",
                   "ACK cl=ok oid=1"]
    # a long line split across writes is discarded up to its newline
    t.sock.sendall(b"NEW cl=" + b"y" * 1500)
    time.sleep(0.05)
    t.sock.sendall(b"y" * 1500 + b"\nPING\n")
    assert t.line() == "REJECT reason=LINE_TOO_LONG"
    assert t.line() == "PONG"


def msg_def_names(macro):
    """The names of edumatcher/engine/msg.def's EM_FIELD(...) or EM_MSG(...) lines,
    in order: a field's bit number, a message's kind minus one."""
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), *[".."] * 4)
    with open(os.path.join(root, "edumatcher", "engine", "msg.def")) as f:
        return [l.split("(", 1)[1].split(",", 1)[0] for l in f if l.startswith(macro + "(")]


def frame(kind, *fields):
    """A bus frame as em_frame_encode lays it out: [u16 length][u8 kind]
    [u32 fields present][the values, encoded by the caller, in the
    message's field order]."""
    names = msg_def_names("EM_FIELD")
    present = sum(1 << names.index(name) for name, _ in fields)
    body = struct.pack("<BI", msg_def_names("EM_MSG").index(kind) + 1, present)
    body += b"".join(value for _, value in fields)
    return struct.pack("<H", 2 + len(body)) + body


def rejcode_names():
    with open(os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "edumatcher",
                           "engine", "msg.h")) as f:
        text = f.read()
    block = text.split("#define EM_REJCODE_MAP(X)", 1)[1].split("/*", 1)[0]
    return [w.split("(", 1)[1].split(",", 1)[0] for w in block.split() if w.startswith("X(")]


def test_engine_refuses_an_event_frame_with_syntax(exchange):
    """A frame of an event kind sent straight to the engine over the order
    link (the gateway never forwards one) is refused with the code
    em_engine_authorize returns: SYNTAX (docs/alf.md A.7), not AUTH."""
    x = exchange()
    kinds, reasons = msg_def_names("EM_MSG"), rejcode_names()
    link = LinkClient(x.orders)  # same uid as the engine: allowed, as a gateway

    def answer():
        gw, payload = link.record()
        assert gw == b"GW9"
        (f,) = frames(payload)
        # REJECT's fields in order: cl (when present: u8 length, bytes),
        # the reason, then seq / eseq (the engine's event number)
        (present,) = struct.unpack_from("<I", f, 3)
        at = 7
        if present & (1 << msg_def_names("EM_FIELD").index("cl")):
            at += 1 + f[7]
        return kinds[f[2] - 1], reasons[f[at] - 1]

    link.send(b"GW9", frame("LOGIN", ("gw", b"\x03GW9")))
    gw, payload = link.record()
    assert kinds[frames(payload)[0][2] - 1] == "LOGGEDIN"
    link.send(b"GW9", frame("PONG"))
    assert answer() == ("REJECT", "SYNTAX")
    link.send(b"GW9", frame("ACK", ("cl", b"\x02e1"), ("oid", struct.pack("<Q", 1))))
    assert answer() == ("REJECT", "SYNTAX")
    # an operator message from a trader is still AUTH (C.4)
    link.send(b"GW9", frame("TICK", ("ms", struct.pack("<Q", 5))))
    assert answer() == ("REJECT", "AUTH")
    link.close()


def strip_ids(lines):
    return [" ".join(w for w in l.split() if not w.startswith(("oid=", "tid="))) for l in lines]


@pytest.mark.parametrize("snapshots", [False, True], ids=["journal", "snapshot"])
def test_crash_recovery(exchange, snapshots):
    """kill -9 the engine mid-stream and restart it: every acknowledged order
    is still there, ids continue, and what follows matches an uninterrupted
    run (edumatcher-replay over the acknowledged input). With snapshots
    every 40 records, the restart restores the latest and replays only the
    records after it."""
    args = ["--snapshot-records", "40"] if snapshots else ["--snapshot-records", "0",
                                                            "--snapshot-interval-ms", "0"]
    x = exchange(engine_args=args)
    g1, g2, g3 = x.trader("GW1"), x.trader("GW2"), x.trader("GW3")
    steps = scenario(random.Random(11), 60)
    replay_in = ["GW1 LOGIN gw=GW1", "GW2 LOGIN gw=GW2"]
    ts = {"GW1": g1, "GW2": g2}
    max_oid = 0
    for gw, line in steps:
        ts[gw].send(line)
        replay_in.append(f"{gw} {line}")
        for g, t in ts.items():
            for l in t.until_pong():
                for w in l.split():
                    if w.startswith("oid="):
                        max_oid = max(max_oid, int(w[4:]))
            replay_in.append(f"{g} PING")

    # GW3 streams non-crossing orders on XYZ while the engine is killed.
    g3.send(*[f"NEW cl=x{i} sym=XYZ side=B qty=1 px={10 + i * 0.5:.1f}" for i in range(300)])
    time.sleep(0.01)
    x.engine.p.send_signal(signal.SIGKILL)
    x.engine.p.wait()
    acked3 = []
    while True:
        try:
            l = g3.line(timeout=0.5)
        except OSError:
            break
        if l.startswith("ACK"):
            acked3.append(l.split()[1][3:])
    # the snapshots on disk at the crash: the restart must use the latest
    snaps = sorted(f for f in os.listdir(x.journal) if f.startswith("snapshot-"))
    x.engine = x.start_engine()
    words = x.engine.ready.split()
    replayed = int(words[words.index("replayed") + 1])
    snapshot_seq = int(words[words.index("snapshot") + 1])
    if snapshots:
        # records 1..snapshot_seq came from the snapshot, not from replay
        assert snapshot_seq >= 40, x.engine.ready
        assert snaps and snaps[-1] == f"snapshot-{snapshot_seq:020d}.snap", snaps
        assert "restored the snapshot after record %d" % snapshot_seq in x.engine.stderr()
    else:
        assert not snaps and snapshot_seq == 0 and replayed > 0, x.engine.ready

    # Every GW3 order acknowledged before the crash is still live. (GW3's
    # messages caught in the crash may be answered now: drain them.)
    g3.until_pong()
    while not g3.expect_nothing(0.3):
        pass
    g3.buf = b""
    if acked3:
        g3.send(*[f"CANCEL cl={cl}" for cl in acked3])
        got = g3.until_pong()
        assert len(got) == len(acked3)
        assert all(l.startswith("CANCELED") and l.endswith("reason=USER") for l in got), got

    # GW1/GW2's books survived: mass cancels list exactly what an
    # uninterrupted run has open (oids/tids differ by GW3's orders).
    tail = [("GW1", "MASSCANCEL"), ("GW2", "MASSCANCEL"),
            ("GW1", "NEW cl=after sym=ABC side=B qty=1 px=90.00")]
    live = {"GW1": [], "GW2": []}
    for gw, line in tail:
        ts[gw].send(line)
        replay_in.append(f"{gw} {line}")
        for g, t in ts.items():
            live[g] += t.until_pong()
            replay_in.append(f"{g} PING")
    # the events of the tail in an uninterrupted run: replay with the tail
    # minus replay without it
    out = replay(replay_in)
    base = replay(replay_in[:-len(tail) * 3])
    expected = {"GW1": [], "GW2": []}
    for l in out[len(base):]:
        gw, ev = l.split(" ", 1)
        if ev != "PONG":
            expected[gw].append(ev)
    assert strip_ids(live["GW1"]) == strip_ids(expected["GW1"])
    assert strip_ids(live["GW2"]) == strip_ids(expected["GW2"])
    assert any("reason=MASS" in l for l in live["GW1"] + live["GW2"])
    # ids continue after the restart: the new order's oid is above all
    # acknowledged before the crash
    new_oid = int([w for w in live["GW1"][-1].split() if w.startswith("oid=")][0][4:])
    assert new_oid > max_oid


def test_health_of_every_process_reaches_the_monitor(exchange):
    x = exchange(clearing=True, monitor=True)
    t = x.trader("GW1")
    t.send("NEW cl=h sym=ABC side=B qty=1 px=99.00")
    t.until_pong()

    def all_listed():
        d = json.loads(http_get(x.monitor_port, "/metrics.json")[2])
        names = {p["proc"]: p for p in d["processes"]}
        return names if {"engine", "gateway", "clearing", "monitor"} <= set(names) else None
    names = wait_until(all_listed, timeout=15, step=0.2)
    assert names, "not every process reported"
    assert names["engine"]["counters"]["msgs_in"]["total"] >= 3
    assert "open_orders" in names["engine"]["gauges"]


def test_scheduled_phase_change(exchange):
    """`AT <ms> <operator line>` in the symbols file fires at that engine
    time; before it the symbol trades, after it the phase applies."""
    x = exchange(extra_symbols="AT 400 PHASE sym=XYZ phase=CLOSED\n",
                 engine_args=["--tick-ms", "20"])
    t = x.trader("GW1")
    t.send("NEW cl=p1 sym=XYZ side=B qty=1 px=10.0")
    first = t.until_pong()
    if first[0].startswith("ACK"):
        # the close cancels the DAY order (EXPIRED) when it fires
        def closed():
            t.send("NEW cl=p2 sym=XYZ side=B qty=1 px=10.0")
            got = t.until_pong()
            return got if "REJECT cl=p2 reason=PHASE" in got else None
        assert wait_until(closed, timeout=10, step=0.1)
    else:
        assert first == ["REJECT cl=p1 reason=PHASE"]  # a very slow start


def test_market_data_depth_snapshot(exchange, zctx):
    """md.<SYM> carries the best levels per side (px:shown:orders), icebergs
    showing only their peak, and comes only when the book changed."""
    x = exchange(engine_args=["--md-interval-ms", "50", "--md-depth", "2"])
    sub = zctx.socket(zmq.SUB)
    sub.connect(x.pub)
    sub.setsockopt(zmq.SUBSCRIBE, b"md.XYZ")
    t = x.trader("GW1")
    n = [0]

    def snapshot_seen():
        # touch the book until a snapshot arrives (the subscription joins late)
        n[0] += 1
        t.send(f"NEW cl=j{n[0]} sym=XYZ side=S qty=1 px=90.0", f"CANCEL cl=j{n[0]}")
        t.until_pong()
        return sub.poll(200) and sub.recv_multipart()
    assert wait_until(snapshot_seen, timeout=10, step=0)
    while sub.poll(300):
        sub.recv_multipart()
    t.send("NEW cl=b1 sym=XYZ side=B qty=7 px=10.0",
           "NEW cl=b2 sym=XYZ side=B qty=3 px=10.0",
           "NEW cl=b3 sym=XYZ side=B qty=5 px=9.5",
           "NEW cl=b4 sym=XYZ side=B qty=5 px=9.0",
           "NEW cl=a1 sym=XYZ side=S qty=50 px=11.0 peak=10")
    t.until_pong()
    # the orders may span two batches, hence two snapshots: take the last
    md = None
    while sub.poll(1000):
        topic, payload = sub.recv_multipart()
        assert topic == b"md.XYZ"
        md = payload.decode()
        if "asks=11.0" in md:
            break
    assert md, "no snapshot"
    assert " bids=10.0:10:2,9.5:5:1 " in md  # two levels only (--md-depth 2)
    assert md.endswith(" asks=11.0:10:1")    # the iceberg shows its peak
    # nothing changed: no further snapshot
    assert not sub.poll(500)


def test_two_gateways_share_one_engine(exchange):
    """Traders on different gateway processes trade with each other; each
    gets its own events, and each gateway only its own traders'."""
    x = exchange()
    port2 = x.add_gateway("gateway2")
    a = x.trader("GW1")
    b = Trader(port2, "GW2")
    a.send("NEW cl=a1 sym=ABC side=B qty=5 px=100.00")
    assert a.until_pong() == ["ACK cl=a1 oid=1"]
    b.send("NEW cl=b1 sym=ABC side=S qty=5 px=100.00")
    assert b.until_pong() == ["ACK cl=b1 oid=2",
                              "FILL cl=b1 oid=2 tid=1 px=100.00 qty=5 leaves=0 cum=5"]
    assert a.line() == "FILL cl=a1 oid=1 tid=1 px=100.00 qty=5 leaves=0 cum=5"
    assert a.until_pong() == []


def test_em_load_against_the_real_gateway(exchange_both):
    """em-load logs in its connections, sends its mix and matches every
    reply to its request (short runs, open and closed loop)."""
    x = exchange_both(gateway_args=["--rate-limit", "0"])
    for args in (["--rate", "2000"], ["--rate", "0", "--depth", "8"]):
        r = subprocess.run([binary("em-load"), "--port", str(x.port), "--conns", "3",
                            "--duration", "1", "--warmup", "0", "--symbols", "ABC",
                            "--gw-prefix", "LD", *args],
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        result = dict(w.split("=", 1) for w in
                      [l for l in r.stdout.splitlines() if l.startswith("RESULT")][0].split()[1:])
        assert int(result["replies"]) > 0
        assert result["overflow"] == "0"
        # only engine-state rejects (a cancel of an order that has filled)
        for reason in ("SYNTAX", "MISSING_FIELD", "BAD_VALUE", "UNKNOWN_SYMBOL", "AUTH"):
            assert f"REJECT {reason}:" not in r.stdout, r.stdout


def test_bursts_larger_than_one_bus_message_keep_every_event_in_order(exchange_both):
    """The gateway packs what one read brings into one bus message and the
    engine one trader's events of a batch into one; both are bounded in
    size, so a big burst spans several. Every order is still answered once,
    in order, and one aggressor's fills arrive complete and in time
    priority."""
    x = exchange_both()
    a, b = x.trader("GW1"), x.trader("GW2")
    n = 300
    a.send(*[f"NEW cl=p{i} sym=ABC side=S qty=1 px=100.00" for i in range(n)])
    acks = a.until_pong()
    assert all(l.startswith("ACK ") for l in acks), acks[:3]
    assert [l.split()[1] for l in acks] == [f"cl=p{i}" for i in range(n)]
    b.send(f"NEW cl=big sym=ABC side=B qty={n} px=100.00")
    ev = b.until_pong()
    assert ev[0].startswith("ACK cl=big"), ev[:2]
    assert len(ev) == n + 1 and all(f.startswith("FILL cl=big") for f in ev[1:])
    fills = a.until_pong()
    assert all(l.startswith("FILL ") for l in fills), fills[:3]
    assert [l.split()[1] for l in fills] == [f"cl=p{i}" for i in range(n)]


def test_hosted_sessions_beside_a_gateway(exchange):
    """A trader on the engine's own ALF port and one on a separate gateway
    process trade with each other; each gets its own events only, and the
    engine's beacon counts the hosted session."""
    x = exchange(hosted=True, monitor=True)
    port2 = x.add_gateway("gateway2")
    a = x.trader("GW1")  # hosted
    b = Trader(port2, "GW2")
    a.send("NEW cl=a1 sym=ABC side=B qty=5 px=100.00")
    assert a.until_pong() == ["ACK cl=a1 oid=1"]
    b.send("NEW cl=b1 sym=ABC side=S qty=5 px=100.00")
    assert b.until_pong() == ["ACK cl=b1 oid=2",
                              "FILL cl=b1 oid=2 tid=1 px=100.00 qty=5 leaves=0 cum=5"]
    assert a.line() == "FILL cl=a1 oid=1 tid=1 px=100.00 qty=5 leaves=0 cum=5"
    assert a.until_pong() == []
    # the other way round: the gateway's resting order, the hosted aggressor
    b.send("NEW cl=b2 sym=ABC side=S qty=2 px=100.01")
    assert b.until_pong() == ["ACK cl=b2 oid=3"]
    a.send("NEW cl=a2 sym=ABC side=B qty=2 px=100.01")
    assert a.until_pong() == ["ACK cl=a2 oid=4",
                              "FILL cl=a2 oid=4 tid=2 px=100.01 qty=2 leaves=0 cum=2"]
    assert b.line() == "FILL cl=b2 oid=3 tid=2 px=100.01 qty=2 leaves=0 cum=2"

    def counted():
        d = json.loads(http_get(x.monitor_port, "/metrics.json")[2])
        eng = {p["proc"]: p for p in d["processes"]}.get("engine")
        if not eng or "gw_sessions" not in eng["gauges"]:
            return None
        return eng if eng["counters"]["gw_msgs_in"]["total"] >= 6 else None
    eng = wait_until(counted, timeout=15, step=0.2)
    assert eng, "the engine's beacon has no hosted-session counters"
    assert eng["gauges"]["gw_sessions"] >= 1


def test_hosted_crash_recovery(exchange):
    """kill -9 the engine that hosts the sessions: the traders' connections
    go with it. After the restart (same port) every order acknowledged
    before the crash is still in the book, and ids continue."""
    x = exchange(hosted=True, engine_args=["--snapshot-records", "50"])
    t = x.trader("GW3")
    t.send(*[f"NEW cl=x{i} sym=XYZ side=B qty=1 px={10 + i * 0.5:.1f}" for i in range(300)])
    time.sleep(0.01)
    x.engine.p.send_signal(signal.SIGKILL)
    x.engine.p.wait()
    acked, max_oid = [], 0
    while True:
        try:
            l = t.line(timeout=5)
        except (OSError, EOFError):
            break
        if l.startswith("ACK"):
            w = dict(kv.split("=", 1) for kv in l.split()[1:])
            acked.append(w["cl"])
            max_oid = max(max_oid, int(w["oid"]))
    x.engine = x.start_engine()
    t = x.trader("GW3")  # same port; a new session, the orders are the gw's
    t.send(*[f"CANCEL cl={cl}" for cl in acked])
    got = t.until_pong()
    assert len(got) == len(acked)
    assert all(l.startswith("CANCELED") and l.endswith("reason=USER") for l in got), got[:3]
    t.send("NEW cl=after sym=ABC side=B qty=1 px=90.00")
    (ack,) = t.until_pong()
    assert ack.startswith("ACK cl=after") and int(ack.split("oid=")[1]) > max_oid, ack


def test_hosted_operator_and_symbols(exchange):
    """Hosted sessions answer SYMBOLS themselves (every symbol known from the
    start), and OPS logs in with its token as on a gateway."""
    x = exchange(hosted=True)
    a = x.trader("GWA")
    a.send("SYMBOLS sym=XYZ")
    assert a.line().startswith("SYMBOL sym=XYZ tick=0.5 lot=1 decimals=1 ")
    assert a.line() == "ENDSYMBOLS n=1"
    a.send("NEW cl=s1 sym=ABC side=S qty=5 px=101.00")
    a.until_pong()

    def best_ask():
        a.send("SYMBOLS sym=ABC")
        line = a.line()
        assert a.line() == "ENDSYMBOLS n=1"
        return " ask=101.00 askqty=5 " in line and line
    assert wait_until(best_ask, timeout=10, step=0.1), "market data did not reach SYMBOLS"
    ops = x.trader("OPS", OPS_TOKEN)
    ops.send("HALT sym=ABC")
    assert ops.until_pong() == ["OK"]


@pytest.mark.parametrize("role", ["engine", "gateway", "clearing"])
def test_crash_report_on_a_fatal_signal(exchange, role):
    """A process that dies of a fatal signal leaves a bug report with its
    stack trace on stderr (its log), as gridsync-server and redis-server
    do, and still dies of that signal, so a supervisor sees what happened;
    the other processes keep running."""
    x = exchange(clearing=True)
    p = getattr(x, role)
    status = p.stop(signal.SIGSEGV)
    out = p.stderr()
    if "AddressSanitizer" in out:
        pytest.skip("an ASan build leaves the report to ASan")
    assert status == -signal.SIGSEGV
    prog = f"edumatcher-{role}"
    assert f"=== {prog.upper()} BUG REPORT START ===" in out, out
    assert f"{prog} crashed by signal: 11" in out, out
    trace = out.split("------ STACK TRACE ------\n", 1)[1].split(" BUG REPORT END ===")[0]
    # frames of the program itself (where it was depends on when the
    # signal came: in its loop, or still writing its ready line)
    assert any(f"{prog}(" in f for f in trace.splitlines()), trace
    for other in ("engine", "gateway", "clearing"):
        if other != role:
            assert getattr(x, other).p.poll() is None, other
