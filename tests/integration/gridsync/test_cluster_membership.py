"""GridSync membership as persisted state (docs/gridsync-cluster.md,
"Membership"), multi-process on loopback.

- A node killed with kill -9 in the middle of a join or a leave, at each
  of its steps, and restarted with nothing but its address and its data
  directory, comes back with the change in progress; running
  scripts/gridsync-reshard again completes it. A RedisCluster writer keeps
  acknowledging writes throughout, and every acknowledged key reads its
  last acknowledged value at the end.
- A node started with only --cluster-seed (and --cluster-join) learns the
  membership from that member and is added; restarted with only its data
  directory (no seed, no peers), it serves what it knew.
- Every node reports the same membership version once a change is done;
  a removed node refuses to start again from its data directory.
Waits are bounded; nothing asserts a duration."""
import importlib.machinery
import importlib.util
import os
import signal
import subprocess
import tempfile
import time

import redis
from redis.cluster import RedisCluster

from conftest import find_binary
from test_cluster import SLOTS, Node, key_slot, make_cluster, pick_base  # noqa: F401 (fixture)
from test_cluster_join import CLIENT_ERRORS, RESHARD, JoiningNode, Writer, settled_owners


def load_reshard():
    """scripts/gridsync-reshard as a module, to stop it between steps."""
    loader = importlib.machinery.SourceFileLoader("gridsync_reshard", RESHARD)
    spec = importlib.util.spec_from_loader("gridsync_reshard", loader)
    mod = importlib.util.module_from_spec(spec)
    loader.exec_module(mod)
    return mod


class BareNode(Node):
    """A node started with its address, its data directory and, optionally,
    flags such as --cluster-seed: no --cluster-peers, no --cluster-join."""

    def __init__(self, cluster, i, host, port, flags=()):
        super().__init__(cluster, i, host, port)
        self.flags = list(flags)

    def start(self):
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [find_binary("gridsync-server"), "--bind", self.host, "--port", str(self.port),
             "--cluster-enabled", "yes", "--dir", self.dir, *self.flags,
             *self.cluster.extra],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.port} exited early:\n{self.output()}")
            try:
                redis.Redis(host=self.host, port=self.port, socket_timeout=2).ping()
                return
            except (redis.ConnectionError, redis.TimeoutError):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {self.port} did not listen")
                time.sleep(0.02)


def restart_bare(c, node):
    """kill -9 `node`, then start it again from its data directory only;
    returns the new Node object (it replaces the old one in c.nodes)."""
    node.kill9()
    again = BareNode(c, node.i, node.host, node.port)
    again.dir = node.dir
    again.start()
    c.nodes[c.nodes.index(node)] = again
    return again


def name(nd):
    return f"{nd.host}:{nd.port}"


def membership(nd):
    """(sorted nodes, change or None, version) from CLUSTER MEMBERSHIP."""
    text = nd.client().execute_command("CLUSTER", "MEMBERSHIP").decode()
    nodes, change, version = [], None, None
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == "node":
            nodes.append(value)
        elif key == "change":
            change = value
        elif key == "version":
            version = int(value)
    return sorted(nodes), change, version


def run_reshard(action, node, members):
    out = subprocess.run(
        ["/usr/bin/python3", RESHARD, action, node, "--nodes", ",".join(members),
         "--timeout", "90"],
        capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, f"gridsync-reshard {action} {node}: {out.stdout}{out.stderr}"


def interrupted(mod, action, node, current, stop_after, victim, c):
    """Run a change's steps up to `stop_after`, kill -9 `victim` there and
    restart it bare, then run the whole script again (it resumes)."""
    if action == "add":
        everyone, target = current + [node], current + [node]
    else:
        everyone, target = current, [n for n in current if n != node]
    r = mod.Reshard(everyone, 90)
    verb = "ADDNODE" if action == "add" else "DELNODE"
    steps = []
    if stop_after == "addnode-some":
        r.on_every(everyone[:1], "CLUSTER", verb, node)
    else:
        r.on_every(everyone, "CLUSTER", verb, node)
        steps.append("addnode")
        if stop_after != "addnode":
            r.wait_converged(target)
            src = name(victim) if name(victim) in current else current[-1]
            if stop_after == "begin":
                r.on_leader(src, "CLUSTER", "MIGRATE", "BEGIN", src)
            elif stop_after == "switch":
                r.copy_out(src)
            elif stop_after == "finish-some":
                for s in current:
                    r.move_out(s, target)
                r.on_every(everyone[:1], "CLUSTER", "MIGRATE", "FINISH",
                           r.next_version(everyone))
    for conn in r.conns.values():
        conn.close()
    victim = restart_bare(c, victim)
    # It came back with the change it was in (or the change's end, when
    # FINISH had reached it).
    nodes, change, _ = membership(victim)
    if stop_after != "addnode-some" or victim is not None:
        assert change is not None or (stop_after == "finish-some" and nodes == sorted(target)), \
            f"{name(victim)} forgot the change: {nodes} {change}"
    run_reshard(action, node, current)
    return victim


def check_acked(w, c, entry):
    """Every acknowledged key reads its last acknowledged value."""
    rc = RedisCluster(host=entry.host, port=entry.port, decode_responses=True,
                      socket_timeout=10, cluster_error_retry_attempts=10)
    try:
        wrong = {}
        for key, value in w.acked.items():
            deadline = time.monotonic() + 60
            while True:
                try:
                    got = rc.get(key)
                    break
                except CLIENT_ERRORS:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.1)
                    rc.close()
                    try:
                        rc = RedisCluster(host=entry.host, port=entry.port, decode_responses=True,
                                          socket_timeout=10, cluster_error_retry_attempts=10)
                    except CLIENT_ERRORS:
                        pass  # the closed client fails again and we come back
            if got != value:
                wrong[key] = (value, got, w.phase.get(key))
        assert not wrong, f"{len(wrong)} acknowledged writes lost, e.g. {list(wrong.items())[:5]}"
    finally:
        rc.close()


def test_kill9_during_each_step_of_joins_and_leaves(make_cluster):
    base = pick_base(7, 3)
    c = make_cluster(3, addrs=[("127.0.0.1", base + i) for i in range(3)])
    c.wait_settled()
    mod = load_reshard()
    w = Writer(c.nodes[0], nkeys=800)  # node 0 is never killed: the writer's entry
    w.start()
    try:
        w.wait_for(800)
        members = [name(nd) for nd in c.nodes]
        plan = [
            # (action, new node index or member to remove, step, victim)
            ("add", 3, "addnode-some", "new"),
            ("add", 4, "addnode", 1),
            ("remove", 3, "begin", 3),
            ("add", 5, "switch", 2),
            ("remove", 4, "finish-some", 1),
        ]
        by_index = {nd.i: nd for nd in c.nodes}
        for action, idx, step, who in plan:
            if action == "add":
                new = JoiningNode(c, idx, "127.0.0.1", base + idx)
                c.peers = ",".join(members)
                c.nodes.append(new)
                new.start()
                by_index[idx] = new
                victim = new if who == "new" else by_index[who]
                w.now = f"add {idx} ({step})"
                back = interrupted(mod, "add", name(new), members, step, victim, c)
                by_index[back.i] = back
                members = members + [name(new)]
            else:
                gone = by_index[idx]
                victim = by_index[who]
                w.now = f"remove {idx} ({step})"
                back = interrupted(mod, "remove", name(gone), members, step, victim, c)
                by_index[back.i] = back
                members = [m for m in members if m != name(gone)]
                gone = by_index[idx]
                assert gone.stop() == 0, gone.output()[-3000:]
                c.nodes.remove(gone)
                # A removed node does not come back from its data directory.
                again = BareNode(c, gone.i, gone.host, gone.port)
                again.dir = gone.dir
                try:
                    again.start()
                    raise AssertionError("a removed node started again")
                except RuntimeError as e:
                    assert "removed from the cluster" in str(e), str(e)
            w.wait_for(200)
            live = [nd for nd in c.nodes if name(nd) in members]
            settled_owners(c, live, timeout=120)
            views = {name(nd): membership(nd) for nd in live}
            assert all(v[0] == sorted(members) and v[1] is None for v in views.values()), views
            assert len({v[2] for v in views.values()}) == 1, f"versions differ: {views}"
    finally:
        w.stop_event.set()
        w.join(timeout=120)
    assert w.failure is None, w.failure
    assert not w.is_alive()
    assert membership(c.nodes[0])[2] == 5
    check_acked(w, c, c.nodes[0])


def test_seed_join_and_bare_restart(make_cluster):
    base = pick_base(4, 3)
    c = make_cluster(3, addrs=[("127.0.0.1", base + i) for i in range(3)])
    c.wait_settled()
    nodes, change, version = membership(c.nodes[1])
    assert nodes == sorted(name(nd) for nd in c.nodes) and change is None and version == 0
    rc = RedisCluster(host="127.0.0.1", port=c.nodes[0].port, decode_responses=True)
    for i in range(300):
        assert rc.set(f"s:{i}", f"v{i}")
    rc.close()

    # A fresh node with one seed address: it learns the cluster and is added.
    new = BareNode(c, 3, "127.0.0.1", base + 3,
                   ["--cluster-seed", name(c.nodes[1]), "--cluster-join", "yes"])
    c.nodes.append(new)
    new.start()
    nodes, change, _ = membership(new)
    assert nodes == sorted(name(nd) for nd in c.nodes[:3])
    assert change == f"add {name(new)}"
    run_reshard("add", name(new), [name(nd) for nd in c.nodes[:3]])
    settled_owners(c, c.nodes, timeout=120)
    assert {membership(nd)[2] for nd in c.nodes} == {1}

    # Every node restarted with only its data directory (no peers, no
    # seed) serves the membership it knew, the new node included.
    for nd in list(c.nodes):
        nd.stop()
    for i, nd in enumerate(list(c.nodes)):
        again = BareNode(c, nd.i, nd.host, nd.port)
        again.dir = nd.dir
        c.nodes[i] = again
        again.start()
    settled_owners(c, c.nodes, timeout=120)
    rc = RedisCluster(host="127.0.0.1", port=c.nodes[3].port, decode_responses=True,
                      cluster_error_retry_attempts=10)
    try:
        for i in range(300):
            assert rc.get(f"s:{i}") == f"v{i}"
    finally:
        rc.close()

    # A seed that does not answer: a first start fails with a reason.
    lost = BareNode(c, 9, "127.0.0.1", pick_base(1, 1), ["--cluster-seed", "127.0.0.1:1"])
    try:
        lost.start()
        raise AssertionError("a node without a reachable seed started")
    except RuntimeError as e:
        assert "cluster-seed 127.0.0.1:1" in str(e), str(e)


def test_two_changes_requested_back_to_back(make_cluster):
    """Two additions started together: the nodes take one change at a time
    (the second script's ADDNODE is refused, and retried, on a node until
    the first change has finished there), so both complete, in order,
    with no acknowledged write lost."""
    base = pick_base(5, 3)
    c = make_cluster(3, addrs=[("127.0.0.1", base + i) for i in range(3)])
    c.wait_settled()
    first = [name(nd) for nd in c.nodes]
    w = Writer(c.nodes[0], nkeys=600)
    w.start()
    try:
        w.wait_for(600)
        d = JoiningNode(c, 3, "127.0.0.1", base + 3)
        c.nodes.append(d)
        d.start()
        second = first + [name(d)]
        c.peers = ",".join(second)  # E's list: the cluster once D is in, then E
        e = JoiningNode(c, 4, "127.0.0.1", base + 4)
        c.nodes.append(e)
        e.start()
        w.now = "two changes"
        procs = []
        for node, members in ((name(d), first), (name(e), second)):
            procs.append(subprocess.Popen(
                ["/usr/bin/python3", RESHARD, "add", node, "--nodes", ",".join(members),
                 "--timeout", "60"],
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        for p in procs:
            out, _ = p.communicate(timeout=900)
            assert p.returncode == 0, (out, {name(nd): membership(nd) for nd in c.nodes})
        settled_owners(c, c.nodes, timeout=120)
        views = {name(nd): membership(nd) for nd in c.nodes}
        assert all(v == (sorted(second + [name(e)]), None, 2) for v in views.values()), views
        w.wait_for(200)
    finally:
        w.stop_event.set()
        w.join(timeout=120)
    assert w.failure is None, w.failure
    check_acked(w, c, c.nodes[0])


def test_export_waits_for_this_changes_begin(make_cluster):
    """A group that already lost slots in an earlier change keeps that
    change's slot state (its slots marked gone). In the next change, MIGRATE
    EXPORT at a leader that has not applied this change's BEGIN (a leader
    elected since may not have) must answer -TRYAGAIN, not an empty list:
    the script would copy nothing and SWITCH would then delete the keys
    (found by the fault campaign: counters back to 0 after a second join
    under faults)."""
    base = pick_base(5, 3)
    c = make_cluster(3, addrs=[("127.0.0.1", base + i) for i in range(3)])
    c.wait_settled()
    owners0 = settled_owners(c, c.nodes)
    rc = RedisCluster(host="127.0.0.1", port=c.nodes[0].port, decode_responses=True,
                      cluster_error_retry_attempts=10)
    try:
        for i in range(600):
            assert rc.set(f"e:{i}", f"v{i}")
    finally:
        rc.close()
    members = [name(nd) for nd in c.nodes]
    # A first change: every group that loses slots keeps a slot state.
    first = JoiningNode(c, 3, "127.0.0.1", base + 3)
    c.nodes.append(first)
    first.start()
    run_reshard("add", name(first), members)
    members.append(name(first))
    owners1 = settled_owners(c, c.nodes, timeout=120)

    # The second: targets and replica sets, but no BEGIN yet.
    c.peers = ",".join(members)
    second = JoiningNode(c, 4, "127.0.0.1", base + 4)
    c.nodes.append(second)
    second.start()
    mod = load_reshard()
    r = mod.Reshard(members + [name(second)], 90)
    r.on_every(members + [name(second)], "CLUSTER", "ADDNODE", name(second))
    r.wait_converged(members + [name(second)])
    answer = {}
    for src in members:
        nd = next(x for x in c.nodes if name(x) == src)
        try:
            reply = nd.client().execute_command("CLUSTER", "MIGRATE", "EXPORT", src, 0)
            assert reply[1] == [], f"{src} exported before BEGIN: {reply}"
            answer[src] = "empty"
        except redis.ResponseError as e:
            answer[src] = str(e).split()[0]
    refused = [src for src, a in answer.items() if a == "TRYAGAIN"]
    assert refused, f"no source group refused EXPORT before its BEGIN: {answer}"
    # After BEGIN the same leader exports the keys of the moving slots.
    src = refused[0]
    r.on_leader(src, "CLUSTER", "MIGRATE", "BEGIN", src)
    _, (_, items) = r.on_leader(src, "CLUSTER", "MIGRATE", "EXPORT", src, 0)
    assert items, f"{src} exported nothing after BEGIN"
    for conn in r.conns.values():
        conn.close()
    # The script completes the change from there; every key reads back.
    run_reshard("add", name(second), members)
    owners2 = settled_owners(c, c.nodes, timeout=120)
    # Every group that gave slots away refused (the ones that had given
    # some away in the first change too, whose state was left).
    lost1 = {f"127.0.0.1:{owners0[s]}" for s in range(SLOTS) if owners0[s] != owners1[s]}
    lost2 = {f"127.0.0.1:{owners1[s]}" for s in range(SLOTS) if owners1[s] != owners2[s]}
    assert lost1 & lost2, (lost1, lost2)
    assert all(answer[g] == "TRYAGAIN" for g in lost2), (answer, lost2)
    rc = RedisCluster(host="127.0.0.1", port=c.nodes[0].port, decode_responses=True,
                      cluster_error_retry_attempts=10)
    try:
        wrong = {i: rc.get(f"e:{i}") for i in range(600) if rc.get(f"e:{i}") != f"v{i}"}
    finally:
        rc.close()
    assert not wrong, f"{len(wrong)} keys lost, e.g. {list(wrong.items())[:5]}"


def test_readded_address_serves_nothing_before_the_move(make_cluster):
    """Add D, remove D, add D again (same address, fresh data directory).
    Once every group has its replica set for the second join, and before
    any BEGIN, D must not serve a key of a slot coming to its group: the
    keys are still in the old groups (it must answer -MOVED/-TRYAGAIN/-ASK,
    or the key's value). D catches up the source groups' logs, which hold
    the earlier join's SWITCH naming the same destination, then the leave's
    OWN giving the slots back: before the fix it routed the slots to its
    empty new group, and a write there was kept over the import (found by
    the fault campaign: counters back to 0 after a second join)."""
    base = pick_base(4, 3)
    c = make_cluster(3, addrs=[("127.0.0.1", base + i) for i in range(3)])
    c.wait_settled()
    rc = RedisCluster(host="127.0.0.1", port=c.nodes[0].port, decode_responses=True,
                      cluster_error_retry_attempts=10)
    try:
        for i in range(400):
            assert rc.set(f"d:{i}", f"v{i}")
    finally:
        rc.close()
    members = [name(nd) for nd in c.nodes]
    d = JoiningNode(c, 3, "127.0.0.1", base + 3)
    c.nodes.append(d)
    d.start()
    run_reshard("add", name(d), members)
    owners = settled_owners(c, c.nodes, timeout=120)
    mine = [i for i in range(400) if owners[key_slot(f"d:{i}")] == d.port]
    assert mine
    run_reshard("remove", name(d), members + [name(d)])
    assert d.stop() == 0
    c.nodes.remove(d)
    settled_owners(c, c.nodes, timeout=120)

    again = JoiningNode(c, 3, "127.0.0.1", base + 3)
    again.dir = tempfile.mkdtemp(dir=c.dir)
    c.nodes.append(again)
    again.start()
    mod = load_reshard()
    everyone = members + [name(again)]
    r = mod.Reshard(everyone, 90)
    r.on_every(everyone, "CLUSTER", "ADDNODE", name(again))
    r.wait_converged(everyone)
    for conn in r.conns.values():
        conn.close()
    served = {}
    cli = again.client(decode_responses=True)
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and not served:
        for i in mine:
            try:
                got = cli.get(f"d:{i}")
            except redis.ResponseError:
                continue  # redirected or refused: right
            if got != f"v{i}":
                served[f"d:{i}"] = got
        time.sleep(0.2)
    cli.close()
    run_reshard("add", name(again), members)
    assert not served, f"{len(served)} keys served wrong before BEGIN, e.g. {list(served.items())[:3]}"


def test_group_closed_under_a_proposed_write_answers_unknown(make_cluster):
    """A node leaving a group at CLUSTER MIGRATE FINISH closes it; a write
    it had proposed there (in flight, or in limbo after it lost the lead)
    may still be committed by another leader, so its client must hear
    "outcome unknown", never an answer it reads as "not applied" (it was
    "ERR server is shutting down": the fault campaign's client counted
    such a write as failed and then read its value elsewhere). Driven step
    by step: the node being removed leads its own group, whose other
    members are stopped, so the write stays proposed and uncommitted when
    FINISH closes the group."""
    base = pick_base(4, 3)
    c = make_cluster(4, addrs=[("127.0.0.1", base + i) for i in range(4)])
    owners = settled_owners(c, c.nodes)
    leaving = c.nodes[3]
    group = name(leaving)
    key = next(f"u:{i}" for i in range(100000) if owners[key_slot(f"u:{i}")] == leaving.port)
    others = [nd for nd in c.nodes[:3] if group in c.groups(nd)]
    assert len(others) == 2, f"the group of {group} has members {others}"
    admin = leaving.client(decode_responses=True)
    assert admin.execute_command("CLUSTER", "DELNODE", group) in (True, "OK")

    def proposed():
        line = next(x for x in admin.execute_command("GRIDSYNC", "GROUPS").splitlines()
                    if x.startswith(f"group_{group}:"))
        return int(dict(kv.split("=") for kv in line.rsplit(":", 1)[1].split(","))[
            "commands_proposed"])

    before = proposed()
    for nd in others:
        nd.proc.send_signal(signal.SIGSTOP)
    writer = redis.Redis(host=leaving.host, port=leaving.port, socket_timeout=30,
                         decode_responses=True)
    try:
        conn = writer.connection_pool.get_connection("SET")
        conn.send_command("SET", key, "maybe")
        deadline = time.monotonic() + 30
        while proposed() == before:  # the SET is in the group's log now
            assert time.monotonic() < deadline, "the SET was never proposed"
            time.sleep(0.02)
        assert admin.execute_command("CLUSTER", "MIGRATE", "FINISH") in (True, "OK")
        try:
            reply = conn.read_response()
        except redis.ResponseError as e:
            reply = str(e)
        assert "outcome unknown" in str(reply), f"a proposed write answered {reply!r}"
        writer.connection_pool.release(conn)
    finally:
        for nd in others:
            nd.proc.send_signal(signal.SIGCONT)
        writer.close()
        admin.close()


def group_line(nd, group):
    """GRIDSYNC GROUPS' fields for `group` at nd, as a dict of strings."""
    text = nd.client(decode_responses=True).execute_command("GRIDSYNC", "GROUPS")
    line = next(x for x in text.splitlines() if x.startswith(f"group_{group}:"))
    return dict(kv.split("=") for kv in line.rsplit(":", 1)[1].split(","))


def test_snapshot_carries_the_slot_state(make_cluster):
    """A group's slot migration state (the slots that left it) is built by
    its log; a member restored from a snapshot that covers those entries
    must have it too, or it would apply a stray write to a slot that left
    the group, which the other members refuse. Here a member restarted
    after its own snapshots have passed a join's entries (it replays only
    the log after them) reports the same slots gone as before."""
    base = pick_base(4, 3)
    c = make_cluster(3, addrs=[("127.0.0.1", base + i) for i in range(3)],
                     extra=["--cluster-snapshot-entries", "16"])
    c.wait_settled()
    members = [name(nd) for nd in c.nodes]
    joining = JoiningNode(c, 3, "127.0.0.1", base + 3)
    c.nodes.append(joining)
    joining.start()
    run_reshard("add", name(joining), members)
    owners = settled_owners(c, c.nodes, timeout=120)
    src = c.nodes[0]
    group = name(src)
    gone = int(group_line(src, group)["slots_gone"])
    assert gone > 0, "the join moved no slot out of the first group"
    member = next(nd for nd in c.nodes[1:3] if group in c.groups(nd))
    assert int(group_line(member, group)["slots_gone"]) == gone
    # Entries past the snapshot threshold, so the member's snapshots cover
    # the join's block and switch.
    before = int(group_line(member, group)["snapshots"])
    key = next(f"s:{i}" for i in range(100000) if owners[key_slot(f"s:{i}")] == src.port)
    w = src.client()
    deadline = time.monotonic() + 60
    i = 0
    while int(group_line(member, group)["snapshots"]) < before + 2:
        assert time.monotonic() < deadline, "the member took no snapshot"
        for _ in range(20):
            assert w.set(key, i)
            i += 1
    w.close()
    member.kill9()
    member.start()
    deadline = time.monotonic() + 60
    while True:
        try:
            fields = group_line(member, group)
            if int(fields["applied"]) >= int(group_line(src, group)["commit"]):
                break
        except (redis.ConnectionError, StopIteration):
            pass
        assert time.monotonic() < deadline, "the restarted member did not catch up"
        time.sleep(0.05)
    assert int(fields["slots_gone"]) == gone, f"restored with {fields['slots_gone']} of {gone} slots gone"
