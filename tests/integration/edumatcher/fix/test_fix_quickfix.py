"""The FIX gateway (edumatcher-fix) with QuickFIX as the initiator: logon,
every order type, fills against an ALF trader, cancel, replace, mass
cancel, rejects, a gateway restart with sequence numbers resumed and a
ResendRequest answered (docs/fix.md)."""


def test_logon_and_limit_fill_against_alf(fixx):
    alf = fixx.trader("ALF1")
    alf.send("NEW cl=s1 sym=ABC side=S qty=10 px=100.00")
    assert alf.line().startswith("ACK cl=s1")
    q = fixx.qf()
    q.logon()
    q.send("D", t11="b1", t55="ABC", t54="1", t38="4", t40="2", t44="100.00", t59="0",
           t60="20261201-12:00:00.000")
    new = q.app("8", t11="b1", t150="0")
    assert new[39] == "0" and new[151] == "4" and new[14] == "0" and new[37].isdigit()
    fill = q.app("8", t11="b1", t150="F")
    assert fill[39] == "2" and fill[31] == "100.00" and fill[32] == "4"
    assert fill[14] == "4" and fill[151] == "0" and fill[6] == "100.000000"
    assert alf.line() == f"FILL cl=s1 oid=1 tid=1 px=100.00 qty=4 leaves=6 cum=4"


T60 = "20261201-12:00:00.000"


def nos(q, cl, side, qty, ordtype, **more):
    q.send("D", t11=cl, t55=more.pop("sym", "ABC"), t54=side, t38=str(qty), t40=ordtype,
           t60=T60, **more)


def test_every_order_type_and_partial_fills(fixx):
    alf = fixx.trader("ALF1")
    q = fixx.qf()
    q.logon()
    # limit, partially filled by an ALF sell, the rest canceled
    nos(q, "L1", "1", 10, "2", t44="99.50")
    assert q.app("8", t11="L1", t150="0")[39] == "0"
    alf.send("NEW cl=a1 sym=ABC side=S qty=3 px=99.50")
    assert alf.line().startswith("ACK cl=a1")
    part = q.app("8", t11="L1", t150="F")
    assert (part[39], part[32], part[14], part[151]) == ("1", "3", "3", "7")
    q.send("F", t11="L1c", t41="L1", t55="ABC", t54="1", t60=T60)
    cxl = q.app("8", t11="L1c", t150="4")
    assert (cxl[39], cxl[41], cxl[151], cxl[14]) == ("4", "L1", "0", "3")
    # market (40=1): takes the ALF offers, the remainder canceled
    alf.send("NEW cl=a2 sym=ABC side=S qty=2 px=100.00")
    # a2 rests before M1 is sent (a1's FILL may come first on this line)
    while not alf.line().startswith("ACK cl=a2"):
        pass
    nos(q, "M1", "1", 5, "1")
    q.app("8", t11="M1", t150="0")
    f = q.app("8", t11="M1", t150="F")
    assert (f[31], f[32], f[39]) == ("100.00", "2", "1")
    c = q.app("8", t11="M1", t150="4")
    assert c[39] == "4" and "market" in c[58]
    # stop (40=3) and stop-limit (40=4): triggered by a trade at 101.00
    nos(q, "S1", "1", 1, "3", t99="101.00")
    q.app("8", t11="S1", t150="0")
    nos(q, "S2", "1", 1, "4", t99="101.00", t44="102.00")
    q.app("8", t11="S2", t150="0")
    alf.send("NEW cl=a3 sym=ABC side=S qty=3 px=101.00")
    while not alf.line().startswith("ACK cl=a3"):
        pass
    alf.send("NEW cl=b3 sym=ABC side=B qty=1 px=101.00")  # prints 101.00
    assert q.app("8", t11="S1", t150="L")[39] == "0"
    assert q.app("8", t11="S1", t150="F")[31] == "101.00"
    assert q.app("8", t11="S2", t150="L")
    assert q.app("8", t11="S2", t150="F")[39] == "2"
    # IOC (59=3): nothing to match, canceled; FOK (59=4): cannot fill, canceled
    nos(q, "I1", "1", 1, "2", t44="90.00", t59="3")
    q.app("8", t11="I1", t150="0")
    assert "IOC" in q.app("8", t11="I1", t150="4")[58]
    nos(q, "K1", "1", 50, "2", t44="101.00", t59="4")
    q.app("8", t11="K1", t150="0")
    assert "FOK" in q.app("8", t11="K1", t150="4")[58]
    # iceberg (MaxFloor): ALF sees the displayed part only fill at a time
    nos(q, "B1", "2", 10, "2", t44="105.00", t111="4", t59="1")
    q.app("8", t11="B1", t150="0")
    alf.send("NEW cl=x1 sym=ABC side=B qty=6 px=105.00")
    lines = alf.until_pong()
    fills = [l for l in lines if l.startswith("FILL cl=x1")]
    assert [l.split(" qty=")[1].split(" ")[0] for l in fills] == ["4", "2"]
    assert q.app("8", t11="B1", t150="F")[32] == "4"
    assert q.app("8", t11="B1", t150="F")[151] == "4"
    # self-trade prevention, custom tag 7928: CN cancels the incoming order
    nos(q, "P1", "1", 1, "2", t44="105.00", t7928="CN")
    q.app("8", t11="P1", t150="0")
    assert "self-trade" in q.app("8", t11="P1", t150="4")[58]


def test_replace_and_cancel_rejects(fixx):
    q = fixx.qf()
    q.logon()
    nos(q, "R1", "2", 5, "2", t44="110.00")
    q.app("8", t11="R1", t150="0")
    q.send("G", t11="R2", t41="R1", t55="ABC", t54="2", t38="8", t40="2", t44="111.00",
           t60=T60)
    rep = q.app("8", t11="R2", t150="5")
    assert (rep[41], rep[38], rep[44], rep[151]) == ("R1", "8", "111.00", "8")
    # the order is now known by its new ClOrdID
    q.send("G", t11="R3", t41="R2", t55="ABC", t54="2", t38="6", t40="2", t60=T60)
    assert q.app("8", t11="R3", t150="5")[38] == "6"
    q.send("F", t11="R4", t41="R3", t55="ABC", t54="2", t60=T60)
    assert q.app("8", t11="R4", t150="4")[41] == "R3"
    # cancel of a finished order, and of one never sent: OrderCancelReject
    q.send("F", t11="R5", t41="R3", t55="ABC", t54="2", t60=T60)
    rj = q.app("9", t11="R5")
    assert (rj[434], rj[102], rj[39]) == ("1", "1", "8")
    q.send("G", t11="R6", t41="nope", t55="ABC", t54="2", t38="1", t40="2", t60=T60)
    assert q.app("9", t11="R6")[434] == "2"


def test_order_rejects_say_why(fixx):
    q = fixx.qf()
    q.logon()
    nos(q, "U1", "1", 1, "2", t44="1.00", sym="NOPE")
    r = q.app("8", t11="U1", t150="8")
    assert r[39] == "8" and r[103] == "1" and "UNKNOWN_SYMBOL" in r[58]
    nos(q, "C1", "1", 1, "2", t44="150.00")  # ABC's collar: 20 % around 100.00
    assert "COLLAR" in q.app("8", t11="C1", t150="8")[58]
    nos(q, "T1", "1", 1, "2", t44="100.001")  # off the tick
    assert "BAD_VALUE" in q.app("8", t11="T1", t150="8")[58]
    nos(q, "D1", "1", 1, "2", t44="90.00")
    q.app("8", t11="D1", t150="0")
    nos(q, "D1", "1", 1, "2", t44="90.00")  # a live order has that ClOrdID
    assert "DUPLICATE_ID" in q.app("8", t11="D1", t150="8")[58]
    # a required tag missing: session-level Reject naming it
    q.send("D", t11="N1", t55="ABC", t38="1", t40="2", t44="90.00", t60=T60)
    rj = q.incoming("3")
    assert (rj[371], rj[373]) == ("54", "1")
    # a message type the gateway does not take: BusinessMessageReject
    q.send("V", t262="md1", t263="0", t264="1")
    assert q.incoming("j")[380] == "3"


def test_mass_cancel(fixx):
    q = fixx.qf()
    q.logon()
    for cl in ("m1", "m2"):
        nos(q, cl, "1", 1, "2", t44="95.00", t59="1")
        q.app("8", t11=cl, t150="0")
    nos(q, "m3", "2", 1, "2", t44="1.0", sym="XYZ")
    q.app("8", t11="m3", t150="0")
    q.send("q", t11="mc1", t530="1", t55="ABC", t60=T60)
    q.app("8", t11="m1", t150="4")
    q.app("8", t11="m2", t150="4")
    r = q.app("r", t11="mc1")
    assert (r[531], r[533]) == ("1", "2")
    q.send("q", t11="mc2", t530="7", t60=T60)
    q.app("8", t11="m3", t150="4")
    assert q.app("r", t11="mc2")[533] == "1"
    q.send("q", t11="mc3", t530="1", t55="NOPE", t60=T60)
    r = q.app("r", t11="mc3")
    assert (r[531], r[532]) == ("0", "1")


def test_restart_resumes_sequence_numbers_and_answers_a_resend(fixx, workdir):
    import os
    from conftest import FixGateway
    q = fixx.qf(reset="N", store=os.path.join(workdir, "qf-restart"))
    q.logon()
    nos(q, "o1", "1", 1, "2", t44="90.00", t59="1")
    first = q.app("8", t11="o1", t150="0")
    er_seq = int(first[34])
    # the gateway stops (its sessions' orders are canceled on disconnect)
    fixx.fix.p.stop()
    q.wait(lambda k, f: k == "LOGOUT", what="LOGOUT")
    fixx.fix = FixGateway(fixx, fixx.procs_ref, fixx.fix_store, port=fixx.fix.port)
    # QuickFIX reconnects by itself and logs on with its next number; the
    # gateway answers with its own next number, not 1
    logon_reply = q.incoming("A")
    assert int(logon_reply[34]) > er_seq
    q.logon()
    # make QuickFIX believe it missed everything after 1: it asks for a resend
    q.command("next_target 2")
    q.wait(lambda k, f: k == "DONE", what="DONE")
    q.send("1", t112="after-restart")
    rr = q.wait(lambda k, f: k == "OUT" and f.get(35) == "2", what="ResendRequest sent")
    assert rr[7] == "2"
    # the ExecutionReport from before the restart comes again, PossDupFlag=Y
    again = q.incoming("8", t11="o1", t150="0")
    assert again[43] == "Y" and 122 in again and int(again[34]) == er_seq
    # the admin messages in the range are gap-filled
    assert q.incoming("4")[123] == "Y"
    nos(q, "o2", "1", 1, "2", t44="90.00")
    q.app("8", t11="o2", t150="0")


def test_heartbeats_both_ways(fixx):
    # HeartBtInt 1: the gateway sends Heartbeats when it has nothing else
    # to say, and QuickFIX's own Heartbeats keep the session up
    q = fixx.qf(hb=1)
    q.logon()
    q.incoming("0")
    q.wait(lambda k, f: k == "OUT" and f.get(35) == "0", what="Heartbeat from QuickFIX")
    # a TestRequest from QuickFIX is answered with its TestReqID
    q.send("1", t112="qf-ping")
    assert q.incoming("0", t112="qf-ping")
    nos(q, "h1", "1", 1, "2", t44="90.00")
    q.app("8", t11="h1", t150="0")
