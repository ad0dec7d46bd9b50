"""Membership changes held and run by the cluster (docs/gridsync-cluster.md,
"Membership"): CLUSTER MEMBERSHIP ADD|REMOVE queues a change in the meta
Raft group, whose leader runs it; multi-process on loopback.

- Two changes requested back to back at different nodes are applied in
  request order, with no script sequencing them, and no acknowledged
  write is lost; a node started with only its address and one seed learns
  the membership and is added.
- kill -9 of the meta leader in the middle of a change: a new leader
  resumes it, the change completes once the killed node is back (every
  node takes part in every step), every node ends with the same
  membership and version, every acknowledged write reads back.
- Bad requests are refused with clear errors; the queue is bounded.
- gridsync-reshard --via-cluster queues and waits; the removal of the
  meta leader's own node is run by another voter.
Waits are bounded; nothing asserts a duration."""
import subprocess
import time

import redis

from test_cluster import make_cluster, pick_base  # noqa: F401 (fixture)
from test_cluster_join import RESHARD, JoiningNode, Writer, settled_owners
from test_cluster_membership import BareNode, check_acked, membership, name, restart_bare


def meta_info(nd):
    """The meta line of GRIDSYNC GROUPS as a dict, or None (no replica)."""
    info = nd.client(decode_responses=True).execute_command("GRIDSYNC", "GROUPS")
    for line in info.splitlines():
        if line.startswith("meta:"):
            return dict(kv.split("=") for kv in line[5:].split(","))
    return None


def meta_role(nd):
    """'leader', 'follower' or None (no replica)."""
    info = meta_info(nd)
    return info and info["role"]


def meta_leader(nodes, timeout=60):
    """The meta leader, once it has the membership recorded (it takes
    requests then)."""
    deadline = time.monotonic() + timeout
    while True:
        for nd in nodes:
            try:
                info = meta_info(nd)
                if info and info["role"] == "leader" and int(info["members"]) > 0:
                    return nd
            except redis.RedisError:
                pass
        assert time.monotonic() < deadline, "no meta leader"
        time.sleep(0.1)


def request(nodes, verb, node, at=None):
    """CLUSTER MEMBERSHIP verb node at `at` (or nodes[0]), following the
    -TRYAGAIN to the meta leader; returns the change's position."""
    by_name = {name(nd): nd for nd in nodes}
    ask = at or nodes[0]
    deadline = time.monotonic() + 60
    while True:
        try:
            return ask.client().execute_command("CLUSTER", "MEMBERSHIP", verb, node)
        except redis.ResponseError as e:
            msg = str(e)
            assert msg.startswith("TRYAGAIN"), msg
            words = msg.split()
            if msg.startswith("TRYAGAIN meta leader ") and words[3] in by_name:
                ask = by_name[words[3]]
            else:
                time.sleep(0.1)
        assert time.monotonic() < deadline, "the request was never taken"


def queue(nd):
    return [x.decode() for x in nd.client().execute_command("CLUSTER", "MEMBERSHIP", "QUEUE")]


def wait_done(nodes, position, timeout=300):
    """Until some replica of the meta group reports `position` done."""
    deadline = time.monotonic() + timeout
    while True:
        for nd in nodes:
            try:
                if int(queue(nd)[0].split()[1]) >= position:
                    return
            except (redis.RedisError, IndexError):
                pass
        assert time.monotonic() < deadline, {name(nd): membership(nd) for nd in nodes}
        time.sleep(0.2)


def wait_same_membership(nodes, members, version, timeout=120):
    deadline = time.monotonic() + timeout
    while True:
        views = {}
        for nd in nodes:
            try:
                views[name(nd)] = membership(nd)
            except redis.RedisError as e:
                views[name(nd)] = repr(e)
        if all(v == (sorted(members), None, version) for v in views.values()):
            return
        assert time.monotonic() < deadline, views
        time.sleep(0.2)


def test_two_changes_queued_back_to_back_run_in_order(make_cluster):
    base = pick_base(5, 3)
    c = make_cluster(3, addrs=[("127.0.0.1", base + i) for i in range(3)])
    c.wait_settled()
    first = [name(nd) for nd in c.nodes]
    w = Writer(c.nodes[0], nkeys=600)
    w.start()
    try:
        w.wait_for(600)
        # D: only its address and one seed; it learns the membership.
        d = BareNode(c, 3, "127.0.0.1", base + 3,
                     ["--cluster-seed", name(c.nodes[1]), "--cluster-join", "yes"])
        c.nodes.append(d)
        d.start()
        assert membership(d)[1] == f"add {name(d)}"
        # E: the cluster's list once D is in, then itself.
        c.peers = ",".join(first + [name(d)])
        e = JoiningNode(c, 4, "127.0.0.1", base + 4)
        c.nodes.append(e)
        e.start()
        w.now = "two queued changes"
        # Requested at different nodes, back to back: positions in order.
        p1 = request(c.nodes[:3], "ADD", name(d), at=c.nodes[2])
        p2 = request(c.nodes[:3], "ADD", name(e), at=c.nodes[1])
        assert p2 == p1 + 1, (p1, p2)
        wait_done(c.nodes[:3], p2)
        everyone = first + [name(d), name(e)]
        wait_same_membership(c.nodes, everyone, 2)
        settled_owners(c, c.nodes, timeout=120)
        assert queue(meta_leader(c.nodes[:3]))[0] == f"done {p2}"
        w.wait_for(200)
    finally:
        w.stop_event.set()
        w.join(timeout=120)
    assert w.failure is None, w.failure
    check_acked(w, c, c.nodes[0])


def test_kill9_meta_leader_mid_change_resumes(make_cluster):
    base = pick_base(4, 3)
    c = make_cluster(3, addrs=[("127.0.0.1", base + i) for i in range(3)])
    c.wait_settled()
    members = [name(nd) for nd in c.nodes]
    leader = meta_leader(c.nodes)
    entry = next(nd for nd in c.nodes if nd is not leader)
    w = Writer(entry, nkeys=800)
    w.start()
    try:
        w.wait_for(800)
        c.peers = ",".join(members)
        d = JoiningNode(c, 3, "127.0.0.1", base + 3)
        c.nodes.append(d)
        d.start()
        w.now = "change with the meta leader killed"
        pos = request(c.nodes[:3], "ADD", name(d))
        # In the middle: every member has taken ADDNODE (the change is in
        # progress everywhere), the slots have not finished moving.
        deadline = time.monotonic() + 60
        while not all(membership(nd)[1] == f"add {name(d)}" for nd in c.nodes[:3]):
            assert time.monotonic() < deadline, "ADDNODE did not reach every member"
            time.sleep(0.02)
        back = restart_bare(c, leader)
        # A new leader (maybe the restarted node) resumes the change.
        wait_done([nd for nd in c.nodes if nd is not d], pos)
        wait_same_membership(c.nodes, members + [name(d)], 1)
        settled_owners(c, c.nodes, timeout=120)
        assert meta_role(back) in ("leader", "follower")
        w.wait_for(200)
    finally:
        w.stop_event.set()
        w.join(timeout=120)
    assert w.failure is None, w.failure
    check_acked(w, c, entry)


def test_bad_requests_are_refused(make_cluster):
    base = pick_base(3, 3)
    c = make_cluster(3, addrs=[("127.0.0.1", base + i) for i in range(3)])
    c.wait_settled()
    leader = meta_leader(c.nodes)
    follower = next(nd for nd in c.nodes if nd is not leader)
    r = leader.client()

    def refused(*args):
        try:
            r.execute_command("CLUSTER", "MEMBERSHIP", *args)
        except redis.ResponseError as e:
            return str(e)
        raise AssertionError(f"{args} was accepted")

    assert refused("ADD", name(c.nodes[1])).startswith("already a member")
    assert refused("REMOVE", "127.0.0.1:1").startswith("not a member")
    assert refused("ADD", "no-port").startswith("bad address")
    try:
        follower.client().execute_command("CLUSTER", "MEMBERSHIP", "ADD", "127.0.0.1:2")
        raise AssertionError("a follower took a request")
    except redis.ResponseError as e:
        assert str(e) == f"TRYAGAIN meta leader {name(leader)}", str(e)
    assert queue(follower) == ["done 0"]
    # The queue is bounded. Nodes that never start: the head waits for
    # them (and the test ends the cluster), the rest stay queued.
    # Their ports are the cluster's base + 100..115: never a member's (a
    # second random base could land on the members' ports, as it once did
    # in CI, and the ADD was refused as "already a member").
    ports = [base + 100 + i for i in range(16)]
    taken = [r.execute_command("CLUSTER", "MEMBERSHIP", "ADD", f"127.0.0.1:{p}")
             for p in ports]
    assert taken == list(range(1, 17)), taken
    assert refused("ADD", "127.0.0.1:3").startswith("membership queue is full")
    assert refused("ADD", f"127.0.0.1:{ports[3]}").startswith("already a member")
    lines = queue(leader)
    assert lines[0] == "done 0" and lines[1].startswith(f"1 add 127.0.0.1:{ports[0]}"), lines
    assert len(lines) == 17


def test_reshard_via_cluster_adds_then_removes_the_meta_leader(make_cluster):
    """gridsync-reshard --via-cluster only queues; the removal of the meta
    leader's own node is run by another voter (the leader hands over),
    and the added node becomes a voter in the removed one's place."""
    base = pick_base(4, 3)
    c = make_cluster(3, addrs=[("127.0.0.1", base + i) for i in range(3)])
    c.wait_settled()
    members = [name(nd) for nd in c.nodes]
    leader = meta_leader(c.nodes)
    entry = next(nd for nd in c.nodes if nd is not leader)
    w = Writer(entry, nkeys=600)
    w.start()
    try:
        w.wait_for(600)
        c.peers = ",".join(members)
        d = JoiningNode(c, 3, "127.0.0.1", base + 3)
        c.nodes.append(d)
        d.start()
        w.now = "add via cluster"
        run_via_cluster("add", name(d), [name(entry)])
        members.append(name(d))
        wait_same_membership(c.nodes, members, 1)
        w.now = "remove the meta leader via cluster"
        run_via_cluster("remove", name(leader), [name(entry)])
        members.remove(name(leader))
        live = [nd for nd in c.nodes if nd is not leader]
        wait_same_membership(live, members, 2)
        settled_owners(c, live, timeout=120)
        # The three left are the meta group's voters, one of them leading.
        meta_leader(live)
        deadline = time.monotonic() + 60
        while meta_role(d) is None:
            assert time.monotonic() < deadline, "the added node never joined the meta group"
            time.sleep(0.1)
        w.wait_for(200)
    finally:
        w.stop_event.set()
        w.join(timeout=120)
    assert w.failure is None, w.failure
    # The removed node serves nothing; stopped only now, as redis-py 4.3's
    # RedisCluster can fail (not retry) refreshing its map from a node
    # that has just gone away.
    assert leader.stop() == 0, leader.output()[-3000:]
    c.nodes.remove(leader)
    check_acked(w, c, entry)


def run_via_cluster(action, node, ask):
    out = subprocess.run(
        ["/usr/bin/python3", RESHARD, action, node, "--via-cluster", "--nodes", ",".join(ask),
         "--timeout", "60"],
        capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, f"gridsync-reshard {action} {node}: {out.stdout}{out.stderr}"
    assert "run by the cluster" in out.stdout, out.stdout
