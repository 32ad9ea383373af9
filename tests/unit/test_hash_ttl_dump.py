"""DUMP and RESTORE of hashes with field TTLs (#19) in Redis 7.4's layouts, which Debian's
7.0 cannot load: RDB_TYPE_HASH_LISTPACK_EX (25) for a small hash, RDB_TYPE_HASH_METADATA
(24) for a large one, both in an RDB version 12 payload (Redis 7.4 ``rdb.c``: rdbSaveObject,
rdbLoadObject). Hand-checked payloads, round trips through the engine and as a property,
and damaged payloads answered with Redis's errors."""

from __future__ import annotations

import struct

from hypothesis import given
from hypothesis import strategies as st

from headwater.rdb import listpack, payload
from headwater.rdb.crc64 import crc64
from headwater.rdb.encoding import write_string
from headwater.rdb.objects import (
    FIELD_EXPIRE_MAX,
    TYPE_HASH_LISTPACK_EX,
    TYPE_HASH_METADATA,
    HashValue,
    write_hash_object,
)
from tests.unit.conftest import Harness, error_text

T1 = 4102444700000  # 2099-12-31 23:58:20 UTC
T2 = 4102444800000


def _wrap12(body: bytes) -> bytes:
    head = body + b"\x0c\x00"  # RDB version 12, little-endian
    return head + struct.pack("<Q", crc64(head))


def test_small_hash_dumps_as_listpack_ex_by_hand() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "HSET", "h", "a", "1", "b", "hello", "c", "3")
    h.call(c, "HPEXPIREAT", "h", T2, "FIELDS", 1, "b")
    h.call(c, "HPEXPIREAT", "h", T1, "FIELDS", 1, "c")
    lp = (
        b"\x31\x00\x00\x00"  # listpack: 49 bytes in all
        b"\x09\x00"  # 9 elements: 3 triples
        b"\x81c\x02"
        b"\x03\x01"
        b"\xf4" + struct.pack("<q", T1) + b"\x09"  # c, 3, T1
        b"\x81b\x02"
        b"\x85hello\x06"
        b"\xf4" + struct.pack("<q", T2) + b"\x09"  # b, hello, T2
        b"\x81a\x02"
        b"\x01\x01"
        b"\x00\x01"  # a, 1, 0 (no TTL): last
        b"\xff"
    )
    expected = _wrap12(
        bytes([TYPE_HASH_LISTPACK_EX])
        + struct.pack("<q", T1)  # the smallest field expiry
        + bytes([len(lp)])
        + lp
    )
    assert h.call(c, "DUMP", "h") == expected


def test_large_hash_dumps_as_metadata_by_hand() -> None:
    out = bytearray()
    pairs = [(b"x", b"1"), (b"y", b"2"), (b"z", b"3")]
    write_hash_object(out, pairs, False, {b"x": 5000, b"z": 5002})
    assert bytes(out) == (
        bytes([TYPE_HASH_METADATA])
        + struct.pack("<q", 5000)  # the smallest field expiry, the base of the others
        + b"\x03"  # three fields, each: expiry - base + 1 (0: none), name, value
        + b"\x01"
        + b"\x01x"
        + b"\xc0\x01"
        + b"\x00"
        + b"\x01y"
        + b"\xc0\x02"
        + b"\x03"
        + b"\x01z"
        + b"\xc0\x03"
    )
    _, value = payload.load(_wrap12(bytes(out)))
    assert isinstance(value, HashValue)
    assert value.pairs == pairs and value.expires == {b"x": 5000, b"z": 5002}


def _as_dict(flat: list[bytes]) -> dict[bytes, bytes]:
    return dict(zip(flat[0::2], flat[1::2], strict=True))


def test_round_trip_through_the_engine_keeps_ttls_and_encodings() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "HSET", "small", "a", "1", "b", "2")
    h.call(c, "HPEXPIREAT", "small", T1, "FIELDS", 1, "b")
    h.call(c, "HSET", "big", *[x for i in range(600) for x in (f"f{i}", f"v{i}")])
    h.call(c, "HPEXPIREAT", "big", T2, "FIELDS", 2, "f3", "f150")
    for key, encoding in ((b"small", b"listpackex"), (b"big", b"hashtable")):
        dumped = h.call(c, "DUMP", key)
        assert dumped[-10:-8] == b"\x0c\x00"
        assert h.call(c, "RESTORE", key + b"2", 0, dumped) == b"OK"
        assert h.call(c, "OBJECT", "ENCODING", key + b"2") == encoding
        assert _as_dict(h.call(c, "HGETALL", key + b"2")) == _as_dict(h.call(c, "HGETALL", key))
    assert h.call(c, "HPEXPIRETIME", "small2", "FIELDS", 2, "a", "b") == [-1, T1]
    assert h.call(c, "HPEXPIRETIME", "big2", "FIELDS", 3, "f3", "f4", "f150") == [T2, -1, T2]
    # a hash whose TTLs are all gone dumps as Redis 7.0's again (version 10)
    h.call(c, "HPERSIST", "small", "FIELDS", 1, "b")
    assert h.call(c, "DUMP", "small")[-10:-8] == b"\x0a\x00"


_names = st.binary(min_size=0, max_size=12) | st.integers(-(10**12), 10**12).map(
    lambda n: str(n).encode()
)


@given(
    st.dictionaries(_names, _names, min_size=1, max_size=20),
    st.data(),
    st.booleans(),
)
def test_payload_round_trip_property(
    fields: dict[bytes, bytes], data: st.DataObject, as_listpack: bool
) -> None:
    names = list(fields)
    timed = data.draw(st.lists(st.sampled_from(names), min_size=1, unique=True))
    expires = {f: data.draw(st.integers(1, FIELD_EXPIRE_MAX)) for f in timed}
    out = bytearray()
    write_hash_object(out, list(fields.items()), as_listpack, expires)
    raw = payload.wrap(out, payload.VERSION_7_4)
    _, value = payload.load(raw)
    assert isinstance(value, HashValue)
    assert dict(value.pairs) == fields
    assert value.expires == expires
    if as_listpack:  # fields with a TTL first, by TTL, as Redis keeps a listpackex
        order = [f for f, _ in value.pairs]
        head = order[: len(expires)]
        assert set(head) == set(expires)
        assert [expires[f] for f in head] == sorted(expires.values())


def _resealed(raw: bytes, body: bytes) -> bytes:
    """A payload with another object and a valid footer (only the object is wrong)."""
    head = body + raw[-10:-8]
    return head + struct.pack("<Q", crc64(head))


def test_damaged_payloads_get_redis_errors_and_change_nothing() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "HSET", "h", "a", "1", "b", "2")
    h.call(c, "HPEXPIREAT", "h", T1, "FIELDS", 1, "a")
    good = h.call(c, "DUMP", "h")
    bad_version = "ERR DUMP payload version or checksum are wrong"
    flipped = bytearray(good)
    flipped[12] ^= 0x40
    for raw in (good[:-1], good[:5], bytes(flipped), good[:-10] + b"\x0e\x00" + good[-8:]):
        assert error_text(h.call(c, "RESTORE", "x", 0, raw)) == bad_version
    out_of_range = bytearray([TYPE_HASH_LISTPACK_EX]) + struct.pack("<q", T1)
    write_string(out_of_range, listpack.encode([b"a", b"1", FIELD_EXPIRE_MAX + 1]))
    pairs_not_triples = bytearray([TYPE_HASH_LISTPACK_EX]) + struct.pack("<q", T1)
    write_string(pairs_not_triples, listpack.encode([b"a", b"1", T1, b"b"]))
    truncated_object = bytes(good[:-14])
    for body in (bytes(out_of_range), bytes(pairs_not_triples), truncated_object):
        assert error_text(h.call(c, "RESTORE", "x", 0, _resealed(good, body))) == (
            "ERR Bad data format"
        )
    assert h.call(c, "EXISTS", "x") == 0
