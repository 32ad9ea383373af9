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
from headwater.server.loading import LoadInterrupted, LoadWatch

log = logging.getLogger("headwater")

#: loads a snapshot base (its path; told the bytes loaded so far, if given)
LoadSnapshot = Callable[[Path, Callable[[int], None] | None], int]


class StartupError(Exception):
    """The data on disk cannot be loaded: the server must not start (and not overwrite it)."""


def load_aof(
    engine: Engine,
    manifest_path: Path,
    load_truncated: bool,
    load_snapshot: LoadSnapshot,
    watch: LoadWatch | None = None,
) -> Manifest:
    """Replay what the manifest names into ``engine``; returns the manifest. A snapshot base
    goes through ``load_snapshot``; ``watch`` is told how far the load got."""
    manifest = _read_manifest(manifest_path)
    files = ([manifest.base] if manifest.base else []) + manifest.incrs
    directory = manifest_path.parent
    if watch is not None:
        watch.begin(sum(_size(directory / entry.name) for entry in files))
    replayer = Replayer(engine)
    try:
        loaded = _replay_files(replayer, directory, files, load_truncated, load_snapshot, watch)
    except FailedCommand as exc:
        raise StartupError(
            f"{exc}. Loading stops: starting without this command and what depends on it "
            f"would silently lose data. Keep a copy of the AOF directory and report this."
        ) from None
    except (StartupError, LoadInterrupted):
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
    load_snapshot: LoadSnapshot,
    watch: LoadWatch | None,
) -> int:
    """How many commands (or snapshot keys) were loaded."""
    loaded = 0
    base = 0
    for n, entry in enumerate(files):
        path = directory / entry.name
        progress = watch.at(base) if watch is not None else None
        base += _size(path)
        if entry.kind == "b" and not entry.name.endswith(".aof"):
            loaded += load_snapshot(path, progress)
            continue
        last = n == len(files) - 1
        loaded += replayer.replay(path, last and load_truncated, progress).commands
    return loaded


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # (its replay says what is wrong with it)
