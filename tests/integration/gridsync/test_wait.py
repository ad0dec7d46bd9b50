"""WAIT (Redis 7.0's waitCommand) side by side with redis-server, which
has no replicas here either: the same replies for every argument error,
0 at once when no replica is asked for or inside MULTI, 0 after the
timeout (not before it), and a client waiting forever answered by
CLIENT UNBLOCK (0, or the UNBLOCKED error) and freed when it goes."""
import socket
import time

import pytest

from test_vs_redis import Conn, pair, redis_port  # noqa: F401  (fixtures)


@pytest.mark.parametrize("resp3", [False, True])
def test_wait_replies_as_redis(pair, resp3):  # noqa: F811
    g, r = pair
    if resp3:
        for c in (g, r):
            c.cmd("HELLO", "3")
    for q in [("SET", "k", "v"), ("WAIT", "0", "0"), ("WAIT", "-1", "0"), ("WAIT", "x", "0"),
              ("WAIT", "1", "x"), ("WAIT", "1", "-1"), ("WAIT", "1", "1.5"), ("WAIT", "1"),
              ("MULTI",), ("WAIT", "5", "0"), ("EXEC",)]:
        assert g.cmd(*q) == r.cmd(*q), q


def test_wait_times_out_after_its_timeout(pair):  # noqa: F811
    g, r = pair
    for c in (g, r):
        t0 = time.monotonic()
        assert c.cmd("WAIT", "1", "150") == b":0\r\n"
        assert time.monotonic() - t0 >= 0.14  # never before the timeout


def test_wait_forever_until_client_unblock(server, redis_port):  # noqa: F811
    for port in (server.port, redis_port):
        waiter, other = Conn(port), Conn(port)
        cid = waiter.cmd("CLIENT", "ID")[1:-2]
        waiter.s.sendall(b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$1\r\n0\r\n")
        deadline = time.monotonic() + 10
        while b"cmd=wait" not in other.cmd("CLIENT", "LIST", "ID", cid):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert other.cmd("CLIENT", "UNBLOCK", cid) == b":1\r\n"
        assert waiter.reply() == b":0\r\n"
        waiter.s.sendall(b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$1\r\n0\r\n")
        while b"cmd=wait" not in other.cmd("CLIENT", "LIST", "ID", cid):
            time.sleep(0.01)
        assert other.cmd("CLIENT", "UNBLOCK", cid, "ERROR") == b":1\r\n"
        assert waiter.reply() == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
        # a waiter that vanishes is forgotten
        waiter.s.sendall(b"*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$1\r\n0\r\n")
        while b"cmd=wait" not in other.cmd("CLIENT", "LIST", "ID", cid):
            time.sleep(0.01)
        waiter.s.shutdown(socket.SHUT_RDWR)
        waiter.close()
        while other.cmd("CLIENT", "UNBLOCK", cid) != b":0\r\n":
            assert time.monotonic() < deadline + 10
            time.sleep(0.01)
        assert other.cmd("PING") == b"+PONG\r\n"
        other.close()
