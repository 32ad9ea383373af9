"""Replaying an append-only file through the engine (recovery at startup, DEBUG LOADAOF).

Every command runs as it did live, through ``Engine.execute``, from a client flagged
``replaying`` (it may give XADD IDMP a concrete ID, as the effect carries it). What can go
wrong, and what happens:

* The file ends inside a command (a crash mid-write): with ``aof-load-truncated yes`` the
  torn tail is cut off with a warning and loading goes on; otherwise loading fails.
* The file ends inside MULTI … EXEC: the transaction never happened; it is discarded and cut
  off the same way.
* Bytes that are not RESP, or an unknown command: the file is corrupt; loading fails with the
  file and offset, and the server refuses to start (``headwater check-aof --fix`` repairs it).
* A known command that replies with an error: logged and counted, loading goes on (Redis
  does not check replies either).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from headwater.engine.core import Engine
from headwater.persistence.aof import CorruptAof, TornTail, read_commands

log = logging.getLogger("headwater")


@dataclass
class ReplayResult:
    commands: int = 0
    failed: int = 0
    truncated_at: int | None = None  # offset the file was cut at (a torn tail)


class Replayer:
    """Feeds AOF files to an engine, as one client."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.client = engine.new_client("aof", "")
        self.client.replaying = True

    def replay(self, path: Path, truncate_torn: bool) -> ReplayResult:
        result = ReplayResult()
        engine, c = self.engine, self.client
        multi_at: int | None = None  # offset of an unfinished MULTI
        offset = 0
        try:
            for argv, end in read_commands(path):
                name = argv[0].upper()
                if name not in engine.table:
                    raise CorruptAof(path, offset, f"unknown command {argv[0][:64]!r}")
                if name == b"MULTI":
                    multi_at = offset
                elif name in (b"EXEC", b"DISCARD"):
                    multi_at = None
                error = engine.apply(c, argv)
                if error is not None and not c.in_multi:
                    result.failed += 1
                    log.warning("AOF replay: %r failed: %s", argv[:4], error)
                result.commands += 1
                offset = end
        except TornTail as torn:
            if not truncate_torn:
                raise
            self._truncate(path, multi_at if multi_at is not None else torn.offset, result)
            multi_at = None
        if multi_at is not None:  # complete commands, but no EXEC: the transaction is lost
            self._truncate(path, multi_at, result)
        if c.in_multi:
            engine.execute(c, [b"DISCARD"])
            c.out.clear()
        engine.pending.pop(c, None)
        return result

    @staticmethod
    def _truncate(path: Path, offset: int, result: ReplayResult) -> None:
        size = path.stat().st_size
        log.warning(
            "!!! Warning: short read while loading the AOF file %s!!! Truncating the AOF at "
            "offset %d (of %d bytes): the last command was not complete",
            path,
            offset,
            size,
        )
        os.truncate(path, offset)
        result.truncated_at = offset

    def close(self) -> None:
        self.engine.client_closed(self.client)
