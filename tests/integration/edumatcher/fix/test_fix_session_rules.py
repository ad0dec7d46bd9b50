"""FIX session rules with a hand-written client, for what QuickFIX would
never send: messages before Logon, wrong CompIDs and passwords, an
unanswered TestRequest, malformed fields, garbled frames, a client that
never reads (docs/fix.md)."""
import os
import socket
import time

from conftest import FIX_TOKEN, FixGateway, RawFix, fields


def test_message_before_logon_ends_the_session(fixx):
    r = RawFix(fixx.fix.port, "FIX1")
    r.send("D", "11=x|55=ABC|54=1|38=1|40=1|")
    lo = r.read()
    assert lo[35] == "5" and lo[58] == "first message must be Logon(A)"
    assert r.read() is None


def test_wrong_comp_id_or_password_is_a_logout_with_the_reason(fixx):
    r = RawFix(fixx.fix.port, "FIX1", target="ELSEWHERE")
    assert r.logon(extra=f"554={FIX_TOKEN}|")[58] == "wrong TargetCompID(56)"
    assert r.read() is None
    r = RawFix(fixx.fix.port, "FIX1")
    assert r.logon(extra="554=guess|")[58].startswith("wrong Password(554)")
    assert r.read() is None
    r = RawFix(fixx.fix.port, "OPS")
    assert "trader id" in r.logon()[58]


def test_unanswered_test_request_closes_the_session(fixx):
    r = RawFix(fixx.fix.port, "FIX2")
    assert r.logon(hb=1, extra=f"554={FIX_TOKEN}|")[35] == "A"
    # silent: a TestRequest comes, then, unanswered, a Logout and the end
    tr = r.read_type("1")
    assert tr[112].startswith("TEST")
    lo = r.read_type("5")
    assert lo[58] == "TestRequest not answered"
    assert r.read() is None


def test_malformed_fields_are_rejected_and_garbled_frames_dropped(fixx):
    r = RawFix(fixx.fix.port, "FIX2")
    assert r.logon(extra=f"554={FIX_TOKEN}|")[35] == "A"
    r.send("D", "11=a|11=b|55=ABC|54=1|38=1|40=1|")
    rj = r.read_type("3")
    assert (rj[45], rj[371], rj[373]) == ("2", "11", "13")
    r.send("D", "11=a|55=ABC|54=1|38=ten|40=1|")
    rj = r.read_type("3")
    assert (rj[371], rj[373]) == ("38", "6")
    r.send("D", "11=a|55=ABC|54=1|38=1|40=1|58=" + "x" * 200 + "|")
    assert r.read_type("3")[373] == "5"
    # a wrong checksum: dropped without a word, its number not used
    bad = bytearray(r.frame("35=1|49=FIX2|56=EDUMATCHER|34=5|52=20261201-12:00:00.000|112=g|"))
    bad[-2] ^= 1
    r.sock.sendall(bytes(bad))
    r.send("1", "112=alive|", seq=5)
    hb = r.read_type("0")
    assert hb[112] == "alive"
    # a number too low without PossDupFlag: Logout with the reason
    r.send("1", "112=late|", seq=2)
    lo = r.read_type("5")
    assert lo[58].startswith("MsgSeqNum too low")


def test_a_client_that_never_reads_is_closed_and_others_go_on(fixx, workdir):
    small = FixGateway(fixx, fixx.procs_ref, os.path.join(workdir, "small-store"),
                       args=["--output-limit", "65536"])
    r = RawFix(small.port, "FIX2")
    assert r.logon(extra=f"554={FIX_TOKEN}|")[35] == "A"
    r.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    batch = b"".join(
        r.frame(f"35=1|49=FIX2|56=EDUMATCHER|34={s}|52=20261201-12:00:00.000|112=t{s}|")
        for s in range(2, 20002))
    closed = False
    try:
        for _ in range(40):  # up to 800,000 TestRequests, never reading
            r.sock.sendall(batch)
    except (BrokenPipeError, ConnectionResetError):
        closed = True
    assert closed, "the gateway kept a client that never reads"
    # the other sessions were never stalled
    q = fixx.qf()
    q.logon()
    q.send("D", t11="ok1", t55="ABC", t54="1", t38="1", t40="2", t44="90.00",
           t60="20261201-12:00:00.000")
    q.app("8", t11="ok1", t150="0")


def test_a_trader_logged_in_on_another_door_gets_a_logout_and_no_session(fixx):
    """The engine refuses a gw logged in through another door (docs/alf.md
    C.1): the FIX Logon is answered only once the engine took the trader,
    here with a Logout giving the reason, as a FIX engine answers a second
    Logon for an active session."""
    a = fixx.trader("FIX1", FIX_TOKEN)  # on the ALF gateway
    r = RawFix(fixx.fix.port, "FIX1")
    lo = r.logon(extra=f"554={FIX_TOKEN}|")
    assert lo[35] == "5" and lo[58].startswith("LOGGED_IN_ELSEWHERE"), lo
    assert r.read() is None
    # the ALF session is untouched
    a.send("NEW cl=a1 sym=ABC side=B qty=1 px=90.00")
    assert a.line().startswith("ACK cl=a1 ")
    # after its LOGOUT the FIX Logon is taken (tried until the engine has
    # the LOGOUT: it came through another door)
    a.send("LOGOUT")
    deadline = time.time() + 20
    while True:
        r = RawFix(fixx.fix.port, "FIX1")
        r.send("A", f"98=0|108=30|141=Y|554={FIX_TOKEN}|")
        # pipelined: read by the gateway only once the Logon is taken
        r.send("D", "11=f1|55=ABC|54=1|38=1|40=2|44=90|59=0|")
        # refused again: the Logout arrives although the order was left
        # unread (the gateway lingers instead of resetting the connection)
        got = r.read()
        if got[35] == "A" or time.time() > deadline:
            break
        r.close()
        time.sleep(0.05)
    assert got[35] == "A", got
    er = r.read_type("8")
    assert er[11] == "f1" and er[39] == "0", er


def test_a_mass_cancel_refused_by_the_rate_limit_is_reported_refused(fixx, workdir):
    # One message per second, a bucket of one: the order takes the token and
    # the mass cancel right behind it (one write) is refused at the gateway,
    # at once, before the engine hears of it. The report must say so; it
    # said "done, 0 orders" when the refusal came before the request was
    # marked pending.
    slow = FixGateway(fixx, fixx.procs_ref, os.path.join(workdir, "slow-store"),
                      args=["--rate-limit", "1", "--rate-burst", "1"])
    r = RawFix(slow.port, "FIX1")
    assert r.logon(extra=f"554={FIX_TOKEN}|")[35] == "A"
    order = r.frame("35=D|49=FIX1|56=EDUMATCHER|34=2|52=20261201-12:00:00.000|11=o1|55=ABC|54=1|"
                    "38=1|40=2|44=90.00|59=1|60=20261201-12:00:00.000|")
    mass = r.frame("35=q|49=FIX1|56=EDUMATCHER|34=3|52=20261201-12:00:00.000|11=mc1|530=7|"
                   "60=20261201-12:00:00.000|")
    r.seq = 4
    r.sock.sendall(order + mass)
    rep = r.read_type("r")
    assert rep[11] == "mc1"
    assert (rep[531], rep[532]) == ("0", "99"), rep
    assert rep[58].startswith("RATE_LIMIT")
