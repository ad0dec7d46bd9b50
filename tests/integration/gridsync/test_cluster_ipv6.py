"""GridSync cluster mode on IPv6 loopback: three nodes bound to ::1 with
cluster-peers `[::1]:p1,[::1]:p2,[::1]:p3`, so the client port, the Raft
transport and the leadership hints all run over IPv6.

What is checked: writes and reads through redis-py's RedisCluster (which
parses CLUSTER SLOTS and follows MOVED); the reply shapes Redis gives an
IPv6 node (CLUSTER SLOTS: the bare address; CLUSTER NODES: `::1:port@bus`;
MOVED: `::1:port`); kill -9 of a slot's leader, then a write to that slot
is acknowledged by a new leader and no acknowledged write is lost.
Skipped only when ::1 is not configured on loopback."""
import random
import socket

import time

import pytest
import redis

from test_cluster import RAFT_OFFSET, key_slot, make_cluster  # noqa: F401 (fixture)


def v6_port_free(port):
    with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
        try:
            s.bind(("::1", port))
            return True
        except OSError:
            return False


def v6_base(n):
    for _ in range(200):
        base = random.randrange(10000, 32768 - RAFT_OFFSET - n)
        ports = [base + i for i in range(n)] + [base + RAFT_OFFSET + i for i in range(n)]
        if all(v6_port_free(p) for p in ports):
            return base
    pytest.skip("no free IPv6 port range")


@pytest.fixture
def v6_cluster(make_cluster):
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError as e:
        pytest.skip(f"::1 is not configured on loopback ({e})")
    base = v6_base(3)
    return make_cluster(3, addrs=[("::1", base + i) for i in range(3)])


def test_ipv6_cluster_replies_and_rediscluster(v6_cluster):
    c = v6_cluster
    ports = {nd.port for nd in c.nodes}
    r = c.nodes[0].client(decode_responses=True)

    # CLUSTER SLOTS: the address as Redis gives it, without brackets.
    slots = r.execute_command("CLUSTER", "SLOTS")
    assert slots
    covered = 0
    for rng in slots:
        covered += rng[1] - rng[0] + 1
        for host, port, *_ in rng[2:]:
            assert host == "::1"
            assert port in ports
    assert covered == 16384

    # CLUSTER NODES: `<id> ::1:<port>@<bus> ...`, as Redis 7's
    # clusterGenNodeDescription writes ip:port@cport.
    lines = r.execute_command("CLUSTER", "NODES")
    if isinstance(lines, dict):  # redis-py parses it into {addr: info}
        addrs = set(lines)
    else:
        addrs = {ln.split()[1].split("@")[0] for ln in lines.splitlines() if ln}
    assert addrs == {f"::1:{p}" for p in ports}

    # MOVED names the owner as `::1:port`.
    # (a group whose election is still running answers CLUSTERDOWN: on a
    # loaded machine that can outlast the start; ask again until MOVED)
    moved = None
    deadline = time.monotonic() + 60
    while moved is None and time.monotonic() < deadline:
        for i in range(200):
            try:
                r.get(f"probe:{i}")
            except redis.ResponseError as e:
                if str(e).startswith("MOVED"):
                    moved = str(e)
                    break
        else:
            time.sleep(0.1)
    assert moved is not None and moved.startswith("MOVED")
    host, port = moved.split()[2].rsplit(":", 1)
    assert host == "::1" and int(port) in ports

    rc = c.rc()
    for i in range(200):
        assert rc.set(f"v6:{i}", f"value:{i}")
    for i in range(200):
        assert rc.get(f"v6:{i}") == f"value:{i}"
    rc.close()


def test_ipv6_cluster_survives_kill9_of_a_leader(v6_cluster):
    c = v6_cluster
    acked = {}
    for i in range(100):
        k = f"acked:{i}"
        assert c.call("SET", k, str(i)) in (True, "OK")
        acked[k] = str(i)
    owner = None
    for nd in c.nodes:
        try:
            nd.client().get("acked:0")
            owner = nd
            break
        except redis.ResponseError:
            continue
    assert owner is not None
    owner.kill9()
    c.killed.add(owner.i)
    # A new leader, reached over the IPv6 Raft transport, takes the slot.
    assert c.call("SET", "acked:0", "new", timeout=60) in (True, "OK")
    acked["acked:0"] = "new"
    for i in range(100, 130):
        k = f"acked:{i}"
        assert c.call("SET", k, str(i), timeout=60) in (True, "OK")
        acked[k] = str(i)
    for k, v in acked.items():
        assert c.call("GET", k, timeout=60) == v, k
