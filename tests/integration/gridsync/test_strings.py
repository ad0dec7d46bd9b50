"""String commands through redis-py, checked against Redis's semantics and
error texts."""
import time

import pytest
import redis


def test_get_set(r):
    assert r.get("missing") is None
    assert r.set("k", "v") is True
    assert r.get("k") == "v"
    assert r.set("k", "w") is True
    assert r.get("k") == "w"
    r.set("bin", b"\x00\xff\r\n")
    assert r.execute_command("STRLEN", "bin") == 4


def test_set_options(r, raw):
    assert r.set("k", "1", nx=True) is True
    assert r.set("k", "2", nx=True) is None
    assert r.get("k") == "1"
    assert r.set("k", "3", xx=True) is True
    assert r.set("nokey", "3", xx=True) is None
    assert r.exists("nokey") == 0
    assert r.set("k", "4", get=True) == "3"
    assert r.set("new", "x", get=True) is None
    assert r.get("new") == "x"
    # NX with GET (Redis 7): returns the old value and does not set
    assert raw.execute_command("SET", "k", "5", "NX", "GET") == "4"
    assert r.get("k") == "4"


def test_set_expire_options(r):
    r.set("ex", "v", ex=100)
    assert 99 <= r.ttl("ex") <= 100
    r.set("px", "v", px=100000)
    assert 99000 <= r.pttl("px") <= 100000
    at = int(time.time()) + 200
    r.set("exat", "v", exat=at)
    assert 198 <= r.ttl("exat") <= 200
    r.set("pxat", "v", pxat=at * 1000)
    assert 198 <= r.ttl("pxat") <= 200
    r.set("ex", "w", keepttl=True)
    assert r.ttl("ex") > 0
    r.set("ex", "w")
    assert r.ttl("ex") == -1


def test_set_errors(r):
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SET", "k", "v", "NX", "XX")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SET", "k", "v", "EX", "10", "PX", "100")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SET", "k", "v", "EX")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SET", "k", "v", "KEEPTTL", "EX", "10")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("SET", "k", "v", "EX", "ten")
    with pytest.raises(redis.ResponseError, match="^invalid expire time in 'set' command$"):
        r.execute_command("SET", "k", "v", "EX", "0")
    with pytest.raises(redis.ResponseError, match="^invalid expire time in 'set' command$"):
        r.execute_command("SET", "k", "v", "PX", "-5")
    with pytest.raises(redis.ResponseError,
                       match="^wrong number of arguments for 'set' command$"):
        r.execute_command("SET", "k")


def test_setnx_setex_psetex_getset(r):
    assert r.setnx("a", "1") is True
    assert r.setnx("a", "2") is False
    assert r.get("a") == "1"
    assert r.setex("b", 50, "v") is True
    assert 49 <= r.ttl("b") <= 50
    assert r.psetex("c", 50000, "v") is True
    assert 49000 <= r.pttl("c") <= 50000
    with pytest.raises(redis.ResponseError, match="^invalid expire time in 'setex' command$"):
        r.setex("b", -1, "v")
    with pytest.raises(redis.ResponseError, match="^invalid expire time in 'psetex' command$"):
        r.psetex("b", 0, "v")
    assert r.getset("a", "new") == "1"
    assert r.getset("none", "x") is None
    assert r.ttl("b") > 0
    r.getset("b", "w")
    assert r.ttl("b") == -1


def test_getdel_getex(r):
    r.set("k", "v")
    assert r.getdel("k") == "v"
    assert r.getdel("k") is None
    r.set("k", "v")
    assert r.getex("k", ex=100) == "v"
    assert 99 <= r.ttl("k") <= 100
    assert r.getex("k", persist=True) == "v"
    assert r.ttl("k") == -1
    assert r.getex("k", px=50000) == "v"
    assert r.pttl("k") > 0
    assert r.getex("missing", ex=10) is None
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("GETEX", "k", "EX", "10", "PERSIST")
    # an expire time in the past deletes the key, after replying its value
    assert r.execute_command("GETEX", "k", "PXAT", "1") == "v"
    assert r.exists("k") == 0


def test_mget_mset_msetnx(r):
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "b", "c") == ["1", "2", None]
    assert r.msetnx({"c": "3", "d": "4"}) is True
    assert r.msetnx({"d": "x", "e": "5"}) is False
    assert r.get("e") is None
    with pytest.raises(redis.ResponseError,
                       match="^wrong number of arguments for 'mset' command$"):
        r.execute_command("MSET", "a", "1", "b")
    with pytest.raises(redis.ResponseError,
                       match="^wrong number of arguments for 'msetnx' command$"):
        r.execute_command("MSETNX", "a")


def test_incr_family(r):
    assert r.incr("n") == 1
    assert r.incr("n", 10) == 11
    assert r.decr("n") == 10
    assert r.decr("n", 20) == -10
    r.set("n", "9223372036854775806")
    assert r.incr("n") == 9223372036854775807
    with pytest.raises(redis.ResponseError, match="^increment or decrement would overflow$"):
        r.incr("n")
    r.set("s", "abc")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.incr("s")
    r.set("s", "01")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.incr("s")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("INCRBY", "n", "1.5")
    with pytest.raises(redis.ResponseError, match="^decrement would overflow$"):
        r.execute_command("DECRBY", "x", "-9223372036854775808")
    r.set("t", "5", ex=100)
    r.incr("t")
    assert r.ttl("t") > 0  # INCR keeps the TTL


def test_incrbyfloat(r, raw):
    assert r.incrbyfloat("f", 10.5) == 10.5
    assert raw.execute_command("INCRBYFLOAT", "f", "0.1") == "10.6"
    assert raw.execute_command("INCRBYFLOAT", "f", "-10.6") == "0"
    r.set("f", "5.0e3")
    assert raw.execute_command("INCRBYFLOAT", "f", "2.0e2") == "5200"
    r.set("s", "abc")
    with pytest.raises(redis.ResponseError, match="^value is not a valid float$"):
        r.incrbyfloat("s", 1)
    with pytest.raises(redis.ResponseError, match="^value is not a valid float$"):
        r.execute_command("INCRBYFLOAT", "f", "x")
    with pytest.raises(redis.ResponseError, match="^increment would produce NaN or Infinity$"):
        r.execute_command("INCRBYFLOAT", "f", "inf")


def test_append_strlen_ranges(r):
    assert r.append("a", "Hello") == 5
    assert r.append("a", " World") == 11
    assert r.get("a") == "Hello World"
    assert r.strlen("a") == 11
    assert r.strlen("none") == 0
    assert r.getrange("a", 0, 4) == "Hello"
    assert r.getrange("a", -5, -1) == "World"
    assert r.getrange("a", 5, 1) == ""
    assert r.getrange("a", -1, -5) == ""
    assert r.getrange("a", 0, 100) == "Hello World"
    assert r.getrange("none", 0, 10) == ""
    assert r.setrange("a", 6, "Redis") == 11
    assert r.get("a") == "Hello Redis"
    assert r.setrange("pad", 3, "x") == 4
    assert r.get("pad") == "\x00\x00\x00x"
    assert r.setrange("none2", 5, "") == 0
    assert r.exists("none2") == 0
    with pytest.raises(redis.ResponseError, match="^offset is out of range$"):
        r.setrange("a", -1, "x")
    with pytest.raises(redis.ResponseError,
                       match=r"^string exceeds maximum allowed size \(proto-max-bulk-len\)$"):
        r.setrange("a", 600 * 1024 * 1024, "x")
