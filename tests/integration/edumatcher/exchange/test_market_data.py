"""Market data a late joiner can use: the Python example of
docs/edumatcher-exchange.md, run as written, gets the current book, last
trade and phase from the engine's query socket although the book has not
changed since, then follows the stream; each symbol's stream is numbered
without gaps, and a restart shows as a new epoch."""
import os
import re
import signal

import zmq

from conftest import wait_until

DOC = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..", "docs",
                   "edumatcher-exchange.md")


def doc_example():
    """follow() as the docs define it (the code before its usage loop)."""
    text = open(DOC).read()
    code = text.split("**Market data for a late joiner.**", 1)[1]
    code = code.split("```python\n", 1)[1].split("```", 1)[0]
    lib, sep, _ = code.partition("\nfor book in follow(")
    assert sep, "the example's usage loop is missing"
    ns = {}
    exec(compile(lib, DOC, "exec"), ns)
    return ns["follow"]


def fields(line):
    return dict(w.split("=", 1) for w in line.split()[1:])


def test_late_joiner_gets_book_then_stream(exchange):
    x = exchange()
    a, b = x.trader("GWA"), x.trader("GWB")
    a.send("NEW cl=s1 sym=ABC side=S qty=5 px=101.00", "NEW cl=s2 sym=ABC side=S qty=3 px=102.00")
    b.send("NEW cl=b1 sym=ABC side=B qty=4 px=99.00", "NEW cl=b2 sym=ABC side=B qty=2 px=101.00")
    a.until_pong()
    b.until_pong()

    # A socket that waits forever would hang the test: bound every receive.
    ctx = zmq.Context.instance()
    ctx.setsockopt(zmq.RCVTIMEO, 10000)
    ctx.setsockopt(zmq.LINGER, 0)
    follow = doc_example()
    books = follow("ABC", pub=x.pub, query=x.query)
    first = next(books)
    assert first["phase"] == "CONTINUOUS"
    assert (first["last"], first["lastqty"], first["volume"]) == ("101.00", "2", "2")
    assert first["bids"] == "99.00:4:1"
    assert first["asks"] == "101.00:3:1,102.00:3:1"

    # The stream from there on: a change arrives numbered above the snapshot.
    b.send("NEW cl=b3 sym=ABC side=B qty=1 px=100.00")
    b.until_pong()
    book = next(books)
    while book["bids"] != "100.00:1:1,99.00:4:1":
        book = next(books)
    assert int(book["seq"]) > int(first["seq"]) and book["epoch"] == first["epoch"]
    books.close()


def test_unknown_symbol_is_an_error(exchange, zctx):
    x = exchange()
    req = zctx.socket(zmq.REQ)
    req.setsockopt(zmq.RCVTIMEO, 10000)
    req.connect(x.query)
    req.send_multipart([b"book", b"NOPE"])
    assert req.recv_multipart() == [b"error", b"unknown symbol"]
    req.send_multipart([b"what"])  # one frame: not a query, still answered
    assert req.recv_multipart()[0] == b"error"
    req.send_multipart([b"book", b"ABC"])
    topic, line = req.recv_multipart()
    assert topic == b"book" and re.match(rb"MD sym=ABC seq=\d+ epoch=\d+ phase=", line), line
    req.close()


def subscribe(zctx, x):
    sub = zctx.socket(zmq.SUB)
    sub.setsockopt(zmq.SUBSCRIBE, b"md.ABC")
    sub.setsockopt(zmq.RCVTIMEO, 10000)
    sub.setsockopt(zmq.LINGER, 0)
    sub.connect(x.pub)
    return sub


def until_level(sub, level):
    """Receive md.ABC until its bids show level; return its fields."""
    while True:
        md = fields(sub.recv_multipart()[1].decode())
        if md["bids"].startswith(level):
            return md


def test_sequence_has_no_gaps_and_restart_is_a_new_epoch(exchange, zctx):
    x = exchange()
    t = x.trader("GWA")
    sub = subscribe(zctx, x)
    # joined once a change of the book is seen
    n = [0]

    def joined():
        n[0] += 1
        t.send(f"NEW cl=j{n[0]} sym=ABC side=B qty=1 px=90.{n[0]:02d}")
        try:
            return sub.poll(200) and until_level(sub, f"90.{n[0]:02d}")
        except zmq.Again:
            return None
    assert wait_until(joined, timeout=20, step=0)
    seqs = []
    for i in range(5):
        # each order changes the book once: one message, the next number
        t.send(f"NEW cl=q{i} sym=ABC side=B qty=1 px=95.{i:02d}")
        md = until_level(sub, f"95.{i:02d}")
        seqs.append(int(md["seq"]))
        epoch = md["epoch"]
    assert seqs == list(range(seqs[0], seqs[0] + 5)), seqs

    x.engine.p.send_signal(signal.SIGKILL)
    x.engine.p.wait()
    x.engine = x.start_engine()
    sub2 = subscribe(zctx, x)
    t.until_pong()
    md = None
    for i in range(20):  # until sub2's subscription has joined
        t.send(f"NEW cl=r{i} sym=ABC side=B qty=1 px=96.{i:02d}")
        if sub2.poll(300):
            md = until_level(sub2, "96.")
            break
    assert md, "no market data after the restart"
    assert md["epoch"] != epoch  # a subscriber sees the restart
    assert int(md["seq"]) <= i + 2  # numbering starts again (1: the replayed book)
    sub.close()
    sub2.close()
