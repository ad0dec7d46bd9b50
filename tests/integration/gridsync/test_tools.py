"""Real Redis tools against the node (redis-cli, redis-benchmark), memory
limits with eviction, and clean shutdown (SHUTDOWN, SIGTERM, SIGINT)."""
import shutil
import signal
import subprocess

import pytest
import redis


def tool(name):
    path = shutil.which(name)
    if not path:
        pytest.skip(f"{name} not installed")
    return path


def cli(server, *args, timeout=30):
    out = subprocess.run([tool("redis-cli"), "-p", str(server.port), *args],
                         capture_output=True, timeout=timeout)
    return out.returncode, out.stdout.decode(errors="replace")


def test_redis_cli(server):
    assert cli(server, "PING") == (0, "PONG\n")
    assert cli(server, "SET", "k", "hello")[1] == "OK\n"
    assert cli(server, "--no-raw", "GET", "k")[1] == '"hello"\n'
    assert cli(server, "--no-raw", "GET", "nosuch")[1] == "(nil)\n"
    assert cli(server, "--no-raw", "INCR", "n")[1] == "(integer) 1\n"
    rc, out = cli(server, "COMMAND", "DOCS", "get")
    assert rc == 0 and "Get the value of a key" in out
    rc, out = cli(server, "NOSUCH", "x")
    assert "unknown command 'NOSUCH'" in out
    # RESP3 through redis-cli
    rc, out = cli(server, "-3", "HELLO", "3")
    assert rc == 0 and "proto" in out
    # interactive mode reads COMMAND DOCS at start-up; fed from stdin here
    out = subprocess.run([tool("redis-cli"), "-p", str(server.port)], input=b"PING\nGET k\n",
                         capture_output=True, timeout=30)
    assert out.returncode == 0
    assert out.stdout.decode() == "PONG\nhello\n"


def test_redis_cli_bigkeys_and_hotkeys(server):
    """--bigkeys (SCAN, TYPE, STRLEN/LLEN/...) finds the biggest key of each
    type; --hotkeys asks OBJECT FREQ, which answers Redis's "no LFU policy"
    error here as Redis does under an LRU policy, and redis-cli says so."""
    c = server.client()
    c.set("s1", "hello")
    c.set("s2", "x" * 100)
    c.rpush("l1", "a", "b", "c")
    c.hset("h1", mapping={"a": "1", "b": "2"})
    c.sadd("st", "a")
    c.zadd("z", {"a": 1, "b": 2, "c": 3, "d": 4})
    rc, out = cli(server, "--bigkeys")
    assert rc == 0, out
    assert "Sampled 6 keys in the keyspace!" in out
    for line in ('Biggest string found \'"s2"\' has 100 bytes',
                 'Biggest   list found \'"l1"\' has 3 items',
                 'Biggest   hash found \'"h1"\' has 2 fields',
                 'Biggest    set found \'"st"\' has 1 members',
                 'Biggest   zset found \'"z"\' has 4 members'):
        assert line in out, out
    out = subprocess.run([tool("redis-cli"), "-p", str(server.port), "--hotkeys"],
                         capture_output=True, timeout=30)
    err = out.stderr.decode(errors="replace") + out.stdout.decode(errors="replace")
    assert "An LFU maxmemory policy is not selected" in err, err


@pytest.mark.parametrize("pipeline", ["1", "16"])
def test_redis_benchmark(server, pipeline):
    out = subprocess.run([tool("redis-benchmark"), "-p", str(server.port), "-q", "-n", "2000",
                          "-t", "ping,set,get,incr,mset", "-P", pipeline],
                         capture_output=True, timeout=300)
    text = out.stdout.decode(errors="replace") + out.stderr.decode(errors="replace")
    assert out.returncode == 0, text
    assert "ERR" not in text
    for name in ("PING_INLINE", "PING_MBULK", "SET", "GET", "INCR", "MSET"):
        assert f"{name}" in text
    assert server.alive()


def test_maxmemory_evicts_and_counts(make_server):
    server = make_server("--maxmemory", "2mb", "--maxmemory-policy", "slru")
    c = server.client()
    value = b"v" * 1000
    for i in range(10000):  # about 10 MB of data into a 2 MB limit
        c.set(f"key:{i}", value)
    info = c.info()
    assert info["evicted_keys"] > 0
    assert info["used_memory"] <= 2 * 1024 * 1024 + 64 * 1024
    assert c.dbsize() < 10000
    assert c.get("key:9999") == value  # the newest is still there
    c.close()


def test_maxmemory_noeviction_refuses_writes(make_server):
    server = make_server("--maxmemory", "1mb", "--maxmemory-policy", "noeviction")
    c = server.client()
    with pytest.raises(redis.ResponseError) as e:
        for i in range(10000):
            c.set(f"key:{i}", b"v" * 1000)
    assert str(e.value) == "OOM command not allowed when used memory > 'maxmemory'."
    # reads and deletes still work
    assert c.get("key:0") == b"v" * 1000
    assert c.delete("key:0") == 1
    assert c.info("stats")["evicted_keys"] == 0
    c.close()


def test_shutdown_command(make_server):
    server = make_server()
    c = server.client()
    c.set("k", "v")
    c.shutdown(nosave=True)  # redis-py takes the closed connection as success
    assert server.proc.wait(timeout=10) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_exits_cleanly(make_server, sig):
    server = make_server()
    clients = [server.client() for _ in range(5)]
    for i, c in enumerate(clients):
        c.set(f"k{i}", "v")
    assert server.stop(sig) == 0
    for c in clients:
        c.close()


def test_redis_cli_interactive_help(server):
    """Interactive redis-cli loads its help from COMMAND DOCS at start-up;
    run it on a pseudo-terminal and ask for help on SET."""
    import os
    import pty
    import select
    import time

    path = tool("redis-cli")
    pid, fd = pty.fork()
    if pid == 0:  # child
        os.environ["TERM"] = "dumb"
        os.execv(path, [path, "-p", str(server.port)])
    out = b""

    def pump(marker, seconds=15):
        """Read until marker has appeared (bounded)."""
        nonlocal out
        end = time.monotonic() + seconds
        while marker not in out and time.monotonic() < end:
            ready, _, _ = select.select([fd], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(fd, 4096)
            except OSError:
                return
            out += data
            if b"\x1b[6n" in data:  # linenoise asks where the cursor is
                os.write(fd, b"\x1b[1;1R")

    try:
        prompt = f"127.0.0.1:{server.port}> ".encode()
        pump(prompt)
        for line, marker in ((b"set foo bar\r", b"OK"), (b"get foo\r", b'"bar"'),
                             (b"help set\r", b"group:")):
            os.write(fd, line)
            pump(marker)
        os.write(fd, b"quit\r")
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
    text = out.decode(errors="replace")
    assert '"bar"' in text
    assert "Set the string value of a key" in text
    assert server.alive()


def test_help_and_bad_options():
    from conftest import find_binary
    binary = find_binary("gridsync-server")
    out = subprocess.run([binary, "--help"], capture_output=True, timeout=30)
    assert out.returncode == 0
    text = out.stdout.decode()
    for option in ("--port", "--maxmemory", "--maxmemory-policy", "--requirepass",
                   "--client-query-buffer-limit", "--client-output-buffer-limit", "--timeout",
                   "--hz", "--maxclients", "--loglevel", "--bind"):
        assert option in text
    out = subprocess.run([binary, "--no-such-option", "1"], capture_output=True, timeout=30)
    assert out.returncode != 0
    assert b"no-such-option" in out.stderr
    out = subprocess.run([binary, "--maxmemory-policy", "random"], capture_output=True,
                         timeout=30)
    assert out.returncode != 0


def test_config_file(make_server, tmp_path):
    conf = tmp_path / "node.conf"
    conf.write_text("# a GridSync node\n"
                    "maxmemory 5mb\n"
                    "maxmemory-policy allkeys-lru\n"
                    "requirepass \"s3cret\"\n"
                    "hz 20\n")
    server = make_server(str(conf), "--hz", "30")  # flags win over the file
    c = server.client(decode_responses=True, password="s3cret")
    assert c.config_get("maxmemory") == {"maxmemory": str(5 * 1024 * 1024)}
    assert c.config_get("maxmemory-policy") == {"maxmemory-policy": "allkeys-lru"}
    assert c.config_get("hz") == {"hz": "30"}
    assert c.info("server")["config_file"] == str(conf)
    c.close()
