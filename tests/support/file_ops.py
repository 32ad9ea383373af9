"""File operations for the AOF writer that fail or wait on demand (the seam
``headwater.persistence.aof.FileOps``): a full disk, a slow ``fdatasync``."""

from __future__ import annotations

import os
import threading

from headwater.persistence.aof import FileOps

#: a held sync gives up waiting after this long, so that a forgotten release cannot hang a
#: test run (seconds)
HOLD_LIMIT_S = 60.0


class FaultyFileOps(FileOps):
    """Writes fail with ``write_errno`` while it is set (the first one may first write half
    of its data, as a disk that fills up mid-write), syncs with ``sync_errno``; background
    syncs (on the writer's worker thread) wait while ``hold_syncs(True)`` is on. A sync on
    the event loop's thread never waits (it would stop the loop that must release it): while
    held, ``inline_sync`` is off, so the writer hands every sync to its worker."""

    def __init__(self) -> None:
        self.write_errno: int | None = None
        self.sync_errno: int | None = None
        self._half_write_pending = False
        self.inline_sync = True
        self._released = threading.Event()
        self._released.set()

    def fail_writes(self, code: int | None, half_first: bool = False) -> None:
        self.write_errno = code
        self._half_write_pending = half_first and code is not None

    def fail_syncs(self, code: int | None) -> None:
        self.sync_errno = code

    def hold_syncs(self, hold: bool) -> None:
        self.inline_sync = not hold
        if hold:
            self._released.clear()
        else:
            self._released.set()

    def write(self, fd: int, data: bytes) -> int:
        code = self.write_errno
        if code is None:
            return super().write(fd, data)
        if self._half_write_pending:
            self._half_write_pending = False
            return super().write(fd, data[: len(data) // 2])
        raise OSError(code, os.strerror(code))

    def fdatasync(self, fd: int) -> None:
        if threading.current_thread() is not threading.main_thread():
            self._released.wait(HOLD_LIMIT_S)
        code = self.sync_errno
        if code is not None:
            raise OSError(code, os.strerror(code))
        super().fdatasync(fd)
