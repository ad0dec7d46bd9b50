"""Connection, server and client commands: PING, ECHO, INFO, CONFIG,
COMMAND, CLIENT, AUTH, HELLO (RESP3 over a raw socket: redis-py 4.3 has no
protocol=3), QUIT, and Redis's generic error texts."""
import os
import socket
import time

import pytest
import redis

from conftest import recv_all_until_closed, recv_until


def test_ping_echo(r, raw):
    assert r.ping() is True
    assert raw.execute_command("PING") == "PONG"
    assert raw.execute_command("PING", "hi") == "hi"
    assert r.echo("hello") == "hello"
    with pytest.raises(redis.ResponseError,
                       match="^wrong number of arguments for 'ping' command$"):
        r.execute_command("PING", "a", "b")


def test_unknown_command_and_arity(r):
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("FOO", "bar", "baz")
    assert str(e.value) == "unknown command 'FOO', with args beginning with: 'bar' 'baz' "
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("NOPE")
    assert str(e.value) == "unknown command 'NOPE', with args beginning with: "
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("GET")
    assert str(e.value) == "wrong number of arguments for 'get' command"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("get", "a", "b")
    assert str(e.value) == "wrong number of arguments for 'get' command"
    with pytest.raises(redis.ResponseError) as e:
        r.execute_command("CONFIG", "FOO")
    assert str(e.value) == "unknown subcommand 'FOO'. Try CONFIG HELP."


def test_info(r):
    r.set("a", "1", ex=100)
    r.set("b", "2")
    r.get("a")
    r.get("missing")
    info = r.info()
    assert info["redis_mode"] == "standalone"
    assert info["connected_clients"] >= 1
    assert info["used_memory"] > 0
    assert info["keyspace_hits"] >= 1
    assert info["keyspace_misses"] >= 1
    assert "evicted_keys" in info
    assert info["db0"] == {"keys": 2, "expires": 1, "avg_ttl": 0}
    assert set(r.info("memory")) >= {"used_memory", "maxmemory", "maxmemory_policy"}
    assert "used_memory" not in r.info("stats")
    assert "keyspace_hits" in r.info("stats")


def test_config_get_set(r):
    assert r.config_get("maxmemory") == {"maxmemory": "0"}
    assert r.config_get("save") == {"save": ""}
    assert r.config_get("appendonly") == {"appendonly": "no"}
    got = r.config_get("maxmemory*")
    assert set(got) == {"maxmemory", "maxmemory-policy", "maxmemory-clients"}
    assert r.config_set("maxmemory", "10mb") is True
    assert r.config_get("maxmemory") == {"maxmemory": str(10 * 1024 * 1024)}
    assert r.config_set("maxmemory-policy", "allkeys-lru") is True
    assert r.info("memory")["maxmemory_policy"] == "allkeys-lru"
    with pytest.raises(redis.ResponseError, match="^Unknown option or number of arguments"):
        r.config_set("nosuch", "1")
    with pytest.raises(redis.ResponseError,
                       match=r"^CONFIG SET failed \(possibly related to argument 'maxmemory'\)"):
        r.config_set("maxmemory", "lots")
    with pytest.raises(redis.ResponseError, match="^CONFIG SET failed"):
        r.config_set("port", "1234")
    # several at once, all or nothing
    with pytest.raises(redis.ResponseError):
        r.execute_command("CONFIG", "SET", "maxclients", "50", "hz", "-1")
    assert r.config_get("maxclients") == {"maxclients": "10000"}
    assert r.execute_command("CONFIG", "SET", "maxclients", "50", "hz", "20")
    assert r.config_get("hz") == {"hz": "20"}


def test_busy_poll_us(make_server):
    """--busy-poll-us and CONFIG SET busy-poll-us: clients are answered as
    usual while the loop spins, and once they stop the process sleeps (over
    half a second of quiet it uses under a fifth of it; a loop that never
    stopped spinning would use nearly all of it)."""
    s = make_server("--busy-poll-us", "50")
    clients = [s.client(decode_responses=True) for _ in range(4)]
    assert clients[0].config_get("busy-poll-us") == {"busy-poll-us": "50"}
    for i, c in enumerate(clients):
        p = c.pipeline(transaction=False)
        for k in range(200):
            p.set(f"k{i}:{k}", k)
            p.get(f"k{i}:{k}")
        assert p.execute() == [x for k in range(200) for x in (True, str(k))]
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu_s():
        with open(f"/proc/{s.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime

    before = cpu_s()
    time.sleep(0.5)
    assert cpu_s() - before < 0.1
    with pytest.raises(redis.ResponseError,
                       match=r"^CONFIG SET failed \(possibly related to argument 'busy-poll-us'\)"):
        clients[0].config_set("busy-poll-us", "-1")
    assert clients[0].config_set("busy-poll-us", "0") is True
    assert clients[1].get("k1:199") == "199"
    for c in clients:
        c.close()


def test_config_resetstat(r):
    r.get("missing")
    assert r.info("stats")["keyspace_misses"] >= 1
    assert r.config_resetstat() is True
    assert r.info("stats")["keyspace_misses"] == 0


def test_command(r, raw):
    n = raw.execute_command("COMMAND", "COUNT")
    assert n >= 50
    info = raw.execute_command("COMMAND", "INFO", "get", "nosuch")
    assert info[0][0] == "get"
    assert info[0][1] == 2
    assert "readonly" in info[0][2]
    assert info[0][3:6] == [1, 1, 1]
    assert info[1] is None
    docs = raw.execute_command("COMMAND", "DOCS", "set")
    assert docs[0] == "set"
    fields = dict(zip(docs[1][::2], docs[1][1::2]))
    assert fields["group"] == "string"
    assert len(raw.execute_command("COMMAND")) == n


def test_client_commands(server, r, raw):
    cid = r.client_id()
    assert cid > 0
    assert r.client_getname() is None
    assert r.client_setname("worker-1") is True
    assert r.client_getname() == "worker-1"
    with pytest.raises(redis.ResponseError, match="^Client names cannot contain spaces"):
        r.client_setname("bad name")
    assert r.execute_command("CLIENT", "SETINFO", "LIB-NAME", "mylib") in (True, "OK")
    with pytest.raises(redis.ResponseError, match="^Unrecognized option 'foo'"):
        r.execute_command("CLIENT", "SETINFO", "foo", "x")
    clients = r.client_list()
    me = [c for c in clients if c["name"] == "worker-1"]
    assert len(me) == 1 and int(me[0]["id"]) == cid
    assert me[0]["lib-name"] == "mylib"
    victim = server.sock()
    victim.sendall(b"CLIENT ID\r\n")
    victim_id = int(recv_until(victim, b"\r\n")[1:-2])
    assert r.client_kill_filter(_id=victim_id) == 1
    assert recv_all_until_closed(victim) == b""
    victim.close()
    assert r.client_kill_filter(_id=999999) == 0
    with pytest.raises(redis.ResponseError, match="^No such client$"):
        r.client_kill("1.2.3.4:5")


def test_auth(make_server):
    s = make_server("--requirepass", "s3cret")
    c = s.client(decode_responses=True)
    with pytest.raises(redis.AuthenticationError):
        c.get("k")
    with pytest.raises(redis.ResponseError, match="^WRONGPASS"):
        c.execute_command("AUTH", "wrong")
    # unknown commands are reported before NOAUTH, as Redis 7 does
    with pytest.raises(redis.ResponseError, match="^unknown command"):
        c.execute_command("NOSUCH")
    good = s.client(decode_responses=True, password="s3cret")
    assert good.set("k", "v") is True
    assert good.get("k") == "v"
    named = s.client(decode_responses=True, username="default", password="s3cret")
    assert named.get("k") == "v"
    c.close()
    good.close()
    named.close()


def test_auth_without_password(r):
    with pytest.raises(redis.ResponseError, match="^AUTH <password> called without any password"):
        r.execute_command("AUTH", "x")


def test_unauthenticated_large_request_refused(make_server):
    s = make_server("--requirepass", "pw")
    sock = s.sock()
    sock.sendall(b"*100\r\n")
    reply = recv_all_until_closed(sock)
    assert reply == b"-ERR Protocol error: unauthenticated multibulk length\r\n"
    sock.close()
    assert s.client(password="pw").ping()


def test_hello_resp3_raw(server):
    sock = server.sock()
    sock.sendall(b"HELLO 3\r\n")
    reply = recv_until(sock, b"modules\r\n*0\r\n")
    assert reply.startswith(b"%7\r\n")
    for field in (b"$6\r\nserver\r\n", b"$5\r\nproto\r\n:3\r\n", b"$4\r\nmode\r\n$10\r\nstandalone",
                  b"$4\r\nrole\r\n$6\r\nmaster\r\n", b"$2\r\nid\r\n:"):
        assert field in reply
    sock.sendall(b"GET nosuch\r\n")
    assert recv_until(sock, b"\r\n") == b"_\r\n"
    sock.sendall(b"CONFIG GET maxmemory\r\n")
    assert recv_until(sock, b"\r\n0\r\n") == b"%1\r\n$9\r\nmaxmemory\r\n$1\r\n0\r\n"
    sock.sendall(b"INFO server\r\n")
    assert recv_until(sock, b"txt:").startswith(b"=")
    sock.sendall(b"HELLO 2\r\n")
    assert recv_until(sock, b"*0\r\n").startswith(b"*14\r\n")
    sock.sendall(b"GET nosuch\r\n")
    assert recv_until(sock, b"\r\n") == b"$-1\r\n"
    sock.sendall(b"HELLO 4\r\n")
    assert recv_until(sock, b"\r\n") == b"-NOPROTO unsupported protocol version\r\n"
    sock.sendall(b"HELLO 3 SETNAME app\r\n")
    recv_until(sock, b"*0\r\n")
    sock.sendall(b"CLIENT GETNAME\r\n")
    assert recv_until(sock, b"app\r\n") == b"$3\r\napp\r\n"
    sock.close()


def test_hello_auth(make_server):
    s = make_server("--requirepass", "pw")
    sock = s.sock()
    sock.sendall(b"HELLO 3\r\n")
    assert recv_until(sock, b"\r\n").startswith(b"-NOAUTH HELLO must be called")
    sock.sendall(b"HELLO 3 AUTH default nope\r\n")
    assert recv_until(sock, b"\r\n").startswith(b"-WRONGPASS")
    sock.sendall(b"HELLO 3 AUTH default pw\r\n")
    assert recv_until(sock, b"*0\r\n").startswith(b"%7\r\n")
    sock.sendall(b"SET k v\r\n")
    assert recv_until(sock, b"\r\n") == b"+OK\r\n"
    sock.close()


def test_quit(server):
    sock = server.sock()
    sock.sendall(b"QUIT\r\nPING\r\n")
    assert recv_all_until_closed(sock) == b"+OK\r\n"
    sock.close()


def test_inline_and_pipelining(server):
    sock = server.sock()
    sock.sendall(b"PING\r\n")
    assert recv_until(sock, b"\r\n") == b"+PONG\r\n"
    sock.sendall(b"set k 'hello world'\nget k\r\n")
    assert recv_until(sock, b"world\r\n") == b"+OK\r\n$11\r\nhello world\r\n"
    n = 2000
    sock.sendall(b"*1\r\n$4\r\nPING\r\n" * n)
    want = b"+PONG\r\n" * n
    got = b""
    while len(got) < len(want):
        chunk = sock.recv(65536)
        assert chunk
        got += chunk
    assert got == want
    sock.close()
