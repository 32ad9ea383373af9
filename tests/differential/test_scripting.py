"""Scripting byte for byte against Debian's redis-server (7.0): EVAL and its family, SCRIPT,
the sandbox, the redis.* API, error texts with their ``script: …, on @user_script:N.`` suffix,
and the Lua↔RESP conversion table both ways, in RESP2 and RESP3.

Left out because 7.0 differs from the 8.10 semantics we follow: XREAD BLOCK inside a script
(7.0 refuses it; 7.4+ runs it without blocking), Lua numbers that are not integers given to
redis.call (7.0 prints ``%.17g``, 7.2+ the shortest form), REDIS_VERSION, FUNCTION's
help and stats texts, and ``os`` (7.4 gives scripts ``os.clock``: see
tests/e2e/test_lua_sandbox_e2e.py).
"""

from __future__ import annotations

import os

import pytest

from tests.differential.harness import assert_same
from tests.helpers import ServerProcess

LOCK_RELEASE = (
    'if redis.call("get",KEYS[1]) == ARGV[1] then return redis.call("del",KEYS[1]) '
    "else return 0 end"
)


def ev(body: str, *args: str) -> list[str]:
    return ["EVAL", body, str(sum(1 for a in args if a.startswith("k"))), *args]


def ev0(body: str) -> list[str]:
    return ["EVAL", body, "0"]


SCENARIOS: dict[str, list[object]] = {
    "eval_basics": [
        ev0("return 1"),
        ev0("return 'x'"),
        ["EVAL", "return {KEYS[1], KEYS[2], ARGV[1], ARGV[2], #KEYS, #ARGV}", "2", "a", "b", "c"],
        ["EVAL", "return 1", "-1"],
        ["EVAL", "return 1", "2", "a"],
        ["EVAL", "return 1", "x"],
        ["EVAL", "return 1", "0_0"],  # (Python's int() reads these three)
        ["EVAL", "return 1", " 0"],
        ["EVAL", "return #KEYS", "+1", "k"],
        ["EVAL", "return 1", "99999999999999999999"],
        ["EVAL", "return 1"],
        ["EVAL"],
        ev0("return redis.call('set', 'k', 'v')"),
        ev0("return redis.call('get', 'k')"),
        ["EVAL", LOCK_RELEASE, "1", "k", "v"],
        ["EVAL", LOCK_RELEASE, "1", "k", "v"],
        ev0("return redis.call('incr', 'n') + redis.call('incr', 'n')"),
        ev0("return redis.call('SET', 'big', 10000000000000000)"),
        ev0("return redis.call('get', 'big')"),
        ev0("return redis.call('set', 'half', 1.5)"),
        ev0("return redis.call('get', 'half')"),
    ],
    "evalsha_and_script": [
        "SCRIPT FLUSH",
        "SCRIPT LOAD 'return 42'",
        "EVALSHA 1fa00e76656cc152ad327c13fe365858fd7be306 0",
        "EVALSHA 1FA00E76656CC152AD327C13FE365858FD7BE306 0",
        "EVALSHA 0123456789012345678901234567890123456789 0",
        "EVALSHA abc 0",
        "EVALSHA_RO 1fa00e76656cc152ad327c13fe365858fd7be306 0",
        "SCRIPT EXISTS 1fa00e76656cc152ad327c13fe365858fd7be306 abc",
        "SCRIPT EXISTS",
        ev0("return 'cached'"),
        "SCRIPT EXISTS 4ae2a35ba7cdf65f29a81c4c5c6ef69ca7bcbba0",
        "SCRIPT FLUSH ASYNC",
        "SCRIPT FLUSH SYNC",
        "SCRIPT FLUSH foo",
        "SCRIPT FLUSH sync async",
        "SCRIPT EXISTS 1fa00e76656cc152ad327c13fe365858fd7be306",
        "SCRIPT KILL",
        "SCRIPT FOO",
        "SCRIPT",
        "SCRIPT LOAD 'return +'",
        "SCRIPT LOAD",
    ],
    "lua_to_resp": [
        ev0("return 3.99"),
        ev0("return -3.99"),
        ev0("return 1/0"),
        ev0("return {1e300, -1e300, 0/0}"),
        ev0("return {1, 2, nil, 4}"),
        ev0("return true"),
        ev0("return false"),
        ev0("return nil"),
        ev0("return {true, false, 'x'}"),
        ev0("return {ok='fine'}"),
        ev0("return {ok='a\\r\\nb'}"),
        ev0("return {err='boom'}"),
        ev0("return {err='MYERR something'}"),
        ev0("return {err=5}"),
        ev0("return {double=1.5}"),
        ev0("return {double=-0.25}"),
        ev0("return {big_number='12345678901234567890'}"),
        ev0("return {map={a=1}}"),
        ev0("return {set={a=true}}"),
        ev0("return {verbatim_string={format='txt', string='abc'}}"),
        ev0("return {1, {2, {3, {ok='deep'}}}}"),
        ev0("return {}"),
        ev0("return redis.status_reply('FINE')"),
        ev0("return redis.error_reply('boom')"),
        ev0("return redis.error_reply('-FOO bar')"),
        ev0("return redis.error_reply('MY error')"),
        ev0("return redis.error_reply()"),
        ev0("return redis.status_reply()"),
        ev0("return function() end"),
        ev0("redis.setresp(3); return true"),
        ev0("redis.setresp(3); return false"),
        ev0("redis.setresp(3); return {true, false, nil}"),
    ],
    "resp_to_lua": [
        "HSET h a 1",
        "SET s v",
        ev0("return type(redis.call('get', 'nosuch'))"),
        ev0("return tostring(redis.call('get', 'nosuch'))"),
        ev0("return redis.call('set', 's', 'v').ok"),
        ev0("return redis.pcall('incr', 's').err"),
        ev0("return type(redis.call('incr', 'n'))"),
        ev0("return redis.call('hgetall', 'h')"),
        ev0("redis.setresp(3); return redis.call('hgetall', 'h')"),
        ev0("redis.setresp(3); return redis.call('hgetall', 'h').map.a"),
        ev0("redis.setresp(3); return type(redis.call('get', 'nosuch'))"),
        ev0("redis.setresp(3); return redis.call('get', 's')"),
        ev0("return redis.call('xadd', 'st', '1-1', 'f', 'v')"),
        ev0("return redis.call('xrange', 'st', '-', '+')"),
        ev0("redis.setresp(3); return redis.call('xrange', 'st', '-', '+')"),
        ev0("return redis.call('ping')"),
        ev0("return redis.call('ping').ok"),
        ev0("return redis.call('exists', 's', 'h', 'nosuch')"),
    ],
    "errors": [
        ev0("error('boom')"),
        ev0("error({err='X y'})"),
        ev0("error()"),
        ev0("local x = nil; return x.field"),
        ev0("return redis.call('foo')"),
        ev0("return redis.call('get')"),
        ev0("return redis.call('multi')"),
        ev0("return redis.call('eval', 'return 1', '0')"),
        ev0("return redis.call()"),
        ev0("return redis.call({})"),
        ev0("return redis.call('get', {})"),
        ev0("return redis.call('get', nil)"),
        ev0("return redis.pcall('foo')"),
        ev0("return type(redis.pcall('foo'))"),
        ev0("return redis.pcall('set', 'k')"),
        ev0("local ok, e = pcall(redis.call, 'foo'); return {tostring(ok), e.err}"),
        ev0("redis.call('set', 's', 'x'); return redis.call('incr', 's')"),
        ev0("return redis.call('hget', 's', 'f')"),
        ev0("\n\nreturn redis.call('nosuch')"),
        ev0("return 1 +"),
        ev0("return"),
        ev0("local t = {} t[nil] = 1"),
        ev0("return redis.call('config', 'foo')"),
        ev0("return redis.call('config')"),
    ],
    "sandbox": [
        ev0("return type(io)"),
        ev0("return type(io)"),
        ev0("return type(loadfile)"),
        ev0("return type(dofile)"),
        ev0("return type(require)"),
        ev0("return type(print)"),
        ev0("return type(debug)"),
        ev0("return type(getfenv)"),
        ev0("return type(newproxy)"),
        ev0("x = 5"),
        ev0("return y"),
        ev0("redis.call = nil"),
        ev0("string.len = nil"),
        ev0("math.pi = 3"),
        ev0("_G.x = 1"),
        ev0("return type(_G)"),
        ev0("return loadstring('return 1 + 1')()"),
        ev0("return loadstring('return io')()"),
        ev0("local f = function() return 1 end; return f()"),
        ev0("local s = 0; for i = 1, 10 do s = s + i end; return s"),
        ev0("return string.format('%d-%s', 5, 'x')"),
        ev0("return table.concat({'a', 'b'}, ',')"),
        ev0("return tostring(math.floor(2.5))"),
        ev0("return type(coroutine.create)"),
        ev0("return {pcall(error, 'x')}"),
        ev0("getmetatable('').__index = {}"),
        ev0("return ('x'):rep(3)"),
        ev0("return type(getmetatable('').__index.rep)"),
        ev0("return {loadstring(string.dump(function() return 1 end))}"),
        ev0("return rawset(_G, 'x', 1)"),
        ev0("setmetatable(_G, {})"),
        ev0("return setmetatable()"),
        ev0("return rawset()"),
        ev0("return setmetatable(5, {})"),
        ev0("return setmetatable({}, 5)"),
        ev0("return rawset({}, nil, 1)"),
        ev0("local t = setmetatable({}, {__metatable = 1}) setmetatable(t, {})"),
        ev0("local t = {} rawset(t, 'a', 1) return t.a"),
        ev0("return rawget(_G, 'redis') == nil"),
        ev0("local n = 0 for k in pairs(redis) do n = n + 1 end return n > 10"),
        ev0("return {next(KEYS)}"),
        ev0("return {type(rawset), type(setmetatable), type(redis.call), type(cjson.encode)}"),
    ],
    "redis_api": [
        ev0("return redis.sha1hex('')"),
        ev0("return redis.sha1hex('abc')"),
        ev0("return redis.sha1hex()"),
        ev0("return redis.sha1hex(1, 2)"),
        ev0("return redis.log(redis.LOG_WARNING, 'from a test')"),
        ev0("return redis.log()"),
        ev0("return redis.log(99, 'x')"),
        ev0("return redis.log('a', 'x')"),
        ev0("return {redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING}"),
        ev0("return {redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA}"),
        ev0("return redis.REPL_ALL"),
        ev0("return redis.set_repl()"),
        ev0("return redis.set_repl(99)"),
        ev0("return redis.set_repl(redis.REPL_ALL)"),
        ev0("return redis.setresp()"),
        ev0("return redis.setresp(4)"),
        ev0("return redis.setresp(2)"),
        ev0("return redis.replicate_commands()"),
        ev0("return redis.breakpoint()"),
        ev0("return redis.debug('x')"),
        ev0("return type(redis.REDIS_VERSION)"),
        ev0("return type(redis.REDIS_VERSION_NUM)"),
        ev0("return redis.acl_check_cmd('get', 'k')"),
        ev0("return redis.acl_check_cmd('nosuch')"),
    ],
    "read_only": [
        ["EVAL_RO", "return redis.call('set', 'a', 1)", "0"],
        ["EVAL_RO", "return redis.call('get', 'a')", "0"],
        ["EVAL_RO", "#!lua\nreturn 1", "0"],
        ["EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"],
        ["EVAL", "#!lua flags=no-writes\nreturn redis.call('set', 'a', 1)", "0"],
        ["EVAL", "#!lua flags=no-writes,allow-oom\nreturn redis.call('get', 'a')", "0"],
        ["EVAL", "#!lua\nreturn redis.call('set', 'a', 1)", "0"],
        ["EVAL", "#!lua flags=foo\nreturn 1", "0"],
        ["EVAL", "#!lua foo=bar\nreturn 1", "0"],
        ["EVAL", "#!luax\nreturn 1", "0"],
        ["EVAL", "#!lua", "0"],
        ["EVAL", "#!lua name=x\nreturn 1", "0"],
        ["EVAL", "#!lua flags=\nreturn 1", "0"],
        ["EVAL", "#!lua\n\nerror('line')", "0"],
    ],
    "cjson": [
        ev0("return cjson.encode({1,2,3})"),
        ev0("return cjson.encode({a=1})"),
        ev0("return cjson.encode({})"),
        ev0("return cjson.encode({1,{2,{x='y'}},'s'})"),
        ev0(r"return cjson.encode('a/b\"c\\d\n\t\1\127' .. string.char(195, 169))"),
        ev0("return cjson.encode({1.5, 1e20, 0.1, -0, 1/3, 123456789012345})"),
        ev0("return cjson.encode(cjson.null)"),
        ev0("return cjson.encode(nil)"),
        ev0("return cjson.encode(true)"),
        ev0("return cjson.encode({[1]=1,[5]=2})"),
        ev0("return cjson.encode({[1]=1,[20]=2})"),
        ev0("return cjson.encode({[true]=1})"),
        ev0("return cjson.encode(function() end)"),
        ev0("return cjson.encode(1/0)"),
        ev0("return cjson.encode({1,2,a=3})"),
        ev0("return cjson.encode({[1.5]=1})"),
        ev0("return cjson.encode({['a']={}})"),
        ev0("return cjson.encode()"),
        ev0("return cjson.decode('[1,2,3]')"),
        ev0('return cjson.decode(\'{"a":[1,{"b":"c"}]}\').a[2].b'),
        ev0("return type(cjson.decode('null'))"),
        ev0("return tostring(cjson.decode('null'))"),
        ev0(r"""return cjson.decode('"\\u00e9\\n\\/"')"""),
        ev0(r"""return cjson.decode('"\\ud83d\\ude00"')"""),
        ev0("return cjson.decode('1.5e3')"),
        ev0("return cjson.decode('[1,2')"),
        ev0("return cjson.decode('{\"a\" 1}')"),
        ev0("return cjson.decode('{1:2}')"),
        ev0("return cjson.decode('{\"a\":1,}')"),
        ev0("return cjson.decode('tru')"),
        ev0("return cjson.decode('')"),
        ev0("return cjson.decode('[1] x')"),
        ev0("return cjson.decode('\"abc')"),
        ev0(r"""return cjson.decode('"\\q"')"""),
        ev0("return cjson.decode()"),
        ev0("return {cjson.decode('[1,null,3]')[3], type(cjson.decode('[1,null,3]')[2])}"),
        ev0("return cjson.decode('{\"1\":2}')['1']"),
        ev0("return cjson.decode('-0')"),
        ev0("return cjson.decode('[1.0, 2, -3.25, true, false]')"),
        ev0("return {cjson._NAME, cjson._VERSION, type(cjson.new)}"),
        ev0("local ok, e = pcall(cjson.decode, '[') return e"),
        ev0('return cjson.encode(cjson.decode(\'{"k":[1,2,{"n":null}]}\'))'),
    ],
    "bit": [
        ev0("return {bit.band(7, 3), bit.bor(1, 2, 4), bit.bxor(5, 3), bit.bnot(0)}"),
        ev0("return {bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-256, 4)}"),
        ev0("return {bit.rol(0x12345678, 8), bit.ror(0x12345678, 8), bit.bswap(0x12345678)}"),
        ev0("return {bit.tobit(0xffffffff), bit.tobit(2^32 + 5), bit.tobit(1.5), bit.tobit(2.5)}"),
        ev0("return {bit.tohex(255), bit.tohex(-1), bit.tohex(255, 2), bit.tohex(255, -4)}"),
        ev0("return bit.band()"),
        ev0("return bit.band('x')"),
        ev0("return bit.band('12', 4)"),
        ev0("return bit.lshift(1)"),
    ],
    "cmsgpack": [
        ev0("return cmsgpack.pack({1,2,3})"),
        ev0("return cmsgpack.pack({a=1})"),
        ev0("return cmsgpack.pack(1.5, -1, 300, 'x', true, nil)"),
        ev0("return {cmsgpack.unpack(cmsgpack.pack(1, 'a', {1,2}))}"),
        ev0("return cmsgpack.unpack(cmsgpack.pack({a=5})).a"),
        ev0("return cmsgpack.pack()"),
        ev0("return cmsgpack.unpack('\\193')"),
        ev0("return cmsgpack.unpack('\\205\\1')"),
        ev0("return {cmsgpack.unpack_one(cmsgpack.pack(1, 2))}"),
        ev0("return {cmsgpack.unpack_limit(cmsgpack.pack(1, 2, 3), 2)}"),
        ev0("return {cmsgpack.unpack_one(cmsgpack.pack(7), 0)}"),
        ev0("return cmsgpack.pack(0.1)"),
        ev0("return cmsgpack.pack(-0.0, 1e100, 2^63)"),
        ev0("return cmsgpack.pack({}, {{{{{{{{{{{{{{{{{{1}}}}}}}}}}}}}}}}}})"),
        ev0("return cmsgpack.pack(string.rep('x', 40), string.rep('y', 300))"),
        ev0("return cmsgpack.pack(-33, -129, -40000, -3000000000, 70000, 5000000000)"),
        ev0(
            "return {cmsgpack.unpack(cmsgpack.pack(-33, -129, -40000, -3000000000, "
            "70000, 5000000000, 1.5))}"
        ),
    ],
    "struct": [
        ev0("return struct.pack('>I2', 258)"),
        ev0("return {struct.unpack('>I2', '\\1\\2')}"),
        ev0("return struct.size('>i4d')"),
        ev0("return struct.pack('<i4s', 1, 'ab')"),
        ev0(
            "return {struct.unpack('bBhHlLi3c2', "
            "struct.pack('bBhHlLi3c2', -1, 255, -2, 65535, -3, 4, 5, 'zz'))}"
        ),
        ev0("return struct.pack('q', 1)"),
        ev0("return struct.pack('i17', 1)"),
        ev0("return struct.pack('>d', 1.5)"),
        ev0("return {struct.unpack('c0', struct.pack('c0', 'abc'))}"),
        ev0("return {struct.unpack('!4 b i', struct.pack('!4 b i', 1, 2))}"),
        ev0("return {struct.unpack('i1c0', struct.pack('i1c0', 3, 'abc'))}"),
        ev0("return {struct.unpack('>f', struct.pack('>f', 0.5))}"),
        ev0("return struct.pack('i')"),
        ev0("return {struct.unpack('>I4', 'ab')}"),
        ev0("return {struct.unpack('s', 'ab\\0cd')}"),
        ev0("return struct.size('s')"),
        ev0("return struct.size('c0')"),
        ev0("return struct.pack('c2')"),
    ],
    "introspection": [
        "COMMAND INFO eval evalsha eval_ro evalsha_ro fcall fcall_ro",
        "COMMAND DOCS eval fcall_ro",
        "COMMAND GETKEYS eval 'return 1' 2 a b c",
        "COMMAND GETKEYS fcall f 1 a b",
        "COMMAND GETKEYS eval 'return 1' 0",
        "COMMAND GETKEYS eval 'return 1' x",
        "COMMAND GETKEYS eval 'return 1' 5 a",
        "COMMAND GETKEYS evalsha_ro abc 1 k",
    ],
    "in_multi": [
        "MULTI",
        ev0("return redis.call('set', 'm', '1')"),
        ev0("return redis.call('incr', 'm')"),
        "EXEC",
        "GET m",
    ],
}


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_bytes_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess, name: str, resp: int
) -> None:
    assert_same(headwater, redis_server, SCENARIOS[name], resp)  # type: ignore[arg-type]


def lib(name: str, body: str) -> str:
    return f"#!lua name={name}\n{body}"


ECHO_LIB = lib(
    "mylib", "redis.register_function('myfunc', function(keys, args) return args[1] end)"
)
RO_LIB = lib(
    "rolib",
    "redis.register_function{function_name='ro', callback=function(k, a) "
    "return redis.call('get', k[1]) end, description='read only', "
    "flags={'no-writes', 'allow-oom'}}",
)
WRITER_LIB = lib(
    "writer",
    "redis.register_function('w', function(k, a) return redis.call('set', k[1], a[1]) end)",
)

FUNCTION_SCENARIOS: dict[str, list[object]] = {
    "function_load_errors": [
        "FUNCTION FLUSH",
        ["FUNCTION", "LOAD", "return 1"],
        ["FUNCTION", "LOAD", ECHO_LIB],
        ["FUNCTION", "LOAD", ECHO_LIB],
        ["FUNCTION", "LOAD", lib("other", "redis.register_function('myfunc', function() end)")],
        ["FUNCTION", "LOAD", lib("empty", "local x = 1")],
        ["FUNCTION", "LOAD", lib("bad-name", "return 1")],
        ["FUNCTION", "LOAD", lib("syn", "return +")],
        ["FUNCTION", "LOAD", lib("rt", "error('boom')")],
        ["FUNCTION", "LOAD", lib("rt", "redis.call('ping')")],
        ["FUNCTION", "LOAD", lib("rt", "redis.setresp(3)")],
        ["FUNCTION", "LOAD", lib("rt", "local x = string.len")],
        ["FUNCTION", "LOAD", "#!lua\nreturn 1"],
        ["FUNCTION", "LOAD", "#!lua name=zz"],
        ["FUNCTION", "LOAD", "#!lua name=zz\n"],
        ["FUNCTION", "LOAD", "#!lua"],
        ["FUNCTION", "LOAD", "#!js name=zz\n"],
        ["FUNCTION", "LOAD", "#!lua name=a name=b\nreturn 1"],
        ["FUNCTION", "LOAD", "#!lua name=a foo=b\nreturn 1"],
        ["FUNCTION", "LOAD", lib("rf", "redis.register_function()")],
        ["FUNCTION", "LOAD", lib("rf", "redis.register_function('a-b', function() end)")],
        ["FUNCTION", "LOAD", lib("rf", "redis.register_function('ab', 5)")],
        ["FUNCTION", "LOAD", lib("rf", "redis.register_function(5, function() end)")],
        [
            "FUNCTION",
            "LOAD",
            lib(
                "rf",
                "redis.register_function{function_name='ab', callback=function() end, "
                "flags={'no-writes', 'foo'}}",
            ),
        ],
        [
            "FUNCTION",
            "LOAD",
            lib("rf", "redis.register_function{function_name='ab', callback=function() end, x=1}"),
        ],
        ["FUNCTION", "LOAD", lib("rf", "redis.register_function{callback=function() end}")],
        ["FUNCTION", "LOAD", lib("rf", "redis.register_function{function_name='ab'}")],
        [
            "FUNCTION",
            "LOAD",
            lib(
                "rf",
                "redis.register_function('f1', function() end) "
                "redis.register_function('f1', function() end)",
            ),
        ],
        ["FUNCTION", "LOAD", lib("loops", "while true do end")],
        ["FUNCTION", "LOAD", "REPLACE", ECHO_LIB],
        ["FUNCTION", "LOAD", "FOO", ECHO_LIB],
        "~ FUNCTION LIST",  # (two libraries: in hash order)
    ],
    "fcall": [
        "FUNCTION FLUSH",
        ["FUNCTION", "LOAD", ECHO_LIB],
        ["FUNCTION", "LOAD", RO_LIB],
        ["FUNCTION", "LOAD", WRITER_LIB],
        "FCALL myfunc 0 hello",
        "FCALL nosuch 0",
        "FCALL myfunc -1",
        "FCALL myfunc 2 a",
        "FCALL myfunc x",
        "FCALL_RO myfunc 0 x",
        "FCALL w 1 k v",
        "FCALL_RO ro 1 k",
        "FCALL ro 1 k",
        "FCALL_RO w 1 k v",
        [
            "FUNCTION",
            "LOAD",
            lib(
                "t6",
                "redis.register_function{function_name='t6', callback=function(k, a) "
                "return redis.call('set', 'x', 1) end, flags={'no-writes'}}",
            ),
        ],
        "FCALL t6 0",
        [
            "FUNCTION",
            "LOAD",
            lib("t3", "redis.register_function('t3', function() return KEYS end)"),
        ],
        "FCALL t3 0",
        [
            "FUNCTION",
            "LOAD",
            lib(
                "t4",
                "redis.register_function('t4', function(k, a) "
                "return {#k, #a, k[1], a[1], type(string)} end)",
            ),
        ],
        "FCALL t4 1 a b c",
        "FCALL t4 1_0 a",
        "FCALL t4 +1 a",
        "FCALL t4 x a",
        "FCALL t4 -1 a",
        "FCALL t4 2 a",
        "FUNCTION DELETE nosuch",
        "FUNCTION DELETE t4",
        "FCALL t4 0",
        "FUNCTION KILL",
        "FUNCTION FLUSH foo",
        "FUNCTION FLUSH ASYNC",
        "FCALL myfunc 0",
    ],
    "function_list": [
        "FUNCTION FLUSH",
        "FUNCTION LIST",
        ["FUNCTION", "LOAD", RO_LIB],
        "FUNCTION LIST",
        "FUNCTION LIST WITHCODE",
        "FUNCTION LIST LIBRARYNAME ro*",
        "FUNCTION LIST LIBRARYNAME x*",
        "FUNCTION LIST LIBRARYNAME RO*",  # (Redis matches library names without case)
        "FUNCTION LIST LIBRARYNAME ro* WITHCODE",
        "FUNCTION LIST foo",
        "FUNCTION LIST LIBRARYNAME",
        "FUNCTION LIST WITHCODE WITHCODE",
        "FUNCTION STATS",
        "FUNCTION RESTORE garbage",
        "FUNCTION RESTORE garbage FOO",
        ["FUNCTION", "RESTORE", b"\xf5\x03abc\x0a\x00" + b"\x00" * 8],
        "FUNCTION FOO",
    ],
}


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("name", sorted(FUNCTION_SCENARIOS))
def test_functions_same_bytes_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess, name: str, resp: int
) -> None:
    assert_same(headwater, redis_server, FUNCTION_SCENARIOS[name], resp)  # type: ignore[arg-type]


def test_function_dump_of_redis_restores_here_and_back(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    """Payloads move both ways (Redis compresses code over 20 bytes with LZF)."""
    from tests.helpers import RawClient

    theirs, ours = RawClient(redis_server.port), RawClient(headwater.port)
    try:
        for client in (theirs, ours):
            client.call("FUNCTION", "FLUSH")
        for code in (ECHO_LIB, RO_LIB):
            theirs.call("FUNCTION", "LOAD", code)
        payload = _bulk(theirs.call("FUNCTION", "DUMP"))
        assert ours.call("FUNCTION", "RESTORE", payload) == b"+OK\r\n"
        listing = "FUNCTION LIST LIBRARYNAME {} WITHCODE"
        for name in ("mylib", "rolib"):
            want = theirs.call(*listing.format(name).split())
            assert ours.call(*listing.format(name).split()) == want
        assert ours.call("FCALL", "myfunc", "0", "hi") == b"$2\r\nhi\r\n"
        back = _bulk(ours.call("FUNCTION", "DUMP"))
        theirs.call("FUNCTION", "FLUSH")
        assert theirs.call("FUNCTION", "RESTORE", back) == b"+OK\r\n"
        assert theirs.call("FCALL", "myfunc", "0", "hi") == b"$2\r\nhi\r\n"
        assert ours.call("FUNCTION", "RESTORE", payload).startswith(b"-ERR Library ")
    finally:
        theirs.close()
        ours.close()


def _bulk(reply: bytes) -> bytes:
    header, _, rest = reply.partition(b"\r\n")
    return rest[: int(header[1:])]


# -- the conversion table, generated -------------------------------------------------------------

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.helpers import RawClient  # noqa: E402

_scalar = st.one_of(
    st.integers(-(2**40), 2**40).map(str),
    st.sampled_from(["0.5", "-2.75", "3.99", "-0.0", "1e300", "1/0", "0/0"]),
    st.text("ab \r\n\x00é", max_size=6).map(
        lambda s: '"' + "".join(f"\\{b}" for b in s.encode()) + '"'  # any byte, quoted
    ),
    st.sampled_from(["true", "false", "nil", "redis.call('ping')", "redis.pcall('nosuch')"]),
)


_value = st.recursive(
    _scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "{" + ", ".join(xs) + "}"),
        inner.map(lambda x: "{ok=" + x + "}"),
        inner.map(lambda x: "{err=" + x + "}"),
        st.sampled_from(["{double=0.5}", "{double=-3}", "{big_number='123456789012345678901'}"]),
        inner.map(lambda x: "{map={k=" + x + "}}"),
        st.sampled_from(["{set={x=true}}", "{set={}}", "{map={}}"]),
        st.sampled_from(["{verbatim_string={format='txt', string='v'}}"]),
    ),
    max_leaves=8,
)


@settings(
    max_examples=int(os.environ.get("HW_CONVERSION_EXAMPLES", "40")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(value=_value, script_resp=st.sampled_from([2, 3]), resp=st.sampled_from([2, 3]))
def test_lua_values_convert_as_redis_converts_them(
    headwater: ServerProcess, redis_server: ServerProcess, value: str, script_resp: int, resp: int
) -> None:
    body = f"redis.setresp({script_resp}) return " + value
    replies = []
    for server in (headwater, redis_server):
        client = RawClient(server.port)
        try:
            if resp == 3:
                client.call("HELLO", "3")
            replies.append(client.call("EVAL", body, "0"))
        finally:
            client.close()
    assert replies[0] == replies[1], body
