"""Progress of the command-line tools' long work (import-rdb, check-aof, check-snapshot): a
bar redrawn in place on a terminal, a line every few seconds otherwise (a log, a pipe).

    dump.rdb  [##########..........]  51.2%  1.2 GB of 2.3 GB  12 s left
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

from headwater.structures.progress import Progress

#: how often a terminal bar is redrawn, and a line written elsewhere
BAR_EVERY_S = 0.1
LINE_EVERY_S = 5.0
WIDTH = 24


class Meter:
    def __init__(
        self,
        label: str,
        total: int,
        out: TextIO | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.out = out if out is not None else sys.stderr
        self.clock = clock
        self.terminal = self.out.isatty()
        self.progress = Progress()
        now = clock()
        self.progress.begin(total, now)
        # (a bar is drawn at once; a log gets its first line after LINE_EVERY_S: a short job
        # writes nothing there)
        self._shown_s = -1e9 if self.terminal else now
        self._drawn = False

    def update(self, done: int) -> None:
        self.progress.advance(done)
        now = self.clock()
        every = BAR_EVERY_S if self.terminal else LINE_EVERY_S
        if now - self._shown_s >= every:
            self._shown_s = now
            self._show(now)

    def finish(self) -> None:
        """The work is over: the bar's last state stays on its line; a log that got lines
        gets the last one."""
        if self._drawn:
            self._show(self.clock())
            if self.terminal:
                self.out.write("\n")
                self.out.flush()

    def _show(self, now: float) -> None:
        progress = self.progress
        figures = f"{progress.percent():5.1f}%  {size(progress.done)} of {size(progress.total)}"
        left = f"  {progress.eta_s(now)} s left" if progress.done < progress.total else ""
        if self.terminal:
            filled = int(WIDTH * progress.done / progress.total) if progress.total else WIDTH
            bar = "#" * filled + "." * (WIDTH - filled)
            self.out.write(f"\r{self.label}  [{bar}]  {figures}{left}\033[K")
        else:
            self.out.write(f"{self.label}: {figures}{left}\n")
        self._drawn = True
        self.out.flush()


def size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"
