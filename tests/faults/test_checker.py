"""The fault campaign's checker on hand-made histories: it accepts
linearizable ones (concurrency, unknown outcomes taking effect late or
never) and rejects the anomalies it exists to find, the read-after-failover
one first."""
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

from checker import Counter, Register, check, duplicate_incrs, lost_acks  # noqa: E402


def op(f, value, invoke, complete, status="ok"):
    return {"f": f, "value": value, "invoke": invoke, "complete": complete, "status": status}


def test_sequential_register():
    h = [op("write", "a", 0, 1), op("read", "a", 2, 3), op("write", "b", 4, 5),
         op("read", "b", 6, 7)]
    assert check(h, Register)[0] is True


def test_concurrent_write_may_be_seen_or_not():
    w = op("write", "b", 2, 10)
    for seen in ("a", "b"):
        h = [op("write", "a", 0, 1), w, op("read", seen, 3, 4)]
        assert check(h, Register)[0] is True


def test_read_after_failover_anomaly_is_rejected():
    # The campaign's finding: "b" acknowledged, then a read that starts
    # after it returns the older "a".
    h = [op("write", "a", 0, 1), op("write", "b", 2, 3), op("read", "a", 3.5, 4)]
    ok, witness = check(h, Register)
    assert ok is False
    assert witness == 2  # the writes fit, the read does not


def test_stale_read_after_a_fresh_one_is_rejected():
    # Two reads, no overlap, going back in time while a write is pending.
    h = [op("write", "a", 0, 1), op("write", "b", 2, 20),
         op("read", "b", 3, 4), op("read", "a", 5, 6)]
    assert check(h, Register)[0] is False


def test_read_of_a_value_never_written_is_rejected():
    h = [op("write", "a", 0, 1), op("read", "zzz", 2, 3)]
    assert check(h, Register)[0] is False


def test_unknown_write_may_take_effect_late_or_never():
    unknown = op("write", "b", 2, 3, "unknown")
    # Seen long after its client gave up on it...
    assert check([op("write", "a", 0, 1), unknown, op("read", "a", 4, 5),
                  op("read", "b", 100, 101)], Register)[0] is True
    # ...or never.
    assert check([op("write", "a", 0, 1), unknown, op("read", "a", 100, 101)],
                 Register)[0] is True
    # But not before it was invoked.
    assert check([op("write", "a", 0, 1), op("read", "b", 1.2, 1.5), unknown],
                 Register)[0] is False


def test_failed_operations_did_not_happen():
    h = [op("write", "a", 0, 1), op("write", "b", 2, 3, "fail"), op("read", "b", 4, 5)]
    assert check(h, Register)[0] is False


def test_counter():
    h = [op("incr", 1, 0, 1), op("incr", 2, 0.5, 2), op("read", 2, 3, 4)]
    assert check(h, Counter)[0] is True
    # An unknown INCR may count once or not at all, not twice.
    u = op("incr", None, 5, 6, "unknown")
    assert check(h + [u, op("read", 3, 10, 11)], Counter)[0] is True
    assert check(h + [u, op("read", 2, 10, 11)], Counter)[0] is True
    assert check(h + [u, op("read", 4, 10, 11)], Counter)[0] is False
    # Two INCRs that both returned 1: one of them was applied twice or lost.
    assert check([op("incr", 1, 0, 1), op("incr", 1, 2, 3)], Counter)[0] is False


def test_lost_acks_and_duplicates():
    ws = [op("write", "a", 0, 1), op("write", "b", 2, 3), op("write", "c", 4, 5, "unknown")]
    assert lost_acks(ws, "b") == []
    assert lost_acks(ws, "c") == []
    assert [w["value"] for w in lost_acks(ws, "a")] == ["b"]
    assert len(lost_acks(ws, None)) == 2
    incrs = [op("incr", 1, 0, 1), op("incr", 2, 2, 3), op("incr", None, 4, 5, "unknown")]
    assert duplicate_incrs(incrs, 2) == (0, 0)
    assert duplicate_incrs(incrs, 3) == (0, 0)
    assert duplicate_incrs(incrs, 1) == (1, 0)
    assert duplicate_incrs(incrs, 4) == (0, 1)


def test_many_concurrent_operations_are_decided():
    # 8 clients, 400 operations on one key, each read seeing the latest
    # completed write: linearizable, and decided well within the budget.
    h, t = [], 0.0
    last = None
    for i in range(400):
        if i % 3 == 0:
            h.append(op("write", f"v{i}", t, t + 0.5))
            last = f"v{i}"
        else:
            h.append(op("read", last, t + 0.6, t + 0.9))
        t += 1.0
    assert check(h, Register)[0] is True


def test_many_unknown_increments_are_decided():
    # 25 INCRs whose outcome is unknown, then reads that see them take
    # effect one by one: exploring their orders would be 2^25 states;
    # taken in invoke order (they are interchangeable) it is linear.
    h = [op("incr", None, 0.01 * k, 0.01 * k + 0.5, "unknown") for k in range(25)]
    h += [op("read", k, 100 + k, 100.5 + k) for k in range(26)]
    assert check(h, Counter, budget=200_000)[0] is True
    # One read too many is rejected, also within the budget.
    h.append(op("read", 26, 200, 201))
    assert check(h, Counter, budget=200_000)[0] is False


def test_unread_unknown_writes_do_not_slow_the_search():
    h = [op("write", f"u{k}", 0.01 * k, 1, "unknown") for k in range(40)]
    h += [op("write", "a", 2, 3), op("read", "a", 4, 5)]
    assert check(h, Register, budget=10_000)[0] is True


# ---- counter pairs moved by transactions (MULTI; INCR a; INCR b; EXEC)

def test_pair_transactions_linearizable():
    from checker import Pair, torn_pairs
    h = [op("incr", (1, 1), 0, 1), op("read", (1, 1), 2, 3),
         op("incr", (2, 2), 2.5, 6), op("read", (1, 1), 3.5, 4),  # concurrent: before it
         op("incr", None, 7, 8, "unknown"), op("read", (3, 3), 20, 21)]
    assert check(h, Pair)[0] is True
    assert torn_pairs([o for o in h if o["f"] == "read"]) == []


def test_pair_half_applied_transaction_is_caught():
    # A transaction applied as two separate writes: a read between them
    # sees the first counter moved and not the second.
    from checker import Pair, torn_pairs
    h = [op("incr", (1, 1), 0, 10), op("read", (1, 0), 2, 3), op("read", (1, 1), 11, 12)]
    assert check(h, Pair)[0] is False
    assert torn_pairs([o for o in h if o["f"] == "read"]) == [h[1]]


def test_pair_replies_that_do_not_move_together_are_caught():
    # The transaction's own replies show the counters apart (another
    # client's INCR ran between its two commands).
    from checker import Pair
    h = [op("incr", (1, 2), 0, 1)]
    assert check(h, Pair)[0] is False


def test_pair_transaction_applied_twice_is_caught():
    from checker import Pair
    h = [op("incr", (1, 1), 0, 1), op("read", (2, 2), 2, 3)]
    assert check(h, Pair)[0] is False
    assert duplicate_incrs(h[:1], 2) == (0, 1)
