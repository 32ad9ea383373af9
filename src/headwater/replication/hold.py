"""When the replication stream goes out: at once, or held back to go with the next turns'.

Under load a primary's loop turns come every few hundred microseconds, each with a few
dozen effects. Writing each turn's bytes to every replica wakes each replica that often, and
on a small machine the replicas run on the primary's own CPUs: the wakeups, reads and
applies of a Python replica cost the primary more than the bytes do. Holding the stream
while the last write is younger than ``repl-stream-hold-us`` (1 ms by default) makes one
write a millisecond instead of one a turn; an idle primary still sends a lone write at once,
since its last write is old. Redis writes every turn (``repl-stream-hold-us 0``).

The hold never delays what someone waits for: a WAIT or WAITAOF, a GETACK, a new replica's
PSYNC, a PING, a change of role flush the stream first (``Replication.flush(force=True)``).
Nor does it grow without bound: ``HOLD_MAX_BYTES`` gathered go out at once.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

#: held bytes past this go out at once (a burst of big values is not worth holding back)
HOLD_MAX_BYTES = 64 * 1024


class StreamHold:
    """The decision, with the time passed in (seconds, monotonic)."""

    def __init__(self, hold_us: int) -> None:
        self.hold_s = hold_us / 1e6
        #: when the stream last went out (never: as long ago as it gets)
        self.last_sent = float("-inf")

    def wait_for(self, now: float, size: int) -> float:
        """Seconds the ``size`` gathered bytes should still wait (0: send them now)."""
        if size >= HOLD_MAX_BYTES:
            return 0.0
        return max(0.0, self.last_sent + self.hold_s - now)

    def sent(self, now: float) -> None:
        self.last_sent = now


class TimedHold:
    """``StreamHold`` on an event loop, for a sender that flushes once per loop turn: while
    the gathered bytes wait, one timer runs ``flush`` (which must send them) as the wait
    ends. The primary's stream to its replicas and a region's feeds to its peers."""

    def __init__(self, hold_us: int, flush: Callable[[], None]) -> None:
        self.policy = StreamHold(hold_us)
        self._flush = flush
        self._timer: asyncio.TimerHandle | None = None

    def held(self, loop: asyncio.AbstractEventLoop, size: int) -> bool:
        """Whether ``size`` gathered bytes wait for the next turns (the timer is set)."""
        wait = self.policy.wait_for(loop.time(), size)
        if wait <= 0.0:
            return False
        if self._timer is None:
            self._timer = loop.call_later(wait, self._ended)
        return True

    def sent(self, loop: asyncio.AbstractEventLoop) -> None:
        self.policy.sent(loop.time())

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _ended(self) -> None:
        self._timer = None
        self._flush()
