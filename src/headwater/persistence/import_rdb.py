"""``headwater import-rdb``: a Redis RDB file into a Headwater data directory (migration).

The whole file is read and checked first (header, every record, the end marker and the CRC-64),
then every key is converted (``ops.dump.keyspace_value``: the same conversion RESTORE uses);
only when all of it is good is the snapshot written, durably (``write_snapshot``: a temporary
file, fsync, rename). So a truncated or corrupt file, or one holding module values (which
Headwater does not have), leaves the data directory untouched. Keys already expired are
skipped, as Redis's loader skips them.
FUNCTION libraries are carried over; LRU/LFU hints (IDLE, FREQ) and AUX fields are not kept.

The server loads the snapshot at its next start: directly with ``appendonly no``; with
``appendonly yes`` (the default) it becomes the base of a new AOF, as long as the directory
has no AOF yet (which is why an existing AOF or snapshot makes the import refuse, unless
``--force`` replaces the snapshot; an AOF is never touched).
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from headwater.config import Config
from headwater.errors import ReplyError
from headwater.keyspace import Keyspace
from headwater.ops.dump import Limits, keyspace_value
from headwater.ops.hashttl import track_field_ttls
from headwater.persistence.snapshot import write_snapshot
from headwater.rdb.encoding import RdbError
from headwater.rdb.rdbfile import Aux, Function, Key, read_rdb
from headwater.structures.sets import SetLimits
from headwater.structures.zsets import ZSetLimits


class RdbImportError(Exception):
    """The file cannot be imported; the message says why and what to do."""


@dataclass
class Report:
    keys: int = 0
    expired: int = 0
    functions: int = 0
    per_db: dict[int, int] = field(default_factory=lambda: defaultdict(int))
    aux: dict[bytes, bytes] = field(default_factory=dict)


def load_rdb(
    data: bytes, keyspace: Keyspace, limits: Limits, now_ms: int
) -> tuple[Report, list[bytes]]:
    """Read a whole RDB file into an empty keyspace; returns the report and the libraries'
    code. Raises ``RdbImportError`` listing what could not be loaded."""
    report = Report()
    libraries: list[bytes] = []
    try:
        for record in read_rdb(data):
            if isinstance(record, Aux):
                report.aux[record.name] = record.value
            elif isinstance(record, Function):
                libraries.append(record.code)
                report.functions += 1
            elif isinstance(record, Key):
                _load_key(record, keyspace, limits, now_ms, report)
    except RdbError as exc:
        raise RdbImportError(f"the file is truncated or corrupt: {exc}") from None
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
            f"{len(keyspace.dbs)} (use --databases)"
        )
    if 0 <= record.expire_ms <= now_ms:
        report.expired += 1
        return
    db = keyspace.dbs[record.db]
    if record.key in db.data:
        raise RdbImportError(f"the file holds key {_name(record)} twice (offset {record.offset})")
    db.data[record.key] = value
    if record.expire_ms >= 0:
        db.set_expire(record.key, record.expire_ms)
    track_field_ttls(db, record.key, value)
    report.keys += 1
    report.per_db[record.db] += 1


def _name(record: Key) -> str:
    return f"{record.key.decode('utf-8', 'backslashreplace')!r} (db {record.db})"


def import_rdb(
    rdb_path: Path, data_dir: Path, dbfilename: str, databases: int, force: bool, limits: Limits
) -> Report:
    target = data_dir / dbfilename
    aof_dir = data_dir / "appendonlydir"
    if aof_dir.exists() and any(aof_dir.iterdir()):
        raise RdbImportError(
            f"{aof_dir} holds an append-only file: the server would load it and not the "
            "import. Import into an empty directory."
        )
    if target.exists() and not force:
        raise RdbImportError(f"{target} exists; use --force to replace it")
    try:
        data = rdb_path.read_bytes()
    except OSError as exc:
        raise RdbImportError(f"cannot read {rdb_path}: {exc}") from None
    keyspace = Keyspace(databases)
    report, libraries = load_rdb(data, keyspace, limits, int(time.time() * 1000))
    data_dir.mkdir(parents=True, exist_ok=True)
    write_snapshot(target, keyspace.dbs, libraries)
    return report


USAGE = "headwater import-rdb <dump.rdb> --dir <data dir>"


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="headwater import-rdb",
        description=(
            "Load a Redis RDB file (RDB versions 1-12: Redis 2.x to 7.4) into a Headwater data "
            "directory as its snapshot; the server loads it at its next start. Nothing is "
            "written unless the whole file is good."
        ),
    )
    parser.add_argument("rdb", type=Path, help="the RDB file (e.g. Redis's dump.rdb)")
    parser.add_argument("--dir", type=Path, required=True, help="the server's data directory")
    parser.add_argument("--dbfilename", default="dump.hwsnap", help="snapshot name (dump.hwsnap)")
    parser.add_argument("--databases", type=int, default=16, help="number of databases (16)")
    parser.add_argument("--force", action="store_true", help="replace an existing snapshot")
    opts = parser.parse_args(args)
    defaults = Config()
    limits = Limits(
        defaults["hash-max-listpack-entries"],
        defaults["hash-max-listpack-value"],
        defaults["stream-idmp-duration"],
        defaults["stream-idmp-maxsize"],
        SetLimits(
            defaults["set-max-intset-entries"],
            defaults["set-max-listpack-entries"],
            defaults["set-max-listpack-value"],
        ),
        ZSetLimits(defaults["zset-max-listpack-entries"], defaults["zset-max-listpack-value"]),
        defaults["list-max-listpack-size"],
    )
    started = time.monotonic()
    # No garbage collection in this process: what the import builds (millions of objects, and
    # the keyspace's cycle through its databases) all lives until the snapshot is written, so
    # a collection would only walk it (~10% of an import of 250,000 keys). Frozen afterwards,
    # it is not walked and freed one object at a time at the exit either (~2 s for 5M
    # elements): the process ends and the system takes the memory back.
    gc.disable()
    try:
        report = import_rdb(opts.rdb, opts.dir, opts.dbfilename, opts.databases, opts.force, limits)
    except RdbImportError as exc:
        print(f"headwater import-rdb: {opts.rdb}: {exc}", file=sys.stderr)
        return 1
    finally:
        gc.freeze()
    version = report.aux.get(b"redis-ver", b"?").decode("ascii", "replace")
    dbs = ", ".join(f"db{db}: {n}" for db, n in sorted(report.per_db.items())) or "none"
    print(
        f"Imported {report.keys} keys ({dbs}) and {report.functions} function libraries from "
        f"{opts.rdb} (Redis {version}) into {opts.dir / opts.dbfilename} in "
        f"{time.monotonic() - started:.2f}s; {report.expired} expired keys skipped."
    )
    return 0
