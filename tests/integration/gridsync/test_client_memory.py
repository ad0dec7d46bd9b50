"""maxmemory-clients (Redis 7): the buffers of all clients together stay
within a budget; when they pass it, the biggest clients are disconnected
first. Reproduces, at a small scale, many clients pipelining GETs of a
large value without reading the replies: memory stays bounded, every
offender is cut off, a client that reads is served throughout. Asserts on
counts and bytes only."""
import socket

import pytest

from test_vs_redis import Conn, compare, pair, redis_port  # noqa: F401 (fixtures)

VALUE = b"v" * 10240
BUDGET = 8 << 20
OFFENDERS = 20
GETS = 2000  # 20 MB of replies each: under its own 32 MB limit, over the budget


def info(c, section):
    return c.info(section)


def test_many_pipelining_clients_stay_within_the_budget(make_server):
    s = make_server("--maxmemory-clients", str(BUDGET),
                    "--client-output-buffer-limit", "normal 32mb 0 0")
    good = s.client()
    assert good.set("big", VALUE)
    request = b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * GETS
    offenders = []
    for _ in range(OFFENDERS):
        o = socket.socket()
        o.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        o.connect(("127.0.0.1", s.port))
        offenders.append(o)
    peak = 0
    for i, o in enumerate(offenders):
        o.sendall(request)  # and never read
        # The reading client is served between offenders, every time.
        assert good.get("big") == VALUE
        used = int(info(good, "memory")["mem_clients_normal"])
        peak = max(peak, used)
    # Every offender's replies alone exceed the budget, so each must go.
    evicted = 0
    for _ in range(10000):
        assert good.get("big") == VALUE
        st = info(good, "stats")
        used = int(info(good, "memory")["mem_clients_normal"])
        peak = max(peak, used)
        evicted = int(st["evicted_clients"])
        if evicted == OFFENDERS:
            break
    assert evicted == OFFENDERS
    # One flush step (64 KB of replies, then the buffer's doubling) over.
    assert peak <= BUDGET * 2 + (1 << 20), f"clients held {peak} bytes, budget {BUDGET}"
    for o in offenders:
        o.settimeout(10)
        got = 0
        try:
            while True:
                chunk = o.recv(1 << 20)
                if not chunk:
                    break
                got += len(chunk)
        except (ConnectionResetError, socket.timeout):
            pass
        assert got < GETS * len(VALUE), "an offender got all its replies"
        o.close()
    # Memory is given back once they are gone, and the reader is still here.
    assert int(info(good, "memory")["mem_clients_normal"]) < 1 << 20
    assert int(info(good, "clients")["connected_clients"]) == 1
    assert good.get("big") == VALUE


def test_no_evict_client_is_spared(make_server):
    s = make_server("--maxmemory-clients", "2mb", "--client-output-buffer-limit",
                    "normal 32mb 0 0")
    good = s.client()
    good.set("big", VALUE)
    spared = socket.socket()
    spared.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    spared.connect(("127.0.0.1", s.port))
    spared.sendall(b"*3\r\n$6\r\nCLIENT\r\n$8\r\nNO-EVICT\r\n$2\r\non\r\n")
    assert spared.recv(5) == b"+OK\r\n"
    # 1 MB, never read: it still counts (as in Redis), but is never chosen.
    spared.sendall(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 100)
    victim = socket.socket()
    victim.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    victim.connect(("127.0.0.1", s.port))
    victim.sendall(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n" * 1000)
    for _ in range(10000):
        if int(info(good, "stats")["evicted_clients"]) >= 1:
            break
        assert good.get("big") == VALUE
    assert int(info(good, "stats")["evicted_clients"]) >= 1
    assert int(info(good, "clients")["connected_clients"]) == 2  # good + spared
    assert int(info(good, "stats")["evicted_clients"]) == 1
    spared.close()
    victim.close()


@pytest.mark.parametrize("value", ["0", "10%", "1mb", "101%", "-1", "x", "5%%"])
def test_maxmemory_clients_syntax_same_as_redis(pair, value):  # noqa: F811 (fixture)
    compare(pair, [["CONFIG", "SET", "maxmemory-clients", value]])
    for c in pair:
        c.cmd("CONFIG", "SET", "maxmemory-clients", "0")


CLIENT_REPLY_CASES = [
    [["CLIENT", "REPLY", "OFF"], ["SET", "a", "1"], ["GET", "a"], ["NOSUCH"],
     ["CLIENT", "REPLY", "ON"], ["GET", "a"]],
    [["CLIENT", "REPLY", "SKIP"], ["SET", "a", "2"], ["GET", "a"]],
    [["CLIENT", "REPLY", "FOO"], ["CLIENT", "REPLY"], ["CLIENT", "NO-EVICT", "maybe"],
     ["CLIENT", "NO-EVICT", "on"], ["CLIENT", "NO-EVICT", "off"]],
]


@pytest.mark.parametrize("cmds", CLIENT_REPLY_CASES)
def test_client_reply_same_as_redis(pair, cmds):  # noqa: F811 (fixture)
    """Everything sent in one pipeline, ending with a PING: the bytes that
    come back must be the same."""
    g, r = pair
    payload = b""
    for c in cmds + [["PING"]]:
        parts = [a.encode() for a in c]
        payload += b"*%d\r\n" % len(parts) + b"".join(b"$%d\r\n%s\r\n" % (len(p), p)
                                                       for p in parts)
    outs = []
    for c in (g, r):
        c.s.sendall(payload)
        data = b""
        while not data.endswith(b"+PONG\r\n"):
            data += c.s.recv(65536)
        outs.append(data)
    assert outs[0] == outs[1]
