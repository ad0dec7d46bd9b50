"""LCS (Redis 7.0's lcsCommand) side by side with redis-server: seeded
random strings and option sets, RESP2 and RESP3, raw replies byte for
byte (the matches' order, MINMATCHLEN, WITHMATCHLEN, the errors, a key of
another type), and the refusal of a table above proto-max-bulk-len."""
import random

import pytest

from test_vs_redis import pair, redis_port  # noqa: F401  (fixtures)

OPTIONS = ["IDX", "LEN", "WITHMATCHLEN", "MINMATCHLEN", "NOPE"]


def random_case(rng):
    opts = []
    for o in rng.sample(OPTIONS, rng.randrange(0, 4)):
        opts.append(o)
        if o == "MINMATCHLEN":
            opts.append(rng.choice(["0", "1", "2", "3", "-5", "x"]))
    alphabet = rng.choice([b"ab", b"abc\x00", b"ACGT"])
    a = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
    b = bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 40)))
    return a, b, opts


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("resp3", [False, True])
def test_random_lcs_same_as_redis(pair, seed, resp3):  # noqa: F811
    g, r = pair
    if resp3:
        for c in (g, r):
            c.cmd("HELLO", "3")
    rng = random.Random(seed)
    for _ in range(300):
        a, b, opts = random_case(rng)
        setup = [("SET", "a", a), ("SET", "b", b)]
        if rng.random() < 0.1:  # a missing key, or one of another type
            setup = [("DEL", "a"), ("SET", "b", b)] if rng.random() < 0.5 else \
                [("SET", "a", a), ("DEL", "b"), ("RPUSH", "b", "x")]
        for cmd in [("DEL", "b")] + setup:
            assert g.cmd(*cmd)[:1] == r.cmd(*cmd)[:1]
        q = ("LCS", "a", "b", *opts)
        assert g.cmd(*q) == r.cmd(*q), (q, a, b)


def test_lcs_refuses_a_table_above_proto_max_bulk_len(pair):  # noqa: F811
    g, r = pair
    for c in (g, r):
        assert c.cmd("CONFIG", "SET", "proto-max-bulk-len", "1mb") == b"+OK\r\n"
        c.cmd("SET", "a", "x" * 600)
        c.cmd("SET", "b", "x" * 600)
    try:
        ours = g.cmd("LCS", "a", "b")
        assert ours == r.cmd("LCS", "a", "b")
        assert ours.startswith(b"-ERR Insufficient memory, transient memory for LCS exceeds")
        assert g.cmd("LCS", "a", "b", "LEN") == r.cmd("LCS", "a", "b", "LEN")
    finally:
        for c in (g, r):
            c.cmd("CONFIG", "SET", "proto-max-bulk-len", "512mb")
