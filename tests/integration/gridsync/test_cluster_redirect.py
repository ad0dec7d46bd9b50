"""Where a node outside a group sends clients (docs/gridsync-cluster.md,
"Requests"): to the group's current leader, learnt from the leadership
hints every node announces, not to its preferred leader once that is dead,
even while the group's live members are stalled and their hints late.
Five nodes with three replicas, so most groups have non-members.

Waits are bounded polls: a loaded machine may move a leadership for a
while (an election timeout is short), so the set-up polls until the
cluster is in the state a check needs instead of asserting it once."""
import signal
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


def poll(cond, what, timeout=60):
    """cond()'s first true value within timeout seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = cond()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError(what)


def kill_preferred_leader(c):
    """Node 0, once it leads its group and every non-member redirects to
    it, killed. Returns (node 0, its group's members, the non-members, a
    key of the group written before the kill)."""
    c.wait_settled()
    dead = c.nodes[0]
    members = [nd for nd in c.nodes if group_of(c, dead) in c.groups(nd)]
    outsiders = [nd for nd in c.nodes if nd not in members]
    assert len(members) == 3 and outsiders

    def key_it_serves():
        c.wait_settled()
        return next((k for k in (f"redir:{i}" for i in range(200))
                     if moved_target(c, dead, "SET", k, "before") is None), None)

    key = poll(key_it_serves, "node 0 did not keep the lead of its group")
    # The leader, while it lives (a member may stand in for it a moment
    # under load: its leadership is handed back).
    poll(lambda: all(moved_target(c, nd, "GET", key) is dead for nd in outsiders),
         "non-members did not redirect to the group's leader")
    dead.kill9()
    c.killed.add(dead.i)
    return dead, members, outsiders, key


def wait_direct(c, dead, outsiders, key):
    """Until every outsider sends a client, in one hop, to a live node that
    accepts a write of key."""
    direct = set()

    def all_direct():
        for nd in outsiders:
            to = moved_target(c, nd, "SET", key, "after")
            assert to is not None  # outsiders never serve the group
            if (to not in ("down", dead) and to.alive()
                    and moved_target(c, to, "SET", key, "after") is None):
                direct.add(nd.i)  # one hop to a node that accepted the write
        return len(direct) == len(outsiders)

    poll(all_direct, "an outsider kept redirecting to the dead leader")


def slots_primary(nd, slot):
    for start, end, primary, *_ in nd.client().execute_command("CLUSTER", "SLOTS"):
        if start <= slot <= end:
            return int(primary[1])
    raise AssertionError(f"slot {slot} not in CLUSTER SLOTS")


def test_non_member_redirects_to_the_current_leader(make_cluster):
    c = make_cluster(5)
    dead, members, outsiders, key = kill_preferred_leader(c)
    # The survivors elect a leader for the group; an outsider must send
    # clients there, not to the dead node, without the dead node returning.
    wait_direct(c, dead, outsiders, key)
    # From then on, every redirect names a live node; CLUSTER SLOTS too.
    for _ in range(20):
        for nd in outsiders:
            assert moved_target(c, nd, "GET", key) is not dead
    slot = outsiders[0].client().execute_command("CLUSTER", "KEYSLOT", key)
    for nd in outsiders:
        assert slots_primary(nd, slot) != dead.port
    assert c.call("GET", key) == "after"


def test_stalled_members_do_not_send_clients_back_to_the_dead_leader(make_cluster):
    """An outsider that hears from none of a group's live members for
    longer than a hint lives (their processes stopped here; starved of CPU
    on a loaded machine) names the member it heard from last, never the
    preferred leader, silent since it died."""
    c = make_cluster(5)
    dead, members, outsiders, key = kill_preferred_leader(c)
    wait_direct(c, dead, outsiders, key)
    live = [nd for nd in members if nd is not dead]
    slot = outsiders[0].client().execute_command("CLUSTER", "KEYSLOT", key)
    for nd in live:
        nd.proc.send_signal(signal.SIGSTOP)
    try:
        # A hint lives 200 ms: two seconds of lookups are mostly past it.
        named = set()
        end = time.monotonic() + 2
        while time.monotonic() < end:
            for nd in outsiders:
                to = moved_target(c, nd, "GET", key)
                assert to is not dead, "redirected to the preferred leader, dead for long"
                named.add(to)
                assert slots_primary(nd, slot) != dead.port
            time.sleep(0.05)
        assert named <= set(live)
    finally:
        for nd in live:
            nd.proc.send_signal(signal.SIGCONT)
    assert c.call("GET", key) == "after"
