"""Slot migration as Redis Cluster clients expect it (docs/gridsync-cluster.md,
"Join and leave"): while a slot moves, its source answers -ASK for keys it
does not hold and, after the switch, for every key; the target serves a
command that follows ASKING (and only then, before it owns the slot).
redis-py's RedisCluster follows the -ASK by itself.

A 3-node cluster gets a 4th node; the migration is driven step by step
with scripts/gridsync-reshard's own steps, probing between them."""
import importlib.machinery
import importlib.util

import time

import redis
from redis.cluster import RedisCluster

from test_cluster import key_slot, make_cluster, pick_base  # noqa: F401 (fixture)
from test_cluster_join import RESHARD, JoiningNode
from test_cluster_multi import Raw


def load_reshard():
    loader = importlib.machinery.SourceFileLoader("gridsync_reshard", RESHARD)
    spec = importlib.util.spec_from_loader("gridsync_reshard", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


def reply(nd, *args, asking=False):
    """nd's reply to args on one connection (after ASKING if asked), or the
    error text."""
    r = redis.Redis(host=nd.host, port=nd.port, socket_timeout=10, decode_responses=True)
    try:
        if asking:
            assert r.execute_command("ASKING") in (True, "OK")
        return r.execute_command(*args)
    except redis.ResponseError as e:
        return "-" + str(e)
    finally:
        r.close()


def test_ask_during_a_slot_migration(make_cluster):
    c = make_cluster(3)
    c.wait_settled()
    rc = RedisCluster(host=c.nodes[0].host, port=c.nodes[0].port, decode_responses=True,
                      socket_timeout=10, cluster_error_retry_attempts=10)
    # Keys in many slots, each with a hash tag of its own.
    for t in range(1500):
        assert rc.set(f"{{{t}}}old", f"v{t}")
    base = max(nd.port for nd in c.nodes) + 1
    while any(nd.port == base for nd in c.nodes):
        base += 1
    new = JoiningNode(c, 3, "127.0.0.1", base)
    c.nodes.append(new)
    new.start()
    current = [f"{nd.host}:{nd.port}" for nd in c.nodes[:3]]
    newname = f"{new.host}:{new.port}"
    everyone = current + [newname]
    rs = load_reshard()
    r = rs.Reshard(everyone, 60)
    r.on_every(everyone, "CLUSTER", "ADDNODE", newname)
    r.wait_converged(everyone)
    # The new node's group is led by it once it has caught up (leadership
    # returns to the preferred node): then -ASK names it.
    deadline = time.monotonic() + 60
    while c.leaders().get(newname) != new.port:
        assert time.monotonic() < deadline, c.leaders()
        time.sleep(0.05)
    for src in current:
        r.on_leader(src, "CLUSTER", "MIGRATE", "BEGIN", src)

    # A moving slot: its source answers -ASK <slot> <new node> for a key
    # it does not hold; the new node refuses that key without ASKING.
    # -ASK names the leader of the group the slot moves to. On a loaded
    # machine that leadership may wander to another member for a moment
    # (and then return to the preferred node): look again once it is back.
    found = None
    deadline = time.monotonic() + 60
    while not found:
        assert time.monotonic() < deadline, "no -ASK naming the new node"
        while c.leaders().get(newname) != new.port:
            assert time.monotonic() < deadline, c.leaders()
            time.sleep(0.05)
        asked = False
        for t in range(1500):
            key = f"{{{t}}}fresh"
            for nd in c.nodes[:3]:
                out = reply(nd, "GET", key)
                if isinstance(out, str) and out.startswith("-ASK "):
                    slot, to = out.split()[1:3]
                    assert int(slot) == key_slot(key)
                    assert to in everyone, to
                    asked = True
                    if to == newname:
                        found = (t, nd)
                    break
            if found or asked:
                break
        assert asked, "no slot is moving to the new node"
    t, src = found
    key, kept = f"{{{t}}}fresh", f"{{{t}}}old"
    # Without ASKING: "retry", or MOVED to the source's leader when the new
    # node is also a member of the source's group.
    assert reply(new, "SET", key, "x").startswith(("-TRYAGAIN", "-MOVED"))
    assert reply(new, "SET", key, "via-ask", asking=True) in (True, "OK")
    assert reply(new, "GET", key, asking=True) == "via-ask"
    assert reply(src, "GET", key).startswith("-ASK ")
    # A blocking command sent with ASKING blocks at the new node (it is not
    # sent back while the slot comes) and a push there through ASKING
    # serves it (docs/gridsync-cluster.md, "Blocking commands").
    lst = f"{{{t}}}list"
    w = Raw(new)
    try:
        w.send(["ASKING"], ["BLPOP", lst, "0"])
        assert w.reply() == b"+OK\r\n"
        deadline = time.monotonic() + 30
        while new.client().info("clients")["blocked_clients"] != 1:
            assert time.monotonic() < deadline, "BLPOP did not block at the new node"
            time.sleep(0.02)
        assert reply(new, "RPUSH", lst, "a", asking=True) == 1
        assert w.reply() == b"*2\r\n$%d\r\n%s\r\n$1\r\na\r\n" % (len(lst), lst.encode())
    finally:
        w.close()
    # redis-py follows -ASK on its own, reads and writes. It looks the
    # -ASK address up in the nodes it learnt from CLUSTER SLOTS, which
    # lists the node slots are moving to (when it leads no range yet): a
    # client that refreshed its map since the change began (here: a new
    # one) knows it.
    # (A node outside the new group learns its leader from hints within a
    # few tens of milliseconds: until then its CLUSTER SLOTS may name the
    # previous one.)
    deadline = time.monotonic() + 30
    while True:
        rc.close()
        rc = RedisCluster(host=c.nodes[0].host, port=c.nodes[0].port, decode_responses=True,
                          socket_timeout=10, cluster_error_retry_attempts=10)
        if any(n.port == new.port for n in rc.get_nodes()):
            break
        assert time.monotonic() < deadline, "CLUSTER SLOTS never listed the new node"
        time.sleep(0.05)
    assert rc.get(key) == "via-ask"
    assert rc.set(key, "via-redis-py")
    assert reply(new, "GET", key, asking=True) == "via-redis-py"
    # A key the source still holds in that slot: read there, not written
    # until it has moved.
    assert reply(src, "GET", kept) == f"v{t}"
    assert reply(src, "SET", kept, "y").startswith("-TRYAGAIN")
    assert reply(new, "GET", kept, asking=True) is None  # not copied yet

    # The rest of the migration: copy, switch, own, finish.
    for s in current:
        r.move_out(s, everyone)
    # The copy did not overwrite what was written through ASKING.
    assert rc.get(key) == "via-redis-py"
    assert rc.get(kept) == f"v{t}"
    r.on_every(everyone, "CLUSTER", "MIGRATE", "FINISH")
    rc2 = RedisCluster(host=new.host, port=new.port, decode_responses=True, socket_timeout=10,
                       cluster_error_retry_attempts=10)
    assert rc2.get(key) == "via-redis-py"
    for t2 in range(1500):
        assert rc2.get(f"{{{t2}}}old") == f"v{t2}"
    assert reply(new, "GET", key) == "via-redis-py"  # it owns the slot now
    rc.close()
    rc2.close()
