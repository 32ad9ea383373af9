"""``structures.zsets.ZSetValue`` against a plain dict, ordered by sorting (hypothesis):
adds, score changes and removals, with chunks small enough to split and empty often."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.structures import zsets
from headwater.structures.zsets import LexRange, ScoreRange, ZSetLimits, ZSetValue

LIMITS = ZSetLimits(listpack_entries=5, listpack_value=3)
members = st.sampled_from([b"a", b"b", b"c", b"dd", b"eee", b"ffff", b"g", b"h", b"", b"zz"])
scores = st.one_of(
    st.sampled_from([0.0, -0.0, 1.0, 1.5, -2.0, float("inf"), float("-inf")]),
    st.integers(-5, 5).map(float),
)
ops = st.lists(
    st.one_of(
        st.tuples(st.just("set"), members, scores),
        st.tuples(st.just("remove"), members, scores),
    ),
    max_size=60,
)
ends = st.one_of(st.none(), members)


@pytest.fixture(autouse=True)
def _small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zsets, "CHUNK", 3)


def _order(model: dict[bytes, float]) -> list[tuple[float, bytes]]:
    return sorted((score, member) for member, score in model.items())


@settings(max_examples=300, deadline=None)
@given(ops, scores, scores, st.booleans(), st.booleans(), ends, ends, st.booleans(), st.booleans())
def test_matches_a_sorted_dict(
    steps: list[tuple[str, bytes, float]],
    low: float,
    high: float,
    low_open: bool,
    high_open: bool,
    lex_low: bytes | None,
    lex_high: bytes | None,
    lex_low_open: bool,
    lex_high_open: bool,
) -> None:
    z = ZSetValue.for_size(1, 1, LIMITS)
    model: dict[bytes, float] = {}
    was_listpack = True
    for op, member, score in steps:
        if op == "set":
            previous = z.set(member, score, LIMITS)
            assert previous == model.get(member)
            model[member] = score
        else:
            assert z.remove(member) == (member in model)
            model.pop(member, None)
        z.check_invariants()
        assert not (z.listpack and not was_listpack)  # never back to listpack
        was_listpack = z.listpack
        if z.listpack:
            assert len(model) <= LIMITS.listpack_entries
            assert all(len(m) <= LIMITS.listpack_value for m in model)
    order = _order(model)
    assert [(s, m) for s, m in z] == order
    assert dict(z.scores) == model
    for position, (_, member) in enumerate(order):
        assert z.rank(member) == position
    n = len(order)
    for start in range(n):
        assert z.by_rank(start, n - 1) == order[start:]
    r = ScoreRange(low, high, low_open, high_open)
    first, end = z.score_span(r)
    inside = [p for p in order if r.above_low(p[0]) and r.below_high(p[0])]
    assert order[first:end] == inside
    if not r.empty():  # (ZRANGEBYSCORE's walk: what the span and LIMIT select)
        for offset in range(n + 2):
            for count in (-1, -3, 1, 2, 5):
                taken = inside[offset:] if count < 0 else inside[offset : offset + count]
                assert z.score_members(r, offset, count) == [m for _, m in taken]
    one_score = ZSetValue()
    for _, member in order:
        one_score.set(member, 0.0, LIMITS)
    lr = LexRange(lex_low, lex_high, lex_low_open, lex_high_open)
    first, end = one_score.lex_span(lr)
    everything = sorted(model)
    assert [m for _, m in one_score.by_rank(first, end - 1)] == [
        m for m in everything if lr.above_low(m) and lr.below_high(m)
    ]


def test_load_ordered_matches_one_by_one() -> None:
    pairs = [(float(i % 7), b"m%03d" % i) for i in range(50)]
    pairs.sort()
    loaded = ZSetValue(False)
    loaded.load_ordered(pairs)
    loaded.check_invariants()
    built = ZSetValue(False)
    for score, member in pairs:
        built.set(member, score, LIMITS)
    assert list(loaded) == list(built) and loaded.rank(b"m010") == built.rank(b"m010")


@given(
    st.lists(st.tuples(st.sampled_from([-1.5, -0.0, 0.0, 2.0, 1e300]), st.binary(max_size=3))),
    st.integers(0, 1200),
)
def test_load_columns_matches_load_ordered(raw: list[tuple[float, bytes]], extra: int) -> None:
    """The snapshot's column load lays out what ``load_ordered`` lays out from pairs (one
    chunk and several: ``extra`` members more)."""
    pairs = sorted(dict((m, s) for s, m in raw + [(1.0, b"x%05d" % i) for i in range(extra)])
                   .items(), key=lambda p: (p[1], p[0]))  # fmt: skip
    ordered = [(score, member) for member, score in pairs]
    by_pairs, by_columns = ZSetValue(False), ZSetValue(False)
    by_pairs.load_ordered(ordered)
    by_columns.load_columns(array("d", [s for s, _ in ordered]), [m for _, m in ordered])
    by_columns.check_invariants()
    assert list(by_columns) == list(by_pairs)
    assert by_columns.scores == by_pairs.scores
    assert by_columns.chunk_members == by_pairs.chunk_members
    assert [list(c) for c in by_columns.chunk_scores] == [list(c) for c in by_pairs.chunk_scores]
    assert list(by_columns.last_scores) == list(by_pairs.last_scores)
    assert by_columns.last_members == by_pairs.last_members


def test_invariant_violations_raise() -> None:
    z = ZSetValue()
    z.set(b"a", 1.0, LIMITS)
    z.scores[b"a"] = 2.0
    with pytest.raises(zsets.ZSetInvariantError):
        z.check_invariants()
