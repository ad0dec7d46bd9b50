"""Blocking commands and shard channels in cluster mode
(docs/gridsync-cluster.md, "Blocking commands"), on real 3-node clusters
(test_cluster.py's harness): a blocking command with nothing to pop blocks
at the slot's leader and is served when a replicated write (from
RedisCluster started on another node, a MULTI/EXEC) makes its key ready;
the pop is itself replicated (every replica's list agrees); two blocked
clients and one push serve the first only, the other times out with nil;
timeouts and CLIENT UNBLOCK answer as on a single node; a leader killed or
stopped while clients are blocked never loses an element (-UNBLOCKED when
it comes back as a follower), and its shard subscribers receive
sunsubscribe. Every wait is a bounded poll."""
import threading
import time

import redis

from test_cluster import make_cluster  # noqa: F401  (the fixture)
from test_cluster_multi import Raw, leader_of

UNBLOCKED = (b"-UNBLOCKED force unblock from blocking operation, instance state changed "
             b"(master -> replica?)\r\n")


def poll(fn, what, timeout=30):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            got = fn()
            if got:
                return got
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            pass
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def blocked(nd):
    return nd.client().info("clients")["blocked_clients"]


def wait_blocked(nd, n):
    poll(lambda: blocked(nd) == n, f"{n} blocked clients on {nd.port}")


def bulk(s):
    s = s.encode() if isinstance(s, str) else s
    return b"$%d\r\n%s\r\n" % (len(s), s)


def replica_lists(c, key, alive=None):
    """LRANGE key on every (alive) node, READONLY: the replicas' copies."""
    out = []
    for nd in alive or c.nodes:
        r = nd.client(decode_responses=True)
        r.execute_command("READONLY")
        out.append(r.lrange(key, 0, -1))
    return out


def test_blpop_served_by_a_push_through_another_node(make_cluster):
    c = make_cluster(3)
    key = "q:{bl}"
    nd = leader_of(c, key)
    other = next(x for x in c.nodes if x is not nd)
    w = Raw(nd)
    try:
        w.send(["BLPOP", "none:{bl}", key, "0"])
        wait_blocked(nd, 1)
        # RedisCluster started from another node: MOVED to the leader,
        # whose applied push serves the blocked client from its log.
        rc = redis.RedisCluster(host=other.host, port=other.port, decode_responses=True,
                                socket_timeout=10)
        assert rc.rpush(key, "v1", "v2") == 2
        assert w.reply() == b"*2\r\n" + bulk(key) + bulk("v1")
        # The pop was an entry of the log: every replica lost v1.
        poll(lambda: replica_lists(c, key) == [["v2"]] * 3, "replicas agree")
        assert blocked(nd) == 0
        # Served by a transaction's push too, in RESP3.
        w.send(["HELLO", "3"])
        w.reply()
        w.send(["BRPOP", "empty:{bl}", "0"])
        wait_blocked(nd, 1)
        p = nd.client().pipeline(transaction=True)  # MULTI/EXEC: one entry
        p.lpush("empty:{bl}", "t1")
        p.lpush("empty:{bl}", "t2")
        assert p.execute() == [1, 2]
        assert w.reply() == b"*2\r\n" + bulk("empty:{bl}") + bulk("t1")
        assert rc.lrange("empty:{bl}", 0, -1) == ["t2"]
        rc.close()
    finally:
        w.close()


def test_rediscluster_blpop_blmove_and_bzpopmin(make_cluster):
    c = make_cluster(3)
    c.wait_settled()
    rc = c.rc()
    nd = leader_of(c, "src:{m}", settle=False)
    got = {}

    def run(name, fn):
        got[name] = fn()

    t = threading.Thread(target=run, args=("blpop", lambda: c.rc().blpop(["src:{m}"], 0)))
    t.start()
    wait_blocked(nd, 1)
    rc.rpush("src:{m}", "a")
    t.join(30)
    assert list(got["blpop"]) == ["src:{m}", "a"]
    # BLMOVE: the element moves within the log; its push serves a
    # client blocked on the destination (BZPOPMIN on a sorted set too).
    t1 = threading.Thread(target=run, args=(
        "blmove", lambda: c.rc().blmove("src:{m}", "dst:{m}", 0, "LEFT", "RIGHT")))
    t1.start()
    wait_blocked(nd, 1)
    t2 = threading.Thread(target=run, args=("dst", lambda: c.rc().blpop(["dst:{m}"], 0)))
    t2.start()
    wait_blocked(nd, 2)
    t3 = threading.Thread(target=run, args=("z", lambda: c.rc().bzpopmin(["z:{m}"], 0)))
    t3.start()
    wait_blocked(nd, 3)
    rc.rpush("src:{m}", "b")
    rc.zadd("z:{m}", {"m1": 2, "m0": 1})
    for t in (t1, t2, t3):
        t.join(30)
    assert got["blmove"] == "b"
    assert list(got["dst"]) == ["dst:{m}", "b"]
    assert list(got["z"]) == ["z:{m}", "m0", 1.0]
    assert rc.llen("src:{m}") == 0 and rc.llen("dst:{m}") == 0
    assert rc.zrange("z:{m}", 0, -1) == ["m1"]
    rc.close()


def test_two_blocked_clients_one_push(make_cluster):
    c = make_cluster(3)
    key = "one:{two}"
    nd = leader_of(c, key)
    first, second = Raw(nd), Raw(nd)
    try:
        first.send(["BLPOP", key, "0"])
        wait_blocked(nd, 1)
        second.send(["BLPOP", key, "8"])
        wait_blocked(nd, 2)
        assert c.call("LPUSH", key, "only") == 1
        assert first.reply() == b"*2\r\n" + bulk(key) + bulk("only")
        # The other is still blocked, then times out with a nil.
        assert blocked(nd) == 1
        assert second.reply() == b"*-1\r\n"
        assert blocked(nd) == 0
        assert c.call("LLEN", key) == 0
    finally:
        first.close()
        second.close()


def test_timeouts_and_client_unblock(make_cluster):
    c = make_cluster(3)
    nd = leader_of(c, "t:{tu}")
    r = nd.client()
    assert r.blpop(["t:{tu}"], 0.2) is None
    assert r.execute_command("BLMOVE", "t:{tu}", "d:{tu}", "LEFT", "LEFT", "0.2") is None
    assert r.execute_command("BZMPOP", "0.2", "1", "t:{tu}", "MIN") is None
    w = Raw(nd)
    try:
        w.send(["CLIENT", "ID"])
        cid = int(w.reply()[1:-2])
        w.send(["BLMPOP", "0", "2", "t:{tu}", "u:{tu}", "LEFT", "COUNT", "2"])
        wait_blocked(nd, 1)
        assert r.execute_command("CLIENT", "UNBLOCK", cid, "ERROR") == 1
        assert w.reply() == b"-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n"
        # Served by the key that became ready, COUNT respected.
        w.send(["BLMPOP", "0", "2", "t:{tu}", "u:{tu}", "LEFT", "COUNT", "2"])
        wait_blocked(nd, 1)
        assert c.call("RPUSH", "u:{tu}", "1", "2", "3") == 3
        assert w.reply() == b"*2\r\n" + bulk("u:{tu}") + b"*2\r\n" + bulk("1") + bulk("2")
        assert c.call("LRANGE", "u:{tu}", "0", "-1") == ["3"]
    finally:
        w.close()


def test_leader_killed_while_blocked_loses_nothing(make_cluster):
    """A raw client and a RedisCluster client blocked at the leader, which
    is killed: the raw connection goes with it; redis-py retries elsewhere
    (blocking again at the new leader, or giving up with an error). Every
    element pushed afterwards is either delivered or still in the list."""
    c = make_cluster(3)
    key = "k9:{kill}"
    nd = leader_of(c, key)
    got = {}

    def run():
        try:
            got["rc"] = c.rc().blpop([key], 0)
        except Exception as e:  # noqa: BLE001  redis-py 4.3 may raise RedisClusterException
            got["rc"] = e

    t = threading.Thread(target=run, daemon=True)
    t.start()
    wait_blocked(nd, 1)
    w = Raw(nd)
    try:
        w.send(["BLPOP", key, "0"])
        wait_blocked(nd, 2)
        nd.kill9()
        c.killed.add(nd.i)
        try:
            answer = w.reply()
            raise AssertionError(f"a killed node answered {answer!r}")
        except OSError:
            pass  # the connection went with the node
    finally:
        w.close()
    alive = [x for x in c.nodes if x.alive()]
    poll(lambda: not t.is_alive() or sum(blocked(x) for x in alive) == 1,
         "redis-py blocked again or gave up")
    assert c.call("RPUSH", key, "x", "y", nodes=alive) == 2
    t.join(30)
    assert not t.is_alive()
    delivered = [got["rc"][1]] if isinstance(got["rc"], (list, tuple)) else []
    if delivered:
        assert list(got["rc"]) == [key, "x"]
    remaining = c.call("LRANGE", key, "0", "-1", nodes=alive)
    assert delivered + remaining == ["x", "y"]
    poll(lambda: replica_lists(c, key, alive) == [remaining] * 2, "replicas agree")


def test_stopped_leader_unblocks_and_drops_shard_channels(make_cluster):
    """The leader is stopped (SIGSTOP) until another node leads its group,
    then continued: back as a follower it answers its blocked client
    -UNBLOCKED (Redis 7.0's text when a master turns replica) and sends
    its shard subscribers sunsubscribe; a replica's READONLY subscriber
    gets sunsubscribe too (Redis removes the slot's channels on every node
    of the shard). The element pushed meanwhile is at the new leader."""
    c = make_cluster(3)
    key = "st:{stop}"
    nd = leader_of(c, key)
    group = f"{nd.host}:{nd.port}"
    follower = next(x for x in c.nodes if x is not nd)
    w, sub, rsub = Raw(nd), Raw(nd), Raw(follower)
    try:
        sub.send(["SSUBSCRIBE", "{stop}ch"])
        assert sub.reply() == b"*3\r\n$10\r\nssubscribe\r\n" + bulk("{stop}ch") + b":1\r\n"
        rsub.send(["READONLY"])
        assert rsub.reply() == b"+OK\r\n"
        rsub.send(["SSUBSCRIBE", "{stop}ch"])
        assert rsub.reply() == b"*3\r\n$10\r\nssubscribe\r\n" + bulk("{stop}ch") + b":1\r\n"
        w.send(["BLPOP", key, "0"])
        wait_blocked(nd, 1)
        others = [x for x in c.nodes if x is not nd]
        nd.proc.send_signal(19)  # SIGSTOP
        try:
            poll(lambda: c.leaders(others).get(group, nd.port) != nd.port,
                 "another leader of the stopped node's group")
            assert c.call("RPUSH", key, "kept", nodes=others) == 1
        finally:
            nd.proc.send_signal(18)  # SIGCONT
        unsub = b"*3\r\n$12\r\nsunsubscribe\r\n" + bulk("{stop}ch") + b":0\r\n"
        assert w.reply() == UNBLOCKED
        assert sub.reply() == unsub
        assert rsub.reply() == unsub
    finally:
        w.close()
        sub.close()
        rsub.close()
    assert c.call("LRANGE", key, "0", "-1") == ["kept"]


def test_sunsubscribe_when_the_leader_is_killed(make_cluster):
    c = make_cluster(3)
    nd = leader_of(c, "{sk}ch")
    follower = next(x for x in c.nodes if x is not nd)
    sub = Raw(follower)
    try:
        sub.send(["HELLO", "3"])
        sub.reply()
        sub.send(["READONLY"])
        sub.reply()
        sub.send(["SSUBSCRIBE", "{sk}ch", "{sk}two"])
        assert sub.reply() == b">3\r\n$10\r\nssubscribe\r\n" + bulk("{sk}ch") + b":1\r\n"
        assert sub.reply() == b">3\r\n$10\r\nssubscribe\r\n" + bulk("{sk}two") + b":2\r\n"
        nd.kill9()
        c.killed.add(nd.i)
        got = {sub.reply(), sub.reply()}
        assert got == {b">3\r\n$12\r\nsunsubscribe\r\n" + bulk("{sk}ch") + b":1\r\n",
                       b">3\r\n$12\r\nsunsubscribe\r\n" + bulk("{sk}two") + b":0\r\n"} or \
            got == {b">3\r\n$12\r\nsunsubscribe\r\n" + bulk("{sk}ch") + b":0\r\n",
                    b">3\r\n$12\r\nsunsubscribe\r\n" + bulk("{sk}two") + b":1\r\n"}, got
        sub.send(["PING"])
        assert sub.reply() == b"+PONG\r\n"  # out of subscribed mode
    finally:
        sub.close()


def test_blocked_clients_of_a_migrated_slot_get_moved(make_cluster):
    """A fourth node is added (scripts/gridsync-reshard): the clients
    blocked on keys whose slot moved to it are answered -MOVED <slot>, as
    Redis 7.0 answers a client blocked on a slot reassigned elsewhere; the
    shard subscribers of those slots receive sunsubscribe; the others stay
    blocked and are served (or -UNBLOCKED if a leadership moved too)."""
    import subprocess

    from test_cluster import key_slot, pick_base
    from test_cluster_join import RESHARD, JoiningNode, settled_owners, slot_owners

    base = pick_base(4, 3)
    c = make_cluster(3, addrs=[("127.0.0.1", base + i) for i in range(3)])
    c.wait_settled()
    before = slot_owners(c.nodes[0])
    keys = [f"mv{i}" for i in range(40)]
    waiting, subs = {}, {}
    try:
        for k in keys:
            nd = next(x for x in c.nodes if x.port == before[key_slot(k)])
            w = Raw(nd)
            w.send(["BLPOP", k, "0"])
            waiting[k] = w
            s = Raw(nd)
            s.send(["SSUBSCRIBE", k])
            assert s.reply().startswith(b"*3\r\n$10\r\nssubscribe\r\n")
            subs[k] = s
        for nd in c.nodes:
            poll(lambda: blocked(nd) == sum(1 for k in keys if before[key_slot(k)] == nd.port),
                 f"the clients blocked on {nd.port}")
        new = JoiningNode(c, 3, "127.0.0.1", base + 3)
        c.nodes.append(new)
        new.start()
        out = subprocess.run(
            ["/usr/bin/python3", RESHARD, "add", f"127.0.0.1:{new.port}", "--nodes",
             ",".join(f"127.0.0.1:{nd.port}" for nd in c.nodes[:3]), "--timeout", "60"],
            capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stdout + out.stderr
        after = settled_owners(c, c.nodes)
        moved = [k for k in keys if after[key_slot(k)] != before[key_slot(k)]]
        assert moved, "no key's slot moved to the new node"
        for k in moved:
            slot = key_slot(k)
            got = waiting[k].reply()
            assert got.startswith(b"-MOVED %d " % slot), (k, got)
            assert subs[k].reply() == (b"*3\r\n$12\r\nsunsubscribe\r\n" + bulk(k) + b":0\r\n")
            assert c.call("RPUSH", k, "here") == 1
            assert c.call("LPOP", k) == "here"  # served at the new owner
        for k in keys:
            if k in moved:
                continue
            assert c.call("RPUSH", k, "e") == 1
            got = waiting[k].reply()
            assert got in (b"*2\r\n" + bulk(k) + bulk("e"), UNBLOCKED), (k, got)
    finally:
        for r in list(waiting.values()) + list(subs.values()):
            r.close()
