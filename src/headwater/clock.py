"""Time sources. Structures and handlers take time from a ``Clock`` so tests can fake it."""

from __future__ import annotations

import time
from typing import Final, Protocol

#: (Final module names are C statics once compiled: no module attribute read per call)
_time_ns: Final = time.time_ns
_monotonic: Final = time.monotonic


class Clock(Protocol):
    def now_ms(self) -> int:
        """Wall-clock milliseconds since the Unix epoch."""
        ...

    def monotonic_ms(self) -> float:
        """Milliseconds on a clock that never goes backwards (for timeouts and idle times)."""
        ...


class SystemClock:
    def now_ms(self) -> int:
        return _time_ns() // 1_000_000

    def monotonic_ms(self) -> float:
        return _monotonic() * 1000.0


class FakeClock:
    """A clock tests move by hand."""

    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now = now_ms
        self.mono = 0.0

    def now_ms(self) -> int:
        return self.now

    def monotonic_ms(self) -> float:
        return self.mono

    def advance(self, ms: int) -> None:
        self.now += ms
        self.mono += ms
