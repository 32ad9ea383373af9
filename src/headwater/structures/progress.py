"""How far a long job has got: bytes done of a total, from a start time (the caller's
clock, in seconds). INFO's loading fields and the tools' progress bars read it."""

from __future__ import annotations


class Progress:
    def __init__(self) -> None:
        self.active = False
        self.total = 0
        self.done = 0
        self.started_s = 0.0

    def begin(self, total: int, now_s: float) -> None:
        self.active = True
        self.total = max(total, 0)
        self.done = 0
        self.started_s = now_s

    def advance(self, done: int) -> None:
        """``done`` bytes of the total are done (never past the total, never backwards)."""
        if done > self.done:
            self.done = min(done, self.total) if self.total else done

    def end(self) -> None:
        self.active = False

    def percent(self) -> float:
        return 100.0 * self.done / self.total if self.total else 0.0

    def eta_s(self, now_s: float) -> int:
        """Seconds left at the rate so far (Redis's figure: 1 until a second has passed)."""
        elapsed = int(now_s - self.started_s)
        if elapsed <= 0 or not self.done:
            return 1
        return elapsed * (self.total - self.done) // self.done
