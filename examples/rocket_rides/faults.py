"""Fault injection: the article's simulated failures, as decisions a component asks for.

The streamer asks :meth:`Faults.double_send` after a batch went out (10% of the time it sends the
whole batch again, as a producer that lost the reply would); a consumer calls
:meth:`Faults.crash_point` after processing a batch and before committing it (10% of the time it
raises :class:`InjectedCrash`, which aborts the database transaction). Decisions come from a
seeded ``random.Random`` so a demo run can be replayed; tests pass rates of 0 or 1 or a script.
"""

from __future__ import annotations

import random
from collections.abc import Iterator


class InjectedCrash(RuntimeError):
    """A simulated crash: the supervisor restarts the component with fresh connections."""


class Faults:
    """Seeded fault decisions; ``script`` (a sequence of booleans) overrides the dice."""

    def __init__(
        self,
        *,
        double_send_rate: float = 0.0,
        crash_rate: float = 0.0,
        seed: int | None = None,
        script: Iterator[bool] | None = None,
    ) -> None:
        self.double_send_rate = double_send_rate
        self.crash_rate = crash_rate
        self.rng = random.Random(seed)
        self.script = script

    @classmethod
    def demo(cls, seed: int | None) -> Faults:
        """The article's rates: a double-sent batch or a crash 10% of the time."""
        return cls(double_send_rate=0.1, crash_rate=0.1, seed=seed)

    @classmethod
    def none(cls) -> Faults:
        return cls()

    def _roll(self, rate: float) -> bool:
        if self.script is not None:
            return next(self.script, False)
        return rate > 0 and self.rng.random() < rate

    def double_send(self) -> bool:
        """True when the streamer should send the batch it just sent once more."""
        return self._roll(self.double_send_rate)

    def crash_point(self, where: str) -> None:
        """Raise InjectedCrash here some of the time (``where`` names the spot in the error)."""
        if self._roll(self.crash_rate):
            raise InjectedCrash(f"injected crash {where}")
