"""Differential test: the same commands go to gridsync-server and to a real
Redis 7.0 (Debian's redis-server, started here on a free port), and the
raw RESP replies must be equal byte for byte.

Clients switch on reply types and error texts, so the comparison is on
the wire bytes, not on what redis-py makes of them. Only what must differ
is normalised: ids, versions and buffer sizes in HELLO and CLIENT LIST,
the order of KEYS/SCAN results (hash order), and TTLs that may tick
between the two servers. What GridSync documents as a deviation
(docs/gridsync.md: strings only, no ACL categories in
COMMAND, its own option set in CONFIG) is not asked.

Each case starts from FLUSHALL on fresh connections to both servers."""
import random
import shutil
import signal
import socket
import subprocess
import time

import pytest

from conftest import free_port

BIG = "9223372036854775807"
MIN = "-9223372036854775808"


# --------------------------------------------------------------- servers


def run_redis(*extra):
    """Start redis-server on a free port; yields the port, stops it after."""
    exe = shutil.which("redis-server")
    if not exe:
        pytest.skip("redis-server is not installed")
    port = free_port()
    # Redis's 16 databases, as GridSync has.
    proc = subprocess.Popen(
        [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
         *extra],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    pytest.skip("redis-server did not start")
                time.sleep(0.02)
        yield port
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def redis_port():
    yield from run_redis()


@pytest.fixture(scope="module")
def redis_auth_port():
    yield from run_redis("--requirepass", "pw")


@pytest.fixture
def pair(server, redis_port):
    """(gridsync connection, redis connection), both emptied."""
    g, r = Conn(server.port), Conn(redis_port)
    try:
        for c in (g, r):
            assert c.cmd("FLUSHALL") == b"+OK\r\n"
        # Redis outlives the case: undo what a failed case may have set.
        assert r.cmd("CONFIG", "SET", "hz", "10", "timeout", "0", "maxmemory", "0") == b"+OK\r\n"
        yield g, r
    finally:
        g.close()
        r.close()


# ---------------------------------------------------------- raw client


class Conn:
    """Sends one request (a list of arguments, or raw bytes for inline and
    malformed input) and returns exactly one reply, as the bytes sent."""

    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.buf = b""

    def close(self):
        self.s.close()

    def _fill(self):
        data = self.s.recv(65536)
        if not data:
            raise EOFError
        self.buf += data

    def _line(self):
        while b"\r\n" not in self.buf:
            self._fill()
        i = self.buf.index(b"\r\n") + 2
        line, self.buf = self.buf[:i], self.buf[i:]
        return line

    def _exact(self, n):
        while len(self.buf) < n:
            self._fill()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data

    def reply(self):
        line = self._line()
        kind = line[:1]
        if kind in b"$=!":
            n = int(line[1:-2])
            return line if n < 0 else line + self._exact(n + 2)
        if kind in b"*~>%|":
            n = int(line[1:-2])
            if n < 0:
                return line
            out = line
            for _ in range(2 * n if kind in b"%|" else n):
                out += self.reply()
            return out
        return line

    def cmd(self, *args):
        """cmd(arg, ...) or cmd(raw_bytes) for one reply; cmd(raw_bytes, n)
        for a pipeline of n replies (returned concatenated)."""
        replies = 1
        if len(args) == 2 and isinstance(args[0], bytes) and isinstance(args[1], int):
            args, replies = args[:1], args[1]
        if len(args) == 1 and isinstance(args[0], bytes):
            payload = args[0]
        else:
            parts = [a if isinstance(a, bytes) else str(a).encode() for a in args]
            payload = b"*%d\r\n" % len(parts) + b"".join(
                b"$%d\r\n%s\r\n" % (len(p), p) for p in parts)
        try:
            self.s.sendall(payload)
            return b"".join(self.reply() for _ in range(replies))
        except (EOFError, ConnectionResetError, BrokenPipeError):
            return b"<closed>"


def decode(raw):
    """Raw RESP2/RESP3 bytes -> Python values (errors as ('err', text))."""
    def parse(i):
        j = raw.index(b"\r\n", i)
        kind, body, nxt = raw[i:i + 1], raw[i + 1:j], j + 2
        if kind in b"+":
            return body.decode(), nxt
        if kind == b"-":
            return ("err", body.decode()), nxt
        if kind in b":":
            return int(body), nxt
        if kind in b"$=":
            n = int(body)
            if n < 0:
                return None, nxt
            return raw[nxt:nxt + n], nxt + n + 2
        if kind == b"_":
            return None, nxt
        if kind in b"*~%":
            n = int(body)
            if n < 0:
                return None, nxt
            items = []
            for _ in range(2 * n if kind == b"%" else n):
                v, nxt = parse(nxt)
                items.append(v)
            return items, nxt
        return raw[i:nxt], nxt
    return parse(0)[0]


# ---------------------------------------------------------- normalisers


def client_fields(raw):
    """CLIENT LIST/INFO: the field names of each line, and the values that
    must agree (not ids, addresses, ages or buffer sizes)."""
    text = decode(raw)
    if isinstance(text, tuple):
        return text
    if text.startswith(b"txt:"):
        text = text[4:]
    out = []
    for line in text.decode().split("\n"):
        if not line:
            continue
        fields = dict(f.split("=", 1) for f in line.split(" "))
        # GridSync also answers CLIENT SETINFO (Redis 7.2) and shows it.
        fields.pop("lib-name", None)
        fields.pop("lib-ver", None)
        keep = ("name", "flags", "db", "sub", "psub", "ssub", "multi", "events", "cmd", "user",
                "redir", "resp")
        out.append((tuple(fields), {k: fields[k] for k in keep}))
    return sorted(out, key=repr)


def hello_fields(raw):
    v = decode(raw)
    if not isinstance(v, list):
        return v
    d = dict(zip(v[0::2], v[1::2]))
    d.pop(b"version")  # 7.0.0 (the command set followed) vs 7.0.x
    d.pop(b"id")
    return d


def unordered(raw):
    """KEYS, SCAN's key list, CONFIG GET: order is hash order."""
    v = decode(raw)
    if isinstance(v, list) and len(v) == 2 and isinstance(v[1], list):  # SCAN
        return v[0], sorted(v[1])
    if isinstance(v, list):
        return sorted(v)
    return v


class Near:
    """An integer that equals another within `slack` (a clock that ticked
    between the two servers)."""

    def __init__(self, v, slack):
        self.v, self.slack = v, slack

    def __eq__(self, other):
        return isinstance(other, Near) and abs(self.v - other.v) <= self.slack

    def __repr__(self):
        return f"{self.v}(+-{self.slack})"


def ttl_close(raw):
    """TTL/PTTL may tick between the two servers. -1/-2/0 stay exact."""
    v = decode(raw)
    if isinstance(v, int) and v > 0:
        return Near(v, 2000 if v > 1000 else 2)
    return v


NORMALISE = {"CLIENT": client_fields, "HELLO": hello_fields, "KEYS": unordered,
             "SCAN": unordered, "TTL": ttl_close, "PTTL": ttl_close}


def compare(pair, cmds):
    g, r = pair
    for c in cmds:
        a, b = g.cmd(*c), r.cmd(*c)
        name = c[0].upper() if isinstance(c[0], str) else ""
        norm = NORMALISE.get(name)
        sub = str(c[1]).upper() if len(c) > 1 else ""
        if name == "CLIENT" and sub not in ("LIST", "INFO"):
            norm = None
        if name == "CONFIG" and sub == "GET":
            norm = unordered
        if norm and not a.startswith(b"-"):
            a, b = norm(a), norm(b)
        assert a == b, f"{c!r}:\n  gridsync: {a!r}\n  redis:    {b!r}"


# ---------------------------------------------------------------- cases

CASES = []


def case(name, *cmds):
    CASES.append(pytest.param(list(cmds), id=name))


# SET: every option, their conflicts, and expire times at the edges.
for opts in [["NX"], ["XX"], ["NX", "XX"], ["XX", "NX"], ["GET"], ["NX", "GET"], ["XX", "GET"],
             ["KEEPTTL"], ["KEEPTTL", "EX", "10"], ["EX", "10", "KEEPTTL"], ["EX", "10", "PX", "100"],
             ["EX"], ["PX"], ["EX", "0"], ["EX", "-1"], ["PX", "0"], ["PX", "-5"], ["EX", "abc"],
             ["EX", "1.5"], ["EX", BIG], ["EX", "9223372036854775"], ["EX", "9223372036854776"],
             ["PX", BIG], ["PXAT", BIG], ["EXAT", BIG], ["EXAT", "1"], ["PXAT", "1"], ["EXAT", "0"],
             ["PERSIST"], ["FOO"], ["nx", "get", "ex", "100"], ["EX", "100", "EX", "100"],
             ["GET", "GET"], ["NX", "NX"], ["EX", "10", "EXAT", "100"], ["XX", "EX", "100", "GET"],
             ["EX", "99999999999999999999"], ["ex", "+10"], ["ex", " 10"], ["ex", "010"]]:
    case("set-" + "-".join(opts), ["SET", "k", "v"], ["PEXPIRE", "k", "100000"],
         ["SET", "k", "w"] + opts, ["GET", "k"], ["TTL", "k"],
         ["SET", "n", "v"] + opts, ["GET", "n"], ["TTL", "n"])
case("set-keepttl", ["SET", "k", "v", "EX", "100"], ["SET", "k", "w", "KEEPTTL"], ["TTL", "k"],
     ["SET", "k", "x"], ["TTL", "k"])
case("setnx-setex-psetex", ["SETNX", "k", "v"], ["SETNX", "k", "w"], ["GET", "k"],
     ["SETEX", "k", "0", "v"], ["SETEX", "k", "-1", "v"], ["SETEX", "k", "x", "v"],
     ["SETEX", "k", BIG, "v"], ["SETEX", "k", "10", "v"], ["TTL", "k"], ["PSETEX", "k", "0", "v"],
     ["PSETEX", "k", BIG, "v"], ["PSETEX", "k", "100000", "v"], ["TTL", "k"])
case("getset-getdel", ["GETSET", "k", "v"], ["GETSET", "k", "w"], ["GETDEL", "k"], ["GETDEL", "k"])
case("getex", ["SET", "k", "v"], ["GETEX", "k", "EX", "100"], ["TTL", "k"], ["GETEX", "k", "PERSIST"],
     ["TTL", "k"], ["GETEX", "k", "PERSIST", "EX", "10"], ["GETEX", "k", "NX"],
     ["GETEX", "k", "KEEPTTL"], ["GETEX", "k", "GET"], ["GETEX", "k", "EX", "0"],
     ["GETEX", "k", "EX", "-1"], ["GETEX", "k", "PX"], ["GETEX", "nokey", "EX", "10"],
     ["GETEX", "nokey", "FOO"], ["GETEX", "nokey", "PXAT", "x"], ["GETEX", "nokey", "EX", "0"],
     ["GETEX", "k", "PX", "x"], ["GETEX", "k", "EXAT", "1"], ["EXISTS", "k"], ["GETEX"])

# INCR family on values that are and are not integers, and at the edges.
for i, v in enumerate(["", " 1", "1 ", "+1", "-0", "01", "1.0", "abc", BIG, MIN,
                       "9223372036854775808", "0x10", "1e3", "\x001"]):
    case(f"incr-value{i}", ["SET", "k", v], ["INCR", "k"], ["DECR", "k"], ["INCRBY", "k", "5"],
         ["DECRBY", "k", "5"], ["GET", "k"])
case("incrby-args", ["INCRBY", "k", "x"], ["INCRBY", "k", BIG], ["INCRBY", "k", "1"],
     ["DECRBY", "k", MIN], ["DECRBY", "k", BIG], ["DECRBY", "k", "2"], ["INCRBY", "k", MIN],
     ["INCRBY", "k", "1.5"], ["INCRBY", "k", ""], ["GET", "k"])
case("incr-overflow", ["SET", "k", BIG], ["INCR", "k"], ["SET", "k", MIN], ["DECR", "k"],
     ["INCRBY", "k", "-1"])

# INCRBYFLOAT: 17 significant digits, no trailing zeros, inf/nan refused.
for i, (start, inc) in enumerate([
        ("10.5", "0.1"), ("3.0e3", "200"), ("1", "1e308"), ("1e308", "1e308"), ("0", "inf"),
        ("0", "-inf"), ("0", "nan"), ("0", "+inf"), ("0", "1e-400"), ("5", "-5"), ("0", "0.1"),
        ("1.1", "2.2"), ("1", "  1"), ("1", "1 "), ("abc", "1"), ("1", "abc"), ("1", ""),
        ("", "1"), ("0", "1e17"), ("0", "123456789012345678901234567890"), ("0", "0x10"),
        ("0", "1e5000"), ("0.1", "0.2"), ("-1", "0.5"), ("0", "-0"), ("0", "-0.0"),
        ("1e-20", "0"), ("0", "5.0e3"), ("7", "1.00000000000000000001"), ("inf", "1"),
        ("0", "1e-17"), ("3", "1e2")]):
    case(f"incrbyfloat{i}", ["SET", "k", start], ["INCRBYFLOAT", "k", inc], ["GET", "k"])
case("incrbyfloat-new-key", ["INCRBYFLOAT", "a", "1.5"], ["INCRBYFLOAT", "b", "10"], ["GET", "b"])

# GETRANGE and SETRANGE with negative, huge and inverted offsets.
for i, (s, e) in enumerate([("0", "-1"), ("-3", "-1"), ("-1", "-3"), ("5", "2"), ("0", "100"),
                            ("-100", "-50"), ("-100", "2"), ("100", "200"), ("0", "0"),
                            ("-1", "-1"), ("x", "1"), (BIG, "1"), (MIN, "-1"), ("0", BIG),
                            (MIN, BIG), ("3", "-100")]):
    case(f"getrange{i}", ["SET", "k", "hello world"], ["GETRANGE", "k", s, e], ["SET", "e", ""],
         ["GETRANGE", "e", s, e], ["GETRANGE", "nokey", s, e])
for i, (off, val) in enumerate([("0", "X"), ("-1", "X"), ("100", "X"), ("536870911", ""),
                                ("536870912", "X"), ("600000000", ""), ("5", "hello"),
                                ("0", ""), ("x", "a"), (BIG, "a"), ("-1", "")]):
    case(f"setrange{i}", ["SET", "k", "hello world"], ["SETRANGE", "k", off, val],
         ["STRLEN", "k"], ["SETRANGE", "nk", off, val], ["EXISTS", "nk"])
case("append-strlen", ["APPEND", "k", "ab"], ["APPEND", "k", "cd"], ["GET", "k"],
     ["STRLEN", "k"], ["STRLEN", "nokey"])

# EXPIRE with NX/XX/GT/LT on keys with and without a TTL.
for opts in [[], ["NX"], ["XX"], ["GT"], ["LT"], ["NX", "XX"], ["GT", "LT"], ["NX", "GT"],
             ["XX", "GT"], ["XX", "LT"], ["FOO"], ["nx", "nx"], ["lt", "xx"]]:
    for when in ["100", "1000", "-1", "0"]:
        case(f"expire-{when}-" + "-".join(opts), ["SET", "k", "v"], ["EXPIRE", "k", when] + opts,
             ["TTL", "k"], ["SET", "t", "v", "EX", "500"], ["EXPIRE", "t", when] + opts,
             ["TTL", "t"], ["EXPIRE", "nokey", when] + opts)
case("expire-args", ["SET", "k", "v"], ["EXPIRE", "k", "x"], ["EXPIRE", "k", BIG],
     ["EXPIRE", "k", MIN], ["PEXPIRE", "k", BIG], ["EXPIREAT", "k", BIG], ["PEXPIREAT", "k", BIG],
     ["EXPIRE", "k", "9223372036854775"], ["EXPIRE", "k", "-9223372036854775"], ["EXISTS", "k"],
     ["SET", "k", "v"], ["PEXPIRE", "k", MIN], ["EXISTS", "k"], ["EXPIRE", "k", "1.5"],
     ["EXPIRE", "k"], ["SET", "k", "v"], ["EXPIREAT", "k", "1"], ["EXISTS", "k"],
     ["SET", "k", "v"], ["PEXPIREAT", "k", "0"], ["TTL", "k"], ["PTTL", "nokey"],
     ["PERSIST", "nokey"], ["SET", "k", "v", "EX", "10"], ["PERSIST", "k"], ["PERSIST", "k"],
     ["TTL", "k"])
case("expire-gt-lt", ["SET", "k", "v", "EX", "100"], ["EXPIRE", "k", "50", "GT"],
     ["EXPIRE", "k", "200", "GT"], ["EXPIRE", "k", "50", "LT"], ["EXPIRE", "k", "500", "LT"],
     ["TTL", "k"])

# RENAME (also onto itself) and COPY (REPLACE, DB).
case("rename", ["RENAME", "nokey", "x"], ["SET", "a", "1"], ["RENAME", "a", "a"],
     ["RENAMENX", "a", "a"], ["RENAMENX", "nokey", "nokey"], ["RENAME", "nokey", "nokey"],
     ["SET", "b", "2", "EX", "100"], ["RENAME", "b", "a"], ["TTL", "a"], ["GET", "a"],
     ["SET", "c", "3"], ["RENAMENX", "c", "a"], ["RENAMENX", "c", "d"], ["GET", "d"],
     ["EXISTS", "c"])
case("copy", ["COPY", "a", "b"], ["SET", "a", "1", "EX", "100"], ["COPY", "a", "a"],
     ["COPY", "a", "b"], ["TTL", "b"], ["COPY", "a", "b"], ["SET", "a", "2"],
     ["COPY", "a", "b", "REPLACE"], ["GET", "b"], ["TTL", "b"], ["COPY", "a", "b", "DB", "0"],
     ["COPY", "a", "b", "DB", "1"], ["COPY", "a", "b", "DB", "x"], ["COPY", "a", "b", "DB"],
     ["COPY", "a", "b", "FOO"], ["COPY", "a", "b", "REPLACE", "REPLACE"],
     ["COPY", "a", "b", "DB", "-1"], ["COPY", "nokey", "nokey"], ["COPY", "a", "a", "FOO"],
     ["COPY", "a", "b", "DB", "4102444800"], ["COPY", "a", "a", "DB", "1"],
     ["SELECT", "4102444800"], ["SELECT", "-2147483649"], ["SELECT", "2147483647"])

# SCAN's cursor and options, KEYS' glob.
case("scan", ["SET", "a1", "1"], ["SET", "a2", "1"], ["SET", "b1", "1"], ["SCAN", "x"],
     ["SCAN", " 0"], ["SCAN", "0 "], ["SCAN", "18446744073709551616"], ["SCAN", ""],
     ["SCAN", "0", "COUNT", "0"], ["SCAN", "0", "COUNT", "-1"], ["SCAN", "0", "COUNT", "x"],
     ["SCAN", "0", "COUNT"], ["SCAN", "0", "MATCH"], ["SCAN", "0", "FOO", "bar"],
     ["SCAN", "0", "TYPE", "hash"], ["SCAN", "0", "TYPE", "list", "COUNT", "100"],
     ["SCAN", "0", "COUNT", "1000"], ["SCAN", "0", "MATCH", "a*", "COUNT", "1000"],
     ["SCAN", "0", "MATCH", "zz*", "COUNT", "1000"], ["SCAN", "0", "count", "1", "count", "x"],
     ["SCAN", "0x0"], ["SCAN", "+0", "COUNT", "1000"], ["SCAN", "-0", "COUNT", "1000"])
case("keys", ["SET", "h[a]llo", "1"], ["SET", "hello", "1"], ["SET", "hallo", "1"],
     ["KEYS", "*"], ["KEYS", "h\\[a\\]*"], ["KEYS", "h[^e]*"], ["KEYS", "[a-"], ["KEYS", "\\"],
     ["KEYS", "h?[a]l*"], ["KEYS", "H*"], ["KEYS", "h[a-e]llo"], ["KEYS", "zzz*"])

# CONFIG GET/SET: the options both servers have, patterns, errors.
case("config-get", ["CONFIG", "GET", "maxmemory"], ["CONFIG", "GET", "MAXMEMORY"],
     ["CONFIG", "GET", "timeout"], ["CONFIG", "GET", "hz", "timeout"], ["CONFIG", "GET", "hz", "HZ"],
     ["CONFIG", "GET", "Save"], ["CONFIG", "GET", "appendonly"], ["CONFIG", "GET", "nonexistent"],
     ["CONFIG", "GET", "maxclients"], ["CONFIG", "GET", "proto-max-bulk-len"],
     ["CONFIG", "GET", "client-query-buffer-limit"], ["CONFIG", "GET", "loglevel"],
     ["CONFIG", "GET", "requirepass"], ["CONFIG", "GET", "t?meout"], ["CONFIG", "GET", "[h]z"],
     ["CONFIG", "GET"])
case("config-set", ["CONFIG", "FOO"], ["CONFIG", "SET", "hz"], ["CONFIG", "SET", "hz", "x"],
     ["CONFIG", "SET", "hz", "1", "x"], ["CONFIG", "SET", "nonexistent", "1"],
     ["CONFIG", "SET", "hz", "10", "hz", "11"], ["CONFIG", "SET", "hz", "10", "HZ", "11"],
     ["CONFIG", "SET", "maxmemory", "abc"], ["CONFIG", "SET", "maxmemory", "-1"],
     ["CONFIG", "SET", "timeout", "-1"], ["CONFIG", "SET", "timeout", "1.5"],
     ["CONFIG", "SET", "hz", "0"], ["CONFIG", "GET", "hz"], ["CONFIG", "SET", "hz", "100000"],
     ["CONFIG", "GET", "hz"], ["CONFIG", "SET", "hz", "-1"], ["CONFIG", "SET", "hz", "10"],
     ["CONFIG", "SET", "appendonly", "maybe"], ["CONFIG", "SET", "appendonly", "true"],
     ["CONFIG", "SET", "maxclients", "x"], ["CONFIG", "SET", "proto-max-bulk-len", "1"],
     ["CONFIG", "SET", "loglevel", "loud"], ["CONFIG", "SET", "timeout", "0", "hz", "x"],
     ["CONFIG", "GET", "timeout"], ["CONFIG", "SET", "maxmemory", "1mb"],
     ["CONFIG", "GET", "maxmemory"], ["CONFIG", "SET", "maxmemory", "0"],
     ["CONFIG", "RESETSTAT", "x"], ["CONFIG", "REWRITE", "x"], ["CONFIG", "HELP", "x"],
     ["CONFIG"])

# Bitmaps: offsets at the edges, BYTE and BIT ranges, BITOP.
case("getbit-setbit", ["GETBIT", "b", "0"], ["SETBIT", "b", "7", "1"], ["GET", "b"],
     ["SETBIT", "b", "7", "0"], ["SETBIT", "b", "100", "1"], ["STRLEN", "b"], ["GETBIT", "b", "100"],
     ["GETBIT", "b", "101"], ["GETBIT", "b", "100000"], ["SETBIT", "b", "-1", "1"],
     ["SETBIT", "b", "x", "1"], ["SETBIT", "b", "1", "2"], ["SETBIT", "b", "1", "-1"],
     ["SETBIT", "b", "1", "x"], ["SETBIT", "b", "4294967296", "1"], ["GETBIT", "b", "4294967295"],
     ["SETBIT", "b", "4294967295", "x"], ["GETBIT", "b", "-1"], ["GETBIT", "b", BIG],
     ["SET", "s", "hello"], ["GETBIT", "s", "1"], ["SETBIT", "s", "0", "1"], ["GET", "s"],
     ["SET", "n", "123"], ["SETBIT", "n", "7", "0"], ["GET", "n"], ["SETBIT", "e", "0", "0"],
     ["GET", "e"])
for i, args in enumerate([[], ["0", "-1"], ["1", "1"], ["-2", "-1"], ["-1", "-2"], ["5", "1"],
                          ["0", "100"], ["-100", "-50"], ["x", "1"], ["0"], ["0", "-1", "BIT"],
                          ["1", "9", "BIT"], ["5", "30", "bit"], ["-3", "-1", "BIT"],
                          ["0", "-1", "BYTE"], ["0", "-1", "WORD"], ["0", "0", "BIT", "x"],
                          ["-1", "-5", "BIT"], ["7", "7", "BIT"], ["0", BIG, "BIT"],
                          [MIN, "-1", "BIT"]]):
    case(f"bitcount{i}", ["SET", "k", "foobar\xff\x00\x81"], ["BITCOUNT", "k", *args],
         ["BITCOUNT", "nokey", *args], ["SET", "z", ""], ["BITCOUNT", "z", *args])
for i, args in enumerate([["1"], ["0"], ["2"], ["x"], ["1", "0"], ["0", "0"], ["1", "2"],
                          ["0", "2", "-1"], ["1", "-3"], ["0", "-1", "-2"], ["1", "0", "-1", "BIT"],
                          ["0", "0", "-1", "BIT"], ["1", "3", "13", "BIT"], ["0", "3", "13", "bit"],
                          ["1", "9", "9", "BIT"], ["0", "9", "9", "BIT"], ["0", "0", "7", "BIT"],
                          ["1", "-5", "-1", "BIT"], ["0", "-5", "-1", "BIT"], ["1", "0", "0", "WORD"],
                          ["1", "5", "2"], ["0", "100"], ["1", "0", "1", "BYTE"], ["1", "0", "1", "BIT", "x"],
                          ["1", "x"], ["1", "0", "x"], ["0", "17", "23", "BIT"]]):
    case(f"bitpos{i}", ["SET", "k", "\x00\xff\xf0\x0f\x00\xff"], ["BITPOS", "k", *args],
         ["SET", "ones", "\xff\xff"], ["BITPOS", "ones", *args], ["SET", "zeros", "\x00\x00"],
         ["BITPOS", "zeros", *args], ["BITPOS", "nokey", *args], ["SET", "z", ""],
         ["BITPOS", "z", *args])
case("bitop", ["SET", "a", "\xff\x0f\x55"], ["SET", "b", "\xf0"], ["BITOP", "AND", "d", "a", "b"],
     ["GET", "d"], ["BITOP", "OR", "d", "a", "b"], ["GET", "d"], ["BITOP", "XOR", "d", "a", "b", "a"],
     ["GET", "d"], ["BITOP", "NOT", "d", "a"], ["GET", "d"], ["BITOP", "NOT", "d", "a", "b"],
     ["BITOP", "NAND", "d", "a"], ["BITOP", "AND", "d", "nokey", "a"], ["GET", "d"],
     ["SET", "d", "v", "EX", "100"], ["BITOP", "OR", "d", "nokey", "nokey2"], ["EXISTS", "d"],
     ["BITOP", "OR", "d", "a"], ["TTL", "d"], ["BITOP", "and", "a", "a", "b"], ["GET", "a"],
     ["BITOP", "NOT", "d", "nokey"], ["EXISTS", "d"], ["BITOP", "OR", "d"])

# Arity, unknown commands and subcommands.
case("arity", ["GET"], ["GET", "a", "b"], ["SET", "a"], ["MSET", "a"], ["MSET", "a", "b", "c"],
     ["MSETNX", "a"], ["MSETNX", "a", "1", "b"], ["EXPIRE", "a"], ["PING", "a", "b"], ["ECHO"],
     ["DEL"], ["SCAN"], ["KEYS"], ["CLIENT"], ["CONFIG"], ["SELECT"], ["DBSIZE", "x"],
     ["RANDOMKEY", "x"], ["FLUSHDB", "x"], ["FLUSHALL", "async", "sync"], ["SELECT", "1"],
     ["SELECT", "x"], ["SELECT", "0"], ["SELECT", "-1"], ["TYPE", "a"], ["TYPE", "nokey"],
     ["ECHO", "hi"], ["PING"], ["PING", "hi"], ["ECHO", ""], ["PING", ""])
case("unknown", ["FOO"], ["FOO", "a", "b"], ["FOO", "x" * 200], ["FOO"] + ["abc"] * 60,
     ["fOo", "a b", "c'd"], [""], ["FOO", "a\x00b"], ["x" * 40], ["GET\x00"])
case("subcommands", ["CLIENT", "GETNAME", "x"], ["CLIENT", "INFO", "x"], ["CLIENT", "ID", "x"],
     ["CLIENT", "HELP", "x"], ["CLIENT", "SETNAME"], ["CLIENT", "KILL"], ["CLIENT", "FOO"],
     ["COMMAND", "FOO"], ["COMMAND", "COUNT", "x"], ["COMMAND", "HELP", "x"],
     ["COMMAND", "GETKEYS", "get"], ["COMMAND", "GETKEYS", "nosuch", "a"],
     ["COMMAND", "GETKEYS", "get", "a", "b"], ["COMMAND", "GETKEYS", "get", "a"],
     ["COMMAND", "GETKEYS", "mset", "a", "b", "c", "d"], ["COMMAND", "GETKEYS", "client", "list"],
     ["COMMAND", "GETKEYS", "copy", "a", "b", "REPLACE"], ["COMMAND", "GETKEYS", "MGET", "a", "b"],
     ["COMMAND", "GETKEYS", "set", "k", "v", "EX", "10"], ["COMMAND", "LIST", "FILTERBY", "foo"],
     ["COMMAND", "LIST", "FILTERBY", "pattern", "zzz*"], ["COMMAND", "LIST", "FILTERBY", "pattern"],
     ["COMMAND", "LIST", "FILTERBY", "module", "x"], ["COMMAND", "LIST", "x"],
     ["COMMAND", "INFO", "nosuch"], ["COMMAND", "INFO", "nosuch", "nosuch2"],
     ["COMMAND", "DOCS", "nosuch"])

# Inline commands and their quoting; protocol errors close the connection.
# (An empty line or *0 gets no reply: a PING follows in the same write.)
case("inline", [b"PING\r\n"], [b"SET a b\r\n"], [b"GET a\r\n"], [b"SET \"x y\" 'z w'\r\n"],
     [b"GET \"x y\"\r\n"], [b"ECHO \"a\\x41\\n\"\r\n"], [b"ECHO \"a\\xZZ\"\r\n"],
     [b"ECHO 'it\\'s'\r\n"], [b"\r\nPING\r\n"], [b"   \r\nPING\r\n"], [b"ECHO a\n"],
     [b"\nECHO b\r\n"], [b"ECHO   a    b\r\n"],
     [b"ECHO \"\"\r\n"], [b"ECHO \"ab\"c\r\n"], [b"PING\r\n"])
case("inline-unbalanced-double", [b"ECHO \"abc\r\n"], [b"PING\r\n"])
case("inline-unbalanced-single", [b"ECHO 'abc\r\n"], [b"PING\r\n"])
case("inline-quote-then-quote", [b"ECHO \"a\"\"b\"\r\n"])
case("proto-multibulk-length", [b"*1\r\n$4\r\nPING\r\n"], [b"*x\r\n"], [b"PING\r\n"])
case("proto-expected-dollar", [b"*1\r\nx3\r\nPING\r\n"])
case("proto-negative-bulk", [b"*1\r\n$-1\r\n"])
case("proto-huge-multibulk", [b"*3000000000\r\n"])
case("proto-huge-bulk", [b"*1\r\n$600000000\r\n"])
case("proto-empty-requests", [b"*0\r\n*1\r\n$4\r\nPING\r\n"], [b"*-1\r\nPING\r\n"])
case("proto-bad-bulk-length", [b"*1\r\n$abc\r\n"])
case("proto-bulk-without-crlf", [b"*1\r\n$4\r\nPINGXX*1\r\n$4\r\nPING\r\n"])
case("proto-inline-too-big", [b"a" * 70000])
case("proto-mbulk-count-too-big", [b"*" + b"1" * 70000])
case("proto-bulk-count-too-big", [b"*1\r\n$" + b"1" * 70000])
case("proto-bulk-count-bad", [b"*2\r\n$4\r\nECHO\r\n$-5\r\n"])
case("proto-bulk-too-long", [b"*1\r\n$536870913\r\n"])
case("proto-empty-value", [b"*3\r\n$3\r\nSET\r\n$1\r\na\r\n$0\r\n\r\n"], ["GET", "a"])

# HELLO (RESP3 types for every reply shape after HELLO 3), AUTH, CLIENT.
case("hello-errors", ["HELLO", "4"], ["HELLO", "x"], ["HELLO", "1"], ["HELLO", "2", "FOO"],
     ["HELLO", "2", "AUTH", "default"], ["HELLO", "2", "SETNAME", "a b"],
     ["HELLO", "2", "AUTH", "default", "x"], ["CLIENT", "GETNAME"], ["HELLO"])
case("resp3", ["HELLO", "3", "SETNAME", "nm"], ["CLIENT", "GETNAME"], ["GET", "nokey"],
     ["SET", "k", "v", "NX", "GET"], ["CONFIG", "GET", "hz"], ["INCRBYFLOAT", "f", "1.5"],
     ["PING"], ["SCAN", "0", "MATCH", "nomatch"], ["MGET", "k", "nokey"], ["KEYS", "*"],
     ["TYPE", "k"], ["EXISTS", "k"], ["SET", "k", "v", "GET"], ["SET", "k", "w", "NX"],
     ["GETDEL", "nokey"], ["COMMAND", "INFO", "nosuch"], ["DEL", "f"], ["RANDOMKEY"], ["FLUSHDB"],
     ["RANDOMKEY"], ["INFO", "keyspace"], ["CLIENT", "INFO"], ["HELLO", "2"], ["GET", "nokey"])
case("client", ["CLIENT", "SETNAME", "a b"], ["CLIENT", "SETNAME", "ok"], ["CLIENT", "GETNAME"],
     ["CLIENT", "INFO"], ["CLIENT", "LIST"], ["CLIENT", "SETNAME", ""], ["CLIENT", "GETNAME"],
     ["CLIENT", "SETNAME", "n" * 3000], ["CLIENT", "INFO"], ["CLIENT", "LIST", "TYPE", "normal"],
     ["CLIENT", "KILL", "1.2.3.4:5"], ["CLIENT", "KILL", "ID", "x"],
     ["CLIENT", "KILL", "ID", "999999"], ["CLIENT", "KILL", "ID", "0"],
     ["CLIENT", "KILL", "USER", "nobody"], ["CLIENT", "KILL", "TYPE", "foo"],
     ["CLIENT", "KILL", "TYPE", "pubsub"], ["CLIENT", "KILL", "TYPE", "replica", "SKIPME", "maybe"],
     ["CLIENT", "KILL", "SKIPME", "maybe"], ["CLIENT", "LIST", "TYPE", "foo"],
     ["CLIENT", "LIST", "TYPE", "pubsub"], ["CLIENT", "LIST", "TYPE", "master"],
     ["CLIENT", "LIST", "ID", "x"], ["CLIENT", "LIST", "ID", "999999", "0", "-5"],
     ["CLIENT", "LIST", "TYPE"], ["CLIENT", "LIST", "FOO", "bar"])
case("odd-keys", ["SET", "", "empty"], ["GET", ""], ["SET", "a b\r\nc", "v"], ["KEYS", "a*"],
     ["GET", "a b\r\nc"], ["SET", "bin\x00\xff", "\x00"], ["GET", "bin\x00\xff"],
     ["MSET", "d", "1", "d", "2"], ["GET", "d"], ["MSETNX", "e", "1", "e", "2"], ["GET", "e"],
     ["SETRANGE", "f", "3", "x"], ["GET", "f"], ["APPEND", "f", ""], ["STRLEN", "f"],
     ["ECHO", "\x00\r\n"], ["PING", "\x00"], ["PEXPIRE", "d", "1500"], ["TTL", "d"],
     ["EXISTS", "", "d", "nope"], ["DEL", ""], ["GET", ""])
case("hello-options", ["HELLO", "3", "SETNAME"], ["HELLO", "2", "AUTH"], ["HELLO", "2", "AUTH", "x"],
     ["HELLO", "3", "SETNAME", "a", "SETNAME", "b"], ["CLIENT", "GETNAME"], ["HELLO", "2"],
     ["HELLO", "2", "setname", "c"], ["CLIENT", "GETNAME"], ["HELLO", "+2"], ["HELLO", "02"])
case("pipeline", [b"INCR c\r\n" * 300 + b"GET c\r\nSET c x\r\nINCR c\r\n" * 2, 306],
     [b"*2\r\n$3\r\nGET\r\n$1\r\nc\r\nPING\r\n*1\r\n$4\r\nPING\r\n", 3])
case("quit", ["SET", "q", "1"], ["QUIT"])
case("expiretime-touch-substr", ["EXPIRETIME", "k"], ["PEXPIRETIME", "k"], ["SET", "k", "hello"],
     ["EXPIRETIME", "k"], ["PEXPIRETIME", "k"], ["EXPIREAT", "k", "4102444800"],
     ["EXPIRETIME", "k"], ["PEXPIRETIME", "k"], ["PEXPIREAT", "k", "4102444800499"],
     ["EXPIRETIME", "k"], ["PEXPIREAT", "k", "4102444800500"], ["EXPIRETIME", "k"],
     ["PEXPIRETIME", "k"], ["EXPIRETIME"], ["EXPIRETIME", "a", "b"], ["PEXPIREAT", "k", BIG],
     ["EXPIRETIME", "k"], ["PEXPIRETIME", "k"], ["TTL", "k"], ["SET", "k", "v", "PXAT", BIG],
     ["EXPIRETIME", "k"], ["SET", "k", "v", "EXAT", "9223372036854775"], ["EXPIRETIME", "k"],
     ["PEXPIRETIME", "k"], ["SET", "k", "hello"],
     ["TOUCH", "k", "k", "nokey"], ["TOUCH"], ["SUBSTR", "k", "1", "-2"], ["SUBSTR", "k", "x", "1"],
     ["SUBSTR", "nokey", "0", "-1"], ["TIME", "x"])
case("auth", ["AUTH", "x"], ["AUTH", "default", "x"], ["AUTH", "a", "b", "c"],
     ["AUTH", "foo", "bar"])
case("multi-key", ["MSET", "a", "1", "b", "2"], ["MGET", "a", "b", "c"],
     ["MSETNX", "a", "1", "z", "3"], ["MSETNX", "y", "1", "z", "3"], ["DEL", "a", "a", "b", "q"],
     ["EXISTS", "y", "y", "q"], ["UNLINK", "y"], ["DBSIZE"], ["INFO", "nosuch"],
     ["INFO", "keyspace"], ["SHUTDOWN", "FOO"], ["SHUTDOWN", "ABORT"])

# Transactions (Redis 7.0's multi.c): queueing, errors before and during
# EXEC, and WATCH against the same client's own writes (other clients:
# test_watch_other_client_same_as_redis below).
case("multi-basic", ["MULTI"], ["SET", "a", "1"], ["INCR", "a"], ["GET", "a"], ["MGET", "a", "b"],
     ["EXEC"], ["EXEC"], ["DISCARD"], ["GET", "a"], ["MULTI"], ["EXEC"])
case("multi-queue-errors", ["MULTI"], ["WATCH", "a"], ["MULTI"], ["SET", "a"], ["FOO", "x", "y"],
     ["SET", "a", "1"], ["EXEC"], ["GET", "a"], ["MULTI"], ["EXEC", "x"], ["EXEC"],
     ["MULTI"], ["DISCARD", "x"], ["EXEC"], ["MULTI", "x"], ["WATCH"])
case("multi-nested-keeps-queue", ["MULTI"], ["MULTI"], ["SET", "a", "2"], ["EXEC"], ["GET", "a"])
case("multi-runtime-errors", ["SET", "a", "x"], ["MULTI"], ["INCR", "a"], ["SET", "b", "2"],
     ["SET", "c", "v", "EX", "0"], ["GETRANGE", "a", "x", "1"], ["EXEC"], ["GET", "b"],
     ["EXISTS", "c"])
case("multi-discard", ["MULTI"], ["SET", "a", "1"], ["DISCARD"], ["GET", "a"], ["DISCARD"],
     ["WATCH", "a"], ["MULTI"], ["DISCARD"], ["SET", "a", "2"], ["MULTI"], ["GET", "a"], ["EXEC"])
case("watch-own-write", ["SET", "a", "1"], ["WATCH", "a"], ["SET", "a", "2"], ["MULTI"],
     ["GET", "a"], ["EXEC"], ["GET", "a"], ["SET", "a", "3"], ["MULTI"], ["GET", "a"], ["EXEC"])
case("watch-unmodified", ["SET", "a", "1"], ["WATCH", "a", "b", "a"], ["GET", "a"], ["EXISTS", "b"],
     ["SET", "a", "9", "NX"], ["DEL", "nokey"], ["EXPIRE", "nokey", "10"], ["PERSIST", "a"],
     ["SETNX", "a", "7"], ["MULTI"], ["INCR", "a"], ["EXEC"])
for name, write in [("set", ["SET", "a", "2"]), ("del", ["DEL", "a"]), ("incr", ["INCR", "a"]),
                    ("append", ["APPEND", "a", "x"]), ("setrange", ["SETRANGE", "a", "0", "9"]),
                    ("setbit", ["SETBIT", "a", "1", "0"]), ("expire", ["EXPIRE", "a", "100"]),
                    ("getdel", ["GETDEL", "a"]), ("getex", ["GETEX", "a", "EX", "100"]),
                    ("rename", ["RENAME", "a", "z"]), ("copy", ["COPY", "z", "a"]),
                    ("mset", ["MSET", "q", "1", "a", "3"]), ("flushdb", ["FLUSHDB"]),
                    ("set-expired", ["SET", "a", "1", "PX", "0"])]:
    case("watch-" + name, ["SET", "a", "1"], ["SET", "z", "1"], ["WATCH", "a"], write, ["MULTI"],
         ["PING"], ["EXEC"])
case("watch-persist", ["SET", "a", "1", "EX", "100"], ["WATCH", "a"], ["PERSIST", "a"], ["MULTI"],
     ["PING"], ["EXEC"])
case("watch-flush-missing-key", ["WATCH", "nokey"], ["FLUSHALL"], ["MULTI"], ["PING"], ["EXEC"])
case("unwatch", ["SET", "a", "1"], ["WATCH", "a"], ["UNWATCH"], ["SET", "a", "2"], ["MULTI"],
     ["GET", "a"], ["EXEC"], ["WATCH", "a"], ["MULTI"], ["UNWATCH"], ["EXEC"], ["SET", "a", "3"],
     ["MULTI"], ["GET", "a"], ["EXEC"])
case("multi-resp3", ["HELLO", "3"], ["SET", "a", "1"], ["WATCH", "a"], ["SET", "a", "2"],
     ["MULTI"], ["PING"], ["EXEC"], ["MULTI"], ["GET", "a"], ["GET", "nokey"], ["EXEC"],
     ["HELLO", "2"])
case("multi-inline", [b"MULTI\r\n"], [b"SET a 1\r\n"], [b"EXEC\r\n"],
     [b"MULTI\r\nSET b 2\r\nGET b\r\nEXEC\r\n", 4])


AUTH_CASES = [
    [["GET", "a"], ["PING"], ["AUTH", "x"], ["AUTH", "pw"], ["GET", "a"], ["PING"]],
    [["HELLO", "3"], ["HELLO", "3", "AUTH", "default", "x"], ["HELLO", "3", "AUTH", "bob", "pw"],
     ["CLIENT", "ID"], ["HELLO", "2", "AUTH", "default", "pw", "SETNAME", "me"],
     ["CLIENT", "GETNAME"], ["QUIT"]],
    [["AUTH", "default", "pw"], ["AUTH", "nobody", "pw"], ["GET", "a"], ["AUTH", "a", "b", "c"]],
    [["FOO"], ["GET"], ["CONFIG", "GET", "requirepass"]],
    [[b"*20\r\n"]],
    [[b"*2\r\n$4\r\nECHO\r\n$20000\r\n"]],
    [[b"PING\r\n"], [b"AUTH pw\r\n"], [b"PING\r\n"]],
]


@pytest.mark.parametrize("cmds", AUTH_CASES)
def test_same_replies_with_requirepass(make_server, redis_auth_port, cmds):
    server = make_server("--requirepass", "pw")
    g, r = Conn(server.port), Conn(redis_auth_port)
    try:
        compare((g, r), cmds)
    finally:
        g.close()
        r.close()


@pytest.mark.parametrize("cmds", CASES)
def test_same_replies_as_redis(pair, cmds):
    compare(pair, cmds)


RANDOM_COMMANDS = [
    "get", "set", "setnx", "setex", "psetex", "getset", "getdel", "getex", "mget", "mset", "msetnx",
    "incr", "decr", "incrby", "decrby", "incrbyfloat", "append", "strlen", "getrange", "setrange",
    "substr", "expire", "pexpire", "expireat", "pexpireat", "ttl", "pttl", "persist", "expiretime",
    "pexpiretime", "del", "unlink", "exists", "touch", "type", "rename", "renamenx", "copy", "keys",
    "dbsize", "getbit", "setbit", "bitcount", "bitpos", "bitop", "echo", "ping", "select",
    "multi", "exec", "discard", "watch", "unwatch"]
RANDOM_KEYS = ["k1", "k2", "k3", "n", "f"]
RANDOM_WORDS = [
    "NX", "XX", "GET", "EX", "PX", "EXAT", "PXAT", "KEEPTTL", "PERSIST", "GT", "LT", "REPLACE", "DB",
    "BIT", "BYTE", "AND", "OR", "XOR", "NOT", "0", "1", "-1", "2", "7", "-7", "100", "1000",
    "4102444800", BIG, MIN, "1.5", "-0.5", "1e3", "inf", "", "abc", "10", "3", "-3", "*", "k*",
    "x" * 40]


def absolute_close(raw):
    """EXPIRETIME/PEXPIRETIME of a relative TTL: the servers' clocks were
    read a moment apart."""
    v = decode(raw)
    return Near(v, 2000 if v > 10**11 else 2) if isinstance(v, int) and v > 0 else v


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_commands_same_as_redis(pair, seed):
    """Random string commands with random (often wrong) arguments over a
    handful of keys: every reply and, after each command, every key's
    value must be the same as Redis's."""
    rnd = random.Random(seed)
    g, r = pair
    for i in range(4000):
        name = rnd.choice(RANDOM_COMMANDS)
        args = [rnd.choice(RANDOM_KEYS) if rnd.random() < 0.5 else rnd.choice(RANDOM_WORDS)
                for _ in range(rnd.randint(0, 5))]
        if args and rnd.random() < 0.8:
            args[0] = rnd.choice(RANDOM_KEYS)
        # Relative TTLs long enough not to run out between the two servers.
        for j in range(len(args)):
            prev = args[j - 1].upper() if j else ""
            if (name in ("setex", "psetex", "expire", "pexpire") and j == 1) or prev in ("EX", "PX"):
                if args[j] in ("1", "2", "3", "7", "10", "100", "1000"):
                    args[j] = "100000"
        cmd = [name, *args]
        a, b = g.cmd(*cmd), r.cmd(*cmd)
        norm = {"expiretime": absolute_close, "pexpiretime": absolute_close}.get(
            name, NORMALISE.get(name.upper()))
        if norm and not a.startswith(b"-"):
            a, b = norm(a), norm(b)
        assert a == b, f"command {i} {cmd!r}:\n  gridsync: {a!r}\n  redis:    {b!r}"
        for k in RANDOM_KEYS:
            a, b = g.cmd("GET", k), r.cmd("GET", k)
            assert a == b, f"after command {i} {cmd!r}, GET {k}:\n  gridsync: {a!r}\n  redis: {b!r}"


def test_time(pair):
    """TIME: two bulk strings, seconds and microseconds, of the wall clock."""
    for c in pair:
        sec, usec = decode(c.cmd("TIME"))
        assert abs(int(sec) - time.time()) < 60
        assert 0 <= int(usec) < 1000000


@pytest.mark.parametrize("count", ["1", "7", "1000"])
def test_scan_returns_every_key(pair, count):
    """A full SCAN iteration returns every key (possibly twice), with and
    without MATCH; the same keys as Redis."""
    def scan_all(c, *opts):
        seen, cursor, rounds = set(), b"0", 0
        while True:
            cursor, keys = decode(c.cmd("SCAN", cursor, "COUNT", count, *opts))
            seen.update(keys)
            rounds += 1
            assert rounds < 10000
            if cursor == b"0":
                return seen
    for c in pair:
        for i in range(300):
            assert c.cmd("SET", f"key:{i}", "v") == b"+OK\r\n"
    g, r = pair
    assert scan_all(g) == scan_all(r) == {f"key:{i}".encode() for i in range(300)}
    assert scan_all(g, "MATCH", "key:1*") == scan_all(r, "MATCH", "key:1*")
    assert scan_all(g, "TYPE", "string", "MATCH", "*9") == scan_all(r, "TYPE", "string", "MATCH", "*9")


def test_client_list_ids_in_the_order_given(server, redis_port):
    """CLIENT LIST ID a b c lists each known id once per mention, in the
    order given, however many ids there are."""
    for port in (server.port, redis_port):
        conns = [Conn(port) for _ in range(3)]
        try:
            ids = [decode(c.cmd("CLIENT", "ID")) for c in conns]
            many = [str(ids[2]), "999999", str(ids[0])] + [str(ids[1])] * 70
            listed = decode(conns[0].cmd("CLIENT", "LIST", "ID", *many)).decode().splitlines()
            got = [int(line.split(" ", 1)[0][3:]) for line in listed]
            assert got == [ids[2], ids[0]] + [ids[1]] * 70, port
        finally:
            for c in conns:
                c.close()


def test_watch_other_client_same_as_redis(server, redis_port):
    """WATCH against another client's writes and reads, and EXEC's
    isolation: the same replies from both servers."""
    for_server = []
    for port in (server.port, redis_port):
        a, b = Conn(port), Conn(port)
        try:
            got = [a.cmd("FLUSHALL"),
                   a.cmd("SET", "k", "1"), a.cmd("WATCH", "k"), b.cmd("GET", "k"),
                   a.cmd("MULTI"), a.cmd("INCR", "k"), a.cmd("EXEC"),      # a read: EXEC runs
                   a.cmd("WATCH", "k"), b.cmd("INCR", "k"),
                   a.cmd("MULTI"), a.cmd("INCR", "k"), a.cmd("EXEC"),      # a write: nil
                   a.cmd("WATCH", "k"), a.cmd("MULTI"), a.cmd("INCR", "k"),
                   b.cmd("SET", "k", "10"), a.cmd("EXEC"),                 # written while queueing
                   a.cmd("MULTI"), a.cmd("INCR", "k"), b.cmd("INCR", "k"),  # queued: not run yet
                   b.cmd("GET", "k"), a.cmd("EXEC"), b.cmd("GET", "k"),
                   b.cmd("WATCH", "k"), a.cmd("MULTI"), a.cmd("SET", "k", "0"), a.cmd("EXEC"),
                   b.cmd("MULTI"), b.cmd("GET", "k"), b.cmd("EXEC")]       # EXEC wrote it: nil
            for_server.append(got)
        finally:
            a.close()
            b.close()
    assert for_server[0] == for_server[1]
    assert for_server[1][11] == b"*-1\r\n"


def test_watch_expired_same_as_redis(server, redis_port):
    """A watched key whose TTL passes after WATCH fails EXEC; one already
    expired at WATCH time does not."""
    results = []
    for port in (server.port, redis_port):
        c = Conn(port)
        try:
            got = [c.cmd("FLUSHALL"), c.cmd("SET", "k", "v", "PX", "100"), c.cmd("WATCH", "k")]
            time.sleep(0.3)
            got += [c.cmd("MULTI"), c.cmd("PING"), c.cmd("EXEC")]
            got += [c.cmd("SET", "k", "v", "PX", "100")]
            time.sleep(0.3)
            got += [c.cmd("WATCH", "k"), c.cmd("MULTI"), c.cmd("PING"), c.cmd("EXEC")]
            results.append(got)
        finally:
            c.close()
    assert results[0] == results[1]
    assert results[1][5] == b"*-1\r\n" and results[1][-1] == b"*1\r\n+PONG\r\n"


def test_multi_oom_same_as_redis(server, redis_port):
    """maxmemory reached while queueing (OOM, then EXECABORT) and between
    queueing and EXEC of a transaction with a denyoom command
    (EXECABORT ... because of: OOM ...), or without one (EXEC runs)."""
    results = []
    for port in (server.port, redis_port):
        a, b = Conn(port), Conn(port)
        policy = decode(b.cmd("CONFIG", "GET", "maxmemory-policy"))[1]
        try:
            got = [a.cmd("FLUSHALL"), a.cmd("SET", "a", "1"),
                   b.cmd("CONFIG", "SET", "maxmemory-policy", "noeviction"),
                   a.cmd("MULTI"), a.cmd("SET", "b", "1"), a.cmd("GET", "a"),
                   b.cmd("CONFIG", "SET", "maxmemory", "1"), a.cmd("EXEC"),
                   a.cmd("MULTI"), a.cmd("GET", "a"), a.cmd("EXEC"),
                   b.cmd("CONFIG", "SET", "maxmemory", "0"),
                   a.cmd("MULTI"), a.cmd("GET", "a"),
                   b.cmd("CONFIG", "SET", "maxmemory", "1"), a.cmd("EXEC")]
            results.append(got)
        finally:
            b.cmd("CONFIG", "SET", "maxmemory", "0", "maxmemory-policy", policy)
            a.close()
            b.close()
    assert results[0] == results[1]
    assert results[1][7].startswith(b"-EXECABORT Transaction discarded because of: OOM")
