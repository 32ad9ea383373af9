"""Forked children (BGSAVE, the AOF rewrite, a full sync's snapshot): how one is stopped."""

from __future__ import annotations

import contextlib
import os
import signal


def kill_child(pid: int) -> None:
    """Stop the child ``pid`` at once and reap it (Redis: killRDBChild / killAppendOnlyChild).
    A child that is already gone is no error."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
