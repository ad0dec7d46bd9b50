"""No order without an answer, through FIX (docs/alf.md I): a QuickFIX
initiator streams NewOrderSingles through edumatcher-fix while the engine
is killed with SIGKILL and restarted; every ClOrdID gets exactly one first
ExecutionReport (ExecType 0 new or 8 rejected), and the gateway's session
with QuickFIX stays up throughout."""
import signal

from conftest import fields

KILLS = 3
BURST = 150
T60 = "20261201-12:00:00.000"


def first_reports(q):
    """ClOrdID -> the ExecTypes of its new / rejected ExecutionReports so far."""
    out = {}
    for line in list(q.lines):
        kind, _, rest = line.partition(" ")
        if kind != "APP":
            continue
        f = fields(rest)
        if f.get(35) == "8" and f.get(150) in ("0", "8"):
            out.setdefault(f.get(11), []).append(f.get(150))
    return out


def drain(q, pred, timeout):
    """Pull QuickFIX's lines until pred() holds (True) or timeout passes."""
    import time
    end = time.monotonic() + timeout
    while not pred():
        left = end - time.monotonic()
        if left <= 0:
            return False
        q._pull(min(left, 0.2))
    return True


def test_fix_orders_answered_across_engine_kills(fixx):
    x = fixx
    q = x.qf()
    q.logon()
    sent = []
    unanswered_at_kills = 0
    n = 0
    for round_ in range(KILLS + 1):
        for _ in range(BURST):
            n += 1
            cl = f"F{n}"
            buy = n % 2 == 0
            # resting, never crossing: buys below 100, sells above
            q.send("D", t11=cl, t55="ABC", t54="1" if buy else "2", t38="1", t40="2",
                   t44=f"{99.0 - (n % 50) * 0.01:.2f}" if buy else f"{101.0 + (n % 50) * 0.01:.2f}",
                   t59="1", t60=T60)
            sent.append(cl)
        if round_ == KILLS:
            break
        first = sent[-BURST]
        assert drain(q, lambda: first in first_reports(q), 60), "no answer before the kill"
        x.engine.stop(signal.SIGKILL)
        unanswered_at_kills += len(set(sent) - set(first_reports(q)))
        x.engine = x.start_engine()

    assert drain(q, lambda: set(sent) <= set(first_reports(q)), 120), \
        sorted(set(sent) - set(first_reports(q)))[:10]
    assert unanswered_at_kills > 0
    reports = first_reports(q)
    assert {cl: r for cl, r in reports.items() if r != ["0"]} == {}  # one "new" each, no reject
    # the FIX session never dropped: one logon, no logout
    assert sum(1 for l in q.lines if l == "LOGON" or l.startswith("LOGON")) == 1
    assert not any(l.startswith("LOGOUT") for l in q.lines)
