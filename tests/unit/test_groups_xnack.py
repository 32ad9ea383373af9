"""XNACK and the NACK zone (Redis 8.8, STREAMS-REFERENCE §4 XNACK, §6, §7, §8).

Wire texts are checked on the raw bytes: several XNACK errors read ``-ERR ERR …`` in Redis
(their source text already starts with ``ERR``), which a parsed error would hide.
"""

from __future__ import annotations

from typing import Any

import pytest

from headwater.errors import InvariantViolation
from headwater.persistence.rewrite import rewrite_commands
from headwater.stream.groups import MAX_COUNT, Group, key_id
from headwater.stream.stream import Stream
from tests.unit.conftest import Harness

MAX = MAX_COUNT  # 9223372036854775807


def _setup(h: Harness, c: Any, *ids: str, reader: str = "a") -> None:
    """Stream s with these entries, group g at 0, and all of them delivered to reader."""
    for sid in ids:
        h.call(c, "XADD", "s", sid, "f", sid)
    h.call(c, "XGROUP", "CREATE", "s", "g", "0", "MKSTREAM")
    if ids:
        h.call(c, "XREADGROUP", "GROUP", "g", reader, "STREAMS", "s", ">")


def _group(h: Harness, name: str = "g") -> Group:
    stream = h.engine.keyspace.dbs[0].get(b"s")
    assert isinstance(stream, Stream)
    group = stream.groups[name.encode()]
    group.check_invariants()
    return group


def _zone(h: Harness) -> list[bytes]:
    return [b"%d-%d" % key_id(key) for key in _group(h).nacked]


def _pending(h: Harness, c: Any, *extra: Any) -> list[Any]:
    return h.call(c, "XPENDING", "s", "g", *extra, "-", "+", 100)  # type: ignore[no-any-return]


def _raw(h: Harness, c: Any, *args: str | int) -> bytes:
    h.engine.execute(c, [str(a).encode() for a in args])
    return h.raw(c)


# -- errors, in Redis's order ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "wire"),
    [
        (["SOFT", "IDS", 1, "1-0"], b"-ERR ERR mode must be SILENT, FAIL, or FATAL\r\n"),
        (["FAIL", "IDS", 0, "1-0"], b"-ERR numids must be a positive integer\r\n"),
        (["FAIL", "IDS", "x", "1-0"], b"-ERR numids must be a positive integer\r\n"),
        (["FAIL", "IDS", 2147483648, "1-0"], b"-ERR numids must be a positive integer\r\n"),
        (["FAIL", "IDS", 3, "1-0", "2-0"], b"-ERR ERR number of IDs doesn't match numids\r\n"),
        (["FAIL", "IDS", 1, "1-0", "RETRYCOUNT", "-1"],
         b"-ERR ERR Invalid RETRYCOUNT value, must be >= 0\r\n"),
        (["FAIL", "IDS", 1, "1-0", "RETRYCOUNT", "x"],
         b"-ERR value is not an integer or out of range\r\n"),
        (["FAIL", "IDS", 1, "1-0", "RETRYCOUNT"],
         b"-ERR ERR Unrecognized XNACK option 'RETRYCOUNT'\r\n"),
        (["FAIL", "IDS", 1, "1-0", "2-0"], b"-ERR ERR Unrecognized XNACK option '2-0'\r\n"),
        (["FAIL", "IDS", 1, "1-0", "FAIL"], b"-ERR ERR Unrecognized XNACK option 'FAIL'\r\n"),
        (["FAIL", "FORCE", "RETRYCOUNT", 1], b"-ERR ERR syntax error, expected IDS keyword\r\n"),
        (["FAIL", "FORCE", "FORCE", "IDS"], b"-ERR ERR Unrecognized XNACK option 'IDS'\r\n"),
        (["FAIL", "IDS", 1, "-"],
         b"-ERR Invalid stream ID specified as stream command argument\r\n"),
        (["FAIL", "IDS", 2, "1-0", "abc"],
         b"-ERR Invalid stream ID specified as stream command argument\r\n"),
    ],
)  # fmt: skip
def test_xnack_errors_are_redis_texts_on_the_wire(args: list[Any], wire: bytes) -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0")
    assert _raw(h, c, "XNACK", "s", "g", *args) == wire
    assert _pending(h, c)[0][1] == b"a"  # nothing was released


def test_xnack_checks_type_key_and_group_before_the_arguments() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "str", "x")
    assert _raw(h, c, "XNACK", "str", "g", "SOFT", "IDS", 1, "x") == (
        b"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    )
    nogroup = b"-NOGROUP No such key 's' or consumer group 'g'\r\n"
    assert _raw(h, c, "XNACK", "s", "g", "SOFT", "IDS", 1, "x") == nogroup
    h.call(c, "XADD", "s", "1-0", "f", "v")
    assert _raw(h, c, "XNACK", "s", "g", "SOFT", "IDS", 1, "x") == nogroup
    assert _raw(h, c, "XNACK", "s", "g", "FAIL", "IDS", 1) == (
        b"-ERR wrong number of arguments for 'xnack' command\r\n"
    )


def test_options_come_in_any_order_and_a_later_ids_wins() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0")
    reply = h.call(c, "XNACK", "s", "g", "fatal", "force", "IDS", 1, "1-0", "retrycount", 4,
                   "ids", 1, "2-0")  # fmt: skip
    assert reply == 1
    assert _pending(h, c) == [[b"1-0", b"a", 0, 1], [b"2-0", b"", -1, 4]]


# -- delivery counts and FORCE -----------------------------------------------------------------


def test_delivery_count_rules_of_each_mode() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0", "4-0")
    h.call(c, "XCLAIM", "s", "g", "a", 0, "1-0", "2-0", "3-0", "4-0", "RETRYCOUNT", 3)
    assert h.call(c, "XNACK", "s", "g", "SILENT", "IDS", 1, "1-0") == 1
    assert h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 1, "2-0") == 1
    assert h.call(c, "XNACK", "s", "g", "FATAL", "IDS", 1, "3-0") == 1
    assert h.call(c, "XNACK", "s", "g", "FATAL", "IDS", 1, "4-0", "RETRYCOUNT", 0) == 1
    assert _pending(h, c) == [
        [b"1-0", b"", -1, 2],
        [b"2-0", b"", -1, 3],
        [b"3-0", b"", -1, MAX],
        [b"4-0", b"", -1, 0],
    ]
    # SILENT stops at 0; duplicates are processed (and counted) each time
    assert h.call(c, "XNACK", "s", "g", "SILENT", "IDS", 4, "1-0", "1-0", "1-0", "9-9") == 3
    assert _pending(h, c)[0] == [b"1-0", b"", -1, 0]


def test_force_creates_unowned_entries_only_for_existing_stream_entries() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c)
    for sid in ("1-0", "2-0", "3-0", "4-0"):
        h.call(c, "XADD", "s", sid, "f", sid)
    assert h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 2, "1-0", "7-0") == 0  # no FORCE
    reply = h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 3, "1-0", "7-0", "2-0", "FORCE")
    assert reply == 2  # 7-0 does not exist: skipped, as XCLAIM FORCE skips it
    h.call(c, "XNACK", "s", "g", "FATAL", "IDS", 1, "3-0", "FORCE")
    h.call(c, "XNACK", "s", "g", "SILENT", "IDS", 1, "4-0", "FORCE", "RETRYCOUNT", 5)
    assert _pending(h, c) == [
        [b"1-0", b"", -1, 0],
        [b"2-0", b"", -1, 0],
        [b"3-0", b"", -1, MAX],
        [b"4-0", b"", -1, 5],
    ]
    assert _zone(h) == [b"1-0", b"2-0", b"3-0", b"4-0"]


def test_a_nacked_entry_whose_stream_entry_is_gone_is_still_released() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0")
    h.call(c, "XDEL", "s", "1-0")
    assert h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 1, "1-0") == 1
    assert _zone(h) == [b"1-0"]


# -- what the zone looks like ------------------------------------------------------------------


def test_xpending_shows_nobody_and_never_filters_unowned_entries_by_idle() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0")
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 1, "2-0")
    h.clock.advance(50)
    assert h.call(c, "XPENDING", "s", "g") == [3, b"1-0", b"3-0", [[b"a", b"2"]]]
    assert _pending(h, c, "IDLE", 1000) == [[b"2-0", b"", -1, 1]]
    assert _pending(h, c, "IDLE", 10) == [
        [b"1-0", b"a", 50, 1],
        [b"2-0", b"", -1, 1],
        [b"3-0", b"a", 50, 1],
    ]
    assert h.call(c, "XPENDING", "s", "g", "-", "+", 10, "a") == [
        [b"1-0", b"a", 50, 1],
        [b"3-0", b"a", 50, 1],
    ]
    assert h.call(c, "XPENDING", "s", "g", "-", "+", 10, "") == []  # "" is nobody's name


def test_xinfo_counts_and_full_rows_of_the_zone() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0")
    delivered = h.clock.now_ms()
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 2, "3-0", "1-0")
    groups = h.call(c, "XINFO", "GROUPS", "s")
    assert groups[0][:6] == [b"name", b"g", b"consumers", 1, b"pending", 3]
    assert h.call(c, "XINFO", "CONSUMERS", "s", "g")[0][:4] == [b"name", b"a", b"pending", 1]
    full = h.call(c, "XINFO", "STREAM", "s", "FULL")
    group = dict(zip(full[-1][0][::2], full[-1][0][1::2], strict=True))
    assert list(group) == [
        b"name", b"last-delivered-id", b"entries-read", b"lag", b"pel-count", b"nacked-count",
        b"pending", b"consumers",
    ]  # fmt: skip
    assert group[b"pel-count"] == 3
    assert group[b"nacked-count"] == 2
    assert group[b"pending"] == [
        [b"1-0", b"", 0, 1],
        [b"2-0", b"a", delivered, 1],
        [b"3-0", b"", 0, 1],
    ]
    consumer = dict(zip(group[b"consumers"][0][::2], group[b"consumers"][0][1::2], strict=True))
    assert consumer[b"pel-count"] == 1
    assert consumer[b"pending"] == [[b"2-0", delivered, 1]]


def test_delconsumer_leaves_the_zone_alone() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0")
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 1, "1-0")
    assert h.call(c, "XGROUP", "DELCONSUMER", "s", "g", "a") == 1
    assert _pending(h, c) == [[b"1-0", b"", -1, 1]]


def test_acks_and_deletions_take_entries_out_of_the_zone() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0", "4-0")
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 4, "4-0", "3-0", "2-0", "1-0")
    assert h.call(c, "XACK", "s", "g", "4-0") == 1
    assert h.call(c, "XACKDEL", "s", "g", "IDS", 1, "3-0") == [1]
    assert _zone(h) == [b"2-0", b"1-0"]
    assert h.call(c, "XTRIM", "s", "MAXLEN", 2, "DELREF") == 1  # drops 1-0 and its reference
    assert h.call(c, "XDEL", "s", "2-0") == 1  # (XDEL keeps references)
    assert _zone(h) == [b"2-0"]


# -- claiming: the zone first, whatever min-idle says ------------------------------------------


def test_xreadgroup_claim_serves_the_zone_first_in_nack_order() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0", "4-0")
    h.clock.advance(100)
    now = h.clock.now_ms()
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 2, "3-0", "2-0")
    reply = h.call(c, "XREADGROUP", "GROUP", "g", "b", "CLAIM", 50, "STREAMS", "s", ">")
    # nacked ones first (idle since the epoch: delivery time 0), then the idle owned ones
    assert [row[0] for row in reply[0][1]] == [b"3-0", b"2-0", b"1-0", b"4-0"]
    assert [row[2:] for row in reply[0][1]] == [[now, 1], [now, 1], [100, 1], [100, 1]]
    assert _zone(h) == []
    assert _pending(h, c)[0] == [b"1-0", b"b", 0, 2]


def test_xreadgroup_claim_count_takes_the_oldest_nacks() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0")
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 3, "2-0", "3-0", "1-0")
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 1, "2-0")  # to the tail again
    args = ["GROUP", "g", "b", "COUNT", 2, "CLAIM", 1_000_000, "STREAMS", "s", ">"]
    reply = h.call(c, "XREADGROUP", *args)
    assert [row[0] for row in reply[0][1]] == [b"3-0", b"1-0"]
    assert _zone(h) == [b"2-0"]


def test_xclaim_and_xautoclaim_ignore_min_idle_for_unowned_entries() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0")
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 2, "1-0", "3-0")
    assert h.call(c, "XCLAIM", "s", "g", "b", 60_000, "1-0", "2-0", "JUSTID") == [b"1-0"]
    reply = h.call(c, "XAUTOCLAIM", "s", "g", "c", 60_000, "0", "JUSTID")
    assert reply == [b"0-0", [b"3-0"], []]
    assert [row[1] for row in _pending(h, c)] == [b"b", b"a", b"c"]
    assert _zone(h) == []


def test_claims_drop_unowned_entries_whose_stream_entry_is_gone_as_xack_effects() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0")
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 3, "1-0", "2-0", "3-0")
    h.call(c, "XDEL", "s", "1-0", "2-0")
    h.effects.clear()
    assert h.call(c, "XCLAIM", "s", "g", "b", 0, "1-0", "JUSTID") == []
    assert h.call(c, "XAUTOCLAIM", "s", "g", "b", 0, "0", "COUNT", 1) == [b"3-0", [], [b"2-0"]]
    effects = h.effect_lines()
    assert effects == [
        [b"XGROUP", b"CREATECONSUMER", b"s", b"g", b"b"],
        [b"XACK", b"s", b"g", b"1-0"],
        [b"XACK", b"s", b"g", b"2-0"],
    ]
    assert _zone(h) == [b"3-0"]


def test_a_redelivery_after_setid_takes_the_entry_out_of_the_zone() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0")
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 1, "1-0")
    h.call(c, "XGROUP", "SETID", "s", "g", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "b", "COUNT", 1, "STREAMS", "s", ">")
    assert _pending(h, c)[0] == [b"1-0", b"b", 0, 1]
    assert _zone(h) == []


# -- delivery counts saturate (regression: they used to grow past 2^63-1) ----------------------


def test_delivery_counts_saturate_at_the_int64_maximum() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0", "4-0")
    h.call(c, "XCLAIM", "s", "g", "a", 0, "1-0", "2-0", "3-0", "4-0", "RETRYCOUNT", MAX)
    h.call(c, "XCLAIM", "s", "g", "b", 0, "1-0")
    h.call(c, "XAUTOCLAIM", "s", "g", "b", 0, "2-0", "COUNT", 1)
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", "2-0")  # history: 3-0, 4-0
    h.call(c, "XREADGROUP", "GROUP", "g", "c", "COUNT", 1, "CLAIM", 0, "STREAMS", "s", ">")
    assert [row[3] for row in _pending(h, c)] == [MAX, MAX, MAX, MAX]


# -- wake-ups and effects ----------------------------------------------------------------------


def test_xnack_wakes_a_blocked_claim_reader() -> None:
    h = Harness()
    reader, writer = h.client(), h.client()
    _setup(h, writer, "1-0")
    args = ["GROUP", "g", "b", "BLOCK", 0, "CLAIM", 3_600_000, "STREAMS", "s", ">"]
    assert h.call(reader, "XREADGROUP", *args) is None
    assert reader.gate.blocked is not None
    assert h.call(writer, "XNACK", "s", "g", "SILENT", "IDS", 1, "1-0") == 1
    assert reader.gate.blocked is None
    now = h.clock.now_ms()
    assert h.raw(reader) == (
        b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*4\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$3\r\n1-0\r\n"
        b":%d\r\n:0\r\n" % now
    )


def test_xnack_effects_carry_the_resulting_counts_in_batches() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0")
    h.call(c, "XCLAIM", "s", "g", "a", 0, "2-0", "RETRYCOUNT", 5)
    h.effects.clear()
    assert h.call(c, "XNACK", "s", "g", "SILENT", "IDS", 4, "1-0", "3-0", "2-0", "9-0") == 3
    assert h.effect_lines() == [
        [b"XNACK", b"s", b"g", b"FAIL", b"IDS", b"2", b"1-0", b"3-0", b"RETRYCOUNT", b"0",
         b"FORCE"],
        [b"XNACK", b"s", b"g", b"FAIL", b"IDS", b"1", b"2-0", b"RETRYCOUNT", b"4", b"FORCE"],
    ]  # fmt: skip
    h.effects.clear()
    assert h.call(c, "XNACK", "s", "g", "SILENT", "IDS", 1, "9-0") == 0
    assert h.effects == []


def test_the_rewrite_emits_the_zone_in_order_in_batches_of_64() -> None:
    h = Harness()
    c = h.client()
    ids = [f"{n}-0" for n in range(1, 71)]
    _setup(h, c, *ids)
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 70, *reversed(ids))
    h.call(c, "XNACK", "s", "g", "FATAL", "IDS", 1, "35-0")
    nacks = [argv for argv in rewrite_commands(h.engine.keyspace.dbs) if argv[0] == b"XNACK"]
    expected = [f"{n}-0".encode() for n in range(70, 0, -1) if n != 35]
    assert [argv[5] for argv in nacks] == [b"64", b"5", b"1"]
    assert [sid for argv in nacks for sid in argv[6:-3]] == [*expected, b"35-0"]
    assert [argv[-2] for argv in nacks] == [b"1", b"1", b"%d" % MAX]
    assert not any(argv[0] == b"XCLAIM" for argv in rewrite_commands(h.engine.keyspace.dbs))


def test_claim_with_noack_serving_only_new_entries_leaves_active_time_alone() -> None:
    """Regression: XREADGROUP … CLAIM … NOACK set the consumer's active time when it only
    served new entries, which NOACK never makes pending (Redis sets it only for claims and
    for deliveries that create a PEL entry)."""
    h = Harness()
    c = h.client()
    _setup(h, c)
    h.call(c, "XADD", "s", "1-0", "f", "v")
    args = ["GROUP", "g", "b", "CLAIM", 10, "NOACK", "STREAMS", "s", ">"]
    assert h.call(c, "XREADGROUP", *args) == [[b"s", [[b"1-0", [b"f", b"v"], 0, 0]]]]
    assert h.call(c, "XINFO", "CONSUMERS", "s", "g")[0][-2:] == [b"inactive", -1]


def test_check_invariants_catches_a_broken_zone() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0")
    h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 1, "1-0")
    group = _group(h)
    del group.nacked[next(iter(group.nacked))]  # an unowned entry missing from the zone
    with pytest.raises(InvariantViolation, match="NACK zone"):
        group.check_invariants()
    group.nacked = dict.fromkeys(group.pel)  # an owned entry in the zone
    with pytest.raises(InvariantViolation, match="nacked ID is also in a consumer PEL"):
        group.check_invariants()
