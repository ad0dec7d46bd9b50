"""No event lost (docs/alf.md I.6): the FILLs of an aggressive order, its
ACK and the passive FILL of a resting order, published while the
gateway's order link is cut (the bytes in flight thrown away), or just
before an engine kill -9, reach the trader exactly once after the link
comes back: the gateway asks for the events after the last it delivered
(RESYNC) and the engine sends them again from its window, which a restart
rebuilds from the journal and the snapshot. What the trader got is
compared with the engine's trade log. When more events than the engine
keeps were missed, the session ends (its orders canceled, ALF section 8)."""
import os
import select
import signal
import socket
import threading
import time

from conftest import Trader, binary, free_port, wait_until
from test_answers import all_trades, fields


class LinkProxy:
    """A byte-for-byte proxy of the engine's order link (a unix socket),
    one upstream connection per gateway connection. hold() keeps what the
    engine sends instead of forwarding it; cut() closes both sides and
    throws the held bytes away: what was in flight when a link dropped."""

    def __init__(self, path, upstream):
        self.path, self.upstream = path, upstream
        self.lsock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.lsock.bind(path)
        self.lsock.listen(4)
        self.lock = threading.Lock()
        self.pairs = []  # [gateway side, engine side]
        self.holding = False
        self.held = 0  # bytes held (and thrown away at the cut)
        self.connections = 0
        self.stopped = False
        self.th = threading.Thread(target=self.run, daemon=True)
        self.th.start()

    def hold(self):
        with self.lock:
            self.holding = True
            self.held = 0

    def cut(self):
        with self.lock:
            self.holding = False
            for d, u in self.pairs:
                d.close()
                u.close()
            self.pairs = []

    def close(self):
        self.stopped = True
        self.cut()
        self.lsock.close()
        self.th.join(timeout=5)

    def _drop(self, pair):
        self.holding = False  # what was held is lost with the link
        if pair in self.pairs:
            self.pairs.remove(pair)
            pair[0].close()
            pair[1].close()

    def run(self):
        while not self.stopped:
            with self.lock:
                socks = [self.lsock] + [s for p in self.pairs for s in p]
            try:
                r, _, _ = select.select(socks, [], [], 0.05)
            except (OSError, ValueError):
                continue  # a socket closed by cut()
            for s in r:
                with self.lock:
                    if s is self.lsock:
                        try:
                            d, _ = self.lsock.accept()
                        except OSError:
                            continue
                        u = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                        try:
                            u.connect(self.upstream)
                        except OSError:
                            d.close()  # no engine yet: the gateway retries
                            u.close()
                            continue
                        self.pairs.append([d, u])
                        self.connections += 1
                        continue
                    pair = next((p for p in self.pairs if s in p), None)
                    if pair is None:
                        continue
                    try:
                        data = s.recv(65536)
                    except OSError:
                        data = b""
                    if not data:
                        self._drop(pair)  # either side gone: the link is down
                        continue
                    if s is pair[1] and self.holding:
                        self.held += len(data)
                        continue
                    try:
                        (pair[1] if s is pair[0] else pair[0]).sendall(data)
                    except OSError:
                        self._drop(pair)


def collect(t, until, timeout=30):
    """The trader's lines up to and including the first one for which
    until(line) holds."""
    out = []
    while True:
        l = t.line(timeout)
        out.append(l)
        if until(l):
            return out


def restart_engine(x):
    """Start the engine again. A snapshot child of the killed one may still
    hold its ports for a moment (it inherited them): try again then."""
    for _ in range(20):
        try:
            return x.start_engine()
        except AssertionError as e:
            if "busy" not in str(e):
                raise
            time.sleep(0.25)
    return x.start_engine()


def start_proxied_gateway(x, procs, workdir):
    proxy = LinkProxy(os.path.join(workdir, "proxy.sock"), x.orders[len("unix:"):])
    port = free_port()
    g = procs.start([binary("edumatcher-gateway"), "--port", str(port),
                     "--engine-orders", "unix:" + proxy.path, "--engine-pub", x.pub,
                     "--health", x.health, "--name", "gw-proxied", "--resend-ms", "300"])
    assert g.ready.startswith("edumatcher-gateway"), g.stderr()
    proxy.gateway = g
    return proxy, port


def test_fills_in_flight_reach_the_trader_once(exchange, procs, workdir, zctx):
    x = exchange(engine_args=["--snapshot-records", "5"])
    proxy, port = start_proxied_gateway(x, procs, workdir)
    try:
        a = Trader(port, "A1")  # through the proxy
        b = x.trader("B1")  # on the engine's own link
        got = []  # everything A1 was told, in order

        # ---- 1: the link is cut with A1's events in flight ----
        a.send("NEW cl=a1 sym=ABC side=B qty=5 px=99.90")
        got += collect(a, lambda l: l.startswith("ACK cl=a1"))
        b.send("NEW cl=b1 sym=ABC side=S qty=3 px=100.01",
               "NEW cl=b2 sym=ABC side=S qty=3 px=100.02")
        assert len([l for l in b.until_pong() if l.startswith("ACK")]) == 2
        proxy.hold()
        # aggressive: takes b1 and b2 (an ACK and two FILLs for A1)
        a.send("NEW cl=a2 sym=ABC side=B qty=6 px=100.02")
        assert wait_until(lambda: proxy.held > 0, timeout=30)
        fills = collect(b, lambda l: l.startswith("FILL cl=b2"))
        assert [l.split()[1] for l in fills if l.startswith("FILL")] == ["cl=b1", "cl=b2"]
        # passive: b3 takes 2 of the resting a1
        b.send("NEW cl=b3 sym=ABC side=S qty=2 px=99.90")
        collect(b, lambda l: l.startswith("FILL cl=b3"))
        assert a.expect_nothing(0.3)  # all of it held
        conns = proxy.connections
        proxy.cut()
        assert wait_until(lambda: proxy.connections > conns, timeout=30)
        got += collect(a, lambda l: l.startswith("FILL cl=a1"))
        got += a.until_pong(timeout=30)

        # ---- 2: kill -9 with A1's events published into the void ----
        a.send("NEW cl=a4 sym=ABC side=B qty=3 px=99.95")  # above a1's rest
        got += collect(a, lambda l: l.startswith("ACK cl=a4"))
        b.send("NEW cl=b4 sym=ABC side=B qty=2 px=100.05")
        collect(b, lambda l: l.startswith("ACK cl=b4"))
        proxy.hold()
        a.send("NEW cl=a5 sym=ABC side=S qty=2 px=100.00")  # takes b4
        collect(b, lambda l: l.startswith("FILL cl=b4"))
        b.send("NEW cl=b5 sym=ABC side=S qty=3 px=99.95")  # takes a4
        collect(b, lambda l: l.startswith("FILL cl=b5"))
        assert a.expect_nothing(0.3)
        conns = proxy.connections
        x.engine.stop(signal.SIGKILL)
        x.engine = restart_engine(x)
        assert wait_until(lambda: proxy.connections > conns, timeout=30)
        got += collect(a, lambda l: l.startswith("FILL cl=a4"))
        got += a.until_pong(timeout=30)
        assert a.expect_nothing(0.5)

        acks = [l for l in got if l.startswith("ACK")]
        assert [fields(l)["cl"] for l in acks] == ["a1", "a2", "a4", "a5"], got
        filled = [fields(l) for l in got if l.startswith("FILL")]
        assert [(f["cl"], f["qty"]) for f in filled] == [
            ("a2", "3"), ("a2", "3"), ("a1", "2"), ("a5", "2"), ("a4", "3")], got
        assert not [l for l in got if not l.startswith(("ACK", "FILL"))], got
        # exactly the engine's trades of A1's orders, each once
        oids = {fields(l)["oid"] for l in acks}
        trades = [fields(t) for t in all_trades(zctx, x.query)]
        mine = sorted(t["tid"] for t in trades if t["buy_oid"] in oids or t["sell_oid"] in oids)
        assert sorted(f["tid"] for f in filled) == mine
        a.close()
        b.close()
    finally:
        proxy.close()


def test_more_missed_than_the_engine_keeps_ends_the_session(exchange, procs, workdir):
    x = exchange()
    proxy, port = start_proxied_gateway(x, procs, workdir)
    try:
        a = Trader(port, "A2")
        b = x.trader("B2")
        a.send("NEW cl=r1 sym=ABC side=B qty=5 px=99.50")
        collect(a, lambda l: l.startswith("ACK cl=r1"))
        proxy.hold()
        # more events than the window (1024) while nothing reaches A2
        n = 1100
        a.send(*["PING"] * n)
        assert wait_until(lambda: proxy.held >= n * 23, timeout=60)  # PONG seq= eseq=
        conns = proxy.connections
        proxy.cut()
        assert wait_until(lambda: proxy.connections > conns, timeout=30)
        # what the engine still had is delivered, then the connection ends
        pongs = 0
        try:
            while True:
                l = a.line(timeout=30)
                assert l == "PONG", l
                pongs += 1
        except EOFError:
            pass
        assert 1024 <= pongs <= n, pongs
        # ended as on a disconnect: r1 was canceled (a new session of A2 on
        # that gateway is logged in after its DISCONNECT), so b's sell rests
        a = Trader(port, "A2")
        b.send("NEW cl=s1 sym=ABC side=S qty=5 px=99.50")
        lines = b.until_pong()
        assert [l.split()[0] for l in lines] == ["ACK"], lines
        a.close()
        b.close()
    finally:
        proxy.close()
