"""HyperLogLog (PFADD, PFCOUNT, PFMERGE, PFDEBUG) side by side with
redis-server: seeded random sequences on the same keys, in RESP2 and
RESP3, comparing raw replies byte for byte, the HLL strings themselves
included (GET after every few steps: sparse edits, the turn to dense at
hll-sparse-max-bytes or at a register above 32, the cached count), and
the errors: a key of another type, a string that is no HLL, a corrupted
HLL (SETRANGE into the registers). Also WATCH seeing PFCOUNT's cache
write, and redis-py's pfadd/pfcount/pfmerge."""
import random

import pytest
import redis

from test_vs_redis import pair, redis_port  # noqa: F401  (fixtures)

KEYS = ["h1", "h2", "h3", "s", "l"]


def random_step(rng, universe):
    k = rng.choice(KEYS[:3] if rng.random() < 0.85 else KEYS)
    r = rng.random()
    if r < 0.45:
        n = rng.choice([0, 1, 3, 20, 200])
        return ("PFADD", k, *(f"e{rng.randrange(universe)}" for _ in range(n)))
    if r < 0.6:
        return ("PFCOUNT", *rng.sample(KEYS, rng.randrange(1, 4)))
    if r < 0.7:
        return ("PFMERGE", k, *rng.sample(KEYS, rng.randrange(0, 3)))
    if r < 0.8:
        return ("GET", k)
    if r < 0.86:
        return ("PFDEBUG", rng.choice(["ENCODING", "DECODE", "TODENSE", "NOPE"]), k)
    if r < 0.885:  # corrupt a register byte (sparse: the opcodes)
        return ("SETRANGE", k, str(rng.randrange(16, 40)), bytes([rng.randrange(256)]))
    if r < 0.9:
        return ("SET", k, rng.choice([b"abc", b"HYLL", b"HYLL\x00" + b"\x00" * 20,
                                      b"HYLL\x02" + b"\x00" * 11 + b"\x7f\xff"]))
    if r < 0.97:
        return ("DEL", k)
    return ("RPUSH", "l", "x") if rng.random() < 0.5 else ("SET", "s", "plain")


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("resp3", [False, True])
def test_random_hll_same_as_redis(pair, seed, resp3):  # noqa: F811
    g, r = pair
    rng = random.Random(seed)
    limit = rng.choice(["3000", "300", "80"])
    for c in (g, r):
        if resp3:
            c.cmd("HELLO", "3")
        assert c.cmd("CONFIG", "SET", "hll-sparse-max-bytes", limit) == b"+OK\r\n"
    try:
        universe = rng.choice([50, 2000, 100000])
        for i in range(400):
            q = random_step(rng, universe)
            assert g.cmd(*q) == r.cmd(*q), (i, q)
        for k in KEYS:
            assert g.cmd("GET", k) == r.cmd("GET", k)
    finally:
        for c in (g, r):
            c.cmd("CONFIG", "SET", "hll-sparse-max-bytes", "3000")


def test_hll_growth_byte_for_byte(pair):  # noqa: F811
    """One HLL grown from empty to dense, its bytes compared after every
    add: each sparse edit and merge of VAL opcodes, and the turn."""
    g, r = pair
    rng = random.Random(11)
    for i in range(4000):
        e = f"m{rng.randrange(10**9)}"
        assert g.cmd("PFADD", "h", e) == r.cmd("PFADD", "h", e)
        if i < 3000 or i % 50 == 0:
            assert g.cmd("GET", "h") == r.cmd("GET", "h"), i
        if i % 97 == 0:
            assert g.cmd("PFCOUNT", "h") == r.cmd("PFCOUNT", "h")
    assert g.cmd("PFDEBUG", "ENCODING", "h") == r.cmd("PFDEBUG", "ENCODING", "h") == b"+dense\r\n"
    assert g.cmd("PFDEBUG", "GETREG", "h") == r.cmd("PFDEBUG", "GETREG", "h")
    assert g.cmd("CONFIG", "GET", "hll-sparse-max-bytes") == \
        r.cmd("CONFIG", "GET", "hll-sparse-max-bytes")


def test_watch_sees_the_cached_count_written(pair):  # noqa: F811
    g, r = pair
    for c in (g, r):
        c.cmd("PFADD", "h", "a", "b")
    script = [("WATCH", "h"), ("PFCOUNT", "h"), ("MULTI",), ("PING",), ("EXEC",),
              ("WATCH", "h"), ("PFCOUNT", "h"), ("MULTI",), ("PING",), ("EXEC",)]
    for q in script:  # the first EXEC fails (the cache was written), the second runs
        assert g.cmd(*q) == r.cmd(*q), q


def test_redis_py_hll(server):
    c = redis.Redis(port=server.port)
    assert c.pfadd("visits", *[f"user{i}" for i in range(1000)]) == 1
    assert abs(c.pfcount("visits") - 1000) <= 20
    assert c.pfadd("other", *[f"user{i}" for i in range(500, 1500)]) == 1
    assert c.pfmerge("all", "visits", "other")
    assert abs(c.pfcount("all") - 1500) <= 30
    assert c.pfcount("visits", "other") == c.pfcount("all")
    with pytest.raises(redis.ResponseError, match="not a valid HyperLogLog"):
        c.set("plain", "x")
        c.pfadd("plain", "y")
