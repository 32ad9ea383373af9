"""Replication replies against a real redis-server 7.0, byte for byte where they are
comparable (issue 17): ROLE of a primary without replicas, WAIT's answers and errors,
REPLICAOF's, REPLCONF's, PSYNC's and FAILOVER's errors, READONLY on a replica, WAIT on a
replica, ROLE of a replica whose primary is down. (A Headwater replica of a Redis primary
is not a goal: the snapshot formats differ.)"""

from __future__ import annotations

import time
from collections.abc import Iterator

import hiredis
import pytest

from tests.helpers import (
    RawClient,
    ServerProcess,
    encode_command,
    free_port,
    start_headwater,
    start_redis,
)

PRIMARY_CASES: list[tuple[str, ...]] = [
    ("ROLE",),
    ("WAIT", "0", "0"),
    ("WAIT", "1", "10"),  # no replica: 0 after the timeout
    ("WAIT", "x", "0"),
    ("WAIT", "1", "x"),
    ("WAIT", "1", "-1"),
    ("WAIT", "1"),
    ("REPLICAOF", "127.0.0.1", "notaport"),
    ("REPLICAOF", "127.0.0.1", "70000"),
    ("REPLICAOF", "NO", "ONE"),
    ("SLAVEOF", "no", "one"),
    ("REPLICAOF", "a"),
    ("REPLCONF", "nonsense", "1"),
    ("REPLCONF", "listening-port"),
    ("REPLCONF", "listening-port", "x"),
    ("REPLCONF", "listening-port", "7000"),
    ("REPLCONF", "capa", "eof", "capa", "psync2"),
    ("PSYNC", "x"),
    ("PSYNC", "?", "notanumber"),
    ("CONFIG", "GET", "replicaof"),
    ("CONFIG", "GET", "repl-backlog-size"),
    ("CONFIG", "SET", "repl-backlog-size", "0"),
    ("CONFIG", "GET", "min-replicas-to-write"),
    ("CONFIG", "GET", "min-slaves-max-lag"),
    ("CONFIG", "GET", "slave-priority"),
    ("CONFIG", "GET", "replica-read-only"),
    ("CONFIG", "GET", "masterauth"),
    ("CLIENT", "KILL", "TYPE", "replica"),
    ("CLIENT", "KILL", "TYPE", "master"),
    # FAILOVER's answers without a replica (issue 33)
    ("FAILOVER",),
    ("FAILOVER", "ABORT"),
    ("FAILOVER", "abort", "x"),
    ("FAILOVER", "TIMEOUT", "0"),
    ("FAILOVER", "TIMEOUT", "-5"),
    ("FAILOVER", "TIMEOUT", "x"),
    ("FAILOVER", "TIMEOUT", "10", "TIMEOUT", "10"),
    ("FAILOVER", "TO", "127.0.0.1"),
    ("FAILOVER", "TO", "127.0.0.1", "x"),
    ("FAILOVER", "TO", "127.0.0.1", "1", "FORCE"),
    ("FAILOVER", "FORCE", "FORCE"),
    ("FAILOVER", "nonsense"),
    ("PSYNC", "?", "-1", "FAILOVER"),
]


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    hw = start_headwater("--appendonly", "no", "--save", "")
    rd = start_redis()
    yield hw, rd
    hw.stop()
    rd.stop()


@pytest.mark.parametrize("argv", PRIMARY_CASES, ids=" ".join)
def test_primary_replies_match_redis(
    servers: tuple[ServerProcess, ServerProcess], argv: tuple[str, ...]
) -> None:
    hw, rd = servers
    hc, rc = RawClient(hw.port), RawClient(rd.port)
    try:
        ours, theirs = hc.call(*argv), rc.call(*argv)
    finally:
        hc.close()
        rc.close()
    assert ours == theirs


def test_psync_in_multi_and_full_resync_line(servers: tuple[ServerProcess, ServerProcess]) -> None:
    hw, rd = servers
    hc, rc = RawClient(hw.port), RawClient(rd.port)
    try:
        for argv in (("MULTI",), ("PSYNC", "?", "-1"), ("SYNC",), ("EXEC",)):
            assert hc.call(*argv) == rc.call(*argv), argv
        ours, theirs = hc.call("PSYNC", "?", "-1"), rc.call("PSYNC", "?", "-1")
        for reply in (ours, theirs):  # +FULLRESYNC <40 hex> <offset>, then the payload
            words = reply.split(b"\r\n")[0].split(b" ")
            assert words[0] == b"+FULLRESYNC" and len(words[1]) == 40 and words[2].isdigit()
    finally:
        hc.close()
        rc.close()


REPLICA_CASES: list[tuple[str, ...]] = [
    ("SET", "k", "v"),
    ("XADD", "s", "*", "a", "1"),
    ("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM"),
    ("XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">"),
    ("XRANGE", "s", "-", "+"),
    ("XREAD", "STREAMS", "s", "0"),
    ("GET", "k"),
    ("WAIT", "0", "0"),
    ("MULTI",),
    ("SET", "k", "v"),
    ("EXEC",),
    ("PING",),
    ("EVAL", "return redis.call('SET','k','v')", "0"),
    ("EVAL", "return redis.pcall('XADD','s','*','a','1')", "0"),
    ("EVAL", "#!lua\nreturn 1", "0"),
    ("EVAL", "#!lua flags=no-writes\nreturn redis.call('GET','k')", "0"),
    ("EVAL_RO", "#!lua\nreturn 1", "0"),
    ("EVAL_RO", "return redis.call('GET','k')", "0"),
    ("FUNCTION", "LOAD", "#!lua name=lib\nredis.register_function('f', function() return 1 end)"),
]


def _decode(raw: bytes) -> list[object]:
    reader = hiredis.Reader()
    reader.feed(raw)
    reply = reader.gets()
    assert isinstance(reply, list)
    return reply


def test_replica_replies_match_redis() -> None:
    """Both replicate a port where nothing listens: read-only, primary down."""
    down = free_port()
    hw = start_headwater("--appendonly", "no", "--save", "", "--replicaof", "127.0.0.1", str(down))
    rd = start_redis("--replicaof", "127.0.0.1", str(down))
    try:
        time.sleep(0.5)
        hc, rc = RawClient(hw.port), RawClient(rd.port)
        for argv in REPLICA_CASES:
            assert hc.call(*argv) == rc.call(*argv), argv
        # REPLCONF GETACK from a client that is not the primary: no reply at all
        for client in (hc, rc):
            client.send_raw(b"*3\r\n$8\r\nREPLCONF\r\n$6\r\nGETACK\r\n$1\r\n*\r\n")
            assert client.call("PING") == b"+PONG\r\n"
        # ROLE: the state names differ only by when each server retries
        ours, theirs = _decode(hc.call("ROLE")), _decode(rc.call("ROLE"))
        assert ours[3] in (b"connect", b"connecting") and theirs[3] in (b"connect", b"connecting")
        assert ours[:3] + ours[4:] == theirs[:3] + theirs[4:]
        # REPLICAOF NO ONE, and to the same primary again
        assert hc.call("REPLICAOF", "127.0.0.1", str(down)) == rc.call(
            "REPLICAOF", "127.0.0.1", str(down)
        )
        assert hc.call("REPLICAOF", "NO", "ONE") == rc.call("REPLICAOF", "NO", "ONE")
        assert hc.call("SET", "k", "v") == rc.call("SET", "k", "v")
        hc.close()
        rc.close()
    finally:
        hw.stop()
        rd.stop()


@pytest.mark.parametrize(
    "blocking",
    [
        ("XREAD", "BLOCK", "0", "STREAMS", "s", "$"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">"),
        ("WAIT", "1", "0"),
    ],
    ids=lambda argv: argv[0],
)
def test_becoming_a_replica_unblocks_waiting_clients(blocking: tuple[str, ...]) -> None:
    """REPLICAOF ends every wait with -UNBLOCKED (an XREADGROUP run later would change the
    group on a replica)."""
    down = free_port()
    replies = []
    for start in (
        lambda: start_headwater("--appendonly", "no", "--save", ""),
        start_redis,
    ):
        server = start()
        try:
            admin, waiter = RawClient(server.port), RawClient(server.port)
            admin.call("XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
            waiter.send_raw(encode_command(*blocking))
            time.sleep(0.2)
            assert admin.call("REPLICAOF", "127.0.0.1", str(down)) == b"+OK\r\n"
            replies.append(waiter.read_reply())
            admin.close()
            waiter.close()
        finally:
            server.stop()
    assert replies[0] == replies[1]
    assert replies[0].startswith(b"-UNBLOCKED")


NOREPLICAS_CASES: list[tuple[str, ...]] = [
    ("CONFIG", "SET", "min-replicas-to-write", "1"),
    ("SET", "k", "v"),
    ("XADD", "s", "*", "a", "1"),
    ("GET", "k"),
    ("EVAL", "return redis.call('SET','k','v')", "0"),
    ("EVAL", "#!lua\nreturn 1", "0"),
    ("EVAL_RO", "#!lua\nreturn 1", "0"),
    ("EVAL", "#!lua flags=no-writes\nreturn 1", "0"),
    ("MULTI",),
    ("SET", "k", "v"),
    ("EXEC",),
    ("CONFIG", "SET", "min-replicas-to-write", "0"),
    ("SET", "k", "v"),
]


def test_min_replicas_refusals_match_redis(servers: tuple[ServerProcess, ServerProcess]) -> None:
    hw, rd = servers
    hc, rc = RawClient(hw.port), RawClient(rd.port)
    try:
        for argv in NOREPLICAS_CASES:
            assert hc.call(*argv) == rc.call(*argv), argv
    finally:
        hc.close()
        rc.close()
