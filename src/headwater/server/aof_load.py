"""Loading the AOF at startup (and for DEBUG LOADAOF, a roll-back): the base (if any) and then
every incremental file the manifest names are replayed through the engine; a torn tail of the
last file is cut off when ``aof-load-truncated`` allows it."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from headwater.engine import Engine
from headwater.engine.replay import FailedCommand, Replayer
from headwater.persistence.manifest import Manifest, ManifestEntry, load_manifest

log = logging.getLogger("headwater")


class StartupError(Exception):
    """The data on disk cannot be loaded: the server must not start (and not overwrite it)."""


def load_aof(
    engine: Engine,
    manifest_path: Path,
    load_truncated: bool,
    load_snapshot: Callable[[Path], int],
) -> Manifest:
    """Replay what the manifest names into ``engine``; returns the manifest. A snapshot base
    goes through ``load_snapshot``."""
    manifest = _read_manifest(manifest_path)
    files = ([manifest.base] if manifest.base else []) + manifest.incrs
    replayer = Replayer(engine)
    try:
        loaded = _replay_files(replayer, manifest_path.parent, files, load_truncated, load_snapshot)
    except FailedCommand as exc:
        raise StartupError(
            f"{exc}. Loading stops: starting without this command and what depends on it "
            f"would silently lose data. Keep a copy of the AOF directory and report this."
        ) from None
    except StartupError:
        raise
    except Exception as exc:
        offset = getattr(exc, "offset", None)
        where = f" (offset {offset})" if offset is not None else ""
        raise StartupError(
            f"Bad file format reading the append only file {exc}{where}. Make a backup of "
            f"your AOF file, then use: headwater check-aof --fix <filename>"
        ) from None
    finally:
        replayer.close()
    log.warning("DB loaded from append only file: %d commands", loaded)
    return manifest


def _read_manifest(manifest_path: Path) -> Manifest:
    try:
        manifest = load_manifest(manifest_path)
    except (OSError, ValueError) as exc:
        raise StartupError(f"Bad AOF manifest: {exc}") from None
    if not manifest.base and not manifest.incrs:
        raise StartupError(f"{manifest_path}: no AOF file is named")
    return manifest


def _replay_files(
    replayer: Replayer,
    directory: Path,
    files: list[ManifestEntry],
    load_truncated: bool,
    load_snapshot: Callable[[Path], int],
) -> int:
    """How many commands (or snapshot keys) were loaded."""
    loaded = 0
    for n, entry in enumerate(files):
        path = directory / entry.name
        if entry.kind == "b" and not entry.name.endswith(".aof"):
            loaded += load_snapshot(path)
            continue
        last = n == len(files) - 1
        loaded += replayer.replay(path, last and load_truncated).commands
    return loaded
