"""A node's runs of entries (``Node.extend``) and single entries (``Node.append``), packed in
C where built (``_pack.c``), against the same entries appended one by one by ``append``'s
Python (``_append_packed``, the pure build's), the reference: the same buffers, counters and
listpack size, and the same entry where the node is full."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater._build import build_kind
from headwater.stream import ids
from headwater.stream import node as node_module
from headwater.stream.node import Node

Entry = tuple[tuple[int, int], list[bytes], int]

#: values at listpack's boundaries: integers (in and out of int64, leading zeros, "-0", "+1"),
#: and strings around the 64 and 4096-byte encodings
_VALUES = st.one_of(
    st.binary(max_size=20),
    st.integers(-(2**64), 2**64).map(lambda n: str(n).encode()),
    st.sampled_from([b"-0", b"007", b"+5", b"-", b"0", b"-9223372036854775808"]),
    st.sampled_from([63, 64, 65, 4095, 4096, 4097]).map(lambda n: b"v" * n),
)
_FIELDS = st.sampled_from([[b"f"], [b"a", b"b"], [b"a", b"c"], [b"f", b"f"]])


@st.composite
def _runs(draw: st.DrawFn) -> tuple[list[bytes], list[Entry]]:
    master_fields = draw(_FIELDS)
    ms = draw(st.sampled_from([0, 5, 1764200000000, 2**63 - 10, 2**64 - 200_000]))
    seq = draw(st.sampled_from([0, 3, 2**64 - 2_000_000]))
    entries: list[Entry] = []
    for _ in range(draw(st.integers(1, 25))):
        fields = master_fields if draw(st.integers(0, 4)) else draw(_FIELDS)
        pairs = [word for f in fields for word in (f, draw(_VALUES))]
        entries.append(((ms, seq), pairs, sum(map(len, pairs))))
        if draw(st.booleans()):
            ms, seq = ms + draw(st.integers(1, 5000)), draw(st.sampled_from([0, 1, 200]))
        else:
            seq += draw(st.integers(1, 40000))
    return master_fields, entries


def _state(node: Node) -> tuple[object, ...]:
    node.check_invariants()
    return (
        node.ms.tolist(),
        node.seq.tolist(),
        node.offsets.tolist(),
        bytes(node.blob),
        node.count,
        node.lp_bytes,
    )


def _appended(
    master_fields: list[bytes], entries: list[Entry], limit: int, most: int, packed: bool = True
) -> Node:
    """One entry at a time while it fits (``Stream.append``'s rule): by ``append``'s Python
    (the reference), or by ``append``."""
    node = Node(entries[0][0], master_fields)
    for sid, pairs, size in entries:
        held = len(node)
        if held and (node.lp_bytes + size >= limit or (most and held >= most)):
            break
        if packed:
            node._append_packed(sid, pairs)
        else:
            node.append(sid, pairs)
    return node


@settings(max_examples=300)
@given(_runs(), st.sampled_from([50, 300, 5000, 2**30]), st.integers(0, 12))
def test_a_run_packs_as_entries_appended_one_by_one(
    run: tuple[list[bytes], list[Entry]], limit: int, most: int
) -> None:
    master_fields, entries = run
    reference = _appended(master_fields, entries, limit, most)
    node = Node(entries[0][0], master_fields)
    taken = node.extend(entries, 0, limit, most)
    assert taken == len(reference)
    assert _state(node) == _state(reference)
    assert _state(_appended(master_fields, entries, limit, most, packed=False)) == _state(reference)


def test_the_count_steps_of_a_long_run() -> None:
    """Past 128 and 4096 entries the master's count takes a wider integer (lp_bytes grows by
    the difference once); an extend started mid-way continues the same node."""
    entries: list[Entry] = [
        ((1000 + i, 0), [b"f", b"%d" % i], 1 + len(b"%d" % i)) for i in range(5000)
    ]
    reference = _appended([b"f"], entries, 2**30, 0)
    node = Node(entries[0][0], [b"f"])
    assert node.extend(entries, 0, 2**30, 0) == 5000
    assert _state(node) == _state(reference)
    halves = Node(entries[0][0], [b"f"])
    assert halves.extend(entries[:2500], 0, 2**30, 0) == 2500
    assert halves.extend(entries, 2500, 2**30, 0) == 5000
    assert _state(halves) == _state(reference)


@given(_runs(), st.sampled_from([300, 2**30]), st.integers(0, 12))
def test_the_c_packer_leaves_what_the_python_loop_leaves(
    run: tuple[list[bytes], list[Entry]], limit: int, most: int
) -> None:
    """``_pack.pack_run`` through ``Node.extend`` against its Python loop (no packer: the pure
    build's), entry for entry."""
    packer = node_module._native_pack()
    if packer is None:
        pytest.skip("the pure build (no _pack module)")
    master_fields, entries = run
    native, loop = Node(entries[0][0], master_fields), Node(entries[0][0], master_fields)
    taken = native.extend(entries, 0, limit, most, packer)
    assert taken == loop.extend(entries, 0, limit, most, None)
    assert _state(native) == _state(loop)


def test_the_compiled_build_packs_in_c() -> None:
    pack = node_module._native_pack()
    assert (pack is not None) == (build_kind() == "compiled")
    if pack is None:
        return
    native, append_one = pack.pack_run, pack.append_one
    args = (0, 0, 100, 10, 0, 0, [b"f"], 0)
    with pytest.raises(TypeError):
        native(b"", [], *args)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        native(bytearray(), (), *args)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        native(bytearray(), [])  # type: ignore[call-arg]
    # anything but an entry with the node's field names, as bytes, stops the run unapplied
    blob = bytearray(b"xy")
    odd: list[object] = [
        ((5, 0), [b"f", "v"], 2),
        ((5, 1), [b"g", b"v"], 2),
        [(5, 2), [b"f"], 1],
        ((5, 2), [b"f", b"v"], "2"),
        ((-5, 2), [b"f", b"v"], 2),
        ((2**64, 2), [b"f", b"v"], 2),
    ]
    for entry in odd:
        got = native(blob, [entry], 0, 1, 100, 10, 0, 0, [b"f"], 0)  # type: ignore[list-item]
        assert got == (0, 0, b"", b"", b"")
        assert blob == b"xy"
    stop, spent, ms, seq, offsets = native(
        blob,
        [((7, 1), [b"f", b"12"], 3), ((7, 2), [b"f", b"v"], 2)],
        *(0, 0, 100, 10, 7, 0, [b"f"], 0),
    )
    assert (stop, spent) == (2, 10 + 11)
    assert array("Q", ms).tolist() == [7, 7]
    assert array("Q", seq).tolist() == [1, 2]
    assert array("I", offsets).tolist() == [2, 9]
    assert blob == b"xy\x00\x02\x00\x00\x0012\x00\x01\x00\x00\x00v"
    # one entry: into the columns themselves, or nothing at all
    columns = array("Q"), array("Q"), array("I")
    for sid, pairs in [((5, 0), [b"f", "v"]), ((5, 1), (b"g", b"v")), ((-1, 0), [b"f", b"v"])]:
        assert append_one(blob, *columns, sid, pairs, [b"f"], 7, 0, 2) == -1  # type: ignore[arg-type]
        assert [len(column) for column in columns] == [0, 0, 0] and len(blob) == 15
    assert (
        append_one(blob, *columns, (8, 0), (b"f", b"-3"), [b"f"], 7, 0, 127)
        == 2 + 2 + 2 + 3 + 2 + 1
    )
    assert [column.tolist() for column in columns] == [[8], [0], [15]]
    assert blob[15:] == b"\x00\x02\x00\x00\x00-3"
    with pytest.raises(AttributeError):  # (a column that cannot take it: none taken)
        append_one(blob, columns[0], columns[1], None, (9, 0), [b"f", b"v"], [b"f"], 7, 0, 1)  # type: ignore[arg-type]
    assert [len(column) for column in columns] == [1, 1, 1] and len(blob) == 22


@given(
    st.one_of(st.integers(0, 2**64 - 1), st.integers(-(2**70), 2**70)),
    st.one_of(st.integers(0, 2**64 - 1), st.sampled_from([0, 9, 10, -1, 2**64])),
)
def test_ids_format_as_bytes_formatting_does(ms: int, seq: int) -> None:
    """``format_id_parts`` (``_pack.format_id`` where built) writes every reply's IDs; any int
    (an entry's are uint64) as ``b"%d-%d"`` does."""
    assert ids.format_id_parts(ms, seq) == b"%d-%d" % (ms, seq)
    assert ids._format_parts_pure(ms, seq) == b"%d-%d" % (ms, seq)
    assert ids.format_id((ms, seq)) == b"%d-%d" % (ms, seq)
    assert (ids._native_format_parts() is not None) == (build_kind() == "compiled")


_ID_TEXT = st.one_of(
    st.binary(max_size=40),
    st.tuples(st.integers(0, 10**19), st.integers(0, 10**19)).map(lambda p: b"%d-%d" % p),
    st.text("0123456789-+ *", max_size=40).map(str.encode),
    st.sampled_from([b"-", b"1-", b"-1", b"007-08", b"1-2-3", b"9" * 18 + b"-" + b"9" * 18]),
)


@given(_ID_TEXT)
def test_plain_ids_parse_as_the_python_reader_does(raw: bytes) -> None:
    """``plain_id`` (``_pack.plain_id`` where built) reads a replica's every XADD ID and any
    explicit one a client sends: the same (ms, seq) or None as ``_plain_id``, and what it
    reads is what ``parse_id``'s general rules would read."""
    got = ids.plain_id(raw)
    assert got == ids._plain_id(raw)
    if got is not None:
        ms, _, seq = raw.partition(b"-")
        assert got == (int(ms), int(seq))
        assert ids.parse_id(raw) == got
    assert (ids._native_plain_id() is not None) == (build_kind() == "compiled")


def test_plain_id_refuses_what_is_not_bytes() -> None:
    native = ids._native_plain_id()
    if native is None:
        pytest.skip("the pure build (no _pack module)")
    with pytest.raises(TypeError):
        native("1-1")  # type: ignore[arg-type]


@settings(max_examples=60)
@given(_runs(), st.integers(0, 25))
def test_a_sealed_node_narrows_its_columns_and_widens_to_grow(
    run: tuple[list[bytes], list[Entry]], more: int
) -> None:
    """Sealing keeps ``seq`` and ``offsets`` in the narrowest array type their values fit
    (the same values, and the same bytes for C code and files); an append to a sealed node
    widens them back first and lands as it would have on a node never sealed."""
    fields, entries = run
    sealed, plain = Node(entries[0][0], fields), Node(entries[0][0], fields)
    cut = max(len(entries) - more, 1)
    head, tail = entries[:cut], entries[cut:]
    for node in (sealed, plain):
        node.extend(head, 0, 0, 1000)
    sealed.seal()
    top_seq = max(sealed.seq)
    assert sealed.seq.itemsize == next(n for n in (1, 2, 4, 8) if top_seq >> (8 * n) == 0)
    assert sealed.offsets.itemsize == (2 if max(sealed.offsets) < 1 << 16 else 4)
    assert [bytes(c) for c in sealed.wide_columns()] == [bytes(c) for c in plain.wide_columns()]
    assert list(sealed.seq) == list(plain.seq) and list(sealed.offsets) == list(plain.offsets)
    for node in (sealed, plain):
        for sid, pairs, _ in tail:
            node.append(sid, pairs)
        node.check_invariants()
    assert (sealed.seq.typecode, sealed.offsets.typecode) == (
        ("Q", "I") if tail else (sealed.seq.typecode, sealed.offsets.typecode)
    )
    for name in ("ms", "seq", "offsets", "blob"):
        assert list(getattr(sealed, name)) == list(getattr(plain, name)), name
    assert (sealed.count, sealed.lp_bytes) == (plain.count, plain.lp_bytes)
