"""BITFIELD and BITFIELD_RO (Redis 7.0's bitfieldGeneric) side by side
with redis-server: seeded random operation lists (every width of both
signs, offsets plain and "#n", values at and past each width's limits,
OVERFLOW WRAP/SAT/FAIL between operations, malformed types, offsets,
values and subcommands), on keys that also get SET, APPEND and a list,
in RESP2 and RESP3; every raw reply compared byte for byte, and the
strings themselves (GET) after each command."""
import random

import pytest

from test_vs_redis import pair, redis_port  # noqa: F401  (fixtures)


def rand_type(rng):
    if rng.random() < 0.05:
        return rng.choice(["i0", "u64", "i65", "x8", "u", "", "i8\x00z", "I8", "u-1", "i 8"])
    sign = rng.choice("iu")
    return f"{sign}{rng.randrange(1, 65 if sign == 'i' else 64)}"


def rand_offset(rng, bits):
    r = rng.random()
    if r < 0.05:
        return rng.choice(["-1", "x", "#-1", "#", "4294967296", "#99999999999", "1.5"])
    if r < 0.3:
        return f"#{rng.randrange(0, 20)}"
    return str(rng.randrange(0, 200))


def rand_value(rng, typ):
    if rng.random() < 0.03:
        return rng.choice(["x", "1.0", "9223372036854775808", ""])
    try:
        bits = int(typ[1:])
    except ValueError:
        bits = 8
    bits = max(1, min(bits, 64))
    lim = 1 << bits
    return str(rng.choice([0, 1, -1, lim - 1, lim, lim // 2, -lim // 2, -lim // 2 - 1,
                           rng.randrange(-lim, lim), 9223372036854775807,
                           -9223372036854775808, rng.randrange(-300, 300)]))


def rand_command(rng):
    key = rng.choice(["k1", "k2", "k1", "lst", "new"])
    ro = rng.random() < 0.15
    args = ["BITFIELD_RO" if ro else "BITFIELD", key]
    for _ in range(rng.randrange(0, 6)):
        r = rng.random()
        if r < 0.15:
            args += ["OVERFLOW", rng.choice(["WRAP", "SAT", "FAIL", "fail", "sat", "BAD"])]
            continue
        t = rand_type(rng)
        if r < 0.45 or ro and rng.random() < 0.9:
            args += [rng.choice(["GET", "get"]), t, rand_offset(rng, t)]
        elif r < 0.75:
            args += ["SET", t, rand_offset(rng, t), rand_value(rng, t)]
        elif r < 0.97:
            args += [rng.choice(["INCRBY", "incrby"]), t, rand_offset(rng, t), rand_value(rng, t)]
        else:
            args += [rng.choice(["GET", "SET", "NOPE"])]  # too few arguments, or unknown
    return args


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("resp3", [False, True])
def test_random_bitfield_same_as_redis(pair, seed, resp3):  # noqa: F811
    g, r = pair
    if resp3:
        for c in (g, r):
            c.cmd("HELLO", "3")
    rng = random.Random(seed)
    for c in (g, r):
        c.cmd("RPUSH", "lst", "x")
    for i in range(400):
        if rng.random() < 0.05:
            q = rng.choice([("SET", "k1", bytes(rng.randrange(256) for _ in range(5))),
                            ("APPEND", "k2", "\xff\x00"), ("DEL", "new"), ("SET", "k2", "12")])
        else:
            q = rand_command(rng)
        assert g.cmd(*q) == r.cmd(*q), (i, q)
        for k in ("k1", "k2", "new"):
            assert g.cmd("GET", k) == r.cmd("GET", k), (i, q, k)


def test_bitfield_watch_and_key_creation(pair):  # noqa: F811
    """A write that changes nothing (SET of the value already there) does
    not touch WATCH, as in Redis; growing the string does."""
    g, r = pair
    script = [("SET", "w", "\x00"), ("WATCH", "w"), ("BITFIELD", "w", "SET", "u8", "0", "0"),
              ("MULTI",), ("PING",), ("EXEC",),
              ("WATCH", "w"), ("BITFIELD", "w", "SET", "u8", "8", "0"),
              ("MULTI",), ("PING",), ("EXEC",), ("GET", "w"),
              ("BITFIELD", "fresh", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "9"),
              ("EXISTS", "fresh"), ("GET", "fresh"),
              ("BITFIELD_RO", "nokey", "GET", "i8", "0"), ("EXISTS", "nokey")]
    for q in script:
        assert g.cmd(*q) == r.cmd(*q), q
