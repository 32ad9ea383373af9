"""The append-only file: effects written as RESP commands, and read back for recovery.

Writing
-------
``AofWriter.append`` (an engine effect sink) encodes each effect into a buffer, with a
``SELECT`` whenever the database changes. The buffer is written with one ``write`` at the end
of an event-loop iteration, before any reply that depends on it leaves the server. Syncing
depends on ``appendfsync``:

* ``always``: every reply to a write waits until its effect has been ``fdatasync``'ed. The
  server runs the sync in the background (``start_sync``) so that its event loop reads and
  executes the next commands meanwhile; their effects gather in the buffer and go out with the
  next ``write`` + sync once this one ends (group commit: batches grow with the load). Without
  a server (``flush``), the sync runs at once on the calling thread.
* ``everysec``: a background sync about once a second. A ``write`` to a file being synced
  blocks in the kernel, so while a sync is in flight writes are postponed (for at most 2 s,
  then written anyway), as Redis does.
* ``no``: the kernel decides.

Theory of operation (threads): the buffer, the file offset and every attribute belong to the
loop thread. One worker thread (``aof-fsync``, started at the first background sync) runs one
``fdatasync`` at a time. The hand-off is two plain locks, the cheapest signal between threads
in CPython: ``start_sync`` takes ``_busy`` and releases ``_go``; the worker wakes on ``_go``,
syncs, stores the outcome, releases ``_busy`` and calls ``notify`` (the server wakes its loop
with it). The loop thread does not write to the file while ``syncing`` (except everysec's
forced write) and collects the outcome with ``finish_sync`` once ``_busy`` is free. ``close``
waits for the sync in flight and stops the worker.

The cost of a thread is the GIL: the worker needs it twice per sync (to run after waking up
and after ``fdatasync`` returns), and a busy loop thread that drops and retakes it between
callbacks can keep it from the worker for up to ``sys.getswitchinterval()`` (5 ms), with
futile wake-ups meanwhile. Under load this delays a sync's start and end by a few hundred
microseconds and costs CPU; the worker therefore does as little as possible with the GIL.

A failed write keeps the data in the buffer (it is retried on the next flush) and sets
``error``; a failed sync keeps the data ``unsynced`` (retried likewise) and sets ``error`` too.
The server then refuses writes with ``-MISCONF`` and holds the replies of the unsaved writes
(and of reads that may have seen them): nothing is acknowledged that is not on disk. If the
error lasts (``aof-write-error-timeout``), the server gives up on those effects:
``roll_back`` cuts the file back to the end of the last durable command and drops the buffer,
and ``probe`` then tests the file with a harmless ``SELECT 0`` until a write works again.

Every system call on the file goes through a ``FileOps`` object: production uses the plain
one, tests pass one that fails (a full disk) or makes ``fdatasync`` wait, so that nothing in
the writer exists only for tests.

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
from collections.abc import Callable, Iterator
from pathlib import Path

import hiredis

from headwater.ops.change import Line
from headwater.persistence.effect_log import EffectLog
from headwater.resp.encoder import encode_command as encode_command
from headwater.resp.parser import wire_size

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
                offset += wire_size(item)
                yield item, offset
    if offset != size:
        raise TornTail(path, offset, size)


class FileOps:
    """The system calls the AOF writer makes on its file (the seam tests use to fail writes
    or hold syncs: they pass a subclass)."""

    #: ``fdatasync`` may run on the event loop's thread (a lone writer's sync, see
    #: ``AofLog``): False for operations whose sync may wait on purpose, so that every
    #: sync runs on the worker thread and the loop goes on meanwhile
    inline_sync = True

    def open(self, path: Path) -> int:
        return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def write(self, fd: int, data: bytes) -> int:
        return os.write(fd, data)

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def close(self, fd: int) -> None:
        os.close(fd)


#: the plain system calls (production)
SYSTEM_FILE_OPS = FileOps()


class AofWriter:
    """Appends effects to one incremental AOF file with the configured fsync policy."""

    def __init__(
        self,
        path: Path,
        fsync: str,
        notify: Callable[[], object] | None = None,
        ops: FileOps = SYSTEM_FILE_OPS,
    ) -> None:
        self.path = path
        self.ops = ops
        self.fd = ops.open(path)
        self.size = os.fstat(self.fd).st_size
        self.fsync_policy = fsync
        #: the effects not written yet; its ``append`` is the engine's effect sink
        self.log = EffectLog()
        self.error: OSError | None = None
        self.unsynced = False  # written but not yet fdatasync'ed
        #: the file's size that the last successful fdatasync covers (WAITAOF), and that of
        #: the background sync in flight
        self.synced_size = self.size
        self._sync_size = self.size
        self.last_fsync = time.monotonic()
        self.postponed_since: float | None = None
        self.fsyncs = 0
        #: called from the worker thread when a background sync has ended
        self.notify = notify
        #: the latency monitor's sampler (event, ms), called on the loop thread for each
        #: write and each sync (LATENCY's aof-write and aof-fsync-always); none by default
        self.on_latency: Callable[[str, float], object] | None = None
        #: told the bytes of each whole write
        self.on_write: Callable[[int], object] | None = None
        self._sync_ms = 0.0  # the last background sync's duration (set by the worker)
        #: how long the last sync took, inline or in the background (``always`` syncs on the
        #: loop thread only while syncs are fast: see ``AofLog``)
        self.last_sync_ms = 0.0
        #: a background sync was started and its outcome is not collected yet
        self.syncing = False
        # Plain locks used as semaphores (the cheapest hand-off between threads): ``_go`` is
        # released by the loop thread to start one sync; ``_busy`` is taken by the loop
        # thread when it starts a sync and released by the worker when the sync has ended.
        self._worker: threading.Thread | None = None
        self._go = threading.Lock()
        self._go.acquire()
        self._busy = threading.Lock()
        self._sync_error: OSError | None = None
        self._stopping = False

    # -- the effect sink -------------------------------------------------------------------

    def append(self, db: int, argv: Line) -> None:
        self.log.append(db, argv)

    @property
    def buf(self) -> bytearray:
        """The encoded effects not written yet."""
        return self.log.buf

    @property
    def db(self) -> int | None:
        """The database the file's next command applies to (None: unknown)."""
        return self.log.db

    @db.setter
    def db(self, db: int | None) -> None:
        self.log.db = db

    # -- on the loop thread ----------------------------------------------------------------

    def flush(self, force: bool = False) -> bool:
        """Write the buffer and sync per policy (``always``: at once, on this thread).
        Returns False when data is still pending: postponed behind everysec's sync in flight,
        or a write or sync error."""
        self.finish_sync()
        if self.buf:
            if self.fsync_policy == "everysec" and self.syncing and not force:
                now = time.monotonic()
                if self.postponed_since is None:
                    self.postponed_since = now
                if now - self.postponed_since < POSTPONE_LIMIT_S:
                    return False
            self.postponed_since = None
            if not self.write():
                return False
        if self.fsync_policy == "always":
            return not self.unsynced or self.sync()
        if (
            self.fsync_policy == "everysec"
            and self.unsynced
            and not self.syncing
            and time.monotonic() - self.last_fsync >= 1.0
        ):
            self.start_sync()
        return True

    def write(self) -> bool:
        """Write the whole buffer; False (and ``error`` set) if some of it could not be."""
        if not self.buf:
            return True
        data = bytes(self.buf)
        written = 0
        started = time.perf_counter()
        try:
            while written < len(data):
                written += self.ops.write(self.fd, data[written:])
        except OSError as exc:
            # What reached the file stays there; the rest is retried next time and continues
            # it exactly, so the file never holds a torn command between good ones.
            self.error = exc
            del self.buf[:written]
            self.size += written
            self.unsynced = self.unsynced or written > 0
            return False
        self.size += written
        self.buf.clear()
        self.error = None
        self.unsynced = True
        if self.on_latency is not None:
            self.on_latency("aof-write", (time.perf_counter() - started) * 1000)
        if self.on_write is not None:
            self.on_write(written)
        return True

    def _sampled_sync(self, ms: float) -> None:
        self.last_sync_ms = ms
        if self.on_latency is not None:  # (Redis's event is ``always``'s; everysec's is ours)
            always = self.fsync_policy == "always"
            self.on_latency("aof-fsync-always" if always else "aof-fsync", ms)

    def sync(self) -> bool:
        """``fdatasync`` now, on this thread; False (and ``error`` set) if it failed."""
        self.last_fsync = time.monotonic()
        size = self.size
        started = time.perf_counter()
        try:
            self.ops.fdatasync(self.fd)
        except OSError as exc:
            self.error = exc
            self.unsynced = True
            return False
        self._sampled_sync((time.perf_counter() - started) * 1000)
        self.unsynced = False
        self.synced_size = size
        self.fsyncs += 1
        self._synced()
        return True

    def start_sync(self) -> None:
        """Hand an ``fdatasync`` of everything written so far to the worker thread and return
        at once. Its end is seen by ``finish_sync`` (and announced by ``notify``)."""
        if self.syncing:
            raise RuntimeError("an AOF sync is already in flight")
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="aof-fsync", daemon=True)
            self._worker.start()
        self.syncing = True
        self.unsynced = False
        self._sync_size = self.size
        self.last_fsync = time.monotonic()
        self._busy.acquire()
        self._go.release()

    def finish_sync(self) -> bool | None:
        """Collect a background sync that has ended: True if it succeeded, False if it
        failed (``error`` is set, and what it covered is unsynced again); None if no sync
        has ended since the last call."""
        if not self.syncing or self._busy.locked():
            return None
        self.syncing = False
        error = self._sync_error
        if error is not None:
            self.error = error
            self.unsynced = True
            return False
        self.synced_size = self._sync_size
        self.fsyncs += 1
        self._sampled_sync(self._sync_ms)
        self._synced()
        return True

    def _synced(self) -> None:
        # A sync error is over once a sync works; a write error only once the data it kept
        # back is written (then the buffer is empty).
        if not self.buf:
            self.error = None

    # -- the worker thread -----------------------------------------------------------------

    def _work(self) -> None:
        while True:
            self._go.acquire()
            if self._stopping:
                return
            started = time.perf_counter()
            try:
                self.ops.fdatasync(self.fd)
                self._sync_error = None
            except OSError as exc:
                self._sync_error = exc
            self._sync_ms = (time.perf_counter() - started) * 1000
            self._busy.release()
            notify = self.notify
            if notify is not None:
                try:
                    notify()
                except RuntimeError:  # the event loop is closed (shutting down)
                    pass

    # -- giving up on a write error ----------------------------------------------------------

    def roll_back(self, size: int) -> None:
        """Drop everything not written yet and cut the file back to ``size`` (the end of the
        last command known durable): a failed write's partial command goes with it. The
        ``error`` stays until a later write works (``probe``)."""
        if self.syncing:
            with self._busy:  # wait for the sync in flight; its outcome no longer matters
                pass
            self.syncing = False
        self.buf.clear()
        self.postponed_since = None
        self.ops.ftruncate(self.fd, size)
        self.size = size
        self.synced_size = min(self.synced_size, size)
        self.db = None  # the command now last in the file may be in any database
        try:
            self.ops.fdatasync(self.fd)  # the cut too must survive a crash
            self.unsynced = False
        except OSError:
            self.unsynced = True

    def probe(self) -> None:
        """After a roll-back: queue a harmless command so that the next flush tells whether
        the file can be written again (a successful write clears ``error``)."""
        if not self.buf:
            self.log.buf += encode_command([b"SELECT", b"0"])
            self.log.db = 0

    # -- the end ---------------------------------------------------------------------------

    @property
    def pending(self) -> bool:
        """Effects not yet written (replies of ``always`` writes must wait for them)."""
        return bool(self.buf)

    def close(self) -> bool:
        """Write and sync everything, stop the worker, close the file (shutdown, or switching
        files). True if everything written so far is on disk."""
        worker = self._worker
        if worker is not None:
            with self._busy:  # the sync in flight has ended
                self._stopping = True
            self._go.release()
            worker.join()
            self._worker = None
        self.finish_sync()
        written = self.write()
        synced = self.sync()
        self.ops.close(self.fd)
        return written and synced
