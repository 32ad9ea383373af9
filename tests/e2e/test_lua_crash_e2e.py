"""Issue #31's crash: a script returning a table that holds itself took the server down
(segfault, exit 139). It answers Redis's nested arrays ending in ``-ERR reached lua stack
limit``, and the server answers PING within a second after."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.differential.test_lua_replies import read_whole_reply
from tests.helpers import RawClient, ServerProcess, start_headwater

pytestmark = pytest.mark.e2e

CYCLIC = [
    "local a = {}; local b = {a}; a[1] = b; return a",
    "local m = {}; local a = {map=m}; m['k'] = a; return a",
    "local t = {} for i = 1, 100000 do t = {t} end return t",
]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    process = start_headwater()
    yield process
    process.stop()


@pytest.mark.parametrize("body", CYCLIC)
def test_the_server_outlives_a_cyclic_result(server: ServerProcess, body: str) -> None:
    client = RawClient(server.port)
    try:
        client.send_raw(
            b"*3\r\n$4\r\nEVAL\r\n$%d\r\n%s\r\n$1\r\n0\r\n" % (len(body), body.encode())
        )
        reply = read_whole_reply(client)
        assert reply.endswith(b"-ERR reached lua stack limit\r\n")
        started = time.monotonic()
        other = RawClient(server.port, timeout=1.0)
        try:
            assert other.call("PING") == b"+PONG\r\n"
        finally:
            other.close()
        assert time.monotonic() - started < 1.0
        assert server.proc.poll() is None
        assert client.call("PING") == b"+PONG\r\n"
    finally:
        client.close()
