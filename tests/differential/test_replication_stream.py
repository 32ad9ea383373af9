"""The replication stream's commands against a real redis-server 7.0's, read as a replica
reads them (SYNC, then the stream): the same commands sent to both, the same commands
propagated (issue 31). Each case starts with a plain write, so that both have sent their
SELECT before it (Redis 7.0 sends a transaction's SELECT before its MULTI, 7.2+ inside it,
as Headwater does: tests/e2e/test_replication_stream_e2e.py). Timestamps (PEXPIREAT's, an
XCLAIM's TIME) are masked: the two servers' clocks are not the same."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.helpers import (
    RawClient,
    ReplicationStream,
    ServerProcess,
    start_headwater,
    start_redis,
)

_EVAL_ONE = "redis.call('set', KEYS[1], 'v')"
_EVAL_TWO = "redis.call('set', KEYS[1], 'v'); redis.call('incr', 'n')"

CASES: dict[str, list[tuple[str, ...]]] = {
    "transaction with one write": [("MULTI",), ("SET", "foo", "bar"), ("EXEC",)],
    "transaction with several writes": [
        ("MULTI",),
        ("SET", "a", "1"),
        ("GET", "a"),
        ("INCR", "a"),
        ("EXEC",),
    ],
    "empty transaction": [("MULTI",), ("EXEC",)],
    "read-only transaction": [("MULTI",), ("GET", "pre"), ("EXEC",)],
    "transaction whose write changes nothing": [("MULTI",), ("DEL", "nokey"), ("EXEC",)],
    "PUBLISH in a transaction": [("MULTI",), ("PUBLISH", "ch", "m"), ("EXEC",)],
    "SCRIPT LOAD in a transaction": [
        ("MULTI",),
        ("SCRIPT", "LOAD", _EVAL_ONE),
        ("SET", "foo", "bar"),
        ("EXEC",),
    ],
    "SCRIPT FLUSH in a transaction": [
        ("MULTI",),
        ("SCRIPT", "FLUSH"),
        ("SET", "foo", "bar"),
        ("EXEC",),
    ],
    "SCRIPT LOAD and FLUSH alone": [("SCRIPT", "LOAD", _EVAL_ONE), ("SCRIPT", "FLUSH")],
    "script with one write": [("EVAL", _EVAL_ONE, "1", "k")],
    "script with two writes": [("EVAL", _EVAL_TWO, "1", "k")],
    "script in a transaction": [("MULTI",), ("EVAL", _EVAL_ONE, "1", "k"), ("EXEC",)],
    "GETDEL": [("SET", "k", "v"), ("GETDEL", "k"), ("GETDEL", "k")],
    "GETEX": [
        ("SET", "k", "v"),
        ("GETEX", "k", "EX", "100"),
        ("GETEX", "k", "PXAT", "99999999999999"),
        ("GETEX", "k", "PERSIST"),
        ("GETEX", "k"),
        ("GETEX", "k", "EXAT", "1"),
        ("SET", "k", "v"),
        ("GETEX", "k", "PXAT", "1"),
        ("GETEX", "k", "PXAT", "1"),
    ],
    "SPOP of every member": [
        ("SADD", "set", "a", "b", "c"),
        ("SPOP", "set", "3"),
        ("SADD", "set", "a", "b", "c"),
        ("SPOP", "set", "4"),
    ],
    "XCLAIM and XAUTOCLAIM creating their consumers": [
        ("XADD", "s", "1-0", "f", "v"),
        ("XADD", "s", "2-0", "f", "v"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("XCLAIM", "s", "g", "a", "0", "1-0", "2-0", "FORCE"),
        ("XCLAIM", "s", "g", "b", "0", "1-0"),
        ("XAUTOCLAIM", "s", "g", "c", "0", "0"),
    ],
    "XREADGROUP NOACK creating its consumer": [
        ("XADD", "s", "1-0", "f", "v"),
        ("XGROUP", "CREATE", "s", "g", "0"),
        ("MULTI",),
        ("XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", "s", ">"),
        ("EXEC",),
    ],
}


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    hw = start_headwater("--appendonly", "no", "--save", "")
    rd = start_redis()
    yield hw, rd
    hw.stop()
    rd.stop()


def _masked(command: list[bytes]) -> list[bytes]:
    return [re.sub(rb"^\d{12,}$", b"<ms>", word) for word in command]


def _propagated(port: int, commands: list[tuple[str, ...]]) -> list[list[bytes]]:
    client = RawClient(port)
    try:
        client.call("FLUSHALL")
        client.call("CONFIG", "SET", "repl-ping-replica-period", "3600")
        stream = ReplicationStream(port)
        try:
            client.call("SET", "pre", "1")
            for command in commands:
                client.call(*command)
            return [_masked(command) for command in stream.commands()]
        finally:
            stream.close()
    finally:
        client.close()


@pytest.mark.parametrize("name", CASES)
def test_stream_matches_redis(servers: tuple[ServerProcess, ServerProcess], name: str) -> None:
    hw, rd = servers
    ours = _propagated(hw.port, CASES[name])
    theirs = _propagated(rd.port, CASES[name])
    assert ours == theirs
    assert ours[:2] == [[b"SELECT", b"0"], [b"SET", b"pre", b"1"]]  # (the stream was read)
