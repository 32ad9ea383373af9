"""maxmemory against redis-server 7.0 (issue 33), RESP2 and RESP3: with a limit below what
either server counts and ``noeviction``, the -OOM answers byte for byte: denyoom commands
refused and others served, MULTI refusing what it would queue (EXECABORT after), a script's
first write, CONFIG's settings. Redis counts its own memory and Headwater its data (with a
1 MiB floor for the empty server), so both are over a limit of one byte."""

from __future__ import annotations

import pytest

from tests.differential.harness import assert_same
from tests.helpers import RawClient, ServerProcess

CASES = [
    "CONFIG SET maxmemory 1 maxmemory-policy noeviction",
    "SET k v",
    "GET k",
    "DEL k",
    "XADD s * f v",
    "XLEN s",
    "INCR n",
    "LPUSH l a",
    "PING",
    "MULTI",
    "GET k",
    "DISCARD",
    "MULTI",
    "EXEC",
    "EVAL \"return redis.call('set', 'k', 'v')\" 0",
    "EVAL \"return redis.call('get', 'k')\" 0",
    "EVAL \"return redis.pcall('set', 'k', 'v')\" 0",
    "CONFIG GET maxmemory-policy",
    "CONFIG SET maxmemory-policy bogus",
    "CONFIG SET maxmemory-samples 0",
    "CONFIG SET maxmemory 0",
    "SET k v",
]


@pytest.fixture
def restore(headwater: ServerProcess, redis_server: ServerProcess):  # type: ignore[no-untyped-def]
    yield
    for server in (headwater, redis_server):
        client = RawClient(server.port)
        client.call("CONFIG", "SET", "maxmemory", "0", "maxmemory-policy", "noeviction")
        client.close()


@pytest.mark.parametrize("resp", [2, 3])
def test_oom_answers_match_redis(
    headwater: ServerProcess, redis_server: ServerProcess, restore: None, resp: int
) -> None:
    assert_same(headwater, redis_server, CASES, resp)
