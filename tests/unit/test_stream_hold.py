"""``StreamHold`` (replication/hold.py): when the replication stream goes out."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from headwater.replication.hold import HOLD_MAX_BYTES, StreamHold


def test_the_first_write_goes_at_once() -> None:
    assert StreamHold(1000).wait_for(now=5.0, size=10) == 0.0


def test_a_write_within_the_hold_waits_for_its_end() -> None:
    hold = StreamHold(1000)
    hold.sent(10.0)
    assert abs(hold.wait_for(10.0004, 10) - 0.0006) < 1e-9
    assert hold.wait_for(10.001, 10) == 0.0
    assert hold.wait_for(11.0, 10) == 0.0


def test_zero_holds_nothing() -> None:
    hold = StreamHold(0)
    hold.sent(10.0)
    assert hold.wait_for(10.0, 1) == 0.0


def test_a_big_batch_goes_at_once() -> None:
    hold = StreamHold(1000)
    hold.sent(10.0)
    assert hold.wait_for(10.0, HOLD_MAX_BYTES - 1) > 0.0
    assert hold.wait_for(10.0, HOLD_MAX_BYTES) == 0.0


@given(
    hold_us=st.integers(0, 5_000_000),
    turns=st.lists(st.tuples(st.floats(0, 0.01), st.integers(1, 2 * HOLD_MAX_BYTES)), max_size=50),
)
def test_against_a_model(hold_us: int, turns: list[tuple[float, int]]) -> None:
    """Replayed as the server does (a held turn's bytes wait for the timer, which sends
    them): no byte waits longer than the hold, and no two sends of small batches come
    closer together than the hold."""
    hold = StreamHold(hold_us)
    hold_s = hold_us / 1e6
    now, gathered, since, sends = 0.0, 0, 0.0, []
    for gap, size in turns:
        if gathered:  # the timer set by the held turn fires before this turn, or not
            due = since + hold.wait_for(since, gathered)
            assert due - since <= hold_s + 1e-9
            if due <= now + gap:
                hold.sent(due)
                sends.append((due, gathered))
                gathered = 0
        now += gap
        if not gathered:
            since = now
        gathered += size
        if hold.wait_for(now, gathered) == 0.0:
            assert now - since <= hold_s + 1e-9
            hold.sent(now)
            sends.append((now, gathered))
            gathered = 0
    for (t0, _), (t1, size) in itertools.pairwise(sends):
        assert size >= HOLD_MAX_BYTES or t1 - t0 >= hold_s - 1e-9
