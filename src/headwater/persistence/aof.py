"""The append-only file: effects written as RESP commands, and read back for recovery.

Writing
-------
``AofWriter.append`` (an engine effect sink) encodes each effect into a buffer, with a
``SELECT`` whenever the database changes. ``flush`` is called once per event-loop iteration,
before any reply of that iteration leaves the server, and writes the whole buffer with one
``write``:

* ``always``: then ``fdatasync`` at once, so every write acknowledged in this iteration is on
  disk before its reply is sent (group commit: one sync for all of them).
* ``everysec``: a background thread runs ``fdatasync`` about once a second. A ``write`` to a
  file being synced blocks in the kernel, so while a sync is in flight writes are postponed
  (for at most 2 s, then written anyway), as Redis does.
* ``no``: the kernel decides.

A failed write keeps the data in the buffer (it is retried on the next flush) and sets
``error``; the server then refuses writes with ``-MISCONF`` and, with ``always``, holds the
replies of the unsaved writes: nothing is acknowledged that is not on disk.

Reading
-------
``read_commands`` yields ``(argv, end_offset)`` for each complete command of a file, feeding
hiredis 128 KiB at a time. A file that ends inside a command raises ``TornTail`` with the
offset of the last complete one; bytes that are not RESP raise ``CorruptAof``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import hiredis

READ_CHUNK = 128 * 1024
POSTPONE_LIMIT_S = 2.0


class CorruptAof(Exception):
    def __init__(self, path: Path, offset: int, reason: str) -> None:
        super().__init__(f"{path}: bad file format at offset {offset}: {reason}")
        self.path = path
        self.offset = offset


class TornTail(Exception):
    """The file ends inside a command: ``offset`` is where the last complete one ends."""

    def __init__(self, path: Path, offset: int, size: int) -> None:
        super().__init__(f"{path}: truncated command at offset {offset} (file size {size})")
        self.path = path
        self.offset = offset
        self.size = size


def encode_command(argv: list[bytes]) -> bytes:
    parts = [b"*%d\r\n" % len(argv)]
    parts += [b"$%d\r\n%s\r\n" % (len(arg), arg) for arg in argv]
    return b"".join(parts)


_DIGITS = [len(str(n)) for n in range(10_000)]


def _wire_size(argv: list[bytes]) -> int:
    """Bytes of argv as ``encode_command`` writes it (the AOF is always written so)."""
    digits = _DIGITS
    size = 3 + len(str(len(argv))) + 5 * len(argv)
    for arg in argv:
        n = len(arg)
        size += n + (digits[n] if n < 10_000 else len(str(n)))
    return size


def read_commands(path: Path) -> Iterator[tuple[list[bytes], int]]:
    """Each command of the file and the offset where it ends."""
    reader = hiredis.Reader()
    offset = 0
    size = path.stat().st_size
    with open(path, "rb") as f:
        while chunk := f.read(READ_CHUNK):
            reader.feed(chunk)
            while True:
                try:
                    item = reader.gets()
                except hiredis.ProtocolError as exc:
                    raise CorruptAof(path, offset, str(exc)) from None
                if item is False:
                    break
                # (a nested array inside a command is left to the command to refuse)
                if type(item) is not list or not item or type(item[0]) is not bytes:
                    raise CorruptAof(path, offset, "not a command (array of bulk strings)")
                offset += _wire_size(item)
                yield item, offset
    if offset != size:
        raise TornTail(path, offset, size)


class AofWriter:
    """Appends effects to one incremental AOF file with the configured fsync policy."""

    def __init__(self, path: Path, fsync: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.size = os.fstat(self.fd).st_size
        self.fsync_policy = fsync
        self.buf = bytearray()
        self.db: int | None = None  # the database the file's next command applies to
        self.error: OSError | None = None
        self.unsynced = False  # written but not yet fdatasync'ed
        self.last_fsync = time.monotonic()
        self.postponed_since: float | None = None
        self.fsyncs = 0
        self._fsync_busy = False
        self._fsync_thread: threading.Thread | None = None
        self.injected_errno: int | None = None  # DEBUG AOF-WRITE-ERROR: fail every write

    # -- the effect sink -------------------------------------------------------------------

    def append(self, db: int, argv: list[bytes]) -> None:
        if db != self.db:
            self.buf += encode_command([b"SELECT", b"%d" % db])
            self.db = db
        self.buf += encode_command(argv)

    # -- once per loop iteration -----------------------------------------------------------

    def flush(self, force: bool = False) -> bool:
        """Write the buffer (and sync it, per policy). Returns False when data is still
        pending (postponed behind an fsync in flight, or a write error)."""
        if not self.buf:
            self._maybe_background_fsync()
            return True
        if self.fsync_policy == "everysec" and self._fsync_busy and not force:
            now = time.monotonic()
            if self.postponed_since is None:
                self.postponed_since = now
            if now - self.postponed_since < POSTPONE_LIMIT_S:
                return False
        self.postponed_since = None
        if not self._write_all():
            return False
        if self.fsync_policy == "always":
            try:
                os.fdatasync(self.fd)
            except OSError as exc:
                self.error = exc
                return False
            self.unsynced = False
            self.fsyncs += 1
        else:
            self.unsynced = True
            self._maybe_background_fsync()
        return True

    def _write_all(self) -> bool:
        data = bytes(self.buf)
        written = 0
        try:
            if self.injected_errno is not None:
                raise OSError(self.injected_errno, os.strerror(self.injected_errno))
            while written < len(data):
                written += os.write(self.fd, data[written:])
        except OSError as exc:
            # What reached the file stays there; the rest is retried next time and continues
            # it exactly, so the file never holds a torn command between good ones.
            self.error = exc
            del self.buf[:written]
            self.size += written
            return False
        self.size += written
        self.buf.clear()
        self.error = None
        return True

    def _maybe_background_fsync(self) -> None:
        if self.fsync_policy != "everysec" or not self.unsynced or self._fsync_busy:
            return
        if time.monotonic() - self.last_fsync < 1.0:
            return
        self._fsync_busy = True
        self.unsynced = False
        self.last_fsync = time.monotonic()
        self._fsync_thread = threading.Thread(
            target=self._background_fsync, name="aof-fsync", daemon=True
        )
        self._fsync_thread.start()

    def _background_fsync(self) -> None:
        try:
            os.fdatasync(self.fd)
            self.fsyncs += 1
        except OSError as exc:  # reported by the next flush's write
            self.error = exc
        finally:
            self._fsync_busy = False

    @property
    def pending(self) -> bool:
        """Effects not yet written (replies of ``always`` writes must wait for them)."""
        return bool(self.buf)

    def close(self) -> None:
        """Write and sync everything, then close (shutdown, or switching files)."""
        thread = self._fsync_thread
        if thread is not None:
            thread.join()
        if self.buf:
            self._write_all()
        try:
            os.fdatasync(self.fd)
        except OSError:
            pass
        os.close(self.fd)
