"""GridSync cluster mode, multi-process on loopback: several gridsync-server
processes with --cluster-enabled, driven by redis-py's RedisCluster and by
plain clients that must see -MOVED.

What is checked: writes and reads through RedisCluster; the MOVED answer
for every one of the 16384 slots; kill -9 of a leader (a new leader serves
the slot and no acknowledged write is lost); a restarted node catches up;
a whole-cluster restart keeps the data; the CLUSTER commands' shapes.
Waits are bounded polls (many seconds); nothing asserts a duration."""
import os
import random
import signal
import socket
import subprocess
import tempfile
import threading
import time

import pytest
import redis
from redis.cluster import RedisCluster

from conftest import find_binary

SLOTS = 16384
RAFT_OFFSET = 10000  # a node's Raft port is its client port + 10000


def crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key):
    k = key.encode()
    s = k.find(b"{")
    if s >= 0:
        e = k.find(b"}", s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    return crc16(k) % SLOTS


def port_free(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False


def pick_base(n, replicas):
    """A base port whose client and Raft ports are all free."""
    for _ in range(200):
        # Below the kernel's ephemeral range (32768 and up by default), so
        # that no outgoing connection takes a port between the check and
        # the bind: client ports base.., Raft ports base+10000...
        base = random.randrange(10000, 32768 - RAFT_OFFSET - n)
        ports = [base + i for i in range(n)] + [base + RAFT_OFFSET + i for i in range(n)]
        if all(port_free(p) for p in ports):
            return base
    pytest.skip("no free port range")


class Node:
    def __init__(self, cluster, i, host, port, prefix=()):
        self.cluster, self.i = cluster, i
        self.host, self.port = host, port
        self.prefix = list(prefix)  # e.g. ["ip", "netns", "exec", NS]
        self.dir = os.path.join(cluster.dir, f"node-{i}-{self.port}")
        self.proc = None
        self.log = None
        # A node being added to a running cluster: its own peer list (the
        # members, then itself) and --cluster-join yes.
        self.peers = None
        self.join = False

    def start(self):
        c = self.cluster
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            self.prefix +
            [find_binary("gridsync-server"), "--bind", self.host, "--port", str(self.port),
             "--cluster-enabled", "yes", *(["--cluster-join", "yes"] if self.join else []),
             "--cluster-peers", self.peers or c.peers, "--cluster-replicas", str(c.replicas),
             "--dir", self.dir, *c.extra, *(c.node_extra(self) if c.node_extra else [])],
            stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 20
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"node {self.port} exited early:\n{self.output()}")
            try:
                socket.create_connection((self.host, self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"node {self.port} did not listen")
                time.sleep(0.02)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self):
        """SIGTERM; returns the exit status (None if it was not running)."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return "hung"
        return self.proc.returncode

    def output(self):
        if not self.log:
            return ""
        self.log.seek(0)
        return self.log.read().decode(errors="replace")

    def client(self, **kw):
        kw.setdefault("socket_timeout", 10)
        return redis.Redis(host=self.host, port=self.port, **kw)


class Cluster:
    """n nodes on 127.0.0.1 and consecutive ports, or (addrs) on given
    (host, port) pairs, each started under its prefix command."""

    def __init__(self, n, replicas=3, addrs=None, prefixes=None, extra=(), node_extra=None):
        self.n, self.replicas = n, replicas
        self.extra = list(extra)  # more server flags
        self.node_extra = node_extra  # node -> flags of that node only
        self.tmp = tempfile.TemporaryDirectory()
        self.dir = self.tmp.name
        if addrs is None:
            base = pick_base(n, replicas)
            addrs = [("127.0.0.1", base + i) for i in range(n)]
        self.base = addrs[0][1]
        # An IPv6 host goes in brackets, as cluster-peers wants it.
        self.peers = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in addrs)
        self.nodes = [Node(self, i, h, p, prefixes[i] if prefixes else ())
                      for i, (h, p) in enumerate(addrs)]
        self.killed = set()

    def start(self):
        for nd in self.nodes:
            nd.start()
        self.wait_ready()

    def groups(self, node):
        """{group name: role} from one node's GRIDSYNC GROUPS."""
        info = node.client(decode_responses=True).execute_command("GRIDSYNC", "GROUPS")
        out = {}
        for line in info.splitlines():
            if line.startswith("group_"):
                name, rest = line[len("group_"):].rsplit(":", 1)
                out[name] = dict(kv.split("=") for kv in rest.split(","))["role"]
        return out

    def leaders(self, nodes=None):
        """{group name: port of the node that says it leads it}."""
        found = {}
        for nd in nodes if nodes is not None else self.nodes:
            if not nd.alive():
                continue
            try:
                for g, role in self.groups(nd).items():
                    if role == "leader":
                        found[g] = nd.port
            except (redis.ConnectionError, redis.TimeoutError):
                pass
        return found

    def wait_ready(self, timeout=30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if len(self.leaders()) == self.n:
                return
            time.sleep(0.05)
        raise AssertionError(f"not every group has a leader: {self.leaders()}")

    def wait_settled(self, timeout=30):
        """Until every node leads the group it is preferred for."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            leaders = self.leaders()
            if all(leaders.get(f"{nd.host}:{nd.port}") == nd.port for nd in self.nodes):
                return
            time.sleep(0.05)
        raise AssertionError(f"leadership did not settle: {self.leaders()}")

    def rc(self):
        alive = [nd for nd in self.nodes if nd.alive()]
        return RedisCluster(host=alive[0].host, port=alive[0].port, decode_responses=True,
                            socket_timeout=10, cluster_error_retry_attempts=10)

    def node_at(self, addr):
        host, port = addr.rsplit(":", 1)
        return next(nd for nd in self.nodes if nd.host == host and nd.port == int(port))

    def call(self, *args, timeout=30, nodes=None):
        """Run a keyed command the way a cluster client does: follow MOVED,
        wait out TRYAGAIN/CLUSTERDOWN and dead nodes (only through `nodes`,
        default all). Returns the reply."""
        deadline = time.monotonic() + timeout
        usable = nodes if nodes is not None else self.nodes
        node = next(nd for nd in usable if nd.alive())
        last = None
        while time.monotonic() < deadline:
            try:
                return node.client(decode_responses=True).execute_command(*args)
            except redis.ResponseError as e:
                msg = str(e)
                last = msg
                if msg.startswith("MOVED"):
                    node = self.node_at(msg.split()[2])
                    if not node.alive() or node not in usable:
                        node = random.choice([nd for nd in usable if nd.alive()])
                        time.sleep(0.02)
                    continue
                if msg.startswith(("TRYAGAIN", "CLUSTERDOWN")):
                    time.sleep(0.02)
                    continue
                raise
            except (redis.ConnectionError, redis.TimeoutError) as e:
                last = repr(e)
                node = random.choice([nd for nd in usable if nd.alive()])
                time.sleep(0.02)
        raise AssertionError(f"{args} not served within {timeout}s (last: {last})")

    def close(self):
        failed = []
        for nd in self.nodes:
            rc = nd.stop()
            if nd.i not in self.killed and rc not in (0, None):
                failed.append(f"node {nd.port}: exit status {rc}\n{nd.output()[-3000:]}")
            if nd.log:
                nd.log.close()
        self.tmp.cleanup()
        assert not failed, "\n".join(failed)


@pytest.fixture
def make_cluster(request):
    made = []

    def make(n=3, replicas=3, addrs=None, prefixes=None, extra=(), node_extra=None):
        c = Cluster(n, replicas, addrs, prefixes, extra, node_extra)
        made.append(c)
        c.start()
        return c

    def close_all():
        for c in made:
            c.close()

    request.addfinalizer(close_all)
    return make


def keys_for_every_slot():
    keys, missing, i = [None] * SLOTS, SLOTS, 0
    while missing:
        k = f"k{i}"
        s = key_slot(k)
        if keys[s] is None:
            keys[s] = k
            missing -= 1
        i += 1
    return keys


def test_rediscluster_writes_and_reads(make_cluster):
    c = make_cluster(3)
    rc = c.rc()
    for i in range(300):
        assert rc.set(f"key:{i}", f"value:{i}")
    for i in range(300):
        assert rc.get(f"key:{i}") == f"value:{i}"
    assert [rc.incr("counter") for _ in range(5)] == [1, 2, 3, 4, 5]
    # Hash tags keep keys together: a multi-key command on one slot works.
    assert rc.mset({"{user1}:a": "1", "{user1}:b": "2"})
    assert rc.mget("{user1}:a", "{user1}:b") == ["1", "2"]
    assert rc.delete("key:0") == 1
    assert rc.get("key:0") is None
    # Relative expiry is replicated as the leader computed it.
    assert rc.set("ttl", "x", ex=100)
    assert 0 < rc.ttl("ttl") <= 100
    rc.close()


def test_cluster_commands(make_cluster):
    c = make_cluster(3)
    r = c.nodes[0].client(decode_responses=True)
    assert r.execute_command("CLUSTER", "KEYSLOT", "foo") == 12182
    assert r.execute_command("CLUSTER", "KEYSLOT", "{user1000}.following") == 3443
    myid = r.execute_command("CLUSTER", "MYID")
    assert len(myid) == 40
    slots = r.execute_command("CLUSTER", "SLOTS")
    covered = 0
    for entry in slots:
        start, end, master = entry[0], entry[1], entry[2]
        covered += end - start + 1
        assert master[0] == "127.0.0.1" and c.base <= master[1] < c.base + 3
        assert len(entry) == 3  # the leader only: a node is a master or a replica
    shards = r.execute_command("CLUSTER", "SHARDS")
    assert len(shards) == 3
    for shard in shards:
        shard = dict(zip(shard[::2], shard[1::2])) if isinstance(shard, list) else shard
        assert len(shard["nodes"]) == 3  # RF 3
    assert covered == SLOTS
    nodes = r.execute_command("CLUSTER", "NODES")
    lines = [l for l in (nodes if isinstance(nodes, str) else nodes.decode()).splitlines() if l]
    assert len(lines) == 3 and sum("myself" in l for l in lines) == 1
    assert any(l.startswith(myid) for l in lines)
    info = r.execute_command("CLUSTER", "INFO")
    assert "cluster_state:ok" in info and "cluster_known_nodes:3" in info
    # Only key:value lines Redis prints: redis-py's parser takes them all.
    redis_keys = {"cluster_state", "cluster_slots_assigned", "cluster_slots_ok",
                  "cluster_slots_pfail", "cluster_slots_fail", "cluster_known_nodes",
                  "cluster_size", "cluster_current_epoch", "cluster_my_epoch",
                  "cluster_stats_messages_sent", "cluster_stats_messages_received",
                  "total_cluster_links_buffer_limit_exceeded"}
    text = info if isinstance(info, str) else info.decode()
    assert {l.split(":", 1)[0] for l in text.splitlines() if l} <= redis_keys
    assert c.rc().cluster_info()["cluster_state"] == "ok"
    assert "group_" in r.execute_command("GRIDSYNC", "GROUPS")
    hello = r.execute_command("HELLO", "2")
    hello = dict(zip(hello[::2], hello[1::2])) if isinstance(hello, list) else hello
    assert hello["mode"] == "cluster"
    assert r.execute_command("READONLY") in (True, "OK")
    assert r.execute_command("READWRITE") in (True, "OK")
    with pytest.raises(redis.ResponseError, match="CROSSSLOT"):
        r.execute_command("MGET", "a", "b")


def test_moved_for_every_slot(make_cluster):
    """A plain client gets -MOVED <slot> <host>:<port> with the key's own
    slot, and following it (at most one more hop) reaches the node that
    serves the slot."""
    c = make_cluster(3)
    c.wait_settled()  # leadership must not move while the slots are scanned
    keys = keys_for_every_slot()
    clients = {nd.port: nd.client() for nd in c.nodes}
    served = [None] * SLOTS
    for nd in c.nodes:
        pipe = clients[nd.port].pipeline(transaction=False)
        for k in keys:
            pipe.get(k)
        for slot, res in enumerate(pipe.execute(raise_on_error=False)):
            if isinstance(res, redis.ResponseError):
                msg = str(res)
                assert msg.startswith("MOVED "), msg
                _, s, addr = msg.split()
                assert int(s) == slot
                assert addr.rsplit(":", 1)[0] == "127.0.0.1"
                assert int(addr.rsplit(":", 1)[1]) in clients
            else:
                assert res is None
                assert served[slot] in (None, nd.port), f"slot {slot} served twice"
                served[slot] = nd.port
    # Every slot is served by exactly one node once leadership settled
    # where it is preferred; others redirect there.
    unserved = [s for s in range(SLOTS) if served[s] is None]
    for s in unserved[:50]:
        assert c.call("GET", keys[s]) is None
    assert len(unserved) < SLOTS


def test_kill_leader_no_acked_write_lost_and_restart_catches_up(make_cluster):
    c = make_cluster(3)
    acked = {}
    for i in range(200):
        k = f"acked:{i}"
        assert c.call("SET", k, str(i)) in (True, "OK")
        acked[k] = str(i)
    # The leader of "acked:0"'s slot dies without warning.
    c.wait_settled()
    slot = key_slot("acked:0")
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
    # A new leader serves the slot, and writes keep being acknowledged.
    assert c.call("SET", "acked:0", "new", timeout=30) in (True, "OK")
    acked["acked:0"] = "new"
    for i in range(200, 260):
        k = f"acked:{i}"
        assert c.call("SET", k, str(i)) in (True, "OK")
        acked[k] = str(i)
    for k, v in acked.items():
        assert c.call("GET", k) == v, k
    assert key_slot("acked:0") == slot

    # The killed node restarts from its directory and catches up: its
    # replica of the slot (READONLY reads it locally) gets every write.
    owner.start()
    c.killed.discard(owner.i)
    r = owner.client(decode_responses=True)
    r.execute_command("READONLY")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if r.get("acked:259") == "259" and r.get("acked:0") == "new":
            break
        time.sleep(0.05)
    assert r.get("acked:259") == "259"
    assert r.get("acked:0") == "new"
    c.wait_ready()


def test_whole_cluster_restart_keeps_data(make_cluster):
    c = make_cluster(3)
    for i in range(50):
        assert c.call("SET", f"durable:{i}", str(i)) in (True, "OK")
    assert c.call("INCR", "durable:n") == 1
    for nd in c.nodes:
        assert nd.stop() == 0
    for nd in c.nodes:
        nd.start()
    c.wait_ready()
    for i in range(50):
        assert c.call("GET", f"durable:{i}") == str(i)
    assert c.call("INCR", "durable:n") == 2


def test_pipeline_keeps_order_and_reads_its_writes(make_cluster):
    """Requests pipelined behind a replicated write wait for it: replies
    come in order and a GET after a SET in the same pipeline sees it."""
    c = make_cluster(3)
    c.wait_settled()  # no leadership hand-over in the middle of the pipeline
    key = "{pipe}:k"
    slot = key_slot(key)
    # Find the node that serves the slot.
    for nd in c.nodes:
        try:
            nd.client().get(key)
            owner = nd
            break
        except redis.ResponseError:
            continue
    r = owner.client(decode_responses=True)
    pipe = r.pipeline(transaction=False)
    for i in range(50):
        pipe.set(key, str(i))
        pipe.get(key)
        pipe.incr("{pipe}:n")
    out = pipe.execute()
    for i in range(50):
        assert out[3 * i] is True
        assert out[3 * i + 1] == str(i)
        assert out[3 * i + 2] == i + 1
    assert r.execute_command("CLUSTER", "KEYSLOT", key) == slot


def test_leadership_spreads_one_group_per_node(make_cluster):
    """Each node ends up leading the group it is preferred for."""
    c = make_cluster(3)
    c.wait_settled()


def test_restart_after_snapshot(make_cluster):
    """Enough entries make each group snapshot its store; a node restarted
    after that recovers from snapshot plus log."""
    c = make_cluster(3, extra=["--cluster-snapshot-entries", "500"])
    rc = c.rc()
    for i in range(1500):
        rc.set(f"{{snap}}:{i % 100}", str(i))  # one slot: one group's log
    victim = c.nodes[1]
    victim.stop()
    for nd in c.nodes:
        nd_dir = nd.dir
        assert os.path.isdir(nd_dir)
    snaps = [f for root, _, files in os.walk(victim.dir) for f in files if f.startswith("snapshot")]
    assert snaps, "no snapshot was written"
    victim.start()
    c.wait_ready()
    r = victim.client(decode_responses=True)
    r.execute_command("READONLY")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and r.get("{snap}:99") != "1499":
        time.sleep(0.05)
    assert r.get("{snap}:99") == "1499"
    assert r.get("{snap}:0") == "1400"
    rc.close()


def test_redis_cli_and_benchmark_cluster_mode(make_cluster):
    c = make_cluster(3)
    # redis-benchmark --cluster takes its node list from CLUSTER NODES once,
    # keeping only masters that own slots: start it once every node leads.
    c.wait_settled()
    port = str(c.nodes[0].port)
    out = subprocess.run(["redis-cli", "-c", "-p", port, "SET", "foo", "bar"],
                         capture_output=True, text=True, timeout=30).stdout
    assert out.strip() == "OK"
    out = subprocess.run(["redis-cli", "-c", "-p", str(c.nodes[2].port), "GET", "foo"],
                         capture_output=True, text=True, timeout=30).stdout
    assert out.strip() == "bar"
    # A plain redis-cli gets the redirection itself.
    replies = [subprocess.run(["redis-cli", "-p", str(nd.port), "GET", "foo"],
                              capture_output=True, text=True, timeout=30).stdout.strip()
               for nd in c.nodes]
    assert sum(r == "bar" for r in replies) >= 1
    assert all(r == "bar" or r.startswith("MOVED 12182 ") for r in replies), replies
    bench = subprocess.run(["redis-benchmark", "--cluster", "-p", port, "-t", "set,get",
                            "-n", "2000", "-c", "10", "-q"],
                           capture_output=True, text=True, timeout=120)
    assert bench.returncode == 0, bench.stdout + bench.stderr
    assert "SET:" in bench.stdout and "GET:" in bench.stdout


@pytest.mark.parametrize("mode", ["lease", "barrier", "any"])
def test_read_modes(make_cluster, mode):
    """In every cluster-read-mode (barrier: reads wait for a Raft barrier;
    lease: for one only when the lease has run out) reads answer correctly
    and in order, pipelined with writes."""
    c = make_cluster(3, extra=["--cluster-read-mode", mode])
    rc = c.rc()
    for i in range(100):
        assert rc.set(f"lin:{i}", str(i))
    assert [rc.get(f"lin:{i}") for i in range(100)] == [str(i) for i in range(100)]
    key = "{lin}:k"
    c.wait_settled()
    for nd in c.nodes:
        try:
            nd.client().get(key)
            owner = nd
            break
        except redis.ResponseError:
            continue
    pipe = owner.client(decode_responses=True).pipeline(transaction=False)
    for i in range(30):
        pipe.get(key)
        pipe.set(key, str(i))
        pipe.get(key)
    out = pipe.execute()
    for i in range(30):
        assert out[3 * i] == (None if i == 0 else str(i - 1))
        assert out[3 * i + 1] is True
        assert out[3 * i + 2] == str(i)
    rc.close()


def test_dbsize_and_flushall(make_cluster):
    """DBSIZE counts the keys of the shards a node leads; FLUSHALL empties
    them through their logs, so replicas are emptied too."""
    c = make_cluster(3)
    c.wait_settled()
    rc = c.rc()
    for i in range(200):
        rc.set(f"f:{i}", "x")
    # redis-py sends these to one node unless told to ask every primary.
    assert rc.dbsize(target_nodes=RedisCluster.PRIMARIES) == 200
    assert sum(nd.client().dbsize() for nd in c.nodes) == 200
    assert rc.flushall(target_nodes=RedisCluster.PRIMARIES)
    assert rc.dbsize(target_nodes=RedisCluster.PRIMARIES) == 0
    assert rc.get("f:1") is None
    # A replica's copy is gone too.
    r = c.nodes[0].client()
    r.execute_command("READONLY")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(r.get(f"f:{i}") for i in range(20)):
        time.sleep(0.05)
    assert not any(r.get(f"f:{i}") for i in range(20))
    rc.close()


def test_maxmemory_evicts_in_cluster_mode(make_cluster):
    """maxmemory holds for each shard: writes past it evict (SLRU) on every
    replica instead of growing without bound."""
    c = make_cluster(3, extra=["--maxmemory", "1mb"])
    c.wait_settled()
    key = "{mem}:0"
    for nd in c.nodes:
        try:
            nd.client().get(key)
            owner = nd
            break
        except redis.ResponseError:
            continue
    r = owner.client()
    pipe = r.pipeline(transaction=False)
    for i in range(3000):
        pipe.set(f"{{mem}}:{i}", b"v" * 1000)
    assert all(x is True for x in pipe.execute())
    kept = r.dbsize()
    assert 0 < kept < 3000
    assert r.get("{mem}:2999") == b"v" * 1000  # the newest survive
    info = r.info("stats")
    assert info["evicted_keys"] > 0


def test_cluster_transaction_states(make_cluster):
    """MULTI/WATCH work in cluster mode (test_cluster_multi.py has the
    rest); EXEC/DISCARD without MULTI answer as Redis."""
    c = make_cluster(1, replicas=1)
    s = socket.create_connection((c.nodes[0].host, c.nodes[0].port), timeout=10)
    try:
        s.sendall(b"MULTI\r\nWATCH k\r\nEXEC\r\nEXEC\r\nDISCARD\r\nUNWATCH\r\n")
        want = (b"+OK\r\n-ERR WATCH inside MULTI is not allowed\r\n*0\r\n"
                b"-ERR EXEC without MULTI\r\n-ERR DISCARD without MULTI\r\n+OK\r\n")
        got = b""
        while len(got) < len(want):
            data = s.recv(4096)
            if not data:
                break
            got += data
        assert got == want
    finally:
        s.close()


def test_sigterm_under_load_exits_cleanly(make_cluster):
    """A node stopped with SIGTERM while clients keep writing exits with
    status 0, every time: its groups close with appends, snapshots' and
    segments' work still in flight (libraft 0.15 could complete such work
    after its close callback; freeing the group there crashed the node)."""
    c = make_cluster(3, extra=("--cluster-snapshot-entries", "64"))
    stop = threading.Event()
    errors = []

    def writer(w):
        i = 0
        while not stop.is_set():
            try:
                c.call("SET", f"load:{w}:{i % 50}", str(i), timeout=30)
            except AssertionError as e:  # not served within the timeout
                errors.append(str(e))
                return
            i += 1

    threads = [threading.Thread(target=writer, args=(w,), daemon=True) for w in range(4)]
    for t in threads:
        t.start()
    try:
        for cycle in range(6):
            nd = c.nodes[cycle % len(c.nodes)]
            # Writes acknowledged since the last restart: the groups have
            # appended (and, every 64 entries, snapshotted) before the stop.
            for i in range(30):
                assert c.call("SET", f"cycle:{cycle}:{i}", "x") in (True, "OK")
            rc = nd.stop()
            assert rc == 0, f"cycle {cycle}: exit status {rc}\n{nd.output()[-3000:]}"
            nd.start()
            c.wait_ready()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=60)
    assert not errors, errors[:3]
    for i in range(30):
        assert c.call("GET", f"cycle:5:{i}") == "x"
