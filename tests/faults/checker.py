"""Linearizability checker for the fault campaign (Wing & Gong's search
with Lowe's memoisation, as Knossos and Porcupine do), per key, for three
models: a register (SET of unique values, GET), a counter (INCR, GET) and
a pair of counters in one slot moved only together (MULTI; INCR a; INCR b;
EXEC, read with MGET a b): a transaction that is not atomic shows as a
read, or a transaction's own replies, where the two differ.

An operation is a dict: {"f": "write"|"read"|"incr", "value": ...,
"invoke": t0, "complete": t1, "status": "ok"|"fail"|"unknown"}.
- ok:      it took effect once, at some instant in [invoke, complete]; its
           value is what it returned (read: the value or None; incr: the
           new count).
- fail:    it did not take effect (dropped before the search).
- unknown: it may have taken effect once at any instant after invoke, or
           never: its completion is taken as +infinity and the search may
           leave it out. Unknown reads are dropped (they change nothing).

check(ops, model) returns (True, None) when some order of the ok
operations, plus any subset of the unknown ones, respects real time and
the model; else (False, the longest linearizable prefix found, as a
witness). A search that needs more than `budget` steps returns
(None, "budget"): undecided, reported apart, never counted as passed.

Separate from linearizability, and cheaper: lost_acks() and
duplicate_incrs() (see their docstrings)."""
import math

INF = math.inf


class Register:
    initial = None

    @staticmethod
    def step(state, op):
        """(allowed, new state) for op applied to state."""
        if op["f"] == "write":
            return True, op["value"]
        if op["f"] == "read":
            return op["value"] == state, state
        raise ValueError(op["f"])


class Counter:
    initial = 0

    @staticmethod
    def step(state, op):
        if op["f"] == "incr":
            if op["status"] == "unknown":
                return True, state + 1
            return op["value"] == state + 1, state + 1
        if op["f"] == "read":
            return (op["value"] or 0) == state, state
        raise ValueError(op["f"])


class Pair:
    """Two counters that only a transaction moves, both at once. incr's
    value is the pair of counts the transaction returned; read's is the
    pair MGET returned (None for a missing key, as 0)."""
    initial = (0, 0)

    @staticmethod
    def step(state, op):
        nxt = (state[0] + 1, state[1] + 1)
        if op["f"] == "incr":
            if op["status"] == "unknown":
                return True, nxt
            return tuple(op["value"]) == nxt, nxt
        if op["f"] == "read":
            return tuple(v or 0 for v in op["value"]) == state, state
        raise ValueError(op["f"])


def torn_pairs(reads):
    """Pair keys: reads whose two counters differ (a transaction seen half
    applied), whatever the order of operations. Returns the list."""
    return [r for r in reads if r["status"] == "ok" and
            (r["value"][0] or 0) != (r["value"][1] or 0)]


def _prepare(ops):
    """Drop what cannot matter: failed operations, unknown reads, and
    unknown writes whose value no read returned (with unique values, "it
    never took effect" explains at least as much as any other choice)."""
    read = {op["value"] for op in ops if op["f"] == "read" and op["status"] == "ok"}
    kept = []
    for op in ops:
        if op["status"] not in ("ok", "unknown", "fail"):
            raise ValueError(op["status"])
        if op["status"] == "fail":
            continue
        if op["status"] == "unknown" and op["f"] == "read":
            continue
        if op["status"] == "unknown" and op["f"] == "write" and op["value"] not in read:
            continue
        kept.append(op)
    return kept


def check(ops, model, budget=2_000_000):
    ops = _prepare(ops)
    n = len(ops)
    if n == 0:
        return True, None
    # Events: (time, kind, op index); calls before returns at equal times
    # so that touching operations count as concurrent (conservative).
    events = []
    for i, op in enumerate(ops):
        end = INF if op["status"] == "unknown" else op["complete"]
        events.append((op["invoke"], 0, i))
        if end != INF:
            events.append((end, 1, i))
    events.sort()
    # A doubly linked list over the events, with a sentinel head.
    m = len(events)
    # Node ids 0..m-1 are events; head is m.
    head = m
    nxt = [None] * (m + 1)
    prv = [None] * (m + 1)
    nxt[head] = 0 if m else None
    for k in range(m):
        prv[k] = head if k == 0 else k - 1
        nxt[k] = k + 1 if k + 1 < m else None
    call_of = [None] * n
    ret_of = [None] * n
    for k, (_, kind, i) in enumerate(events):
        if kind == 0:
            call_of[i] = k
        else:
            ret_of[i] = k
    pending_known = sum(1 for op in ops if op["status"] == "ok")
    # Unknown INCRs are interchangeable (same effect, no result, no end):
    # trying them only in invoke order loses no linearization (exchange
    # argument) and avoids exploring their permutations. The ones taken
    # are then always a prefix of this list.
    unknown_incrs = [i for _, kind, i in events
                     if kind == 0 and ops[i]["f"] == "incr" and ops[i]["status"] == "unknown"]
    u_rank = {i: r for r, i in enumerate(unknown_incrs)}
    u_taken = 0

    def lift(k):
        p, q = prv[k], nxt[k]
        nxt[p] = q
        if q is not None:
            prv[q] = p

    def unlift(k):
        p, q = prv[k], nxt[k]
        nxt[p] = k
        if q is not None:
            prv[q] = k

    state = model.initial
    linearized = 0  # bitset of op indexes
    cache = set()
    stack = []  # (op index, state before)
    best = 0
    steps = 0
    entry = nxt[head]
    while True:
        if pending_known == 0:
            return True, None
        steps += 1
        if steps > budget:
            return None, "budget"
        if entry is None:
            # Only calls of unknown operations remain ahead, yet known ones
            # are pending: cannot happen (their returns are in the list).
            raise AssertionError("checker: ran off the list")
        _, kind, i = events[entry]
        if kind == 0 and i in u_rank and u_rank[i] != u_taken:
            entry = nxt[entry]  # not the earliest unknown INCR left: symmetric
            continue
        if kind == 0:
            ok, new_state = model.step(state, ops[i])
            key = (linearized | (1 << i), new_state)
            if ok and key not in cache:
                cache.add(key)
                stack.append((i, state))
                state = new_state
                linearized |= 1 << i
                if ops[i]["status"] == "ok":
                    pending_known -= 1
                if i in u_rank:
                    u_taken += 1
                lift(call_of[i])
                if ret_of[i] is not None:
                    lift(ret_of[i])
                best = max(best, len(stack))
                entry = nxt[head]
            else:
                entry = nxt[entry]
        else:
            # A return whose operation is not linearized yet: undo the last.
            if not stack:
                return False, best
            i, state = stack.pop()
            linearized &= ~(1 << i)
            if ops[i]["status"] == "ok":
                pending_known += 1
            if i in u_rank:
                u_taken -= 1
            if ret_of[i] is not None:
                unlift(ret_of[i])
            unlift(call_of[i])
            entry = nxt[call_of[i]]


def lost_acks(writes, final_value):
    """Register keys: acknowledged writes that the final value (read after
    the cluster healed and every write completed) proves lost: those
    invoked after the write of the final value had completed (the final
    value should then be theirs or a later one), or every acknowledged
    write if the final value was never written. Returns the list."""
    acked = [w for w in writes if w["status"] == "ok"]
    if final_value is None:
        return acked
    src = [w for w in writes if w["value"] == final_value]
    if not src:
        return acked
    done = INF if src[0]["status"] != "ok" else src[0]["complete"]
    return [w for w in acked if w["invoke"] > done]


def duplicate_incrs(incrs, final_count):
    """Counter keys: (lost, duplicated) counts. With a acknowledged and u
    unknown INCRs, the final count must be within [a, a + u]; below is a
    lost acknowledged increment, above a duplicated one; two acknowledged
    INCRs returning the same count are a duplicate too."""
    a = sum(1 for x in incrs if x["status"] == "ok")
    u = sum(1 for x in incrs if x["status"] == "unknown")
    seen = [x["value"] for x in incrs if x["status"] == "ok"]
    dup_returns = len(seen) - len(set(seen))
    final = final_count or 0
    lost = max(0, a - final)
    dup = max(0, final - (a + u)) + dup_returns
    return lost, dup
