"""A write error that lasts: give up the effects not on disk.

If a write fails, new writes are refused with ``-MISCONF`` and the replies stay held until a
later turn manages to write; if the error lasts ``aof-write-error-timeout`` ms, the unsaved
effects are given up: the file is cut back to the last durable command, the data is loaded
again from disk, and each held reply that depended on a dropped effect becomes that
``-MISCONF`` (so nothing acknowledged is lost and no reader sees what was not acknowledged).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from headwater.config import Config
from headwater.engine import Engine
from headwater.errors import ReplyError
from headwater.server.aof_log import AofLog
from headwater.server.aof_rewrite import AofRewrite

log = logging.getLogger("headwater")


def aof_misconf(error: OSError) -> ReplyError:
    reason = os.strerror(error.errno) if error.errno is not None else str(error)
    return ReplyError("MISCONF", f"Errors writing to the AOF file: {reason}")


class RollBack:
    def __init__(
        self,
        config: Config,
        engine: Engine,
        aof: AofLog,
        rewrite: AofRewrite,
        reload: Callable[[], None],
        on_change: Callable[[], None],
    ) -> None:
        self.config = config
        self.engine = engine
        self.aof = aof
        self.rewrite = rewrite
        #: empties the data and loads the AOF again
        self.reload = reload
        self.on_change = on_change

    def due(self) -> bool:
        """The write error has lasted ``aof-write-error-timeout`` and something is not yet
        durable. (Not while appendonly waits for its first base: no manifest names the file
        yet, so there is nothing on disk to go back to; the writes wait instead.)"""
        aof = self.aof
        writer = aof.writer
        if writer is None or writer.error is None or aof.error_since is None:
            return False
        if aof.enabling or aof.reload_pending:
            return False
        waited_ms = (time.monotonic() - aof.error_since) * 1000
        if waited_ms < self.config["aof-write-error-timeout"]:
            return False
        # (the buffer alone is no reason: after a roll-back it holds the probe)
        return self.engine.effect_seq > aof.durable_seq or writer.size != aof.durable_size

    def start(self) -> None:
        """Memory goes back to what is durable, in two steps. Now: the file is cut to the end
        of the last durable effect, the unwritten ones are dropped, and every client whose
        waiting replies depended on a dropped effect gets -MISCONF in place of each of them
        (they leave this turn, whatever the size of the data). Then (``finish``): the
        data is loaded again from disk (as DEBUG LOADAOF); replies that read the dropped
        effects meanwhile wait for it and fail the same way. In a server, ``finish`` runs at
        the end of the flush that sent those replies (``Durability.finish_roll_back``), so no
        command read after them runs on the dropped effects; the queued ``finish`` then finds
        nothing to do. Writes stay refused until a write to the file works again
        (``AofWriter.probe``)."""
        aof = self.aof
        writer = aof.writer
        if writer is None or writer.error is None or aof.reload_pending:
            return
        error = writer.error
        kept = aof.durable_seq
        log.warning(
            "AOF write error for %d ms (%s): dropping the %d effects not on disk, cutting %s "
            "back to %d bytes",
            int((time.monotonic() - (aof.error_since or 0.0)) * 1000),
            error,
            self.engine.effect_seq - kept,
            writer.path.name,
            aof.durable_size,
        )
        if self.rewrite.child is not None:  # its base may hold the dropped effects
            log.warning("Killing the AOF rewrite child: it started from the dropped data")
            self.rewrite.kill()
            self.engine.info.aof_last_bgrewrite_status = "err"
        writer.roll_back(aof.durable_size)
        aof.begin_rollback(error)
        refusal = aof_misconf(error)
        failed = answer_dropped(self.engine, kept, refusal)
        log.warning("Answered -%s to %d clients; loading the data again", refusal.code, failed)
        if aof.wake is None:
            self.finish()
            return
        aof.wake(aof.on_durable)  # the server sends the replies just replaced, then:
        aof.wake(self.finish)

    def finish(self) -> None:
        aof = self.aof
        pending, carried = aof.take_rollback()
        if not pending or carried is None or aof.writer is None:
            aof.forget_rollback_error()
            return  # the AOF was closed meanwhile (shutdown, appendonly no)
        kept = aof.durable_seq
        try:
            self.reload()
        finally:
            aof.forget_rollback_error()
        log.warning("Data loaded again from the AOF: memory is what is on disk")
        answer_dropped(self.engine, kept, aof_misconf(carried))
        aof.finish_rollback()
        aof.error_since = time.monotonic()  # (a later roll-back, if any, a timeout later)
        self.on_change()
        if aof.wake is not None:
            aof.wake(aof.on_durable)


def answer_dropped(engine: Engine, kept: int, error: ReplyError) -> int:
    """After a roll-back that kept the effects up to ``kept``: every client whose waiting
    replies may depend on a dropped effect (its write, or a read that may have seen one) gets
    ``error`` in place of each reply, so that a pipeline stays in step (pushes, which answer
    nothing, are dropped). Returns how many clients that was."""
    encoded = b"-%s\r\n" % error.line()
    failed = 0
    for client in list(engine.clients.values()):
        if client.effect_seq <= kept and client.seen_seq <= kept:
            continue
        client.effect_seq = client.seen_seq = 0
        if not client.out:
            continue
        try:
            replies = count_replies(b"".join(client.out))
        except (ValueError, IndexError):  # (not RESP: cannot happen, but never crash here)
            replies = 1
        client.out[:] = [encoded * replies]
        engine.pending.add(client)
        failed += 1
    return failed


def count_replies(data: bytes) -> int:
    """The replies (RESP2 or RESP3 frames other than pushes) that ``data`` holds."""
    count = pos = 0
    while pos < len(data):
        push = data[pos] == ord(">")
        pos = _frame_end(data, pos)
        count += not push
    return count


def _frame_end(data: bytes, pos: int) -> int:
    """Where the RESP frame that starts at ``pos`` ends."""
    kind = data[pos : pos + 1]
    line_end = data.index(b"\r\n", pos)
    after = line_end + 2
    if kind in (b"$", b"!", b"="):
        size = int(data[pos + 1 : line_end])
        return after if size < 0 else after + size + 2
    if kind in (b"*", b"~", b">", b"%", b"|"):
        items = int(data[pos + 1 : line_end])
        items *= 2 if kind in (b"%", b"|") else 1
        for _ in range(max(items, 0)):
            after = _frame_end(data, after)
        return _frame_end(data, after) if kind == b"|" else after  # an attribute leads a reply
    return after  # a one-line frame: + - : _ , # (
