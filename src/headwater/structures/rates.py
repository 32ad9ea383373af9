"""Redis's instantaneous metrics (INFO's ``instantaneous_ops_per_sec`` and the kbps fields):
a reading of a counter every 100 ms, the rate the mean of the last 16 readings (server.c's
trackInstantaneousMetric and getInstantaneousMetric, integer arithmetic as there)."""

from __future__ import annotations

SAMPLES = 16
PERIOD_MS = 100


class InstantMetric:
    def __init__(self) -> None:
        self._samples = [0] * SAMPLES
        self._next = 0
        self._last_ms = -1
        self._last_count = 0

    def track(self, now_ms: int, count: int) -> None:
        """A reading of the counter at ``now_ms`` (a monotonic clock)."""
        if self._last_ms >= 0:
            elapsed = now_ms - self._last_ms
            rate = (count - self._last_count) * 1000 // elapsed if elapsed > 0 else 0
            self._samples[self._next] = rate
            self._next = (self._next + 1) % SAMPLES
        self._last_ms = now_ms
        self._last_count = count

    def due(self, now_ms: int) -> bool:
        return self._last_ms < 0 or now_ms - self._last_ms >= PERIOD_MS

    def value(self) -> int:
        return sum(self._samples) // SAMPLES
