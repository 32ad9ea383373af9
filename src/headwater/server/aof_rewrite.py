"""The AOF rewrite: a forked child writes a new base from its copy of the data (BGREWRITEAOF,
the automatic rewrite on growth, appendonly turned on at runtime).

With the AOF on, new effects go to a new incremental file meanwhile, and the manifest names a
loadable set at every moment: first old base + old incrs + the new incr, then (when the child
has finished) the new base + the new incr. With the AOF off (BGREWRITEAOF, as Redis) the new
manifest names the new base alone. A rewrite asked for while a BGSAVE runs is scheduled: the
cron starts it once no child runs.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from headwater.config import Config
from headwater.engine import Engine
from headwater.errors import ReplyError, err
from headwater.persistence.manifest import Manifest, ManifestEntry, write_manifest
from headwater.persistence.rewrite import write_base
from headwater.persistence.snapshot import write_snapshot
from headwater.server.aof_log import AofLog, next_seq
from headwater.server.children import as_writer_child, kill_child
from headwater.structures.histogram import LONG_SECONDS

log = logging.getLogger("headwater")

REWRITE_FAILED = (
    "Can't execute an AOF background rewriting. Please check the server logs for more information."
)
IN_PROGRESS = "Background append only file rewriting already in progress"


@dataclass
class Rewrite:
    """A rewrite child at work: it writes ``base_name``; the new manifest will name that base
    and ``incr_name`` (None when the AOF is off: the base alone, as Redis)."""

    pid: int
    seq: int
    base_name: str
    incr_name: str | None


class AofRewrite:
    def __init__(
        self,
        config: Config,
        engine: Engine,
        aof: AofLog,
        bgsave_running: Callable[[], bool],
        on_change: Callable[[], None],
    ) -> None:
        self.config = config
        self.engine = engine
        self.aof = aof
        self.bgsave_running = bgsave_running
        #: called when the state INFO shows has changed
        self.on_change = on_change
        self.child: Rewrite | None = None
        #: BGREWRITEAOF (or appendonly yes) while a BGSAVE runs: the cron starts it later
        self.scheduled = False

    def start(self) -> None:
        """Start a background rewrite (see the module docstring)."""
        if self.child is not None:
            raise err(IN_PROGRESS)
        self.scheduled = False
        aof = self.aof
        writer = aof.writer
        if writer is not None and writer.error is not None:
            # the unwritten effects must stay in the file they continue (a torn command
            # may end it): a new incremental file waits until they are written
            log.warning("Can't rewrite the AOF while it cannot be written: %s", writer.error)
            raise err(REWRITE_FAILED)
        aof.dir.mkdir(parents=True, exist_ok=True)
        seq = next_seq(aof.manifest_on_disk())
        incr_name: str | None = None
        if writer is not None and aof.enabling:  # appendonly yes, waiting: its writer's file
            incr_name, seq = writer.path.name, aof.enable_seq
        elif writer is not None:
            incr_name = self._switch_incr(seq)
        self.fork(seq, incr_name)

    def _switch_incr(self, seq: int) -> str:
        """Effects go on in a new incremental file, named by the manifest at once."""
        aof = self.aof
        on_disk = aof.manifest_on_disk()
        incr_name = aof.incr_name(seq)
        aof.close_writer()
        (aof.dir / incr_name).touch()
        on_disk.entries.append(ManifestEntry(incr_name, seq, "i"))
        write_manifest(aof.manifest_path, on_disk)
        aof.manifest = on_disk
        aof.start_writer(aof.dir / incr_name)
        return incr_name

    def fork(self, seq: int, incr_name: str | None) -> None:
        base_name = self.aof.base_name(seq)
        pid = os.fork()
        if pid == 0:  # the child: write the base and leave without running any cleanup
            as_writer_child()
            code = 1
            try:
                self._write_base(self.aof.dir / base_name)
                code = 0
            finally:
                os._exit(code)
        self.child = Rewrite(pid, seq, base_name, incr_name)
        self.engine.info.aof_rewrite_started_s = time.monotonic()
        self.on_change()
        log.warning("Background append only file rewriting started by pid %d", pid)

    def _write_base(self, path: Path) -> None:
        if path.suffix == ".hwsnap":
            write_snapshot(path, self.engine.keyspace.dbs, self.engine.scripting.library_codes())
        else:
            write_base(path, self.engine.keyspace.dbs, self.engine.scripting.library_codes())

    def kill(self) -> None:
        """Stop the rewrite child and remove what it was writing (Redis: killAppendOnlyChild)."""
        child = self.child
        if child is None:
            return
        kill_child(child.pid)
        self.child = None
        directory = self.aof.dir
        for path in directory.glob(f"temp-*{child.base_name}"):
            path.unlink(missing_ok=True)
        (directory / child.base_name).unlink(missing_ok=True)
        log.warning("Killed the AOF rewrite child %d", child.pid)
        self.on_change()

    # -- from the cron ---------------------------------------------------------------------

    def check(self) -> None:
        """Has the child finished? Then switch the manifest to its base."""
        child = self.child
        if child is None:
            return
        done, status = os.waitpid(child.pid, os.WNOHANG)
        if not done:
            return
        self.child = None
        info = self.engine.info
        elapsed = time.monotonic() - info.aof_rewrite_started_s
        info.aof_last_rewrite_time_sec = int(elapsed)
        self.engine.histograms.observe("aof_rewrite_seconds", elapsed, LONG_SECONDS)
        if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
            info.aof_rewrites += 1
            info.aof_rewrites_consecutive_failures = 0
            self._finished(child)
        else:
            info.aof_rewrites_consecutive_failures += 1
            self.engine.info.aof_last_bgrewrite_status = "err"
            log.warning("Background AOF rewrite failed (status %d)", status)
            if self.aof.enabling:
                self.scheduled = True  # appendonly yes still needs its base
        self.on_change()

    def _finished(self, child: Rewrite) -> None:
        aof = self.aof
        manifest = self._install(child)
        self.engine.info.aof_last_bgrewrite_status = "ok"
        log.warning("Background AOF rewrite finished successfully")
        if aof.writer is not None:
            aof.manifest = manifest
        if aof.finish_enabling():
            log.warning("Append only file enabled: base written, logging to %s", child.incr_name)
            if aof.wake is not None:
                aof.wake(aof.on_durable)  # the writes made meanwhile are durable now

    def _install(self, child: Rewrite) -> Manifest:
        """The manifest names the child's base (and its incr); the files it replaces go."""
        aof = self.aof
        old = aof.manifest_on_disk().entries
        entries = [ManifestEntry(child.base_name, child.seq, "b")]
        if child.incr_name is not None:
            entries.append(ManifestEntry(child.incr_name, child.seq, "i"))
        manifest = Manifest(entries)
        write_manifest(aof.manifest_path, manifest)
        kept = {entry.name for entry in entries}
        for entry in old:
            if entry.name not in kept:
                (aof.dir / entry.name).unlink(missing_ok=True)
        aof.base_size = (aof.dir / child.base_name).stat().st_size
        return manifest

    def maybe_auto(self) -> None:
        """auto-aof-rewrite-percentage / -min-size, as Redis: when the incremental file has
        grown by that percentage over the base and is at least min-size."""
        writer = self.aof.writer
        percentage = self.config["auto-aof-rewrite-percentage"]
        if writer is None or self.child is not None or not percentage:
            return
        if self.bgsave_running() or writer.error is not None or self.aof.enabling:
            return
        if writer.size < self.config["auto-aof-rewrite-min-size"]:
            return
        if (writer.size * 100) // max(self.aof.base_size, 1) >= percentage:
            log.warning("Starting automatic rewriting of AOF on %d%% growth", percentage)
            self.start()

    def run_scheduled(self) -> None:
        """Start a rewrite that was scheduled behind a BGSAVE (BGREWRITEAOF, or appendonly
        turned on), once no child runs."""
        if not self.scheduled or self.child is not None or self.bgsave_running():
            return
        try:
            self.start()
        except ReplyError as exc:
            log.warning("The scheduled AOF rewrite could not start: %s", exc.msg)
