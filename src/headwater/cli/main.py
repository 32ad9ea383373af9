"""``headwater server [config] [--option value ...]`` and ``headwater --version``."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from headwater import REDIS_COMPAT_VERSION, __version__

USAGE = """usage: headwater server [/path/to/headwater.conf] [--option value ...]
       headwater check-aof [--fix] <file.aof>
       headwater check-snapshot <file>
       headwater import-rdb <dump.rdb> --dir <data dir> [--force]
       headwater export-rdb <out.rdb> --dir <data dir>
       headwater local-cluster [--nodes 6] [--replicas 1] [--base-port 7000] [--dir ./cluster]
       headwater --version

Options are the config directives of redis.conf, e.g.:
  headwater server --port 6380 --dir ./data --appendfsync always
"""


def _setup_logging(level: str, logfile: str) -> None:
    levels = {"debug": logging.DEBUG, "verbose": logging.INFO, "notice": logging.INFO}
    handler: logging.Handler = (
        logging.FileHandler(logfile) if logfile else logging.StreamHandler(sys.stdout)
    )
    handler.setFormatter(
        logging.Formatter("%(process)d:M %(asctime)s.%(msecs)03d %(message)s", "%d %b %Y %H:%M:%S")
    )
    root = logging.getLogger("headwater")
    root.handlers[:] = [handler]
    root.setLevel(levels.get(level, logging.WARNING))


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(USAGE, end="")
        return 0 if args else 1
    if args[0] in ("-v", "--version", "version"):
        print(f"Headwater v={__version__} redis-compat={REDIS_COMPAT_VERSION}")
        return 0
    if args[0] == "check-aof":
        from headwater.persistence.check import main as check_aof

        return check_aof(args[1:])
    if args[0] == "check-snapshot":
        from headwater.persistence.snapshot import main as check_snapshot

        return check_snapshot(args[1:])
    if args[0] == "import-rdb":
        from headwater.persistence.import_rdb import main as import_rdb

        return import_rdb(args[1:])
    if args[0] == "export-rdb":
        from headwater.server.export import main as export_rdb

        return export_rdb(args[1:])
    if args[0] == "local-cluster":
        from headwater.cli.local_cluster import main as local_cluster

        return local_cluster(args[1:])
    if args[0] != "server":
        print(f"headwater: unknown command '{args[0]}'\n\n{USAGE}", end="", file=sys.stderr)
        return 1
    if args[1:2] and args[1] in ("-h", "--help"):  # (redis-server -h / --help)
        print(USAGE, end="")
        return 0
    from headwater.server.options import OptionsError, parse_args

    try:
        config = parse_args(args[1:])
    except OptionsError as exc:
        print(str(exc).lstrip("\n"), file=sys.stderr)
        return 1
    from headwater.cli.daemon import daemonize, pidfile_for, write_pidfile

    if config["daemonize"]:
        daemonize()  # (before any thread starts: a fork keeps only the calling one)
    _setup_logging(config["loglevel"], config["logfile"])
    pidfile = pidfile_for(config["daemonize"], config["pidfile"])
    if pidfile:
        write_pidfile(pidfile)
    if not config["appendonly"]:
        # The snapshot is read (by threads) while the server's modules are imported.
        from headwater.persistence.snapshot import prefetch

        prefetch(Path(config["dir"]).absolute() / config["dbfilename"])
    from headwater.server.app import run

    try:
        run(config)
    except OSError as exc:
        print(f"headwater: could not start: {exc}", file=sys.stderr)
        logging.getLogger("headwater").warning("could not start: %s", exc)  # (daemonized)
        return 1
    except KeyboardInterrupt:
        pass
    return 0
