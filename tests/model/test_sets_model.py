"""``structures.sets.SetValue`` against a plain Python set, under random adds and removes
with small limits, so that every encoding change happens (hypothesis)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.structures.sets import (
    HASHTABLE,
    INTSET,
    LISTPACK,
    SetLimits,
    SetValue,
    int64_of,
)

LIMITS = SetLimits(intset_entries=6, listpack_entries=4, listpack_value=3)

members = st.one_of(
    st.integers(-30, 30).map(lambda n: b"%d" % n),
    st.sampled_from([b"a", b"bb", b"ccc", b"dddd", b"007", b"-0", b"+1", b"1e3", b""]),
    st.integers(2**63 - 2, 2**63 + 1).map(lambda n: b"%d" % n),
)
operations = st.lists(
    st.tuples(st.sampled_from(["add", "add", "remove", "prepare"]), st.lists(members, max_size=5)),
    max_size=40,
)


def _check_against(s: SetValue, model: set[bytes]) -> None:
    s.check_invariants()
    assert set(s.members) == model
    assert len(s) == len(model)
    if s.encoding == INTSET:
        assert all(int64_of(m) is not None for m in model)
        assert len(model) <= LIMITS.intset_entries
        assert s.ordered() == sorted(model, key=int)
    elif s.encoding == LISTPACK:
        assert len(model) <= LIMITS.listpack_entries
        assert all(len(m) <= LIMITS.listpack_value for m in model)


@settings(max_examples=300, deadline=None)
@given(st.lists(members, min_size=1, max_size=6), operations)
def test_set_matches_a_plain_set(
    first_batch: list[bytes], ops: list[tuple[str, list[bytes]]]
) -> None:
    s = SetValue.for_first(first_batch[0], len(first_batch), LIMITS)
    model: set[bytes] = set()
    rank = {INTSET: 0, LISTPACK: 1, HASHTABLE: 2}
    for member in first_batch:
        assert s.add(member, LIMITS) == (member not in model)
        model.add(member)
    _check_against(s, model)
    for op, batch in ops:
        before = rank[s.encoding]
        if op == "prepare":
            s.prepare(len(batch), LIMITS)
        for member in batch:
            if op == "add":
                assert s.add(member, LIMITS) == (member not in model)
                model.add(member)
            elif op == "remove":
                assert s.remove(member) == (member in model)
                model.discard(member)
        assert rank[s.encoding] >= before  # never back to a smaller encoding
        _check_against(s, model)


def test_listpack_keeps_insertion_order_and_intset_converts_in_numeric_order() -> None:
    s = SetValue.for_first(b"5", 3, LIMITS)
    for member in (b"5", b"-2", b"3"):
        s.add(member, LIMITS)
    assert s.encoding == INTSET and s.ordered() == [b"-2", b"3", b"5"]
    s.add(b"z", LIMITS)  # a string joins a small intset: listpack, numeric order first
    assert s.encoding == LISTPACK and s.ordered() == [b"-2", b"3", b"5", b"z"]
    s.remove(b"3")
    s.add(b"1", LIMITS)
    assert s.ordered() == [b"-2", b"5", b"z", b"1"]
    s.add(b"q", LIMITS)  # a fifth member passes listpack_entries=4
    assert s.encoding == HASHTABLE


def test_canonical_integers_only_make_an_intset() -> None:
    for raw in (b"007", b"-0", b"+1", b" 1", b"1 ", b"", b"9223372036854775808", b"\xd9\xa1"):
        assert int64_of(raw) is None, raw
    for raw in (b"0", b"-1", b"9223372036854775807", b"-9223372036854775808"):
        assert int64_of(raw) == int(raw)
