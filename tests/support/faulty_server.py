"""A Headwater server for tests whose AOF file operations fail or wait on demand.

``python -m tests.support.faulty_server server [--option value ...]`` runs the same server as
``headwater server`` with ``FaultyFileOps``, plus test-only command rows that drive it (the
production CLI has none of them):

* ``FAULT AOF-WRITE-ERROR <errno name>|OFF``: every AOF write fails with that errno (ENOSPC:
  a full disk) until OFF;
* ``FAULT AOF-FSYNC-HOLD ON|OFF``: background ``fdatasync`` calls wait until OFF.
"""

from __future__ import annotations

import errno
import sys

from headwater.cli.main import _setup_logging
from headwater.commands.context import Client, CommandSpec, reject_subcommand, spec
from headwater.errors import err
from headwater.resp.types import OK, Reply
from headwater.server.app import run
from headwater.server.options import parse_args
from tests.support.file_ops import FaultyFileOps

FLAGS = "admin noscript loading stale"


def fault_commands(ops: FaultyFileOps) -> tuple[CommandSpec, ...]:
    """The FAULT command: its subcommands set ``ops``'s faults."""

    def write_error(c: Client, argv: list[bytes]) -> Reply:
        name = argv[2].decode("ascii", "replace").upper()
        if name == "OFF":
            ops.fail_writes(None)
            return OK
        code = getattr(errno, name, None)
        if not name.startswith("E") or not isinstance(code, int):
            raise err(f"unknown errno name '{name}'")
        ops.fail_writes(code)
        return OK

    def fsync_hold(c: Client, argv: list[bytes]) -> Reply:
        choice = argv[2].upper()
        if choice not in (b"ON", b"OFF"):
            raise err("usage: FAULT AOF-FSYNC-HOLD <ON|OFF>")
        ops.hold_syncs(choice == b"ON")
        return OK

    subcommands = (
        spec("fault|aof-write-error", 3, FLAGS, handler=write_error),
        spec("fault|aof-fsync-hold", 3, FLAGS, handler=fsync_hold),
    )
    return (spec("fault", -2, FLAGS, handler=reject_subcommand, subcommands=subcommands),)


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "server":
        print("usage: python -m tests.support.faulty_server server [--option value ...]")
        return 1
    config = parse_args(argv[1:])
    _setup_logging(config["loglevel"], config["logfile"])
    ops = FaultyFileOps()
    run(config, ops, fault_commands(ops))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
