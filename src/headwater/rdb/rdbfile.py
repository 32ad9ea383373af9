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
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass

from headwater.rdb.crc64 import crc64
from headwater.rdb.encoding import RdbError, Reader
from headwater.rdb.objects import Value, read_value

#: the newest RDB version read (Redis 7.4's)
MAX_VERSION = 12

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


def read_rdb(data: bytes) -> Iterator[Record]:
    """The records of a whole RDB file."""
    version = read_header(data)
    r = Reader(data, 9)
    db = 0
    expire_ms = idle = freq = -1
    while True:
        start = r.pos
        try:
            op = r.byte()
            if op == OP_EOF:
                break
            if op == OP_SELECTDB:
                db = r.length()
            elif op == OP_RESIZEDB:
                r.length()
                r.length()
            elif op == OP_AUX:
                yield Aux(r.string(), r.string())
            elif op == OP_EXPIRETIME_MS:
                expire_ms = r.ms()
            elif op == OP_EXPIRETIME:
                expire_ms = struct.unpack("<i", r.take(4))[0] * 1000
            elif op == OP_IDLE:
                idle = r.length()
            elif op == OP_FREQ:
                freq = r.byte()
            elif op == OP_FUNCTION2:
                yield Function(r.string())
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
                yield Key(db, key, op, value, expire_ms, idle, freq, start)
                expire_ms = idle = freq = -1
        except RdbError as exc:
            raise RdbError(f"at offset {start}: {exc}") from None
    if version >= 5:
        end = r.pos
        if r.end - end < 8:
            raise RdbError("the file ends inside its checksum")
        (stored,) = struct.unpack_from("<Q", data, end)
        if stored and stored != crc64(memoryview(data)[:end]):
            raise RdbError("checksum mismatch: the file is corrupt")
        if r.end - end > 8:
            raise RdbError(f"{r.end - end - 8} bytes after the end of the RDB data")
