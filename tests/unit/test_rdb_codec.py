"""The RDB codec (``headwater.rdb``): known vectors from redis-server 7.0, round trips, and bad
input. Issue 19 (DUMP/RESTORE in Redis's payload format)."""

from __future__ import annotations

import math
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.config import Config
from headwater.ops.dump import Limits, keyspace_value
from headwater.rdb import intset, listpack, lzf, payload, ziplist
from headwater.rdb.crc64 import crc64, crc64_pure, native_crc64
from headwater.rdb.encoding import RdbError, Reader, write_len, write_string
from headwater.rdb.objects import (
    TYPE_HASH,
    TYPE_HASH_ZIPLIST,
    TYPE_LIST_ZIPLIST,
    TYPE_ZSET_ZIPLIST,
    HashValue,
    ListValue,
    SetValue,
    ZSetValue,
    write_hash_object,
    write_list_object,
    write_set_object,
    write_stream_object,
)
from headwater.rdb.streams import TYPE_STREAM_LISTPACKS, TYPE_STREAM_LISTPACKS_3
from headwater.stream.groups import Group, id_key
from headwater.stream.stream import Stream
from headwater.structures.zsets import ZSetValue as KeyspaceZSet

LIMITS = Limits.of(Config())

# DUMP output of redis-server 7.0.15 (Debian 12)
#: RPUSH l a 123 -7 <46 b's>: a quicklist 2 with one LZF-compressed listpack node
LIST_DUMP = bytes.fromhex(
    "120102c3173f0f3f00000004008161027b01dff902ae62e02400012fff0a005ddc81c9f4ffe07f"
)
#: SADD si 1 2 70000 -5: an intset of 32-bit members
INTSET_DUMP = bytes.fromhex(
    "0b180400000004000000fbffffff0100000002000000701101000a00749cce0a5f64ef0e"
)
#: ZADD z 1.5 a -2 b 3 c 1e100 d: a listpack of member/score
ZSET_DUMP = bytes.fromhex(
    "1125250000000800816202dffe0281610283312e350481630203018164028631652b31303007ff0a00c38aee690ec2c7c4"
)
#: SET i 12345: an int16-encoded string
INT_DUMP = bytes.fromhex("00c139300a009d94ea2793fc08b9")


def test_crc64_check_value() -> None:
    assert crc64(b"123456789") == 0xE9C6D914C4B8D9CA


@given(st.binary(max_size=300), st.binary(max_size=300))
def test_crc64_continues(a: bytes, b: bytes) -> None:
    assert crc64(b, crc64(a)) == crc64(a + b)
    # the eight-bytes-a-step path agrees with the byte-at-a-time one
    assert crc64(a * 40) == crc64(a * 20, crc64(a * 20))


@given(st.binary(max_size=300), st.integers(0, 2**64 - 1), st.integers(0, 7))
def test_crc64_c_loop_agrees(data: bytes, start: int, skip: int) -> None:
    """The compiled build's C loop (``_crc64.c``) gives what the Python loop gives, from any
    starting value, for any length and alignment (a memoryview that starts mid-word)."""
    native = native_crc64()
    if native is None:
        pytest.skip("the pure build (no _crc64 module)")
    view = memoryview(b"x" * skip + data * 30)[skip:]
    assert native(view, start) == crc64_pure(view, start)
    assert native(b"123456789", 0) == 0xE9C6D914C4B8D9CA
    big = bytes(range(256)) * 300  # (past the size the C loop releases the GIL at)
    assert native(big, start) == crc64_pure(big, start)


def test_redis_payloads_decode() -> None:
    assert payload.load(LIST_DUMP) == (18, ListValue([b"a", b"123", b"-7", b"b" * 46]))
    assert payload.load(INTSET_DUMP) == (11, SetValue([b"-5", b"1", b"2", b"70000"]))
    _, zset = payload.load(ZSET_DUMP)
    assert zset == ZSetValue([b"b", b"a", b"c", b"d"], [-2.0, 1.5, 3.0, 1e100])
    assert payload.load(INT_DUMP) == (0, b"12345")


def test_redis_payloads_reencode_byte_for_byte() -> None:
    out = bytearray()
    write_list_object(out, [[b"a", b"123", b"-7", b"b" * 46]])
    assert payload.wrap(out) == LIST_DUMP
    out = bytearray()
    write_set_object(out, [b"1", b"2", b"70000", b"-5"], "intset")
    assert payload.wrap(out) == INTSET_DUMP
    out = bytearray([0])
    write_string(out, b"12345")
    assert payload.wrap(out) == INT_DUMP


@pytest.mark.parametrize("dump", [LIST_DUMP, INTSET_DUMP, ZSET_DUMP, INT_DUMP])
def test_damaged_payloads_are_refused(dump: bytes) -> None:
    for cut in range(len(dump)):
        with pytest.raises((payload.PayloadError, RdbError)):
            payload.load(dump[:cut])
    for i in range(len(dump)):
        flipped = bytearray(dump)
        flipped[i] ^= 0x40
        with pytest.raises((payload.PayloadError, RdbError)):
            payload.load(bytes(flipped))


def test_future_version_is_refused_even_with_a_good_checksum() -> None:
    body = INT_DUMP[:-10]
    assert payload.load(payload.wrap(body, 12))[1] == b"12345"
    with pytest.raises(payload.PayloadError):
        payload.load(payload.wrap(body, payload.MAX_VERSION + 1))


def test_type_newer_than_the_payload_version_is_refused() -> None:
    with pytest.raises(RdbError):
        payload.load(payload.wrap(LIST_DUMP[:-10], 9))


@settings(max_examples=300)
@given(st.binary(min_size=1, max_size=200))
def test_random_bytes_with_a_good_checksum_never_crash(body: bytes) -> None:
    try:
        payload.load(payload.wrap(body))
    except RdbError:
        pass


# ---------------------------------------------------------------------------------------------
# LZF


@given(
    st.binary(max_size=2000) | st.lists(st.sampled_from([b"ab", b"abc", b"x", b"\0"])).map(b"".join)
)
def test_lzf_round_trip(data: bytes) -> None:
    packed = lzf.compress(data, len(data) + 64)
    if not data:
        assert packed is None
        return
    assert packed is not None
    assert lzf.decompress(packed, len(data)) == data


def test_lzf_gives_up_when_it_does_not_save() -> None:
    data = bytes(range(100))
    assert lzf.compress(data, len(data) - 4) is None
    assert lzf.compress(b"a" * 100, 96) is not None


@pytest.mark.parametrize("bad", [b"\x05ab", b"\x20\x00", b"\xe0", b"\x00a\x20\x05"])
def test_lzf_bad_input(bad: bytes) -> None:
    with pytest.raises(lzf.LzfError):
        lzf.decompress(bad, 10)


# ---------------------------------------------------------------------------------------------
# Lengths and strings


@given(st.integers(0, 2**64 - 1))
def test_length_round_trip(n: int) -> None:
    out = bytearray()
    write_len(out, n)
    r = Reader(bytes(out))
    assert r.length() == n
    assert r.at_end()


@given(st.binary(max_size=400) | st.integers(-(2**63), 2**63 - 1).map(lambda i: b"%d" % i))
def test_string_round_trip(raw: bytes) -> None:
    out = bytearray()
    write_string(out, raw)
    r = Reader(bytes(out))
    assert r.string() == raw
    assert r.at_end()


def test_string_integer_encodings() -> None:
    for raw, first in ((b"-128", 0xC0), (b"32767", 0xC1), (b"-2147483648", 0xC2)):
        out = bytearray()
        write_string(out, raw)
        assert out[0] == first
    for raw in (b"007", b"-0", b"+1", b"2147483648"):
        out = bytearray()
        write_string(out, raw)
        assert out[0] == len(raw)


# ---------------------------------------------------------------------------------------------
# Listpack and intset

_ELEMENT = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.binary(max_size=5000),
    st.sampled_from([b"0", b"-0", b"007", b"127", b"128", b"-4096", b"9223372036854775808"]),
)


@settings(max_examples=200)
@given(st.lists(_ELEMENT, max_size=40))
def test_listpack_round_trip(elements: list[bytes | int]) -> None:
    blob = listpack.encode(elements)
    assert struct.unpack_from("<I", blob)[0] == len(blob)
    assert blob[-1] == 0xFF
    decoded = listpack.decode(blob)
    assert [listpack.as_bytes(e) for e in decoded] == [listpack.as_bytes(e) for e in elements]
    # integers stay integers; integer text becomes an integer only if it is canonical
    for original, got in zip(elements, decoded, strict=True):
        if isinstance(original, int):
            assert got == original


def test_listpack_count_saturates() -> None:
    blob = listpack.encode([1] * 70000)
    assert struct.unpack_from("<H", blob, 4)[0] == 65535
    assert len(listpack.decode(blob)) == 70000


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: b[:-1],  # no end byte
        lambda b: b[:4] + b"\x09\x00" + b[6:],  # wrong count
        lambda b: b[:6] + b"\x87" + b[7:],  # a string running past its element
        lambda b: b"\x00" + b[1:],  # wrong total size
    ],
)
def test_listpack_damage_detected(damage: object) -> None:
    blob = listpack.encode([b"hello", 5, b"world"])
    with pytest.raises(RdbError):
        listpack.decode(damage(blob))  # type: ignore[operator]


@given(st.sets(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=50))
def test_intset_round_trip(members: set[int]) -> None:
    blob = intset.encode(members)
    width = struct.unpack_from("<I", blob)[0]
    assert width == max(intset.width_for(m) for m in members)
    assert intset.decode(blob) == sorted(members)


def test_intset_refuses_unsorted_and_bad_width() -> None:
    with pytest.raises(RdbError):
        intset.decode(struct.pack("<II2h", 2, 2, 5, 1))
    with pytest.raises(RdbError):
        intset.decode(struct.pack("<II", 3, 0))


# ---------------------------------------------------------------------------------------------
# Ziplist and zipmap (older payloads, read only): built by hand here


def _zl_entry(prev: int, value: bytes | int) -> bytes:
    head = bytes((prev,)) if prev < 254 else b"\xfe" + struct.pack("<I", prev)
    if isinstance(value, int):
        if 0 <= value <= 12:
            return head + bytes((0xF1 + value,))
        return head + b"\xc0" + struct.pack("<h", value)
    if len(value) < 64:
        return head + bytes((len(value),)) + value
    return head + bytes((0x40 | (len(value) >> 8), len(value) & 0xFF)) + value


def _ziplist(values: list[bytes | int]) -> bytes:
    body = b""
    prev = 0
    tail = 10
    for v in values:
        entry = _zl_entry(prev, v)
        tail = 10 + len(body)
        body += entry
        prev = len(entry)
    return struct.pack("<IIH", 10 + len(body) + 1, tail, len(values)) + body + b"\xff"


def test_ziplist_payloads_of_older_redis() -> None:
    zl = _ziplist([b"a", 5, 300, b"x" * 100, b"b"])
    assert ziplist.decode(zl) == [b"a", 5, 300, b"x" * 100, b"b"]
    body = bytearray([TYPE_LIST_ZIPLIST])
    write_string(body, zl)
    assert payload.load(payload.wrap(body, 9))[1] == ListValue(
        [b"a", b"5", b"300", b"x" * 100, b"b"]
    )
    body = bytearray([TYPE_ZSET_ZIPLIST])
    write_string(body, _ziplist([b"m", b"1.5", b"n", 2]))
    assert payload.load(payload.wrap(body, 9))[1] == ZSetValue([b"m", b"n"], [1.5, 2.0])
    body = bytearray([TYPE_HASH_ZIPLIST])
    write_string(body, _ziplist([b"f", b"v"]))
    assert payload.load(payload.wrap(body, 9))[1] == HashValue({b"f": b"v"}, listpack=True)
    with pytest.raises(RdbError):
        ziplist.decode(zl[:13] + b"\x07" + zl[14:])  # a prevlen that does not match


def test_zipmap() -> None:
    zm = b"\x02\x01f\x02\x00v1\x03key\x05\x01valuex\xff"
    assert ziplist.decode_zipmap(zm) == [(b"f", b"v1"), (b"key", b"value")]


def test_empty_and_duplicate_collections_are_refused() -> None:
    body = bytearray([TYPE_HASH])
    write_len(body, 0)
    with pytest.raises(RdbError):
        payload.load(payload.wrap(body))
    body = bytearray([TYPE_HASH])
    write_len(body, 2)
    for x in (b"f", b"1", b"f", b"2"):
        write_string(body, x)
    with pytest.raises(RdbError):
        payload.load(payload.wrap(body))


# ---------------------------------------------------------------------------------------------
# Hashes and streams round trip


@given(
    st.dictionaries(st.binary(max_size=70), st.binary(max_size=70), min_size=1, max_size=30),
    st.booleans(),
)
def test_hash_round_trip(pairs: dict[bytes, bytes], as_listpack: bool) -> None:
    out = bytearray()
    write_hash_object(out, list(pairs.items()), as_listpack)
    _, value = payload.load(payload.wrap(out))
    assert isinstance(value, HashValue)
    assert value.pairs == list(pairs.items())


def _stream(ops: list[tuple[int, int, int]], node_entries: int, node_bytes: int) -> Stream:
    s = Stream()
    ms = 1
    for kind, a, b in ops:
        if kind == 0 or not s.length:
            ms += a
            pairs = [b"f", b"%d" % b] if b % 3 else [b"g%d" % (b % 2), b"x" * b, b"h", b"7"]
            sid = (ms, b) if (ms, b) > s.last_id else (s.last_id[0], s.last_id[1] + 1)
            s.append(sid, pairs, node_bytes, node_entries)
        elif kind == 1:
            ids = list(s.iter_ids())
            s.delete(ids[a % len(ids)])
        else:
            s.trim(maxlen=max(0, s.length - 1 - a % 3), minid=None, approx=False, limit=0)
    return s


def _snapshot(s: Stream) -> object:
    groups = {
        name: (
            g.last_id,
            g.entries_read,
            dict(g.pel),
            {c: (k.seen_time, list(k.pel)) for c, k in g.consumers.items()},
        )
        for name, g in s.groups.items()
    }
    nodes = [
        (n.master, n.fields, n.count, n.deleted, n.lp_bytes, [n.pairs_at(i) for i in range(len(n))])
        for n in s.nodes
    ]
    return (s.length, s.last_id, s.first_id, s.max_deleted_id, s.entries_added, nodes, groups)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 50), st.integers(0, 40)), max_size=120),
    st.sampled_from([(100, 4096), (5, 0), (0, 200)]),
)
def test_stream_round_trip(ops: list[tuple[int, int, int]], limits: tuple[int, int]) -> None:
    s = _stream(ops, *limits)
    ids = list(s.iter_ids())
    group = Group(b"g", s.last_id, s.length)
    consumer, _ = group.consumer(b"alice", 1000)
    group.deliver(consumer, [id_key(i) for i in ids[: len(ids) // 2]], 1234)
    group.consumer(b"bob", 999)
    s.groups[b"g"] = group
    s.groups[b"empty"] = Group(b"empty", (0, 0), -1)
    out = bytearray()
    write_stream_object(out, s)
    _, back = payload.load(payload.wrap(out))
    assert isinstance(back, Stream)
    back.check_invariants()
    for g in back.groups.values():
        g.check_invariants()
    assert _snapshot(back) == _snapshot(s)
    # the encoding of what was decoded is the same bytes
    again = bytearray()
    write_stream_object(again, back)
    assert again == out
    # each node's listpack has the size Headwater accounts for it
    from headwater.rdb.streams import node_listpack

    for node in s.nodes:
        assert len(node_listpack(node)) == node.lp_bytes


def test_stream_types_of_other_versions() -> None:
    s = _stream([(0, 1, 1), (0, 1, 2), (1, 0, 0), (0, 5, 4)], 100, 4096)
    group = Group(b"g", s.last_id, 2)
    consumer, _ = group.consumer(b"c", 5)
    consumer.active_time = 77
    group.deliver(consumer, [id_key(s.last_id)], 9)
    s.groups[b"g"] = group
    for rdb_type, version in ((TYPE_STREAM_LISTPACKS, 9), (TYPE_STREAM_LISTPACKS_3, 11)):
        out = bytearray()
        write_stream_object(out, s, rdb_type)
        _, back = payload.load(payload.wrap(out, version))
        assert isinstance(back, Stream)
        back.check_invariants()
        c = back.groups[b"g"].consumers[b"c"]
        assert (c.seen_time, c.active_time) == ((5, 77) if rdb_type == 21 else (5, 5))
        if rdb_type == TYPE_STREAM_LISTPACKS:  # derived on load
            assert back.entries_added == back.length
            assert back.max_deleted_id == (0, 0)
        assert back.groups[b"g"].entries_read >= -1


def test_nacked_entries_cannot_be_dumped() -> None:
    from headwater.rdb.streams import Unencodable

    s = _stream([(0, 1, 1)], 100, 4096)
    group = Group(b"g", s.last_id)
    group.release(id_key(s.last_id), 1)
    s.groups[b"g"] = group
    with pytest.raises(Unencodable):
        write_stream_object(bytearray(), s)


def test_scores_parse() -> None:
    assert math.isinf(payload.load(payload.wrap(bytes([3, 1, 1]) + b"a" + b"\xfe"))[1].items[0][1])  # type: ignore[union-attr]


@given(
    st.dictionaries(
        st.binary(max_size=8),
        st.floats(allow_nan=False, min_value=-1e6, max_value=1e6) | st.sampled_from([0.0, 1.0]),
        min_size=1,
        max_size=300,
    ),
    st.sampled_from(["ascending", "descending", "shuffled"]),
    st.randoms(use_true_random=False),
)
def test_a_loaded_sorted_set_is_in_order_whatever_the_order_stored(
    scores: dict[bytes, float], order: str, rng: random.Random
) -> None:
    """A listpack is stored ascending and a skiplist from its greatest member down: both
    are taken as columns; anything else is sorted. The same set every way."""
    pairs = sorted((score, member) for member, score in scores.items())
    if order == "descending":
        pairs.reverse()
    elif order == "shuffled":
        rng.shuffle(pairs)
    decoded = ZSetValue([m for _, m in pairs], [s for s, _ in pairs])
    z = keyspace_value(decoded, LIMITS)
    assert isinstance(z, KeyspaceZSet)
    z.check_invariants()
    assert list(z) == sorted((score, member) for member, score in scores.items())
