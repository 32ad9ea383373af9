"""The replication stream where Redis 7.2+ differs from the 7.0 the differential tests run
(issue 31; Redis's own unit/multi.tcl checks the same): a transaction's SELECT comes inside
its MULTI, and XREADGROUP's effects in a transaction are its XCLAIMs and the group's SETIDs,
no CREATECONSUMER (the XCLAIMs create the consumer on the replica)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import RawClient, ReplicationStream, ServerProcess, start_headwater


@pytest.fixture
def attached() -> Iterator[tuple[RawClient, ReplicationStream]]:
    server: ServerProcess = start_headwater("--appendonly", "no", "--save", "")
    client = RawClient(server.port)
    client.call("CONFIG", "SET", "repl-ping-replica-period", "3600")
    stream = ReplicationStream(server.port)
    try:
        yield client, stream
    finally:
        stream.close()
        client.close()
        server.stop()


def test_select_comes_inside_the_multi(attached: tuple[RawClient, ReplicationStream]) -> None:
    client, stream = attached
    for command in (("MULTI",), ("SELECT", "1"), ("SET", "a", "1"), ("SELECT", "2")):
        client.call(*command)
    client.call("SET", "b", "2")
    client.call("EXEC")
    client.call("SELECT", "2")
    client.call("MULTI")
    client.call("SET", "c", "3")
    client.call("SET", "d", "4")
    client.call("EXEC")
    assert stream.commands() == [
        [b"MULTI"],
        [b"SELECT", b"1"],
        [b"SET", b"a", b"1"],
        [b"SELECT", b"2"],
        [b"SET", b"b", b"2"],
        [b"EXEC"],
        [b"MULTI"],  # (already in database 2: no SELECT)
        [b"SET", b"c", b"3"],
        [b"SET", b"d", b"4"],
        [b"EXEC"],
    ]


def test_xreadgroup_in_a_transaction(attached: tuple[RawClient, ReplicationStream]) -> None:
    client, stream = attached
    for n in (1, 2, 3):
        client.call("XADD", "s", f"{n}-0", "f", "v")
    client.call("XGROUP", "CREATE", "s", "g", "0")
    client.call("MULTI")
    client.call("XREADGROUP", "GROUP", "g", "c1", "COUNT", "2", "STREAMS", "s", ">")
    client.call("XREADGROUP", "GROUP", "g", "c1", "STREAMS", "s", ">")
    client.call("EXEC")
    commands = stream.commands()
    assert [command[:2] for command in commands] == [
        [b"SELECT", b"0"],
        [b"XADD", b"s"],
        [b"XADD", b"s"],
        [b"XADD", b"s"],
        [b"XGROUP", b"CREATE"],
        [b"MULTI"],
        [b"XCLAIM", b"s"],
        [b"XCLAIM", b"s"],
        [b"XGROUP", b"SETID"],
        [b"XCLAIM", b"s"],
        [b"XGROUP", b"SETID"],
        [b"EXEC"],
    ]
    assert {command[3] for command in commands if command[0] == b"XCLAIM"} == {b"c1"}


def test_publish_keeps_its_place_in_a_transaction_and_a_script(
    attached: tuple[RawClient, ReplicationStream],
) -> None:
    """PUBLISH goes through the engine's one choke point as an effect for the replicas only:
    inside MULTI … EXEC and a script's transaction, in the order it ran (before, the stream
    got it at once, ahead of the transaction it belonged to). The AOF never gets it."""
    client, stream = attached
    client.call("SELECT", "0")
    for command in (("MULTI",), ("SET", "a", "1"), ("PUBLISH", "ch", "hi"), ("SET", "b", "2")):
        client.call(*command)
    client.call("EXEC")
    script = "redis.call('SET', 'c', '3') redis.call('PUBLISH', 'ch', 'x') return 1"
    client.call("EVAL", script, "0")
    client.call("PUBLISH", "ch", "alone")
    assert stream.commands() == [
        [b"MULTI"],
        [b"SELECT", b"0"],
        [b"SET", b"a", b"1"],
        [b"PUBLISH", b"ch", b"hi"],
        [b"SET", b"b", b"2"],
        [b"EXEC"],
        [b"MULTI"],
        [b"SET", b"c", b"3"],
        [b"PUBLISH", b"ch", b"x"],
        [b"EXEC"],
        [b"PUBLISH", b"ch", b"alone"],
    ]
