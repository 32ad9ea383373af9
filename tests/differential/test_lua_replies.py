"""A script's result as a reply, against Debian's redis-server (7.0, which converts as 7.4
does): raw table reads (``_G``, a metatable whose ``__index`` errors or calls Redis: never
run), and Redis's Lua stack bound on deep and cyclic tables (arrays, maps and sets each nest
by their own step), where ``-ERR reached lua stack limit`` stands for what is deeper.

The deep replies are read without recursion (``read_whole_reply``): ~8000 nested arrays."""

from __future__ import annotations

import pytest

from tests.differential.harness import assert_same
from tests.helpers import RawClient, ServerProcess


def ev0(body: str) -> list[str]:
    return ["EVAL", body, "0"]


RAW_READS = [
    ev0("return _G"),
    ev0("local a = {}; setmetatable(a, {__index=function() foo() end}) return a"),
    [
        "EVAL",
        "local a = {}; setmetatable(a, {__index=function() redis.call('set', 'x', '1') end}) "
        "return a",
        "1",
        "x",
    ],
    "GET x",
    ev0("local a = setmetatable({1, 2}, {__index=function(t, k) return k end}) return a"),
    ev0("return setmetatable({}, {__index={err='hidden'}})"),
    ev0("return setmetatable({}, {__index={ok='hidden'}})"),
    ev0("return setmetatable({map={a=1}}, {__index={err='hidden'}})"),
    ev0("return {map=setmetatable({}, {__index={a=1}})}"),
    ev0("return {setmetatable({}, {__index=function() error('x') end}), 'after'}"),
    ev0("return {verbatim_string=setmetatable({}, {__index={format='txt', string='v'}})}"),
    ev0("return type(getmetatable(_G))"),
]


CJSON_AND_GLOBALS = [
    ev0(
        "return {cjson.encode_max_depth(), cjson.decode_max_depth(), "
        "tostring(cjson.encode_invalid_numbers())}"
    ),
    ev0(
        "cjson.encode_max_depth(1); local ok, e = pcall(cjson.encode, {a={1}}); "
        "cjson.encode_max_depth(1000); return {tostring(ok), e}"
    ),
    ev0("return {pcall(cjson.encode, {a={1}})}"),
    ev0(
        'cjson.decode_max_depth(1); local ok, e = pcall(cjson.decode, \'{"o": {"a": [1]}}\'); '
        "cjson.decode_max_depth(1000); return {tostring(ok), e}"
    ),
    ev0(
        "cjson.encode_invalid_numbers(true); local r = cjson.encode({0/0, 1/0, -1/0}); "
        "cjson.encode_invalid_numbers(false); return r"
    ),
    ev0(
        "cjson.encode_invalid_numbers('null'); local r = cjson.encode({0/0, 1/0}); "
        "return {r, cjson.encode_invalid_numbers(false)}"
    ),
    ev0("return pcall(cjson.encode, {0/0})"),
    ev0("return {cjson.encode_max_depth(2), cjson.encode_max_depth(1000)}"),
    ev0("return type(getmetatable(_G))"),
    ev0("return type(getmetatable(_G).__index)"),
    ev0("local g = getmetatable(_G); g.__index = {}"),
    ev0("setmetatable(_G, {})"),
    ev0("return rawget(getmetatable(_G), '__metatable')"),
]


@pytest.mark.parametrize("resp", [2, 3])
def test_cjson_settings_and_the_globals_metatable(
    headwater: ServerProcess, redis_server: ServerProcess, resp: int
) -> None:
    assert_same(headwater, redis_server, CJSON_AND_GLOBALS, resp)  # type: ignore[arg-type]


@pytest.mark.parametrize("resp", [2, 3])
def test_tables_are_read_raw(
    headwater: ServerProcess, redis_server: ServerProcess, resp: int
) -> None:
    assert_same(headwater, redis_server, RAW_READS, resp)  # type: ignore[arg-type]


def read_whole_reply(client: RawClient) -> bytes:
    """One reply of any depth: the count of values still to read, kept while reading."""
    pos, missing = 0, 1
    while missing:
        end = client._line(pos)
        kind, head = client.buf[pos : pos + 1], client.buf[pos + 1 : end]
        pos, missing = end + 2, missing - 1
        if kind == b"$" and head != b"-1":
            while len(client.buf) < pos + int(head) + 2:
                client._fill()
            pos += int(head) + 2
        elif kind in (b"*", b"~") and head != b"-1":
            missing += int(head)
        elif kind == b"%":
            missing += 2 * int(head)
    reply, client.buf = client.buf[:pos], client.buf[pos:]
    return reply


DEEP = {
    "cyclic array": "local a = {}; local b = {a}; a[1] = b; return a",
    "cyclic map value": "local m = {}; local a = {map=m}; m['k'] = a; return a",
    "cyclic map key": "local m = {}; local a = {map=m}; m[a] = 1; return a",
    "cyclic set": "local m = {}; local a = {set=m}; m[a] = true; return a",
    "deep below the bound": "local t = {} for i = 1, 7993 do t = {t} end return t",
    "deep past the bound": "local t = {} for i = 1, 7996 do t = {'x', t} end return t",
    "deep errors": "local t = {err='E end'} for i = 1, 7996 do t = {t, {err='E x'}} end return t",
}


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("name", sorted(DEEP))
def test_deep_and_cyclic_tables_stop_where_redis_stops(
    headwater: ServerProcess, redis_server: ServerProcess, name: str, resp: int
) -> None:
    replies = []
    for server in (headwater, redis_server):
        client = RawClient(server.port)
        try:
            if resp == 3:
                client.call("HELLO", "3")
            client.send_raw(
                b"*3\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n0\r\n"
                % (len(DEEP[name]), DEEP[name].encode())
            )
            replies.append(read_whole_reply(client))
            assert client.call("PING") == b"+PONG\r\n"
        finally:
            client.close()
    assert replies[0] == replies[1]


def test_a_function_returning_a_cyclic_table(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    code = (
        "#!lua name=cyc\nredis.register_function('cyc', function() "
        "local a = {}; local b = {a}; a[1] = b; return a end)"
    )
    replies = []
    for server in (headwater, redis_server):
        client = RawClient(server.port)
        try:
            client.call("FUNCTION", "LOAD", "REPLACE", code)
            client.send_raw(b"*3\r\n$5\r\nFCALL\r\n$3\r\ncyc\r\n$1\r\n0\r\n")
            replies.append(read_whole_reply(client))
        finally:
            client.call("FUNCTION", "FLUSH")
            client.close()
    assert replies[0] == replies[1]
    assert replies[0].endswith(b"*1\r\n-ERR reached lua stack limit\r\n")


ERROR_SOURCES = [
    ev0("return redis.error_reply('MY_ERR custom')"),
    ev0("return redis.error_reply('')"),
    ev0("return redis.pcall('select', 99)"),  # (counted once: by SELECT)
    ev0("return redis.call('select', 99)"),
    ev0("local t = redis.pcall('nosuch'); return 1"),  # (a rejection: counted then)
    ["EVAL_RO", "return redis.call('set', 'x', 'y')", "1", "x"],
    ev0("error('boom')"),
    ev0("return {redis.error_reply('NESTED x'), redis.pcall('select', 99)}"),
]


def _error_counts(client: RawClient) -> list[str]:
    lines = []
    for section in ("errorstats", "stats", "commandstats"):
        info = client.call("INFO", section).decode()
        for line in info.split("\r\n"):
            if line.startswith(("errorstat_", "total_error_replies")):
                lines.append(line)
            elif line.startswith(("cmdstat_select:", "cmdstat_set:", "cmdstat_eval_ro:")):
                calls = [part for part in line.split(",") if "_calls=" in part]
                lines.append(line.split(":")[0] + ":" + ",".join(calls))
    return sorted(lines)


def test_script_errors_are_counted_once_as_redis_counts_them(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    counts = []
    for server in (headwater, redis_server):
        client = RawClient(server.port)
        try:
            client.call("CONFIG", "RESETSTAT")
            for command in ERROR_SOURCES:
                client.call(*command)
            counts.append(_error_counts(client))
        finally:
            client.close()
    assert counts[0] == counts[1]
    assert "errorstat_MY_ERR:count=1" in counts[0]
