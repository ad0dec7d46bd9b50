"""Hashes and lists in cluster mode: their writes go through the Raft log
like SET's (redis-py's RedisCluster writes, a leader is killed, the new
leader has every acknowledged element), and they are in the snapshots a
restarted node recovers from. The cluster harness is test_cluster.py's."""
import time

import redis

from test_cluster import make_cluster  # noqa: F401  (the fixture)


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
    its non-blocking form (on every replica); where it would block, cluster
    mode answers a clear error (blocking there is not built)."""
    c = make_cluster(3)
    c.wait_settled()
    assert c.call("RPUSH", "bq:{7}", "a", "b", "c") == 3
    assert list(c.call("BLPOP", "bq:{7}", "0")) == ["bq:{7}", "a"]
    assert list(c.call("BRPOP", "nothing:{7}", "bq:{7}", "0")) == ["bq:{7}", "c"]
    assert c.call("BLMOVE", "bq:{7}", "dst:{7}", "LEFT", "RIGHT", "0") == "b"
    assert c.call("LRANGE", "dst:{7}", "0", "-1") == ["b"]
    assert c.call("BLMPOP", "0", "2", "none:{7}", "dst:{7}", "LEFT") == ["dst:{7}", ["b"]]
    for cmd in (["BLPOP", "empty:{7}", "0"], ["BRPOPLPUSH", "empty:{7}", "dst:{7}", "1"],
                ["BLMPOP", "0", "1", "empty:{7}", "RIGHT"]):
        try:
            c.call(*cmd)
            raise AssertionError(f"{cmd} on a missing key did not answer an error")
        except redis.ResponseError as e:
            assert "not supported in cluster mode" in str(e), str(e)
