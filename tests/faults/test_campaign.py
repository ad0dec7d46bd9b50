"""The fault campaign's short seeded run (make test): a 3-node cluster in
network namespaces when possible (else on loopback, without partitions,
saying so), 8 clients, a nemesis of kill -9/restart, SIGSTOP/SIGCONT,
isolation and one-way partitions; transactions (MULTI; INCR a; INCR b;
EXEC on one slot) among the operations. What it checks is fixed by the seed (the
order and kinds of faults) and never depends on timing: no acknowledged
write lost, no increment duplicated, no transaction seen half applied, every key's history linearizable,
every node stopped cleanly with no crash or sanitizer report, and some
operations of each kind succeeded."""
import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from campaign import Campaign, parse, print_report  # noqa: E402
from conftest import find_binary  # noqa: E402


@pytest.mark.parametrize("mode", ["lease", "barrier"])
def test_short_campaign(mode):
    find_binary("gridsync-server")
    args = parse(["--mode", mode, "--faults", "24", "--seed", "11", "--keys", "10",
                  "--clients", "6"])
    camp = Campaign(args)
    r = camp.run()
    print_report(r, camp.problems)
    for s in r["skipped"]:
        print("skipped:", s)
    assert r["faults"] == 24
    assert r["lost_acks"] == 0
    assert r["duplicates"] == 0
    assert r["torn"] == 0
    assert r["anomalies"] == []
    assert r["undecided"] == []
    assert camp.problems == []
    done = {}
    for op in camp.ops:
        if op["status"] == "ok":
            done[op["f"]] = done.get(op["f"], 0) + 1
    assert all(done.get(f, 0) > 0 for f in ("write", "read", "incr")), done
    assert r["transactions"] > 0
