"""CURVE on the bus (docs/edumatcher-exchange.md, Security): with keys
configured, only the listed processes reach the engine's PUB and query
sockets and the monitor's health socket; a foreign client, with no key or
an unlisted one, gets nothing, while gateway, clearing and monitor work end
to end. Keys are the real binaries' files; the foreign clients are pyzmq."""
import json
import os
import stat
import time

import zmq
from prometheus_client.parser import text_string_to_metric_families

from conftest import (OPS_TOKEN, SYMBOLS, Trader, binary, free_port, http_get,
                      wait_until)


def keyfile(d, name):
    """A client key file as the binaries make them: the Z85 secret, 0600."""
    pub, sec = zmq.curve_keypair()
    path = os.path.join(d, f"{name}.key")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.write(fd, sec + b"\n")
    os.close(fd)
    return path, pub.decode()


def allow_list(path, keys):
    with open(path, "w") as f:
        f.write("# processes allowed on the bus\n\n")
        for name, k in keys.items():
            f.write(f"{k}  {name}\n")
    return path


def read_pub(path):
    with open(path) as f:
        return f.read().split()[0]


def start_engine(procs, d, journal, pub, query, health, extra=()):
    symbols = os.path.join(d, "symbols.alf")
    with open(symbols, "w") as f:
        f.write(SYMBOLS)
    e = procs.start([binary("edumatcher-engine"), "--pub", pub, "--query", query, "--health",
                     health, "--journal-dir", journal, "--symbols-file", symbols,
                     "--beacon-ms", "100", *extra])
    assert e.ready.startswith("edumatcher-engine"), e.stderr()
    return e


def curve_sub(zctx, ep, server_key=None, own=None):
    s = zctx.socket(zmq.SUB)
    s.setsockopt(zmq.LINGER, 0)
    if server_key:
        pub, sec = own or zmq.curve_keypair()
        s.curve_serverkey = server_key.encode()
        s.curve_publickey, s.curve_secretkey = pub, sec
    s.setsockopt(zmq.SUBSCRIBE, b"")
    s.connect(ep)
    return s


def drain(sock, wait_ms=300):
    out = []
    while sock.poll(wait_ms):
        out.append(sock.recv_multipart())
    return out


def test_only_listed_clients_on_the_bus(procs, zctx, workdir):
    journal = os.path.join(workdir, "journal")
    os.makedirs(journal)
    pub, query = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    health = f"tcp://127.0.0.1:{free_port()}"
    keys = {n: keyfile(workdir, n) for n in ("gateway", "fix", "clearing", "monitor")}
    # The test's own listed subscriber: the control that would have seen
    # what the foreign ones must not.
    obs_pub, obs_sec = zmq.curve_keypair()
    clients = allow_list(os.path.join(workdir, "bus-clients"),
                         {**{n: k[1] for n, k in keys.items()}, "observer": obs_pub.decode()})
    mon_key, mon_pub = keys["monitor"]

    e = start_engine(procs, workdir, journal, pub, query, health,
                     ["--curve-clients", clients, "--monitor-key", mon_pub])
    engine_pub = read_pub(os.path.join(journal, "curve.key.pub"))
    assert stat.S_IMODE(os.stat(os.path.join(journal, "curve.key")).st_mode) == 0o600
    assert "no CURVE keys" not in e.stderr()

    beacon_clients = allow_list(os.path.join(workdir, "beacon-clients"),
                                {"engine": engine_pub, "gateway": keys["gateway"][1],
                                 "fix": keys["fix"][1], "clearing": keys["clearing"][1]})
    mport = free_port()
    m = procs.start([binary("edumatcher-monitor"), "--http-port", str(mport), "--health", health,
                     "--beacon-ms", "100", "--engine-pub", pub, "--curve-key", mon_key,
                     "--engine-key", engine_pub, "--curve-clients", beacon_clients])
    assert m.ready.startswith("edumatcher-monitor"), m.stderr()
    cport = free_port()
    c = procs.start([binary("edumatcher-clearing"), "--engine-pub", pub, "--engine-query", query,
                     "--recover-ms", "200", "--http-port", str(cport), "--health", health,
                     "--beacon-ms", "100", "--curve-key", keys["clearing"][0],
                     "--engine-key", os.path.join(journal, "curve.key.pub"),
                     "--monitor-key", mon_pub])
    assert c.ready.startswith("edumatcher-clearing"), c.stderr()
    tokens = os.path.join(workdir, "tokens")
    with open(tokens, "w") as f:
        f.write(f"OPS {OPS_TOKEN}\n")
    gport = free_port()
    g = procs.start([binary("edumatcher-gateway"), "--port", str(gport), "--engine-orders",
                     f"unix:{journal}/orders.sock", "--engine-pub", pub, "--engine-query", query,
                     "--health", health, "--tokens-file", tokens, "--beacon-ms", "100",
                     "--curve-key", keys["gateway"][0], "--engine-key", engine_pub,
                     "--monitor-key", mon_pub])
    assert g.ready.startswith("edumatcher-gateway"), g.stderr()
    f = procs.start([binary("edumatcher-fix"), "--port", str(free_port()), "--engine-orders",
                     f"unix:{journal}/orders.sock", "--engine-pub", pub, "--health", health,
                     "--tokens-file", tokens, "--store-dir", os.path.join(workdir, "fix"),
                     "--beacon-ms", "100", "--curve-key", keys["fix"][0],
                     "--engine-key", engine_pub, "--monitor-key", mon_pub])
    assert f.ready.startswith("edumatcher-fix"), f.stderr()

    observer = curve_sub(zctx, pub, engine_pub, (obs_pub, obs_sec))
    plain = curve_sub(zctx, pub)
    unlisted = curve_sub(zctx, pub, engine_pub)
    # A foreign beacon publisher with an unlisted key, and one without any.
    fakes = []
    for key in (engine_pub, None):
        p = zctx.socket(zmq.PUB)
        p.setsockopt(zmq.LINGER, 0)
        if key:
            p.curve_serverkey = mon_pub.encode()
            p.curve_publickey, p.curve_secretkey = zmq.curve_keypair()
        p.connect(health)
        fakes.append(p)
    fake_beacon = (b"health v=1 proc=intruder pid=1 seq=1 up_ms=1000 rss=1048576 lat_n=0 "
                   b"lat_p50=0 lat_p99=0 lat_max=0 c.msgs_in=1")

    a, b = Trader(gport, "GW1"), Trader(gport, "GW2")

    def traded():
        a.send("NEW cl=w sym=ABC side=B qty=1 px=100.00")
        b.send("NEW cl=w sym=ABC side=S qty=1 px=100.00")
        a.until_pong(), b.until_pong()
        for p in fakes:
            p.send_multipart([b"health.intruder", fake_beacon])
        while observer.poll(200):
            topic, payload = observer.recv_multipart()
            if topic == b"trade.executed":
                return payload.decode()
        return None
    trade = wait_until(traded, timeout=15, step=0)
    assert trade and "buy=GW1" in trade and "sell=GW2" in trade, e.stderr()
    # the listed observer also gets market data; the foreign ones nothing
    assert wait_until(lambda: any(t.startswith(b"md.") for t, _ in drain(observer, 200)),
                      timeout=10, step=0)
    assert drain(plain) == [] and drain(unlisted) == []

    # A foreign client on the query socket gets no answer.
    for key in (None, engine_pub):
        r = zctx.socket(zmq.REQ)
        r.setsockopt(zmq.LINGER, 0)
        if key:
            r.curve_serverkey = key.encode()
            r.curve_publickey, r.curve_secretkey = zmq.curve_keypair()
        r.connect(query)
        r.send_multipart([b"trades", b"1"])
        assert r.poll(1500) == 0
        r.close()
    # ... and a listed one does (the same socket, so the refusal is the key's).
    r = zctx.socket(zmq.REQ)
    r.setsockopt(zmq.LINGER, 0)
    r.curve_serverkey = engine_pub.encode()
    r.curve_publickey, r.curve_secretkey = obs_pub, obs_sec
    r.connect(query)
    r.send_multipart([b"trades", b"1"])
    assert r.poll(10000), "a listed client got no answer"
    assert b"tid=1" in r.recv_multipart()[1]
    r.close()

    # Clearing saw the trade (SUB and query over CURVE).
    def cleared():
        d = json.loads(http_get(cport, "/positions?sym=ABC")[2])
        acc = {x["gw"]: x for x in d["accounts"]}
        # every round of the join loop above traded once: at least one
        return acc.get("GW1", {}).get("position", 0) >= 1 and \
            acc["GW1"]["position"] + acc.get("GW2", {}).get("position", 0) == 0
    assert wait_until(cleared, timeout=10, step=0.1), c.stderr()
    # A restarted clearing has only the query socket to learn the past
    # from: its recovery works over CURVE too.
    c.stop()
    c = procs.start(c.args)
    assert c.ready.startswith("edumatcher-clearing"), c.stderr()
    assert wait_until(cleared, timeout=10, step=0.1), c.stderr()
    # the gateway's SYMBOLS table came over the query socket at its start
    assert "no answer from" not in g.stderr()

    # The monitor takes the listed processes' beacons, not the intruder's,
    # and its market view got the trade over CURVE.
    def seen():
        d = json.loads(http_get(mport, "/metrics.json")[2])
        names = {p["proc"] for p in d["processes"]}
        return names if {"engine", "gateway", "fix", "clearing"} <= names else None
    names = wait_until(seen, timeout=10, step=0.1)
    assert names, m.stderr()
    for p in fakes:
        p.send_multipart([b"health.intruder", fake_beacon])
    assert "intruder" not in {p["proc"] for p in
                              json.loads(http_get(mport, "/metrics.json")[2])["processes"]}

    def market():
        body = http_get(mport, "/market.json")[2].decode()
        return "ABC" in body and "100" in body
    assert wait_until(market, timeout=10, step=0.1), m.stderr()

    # The ZAP handlers' answers are counters on the monitor's /metrics
    # (Prometheus: _total, with HELP and TYPE): the engine let the listed
    # clients in and turned the keyless and unlisted subscribers away; the
    # monitor turned the intruder's beacons away.
    def zap(proc):
        text = http_get(mport, "/metrics")[2].decode()
        got = {}
        for fam in text_string_to_metric_families(text):
            for smp in fam.samples:
                if smp.labels.get("proc") == proc and smp.name.startswith("edumatcher_zap_"):
                    got[smp.name] = smp.value
        return got if got.get("edumatcher_zap_denied_total", 0) >= 1 else None
    engine_zap = wait_until(lambda: zap("engine"), timeout=10, step=0.1)
    assert engine_zap and engine_zap["edumatcher_zap_allowed_total"] >= 3, engine_zap
    monitor_zap = wait_until(lambda: zap("monitor"), timeout=10, step=0.1)
    assert monitor_zap and monitor_zap["edumatcher_zap_allowed_total"] >= 4, monitor_zap
    text = http_get(mport, "/metrics")[2].decode()
    assert "# TYPE edumatcher_zap_allowed_total counter" in text, text
    assert "# HELP edumatcher_zap_denied_total " in text, text
    for s in (observer, plain, unlisted, *fakes):
        s.close()


def test_engine_key_kept_across_restart(procs, workdir):
    journal = os.path.join(workdir, "journal")
    clients = allow_list(os.path.join(workdir, "clients"), {})
    eps = [f"tcp://127.0.0.1:{free_port()}" for _ in range(2)]
    e = start_engine(procs, workdir, journal, eps[0], eps[1], "", ["--curve-clients", clients])
    first = read_pub(os.path.join(journal, "curve.key.pub"))
    with open(os.path.join(journal, "curve.key")) as f:
        secret = f.read()
    assert e.stop() == 0
    os.unlink(os.path.join(journal, "curve.key.pub"))  # derived: remade from the secret
    e = start_engine(procs, workdir, journal, eps[0], eps[1], "", ["--curve-clients", clients])
    assert read_pub(os.path.join(journal, "curve.key.pub")) == first
    with open(os.path.join(journal, "curve.key")) as f:
        assert f.read() == secret
    assert first in e.stderr()  # logged at start, for the operator
    e.stop()


def test_open_bus_warns_and_bad_options_exit_2(procs, workdir):
    journal = os.path.join(workdir, "journal")
    pub, query = f"tcp://127.0.0.1:{free_port()}", f"tcp://127.0.0.1:{free_port()}"
    e = start_engine(procs, workdir, journal, pub, query, "")
    err = e.stderr()
    assert f"--pub {pub} has no CURVE keys" in err and f"--query {query} has no CURVE keys" in err
    e.stop()

    bad = os.path.join(workdir, "bad-clients")
    with open(bad, "w") as f:
        f.write("# ok\n" + zmq.curve_keypair()[0].decode() + "\nnot-a-key\n")
    r = procs.start([binary("edumatcher-engine"), "--pub", pub, "--query", query, "--health", "",
                     "--journal-dir", journal, "--curve-clients", bad])
    assert r.p.wait(timeout=10) == 2
    assert "line 3" in r.stderr()

    # a client with the engine's key but no key of its own
    r = procs.start([binary("edumatcher-clearing"), "--engine-pub", pub, "--health", "",
                     "--engine-key", zmq.curve_keypair()[0].decode()])
    assert r.p.wait(timeout=10) == 2
    assert "--curve-key" in r.stderr()

    # --curve-key alone makes the pair (for the engine's allow-list) and
    # connects without CURVE
    made = os.path.join(workdir, "made", "clearing.key")
    os.makedirs(os.path.dirname(made))
    r = procs.start([binary("edumatcher-clearing"), "--engine-pub", pub, "--health", "",
                     "--engine-query", "", "--http-port", str(free_port()), "--curve-key", made])
    assert r.ready.startswith("edumatcher-clearing"), r.stderr()
    assert stat.S_IMODE(os.stat(made).st_mode) == 0o600
    assert len(read_pub(made + ".pub")) == 40
    r.stop()

    # a secret key file others can read is refused
    key, _ = keyfile(workdir, "loose")
    os.chmod(key, 0o644)
    r = procs.start([binary("edumatcher-clearing"), "--engine-pub", pub, "--health", "",
                     "--engine-key", zmq.curve_keypair()[0].decode(), "--curve-key", key])
    assert r.p.wait(timeout=10) != 0
    assert "readable by others" in r.stderr()


def test_monitor_connect_endpoints_are_curve_clients(procs, zctx, workdir):
    """The monitor's --connect endpoints are covered by CURVE as its other
    subscriptions are: with --connect-key it is a CURVE client of those
    publishers (with its --curve-key) and takes their beacons; a monitor
    without the key cannot complete the handshake and sees none."""
    srv_pub, srv_sec = zmq.curve_keypair()
    pub = zctx.socket(zmq.PUB)
    pub.setsockopt(zmq.LINGER, 0)
    pub.curve_server = True
    pub.curve_publickey, pub.curve_secretkey = srv_pub, srv_sec
    port = free_port()
    pub.bind(f"tcp://127.0.0.1:{port}")
    mon_key, _ = keyfile(workdir, "monitor")

    def monitor(*extra):
        hport = free_port()
        m = procs.start([binary("edumatcher-monitor"), "--http-port", str(hport),
                         "--health", f"tcp://127.0.0.1:{free_port()}", "--beacon-ms", "100",
                         "--connect", f"tcp://127.0.0.1:{port}", *extra])
        assert "edumatcher-monitor" in m.ready, m.stderr()
        return m, hport

    with_key, kport = monitor("--curve-key", mon_key, "--connect-key", srv_pub.decode())
    without, nport = monitor()
    line = (b"health v=1 proc=curvepub pid=9 seq=1 up_ms=100 rss=1 lat_n=0 lat_p50=0 "
            b"lat_p99=0 lat_max=0")

    def procs_of(hport):
        return {p["proc"] for p in json.loads(http_get(hport, "/metrics.json")[2])["processes"]}

    def seen():
        pub.send_multipart([b"health.curvepub", line])
        return "curvepub" in procs_of(kport)
    assert wait_until(seen, timeout=20, step=0.1), with_key.stderr()
    for _ in range(10):  # as many beacons again: none reaches the keyless one
        pub.send_multipart([b"health.curvepub", line])
    assert "curvepub" not in procs_of(nport)


def test_a_key_removed_from_the_allow_list_loses_its_open_connection(procs, zctx, workdir):
    """Removing a subscriber's key from --curve-clients closes its
    connection already up (the engine rebinds --pub, so every client passes
    ZAP again): the removed subscriber stops receiving trades, the one still
    listed reconnects by itself and keeps receiving them."""
    keep_pub, keep_sec = zmq.curve_keypair()
    gone_pub, gone_sec = zmq.curve_keypair()
    clients = os.path.join(workdir, "curve-clients")
    allow_list(clients, {"keep": keep_pub.decode(), "gone": gone_pub.decode()})
    journal = os.path.join(workdir, "journal")
    pub = f"tcp://127.0.0.1:{free_port()}"
    query = f"tcp://127.0.0.1:{free_port()}"
    alf = free_port()
    e = start_engine(procs, workdir, journal, pub, query, "",
                     ["--curve-clients", clients, "--alf-port", str(alf)])
    engine_pub = read_pub(os.path.join(journal, "curve.key.pub"))
    keep = curve_sub(zctx, pub, engine_pub, (keep_pub, keep_sec))
    gone = curve_sub(zctx, pub, engine_pub, (gone_pub, gone_sec))
    b, s = Trader(alf, "GW1"), Trader(alf, "GW2")
    n = [0]

    def trade():
        n[0] += 1
        b.send(f"NEW cl=b{n[0]} sym=ABC side=B qty=1 px=100.00")
        s.send(f"NEW cl=s{n[0]} sym=ABC side=S qty=1 px=100.00")
        assert b.line().startswith("ACK ") and s.line().startswith("ACK ")
        assert s.line().startswith("FILL ") and b.line().startswith("FILL ")

    def got_trade(sock, wait_ms):
        deadline = time.time() + wait_ms / 1000
        while time.time() < deadline:
            if sock.poll(50) and sock.recv_multipart()[0] == b"trade.executed":
                return True
        return False

    def both_receive():
        trade()  # a PUB drops what no subscription asked for yet: tried again
        return got_trade(keep, 300) and got_trade(gone, 300)
    assert wait_until(both_receive, timeout=20, step=0.05), e.stderr()

    # remove "gone" by rename, as the docs say to change the list
    allow_list(clients + ".new", {"keep": keep_pub.decode()})
    os.rename(clients + ".new", clients)
    assert wait_until(lambda: "a key left" in e.stderr() and "bound again" in e.stderr(), 20), \
        e.stderr()

    def keep_receives():
        trade()  # the kept subscriber reconnects by itself
        return got_trade(keep, 300)
    assert wait_until(keep_receives, timeout=20, step=0.05), e.stderr()
    while gone.poll(100):  # what it had before the rebind
        gone.recv_multipart()
    trade()
    assert got_trade(keep, 5000)
    assert not got_trade(gone, 500)
    for sock in (keep, gone):
        sock.close()


def test_a_key_removed_from_the_monitors_list_stops_its_beacons(procs, zctx, workdir):
    """The monitor's --curve-clients revokes as the engine's does: removing
    a beacon sender's key closes its connection already up (the monitor
    rebinds --health), so its beacons stop being taken and it goes stale,
    while the sender still listed reconnects by itself and keeps being
    counted."""
    senders = {n: zmq.curve_keypair() for n in ("keep", "gone")}
    clients = os.path.join(workdir, "beacon-clients")
    allow_list(clients, {n: k[0].decode() for n, k in senders.items()})
    mon_key, _ = keyfile(workdir, "monitor")
    health = f"tcp://127.0.0.1:{free_port()}"
    hport = free_port()
    m = procs.start([binary("edumatcher-monitor"), "--http-port", str(hport), "--health", health,
                     "--beacon-ms", "100", "--curve-key", mon_key, "--curve-clients", clients])
    assert m.ready.startswith("edumatcher-monitor"), m.stderr()
    mon_pub = read_pub(mon_key + ".pub")
    socks = {}
    for name, (pub, sec) in senders.items():
        p = zctx.socket(zmq.PUB)
        p.setsockopt(zmq.LINGER, 0)
        p.curve_serverkey = mon_pub.encode()
        p.curve_publickey, p.curve_secretkey = pub, sec
        p.connect(health)
        socks[name] = p
    n = [0]

    def send_both():
        # up_ms numbers every round, so the monitor shows which it took last
        n[0] += 1
        for name, p in socks.items():
            p.send_multipart([f"health.{name}".encode(),
                              f"health v=1 proc={name} pid=9 seq={n[0]} up_ms={n[0] * 100} "
                              f"rss=1 lat_n=0 lat_p50=0 lat_p99=0 lat_max=0".encode()])

    def shown():
        d = json.loads(http_get(hport, "/metrics.json")[2])
        return {p["proc"]: p for p in d["processes"]}

    def up_ms_of(name, at_least):
        def check():
            send_both()
            p = shown().get(name)
            return p is not None and p["up_ms"] >= at_least
        return check
    assert wait_until(up_ms_of("keep", 100), timeout=20, step=0.05), m.stderr()
    assert wait_until(up_ms_of("gone", 100), timeout=20, step=0.05), m.stderr()

    # remove "gone" by rename, as the docs say to change the list
    allow_list(clients + ".new", {"keep": senders["keep"][0].decode()})
    os.rename(clients + ".new", clients)
    assert wait_until(lambda: "a key left" in m.stderr() and "bound again" in m.stderr(), 20), \
        m.stderr()
    # the kept sender reconnects by itself; from then on both send each round
    assert wait_until(up_ms_of("keep", (n[0] + 1) * 100), timeout=20, step=0.05), m.stderr()
    cut = n[0]
    assert wait_until(up_ms_of("keep", (cut + 20) * 100), timeout=20, step=0.05), m.stderr()
    gone = shown()["gone"]
    assert gone["up_ms"] <= cut * 100, gone
    # and having stopped, it is shown stale while the kept one is not
    assert wait_until(lambda: shown()["gone"]["stale"], timeout=20, step=0.1), shown()
    send_both()
    assert not shown()["keep"]["stale"]
    for p in socks.values():
        p.close()
