"""Redis's RDB file from Headwater's data (issue 35): version 10, what Redis 7.0 and every
later Redis loads. ``headwater export-rdb`` writes one, and a primary sends one to a Redis
replica for its full sync.

Each key is written as DUMP serializes it (``ops.dump.write_object``: Redis's own encodings,
streams with their groups, consumers and PELs), behind its expiry; FUNCTION libraries as
``FUNCTION2`` records; the file ends with EOF and the CRC-64 of all of it, as Redis writes
it. What Redis 7.0's format cannot hold is left out and counted in the report:

- a hash field's TTL (Redis 7.4's): the field is kept, without its expiry;
- a stream's IDMP history and settings, and a consumer's active-time (not in version 10).

The writer goes key by key into ``sink``, a megabyte at a time, so an export of any size
holds one chunk in memory, not the file.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import islice

from headwater import REDIS_COMPAT_VERSION
from headwater.keyspace import Database
from headwater.ops.dump import has_idmp_history, write_object_70
from headwater.rdb.crc64 import crc64
from headwater.rdb.encoding import write_len, write_ms, write_string
from headwater.stream.stream import Stream
from headwater.values import Hash

VERSION = 10
OP_FUNCTION2 = 0xF5
OP_AUX = 0xFA
OP_RESIZEDB = 0xFB
OP_EXPIRETIME_MS = 0xFC
OP_SELECTDB = 0xFE
OP_EOF = 0xFF
#: bytes gathered before they go to the sink
CHUNK = 1 << 20


@dataclass
class Written:
    """What an export wrote, and what Redis 7.0's format could not carry."""

    keys: int = 0
    bytes: int = 0
    field_ttls_dropped: int = 0
    idmp_histories_dropped: int = 0  # streams whose producers' iids were left out
    expired_skipped: int = 0


class RdbOut:
    """The file as it is written: bytes gathered a megabyte at a time into ``sink``, with
    their size and (``checksummed``) their running CRC-64; a share of the keys that another
    writer appends sums them there."""

    def __init__(self, sink: Callable[[bytes], object], checksummed: bool = True) -> None:
        self.sink = sink
        self.checksummed = checksummed
        self.buf = bytearray()
        self.crc = 0
        self.size = 0

    def spill(self, force: bool = False) -> None:
        if self.buf and (force or len(self.buf) >= CHUNK):
            data = bytes(self.buf)
            if self.checksummed:
                self.crc = crc64(data, self.crc)
            self.size += len(data)
            self.sink(data)
            self.buf.clear()

    def absorb(self, data: bytes) -> None:
        """Bytes written elsewhere (another writer's part of the keys) go out next."""
        self.spill(force=True)
        self.crc = crc64(data, self.crc)
        self.size += len(data)
        self.sink(data)


def write_rdb(
    sink: Callable[[bytes], object],
    dbs: list[Database],
    libraries: list[bytes],
    now_ms: int | None = None,
    aux: dict[str, str] | None = None,
) -> Written:
    """Write the whole RDB file to ``sink``; ``aux`` adds AUX fields (a replication's
    ``repl-stream-db``, ``repl-id``, ``repl-offset``)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    out = RdbOut(sink)
    write_head(out, libraries, now, aux)
    written = write_keys(out, dbs, now)
    written.bytes = write_tail(out)
    return written


def write_head(
    out: RdbOut, libraries: list[bytes], now: int, aux: dict[str, str] | None = None
) -> None:
    """The file's start: magic and version, AUX fields, FUNCTION libraries."""
    buf = out.buf
    buf += b"REDIS%04d" % VERSION
    fields = {
        "redis-ver": REDIS_COMPAT_VERSION,
        "redis-bits": "64",
        "ctime": str(now // 1000),
        "used-mem": "0",
        "aof-base": "0",
        **(aux or {}),
    }
    for name, value in fields.items():
        buf.append(OP_AUX)
        write_string(buf, name.encode())
        write_string(buf, value.encode())
    for code in libraries:
        buf.append(OP_FUNCTION2)
        write_string(buf, code)


def write_keys(
    out: RdbOut, dbs: list[Database], now: int, part: int = 0, parts: int = 1
) -> Written:
    """The keys: all of them, or share ``part`` of ``parts`` (in each database, the keys
    from ``part/parts`` to ``(part+1)/parts`` of its order), which the other shares follow
    in order to make the whole. Each share starts its databases with SELECTDB (Redis loads
    a database's keys from several sections); the first one also gives their sizes."""
    written = Written()
    for db in dbs:
        size = len(db.data)
        first, stop = size * part // parts, size * (part + 1) // parts
        if first < stop:
            _write_db(out, db, now, written, first, stop, part == 0)
    return written


def write_tail(out: RdbOut) -> int:
    """EOF and the CRC-64 of the whole file; the file's size."""
    out.buf.append(OP_EOF)
    out.spill(force=True)
    trailer = struct.pack("<Q", out.crc)
    out.sink(trailer)
    return out.size + len(trailer)


def _write_db(
    out: RdbOut, db: Database, now: int, written: Written, first: int, stop: int, sizes: bool
) -> None:
    buf = out.buf
    buf.append(OP_SELECTDB)
    write_len(buf, db.index)
    if sizes:
        buf.append(OP_RESIZEDB)
        write_len(buf, len(db.data))
        write_len(buf, len(db.expires))
    expires = db.expires
    body = bytearray()
    keys = iter(db.data.items())
    if first or stop < len(db.data):
        keys = islice(keys, first, stop)
    for key, value in keys:
        deadline = expires.get(key)
        if deadline is not None:
            if deadline <= now:
                written.expired_skipped += 1
                continue
            buf.append(OP_EXPIRETIME_MS)
            write_ms(buf, deadline)
        body.clear()
        _write_object(body, value, written)
        buf.append(body[0])  # (the type byte comes before the key)
        write_string(buf, key)
        buf += memoryview(body)[1:]
        written.keys += 1
        out.spill()


def _write_object(body: bytearray, value: object, written: Written) -> None:
    """The value's RDB object, type byte first, as DUMP writes it (a hash's field TTLs and a
    stream's IDMP history dropped: version 10 has no place for them)."""
    if isinstance(value, Hash) and value.ttls is not None:
        written.field_ttls_dropped += len(value.ttls)
    elif isinstance(value, Stream) and has_idmp_history(value):
        written.idmp_histories_dropped += 1
    write_object_70(body, value)
