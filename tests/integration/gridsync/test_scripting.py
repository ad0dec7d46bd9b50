"""Lua scripting (EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT) side by side
with redis-server 7.0: fixed cases for every conversion rule and error
text in RESP2 and RESP3, seeded random scripts over every type with their
WRONGTYPE and error paths, compared as raw replies byte for byte; then
what only GridSync can be asked (its version, its libraries, the Lua heap
bound, the slow-script log), and real clients: redis-py's Lock and
redis-cli --eval."""
import os
import random
import re
import subprocess
import time

import pytest
import redis

from test_cluster import make_cluster  # noqa: F401  (fixture)
from test_vs_redis import Conn, pair, redis_port, run_redis  # noqa: F401  (fixtures)


def same(pair, *cmds):
    """Send each command to both servers; every raw reply must match."""
    g, r = pair
    for cmd in cmds:
        ours, theirs = g.cmd(*cmd), r.cmd(*cmd)
        assert ours == theirs, (cmd, ours, theirs)


def fresh(pair, resp3):
    g, r = pair
    for c in (g, r):
        assert c.cmd("SCRIPT", "FLUSH") == b"+OK\r\n"
        if resp3:
            assert c.cmd("HELLO", "3")[:1] == b"%"


def E(script, *rest):
    return ("EVAL", script, *(rest or (0,)))


# ------------------------------------------------------- fixed cases

CONVERSIONS = [
    # Lua -> Redis
    E("return 'hi'"), E("return 3.99"), E("return -3.5"), E("return 1e20"), E("return -1e20"),
    E("return 0/0"), E("return 1/0"), E("return true"), E("return false"), E("return nil"),
    E("return {1,2,3,'a',nil,5}"), E("return {1.9,-2.7,true,false}"), E("return {{1,{2}},{}}"),
    E("return {err='x y'}"), E("return {err='x'}"), E("return {err=''}"), E("return {err='ERR'}"),
    E("return {ok='x\\r\\ny'}"), E("return {err='x\\r\\ny'}"), E("return {ok=''}"),
    E("return {err=1}"), E("return {ok=1}"), E("return {1, {err='inner'}}"),
    E("return {1, {ok='inner'}}"), E("return {map={a=1}}"), E("return {map={}}"),
    E("return {map={a=false}}"), E("return {map={[1]='a'}}"), E("return {1,2,{map={x={1,2}}}}"),
    E("return {set={a=true}}"), E("return {set={}}"), E("return {set={a=true,b=false}}"),
    E("return {double=3.5}"), E("return {double=1/0}"), E("return {double=-1/0}"),
    E("return {double=0/0}"), E("return {double=1e300}"), E("return {double=0.1}"),
    E("return {double=3}"), E("return {double='x'}"), E("return {big_number='123'}"),
    E("return {big_number='12a\\r\\nb'}"),
    E("return {verbatim_string={format='txt',string='hi'}}"),
    E("return {verbatim_string={format='markdown',string='hi'}}"),
    E("return {verbatim_string={format='txt'}}"), E("return function() end"),
    E("local t={}; t[1]=t; return 1"), E("return KEYS"), E("return ARGV[1]"),
    E("return {KEYS[1],ARGV[1],#KEYS,#ARGV}", 2, "k1", "k2", "a1"),
    E("KEYS[1] = 'z'; return KEYS[1]", 1, "k"),
    E("return redis.setresp(3)"), E("redis.setresp(3); return false"),
    E("redis.setresp(3); return true"), E("redis.setresp(3); return {false, true}"),
    E("redis.setresp(3); return {1,{map={a=1}}}"),
    # Redis -> Lua
    ("HSET", "h", "a", "1", "b", "2"), ("ZADD", "z", "1.5", "m"), ("SET", "str", "v"),
    E("return redis.call('ping')"), E("return redis.call('hgetall','nokey')"),
    E("return redis.call('get','nokey')"), E("return redis.call('lpop','nokey')"),
    E("return redis.call('set','s','v','get')"), E("return redis.call('hgetall','h')"),
    E("return redis.call('zscore','z','m')"), E("return redis.call('type','h')"),
    E("return redis.call('type','h').ok"), E("return type(redis.call('get','nokey'))"),
    E("return {1, redis.call('get','nokey'), 3}"),
    E("return redis.call('hset','h2','a',1,'b',2) + 1"),
    E("return tostring(redis.call('incrbyfloat','f','1.5'))"),
    E("return redis.call('lrange','nolist',0,-1)"),
    E("redis.setresp(3); return redis.call('hgetall','nokey')"),
    E("redis.setresp(3); return redis.call('hgetall','h')"),
    E("redis.setresp(3); local t = redis.call('hgetall','h'); return t.map.a"),
    E("redis.setresp(3); return redis.call('get','nokey')"),
    E("redis.setresp(3); return type(redis.call('get','nokey'))"),
    E("redis.setresp(3); return redis.call('zscore','nokey','x')"),
    E("redis.setresp(3); return redis.call('zscore','z','m')"),
    E("redis.setresp(3); return redis.call('zscore','z','m').double"),
    E("redis.setresp(3); return redis.call('smembers','nos')"),
    E("redis.setresp(3); return redis.call('ping')"),
    E("local t = redis.pcall('incr','str'); local r={} for k,v in pairs(t) do r[#r+1]=k end "
      "return r"),
    # arguments of redis.call
    E("redis.call('set','n',0.1); return redis.call('get','n')"),
    E("redis.call('set','n',1e20); return redis.call('get','n')"),
    E("redis.call('set','n',-0.0); return redis.call('get','n')"),
    E("redis.call('set','n',12); return redis.call('get','n')"),
    E("redis.call('set','n',1/0); return redis.call('get','n')"),
    E("redis.call('set','n',0/0); return redis.call('get','n')"),
    E("return redis.call('get', 1.5)"),
]

ERRORS = [
    # the sandbox
    E("x = 1"), E("redis.call = 1"), E("redis.x = 1"), E("cjson.x = 1"), E("string.x = 1"),
    E("_G.x = 1"), E("rawset(_G,'x',1)"), E("setmetatable(_G,nil)"),
    E("getmetatable('').__index.x = 1"), E("getmetatable('').__index = 1"),
    E("return rawget(_G, 'redis') ~= nil"), E("return getmetatable(_G) ~= nil"),
    E("return type(os)"), E("return type(print)"), E("return type(debug)"), E("return type(io)"),
    E("return type(dofile)"), E("return type(setfenv)"), E("return type(newproxy)"),
    E("return type(module)"), E("return type(require)"), E("return type(loadstring)"),
    E("return type(gcinfo)"), E("return type(coroutine)"), E("return _VERSION"),
    E("return __redis__err__handler ~= nil"), E("\n\nreturn x"), E("return x"),
    E("local r = {} for k,v in pairs(redis) do r[#r+1] = k end table.sort(r) return r"),
    E("local r = {} for k,v in pairs(math) do r[#r+1] = k end table.sort(r) return r"),
    E("local r = {} for k,v in pairs(string) do r[#r+1] = k end table.sort(r) return r"),
    # errors raised and returned
    E("error('boom')"), E("error({err='CUSTOM boom'})"), E("error({err='CUSTOM boom'},0)"),
    E("error(nil)"), E("error(12)"), E("error('boom',0)"), E("local x = {} return x.y.z"),
    E("local x = nil; return #x"), E("return 1 +"), ("SCRIPT", "LOAD", "return +"),
    E("return redis.call('nosuch')"), E("return redis.pcall('nosuch')"),
    E("return redis.call('get', 'a', 'b')"), E("return redis.pcall('get')"),
    E("return redis.call()"), E("return redis.pcall()"),
    E("return redis.call('set','x',{})"), E("return redis.call('set','n',true)"),
    E("return redis.call('set','n',nil)"), E("return redis.call('auth','x')"),
    E("return redis.call('blpop','l',0)"), E("return redis.call('eval','return 1',0)"),
    E("return redis.call('multi')"), E("return redis.call('script','flush')"),
    E("return redis.call('config','get','maxmemory')"), E("return redis.call('script','help')"),
    E("return redis.call('client','id')"), E("return redis.call('watch','x')"),
    E("return redis.call('subscribe','x')"), E("return redis.call('monitor')"),
    E("local t = redis.pcall('nosuch'); return t.err"),
    ("SET", "str", "v"), E("return redis.call('incr','str')"), E("return redis.pcall('incr','str')"),
    E("return redis.call('sismember','str','x')"),
    E("redis.setresp(3); return redis.call('sismember','str','x')"),
    E("return redis.call('set','x','1','px','-1')"), E("return redis.pcall('set','x','1','px','-1')"),
    E("local r = redis.pcall('set','x','1','px','-1'); return r['err']"),
    E("return pcall(redis.call,'nosuch')"),
    E("local ok, e = pcall(redis.call,'nosuch'); return type(e)"),
    E("local ok, e = pcall(redis.call,'nosuch'); return e"),
    E("local ok, e = pcall(function() return redis.call('nosuch') end); return {type(e), e.err}"),
    E("local ok, e = pcall(error, 'x'); return {tostring(ok), e}"),
    E("local ok, e = pcall(error, {err='T x'}); return e"),
    E("local function f() return redis.call('nosuch') end return f()"),
    # the redis library
    E("return redis.error_reply('My Error')"), E("return redis.error_reply('-My Error')"),
    E("return redis.error_reply('x')"), E("return redis.error_reply('')"),
    E("return redis.error_reply(1)"), E("return redis.error_reply()"),
    E("local t = redis.error_reply('E1 x'); return t.err"),
    E("return redis.status_reply('FINE')"), E("return redis.status_reply(1)"),
    E("return redis.status_reply('a','b')"), E("return redis.status_reply('')"),
    E("return {redis.status_reply('x')}"),
    E("return redis.sha1hex('')"), E("return redis.sha1hex()"), E("return redis.sha1hex(1)"),
    E("return redis.sha1hex({})"), E("return redis.sha1hex('hello world')"),
    E("return redis.setresp(4)"), E("return redis.setresp()"), E("return redis.set_repl()"),
    E("return redis.set_repl(9)"), E("return redis.set_repl(redis.REPL_ALL)"),
    E("return {redis.REPL_NONE,redis.REPL_AOF,redis.REPL_SLAVE,redis.REPL_REPLICA,redis.REPL_ALL}"),
    E("return redis.replicate_commands()"),
    E("return redis.log(redis.LOG_WARNING,'from a script','x')"),
    E("return redis.log(redis.LOG_WARNING)"), E("return redis.log('a','b')"),
    E("return redis.log(99,'b')"),
    E("return {redis.LOG_DEBUG,redis.LOG_VERBOSE,redis.LOG_NOTICE,redis.LOG_WARNING}"),
    E("return redis.breakpoint()"), E("return redis.debug('x')"),
    E("return redis.acl_check_cmd('get','x')"), E("return redis.acl_check_cmd('nosuch')"),
    E("return redis.acl_check_cmd()"),
    E("math.randomseed(7); return {math.random(100), math.random(), math.random(3, 9)}"),
    E("math.randomseed(-5); return tostring(math.random())"),
    E("return math.random(1,2,3)"), E("return math.random(0)"),
    # libraries
    E("return cjson.encode({a=1})"), E("return cjson.encode({1.5, 'x', true, {a={}}})"),
    E("return cjson.encode(1/3)"), E("return cjson.decode('[1,2,{\"a\":null}]')[3].a == cjson.null"),
    E("return bit.tohex(255)"), E("return bit.bxor(5,3)"), E("return bit.band(-1, 0xff)"),
    E("return tostring(1/3)"), E("return tostring(1e15)"), E("return loadstring('return 1')()"),
    E("return string.format('%5.2f', 3.14159)"), E("return table.concat({1,2},'-')"),
    # numkeys, EVALSHA, shebang, read-only scripts
    E("return 1", -1), E("return 1", 2, "a"), E("return 1", "x"), E("return 1", "1.0"),
    ("EVALSHA", "abc", 0), ("EVALSHA", "abc", "x"),
    ("EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", 0),
    E("return 1"),
    ("EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", 0),
    ("EVALSHA", "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", 0),
    ("EVALSHA", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", -1),
    ("EVALSHA_RO", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db", 0),
    E("#!lua\nreturn 1"), E("#!lua flags=no-writes\nreturn redis.call('set','a','b')"),
    E("#!lua flags=\nreturn 1"), E("#!lua flags=bogus\nreturn 1"), E("#!lua x=1\nreturn 1"),
    E("#!luax\nreturn 1"), E("#!lua"), E("#! \nreturn 1"), E("#!lua\nreturn x"),
    E("#!lua flags=no-cluster,allow-stale,allow-cross-slot-keys\nreturn 1"),
    E("#!lua flags=no-writes,allow-oom\nreturn redis.call('get','a')"),
    ("EVAL_RO", "return redis.call('set','a','b')", 0),
    ("EVAL_RO", "return redis.pcall('del','a')", 0),
    ("EVAL_RO", "#!lua\nreturn redis.call('get','a')", 0),
    ("EVAL_RO", "#!lua flags=no-writes\nreturn redis.call('get','a')", 0),
    ("EVAL_RO", "return redis.call('get','a')", 0),
    # SCRIPT
    ("SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db",
     "E0E1F9FABFC9D4800C877A703B823AC0578FF8DB", "x"),
    ("SCRIPT", "LOAD", "return 2"), ("EVALSHA", "7f923f79fe76194c868d7e1d0820de36700eb649", 0),
    ("SCRIPT", "LOAD", "#!lua flags=bogus\nreturn 2"), ("SCRIPT", "KILL"),
    ("SCRIPT", "FLUSH", "x"), ("SCRIPT", "FLUSH", "SYNC", "x"), ("SCRIPT", "HELP"),
    ("SCRIPT", "NOPE"), ("SCRIPT", "DEBUG", "x"), ("SCRIPT", "DEBUG", "NO"), ("SCRIPT", "LOAD"),
    ("SCRIPT", "EXISTS"), ("SCRIPT",), ("SCRIPT", "FLUSH", "ASYNC"),
    ("SCRIPT", "EXISTS", "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"),
    ("EVALSHA", "7f923f79fe76194c868d7e1d0820de36700eb649", 0), ("SCRIPT", "FLUSH"),
    ("EVAL",), ("EVAL", "return 1"), ("EVALSHA", "x"),
    # SELECT inside a script changes the script's database only
    E("return redis.call('select','1')"),
    E("redis.call('select','1'); return redis.call('set','x','in1')"),
    ("GET", "x"), ("SELECT", "1"), ("GET", "x"), ("SELECT", "0"),
    E("redis.call('select','1'); redis.call('select','99')"),
    # COMMAND's view of the scripting commands
    ("COMMAND", "GETKEYS", "EVAL", "return 1", "2", "k1", "k2", "a"),
    ("COMMAND", "GETKEYS", "EVAL", "return 1", "0"),
    ("COMMAND", "GETKEYS", "EVAL", "return 1", "3", "a"),
    ("COMMAND", "GETKEYS", "EVALSHA_RO", "abc", "1", "k"),
    ("COMMAND", "COUNT", "EVAL"),
]


# Server commands from a script: allowed ones run on the script's client
# (no connection), the others are refused before they run.
SERVER = [
    ("SET", "a", "abc"), ("SET", "b", "abd"),
    E("return type(redis.call('info'))"), E("return type(redis.call('info','memory'))"),
    E("return redis.call('command','count') > 100"), E("return redis.call('slowlog','len') >= 0"),
    E("return redis.call('readonly')"), E("return redis.call('asking')"),
    E("return redis.call('object','encoding','nokey')"), E("return redis.call('publish','ch','m')"),
    E("return redis.call('pubsub','channels')"), E("return redis.call('time')[1] > 0"),
    E("return redis.call('echo','x')"), E("return redis.call('lpush','l','a')"),
    E("return redis.call('lmpop','1','l','left')"), E("return redis.call('lpush','l','a','b')"),
    E("return redis.call('lmove','l','l2','left','right')"),
    E("return redis.call('command','info','get')[1][1]"), E("return redis.call('lcs','a','b')"),
    E("return redis.call('hello')"), E("return redis.call('reset')"), E("return redis.call('quit')"),
    E("return redis.call('spublish','ch','m')"), E("return redis.call('ssubscribe','ch')"),
    E("return redis.call('sunsubscribe','ch')"), E("return redis.call('unsubscribe','ch')"),
    E("return redis.call('punsubscribe')"), E("return redis.call('discard')"),
    E("return redis.call('exec')"), E("return redis.call('unwatch')"),
    E("return redis.call('shutdown')"), E("return redis.call('latency','latest')"),
    E("return redis.call('config','set','maxmemory','0')"),
    E("return redis.call('swapdb','0','1')"), E("return redis.call('keys','*')"),
    E("redis.call('swapdb','0','1'); return redis.call('flushdb')"), E("return redis.call('dbsize')"),
    # the families that came after scripting: SORT, HyperLogLogs, BITFIELD, DUMP/RESTORE
    E("redis.call('rpush','sl','3','1','2'); return redis.call('sort','sl')"),
    E("return redis.call('sort','sl','desc','store','sl2')"),
    E("return redis.call('sort_ro','sl','limit','0','2')"),
    ("EVAL_RO", "return redis.call('sort','sl','store','x')", 0),
    E("return redis.call('pfadd','hl','a','b','c')"), E("return redis.call('pfcount','hl')"),
    E("return redis.call('bitfield','bf','incrby','u8','0','200','get','u8','0')"),
    ("EVAL_RO", "return redis.call('bitfield_ro','bf','get','u8','0')", 0),
    E("return redis.call('dump','sl')"),
    E("local d = redis.call('dump','sl'); return redis.call('restore','d2','0',d)"),
    E("return redis.call('lrange','d2',0,-1)"),
    E("return redis.call('ping')"),
]


@pytest.mark.parametrize("resp3", [False, True])
@pytest.mark.parametrize("cases", [CONVERSIONS, ERRORS, SERVER],
                         ids=["conversions", "errors", "server"])
def test_fixed_cases_same_as_redis(pair, resp3, cases):  # noqa: F811
    fresh(pair, resp3)
    same(pair, *cases)


def test_command_info_flags_same_as_redis(pair):  # noqa: F811
    g, r = pair
    for name in ("eval", "evalsha", "eval_ro", "evalsha_ro", "blpop", "bzpopmin"):
        ours = g.cmd("COMMAND", "INFO", name)
        theirs = r.cmd("COMMAND", "INFO", name)
        # name, arity, flags, first/last/step (GridSync has no ACL
        # categories, tips or key specs to compare)
        head = re.compile(rb"^\*1\r\n\*10\r\n(\$\d+\r\n\w+\r\n:-?\d+\r\n[*~](\d+)\r\n)")
        mo, mt = head.match(ours), head.match(theirs)
        assert mo and mt and mo.group(1) == mt.group(1), (name, ours, theirs)
        n = int(mo.group(2))
        rest_o = ours[mo.end():].split(b"\r\n")[:n + 3]
        rest_t = theirs[mt.end():].split(b"\r\n")[:n + 3]
        assert rest_o == rest_t, name


# ------------------------------------------------------ random scripts

KEYS = ["{t}s1", "{t}s2", "{t}h", "{t}l", "{t}set", "{t}z"]


def lua_str(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def random_call(rng):
    """One redis.call/pcall expression over the keys (any key, any type:
    WRONGTYPE is one of the paths), deterministic in both servers."""
    k = "KEYS[%d]" % rng.randint(1, len(KEYS))
    v = lua_str(rng.choice(["a", "b", "1", "2", "-3", "1.5", "x y", ""]))
    n = str(rng.randint(-3, 5))
    calls = [
        f"'set', {k}, {v}", f"'get', {k}", f"'append', {k}, {v}", f"'incr', {k}",
        f"'incrby', {k}, {n}", f"'incrbyfloat', {k}, {v}", f"'strlen', {k}",
        f"'getrange', {k}, 0, {n}", f"'setrange', {k}, 1, {v}", f"'getdel', {k}",
        f"'hset', {k}, {v}, {v}", f"'hget', {k}, {v}", f"'hgetall', {k}", f"'hdel', {k}, {v}",
        f"'hincrby', {k}, 'c', {n}", f"'hlen', {k}", f"'hkeys', {k}", f"'hmget', {k}, 'a', {v}",
        f"'rpush', {k}, {v}", f"'lpush', {k}, {v}, {v}", f"'lrange', {k}, 0, -1", f"'lpop', {k}",
        f"'rpop', {k}, 2", f"'llen', {k}", f"'lindex', {k}, {n}", f"'lrem', {k}, 0, {v}",
        f"'sadd', {k}, {v}", f"'srem', {k}, {v}", f"'scard', {k}", f"'sismember', {k}, {v}",
        f"'smismember', {k}, {v}, 'a'",
        f"'zadd', {k}, {n}, {v}", f"'zincrby', {k}, 1.5, {v}", f"'zscore', {k}, {v}",
        f"'zrange', {k}, 0, -1, 'withscores'", f"'zrank', {k}, {v}", f"'zcard', {k}",
        f"'zrem', {k}, {v}", f"'zpopmin', {k}", f"'zrangebyscore', {k}, '-inf', {n}",
        f"'del', {k}", f"'exists', {k}", f"'type', {k}", f"'expire', {k}, 100",
        f"'ttl', {k}", f"'persist', {k}", f"'rename', {k}, KEYS[1]", "'ping'", "'echo', 'e'",
        f"'set', {k}, {v}, 'nx'", f"'set', {k}", f"'nosuch', {k}", f"'lpush', {k}",
    ]
    fn = "redis.pcall" if rng.random() < 0.8 else "redis.call"
    return f"{fn}({rng.choice(calls)})"


def random_script(rng):
    lines = []
    if rng.random() < 0.3:
        lines.append("redis.setresp(3)")
    n = rng.randint(1, 6)
    for i in range(n):
        lines.append(f"local r{i} = {random_call(rng)}")
        if rng.random() < 0.15:  # a set's members in a stable order
            lines.append(f"local m{i} = redis.pcall('smembers', KEYS[5]); "
                         f"if type(m{i}) == 'table' and m{i}[1] then table.sort(m{i}) end")
    rs = [f"r{i}" for i in range(n)]
    shapes = [
        "return {" + ", ".join(rs) + "}",
        f"return {rng.choice(rs)}",
        f"return type({rng.choice(rs)})",
        "return {" + ", ".join(f"type({x})" for x in rs) + "}",
        f"return {{map={{a={rng.choice(rs)}, b=2}}}}",
        f"return {{set={{x=true}}}}",
        f"return {{double={rng.choice(['1.5', '0.1', '-2', '1/0'])}}}",
        f"return redis.status_reply(type({rng.choice(rs)}))",
        f"return redis.error_reply('E ' .. type({rng.choice(rs)}))",
        f"if type({rs[0]}) == 'table' and {rs[0]}.err then return {rs[0]}.err end return 'ok'",
        "return {" + ", ".join(rs) + ", redis.call('dbsize')}",
    ]
    lines.append(rng.choice(shapes))
    return "\n".join(lines)


def random_setup(rng):
    cmds = [("DEL", *KEYS)]
    for k in KEYS:
        if rng.random() < 0.3:
            continue
        kind = rng.choice(["string", "hash", "list", "set", "zset"])
        if kind == "string":
            cmds.append(("SET", k, rng.choice(["1", "abc", "2.5"])))
        elif kind == "hash":
            cmds.append(("HSET", k, "a", "1", "b", "x"))
        elif kind == "list":
            cmds.append(("RPUSH", k, "a", "b", "a"))
        elif kind == "set":
            cmds.append(("SADD", k, "a", "1", "b"))
        else:
            cmds.append(("ZADD", k, "1", "a", "2.5", "b"))
    return cmds


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("resp3", [False, True])
def test_random_scripts_same_as_redis(pair, seed, resp3):  # noqa: F811
    g, r = pair
    fresh(pair, resp3)
    rng = random.Random(seed)
    for _ in range(250):
        for cmd in random_setup(rng):
            assert g.cmd(*cmd)[:1] == r.cmd(*cmd)[:1]
        script = random_script(rng)
        cmd = ("EVAL" if rng.random() < 0.9 else "EVAL_RO", script, len(KEYS), *KEYS, "arg")
        ours, theirs = g.cmd(*cmd), r.cmd(*cmd)
        assert ours == theirs, (script, ours, theirs)
        # the keys afterwards, as each server holds them
        for k in KEYS:
            assert g.cmd("TYPE", k) == r.cmd("TYPE", k), (script, k)
            dump = ("EVAL", "local t = redis.call('type', KEYS[1]).ok "
                    "if t == 'string' then return redis.call('get', KEYS[1]) end "
                    "if t == 'hash' then return redis.call('hgetall', KEYS[1]) end "
                    "if t == 'list' then return redis.call('lrange', KEYS[1], 0, -1) end "
                    "if t == 'set' then local m = redis.call('smembers', KEYS[1]) "
                    "table.sort(m) return m end "
                    "if t == 'zset' then return redis.call('zrange', KEYS[1], 0, -1, 'withscores') end "
                    "return t", 1, k)
            assert g.cmd(*dump) == r.cmd(*dump), (script, k)


# -------------------------------------------- the server around scripts


def test_multi_exec_with_eval_same_as_redis(pair):  # noqa: F811
    same(pair, ("MULTI",), E("return redis.call('incr', KEYS[1])", 1, "c"),
         E("return redis.call('nosuch')"), ("EVALSHA", "0" * 40, 0), ("INCR", "c"), ("EXEC",),
         ("GET", "c"))


def test_watch_is_broken_by_a_script_write(server, redis_port):  # noqa: F811
    for port in (server.port, redis_port):
        a, b = Conn(port), Conn(port)
        a.cmd("DEL", "w")
        assert a.cmd("WATCH", "w") == b"+OK\r\n"
        assert b.cmd("EVAL", "return redis.call('get', KEYS[1])", 1, "w") == b"$-1\r\n"
        assert a.cmd("MULTI") == b"+OK\r\n"
        a.cmd("SET", "w", "mine")
        assert a.cmd("EXEC") == b"*1\r\n+OK\r\n", port  # a read does not break it
        assert a.cmd("WATCH", "w") == b"+OK\r\n"
        assert b.cmd("EVAL", "return redis.call('set', KEYS[1], 'x')", 1, "w") == b"+OK\r\n"
        a.cmd("MULTI")
        a.cmd("SET", "w", "mine")
        assert a.cmd("EXEC") == b"*-1\r\n", port
        a.close()
        b.close()


def monitor_lines(port, cmds):
    m = Conn(port)
    assert m.cmd("MONITOR") == b"+OK\r\n"
    c = Conn(port)
    for cmd in cmds:
        c.cmd(*cmd)
    c.cmd("ECHO", "end-marker")
    lines = []
    while True:
        line = m._line().decode()
        if "end-marker" in line:
            break
        line = re.sub(r"^\+\d+\.\d+ \[(\d+) [^\]]*:\d+\]", r"[\1 client]", line)
        lines.append(re.sub(r"^\+\d+\.\d+ ", "", line).rstrip())
    m.close()
    c.close()
    return lines


def test_monitor_shows_the_script_then_its_commands(server, redis_port):  # noqa: F811
    cmds = [("EVAL", "redis.call('set', KEYS[1], 'v'); redis.call('select', '2'); "
                     "return redis.call('get', KEYS[1])", 1, "mk"),
            ("EVALSHA", "0" * 40, 0), ("EVAL", "return 1", "x")]
    ours, theirs = monitor_lines(server.port, cmds), monitor_lines(redis_port, cmds)
    assert ours == theirs
    assert ours[1:4] == ['[0 lua] "set" "mk" "v"', '[2 lua] "select" "2"', '[2 lua] "get" "mk"']
    assert ours[0].startswith('[0 client] "EVAL"') and len(ours) == 6


def test_oom_refusals_same_as_redis(pair):  # noqa: F811
    g, r = pair
    for c in (g, r):
        c.cmd("SET", "filler", "x" * 1000)
        assert c.cmd("CONFIG", "SET", "maxmemory-policy", "noeviction") == b"+OK\r\n"
        assert c.cmd("CONFIG", "SET", "maxmemory", "1") == b"+OK\r\n"
    try:
        same(pair, E("return 1"), E("return redis.call('set','a','b')"),
             E("return redis.pcall('set','a','b')"), E("return redis.call('get','a')"),
             E("#!lua\nreturn 1"), E("#!lua flags=no-writes\nreturn redis.call('get','a')"),
             E("#!lua flags=allow-oom\nreturn redis.call('set','a','b')"),
             E("redis.call('del','zz'); return redis.call('set','a','c')"),
             ("EVAL_RO", "return 1", 0), ("GET", "a"))
    finally:
        for c in (g, r):
            c.cmd("CONFIG", "SET", "maxmemory", "0")
            c.cmd("CONFIG", "SET", "maxmemory-policy", "noeviction")
        g.cmd("CONFIG", "SET", "maxmemory-policy", "slru")


def test_math_random_state_of_a_fresh_server(make_server):
    """Redis 7.0 never reseeds rand48 per script: a fresh server's first
    scripts draw from rand.c's initial state."""
    gen = run_redis()
    port = next(gen)
    try:
        g = make_server()
        script = "return {math.random(1000000), math.random(1000000), tostring(math.random())}"
        for _ in range(3):
            assert Conn(g.port).cmd("EVAL", script, 0) == Conn(port).cmd("EVAL", script, 0)
    finally:
        gen.close()


def info_fields(c, section):
    raw = c.cmd("INFO", section)
    body = raw.split(b"\r\n", 1)[1].decode()
    return dict(line.split(":", 1) for line in body.splitlines() if ":" in line)


def test_info_counts_scripts_and_lua_memory(server):
    c = Conn(server.port)
    before = info_fields(c, "memory")
    assert before["number_of_cached_scripts"] == "0"
    for i in range(20):
        assert c.cmd("EVAL", f"local t = {{}} for i = 1, 1000 do t[i] = i end return {i}", 0) == \
            b":%d\r\n" % i
    c.cmd("SCRIPT", "LOAD", "return 'x'")
    after = info_fields(c, "memory")
    assert after["number_of_cached_scripts"] == "21"
    assert int(after["used_memory_lua"]) > 10000
    assert after["used_memory_vm_eval"] == after["used_memory_lua"]
    assert int(after["used_memory_scripts_eval"]) > 0
    assert int(after["used_memory"]) >= int(after["used_memory_lua"])
    assert c.cmd("SCRIPT", "FLUSH") == b"+OK\r\n"
    flushed = info_fields(c, "memory")
    assert flushed["number_of_cached_scripts"] == "0"
    assert flushed["used_memory_lua"] == "0"
    assert c.cmd("SCRIPT", "EXISTS", "a" * 40) == b"*1\r\n:0\r\n"
    # the state is rebuilt: globals as new
    assert c.cmd("EVAL", "return redis.call('ping')", 0) == b"+PONG\r\n"


def test_commandstats_and_slowlog_count_eval(server):
    c = Conn(server.port)
    assert c.cmd("CONFIG", "SET", "slowlog-log-slower-than", "0") == b"+OK\r\n"
    c.cmd("SLOWLOG", "RESET")
    c.cmd("CONFIG", "RESETSTAT")
    c.cmd("EVAL", "redis.call('set', KEYS[1], '1'); return redis.call('incr', KEYS[1])", 1, "k")
    c.cmd("EVAL", "return redis.call('nosuch')", 0)
    stats = info_fields(c, "commandstats")
    assert stats["cmdstat_eval"].startswith("calls=2,")
    assert "failed_calls=1" in stats["cmdstat_eval"]
    assert stats["cmdstat_set"].startswith("calls=1,")
    assert stats["cmdstat_incr"].startswith("calls=1,")
    log = c.cmd("SLOWLOG", "GET", "10")
    assert b"$4\r\nEVAL\r\n" in log and b"$4\r\nincr\r\n" in log
    errors = info_fields(c, "errorstats")
    assert errors["errorstat_ERR"] == "count=1"  # counted once, not again by EVAL


def test_lua_heap_is_bounded(make_server):
    s = make_server("--lua-memory-limit", "8mb")
    c = Conn(s.port)
    reply = c.cmd("EVAL", "local t = {} for i = 1, 1e8 do t[i] = string.rep('x', 100) .. i end "
                          "return #t", 0)
    assert reply.startswith(b"-ERR Error running script "), reply
    assert b"not enough memory" in reply
    assert int(info_fields(c, "memory")["used_memory_lua"]) <= 8 * 1024 * 1024
    # the state is usable again, its garbage collected
    assert c.cmd("EVAL", "return redis.call('ping')", 0) == b"+PONG\r\n"
    assert int(info_fields(c, "memory")["used_memory_lua"]) < 4 * 1024 * 1024
    assert c.cmd("CONFIG", "GET", "lua-memory-limit") == \
        b"*2\r\n$16\r\nlua-memory-limit\r\n$7\r\n8388608\r\n"
    assert s.alive()


def test_slow_script_is_logged_and_runs_to_its_end(make_server):
    s = make_server("--busy-reply-threshold", "50")
    c = Conn(s.port)
    assert c.cmd("CONFIG", "GET", "lua-time-limit") == \
        b"*2\r\n$14\r\nlua-time-limit\r\n$2\r\n50\r\n"
    # a loop of pure Lua, well past 50 ms, and what it computed
    reply = c.cmd("EVAL", "local n = 0 for i = 1, 3e7 do n = n + i % 7 end return n", 0)
    full, rem = divmod(30000000, 7)
    assert reply == b":%d\r\n" % (full * 21 + sum(range(1, rem + 1)))
    assert c.cmd("SCRIPT", "KILL") == b"-NOTBUSY No scripts in execution right now.\r\n"
    deadline = time.monotonic() + 5
    while "Slow script detected" not in s.output():
        assert time.monotonic() < deadline, s.output()[-2000:]
        time.sleep(0.05)


def test_redis_version_and_libraries(server):
    c = Conn(server.port)
    version = info_fields(c, "server")["redis_version"]
    major, minor, patch = (int(x) for x in version.split("."))
    assert c.cmd("EVAL", "return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}", 0) == \
        b"*2\r\n$%d\r\n%s\r\n:%d\r\n" % (len(version), version.encode(),
                                         major << 16 | minor << 8 | patch)
    # Debian has no Lua 5.1 packages for struct and cmsgpack (docs/gridsync.md)
    assert b"nonexistent global variable 'struct'" in c.cmd("EVAL", "return struct", 0)
    assert c.cmd("EVAL", "return cjson.encode(cjson.decode('[1,\"a\"]'))", 0) == \
        b'$7\r\n[1,"a"]\r\n'


def test_redis_log_reaches_the_server_log(server):
    c = Conn(server.port)
    assert c.cmd("EVAL", "redis.log(redis.LOG_WARNING, 'lua says', 42)", 0) == b"$-1\r\n"
    deadline = time.monotonic() + 5
    while "lua says 42" not in server.output():
        assert time.monotonic() < deadline
        time.sleep(0.05)


# ----------------------------------------------------------- real clients


def test_redis_py_lock(server):
    r = server.client()
    lock = r.lock("resource", timeout=10)
    assert lock.acquire(blocking=False)
    assert r.get("resource") == lock.local.token
    other = r.lock("resource", timeout=10)
    assert not other.acquire(blocking=False)
    assert lock.extend(20)
    assert 10 < r.pttl("resource") / 1000 <= 30
    assert lock.reacquire()
    assert lock.owned()
    lock.release()
    assert r.get("resource") is None
    with pytest.raises(redis.exceptions.LockError):
        lock.release()  # no longer held by this client
    stolen = r.lock("resource", timeout=10)
    assert stolen.acquire(blocking=False)
    r.set("resource", "someone else")
    with pytest.raises(redis.exceptions.LockNotOwnedError):
        stolen.release()  # the release script finds another token
    r.delete("resource")
    with r.lock("resource", timeout=5, blocking_timeout=1):
        assert r.exists("resource")
    assert not r.exists("resource")
    # a script object: EVALSHA first, EVAL after NOSCRIPT
    incr = r.register_script("return redis.call('incrby', KEYS[1], ARGV[1])")
    assert incr(keys=["n"], args=[5]) == 5
    r.script_flush()
    assert incr(keys=["n"], args=[2]) == 7
    assert r.script_exists(incr.sha) == [True]


def test_redis_cli_eval(server, tmp_path):
    script = tmp_path / "s.lua"
    script.write_text("redis.call('set', KEYS[1], ARGV[1])\nreturn {KEYS[1], ARGV[1], 7}\n")
    out = subprocess.run(["redis-cli", "-p", str(server.port), "--eval", str(script), "k1", ",",
                          "v1"], capture_output=True, timeout=20, check=True).stdout.decode()
    assert out.splitlines() == ["k1", "v1", "7"]
    assert server.client().get("k1") == b"v1"
    err = subprocess.run(["redis-cli", "-p", str(server.port), "eval", "return x", "0"],
                         capture_output=True, timeout=20).stdout.decode()
    assert "Script attempted to access nonexistent global variable 'x'" in err


# ----------------------------------------------------------- cluster mode


def test_cluster_mode_refuses_scripts(make_cluster):  # noqa: F811
    c = make_cluster(n=1, replicas=1)
    for cmd in (("EVAL", "return 1", 0), ("EVAL", "return redis.call('get', KEYS[1])", 1, "k"),
                ("EVAL_RO", "return 1", 0), ("EVALSHA", "a" * 40, 0)):
        with pytest.raises(redis.ResponseError,
                           match="^scripts are not supported in GridSync cluster mode$"):
            c.call(*cmd)
    node = c.nodes[0].client()
    assert node.script_load("return 1") == "e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
    assert c.nodes[0].alive()
