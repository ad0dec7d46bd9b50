"""Snapshots built off the event loop (a fork()ed child encodes the shard)
while writes go on, then a restart from them.

Checked: a 3-node cluster holding tens of thousands of keys takes several
snapshots of every group while clients write unique keys and INCR
counters; after kill -9 of every node and a restart (each node recovers
from its own snapshot plus the log after it), every acknowledged write is
there, and each counter lies between its acknowledged INCRs and those plus
the ones whose outcome was unknown (a write applied after the snapshot's
index but also inside the snapshot would count twice). No snapshot failed.
Waits are bounded polls; nothing asserts a duration."""
import os
import threading
import time

import redis

from test_cluster import make_cluster  # noqa: F401  (fixture)

PRELOAD = 30000
WRITERS = 4


def group_stats(node):
    """{group name: {field: value}} from one node's GRIDSYNC GROUPS."""
    info = node.client(decode_responses=True).execute_command("GRIDSYNC", "GROUPS")
    out = {}
    for line in info.splitlines():
        if line.startswith("group_"):
            name, rest = line[len("group_"):].rsplit(":", 1)
            out[name] = dict(kv.split("=") for kv in rest.split(","))
    return out


def snapshots_per_group(c):
    """{(node port, group): snapshots taken} over every live node."""
    out = {}
    for nd in c.nodes:
        for g, st in group_stats(nd).items():
            out[(nd.port, g)] = int(st["snapshots"])
            assert st["snapshots_failed"] == "0", f"node {nd.port} group {g}: {st}"
    return out


class Writer(threading.Thread):
    def __init__(self, c, t, stop):
        super().__init__(daemon=True)
        self.c, self.t, self.stop = c, t, stop
        self.acked = []  # keys whose SET was acknowledged
        self.incr_ok = 0
        self.incr_unknown = 0
        self.error = None

    def run(self):
        try:
            rc = self.c.rc()
            n = 0
            while not self.stop.is_set():
                key = f"w{self.t}:{n}"
                n += 1
                try:
                    rc.set(key, f"v{n}")
                    self.acked.append(key)
                except redis.RedisError:
                    pass  # not acknowledged: not checked
                try:
                    rc.incr(f"{{cnt{self.t}}}")
                    self.incr_ok += 1
                except redis.ResponseError as e:
                    if "unknown" in str(e):
                        self.incr_unknown += 1
                except redis.RedisError:
                    self.incr_unknown += 1
        except Exception as e:  # reported by the test
            self.error = e


def test_snapshots_under_write_load_then_restart(make_cluster):
    c = make_cluster(3, extra=["--cluster-snapshot-entries", "200"])
    c.wait_settled()
    rc = c.rc()
    value = "x" * 128
    for start in range(0, PRELOAD, 1000):
        p = rc.pipeline(transaction=False)
        for i in range(start, start + 1000):
            p.set(f"pre:{i}", value)
        assert all(p.execute())

    before = snapshots_per_group(c)
    stop = threading.Event()
    writers = [Writer(c, t, stop) for t in range(WRITERS)]
    for w in writers:
        w.start()
    # Every copy of every group snapshots at least twice more while the
    # writers run (each snapshot of a group holds about PRELOAD / 3 keys).
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        now = snapshots_per_group(c)
        if all(now[k] >= before.get(k, 0) + 2 for k in now) and len(now) == 9:
            break
        assert all(w.is_alive() for w in writers), [w.error for w in writers]
        time.sleep(0.2)
    else:
        raise AssertionError(f"snapshots did not advance: {before} -> {now}")
    stop.set()
    for w in writers:
        w.join(timeout=60)
        assert w.error is None, w.error
    acked = [k for w in writers for k in w.acked]
    assert len(acked) > 100 and all(w.incr_ok > 0 for w in writers)

    for nd in c.nodes:
        snaps = [f for _, _, fs in os.walk(nd.dir) for f in fs if f.startswith("snapshot")]
        assert snaps, f"node {nd.port} wrote no snapshot"
    for nd in c.nodes:
        nd.kill9()
        c.killed.add(nd.i)
    for nd in c.nodes:
        nd.start()
    c.wait_ready(timeout=60)

    rc = c.rc()
    for start in range(0, PRELOAD, 1000):
        p = rc.pipeline(transaction=False)
        for i in range(start, start + 1000):
            p.get(f"pre:{i}")
        got = p.execute()
        missing = [start + i for i, v in enumerate(got) if v != value]
        assert not missing, f"preloaded keys lost after the restart: {missing[:10]}"
    for start in range(0, len(acked), 1000):
        p = rc.pipeline(transaction=False)
        for k in acked[start:start + 1000]:
            p.get(k)
        got = p.execute()
        missing = [k for k, v in zip(acked[start:start + 1000], got) if v is None]
        assert not missing, f"acknowledged writes lost after the restart: {missing[:10]}"
    for w in writers:
        n = int(c.call("GET", f"{{cnt{w.t}}}") or 0)
        assert w.incr_ok <= n <= w.incr_ok + w.incr_unknown, \
            (w.t, n, w.incr_ok, w.incr_unknown)
