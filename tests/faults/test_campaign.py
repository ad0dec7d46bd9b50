"""The fault campaign's short seeded runs (make test): a 3-node cluster in
network namespaces when possible (else on loopback, without partitions,
saying so), 6 clients, a nemesis of kill -9/restart, SIGSTOP/SIGCONT,
isolation and one-way partitions; transactions (MULTI; INCR a; INCR b;
EXEC on one slot) among the operations; in the lease run, a node joins
and one leaves (scripts/gridsync-reshard) while the faults go on (on
loopback too: it needs no namespaces). What it checks is fixed by the
seed (the order and kinds of faults) and never depends on timing: no
acknowledged write lost, no increment duplicated, no transaction seen half
applied, every key's history linearizable, both membership changes done
(each rerun until done, bounded), every node incarnation ended as the
nemesis ended it with no crash or sanitizer report, and some operations of
each kind succeeded. A node that crashes between faults and is restarted
is reported with its signal and what the run was doing."""
import os
import signal
import sys
import time

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from campaign import Campaign, exit_kind, log_findings, parse, print_report  # noqa: E402
from conftest import find_binary  # noqa: E402


@pytest.mark.parametrize("mode", ["lease", "barrier"])
def test_short_campaign(mode):
    find_binary("gridsync-server")
    argv = ["--mode", mode, "--faults", "24", "--seed", "11", "--keys", "10", "--clients", "6"]
    if mode == "lease":
        argv += ["--changes", "2", "--change-timeout", "120"]
    camp = Campaign(parse(argv))
    r = camp.run()
    print_report(r, camp.problems, camp.log_dir)
    assert r["faults"] == 24
    assert r["lost_acks"] == 0
    assert r["duplicates"] == 0
    assert r["torn"] == 0
    assert r["anomalies"] == []
    assert r["undecided"] == []
    assert camp.problems == []
    if mode == "lease":
        assert [(c["kind"], c["ok"]) for c in r["changes"]] == [("join", True), ("leave", True)]
        assert r["faults_by_kind"]["join"] == 1 and r["faults_by_kind"]["leave"] == 1
        assert all(c["seconds"] > 0 and c["attempts"] >= 1 for c in r["changes"])
    done = {}
    for op in camp.ops:
        if op["status"] == "ok":
            done[op["f"]] = done.get(op["f"], 0) + 1
    assert all(done.get(f, 0) > 0 for f in ("write", "read", "incr")), done
    assert r["transactions"] > 0


class CrashOnce(Campaign):
    """After the first fault, node 1 dies of SIGSEGV between faults (sent
    while the nemesis waits) and is restarted as the nemesis restarts a
    node: its second incarnation ends cleanly, the first must still be
    reported."""

    def nemesis(self):
        real = self.a.faults
        self.a.faults = 1
        super().nemesis()
        with self.fault_lock:
            nd = self.c.nodes[1]
            nd.proc.send_signal(signal.SIGSEGV)
            deadline = time.monotonic() + 30
            while nd.run["end"] is None:
                assert time.monotonic() < deadline, "the monitor did not see the crash"
                time.sleep(0.05)
            self.restart(nd)
        self.a.faults = real
        super().nemesis()


def test_crash_of_an_earlier_incarnation_is_reported():
    find_binary("gridsync-server")
    camp = CrashOnce(parse(["--mode", "lease", "--faults", "4", "--seed", "5", "--keys", "4",
                            "--clients", "2", "--no-txn"]))
    r = camp.run()
    print_report(r, camp.problems, camp.log_dir)
    assert r["faults"] == 4
    assert r["lost_acks"] == 0 and r["duplicates"] == 0 and r["anomalies"] == []
    crash = [p for p in camp.problem_details if p["kind"] == "exit"]
    assert len(crash) == 1, camp.problems
    assert (crash[0]["node"], crash[0]["run"]) == (1, 0)
    assert crash[0]["text"].startswith("signal SIGSEGV"), crash[0]
    assert crash[0]["during"].startswith("between faults,"), crash[0]
    assert any(p.startswith("node 1 run 0: exit: signal SIGSEGV") for p in camp.problems)
    # Both incarnations of node 1 are recorded and their logs kept.
    runs = [x for x in camp.runs if x["node"] == 1]
    assert len(runs) >= 2 and runs[0]["status"] == -signal.SIGSEGV
    assert all(x["status"] == {"kill": -signal.SIGKILL, "stop": 0}.get(x["expect"])
               for x in runs[1:]), runs
    assert camp.log_dir and os.path.exists(os.path.join(camp.log_dir, "node1-run0.log"))
    assert os.path.exists(os.path.join(camp.log_dir, "node1-run1.log"))


def test_log_findings_and_exit_kinds():
    asan = ("12:00 info started\n"
            "==42==ERROR: AddressSanitizer: heap-use-after-free on address 0x6 at pc 0x1\n"
            "READ of size 8 at 0x6 thread T0\n"
            "    #0 0x55 in send_guarded gridsync/cluster/raft_group.c:291\n"
            "    #1 0x56 in sendAppendEntries\n"
            "    #2 0x57 in replicationHeartbeat\n"
            "    #3 0x58 in tickLeader\n"
            "    #4 0x59 in tick\n"
            "\n"
            "gridsync/fsm.c:10:5: runtime error: signed integer overflow\n"
            "gridsync-server: raft.c:1: f: Assertion `x' failed.\n")
    found = log_findings(asan)
    assert [k for k, _ in found] == ["sanitizer report", "sanitizer report", "log line"]
    head = found[0][1].split(" | ")
    assert head[0].startswith("==42==ERROR: AddressSanitizer: heap-use-after-free")
    assert len(head) == 5 and head[1].startswith("#0") and "send_guarded" in head[1]
    assert "signed integer overflow" in found[1][1]
    assert "Assertion" in found[2][1]
    assert log_findings("12:00 info started\n12:01 info stopping\n") == []
    assert exit_kind(-signal.SIGSEGV) == "signal SIGSEGV"
    assert exit_kind(-signal.SIGABRT) == "signal SIGABRT"
    assert exit_kind(1) == "exit code 1"
    assert exit_kind("hung").startswith("did not stop")
