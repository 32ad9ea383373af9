"""Snapshots: the whole keyspace in one versioned, checksummed binary file.

Layout (all integers little-endian)::

    "HWSNAP" u16 version
    records...                        one byte of record type, then its fields
    0xFF u32 crc32                    of every byte before the checksum

    0x01 SELECT    u32 db
    0x02 STRING    bytes key, u8 raw, bytes value, i64 expire (-1: none)
    0x03 HASH      bytes key, u64 n, n * (bytes field, bytes value), i64 expire
    0x04 STREAM    bytes key, i64 expire, the stream (below)
    0x05 FUNCTIONS u64 n, n * bytes   FUNCTION libraries' code (only when there are some,
                                      before the first SELECT)
    0x06 REGION    bytes              an active-active region's state (``activeactive``)
    0x07 SET       bytes key, u8 encoding, u64 n, n * bytes member, i64 expire
    0x08 ZSET      bytes key, u8 listpack, u64 n, n * (bytes member, f64 score), i64 expire
    0x09 HASH2     bytes key, u8 listpack, then as HASH (HASH, which older files hold, did
                                      not record the encoding: read back by the default
                                      limits, 512 fields of up to 64 bytes)
    0x0B HASHTTL   bytes key, u8 listpack, u64 n, n * (bytes field, bytes value, i64 field
                                      deadline in unix ms, -1: none), i64 expire: a hash
                                      that has field TTLs (Redis 7.4); others stay HASH2

``bytes`` is a u64 length then the bytes. A stream (version 2 and 3) is::

    3 * (u64 ms, u64 seq)             last_id, first_id, max_deleted_id
    4 * u64                           entries_added, length, idmp_duration, idmp_maxsize
    u64 F, F * (u64 n, n * bytes)     the distinct master field lists ("fieldsets")
    u64 N                             nodes, then chunks of CHUNK_NODES (256) until N:
      u64 k, u64 E, u64 B, u64 T      nodes in the chunk; their entries, blob and tomb bytes
      k * 9 u64                       per node: master ms, master seq, fieldset, count,
                                      deleted, lp_bytes, entries, blob bytes, tomb bytes
      E * u64 | E * u64 | E * u32     the nodes' ms, seq and offsets arrays, back to back
      B bytes | T bytes               the nodes' blobs, then their tombstones (T: none)
    the groups (PEL as parallel arrays) and the IDMP maps

A group is its name, last ID, entries-read, its consumers (name, seen and active times), then
the PEL as five ``bytes`` arrays (ms u64, seq u64, delivery time i64, count i64, owner u32:
the consumer's index, or ``NOBODY`` for a nacked entry), and since version 3 the NACK zone
in its order as two arrays (ms u64, seq u64).

Theory of operation: the nodes are written *as they are in memory*, so loading costs a few
C-level operations per node and nothing per entry. A chunk's node table is read with one
``struct.iter_unpack`` and each node takes its share of the chunk's columns with one copy per
column (``Node.restore_many``). The other records are read by ``snapshot_records`` (compiled:
a load of many small keys is mostly per-record calls), and a run of fields (a set's members, a
hash's fields and values) is split into bytes objects by one C call (``_blobs.c``); they are
written by ``snapshot_write`` (compiled for the same reason). The file
is read into anonymous memory of the process (never mapped: ``_PrivateCopy``), by two threads
in chunks of 8 MB, while a third computes its CRC-32 (zlib, C speed) and the nodes are built
from what has arrived: the read and ``zlib.crc32`` release the GIL, so they run on other cores;
the server even starts them before its imports (``prefetch``).

Lazy loading (what the server does): copying ~200 MB of columns into one buffer per node is
most of a 5M-entry load (page faults), so with a ``lazy`` list the nodes are built without their
buffers, which stay in the private copy of the file until a command first reads them (``Node``
module doc); the server's cron copies the rest with ``materialize_some`` (~5% of a core: a few
seconds for 5M entries), after which the copy is freed. The checksum is still verified before
the load returns. Why a copy and not a mapping of the file (which the first lazy design used,
and which costs no page faults of fresh memory): a mapped page that is gone kills the process
with SIGBUS on its next read, and a page goes when the file is truncated in place (``cp
backup.hwsnap dump.hwsnap``) or cannot be read from the disk; with the copy, a read error is an
OSError of the load, and what happens to the file afterwards cannot reach the server. Loading
goes into empty databases; if the checksum or the structure turns out wrong, the keys loaded so
far are removed again and ``SnapshotError`` says why. The garbage collector is off during the
load, and the first load of a process freezes what it built (``load_snapshot``). A version
this code does not know is refused; version 1 (node by node, fields per node) and version 2
(no NACK zone: written before XNACK, when every pending entry had an owner) still load.

A replica's full sync loads the same way from the link (``SnapshotBuffer``): the bytes go from
the socket straight into anonymous memory, the load parses them and a thread checksums them as
they arrive, and nothing is written to a file. The size is known at once, or (the EOF form,
streamed while the primary's child writes it) only when the end mark comes. The primary's
child writes with ``write_snapshot_to`` (no fsync: the file is scratch), and a stream still as
it was loaded (lazy nodes, chunks back to back) goes out one piece per column.

Why no compression: a 5,000,000-entry stream of 16-byte values is ~210 MB (Redis's RDB: 28 MB,
LZF). zlib inflates ~0.6 GB/s on the project's machines, so inflating it alone would take
~0.35 s, more than building its nodes from the page cache (~0.2 s), and the standard library has
nothing faster. Loading speed matters more than size here; a version 3 could add a fast codec
(LZ4) as an optional dependency.
"""

from __future__ import annotations

import gc
import mmap
import os
import struct
import sys
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

from headwater.activeactive.persist import check_state
from headwater.config import Config
from headwater.errors import InvariantViolation
from headwater.keyspace import Database, Keyspace
from headwater.ops.dump import Limits
from headwater.persistence.manifest import fsync_dir
from headwater.persistence.meter import Meter
from headwater.persistence.rdb_load import (
    RdbImportError,
    describe,
    is_rdb,
    load_rdb,
)
from headwater.persistence.snapshot_records import (
    _U16,
    _U32,
    LOADABLE,
    MAGIC,
    VERSION,
    _In,
    _load_records,
)
from headwater.persistence.snapshot_records import (
    SnapshotError as SnapshotError,
)
from headwater.persistence.snapshot_write import (
    CHUNK_NODES as CHUNK_NODES,
)
from headwater.persistence.snapshot_write import (
    StreamWriter,
    write_snapshot_to,
)
from headwater.persistence.snapshot_write import (  # (tests write older layouts with them)
    _Out as _Out,
)
from headwater.persistence.snapshot_write import (
    _write_group as _write_group,
)
from headwater.persistence.snapshot_write import (
    _write_idmp as _write_idmp,
)
from headwater.stream.node import Node
from headwater.stream.stream import Stream

#: files at least this big are read and checksummed by threads while they load
THREADED_CRC_BYTES = 4 << 20
#: they are read in chunks of this size: few enough that a reading thread seldom waits for
#: the GIL (up to sys.getswitchinterval(), 5 ms, while the main thread runs Python code)
READ_CHUNK = 8 << 20
#: by this many threads: the read is mostly page faults of fresh memory, which take a core
#: each (the kernel handles them in parallel)
READ_THREADS = 2
#: address space a replica reserves for a snapshot whose size it learns only at its end (the
#: EOF form): pages are taken only as bytes arrive
RECEIVE_CAPACITY = 1 << 40
#: Linux's MAP_NORESERVE (the mmap module names it from Python 3.13 on)
MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)
#: the EOF form's mark (``$EOF:<mark>``): 40 bytes, as Redis's RDB_EOF_MARK_SIZE
EOF_MARK_SIZE = 40
#: with the size unknown, the last bytes that arrived may be the checksum field and the EOF
#: mark: they are checksummed once the end is known
HOLD_BACK = 4 + EOF_MARK_SIZE
#: arrays are kept in native byte order; the file is little-endian
_SWAP = sys.byteorder == "big"


# ---------------------------------------------------------------------------------------------
# Writing


def write_snapshot(
    path: Path,
    dbs: list[Database],
    libraries: Sequence[bytes] = (),
    stream_writer: StreamWriter | None = None,
    group_version: int = VERSION,
) -> None:
    """Write durably: a temporary file, fsync, rename, fsync of the directory.
    ``libraries``: the code of the FUNCTION libraries. The records are written by
    ``snapshot_write`` (compiled; ``stream_writer`` and ``group_version`` are its test seams
    for older layouts)."""
    tmp = path.with_name(f"temp-{os.getpid()}-{path.name}")
    with open(tmp, "wb") as f:
        write_snapshot_to(f, dbs, libraries, stream_writer, group_version)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


# ---------------------------------------------------------------------------------------------
# Reading


_HEADER = len(MAGIC) + 2
_SMALLEST = _HEADER + 1 + 4  # header, END, checksum


def _version(data: memoryview, origin: str) -> int:
    if len(data) < _SMALLEST or data[: len(MAGIC)] != MAGIC:
        raise SnapshotError(f"{origin}: not a Headwater snapshot")
    (version,) = _U16.unpack_from(data, len(MAGIC))
    if version not in LOADABLE:
        raise SnapshotError(
            f"{origin}: snapshot version {version} is not supported (this server loads "
            f"versions {', '.join(map(str, LOADABLE))})"
        )
    return int(version)


#: reads a file's bytes at an offset into a buffer and returns how many it read (0: the end);
#: ``load_snapshot``'s seam for read errors
ReadAt = Callable[[int, memoryview, int], int]


def pread_into(fd: int, into: memoryview, offset: int) -> int:
    return os.preadv(fd, [into], offset)


class _Arriving:
    """A snapshot's bytes arriving in anonymous memory of this process while the load parses
    them: ``filled`` grows, ``wait_for`` holds the load until the bytes it needs are there, and
    a thread computes the CRC-32 of what has arrived without a gap (``zlib.crc32`` releases the
    GIL, so it runs on another core). ``size`` is the snapshot's size in bytes, None while it
    is not known (a replica receiving the EOF form: the end shows only when it comes). A
    failure (a read error, a lost connection) is kept as ``failure`` and raised by
    ``wait_for`` and ``intact``."""

    def __init__(self, capacity: int, size: int | None, origin: str, reserve: bool) -> None:
        # (private: shared anonymous memory is tmpfs, whose pages cost more to fault in;
        # ``reserve``: address space for an unknown size, pages taken only as bytes arrive)
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | (MAP_NORESERVE if reserve else 0)
        self.memory = mmap.mmap(-1, capacity, flags=flags)
        if hasattr(mmap, "MADV_HUGEPAGE"):
            self.memory.madvise(mmap.MADV_HUGEPAGE)
        self.view = memoryview(self.memory)
        self.size = size
        #: the first ``filled`` bytes are there
        self.filled = 0
        self.failure: Exception | None = None
        self._crc = 0
        self._origin = origin
        self._changed = threading.Condition()
        self._threads: list[threading.Thread] = []

    def _start(self, jobs: Sequence[Callable[[], None]]) -> None:
        for job in jobs:
            thread = threading.Thread(target=job, name="snapshot-load", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _fail(self, exc: Exception) -> None:
        with self._changed:
            if self.failure is None:
                self.failure = exc
            self._changed.notify_all()

    def _ended(self) -> bool:
        return self.size is not None and self.filled >= self.size

    def records(self) -> memoryview:
        """What the records are parsed from: the bytes before the checksum field (all the
        memory while the size is not known)."""
        return self.view if self.size is None else self.view[: self.size - 4]

    def wait_for(self, end: int) -> int:
        """Blocks until the first ``end`` bytes are there, or no more will come (then it
        returns fewer); returns how many are there."""
        if self.filled >= end:
            return self.filled
        with self._changed:
            while self.filled < end and self.failure is None and not self._ended():
                self._changed.wait()
        if self.failure is not None:
            raise self.failure
        return self.filled

    def _checksum(self) -> None:
        """The CRC-32 of every byte before the checksum field, chunk by chunk as they arrive."""
        done = 0
        try:
            while (upto := self._checkable(done)) > done:
                with self.view[done:upto] as chunk:
                    self._crc = zlib.crc32(chunk, self._crc)
                done = upto
        except Exception:  # the bytes stopped coming: wait_for raises it to the load as well
            return

    def _checkable(self, done: int) -> int:
        """Waits until bytes after ``done`` can be checksummed; returns where they end
        (``done`` once every byte is). With the size unknown, the last ``HOLD_BACK`` bytes
        that arrived may be the checksum field and an EOF mark: they wait for the end."""
        with self._changed:
            while True:
                if self.failure is not None:
                    raise self.failure
                end = self.size - 4 if self.size is not None else self.filled - HOLD_BACK
                ready = min(self.filled, end, done + READ_CHUNK)
                if ready > done or (self.size is not None and done >= end):
                    return max(ready, done)
                self._changed.wait()

    @property
    def threaded(self) -> bool:
        """Checksummed by a thread (else it was complete and checksummed on return)."""
        return bool(self._threads)

    def finish(self) -> None:
        """Waits for the threads (they end once every byte is there, or none will come)."""
        for thread in self._threads:
            thread.join()

    def intact(self) -> bool:
        """The checksum matches (after ``finish``); raises the failure if any."""
        if self.failure is not None:
            raise self.failure
        if self.size is None:
            raise SnapshotError(f"{self._origin}: the snapshot did not end")
        (crc,) = _U32.unpack_from(self.view, self.size - 4)
        return self._crc == int(crc)


class _PrivateCopy(_Arriving):
    """The file's bytes in anonymous memory of this process, so that nothing done to the file
    afterwards (truncated or rewritten in place, a disk error) can reach the loaded data: a
    mapping of the file itself kills the process with SIGBUS when a mapped page is gone.

    A small file is read and checksummed at once. A big one is read in chunks by
    ``READ_THREADS`` threads while another computes the CRC-32 of what has arrived without a
    gap and the load parses it (``wait_for``): the read (mostly page faults of fresh memory,
    in the kernel) and ``zlib.crc32`` release the GIL, so they run on other cores. The server
    starts all this before its imports (``prefetch``). A read error, or a file that turns out
    shorter than it was, is kept as ``failure`` and raised by ``wait_for`` and ``intact``.

    What it costs, 5,000,000 entries (208 MB): ~0.1 s of CPU more than the mapping did (the
    page faults), and the copy's memory until the cron has copied every node out of it (peak
    RSS as with the mapping, whose pages counted too)."""

    def __init__(
        self, fd: int, size: int, origin: str, read_at: ReadAt, owns_fd: bool = False
    ) -> None:
        super().__init__(size, size, origin, reserve=False)
        #: the next chunk a reader takes, and the ends of chunks read beyond ``filled``
        self._next = 0
        self._read_ends: dict[int, int] = {}
        self._fd = fd
        #: ``finish`` closes the file (a prefetched copy's)
        self._owns_fd = owns_fd
        self._read_at = read_at
        if size < THREADED_CRC_BYTES:
            self._read()
            self._checksum()
        else:
            self._start([self._read] * READ_THREADS + [self._checksum])
        if self.failure is not None:
            raise self.failure

    def _read(self) -> None:
        """Reads chunks until none is left; the readers take turns at the next one."""
        size = len(self.view)
        try:
            while True:
                with self._changed:
                    start = self._next
                    if start >= size or self.failure is not None:
                        return
                    end = self._next = min(start + READ_CHUNK, size)
                self._read_range(start, end)
                with self._changed:
                    self._read_ends[start] = end
                    while self.filled in self._read_ends:  # what is read without a gap
                        self.filled = self._read_ends.pop(self.filled)
                    self._changed.notify_all()
        except Exception as exc:  # (OSError mostly) for the load to raise
            self._fail(exc)

    def _read_range(self, start: int, end: int) -> None:
        while start < end:
            with self.view[start:end] as into:
                n = self._read_at(self._fd, into, start)
            if n <= 0:
                raise SnapshotError(
                    f"{self._origin}: the file shrank to {start} bytes while it was read"
                )
            start += n

    def finish(self) -> None:
        """Waits for the threads (the file may be closed after this)."""
        super().finish()
        if self._owns_fd:
            self._owns_fd = False
            os.close(self._fd)


class SnapshotBuffer(_Arriving):
    """A snapshot a replica receives from its primary (``server/replica_link.py``), loaded
    while it arrives and never written to a file. The receiver (the event loop) hands each
    piece to ``write``; ``load_snapshot_buffer``, in a thread of its own, parses what has
    arrived and waits for the rest. The size is given at once (``$<size>``) or, for the EOF
    form (``$EOF:<mark>``), where the ``mark`` is found: until then the buffer is address
    space reserved for ``capacity`` bytes (``MAP_NORESERVE``: memory is taken only as the
    bytes arrive). The bytes that follow the mark (the stream) may arrive in the same read:
    the mark is looked for as each piece is added, under the lock the checksum thread takes,
    so that it never sums a byte past the snapshot's end (found after the fact, the thread
    had sometimes summed the checksum field already: a sound transfer refused as damaged). A
    transfer cut short ends with ``fail``: the load then raises, and nothing of it reaches the
    caller's databases."""

    def __init__(
        self,
        size: int | None,
        origin: str,
        capacity: int = RECEIVE_CAPACITY,
        mark: bytes = b"",
    ) -> None:
        if size is not None and size < _SMALLEST:
            raise SnapshotError(f"{origin}: not a Headwater snapshot ({size} bytes)")
        if size is None and len(mark) != EOF_MARK_SIZE:
            raise SnapshotError(f"{origin}: the EOF form needs a mark of {EOF_MARK_SIZE} bytes")
        super().__init__(capacity if size is None else size, size, origin, size is None)
        #: what ends the snapshot (the EOF form), b"" once it is found or with the size given
        self._mark = mark if size is None else b""
        self._mark_len = len(self._mark)
        self._start([self._checksum])

    def write(self, data: bytes | bytearray | memoryview) -> None:
        end = self.filled + len(data)
        if end > len(self.view):
            raise SnapshotError(f"{self._origin}: more than {len(self.view)} bytes")
        self.view[self.filled : end] = data
        self.advance(len(data))

    def space(self, most: int) -> memoryview:
        """Where the next bytes go (at most ``most``), for a receiver that reads them into
        the buffer itself (then ``advance``)."""
        room = len(self.view) - self.filled
        if room <= 0:
            raise SnapshotError(f"{self._origin}: more than {len(self.view)} bytes")
        return self.view[self.filled : self.filled + min(most, room)]

    def advance(self, n: int) -> None:
        """``n`` more bytes are there (written by ``write``, or into ``space``). The EOF
        form: once they hold the mark, ``size`` is where it begins."""
        with self._changed:
            start = self.filled
            self.filled += n
            if self._mark:
                self._look_for_mark(start)
            self._changed.notify_all()

    def _look_for_mark(self, start: int) -> None:
        mark = self._mark
        at = self.memory.find(mark, max(start - len(mark) + 1, 0), self.filled)
        if at < 0:
            return
        self._mark = b""
        self.size = at
        if at < _SMALLEST:
            self.failure = SnapshotError(f"{self._origin}: not a Headwater snapshot")

    @property
    def after_end(self) -> memoryview:
        """The bytes that arrived after the snapshot (and its mark): the stream's first."""
        if self.size is None:
            return self.view[:0]
        return self.view[min(self.size + self._mark_len, self.filled) : self.filled]

    def fail(self, exc: Exception) -> None:
        self._fail(exc)


#: copies started by ``prefetch``, by the identity of their file
_prefetched: dict[tuple[int, ...], _PrivateCopy] = {}


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    """The same file, unchanged (a file rewritten in place gets another size or mtime)."""
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def prefetch(path: Path) -> None:
    """Start reading a big snapshot that ``load_snapshot`` will load soon, as the server does
    before its imports: on a second core the read (~0.1 s of page faults for 200 MB) and the
    checksum then overlap the interpreter's start instead of the load. If the file is not
    there, or changes before the load opens it, the load reads it again itself."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return  # (the load reports it)
    stat = os.fstat(fd)
    if stat.st_size < THREADED_CRC_BYTES or is_rdb(os.pread(fd, 5, 0)):
        os.close(fd)  # (small, or a Redis RDB file, which the server reads otherwise)
        return
    try:
        copy = _PrivateCopy(fd, stat.st_size, str(path), pread_into, owns_fd=True)
    except OSError:  # (no memory for it: the load will say so)
        os.close(fd)
        return
    _prefetched[_identity(stat)] = copy


def _take_prefetched(stat: os.stat_result, read_at: ReadAt) -> _PrivateCopy | None:
    """The prefetched copy of this very file if there is one; any other is of no use now."""
    copy = _prefetched.pop(_identity(stat), None) if read_at is pread_into else None
    while _prefetched:
        _, stale = _prefetched.popitem()
        stale.finish()
    return copy


def load_snapshot(
    path: Path,
    dbs: list[Database],
    lazy: list[Node] | None = None,
    read_at: ReadAt = pread_into,
    libraries: list[bytes] | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    """Load the file into empty databases; returns the number of keys. ``progress`` is told
    the bytes loaded so far, every megabyte or so. On any error the
    databases are left as they were (empty) and SnapshotError says why (OSError for a read
    error). Given a ``lazy`` list, stream nodes keep their buffers in the file's private copy
    until they are used or ``materialize_some(lazy, ...)`` copies them; the list gets them
    (the checksum is verified before this returns all the same). ``libraries`` gets the
    code of the FUNCTION libraries the file holds."""
    origin = str(path)
    with open(path, "rb", buffering=0) as f:
        stat = os.fstat(f.fileno())
        size = stat.st_size
        if size < _SMALLEST:
            raise SnapshotError(f"{origin}: not a Headwater snapshot")
        copy = _take_prefetched(stat, read_at)
        if copy is None:
            copy = _PrivateCopy(f.fileno(), size, origin, read_at)
        try:
            keys = _load_copy(copy, dbs, lazy, origin, libraries, progress)
        finally:
            copy.finish()
    return keys


def _load_copy(
    copy: _Arriving,
    dbs: list[Database],
    lazy: list[Node] | None,
    origin: str,
    libraries: list[bytes] | None = None,
    progress: Callable[[int], None] | None = None,
) -> int:
    copy.wait_for(_HEADER)
    version = _version(copy.view, origin)
    if not copy.threaded and not copy.intact():
        raise SnapshotError(f"{origin}: checksum mismatch (the file is damaged)")
    loaded: list[tuple[Database, bytes]] = []
    lazy_nodes: list[Node] | None = [] if lazy is not None else None
    collecting = gc.isenabled()
    gc.disable()  # nodes are acyclic; collections during the load would only walk them
    try:
        inp = _In(copy.records(), origin, _HEADER, copy.wait_for)
        if progress is not None:
            inp.on_progress = progress
            inp.next_report = 0
        codes: list[bytes] = []
        _load_records(inp, dbs, version, loaded, lazy_nodes, codes)
        copy.finish()
        intact = copy.intact()
        if intact and inp.pos != (copy.size or 0) - 4:
            raise SnapshotError(f"{origin}: data after the end marker")
        if intact and collecting and not gc.get_freeze_count():
            # The process's first load (its startup): what it built is long-lived and
            # acyclic. In the permanent generation it is never walked by the collector (the
            # first collection after a 5,000,000-entry load would take ~50 ms) and a BGSAVE
            # child does not touch its pages (copy-on-write). Later loads (DEBUG RELOAD)
            # leave the collector alone, so that no runtime garbage is frozen.
            gc.freeze()
    except (OSError, SnapshotError, struct.error, ValueError, IndexError, OverflowError) as exc:
        _unload(loaded)
        copy.finish()
        if copy.failure is not None:
            raise copy.failure from None
        if not copy.intact():
            raise SnapshotError(f"{origin}: checksum mismatch (the file is damaged)") from None
        if isinstance(exc, SnapshotError):
            raise
        raise SnapshotError(f"{origin}: bad structure: {type(exc).__name__}: {exc}") from None
    finally:
        if collecting:
            gc.enable()
    if not intact:
        _unload(loaded)
        raise SnapshotError(f"{origin}: checksum mismatch (the file is damaged)")
    if libraries is not None:
        libraries.extend(codes)
    if lazy is not None and lazy_nodes:
        lazy.extend(reversed(lazy_nodes))  # materialize_some pops: the file's order
    return len(loaded)


def load_snapshot_buffer(
    buffer: SnapshotBuffer,
    dbs: list[Database],
    lazy: list[Node] | None = None,
    libraries: list[bytes] | None = None,
) -> int:
    """``load_snapshot`` from a ``SnapshotBuffer`` while it fills (run it in a thread of its
    own: it waits for the bytes the receiver has not written yet). The same guarantees: on
    any error, the transfer's failure included, the databases are left empty."""
    try:
        return _load_copy(buffer, dbs, lazy, buffer._origin, libraries)
    finally:
        buffer.finish()


def materialize_some(lazy: list[Node], budget_s: float) -> int:
    """Copy nodes of ``lazy`` (filled by ``load_snapshot``) out of their snapshot's private
    copy for about ``budget_s`` seconds, at least one step of 64; returns how many are left.
    Once none is left, nothing refers to the copy any more and its memory is freed."""
    deadline = time.perf_counter() + budget_s
    while lazy:
        for _ in range(min(64, len(lazy))):
            lazy.pop().materialize()
        if time.perf_counter() >= deadline:
            break
    return len(lazy)


def _unload(loaded: list[tuple[Database, bytes]]) -> None:
    for db, key in loaded:
        db.data.pop(key, None)
        db.expires.pop(key, None)


class _RegionCheck:
    """check-snapshot's stand-in for a region: loads the saved state into a fresh one and
    checks its invariants."""

    def dump_state(self) -> bytes:
        return b""

    def load_state(self, data: bytes) -> None:
        check_state(data)


def check_snapshot(path: Path, progress: Callable[[int], None] | None = None) -> tuple[bool, str]:
    """``headwater check-snapshot FILE``: checksum, structure and stream invariants (a Redis
    RDB file in the snapshot's place: read in full, every key converted as the server will).
    ``progress`` is told the bytes loaded so far."""
    with open(path, "rb") as f:
        if is_rdb(f.read(5)):
            return check_rdb(path, progress)
    keyspace = Keyspace(16)
    keyspace.persisted = _RegionCheck()
    try:
        keys = load_snapshot(path, keyspace.dbs, progress=progress)
        for db in keyspace.dbs:
            for value in db.data.values():
                if isinstance(value, Stream):
                    value.check_invariants()
                    for group in value.groups.values():
                        group.check_invariants()
    except (SnapshotError, OSError, InvariantViolation, ValueError, struct.error) as exc:
        return False, f"Snapshot {path} is not valid: {exc or type(exc).__name__}"
    size = path.stat().st_size
    return True, f"Snapshot {path} is valid: {keys} keys, {size} bytes, checksum ok"


def check_rdb(path: Path, progress: Callable[[int], None] | None = None) -> tuple[bool, str]:
    """A Redis RDB file, loaded as the server would (with the default limits, 16 databases)."""
    try:
        data = path.read_bytes()
        now_ms = int(time.time() * 1000)
        report, _ = load_rdb(data, Keyspace(16), Limits.of(Config()), now_ms, progress)
    except (RdbImportError, OSError) as exc:
        return False, f"Redis RDB file {path} cannot be loaded: {exc}"
    return True, (
        f"Redis RDB file {path} loads: {describe(report)}, {report.expired} expired keys "
        f"skipped, {len(data)} bytes"
    )


CHECK_USAGE = """usage: headwater check-snapshot <file>

Loads a Headwater snapshot (dump.hwsnap) as the server would: its checksum, its structure
and the invariants of its streams and groups; says how many keys it holds, and exits 1 if
it is not valid. A Redis RDB file (what import-rdb puts in place) is read in full, every key
converted as the server's start will.
"""


def main(args: list[str]) -> int:
    if args in (["-h"], ["--help"]):
        print(CHECK_USAGE, end="")
        return 0
    if len(args) != 1:
        print(CHECK_USAGE, end="")
        return 1
    path = Path(args[0])
    if not path.is_file():
        print(f"Cannot open file {path}")
        return 1
    meter = Meter(path.name, path.stat().st_size)
    ok, report = check_snapshot(path, meter.update)
    if ok:
        meter.update(meter.progress.total)
    meter.finish()
    print(report)
    return 0 if ok else 1
