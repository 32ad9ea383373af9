"""A Redis RDB file loaded into a keyspace: the server's start on one, ``import-rdb --verify``
and ``check-snapshot`` of one.

The server reads Redis's RDB format as well as its own snapshot (``snapshot.py``): a data
directory whose snapshot file starts with ``REDIS`` (``headwater import-rdb`` puts one there,
or ``dbfilename dump.rdb`` names Redis's own) is converted at the start, key by key, with the
conversion RESTORE uses (``ops.dump.keyspace_value``) and the server's own encoding limits.
The next save writes Headwater's format. Any error leaves the databases empty and names the
key or the offset; keys already expired are skipped, as Redis's loader skips them.
"""

from __future__ import annotations

import gc
import struct
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from headwater.errors import ReplyError
from headwater.keyspace import Keyspace
from headwater.ops.dump import Limits, keyspace_value
from headwater.ops.hashttl import track_field_ttls
from headwater.rdb.crc64 import crc64
from headwater.rdb.encoding import RdbError
from headwater.rdb.rdbfile import Arriving, Aux, Function, Key, Record, read_header, read_rdb
from headwater.values import Hash

#: what every RDB file starts with (a Headwater snapshot starts otherwise)
RDB_MAGIC = b"REDIS"
#: the first version whose files end with a CRC-64 (``rdb.c``: RDB_VERSION >= 5)
FIRST_CHECKSUMMED = 5


class RdbImportError(Exception):
    """The file cannot be loaded; the message says why and what to do."""


@dataclass
class Report:
    keys: int = 0
    expired: int = 0
    functions: int = 0
    per_db: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    aux: dict[bytes, bytes] = field(default_factory=dict)


def is_rdb(head: bytes) -> bool:
    """Whether a file starting with these bytes is a Redis RDB file."""
    return head[:5] == RDB_MAGIC


def check_intact(data: bytes) -> tuple[int, bool]:
    """The file's RDB version, and whether its checksum vouches for the whole of it: it ends
    with the EOF opcode and a CRC-64 of everything before, which matches. False when the file
    has none to check (before version 5, or written with ``rdbchecksum no``): only a full
    read tells then. Raises ``RdbImportError`` for a file that cannot be whole."""
    try:
        version = read_header(data)
    except RdbError as exc:
        raise RdbImportError(str(exc)) from None
    if version < FIRST_CHECKSUMMED:
        return version, False
    if len(data) < 18 or data[-9] != 0xFF:
        raise RdbImportError("the file is truncated or corrupt: it does not end with EOF")
    (stored,) = struct.unpack_from("<Q", data, len(data) - 8)
    if not stored:
        return version, False
    if stored != crc64(memoryview(data)[:-8]):
        raise RdbImportError("the file is truncated or corrupt: checksum mismatch")
    return version, True


def header_aux(data: bytes) -> dict[bytes, bytes]:
    """The AUX fields before the first key (``redis-ver``, ``ctime``…: Redis writes them
    first), without reading further."""
    aux: dict[bytes, bytes] = {}
    try:
        for record in read_rdb(data):
            if not isinstance(record, Aux):
                break
            aux[record.name] = record.value
    except RdbError:
        pass  # (a full read reports it)
    return aux


#: bytes of the file between two progress reports
REPORT_STEP = 1 << 20


def load_rdb(
    data: bytes,
    keyspace: Keyspace,
    limits: Limits,
    now_ms: int,
    progress: Callable[[int], None] | None = None,
) -> tuple[Report, list[bytes]]:
    """Read a whole RDB file into a keyspace whose databases are empty; returns the report
    and the libraries' code. Raises ``RdbImportError`` naming what could not be loaded (the
    keyspace may then hold part of the file: the caller empties it). ``progress`` is told
    the offset reached, every megabyte or so."""
    return load_records(read_rdb(data), keyspace, limits, now_ms, progress)


def load_arriving(
    file: Arriving, keyspace: Keyspace, limits: Limits, now_ms: int
) -> tuple[Report, list[bytes]]:
    """``load_rdb`` of a file while it arrives (``file.end`` then says where it ended)."""
    return load_records(file.records(), keyspace, limits, now_ms)


def load_records(
    records: Iterator[Record],
    keyspace: Keyspace,
    limits: Limits,
    now_ms: int,
    progress: Callable[[int], None] | None = None,
) -> tuple[Report, list[bytes]]:
    """The records of an RDB file into a keyspace (``load_rdb``)."""
    report = Report()
    libraries: list[bytes] = []
    next_report = 0 if progress is not None else 1 << 62
    collecting = gc.isenabled()
    # (what the load builds is acyclic and long-lived: collections during it would only walk
    # it again and again: a 5M-element file took 3.2 s with them, 1.9 s without)
    gc.disable()
    try:
        for record in records:
            if isinstance(record, Aux):
                report.aux[record.name] = record.value
            elif isinstance(record, Function):
                libraries.append(record.code)
                report.functions += 1
            elif isinstance(record, Key):
                _load_key(record, keyspace, limits, now_ms, report)
                if record.offset >= next_report and progress is not None:
                    progress(record.offset)
                    next_report = record.offset + REPORT_STEP
    except RdbError as exc:
        raise RdbImportError(f"the file is truncated or corrupt: {exc}") from None
    finally:
        if collecting:
            gc.enable()
    for index, db in enumerate(keyspace.dbs):  # (loaded into empty databases)
        if db.data:
            report.per_db[index] = len(db.data)
            report.keys += len(db.data)
    return report, libraries


def _load_key(
    record: Key,
    keyspace: Keyspace,
    limits: Limits,
    now_ms: int,
    report: Report,
) -> None:
    try:
        value = keyspace_value(record.value, limits)
    except ReplyError as exc:
        raise RdbImportError(f"key {_name(record)}: {exc.msg}") from None
    if record.db >= len(keyspace.dbs):
        raise RdbImportError(
            f"key {_name(record)} is in database {record.db}; this server has "
            f"{len(keyspace.dbs)} (set databases)"
        )
    if 0 <= record.expire_ms <= now_ms:
        report.expired += 1
        return
    db = keyspace.dbs[record.db]
    if db.data.setdefault(record.key, value) is not value:  # (one lookup)
        raise RdbImportError(f"the file holds key {_name(record)} twice (offset {record.offset})")
    if record.expire_ms >= 0:
        db.set_expire(record.key, record.expire_ms)
    if isinstance(value, Hash):
        track_field_ttls(db, record.key, value)


def _name(record: Key) -> str:
    return f"{record.key.decode('utf-8', 'backslashreplace')!r} (db {record.db})"


def describe(report: Report) -> str:
    """``N keys (db0: n, …) and F function libraries``: what a load found."""
    dbs = ", ".join(f"db{db}: {n}" for db, n in sorted(report.per_db.items())) or "none"
    return f"{report.keys} keys ({dbs}) and {report.functions} function libraries"
