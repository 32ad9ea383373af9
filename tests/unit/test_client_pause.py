"""CLIENT PAUSE in the engine (engine/pause.py), on a fake clock: held commands, their end by
timer or UNPAUSE, merges, and a data set that stays still (no DEL effects) while paused."""

from __future__ import annotations

from headwater.engine.pause import pause_end
from tests.unit.conftest import Harness


def test_pause_end_wraps_as_redis_adds_in_64_bits() -> None:
    assert pause_end(1_000, 0) == 0
    assert pause_end(1_000, 500) == 1_500
    assert pause_end(1_000, (1 << 63) - 1) < 0  # overflowed: over before it began


def test_write_pause_holds_writes_until_unpause() -> None:
    h = Harness()
    admin, writer, reader = h.client(), h.client(), h.client()
    h.call(admin, "SET", "r", "1")
    h.effects.clear()
    assert h.call(admin, "CLIENT", "PAUSE", 10_000, "WRITE") == b"OK"
    assert h.call(writer, "SET", "k", "v") is None  # held: no reply yet
    assert writer.gate.blocked is not None
    assert h.call(reader, "GET", "r") == b"1"  # reads go through
    assert h.engine.blocked_count == 1
    assert h.effect_lines() == []
    assert h.call(admin, "CLIENT", "UNPAUSE") == b"OK"
    h.scheduler.advance(0)  # the release runs after the current callback
    assert h.raw(writer) == b"+OK\r\n"
    assert h.engine.blocked_count == 0
    assert h.effect_lines() == [[b"SET", b"k", b"v"]]


def test_pause_ends_at_its_timeout_and_merges_keep_the_later_end() -> None:
    h = Harness()
    admin, writer = h.client(), h.client()
    h.call(admin, "CLIENT", "PAUSE", 1_000, "WRITE")
    h.call(admin, "CLIENT", "PAUSE", 100, "WRITE")  # shorter: the first end stands
    h.call(writer, "INCR", "n")
    h.scheduler.advance(500)
    assert writer.gate.blocked is not None
    h.scheduler.advance(600)
    h.scheduler.advance(0)
    assert h.raw(writer) == b":1\r\n"
    assert h.engine.pause_mode == 0


def test_all_holds_everything_and_a_later_write_pause_does_not_soften_it() -> None:
    h = Harness()
    admin, other = h.client(), h.client()
    h.call(admin, "MULTI")
    h.call(admin, "CLIENT", "PAUSE", 1_000, "ALL")
    h.call(admin, "CLIENT", "PAUSE", 10, "WRITE")
    h.call(admin, "EXEC")
    assert h.call(other, "PING") is None
    assert h.call(admin, "CLIENT", "UNPAUSE") is None  # held too
    h.scheduler.advance(1_001)
    h.scheduler.advance(0)
    assert h.raw(other) == b"+PONG\r\n"
    assert h.raw(admin) == b"+OK\r\n"


def test_expired_keys_stay_and_no_del_is_propagated_while_paused() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "e", "1", "PX", 10)
    h.call(c, "CLIENT", "PAUSE", 10_000, "WRITE")
    h.effects.clear()
    h.clock.advance(50)
    assert h.call(c, "GET", "e") is None
    h.engine.cron()
    assert h.call(c, "DBSIZE") == 1
    assert h.effect_lines() == []
    h.call(c, "CLIENT", "UNPAUSE")
    h.engine.cron()
    assert h.call(c, "DBSIZE") == 0
    assert h.effect_lines() == [[b"DEL", b"e"]]


def test_a_closed_held_client_is_forgotten() -> None:
    h = Harness()
    admin, writer = h.client(), h.client()
    h.call(admin, "CLIENT", "PAUSE", 10_000)
    h.call(writer, "SET", "k", "v")
    h.engine.client_closed(writer)
    assert h.engine.blocked_count == 0
    h.scheduler.advance(10_001)
    h.scheduler.advance(0)
    assert h.call(admin, "EXISTS", "k") == 0
