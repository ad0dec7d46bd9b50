"""Pub/Sub side by side with Redis 7.0 (raw replies, RESP2 and RESP3) and
with real clients (redis-py's PubSub, redis-cli SUBSCRIBE), and the
output-buffer limit of the pubsub class cutting off a subscriber that
does not read."""
import random
import socket
import subprocess
import shutil

import pytest
import redis

from conftest import free_port  # noqa: F401
from test_vs_redis import Conn, decode, redis_port, run_redis  # noqa: F401 (fixtures)


def raw(args):
    parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    return b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)


class Side:
    """One server: a subscriber and a publisher connection, and a model of
    the subscriber's subscriptions (to know how many replies to read)."""

    def __init__(self, port, proto):
        self.sub, self.pub = Conn(port), Conn(port)
        if proto == 3:
            for c in (self.sub, self.pub):
                assert c.cmd("HELLO", "3").startswith(b"%")
        self.subs = {"": set(), "p": set(), "s": set()}

    def close(self):
        self.sub.close()
        self.pub.close()

    def replies(self, conn, args, n):
        conn.s.sendall(raw(args))
        return [conn.reply() for _ in range(n)]


def expected_replies(model, name, args):
    """How many replies a subscriber command gets (and update the model)."""
    kind = {"subscribe": "", "unsubscribe": "", "psubscribe": "p", "punsubscribe": "p",
            "ssubscribe": "s", "sunsubscribe": "s"}.get(name)
    if kind is None:
        return 1
    if name.endswith("unsubscribe"):
        if not args:
            n = max(1, len(model[kind]))
            model[kind].clear()
            return n
        model[kind].difference_update(args)
        return len(args)
    model[kind].update(args)
    return len(args)


def normalise(name, args, replies):
    """UNSUBSCRIBE without arguments lists the subscriptions in hash order
    on Redis and in subscription order here: compare as a set of
    (channel) and the multiset of counts."""
    if name.endswith("unsubscribe") and not args and len(replies) > 1:
        vals = [decode(r) for r in replies]
        return sorted(v[1] for v in vals), sorted(v[2] for v in vals), replies[0][:1]
    if name == "pubsub" and args and args[0].lower() in ("channels", "shardchannels"):
        return sorted(decode(replies[0]))
    return replies


CHANNELS = ["news", "news.eu", "news.us", "sport", "a", "b"]
PATTERNS = ["news*", "*.eu", "n?ws", "[ab]", "*"]


def random_step(rnd):
    r = rnd.random()
    if r < 0.35:
        return "pub", ["PUBLISH", rnd.choice(CHANNELS), "m%d" % rnd.randint(0, 99)]
    if r < 0.40:
        return "pub", ["SPUBLISH", rnd.choice(CHANNELS), "s%d" % rnd.randint(0, 99)]
    if r < 0.48:
        return "pub", ["PUBSUB", rnd.choice(["CHANNELS", "NUMPAT", "NUMSUB", "SHARDCHANNELS",
                                              "SHARDNUMSUB"])] + rnd.sample(CHANNELS, 2)[
            :rnd.randint(0, 2)]
    name = rnd.choice(["subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe",
                       "sunsubscribe", "ping", "get"])
    pool = PATTERNS if name.startswith("p") and "sub" in name else CHANNELS
    k = rnd.randint(0 if "unsub" in name or name == "ping" else 1, 3)
    args = rnd.sample(pool, min(k, len(pool)))
    if name == "get":
        args = ["k"]
    if name == "ping":
        args = args[:1]
    return "sub", [name] + args


def fixups(step):
    kind, cmd = step
    if cmd[0] == "PUBSUB" and cmd[1] == "NUMPAT":
        return kind, cmd[:2]
    return step


@pytest.mark.parametrize("proto", [2, 3])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_pubsub_same_as_redis(server, redis_port, proto, seed):  # noqa: F811
    rnd = random.Random(seed * 10 + proto)
    g, r = Side(server.port, proto), Side(redis_port, proto)
    try:
        for i in range(300):
            kind, cmd = fixups(random_step(rnd))
            name = cmd[0].lower()
            if kind == "pub":
                a = g.replies(g.pub, cmd, 1)
                b = r.replies(r.pub, cmd, 1)
                assert normalise(name, cmd[1:], a) == normalise(name, cmd[1:], b), \
                    f"step {i} {cmd!r}:\n  gridsync {a!r}\n  redis    {b!r}"
                if cmd[0] in ("PUBLISH", "SPUBLISH"):
                    # One subscriber: the reply is the number of messages
                    # it gets; patterns match in hash order on Redis.
                    n = decode(a[0])
                    ma = sorted(g.sub.reply() for _ in range(n))
                    mb = sorted(r.sub.reply() for _ in range(n))
                    assert ma == mb, f"step {i} {cmd!r} messages:\n  {ma!r}\n  {mb!r}"
                continue
            # In RESP2 subscribed mode only subscription commands and PING
            # run; the model follows what the servers do.
            n = expected_replies(g.subs, name, cmd[1:])
            expected_replies(r.subs, name, cmd[1:])
            a, b = g.replies(g.sub, cmd, n), r.replies(r.sub, cmd, n)
            assert normalise(name, cmd[1:], a) == normalise(name, cmd[1:], b), \
                f"step {i} {cmd!r}:\n  gridsync {a!r}\n  redis    {b!r}"
    finally:
        g.close()
        r.close()


CASES = [
    [["UNSUBSCRIBE"], ["PUNSUBSCRIBE"], ["SUNSUBSCRIBE"]],
    [["SUBSCRIBE", "a", "a", "b"], ["PING"], ["PING", "x"], ["GET", "k"], ["ECHO", "x"],
     ["UNSUBSCRIBE", "b", "zz"], ["UNSUBSCRIBE", "a"], ["GET", "k"]],
    [["PSUBSCRIBE", "x*"], ["SSUBSCRIBE", "s1"], ["SUBSCRIBE", "c"], ["SET", "k", "v"],
     ["SUNSUBSCRIBE", "s1"], ["PUNSUBSCRIBE", "x*"], ["UNSUBSCRIBE", "c"], ["PING"]],
    [["PUBSUB"], ["PUBSUB", "FOO"], ["PUBSUB", "NUMPAT", "x"], ["PUBSUB", "CHANNELS", "a", "b"],
     ["PUBSUB", "NUMSUB"], ["PUBSUB", "HELP"], ["PUBSUB", "help", "x"], ["PUBLISH", "a"],
     ["SUBSCRIBE"], ["SPUBLISH", "a", "b", "c"]],
]


@pytest.mark.parametrize("proto", [2, 3])
@pytest.mark.parametrize("cmds", CASES)
def test_pubsub_cases_same_as_redis(server, redis_port, proto, cmds):  # noqa: F811
    g, r = Conn(server.port), Conn(redis_port)
    try:
        if proto == 3:
            for c in (g, r):
                c.cmd("HELLO", "3")
        model_g = {"": set(), "p": set(), "s": set()}
        for cmd in cmds:
            name = cmd[0].lower()
            blocked = proto == 2 and any(model_g.values()) and name not in (
                "subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe",
                "sunsubscribe", "ping")
            n = 1 if blocked or len(cmd) == 1 and name.endswith("subscribe") and \
                not name.endswith("unsubscribe") else expected_replies(model_g, name, cmd[1:])
            g.s.sendall(raw(cmd))
            r.s.sendall(raw(cmd))
            a = [g.reply() for _ in range(n)]
            b = [r.reply() for _ in range(n)]
            assert a == b, f"{cmd!r}:\n  gridsync {a!r}\n  redis    {b!r}"
    finally:
        g.close()
        r.close()


# ------------------------------------------------------------- real clients


@pytest.mark.parametrize("protocol", [2, 3])
def test_redis_py_pubsub(server, protocol):
    kw = {"protocol": protocol} if protocol == 3 else {}
    try:
        c = server.client(**kw)
    except TypeError:
        pytest.skip("this redis-py has no RESP3")
    p = c.pubsub()
    p.subscribe("orders")
    p.psubscribe("ord*")
    assert p.get_message(timeout=5)["type"] == "subscribe"
    assert p.get_message(timeout=5)["type"] == "psubscribe"
    other = server.client()
    assert other.publish("orders", "o1") == 2
    got = [p.get_message(timeout=5) for _ in range(2)]
    assert {(m["type"], m["data"]) for m in got} == {("message", b"o1"), ("pmessage", b"o1")}
    assert other.pubsub_numsub("orders") == [(b"orders", 1)]
    assert other.pubsub_numpat() == 1
    assert other.pubsub_channels() == [b"orders"]
    p.unsubscribe("orders")
    p.punsubscribe()
    assert p.get_message(timeout=5)["type"] == "unsubscribe"
    assert p.get_message(timeout=5)["type"] == "punsubscribe"
    assert other.publish("orders", "o2") == 0
    p.close()


def test_redis_cli_subscribe(server):
    cli = shutil.which("redis-cli")
    if not cli:
        pytest.skip("redis-cli not installed")
    proc = subprocess.Popen([cli, "-p", str(server.port), "SUBSCRIBE", "alerts"],
                            stdout=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline().strip() for _ in range(3)]
        assert lines == ["subscribe", "alerts", "1"]
        c = server.client()
        assert c.publish("alerts", "disk full") == 1
        lines = [proc.stdout.readline().strip() for _ in range(3)]
        assert lines == ["message", "alerts", "disk full"]
    finally:
        proc.kill()
        proc.wait()


# ----------------------------------------------------------- output limit


def test_subscriber_that_does_not_read_is_cut_off(make_server):
    """client-output-buffer-limit pubsub: a subscriber that stops reading
    is disconnected once its unsent output passes the hard limit, the
    publisher and a reading subscriber go on, INFO counts it."""
    s = make_server("--client-output-buffer-limit", "pubsub 1mb 0 0")
    slow = socket.socket()
    slow.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    slow.connect(("127.0.0.1", s.port))
    slow.sendall(raw(["SUBSCRIBE", "feed"]))
    fast = s.client().pubsub()
    fast.subscribe("feed")
    assert fast.get_message(timeout=5)["type"] == "subscribe"
    pub = s.client()
    msg = b"x" * 65536
    sent, receivers = 0, 2
    # The slow one reads nothing; the kernel buffers fill, then its output
    # grows in the server until the limit. 256 MB bounds the loop.
    while receivers == 2 and sent < 256 << 20:
        receivers = pub.publish("feed", msg)
        sent += len(msg)
        m = fast.get_message(timeout=10)
        while m is not None and m["type"] != "message":
            m = fast.get_message(timeout=10)
        assert m is not None and m["data"] == msg
    assert receivers == 1, f"slow subscriber still there after {sent} bytes"
    assert pub.pubsub_numsub("feed") == [(b"feed", 1)]
    assert pub.info("stats")["client_output_buffer_limit_disconnections"] >= 1
    # The slow client's socket is closed by the server.
    slow.settimeout(10)
    data = b""
    try:
        while True:
            chunk = slow.recv(1 << 20)
            if not chunk:
                break
            data += chunk
    except ConnectionResetError:
        pass
    assert len(data) < sent
    assert pub.publish("feed", "after") == 1
    fast.close()
