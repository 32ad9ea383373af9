"""Stream commands through the engine: blocking, effects, and Redis 8.x behaviour that
Debian's 7.0 cannot be diffed against (asserted against STREAMS-REFERENCE instead)."""

from __future__ import annotations

import gc

import pytest

from headwater.errors import ReplyError
from headwater.stream.stream import Stream
from tests.unit.conftest import Harness
from tests.unit.conftest import error_text as _err

# -- IDs and XADD ------------------------------------------------------------------------------


def test_auto_id_uses_clock_then_sequence_and_survives_clock_going_back() -> None:
    h = Harness()
    c = h.client()
    now = h.clock.now_ms()
    assert h.call(c, "XADD", "s", "*", "f", "v") == b"%d-0" % now
    assert h.call(c, "XADD", "s", "*", "f", "v") == b"%d-1" % now
    h.clock.now -= 5000  # the wall clock jumps backwards
    assert h.call(c, "XADD", "s", "*", "f", "v") == b"%d-2" % now
    h.clock.now = now + 10
    assert h.call(c, "XADD", "s", "*", "f", "v") == b"%d-0" % (now + 10)


def test_future_top_id_rolls_the_sequence_into_the_next_ms() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", "x", "2577343934890-18446744073709551615", "f", "v")
    assert h.call(c, "XADD", "x", "*", "f2", "v2") == b"2577343934891-0"


def test_ms_star_overflow_is_equal_or_smaller_error_in_8x() -> None:
    # 7.0.15 replies "Elements are too large to be stored" here (reference §10).
    h = Harness()
    c = h.client()
    h.call(c, "XADD", "t", "1-18446744073709551615", "a", "b")
    assert _err(h.call(c, "XADD", "t", "1-*", "c", "d")) == (
        "ERR The ID specified in XADD is equal or smaller than the target stream top item"
    )


def test_xadd_effect_carries_the_concrete_id() -> None:
    h = Harness()
    c = h.client()
    sid = h.call(c, "XADD", "s", "*", "f", "v")
    assert h.effects[-1] == (0, [b"XADD", b"s", sid, b"f", b"v"])
    sid = h.call(c, "XADD", "s", "NOMKSTREAM", "99999999999999-*", "f", "v")
    assert h.effects[-1] == (0, [b"XADD", b"s", b"NOMKSTREAM", sid, b"f", b"v"])


def test_approx_trim_effect_is_exact() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "stream-node-max-entries", "10")
    for i in range(1, 56):
        h.call(c, "XADD", "s", f"{i}-0", "f", "v")
    h.call(c, "XADD", "s", "MAXLEN", "~", "20", "56-0", "f", "v")
    assert h.call(c, "XLEN", "s") == 26  # whole nodes of 10 only
    assert h.effects[-1][1] == [b"XADD", b"s", b"MAXLEN", b"=", b"26", b"56-0", b"f", b"v"]
    assert h.call(c, "XTRIM", "s", "MINID", "~", "45") == 10
    # just past the last entry removed (40-0): exact for entry-by-entry trims too
    assert h.effects[-1][1] == [b"XTRIM", b"s", b"MINID", b"=", b"40-1"]


def test_xtrim_that_removes_nothing_propagates_nothing() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", "s", "1-1", "f", "v")
    h.effects.clear()
    assert h.call(c, "XTRIM", "s", "MAXLEN", "5") == 0
    assert h.effects == []


# -- XREAD -------------------------------------------------------------------------------------


def test_xread_unbalanced_uses_the_8x_text() -> None:
    h = Harness()
    assert _err(h.call(h.client(), "XREAD", "STREAMS", "a", "b", "0")) == (
        "ERR Unbalanced 'xread' list of streams: for each stream key an ID, '+', or '$' must "
        "be specified."
    )


def test_xread_plus_returns_the_last_entry_only() -> None:
    h = Harness()
    c = h.client()
    assert h.call(c, "XREAD", "STREAMS", "k", "+") is None
    h.call(c, "XADD", "k", "1-1", "a", "1")
    h.call(c, "XADD", "k", "2-1", "b", "2")
    assert h.call(c, "XREAD", "COUNT", "5", "STREAMS", "k", "+") == [
        [b"k", [[b"2-1", [b"b", b"2"]]]]
    ]


def test_block_timeout_overflow_is_refused() -> None:
    h = Harness()
    assert _err(
        h.call(h.client(), "XREAD", "BLOCK", "9223372036854775807", "STREAMS", "k", "0")
    ) == ("ERR timeout is out of range")


def test_xread_block_is_woken_by_xadd_with_only_new_entries() -> None:
    h = Harness()
    reader, writer = h.client(), h.client()
    h.call(writer, "XADD", "s", "1-1", "f", "old")
    assert h.call(reader, "XREAD", "BLOCK", "0", "STREAMS", "s", "$") is None
    assert reader.gate.blocked is not None
    h.call(writer, "XADD", "s", "2-1", "f", "new")
    assert reader.gate.blocked is None
    assert h.call(reader, "PING") == [[[b"s", [[b"2-1", [b"f", b"new"]]]]], b"PONG"]


def test_many_readers_all_get_the_same_entry() -> None:
    h = Harness()
    readers = [h.client() for _ in range(200)]
    writer = h.client()
    for r in readers:
        h.call(r, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    assert h.engine.blocked_count == 200
    h.call(writer, "XADD", "s", "5-5", "f", "v")
    assert h.engine.blocked_count == 0
    expected = b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*2\r\n$3\r\n5-5\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    assert [h.raw(r) for r in readers] == [expected] * 200
    # served in the order they blocked
    assert list(h.engine.pending) == [writer, *readers]


def test_xread_block_times_out_with_null_array_and_keeps_deadline_on_retries() -> None:
    h = Harness()
    reader, writer = h.client(), h.client()
    h.call(reader, "XREAD", "BLOCK", "100", "STREAMS", "s", "5-0")
    h.scheduler.advance(50)
    h.call(writer, "XADD", "s", "1-0", "f", "v")  # wakes, not satisfiable, stays blocked
    assert reader.gate.blocked is not None
    h.scheduler.advance(50)
    assert reader.gate.blocked is None
    assert h.raw(reader) == b"*-1\r\n"


def test_xread_block_ignores_deletion_and_is_served_by_a_recreated_stream() -> None:
    h = Harness()
    reader, writer = h.client(), h.client()
    h.call(writer, "XADD", "s", "1-1", "f", "v")
    h.call(reader, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    h.call(writer, "DEL", "s")
    h.call(writer, "SET", "s", "string")
    assert reader.gate.blocked is not None
    h.call(writer, "DEL", "s")
    h.call(writer, "XADD", "s", "2-1", "f", "v2")
    assert reader.gate.blocked is None
    assert b"2-1" in h.raw(reader)


def test_xread_block_inside_multi_does_not_block() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "MULTI")
    h.call(c, "XREAD", "BLOCK", "0", "STREAMS", "s", "$")
    assert h.call(c, "EXEC") == [None]


def test_xadd_then_del_in_one_transaction_does_not_wake_xread() -> None:
    h = Harness()
    reader, writer = h.client(), h.client()
    h.call(reader, "XREAD", "BLOCK", "0", "STREAMS", "s", "0")
    h.call(writer, "MULTI")
    h.call(writer, "XADD", "s", "1-1", "f", "v")
    h.call(writer, "DEL", "s")
    h.call(writer, "EXEC")
    assert reader.gate.blocked is not None


def test_xread_resp3_map_repeats_a_key_named_twice() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "HELLO", "3")
    h.call(c, "XADD", "a", "1-1", "f", "1")
    h.engine.execute(c, [b"XREAD", b"STREAMS", b"a", b"a", b"0", b"0"])
    raw = h.raw(c)
    assert raw.startswith(b"%2\r\n$1\r\na\r\n") and raw.count(b"$1\r\na\r\n") == 2


# -- XDELEX, XINFO -----------------------------------------------------------------------------


def test_xdelex_statuses_and_errors() -> None:
    h = Harness()
    c = h.client()
    assert h.call(c, "XDELEX", "nokey", "IDS", "2", "1-1", "bad") == [-1, -1]
    h.call(c, "XADD", "s", "1-1", "f", "v")
    assert h.call(c, "XDELEX", "s", "IDS", "2", "1-1", "9-9") == [1, -1]
    assert _err(h.call(c, "XDELEX", "s", "IDS", "0", "1-1")) == (
        "ERR Number of IDs must be a positive integer"
    )
    assert _err(h.call(c, "XDELEX", "s", "IDS", "3", "1-1")) == (
        "ERR The `numids` parameter must match the number of arguments"
    )
    assert _err(h.call(c, "XDELEX", "s", "KEEPREF", "DELREF", "IDS", "1", "1")) == (
        "ERR syntax error"
    )
    assert _err(h.call(c, "XDELEX", "s", "IDS", "1", "1", "2")) == "ERR syntax error"
    assert h.call(c, "XDELEX", "s", "IDS", "1", "1-1", "ACKED") == [-1]
    assert _err(h.call(c, "XDELEX", "s", "KEEPREF", "FOO", "x")) == "ERR syntax error"
    assert _err(h.call(c, "XDELEX", "s", "KEEPREF", "x", "y")) == "ERR syntax error"


def test_xinfo_stream_has_the_86_fields_in_order() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", "s", "1-1", "f", "v")
    info = h.call(c, "XINFO", "STREAM", "s")
    assert info[0::2] == [
        b"length", b"radix-tree-keys", b"radix-tree-nodes", b"last-generated-id",
        b"max-deleted-entry-id", b"entries-added", b"recorded-first-entry-id",
        b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked", b"iids-added",
        b"iids-duplicates", b"groups", b"first-entry", b"last-entry",
    ]  # fmt: skip
    full = h.call(c, "XINFO", "STREAM", "s", "FULL")
    assert len(full) == 30 and full[-4] == b"entries" and full[-2] == b"groups"


def test_idmp_defaults_are_copied_at_stream_creation() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "stream-idmp-duration", "30")
    h.call(c, "XADD", "s", "1-1", "f", "v")
    h.call(c, "CONFIG", "SET", "stream-idmp-duration", "60")
    info = h.call(c, "XINFO", "STREAM", "s")
    assert info[info.index(b"idmp-duration") + 1] == 30


def test_xsetid_below_max_deleted_is_refused_since_72() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", "s", "5-5", "a", "1")
    h.call(c, "XDEL", "s", "5-5")
    assert _err(h.call(c, "XSETID", "s", "1-0")) == (
        "ERR The ID specified in XSETID is smaller than current max_deleted_entry_id"
    )


# -- memory shape --------------------------------------------------------------------------------


def test_a_big_stream_adds_almost_nothing_for_the_garbage_collector() -> None:
    stream = Stream()
    gc.collect()
    before = len(gc.get_objects())
    for i in range(200_000):
        stream.append((i + 1, 0), [b"f", b"0123456789abcdef"], 4096, 100)
    tracked = len(gc.get_objects()) - before
    # ~2,000 nodes of a handful of objects each; a list per entry would be 200,000+
    assert tracked < 20_000, f"{tracked} GC-tracked objects for 200k entries"


def test_idmp_syntax_errors_are_exact() -> None:
    h = Harness()
    c = h.client()
    assert _err(h.call(c, "XADD", "s", "IDMP", "p", "i", "0-*", "f", "v")) == (
        "ERR syntax error, IDMP/IDMPAUTO can be used only with auto-generated IDs"
    )
    assert h.call(c, "EXISTS", "s") == 0
    assert _err(h.call(c, "XADD", "s", "IDMP", "p", "i", "1-1", "f", "v")) == (
        "ERR syntax error, IDMP/IDMPAUTO can be used only with auto-generated IDs"
    )
    assert _err(h.call(c, "XADD", "s", "IDMPAUTO", "", "*", "f", "v")) == (
        "ERR syntax error, IDMPAUTO requires a non-empty producer ID"
    )
    assert _err(h.call(c, "XADD", "s", "IDMP", "p", "", "*", "f", "v")) == (
        "ERR syntax error, IDMP requires a non-empty idempotent ID"
    )
    assert _err(h.call(c, "XADD", "s", "IDMPAUTO", "p", "IDMP", "p", "i", "*", "f", "v")) == (
        "ERR syntax error, IDMP/IDMPAUTO specified multiple times"
    )


def test_a_stream_refuses_an_id_not_above_its_last() -> None:
    """The ID rule lives in the stream: whoever chose the ID (XADD, a replay's batch, a
    region's ID mode), an append at or below the last ID is refused and changes nothing."""
    stream = Stream()
    stream.append((5, 0), [b"f", b"v"], 4096, 100)
    with pytest.raises(ReplyError, match="equal or smaller"):
        stream.append((5, 0), [b"f", b"v"], 4096, 100)
    with pytest.raises(ReplyError, match="equal or smaller"):
        stream.extend([((6, 0), [b"f", b"v"], 2), ((6, 0), [b"f", b"w"], 2)], 4096, 100)
    assert (stream.length, stream.last_id, stream.entries_added) == (1, (5, 0), 1)
    stream.check_invariants()
