"""Histograms of what the server times and sizes (issue 34: /metrics' ``headwater_*``
histograms): Prometheus's shape, a count per bucket of fixed upper bounds, the sum and the
count. ``observe`` is a bisection and three additions, cheap enough for every AOF write and
every script run; the buckets are cumulative only when shown."""

from __future__ import annotations

from bisect import bisect_left
from typing import Final

from headwater.errors import require

#: seconds: 50 us to 10 s, about three a decade
SECONDS: Final = (
    0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
    1.0, 2.5, 10.0,
)  # fmt: skip
#: bytes: 64 B to 16 MiB, a bucket every factor of four
#: for work that takes seconds to minutes (a snapshot, an AOF rewrite)
LONG_SECONDS: Final = (0.01, 0.05, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0)
BYTES: Final = (64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
                16777216.0)  # fmt: skip


class Histogram:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        #: per bucket (the last: past every bound, Prometheus's +Inf)
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        """One value: in the first bucket whose bound is at least it."""
        self.counts[bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[float, int]]:
        """(upper bound, values at most it), the last bound infinite."""
        shown = []
        running = 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            shown.append((bound, running))
        return shown

    def check_invariants(self) -> None:
        require(list(self.bounds) == sorted(set(self.bounds)), "bounds not strictly rising")
        require(len(self.counts) == len(self.bounds) + 1, "a count per bucket")
        require(sum(self.counts) == self.count, "the buckets hold every value")
        require(all(c >= 0 for c in self.counts), "a negative count")


class Histograms:
    """The server's histograms by name, each made at its first value."""

    def __init__(self) -> None:
        self.by_name: dict[str, Histogram] = {}

    def observe(self, name: str, value: float, bounds: tuple[float, ...] = SECONDS) -> None:
        histogram = self.by_name.get(name)
        if histogram is None:
            histogram = self.by_name[name] = Histogram(bounds)
        histogram.observe(value)
