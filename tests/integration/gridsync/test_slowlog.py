"""SLOWLOG and LATENCY side by side with Redis 7.0. With
slowlog-log-slower-than 0 every command is logged, so the entries (their
arguments, cut as Redis cuts them, and client names) must be the same;
ids, times, durations and client ports are not compared."""
import pytest

from test_vs_redis import Conn, compare, decode, pair, redis_port  # noqa: F401 (fixtures)


def entries(c):
    out = []
    for e in decode(c.cmd("SLOWLOG", "GET", "-1")):
        assert len(e) == 6 and all(isinstance(x, int) for x in e[:3])
        assert e[4].startswith(b"127.0.0.1:")
        out.append((e[3], e[5]))
    return out


def test_slowlog_entries_same_as_redis(pair):  # noqa: F811 (fixture)
    g, r = pair
    seq = [["CLIENT", "SETNAME", "logger"], ["SET", "k", "v" * 300],
           ["MSET", *[f"a{i}" for i in range(50)]], ["GET", "k"], ["NOSUCH", "x"], ["AUTH", "x"],
           ["SLOWLOG", "LEN"]]
    for c in pair:
        assert c.cmd("CONFIG", "SET", "slowlog-log-slower-than", "0") == b"+OK\r\n"
        assert c.cmd("SLOWLOG", "RESET") == b"+OK\r\n"
        for cmd in seq:
            c.cmd(*cmd)
    a, b = entries(g), entries(r)
    assert a == b
    assert any(len(args) == 32 and args[-1] == b"... (20 more arguments)" for args, _ in a)
    assert any(args[0] == b"SET" and args[2].endswith(b"... (172 more bytes)") for args, _ in a)
    compare(pair, [["SLOWLOG", "LEN"], ["CONFIG", "SET", "slowlog-max-len", "3"],
                   ["SET", "x", "1"], ["SLOWLOG", "LEN"], ["SLOWLOG", "GET", "-2"],
                   ["SLOWLOG", "GET", "x"], ["SLOWLOG", "GET", "1", "2"], ["SLOWLOG", "LEN", "x"],
                   ["SLOWLOG", "FOO"], ["SLOWLOG", "HELP"]])
    assert len(decode(g.cmd("SLOWLOG", "GET", "1"))) == 1
    for c in pair:
        c.cmd("CONFIG", "SET", "slowlog-log-slower-than", "10000")
        c.cmd("CONFIG", "SET", "slowlog-max-len", "128")
        c.cmd("SLOWLOG", "RESET")


def test_slowlog_threshold_off(pair):  # noqa: F811 (fixture)
    compare(pair, [["CONFIG", "SET", "slowlog-log-slower-than", "-1"], ["SLOWLOG", "RESET"],
                   ["SET", "a", "b"], ["SLOWLOG", "LEN"],
                   ["CONFIG", "SET", "slowlog-log-slower-than", "10000"]])


def test_latency_same_as_redis(pair):  # noqa: F811 (fixture)
    compare(pair, [["LATENCY", "LATEST"], ["LATENCY", "RESET"], ["LATENCY", "RESET", "command"],
                   ["LATENCY", "LATEST", "x"], ["LATENCY", "FOO"],
                   ["CONFIG", "SET", "latency-monitor-threshold", "100"],
                   ["CONFIG", "GET", "latency-monitor-threshold"],
                   ["CONFIG", "SET", "latency-monitor-threshold", "0"]])
