"""The replication stream held back (``repl-stream-hold-us``, replication/hold.py) between
real Headwater processes: what is held goes out when the hold ends, counts in the primary's
offset meanwhile, and never delays a WAIT nor breaks a full or partial sync started while
bytes are held. A 2 s hold makes "held" observable without racing the clock."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest
import redis

from tests.helpers import ServerProcess, start_headwater
from tests.support.replicas import connect, in_step, info, link_up, wait_until

pytestmark = pytest.mark.e2e

HOLD_US = 2_000_000
#: replicas fsync each write, so that WAITAOF's answer does not wait for a second's fsync
REPLICA_AOF = ("--appendonly", "yes", "--appendfsync", "always")


@pytest.fixture
def trio() -> Iterator[tuple[ServerProcess, ServerProcess, ServerProcess]]:
    servers = (
        start_headwater("--repl-stream-hold-us", str(HOLD_US)),
        start_headwater("--repl-timeout", "5", *REPLICA_AOF),
        start_headwater("--repl-timeout", "5", *REPLICA_AOF),
    )
    yield servers
    for server in reversed(servers):
        server.stop()


def length_on(r: redis.Redis, key: str) -> int:
    return int(r.xlen(key))


def held_write(primary: redis.Redis, replica: redis.Redis, entry_id: str) -> None:
    """An XADD (and an INCR, which a sync that repeated it would count twice) that the
    primary holds back: it is in the primary's offset, not on the replica half a second
    later."""
    before = info(primary)["master_repl_offset"]
    primary.xadd("s", {"f": entry_id}, id=entry_id)
    primary.incr("writes")
    assert info(primary)["master_repl_offset"] > before
    time.sleep(0.5)
    assert replica.xrange("s", entry_id, entry_id) == []
    assert info(replica)["slave_repl_offset"] < info(primary)["master_repl_offset"]


def attached(primary_p: ServerProcess, replica_p: ServerProcess) -> tuple[redis.Redis, redis.Redis]:
    """Clients of a primary and of a replica attached to it, in step."""
    primary, replica = connect(primary_p), connect(replica_p)
    replica.execute_command("REPLICAOF", "127.0.0.1", primary_p.port)
    wait_until(lambda: in_step(primary, replica), what="sync")
    return primary, replica


def write_then_hold(primary: redis.Redis, replica: redis.Redis) -> None:
    """Entry 1-0 (sent at once or held), then 2-0 within the hold that 1-0 started: held."""
    primary.xadd("s", {"f": "1"}, id="1-0")
    held_write(primary, replica, "2-0")


def test_a_held_stream_goes_out_when_the_hold_ends(
    trio: tuple[ServerProcess, ServerProcess, ServerProcess],
) -> None:
    primary, replica = attached(trio[0], trio[1])
    time.sleep(HOLD_US / 1e6)  # (the sync's last write is older than the hold)
    primary.xadd("s", {"f": "1"}, id="1-0")  # the first write after a quiet spell: at once
    wait_until(lambda: length_on(replica, "s") == 1, timeout=1.0, what="an unheld write")
    held_write(primary, replica, "2-0")  # the next, within the hold: held
    # nothing else happens on the primary: its timer alone sends what is held
    wait_until(lambda: in_step(primary, replica), timeout=HOLD_US / 1e6 + 3, what="the hold")
    assert replica.xrange("s") == primary.xrange("s")


def test_wait_does_not_wait_for_the_hold(
    trio: tuple[ServerProcess, ServerProcess, ServerProcess],
) -> None:
    primary, replica = attached(trio[0], trio[1])
    write_then_hold(primary, replica)
    started = time.monotonic()
    assert primary.execute_command("WAIT", 1, 10_000) == 1
    assert time.monotonic() - started < 1.0  # (the hold would end ~1.5 s from now)
    assert length_on(replica, "s") == 2
    # WAITAOF: the replica's fsync of the held write is confirmed just as soon
    held_write(primary, replica, "3-0")
    started = time.monotonic()
    _local, replicas = primary.execute_command("WAITAOF", 0, 1, 10_000)
    assert replicas == 1  # (local: whether the primary's everysec fsync came meanwhile)
    assert time.monotonic() - started < 1.0
    assert length_on(replica, "s") == 3


def test_syncs_started_while_bytes_are_held(
    trio: tuple[ServerProcess, ServerProcess, ServerProcess],
) -> None:
    primary, first = attached(trio[0], trio[1])
    second = connect(trio[2])
    write_then_hold(primary, first)
    # a full sync now: its snapshot and the stream after it hold each entry exactly once
    second.execute_command("REPLICAOF", "127.0.0.1", trio[0].port)
    wait_until(lambda: in_step(primary, second) and in_step(primary, first), what="syncs")
    assert first.xrange("s") == second.xrange("s") == primary.xrange("s")
    assert length_on(second, "s") == 2
    assert first.get("writes") == second.get("writes") == b"1"
    # a partial resync now: the backlog it continues from has the held bytes
    partial = info(primary, "stats")["sync_partial_ok"]
    held_write(primary, first, "3-0")
    first.execute_command("CLIENT", "KILL", "TYPE", "master")
    wait_until(lambda: in_step(primary, first), what="partial resync")
    assert info(primary, "stats")["sync_partial_ok"] == partial + 1
    assert first.xrange("s") == primary.xrange("s")
    assert length_on(first, "s") == 3
    assert first.get("writes") == b"2"
    wait_until(lambda: in_step(primary, second), what="the second replica")
    assert second.xrange("s") == primary.xrange("s")


def test_hold_zero_sends_every_turn_and_a_shutdown_sends_what_is_held(
    trio: tuple[ServerProcess, ServerProcess, ServerProcess],
) -> None:
    primary, replica = attached(trio[0], trio[1])
    write_then_hold(primary, replica)
    primary.config_set("repl-stream-hold-us", 0)
    assert primary.config_get("repl-stream-hold-us") == {"repl-stream-hold-us": "0"}
    wait_until(lambda: in_step(primary, replica), timeout=3.0, what="the hold")
    for n in range(3, 8):  # each write at once, whatever came just before
        primary.xadd("s", {"f": str(n)}, id=f"{n}-0")
        wait_until(lambda n=n: length_on(replica, "s") == n, timeout=1.0, what=f"write {n}")
    # a clean shutdown sends what is held before it closes the replicas' connections
    primary.config_set("repl-stream-hold-us", HOLD_US)
    time.sleep(HOLD_US / 1e6)
    primary.xadd("s", {"f": "8"}, id="8-0")
    held_write(primary, replica, "9-0")
    with contextlib.suppress(redis.ConnectionError):
        primary.shutdown(nosave=True)
    wait_until(lambda: not link_up(replica), what="the link down")
    assert length_on(replica, "s") == 9


RANGE = "argument must be between 0 and 5000000 inclusive"


@pytest.mark.parametrize(
    ("value", "why"),
    [("-1", RANGE), ("5000001", RANGE), ("soon", "argument couldn't be parsed into an integer")],
)
def test_bad_hold_values_are_refused(value: str, why: str) -> None:
    server = start_headwater()
    try:
        r = connect(server)
        with pytest.raises(redis.ResponseError) as refused:
            r.config_set("repl-stream-hold-us", value)
        assert str(refused.value) == (
            f"CONFIG SET failed (possibly related to argument 'repl-stream-hold-us') - {why}"
        )
        assert r.config_get("repl-stream-hold-us") == {"repl-stream-hold-us": "1000"}
    finally:
        server.stop()
