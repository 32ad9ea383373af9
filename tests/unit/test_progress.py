"""Progress of long work: the figures INFO's loading fields show (structures/progress.py)
and the tools' meter (persistence/meter.py): a bar redrawn in place on a terminal, a line
every few seconds in a log, nothing in a log for a short job."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st

from headwater.persistence.meter import LINE_EVERY_S, Meter, size
from headwater.structures.progress import Progress


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_percent_and_eta_as_redis_computes_them() -> None:
    progress = Progress()
    progress.begin(1000, now_s=50.0)
    assert (progress.percent(), progress.eta_s(50.0)) == (0.0, 1)  # (1 until a second passed)
    progress.advance(250)
    assert progress.percent() == 25.0
    assert progress.eta_s(54.0) == 4 * 750 // 250  # elapsed * remaining / loaded
    progress.advance(100)  # (never backwards)
    assert progress.done == 250
    progress.advance(5000)  # (never past the total)
    assert progress.done == 1000


@given(st.integers(1, 10**12), st.lists(st.integers(0, 10**12), max_size=20))
def test_done_only_grows_and_stays_within_the_total(total: int, steps: list[int]) -> None:
    progress = Progress()
    progress.begin(total, 0.0)
    seen = 0
    for step in steps:
        progress.advance(step)
        assert seen <= progress.done <= total
        seen = progress.done
    assert 0.0 <= progress.percent() <= 100.0


def test_a_terminal_gets_a_bar_redrawn_in_place() -> None:
    out, clock = Terminal(), Clock()
    meter = Meter("dump.rdb", 4 << 20, out, clock)
    meter.update(1 << 20)
    clock.now += 1
    meter.update(2 << 20)
    meter.finish()
    text = out.getvalue()
    frames = text.split("\r")[1:]
    assert frames[0].startswith("dump.rdb  [######..................]   25.0%  1.0 MB of 4.0 MB")
    assert "50.0%  2.0 MB of 4.0 MB  1 s left" in frames[1]
    assert text.endswith("\n") and text.count("\n") == 1  # (one line, redrawn)


def test_a_log_gets_a_line_every_few_seconds_and_a_short_job_none() -> None:
    out, clock = io.StringIO(), Clock()
    meter = Meter("x.aof", 1000, out, clock)
    meter.update(10)
    meter.finish()
    assert out.getvalue() == ""  # (a short job: nothing in the log)
    meter = Meter("x.aof", 1000, out, clock)
    clock.now += LINE_EVERY_S
    meter.update(500)
    clock.now += 1
    meter.update(600)  # (too soon for another line)
    clock.now += LINE_EVERY_S
    meter.update(1000)
    meter.finish()
    assert out.getvalue().splitlines() == [
        "x.aof:  50.0%  500 B of 1000 B  5 s left",
        "x.aof: 100.0%  1000 B of 1000 B",
        "x.aof: 100.0%  1000 B of 1000 B",
    ]


def test_sizes_read_as_people_read_them() -> None:
    assert [size(n) for n in (0, 1023, 1024, 5 << 20, 3 << 30)] == [
        "0 B", "1023 B", "1.0 KB", "5.0 MB", "3.0 GB",
    ]  # fmt: skip
