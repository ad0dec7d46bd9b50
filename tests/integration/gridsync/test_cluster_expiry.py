"""Active expiry in cluster mode goes through the Raft log: the leader of
a group finds its expired keys and proposes their deletion; every member
deletes them when it applies that entry. Followers never expire on their
own clock, so without the log they would keep expired keys until a client
happened to read them.

Checked: keys with a short TTL, written to one group and never read
again, disappear from the leader's and every follower's store (CLUSTER
INFO's per-group key count), a key without a TTL stays, and the same holds
for a group that another node leads after its preferred leader died."""
import time

from test_cluster import make_cluster  # noqa: F401  (fixture)


def group_keys(node):
    """{group name: keys in this node's copy} from GRIDSYNC GROUPS."""
    info = node.client(decode_responses=True).execute_command("GRIDSYNC", "GROUPS")
    out = {}
    for line in info.splitlines():
        if line.startswith("group_"):
            name, rest = line[len("group_"):].rsplit(":", 1)
            out[name] = int(dict(kv.split("=") for kv in rest.split(","))["keys"])
    return out


def leader_of_slot_group(c, key):
    """The group name (its preferred node) serving key's slot, found by
    asking each node who owns the key."""
    for nd in c.nodes:
        if not nd.alive():
            continue
        try:
            nd.client().get(key)
            return nd
        except Exception:
            continue
    raise AssertionError("no node serves " + key)


def wait_keys(nodes, group, want, timeout=60):
    deadline = time.monotonic() + timeout
    seen = {}
    while time.monotonic() < deadline:
        seen = {nd.port: group_keys(nd).get(group) for nd in nodes}
        if all(v == want for v in seen.values()):
            return
        time.sleep(0.1)
    raise AssertionError(f"group {group}: keys per node {seen}, want {want} everywhere")


def write_expiring(c, tag, n):
    for i in range(n):
        assert c.call("SET", f"{{{tag}}}:{i}", "v", "PX", "300") is True
    assert c.call("SET", f"{{{tag}}}:keep", "v") is True


def test_expired_keys_leave_every_replica(make_cluster):
    c = make_cluster(3)
    c.wait_settled()
    write_expiring(c, "exp", 200)
    owner = leader_of_slot_group(c, "{exp}:keep")
    group = f"{owner.host}:{owner.port}"
    # Never read again: only active expiry can remove them, and on the
    # followers only entries of the group's log can.
    wait_keys(c.nodes, group, 1)
    for nd in c.nodes:
        r = nd.client(decode_responses=True)
        r.execute_command("READONLY")
        assert r.get("{exp}:keep") == "v"
        assert r.get("{exp}:0") is None


def test_a_group_led_after_failover_is_expired_too(make_cluster):
    c = make_cluster(3)
    c.wait_settled()
    victim = leader_of_slot_group(c, "{fail}:keep")
    group = f"{victim.host}:{victim.port}"
    victim.kill9()
    c.killed.add(victim.i)
    alive = [nd for nd in c.nodes if nd.alive()]
    # A survivor now leads the victim's group; it must expire that store
    # (not only the one of its own group) and replicate the deletions.
    write_expiring(c, "fail", 200)
    wait_keys(alive, group, 1)
