"""Databases (Redis's 16 by default) side by side with Redis 7.0: SELECT,
MOVE, SWAPDB, COPY ... DB, FLUSHDB, FLUSHALL, DBSIZE, KEYS/SCAN and INFO
keyspace per database, WATCH per database, and maxmemory for the node
across all databases."""
import random

import pytest

from test_vs_redis import Conn, compare, decode, run_redis, unordered  # noqa: F401


@pytest.fixture(scope="module")
def redis16_port():
    yield from run_redis("--databases", "16")


@pytest.fixture
def pair16(server, redis16_port):
    g, r = Conn(server.port), Conn(redis16_port)
    try:
        for c in (g, r):
            assert c.cmd("FLUSHALL") == b"+OK\r\n"
        yield g, r
    finally:
        g.close()
        r.close()


def keyspace(raw):
    text = decode(raw)
    return sorted(line for line in text.decode().split("\r\n") if line.startswith("db"))


CASES = [
    [["SELECT", "15"], ["SELECT", "16"], ["SELECT", "-1"], ["SELECT", "x"],
     ["SELECT", "99999999999"], ["SET", "a", "1"], ["SELECT", "0"], ["GET", "a"], ["SELECT", "15"],
     ["GET", "a"], ["DBSIZE"]],
    [["SET", "k", "v"], ["EXPIRE", "k", "1000"], ["MOVE", "k", "3"], ["EXISTS", "k"],
     ["SELECT", "3"], ["GET", "k"], ["TTL", "k"], ["MOVE", "k", "3"], ["MOVE", "k", "0"],
     ["MOVE", "nokey", "1"], ["MOVE", "k", "16"], ["MOVE", "k", "x"], ["SELECT", "0"],
     ["SET", "k", "other"], ["SELECT", "3"], ["SET", "k", "mine"], ["MOVE", "k", "0"]],
    [["SET", "a", "0"], ["SELECT", "1"], ["SET", "b", "1"], ["SWAPDB", "0", "1"], ["GET", "a"],
     ["GET", "b"], ["SELECT", "0"], ["GET", "b"], ["SWAPDB", "0", "16"], ["SWAPDB", "x", "1"],
     ["SWAPDB", "1", "y"], ["SWAPDB", "2", "2"], ["DBSIZE"]],
    [["SET", "s", "v"], ["COPY", "s", "s", "DB", "2"], ["COPY", "s", "s"], ["COPY", "s", "t", "DB",
     "2"], ["COPY", "s", "t", "DB", "2"], ["COPY", "s", "t", "DB", "2", "REPLACE"],
     ["COPY", "s", "t", "DB", "16"], ["COPY", "s", "t", "DB", "x"], ["SELECT", "2"], ["KEYS", "*"],
     ["FLUSHDB"], ["DBSIZE"], ["SELECT", "0"], ["DBSIZE"], ["FLUSHALL", "x"], ["FLUSHALL", "SYNC"],
     ["DBSIZE"]],
]


@pytest.mark.parametrize("cmds", CASES)
def test_database_commands_same_as_redis(pair16, cmds):
    compare(pair16, cmds)


def test_random_database_sequences_same_as_redis(pair16):
    """Seeded random commands over four databases and four keys; after
    each, every database's view of every key and INFO keyspace agree."""
    g, r = pair16
    rnd = random.Random(7)
    keys, dbs = ["k1", "k2", "k3", "k4"], ["0", "1", "2", "15"]
    for i in range(1500):
        k, d = rnd.choice(keys), rnd.choice(dbs)
        cmd = rnd.choice([
            ["SELECT", d], ["SET", k, str(i)], ["GET", k], ["DEL", k], ["MOVE", k, d],
            ["SWAPDB", d, rnd.choice(dbs)], ["COPY", k, rnd.choice(keys), "DB", d],
            ["COPY", k, rnd.choice(keys), "DB", d, "REPLACE"], ["DBSIZE"], ["EXISTS", k],
            ["RENAME", k, rnd.choice(keys)], ["FLUSHDB"] if rnd.random() < 0.05 else ["PING"],
            ["INCR", k], ["APPEND", k, "x"]])
        a, b = g.cmd(*cmd), r.cmd(*cmd)
        assert a == b, f"step {i} {cmd!r}:\n  gridsync {a!r}\n  redis    {b!r}"
        if i % 50 == 0:
            assert keyspace(g.cmd("INFO", "keyspace")) == keyspace(r.cmd("INFO", "keyspace"))
            assert unordered(g.cmd("KEYS", "*")) == unordered(r.cmd("KEYS", "*"))


def test_watch_is_per_database(pair16):
    """A write to the same key name in another database does not fail a
    transaction; a write in the watched one does; SWAPDB touches both."""
    g, r = pair16
    for c in (g, r):
        c.cmd("SELECT", "1")
        c.cmd("SET", "w", "1")
    # A second connection per server writes.
    sides = []
    for c in (g, r):
        port = c.s.getpeername()[1]
        sides.append(Conn(port))
    try:
        seqs = [
            (["WATCH", "w"], None), (None, ["SET", "w", "db0"]), (["MULTI"], None),
            (["SET", "x", "1"], None), (["EXEC"], None),  # db0 write: EXEC runs
            (["WATCH", "w"], None), (None, ["SELECT", "1"]), (None, ["SET", "w", "2"]),
            (["MULTI"], None), (["EXEC"], None),  # same db: EXEC fails
            (["WATCH", "w"], None), (None, ["SWAPDB", "1", "2"]), (["MULTI"], None),
            (["EXEC"], None),
        ]
        for mine, theirs in seqs:
            if mine:
                a, b = g.cmd(*mine), r.cmd(*mine)
            else:
                a, b = sides[0].cmd(*theirs), sides[1].cmd(*theirs)
            assert a == b, f"{mine or theirs!r}: gridsync {a!r} redis {b!r}"
    finally:
        for s in sides:
            s.close()


def test_maxmemory_holds_across_databases(make_server):
    s = make_server("--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru")
    c = s.client()
    for db in range(4):
        c.execute_command("SELECT", db)
        for i in range(1500):
            c.set(f"k{i}", b"v" * 1000)
    used = c.info("memory")["used_memory"]
    assert used <= 2 * 1024 * 1024 + 64 * 1024, used
    ks = c.info("keyspace")
    assert sum(v["keys"] for v in ks.values()) < 4 * 1500
    assert c.info("stats")["evicted_keys"] > 0
