"""The order link is a bus only gateways can write to (docs/edumatcher-exchange.md,
"the order link"): a Unix-domain socket in the engine's state directory,
mode 0600, peer uid checked; order acks never go on the PUB. A foreign
client cannot place, cancel or see orders; gateways, clearing and
market-data subscribers still work."""
import os
import signal
import socket
import stat
import struct
import subprocess
import sys
import time

import pytest
import zmq

from conftest import LinkClient, Trader, http_get, wait_until

NOBODY = 65534


def as_nobody(code):
    """Run python code as another user (uid/gid 65534); its stdout."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30,
                       user=NOBODY, group=NOBODY, extra_groups=[], cwd="/")
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_socket_file_is_the_owners_only(exchange):
    x = exchange()
    st = os.stat(x.orders[5:])
    assert stat.S_ISSOCK(st.st_mode)
    assert st.st_mode & 0o777 == 0o600
    assert st.st_uid == os.getuid()
    t = x.trader("GW1")  # the gateway, same user, gets through
    t.send("NEW cl=a1 sym=ABC side=B qty=10 px=99.00")
    assert t.line().startswith("ACK cl=a1 ")


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to run a client as another user")
def test_foreign_user_cannot_connect_or_be_heard(exchange):
    x = exchange()
    path = x.orders[5:]
    # the directories let anyone through: only the file's mode is tested
    d = os.path.dirname(path)
    while d not in ("/", "/tmp"):
        os.chmod(d, os.stat(d).st_mode | 0o011)
        d = os.path.dirname(d)
    # the file's mode keeps another user out before the engine is asked
    out = as_nobody(f"""
import socket
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    s.connect({path!r}); print("connected")
except PermissionError:
    print("refused")
""")
    assert out == "refused"
    # and with the file opened to everyone, the engine still refuses the
    # peer by its uid (SO_PEERCRED): a LOGIN and an order go unanswered
    os.chmod(path, 0o666)
    out = as_nobody(f"""
import socket, struct
def rec(gw, p): return struct.pack("<IB", 1 + len(gw) + len(p), len(gw)) + gw + p
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect({path!r})
s.settimeout(20)
try:
    s.sendall(rec(b"", b"") + rec(b"EVIL", {login_frame()!r}))
    data = s.recv(65536)
    print("closed" if not data else "answered")
except (ConnectionResetError, BrokenPipeError):
    print("closed")
""")
    assert out == "closed"
    assert wait_until(lambda: "refused a connection from uid 65534" in x.engine.stderr(), 20)
    # the gateway is unaffected
    t = x.trader("GW1")
    t.send("NEW cl=a1 sym=ABC side=B qty=10 px=99.00")
    assert t.line().startswith("ACK cl=a1 ")


def login_frame(gw=b"EVIL"):
    """A LOGIN frame (msg.h): u16 length, u8 kind, u32 present, gw as u8 length + bytes."""
    root = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
    with open(os.path.join(root, "edumatcher", "engine", "msg.def")) as f:
        kinds = [l.split("(", 1)[1].split(",", 1)[0] for l in f if l.startswith("EM_MSG(")]
    with open(os.path.join(root, "edumatcher", "engine", "msg.def")) as f:
        fields = [l.split("(", 1)[1].split(",", 1)[0] for l in f if l.startswith("EM_FIELD(")]
    body = struct.pack("<BI", kinds.index("LOGIN") + 1, 1 << fields.index("gw"))
    body += bytes([len(gw)]) + gw
    return struct.pack("<H", 2 + len(body)) + body


def test_uid_not_allowed_is_refused(exchange):
    """--orders-uid: a peer whose uid is not listed is closed without an
    answer, even with the file's permission to connect."""
    x = exchange(engine_args=["--orders-uid", str(os.getuid() + 4242)])
    link = LinkClient(x.orders, hello=False)
    try:  # the engine may close before these are written: refused either way
        link.send(b"", b"")
        link.send(b"EVIL", login_frame())
    except (BrokenPipeError, ConnectionResetError):
        pass
    assert link.closed()
    assert wait_until(lambda: "refused a connection from uid %d" % os.getuid() in x.engine.stderr(),
                      20)


def test_a_gateway_gone_with_replies_due_leaves_the_engine_running(exchange):
    """A gateway that stops reading (or dies) while the engine answers it:
    the engine's write fails with EPIPE and closes that link; it does not
    die of SIGPIPE (it once did, when a FIX gateway was restarted right
    after its session's DISCONNECT). SHUT_RD before anything is sent makes
    every answer a write to a peer that reads no more."""
    x = exchange()
    link = LinkClient(x.orders, hello=False)
    link.sock.shutdown(socket.SHUT_RD)
    link.send(b"", b"")
    link.send(b"GONE", login_frame(b"GONE"))
    # the engine answers LOGGEDIN, its write fails and it closes the link
    # (or, before the fix, dies): either way our next writes fail

    def link_closed():
        try:
            link.send(b"GONE", login_frame(b"GONE"))
            return False
        except (BrokenPipeError, ConnectionResetError):
            return True
    assert wait_until(link_closed, 20, 0.05)
    # and it goes on: the other gateway's trader is served
    t = x.trader("GW1")
    t.send("NEW cl=a1 sym=ABC side=B qty=10 px=99.00")
    assert t.line().startswith("ACK cl=a1 ")
    assert x.engine.p.poll() is None, x.engine.stderr()
    link.close()


def test_a_gateway_killed_takes_its_traders_orders_with_it(exchange):
    """kill -9 of a gateway: its traders' connections are gone with it, so
    the engine cancels their orders as for their own DISCONNECT (docs/alf.md
    C.3) when the gateway's link ends. Another gateway's trader is
    unaffected."""
    x = exchange()
    port2 = x.add_gateway("gateway2")
    a = x.trader("GW1")
    b = Trader(port2, "GW2")
    a.send("NEW cl=a1 sym=ABC side=B qty=5 px=100.00 tif=GTC")
    assert a.until_pong() == ["ACK cl=a1 oid=1"]
    b.send("NEW cl=b1 sym=ABC side=B qty=5 px=99.00 tif=GTC")
    assert b.until_pong() == ["ACK cl=b1 oid=2"]
    x.gateway.stop(signal.SIGKILL)
    assert wait_until(lambda: "the link of GW1 ended" in x.engine.stderr(), 20), \
        x.engine.stderr()
    # GW1's bid is gone: a sell at 99 trades with GW2's bid at 99, not 100
    b.send("NEW cl=b2 sym=ABC side=S qty=5 px=99.00 tif=IOC")
    got = b.until_pong()
    assert got[0].startswith("ACK cl=b2 "), got
    assert any(l.startswith("FILL cl=b2 ") and " px=99.00 " in l for l in got), got
    assert not any(" px=100.00 " in l for l in got), got


def test_foreign_subscriber_sees_market_data_but_no_order(exchange, zctx):
    """A foreign ZeroMQ subscriber to everything on the engine's PUB gets
    trades and market data, never an order ack; a PUSH to the engine finds
    nothing to talk to (there is no inbound ZeroMQ socket); clearing, a
    second gateway and the traders keep working."""
    x = exchange(clearing=True)
    sub = zctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(x.pub)
    time.sleep(0.3)  # a PUB drops what no subscription asked for yet: not asserted on
    b, s = x.trader("GW1"), x.trader("GW2")
    b.send("NEW cl=b1 sym=ABC side=B qty=10 px=100.00")
    assert b.line().startswith("ACK cl=b1 ")
    s.send("NEW cl=s1 sym=ABC side=S qty=10 px=100.00")
    assert s.line().startswith("ACK cl=s1 ")
    assert s.line().startswith("FILL cl=s1 ")
    assert b.line().startswith("FILL cl=b1 ")
    # a cancel through a second gateway process works as well
    port = x.add_gateway("gateway2")
    c = Trader(port, "GW3")
    c.send("NEW cl=c1 sym=ABC side=B qty=5 px=90.00")
    assert c.line().startswith("ACK cl=c1 ")
    c.send("CANCEL cl=c1")
    assert c.line().startswith("CANCELED cl=c1 ")
    topics = []
    deadline = time.time() + 20
    while time.time() < deadline and not any(t.startswith(b"md.") for t in topics):
        if sub.poll(500):
            topics.append(sub.recv_multipart()[0])
    assert b"trade.executed" in topics
    assert any(t.startswith(b"md.ABC") for t in topics)
    while sub.poll(500):
        topics.append(sub.recv_multipart()[0])
    assert not [t for t in topics if t.startswith(b"order.")], topics
    # clearing still sees the trade
    assert wait_until(lambda: b"GW1" in http_get(x.clearing_port, "/positions")[2], 20)
