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

At the end every fault is healed, each key is read once more (recorded
too), and the report gives: faults by kind, operations by outcome, lost
acknowledged writes, duplicated increments, non-linearizable keys, the time
writes took to recover after each leader loss, and node problems (exit
codes, sanitizer or crash lines in the logs, a node that did not stop).

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
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "integration", "gridsync"))

import redis  # noqa: E402

from checker import Counter, Pair, Register, check, duplicate_incrs, lost_acks, torn_pairs  # noqa: E402,E501
from test_cluster import Cluster  # noqa: E402
from test_cluster_partition import Net, sh  # noqa: E402

BAD_LOG_LINES = ("AddressSanitizer", "runtime error:", "LeakSanitizer", "Segmentation fault",
                 "Assertion", "core dumped", "panic", "raft: apply of entry")


class Router:
    """A minimal cluster client: slot -> node from MOVED, one connection
    per node per client."""

    def __init__(self, cluster, rng, timeout):
        self.c, self.rng, self.timeout = cluster, rng, timeout
        self.route = {}
        self.conns = {}

    def conn(self, nd):
        r = self.conns.get(nd.i)
        if r is None:
            # One connection: a transaction's commands must share it.
            r = redis.Redis(host=nd.host, port=nd.port, socket_timeout=self.timeout,
                            socket_connect_timeout=self.timeout, decode_responses=True,
                            single_connection_client=True)
            self.conns[nd.i] = r
        return r

    def drop(self, nd):
        r = self.conns.pop(nd.i, None)
        if r is not None:
            r.close()

    def run(self, key, *args):
        """(status, reply) with status ok / fail / unknown."""
        nd = self.route.get(key) or self.rng.choice(self.c.nodes)
        for _ in range(6):
            try:
                return "ok", self.conn(nd).execute_command(*args)
            except redis.ResponseError as e:
                msg = str(e)
                if msg.startswith("MOVED"):
                    nd = self.c.node_at(msg.split()[2])
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
                        nd = self.c.node_at(moved.split()[2])
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
                    nd = self.c.node_at(msg.split()[2])
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
        self.ops = []  # every operation, appended under lock
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.faults = []  # dicts: kind, victim, start, end, led
        self.skipped = []  # fault kinds that cannot run here, with why
        self.net = None
        self.logs = {}  # node index -> list of earlier runs' output
        self.t0 = time.monotonic()
        self.regs = [f"{{r{k}}}reg" for k in range(args.keys)]
        self.ctrs = [f"{{c{k}}}ctr" for k in range(args.keys)]
        # Pair keys: the checker's key is the pair's tag; a and b hold it.
        self.pairs = [f"{{p{k}}}" for k in range(args.keys)] if args.txn else []

    # -- cluster ---------------------------------------------------------

    def start(self):
        a = self.a
        extra = ["--cluster-read-mode", a.mode]
        if a.partitions and os.geteuid() == 0:
            try:
                self.net = Net(a.nodes)
                self.net.up()
            except (subprocess.CalledProcessError, FileNotFoundError) as e:
                self.skipped.append(f"partitions: cannot make network namespaces ({e})")
                if self.net:
                    self.net.down()
                self.net = None
        elif a.partitions:
            self.skipped.append("partitions: not root, no network namespaces")
        if self.net:
            self.c = Cluster(a.nodes, addrs=[(ip, 7000) for ip in self.net.ips],
                             prefixes=[["ip", "netns", "exec", ns] for ns in self.net.ns],
                             extra=extra)
        else:
            self.c = Cluster(a.nodes, extra=extra)
        self.c.start()
        self.c.wait_settled(timeout=60)
        if a.nodes < 5 and self.net:
            self.skipped.append("majority/minority split: needs 5 nodes (with 3, an "
                                "isolated node is the minority)")
        # Which group (preferred leader's name) holds each key, while settled.
        slots = self.c.nodes[0].client(decode_responses=True).execute_command("CLUSTER", "SLOTS")
        def owner(slot):
            for s, e, primary, *_ in slots:
                if s <= slot <= e:
                    return f"{primary[0]}:{primary[1]}"
        r0 = self.c.nodes[0].client()
        self.group_of = {k: owner(r0.execute_command("CLUSTER", "KEYSLOT", k))
                         for k in self.regs + self.ctrs + self.pairs}

    def now(self):
        return time.monotonic() - self.t0

    def record(self, key, f, value, invoke, status, reply):
        op = {"key": key, "f": f, "value": value, "invoke": invoke, "complete": self.now(),
              "status": status}
        if f in ("read", "incr") and status == "ok":
            op["value"] = int(reply) if f == "incr" and key not in self.pairs else reply
        with self.lock:
            self.ops.append(op)
        return op

    # -- clients ---------------------------------------------------------

    def client(self, cid):
        rng = random.Random(self.a.seed * 1000 + cid)
        router = Router(self.c, rng, self.a.op_timeout)
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
            if self.a.nodes >= 5:
                k.append("split")
        return k

    def restart(self, nd):
        self.logs.setdefault(nd.i, []).append((nd.output(), nd.proc.returncode))
        nd.start()

    def inject(self, kind, victim):
        rng = self.rng
        hold = rng.uniform(self.a.hold_min, self.a.hold_max)
        led = self.leads(victim)
        f = {"kind": kind, "victim": victim.i, "start": self.now(), "led": led}
        if kind == "kill":
            victim.kill9()
            time.sleep(hold)
            self.restart(victim)
        elif kind == "pause":
            victim.proc.send_signal(signal.SIGSTOP)
            time.sleep(hold)
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
                [nd for nd in self.c.nodes if nd is not victim], (self.a.nodes - 1) // 2 - 1)
            for nd in minority:
                self.net.cut(nd.i)
            time.sleep(hold)
            for nd in minority:
                self.net.heal(nd.i)
        f["end"] = self.now()
        f["kind"] = kind + ("-leader" if led else "-follower")
        self.faults.append(f)

    def nemesis(self):
        deadline = time.monotonic() + self.a.duration if self.a.duration else None
        while len(self.faults) < self.a.faults and (deadline is None or
                                                     time.monotonic() < deadline):
            time.sleep(self.rng.uniform(self.a.gap_min, self.a.gap_max))
            kind = self.rng.choice(self.kinds())
            victim = self.rng.choice(self.c.nodes)
            self.inject(kind, victim)
            if self.a.verbose and len(self.faults) % 20 == 0:
                print(f"  {len(self.faults)} faults, {len(self.ops)} ops", flush=True)

    # -- the run ---------------------------------------------------------

    def run(self):
        self.start()
        try:
            threads = [threading.Thread(target=self.client, args=(i,), daemon=True)
                       for i in range(self.a.clients)]
            for t in threads:
                t.start()
            self.nemesis()
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
        self.problems = []
        if not hasattr(self, "c"):
            if self.net:
                self.net.down()
            return
        for nd in self.c.nodes:
            if nd.proc and nd.proc.poll() is None:
                nd.proc.send_signal(signal.SIGCONT)
        for nd in self.c.nodes:
            rc = nd.stop()
            runs = self.logs.get(nd.i, []) + [(nd.output(), rc)]
            for k, (out, code) in enumerate(runs):
                last = k == len(runs) - 1
                if last and code not in (0, None):
                    self.problems.append(f"node {nd.i}: exit status {code}")
                for line in out.splitlines():
                    if any(b in line for b in BAD_LOG_LINES):
                        self.problems.append(f"node {nd.i} run {k}: {line.strip()}")
            if nd.log:
                nd.log.close()
        self.c.tmp.cleanup()
        if self.net:
            self.net.down()

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
            keys = {k for k, g in self.group_of.items() if g in f["led"]}
            after = [o["complete"] for o in writes if o["key"] in keys and
                     o["invoke"] >= f["start"]]
            if after:
                recover.append(min(after) - f["start"])
        kinds = {}
        for f in self.faults:
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
                "seconds": round(self.now(), 1)}


def print_report(r, problems):
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
    for s in r["skipped"]:
        print(f"skipped: {s}")
    print(f"node problems: {len(problems)}")
    for p in problems[:50]:
        print(f"  {p}")


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
    p.add_argument("--verbose", action="store_true")
    return p.parse_args(argv)


def main():
    args = parse()
    camp = Campaign(args)
    r = camp.run()
    print_report(r, camp.problems)
    bad = r["lost_acks"] or r["duplicates"] or r["torn"] or r["anomalies"] or camp.problems
    return 1 if bad and args.mode != "any" else 0


if __name__ == "__main__":
    sys.exit(main())
