"""Whole RDB files (``rdb.c``'s ``rdbLoadRioWithLoadingCtx``), read record by record.

Layout::

    "REDIS" <4 ASCII digits: version>
    records, each an opcode byte (or a value's type byte):
      0xFA AUX          <string key> <string value>       (redis-ver, ctime, used-mem, ...)
      0xFE SELECTDB     <length db>
      0xFB RESIZEDB     <length keys> <length keys with expiry>   (a sizing hint)
      0xFC EXPIRETIME_MS <int64 LE ms>   |  0xFD EXPIRETIME <int32 LE s>   (of the next key)
      0xF8 FREQ <u8>    |  0xF9 IDLE <length s>             (of the next key: LFU / LRU)
      0xF5 FUNCTION2    <string: a library's code>
      0xF6 FUNCTION_PRE_GA, 0xF7 MODULE_AUX, 0xF4 SLOT_INFO, 0xF3 KEY_META: refused or skipped
      <type> <string key> <value>   a key (``objects.py``)
    0xFF EOF <u64 LE CRC-64 of everything before it>   (version >= 5; 0: not computed)

``read_rdb`` yields ``Record`` values in file order and raises ``RdbError`` (with the offset)
for anything malformed, truncated or unknown, and at the end for a wrong checksum.
``Arriving.records`` does the same for a file still arriving (a full sync from a Redis
primary, converted while it is received).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from headwater.rdb.crc64 import crc64
from headwater.rdb.encoding import RdbError, Reader
from headwater.rdb.objects import Value, read_value

#: the newest RDB version read (Redis 8.6's)
MAX_VERSION = 13
#: bytes at least added to an arriving file's window when a record does not fit in it (more,
#: the record's size so far: a big record is read again a few times, not once per chunk)
MIN_MORE = 1 << 20

OP_SLOT_INFO = 0xF4
OP_FUNCTION2 = 0xF5
OP_FUNCTION_PRE_GA = 0xF6
OP_MODULE_AUX = 0xF7
OP_FREQ = 0xF8
OP_IDLE = 0xF9
OP_AUX = 0xFA
OP_RESIZEDB = 0xFB
OP_EXPIRETIME_MS = 0xFC
OP_EXPIRETIME = 0xFD
OP_SELECTDB = 0xFE
OP_EOF = 0xFF


# (each record class spells out its ``__init__``: compiled, the one ``dataclass`` makes stays
# interpreted, ~2.8k instructions a key)


@dataclass
class Aux:
    name: bytes
    value: bytes

    def __init__(self, name: bytes, value: bytes) -> None:
        self.name = name
        self.value = value


@dataclass
class Function:
    code: bytes

    def __init__(self, code: bytes) -> None:
        self.code = code


@dataclass
class Key:
    db: int
    key: bytes
    rdb_type: int
    value: Value
    expire_ms: int  # absolute; -1: none
    idle_s: int  # -1: not given
    freq: int  # -1: not given
    offset: int  # where the key's record starts in the file

    def __init__(
        self,
        db: int,
        key: bytes,
        rdb_type: int,
        value: Value,
        expire_ms: int,
        idle_s: int,
        freq: int,
        offset: int,
    ) -> None:
        self.db = db
        self.key = key
        self.rdb_type = rdb_type
        self.value = value
        self.expire_ms = expire_ms
        self.idle_s = idle_s
        self.freq = freq
        self.offset = offset


Record = Aux | Function | Key


def read_header(data: bytes) -> int:
    if len(data) < 9 or data[:5] != b"REDIS" or not data[5:9].isdigit():
        raise RdbError("not an RDB file (no REDIS header)")
    version = int(data[5:9])
    if not 1 <= version <= MAX_VERSION:
        raise RdbError(f"RDB version {version} is not supported (at most {MAX_VERSION})")
    return version


class _State:
    """What earlier records said of the ones after them: the database, and the next key's
    expiry, idle time and frequency."""

    def __init__(self) -> None:
        self.db = 0
        self.expire_ms = -1
        self.idle = -1
        self.freq = -1


#: what ``_read_one`` gives for the EOF opcode
_END: Final = Aux(b"", b"")


def _read_one(r: Reader, state: _State, offset: int) -> Record | None:
    """One record at ``r.pos`` (``offset`` in the file): a ``Record``, None for a record
    that only tells about the next ones, ``_END`` at EOF. ``state`` changes only once the
    whole record has been read, so a record cut short may be read again from its start."""
    op = r.byte()
    if op == OP_EOF:
        return _END
    if op == OP_SELECTDB:
        state.db = r.length()
    elif op == OP_RESIZEDB:
        r.length()
        r.length()
    elif op == OP_AUX:
        name = r.string()
        return Aux(name, r.string())
    elif op == OP_EXPIRETIME_MS:
        state.expire_ms = r.ms()
    elif op == OP_EXPIRETIME:
        state.expire_ms = struct.unpack("<i", r.take(4))[0] * 1000
    elif op == OP_IDLE:
        state.idle = r.length()
    elif op == OP_FREQ:
        state.freq = r.byte()
    elif op == OP_FUNCTION2:
        return Function(r.string())
    elif op == OP_FUNCTION_PRE_GA:
        raise RdbError("functions in the pre-release 7.0 format are not supported")
    elif op == OP_MODULE_AUX:
        raise RdbError("module data (MODULE_AUX) is not supported")
    elif op == OP_SLOT_INFO:
        r.length()
        r.length()
        r.length()
    elif op >= 0xF0:
        raise RdbError(f"unknown RDB opcode 0x{op:02x}")
    else:
        key = r.string()
        value = read_value(r, op)
        record = Key(state.db, key, op, value, state.expire_ms, state.idle, state.freq, offset)
        state.expire_ms = state.idle = state.freq = -1
        return record
    return None


def read_rdb(data: bytes) -> Iterator[Record]:
    """The records of a whole RDB file."""
    version = read_header(data)
    r = Reader(data, 9)
    state = _State()
    while True:
        start = r.pos
        try:
            record = _read_one(r, state, start)
        except RdbError as exc:
            raise RdbError(f"at offset {start}: {exc}") from None
        if record is _END:
            break
        if record is not None:
            yield record
    if version >= 5:
        end = r.pos
        if r.end - end < 8:
            raise RdbError("the file ends inside its checksum")
        (stored,) = struct.unpack_from("<Q", data, end)
        if stored and stored != crc64(memoryview(data)[:end]):
            raise RdbError("checksum mismatch: the file is corrupt")
        if r.end - end > 8:
            raise RdbError(f"{r.end - end - 8} bytes after the end of the RDB data")


class Arriving:
    """An RDB file read while it arrives (a replica's full sync from a Redis primary):
    ``chunks`` gives its bytes in order, blocking until more are there, and ends when no more
    will come; it may go on past the file's end (what follows it is not read). ``end`` is
    where the file ended (after its checksum) once ``records`` has given every record.
    ``min_more``: the least bytes added when a record does not fit in what has arrived."""

    def __init__(self, chunks: Iterator[bytes], min_more: int = MIN_MORE) -> None:
        self.chunks = chunks
        self.min_more = min_more
        self.end = -1
        self._window = b""
        self._base = 0  # the window's offset in the file
        self._crc = 0  # of the file's bytes before the window
        self._finished = False

    def _more(self, keep: int, want: int) -> None:
        """Drop the window's bytes before ``keep`` (their CRC kept) and add ``want`` bytes
        at least, or all that are left."""
        window = self._window
        self._crc = crc64(memoryview(window)[:keep], self._crc)
        self._base += keep
        parts = [window[keep:]]
        got = 0
        while got < want:
            chunk = next(self.chunks, None)
            if chunk is None:
                self._finished = True
                break
            parts.append(chunk)
            got += len(chunk)
        self._window = b"".join(parts)

    def records(self) -> Iterator[Record]:
        """The file's records, as ``read_rdb`` gives them, each read once its bytes are
        there (a record cut off by the bytes so far is read again with more of them)."""
        self._more(0, 9)
        version = read_header(self._window)
        r = Reader(self._window, 9)
        state = _State()
        while True:
            start = r.pos
            try:
                record = _read_one(r, state, self._base + start)
            except RdbError as exc:
                if self._finished:
                    raise RdbError(f"at offset {self._base + start}: {exc}") from None
                self._more(start, max(self.min_more, len(self._window) - start))
                r = Reader(self._window, 0)
                continue
            if record is _END:
                break
            if record is not None:
                yield record
        pos = r.pos
        if version >= 5:
            while len(self._window) - pos < 8 and not self._finished:
                self._more(pos, 8)
                pos = 0
            if len(self._window) - pos < 8:
                raise RdbError("the file ends inside its checksum")
            crc = crc64(memoryview(self._window)[:pos], self._crc)
            (stored,) = struct.unpack_from("<Q", self._window, pos)
            if stored and stored != crc:
                raise RdbError("checksum mismatch: the file is corrupt")
            pos += 8
        self.end = self._base + pos
