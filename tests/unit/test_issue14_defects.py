"""Regression tests for the defects outside tests found (issue #14), at the engine level.

Each test reproduces the defect as it was reported; see also ``tests/e2e/test_issue14_e2e.py``
for the same defects over TCP, and ``test_replay_roundtrip.py`` for the property test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from headwater.engine.replay import FailedCommand, Replayer
from headwater.persistence.aof import encode_command
from tests.unit.conftest import Harness


def _replay(path: Path, fast: bool = True) -> Harness:
    h = Harness()
    h.engine.effect_sinks.clear()
    h.clock.now = 1_800_000_000_000
    replayer = Replayer(h.engine, fast=fast)
    replayer.replay(path, truncate_torn=False)
    replayer.close()
    return h


# -- 1. a trim with ~ and LIMIT is propagated with = and LIMIT: replay must accept it ----------


@pytest.mark.parametrize("strategy", ["MAXLEN", "MINID"])
@pytest.mark.parametrize("command", ["XADD", "XTRIM"])
def test_replay_accepts_the_exact_trim_with_limit_it_wrote(
    tmp_path: Path, strategy: str, command: str
) -> None:
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "stream-node-max-entries", "10")
    for i in range(1, 101):
        h.call(c, "XADD", "s", f"{i}-0", "f", "v")
    threshold = "55" if strategy == "MAXLEN" else "46-0"
    if command == "XADD":
        reply = h.call(c, "XADD", "s", strategy, "~", threshold, "LIMIT", "30", "*", "f", "new")
        assert isinstance(reply, bytes)
    else:
        assert h.call(c, "XTRIM", "s", strategy, "~", threshold, "LIMIT", "30") == 30
    written = h.effects[-1][1]
    assert b"=" in written and b"LIMIT" in written  # the shape that was refused
    expected = h.call(c, "XRANGE", "s", "-", "+")
    path = tmp_path / "a.aof"
    h.write_aof(path)
    for fast in (True, False):
        replayed = _replay(path, fast)
        assert replayed.call(replayed.client(), "XRANGE", "s", "-", "+") == expected


def test_limit_with_equals_is_still_refused_from_clients() -> None:
    h = Harness()
    c = h.client()
    reply = h.call(c, "XADD", "s", "MAXLEN", "=", "5", "LIMIT", "3", "*", "f", "v")
    assert str(reply) == "ERR syntax error, LIMIT cannot be used without the special ~ option"


# -- 1. a command that fails during replay stops the load --------------------------------------


def _file(path: Path, *commands: list[bytes]) -> Path:
    path.write_bytes(b"".join(encode_command(argv) for argv in commands))
    return path


@pytest.mark.parametrize("fast", [True, False])
def test_a_failed_command_stops_the_replay_at_its_offset(tmp_path: Path, fast: bool) -> None:
    first = [b"XADD", b"s", b"5-0", b"f", b"v"]
    path = _file(
        tmp_path / "a.aof", first, [b"XADD", b"s", b"3-0", b"f", b"old"], [b"XADD", b"s", b"9-0"]
    )
    h = Harness()
    h.engine.effect_sinks.clear()
    with pytest.raises(FailedCommand) as info:
        Replayer(h.engine, fast=fast).replay(path, truncate_torn=False)
    assert info.value.offset == len(encode_command(first))
    assert "equal or smaller than the target stream top item" in str(info.value)


def test_a_failed_command_inside_a_transaction_stops_the_replay(tmp_path: Path) -> None:
    path = _file(
        tmp_path / "a.aof",
        [b"SET", b"str", b"x"],
        [b"MULTI"],
        [b"XADD", b"s", b"1-0", b"f", b"v"],
        [b"XADD", b"str", b"2-0", b"f", b"v"],  # WRONGTYPE at EXEC
        [b"EXEC"],
    )
    h = Harness()
    h.engine.effect_sinks.clear()
    with pytest.raises(FailedCommand, match="WRONGTYPE"):
        Replayer(h.engine).replay(path, truncate_torn=False)


def test_nothing_expires_while_a_log_is_replayed(tmp_path: Path) -> None:
    """A command logged while its key was alive finds it alive, however late the replay."""
    h = Harness()
    c = h.client()
    h.call(c, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    h.call(c, "PEXPIRE", "s", "1000")
    h.call(c, "XADD", "s", "*", "f", "v")
    h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">")
    h.call(c, "XGROUP", "CREATECONSUMER", "s", "g", "bob")
    path = tmp_path / "a.aof"
    h.write_aof(path)
    replayed = _replay(path)  # at a time long after the key's deadline
    r = replayed.client()
    assert replayed.engine.keyspace.dbs[0].data[b"s"].length == 1
    assert replayed.call(r, "XLEN", "s") == 0  # expired now that loading is over


# -- 3. a blocked read that is served later counts once ------------------------------------------


def _cmdstat(h: Harness, name: str) -> dict[str, int]:
    info = h.call(h.client(), "INFO", "commandstats").decode()
    found = re.search(
        rf"cmdstat_{name}:calls=(\d+),.*rejected_calls=(\d+),failed_calls=(\d+)", info
    )
    assert found, info
    calls, rejected, failed = map(int, found.groups())
    return {"calls": calls, "rejected": rejected, "failed": failed}


def test_a_blocked_xread_served_later_counts_one_call() -> None:
    h = Harness()
    reader, writer = h.client(), h.client()
    h.call(writer, "XADD", "s", "1-0", "f", "v")
    assert h.call(reader, "XREAD", "BLOCK", "0", "STREAMS", "s", "$") is None  # blocked
    h.call(writer, "XADD", "s", "2-0", "f", "v")
    assert h.raw(reader)
    assert _cmdstat(h, "xread") == {"calls": 1, "rejected": 0, "failed": 0}


def test_a_blocked_xreadgroup_that_fails_later_counts_one_failed_call() -> None:
    h = Harness()
    reader, admin = h.client(), h.client()
    h.call(admin, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    h.call(reader, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    h.call(admin, "XADD", "s", "1-0", "f", "v")  # served: one call
    h.call(reader, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">")
    h.call(admin, "DEL", "s")  # woken, then NOGROUP: one failed call
    assert b"NOGROUP" in h.raw(reader)
    assert _cmdstat(h, "xreadgroup") == {"calls": 2, "rejected": 0, "failed": 1}


def test_a_blocked_read_that_times_out_or_is_unblocked_counts_once() -> None:
    h = Harness()
    reader, admin = h.client(), h.client()
    h.call(reader, "XREAD", "BLOCK", "100", "STREAMS", "s", "$")
    h.scheduler.advance(200)
    assert h.raw(reader) == b"*-1\r\n"
    h.call(reader, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    h.call(admin, "XADD", "t", "1-0", "f", "v")  # another key: still blocked
    assert h.call(admin, "CLIENT", "UNBLOCK", reader.id, "ERROR") == 1
    assert b"UNBLOCKED" in h.raw(reader)
    assert _cmdstat(h, "xread") == {"calls": 2, "rejected": 0, "failed": 1}


# -- 4. the change counter ---------------------------------------------------------------------


def test_an_empty_history_read_changes_nothing() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XGROUP", "CREATE", "s", "g", "0", "MKSTREAM")
    h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0")  # creates alice
    dirty = h.engine.dirty
    effects = len(h.effects)
    assert h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0") == [[b"s", []]]
    assert h.engine.dirty == dirty
    assert len(h.effects) == effects
    h.call(c, "XADD", "s", "1-0", "f", "v")
    h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">")
    dirty = h.engine.dirty
    h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0")  # a redelivery
    # (nor does a redelivery: Redis 7.4.1's "XREADGROUP from PEL does not change dirty")
    assert h.engine.dirty == dirty


# -- 7. XCLAIM RETRYCOUNT with a negative value ------------------------------------------------


@pytest.mark.parametrize("count", ["-1", "-9223372036854775808"])
def test_a_negative_retrycount_is_not_given(count: str) -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XGROUP", "CREATE", "s", "g", "0", "MKSTREAM")
    h.call(c, "XADD", "s", "1-0", "f", "v")
    h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">")
    h.call(c, "XCLAIM", "s", "g", "bob", "0", "1-0", "RETRYCOUNT", count)
    assert h.call(c, "XPENDING", "s", "g", "-", "+", "10")[0][3] == 2  # counted, not stored
    h.call(c, "XCLAIM", "s", "g", "bob", "0", "1-0", "RETRYCOUNT", count, "JUSTID")
    assert h.call(c, "XPENDING", "s", "g", "-", "+", "10")[0][3] == 2


# -- found by the kill -9 campaign: a torn log must not hold part of one command's effects ------


def test_a_torn_log_never_applies_part_of_a_command(tmp_path: Path) -> None:
    """An XREADGROUP's effects (its XCLAIMs, then the group's new position and entries-read)
    travel as one transaction: a crash that cuts the log between them loses the whole read,
    never leaves the group moved without its entries-read."""
    h = Harness()
    c = h.client()
    h.call(c, "XGROUP", "CREATE", "s", "g", "0", "MKSTREAM")
    for i in range(1, 4):
        h.call(c, "XADD", "s", f"{i}-0", "f", "v")
    before = h.call(c, "XINFO", "GROUPS", "s")
    h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">")
    path = tmp_path / "a.aof"
    h.write_aof(path)
    data = path.read_bytes()
    setid = h.effect_lines()[-1]
    assert setid[:2] == [b"XGROUP", b"SETID"]
    cut = data.rindex(encode_command(setid))  # torn just before the group's new position
    path.write_bytes(data[: cut + 5])
    replayed = Harness()
    replayed.engine.effect_sinks.clear()
    Replayer(replayed.engine).replay(path, truncate_torn=True)
    r = replayed.client()
    assert replayed.call(r, "XINFO", "GROUPS", "s") == before  # the read never happened
    assert replayed.call(r, "XPENDING", "s", "g")[0] == 0
