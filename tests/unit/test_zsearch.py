"""The C bisections of a sorted set's chunks (``structures/_zsearch.c``) against their pure
twins in ``structures/zsets.py``: the same position for every probe, equal-score runs, -0.0,
infinities, members that are prefixes of one another. Skipped in the pure build (the C
module is built by ``make setup``, as the compiled modules)."""

from __future__ import annotations

from array import array
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.structures.zsets import index_pure, native_search, score_index_pure

NATIVE = native_search()
needs_native = pytest.mark.skipif(NATIVE is None, reason="the C module is not built (pure)")

SCORES = st.sampled_from([-float("inf"), -2.5, -0.0, 0.0, 1.0, 1.0, 3.0, float("inf")])
MEMBERS = st.sampled_from([b"", b"a", b"a\x00", b"ab", b"b", b"\xff", b"ba"])


def _columns(pairs: list[tuple[float, bytes]]) -> tuple[array[float], list[bytes]]:
    ordered = sorted(set(pairs))
    return array("d", [score for score, _ in ordered]), [member for _, member in ordered]


@needs_native
@settings(max_examples=400, deadline=None)
@given(
    st.lists(st.tuples(SCORES, MEMBERS), max_size=40),
    SCORES,
    MEMBERS,
    st.booleans(),
)
def test_position_matches_the_pure_bisection(
    pairs: list[tuple[float, bytes]], score: float, member: bytes, right: bool
) -> None:
    assert NATIVE is not None
    position, score_position = NATIVE
    scores, members = _columns(pairs)
    assert position(scores, members, score, member, right) == index_pure(
        scores, members, score, member, right
    )
    assert score_position(scores, score, right) == score_index_pure(scores, score, right)


@needs_native
def test_bad_columns_are_refused() -> None:
    assert NATIVE is not None
    position, score_position = NATIVE
    with pytest.raises(TypeError, match="array"):
        position(cast(Any, array("q", [1])), [b"a"], 1.0, b"a", False)
    with pytest.raises(TypeError, match="array"):
        score_position(cast(Any, b"12345678"), 1.0, False)
    with pytest.raises(ValueError, match="fewer members"):  # a run longer than the members
        position(array("d", [1.0, 1.0]), [b"a"], 1.0, b"b", False)
    assert position(array("d"), [], 1.0, b"a", True) == 0
