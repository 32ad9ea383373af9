"""A Redis replica's RDB written by several processes at once (issue 35: a full sync to
Redis within 1.5x of Redis's own).

The forked child that writes the RDB for replicas forks helpers of its own, one per extra
core: helper ``k`` writes share ``k`` of each database's keys (``rdb_write.write_keys``) into
a file beside the RDB, while the child writes the head and share 0 into the RDB itself; then
the child appends each helper's file in order, keeping the CRC-64 running over all of it,
and ends the file. The primary sends the RDB while it grows, as with one writer, so the
replica sees one file, byte for byte what one writer would give but for where SELECTDB
repeats (Redis loads a database from several sections).

A helper whose parent is gone (the child killed: the replica left, the server stopped)
removes its file and leaves at its next megabyte; the server removes the files of a child
it killed or reaped (``remove_shares``), whatever its helpers did.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path
from typing import BinaryIO

from headwater.keyspace import Database
from headwater.persistence.rdb_write import RdbOut, write_head, write_keys, write_tail
from headwater.server.children import as_writer_child, kill_child

#: at most this many processes write one RDB
MAX_WRITERS = 4
#: and each has at least this many keys to write (fewer keys: forking would cost more)
MIN_KEYS_PER_WRITER = 20_000
#: bytes read at a time from a helper's file
COPY_CHUNK = 1 << 20


class HelperFailed(OSError):
    """A helper did not write its share."""


def writers_for(keys: int) -> int:
    """How many processes write an RDB of this many keys: one per core this server may run
    on, up to ``MAX_WRITERS``, each with ``MIN_KEYS_PER_WRITER`` keys at least."""
    cores = len(os.sched_getaffinity(0))
    return max(1, min(cores, MAX_WRITERS, keys // MIN_KEYS_PER_WRITER))


def write_rdb_parallel(
    f: BinaryIO,
    dbs: list[Database],
    libraries: list[bytes],
    aux: dict[str, str],
    writers: int,
    path: Path,
    now_ms: int | None = None,
) -> None:
    """The whole RDB into ``f`` (the file at ``path``: helpers write beside it), by
    ``writers`` processes, keys whose deadline is ``now_ms`` or earlier left out (by
    default: now). Raises ``HelperFailed`` if a helper did not finish."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    out = RdbOut(f.write)
    helpers: list[tuple[int, Path]] = []
    try:
        for part in range(1, writers):
            helpers.append(_start_helper(dbs, now, part, writers, path))
        write_head(out, libraries, now, aux)
        write_keys(out, dbs, now, 0, writers)
        while helpers:
            pid, share = helpers.pop(0)
            _take(out, pid, share)
    finally:
        for pid, share in helpers:
            kill_child(pid)
            with contextlib.suppress(OSError):
                share.unlink()
    write_tail(out)


def share_path(path: Path, part: int) -> Path:
    """Where helper ``part`` writes its share of the RDB at ``path``."""
    return path.with_name(f"{path.name}.part{part}")


def remove_shares(path: Path) -> None:
    """The helpers' files of the RDB at ``path``, if any are left."""
    for part in range(1, MAX_WRITERS):
        with contextlib.suppress(OSError):
            share_path(path, part).unlink()


def _start_helper(
    dbs: list[Database], now: int, part: int, parts: int, path: Path
) -> tuple[int, Path]:
    share = share_path(path, part)
    fd = os.open(share, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:  # the helper: its share, then leave without running any cleanup
        as_writer_child()
        code = 1
        try:

            def sink(data: bytes) -> None:
                if os.getppid() != parent:  # (the child is gone: nobody will read this)
                    share.unlink(missing_ok=True)
                    os._exit(1)
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]

            out = RdbOut(sink, checksummed=False)  # (the child sums it as it appends)
            write_keys(out, dbs, now, part, parts)
            out.spill(force=True)
            code = 0
        finally:
            os._exit(code)
    os.close(fd)
    return pid, share


def _take(out: RdbOut, pid: int, share: Path) -> None:
    """Wait for a helper, then append its share and remove its file."""
    _, status = os.waitpid(pid, 0)
    try:
        if not (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
            raise HelperFailed(f"the RDB writer {pid} for {share.name} failed ({status})")
        with open(share, "rb") as f:
            while chunk := f.read(COPY_CHUNK):
                out.absorb(chunk)
    finally:
        with contextlib.suppress(OSError):
            share.unlink()
