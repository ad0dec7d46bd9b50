"""Key space and expiry commands through redis-py."""
import time

import pytest
import redis


def test_del_unlink_exists_type(r):
    r.mset({"a": "1", "b": "2", "c": "3"})
    assert r.exists("a", "a", "zz") == 2
    assert r.delete("a", "zz") == 1
    assert r.unlink("b", "c") == 2
    assert r.exists("a", "b", "c") == 0
    r.set("s", "v")
    assert r.type("s") == "string"
    assert r.type("none") == "none"


def test_rename_renamenx_copy(r):
    r.set("src", "v", ex=100)
    assert r.rename("src", "dst") is True
    assert r.get("dst") == "v"
    assert r.ttl("dst") > 0
    assert r.exists("src") == 0
    with pytest.raises(redis.ResponseError, match="^no such key$"):
        r.rename("src", "x")
    assert r.rename("dst", "dst") is True
    r.set("other", "o")
    assert r.renamenx("dst", "other") is False
    assert r.renamenx("dst", "fresh") is True
    assert r.get("fresh") == "v"
    assert r.copy("fresh", "copy") is True
    assert r.get("copy") == "v"
    assert r.copy("fresh", "copy") is False
    assert r.copy("fresh", "copy", replace=True) is True
    assert r.copy("missing", "copy") is False
    with pytest.raises(redis.ResponseError,
                       match="^source and destination objects are the same$"):
        r.copy("fresh", "fresh")
    with pytest.raises(redis.ResponseError, match="^DB index is out of range$"):
        r.execute_command("COPY", "fresh", "x", "DB", "16")


def test_keys_scan_randomkey_dbsize(r):
    names = {f"user:{i}" for i in range(300)} | {"other"}
    r.mset({k: "v" for k in names})
    assert r.dbsize() == 301
    assert set(r.keys("*")) == names
    assert set(r.keys("user:1?")) == {f"user:{i}" for i in range(10, 20)}
    seen = set()
    cursor = 0
    for _ in range(10000):
        cursor, batch = r.scan(cursor, match="user:*", count=20)
        seen.update(batch)
        if cursor == 0:
            break
    assert cursor == 0
    assert seen == names - {"other"}
    assert set(r.scan_iter(count=7)) == names
    assert r.randomkey() in names
    with pytest.raises(redis.ResponseError, match="^invalid cursor$"):
        r.execute_command("SCAN", "abc")
    with pytest.raises(redis.ResponseError, match="^syntax error$"):
        r.execute_command("SCAN", "0", "COUNT", "0")
    assert r.flushdb() is True
    assert r.dbsize() == 0
    assert r.randomkey() is None
    r.set("x", "1")
    assert r.flushall() is True
    assert r.dbsize() == 0


def test_select(r, raw):
    assert raw.execute_command("SELECT", "0") == "OK"
    assert raw.execute_command("SELECT", "15") == "OK"  # 16 databases by default
    with pytest.raises(redis.ResponseError, match="^DB index is out of range$"):
        r.execute_command("SELECT", "16")
    with pytest.raises(redis.ResponseError, match="^value is not an integer or out of range$"):
        r.execute_command("SELECT", "x")


def test_expire_family(r):
    r.set("k", "v")
    assert r.ttl("k") == -1
    assert r.ttl("none") == -2
    assert r.pttl("none") == -2
    assert r.expire("k", 100) is True
    assert 99 <= r.ttl("k") <= 100
    assert r.pexpire("k", 200000) is True
    assert 199000 <= r.pttl("k") <= 200000
    assert r.expireat("k", int(time.time()) + 300) is True
    assert 298 <= r.ttl("k") <= 300
    assert r.pexpireat("k", int(time.time() * 1000) + 400000) is True
    assert 398 <= r.ttl("k") <= 400
    assert r.persist("k") is True
    assert r.persist("k") is False
    assert r.ttl("k") == -1
    assert r.expire("none", 10) is False
    # NX / XX / GT / LT (Redis 7)
    assert r.execute_command("EXPIRE", "k", "100", "XX") == 0
    assert r.execute_command("EXPIRE", "k", "100", "NX") == 1
    assert r.execute_command("EXPIRE", "k", "200", "NX") == 0
    assert r.execute_command("EXPIRE", "k", "50", "GT") == 0
    assert r.execute_command("EXPIRE", "k", "200", "GT") == 1
    assert r.execute_command("EXPIRE", "k", "300", "LT") == 0
    assert r.execute_command("EXPIRE", "k", "10", "LT") == 1
    assert r.ttl("k") <= 10
    r.set("p", "v")
    assert r.execute_command("EXPIRE", "p", "10", "GT") == 0  # no TTL = infinite
    assert r.execute_command("EXPIRE", "p", "10", "LT") == 1
    with pytest.raises(redis.ResponseError,
                       match="^NX and XX, GT or LT options at the same time are not compatible$"):
        r.execute_command("EXPIRE", "k", "10", "NX", "XX")
    with pytest.raises(redis.ResponseError,
                       match="^GT and LT options at the same time are not compatible$"):
        r.execute_command("EXPIRE", "k", "10", "GT", "LT")
    with pytest.raises(redis.ResponseError, match="^Unsupported option foo$"):
        r.execute_command("EXPIRE", "k", "10", "foo")
    with pytest.raises(redis.ResponseError, match="^invalid expire time in 'expire' command$"):
        r.execute_command("EXPIRE", "k", "9223372036854775807")
    # a time in the past deletes the key
    assert r.expire("k", -1) is True
    assert r.exists("k") == 0


def test_lazy_expiry(r):
    r.set("k", "v", px=50)
    deadline = time.monotonic() + 10
    while r.get("k") is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert r.get("k") is None
    assert r.exists("k") == 0


def test_active_expiry(make_server):
    s = make_server("--hz", "50")
    c = s.client(decode_responses=True)
    c.mset({f"k{i}": "v" for i in range(500)})
    for i in range(500):
        c.pexpire(f"k{i}", 30)
    c.set("stays", "v")
    # Without touching the keys, the expiry timer removes them.
    deadline = time.monotonic() + 20
    while c.dbsize() > 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert c.dbsize() == 1
    assert int(c.info("stats")["expired_keys"]) == 500
    assert c.get("stays") == "v"
    c.close()
