"""Where a node outside a group sends clients (docs/gridsync-cluster.md,
"Requests"): to the group's current leader, learnt from the leadership
hints every node announces, not to its preferred leader once that is dead.
Five nodes with three replicas, so most groups have non-members."""
import time

import redis

from test_cluster import make_cluster  # noqa: F401  (fixture)


def group_of(c, nd):
    return f"{nd.host}:{nd.port}"


def moved_target(c, nd, *args):
    """The node nd's reply redirects to, None if nd served it, "down" while
    the group has no leader (a member says so during the election)."""
    try:
        nd.client(decode_responses=True).execute_command(*args)
        return None
    except redis.ResponseError as e:
        msg = str(e)
        if msg.startswith(("CLUSTERDOWN", "TRYAGAIN")):
            return "down"
        assert msg.startswith("MOVED"), msg
        return c.node_at(msg.split()[2])


def test_non_member_redirects_to_the_current_leader(make_cluster):
    c = make_cluster(5)
    c.wait_settled()
    dead = c.nodes[0]
    name = group_of(c, dead)
    members = [nd for nd in c.nodes if name in c.groups(nd)]
    outsiders = [nd for nd in c.nodes if nd not in members]
    assert len(members) == 3 and outsiders
    # A key of the dead node's group: its leader serves it.
    key = next(k for k in (f"redir:{i}" for i in range(10000))
               if moved_target(c, dead, "SET", k, "before") is None)
    for nd in outsiders:
        assert moved_target(c, nd, "GET", key) is dead  # the leader, while it lives

    dead.kill9()
    c.killed.add(dead.i)
    # The survivors elect a leader for the group; an outsider must send
    # clients there, not to the dead node, without the dead node returning.
    deadline = time.monotonic() + 60
    direct = set()
    while time.monotonic() < deadline and len(direct) < len(outsiders):
        for nd in outsiders:
            to = moved_target(c, nd, "SET", key, "after")
            assert to is not None  # outsiders never serve the group
            if to not in ("down", dead) and to.alive() and moved_target(c, to, "SET", key, "after") is None:
                direct.add(nd.i)  # one hop to a node that accepted the write
        time.sleep(0.05)
    assert len(direct) == len(outsiders), "an outsider kept redirecting to the dead leader"
    # From then on, every redirect names a live node; CLUSTER SLOTS too.
    for _ in range(20):
        for nd in outsiders:
            assert moved_target(c, nd, "GET", key) is not dead
    slot = nd.client().execute_command("CLUSTER", "KEYSLOT", key)
    for nd in outsiders:
        for start, end, primary, *_ in nd.client().execute_command("CLUSTER", "SLOTS"):
            if start <= slot <= end:
                assert int(primary[1]) != dead.port
    assert c.call("GET", key) == "after"
