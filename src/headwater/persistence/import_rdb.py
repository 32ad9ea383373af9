"""``headwater import-rdb``: a Redis RDB file into a Headwater data directory (migration).

The server reads Redis's RDB format as well as its own (``rdb_load.py``), so the import puts
the file in place as the directory's snapshot (a hard link on the same file system, else a
copy), and the server converts it at its next start (its next save writes Headwater's
format). What lands there is checked first: the header, the version, and the CRC-64 of the
whole file (``check_intact``), so a truncated or corrupt file leaves the directory untouched.
It lands durably (a temporary name, fsync, rename). A file
without a checksum (RDB versions before 5, or ``rdbchecksum no``) is read in full first, as
is any file with ``--verify``: every key converted as the server will, which also finds what
a checksum cannot (module values, which Headwater does not have; keys beyond ``--databases``)
and counts the keys. Without it, such a file is refused by the server's start instead, which
names the key and loads nothing.

With ``appendonly yes`` (the default) the loaded data becomes the base of a new AOF at that
start, as long as the directory has no AOF yet (which is why an existing AOF or snapshot
makes the import refuse, unless ``--force`` replaces the snapshot; an AOF is never touched).
"""

from __future__ import annotations

import argparse
import gc
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from headwater.config import Config
from headwater.keyspace import Keyspace
from headwater.ops.dump import Limits
from headwater.persistence.manifest import fsync_dir
from headwater.persistence.meter import Meter
from headwater.persistence.rdb_load import (
    RdbImportError,
    Report,
    check_intact,
    describe,
    header_aux,
    load_rdb,
)

#: a progress meter for a step of the import (its name, its total bytes)
MeterFactory = Callable[[str, int], Meter]
#: bytes read at a time when the read's progress is shown
READ_CHUNK = 8 << 20


def import_rdb(
    rdb_path: Path,
    data_dir: Path,
    dbfilename: str,
    databases: int,
    force: bool,
    verify: bool,
    meters: MeterFactory | None = None,
) -> tuple[Report | None, dict[bytes, bytes], int]:
    """Check the file and put it in place; the full read's report (None without one), the
    header's AUX fields, and the file's size. ``meters`` makes a progress meter for each
    long step (reading the file, converting it)."""
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
        with open(rdb_path, "rb") as f:
            stat = os.fstat(f.fileno())
            identity = _identity(stat)
            data = _read(f, stat.st_size, meters)
    except OSError as exc:
        raise RdbImportError(f"cannot read {rdb_path}: {exc}") from None
    _, intact = check_intact(data)
    report = None
    if verify or not intact:
        meter = meters("converting", len(data)) if meters is not None else None
        keyspace, limits = Keyspace(databases), Limits.of(Config())
        report, _ = load_rdb(data, keyspace, limits, _now_ms(), meter.update if meter else None)
        if meter is not None:
            meter.update(len(data))
            meter.finish()
    data_dir.mkdir(parents=True, exist_ok=True)
    _place(rdb_path, identity, target, data)
    return report, report.aux if report is not None else header_aux(data), len(data)


def _read(f: BinaryIO, size: int, meters: MeterFactory | None) -> bytes:
    """The whole file, a chunk at a time when its progress is shown."""
    if meters is None or size < READ_CHUNK:
        return f.read()
    meter = meters("reading", size)
    data = bytearray()
    while chunk := f.read(READ_CHUNK):
        data += chunk
        meter.update(len(data))
    meter.finish()
    return bytes(data)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _identity(stat: os.stat_result) -> tuple[int, ...]:
    return (stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


def _place(source: Path, identity: tuple[int, ...], target: Path, data: bytes) -> None:
    """The file checked (``data``, read from the file of that ``identity``) as ``target``,
    durably: a hard link to it on the same file system (no copy: neither Redis nor Headwater
    ever writes a snapshot in place, both write a new file and rename it), else a copy of the
    bytes; either way through a temporary name, fsync'd, then renamed."""
    temp = target.with_name(f"temp-import-{os.getpid()}.rdb")
    try:
        mode = "wb"
        try:
            os.link(source, temp)
            if _identity(os.stat(temp)) == identity:
                mode = "rb"
            else:  # (the path names another file since it was read: the bytes checked)
                temp.unlink()
        except OSError:  # (another file system, or links not allowed there)
            pass
        with open(temp, mode) as f:
            if mode == "wb":
                f.write(data)
                f.flush()
            os.fsync(f.fileno())
        os.replace(temp, target)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        raise RdbImportError(f"cannot write {target}: {exc}") from None
    fsync_dir(target.parent)


USAGE = "headwater import-rdb <dump.rdb> --dir <data dir>"


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="headwater import-rdb",
        description=(
            "Put a Redis RDB file (RDB versions 1-12: Redis 2.x to 7.4) into a Headwater data "
            "directory as its snapshot, after checking its header and CRC-64; the server "
            "converts it at its next start. Nothing is written unless the file is whole."
        ),
    )
    parser.add_argument("rdb", type=Path, help="the RDB file (e.g. Redis's dump.rdb)")
    parser.add_argument("--dir", type=Path, required=True, help="the server's data directory")
    parser.add_argument("--dbfilename", default="dump.hwsnap", help="snapshot name (dump.hwsnap)")
    parser.add_argument("--databases", type=int, default=16, help="number of databases (16)")
    parser.add_argument("--force", action="store_true", help="replace an existing snapshot")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="also convert every key first, as the server will, and count them",
    )
    opts = parser.parse_args(args)
    started = time.monotonic()
    # (a full read builds millions of objects that all live until the end: a collection
    # would only walk them; frozen, they are not freed one by one at the exit either)
    gc.disable()
    try:
        report, aux, size = import_rdb(
            opts.rdb, opts.dir, opts.dbfilename, opts.databases, opts.force, opts.verify,
            lambda step, total: Meter(f"{opts.rdb.name}: {step}", total),
        )  # fmt: skip
    except RdbImportError as exc:
        print(f"headwater import-rdb: {opts.rdb}: {exc}", file=sys.stderr)
        return 1
    finally:
        gc.freeze()
    version = aux.get(b"redis-ver", b"?").decode("ascii", "replace")
    target = opts.dir / opts.dbfilename
    seconds = time.monotonic() - started
    if report is None:
        what = f"{size:,} bytes, checksum good"
    else:
        what = f"{describe(report)}; {report.expired} expired keys skipped"
    print(
        f"Imported {opts.rdb} (Redis {version}; {what}) into {target} in {seconds:.2f}s. "
        "The server converts it at its next start."
    )
    return 0
