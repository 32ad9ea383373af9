"""The latency monitor and the command histograms (commands/latency.py): a series against a
reference ring, the HDR bucket arithmetic against a brute-force reading of HDR's rules, and
the engine's sources (calls, the expire cycle) and INFO latencystats."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from headwater.commands.latency import (
    SERIES_LEN,
    LatencyMonitor,
    bucket_of,
    cumulative_buckets,
    highest_equivalent,
    percentile,
    record,
)
from tests.unit.conftest import Harness


def _hdr_range(ns: int) -> tuple[int, int]:
    """HDR's equivalent range of a value (2 significant digits: 256 sub-buckets), read
    straight from its definition: values below 256 are exact; above, a value keeps its top
    8 bits."""
    if ns < 256:
        return ns, ns
    shift = ns.bit_length() - 8
    low = (ns >> shift) << shift
    return low, low + (1 << shift) - 1


@given(st.integers(1, 10**9))
def test_a_bucket_covers_exactly_hdrs_equivalent_range(ns: int) -> None:
    low, high = _hdr_range(ns)
    assert bucket_of(low) == bucket_of(ns) == bucket_of(high)
    assert highest_equivalent(bucket_of(ns)) == high
    if low > 1:
        assert bucket_of(low - 1) == bucket_of(ns) - 1


durations = st.lists(st.integers(0, 2_000_000), min_size=1, max_size=60)


@given(durations)
def test_cumulative_buckets_count_calls_up_to_each_power_of_two(micros: list[int]) -> None:
    counts: dict[int, int] = {}
    for us in micros:
        record(counts, us)
    values = [min(max(us * 1000, 1), 10**9) for us in micros]
    out = cumulative_buckets(counts)
    assert out[-1][1] == len(micros)
    level, previous = 1024, 0
    expected = []
    while previous < len(values):
        top = _hdr_range(level)[1]
        seen = sum(1 for v in values if v <= top)
        if seen > previous:
            expected.append((top // 1000, seen))
        previous = max(previous, seen)
        level *= 2
    assert out == expected


@given(durations, st.sampled_from([0.0, 50.0, 99.0, 99.9, 100.0]))
def test_percentile_is_the_top_of_the_ranked_calls_bucket(micros: list[int], p: float) -> None:
    counts: dict[int, int] = {}
    for us in micros:
        record(counts, us)
    values = sorted(min(max(us * 1000, 1), 10**9) for us in micros)
    rank = max(int(p / 100 * len(values) + 0.5), 1)
    low, high = _hdr_range(values[rank - 1])
    assert percentile(counts, p) == (low if p == 0.0 else high)


@given(st.lists(st.tuples(st.integers(0, 400), st.integers(0, 1000)), max_size=400))
def test_a_series_keeps_the_worst_of_each_second_for_160_seconds(
    samples: list[tuple[int, int]],
) -> None:
    monitor = LatencyMonitor()
    model: list[list[int]] = []
    worst = 0
    now = 1_000_000
    for step, ms in samples:
        now += step // 200  # (often the same second)
        monitor.add("command", ms, now)
        worst = max(worst, ms)
        if model and model[-1][0] == now:
            model[-1][1] = max(model[-1][1], ms)
        else:
            model.append([now, ms])
        monitor.check_invariants()
    if samples:
        series = monitor.events["command"]
        assert series.history() == [tuple(s) for s in model[-SERIES_LEN:]]
        assert series.max == worst
        assert series.latest() == tuple(model[-1])


def test_reset_names_events_case_blind_and_counts_them() -> None:
    monitor = LatencyMonitor()
    monitor.add("command", 5, 1)
    monitor.add("expire-cycle", 5, 1)
    assert monitor.reset(["COMMAND", "nope"]) == 1
    assert list(monitor.events) == ["expire-cycle"]
    assert monitor.reset(None) == 1
    assert monitor.events == {}


def test_the_engine_samples_slow_calls_and_the_expire_cycle() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "latency-monitor-threshold", "1")
    h.call(c, "DEBUG", "SLEEP", "0.005")
    latest = h.call(c, "LATENCY", "LATEST")
    assert [entry[0] for entry in latest] == [b"command"]
    assert latest[0][2] >= 5
    h.call(c, "SADD", "big", *(str(i) for i in range(500_000)))
    h.call(c, "PEXPIRE", "big", "1")
    h.effects.clear()  # (the recorded SADD held the members: the expiry only decref'd them)
    h.clock.advance(10)
    h.engine.cron()
    assert h.call(c, "EXISTS", "big") == 0
    assert b"expire-cycle" in [entry[0] for entry in h.call(c, "LATENCY", "LATEST")]
    h.call(c, "CONFIG", "SET", "latency-monitor-threshold", "0")
    h.call(c, "LATENCY", "RESET")
    h.call(c, "DEBUG", "SLEEP", "0.005")
    assert h.call(c, "LATENCY", "LATEST") == []  # (off: nothing sampled)


def test_histograms_follow_latency_tracking_and_resetstat() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "RESETSTAT")
    h.call(c, "SET", "a", "1")
    h.call(c, "SET", "a", "2")
    histogram = h.call(c, "LATENCY", "HISTOGRAM", "set")
    assert histogram[0] == b"set" and histogram[1][:2] == [b"calls", 2]
    info = h.call(c, "INFO", "latencystats").decode()
    assert "# Latencystats" in info
    assert "latency_percentiles_usec_set:p50=" in info and ",p99.9=" in info
    h.call(c, "CONFIG", "SET", "latency-tracking", "no")
    h.call(c, "SET", "a", "3")
    assert h.call(c, "LATENCY", "HISTOGRAM", "set")[1][:2] == [b"calls", 2]
    h.call(c, "CONFIG", "SET", "latency-tracking-info-percentiles", "0 50.5")
    assert "latency_percentiles_usec_set:p0=" in h.call(c, "INFO", "latencystats").decode()
    assert ",p50.5=" in h.call(c, "INFO", "latencystats").decode()
    h.call(c, "CONFIG", "RESETSTAT")
    assert h.call(c, "LATENCY", "HISTOGRAM", "set") == []
