"""Snapshots: SAVE in the foreground, BGSAVE in a forked child, the load at startup and for
DEBUG RELOAD, and the lazily loaded stream nodes the cron copies out of a loaded file."""

from __future__ import annotations

import gc
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

from headwater.config import Config
from headwater.engine import Engine
from headwater.errors import ReplyError, err
from headwater.ops.dump import Limits
from headwater.persistence.rdb_load import RdbImportError, describe, is_rdb, load_rdb
from headwater.persistence.snapshot import (
    SnapshotError,
    load_snapshot,
    materialize_some,
    write_snapshot,
)
from headwater.server.aof_load import StartupError
from headwater.server.children import as_writer_child, kill_child
from headwater.server.loading import LoadWatch
from headwater.stream.node import Node
from headwater.structures.histogram import LONG_SECONDS

log = logging.getLogger("headwater")

#: share of a core the cron spends materializing lazily loaded nodes
MATERIALIZE_SHARE = 0.05


class Snapshots:
    def __init__(
        self, config: Config, engine: Engine, data_dir: str, on_change: Callable[[], None]
    ) -> None:
        self.config = config
        self.engine = engine
        self.data_dir = data_dir
        #: called after a save ended (its status decides whether writes are refused)
        self.on_change = on_change
        #: (pid, dirty counter at the fork) while a BGSAVE child runs
        self.child: tuple[int, int] | None = None
        self.last_save_attempt = 0.0
        #: stream nodes loaded lazily whose buffers may still be in a snapshot's private copy
        self.lazy_nodes: list[Node] = []

    @property
    def path(self) -> Path:
        name: str = self.config["dbfilename"]
        return Path(self.data_dir) / name

    # -- loading ---------------------------------------------------------------------------

    def load_file(self, watch: LoadWatch | None = None) -> None:
        """At startup without the AOF: the snapshot, if there is one."""
        path = self.path
        if path.exists():
            if watch is not None:
                watch.begin(path.stat().st_size)
            keys = self.load(path, watch.at(0) if watch is not None else None)
            log.warning("DB loaded from snapshot %s: %d keys", path, keys)

    def load(self, path: Path, progress: Callable[[int], None] | None = None) -> int:
        """Load the snapshot (or Redis RDB file) at ``path``; ``progress`` is told the bytes
        loaded so far."""
        if _starts_as_rdb(path):
            return self._load_rdb(path, progress)
        try:
            libraries: list[bytes] = []
            keys = load_snapshot(
                path,
                self.engine.keyspace.dbs,
                self.lazy_nodes,
                libraries=libraries,
                progress=progress,
            )
            self.engine.scripting.load_libraries(libraries)
        except (SnapshotError, OSError) as exc:
            raise StartupError(
                f"Cannot load snapshot {path}: {exc}. Check it with: headwater check-snapshot "
                f"{path}"
            ) from None
        self.engine.info.last_snapshot_keys = keys
        self.engine.info.snapshot_lazy_nodes = len(self.lazy_nodes)
        return keys

    def _load_rdb(self, path: Path, progress: Callable[[int], None] | None = None) -> int:
        """A Redis RDB file in the snapshot's place (``import-rdb``, or ``dbfilename``
        naming Redis's own): converted key by key; the next save writes Headwater's format."""
        engine = self.engine
        if engine.region is not None:
            raise StartupError(
                f"Cannot load {path}: a Redis RDB file, and this server is an active-active "
                "region (region-id): load it into a server without region-id"
            )
        started = time.monotonic()
        try:
            data = path.read_bytes()
            now_ms = int(time.time() * 1000)
            limits = Limits.of(self.config)
            # (load_rdb runs without collections: millions of long-lived objects)
            report, libraries = load_rdb(data, engine.keyspace, limits, now_ms, progress)
            del data
            engine.scripting.load_libraries(libraries)
            if gc.isenabled() and not gc.get_freeze_count():
                gc.freeze()  # (as after a snapshot's first load: see snapshot.py)
        except (RdbImportError, OSError, ReplyError) as exc:
            self.flush_all()
            raise StartupError(
                f"Cannot load {path}, a Redis RDB file: {exc}. Nothing was loaded; check it "
                f"with: headwater check-snapshot {path}"
            ) from None
        log.warning(
            "Converted the Redis RDB file %s: %s; %d expired keys skipped (%.2f s)",
            path,
            describe(report),
            report.expired,
            time.monotonic() - started,
        )
        engine.info.last_snapshot_keys = report.keys
        return report.keys

    def flush_all(self) -> None:
        """Empty every database (before loading again)."""
        for db in self.engine.keyspace.dbs:
            db.flush()
        if self.engine.region is not None:
            self.engine.region.reset()  # (an active-active region's state is loaded again too)
        self.lazy_nodes.clear()  # (nodes of the keys just flushed)
        self.engine.info.snapshot_lazy_nodes = 0

    def materialize_loaded(self) -> None:
        """From the cron: copy lazily loaded stream nodes out of their snapshot, using at most
        ~5% of a core, until none is left (a 5M-entry snapshot takes a few seconds)."""
        if self.lazy_nodes:
            materialize_some(self.lazy_nodes, MATERIALIZE_SHARE / max(1, self.config["hz"]))
            self.engine.info.snapshot_lazy_nodes = len(self.lazy_nodes)

    def reload(self) -> None:
        """DEBUG RELOAD: save a snapshot, empty the data, and load the snapshot back."""
        self.save()
        self.flush_all()
        try:
            self.load(self.path)
        except StartupError as exc:  # a read error, or the file changed since the save
            log.warning("DEBUG RELOAD: %s", exc)
            raise err("Error trying to load the RDB dump, check server logs.") from None

    # -- saving ----------------------------------------------------------------------------

    def save(self) -> None:
        """SAVE: in the foreground."""
        if self.child is not None:
            raise err("Background save already in progress")
        dirty = self.engine.dirty
        started = time.perf_counter()
        try:
            write_snapshot(
                self.path, self.engine.keyspace.dbs, self.engine.scripting.library_codes()
            )
        except OSError as exc:
            self._saved(ok=False, dirty=dirty)
            raise err(f"Error saving DB on disk: {exc.strerror or exc}") from None
        finally:
            elapsed = time.perf_counter() - started
            self.engine.latency.sample("snapshot", elapsed * 1000)
            self.engine.histograms.observe("snapshot_seconds", elapsed, LONG_SECONDS)
        self._saved(ok=True, dirty=dirty)

    def save_after_flush(self) -> None:
        """FLUSHALL's save: a background save is stopped first (Redis: killRDBChild; its
        snapshot would hold the flushed keys), and a failed save is only logged (FLUSHALL
        still succeeds, as in Redis; INFO shows the failure)."""
        self.stop_bgsave()
        try:
            self.save()
        except ReplyError as exc:
            log.warning("FLUSHALL: %s", exc.msg)

    def stop_bgsave(self) -> None:
        if self.child is not None:
            self.kill_child()
            self.engine.info.rdb_bgsave_in_progress = False

    def start_bgsave(self) -> None:
        if self.child is not None:
            raise err("Background save already in progress")
        dirty = self.engine.dirty
        delay = self.engine.config["rdb-key-save-delay"]
        pid = os.fork()
        if pid == 0:  # the child: write the snapshot and leave without running any cleanup
            as_writer_child()
            code = 1
            try:
                if delay > 0:  # (Redis sleeps before each key: the same time in all)
                    time.sleep(delay * self.engine.keyspace.total_keys() / 1e6)
                write_snapshot(
                    self.path, self.engine.keyspace.dbs, self.engine.scripting.library_codes()
                )
                code = 0
            finally:
                os._exit(code)
        self.child = (pid, dirty)
        self.engine.info.rdb_bgsave_in_progress = True
        self.engine.info.rdb_bgsave_started_s = time.monotonic()
        log.warning("Background saving started by pid %d", pid)

    def check_bgsave(self) -> None:
        """From the cron: has the child finished?"""
        if self.child is None:
            return
        pid, dirty = self.child
        done, status = os.waitpid(pid, os.WNOHANG)
        if not done:
            return
        self.child = None
        info = self.engine.info
        info.rdb_bgsave_in_progress = False
        elapsed = time.monotonic() - info.rdb_bgsave_started_s
        info.rdb_last_bgsave_time_sec = int(elapsed)
        self.engine.histograms.observe("snapshot_seconds", elapsed, LONG_SECONDS)
        ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        self._saved(ok=ok, dirty=dirty)
        log.warning("Background saving %s", "terminated with success" if ok else "failed")

    def _saved(self, ok: bool, dirty: int) -> None:
        engine = self.engine
        engine.info.rdb_last_bgsave_status = "ok" if ok else "err"
        self.last_save_attempt = time.time()
        if ok:
            engine.info.rdb_saves += 1
            engine.dirty_at_last_save = dirty
            engine.last_save_time = int(time.time())
        self.on_change()

    def kill_child(self) -> None:
        if self.child is not None:
            kill_child(self.child[0])
        self.child = None

    def save_at_shutdown(self) -> None:
        try:
            write_snapshot(
                self.path, self.engine.keyspace.dbs, self.engine.scripting.library_codes()
            )
            log.warning("DB saved on disk")
        except OSError as exc:
            log.warning("Error saving DB on disk: %s", exc)


def _starts_as_rdb(path: Path) -> bool:
    try:
        with open(path, "rb") as f:
            return is_rdb(f.read(5))
    except OSError:
        return False  # (the snapshot's load reports it)
