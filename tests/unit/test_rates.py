"""INFO's instantaneous rates (structures/rates.py) against Redis's arithmetic: a reading
every 100 ms, the mean of the last 16 rates, integer division at each step."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from headwater.structures.rates import PERIOD_MS, SAMPLES, InstantMetric


def test_a_steady_rate_is_reported_once_the_window_fills() -> None:
    meter = InstantMetric()
    count = 0
    for step in range(SAMPLES + 1):
        meter.track(step * PERIOD_MS, count)
        count += 50  # 50 per 100 ms: 500 a second
    assert meter.value() == 500


def test_the_first_reading_only_starts_the_count() -> None:
    meter = InstantMetric()
    meter.track(1_000, 10_000)
    assert meter.value() == 0
    assert not meter.due(1_050)
    assert meter.due(1_100)


@given(st.lists(st.tuples(st.integers(1, 500), st.integers(0, 10_000)), min_size=1, max_size=40))
def test_the_value_is_the_mean_of_the_last_sixteen_rates(steps: list[tuple[int, int]]) -> None:
    meter = InstantMetric()
    now, count, rates = 0, 0, []
    meter.track(now, count)
    for elapsed, added in steps:
        now, count = now + elapsed, count + added
        meter.track(now, count)
        rates.append(added * 1000 // elapsed)
    window = rates[-SAMPLES:]
    assert meter.value() == sum(window) // SAMPLES
