"""RESET (Redis 7.0's resetCommand): the connection as it was when it
opened, without closing it. Each case is one pipelined request stream;
the whole reply stream must equal Redis's byte for byte."""
import re
import socket

import pytest

from test_vs_redis import redis_auth_port, redis_port  # noqa: F401  (fixtures)

CASES = {
    # database, name, RESP3, subscriptions
    "state": [b"SELECT 5", b"SET k5 x", b"CLIENT SETNAME n", b"HELLO 3", b"SUBSCRIBE ch",
              b"RESET", b"EXISTS k5", b"CLIENT GETNAME", b"GET nokey", b"PUBSUB NUMSUB ch",
              b"PING", b"SELECT 5", b"DEL k5"],
    # RESP2 subscribed mode lets RESET through
    "subscribed": [b"SUBSCRIBE a b", b"PSUBSCRIBE p*", b"RESET", b"PING", b"PUBSUB NUMPAT"],
    # transactions and watches
    "multi": [b"MULTI", b"SET a 1", b"RESET", b"EXEC", b"GET a"],
    "watch": [b"WATCH w", b"RESET", b"SET w 1", b"MULTI", b"PING", b"EXEC", b"DEL w"],
    # monitor mode ends
    "monitor": [b"MONITOR", b"RESET", b"GET x"],
    # CLIENT REPLY: OFF ends (RESET is answered); SKIP still drops RESET's reply
    "reply": [b"CLIENT REPLY OFF", b"PING", b"RESET", b"PING", b"CLIENT REPLY SKIP",
              b"RESET", b"PING"],
    "arity": [b"RESET now", b"PING"],
}


def stream(port, reqs, last=b"ECHO end"):
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    s.sendall(b"".join(r + b"\r\n" for r in reqs + [last]))
    out = b""
    while not out.endswith(b"$3\r\nend\r\n"):
        d = s.recv(65536)
        assert d, out
        out += d
    s.close()
    # HELLO's map names the server, its version and the connection's id
    return re.sub(rb"%7\r\n\$6\r\nserver\r\n.*?\$7\r\nmodules\r\n\*0\r\n", b"<HELLO>", out,
                  flags=re.S)


@pytest.mark.parametrize("name", sorted(CASES))
def test_reset_same_as_redis(server, redis_port, name):  # noqa: F811
    ours = stream(server.port, CASES[name])
    assert ours == stream(redis_port, CASES[name])
    assert b"+RESET\r\n" in ours or name in ("reply", "arity")
    assert name != "state" or b"<HELLO>" in ours


def test_reset_forgets_authentication_same_as_redis(make_server, redis_auth_port):  # noqa: F811
    g = make_server("--requirepass", "pw")
    reqs = [b"AUTH pw", b"GET x", b"RESET", b"GET x", b"AUTH pw", b"GET x"]
    ours = stream(g.port, reqs)
    assert ours == stream(redis_auth_port, reqs)
    assert ours.count(b"-NOAUTH") == 1
