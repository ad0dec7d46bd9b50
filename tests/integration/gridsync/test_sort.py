"""SORT and SORT_RO (Redis 7.0's sort.c) side by side with redis-server:
seeded random data (a list with repeats, a sorted set, an intset, a set
of strings; weight strings and hash fields, some missing, some of
another type) and random option lists (ASC/DESC, ALPHA, LIMIT with
out-of-range and bad values, BY key and hash-field patterns and
constants, GET patterns and #, STORE, junk), in RESP2 and RESP3; the raw
replies and the stored lists compared byte for byte. Where Redis's order
is its hash table's or its partial quicksort's among equal elements (a
set of strings in its own order, ALPHA BY with ties), the same elements
are required in any order."""
import random

import pytest

from test_vs_redis import decode, pair, redis_port  # noqa: F401  (fixtures)

POOL = [str(i) for i in range(-5, 15)] + ["1.5", "-0.25", "1e3", "a", "B", "ab", "x y", "",
                                          "12abc", "inf", "nan", " 7", "0x1f", "zz"]


def load(g, r, rng):
    cmds = [("FLUSHALL",)]
    cmds.append(("RPUSH", "l", *[rng.choice(POOL) for _ in range(rng.randrange(1, 12))]))
    members = rng.sample(POOL, rng.randrange(1, 10))
    zargs = []
    for m in members:
        zargs += [str(rng.randrange(-3, 4)), m]
    cmds.append(("ZADD", "z", *zargs))
    cmds.append(("SADD", "si", *[str(rng.randrange(-50, 50)) for _ in range(rng.randrange(1, 9))]))
    cmds.append(("SADD", "ss", *rng.sample(POOL, rng.randrange(1, 10))))
    cmds.append(("SET", "str", "v"))
    for e in POOL:
        x = rng.random()
        if x < 0.5:
            cmds.append(("SET", f"w_{e}", rng.choice(POOL + [str(rng.randrange(1000))] * 5)))
        elif x < 0.55:
            cmds.append(("RPUSH", f"w_{e}", "x"))
        if rng.random() < 0.5:
            cmds.append(("HSET", f"h_{e}", "f", rng.choice(POOL)))
    for q in cmds:
        assert g.cmd(*q)[:1] == r.cmd(*q)[:1], q


def random_sort(rng):
    key = rng.choice(["l", "l", "z", "si", "ss", "nokey", "str"])
    args = ["SORT_RO" if rng.random() < 0.15 else "SORT", key]
    for _ in range(rng.randrange(0, 5)):
        x = rng.random()
        if x < 0.15:
            args.append(rng.choice(["ASC", "DESC", "desc"]))
        elif x < 0.3:
            args.append("ALPHA")
        elif x < 0.45:
            a, b = rng.choice([(0, 3), (1, 2), (-1, 2), (2, -1), (0, 0), (5, 100), (1, -5)])
            if rng.random() < 0.05:
                a = "x"
            args += ["LIMIT", str(a), str(b)]
        elif x < 0.65:
            args += ["BY", rng.choice(["w_*", "h_*->f", "nosort", "w_*->", "*", "h_*->nofield"])]
        elif x < 0.85:
            args += ["GET", rng.choice(["#", "w_*", "h_*->f", "nope", "*"])]
        elif x < 0.95:
            args += ["STORE", "dst"]
        else:
            args.append(rng.choice(["BOGUS", "LIMIT", "BY", "GET"]))
    return args, options(args)


def options(args):
    """What SORT makes of args, read as Redis's parser reads them."""
    meta = {"key": args[1], "alpha": False, "sortby": False, "constant": False,
            "limit": False, "store": False}
    j = 2
    while j < len(args):
        a, left = args[j].lower(), len(args) - j - 1
        if a == "alpha":
            meta["alpha"] = True
        elif a == "limit" and left >= 2:
            meta["limit"] = True
            j += 2
        elif a == "store" and left >= 1 and args[0] == "SORT":
            meta["store"] = True
            j += 1
        elif a == "by" and left >= 1:
            if "*" in args[j + 1]:
                meta["sortby"] = True
            else:
                meta["constant"] = True
            j += 1
        elif a == "get" and left >= 1:
            j += 1
        j += 1
    return meta


def ambiguous(meta):
    """Can Redis's order differ here among equal elements?"""
    if meta["constant"]:  # a constant BY, anywhere, means no sorting
        return meta["key"] == "ss" and not meta["store"]  # the set's own order
    if meta["alpha"] and meta["sortby"]:
        # ties between equal or missing BY values: input order (a set's,
        # a sorted set's dictionary's) or the partial sort's
        return meta["key"] != "l" or meta["limit"]
    return False


def same_elements(a, b, limited):
    """The same elements in any order; under LIMIT (ties at its edge may
    pick others) the same number of them."""
    da, db = decode(a), decode(b)
    if isinstance(da, list) and isinstance(db, list):
        if limited:
            return len(da) == len(db)
        return sorted(da, key=repr) == sorted(db, key=repr)
    return da == db


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("resp3", [False, True])
def test_random_sort_same_as_redis(pair, seed, resp3):  # noqa: F811
    g, r = pair
    if resp3:
        for c in (g, r):
            c.cmd("HELLO", "3")
    rng = random.Random(seed)
    checked = 0
    for rnd in range(12):
        load(g, r, rng)
        for i in range(25):
            args, meta = random_sort(rng)
            a, b = g.cmd(*args), r.cmd(*args)
            dst = [("LRANGE", "dst", "0", "-1"), ("EXISTS", "dst")]
            if ambiguous(meta):
                assert same_elements(a, b, meta["limit"]), (args, a, b)
                for q in dst:
                    assert same_elements(g.cmd(*q), r.cmd(*q), meta["limit"]), args
                for c in (g, r):
                    c.cmd("DEL", "dst")
                continue
            assert a == b, (rnd, i, args)
            for q in dst:
                assert g.cmd(*q) == r.cmd(*q), (args, q)
            checked += 1
    assert checked > 200  # most cases are compared byte for byte


def test_sort_keys_and_store_replaces(pair):  # noqa: F811
    g, r = pair
    script = [("RPUSH", "src", "3", "1", "2"), ("SET", "dst", "old"), ("EXPIRE", "dst", "100"),
              ("SORT", "src", "STORE", "dst"), ("TYPE", "dst"), ("TTL", "dst"),
              ("SORT", "src", "LIMIT", "5", "1", "STORE", "dst"), ("EXISTS", "dst"),
              ("COMMAND", "GETKEYS", "SORT", "src", "BY", "store", "STORE", "a", "LIMIT", "0", "1"),
              ("COMMAND", "GETKEYS", "SORT_RO", "src", "STORE", "x"),
              ("SORT", "src", "STORE", "src"), ("LRANGE", "src", "0", "-1"),
              # from a script, a set in its own order is sorted (Redis's CLIENT_SCRIPT)
              ("SADD", "set", *"qwertyuiopasdfg"),
              ("EVAL", "return redis.call('sort', KEYS[1], 'BY', 'nosort')", "1", "set"),
              ("EVAL", "return redis.call('sort', KEYS[1], 'BY', 'nosort', 'DESC')", "1", "set")]
    for q in script:
        assert g.cmd(*q) == r.cmd(*q), q
