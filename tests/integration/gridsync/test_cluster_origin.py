"""Read-through in cluster mode: a value the origin sends for a missing
key is written through the key's Raft group like a client's SET (on its
leader), never into some store directly, so every replica keeps the same
value.

Checked: after a GET that filled from the origin, each replica of the
key's group holds the value (read with READONLY through GETRANGE, which
never reads through, so a replica's own store is what answers), the
origin was asked once, and a key a client SET while it was being fetched
keeps the client's value on every replica."""
import time

import redis

from test_cluster import make_cluster  # noqa: F401  (fixture)
from test_origin import Origin, origin, origin_args  # noqa: F401  (fixture)


def replicas_of(c, key):
    """(the node that serves key, the nodes whose CLUSTER INFO lists the
    group that serves it)."""
    owner = None
    for nd in c.nodes:
        try:
            nd.client().execute_command("GETRANGE", key, 0, 0)
            owner = nd
            break
        except redis.ResponseError:
            continue
    group = f"{owner.host}:{owner.port}"
    return owner, [nd for nd in c.nodes if group in c.groups(nd)]


def wait_value(nodes, key, want, timeout=60):
    deadline = time.monotonic() + timeout
    seen = {}
    while time.monotonic() < deadline:
        seen = {}
        for nd in nodes:
            r = nd.client(decode_responses=True)
            r.execute_command("READONLY")
            seen[nd.port] = r.execute_command("GETRANGE", key, 0, -1)
        if all(v == want for v in seen.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"{key}: {seen}, want {want!r} on every replica")


def test_fill_is_replicated_to_every_replica(make_cluster, origin):
    c = make_cluster(3, extra=origin_args(origin))
    c.wait_settled()
    key = "fill-a"
    assert c.call("GET", key) == "value-of-" + key
    _, members = replicas_of(c, key)
    assert len(members) == 3
    wait_value(members, key, "value-of-" + key)
    assert origin.count(key) == 1
    # Kept: the next GET is a hit, the origin is not asked again.
    assert c.call("GET", key) == "value-of-" + key
    assert origin.count(key) == 1


def test_a_write_during_the_fetch_wins_everywhere(make_cluster, origin):
    c = make_cluster(3, extra=origin_args(origin))
    c.wait_settled()
    key = "block-b"
    owner, members = replicas_of(c, key)
    # The GET waits on the origin (block-* answers once released).
    getter = owner.client(decode_responses=True, socket_timeout=60)
    conn = getter.connection_pool.get_connection("GET")
    conn.send_command("GET", key)
    deadline = time.monotonic() + 30
    while origin.count(key) == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert origin.count(key) == 1
    assert c.call("SET", key, "client") is True
    origin.release.set()
    assert conn.read_response() == "value-of-" + key  # served as fetched
    getter.connection_pool.release(conn)
    wait_value(members, key, "client")
