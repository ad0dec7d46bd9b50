"""MULTI/EXEC/DISCARD/WATCH through redis-py (pipelines, WatchError,
ExecAbortError) and raw sockets: the limits and the paths a differential
test against Redis cannot reach (eviction, the queue limit, cluster mode).
The exact texts are compared with Redis in test_vs_redis.py."""
import time

import pytest
import redis


def test_pipeline_default_is_a_transaction(r):
    """redis-py's pipeline() wraps the commands in MULTI/EXEC."""
    with r.pipeline() as p:
        p.set("a", "1").incr("a").get("a").mget("a", "nokey")
        assert p.execute() == [True, 2, "2", ["2", None]]
    with r.pipeline(transaction=False) as p:
        p.set("b", "x").get("b")
        assert p.execute() == [True, "x"]


def test_runtime_error_stays_inside_the_reply(r):
    r.set("s", "text")
    with r.pipeline() as p:
        p.incr("s").set("t", "1")
        res = p.execute(raise_on_error=False)
    assert isinstance(res[0], redis.ResponseError) and res[1] is True
    assert r.get("t") == "1"


def test_queueing_error_aborts(r):
    with r.pipeline() as p:
        p.set("a", "1")
        p.execute_command("NOSUCHCOMMAND", "x")
        with pytest.raises(redis.exceptions.ResponseError) as e:
            p.execute()
    assert "EXECABORT" in str(e.value) or "unknown command" in str(e.value)
    assert r.get("a") is None  # nothing ran
    # The connection is usable afterwards (not left inside MULTI).
    assert r.ping()


def test_watch_conflict_from_another_client(server):
    a = server.client(decode_responses=True)
    b = server.client(decode_responses=True)
    a.set("balance", 10)
    with a.pipeline() as p:
        p.watch("balance")
        v = int(p.get("balance"))
        b.incr("balance")  # another client writes after WATCH
        p.multi()
        p.set("balance", v - 1)
        with pytest.raises(redis.WatchError):
            p.execute()
    assert a.get("balance") == "11"

    # r.transaction retries until no conflict.
    tries = []

    def debit(pipe):
        v = int(pipe.get("balance"))
        if not tries:
            b.incr("balance")
        tries.append(v)
        pipe.multi()
        pipe.set("balance", v - 1)

    a.transaction(debit, "balance")
    assert len(tries) == 2 and a.get("balance") == "11"


def test_exec_is_not_interleaved(server):
    """EXEC runs its commands back to back: another client's command sent
    meanwhile sees all of them or none."""
    a, b = server.sock(), server.client(decode_responses=True)
    try:
        n = 500
        req = b"*1\r\n$5\r\nMULTI\r\n" + b"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n" * n + b"*1\r\n$4\r\nEXEC\r\n"
        a.sendall(req)
        seen = set()
        deadline = time.monotonic() + 30
        while True:
            v = b.get("k")
            seen.add(v)
            if v == str(n) or time.monotonic() > deadline:
                break
        assert seen <= {None, str(n)}, seen
    finally:
        a.close()


def test_eviction_fails_exec(make_server):
    """A watched key evicted under maxmemory is a modification (Redis's
    performEvictions signals it)."""
    s = make_server("--maxmemory", "2mb", "--maxmemory-policy", "allkeys-lru")
    r = s.client(decode_responses=True)
    r.set("w", "v")
    with r.pipeline() as p:
        p.watch("w")
        for i in range(400):
            r.set(f"fill:{i}", "x" * 10000)
        assert r.exists("w") == 0, "the watched key was not evicted"
        p.multi()
        p.set("w", "again")
        with pytest.raises(redis.WatchError):
            p.execute()


def test_active_expiry_fails_exec(make_server):
    """Active expiry (the timer, not a lookup) removing a watched key."""
    s = make_server("--hz", "100")
    r = s.client(decode_responses=True)
    r.set("w", "v", px=50)
    r.execute_command("WATCH", "w")
    deadline = time.monotonic() + 10
    while r.dbsize() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert r.dbsize() == 0
    assert "flags=d" in r.execute_command("CLIENT", "INFO")
    r.execute_command("MULTI")
    assert r.execute_command("EXEC") is None


def test_client_list_shows_the_transaction(server):
    """CLIENT LIST: flags x and multi=<queued> inside MULTI (as Redis)."""
    r = server.client(decode_responses=True)
    s = server.sock()
    try:
        s.sendall(b"CLIENT SETNAME tx\r\nMULTI\r\nSET a 1\r\nGET a\r\n")
        want = b"+OK\r\n+OK\r\n+QUEUED\r\n+QUEUED\r\n"
        got = b""
        while len(got) < len(want):
            data = s.recv(4096)
            assert data
            got += data
        assert got == want
        line = [x for x in r.execute_command("CLIENT", "LIST").splitlines() if " name=tx " in x][0]
        assert " flags=x " in line and " multi=2 " in line
    finally:
        s.close()


def test_queue_counts_toward_query_buffer_limit(server):
    """Queued commands are bounded by client-query-buffer-limit: past it,
    the client is closed (as one with too much unprocessed input) and the
    server carries on."""
    r = server.client(decode_responses=True)
    r.config_set("client-query-buffer-limit", "1mb")
    s = server.sock()
    try:
        s.sendall(b"MULTI\r\n")
        assert s.recv(64) == b"+OK\r\n"
        value = b"x" * (300 * 1024)
        cmd = b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$%d\r\n%s\r\n" % (len(value), value)
        got = b""
        closed = False
        for _ in range(8):
            try:
                s.sendall(cmd)
                data = s.recv(4096)
            except (ConnectionResetError, BrokenPipeError):
                closed = True
                break
            if not data:
                closed = True
                break
            got += data
        assert closed
        assert got.count(b"+QUEUED\r\n") == 3  # 3 x 300 KB fit in 1 MB, the 4th not
    finally:
        s.close()
    assert r.ping() and r.get("k") is None


def test_many_watchers_and_keys(server):
    """Many keys per client (the watch table grows), several clients on
    one key, a watcher that disconnects: only the watchers of the written
    key fail, and the table forgets the closed client."""
    keys = [f"k{i}" for i in range(300)]
    clients = [server.client(decode_responses=True) for _ in range(4)]
    w = server.client(decode_responses=True)
    pipes = []
    for i, c in enumerate(clients):
        p = c.pipeline()
        if i == 0:
            p.watch(*keys)
        elif i == 2:
            p.watch("own2")  # nobody writes it
        else:
            p.watch("k7", f"own{i}")
        pipes.append(p)
    gone = server.client(decode_responses=True)
    gone.execute_command("WATCH", "k7", *keys[:50])
    gone.close()
    w.set("k7", "x")  # watched by pipes 0, 1, 3
    w.set("own3", "x")  # watched by pipe 3 only
    results = []
    for i, p in enumerate(pipes):
        p.multi()
        p.set(f"done{i}", "1")
        try:
            p.execute()
            results.append(True)
        except redis.WatchError:
            results.append(False)
        finally:
            p.reset()
    assert results == [False, False, True, False]
    # Unwatched now (EXEC/DISCARD): the same write no longer matters.
    p = clients[1].pipeline()
    p.watch("k8")
    w.set("k7", "y")
    p.multi()
    p.get("k7")
    assert p.execute() == ["y"]
    assert w.get("k8") is None
    for c in clients + [w]:
        c.close()
