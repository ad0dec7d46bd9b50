"""MULTI/EXEC/WATCH in cluster mode (docs/gridsync-cluster.md,
"Transactions"), multi-process on loopback with the harness of
test_cluster.py: raw RESP for the exact replies, redis-py transactions
(its Redis pipeline(transaction=True) and WATCH, on the node RedisCluster
maps the slot to: redis-py 4.3's RedisCluster.pipeline refuses
transaction=True itself), a leader killed between MULTI and EXEC, and
keyed routing of commands that count their keys (LMPOP, SINTERCARD).
Waits are bounded polls; nothing asserts a duration."""
import socket
import time

import pytest
import redis

from test_cluster import key_slot, make_cluster  # noqa: F401  (the fixture)


def leader_of(c, key, settle=True):
    """The node that leads key's slot (waits until someone does; with
    settle, first until every node leads its preferred group, so that the
    leadership is not handed back meanwhile)."""
    if settle:
        c.wait_settled()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for nd in c.nodes:
            if not nd.alive():
                continue
            try:
                nd.client().execute_command("EXISTS", key)
                return nd
            except redis.ResponseError:
                continue
            except (redis.ConnectionError, redis.TimeoutError):
                continue
        time.sleep(0.05)
    raise AssertionError(f"nobody leads {key}")


def other_slot_key(c, node, avoid):
    """A key whose slot node does not lead."""
    for i in range(100000):
        k = f"x{i}"
        if key_slot(k) == key_slot(avoid):
            continue
        try:
            node.client().execute_command("EXISTS", k)
        except redis.ResponseError as e:
            if str(e).startswith("MOVED"):
                return k
    raise AssertionError("every slot is led by one node")


def same_node_other_slot(c, node, key):
    """A key in another slot that node also leads."""
    for i in range(100000):
        k = f"y{i}"
        if key_slot(k) == key_slot(key):
            continue
        try:
            node.client().execute_command("EXISTS", k)
            return k
        except redis.ResponseError:
            continue
    raise AssertionError("no second slot on this node")


class Raw:
    """One RESP connection; send() writes commands, reply() reads one."""

    def __init__(self, node):
        self.s = socket.create_connection((node.host, node.port), timeout=15)
        self.buf = b""

    def send(self, *cmds):
        out = b""
        for cmd in cmds:
            out += b"*%d\r\n" % len(cmd)
            for a in cmd:
                a = a if isinstance(a, bytes) else str(a).encode()
                out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)

    def _line(self):
        while b"\r\n" not in self.buf:
            data = self.s.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.buf += data
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def reply(self):
        """The raw bytes of one whole reply."""
        line = self._line()
        out = line + b"\r\n"
        t = line[:1]
        if t in (b"$", b"="):
            n = int(line[1:])
            if n >= 0:
                while len(self.buf) < n + 2:
                    self.buf += self.s.recv(65536)
                out += self.buf[:n + 2]
                self.buf = self.buf[n + 2:]
        elif t in (b"*", b"%", b"~", b">"):
            n = int(line[1:])
            for _ in range(max(n, 0) * (2 if t == b"%" else 1)):
                out += self.reply()
        return out

    def close(self):
        self.s.close()


def test_multi_exec_one_slot_raw(make_cluster):
    c = make_cluster(3)
    nd = leader_of(c, "{t}a")
    r = Raw(nd)
    try:
        r.send(["MULTI"], ["INCR", "{t}a"], ["INCR", "{t}b"], ["GET", "{t}a"], ["PING"],
               ["MSET", "{t}c", "1", "{t}d", "2"], ["EXEC"])
        got = [r.reply() for _ in range(7)]
        assert got == [b"+OK\r\n", b"+QUEUED\r\n", b"+QUEUED\r\n", b"+QUEUED\r\n",
                       b"+QUEUED\r\n", b"+QUEUED\r\n",
                       b"*5\r\n:1\r\n:1\r\n$1\r\n1\r\n+PONG\r\n+OK\r\n"]
        # An error inside is that command's reply (no rollback, as Redis).
        r.send(["MULTI"], ["SET", "{t}s", "x"], ["INCR", "{t}s"], ["EXEC"])
        got = [r.reply() for _ in range(4)]
        assert got[3] == b"*2\r\n+OK\r\n-ERR value is not an integer or out of range\r\n"
        # RESP3: the same array, and a WATCH abort is a null.
        r.send(["HELLO", "3"])
        r.reply()
        r.send(["MULTI"], ["INCR", "{t}a"], ["EXEC"])
        assert [r.reply() for _ in range(3)][2] == b"*1\r\n:2\r\n"
    finally:
        r.close()
    # Every replica applied the whole transaction: the keys are readable
    # through any client that follows MOVED, after a failover too.
    assert c.call("MGET", "{t}a", "{t}b", "{t}c", "{t}d") == ["2", "1", "1", "2"]


def test_multi_crossslot_and_moved(make_cluster):
    c = make_cluster(3)
    nd = leader_of(c, "{t}a")
    far = other_slot_key(c, nd, "{t}a")
    near = same_node_other_slot(c, nd, "{t}a")
    r = Raw(nd)
    try:
        # One command's keys in two slots: CROSSSLOT at queue time, EXEC
        # then EXECABORT (Redis's flagTransaction).
        r.send(["MULTI"], ["MSET", "{t}a", "1", near, "2"], ["EXEC"])
        got = [r.reply() for _ in range(3)]
        assert got[1] == b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
        assert got[2] == b"-EXECABORT Transaction discarded because of previous errors.\r\n"
        # A slot this node does not lead: MOVED at queue time, EXECABORT.
        r.send(["MULTI"], ["SET", far, "1"], ["EXEC"])
        got = [r.reply() for _ in range(3)]
        assert got[1].startswith(b"-MOVED %d " % key_slot(far)), got
        assert got[2] == b"-EXECABORT Transaction discarded because of previous errors.\r\n"
        # Two commands in two slots of this node: each queues, EXEC answers
        # CROSSSLOT and nothing was written (Redis's getNodeByQuery on EXEC).
        r.send(["MULTI"], ["SET", "{t}z", "1"], ["SET", near, "1"], ["EXEC"], ["EXISTS", "{t}z"])
        got = [r.reply() for _ in range(5)]
        assert got[1:3] == [b"+QUEUED\r\n", b"+QUEUED\r\n"]
        assert got[3] == b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
        assert got[4] == b":0\r\n"
        # A keyless command other than PING/ECHO/UNWATCH is refused inside.
        r.send(["MULTI"], ["DBSIZE"], ["DISCARD"])
        got = [r.reply() for _ in range(3)]
        assert got[1] == b"-ERR 'dbsize' inside MULTI is not supported in cluster mode\r\n"
        assert got[2] == b"+OK\r\n"
    finally:
        r.close()


def test_watch_raw(make_cluster):
    c = make_cluster(3)
    c.wait_settled()
    nd = leader_of(c, "{w}k")
    r, other = Raw(nd), nd.client()
    try:
        r.send(["SET", "{w}k", "0"], ["WATCH", "{w}k"], ["MULTI"], ["INCR", "{w}k"], ["EXEC"])
        assert [r.reply() for _ in range(5)][4] == b"*1\r\n:1\r\n"
        # Modified by another client between WATCH and EXEC: nil.
        r.send(["WATCH", "{w}k"])
        assert r.reply() == b"+OK\r\n"
        other.incr("{w}k")
        r.send(["MULTI"], ["INCR", "{w}k"], ["EXEC"])
        assert [r.reply() for _ in range(3)][2] == b"*-1\r\n"
        assert other.get("{w}k") == b"2"
        # WATCH of a slot this node does not lead: MOVED.
        far = other_slot_key(c, nd, "{w}k")
        r.send(["WATCH", far])
        assert r.reply().startswith(b"-MOVED ")
        # Watches in one slot, the transaction in another slot of the same
        # group (once settled, a node leads only its own group): allowed,
        # as Redis Cluster allows it on one node.
        near = same_node_other_slot(c, nd, "{w}k")
        r.send(["WATCH", "{w}k"], ["MULTI"], ["SET", near, "1"], ["EXEC"])
        assert [r.reply() for _ in range(4)][3] == b"*1\r\n+OK\r\n"
    finally:
        r.close()


def test_redis_py_transactions(make_cluster):
    """redis-py's own transaction code on the node RedisCluster maps the
    slot to: pipeline(transaction=True) and the WATCH retry loop."""
    c = make_cluster(3)
    # The plain client below stays on the node RedisCluster maps the slot
    # to and follows no MOVED: use a map that names the node serving the
    # slot once each node leads its own group. (At start-up a group may be
    # led by another member until leadership is handed back to its
    # preferred node; a map read then names a node that answers MOVED from
    # then on.)
    serving = leader_of(c, "{acct}x")
    rc = c.rc()
    deadline = time.monotonic() + 30
    while rc.get_node_from_key("{acct}x").port != serving.port:
        assert time.monotonic() < deadline, "RedisCluster's slot map kept another node"
        time.sleep(0.05)
        rc.nodes_manager.initialize()
    node = rc.get_node_from_key("{acct}x")
    r = redis.Redis(host=node.host, port=node.port, decode_responses=True, socket_timeout=10)
    with r.pipeline(transaction=True) as p:
        p.set("{acct}x", 10).set("{acct}y", 0).incrby("{acct}x", -3).incrby("{acct}y", 3)
        assert p.execute() == [True, True, 7, 3]

    def move(pipe):
        x = int(pipe.get("{acct}x"))
        pipe.multi()
        pipe.set("{acct}x", x - 1)
        pipe.incr("{acct}y")

    for _ in range(5):
        r.transaction(move, "{acct}x")
    assert rc.mget_nonatomic("{acct}x", "{acct}y") == ["2", "8"]
    # A concurrent change makes redis-py's WATCH see nil (WatchError).
    with r.pipeline(transaction=True) as p:
        p.watch("{acct}x")
        rc.set("{acct}x", 100)
        p.multi()
        p.set("{acct}x", 0)
        with pytest.raises(redis.WatchError):
            p.execute()
    assert rc.get("{acct}x") == "100"
    r.close()
    rc.close()


def test_leader_killed_between_multi_and_exec(make_cluster):
    """The transaction dies with its connection: on the new leader
    neither counter moved, and the same transaction then commits whole."""
    c = make_cluster(3)
    c.wait_settled()
    for _ in range(3):
        c.call("INCR", "{k}a")
        c.call("INCR", "{k}b")
    nd = leader_of(c, "{k}a")
    r = Raw(nd)
    r.send(["MULTI"], ["INCR", "{k}a"], ["INCR", "{k}b"])
    assert [r.reply() for _ in range(3)] == [b"+OK\r\n", b"+QUEUED\r\n", b"+QUEUED\r\n"]
    nd.kill9()
    c.killed.add(nd.i)
    with pytest.raises((ConnectionError, OSError)):
        r.send(["EXEC"])
        r.reply()
    r.close()
    alive = [n for n in c.nodes if n.alive()]
    assert c.call("MGET", "{k}a", "{k}b", nodes=alive) == ["3", "3"]
    nd2 = leader_of(c, "{k}a", settle=False)
    r = Raw(nd2)
    try:
        r.send(["MULTI"], ["INCR", "{k}a"], ["INCR", "{k}b"], ["EXEC"])
        assert [r.reply() for _ in range(4)][3] == b"*2\r\n:4\r\n:4\r\n"
    finally:
        r.close()


def test_watch_then_leader_change_aborts(make_cluster):
    """WATCH at the leader, the leader killed and restarted: whoever leads
    at EXEC, EXEC does not succeed on a watch taken in another term."""
    c = make_cluster(3)
    c.wait_settled()
    c.call("SET", "{q}k", "0")
    nd = leader_of(c, "{q}k")
    r = Raw(nd)
    r.send(["WATCH", "{q}k"])
    assert r.reply() == b"+OK\r\n"
    # Another node takes over while nd is paused; nd comes back as a
    # follower (a new term), then the preferred leader again.
    import signal
    nd.proc.send_signal(signal.SIGSTOP)
    try:
        others = [n for n in c.nodes if n is not nd]
        c.call("INCR", "{q}k", nodes=others)  # served by a new leader
    finally:
        nd.proc.send_signal(signal.SIGCONT)
    r.send(["MULTI"], ["INCR", "{q}k"], ["EXEC"])
    got = [r.reply() for _ in range(3)]
    # MULTI is OK; INCR queues (if nd leads again) or is MOVED; EXEC is a
    # nil, an EXECABORT or a MOVED: never a success.
    assert not got[2].startswith(b"*1"), got
    r.close()
    assert c.call("GET", "{q}k") == "1"


def test_keynum_commands_route_by_their_keys(make_cluster):
    c = make_cluster(3)
    rc = c.rc()
    rc.rpush("{l}1", "a", "b")
    rc.sadd("{s}1", "x", "y")
    rc.sadd("{s}2", "y", "z")
    # LMPOP / SINTERCARD go to the keys' slot (through any node, following
    # MOVED), are replicated (LMPOP) and refuse keys of several slots.
    assert c.call("LMPOP", "2", "{l}0", "{l}1", "LEFT") == ["{l}1", ["a"]]
    assert c.call("LLEN", "{l}1") == 1
    assert c.call("SINTERCARD", "2", "{s}1", "{s}2") == 1
    with pytest.raises(redis.ResponseError, match="CROSSSLOT"):
        c.nodes[0].client().execute_command("LMPOP", "2", "{l}1", "{x}2", "LEFT")
    with pytest.raises(redis.ResponseError, match="CROSSSLOT"):
        c.nodes[0].client().execute_command("SINTERCARD", "2", "{s}1", "{z}2")
    # A bad key count is the command's own error wherever it lands.
    with pytest.raises(redis.ResponseError, match="numkeys"):
        c.nodes[0].client().execute_command("SINTERCARD", "0", "{s}1")
    # Every node that is not the slot's leader redirects to it.
    slot = key_slot("{l}1")
    leader = leader_of(c, "{l}1")
    for nd in c.nodes:
        if nd is leader:
            continue
        with pytest.raises(redis.ResponseError, match=f"MOVED {slot} "):
            nd.client().execute_command("LMPOP", "1", "{l}1", "LEFT")
    rc.close()
