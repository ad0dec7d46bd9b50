"""Hashes, lists and sorted sets in cluster mode: their writes go through the Raft log
like SET's (redis-py's RedisCluster writes, a leader is killed, the new
leader has every acknowledged element), and they are in the snapshots a
restarted node recovers from. The cluster harness is test_cluster.py's."""
import subprocess
import time

import pytest
import redis

from test_cluster import make_cluster  # noqa: F401  (the fixture)
from test_vs_redis import redis_port  # noqa: F401  (the fixture)


def owner_of(c, key):
    """The node whose leader serves key's slot (others answer MOVED)."""
    for nd in c.nodes:
        if not nd.alive():
            continue
        try:
            nd.client().type(key)
            return nd
        except redis.ResponseError:
            continue
    raise AssertionError(f"nobody serves {key}")


def test_hash_and_list_survive_a_leader_kill(make_cluster):
    c = make_cluster(3)
    # Writes start once every group is led by its preferred node: the
    # hand-back of leadership would otherwise catch some in flight (an
    # "outcome unknown" answer that a list push cannot simply retry).
    c.wait_settled()
    rc = c.rc()
    for i in range(50):
        assert rc.hset("user:{1}", f"f{i}", f"v{i}") == 1
        assert rc.lpush("queue:{1}", f"job{i}") == i + 1
    assert rc.hincrby("user:{1}", "visits", 5) == 5
    assert rc.rpop("queue:{1}") == "job0"
    rc.close()
    assert owner_of(c, "user:{1}").client(decode_responses=True).object(
        "encoding", "user:{1}") == "listpack"
    c.wait_settled()
    victim = owner_of(c, "user:{1}")
    victim.kill9()
    c.killed.add(victim.i)
    # The new leader has every acknowledged write, and takes new ones.
    assert c.call("HSET", "user:{1}", "after", "kill", timeout=30) == 1
    got = c.call("HGETALL", "user:{1}")
    flat = dict(zip(got[0::2], got[1::2])) if isinstance(got, list) else got
    assert flat == {**{f"f{i}": f"v{i}" for i in range(50)}, "visits": "5", "after": "kill"}
    assert c.call("LRANGE", "queue:{1}", "0", "-1") == [f"job{i}" for i in range(49, 0, -1)]
    assert c.call("TYPE", "queue:{1}") == "list"
    # A wrong-type write is refused the same way through the log.
    try:
        c.call("LPUSH", "user:{1}", "x")
        raise AssertionError("LPUSH on a hash was accepted")
    except redis.ResponseError as e:
        assert str(e).startswith("WRONGTYPE")


def test_types_in_snapshots_after_restart(make_cluster):
    """Enough entries make the group snapshot its store; a node restarted
    after that recovers hashes (both encodings) and lists from snapshot
    plus log."""
    c = make_cluster(3, extra=["--cluster-snapshot-entries", "200"])
    c.wait_settled()  # as above: no leadership hand-back during the writes
    rc = c.rc()
    for i in range(700):
        rc.hset("{snap}:small", f"f{i % 10}", str(i))
        rc.hset("{snap}:big", f"field{i}", str(i))  # past 512 fields: a hash table
        rc.rpush("{snap}:list", str(i))
    rc.set("{snap}:str", "plain")
    victim = c.nodes[1]
    victim.stop()
    victim.start()
    c.wait_ready()
    r = victim.client(decode_responses=True)
    r.execute_command("READONLY")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and r.get("{snap}:str") != "plain":
        time.sleep(0.05)
    assert r.get("{snap}:str") == "plain"
    assert r.hgetall("{snap}:small") == {f"f{j}": str(690 + j) for j in range(10)}
    assert r.hlen("{snap}:big") == 700 and r.hget("{snap}:big", "field699") == "699"
    assert r.object("encoding", "{snap}:big") == "hashtable"
    assert r.lrange("{snap}:list", 0, -1) == [str(i) for i in range(700)]
    rc.close()


def test_blocking_list_commands_in_cluster_mode(make_cluster):
    """With an element to pop, a blocking command runs through the log as
    its non-blocking form (on every replica); with nothing to pop it blocks
    at the slot's leader and times out with a nil (being served is in
    test_cluster_blocking.py)."""
    c = make_cluster(3)
    c.wait_settled()
    assert c.call("RPUSH", "bq:{7}", "a", "b", "c") == 3
    assert list(c.call("BLPOP", "bq:{7}", "0")) == ["bq:{7}", "a"]
    assert list(c.call("BRPOP", "nothing:{7}", "bq:{7}", "0")) == ["bq:{7}", "c"]
    assert c.call("BLMOVE", "bq:{7}", "dst:{7}", "LEFT", "RIGHT", "0") == "b"
    assert c.call("LRANGE", "dst:{7}", "0", "-1") == ["b"]
    assert c.call("BLMPOP", "0", "2", "none:{7}", "dst:{7}", "LEFT") == ["dst:{7}", ["b"]]
    for cmd in (["BLPOP", "empty:{7}", "0.2"], ["BRPOPLPUSH", "empty:{7}", "dst:{7}", "0.2"],
                ["BLMPOP", "0.2", "1", "empty:{7}", "RIGHT"]):
        assert c.call(*cmd) is None, cmd


def test_sorted_sets_replicated_and_routed(make_cluster):
    """Sorted-set writes (the numkeys forms too) go through the log and
    survive a leader kill; keys after a count are routed by their slot and
    refused across slots, as Redis Cluster does."""
    c = make_cluster(3)
    c.wait_settled()
    rc = c.rc()
    for i in range(200):  # past 128 members: a skiplist
        assert rc.zadd("board:{z}", {f"p{i}": i % 17}) == 1
    assert rc.zincrby("board:{z}", 2.5, "p0") == 2.5
    assert rc.zadd("small:{z}", {"a": 1, "b": 2, "c": 3}) == 3
    assert rc.execute_command("ZUNIONSTORE", "u:{z}", "2", "board:{z}", "small:{z}",
                              "WEIGHTS", "1", "10") == 203
    assert rc.execute_command("ZMPOP", "2", "none:{z}", "small:{z}", "MIN", "COUNT", "2") == \
        ["small:{z}", [["a", "1"], ["b", "2"]]]
    assert rc.execute_command("ZINTERCARD", "2", "board:{z}", "u:{z}") == 200
    assert rc.zpopmax("board:{z}") == [("p84", 16.0)]  # the last of score 16 by member
    rc.close()
    owner = owner_of(c, "board:{z}")
    r = owner.client(decode_responses=True)
    assert r.object("encoding", "board:{z}") == "skiplist"
    assert r.object("encoding", "small:{z}") == "listpack"
    assert r.command_getkeys("ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2") == [
        "d", "a", "b"]
    try:
        r.execute_command("ZUNIONSTORE", "d:{z}", "2", "board:{z}", "other:{y}")
        raise AssertionError("a cross-slot ZUNIONSTORE was accepted")
    except redis.ResponseError as e:
        assert str(e).startswith("CROSSSLOT")
    try:
        r.execute_command("ZUNION", "0", "board:{z}")
        raise AssertionError("ZUNION 0 was accepted")
    except redis.ResponseError as e:
        assert "at least 1 input key" in str(e)
    r.close()
    c.wait_settled()
    victim = owner_of(c, "board:{z}")
    victim.kill9()
    c.killed.add(victim.i)
    assert c.call("ZADD", "board:{z}", "100", "after", timeout=30) == 1
    assert c.call("ZCARD", "board:{z}") == 200
    assert c.call("ZSCORE", "board:{z}", "p0") == 2.5
    assert c.call("ZRANGE", "small:{z}", "0", "-1", "WITHSCORES") == ["c", "3"]
    assert c.call("ZSCORE", "u:{z}", "c") == 30.0
    assert c.call("ZCARD", "u:{z}") == 203


def test_sorted_sets_in_snapshots_after_restart(make_cluster):
    """Both encodings come back from a snapshot on a restarted node."""
    c = make_cluster(3, extra=["--cluster-snapshot-entries", "200"])
    c.wait_settled()
    rc = c.rc()
    for i in range(600):
        rc.zadd("{zs}:small", {f"m{i % 10}": i})
        rc.zadd("{zs}:big", {f"member{i}": i * 0.5})
    rc.set("{zs}:str", "plain")
    victim = c.nodes[1]
    victim.stop()
    victim.start()
    c.wait_ready()
    r = victim.client(decode_responses=True)
    r.execute_command("READONLY")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and r.get("{zs}:str") != "plain":
        time.sleep(0.05)
    assert r.get("{zs}:str") == "plain"
    assert r.zrange("{zs}:small", 0, -1, withscores=True) == [
        (f"m{j}", float(590 + j)) for j in range(10)]
    assert r.object("encoding", "{zs}:small") == "listpack"
    assert r.zcard("{zs}:big") == 600 and r.zscore("{zs}:big", "member599") == 299.5
    assert r.zrank("{zs}:big", "member300") == 300
    assert r.object("encoding", "{zs}:big") == "skiplist"
    rc.close()


def applied_everywhere(c, marker, value="1"):
    """A READONLY client of every node, once that node has applied the
    write of marker (a later entry of the same group, so the entries
    before it are applied too)."""
    clients = []
    for nd in c.nodes:
        r = nd.client()
        r.execute_command("READONLY")
        deadline = time.monotonic() + 30
        while r.get(marker) != value.encode():
            assert time.monotonic() < deadline, f"node {nd.port} never applied {marker}"
            time.sleep(0.02)
        clients.append(r)
    return clients


def replica_states(c, keys, marker, value="1"):
    """Every node's members of the sets at keys, once it applied marker."""
    return [{k: sorted(r.smembers(k)) for k in keys} for r in applied_everywhere(c, marker, value)]


def test_spop_pops_the_same_members_on_every_replica(make_cluster):
    """SPOP picks at random, and a big set's hash table is laid out
    differently on every node: applied as "SPOP key" on each replica it
    popped different members there (three replicas, three contents). The
    leader now proposes its picks with the command; a transaction's SPOP
    and a pick overtaken by another client's write use a pick that depends
    only on the set's contents. Either way every replica holds the same
    members afterwards, and what SPOP answered is gone from all of them."""
    c = make_cluster(3)
    c.wait_settled()
    rc = c.rc()
    big, small, txn = "{sp}big", "{sp}small", "{sp}txn"
    rc.sadd(big, *range(2000), "a", "b")  # strings: a hash table
    rc.sadd(small, *range(100))  # an intset
    popped, popped_small = [], []
    for i in range(150):
        popped.append(rc.spop(big))
        popped.extend(rc.spop(big, i % 7))
        if i < 99:
            popped_small.append(rc.spop(small))
    assert len(set(popped)) == len(popped) == 150 + sum(i % 7 for i in range(150))
    owner = owner_of(c, big)
    r = owner.client()
    p = r.pipeline(transaction=True)
    p.sadd(txn, *range(300), "x")
    p.spop(txn)
    p.spop(txn, 20)
    res = p.execute()
    assert len(res[2]) == 20 and res[1] not in res[2]
    popped_txn = {res[1], *res[2]}
    # Another client's write overtakes the leader's picks: SREM and SPOP
    # sent at once on two connections (the leader picks from what it has
    # applied, so its picks are mostly among the members SREM removes).
    race = "{sp}race"
    a, b = owner.client(), owner.client()
    first = set(b"m1 m2 m3".split())
    for i in range(100):
        rc.sadd(race, *(f"m{j}" for j in range(1, 7)))
        conn_a = a.connection_pool.get_connection("SREM")
        conn_b = b.connection_pool.get_connection("SPOP")
        conn_a.send_command("SREM", race, "m1", "m2", "m3")
        conn_b.send_command("SPOP", race, "2")
        removed, got = conn_a.read_response(), conn_b.read_response()
        a.connection_pool.release(conn_a)
        b.connection_pool.release(conn_b)
        # Either order is linearizable; nothing else is.
        assert len(set(got)) == 2, got
        assert (removed == 3 and not set(got) & first) or \
            removed == 3 - len(set(got) & first), (removed, got)
        rc.set("{sp}marker", str(i))
        left = replica_states(c, [race], "{sp}marker", str(i))
        assert left[0] == left[1] == left[2]
        assert len(left[0][race]) == 6 - removed - 2 and not set(got) & set(left[0][race])
        rc.delete(race)
    rc.set("{sp}done", "1")
    states = replica_states(c, [big, small, txn], "{sp}done")
    assert states[0] == states[1] == states[2]
    assert len(states[0][big]) == 2002 - len(popped)
    assert not {x.encode() for x in popped} & set(states[0][big])
    assert states[0][small] == sorted({str(i).encode() for i in range(100)} -
                                      {x.encode() for x in popped_small})
    assert len(states[0][txn]) == 301 - 21 and not popped_txn & set(states[0][txn])


def test_hyperloglogs_replicated_byte_for_byte(make_cluster):
    """PFADD and PFMERGE go through the log and give every replica the same
    bytes; PFCOUNT, a read at the leader, leaves the cached count unwritten
    there, so it does not make the leader's copy differ."""
    c = make_cluster(3)
    c.wait_settled()
    rc = c.rc()
    for i in range(0, 6000, 50):
        rc.pfadd("{hl}a", *(f"x{j}" for j in range(i, i + 50)))
        rc.pfadd("{hl}b", *(f"y{j}" for j in range(i // 10, i // 10 + 5)))
        if i % 1000 == 0:
            assert rc.pfcount("{hl}a") > 0
    rc.pfmerge("{hl}m", "{hl}a", "{hl}b")
    assert abs(rc.pfcount("{hl}m") - 6600) < 200
    rc.set("{hl}done", "1")
    views = [[r.get(k) for k in ("{hl}a", "{hl}b", "{hl}m")]
             for r in applied_everywhere(c, "{hl}done")]
    assert views[0] == views[1] == views[2]
    assert views[0][0][4] == 0 and views[0][1][4] == 1  # dense, sparse


def test_sort_in_cluster_mode(make_cluster):
    """SORT routes by its key and its STORE destination (CROSSSLOT when
    they differ), a stored result goes through the log to every replica,
    and BY/GET patterns are refused as Redis Cluster 7.0 refuses them."""
    c = make_cluster(3)
    c.wait_settled()
    rc = c.rc()
    rc.rpush("{so}src", 3, 1, 2)
    assert rc.sort("{so}src") == ["1", "2", "3"]
    assert rc.sort("{so}src", desc=True, store="{so}dst") == 3
    with pytest.raises(redis.ResponseError, match="CROSSSLOT"):
        owner_of(c, "{so}src").client().execute_command("SORT", "{so}src", "STORE", "other")
    with pytest.raises(redis.ResponseError, match="BY option of SORT denied in Cluster mode."):
        rc.sort("{so}src", by="w_*")
    with pytest.raises(redis.ResponseError, match="GET option of SORT denied in Cluster mode."):
        rc.sort("{so}src", get="#")
    rc.set("{so}done", "1")
    for r in applied_everywhere(c, "{so}done"):
        assert r.lrange("{so}dst", 0, -1) == [b"3", b"2", b"1"]


def test_redis_cli_cluster_import_from_redis(make_cluster, redis_port):  # noqa: F811
    """redis-cli --cluster import copies a Redis server's keys into the
    cluster: Redis's MIGRATE sends each key's DUMP payload to the slot's
    node as RESTORE-ASKING. Every type arrives whole, TTLs included."""
    c = make_cluster(3)
    c.wait_settled()
    src = redis.Redis(port=redis_port)
    src.flushall()
    for i in range(60):
        src.set(f"str:{i}", f"value {i}" * (i % 7 + 1))
    src.hset("hash", mapping={f"f{i}": i for i in range(600)})
    src.zadd("zset", {f"m{i}": i / 3 for i in range(200)})
    src.rpush("list", *range(1000))
    src.sadd("set", *range(50))
    src.set("ttl", "soon", ex=1000)
    out = subprocess.run(["redis-cli", "--cluster", "import", f"127.0.0.1:{c.nodes[0].port}",
                          "--cluster-from", f"127.0.0.1:{redis_port}", "--cluster-copy"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    rc = c.rc()
    for i in range(60):
        assert rc.get(f"str:{i}") == f"value {i}" * (i % 7 + 1)
    assert rc.hgetall("hash") == {f"f{i}": str(i) for i in range(600)}
    assert rc.zrange("zset", 0, -1, withscores=True) == \
        [(m.decode(), s) for m, s in src.zrange("zset", 0, -1, withscores=True)]
    assert rc.lrange("list", 0, -1) == [str(i) for i in range(1000)]
    assert rc.smembers("set") == {str(i) for i in range(50)}
    assert 0 < rc.ttl("ttl") <= 1000
    src.flushall()


def test_wait_counts_the_majority_in_cluster_mode(make_cluster):
    """An acknowledged write is on a majority of its group, so WAIT
    answers at once with the other members that majority includes: 1 of
    the 2 others at replication factor 3, whatever is asked."""
    c = make_cluster(3)
    c.wait_settled()
    r = owner_of(c, "{w}k").client()
    assert r.set("{w}k", "v")
    assert r.execute_command("WAIT", "1", "0") == 1
    assert r.execute_command("WAIT", "2", "100") == 1
    assert r.execute_command("WAIT", "0", "0") == 1
