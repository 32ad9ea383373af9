"""EXEC when the server's state changed after the commands were queued, against a real
redis-server 7.0 (issue 31; Redis's unit/multi.tcl has the same cases): a second client
raises ``min-replicas-to-write`` (NOREPLICAS), or makes the server a replica of nowhere with
``replica-serve-stale-data no`` (MASTERDOWN), between MULTI and EXEC; and SMOVE of a member
the destination already holds leaves a WATCH on the destination alone."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.helpers import RawClient, ServerProcess, start_headwater, start_redis

Session = Callable[[RawClient, RawClient], list[bytes]]


def _noreplicas_at_exec(a: RawClient, b: RawClient) -> list[bytes]:
    out = [a.call("SET", "xx", "1"), a.call("MULTI"), a.call("INCR", "xx")]
    b.call("CONFIG", "SET", "min-replicas-to-write", "2")
    out += [a.call("EXEC"), a.call("GET", "xx")]
    out += [a.call("MULTI"), a.call("GET", "xx"), a.call("EXEC")]  # reads only: it runs
    b.call("CONFIG", "SET", "min-replicas-to-write", "0")
    return out


def _masterdown(a: RawClient, b: RawClient) -> list[bytes]:
    out = [a.call("SET", "xx", "1"), a.call("CONFIG", "SET", "replica-serve-stale-data", "no")]
    out += [a.call("CONFIG", "GET", "slave-serve-stale-data")]
    out += [a.call("MULTI"), a.call("GET", "xx")]
    b.call("REPLICAOF", "localhsot", "0")  # (a name that never resolves: the link stays down)
    out += [a.call("EXEC"), a.call("GET", "xx"), a.call("PING")]
    out += [a.call("MULTI"), a.call("GET", "xx"), a.call("EXEC")]  # MULTI is allowed, GET not
    out += [a.call("CONFIG", "GET", "replica-serve-stale-data")]
    b.call("REPLICAOF", "NO", "ONE")
    out += [a.call("GET", "xx"), a.call("CONFIG", "SET", "slave-serve-stale-data", "yes")]
    return out


def _refused_while_queueing(a: RawClient, b: RawClient) -> list[bytes]:
    """A command refused while queueing (the state changed between two queued commands)
    dooms the transaction: EXEC runs none of them."""
    out = [a.call("DEL", "k1", "k2"), a.call("CONFIG", "SET", "replica-serve-stale-data", "no")]
    out += [a.call("MULTI"), a.call("SET", "k1", "v")]
    b.call("REPLICAOF", "localhsot", "0")
    out += [a.call("GET", "k1")]
    b.call("REPLICAOF", "NO", "ONE")
    out += [a.call("SET", "k2", "v"), a.call("EXEC"), a.call("EXISTS", "k1", "k2")]
    out += [a.call("CONFIG", "SET", "replica-serve-stale-data", "yes")]
    return out


def _smove_watch(a: RawClient, b: RawClient) -> list[bytes]:
    out = [a.call("DEL", "src", "dst"), b.call("SADD", "src", "m", "n"), b.call("SADD", "dst", "m")]
    out += [a.call("WATCH", "dst"), b.call("SMOVE", "src", "dst", "m")]  # m already in dst
    out += [a.call("MULTI"), a.call("PING"), a.call("EXEC")]
    out += [a.call("WATCH", "dst"), b.call("SMOVE", "src", "dst", "n")]  # n added: touched
    out += [a.call("MULTI"), a.call("PING"), a.call("EXEC")]
    return out


SESSIONS: dict[str, Session] = {
    "NOREPLICAS at EXEC": _noreplicas_at_exec,
    "MASTERDOWN at EXEC and per command": _masterdown,
    "a command refused while queueing": _refused_while_queueing,
    "SMOVE and WATCH": _smove_watch,
}


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    hw = start_headwater("--appendonly", "no", "--save", "")
    rd = start_redis()
    yield hw, rd
    hw.stop()
    rd.stop()


def _run(port: int, session: Session) -> list[bytes]:
    a, b = RawClient(port), RawClient(port)
    try:
        return session(a, b)
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("name", SESSIONS)
def test_matches_redis(servers: tuple[ServerProcess, ServerProcess], name: str) -> None:
    hw, rd = servers
    assert _run(hw.port, SESSIONS[name]) == _run(rd.port, SESSIONS[name])
