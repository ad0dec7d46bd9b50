"""Raft's persistent state in DynamoDB (--raft-store dynamodb://...) against a
real dynalite started on a free port (test_cluster_registry's fixtures).

What is checked: a 3-node cluster with no data directory (each node runs in
an empty working directory, its scratch TMPDIR holds no Raft files) serves
writes and keeps its state in the table; after kill -9 of every node and a
restart in fresh empty directories every acknowledged write is there,
including after snapshots (small thresholds) and a follower that catches up
by an installed snapshot; a process whose incarnation was superseded stops
with a message and does not overwrite the newer meta item; throttling and
5xx from the store and requests held past the client's timeout (the fault
proxy) are retried while the cluster serves.
Waits are bounded polls; nothing asserts a duration."""
import os
import signal
import subprocess
import tempfile

import pytest
from redis.cluster import RedisCluster

from conftest import find_binary
from test_cluster import pick_base
from test_cluster_registry import (FaultProxy, ddb, dynalite, items,  # noqa: F401 (fixture)
                                   wait_port, wait_until)


class StoreNodes:
    """n cluster nodes with --raft-store and no --dir; each run in a fresh
    empty working directory (and TMPDIR for libraft's scratch)."""

    def __init__(self, n, store, *extra):
        self.n, self.store, self.extra = n, store, extra
        self.base = pick_base(n, n)
        self.peers = ",".join(f"127.0.0.1:{self.base + i}" for i in range(n))
        self.tmp = tempfile.TemporaryDirectory()
        self.runs = 0
        self.procs = [None] * n

    def start(self, i):
        self.runs += 1
        cwd = os.path.join(self.tmp.name, f"run{self.runs}-node{i}")
        scratch = os.path.join(cwd, "tmp")
        os.makedirs(scratch)
        log = tempfile.TemporaryFile()
        env = dict(os.environ, AWS_ACCESS_KEY_ID="test", AWS_SECRET_ACCESS_KEY="test",
                   TMPDIR=scratch)
        p = subprocess.Popen(
            [find_binary("gridsync-server"), "--bind", "127.0.0.1", "--port",
             str(self.base + i), "--cluster-enabled", "yes", "--cluster-peers", self.peers,
             "--cluster-replicas", str(self.n), "--raft-store", self.store, *self.extra],
            stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        p.log, p.cwd, p.port = log, cwd, self.base + i
        self.procs[i] = p
        try:
            wait_port(p.port, p, f"gridsync-server {p.port}", timeout=60)
        except RuntimeError as e:
            raise RuntimeError(f"{e}:\n{self.output(p)[-3000:]}")
        return p

    def start_all(self):
        for i in range(self.n):
            self.start(i)

    def kill9(self, i):
        p = self.procs[i]
        p.send_signal(signal.SIGKILL)
        p.wait()

    @staticmethod
    def output(p):
        p.log.seek(0)
        return p.log.read().decode(errors="replace")

    def client(self, i=0):
        def attempt():
            try:
                rc = RedisCluster(host="127.0.0.1", port=self.base + i, decode_responses=True,
                                  socket_timeout=10, cluster_error_retry_attempts=20)
                rc.set("probe", "1")
                return rc
            except Exception:
                return None
        return wait_until(attempt, "the cluster serving", timeout=120)

    def close(self):
        failed = []
        for p in self.procs:
            if p is not None and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
                    failed.append(f"{p.port} hung")
                if p.returncode != 0:
                    failed.append(f"{p.port} exit {p.returncode}:\n{self.output(p)[-3000:]}")
        self.tmp.cleanup()
        assert not failed, "\n".join(failed)


@pytest.fixture
def cluster_factory():
    made = []

    def make(n, store, *extra):
        c = StoreNodes(n, store, *extra)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


def raft_items(port, table):
    return [it for it in items(port, table) if it["pk"].startswith("raft#")]


def metas(port, table):
    return [it for it in raft_items(port, table) if it["sk"] == "0"]


def shard_metas(port, table):
    """The meta items of the shards' groups (not the meta group's)."""
    return [it for it in metas(port, table) if "#group-" in it["pk"]]


def no_raft_files(c):
    """The working directories and scratch TMPDIRs hold no Raft state."""
    for p in c.procs:
        for root, _dirs, files in os.walk(p.cwd):
            for f in files:
                assert not (f.startswith("metadata") or f.startswith("snapshot") or
                            f.startswith("open-") or f[:1].isdigit()), os.path.join(root, f)


def write_keys(rc, prefix, n):
    acked = {}
    for i in range(n):
        k, v = f"{prefix}:{i}", f"v{i}-" + "x" * (i % 50)
        assert rc.set(k, v)
        acked[k] = v
    return acked


def test_three_nodes_whole_cluster_kill9_restart(dynalite, cluster_factory):  # noqa: F811
    store = f"dynamodb://127.0.0.1:{dynalite}/gsraft"
    c = cluster_factory(3, store, "--cluster-snapshot-entries", "16")
    c.start_all()
    rc = c.client()
    acked = write_keys(rc, "a", 300)
    rc.close()
    no_raft_files(c)
    # Every node's groups are in the table: 3 groups x 3 members, and the
    # meta group's 3 voters (docs/gridsync-cluster.md, "Membership").
    ms = metas(dynalite, "gsraft")
    assert len(ms) == 12
    assert sum(m["pk"].endswith("#meta") for m in ms) == 3
    # Snapshots were taken (16 entries between two) and are chunk items.
    assert any(it["pk"].endswith("#snap") for it in raft_items(dynalite, "gsraft"))
    assert any(int(m["si"]) > 0 for m in metas(dynalite, "gsraft"))
    for i in range(3):
        c.kill9(i)
    incs = {m["pk"]: int(m["inc"]) for m in metas(dynalite, "gsraft")}
    # A restart from DynamoDB alone, in fresh empty directories.
    c.start_all()
    rc = c.client()
    for k, v in acked.items():
        assert rc.get(k) == v, k
    more = write_keys(rc, "b", 50)
    for k, v in more.items():
        assert rc.get(k) == v
    rc.close()
    # Each process took a new incarnation.
    for m in metas(dynalite, "gsraft"):
        assert int(m["inc"]) == incs[m["pk"]] + 1
    for p in c.procs:
        assert "raft-store: " in c.output(p)


def test_follower_catches_up_by_an_installed_snapshot(dynalite, cluster_factory):  # noqa: F811
    store = f"dynamodb://127.0.0.1:{dynalite}/gsraftsnap"
    c = cluster_factory(3, store, "--cluster-snapshot-entries", "16")
    c.start_all()
    rc = c.client()
    acked = write_keys(rc, "a", 50)
    rc.close()
    c.kill9(2)
    before = {m["pk"]: int(m["ep"]) for m in metas(dynalite, "gsraftsnap")}
    rc = c.client()
    acked.update(write_keys(rc, "b", 300))
    rc.close()
    c.start(2)
    node3 = [pk for pk in before if "group-" in pk and pk.startswith(f"raft#{node3_id(c)}#")]
    # The lagging member of the other nodes' groups gets a snapshot from the
    # leader: written as a new log epoch in its meta item.
    wait_until(lambda: any(int(m["ep"]) > before[m["pk"]]
                           for m in metas(dynalite, "gsraftsnap") if m["pk"] in node3),
               "an installed snapshot", timeout=120)
    # Now the other two are killed and restarted from the table: node 3's
    # state must be part of a majority that has every write.
    for i in range(3):
        c.kill9(i)
    c.start_all()
    rc = c.client()
    for k, v in acked.items():
        assert rc.get(k) == v, k
    rc.close()


def node3_id(c):
    """Node 3's raft id, from its log line naming its state's key (the node
    may listen before its groups have started: polled)."""
    def find():
        for line in c.output(c.procs[2]).splitlines():
            if "raft-store: " in line and "#group-" in line:
                return line.split("raft-store: ", 1)[1].split("#", 1)[0]
        return None
    return wait_until(find, "node 3's raft-store line", timeout=120)


def test_stale_incarnation_is_refused(dynalite, cluster_factory):  # noqa: F811
    table = "gsraftstale"
    c = cluster_factory(1, f"dynamodb://127.0.0.1:{dynalite}/{table}")
    c.start_all()
    rc = c.client()
    write_keys(rc, "a", 20)
    (meta,) = shard_metas(dynalite, table)
    # A newer incarnation of the same node takes the group's state, as a
    # second process started for it would (it bumps the meta item's
    # incarnation at start).
    newer = int(meta["inc"]) + 5
    status, _ = ddb(dynalite, "UpdateItem", {
        "TableName": table, "Key": {"pk": {"S": meta["pk"]}, "sk": {"N": "0"}},
        "UpdateExpression": "SET #i = :i", "ExpressionAttributeNames": {"#i": "inc"},
        "ExpressionAttributeValues": {":i": {"N": str(newer)}}})
    assert status == 200
    # ...and has already written the next entries of the log, where the old
    # process would append its next ones.
    last = max(int(it["sk"]) // 4096 for it in raft_items(dynalite, table)
               if it["pk"] == meta["pk"] and it["sk"] != "0")
    ahead = range(last + 1, last + 200)
    for idx in ahead:
        status, _ = ddb(dynalite, "PutItem", {"TableName": table, "Item": {
            "pk": {"S": meta["pk"]}, "sk": {"N": str(idx * 4096)}, "t": {"N": meta["term"]},
            "y": {"N": "2"}, "n": {"N": "1"}, "z": {"N": "0"}, "ep": {"N": meta["ep"]},
            "inc": {"N": str(newer)}}})
        assert status == 200
    p = c.procs[0]
    # The old process notices (its conditional writes fail, its fence
    # re-reads the incarnation) and stops rather than write on.
    try:
        for i in range(10000):
            if p.poll() is not None:
                break
            rc.set(f"late:{i}", "x")
    except Exception:
        pass
    assert wait_until(lambda: p.poll() is not None, "the stale process to stop") and \
        p.returncode != 0
    assert "a newer incarnation of this node owns the group's state" in c.output(p)
    (after,) = shard_metas(dynalite, table)
    assert int(after["inc"]) == newer
    # The newer incarnation's entries were not overwritten.
    mine = {int(it["sk"]) // 4096: it for it in raft_items(dynalite, table)
            if it["pk"] == meta["pk"] and it["sk"] != "0"}
    for idx in ahead:
        assert int(mine[idx]["inc"]) == newer and "d" not in mine[idx], idx
    # The stale process wrote nothing under an incarnation of its own
    # invention: every item carries one not newer than the newer's.
    assert all(int(it.get("inc", 0)) <= newer for it in raft_items(dynalite, table))
    rc.close()


@pytest.mark.parametrize("mode,count", [("throttle", 8), ("5xx", 8), ("slow", 2)])
def test_store_faults_are_retried(dynalite, cluster_factory, mode, count):  # noqa: F811
    proxy = FaultProxy(dynalite)
    try:
        c = cluster_factory(1, f"dynamodb://127.0.0.1:{proxy.port}/gsraftf{mode[0]}")
        c.start_all()
        rc = c.client()
        acked = write_keys(rc, "a", 20)
        proxy.inject(mode, count)
        i = 0
        while proxy.count > 0:
            k = f"f:{i}"
            assert rc.set(k, str(i))
            acked[k] = str(i)
            i += 1
        assert proxy.injected == count
        for k, v in acked.items():
            assert rc.get(k) == v
        rc.close()
        c.kill9(0)
        c.start_all()
        rc = c.client()
        for k, v in acked.items():
            assert rc.get(k) == v
        rc.close()
    finally:
        proxy.close()
