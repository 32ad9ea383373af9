"""XRANGE's hot loop in C (``resp/_encode.c``'s ``entries_span``) against its Python
(``commands/entries.py``'s ``_encode_span_pure``, the pure build's): the same bytes, IDs and
limit left for any node (entries with the master's fields or their own, deleted entries,
columns narrowed by ``seal``), any bounds, either direction, any limit."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater._build import build_kind
from headwater.commands import entries
from headwater.stream.ids import StreamID
from headwater.stream.node import Node

_FIELD_SETS = [[b"f"], [b"a", b"b"], [b"name", b""], [b"x" * 70]]


@st.composite
def nodes(draw: st.DrawFn) -> Node:
    master_fields = draw(st.sampled_from(_FIELD_SETS))
    ms = draw(st.sampled_from([0, 9, 1764200000000, 2**64 - 10_000]))
    seq = draw(st.sampled_from([0, 250, 70_000, 2**40, 2**64 - 1_000]))
    node = Node((ms, seq), master_fields)
    for i in range(draw(st.integers(1, 30))):
        fields = master_fields if draw(st.integers(0, 3)) else draw(st.sampled_from(_FIELD_SETS))
        values = [draw(st.binary(max_size=300 if i % 7 == 0 else 20)) for _ in fields]
        pairs = [word for pair in zip(fields, values, strict=True) for word in pair]
        node.append((ms + i // 3, seq + i), pairs)
    for index in draw(st.sets(st.integers(0, len(node) - 1), max_size=len(node) - 1)):
        node.delete_at(index)
    if draw(st.booleans()):
        node.seal()
    return node


def _pure(
    node: Node, lo: int, hi: int, reverse: bool, limit: int
) -> tuple[list[bytes], list[StreamID], int]:
    out: list[bytes] = []
    ids: list[StreamID] = []
    left = entries._encode_span_pure(node, lo, hi, reverse, limit, out, ids)
    return out, ids, left


@pytest.mark.skipif(build_kind() != "compiled", reason="the pure build has no C loop")
@settings(max_examples=150)
@given(nodes(), st.data())
def test_the_c_loop_encodes_as_the_python_one(node: Node, data: st.DataObject) -> None:
    native = entries._NATIVE_SPAN
    assert native is not None
    lo = data.draw(st.integers(0, len(node)))
    hi = data.draw(st.integers(lo, len(node)))
    reverse = data.draw(st.booleans())
    limit = data.draw(st.sampled_from([-1, 0, 1, 2, 5, 100]))
    want_out, want_ids, want_left = _pure(node, lo, hi, reverse, limit)
    out: list[bytes] = []
    ids: list[StreamID] = []
    left = native(
        node.fields, node.ms, node.seq, node.offsets, node.blob, node.tomb, lo, hi, reverse,
        limit, out, ids,
    )  # fmt: skip
    assert out == want_out
    assert ids == want_ids
    assert left == want_left or (left < 0 and want_left < 0)  # (no limit: any negative)
    assert native(
        node.fields, node.ms, node.seq, node.offsets, node.blob, node.tomb, lo, hi, reverse,
        limit, [], None,
    ) == left  # fmt: skip


def test_the_compiled_build_encodes_spans_in_c() -> None:
    native = entries._NATIVE_SPAN
    assert (native is not None) == (build_kind() == "compiled")
    if native is None:
        return
    node = Node((1, 0), [b"f"])
    node.append((1, 0), [b"f", b"v"])
    args = (node.ms, node.seq, node.offsets, node.blob, node.tomb)
    with pytest.raises(TypeError):
        native([b"f"], *args, 0, 1, False, -1, [], None)  # fields not a tuple
    with pytest.raises(ValueError, match="out of step"):
        native(node.fields, *args, 0, 2, False, -1, [], None)  # past the node
    cut = bytearray(node.blob[:-1])  # the value runs past the blob
    with pytest.raises(SystemError, match="past the node's blob"):
        native(node.fields, node.ms, node.seq, node.offsets, cut, None, 0, 1, False, -1, [], None)
