"""DUMP, RESTORE and RESTORE-ASKING side by side with redis-server.

- Small values (strings of every kind: integers, LZF-compressible and
  plain bytes; listpack hashes and sorted sets, intsets, one-node lists)
  give the same DUMP payload byte for byte, seeded random.
- Every type and encoding moves both ways: Redis's payload restored here,
  ours restored in Redis, with the same contents, type, encoding and TTL.
- RESTORE's errors match Redis's text for text: options, BUSYKEY, TTL,
  checksum and version, and bad data behind a valid checksum."""
import random

import pytest
import redis

from test_vs_redis import decode, pair, redis_port  # noqa: F401  (fixtures)

POLY = 0x95AC9329AC4BC9B5
TABLE = []
for i in range(256):
    c = i
    for _ in range(8):
        c = (c >> 1) ^ POLY if c & 1 else c >> 1
    TABLE.append(c)


def crc64(data):
    crc = 0
    for b in data:
        crc = TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def with_footer(body, version=10):
    """A payload around body (type and value) with a valid checksum."""
    p = body + bytes([version & 0xFF, version >> 8])
    return p + crc64(p).to_bytes(8, "little")


def random_string(rng):
    kind = rng.randrange(6)
    if kind == 0:
        return str(rng.choice([0, 1, -1, 127, 128, -128, -129, 32767, 32768, -32769,
                               2**31 - 1, 2**31, -2**31, -2**31 - 1, 10**15,
                               rng.randrange(-10**6, 10**6)])).encode()
    if kind == 1:
        return rng.choice([b"007", b"+5", b"1.5", b" 1", b"-0", b""])
    if kind == 2:
        return bytes([rng.randrange(256)]) * rng.randrange(15, 400)
    if kind == 3:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 60)))
    if kind == 4:
        return (b"abc" * 50)[:rng.randrange(18, 150)]
    return bytes(rng.randrange(97, 100) for _ in range(rng.randrange(19, 25)))


def fill_small(c, rng, seed):
    r2 = random.Random(seed)  # the same values on both servers
    c.cmd("SET", "str", random_string(r2))
    n = r2.randrange(1, 20)
    c.cmd("HSET", "hash", *[x for i in range(n) for x in (random_string(r2)[:30] or b"f",
                                                          random_string(r2)[:30])])
    c.cmd("ZADD", "zset", *[x for i in range(r2.randrange(1, 15))
                            for x in (r2.choice(["1", "-1", "0", "-0", "2.5", "1e300", "inf",
                                                 "-inf", "3.14159", str(r2.randrange(10**6))]),
                                      random_string(r2)[:20])])
    c.cmd("SADD", "intset", *[str(r2.choice([r2.randrange(-100, 100), r2.randrange(-10**6, 10**6),
                                             r2.randrange(-2**62, 2**62)]))
                              for _ in range(r2.randrange(1, 30))])
    c.cmd("RPUSH", "list", *[random_string(r2)[:50] for _ in range(r2.randrange(1, 40))])


@pytest.mark.parametrize("seed", range(12))
def test_small_values_dump_byte_for_byte(pair, seed):  # noqa: F811
    g, r = pair
    for c in (g, r):
        fill_small(c, random, seed)
    for k in ("str", "hash", "zset", "intset", "list", "nokey"):
        assert g.cmd("OBJECT", "ENCODING", k) == r.cmd("OBJECT", "ENCODING", k), k
        assert g.cmd("DUMP", k) == r.cmd("DUMP", k), (seed, k)


def big_values(c):
    c.hset("bighash", mapping={f"field:{i}": "v" * (i % 90) for i in range(700)})
    c.zadd("bigzset", {f"m{i}": i * 0.37 - 50 for i in range(400)})
    c.sadd("bigset", *[f"s{i}" for i in range(300)])
    c.sadd("bigints", *range(0, 3000, 3))
    c.rpush("biglist", *[("x" * (i % 300)) + str(i) for i in range(5000)])
    c.set("bigstr", "hello world " * 20000)
    c.set("ttlkey", "v", px=500000)


def contents(c, k):
    t = c.type(k)
    if t == b"string":
        return c.get(k)
    if t == b"hash":
        return sorted(c.hgetall(k).items())
    if t == b"zset":
        return c.zrange(k, 0, -1, withscores=True)
    if t == b"set":
        return sorted(c.smembers(k))
    if t == b"list":
        return c.lrange(k, 0, -1)
    return t


def test_every_type_moves_both_ways(server, redis_port):  # noqa: F811
    g, r = redis.Redis(port=server.port), redis.Redis(port=redis_port)
    for c in (g, r):
        c.flushall()
    big_values(g)
    big_values(r)
    fill_small_redis = ["bighash", "bigzset", "bigset", "bigints", "biglist", "bigstr", "ttlkey"]
    for k in fill_small_redis:
        for src, dst in ((r, g), (g, r)):
            p = src.dump(k)
            ttl = max(src.pttl(k), 0)
            assert dst.restore(k + ":copy", ttl, p, replace=True)
            assert contents(dst, k + ":copy") == contents(src, k), k
            assert dst.object("encoding", k + ":copy") == src.object("encoding", k), k
            if ttl:
                assert 0 < dst.pttl(k + ":copy") <= ttl
    # RESTORE-ASKING is RESTORE
    assert g.execute_command("RESTORE-ASKING", "asked", "0", r.dump("bigset")) == b"OK"
    assert sorted(g.smembers("asked")) == sorted(r.smembers("bigset"))


def restore_cases():
    hello = with_footer(b"\x00\x05hello")
    return [
        ("RESTORE", "k", "0", hello),
        ("RESTORE", "k", "0", hello),  # BUSYKEY
        ("RESTORE", "k", "0", hello, "REPLACE"),
        ("RESTORE", "k", "0", hello, "REPLACE", "ABSTTL"),
        ("RESTORE", "k", "-1", hello, "REPLACE"),
        ("RESTORE", "k", "x", hello, "REPLACE"),
        ("RESTORE", "k2", "1", hello, "ABSTTL"),  # long expired: OK, no key
        ("EXISTS", "k2"),
        ("RESTORE", "k", "1", hello, "ABSTTL", "REPLACE"),  # expired: the old key goes
        ("EXISTS", "k"),
        ("RESTORE", "k", "0", hello, "IDLETIME", "-1"),
        ("RESTORE", "k", "0", hello, "IDLETIME", "x"),
        ("RESTORE", "k", "0", hello, "FREQ", "256"),
        ("RESTORE", "k", "0", hello, "FREQ", "5", "IDLETIME", "5"),
        ("RESTORE", "k", "0", hello, "IDLETIME", "10", "FREQ", "5"),
        ("RESTORE", "k", "0", hello, "IDLETIME"),
        ("RESTORE", "k", "0", hello, "BOGUS"),
        ("RESTORE", "k", "0", hello[:-1] + bytes([hello[-1] ^ 1])),
        ("RESTORE", "k", "0", with_footer(b"\x00\x05hello", version=11)),
        ("RESTORE", "k", "0", with_footer(b"\x00\x05hello", version=9)),
        ("RESTORE", "k", "0", b"short"),
        ("RESTORE", "k", "0", with_footer(b"\x00\x06hello")),
        ("RESTORE", "k", "0", with_footer(b"\x2a\x01x")),
        ("RESTORE", "k", "0", with_footer(b"\x02\x00")),
        ("RESTORE", "k", "0", with_footer(b"\x00\x01xy")),
        ("RESTORE", "k", "0", with_footer(b"\x00\xc3\x05\x40\x00\x01aa")),
        ("RESTORE", "k", "0", with_footer(b"\x10\x07\x07\x00\x00\x00\x00\x00\xff")),
        ("RESTORE", "k", "0", with_footer(b"\x00\xc0\x7f"), "REPLACE", "IDLETIME", "100"),
        ("GET", "k"),
        ("RESTORE", "lst", "0", with_footer(b"\x12\x01\x02\x0b\x0b\x00\x00\x00\x01\x00\x81a\x02\xff")),
        ("LRANGE", "lst", "0", "-1"),
        ("DUMP", "lst"),
        ("RESTORE",),
        ("DUMP", "a", "b"),
    ]


@pytest.mark.parametrize("resp3", [False, True])
def test_restore_errors_same_as_redis(pair, resp3):  # noqa: F811
    g, r = pair
    if resp3:
        for c in (g, r):
            c.cmd("HELLO", "3")
    for q in restore_cases():
        assert g.cmd(*q) == r.cmd(*q), q
