"""Consumer-group behaviour where Redis 7.0 legitimately differs from 8.x, asserted against
STREAMS-REFERENCE (§4-§9) instead of diffed (see tests/differential/test_groups.py).
Times come from the FakeClock, so idle and wall-clock fields are exact here."""

from __future__ import annotations

from typing import Any

from tests.unit.conftest import Harness
from tests.unit.conftest import error_text as _err

T0 = 1_700_000_000_000  # FakeClock's start


def _groups(h: Harness, c: Any, key: str) -> dict[bytes, dict[bytes, object]]:
    """XINFO GROUPS as {name: {field: value}} (RESP2 flat maps)."""
    out = {}
    for flat in h.call(c, "XINFO", "GROUPS", key):
        info = dict(zip(flat[0::2], flat[1::2], strict=True))
        out[info[b"name"]] = info
    return out


def _read_lag(h: Harness, c: Any, key: str, group: str) -> tuple[object, object]:
    info = _groups(h, c, key)[group.encode()]
    return info[b"entries-read"], info[b"lag"]


def _stream(h: Harness, c: Any, key: str, *ids: str) -> None:
    for sid in ids:
        h.call(c, "XADD", key, sid, "f", sid)


# -- HELP texts (7.0: "    Prints this help.") ------------------------------------------------


def test_xgroup_help_is_the_8x_text_in_simple_strings() -> None:
    h = Harness()
    c = h.client()
    h.engine.execute(c, [b"XGROUP", b"HELP"])
    raw = h.raw(c)
    assert raw.startswith(b"*17\r\n+XGROUP <subcommand>")
    lines = raw.split(b"\r\n")[1:-1]
    assert all(line.startswith(b"+") for line in lines)
    assert [line[1:] for line in lines] == [
        b"XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        b"CREATE <key> <groupname> <id|$> [option]",
        b"    Create a new consumer group. Options are:",
        b"    * MKSTREAM",
        b"      Create the empty stream if it does not exist.",
        b"    * ENTRIESREAD entries_read",
        b"      Set the group's entries_read counter (internal use).",
        b"CREATECONSUMER <key> <groupname> <consumer>",
        b"    Create a new consumer in the specified group.",
        b"DELCONSUMER <key> <groupname> <consumer>",
        b"    Remove the specified consumer.",
        b"DESTROY <key> <groupname>",
        b"    Remove the specified group.",
        b"SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        b"    Set the current group ID and entries_read counter.",
        b"HELP",
        b"    Print this help.",
    ]


def test_xinfo_help_is_the_8x_text_with_its_unbalanced_bracket() -> None:
    h = Harness()
    assert h.call(h.client(), "XINFO", "HELP") == [
        b"XINFO <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        b"CONSUMERS <key> <groupname>",
        b"    Show consumers of <groupname>.",
        b"GROUPS <key>",
        b"    Show the stream consumer groups.",
        b"STREAM <key> [FULL [COUNT <count>]",
        b"    Show information about the stream.",
        b"HELP",
        b"    Print this help.",
    ]


# -- XREADGROUP error texts ---------------------------------------------------------------------


def test_xreadgroup_unbalanced_uses_the_8x_text() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    expected = (
        "ERR Unbalanced 'xreadgroup' list of streams: for each stream key an ID or '>' must be "
        "specified."
    )
    assert _err(h.call(c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "s", ">")) == expected
    assert _err(h.call(c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "t", "u")) == expected


def test_xreadgroup_plus_id_is_meaningless_since_74() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    assert _err(h.call(c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", "+")) == (
        "ERR The + ID is meaningless in the context of XREADGROUP: you want to read the history "
        "of this consumer by specifying a proper ID, or use the > ID to get new messages. The + "
        "ID would just return an empty result set."
    )


# -- consumers: auto-creation, seen/active times --------------------------------------------------


def test_xreadgroup_creates_the_consumer_even_when_nothing_is_served() -> None:
    # 7.0 only created it when the stream was served; 7.2+ on every mention (reference §4).
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "$")
    assert h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">") is None
    assert _groups(h, c, "s")[b"g"][b"consumers"] == 1
    h.call(c, "XGROUP", "CREATE", "s", "future", "99-0")
    assert h.call(c, "XREADGROUP", "GROUP", "future", "bob", "STREAMS", "s", ">") is None
    assert _groups(h, c, "s")[b"future"][b"consumers"] == 1
    # errors anywhere in the command create nothing
    h.call(c, "XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "nokey", ">", ">")
    h.call(c, "XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", "s", ">", "$")
    assert _groups(h, c, "s")[b"g"][b"consumers"] == 1


def test_xclaim_and_xautoclaim_create_the_consumer_even_when_nothing_is_claimed() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "owner", "STREAMS", "s", ">")
    h.clock.advance(10)
    assert h.call(c, "XCLAIM", "s", "g", "x", "3600000", "1-1") == []
    assert h.call(c, "XAUTOCLAIM", "s", "g", "y", "3600000", "0") == [b"0-0", [], []]
    h.clock.advance(5)
    assert h.call(c, "XINFO", "CONSUMERS", "s", "g") == [
        [b"name", b"owner", b"pending", 1, b"idle", 15, b"inactive", 15],
        [b"name", b"x", b"pending", 0, b"idle", 5, b"inactive", -1],
        [b"name", b"y", b"pending", 0, b"idle", 5, b"inactive", -1],
    ]


def test_xinfo_consumers_reports_idle_since_seen_and_inactive_since_active() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "XGROUP", "CREATECONSUMER", "s", "g", "lazy")
    h.clock.advance(100)
    h.call(c, "XREADGROUP", "GROUP", "g", "reader", "STREAMS", "s", ">")
    h.clock.advance(50)
    assert h.call(c, "XREADGROUP", "GROUP", "g", "reader", "STREAMS", "s", ">") is None
    h.clock.advance(25)
    assert h.call(c, "XINFO", "CONSUMERS", "s", "g") == [
        [b"name", b"lazy", b"pending", 0, b"idle", 175, b"inactive", -1],
        [b"name", b"reader", b"pending", 1, b"idle", 25, b"inactive", 75],
    ]


def test_xinfo_consumers_resp3_is_a_list_of_maps() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "HELLO", "3")
    h.call(c, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    h.call(c, "XGROUP", "CREATECONSUMER", "s", "g", "x")
    h.engine.execute(c, [b"XINFO", b"CONSUMERS", b"s", b"g"])
    assert h.raw(c) == (
        b"*1\r\n%4\r\n$4\r\nname\r\n$1\r\nx\r\n$7\r\npending\r\n:0\r\n"
        b"$4\r\nidle\r\n:0\r\n$8\r\ninactive\r\n:-1\r\n"
    )


def test_xinfo_stream_full_has_the_8x_shape_and_absolute_times() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1", "2-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "XGROUP", "CREATECONSUMER", "s", "g", "idle")
    h.clock.advance(10)
    h.call(c, "XREADGROUP", "GROUP", "g", "bob", "COUNT", "1", "STREAMS", "s", ">")
    h.clock.advance(10)
    h.call(c, "XCLAIM", "s", "g", "bob", "0", "1-1", "IDLE", "5", "JUSTID")
    full = h.call(c, "XINFO", "STREAM", "s", "FULL")
    assert len(full) == 30
    info = dict(zip(full[0::2], full[1::2], strict=True))
    assert list(info) == [
        b"length", b"radix-tree-keys", b"radix-tree-nodes", b"last-generated-id",
        b"max-deleted-entry-id", b"entries-added", b"recorded-first-entry-id",
        b"idmp-duration", b"idmp-maxsize", b"pids-tracked", b"iids-tracked", b"iids-added",
        b"iids-duplicates", b"entries", b"groups",
    ]  # fmt: skip
    assert info[b"entries"] == [[b"1-1", [b"f", b"1-1"]], [b"2-1", [b"f", b"2-1"]]]
    assert info[b"groups"] == [
        [
            b"name", b"g", b"last-delivered-id", b"1-1", b"entries-read", 1, b"lag", 1,
            b"pel-count", 1, b"nacked-count", 0, b"pending", [[b"1-1", b"bob", T0 + 15, 1]],
            b"consumers", [
                [b"name", b"bob", b"seen-time", T0 + 20, b"active-time", T0 + 20,
                 b"pel-count", 1, b"pending", [[b"1-1", T0 + 15, 1]]],
                [b"name", b"idle", b"seen-time", T0, b"active-time", -1,
                 b"pel-count", 0, b"pending", []],
            ],
        ]
    ]  # fmt: skip


def test_xpending_idle_is_exact_with_a_fake_clock() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1", "2-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "COUNT", "1", "STREAMS", "s", ">")
    h.clock.advance(300)
    h.call(c, "XREADGROUP", "GROUP", "g", "b", "STREAMS", "s", ">")
    h.clock.advance(200)
    assert h.call(c, "XPENDING", "s", "g", "-", "+", "10") == [
        [b"1-1", b"a", 500, 1],
        [b"2-1", b"b", 200, 1],
    ]
    assert h.call(c, "XPENDING", "s", "g", "IDLE", "300", "-", "+", "10") == [
        [b"1-1", b"a", 500, 1]
    ]
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", "0")  # history read: count+1, t=now
    assert h.call(c, "XPENDING", "s", "g", "-", "+", "10", "a") == [[b"1-1", b"a", 0, 2]]


# -- entries-read / lag (§5; 7.0 lacks the length shortcut and the tombstone rules) ---------------


def test_lag_of_a_group_left_behind_first_id_by_xtrim_is_the_length() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-0", "2-0", "3-0", "4-0", "5-0")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", "s", ">")
    assert _read_lag(h, c, "s", "g") == (1, 4)
    h.call(c, "XTRIM", "s", "MAXLEN", "2")
    assert _read_lag(h, c, "s", "g") == (1, 2)  # 7.0: 4


def test_lag_when_xdel_plus_xtrim_leave_the_group_behind() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1", "2-1", "3-1")
    h.call(c, "XGROUP", "CREATE", "s", "h", "0")
    h.call(c, "XREADGROUP", "GROUP", "h", "d", "COUNT", "1", "STREAMS", "s", ">")
    h.call(c, "XDEL", "s", "1-1")
    h.call(c, "XTRIM", "s", "MAXLEN", "1")
    assert _read_lag(h, c, "s", "h") == (1, 1)  # 7.0: (1, 2)


def test_entriesread_given_with_a_group_before_the_first_entry_lag_is_the_length() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1", "2-1", "3-1")
    h.call(c, "XGROUP", "CREATE", "s", "e", "0", "ENTRIESREAD", "1")
    assert _read_lag(h, c, "s", "e") == (1, 3)  # 7.0: (1, 2)


def test_entriesread_is_capped_to_entries_added() -> None:
    # 8.2.2+; 7.0 stored 100 verbatim and reported lag -97.
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1", "2-1", "3-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "3-1", "ENTRIESREAD", "100")
    assert _read_lag(h, c, "s", "g") == (3, 0)
    h.call(c, "XGROUP", "SETID", "s", "g", "$", "ENTRIESREAD", "7")
    assert _read_lag(h, c, "s", "g") == (3, 0)


def test_lag_of_an_emptied_stream_is_zero() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    _stream(h, c, "s", "1-0")
    h.call(c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    h.call(c, "XADD", "s", "MAXLEN", "0", "2-0", "f", "v")
    assert h.call(c, "XLEN", "s") == 0
    assert _read_lag(h, c, "s", "g") == (1, 0)  # 7.0: (1, 1)


def test_reading_past_a_tombstone_from_before_it_makes_entries_read_unknown() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-0", "2-0", "3-0", "4-0", "5-0")
    h.call(c, "XGROUP", "CREATE", "s", "k", "2-0", "ENTRIESREAD", "2")
    h.call(c, "XDEL", "s", "3-0")
    h.call(c, "XREADGROUP", "GROUP", "k", "c", "COUNT", "1", "STREAMS", "s", ">")
    # the tombstone test uses the group's old position (2-0 <= max_deleted 3-0): estimate(4-0)
    # is invalid because a tombstone lies inside the stream.  7.0: (3, 2)
    assert _read_lag(h, c, "s", "k") == (None, None)
    h.call(c, "XREADGROUP", "GROUP", "k", "c", "STREAMS", "s", ">")
    assert _read_lag(h, c, "s", "k") == (5, 0)


def test_delivering_after_deleted_new_entries_reestimates_from_the_last_id() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1", "2-1", "3-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "c", "COUNT", "2", "STREAMS", "s", ">")
    h.call(c, "XDEL", "s", "3-1")
    _stream(h, c, "s", "4-1", "5-1")
    h.call(c, "XDEL", "s", "4-1")
    h.call(c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    assert _read_lag(h, c, "s", "g") == (5, 0)  # 7.0: (3, 2)


# -- propagation (§7; 7.0 propagated XGROUP SETID only with NOACK) ------------------------------


def test_xreadgroup_propagates_xclaim_per_entry_then_setid() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1", "2-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "XGROUP", "CREATECONSUMER", "s", "g", "alice")
    h.effects.clear()
    h.clock.advance(7)
    h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">")
    t = b"%d" % (T0 + 7)
    assert h.effect_lines() == [
        [b"XCLAIM", b"s", b"g", b"alice", b"0", b"1-1", b"TIME", t, b"RETRYCOUNT", b"1",
         b"FORCE", b"JUSTID", b"LASTID", b"1-1"],
        [b"XCLAIM", b"s", b"g", b"alice", b"0", b"2-1", b"TIME", t, b"RETRYCOUNT", b"1",
         b"FORCE", b"JUSTID", b"LASTID", b"2-1"],
        [b"XGROUP", b"SETID", b"s", b"g", b"2-1", b"ENTRIESREAD", b"2"],
    ]  # fmt: skip


def test_xreadgroup_propagates_consumer_creation_only_when_no_xclaim_creates_it() -> None:
    # As §7 (and Redis 7's stream): a consumer created by a read that claims entries comes to
    # the replica with its XCLAIMs, no CREATECONSUMER. Deliberate difference: Redis propagates
    # nothing for a consumer whose first read found nothing (its replicas lack it); Headwater
    # propagates the creation, so that replaying the effects rebuilds the same consumers.
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.effects.clear()
    h.call(c, "XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", ">")
    assert [argv[:2] for argv in h.effect_lines()] == [[b"XCLAIM", b"s"], [b"XGROUP", b"SETID"]]
    h.effects.clear()
    h.call(c, "XREADGROUP", "GROUP", "g", "carol", "STREAMS", "s", ">")  # nothing to read
    assert h.effect_lines() == [[b"XGROUP", b"CREATECONSUMER", b"s", b"g", b"carol"]]


def test_xreadgroup_noack_propagates_consumer_creation_and_setid_only() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.effects.clear()
    h.call(c, "XREADGROUP", "GROUP", "g", "bob", "NOACK", "STREAMS", "s", ">")
    assert h.effect_lines() == [
        [b"XGROUP", b"CREATECONSUMER", b"s", b"g", b"bob"],
        [b"XGROUP", b"SETID", b"s", b"g", b"1-1", b"ENTRIESREAD", b"1"],
    ]


def test_history_reads_propagate_the_new_count_and_time() -> None:
    # Deliberate difference from §7 (Redis propagates nothing for a history read, so its
    # replicas keep the older delivery count and time): Headwater propagates the redelivery as
    # the usual XCLAIM form, so replicas and AOF replays agree on the PEL.
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">")
    h.clock.advance(40)
    h.effects.clear()
    h.call(c, "XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", "0")
    now = b"%d" % h.clock.now_ms()
    assert h.effect_lines() == [
        [b"XCLAIM", b"s", b"g", b"bob", b"0", b"1-1", b"TIME", now, b"RETRYCOUNT", b"2",
         b"FORCE", b"JUSTID", b"LASTID", b"1-1"]
    ]  # fmt: skip


# -- blocked XREADGROUP (§6; 7.0 replied -UNBLOCKED …) -----------------------------------------

NOGROUP_S_G = "NOGROUP No such key 's' or consumer group 'g' in XREADGROUP with GROUP option"


def _blocked_reader(h: Harness) -> tuple[Any, Any]:
    reader, writer = h.client(), h.client()
    h.call(writer, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    assert (
        h.call(reader, "XREADGROUP", "GROUP", "g", "c", "BLOCK", "0", "STREAMS", "s", ">") is None
    )
    assert reader.gate.blocked is not None
    return reader, writer


def test_blocked_xreadgroup_gets_nogroup_when_the_key_is_deleted() -> None:
    h = Harness()
    reader, writer = _blocked_reader(h)
    h.call(writer, "DEL", "s")
    assert reader.gate.blocked is None
    assert _err(h.call(reader, "PING")[0]) == NOGROUP_S_G


def test_blocked_xreadgroup_gets_wrongtype_when_the_key_changes_type() -> None:
    h = Harness()
    reader, writer = _blocked_reader(h)
    h.call(writer, "SET", "s", "x")
    assert reader.gate.blocked is None
    assert _err(h.call(reader, "PING")[0]) == (
        "WRONGTYPE Operation against a key holding the wrong kind of value"
    )


def test_blocked_xreadgroup_gets_nogroup_when_the_group_is_destroyed() -> None:
    h = Harness()
    reader, writer = _blocked_reader(h)
    assert h.call(writer, "XGROUP", "DESTROY", "s", "g") == 1
    assert reader.gate.blocked is None
    assert _err(h.call(reader, "PING")[0]) == NOGROUP_S_G


def test_blocked_xreadgroup_is_served_by_xadd_and_records_the_pel() -> None:
    h = Harness()
    reader, writer = _blocked_reader(h)
    h.call(writer, "XADD", "s", "5-5", "f", "v")
    assert reader.gate.blocked is None
    assert h.call(reader, "PING") == [[[b"s", [[b"5-5", [b"f", b"v"]]]]], b"PONG"]
    assert h.call(writer, "XPENDING", "s", "g") == [1, b"5-5", b"5-5", [[b"c", b"1"]]]


def test_blocked_xreadgroup_ignores_a_deleted_new_entry() -> None:
    h = Harness()
    reader, writer = _blocked_reader(h)
    h.call(writer, "MULTI")
    h.call(writer, "XADD", "s", "5-5", "f", "v")
    h.call(writer, "XDEL", "s", "5-5")
    h.call(writer, "EXEC")
    assert reader.gate.blocked is not None


# -- XACKDEL [8.2] (absent from 7.0) ------------------------------------------------------------


def test_xackdel_statuses() -> None:
    h = Harness()
    c = h.client()
    _stream(h, c, "s", "1-1", "2-1", "3-1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "XGROUP", "CREATE", "s", "h", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    assert h.call(c, "XACKDEL", "nokey", "g", "IDS", "2", "1-1", "bad") == [-1, -1]
    assert h.call(c, "XACKDEL", "s", "nog", "IDS", "1", "bad") == [-1]
    assert _err(h.call(c, "XACKDEL", "s", "g", "IDS", "1", "bad")) == (
        "ERR Invalid stream ID specified as stream command argument"
    )
    # KEEPREF (default): acked and deleted although h never read it; 9-9 is not pending
    assert h.call(c, "XACKDEL", "s", "g", "IDS", "2", "1-1", "9-9") == [1, -1]
    # ACKED: acked, but h has not been delivered 2-1 yet, so it stays
    assert h.call(c, "XACKDEL", "s", "g", "ACKED", "IDS", "1", "2-1") == [2]
    assert h.call(c, "XRANGE", "s", "-", "+") == [
        [b"2-1", [b"f", b"2-1"]],
        [b"3-1", [b"f", b"3-1"]],
    ]
    assert h.call(c, "XPENDING", "s", "g") == [1, b"3-1", b"3-1", [[b"c", b"1"]]]
    assert _err(h.call(c, "XACKDEL", "s", "g", "IDS", "0", "1-1")) == (
        "ERR Number of IDs must be a positive integer"
    )
    assert _err(h.call(c, "XACKDEL", "s", "g", "IDS", "3", "1-1")) == (
        "ERR The `numids` parameter must match the number of arguments"
    )
    assert _err(h.call(c, "XACKDEL", "s", "g", "KEEPREF", "DELREF", "IDS", "1", "1")) == (
        "ERR syntax error"
    )
    assert _err(h.call(c, "XACKDEL", "s", "g", "KEEPREF", "x", "y")) == "ERR syntax error"
