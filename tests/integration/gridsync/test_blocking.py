"""Blocking list commands (BLPOP BRPOP BLMOVE BRPOPLPUSH BLMPOP, CLIENT
UNBLOCK), side by side with Debian's redis-server where the outcome is
deterministic: each scenario runs against both servers with raw
connections and the transcripts of raw replies must be equal byte for
byte, in RESP2 and RESP3. Clients are known to be blocked by polling INFO
clients (never by sleeping), so serve order is fixed by the scenario.
Then real clients: redis-cli in a subprocess and redis-py."""
import subprocess
import shutil
import time

import pytest

from test_vs_redis import Conn, redis_port  # noqa: F401


def blocked(conn):
    raw = conn.cmd("INFO", "clients")
    for line in raw.split(b"\r\n"):
        if line.startswith(b"blocked_clients:"):
            return int(line.split(b":")[1])
    raise AssertionError(raw)


def wait_blocked(conn, n):
    deadline = time.monotonic() + 30
    while blocked(conn) != n:
        assert time.monotonic() < deadline, f"blocked_clients never reached {n}"
        time.sleep(0.01)


class Side:
    """Connections to one server; a scenario drives them."""

    def __init__(self, port, resp3):
        self.port = port
        self.resp3 = resp3
        self.conns = []
        self.admin = self.new()
        assert self.admin.cmd("FLUSHALL") == b"+OK\r\n"

    def new(self):
        c = Conn(self.port)
        if self.resp3:
            c.cmd("HELLO", "3")
        self.conns.append(c)
        return c

    def send(self, conn, *args):
        """Send one request without reading its reply."""
        parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        conn.s.sendall(b"*%d\r\n" % len(parts) + b"".join(
            b"$%d\r\n%s\r\n" % (len(p), p) for p in parts))

    def block(self, conn, *args):
        """Send a command that blocks; return once the server counts it."""
        n = blocked(self.admin)
        self.send(conn, *args)
        wait_blocked(self.admin, n + 1)

    def close(self):
        for c in self.conns:
            c.close()


def both(redis_port, server, scenario, resp3):
    out = []
    for port in (server.port, redis_port):
        side = Side(port, resp3)
        try:
            out.append(scenario(side))
        finally:
            side.close()
    g, r = out
    assert g == r, f"\n  gridsync: {g!r}\n  redis:    {r!r}"
    return g


RESP = [pytest.param(False, id="resp2"), pytest.param(True, id="resp3")]


# ------------------------------------------------- immediate replies


IMMEDIATE = [
    ["BLPOP", "k", "-1"], ["BLPOP", "k", "abc"], ["BLPOP", "k", "inf"], ["BLPOP", "k", "nan"],
    ["BLPOP", "k", " 1"], ["BLPOP", "k", ""], ["BLPOP", "k", "-inf"], ["BLPOP", "k", "1e30"],
    ["BLPOP", "k"], ["BRPOP", "k"], ["BLMOVE", "a", "b", "LEFT", "UP", "0"],
    ["BLMOVE", "a", "b", "LEFT", "RIGHT", "-1"], ["BLMOVE", "a", "b", "LEFT", "RIGHT"],
    ["BRPOPLPUSH", "a", "b", "x"], ["BLMPOP", "0", "0", "k", "LEFT"],
    ["BLMPOP", "-1", "1", "k", "LEFT"], ["BLMPOP", "-1", "1", "k", "LEFT", "COUNT", "0"],
    ["BLMPOP", "0", "1", "k", "MIDDLE"], ["BLMPOP", "0", "2", "k", "LEFT"],
    ["BLMPOP", "0", "1", "k", "LEFT", "COUNT", "1", "COUNT", "2"],
    ["BLMPOP", "0", "1", "k"],
    ["SET", "s", "x"], ["BLPOP", "nokey", "s", "0"], ["BLMOVE", "s", "b", "LEFT", "LEFT", "0"],
    ["RPUSH", "l", "1", "2", "3", "4"], ["BLMOVE", "l", "s", "LEFT", "LEFT", "0"],
    ["BLPOP", "nokey", "l", "0"], ["BRPOP", "l", "0"], ["BLMPOP", "0", "2", "x", "l", "RIGHT"],
    ["RPUSH", "l", "a", "b", "c"], ["BLMPOP", "0", "1", "l", "LEFT", "COUNT", "10"],
    ["RPUSH", "l", "a", "b"], ["BRPOPLPUSH", "l", "l", "0"], ["BLMOVE", "l", "m", "RIGHT", "LEFT", "0"],
    ["LRANGE", "l", "0", "-1"], ["LRANGE", "m", "0", "-1"],
    ["BLPOP", "nokey", "0.01"], ["BLMOVE", "nokey", "m", "LEFT", "LEFT", "0.01"],
    ["BRPOPLPUSH", "nokey", "m", "0.01"], ["BLMPOP", "0.01", "1", "nokey", "LEFT"],
    ["BLPOP", "nokey", "0.0001"], ["BLPOP", "nokey", "+1e-3"],
    ["MULTI"], ["BLPOP", "nokey", "0"], ["BLMOVE", "nokey", "m", "LEFT", "LEFT", "0"],
    ["BRPOPLPUSH", "nokey", "m", "0"], ["BLMPOP", "0", "1", "nokey", "LEFT"],
    ["BRPOP", "m", "0"], ["EXEC"],
    ["CLIENT", "UNBLOCK", "x"], ["CLIENT", "UNBLOCK", "999999", "MAYBE"],
    ["CLIENT", "UNBLOCK", "999999"], ["CLIENT", "UNBLOCK", "999999", "error"],
    ["CLIENT", "UNBLOCK", "1", "2", "3"],
]

# The sorted-set forms (BZPOPMIN BZPOPMAX BZMPOP): argument errors in
# Redis's order, immediate pops, WRONGTYPE, MULTI and short timeouts.
IMMEDIATE_ZSET = [
    ["BZPOPMIN", "z", "-1"], ["BZPOPMIN", "z", "abc"], ["BZPOPMAX", "z"], ["BZPOPMIN", "z", "inf"],
    ["BZMPOP", "0", "0", "z", "MIN"], ["BZMPOP", "x", "1", "z", "MIN"],
    ["BZMPOP", "0", "1", "z", "UP"], ["BZMPOP", "0", "2", "z", "MIN"],
    ["BZMPOP", "0", "1", "z", "MIN", "COUNT", "0"], ["BZMPOP", "-1", "1", "z", "MAX"],
    ["BZMPOP", "0", "1", "z", "MIN", "COUNT", "1", "COUNT", "2"], ["BZMPOP", "0", "1", "z"],
    ["ZADD", "z", "1", "a", "2", "b", "3", "c", "4.5", "d"],
    ["BZPOPMIN", "nokey", "z", "0"], ["BZPOPMAX", "z", "0"],
    ["BZMPOP", "0", "2", "nokey", "z", "MAX", "COUNT", "10"], ["EXISTS", "z"],
    ["SET", "s", "x"], ["BZPOPMIN", "nokey", "s", "0"], ["BZMPOP", "0", "1", "s", "MIN"],
    ["RPUSH", "l", "1"], ["BZPOPMAX", "l", "0"],
    ["BZPOPMIN", "nokey", "0.01"], ["BZMPOP", "0.01", "1", "nokey", "MIN"],
    ["MULTI"], ["BZPOPMIN", "nokey", "0"], ["BZPOPMAX", "nokey", "0"],
    ["BZMPOP", "0", "1", "nokey", "MAX"], ["EXEC"],
]


@pytest.mark.parametrize("resp3", RESP)
def test_immediate_replies_same_as_redis(server, redis_port, resp3):
    def scenario(side):
        return [side.admin.cmd(*c) for c in IMMEDIATE]

    both(redis_port, server, scenario, resp3)


@pytest.mark.parametrize("resp3", RESP)
def test_immediate_zset_replies_same_as_redis(server, redis_port, resp3):
    def scenario(side):
        return [side.admin.cmd(*c) for c in IMMEDIATE_ZSET]

    both(redis_port, server, scenario, resp3)


# ------------------------------------------------------ served later


def served_in_arrival_order(side):
    a, b, c = side.new(), side.new(), side.new()
    side.block(a, "BLPOP", "k", "0")
    side.block(b, "BRPOP", "other", "k", "0")
    side.block(c, "BLMPOP", "0", "1", "k", "LEFT", "COUNT", "2")
    pushed = side.admin.cmd("RPUSH", "k", "1", "2", "3", "4", "5")
    return [pushed, a.reply(), b.reply(), c.reply(), side.admin.cmd("LRANGE", "k", "0", "-1")]


def served_after_exec_by_ready_key(side):
    # Redis 7.0 serves from the key that became ready first (k2), not
    # from the first key of the command.
    a = side.new()
    side.block(a, "BLPOP", "k1", "k2", "0")
    side.admin.cmd("MULTI")
    side.admin.cmd("RPUSH", "k2", "x")
    side.admin.cmd("RPUSH", "k1", "y")
    ex = side.admin.cmd("EXEC")
    return [ex, a.reply(), side.admin.cmd("LRANGE", "k1", "0", "-1"),
            side.admin.cmd("EXISTS", "k2")]


def push_then_delete_in_multi_serves_nobody(side):
    a = side.new()
    side.block(a, "BLPOP", "k", "0")
    side.admin.cmd("MULTI")
    side.admin.cmd("RPUSH", "k", "x")
    side.admin.cmd("DEL", "k")
    ex = side.admin.cmd("EXEC")
    still = blocked(side.admin)
    side.admin.cmd("RPUSH", "k", "z")
    return [ex, still, a.reply()]


def blmove_chain(side):
    a, b, c = side.new(), side.new(), side.new()
    side.block(a, "BLMOVE", "src", "mid", "LEFT", "RIGHT", "0")
    side.block(b, "BRPOPLPUSH", "mid", "dst", "0")
    side.block(c, "BLPOP", "dst", "0")
    pushed = side.admin.cmd("LPUSH", "src", "v")
    return [pushed, a.reply(), b.reply(), c.reply(), side.admin.cmd("EXISTS", "src", "mid", "dst")]


def lmove_to_itself_serves_waiters(side):
    a, b = side.new(), side.new()
    side.block(a, "BLMOVE", "k", "k", "LEFT", "RIGHT", "0")
    side.block(b, "BLPOP", "k", "0")
    pushed = side.admin.cmd("RPUSH", "k", "1", "2")
    return [pushed, a.reply(), b.reply(), side.admin.cmd("LRANGE", "k", "0", "-1")]


def blmove_wrongtype_destination(side):
    a = side.new()
    side.block(a, "BLMOVE", "k", "s", "LEFT", "RIGHT", "0")
    side.admin.cmd("SET", "s", "string")
    pushed = side.admin.cmd("RPUSH", "k", "1")
    return [pushed, a.reply(), side.admin.cmd("LRANGE", "k", "0", "-1"), blocked(side.admin)]


def other_type_does_not_serve(side):
    a = side.new()
    side.block(a, "BLPOP", "k", "0")
    set_ = side.admin.cmd("SET", "k", "str")
    still = blocked(side.admin)
    side.admin.cmd("DEL", "k")
    pushed = side.admin.cmd("RPUSH", "k", "x")
    return [set_, still, pushed, a.reply()]


def databases_are_apart(side):
    a = side.new()
    a.cmd("SELECT", "1")
    side.block(a, "BLPOP", "k", "0")
    p0 = side.admin.cmd("RPUSH", "k", "db0")
    still = blocked(side.admin)
    side.admin.cmd("SELECT", "1")
    p1 = side.admin.cmd("RPUSH", "k", "db1")
    got = a.reply()
    side.admin.cmd("SELECT", "0")
    return [p0, still, p1, got, side.admin.cmd("LRANGE", "k", "0", "-1")]


def rename_move_copy_swapdb_make_ready(side):
    a, b, d = side.new(), side.new(), side.new()
    side.block(a, "BLPOP", "renamed", "0")
    side.block(b, "BLPOP", "copied", "0")
    b2 = side.new()
    b2.cmd("SELECT", "2")
    side.block(b2, "BLPOP", "m", "0")
    d.cmd("SELECT", "3")
    side.block(d, "BLPOP", "swapped", "0")
    out = [side.admin.cmd("RPUSH", "x", "1", "2"), side.admin.cmd("RENAME", "x", "renamed"),
           a.reply(), side.admin.cmd("COPY", "renamed", "copied"), b.reply(),
           side.admin.cmd("RPUSH", "m", "mv"), side.admin.cmd("MOVE", "m", "2"), b2.reply()]
    side.admin.cmd("SELECT", "4")
    side.admin.cmd("RPUSH", "swapped", "s")
    out += [side.admin.cmd("SWAPDB", "3", "4"), d.reply(), blocked(side.admin)]
    side.admin.cmd("SELECT", "0")
    return out


def unblock_timeout_and_error(side):
    a, b = side.new(), side.new()
    ida = int(a.cmd("CLIENT", "ID")[1:-2])
    idb = int(b.cmd("CLIENT", "ID")[1:-2])
    side.block(a, "BLPOP", "k", "0")
    side.block(b, "BLMOVE", "k", "d", "LEFT", "LEFT", "0")
    flags = [b"flags=b" in side.admin.cmd("CLIENT", "LIST", "ID", str(i)) for i in (ida, idb)]
    out = [flags, side.admin.cmd("CLIENT", "UNBLOCK", str(ida)), a.reply(),
           side.admin.cmd("CLIENT", "UNBLOCK", str(idb), "ERROR"), b.reply(),
           side.admin.cmd("CLIENT", "UNBLOCK", str(ida)), a.cmd("PING"), blocked(side.admin)]
    return out


def pipeline_waits_behind_blocked(side):
    a = side.new()
    n = blocked(side.admin)
    a.s.sendall(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nk\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n"
                b"*2\r\n$4\r\nLLEN\r\n$1\r\nk\r\n")
    wait_blocked(side.admin, n + 1)
    pushed = side.admin.cmd("RPUSH", "k", "a", "b")
    return [pushed, a.reply(), a.reply(), a.reply()]


def zset_served_in_arrival_order(side):
    a, b, c = side.new(), side.new(), side.new()
    side.block(a, "BZPOPMIN", "z", "0")
    side.block(b, "BZPOPMAX", "other", "z", "0")
    side.block(c, "BZMPOP", "0", "1", "z", "MIN", "COUNT", "2")
    added = side.admin.cmd("ZADD", "z", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e")
    return [added, a.reply(), b.reply(), c.reply(),
            side.admin.cmd("ZRANGE", "z", "0", "-1", "WITHSCORES")]


def zset_served_by_store_and_incr(side):
    # a Z*STORE destination and ZINCRBY creating the key serve waiters; a
    # list pushed to a key a BZPOPMIN waits on does not
    a, b, c = side.new(), side.new(), side.new()
    side.block(a, "BZPOPMIN", "dst", "0")
    side.block(b, "BZPOPMAX", "inc", "0")
    side.block(c, "BZPOPMIN", "lst", "0.2")
    side.admin.cmd("ZADD", "src", "1", "x", "2", "y")
    stored = side.admin.cmd("ZUNIONSTORE", "dst", "1", "src", "WEIGHTS", "3")
    incr = side.admin.cmd("ZINCRBY", "inc", "2.5", "m")
    pushed = side.admin.cmd("RPUSH", "lst", "v")
    return [stored, incr, pushed, a.reply(), b.reply(), c.reply(),
            side.admin.cmd("ZRANGE", "dst", "0", "-1", "WITHSCORES")]


def timeout_fires(side):
    a = side.new()
    return [a.cmd("BLPOP", "k", "0.05"), a.cmd("BLMOVE", "k", "d", "LEFT", "LEFT", "0.05"),
            a.cmd("BLMPOP", "0.05", "1", "k", "RIGHT"), blocked(side.admin)]


SCENARIOS = [served_in_arrival_order, served_after_exec_by_ready_key,
             push_then_delete_in_multi_serves_nobody, blmove_chain,
             lmove_to_itself_serves_waiters, blmove_wrongtype_destination,
             other_type_does_not_serve, databases_are_apart, rename_move_copy_swapdb_make_ready,
             unblock_timeout_and_error, pipeline_waits_behind_blocked, timeout_fires,
             zset_served_in_arrival_order, zset_served_by_store_and_incr]


@pytest.mark.parametrize("resp3", RESP)
@pytest.mark.parametrize("scenario", SCENARIOS, ids=[s.__name__ for s in SCENARIOS])
def test_blocking_scenario_same_as_redis(server, redis_port, scenario, resp3):
    both(redis_port, server, scenario, resp3)


# ----------------------------------------------------- GridSync alone


def test_disconnect_while_blocked_frees_everything(server):
    admin = Conn(server.port)
    for _ in range(20):
        c = Conn(server.port)
        c.s.sendall(b"*4\r\n$5\r\nBLPOP\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\n0\r\n")
        wait_blocked(admin, 1)
        c.close()
        wait_blocked(admin, 0)
    # Nobody is left waiting: the push stays in the list.
    assert admin.cmd("RPUSH", "a", "x") == b":1\r\n"
    assert admin.cmd("LLEN", "a") == b":1\r\n"
    admin.close()


def test_client_kill_while_blocked(server):
    admin, c = Conn(server.port), Conn(server.port)
    cid = c.cmd("CLIENT", "ID")[1:-2].decode()
    c.s.sendall(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nk\r\n$3\r\n100\r\n")
    wait_blocked(admin, 1)
    assert admin.cmd("CLIENT", "KILL", "ID", cid) == b":1\r\n"
    wait_blocked(admin, 0)
    assert c.cmd("PING") == b"<closed>"
    admin.close()


def test_many_timeouts_fire(server):
    admin = Conn(server.port)
    conns = [Conn(server.port) for _ in range(30)]
    # Deadlines in every order: the heap must give each its turn.
    for i, c in enumerate(conns):
        c.s.sendall(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nk\r\n$4\r\n%.2f\r\n" % (1.5 - (i * 7 % 30) * 0.05))
    for c in conns:
        assert c.reply() == b"*-1\r\n"
        c.close()
    wait_blocked(admin, 0)
    admin.close()


def test_redis_cli_blpop_served_by_push(server):
    cli = shutil.which("redis-cli")
    if not cli:
        pytest.skip("redis-cli is not installed")
    admin = Conn(server.port)
    proc = subprocess.Popen([cli, "-p", str(server.port), "BLPOP", "jobs", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_blocked(admin, 1)
        assert admin.cmd("RPUSH", "jobs", "job-1") == b":1\r\n"
        out, _ = proc.communicate(timeout=30)
        assert out.split() == [b"jobs", b"job-1"]
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    admin.close()


def test_redis_py_blocking_commands(server):
    import threading
    r = server.client(decode_responses=True)
    worker = server.client(decode_responses=True)
    got = {}

    def consume():
        got["blpop"] = worker.blpop(["q1", "q2"], timeout=0)
        got["blmove"] = worker.blmove("q1", "done", 0, "LEFT", "RIGHT")

    t = threading.Thread(target=consume)
    t.start()
    deadline = time.monotonic() + 30
    while r.info("clients")["blocked_clients"] != 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert r.rpush("q2", "a") == 1
    while r.info("clients")["blocked_clients"] != 1 or "blpop" not in got:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert r.rpush("q1", "b") == 1
    t.join(30)
    assert not t.is_alive()
    assert got == {"blpop": ("q2", "a"), "blmove": "b"}
    assert r.lrange("done", 0, -1) == ["b"]
    assert r.brpop(["nothing"], timeout=0.05) is None
    assert r.blmpop(0.05, 1, "nothing", direction="LEFT") is None
    r.close()
    worker.close()
