"""MONITOR (gridsync/commands/monitor.h): the feed matches Redis 7.0's line
for line (only the timestamp and the client's address differ), with
redis-py's Monitor and redis-cli's monitor mode as real consumers; a
monitor that goes away leaves the others served; in cluster mode a write
is shown by the node the client sent it to."""
import re
import socket
import subprocess
import time

import redis

from test_cluster import make_cluster  # noqa: F401  (fixture)
from test_vs_redis import redis_port  # noqa: F401  (fixture)

STAMP = re.compile(rb"\+\d+\.\d{6} \[(\d+) 127\.0\.0\.1:\d+\]")

# What a client sends while another monitors; some are shown, some not.
SEQUENCE = [
    b'SET k "a b\\x01"\r\n',
    b"SELECT 3\r\n",
    b"SET k 12345\r\n",
    b"AUTH foo\r\n",                      # shown redacted, although refused
    b"HELLO 2 AUTH default pw\r\n",
    b"CONFIG GET maxclients\r\n",         # admin: never shown
    b"NOPE\r\n",                          # unknown: refused before it runs
    b"GET\r\n",                           # wrong arity: refused
    b"MULTI\r\n", b"INCR n\r\n", b"EXEC\r\n",  # INCR shown when EXEC runs it
    b"CLIENT SETNAME x\r\n",
    b"CLIENT LIST\r\n",                   # an admin subcommand
    b"CLIENT NOPE\r\n",
    b"SLOWLOG GET\r\n",
    b"INFO server\r\n",
    b"*3\r\n$3\r\nSET\r\n$2\r\nk2\r\n$7\r\n\xff\"\\\n\t\r\x07\r\n",  # every escape
    b"HSET h f v\r\n",
    b"SET k v EX\r\n",                    # runs, answers an error: shown
    b"MULTI\r\nMONITOR\r\nEXEC\r\n",      # not inside a transaction
    b"LPUSH l a\r\n",
]


def read_until(s, marker, timeout=20):
    """What s receives up to and including marker (waits at most timeout)."""
    s.settimeout(timeout)
    out = b""
    while marker not in out:
        d = s.recv(65536)
        assert d, f"closed before {marker!r}: {out!r}"
        out += d
    assert out.endswith(marker), out
    return out


END = b'"ECHO" "end-of-feed"\r\n'


def session(port):
    """The monitor's view of SEQUENCE, and what the monitor itself gets."""
    m = socket.create_connection(("127.0.0.1", port), timeout=10)
    c = socket.create_connection(("127.0.0.1", port), timeout=10)
    # MONITOR twice (the second is not answered at all), then a PING of
    # its own and two commands it may not run
    m.sendall(b"MONITOR\r\nMONITOR\r\nPING\r\nGET x\r\nPUBLISH c m\r\n")
    own = read_until(m, b"keyspace\r\n-ERR Replica can't interact with the keyspace\r\n")
    seen = [b"own", STAMP.sub(rb"+T [\1 ADDR]", own)]
    c.sendall(b"".join(SEQUENCE) + b"ECHO end-of-feed\r\n")
    read_until(c, b"$11\r\nend-of-feed\r\n")
    seen += [b"feed", STAMP.sub(rb"+T [\1 ADDR]", read_until(m, END))]
    c.sendall(b"CLIENT LIST\r\n")
    listing = read_until(c, b"\n\r\n")
    seen += [b"flags", b" ".join(sorted(re.findall(rb"flags=\w+", listing)))]
    m.close()
    c.close()
    return seen


def test_the_feed_is_redis_s(server, redis_port):  # noqa: F811
    ours, theirs = session(server.port), session(redis_port)
    assert ours == theirs
    assert ours[1] == b'+OK\r\n+PONG\r\n+T [0 ADDR] "PING"\r\n' + \
        b"-ERR Replica can't interact with the keyspace\r\n" * 2
    feed = ours[ours.index(b"feed") + 1]
    assert b'+T [3 ADDR] "INCR" "n"\r\n+T [3 ADDR] "EXEC"\r\n' in feed
    assert b'"SET" "k2" "\\xff\\"\\\\\\n\\t\\r\\a"' in feed
    assert b"CONFIG" not in feed and b"NOPE" not in feed and b"pw" not in feed
    assert ours[ours.index(b"flags") + 1] == b"flags=N flags=O"


def test_redis_py_monitor(server):
    r = server.client(decode_responses=True)
    with r.monitor() as m:
        other = server.client(decode_responses=True)
        other.execute_command("SELECT", 2)
        other.set("greeting", "hello world")
        cmds = [m.next_command() for _ in range(2)]
        other.close()
    assert cmds[0]["command"] == "SELECT 2"
    assert cmds[1]["command"] == "SET greeting hello world" and cmds[1]["db"] == 2, cmds
    assert cmds[1]["client_address"] == "127.0.0.1"
    r.close()


def test_redis_cli_monitor_and_a_vanishing_monitor(server):
    cli = subprocess.Popen(["redis-cli", "-p", str(server.port), "monitor"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        r = server.client(decode_responses=True)
        deadline = time.monotonic() + 20
        while "flags=O" not in r.execute_command("CLIENT", "LIST"):
            assert time.monotonic() < deadline, "redis-cli did not start monitoring"
            time.sleep(0.02)
        # monitors that vanish in the middle, and one that never reads
        gone = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
        for s in gone:
            s.sendall(b"MONITOR\r\n")
        deadline = time.monotonic() + 20
        while r.execute_command("CLIENT", "LIST").count("flags=O") < 4:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        gone[0].close()
        for i in range(200):
            assert r.set(f"k{i}", "v" * 100)
        gone[1].close()
        assert r.get("k199") == "v" * 100
        r.close()
    finally:
        cli.terminate()
        out = cli.communicate(timeout=10)[0].decode()
    assert out.splitlines()[0] == "OK"
    assert re.search(r'^\d+\.\d{6} \[0 127\.0\.0\.1:\d+\] "SET" "k199" "v{100}"$', out, re.M), out
    assert server.alive()
    gone[2].close()


def test_cluster_writes_are_shown_by_the_node_that_took_them(make_cluster):  # noqa: F811
    c = make_cluster(3)
    port = c.nodes[0].port
    for _ in range(50):  # until the write lands where the monitor is (leaders may move)
        node = next(nd for nd in c.nodes if nd.port == port)
        m = socket.create_connection(("127.0.0.1", node.port), timeout=10)
        m.sendall(b"MONITOR\r\n")
        assert read_until(m, b"+OK\r\n") == b"+OK\r\n"
        r = node.client(decode_responses=True)
        try:
            assert r.set("mon:key", "v1")
            assert r.get("mon:key") == "v1"
            break
        except redis.ResponseError as e:
            assert str(e).startswith(("MOVED", "TRYAGAIN", "CLUSTERDOWN")), e
            if str(e).startswith("MOVED"):
                port = int(str(e).rsplit(":", 1)[1])
            m.close()
            time.sleep(0.1)
        finally:
            r.close()
    else:
        raise AssertionError("the write never landed on one node")
    feed = STAMP.sub(rb"+T [\1 ADDR]", read_until(m, b'"GET" "mon:key"\r\n'))
    m.close()
    assert b'+T [0 ADDR] "SET" "mon:key" "v1"\r\n' in feed, feed
    assert b'+T [0 ADDR] "GET" "mon:key"\r\n' in feed, feed
    assert feed.count(b'"SET" "mon:key"') == 1, feed
