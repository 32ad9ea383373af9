"""A stream's IDMP history in DUMP payloads: Redis 8.6's object type 26 in an RDB version 13
payload, so that a stream MIGRATE moves between nodes keeps answering its producers' retries
with the entries they already made. A stream without history stays Redis 7.0's (type 19,
version 10), which every Redis since 7.0 can RESTORE."""

from __future__ import annotations

import struct

from headwater.rdb import payload
from headwater.stream.stream import Stream
from tests.unit.conftest import Harness, error_text

T0 = 1_700_000_000_000
BAD_DATA = "ERR Bad data format"


def rdb_len(n: int) -> bytes:
    """Redis's length encoding, written out here independently of the codec."""
    if n < 1 << 6:
        return bytes([n])
    if n < 1 << 14:
        return bytes([0x40 | n >> 8, n & 0xFF])
    if n < 1 << 32:
        return b"\x80" + struct.pack(">I", n)
    return b"\x81" + struct.pack(">Q", n)


def with_history() -> tuple[Harness, object]:
    """``s``: two producers' iids (an iid that is an integer, which Redis saves as one), a
    duplicate, and a duration set before any of it (XCFGSET clears history)."""
    h = Harness()
    h.clock.now = T0
    c = h.client()
    h.call(c, "XADD", "s", "IDMP", "p1", "x", "*", "f", "1")  # creates s
    h.call(c, "XCFGSET", "s", "IDMP-DURATION", 300)
    h.call(c, "XADD", "s", "IDMP", "p2", "7", "*", "f", "2")
    h.clock.now = T0 + 70
    h.call(c, "XADD", "s", "IDMP", "p2", "abc", "*", "f", "3")
    h.call(c, "XADD", "s", "IDMP", "p2", "7", "*", "f", "2")  # a retry: no new entry
    return h, c


def idmp_info(h: Harness, c: object, key: str) -> dict[bytes, object]:
    info = h.call(c, "XINFO", "STREAM", key)
    fields = dict(zip(info[0::2], info[1::2], strict=True))
    return {k: v for k, v in fields.items() if b"idmp" in k or b"iids" in k or b"pids" in k}


def test_history_dumps_as_redis_8_6_and_restores_whole() -> None:
    h, c = with_history()
    dumped = h.call(c, "DUMP", "s")
    assert dumped[0] == 26 and dumped[-10:-8] == b"\x0d\x00"  # type 26, RDB version 13
    assert h.call(c, "RESTORE", "moved", 0, dumped) == b"OK"
    assert idmp_info(h, c, "moved") == idmp_info(h, c, "s")
    assert idmp_info(h, c, "moved")[b"iids-duplicates"] == 1
    made = h.call(c, "XRANGE", "s", "-", "+")[1][0]
    # a producer's retry, after the move, gets the entry it made before it
    assert h.call(c, "XADD", "moved", "IDMP", "p2", "7", "*", "f", "2") == made
    assert h.call(c, "XLEN", "moved") == 3
    stream = h.engine.keyspace.dbs[0].data[b"moved"]
    assert isinstance(stream, Stream)
    stream.check_invariants()


def test_the_idmp_section_is_laid_out_as_redis_8_6_writes_it() -> None:
    """After the groups: duration, maxsize, producers in pid order, each with its iids oldest
    first (iid, entry ms, entry seq), then the iids-added and iids-duplicates counters."""
    h, c = with_history()
    dumped = h.call(c, "DUMP", "s")
    entries = h.call(c, "XRANGE", "s", "-", "+")[1:]  # (the first is p1's, forgotten)
    ids = [entry[0].decode().split("-") for entry in entries]
    (ms7, seq7), (ms_abc, seq_abc) = ((int(a), int(b)) for a, b in ids)
    section = (
        rdb_len(300)
        + rdb_len(100)
        + rdb_len(1)  # p1's iid went with the XCFGSET: only p2
        + rdb_len(2) + b"p2" + rdb_len(2)
        + b"\xc0\x07" + rdb_len(ms7) + rdb_len(seq7)  # "7" saved as an 8-bit integer
        + rdb_len(3) + b"abc" + rdb_len(ms_abc) + rdb_len(seq_abc)
        + rdb_len(3)  # iids added: x, 7, abc
        + rdb_len(1)  # duplicates: the retry of 7
    )  # fmt: skip
    assert dumped[:-10].endswith(b"\x00" + section)  # (b"\x00": no consumer groups)


def test_a_stream_without_history_dumps_as_redis_7_0() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", "plain", "*", "f", "1")
    dumped = h.call(c, "DUMP", "plain")
    assert dumped[0] == 19 and dumped[-10:-8] == b"\x0a\x00"
    h.call(c, "CONFIG", "SET", "stream-idmp-duration", 50)
    assert h.call(c, "RESTORE", "copy", 0, dumped) == b"OK"
    # settings a 7.0 payload has no place for come from the server restoring it
    assert idmp_info(h, c, "copy")[b"idmp-duration"] == 50


def _resealed(dumped: bytes, section_start: int, section: bytes) -> bytes:
    return payload.wrap(dumped[:section_start] + section, payload.VERSION_8_6)


def test_bad_idmp_sections_are_refused_and_change_nothing() -> None:
    h, c = with_history()
    dumped = h.call(c, "DUMP", "s")
    start = dumped.rindex(rdb_len(300) + rdb_len(100))
    tail = dumped[start + 4 : -10]  # producers onwards
    producer = rdb_len(2) + b"p2" + rdb_len(1) + b"\xc0\x07" + rdb_len(1) + rdb_len(0)
    bad = {
        "duration 0": rdb_len(0) + rdb_len(100) + tail,
        "duration 86401": rdb_len(86401) + rdb_len(100) + tail,
        "maxsize 0": rdb_len(300) + rdb_len(0) + tail,
        "maxsize 10001": rdb_len(300) + rdb_len(10001) + tail,
        "one pid twice": rdb_len(300) + rdb_len(100) + rdb_len(2) + producer * 2 + b"\x01\x00",
        "counters cut": rdb_len(300) + rdb_len(100) + rdb_len(1) + producer,
        "fewer added than held": rdb_len(300) + rdb_len(100) + rdb_len(1) + producer + b"\0\0",
    }
    for why, section in bad.items():
        reply = h.call(c, "RESTORE", "s", 0, _resealed(dumped, start, section), "REPLACE")
        assert error_text(reply) == BAD_DATA, why
    assert h.call(c, "DUMP", "s") == dumped


def test_a_producer_over_maxsize_keeps_its_newest_and_a_repeated_iid_its_first() -> None:
    h, c = with_history()
    dumped = h.call(c, "DUMP", "s")
    start = dumped.rindex(rdb_len(300) + rdb_len(100))
    iids = [(b"a", 1, 0), (b"b", 2, 0), (b"a", 3, 0), (b"c", 4, 0)]
    producer = rdb_len(2) + b"p9" + rdb_len(len(iids))
    for iid, ms, seq in iids:
        producer += rdb_len(len(iid)) + iid + rdb_len(ms) + rdb_len(seq)
    section = rdb_len(300) + rdb_len(2) + rdb_len(1) + producer + rdb_len(9) + rdb_len(0)
    assert h.call(c, "RESTORE", "t", 0, _resealed(dumped, start, section)) == b"OK"
    stream = h.engine.keyspace.dbs[0].data[b"t"]
    assert isinstance(stream, Stream) and stream.idmp is not None
    stream.check_invariants()
    assert list(stream.idmp.producers[b"p9"].entries()) == [(b"b", (2, 0)), (b"c", (4, 0))]
