#!/usr/bin/python3
"""The GridSync fault campaign: a real cluster of gridsync-server
processes, concurrent clients and a nemesis; every operation is recorded
and the history is checked per key (checker.py).

Clients (threads, each with its own connections, following MOVED as a
cluster client does) write unique values to register keys, read them,
INCR counter keys and read those, and run transactions on pairs of
counters in one slot ({pK}a, {pK}b: MULTI; INCR a; INCR b; EXEC, read
back with MGET), checked as one key whose two counts must move together. Each operation is recorded with its
invoke and complete times (one monotonic clock) and an outcome:
ok, fail (certainly not applied: MOVED, TRYAGAIN, CLUSTERDOWN, a refused
connection) or unknown (a timeout, a lost connection, "-ERR write outcome
unknown": it may apply at any later time). An operation is never retried
after an unknown outcome: that is what would double an INCR.

The nemesis injects, one at a time, with a seeded schedule: kill -9 and
restart of a node (a leader or a follower, as it is at that moment),
SIGSTOP/SIGCONT, and, when network namespaces can be made (root, `ip`),
partitions: one node isolated, a majority/minority split (5+ nodes), a
one-way partition (the node's packets to its peers dropped by blackhole
routes in its namespace; theirs still reach it).

Meanwhile (--changes N) a node joins and one leaves, alternating, with
scripts/gridsync-reshard, rerun until it completes (a fault may hold
any step); each is a fault kind ("join", "leave") with its duration.

Every process incarnation's exit status and log are recorded when it ends
(the nemesis's restart, a monitor thread, the final stop): a kill -9 by
the nemesis and exit 0 after SIGTERM are expected, anything else is a
problem, reported with its kind and what the run was doing then.

At the end every fault is healed, each key is read once more (recorded
too), and the report gives: faults by kind, operations by outcome, lost
acknowledged writes, duplicated increments, non-linearizable keys, the time
writes took to recover after each leader loss, each membership change's
duration, and node problems (a signal or exit code, sanitizer or crash
lines in a log, a node that did not stop or start).

Run: tests/faults/campaign.py --faults 1000 --mode lease (make faults-long);
the short seeded run in make test is tests/faults/test_campaign.py."""
import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration", "gridsync"))

import redis  # noqa: E402

from checker import Counter, Pair, Register, check, duplicate_incrs, lost_acks, torn_pairs  # noqa: E402,E501
from test_cluster import Cluster, pick_base  # noqa: E402
from test_cluster_join import RESHARD  # noqa: E402
from test_cluster_partition import Net, sh  # noqa: E402

BAD_LOG_LINES = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "ThreadSanitizer",
                 "Segmentation fault", "Assertion", "core dumped", "panic",
                 "raft: apply of entry")
# The first line of a sanitizer's report; the frames that follow are its head.
SANITIZER_LINES = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "WARNING: ThreadSanitizer",
                   "runtime error:")


def name(nd):
    return f"{nd.host}:{nd.port}"


def log_findings(out, frames=4):
    """What one incarnation's log says went wrong: a list of (kind, text),
    a sanitizer report as its first line and first frames."""
    found = []
    lines = out.splitlines()
    k = 0
    while k < len(lines):
        line = lines[k].strip()
        if any(m in line for m in SANITIZER_LINES):
            head = [line]
            j = k + 1
            # Its frames: after at most a few lines of detail ("READ of
            # size 8 ..."), up to a blank line or the next finding.
            while j < len(lines) and len(head) < 1 + frames:
                nxt = lines[j].strip()
                if nxt.startswith("#"):
                    head.append(nxt)
                elif (len(head) > 1 and not nxt) or any(b in nxt for b in BAD_LOG_LINES) or \
                        (len(head) == 1 and j - k > 3):
                    break
                j += 1
            found.append(("sanitizer report", " | ".join(head)))
            k = j
            continue
        if any(b in line for b in BAD_LOG_LINES):
            found.append(("log line", line))
        k += 1
    return found


def exit_kind(status):
    """A process's exit status in words: "signal SIGSEGV", "exit code 1"."""
    if status == "hung":
        return "did not stop within 20 s of SIGTERM"
    if isinstance(status, int) and status < 0:
        try:
            return f"signal {signal.Signals(-status).name}"
        except ValueError:
            return f"signal {-status}"
    return f"exit code {status}"


class Router:
    """A minimal cluster client: slot -> node from MOVED, one connection
    per node per client."""

    def __init__(self, cluster, rng, timeout):
        self.c, self.rng, self.timeout = cluster, rng, timeout
        self.route = {}
        self.conns = {}
        self.last = None  # the node the last command went to

    def conn(self, nd):
        r = self.conns.get(nd.i)
        if r is None:
            # One connection: a transaction's commands must share it.
            r = redis.Redis(host=nd.host, port=nd.port, socket_timeout=self.timeout,
                            socket_connect_timeout=self.timeout, decode_responses=True,
                            single_connection_client=True)
            self.conns[nd.i] = r
        return r

    def node_at(self, addr):
        """The node a MOVED names: any node the run has started (a node
        being added is named before it serves; a removed one until every
        node knows), else a member at random."""
        for nd in getattr(self.c, "everyone", self.c.nodes):
            if name(nd) == addr:
                return nd
        return self.rng.choice(self.c.nodes)

    def drop(self, nd):
        r = self.conns.pop(nd.i, None)
        if r is not None:
            r.close()

    def run(self, key, *args):
        """(status, reply) with status ok / fail / unknown."""
        nd = self.route.get(key) or self.rng.choice(self.c.nodes)
        for _ in range(6):
            self.last = nd.i
            try:
                return "ok", self.conn(nd).execute_command(*args)
            except redis.ResponseError as e:
                msg = str(e)
                if msg.startswith("MOVED"):
                    nd = self.node_at(msg.split()[2])
                    self.route[key] = nd
                    continue
                if msg.startswith(("TRYAGAIN", "CLUSTERDOWN")):
                    return "fail", msg
                if "outcome unknown" in msg:
                    return "unknown", msg
                return "fail", msg
            except (redis.ConnectionError, redis.TimeoutError) as e:
                self.drop(nd)
                self.route.pop(key, None)
                if isinstance(e, redis.ConnectionError) and "connecting to" in str(e):
                    # Refused or unreachable before anything was sent.
                    nd = self.rng.choice(self.c.nodes)
                    time.sleep(0.01)
                    continue
                return "unknown", repr(e)
        return "fail", "too many redirects"

    def raw(self, nd, *args):
        """One command on nd's connection, the reply unparsed by redis-py's
        callbacks (QUEUED stays QUEUED)."""
        conn = self.conn(nd).connection
        conn.send_command(*args)
        return conn.read_response()

    def txn(self, key, cmds):
        """MULTI, cmds, EXEC on the node serving key: (status, EXEC's
        reply). Failing before EXEC is sent is "fail" (nothing was
        proposed); after, only an answer that says so is."""
        nd = self.route.get(key) or self.rng.choice(self.c.nodes)
        for _ in range(6):
            self.last = nd.i
            sent_exec = False
            try:
                self.raw(nd, "MULTI")
                moved = None
                for cmd in cmds:
                    try:
                        self.raw(nd, *cmd)
                    except redis.ResponseError as e:
                        moved = moved or str(e)
                if moved:
                    self.raw(nd, "DISCARD")
                    if moved.startswith("MOVED"):
                        nd = self.node_at(moved.split()[2])
                        self.route[key] = nd
                        continue
                    return "fail", moved
                sent_exec = True
                rep = self.raw(nd, "EXEC")
                if not isinstance(rep, list):
                    return "fail", rep  # a nil: never with no WATCH
                if any(isinstance(x, Exception) for x in rep):
                    return "fail", rep
                return "ok", rep
            except redis.ResponseError as e:
                msg = str(e)
                if msg.startswith("MOVED") and sent_exec:
                    # EXEC redirected: discarded before it was proposed, or
                    # its entry was not applied (on_write_done's ESTATE).
                    nd = self.node_at(msg.split()[2])
                    self.route[key] = nd
                    continue
                if "outcome unknown" in msg:
                    return "unknown", msg
                return "fail", msg
            except (redis.ConnectionError, redis.TimeoutError) as e:
                self.drop(nd)
                self.route.pop(key, None)
                if not sent_exec:
                    if isinstance(e, redis.ConnectionError) and "connecting to" in str(e):
                        nd = self.rng.choice(self.c.nodes)
                        time.sleep(0.01)
                        continue
                    return "fail", repr(e)
                return "unknown", repr(e)
        return "fail", "too many redirects"


class Campaign:
    def __init__(self, args):
        self.a = args
        self.rng = random.Random(args.seed)
        # The membership changes' own schedule, so that they do not shift
        # the nemesis's.
        self.mrng = random.Random(args.seed * 7919 + 1)
        self.ops = []  # every operation, appended under lock
        self.lock = threading.Lock()
        self.tl = threading.local()
        self.stop = threading.Event()
        self.faults = []  # dicts: kind, victim, start, end, led
        self.changes = []  # joins and leaves: kind, node, start, end, attempts, ok
        self.active = []  # the faults and changes running now
        self.fault_lock = threading.Lock()  # one node action at a time
        self.runs = []  # every process's incarnation (see start_node)
        self.runs_lock = threading.Lock()
        self.problem_details = []  # dicts: node, run, kind, text, during
        self.skipped = []  # fault kinds that cannot run here, with why
        self.net = None
        self.log_dir = None
        self.t0 = time.monotonic()
        self.regs = [f"{{r{k}}}reg" for k in range(args.keys)]
        self.ctrs = [f"{{c{k}}}ctr" for k in range(args.keys)]
        # Pair keys: the checker's key is the pair's tag; a and b hold it.
        self.pairs = [f"{{p{k}}}" for k in range(args.keys)] if args.txn else []

    # -- cluster ---------------------------------------------------------

    def start(self):
        a = self.a
        extra = ["--cluster-read-mode", a.mode]
        # Membership changes need one node more than the cluster starts
        # with: the spare is added, a member removed, and that node, with
        # a fresh data directory, is the next spare.
        slots = a.nodes + (1 if a.changes else 0)
        if a.partitions and os.geteuid() == 0:
            try:
                self.net = Net(slots)
                self.net.up()
            except (subprocess.CalledProcessError, FileNotFoundError) as e:
                self.skipped.append(f"partitions: cannot make network namespaces ({e})")
                if self.net:
                    self.net.down()
                self.net = None
        elif a.partitions:
            self.skipped.append("partitions: not root, no network namespaces")
        if self.net:
            addrs = [(ip, 7000) for ip in self.net.ips]
            prefixes = [["ip", "netns", "exec", ns] for ns in self.net.ns]
        else:
            base = pick_base(slots, 3)
            addrs = [("127.0.0.1", base + i) for i in range(slots)]
            prefixes = None
        self.c = Cluster(slots, addrs=addrs, prefixes=prefixes, extra=extra)
        self.c.everyone = list(self.c.nodes)
        self.spare = None
        if a.changes:
            self.spare = self.c.nodes.pop()
            self.c.n = a.nodes
            self.c.peers = ",".join(name(nd) for nd in self.c.nodes)
        for nd in self.c.nodes:
            self.start_node(nd)
        self.c.wait_ready()
        self.c.wait_settled(timeout=60)
        self.monitor_thread = threading.Thread(target=self.monitor, daemon=True)
        self.monitor_thread.start()
        if a.nodes < 5 and self.net:
            self.skipped.append("majority/minority split: needs 5 nodes (with 3, an "
                                "isolated node is the minority)")
        # Which group (preferred leader's name) holds each key, while
        # settled; again after each membership change (placements: time,
        # key -> group).
        self.placements = [(0.0, self.placement())]

    def placement(self):
        """key -> group as CLUSTER SLOTS says, read while every group is led
        by its preferred node (then a range's primary names its group)."""
        slots = self.c.nodes[0].client(decode_responses=True).execute_command("CLUSTER", "SLOTS")

        def owner(slot):
            for s, e, primary, *_ in slots:
                if s <= slot <= e:
                    return f"{primary[0]}:{primary[1]}"
        r0 = self.c.nodes[0].client()
        return {k: owner(r0.execute_command("CLUSTER", "KEYSLOT", k))
                for k in self.regs + self.ctrs + self.pairs}

    def group_of(self, t):
        """The placement in force at time t."""
        return [p for when, p in self.placements if when <= t][-1]

    def now(self):
        return time.monotonic() - self.t0

    # -- processes -------------------------------------------------------

    def start_node(self, nd):
        """Start one incarnation of nd and record it: its exit status and
        its log are kept when it ends (monitor, restart, finish)."""
        with self.runs_lock:
            run = {"node": nd.i, "run": sum(1 for r in self.runs if r["node"] == nd.i),
                   "start": self.now(), "end": None, "status": None, "expect": None,
                   "log": None, "during": None, "proc": None}
            self.runs.append(run)
        try:
            nd.start()
            why = None
        except RuntimeError as e:
            why = str(e).splitlines()[0]
        with self.runs_lock:
            # Only now: the monitor must not pair the new record with the
            # previous incarnation's process.
            run["proc"] = nd.proc
            nd.run = run
        if why is not None:
            # Exited before it listened, or never listened: a problem, and
            # the node stays down (a later kill restarts it).
            if nd.proc and nd.proc.poll() is None:
                run["expect"] = "kill"
                nd.kill9()
            self.end_run(nd, nd.proc.returncode if nd.proc else None, why=why)
            return False
        return True

    def during(self, t):
        """What the run was doing at time t, in words."""
        now = [f"{f['kind']} of node {f['victim']} (from {f['start']:.1f} s)"
               for f in list(self.active)]
        if now:
            return "during " + ", ".join(now)
        done = [f for f in self.faults + self.changes if f.get("end") is not None and
                f["end"] <= t]
        if done:
            f = max(done, key=lambda x: x["end"])
            return (f"between faults, {t - f['end']:.1f} s after {f['kind']} of node "
                    f"{f['victim']}")
        return "before the first fault"

    def end_run(self, nd, status, why=None):
        """Close nd's current incarnation with its exit status (once): a
        status other than the expected one (kill -9 by the nemesis, 0 after
        SIGTERM) is a problem, and so is a sanitizer report or a crash line
        in its log."""
        with self.runs_lock:
            run = getattr(nd, "run", None)
            if run is None or run["end"] is not None:
                return
            run["end"] = self.now()
            run["status"] = status
            run["log"] = nd.output()
            run["during"] = self.during(run["end"])
            found = []
            expected = {"kill": -signal.SIGKILL, "stop": 0}.get(run["expect"])
            if why is not None:
                found.append(("did not start", why))
            elif status is None:
                found.append(("lost", "no exit status"))
            elif status != expected:
                found.append(("exit", exit_kind(status) +
                              ("" if run["expect"] else " (nobody stopped it)")))
            found += log_findings(run["log"])
            for kind, text in found:
                self.problem_details.append({"node": nd.i, "run": run["run"], "kind": kind,
                                             "text": text, "during": run["during"],
                                             "at": run["end"]})

    def monitor(self):
        """Notice a process that ends by itself, when it ends (a crash
        between faults would otherwise be seen only at the next restart)."""
        while self.monitor_until > time.monotonic():
            for nd in list(self.c.everyone):
                run = getattr(nd, "run", None)
                proc = run and run.get("proc")
                if proc is not None and run["end"] is None and run["expect"] is None and \
                        proc.poll() is not None:
                    self.end_run(nd, proc.returncode)
            time.sleep(0.05)

    monitor_until = float("inf")  # finish() ends the monitor

    def kill9(self, nd):
        nd.run["expect"] = "kill"
        nd.kill9()
        self.end_run(nd, nd.proc.returncode)

    def stop_node(self, nd):
        if nd.proc is None:
            return None
        if nd.proc.poll() is None:
            nd.run["expect"] = "stop"
            nd.proc.send_signal(signal.SIGCONT)
        rc = nd.stop()
        self.end_run(nd, rc)
        return rc

    def record(self, key, f, value, invoke, status, reply):
        op = {"key": key, "f": f, "value": value, "invoke": invoke, "complete": self.now(),
              "status": status}
        router = getattr(self.tl, "router", None)
        if router is not None:
            op["node"] = router.last  # who answered (or was last tried)
        if f in ("read", "incr") and status == "ok":
            op["value"] = int(reply) if f == "incr" and key not in self.pairs else reply
        elif status != "ok":
            op["reply"] = str(reply)[:200]  # why it failed, for --save-history
        with self.lock:
            self.ops.append(op)
        return op

    # -- clients ---------------------------------------------------------

    def client(self, cid):
        rng = random.Random(self.a.seed * 1000 + cid)
        router = Router(self.c, rng, self.a.op_timeout)
        self.tl.router = router
        seq = 0
        while not self.stop.is_set():
            if self.a.think:
                time.sleep(rng.uniform(0, 2 * self.a.think))
            p = rng.random()
            if p < 0.5:
                key = rng.choice(self.regs)
                if rng.random() < 0.5:
                    seq += 1
                    v = f"{cid}-{seq}"
                    t = self.now()
                    st, rep = router.run(key, "SET", key, v)
                    if st == "ok" and rep not in (True, "OK"):
                        st = "fail"
                    self.record(key, "write", v, t, st, rep)
                else:
                    t = self.now()
                    st, rep = router.run(key, "GET", key)
                    self.record(key, "read", None, t, st if st == "ok" else "fail", rep)
            elif self.pairs and p < 0.7:
                key = rng.choice(self.pairs)
                a, b = key + "a", key + "b"
                if rng.random() < 0.5:
                    t = self.now()
                    st, rep = router.txn(key, [("INCR", a), ("INCR", b)])
                    rep = tuple(int(x) for x in rep) if st == "ok" else rep
                    self.record(key, "incr", None, t, st, rep)
                else:
                    t = self.now()
                    st, rep = router.run(key, "MGET", a, b)
                    if st == "ok":
                        rep = tuple(int(x) if x is not None else 0 for x in rep)
                    self.record(key, "read", None, t, st if st == "ok" else "fail", rep)
            else:
                key = rng.choice(self.ctrs)
                if rng.random() < 0.5:
                    t = self.now()
                    st, rep = router.run(key, "INCR", key)
                    self.record(key, "incr", None, t, st, rep)
                else:
                    t = self.now()
                    st, rep = router.run(key, "GET", key)
                    if st == "ok":
                        rep = int(rep) if rep is not None else 0
                    self.record(key, "read", None, t, st if st == "ok" else "fail", rep)

    # -- nemesis ---------------------------------------------------------

    def leads(self, nd):
        try:
            return [g for g, role in self.c.groups(nd).items() if role == "leader"]
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            return []

    def kinds(self):
        k = ["kill", "pause"]
        if self.net:
            k.append("isolate")
            k.append("one-way")
            if len(self.c.nodes) >= 5:
                k.append("split")
        return k

    def restart(self, nd):
        self.start_node(nd)

    def inject(self, kind, victim):
        rng = self.rng
        hold = rng.uniform(self.a.hold_min, self.a.hold_max)
        led = self.leads(victim)
        f = {"kind": kind, "victim": victim.i, "start": self.now(), "led": led}
        self.active.append(f)
        if kind == "kill":
            self.kill9(victim)
            time.sleep(hold)
            self.restart(victim)
        elif kind == "pause":
            if victim.alive():
                victim.proc.send_signal(signal.SIGSTOP)
            time.sleep(hold)
            if victim.alive():
                victim.proc.send_signal(signal.SIGCONT)
        elif kind == "isolate":
            self.net.cut(victim.i)
            time.sleep(hold)
            self.net.heal(victim.i)
        elif kind == "one-way":
            # The victim's packets to its peers are dropped (blackhole
            # routes in its namespace); theirs still reach it.
            ns = self.net.ns[victim.i]
            peers = [self.net.ips[nd.i] for nd in self.c.nodes if nd is not victim]
            for ip in peers:
                sh("ip", "netns", "exec", ns, "ip", "route", "add", "blackhole", f"{ip}/32")
            time.sleep(hold)
            for ip in peers:
                sh("ip", "netns", "exec", ns, "ip", "route", "del", "blackhole", f"{ip}/32",
                   check=False)
        elif kind == "split":
            minority = [victim] + rng.sample(
                [nd for nd in self.c.nodes if nd is not victim], (len(self.c.nodes) - 1) // 2 - 1)
            for nd in minority:
                self.net.cut(nd.i)
            time.sleep(hold)
            for nd in minority:
                self.net.heal(nd.i)
        f["end"] = self.now()
        f["kind"] = kind + ("-leader" if led else "-follower")
        self.active.remove(f)
        self.faults.append(f)

    def nemesis(self):
        deadline = time.monotonic() + self.a.duration if self.a.duration else None
        while len(self.faults) < self.a.faults and (deadline is None or
                                                     time.monotonic() < deadline):
            time.sleep(self.rng.uniform(self.a.gap_min, self.a.gap_max))
            with self.fault_lock:
                kind = self.rng.choice(self.kinds())
                victim = self.rng.choice(self.c.nodes)
                self.inject(kind, victim)
            if self.a.verbose and len(self.faults) % 20 == 0:
                print(f"  {len(self.faults)} faults, {len(self.ops)} ops, "
                      f"{len(self.changes)} membership changes", flush=True)

    # -- membership changes ------------------------------------------------

    def reshard(self, action, node, members, change):
        """scripts/gridsync-reshard until it succeeds: a step that cannot
        complete while a fault holds (a member down, paused or cut off)
        fails after --step-timeout, and the script, being repeatable, is
        run again, up to --change-timeout in all."""
        deadline = time.monotonic() + self.a.change_timeout
        while True:
            change["attempts"] += 1
            left = max(1.0, deadline - time.monotonic())
            try:
                out = subprocess.run(
                    ["/usr/bin/python3", RESHARD, action, node, "--nodes", ",".join(members),
                     "--timeout", str(self.a.step_timeout)],
                    capture_output=True, text=True, timeout=left + self.a.step_timeout)
                if out.returncode == 0:
                    change["result"] = out.stdout.strip().splitlines()[-1]
                    return True
                change["result"] = (out.stdout + out.stderr).strip()[-500:]
            except subprocess.TimeoutExpired:
                change["result"] = "timed out"
            if time.monotonic() > deadline:
                return False
            time.sleep(0.5)

    def join(self):
        nd = self.spare
        with self.fault_lock:
            members = [name(m) for m in self.c.nodes]
            nd.peers = ",".join(members + [name(nd)])
            nd.join = True
            # A fresh data directory: a removed node refuses its old one.
            nd.dir = tempfile.mkdtemp(prefix=f"node-{nd.i}-", dir=self.c.dir)
            change = {"kind": "join", "victim": nd.i, "node": name(nd), "start": self.now(),
                      "attempts": 0, "ok": False, "led": []}
            self.active.append(change)
            if not self.start_node(nd):
                self.active.remove(change)
                change["end"] = self.now()
                change["result"] = "the joining node did not start"
                self.changes.append(change)
                return False
            self.c.nodes.append(nd)
            self.spare = None
        ok = self.reshard("add", name(nd), members, change)
        change["ok"] = ok
        if ok:
            self.c.n = len(self.c.nodes)
        self.finish_change(change)
        return ok

    def leave(self):
        with self.fault_lock:
            gone = self.mrng.choice(self.c.nodes)
            members = [name(m) for m in self.c.nodes]
            change = {"kind": "leave", "victim": gone.i, "node": name(gone),
                      "start": self.now(), "attempts": 0, "ok": False, "led": []}
            self.active.append(change)
        ok = self.reshard("remove", name(gone), members, change)
        change["ok"] = ok
        if ok:
            with self.fault_lock:
                # It serves nothing any more: stopped, it must exit 0.
                self.c.nodes.remove(gone)
                self.c.n = len(self.c.nodes)
                self.stop_node(gone)
                self.spare = gone
        self.finish_change(change)
        return ok

    def finish_change(self, change):
        change["end"] = self.now()
        change["seconds"] = round(change["end"] - change["start"], 3)
        self.active.remove(change)
        self.changes.append(change)
        if not change["ok"]:
            self.problem_details.append({
                "node": change["victim"], "run": None, "kind": change["kind"],
                "text": f"not completed after {change['attempts']} attempts in "
                        f"{change['seconds']} s: {change.get('result')}",
                "during": "", "at": change["end"]})
            return
        # The new placement, once leadership is back on the preferred
        # nodes (bounded; the old one stays in force if it does not come).
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            with self.fault_lock:
                try:
                    if all(self.c.groups(nd).get(name(nd)) == "leader" for nd in self.c.nodes):
                        self.placements.append((self.now(), self.placement()))
                        break
                except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
                    pass
            time.sleep(0.2)
        if self.a.verbose:
            print(f"  {change['kind']} {change['node']}: {change['seconds']} s, "
                  f"{change['attempts']} attempt(s)", flush=True)

    def churn(self):
        """--changes joins and leaves, alternating (a join first), while
        the nemesis runs; the run waits for them after the last fault."""
        for k in range(self.a.changes):
            time.sleep(self.mrng.uniform(self.a.change_gap_min, self.a.change_gap_max))
            if not (self.join() if k % 2 == 0 else self.leave()):
                return

    # -- the run ---------------------------------------------------------

    def run(self):
        try:
            self.start()
            threads = [threading.Thread(target=self.client, args=(i,), daemon=True)
                       for i in range(self.a.clients)]
            for t in threads:
                t.start()
            churn = None
            if self.a.changes:
                churn = threading.Thread(target=self.churn, daemon=True)
                churn.start()
            self.nemesis()
            if churn:
                churn.join(timeout=self.a.changes * (self.a.change_timeout +
                                                     2 * self.a.step_timeout + 60))
                if churn.is_alive():
                    raise AssertionError("the membership changes did not end")
            # Writes go on a while after the last fault, then stop.
            time.sleep(self.a.settle)
            self.stop.set()
            for t in threads:
                t.join(timeout=60)
            self.c.wait_ready(timeout=60)
            self.final_reads()
            if self.a.save_history:
                with open(self.a.save_history, "w") as f:
                    for op in self.ops:
                        f.write(json.dumps(op) + "\n")
            return self.report()
        finally:
            self.finish()

    def final_reads(self):
        router = Router(self.c, random.Random(self.a.seed), 10)
        for key in self.regs + self.ctrs + self.pairs:
            deadline = time.monotonic() + 60
            while True:
                t = self.now()
                if key in self.pairs:
                    st, rep = router.run(key, "MGET", key + "a", key + "b")
                else:
                    st, rep = router.run(key, "GET", key)
                if st == "ok":
                    if key in self.ctrs:
                        rep = int(rep) if rep is not None else 0
                    if key in self.pairs:
                        rep = tuple(int(x) if x is not None else 0 for x in rep)
                    self.record(key, "read", None, t, "ok", rep)["final"] = True
                    break
                if time.monotonic() > deadline:
                    raise AssertionError(f"final read of {key} failed: {rep}")
                time.sleep(0.05)

    def finish(self):
        self.monitor_until = 0
        self.stop.set()
        if not hasattr(self, "c"):
            self.problems = []
            if self.net:
                self.net.down()
            return
        for nd in self.c.everyone:
            if nd.proc and nd.proc.poll() is None:
                nd.proc.send_signal(signal.SIGCONT)
        for nd in self.c.everyone:
            self.stop_node(nd)
        for nd in self.c.everyone:
            if nd.log:
                nd.log.close()
        self.problems = [f"node {p['node']}" + (f" run {p['run']}" if p["run"] is not None
                                                else "") +
                         f": {p['kind']}: {p['text']}" + (f" ({p['during']})"
                                                          if p["during"] else "")
                         for p in sorted(self.problem_details, key=lambda p: p["at"])]
        self.save_logs()
        self.c.tmp.cleanup()
        if self.net:
            self.net.down()

    def save_logs(self):
        """Every incarnation's log, to --log-dir, or, when there are
        problems, to a new directory that is kept (named in the report)."""
        self.log_dir = self.a.log_dir
        if not self.log_dir and not self.problems:
            return
        if not self.log_dir:
            self.log_dir = tempfile.mkdtemp(prefix="gridsync-campaign-logs-")
        os.makedirs(self.log_dir, exist_ok=True)
        for run in self.runs:
            path = os.path.join(self.log_dir, f"node{run['node']}-run{run['run']}.log")
            with open(path, "w") as f:
                f.write(f"# started {run['start']:.3f} s, ended {run['end']:.3f} s, "
                        f"status {run['status']}, expected {run['expect']}\n")
                f.write(run["log"] or "")
        with open(os.path.join(self.log_dir, "schedule.json"), "w") as f:
            # What happened when: faults, membership changes, incarnations.
            json.dump({"faults": self.faults, "changes": self.changes,
                       "runs": [{k: v for k, v in run.items() if k not in ("log", "proc")}
                                for run in self.runs]}, f, indent=1)

    def report(self):
        by_key = {}
        for op in self.ops:
            by_key.setdefault(op["key"], []).append(op)
        anomalies, undecided, lost, dup, torn = [], [], 0, 0, 0
        for key, ops in sorted(by_key.items()):
            model = Counter if key in self.ctrs else Pair if key in self.pairs else Register
            ok, why = check(ops, model, budget=self.a.budget)
            if ok is False:
                anomalies.append(key)
            elif ok is None:
                undecided.append(key)
            final = [op for op in ops if op.get("final")][0]["value"]
            if model is Register:
                lost += len(lost_acks([o for o in ops if o["f"] == "write"], final))
            elif model is Pair:
                torn += len(torn_pairs([o for o in ops if o["f"] == "read"]))
                lo, du = duplicate_incrs([o for o in ops if o["f"] == "incr"], final[0])
                lost += lo
                dup += du
            else:
                lo, du = duplicate_incrs([o for o in ops if o["f"] == "incr"], final)
                lost += lo
                dup += du
        # Time to recover writes after each leader loss: from the fault to
        # the first acknowledged write, invoked after it, to a group the
        # victim led.
        recover = []
        writes = [o for o in self.ops if o["f"] in ("write", "incr") and o["status"] == "ok"]
        for f in self.faults:
            if not f["led"]:
                continue
            keys = {k for k, g in self.group_of(f["start"]).items() if g in f["led"]}
            after = [o["complete"] for o in writes if o["key"] in keys and
                     o["invoke"] >= f["start"]]
            if after:
                recover.append(min(after) - f["start"])
        kinds = {}
        for f in self.faults + self.changes:
            kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
        outcomes = {}
        for op in self.ops:
            outcomes[op["status"]] = outcomes.get(op["status"], 0) + 1
        return {"mode": self.a.mode, "seed": self.a.seed, "nodes": self.a.nodes,
                "faults": len(self.faults), "faults_by_kind": kinds, "ops": len(self.ops),
                "outcomes": outcomes, "lost_acks": lost, "duplicates": dup, "torn": torn,
                "transactions": sum(1 for o in self.ops if o["key"] in self.pairs and
                                    o["f"] == "incr" and o["status"] == "ok"),
                "anomalies": anomalies, "undecided": undecided,
                "recover_s": recover, "skipped": self.skipped,
                "changes": [{k: c.get(k) for k in ("kind", "node", "start", "seconds",
                                                   "attempts", "ok", "result")}
                            for c in self.changes],
                "seconds": round(self.now(), 1)}


def print_report(r, problems, log_dir=None):
    rec = r["recover_s"]
    print(f"mode {r['mode']}  seed {r['seed']}  nodes {r['nodes']}  {r['seconds']} s")
    print(f"faults: {r['faults']}  " + ", ".join(f"{k} {v}" for k, v in
                                             sorted(r["faults_by_kind"].items())))
    print(f"operations: {r['ops']}  " + ", ".join(f"{k} {v}" for k, v in
                                                 sorted(r["outcomes"].items())))
    print(f"acknowledged writes lost: {r['lost_acks']}  duplicated increments: "
          f"{r['duplicates']}")
    print(f"transactions acknowledged: {r['transactions']}  torn (half-applied) reads: "
          f"{r['torn']}")
    print(f"non-linearizable keys: {len(r['anomalies'])} {r['anomalies']}  "
          f"undecided (search budget): {len(r['undecided'])}")
    if rec:
        q = sorted(rec)
        p99 = q[min(len(q) - 1, int(0.99 * len(q)))]
        print(f"writes recovered after {len(rec)} leader losses: min {q[0]:.3f} s, "
              f"median {statistics.median(q):.3f} s, p99 {p99:.3f} s, max {q[-1]:.3f} s")
    for c in r["changes"]:
        print(f"{c['kind']} {c['node']} at {c['start']:.1f} s: "
              f"{'done' if c['ok'] else 'NOT DONE'} in {c['seconds']:.1f} s, "
              f"{c['attempts']} attempt(s)" + ("" if c["ok"] else f": {c['result']}"))
    for s in r["skipped"]:
        print(f"skipped: {s}")
    print(f"node problems: {len(problems)}")
    for p in problems[:50]:
        print(f"  {p}")
    if log_dir:
        print(f"every incarnation's log: {log_dir}")


def parse(argv=None):
    p = argparse.ArgumentParser(description="GridSync fault campaign")
    p.add_argument("--mode", default="lease", choices=["lease", "barrier", "any"])
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--keys", type=int, default=6, help="register keys and counter keys each")
    p.add_argument("--faults", type=int, default=1000)
    p.add_argument("--duration", type=float, default=0, help="stop injecting after (s), 0 = no")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--hold-min", type=float, default=0.2)
    p.add_argument("--hold-max", type=float, default=1.5)
    p.add_argument("--gap-min", type=float, default=0.1)
    p.add_argument("--gap-max", type=float, default=0.8)
    p.add_argument("--settle", type=float, default=2.0)
    p.add_argument("--op-timeout", type=float, default=1.0)
    p.add_argument("--think", type=float, default=0,
                   help="mean pause (s) between a client's operations (bounds the history)")
    p.add_argument("--budget", type=int, default=2_000_000)
    p.add_argument("--no-partitions", dest="partitions", action="store_false")
    p.add_argument("--no-txn", dest="txn", action="store_false",
                   help="no MULTI/EXEC on counter pairs")
    p.add_argument("--save-history", metavar="FILE", help="write every operation, one JSON a line")
    p.add_argument("--log-dir", metavar="DIR",
                   help="keep every node incarnation's log there (with problems, kept anyway)")
    p.add_argument("--changes", type=int, default=0,
                   help="membership changes during the faults: join, leave, join, ...")
    p.add_argument("--change-gap-min", type=float, default=1.0)
    p.add_argument("--change-gap-max", type=float, default=5.0)
    p.add_argument("--step-timeout", type=float, default=15.0,
                   help="gridsync-reshard --timeout (s per step) before the change is rerun")
    p.add_argument("--change-timeout", type=float, default=240.0,
                   help="reruns of one change stop after (s): then it is a problem")
    p.add_argument("--verbose", action="store_true")
    return p.parse_args(argv)


def main():
    args = parse()
    camp = Campaign(args)
    r = camp.run()
    print_report(r, camp.problems, camp.log_dir)
    bad = r["lost_acks"] or r["duplicates"] or r["torn"] or r["anomalies"] or camp.problems
    return 1 if bad and args.mode != "any" else 0


if __name__ == "__main__":
    sys.exit(main())
