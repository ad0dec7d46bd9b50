"""Side by side with Redis 7.0 (issue 10's compatibility fixes): number
arguments with a NUL byte after the digits, glob classes whose last byte
is ']' or '-', in KEYS and SCAN MATCH. Reuses test_vs_redis's servers and
raw client, so the replies are compared byte for byte."""
import random

import pytest

from test_vs_redis import Conn, compare, decode, pair, redis_port  # noqa: F401 (fixtures)

NUL_CASES = [
    [["SET", "f", "42\0abc"], ["INCRBYFLOAT", "f", "1"], ["GET", "f"]],
    [["SET", "f", "42"], ["INCRBYFLOAT", "f", "1\0abc"], ["GET", "f"]],
    [["SET", "f", "42"], ["INCRBYFLOAT", "f", "1.5\0"], ["INCRBYFLOAT", "f", "\0"], ["GET", "f"]],
    [["SET", "i", "42\0abc"], ["INCR", "i"], ["INCRBY", "i", "1"], ["DECR", "i"], ["GET", "i"]],
    [["SET", "i", "42"], ["INCRBY", "i", "1\0"], ["DECRBY", "i", "1\0x"], ["GET", "i"]],
    [["SET", "k", "v"], ["EXPIRE", "k", "100\0"], ["PEXPIRE", "k", "5\0"], ["TTL", "k"]],
    [["SET", "k", "v", "EX", "10\0"], ["SETEX", "k", "10\0", "v"], ["GETRANGE", "k", "0\0", "1"]],
    [["SET", "k", "v"], ["SETRANGE", "k", "1\0", "x"], ["GETBIT", "k", "1\0"],
     ["SETBIT", "k", "1\0", "1"], ["BITCOUNT", "k", "0\0", "1"], ["GET", "k"]],
    [["SCAN", "0\0x"], ["SCAN", "0", "COUNT", "10\0"]],
]


@pytest.mark.parametrize("cmds", NUL_CASES, ids=[c[-1][0] + str(i) for i, c in
                                                  enumerate(NUL_CASES)])
def test_number_with_nul_same_as_redis(pair, cmds):  # noqa: F811 (fixture)
    compare(pair, cmds)


# Every case the issue names, then the ways a class can end.
GLOB_PATTERNS = ["k[1-]", "[a-]]", "[--]", "[a-]", "[-a]", "[]]", "[]a]", "[^]]", "[^-]", "[\\]]",
                 "[a-\\]", "[\\", "[", "[^", "k[", "k[1-", "[z-a]", "[A-C]", "*[-]*", "?[]-]?",
                 "k\\", "[[]", "*", "**", "*?", ""]
GLOB_KEYS = ["k1", "k-", "k]", "a", "]", "-", "^", "\\", "[", "ka", "b", "Z", "B", "k[1-]", "a-]]",
             "--", "k", "", "]]", "x-y", "k\\"]


def set_keys(pair, keys):
    for c in pair:
        for k in keys:
            assert c.cmd("SET", k, "v") == b"+OK\r\n"


def scan_match(c, pattern):
    seen, cursor = set(), b"0"
    while True:
        cursor, keys = decode(c.cmd("SCAN", cursor, "MATCH", pattern, "COUNT", "1000"))
        seen.update(keys)
        if cursor == b"0":
            return sorted(seen)


def test_glob_edges_same_as_redis(pair):  # noqa: F811 (fixture)
    set_keys(pair, GLOB_KEYS)
    g, r = pair
    for p in GLOB_PATTERNS:
        a, b = sorted(decode(g.cmd("KEYS", p))), sorted(decode(r.cmd("KEYS", p)))
        assert a == b, f"KEYS {p!r}: gridsync {a!r} redis {b!r}"
        a, b = scan_match(g, p), scan_match(r, p)
        assert a == b, f"SCAN MATCH {p!r}: gridsync {a!r} redis {b!r}"


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_random_globs_same_as_redis(pair, seed):  # noqa: F811 (fixture)
    """Random patterns over an alphabet of the bytes that mean something
    to stringmatchlen, against random keys over the same alphabet."""
    rnd = random.Random(seed)
    alphabet = "ab]-[^\\*?A"
    keys = {"".join(rnd.choice("ab]-[^\\A") for _ in range(rnd.randint(0, 4))) for _ in range(60)}
    set_keys(pair, sorted(keys))
    g, r = pair
    for _ in range(400):
        p = "".join(rnd.choice(alphabet) for _ in range(rnd.randint(1, 7)))
        a, b = sorted(decode(g.cmd("KEYS", p))), sorted(decode(r.cmd("KEYS", p)))
        assert a == b, f"KEYS {p!r}: gridsync {a!r} redis {b!r}"


# ---------------------------------------------------------------- INFO


def info_section(c, section):
    """INFO <section> as {name: {field: value}} (or {name: value})."""
    text = decode(c.cmd("INFO", section))
    out = {}
    for line in text.decode().split("\r\n"):
        if not line or line.startswith("#"):
            continue
        name, _, value = line.partition(":")
        if "=" in value:
            out[name] = dict(kv.split("=", 1) for kv in value.split(","))
        else:
            out[name] = value
    return out


STATS_SEQUENCE = [["SET", "a", "1"], ["GET", "a"], ["GET", "nokey"], ["INCR", "a"],
                  ["SET", "s", "x"], ["INCR", "s"], ["GET"], ["NOSUCHCMD"], ["LPUSH_NOT", "x"],
                  ["EXPIRE", "a", "x"], ["MGET", "a", "s"], ["SET", "a", "1", "NX", "XX"],
                  ["SET", "f", "1.5"], ["INCRBYFLOAT", "f", "x"],
                  # containers: counted per subcommand (`config|get`), an
                  # arity error as the subcommand's rejected call, an
                  # unknown subcommand under no command at all
                  ["CONFIG", "GET", "maxmemory"], ["CONFIG", "GET"], ["CONFIG", "NOPE"],
                  ["CLIENT", "ID"], ["OBJECT", "HELP"], ["SLOWLOG", "GET"],
                  ["SLOWLOG", "GET", "1", "2"], ["SLOWLOG", "LEN", "1"], ["SLOWLOG", "NOPE"],
                  ["PUBSUB", "CHANNELS"], ["PUBSUB", "NUMPAT", "1"],
                  ["PUBSUB", "CHANNELS", "a", "b"], ["LATENCY", "LATEST"],
                  ["LATENCY", "RESET"], ["LATENCY", "HELP", "x"],
                  ["MEMORY", "USAGE", "nokey"], ["COMMAND", "COUNT"]]


def test_commandstats_and_errorstats_same_as_redis(pair):  # noqa: F811 (fixture)
    """The same commands on both servers give the same calls, rejected
    and failed counts per command and subcommand and the same error codes
    (times differ)."""
    for c in pair:
        assert c.cmd("CONFIG", "RESETSTAT") == b"+OK\r\n"
        for cmd in STATS_SEQUENCE:
            c.cmd(*cmd)
    g, r = (info_section(c, "commandstats") for c in pair)
    def counts(stats):
        return {k: (v["calls"], v["rejected_calls"], v["failed_calls"]) for k, v in stats.items()
                if k != "cmdstat_config|resetstat"}
    assert counts(g) == counts(r)
    assert counts(g)["cmdstat_incr"] == ("2", "0", "1")
    assert counts(g)["cmdstat_config|get"] == ("1", "1", "0")
    assert "cmdstat_config" not in g
    assert info_section(pair[0], "errorstats") == info_section(pair[1], "errorstats")


def test_latencystats_and_cpu_have_redis_fields(pair):  # noqa: F811 (fixture)
    for c in pair:
        for cmd in STATS_SEQUENCE:
            c.cmd(*cmd)
    g, r = (info_section(c, "latencystats") for c in pair)
    assert "latency_percentiles_usec_get" in g
    assert set(g) <= set(r)
    assert "latency_percentiles_usec_config|get" in g
    for v in g.values():
        assert set(v) == {"p50", "p99", "p99.9"}
        assert float(v["p50"]) <= float(v["p99"]) <= float(v["p99.9"])
    g, r = (info_section(c, "cpu") for c in pair)
    assert set(g) == set(r)
    assert all(float(v) >= 0 for v in g.values())
    # The default INFO lists the same sections as Redis (CPU and
    # Errorstats among them), Commandstats only on request.
    sections = [line for line in decode(pair[0].cmd("INFO")).decode().split("\r\n")
                if line.startswith("#")]
    assert "# CPU" in sections and "# Errorstats" in sections
    assert "# Commandstats" not in sections
