"""DUMP and RESTORE through the engine: Redis's errors, nothing half-applied, effects that
replay to the same keyspace. Issue 19."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.engine.replay import Replayer
from headwater.rdb import payload
from headwater.rdb.encoding import write_string
from headwater.stream.stream import Stream
from tests.unit.conftest import Harness, error_text

#: redis-server 7.0's DUMP of ``RPUSH l a 123 -7 <46 b's>`` (a quicklist 2 of one LZF node)
LIST_DUMP = bytes.fromhex(
    "120102c3173f0f3f00000004008161027b01dff902ae62e02400012fff0a005ddc81c9f4ffe07f"
)
INTSET_DUMP = bytes.fromhex(
    "0b180400000004000000fbffffff0100000002000000701101000a00749cce0a5f64ef0e"
)


def _stream_harness() -> tuple[Harness, object]:
    h = Harness()
    c = h.client()
    for i in range(1, 30):
        h.call(c, "XADD", "s", f"{i}-1", "f", i, "g", "x" * i)
    h.call(c, "XDEL", "s", "3-1", "20-1")
    h.call(c, "XGROUP", "CREATE", "s", "grp", "0")
    h.call(c, "XREADGROUP", "GROUP", "grp", "alice", "COUNT", "4", "STREAMS", "s", ">")
    h.call(c, "XREADGROUP", "GROUP", "grp", "bob", "COUNT", "2", "STREAMS", "s", ">")
    h.call(c, "XACK", "s", "grp", "2-1")
    return h, c


def test_string_round_trip_and_ttl() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "hello" * 20)
    dumped = h.call(c, "DUMP", "k")
    assert dumped[-10:-8] == b"\x0a\x00"  # RDB version 10, what Redis 7.0 writes
    assert h.call(c, "DUMP", "nope") is None
    assert (
        error_text(h.call(c, "RESTORE", "k", 0, dumped))
        == "BUSYKEY Target key name already exists."
    )
    assert h.call(c, "RESTORE", "k2", 5000, dumped) == b"OK"
    assert h.call(c, "GET", "k2") == b"hello" * 20
    assert 4000 < h.call(c, "PTTL", "k2") <= 5000
    # the effect carries the absolute deadline
    line = h.effect_lines()[-1]
    assert line[:2] == [b"RESTORE", b"k2"] and line[-1] == b"ABSTTL"
    assert int(line[2]) == h.engine.keyspace.now_ms + 5000
    assert h.call(c, "RESTORE", "k", 0, dumped, "REPLACE") == b"OK"


def test_restore_errors_in_redis_order() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v")
    good = h.call(c, "DUMP", "k")
    cases = [
        (("RESTORE", "k", 0, good, "NOPE"), "ERR syntax error"),
        (("RESTORE", "k", 0, good, "IDLETIME"), "ERR syntax error"),
        (("RESTORE", "k", 0, good, "IDLETIME", "x"), "ERR value is not an integer or out of range"),
        (("RESTORE", "k", 0, good, "IDLETIME", -1), "ERR Invalid IDLETIME value, must be >= 0"),
        (("RESTORE", "k", 0, good, "FREQ", 256), "ERR Invalid FREQ value, must be >= 0 and <= 255"),
        (("RESTORE", "k", 0, good, "IDLETIME", 1, "FREQ", 1), "ERR syntax error"),
        (("RESTORE", "k", 0, good), "BUSYKEY Target key name already exists."),
        (("RESTORE", "n", "x", good), "ERR value is not an integer or out of range"),
        (("RESTORE", "n", -1, good), "ERR Invalid TTL value, must be >= 0"),
        (("RESTORE", "n", 0, good[:-1]), "ERR DUMP payload version or checksum are wrong"),
        (("RESTORE", "n", 0, b"short"), "ERR DUMP payload version or checksum are wrong"),
        (
            ("RESTORE", "n", 0, payload.wrap(good[:-10], payload.MAX_VERSION + 1)),
            "ERR DUMP payload version or checksum are wrong",
        ),
        (("RESTORE", "n", 0, payload.wrap(b"\x00\x05ab")), "ERR Bad data format"),
        (("RESTORE", "n", 0, payload.wrap(b"\x63")), "ERR Bad data format"),
        (("RESTORE", "n", 0, payload.wrap(good[:-10] + b"x")), "ERR Bad data format"),
        (("RESTORE", "n", 0, good, "REPLACE", "ABSTTL", "FREQ"), "ERR syntax error"),
        (("RESTORE", "n", 2**63 - 1, good), "ERR invalid expire time in 'restore' command"),
    ]
    for args, want in cases:
        assert error_text(h.call(c, *args)) == want, args
    assert h.call(c, "EXISTS", "n") == 0
    assert h.call(c, "GET", "k") == b"v"


def test_lists_and_sets_restore_and_dump_back_as_redis_wrote_them() -> None:
    h = Harness()
    c = h.client()
    assert h.call(c, "RESTORE", "l", 0, LIST_DUMP) == b"OK"
    assert h.call(c, "LRANGE", "l", 0, -1) == [b"a", b"123", b"-7", b"b" * 46]
    assert h.call(c, "OBJECT", "ENCODING", "l") == b"listpack"  # (7.2: one small node)
    assert h.call(c, "DUMP", "l") == LIST_DUMP
    assert h.call(c, "RESTORE", "s", 0, INTSET_DUMP) == b"OK"
    assert h.call(c, "TYPE", "s") == b"set"


def test_restore_past_deadline_deletes_only_with_replace() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v")
    dumped = h.call(c, "DUMP", "k")
    assert h.call(c, "RESTORE", "new", 1, dumped, "ABSTTL") == b"OK"
    assert h.call(c, "EXISTS", "new") == 0
    assert h.call(c, "RESTORE", "k", 1, dumped, "ABSTTL", "REPLACE") == b"OK"
    assert h.call(c, "EXISTS", "k") == 0
    assert h.effect_lines()[-1] == [b"DEL", b"k"]
    h.call(c, "SET", "k", "v")  # lazyfree-lazy-server-del: the deletion propagates as UNLINK
    h.call(c, "CONFIG", "SET", "lazyfree-lazy-server-del", "yes")
    assert h.call(c, "RESTORE", "k", 1, dumped, "ABSTTL", "REPLACE") == b"OK"
    assert h.effect_lines()[-1] == [b"UNLINK", b"k"]


def test_hash_round_trip_keeps_encoding_and_order() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "HSET", "h", "b", "1", "a", "2", "c", "x" * 10)
    dumped = h.call(c, "DUMP", "h")
    assert dumped[0] == 16  # listpack
    h.call(c, "RESTORE", "h2", 0, dumped)
    assert h.call(c, "HGETALL", "h2") == [b"b", b"1", b"a", b"2", b"c", b"x" * 10]
    assert h.call(c, "OBJECT", "ENCODING", "h2") == b"listpack"
    h.call(c, "HSET", "big", *[x for i in range(600) for x in (f"f{i}", "v")])
    dumped = h.call(c, "DUMP", "big")
    assert dumped[0] == 4  # hashtable
    h.call(c, "RESTORE", "big2", 0, dumped)
    assert h.call(c, "OBJECT", "ENCODING", "big2") == b"hashtable"
    assert h.call(c, "HLEN", "big2") == 600


def test_stream_round_trip_through_the_engine() -> None:
    h, c = _stream_harness()
    dumped = h.call(c, "DUMP", "s")
    assert h.call(c, "RESTORE", "s2", 0, dumped) == b"OK"
    for cmd in (
        ("XINFO", "STREAM", "{}", "FULL"),
        ("XRANGE", "{}", "-", "+"),
        ("XPENDING", "{}", "grp"),
    ):
        assert h.call(c, *[a.format("s2") for a in cmd]) == h.call(c, *[a.format("s") for a in cmd])
    s2 = h.engine.keyspace.dbs[0].data[b"s2"]
    assert isinstance(s2, Stream)
    s2.check_invariants()
    assert h.call(c, "DUMP", "s2") == dumped


def test_damaged_payloads_change_nothing() -> None:
    h, c = _stream_harness()
    dumped = h.call(c, "DUMP", "s")
    before = h.call(c, "XINFO", "STREAM", "s", "FULL")
    for cut in range(0, len(dumped), 7):
        reply = h.call(c, "RESTORE", "s", 0, dumped[:cut], "REPLACE")
        assert "ERR" in error_text(reply)
    for i in range(0, len(dumped) - 10, 5):
        body = bytearray(dumped[:-10])
        body[i] ^= 0x5A
        for blob in (bytes(body) + dumped[-10:], payload.wrap(body)):
            reply = h.call(c, "RESTORE", "s", 0, blob, "REPLACE")
            # a flipped byte may still decode to a valid stream; then it replaced s, and
            # we put the original back to go on
            if reply == b"OK":
                h.call(c, "RESTORE", "s", 0, dumped, "REPLACE")
            else:
                assert "ERR" in error_text(reply)
    assert h.call(c, "XINFO", "STREAM", "s", "FULL") == before


def test_effects_replay_to_the_same_keyspace(tmp_path: Path) -> None:
    h, c = _stream_harness()
    h.call(c, "HSET", "h", "f", "v")
    h.call(c, "SET", "str", "12345")
    for key in ("s", "h", "str"):
        dumped = h.call(c, "DUMP", key)
        h.call(c, "RESTORE", key + "-copy", 100000, dumped)
        h.call(c, "RESTORE", key, 0, dumped, "REPLACE", "IDLETIME", 5)
    path = tmp_path / "a.aof"
    h.write_aof(path)
    replayed = Harness()
    replayed.clock.now = h.clock.now
    replayer = Replayer(replayed.engine)
    replayer.replay(path, truncate_torn=False)
    replayer.close()
    c2 = replayed.client()
    for key in ("s", "s-copy", "h-copy", "str-copy"):
        assert replayed.call(c2, "DUMP", key) == h.call(c, "DUMP", key)
        assert replayed.call(c2, "PEXPIRETIME", key) == h.call(c, "PEXPIRETIME", key)


def test_nacked_entries_refuse_dump() -> None:
    h, c = _stream_harness()
    reply = h.call(c, "XNACK", "s", "grp", "FAIL", "IDS", "1", "1-1")
    if isinstance(reply, Exception):
        pytest.skip("no XNACK in this build")
    assert "nacked" in error_text(h.call(c, "DUMP", "s"))


def test_old_type_of_string_with_lzf() -> None:
    body = bytearray([0])
    write_string(body, b"abc" * 50)
    assert body[1] == 0xC3  # compressed
    h = Harness()
    c = h.client()
    assert h.call(c, "RESTORE", "k", 0, payload.wrap(body, 9)) == b"OK"
    assert h.call(c, "GET", "k") == b"abc" * 50


# Payloads from Redis's own tests (tests/unit/type/stream-cgroups.tcl), which three of its
# consumer-group tests RESTORE:
#: DUMPed by Redis 5 (RDB 9, STREAM_LISTPACKS) after XADD x 1-0..6-0, XDEL x 3-0, XGROUP CREATE
#: x g1 0 and g2 0, XREADGROUP GROUP g1 c11 COUNT 4, XTRIM x MAXLEN = 2
REDIS5_STREAM = bytes.fromhex(
    "0f011000000000000000010000000000000000c3404a405716570000002300020104010101846461746105"
    "000103010020010381610204200a0001400a0062600a0002400a0063600a4022018164200a4039200a0065"
    "600a0005400a0066200a00ff02060002026731050004000000000000000100000000000000003ef783437a"
    "01000001000000000000000200000000000000003ef783437a010000010000000000000004000000000000"
    "00003ef783437a01000001000000000000000500000000000000003ef783437a0100000101036331313ef7"
    "83437a010000040000000000000001000000000000000000000000000000020000000000000000000000000"
    "000000400000000000000000000000000000005000000000000000002673200000000090"
    "03d52ef6867521dfa"
)
#: DUMPed by Redis 7.0 (RDB 10, STREAM_LISTPACKS_2) after XGROUP CREATE x g $ MKSTREAM,
#: XADD x 1-1 f v, XREADGROUP GROUP g Alice STREAMS x >
REDIS7_STREAM = bytes.fromhex(
    "130110000000000000000100000000000000011d1d0000000a0001010001010181660200010201000100018176"
    "020401ff01010101010000010101670101010100000000000000010000000000000001f55a71c784010000010105"
    "416c696365f55a71c78401000001000000000000000100000000000000010b00a7a914a527ff9b9b"
)


def _info(h: Harness, c: object) -> dict[bytes, object]:
    flat = h.call(c, "XINFO", "STREAM", "x", "FULL")  # type: ignore[arg-type]
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def test_redis5_stream_payload() -> None:
    """Redis's "Loading from legacy (Redis <= v6.2.x, rdb_ver < 10) persistence"."""
    h = Harness()
    c = h.client()
    assert h.call(c, "RESTORE", "x", 0, REDIS5_STREAM) == b"OK"
    info = _info(h, c)
    assert info[b"max-deleted-entry-id"] == b"0-0"
    assert info[b"entries-added"] == 2
    groups = [dict(zip(g[0::2], g[1::2], strict=True)) for g in info[b"groups"]]  # type: ignore[attr-defined]
    assert (groups[0][b"entries-read"], groups[0][b"lag"]) == (1, 1)
    assert (groups[1][b"entries-read"], groups[1][b"lag"]) == (0, 2)
    assert h.call(c, "XRANGE", "x", "-", "+") == [
        [b"5-0", [b"data", b"e"]],
        [b"6-0", [b"data", b"f"]],
    ]


def test_redis7_stream_payload() -> None:
    """Redis's "Loading from legacy (Redis <= v7.0.x, rdb_ver < 11) persistence"."""
    h = Harness()
    c = h.client()
    assert h.call(c, "RESTORE", "x", 0, REDIS7_STREAM) == b"OK"
    group = dict(zip(*[iter(_info(h, c)[b"groups"][0])] * 2, strict=True))  # type: ignore[index]
    consumer = dict(zip(*[iter(group[b"consumers"][0])] * 2, strict=True))
    assert consumer[b"seen-time"] == consumer[b"active-time"]
    # back to the same object bytes (that Redis wrote RDB version 11, a 7.2 development build)
    assert h.call(c, "DUMP", "x")[:-10] == REDIS7_STREAM[:-10]
