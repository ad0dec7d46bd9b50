"""One door per trader (docs/alf.md C.9): the engine, the one place that
sees every gateway process and its own hosted port, decides where a gw is
logged in. A second LOGIN through another door is refused while the first
door is open; a LOGIN through another door after the first gateway died
(within --gateway-grace-ms) ends the old session first, its orders
canceled, and is then taken."""
import signal
import time

from conftest import Trader, wait_until


def login_answer(port, gw):
    """A new session on port that sends LOGIN gw=<gw>: (trader, first line)."""
    t = Trader(port)
    t.send(f"LOGIN gw={gw}")
    return t, t.line()


def test_a_second_gateway_cannot_log_in_a_trader_live_on_the_first(exchange):
    x = exchange()
    port2 = x.add_gateway("gateway2")
    a = x.trader("GW1")
    a.send("NEW cl=a1 sym=ABC side=B qty=5 px=100.00 tif=GTC")
    assert a.until_pong() == ["ACK cl=a1 oid=1"]
    b, answer = login_answer(port2, "GW1")
    assert answer == "REJECT reason=LOGGED_IN_ELSEWHERE"
    # the refused session is not logged in (it may try again later)
    b.send("PING")
    assert b.line() == "REJECT reason=NOT_LOGGED_IN"
    # the first session keeps its order and its events
    c = Trader(port2, "GW2")
    c.send("NEW cl=c1 sym=ABC side=S qty=5 px=100.00")
    assert c.line().startswith("ACK cl=c1 ")
    assert a.line().startswith("FILL cl=a1 ")
    assert b.expect_nothing()
    # once GW1 logs out of the first gateway, the second may log it in
    a.send("LOGOUT")
    with_retry = time.time() + 20
    while True:
        b.send("LOGIN gw=GW1")
        got = b.line()
        if got == "LOGGEDIN gw=GW1" or time.time() > with_retry:
            break
    assert got == "LOGGEDIN gw=GW1"
    b.send("NEW cl=b1 sym=ABC side=B qty=1 px=90.00")
    assert b.line().startswith("ACK cl=b1 ")


def test_the_hosted_port_and_a_gateway_refuse_each_others_traders(exchange):
    x = exchange(hosted=True)
    gport = x.add_gateway("gateway2")
    h = x.trader("GW1")  # on the engine's hosted port
    g = Trader(gport, "GW2")
    _, answer = login_answer(gport, "GW1")
    assert answer == "REJECT reason=LOGGED_IN_ELSEWHERE"
    _, answer = login_answer(x.port, "GW2")
    assert answer == "REJECT reason=LOGGED_IN_ELSEWHERE"
    # both sessions still get their own events, not the refused ones
    h.send("NEW cl=h1 sym=ABC side=B qty=5 px=100.00")
    assert h.line().startswith("ACK cl=h1 ")
    g.send("NEW cl=g1 sym=ABC side=S qty=5 px=100.00")
    assert g.line().startswith("ACK cl=g1 ")
    assert g.line().startswith("FILL cl=g1 ")
    assert h.line().startswith("FILL cl=h1 ")


def test_a_trader_whose_gateway_died_logs_in_elsewhere_and_its_orders_are_canceled(exchange):
    # a grace far longer than the test: only the new LOGIN can cancel
    x = exchange(engine_args=["--gateway-grace-ms", "600000"])
    port2 = x.add_gateway("gateway2")
    a = x.trader("GW1")
    a.send("NEW cl=a1 sym=ABC side=B qty=5 px=100.00 tif=GTC")
    assert a.until_pong() == ["ACK cl=a1 oid=1"]
    x.gateway.stop(signal.SIGKILL)
    # until the engine has seen the first gateway's link end, GW1 is
    # still logged in there: the LOGIN is refused and tried again
    deadline = time.time() + 20
    while True:
        b, answer = login_answer(port2, "GW1")
        if answer != "REJECT reason=LOGGED_IN_ELSEWHERE" or time.time() > deadline:
            break
        b.close()
        time.sleep(0.05)
    assert answer == "LOGGEDIN gw=GW1", answer
    assert "logs in through another door while its gateway is gone" in x.engine.stderr()
    # GW1's old bid at 100 was canceled before the LOGIN: a sell at 100
    # finds nothing to trade with
    c = Trader(port2, "GW2")
    c.send("NEW cl=c1 sym=ABC side=S qty=5 px=100.00 tif=IOC")
    got = c.until_pong()
    assert got[0].startswith("ACK cl=c1 "), got
    assert not any(l.startswith("FILL") for l in got), got
    # the new session trades as any other
    b.send("NEW cl=b1 sym=ABC side=B qty=1 px=99.00")
    assert b.line().startswith("ACK cl=b1 ")
