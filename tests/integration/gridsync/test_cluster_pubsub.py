"""Pub/sub in cluster mode (docs/gridsync-cluster.md, "Pub/sub"), with
the harness of test_cluster.py: PUBLISH on any node reaches subscribers on
every node (redis-py's RedisCluster pubsub, redis-py and redis-cli
subscribers) and answers the count of receivers on the node it ran on;
SSUBSCRIBE/SPUBLISH run at the slot's leader (MOVED elsewhere, CROSSSLOT
for several slots), in RESP2 and RESP3 forms; PUBSUB SHARDCHANNELS and
SHARDNUMSUB there. Standalone replies are compared byte for byte with
redis-server in test_pubsub.py. Every wait is a bounded poll."""
import shutil
import subprocess
import time

import pytest
import redis

from test_cluster import key_slot, make_cluster  # noqa: F401  (the fixture)
from test_cluster_multi import Raw, leader_of


def wait_message(ps, timeout=20):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = ps.get_message(timeout=0.5)
        if m and m["type"] in ("message", "pmessage"):
            return m
    return None


def subscribed(nd, channel, timeout=20):
    """Poll until nd counts a subscriber of channel."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = nd.client().execute_command("PUBSUB", "NUMSUB", channel)
        if got[1] >= 1:
            return
        time.sleep(0.02)
    raise AssertionError(f"no subscriber of {channel} on {nd.port}")


def test_publish_reaches_every_node(make_cluster):
    c = make_cluster(3)
    a, b, d = c.nodes
    subs = []
    for nd in (b, d):
        ps = nd.client(decode_responses=True).pubsub()
        ps.subscribe("news")
        subs.append(ps)
    pps = d.client(decode_responses=True).pubsub()
    pps.psubscribe("ne*")
    for nd in (b, d):
        subscribed(nd, "news")
    # Nobody subscribes on a: PUBLISH there counts 0 (Redis Cluster counts
    # the node's own receivers), yet b's and d's subscribers get it.
    assert a.client().publish("news", "hello") == 0
    for ps in subs:
        m = wait_message(ps)
        assert m and m["channel"] == "news" and m["data"] == "hello", m
    m = wait_message(pps)
    assert m and m["type"] == "pmessage" and m["data"] == "hello", m
    # Published on d, where one channel and one pattern subscriber are.
    assert d.client().publish("news", "x") == 2
    assert wait_message(subs[0])["data"] == "x"
    for ps in subs + [pps]:
        ps.close()


def test_rediscluster_pubsub_and_redis_cli(make_cluster):
    c = make_cluster(3)
    rc = c.rc()
    ps = rc.pubsub()  # redis-py picks the node by the channel's slot
    ps.subscribe("events")
    node = ps.get_pubsub_node()
    nd = c.node_at(f"{node.host}:{node.port}")
    subscribed(nd, "events")
    cli = shutil.which("redis-cli")
    if cli is None:
        pytest.skip("redis-cli not installed")
    for other in c.nodes:
        if other is nd:
            continue
        out = subprocess.run([cli, "-h", other.host, "-p", str(other.port), "PUBLISH",
                              "events", f"from-{other.port}"],
                             capture_output=True, text=True, timeout=30)
        assert out.stdout.strip() == "0", out
        m = wait_message(ps)
        assert m and m["data"] == f"from-{other.port}", m
    ps.close()
    rc.close()


def test_sharded_pubsub_on_the_slots_leader(make_cluster):
    c = make_cluster(3)
    nd = leader_of(c, "{sh}chan")
    slot = key_slot("{sh}chan")
    sub = Raw(nd)
    try:
        sub.send(["SSUBSCRIBE", "{sh}chan", "{sh}other"])
        assert sub.reply() == b"*3\r\n$10\r\nssubscribe\r\n$8\r\n{sh}chan\r\n:1\r\n"
        assert sub.reply() == b"*3\r\n$10\r\nssubscribe\r\n$9\r\n{sh}other\r\n:2\r\n"
        pub = nd.client()
        assert pub.execute_command("PUBSUB", "SHARDNUMSUB", "{sh}chan") == [b"{sh}chan", 1]
        assert sorted(pub.execute_command("PUBSUB", "SHARDCHANNELS")) == [b"{sh}chan",
                                                                          b"{sh}other"]
        assert pub.execute_command("SPUBLISH", "{sh}chan", "m1") == 1
        assert sub.reply() == b"*3\r\n$8\r\nsmessage\r\n$8\r\n{sh}chan\r\n$2\r\nm1\r\n"
        # Other nodes redirect to the slot's leader; channels of several
        # slots are refused.
        for other in c.nodes:
            if other is nd:
                continue
            with pytest.raises(redis.ResponseError, match=f"MOVED {slot} "):
                other.client().execute_command("SPUBLISH", "{sh}chan", "m")
            with pytest.raises(redis.ResponseError, match=f"MOVED {slot} "):
                other.client().execute_command("SSUBSCRIBE", "{sh}chan")
        two = Raw(nd)
        two.send(["SSUBSCRIBE", "{sh}chan", "{zz}chan"])
        assert two.reply() == b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
        two.close()
    finally:
        sub.close()
    # RESP3: push messages.
    sub = Raw(nd)
    try:
        sub.send(["HELLO", "3"])
        sub.reply()
        sub.send(["SSUBSCRIBE", "{sh}chan"])
        assert sub.reply() == b">3\r\n$10\r\nssubscribe\r\n$8\r\n{sh}chan\r\n:1\r\n"
        assert nd.client().execute_command("SPUBLISH", "{sh}chan", "m2") == 1
        assert sub.reply() == b">3\r\n$8\r\nsmessage\r\n$8\r\n{sh}chan\r\n$2\r\nm2\r\n"
    finally:
        sub.close()


def test_subscribed_client_cannot_run_keyed_commands(make_cluster):
    """RESP2 subscribed mode refuses GET in cluster mode too (it used to be
    routed and run before the check)."""
    c = make_cluster(1, replicas=1)
    r = Raw(c.nodes[0])
    try:
        r.send(["SUBSCRIBE", "x"], ["GET", "k"])
        r.reply()
        assert r.reply().startswith(b"-ERR Can't execute 'get'")
    finally:
        r.close()
