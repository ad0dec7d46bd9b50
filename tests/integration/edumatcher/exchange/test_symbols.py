"""SYMBOLS (docs/alf.md §9): a trader asks the ALF gateway for a symbol's
rules and best bid/offer; the gateway answers from the engine's market data
(and its query socket at start), without the engine seeing the question.
Real engine and gateway processes, a plain TCP socket as the trader."""
from conftest import OPS_TOKEN, wait_until


def fields(line):
    word, *rest = line.split()
    return word, dict(w.split("=", 1) for w in rest)


def symbols(t, arg=""):
    """Send SYMBOLS [arg]; return ({sym: fields}, n of ENDSYMBOLS) or the
    REJECT line."""
    t.send("SYMBOLS" + (" " + arg if arg else ""))
    out = {}
    while True:
        word, f = fields(t.line())
        if word == "REJECT":
            return f
        if word == "ENDSYMBOLS":
            assert int(f["n"]) == len(out)
            return out
        assert word == "SYMBOL"
        out[f["sym"]] = f


def test_symbols_answers(exchange):
    # the gateway starts after the symbols were defined: it learns them from
    # the engine's query socket (no book changes after it started)
    x = exchange(gateway_query=True)
    a = x.trader("GWA")
    all_ = symbols(a)
    assert set(all_) == {"ABC", "XYZ"}
    abc, xyz = all_["ABC"], all_["XYZ"]
    assert abc == {"sym": "ABC", "tick": "0.01", "lot": "1", "decimals": "2", "band": "20.00",
                   "cb_band": "-", "phase": "CONTINUOUS", "bid": "-", "bidqty": "0",
                   "ask": "-", "askqty": "0", "last": "-"}
    assert (xyz["tick"], xyz["lot"], xyz["decimals"], xyz["band"]) == ("0.5", "1", "1", "-")

    # one symbol; an unknown one is a REJECT with its reason, a bad query too
    assert set(symbols(a, "sym=XYZ")) == {"XYZ"}
    assert symbols(a, "sym=NOPE") == {"reason": "UNKNOWN_SYMBOL"}
    assert symbols(a, "side=B") == {"reason": "SYNTAX"}
    assert symbols(a, "sym=abc") == {"reason": "BAD_VALUE"}

    # after orders and a trade the best bid/offer and last follow the book
    b = x.trader("GWB")
    a.send("NEW cl=s1 sym=ABC side=S qty=5 px=101.00", "NEW cl=s2 sym=ABC side=S qty=3 px=102.00")
    b.send("NEW cl=b1 sym=ABC side=B qty=4 px=99.00", "NEW cl=b2 sym=ABC side=B qty=2 px=101.00")
    a.until_pong()
    b.until_pong()
    want = {"bid": "99.00", "bidqty": "4", "ask": "101.00", "askqty": "3", "last": "101.00"}
    got = wait_until(lambda: (lambda f: f if all(f[k] == v for k, v in want.items()) else None)(
        symbols(b, "sym=ABC")["ABC"]))
    assert got, symbols(b, "sym=ABC")
    assert got["phase"] == "CONTINUOUS"

    # after HALT the phase says so
    ops = x.trader("OPS", OPS_TOKEN)
    ops.send("HALT sym=ABC")
    ops.until_pong()
    assert wait_until(lambda: symbols(a, "sym=ABC")["ABC"]["phase"] == "HALTED"), \
        symbols(a, "sym=ABC")
    assert symbols(a, "sym=XYZ")["XYZ"]["phase"] == "CONTINUOUS"


def test_symbols_needs_login(exchange):
    x = exchange()
    t = x.trader()
    assert symbols(t) == {"reason": "NOT_LOGGED_IN"}
