"""``headwater export-rdb --dir D OUT``: a data directory as a Redis RDB file (issue 35).

The directory is loaded as the server's start would load it (its AOF, or its snapshot with
``--appendonly no``), read-only: a torn AOF tail is refused, not cut (``check-aof --fix``
first). The file is written as a primary sends it to a Redis replica
(persistence/rdb_write.py), to a temporary name renamed into place once whole. For a server
that is running, ``redis-cli --rdb OUT`` asks it for the same file over the network.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from headwater.engine import Engine
from headwater.persistence.rdb_write import write_rdb
from headwater.server.aof_load import StartupError, load_aof
from headwater.server.options import OptionsError, parse_args
from headwater.server.snapshots import Snapshots


def load_dir(data_dir: Path, appendonly: bool, databases: int, dbfilename: str) -> Engine:
    """An engine holding what the server would load from ``data_dir``."""
    config = parse_args(["--databases", str(databases), "--dbfilename", dbfilename])
    engine = Engine(config)
    snapshots = Snapshots(config, engine, str(data_dir), lambda: None)
    manifest = data_dir / config["appenddirname"] / f"{config['appendfilename']}.manifest"
    if appendonly and manifest.exists():
        load_aof(engine, manifest, False, snapshots.load)
    elif snapshots.path.exists():
        snapshots.load(snapshots.path)
    elif not manifest.exists():
        raise StartupError(f"{data_dir} holds no data (no AOF manifest, no {dbfilename})")
    return engine


def main(args: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="headwater export-rdb",
        description=(
            "Write a Headwater data directory as a Redis RDB file (version 10: Redis 7.0 and "
            "later load it). Hash field TTLs, IDMP histories and consumers' active times "
            "have no place in that format and are left out."
        ),
    )
    parser.add_argument("out", type=Path, help="the RDB file to write (e.g. dump.rdb)")
    parser.add_argument("--dir", type=Path, required=True, help="the server's data directory")
    parser.add_argument("--dbfilename", default="dump.hwsnap", help="snapshot name (dump.hwsnap)")
    parser.add_argument("--databases", type=int, default=16, help="number of databases (16)")
    parser.add_argument(
        "--appendonly", choices=("yes", "no"), default="yes",
        help="load the AOF (yes, the default) or the snapshot (no), as the server would",
    )  # fmt: skip
    opts = parser.parse_args(args)
    started = time.monotonic()
    try:
        engine = load_dir(opts.dir, opts.appendonly == "yes", opts.databases, opts.dbfilename)
    except (StartupError, OptionsError, OSError, ValueError) as exc:
        print(f"headwater export-rdb: {exc}", file=sys.stderr)
        return 1
    temp = opts.out.with_name(f".{opts.out.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "wb") as f:
            written = write_rdb(f.write, engine.keyspace.dbs, engine.scripting.library_codes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, opts.out)
    except OSError as exc:
        temp.unlink(missing_ok=True)
        print(f"headwater export-rdb: {opts.out}: {exc}", file=sys.stderr)
        return 1
    lost = []
    if written.field_ttls_dropped:
        lost.append(f"{written.field_ttls_dropped} hash field TTLs dropped")
    if written.idmp_histories_dropped:
        lost.append(f"IDMP history of {written.idmp_histories_dropped} streams dropped")
    note = f" ({'; '.join(lost)})" if lost else ""
    print(
        f"Exported {opts.dir} to {opts.out}: {written.keys} keys, {written.bytes} bytes, "
        f"RDB version 10 in {time.monotonic() - started:.2f}s{note}"
    )
    return 0
