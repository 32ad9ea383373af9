"""Forked children (BGSAVE, the AOF rewrite, a full sync's snapshot): how one is stopped."""

from __future__ import annotations

import contextlib
import gc
import os
import signal


def as_writer_child() -> None:
    """Called first in a forked child that writes a file and leaves: no garbage collection
    in it. A full collection would walk every object of the parent's data, touching (and so
    copying, page by page) all of its memory, for garbage that dies with the child anyway
    (a full sync of 5M elements to a Redis replica: 5.5 s with collections in its writers,
    2.6 s without)."""
    gc.disable()


def kill_child(pid: int) -> None:
    """Stop the child ``pid`` at once and reap it (Redis: killRDBChild / killAppendOnlyChild).
    A child that is already gone is no error."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
