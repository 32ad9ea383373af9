"""Client-side caching through the engine: what redis-server comparisons cannot pin down
in a transcript (expiry by the cron, the table's limit, blocked clients, the cost switch)."""

from __future__ import annotations

from headwater.commands.context import Client
from tests.unit.conftest import Harness

INVALIDATE = b">2\r\n$10\r\ninvalidate\r\n"


def _resp3_tracking(h: Harness, *options: str) -> Client:
    c = h.client()
    h.call(c, "HELLO", "3")
    assert h.call(c, "CLIENT", "TRACKING", "on", *options) == b"OK"
    return c


def _messages(h: Harness, c: Client) -> list[bytes]:
    """The invalidation frames in c's output (each one's keys part)."""
    return [frame for frame in h.raw(c).split(INVALIDATE)[1:]]


def test_nothing_tracked_costs_the_keyspace_nothing() -> None:
    h = Harness()
    keyspace = h.engine.keyspace
    assert not keyspace.tracking_on
    c = _resp3_tracking(h)
    assert keyspace.tracking_on
    h.call(c, "GET", "k")
    h.call(c, "CLIENT", "TRACKING", "off")
    assert keyspace.tracking_on  # (the key it read is still in the table, as in Redis)
    h.call(h.client(), "SET", "k", "1")  # forgets it: nobody to tell
    assert not keyspace.tracking_on


def test_the_cron_expiry_is_told_even_to_noloop_bcast_client_that_set_the_key() -> None:
    h = Harness()
    c = _resp3_tracking(h, "BCAST", "NOLOOP")
    h.call(c, "SET", "k", "v", "PX", "10")
    h.engine.broadcast_invalidations()
    assert _messages(h, c) == []  # its own change
    h.clock.advance(20)
    h.engine.cron()
    assert _messages(h, c) == [b"*1\r\n$1\r\nk\r\n"]


def test_lazy_expiry_by_its_own_read_comes_after_the_reply() -> None:
    h = Harness()
    c = _resp3_tracking(h)
    h.call(c, "SET", "k", "v", "PX", "10")
    h.call(c, "GET", "k")
    h.clock.advance(20)
    h.engine.execute(c, [b"GET", b"k"])
    assert h.raw(c) == b"_\r\n" + INVALIDATE + b"*1\r\n$1\r\nk\r\n"


def test_the_table_limit_evicts_100_then_200_keys_a_run() -> None:
    h = Harness()
    c = _resp3_tracking(h)
    for i in range(250):
        h.call(c, "GET", f"key{i}")
    h.call(c, "CONFIG", "SET", "tracking-table-max-keys", "1")
    h.raw(c)
    h.engine.cron()
    assert len(_messages(h, c)) == 100
    h.engine.cron()
    assert len(_messages(h, c)) == 149
    assert len(h.engine.tracking.table) == 1
    assert h.engine.tracking.total_items == 1


def test_a_woken_blocked_client_hears_of_its_own_change_after_its_reply() -> None:
    h = Harness()
    c = _resp3_tracking(h)
    other = h.client()
    h.call(other, "RPUSH", "dst", "a")
    h.call(c, "LRANGE", "dst", "0", "-1")
    h.engine.execute(c, [b"BLMOVE", b"src", b"dst", b"LEFT", b"LEFT", b"0"])
    assert h.raw(c) == b""
    h.call(other, "RPUSH", "src", "x")
    assert h.raw(c) == b"$1\r\nx\r\n" + INVALIDATE + b"*1\r\n$3\r\ndst\r\n"


def test_caching_yes_lasts_one_command_or_one_transaction() -> None:
    h = Harness()
    c = _resp3_tracking(h, "OPTIN")
    h.call(c, "CLIENT", "CACHING", "yes")
    h.call(c, "MULTI")
    h.call(c, "GET", "a")
    h.call(c, "GET", "b")
    h.call(c, "EXEC")
    h.call(c, "GET", "c")  # not tracked: CACHING lapsed with the transaction
    assert sorted(h.engine.tracking.table) == [b"a", b"b"]


def test_reset_and_close_stop_tracking_and_leave_prefixes() -> None:
    h = Harness()
    first = _resp3_tracking(h, "BCAST", "PREFIX", "a")
    second = _resp3_tracking(h, "BCAST", "PREFIX", "a", "PREFIX", "b")
    tracking = h.engine.tracking
    assert tracking.tracking_clients == 2
    assert sorted(tracking.prefixes) == [b"a", b"b"]
    h.call(first, "RESET")
    assert tracking.tracking_clients == 1
    h.engine.client_closed(second)
    assert tracking.tracking_clients == 0
    assert tracking.prefixes == {}
    assert not h.engine.keyspace.tracking_on


def test_a_script_tracks_the_keys_its_reads_touch_not_its_declared_ones() -> None:
    h = Harness()
    c = _resp3_tracking(h)
    h.call(c, "EVAL_RO", "return redis.call('GET', 'read')", "1", "declared")
    h.call(c, "EVAL", "return redis.call('SET', 'written', '1')", "1", "declared")
    assert list(h.engine.tracking.table) == [b"read"]


def test_tracking_turned_on_inside_a_transaction_tracks_its_later_reads() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "HELLO", "3")
    h.call(c, "MULTI")
    h.call(c, "CLIENT", "TRACKING", "on")
    h.call(c, "GET", "k")
    h.call(c, "EXEC")
    h.call(h.client(), "SET", "k", "1")
    assert _messages(h, c) == [b"*1\r\n$1\r\nk\r\n"]
