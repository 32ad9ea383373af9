"""The start's load of the data, watched (Redis's loading state and processEventsWhileBlocked).

Theory of operation
-------------------
The listeners are open before the load starts, so clients can connect to a server that is
still loading; the load runs in the event loop's place, so nothing would answer them. The
loaders (AOF replay, snapshot, a Redis RDB file) tell ``LoadWatch`` how far they got; after
the first 200 ms, every 100 ms the watch lets the busy poller (server/busy.py) accept and
read clients, and the engine answers ``-LOADING Redis is loading the dataset in memory`` to
every command but those Redis allows while loading (its ``loading`` flag: INFO, AUTH,
CLIENT, CONFIG GET, SHUTDOWN …), less three that would reach into the load (DEBUG, CONFIG
SET and CONFIG REWRITE). INFO persistence shows ``loading:1`` and Redis's loading figures
meanwhile. A load of less than 200 ms answers nobody: its clients' first replies wait.

SHUTDOWN during the load stops it: nothing is saved (a part of the data would overwrite
the whole) and the process exits. The log gets a line every 5 s.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from headwater.commands.context import CommandSpec
from headwater.errors import ReplyError
from headwater.structures.progress import Progress

log = logging.getLogger("headwater")

LOADING = ReplyError("LOADING", "Redis is loading the dataset in memory")
#: commands with the ``loading`` flag that must not run in the middle of a load
NOT_WHILE_LOADING = frozenset({"debug", "config|set", "config|rewrite"})
SERVE_AFTER_S = 0.2
SERVE_EVERY_S = 0.1
LOG_EVERY_S = 5.0


def allowed_while_loading(row: CommandSpec) -> bool:
    return "loading" in row.flags and row.name not in NOT_WHILE_LOADING


class LoadInterrupted(Exception):
    """SHUTDOWN arrived while the data was loading."""


class LoadWatch:
    def __init__(
        self,
        progress: Progress,
        serve: Callable[[], bool],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.progress = progress
        #: serves the clients once; False when a SHUTDOWN asks to stop
        self._serve = serve
        self._clock = clock
        self._started = 0.0
        self._served = 0.0
        self._logged = 0.0

    def begin(self, total: int) -> None:
        now = self._clock()
        self._started = self._served = self._logged = now
        self.progress.begin(total, time.time())
        if total >= 1 << 20:
            log.warning("Loading %.1f MB of data", total / (1 << 20))

    def at(self, base: int) -> Callable[[int], None]:
        """The callback for a file that starts at ``base`` bytes into the whole load."""
        return lambda done: self.advance(base + done)

    def advance(self, done: int) -> None:
        self.progress.advance(done)
        now = self._clock()
        if now - self._started >= SERVE_AFTER_S and now - self._served >= SERVE_EVERY_S:
            self._served = now
            if not self._serve():
                raise LoadInterrupted()
        if now - self._logged >= LOG_EVERY_S:
            self._logged = now
            progress = self.progress
            log.warning(
                "Loading: %.1f%% (%d of %d bytes), %d s left",
                progress.percent(), progress.done, progress.total, progress.eta_s(time.time()),
            )  # fmt: skip

    def end(self, completed: bool) -> None:
        if completed and self.progress.active and self.progress.total >= 1 << 20:
            log.warning("Data loaded in %.2f s", self._clock() - self._started)
        self.progress.end()
