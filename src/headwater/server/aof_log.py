"""The AOF as the server writes it: its files, its writer, and how far effects are durable.

Each loop turn (``persist``) writes the effects produced so far before any reply that
depends on them is sent, and says up to which effect they are safe (``durable_seq``): the
server holds a client's replies while its last write, or an effect it may have read, is past
that (``may_reply``).

Group commit with ``appendfsync always``: each loop turn writes the effects of every client
it served and syncs them once before their replies leave. While syncs are fast (the last one
under ``SLOW_SYNC_MS``) the ``fdatasync`` runs on the loop thread, as Redis's beforeSleep
does: the hand-off to a worker and back costs two thread wake-ups and the GIL (measured, XADD
with 50 clients: 47-51k rps inline against 39-41k through the worker). On a slow disk the
sync goes to the AOF writer's worker thread instead, so that the event loop goes on reading
and executing commands (readers are not stalled behind the disk); their effects gather in
the buffer. ``persist`` then starts a write + sync only when none is in flight, remembering
the last effect it covers (``sync_covers``); when the sync ends, the worker wakes the loop
(``wake``), ``persist`` advances ``durable_seq`` to what the sync covered and at once writes
and syncs what gathered meanwhile (on the loop thread again if that sync was fast), and
``on_durable`` lets the server send the replies that were waiting. A lone writer's batch is
always synced on the loop thread: it gains nothing from overlap.

Switching on at runtime (``enabling``): the effects go to a file that no manifest names yet,
so none of them is durable until the rewrite's base is in place (``AofRewrite``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from headwater.commands.context import Client
from headwater.config import Config
from headwater.engine import Engine
from headwater.persistence.aof import AofWriter, FileOps
from headwater.persistence.manifest import (
    Manifest,
    ManifestEntry,
    fsync_dir,
    load_manifest,
    write_manifest,
)
from headwater.persistence.snapshot import write_snapshot
from headwater.structures.histogram import BYTES

log = logging.getLogger("headwater")

#: after a failed fdatasync, wait this long before the next attempt (seconds)
SYNC_RETRY_S = 0.05

Wake = Callable[[Callable[[], None]], object]


def next_seq(manifest: Manifest) -> int:
    """The sequence number for new files: above every file the manifest names."""
    return max((entry.seq for entry in manifest.entries), default=0) + 1


#: ``always``: a sync slower than this (ms) sends the next turns' syncs to the worker thread,
#: so that the loop serves other clients meanwhile; a fast one brings them back inline
SLOW_SYNC_MS = 2.0


class AofLog:
    """The AOF directory, the writer of its last incremental file, and the durable mark."""

    def __init__(
        self, config: Config, engine: Engine, data_dir: str, wake: Wake | None, ops: FileOps
    ) -> None:
        self.config = config
        self.engine = engine
        #: runs a callback on the event loop's thread, from any thread (the loop's
        #: ``call_soon_threadsafe``); None outside a server: ``always`` then syncs inline
        self.wake = wake
        self.ops = ops
        #: called on the loop thread when ``durable_seq`` may have moved outside ``persist``'s
        #: callers (a background sync ended, a file was switched): the server sends held replies
        self.on_durable: Callable[[], None] = lambda: None
        self.dir = Path(data_dir) / config["appenddirname"]
        self.manifest_path = self.dir / f"{config['appendfilename']}.manifest"
        self.writer: AofWriter | None = None
        #: the writer's sink in ``engine.effect_sinks`` (None: not logging)
        self.sink: Callable[[int, list[bytes]], None] | None = None
        #: the manifest that names the writer's file (None while ``enabling``)
        self.manifest: Manifest | None = None
        self.base_size = 0
        #: effects up to this engine.effect_seq are safe (see persist)
        self.durable_seq = 0
        #: the size of the AOF file at the end of the last durable effect: a roll-back cuts
        #: the file back to it (always at the end of a complete command)
        self.durable_size = 0
        #: the last effect the background sync in flight covers, and the file size then
        self.sync_covers: tuple[int, int] | None = None
        #: CONFIG SET appendonly yes is waiting for its rewrite (Redis: AOF_WAIT_REWRITE);
        #: ``written_seq`` is how far the file has the effects meanwhile
        self.enabling = False
        self.written_seq = 0
        self.enable_seq = 0
        #: when the AOF write error in progress began (monotonic seconds)
        self.error_since: float | None = None
        #: during a roll-back's reload: the error the new writer keeps until a write works
        self.carried_error: OSError | None = None
        #: a roll-back cut the file and answered its clients; the reload comes next turn
        self.reload_pending = False
        #: (file size, effect_seq) after each write not yet known fsynced, oldest first, and
        #: the last effect known fsynced (WAITAOF: ``fsynced_seq``)
        self._written: deque[tuple[int, int]] = deque()
        self._fsynced_seq = 0
        #: the last writer closed had everything on disk, its manifest naming it (shutdown)
        self.clean_close = False

    # -- files -----------------------------------------------------------------------------

    def incr_name(self, seq: int) -> str:
        return f"{self.config['appendfilename']}.{seq}.incr.aof"

    def base_name(self, seq: int, snapshot: bool | None = None) -> str:
        """A base is a snapshot with ``aof-use-rdb-preamble yes``, else AOF commands."""
        if snapshot is None:
            snapshot = self.config["aof-use-rdb-preamble"]
        return f"{self.config['appendfilename']}.{seq}.base.{'hwsnap' if snapshot else 'aof'}"

    def fresh_manifest(self) -> Manifest:
        """A new log: one empty incremental file, and the data in memory (if any) as base."""
        name = self.incr_name(1)
        manifest = Manifest([ManifestEntry(name, 1, "i")])
        libraries = self.engine.scripting.library_codes()
        if self.engine.keyspace.total_keys() or libraries:
            base = ManifestEntry(self.base_name(1, snapshot=True), 1, "b")
            write_snapshot(self.dir / base.name, self.engine.keyspace.dbs, libraries)
            manifest.entries.insert(0, base)
        (self.dir / name).touch()
        fsync_dir(self.dir)
        write_manifest(self.manifest_path, manifest)
        return manifest

    def attach(self, manifest: Manifest) -> None:
        """Log to the last incremental file ``manifest`` names (after loading it)."""
        self.manifest = manifest
        self._remove_strays(manifest)
        if manifest.base is not None:
            self.base_size = (self.dir / manifest.base.name).stat().st_size
        if not manifest.incrs:  # a base alone (BGREWRITEAOF while the AOF was off)
            self.add_incr(manifest)
        self.start_writer(self.dir / manifest.incrs[-1].name)

    def add_incr(self, manifest: Manifest) -> None:
        seq = next_seq(manifest)
        entry = ManifestEntry(self.incr_name(seq), seq, "i")
        (self.dir / entry.name).touch()
        manifest.entries.append(entry)
        write_manifest(self.manifest_path, manifest)

    def manifest_on_disk(self) -> Manifest:
        if self.manifest is not None and self.writer is not None and not self.enabling:
            return self.manifest
        if not self.manifest_path.exists():
            return Manifest([])
        try:
            return load_manifest(self.manifest_path)
        except (OSError, ValueError) as exc:
            log.warning("Ignoring the unreadable AOF manifest: %s", exc)
            return Manifest([])

    def _remove_strays(self, manifest: Manifest) -> None:
        """Files a crash left behind: a rewrite's base that never made it into the manifest,
        old files it was about to delete, temporary files."""
        named = {entry.name for entry in manifest.entries} | {self.manifest_path.name}
        prefix = self.config["appendfilename"]
        for path in self.dir.iterdir():
            stray = path.name.startswith("temp-") or (
                path.name.startswith(f"{prefix}.") and path.name not in named
            )
            if stray and path.is_file():
                log.warning("Removing %s: left over by an interrupted rewrite", path.name)
                path.unlink(missing_ok=True)

    # -- the writer ------------------------------------------------------------------------

    def _timed(self, event: str, ms: float) -> None:
        """A write's or an fsync's time: LATENCY's event (not everysec's fsync: Redis has
        none), and /metrics' histogram."""
        if event != "aof-fsync":
            self.engine.latency.sample(event, ms)
        name = "aof_write_seconds" if event == "aof-write" else "aof_fsync_seconds"
        self.engine.histograms.observe(name, ms / 1000)

    def _write_size(self, size: int) -> None:
        """The bytes of one write: a loop turn's effects together (group commit)."""
        self.engine.histograms.observe("aof_write_bytes", size, BYTES)

    def start_writer(self, path: Path) -> None:
        notify = None if self.wake is None else functools.partial(self.wake, self._synced)
        self.writer = writer = AofWriter(path, self.config["appendfsync"], notify, self.ops)
        writer.on_latency = self._timed
        writer.on_write = self._write_size
        self.clean_close = False
        self._written.clear()
        # what came before is in files closed (and synced) already, or in the base to come
        self._fsynced_seq = max(self._fsynced_seq, self.engine.effect_seq)
        self.durable_size = writer.size
        if self.carried_error is not None:  # reloading after a roll-back: still failing
            writer.error = self.carried_error
            writer.probe()
        self.detach_sink()
        self.sink = writer.log.append  # (compiled: no frame per effect)
        self.engine.effect_sinks.insert(0, self.sink)  # first: the AOF, then replication

    def detach_sink(self) -> None:
        """Stop logging effects (other sinks, the replication stream's, stay)."""
        sinks = self.engine.effect_sinks
        if self.sink is not None and self.sink in sinks:
            sinks.remove(self.sink)
        self.sink = None

    # -- the named transitions of the log's state (nothing else writes durable_seq,
    # enabling, written_seq or reload_pending) ---------------------------------------------

    def begin_enabling(self, seq: int) -> None:
        """appendonly yes at runtime: effects are written from now, but only the rewrite's
        base makes them durable (Redis's AOF_WAIT_REWRITE)."""
        self.enabling = True
        self.enable_seq = seq
        self.written_seq = self.durable_seq = self.engine.effect_seq

    def finish_enabling(self) -> bool:
        """The base is written: what was written meanwhile is durable. False if the log was
        not enabling."""
        if not self.enabling:
            return False
        self.enabling = False
        self.durable_seq = max(self.durable_seq, self.written_seq)
        return True

    def disabled(self) -> None:
        """appendonly no: no effect waits for this log any more."""
        self.reload_pending, self.carried_error = False, None
        self.enabling = False
        self.manifest = None
        self.durable_seq = self.engine.effect_seq

    def begin_rollback(self, error: OSError) -> None:
        """A write failed for too long: the file was cut back; memory must be loaded again
        (nothing read now may leave until then)."""
        self.carried_error = error
        self.reload_pending = True

    def take_rollback(self) -> tuple[bool, OSError | None]:
        """The reload is due: whether one is still pending, and the error the reload's new
        writer keeps (until ``forget_rollback_error``)."""
        pending, self.reload_pending = self.reload_pending, False
        return pending, self.carried_error

    def forget_rollback_error(self) -> None:
        self.carried_error = None

    def finish_rollback(self) -> None:
        """Memory is what is on disk again: every effect so far is durable."""
        self.durable_seq = self.engine.effect_seq

    def close_writer(self, wake: bool = True) -> None:
        """Write and sync what is left, close the file; the replies waiting for it may go."""
        writer = self.writer
        if writer is None:
            return
        upto = self.engine.effect_seq
        self.clean_close = writer.close() and not self.enabling
        if self.clean_close:
            self.durable_seq = max(self.durable_seq, upto)
        self.sync_covers = None
        self.writer = None
        if wake and self.wake is not None:
            self.wake(self.on_durable)

    def _synced(self) -> None:
        """On the loop thread, after the worker's sync ended."""
        self.on_durable()

    # -- every loop turn -------------------------------------------------------------------

    def persist(self, waiting: int) -> None:
        """Write (and per policy sync) the effects produced so far; see ``Durability``."""
        writer = self.writer
        if writer is None:
            self.durable_seq = self.engine.effect_seq
            return
        writer.fsync_policy = policy = self.config["appendfsync"]
        ended = writer.finish_sync()
        if ended is not None:
            if ended and self.sync_covers is not None:
                self.mark_durable(*self.sync_covers)
            self.sync_covers = None
        upto = self.engine.effect_seq
        if policy == "always" and self.wake is not None:
            self._group_commit(writer, upto, waiting)
        elif writer.flush():
            self.mark_durable(upto, writer.size)
        if policy != "no":  # (with ``no`` nothing is ever known fsynced: nothing to track)
            written = self._written
            if not written or written[-1][1] != upto:
                written.append((writer.size + len(writer.buf), upto))
            self.fsynced_seq()  # (drops what a sync covered: the list stays short)

    def fsynced_seq(self) -> int:
        """The last effect whose bytes an fdatasync has covered (WAITAOF's local count; while
        ``enabling``, or after a roll-back's cut, nothing new is)."""
        writer = self.writer
        if writer is None or self.enabling or self.reload_pending:
            return self._fsynced_seq
        written, synced = self._written, writer.synced_size
        while written and written[0][0] <= synced:
            self._fsynced_seq = max(self._fsynced_seq, written.popleft()[1])
        return self._fsynced_seq

    def mark_durable(self, upto: int, size: int) -> None:
        """Effects up to ``upto`` are safe, and the file ends with them at ``size``; while
        appendonly waits for its first base they are only written (see ``enabling``)."""
        if self.reload_pending:
            return  # memory still holds the dropped effects: nothing read now may leave
        self.durable_size = size
        if self.enabling:
            self.written_seq = max(self.written_seq, upto)
        else:
            self.durable_seq = max(self.durable_seq, upto)

    def _group_commit(self, writer: AofWriter, upto: int, waiting: int) -> None:
        """``always`` in a server: write what gathered and start its sync, unless one is in
        flight (its end calls ``persist`` again)."""
        if writer.syncing:
            return
        failed_sync = writer.error is not None and not writer.buf
        if failed_sync and time.monotonic() - writer.last_fsync < SYNC_RETRY_S:
            return  # retried from the cron or the server's retry timer
        if not writer.write():
            return
        if not writer.unsynced:
            self.mark_durable(upto, writer.size)  # nothing written since the last sync
        elif writer.ops.inline_sync and (waiting <= 1 or writer.last_sync_ms < SLOW_SYNC_MS):
            if writer.sync():
                self.mark_durable(upto, writer.size)
        else:
            self.sync_covers = (upto, writer.size)
            writer.start_sync()

    def may_reply(self, c: Client) -> bool:
        """Whether the client's replies may leave: its writes are durable and so is
        everything it may have read (while the AOF is on: with everysec or no the effects of
        a turn normally reach the kernel before its replies leave, so this holds a reader
        only while the AOF is failing or late; a reader must not see an entry that the
        roll-back after a lasting write error would remove)."""
        durable = self.durable_seq
        if c.effect_seq > durable:
            return False
        return c.seen_seq <= durable or not self.engine.replies_wait_for_disk

    @property
    def syncing(self) -> bool:
        """A background sync is in flight: its end will call ``on_durable``."""
        return self.writer is not None and self.writer.syncing

    @property
    def pending(self) -> bool:
        """Effects not written yet."""
        return self.writer is not None and self.writer.pending
