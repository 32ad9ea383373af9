"""Histograms (structures/histogram.py) against a model: every bucket shows how many values
were at most its bound, the last all of them; the sum and count are the values'."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from headwater.structures.histogram import BYTES, SECONDS, Histogram, Histograms

values = st.floats(min_value=0, max_value=1e9, allow_nan=False)


@given(st.lists(values, max_size=200), st.sampled_from([SECONDS, BYTES]))
def test_buckets_count_the_values_at_most_their_bound(seen: list[float], bounds: tuple) -> None:
    histogram = Histogram(bounds)
    for value in seen:
        histogram.observe(value)
        histogram.check_invariants()
    shown = histogram.cumulative()
    assert [bound for bound, _ in shown] == [*bounds, math.inf]
    for bound, count in shown:
        assert count == sum(1 for value in seen if value <= bound)
    assert histogram.count == len(seen)
    assert math.isclose(histogram.sum, sum(seen), rel_tol=1e-9, abs_tol=1e-9)


def test_a_value_on_a_bound_is_in_that_bucket() -> None:
    histogram = Histogram((1.0, 2.0))
    for value in (1.0, 2.0, 2.5):
        histogram.observe(value)
    assert histogram.cumulative() == [(1.0, 1), (2.0, 2), (math.inf, 3)]


def test_histograms_are_made_at_their_first_value() -> None:
    histograms = Histograms()
    assert histograms.by_name == {}
    histograms.observe("write_bytes", 100, BYTES)
    histograms.observe("write_bytes", 5000, BYTES)
    assert histograms.by_name["write_bytes"].bounds == BYTES
    assert histograms.by_name["write_bytes"].count == 2
