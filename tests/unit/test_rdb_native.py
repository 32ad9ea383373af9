"""The C listpack decoders (``rdb/_listpack.c``, the compiled build) agree with the Python ones
(``listpack.decode_pure``, ``streams._read_node_pure``): the same elements, the same stream
node columns and listpack accounting, and no answer (the Python reader's error) for anything
the Python reader refuses. Issue 19 (import-rdb's speed)."""

from __future__ import annotations

import importlib
import math
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.rdb import listpack, lzf
from headwater.rdb.encoding import RdbError, Reader, write_string
from headwater.rdb.streams import _read_node_pure, node_listpack, node_listpack_pure
from headwater.stream.node import Node
from headwater.stream.stream import Stream

try:
    _native: Any = importlib.import_module("headwater.rdb._listpack")
except ImportError:
    _native = None

needs_native = pytest.mark.skipif(_native is None, reason="the pure build (no _listpack module)")

_TEXT = st.sampled_from(
    [b"", b"0", b"-0", b"007", b"127", b"128", b"-4096", b"4095", b"-1", b"+5", b"1a",
     b"9223372036854775807", b"9223372036854775808", b"-9223372036854775808",
     b"-9223372036854775809", b"12345678901234567890123"]
)  # fmt: skip
_ELEMENT = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.sampled_from([0, 127, 128, -1, 4095, 4096, -4096, -4097, 32767, 32768, 2**31, -(2**31)]),
    st.binary(max_size=80),
    st.binary(min_size=4090, max_size=4100),
    _TEXT,
)


def _pure_or_none(blob: bytes) -> list[bytes | int] | None:
    try:
        return listpack.decode_pure(blob)
    except RdbError:
        return None


@needs_native
@settings(max_examples=300)
@given(st.lists(_ELEMENT, max_size=40))
def test_listpack_decoder_agrees(elements: list[bytes | int]) -> None:
    blob = listpack.encode(elements)
    pure = listpack.decode_pure(blob)
    assert _native.decode(blob, False) == pure
    assert _native.decode(blob, True) == [listpack.as_bytes(e) for e in pure]
    assert listpack.decode_text(blob) == [listpack.as_bytes(e) for e in pure]


@needs_native
@settings(max_examples=500)
@given(
    st.lists(_ELEMENT, min_size=1, max_size=12),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=3),
    st.integers(-3, 3),
)
def test_listpack_decoder_refuses_what_python_refuses(
    elements: list[bytes | int], damage: list[tuple[int, int]], cut: int
) -> None:
    """Damaged listpacks: the C decoder gives what Python gives, or nothing where Python
    raises (the caller then raises Python's error)."""
    blob = bytearray(listpack.encode(elements))
    for where, byte in damage:
        blob[where % len(blob)] = byte
    if cut > 0:
        blob = blob[:-cut]
    elif cut < 0:
        blob += b"\xff" * -cut
    data = bytes(blob)
    pure = _pure_or_none(data)
    assert _native.decode(data, False) == pure
    if pure is None:
        with pytest.raises(RdbError):
            listpack.decode(data)


def _stream(ops: list[tuple[int, int, int]], max_entries: int) -> Stream:
    """A stream of appends (some with their own fields, some with integer-like values) and
    deletions, in nodes of at most ``max_entries``."""
    s = Stream()
    ms = 1
    for kind, a, b in ops:
        ms += a + 1
        if kind == 2 and s.length:
            ids = list(s.iter_ids())
            s.delete(ids[b % len(ids)])
            continue
        values = [b"v%d" % b, b"%d" % (b - 20), b"x" * (b * 3), b"-0", b"007"]
        value = values[b % len(values)]
        pairs = [b"f", value] if kind == 0 else [b"f", value, b"%d" % a, b"g" * (a % 70)]
        s.append((ms, b % 3), pairs, 4096, max_entries)
    return s


def _columns(node: Node) -> tuple[object, ...]:
    return (
        node.master, node.fields, list(node.ms), list(node.seq), list(node.offsets),
        bytes(node.blob), None if node.tomb is None else bytes(node.tomb), node.count,
        node.deleted, node.lp_bytes,
    )  # fmt: skip


@needs_native
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 300), st.integers(0, 60)), max_size=80),
    st.sampled_from([100, 5, 2]),
)
def test_stream_node_reader_agrees(ops: list[tuple[int, int, int]], max_entries: int) -> None:
    """Each node of a stream: the C reader's columns are those ``Node.append`` builds."""
    s = _stream(ops, max_entries)
    for node in s.nodes:
        blob = node_listpack(node)
        got = _native.stream_node(blob, *node.master)
        pure = _read_node_pure(node.master, blob, None)
        assert got is not None
        fields, ms, seq, offsets, data, tomb, count, deleted, lp_bytes, last_ms, last_seq = got
        built = Node(node.master, fields, None, lp_bytes)
        built.ms.frombytes(ms)
        built.seq.frombytes(seq)
        built.offsets.frombytes(offsets)
        built.blob, built.tomb, built.count, built.deleted = data, tomb, count, deleted
        assert _columns(built) == _columns(pure)
        # (the stream's own node may hold a shorter tomb: one made before its last appends)
        assert _columns(built)[:6] + _columns(built)[7:] == _columns(node)[:6] + _columns(node)[7:]
        assert (last_ms, last_seq) == pure.last_id()
        built.check_invariants()


@needs_native
@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 300), st.integers(0, 60)), max_size=80),
    st.sampled_from([100, 5, 2]),
)
def test_stream_node_writer_agrees(ops: list[tuple[int, int, int]], max_entries: int) -> None:
    """Each node of a stream (entries with the master's fields and with their own, deleted
    ones, integer-like values): the C writer's listpack is the Python writer's."""
    s = _stream(ops, max_entries)
    for node in s.nodes:
        assert node_listpack(node) == node_listpack_pure(node)
        assert len(node_listpack(node)) == node.lp_bytes


@needs_native
def test_stream_node_writer_leaves_odd_columns_to_python() -> None:
    """Columns that do not agree (an offset past the blob, a truncated value, an unknown
    entry marker) get no answer from C."""
    s = _stream([(0, 1, 5), (1, 2, 7), (0, 3, 9)], 100)
    node = s.nodes[0]
    args = (node.fields, node.ms, node.seq, node.offsets, node.blob, node.tomb,
            node.count, node.deleted, *node.master)  # fmt: skip
    assert _native.stream_listpack(*args) == node_listpack_pure(node)
    for blob in (bytes(node.blob[:-1]), b"\x07" + bytes(node.blob[1:]), b""):
        assert _native.stream_listpack(*args[:4], blob, *args[5:]) is None


@needs_native
@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 300), st.integers(0, 60)), max_size=30),
    st.integers(0, 10_000),
    _ELEMENT,
)
def test_stream_node_reader_refuses_what_python_refuses(
    ops: list[tuple[int, int, int]], where: int, element: bytes | int
) -> None:
    """A node's listpack with one element replaced: the C reader agrees with the Python
    reader, or gives nothing (Python then builds the node or says what is wrong)."""
    s = _stream(ops, 100)
    if not s.nodes:
        return
    node = s.nodes[0]
    elements = listpack.decode(node_listpack(node))
    elements[where % len(elements)] = element
    blob = listpack.encode(elements)
    got = _native.stream_node(blob, *node.master)
    try:
        pure = _read_node_pure(node.master, blob, None)
    except RdbError:
        assert got is None
        return
    if got is not None:
        fields, ms, seq, offsets, data, tomb, count, deleted, lp_bytes, _, _ = got
        built = Node(node.master, fields, None, lp_bytes)
        built.ms.frombytes(ms)
        built.seq.frombytes(seq)
        built.offsets.frombytes(offsets)
        built.blob, built.tomb, built.count, built.deleted = data, tomb, count, deleted
        assert _columns(built) == _columns(pure)


@needs_native
@settings(max_examples=300)
@given(
    st.one_of(st.binary(max_size=400), st.lists(st.sampled_from([b"ab", b"abc", b"x" * 40]))),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=2),
    st.integers(-2, 2),
)
def test_lzf_decompressor_agrees(
    data: bytes | list[bytes], damage: list[tuple[int, int]], delta: int
) -> None:
    """The C LZF loop gives what the Python loop gives, and nothing where it raises (damaged
    data, a wrong expected length)."""
    raw = data if isinstance(data, bytes) else b"".join(data)
    packed = lzf.compress(raw, len(raw) + 64) or b""
    assert _native.lzf_decompress(packed, len(raw)) == raw == lzf.decompress_pure(packed, len(raw))
    broken = bytearray(packed)
    for where, byte in damage:
        if broken:
            broken[where % len(broken)] = byte
    length = max(0, len(raw) + delta)
    try:
        want: bytes | None = lzf.decompress_pure(bytes(broken), length)
    except lzf.LzfError:
        want = None
    assert _native.lzf_decompress(bytes(broken), length) == want


@needs_native
@settings(max_examples=300)
@given(st.lists(_ELEMENT, max_size=40))
def test_listpack_encoder_agrees(elements: list[bytes | int]) -> None:
    """The C encoder writes the bytes the Python one writes (integer text as integers, each
    width of integer and string, the count and total in the header)."""
    assert _native.encode(elements) == listpack.encode_pure(elements)


@needs_native
@settings(max_examples=200)
@given(st.dictionaries(st.one_of(st.binary(max_size=30), _TEXT), st.one_of(st.binary(), _TEXT)))
def test_mapping_encoder_agrees(fields: dict[bytes, bytes]) -> None:
    """A hash's listpack from its dict: the pairs in order, as the list encoder writes them."""
    flat = [x for pair in fields.items() for x in pair]
    assert _native.encode_mapping(fields) == listpack.encode_pure(flat)
    assert _native.encode_mapping({b"a": 1}) is None and _native.encode_mapping([b"a"]) is None


@needs_native
def test_listpack_encoder_leaves_the_rest_to_python() -> None:
    """What it does not take (an int past int64, another type, not a list) it leaves to the
    Python encoder, which refuses or writes it."""
    assert _native.encode([2**63]) is None and _native.encode([b"x", "x"]) is None
    assert _native.encode((1, 2)) is None
    assert listpack.encode((1, 2)) == listpack.encode_pure([1, 2])
    with pytest.raises(ValueError, match="does not fit in int64"):
        listpack.encode([2**63])


@needs_native
@settings(max_examples=300)
@given(
    st.one_of(
        st.binary(max_size=600),
        st.lists(st.sampled_from([b"ab", b"abc", b"x" * 40, b"field:0000000001"]), max_size=80),
    ),
    st.integers(-3, 40),
)
def test_lzf_compressor_agrees(data: bytes | list[bytes], slack: int) -> None:
    """The C LZF encoder makes Redis's decisions as the Python one does: the same bytes, or
    no answer where the output would not fit in the limit (RDB's ``len - 4``, and others)."""
    raw = data if isinstance(data, bytes) else b"".join(data)
    for limit in (len(raw) - 4, len(raw) + slack, slack):
        assert _native.lzf_compress(raw, limit) == lzf.compress_pure(raw, limit)


def _outcome(read: Any) -> tuple[object, ...]:
    try:
        return ("ok", read())
    except RdbError as exc:
        return ("error", str(exc))


@needs_native
@settings(max_examples=400)
@given(
    st.lists(
        st.one_of(_TEXT, st.binary(max_size=70), st.sampled_from([b"ab" * 40, b"x" * 300])),
        max_size=12,
    ),
    st.lists(st.floats(allow_nan=True), min_size=12, max_size=12),
    st.booleans(),
    st.integers(0, 14),
    st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), max_size=2),
    st.integers(0, 3),
)
def test_string_runs_agree(
    words: list[bytes],
    scores: list[float],
    scored: bool,
    n: int,
    damage: list[tuple[int, int]],
    cut: int,
) -> None:
    """``Reader.strings``/``scored_strings`` (a C run, then ``Reader.string``) read what ``n``
    ``Reader.string`` calls read (integer and LZF encodings included), and refuse what they
    refuse with the same error, at the same place (damaged, truncated data, NaN scores)."""
    out = bytearray()
    for word, score in zip(words, scores, strict=False):
        write_string(out, word)
        if scored:
            out += struct.pack("<d", score)
    for where, byte in damage:
        if out:
            out[where % len(out)] = byte
    data = bytes(out[: len(out) - cut] if cut <= len(out) else b"")

    def one_by_one(r: Reader) -> list[object]:
        got: list[object] = []
        for _ in range(n):
            got.append(r.string())
            if scored:
                score = r.binary_double()
                if math.isnan(score):
                    raise RdbError("NaN sorted set score")
                got.append(score)
        return got

    pure, native = Reader(data), Reader(data)
    want = _outcome(lambda: one_by_one(pure))
    run = native.scored_strings if scored else native.strings
    got = _outcome(lambda: run(n))
    if want[0] == "ok" and got[0] == "ok":  # (no NaN got through: plain equality)
        assert got == want
        assert native.pos == pure.pos
    else:
        assert got == want
