"""Redis 7.2+/7.4 scripting behaviour that Debian's 7.0 does not have (so not differential):
``os`` with only ``os.clock``, WAIT and WAITAOF answering at once inside a script (they no
longer are ``noscript``), and ``redis.call`` with ~8000 arguments (``unpack`` of a big
table)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from tests.helpers import RawClient, start_headwater

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def client() -> Iterator[RawClient]:
    server = start_headwater("--appendonly", "no")  # (WAITAOF's local count: 0)
    raw = RawClient(server.port)
    yield raw
    raw.close()
    server.stop()


def test_os_holds_only_the_clock(client: RawClient) -> None:
    body = (
        "local names = {} for k, v in pairs(os) do names[#names + 1] = k .. ':' .. type(v) end "
        "return names"
    )
    assert client.call("EVAL", body, "0") == b"*1\r\n$14\r\nclock:function\r\n"
    assert client.call("EVAL", "return type(os.clock())", "0") == b"$6\r\nnumber\r\n"
    for name in ("execute", "exit", "getenv", "remove", "rename", "tmpname"):
        reply = client.call("EVAL", f"os.{name}()", "0")
        assert f"attempt to call field '{name}' (a nil value)".encode() in reply
    assert b"readonly table" in client.call("EVAL", "os.execute = function() end", "0")


def test_wait_and_waitaof_answer_at_once_in_a_script(client: RawClient) -> None:
    assert client.call("EVAL", "return redis.pcall('wait', '1', '0')", "0") == b":0\r\n"
    reply = client.call("EVAL", "return redis.pcall('waitaof', '0', '1', '0')", "0")
    assert reply == b"*2\r\n:0\r\n:0\r\n"


@pytest.mark.parametrize("call", ["call", "pcall"])
def test_a_call_with_thousands_of_arguments(client: RawClient, call: str) -> None:
    """The C bridge's redis.call only: lupa's crossing (the pure build) misreads the Python
    object it calls past ~8000 values on Lua's stack, and a Lua wrapper would lose the
    script's line in error replies (``return redis.call(…)`` is a tail call)."""
    if importlib.util.find_spec("headwater._luabridge") is None:
        pytest.skip("the pure build: redis.call through lupa")
    body = (
        "local a = {} for i = 1, 7999 do a[i] = i end "
        f"return redis.{call}('lpush', KEYS[1], unpack(a))"
    )
    client.call("DEL", "l")
    assert client.call("EVAL", body, "1", "l") == b":7999\r\n"
    assert client.call("LINDEX", "l", "0") == b"$4\r\n7999\r\n"
    bad = body.replace("a[i] = i end", "a[i] = i end a[5000] = {}")
    reply = client.call("EVAL", bad, "1", "l")
    assert reply.startswith(b"-ERR Lua redis lib command arguments must be strings or integers")


def test_lua_memory_stays_small_over_many_runs(client: RawClient) -> None:
    """Redis's own bound (``EVAL does not leak in the Lua stack``): a GC step every 50 runs
    (Redis's LUA_GC_CYCLE_PERIOD) keeps the state's garbage from piling up to a full cycle."""
    client.call("SCRIPT", "FLUSH")
    body = b"return redis.call('incr', KEYS[1])"
    one = b"*4\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n1\r\n$1\r\nx\r\n" % (len(body), body)
    highest = 0
    for _ in range(100):
        client.send_raw(one * 100)
        for _ in range(100):
            client.read_reply()
        info = client.call("INFO", "memory").decode()
        highest = max(highest, int(info.split("used_memory_lua:")[1].split("\r\n")[0]))
    assert 0 < highest < 100 * 1024
