"""The server's side of durability: load the AOF at startup, write effects each loop turn.

Startup (``open``): with ``appendonly yes``, ``<dir>/<appenddirname>/`` holds a manifest and
the files it names; the base (if any) and then every incremental file are replayed through
the engine, a torn tail of the last file is cut off (``aof-load-truncated``), and effects are
then appended to the last incremental file. Without a manifest a fresh one is created.

Each loop turn (``persist``) writes the effects produced so far before any reply that
depends on them is sent, and says up to which effect they are safe (``durable_seq``): the
server holds a client's replies while its last write, or an effect it may have read, is past
that (``may_reply``). If a write fails, new writes are refused with ``-MISCONF`` and the
replies stay held until a later turn manages to write; if the error lasts
``aof-write-error-timeout`` ms, ``roll_back`` gives the unsaved effects up: the file is cut
back to the last durable command, the data is loaded again from disk, and each held reply
that depended on a dropped effect becomes that ``-MISCONF`` (so nothing acknowledged is lost
and no reader sees what was not acknowledged).

Switching at runtime, as Redis 7: ``CONFIG SET appendonly yes`` opens a new incremental file
and forks the rewrite of its base inside the command (``enabling``: the manifest names them
only once the base is written, so the replies of the writes made meanwhile wait for that);
``appendonly no`` closes the file and kills a rewrite child; ``BGREWRITEAOF`` also works with
the AOF off (a manifest naming a base alone), and is scheduled behind a BGSAVE.

Group commit with ``appendfsync always``: in a server (``wake`` given), the ``fdatasync``
runs in the AOF writer's worker thread while the event loop goes on reading and executing
commands; their effects gather in the buffer. ``persist`` starts a write + sync only when
none is in flight, remembering the last effect it covers (``_sync_covers``); when the sync
ends, the worker wakes the loop (``wake``), ``persist`` advances ``durable_seq`` to what the
sync covered and at once writes and syncs what gathered meanwhile, and ``on_durable`` lets
the server send the replies that were waiting. A batch that holds the writes of a single
client is synced at once on the loop thread instead: one lone writer gains nothing from
overlap, and the hand-off to the worker and back costs two thread wake-ups per request.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import logging
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from headwater.commands.context import Client
from headwater.config import Config, InvalidConfig
from headwater.engine import Engine
from headwater.engine.replay import FailedCommand, Replayer
from headwater.errors import ReplyError, err, wrong_arity
from headwater.persistence.aof import AofWriter
from headwater.persistence.manifest import (
    Manifest,
    ManifestEntry,
    fsync_dir,
    load_manifest,
    write_manifest,
)
from headwater.persistence.rewrite import write_base
from headwater.persistence.snapshot import (
    SnapshotError,
    load_snapshot,
    materialize_some,
    write_snapshot,
)
from headwater.resp.types import OK, Reply, Status
from headwater.stream.node import Node

log = logging.getLogger("headwater")


BGSAVE_MISCONF = ReplyError(
    "MISCONF",
    "Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. "
    "Commands that may modify the data set are disabled, because this instance is configured "
    "to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error "
    "option). Please check the Redis logs for details about the RDB error.",
)


#: share of a core the cron spends materializing lazily loaded nodes
MATERIALIZE_SHARE = 0.05
#: after a failed fdatasync, wait this long before the next attempt (seconds)
SYNC_RETRY_S = 0.05


REWRITE_FAILED = (
    "Can't execute an AOF background rewriting. Please check the server logs for more information."
)


def aof_misconf(error: OSError) -> ReplyError:
    reason = os.strerror(error.errno) if error.errno is not None else str(error)
    return ReplyError("MISCONF", f"Errors writing to the AOF file: {reason}")


def next_seq(manifest: Manifest) -> int:
    """The sequence number for new files: above every file the manifest names."""
    return max((entry.seq for entry in manifest.entries), default=0) + 1


def answer_dropped(engine: Engine, kept: int, error: ReplyError) -> int:
    """After a roll-back that kept the effects up to ``kept``: every client whose waiting
    replies may depend on a dropped effect (its write, or a read that may have seen one) gets
    ``error`` in place of each reply, so that a pipeline stays in step (pushes, which answer
    nothing, are dropped). Returns how many clients that was."""
    encoded = b"-%s\r\n" % error.line()
    failed = 0
    for client in list(engine.clients.values()):
        if client.effect_seq <= kept and client.seen_seq <= kept:
            continue
        client.effect_seq = client.seen_seq = 0
        if not client.out:
            continue
        try:
            replies = count_replies(b"".join(client.out))
        except (ValueError, IndexError):  # (not RESP: cannot happen, but never crash here)
            replies = 1
        client.out[:] = [encoded * replies]
        engine.pending[client] = None
        failed += 1
    return failed


def count_replies(data: bytes) -> int:
    """The replies (RESP2 or RESP3 frames other than pushes) that ``data`` holds."""
    count = pos = 0
    while pos < len(data):
        push = data[pos] == ord(">")
        pos = _frame_end(data, pos)
        count += not push
    return count


def _frame_end(data: bytes, pos: int) -> int:
    """Where the RESP frame that starts at ``pos`` ends."""
    kind = data[pos : pos + 1]
    line_end = data.index(b"\r\n", pos)
    after = line_end + 2
    if kind in (b"$", b"!", b"="):
        size = int(data[pos + 1 : line_end])
        return after if size < 0 else after + size + 2
    if kind in (b"*", b"~", b">", b"%", b"|"):
        items = int(data[pos + 1 : line_end])
        items *= 2 if kind in (b"%", b"|") else 1
        for _ in range(max(items, 0)):
            after = _frame_end(data, after)
        return _frame_end(data, after) if kind == b"|" else after  # an attribute leads a reply
    return after  # a one-line frame: + - : _ , # (


class StartupError(Exception):
    """The data on disk cannot be loaded: the server must not start (and not overwrite it)."""


@dataclass
class Rewrite:
    """A rewrite child at work: it writes ``base_name``; the new manifest will name that base
    and ``incr_name`` (None when the AOF is off: the base alone, as Redis)."""

    pid: int
    seq: int
    base_name: str
    incr_name: str | None


class Durability:
    def __init__(
        self,
        config: Config,
        engine: Engine,
        data_dir: str,
        wake: Callable[[Callable[[], None]], object] | None = None,
    ) -> None:
        self.config = config
        self.engine = engine
        #: runs a callback on the event loop's thread, from any thread (the loop's
        #: ``call_soon_threadsafe``); None outside a server: ``always`` then syncs inline
        self.wake = wake
        #: called on the loop thread when ``durable_seq`` may have moved outside ``persist``'s
        #: callers (a background sync ended, a file was switched): the server sends held replies
        self.on_durable: Callable[[], None] = self.persist
        self.dir = Path(data_dir) / config["appenddirname"]
        self.manifest_path = self.dir / f"{config['appendfilename']}.manifest"
        self.writer: AofWriter | None = None
        #: effects up to this engine.effect_seq are safe (see persist)
        self.durable_seq = 0
        #: the size of the AOF file at the end of the last durable effect: a roll-back cuts
        #: the file back to it (always at the end of a complete command)
        self.durable_size = 0
        #: the last effect the background sync in flight covers, and the file size then
        self._sync_covers: tuple[int, int] | None = None
        #: CONFIG SET appendonly yes is waiting for its rewrite (Redis: AOF_WAIT_REWRITE): the
        #: effects go to a file no manifest names yet, so none of them is durable until the
        #: child's base is in place; ``_written_seq`` is how far the file has them meanwhile
        self.enabling = False
        self._written_seq = 0
        self._enable_seq = 0
        #: when the AOF write error in progress began (monotonic seconds)
        self.error_since: float | None = None
        #: during a roll-back's reload: the error (and DEBUG's injected errno) the new writer
        #: keeps until a write works
        self._carried_error: tuple[OSError, int | None] | None = None
        #: a roll-back cut the file and answered its clients; the reload comes next turn
        self._reload_pending = False
        self.manifest: Manifest | None = None
        self.base_size = 0
        self.rewrite_child: Rewrite | None = None
        #: BGREWRITEAOF (or appendonly yes) while a BGSAVE runs: the cron starts it later
        self.rewrite_scheduled = False
        #: (pid, dirty counter at the fork) while a BGSAVE child runs
        self.bgsave_child: tuple[int, int] | None = None
        self.bgsave_scheduled = False
        self.last_save_attempt = 0.0
        #: stream nodes loaded lazily whose buffers may still be in a snapshot's private copy
        self._lazy_nodes: list[Node] = []
        self.data_dir = data_dir
        engine.hooks[b"SAVE"] = self._save_command
        engine.hooks[b"BGSAVE"] = self._bgsave_command
        engine.hooks[b"DEBUG RELOAD"] = self._debug_reload
        engine.hooks[b"DEBUG AOF-WRITE-ERROR"] = self._debug_write_error
        engine.hooks[b"DEBUG AOF-FSYNC-HOLD"] = self._debug_fsync_hold
        engine.hooks[b"DEBUG LOADAOF"] = self._debug_loadaof
        engine.hooks[b"BGREWRITEAOF"] = self._bgrewriteaof
        config.listeners.append(self._config_changed)

    # -- startup ---------------------------------------------------------------------------

    def open(self, reset_stats: bool = True) -> None:
        if not self.config["appendonly"]:
            self._load_snapshot_file()
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        if self.manifest_path.exists():
            manifest = self._load(reset_stats)
        else:
            # Switching a snapshot-only setup to the AOF: start from the snapshot (Redis
            # would start empty), and make it the base of the new log.
            self._load_snapshot_file()
            manifest = self._fresh_manifest()
        self.manifest = manifest
        self._remove_strays(manifest)
        if manifest.base is not None:
            self.base_size = (self.dir / manifest.base.name).stat().st_size
        if not manifest.incrs:  # a base alone (BGREWRITEAOF while the AOF was off)
            self._add_incr(manifest)
        incr = manifest.incrs[-1]
        self._start_writer(self.dir / incr.name)
        self._publish()

    def _start_writer(self, path: Path) -> None:
        self.writer = self._new_writer(path)
        self.durable_size = self.writer.size
        if self._carried_error is not None:  # reloading after a roll-back: still failing
            self.writer.error, self.writer.injected_errno = self._carried_error
            self.writer.probe()
        self.engine.effect_sinks[:] = [self.writer.append]

    def _add_incr(self, manifest: Manifest) -> None:
        seq = next_seq(manifest)
        entry = ManifestEntry(self._incr_name(seq), seq, "i")
        (self.dir / entry.name).touch()
        manifest.entries.append(entry)
        write_manifest(self.manifest_path, manifest)

    def _new_writer(self, path: Path) -> AofWriter:
        notify = None if self.wake is None else functools.partial(self.wake, self._synced)
        return AofWriter(path, self.config["appendfsync"], notify)

    def _close_writer(self, wake: bool = True) -> None:
        """Write and sync what is left, close the file; the replies waiting for it may go."""
        writer = self.writer
        if writer is None:
            return
        upto = self.engine.effect_seq
        if writer.close():
            self.durable_seq = max(self.durable_seq, upto)
        self._sync_covers = None
        self.writer = None
        if wake and self.wake is not None:
            self.wake(self.on_durable)

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

    def _incr_name(self, seq: int) -> str:
        return f"{self.config['appendfilename']}.{seq}.incr.aof"

    def _base_name(self, seq: int, snapshot: bool | None = None) -> str:
        """A base is a snapshot with ``aof-use-rdb-preamble yes``, else AOF commands."""
        if snapshot is None:
            snapshot = self.config["aof-use-rdb-preamble"]
        return f"{self.config['appendfilename']}.{seq}.base.{'hwsnap' if snapshot else 'aof'}"

    def _fresh_manifest(self) -> Manifest:
        name = self._incr_name(1)
        manifest = Manifest([ManifestEntry(name, 1, "i")])
        if self.engine.keyspace.total_keys():
            base = ManifestEntry(self._base_name(1, snapshot=True), 1, "b")
            write_snapshot(self.dir / base.name, self.engine.keyspace.dbs)
            manifest.entries.insert(0, base)
        (self.dir / name).touch()
        fsync_dir(self.dir)
        write_manifest(self.manifest_path, manifest)
        return manifest

    def _load(self, reset_stats: bool = True) -> Manifest:
        try:
            manifest = load_manifest(self.manifest_path)
        except (OSError, ValueError) as exc:
            raise StartupError(f"Bad AOF manifest: {exc}") from None
        if not manifest.base and not manifest.incrs:
            raise StartupError(f"{self.manifest_path}: no AOF file is named")
        files = ([manifest.base] if manifest.base else []) + manifest.incrs
        replayer = Replayer(self.engine)
        loaded = 0
        try:
            for n, entry in enumerate(files):
                path = self.dir / entry.name
                if entry.kind == "b" and not entry.name.endswith(".aof"):
                    loaded += self._load_snapshot(path)
                    continue
                last = n == len(files) - 1
                result = replayer.replay(path, last and self.config["aof-load-truncated"])
                loaded += result.commands
        except FailedCommand as exc:
            raise StartupError(
                f"{exc}. Loading stops: starting without this command and what depends on it "
                f"would silently lose data. Keep a copy of the AOF directory and report this."
            ) from None
        except Exception as exc:
            if isinstance(exc, StartupError):
                raise
            offset = getattr(exc, "offset", None)
            where = f" (offset {offset})" if offset is not None else ""
            raise StartupError(
                f"Bad file format reading the append only file {exc}{where}. Make a backup of "
                f"your AOF file, then use: headwater check-aof --fix <filename>"
            ) from None
        finally:
            replayer.close()
        if reset_stats:
            self.engine.stats.reset()
        # Changes since the last save restart from what was loaded (Redis: dirty = 0 after a
        # load); both counters, so that their difference never goes negative.
        self.engine.dirty = self.engine.dirty_at_last_save = 0
        log.warning("DB loaded from append only file: %d commands", loaded)
        return manifest

    def _load_snapshot_file(self) -> None:
        path = self.snapshot_path
        if path.exists():
            keys = self._load_snapshot(path)
            log.warning("DB loaded from snapshot %s: %d keys", path, keys)

    def _load_snapshot(self, path: Path) -> int:
        try:
            keys = load_snapshot(path, self.engine.keyspace.dbs, self._lazy_nodes)
        except (SnapshotError, OSError) as exc:
            raise StartupError(
                f"Cannot load snapshot {path}: {exc}. Check it with: headwater check-snapshot "
                f"{path}"
            ) from None
        self.engine.info.last_snapshot_keys = keys
        self.engine.info.snapshot_lazy_nodes = len(self._lazy_nodes)
        return keys

    def materialize_loaded(self) -> None:
        """From the cron: copy lazily loaded stream nodes out of their snapshot, using at most
        ~5% of a core, until none is left (a 5M-entry snapshot takes a few seconds)."""
        if self._lazy_nodes:
            materialize_some(self._lazy_nodes, MATERIALIZE_SHARE / max(1, self.config["hz"]))
            self.engine.info.snapshot_lazy_nodes = len(self._lazy_nodes)

    # -- snapshots (SAVE, BGSAVE, the save schedule, shutdown) -----------------------------

    @property
    def snapshot_path(self) -> Path:
        name: str = self.config["dbfilename"]
        return Path(self.data_dir) / name

    def save(self) -> None:
        """SAVE: in the foreground."""
        if self.bgsave_child is not None:
            raise err("Background save already in progress")
        dirty = self.engine.dirty
        try:
            write_snapshot(self.snapshot_path, self.engine.keyspace.dbs)
        except OSError as exc:
            self._saved(ok=False, dirty=dirty)
            raise err(f"Error saving DB on disk: {exc.strerror or exc}") from None
        self._saved(ok=True, dirty=dirty)

    def start_bgsave(self) -> None:
        if self.bgsave_child is not None:
            raise err("Background save already in progress")
        dirty = self.engine.dirty
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                write_snapshot(self.snapshot_path, self.engine.keyspace.dbs)
                code = 0
            finally:
                os._exit(code)
        self.bgsave_child = (pid, dirty)
        self.engine.info.rdb_bgsave_in_progress = True
        log.warning("Background saving started by pid %d", pid)

    def check_bgsave(self) -> None:
        if self.bgsave_child is None:
            return
        pid, dirty = self.bgsave_child
        done, status = os.waitpid(pid, os.WNOHANG)
        if not done:
            return
        self.bgsave_child = None
        self.engine.info.rdb_bgsave_in_progress = False
        ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        self._saved(ok=ok, dirty=dirty)
        log.warning("Background saving %s", "terminated with success" if ok else "failed")

    def _saved(self, ok: bool, dirty: int) -> None:
        engine = self.engine
        engine.info.rdb_last_bgsave_status = "ok" if ok else "err"
        self.last_save_attempt = time.time()
        if ok:
            engine.dirty_at_last_save = dirty
            engine.last_save_time = int(time.time())
        self._publish()

    def maybe_scheduled_save(self) -> None:
        """BGSAVE SCHEDULE, and the ``save <seconds> <changes>`` rules (from the cron); after
        a failure, retry no sooner than 5 s later, as Redis."""
        if self.bgsave_child is not None or self.rewrite_child is not None:
            return
        if self.bgsave_scheduled:
            self.bgsave_scheduled = False
            self.start_bgsave()
            return
        engine = self.engine
        changes = engine.dirty - engine.dirty_at_last_save
        now = time.time()
        if engine.info.rdb_last_bgsave_status != "ok" and now - self.last_save_attempt < 5:
            return
        for seconds, needed in self.config["save"]:
            if changes >= needed and now - engine.last_save_time >= seconds:
                log.warning("%d changes in %d seconds. Saving...", needed, seconds)
                self.start_bgsave()
                return

    def shutdown(self, save: bool | None) -> None:
        """Stopping: sync the AOF, and save a snapshot if asked or if save rules exist."""
        if self.bgsave_child is not None:
            with contextlib.suppress(OSError):
                os.kill(self.bgsave_child[0], signal.SIGKILL)
                os.waitpid(self.bgsave_child[0], 0)
        self.bgsave_child = None
        self._kill_rewrite()
        if save or (save is None and self.config["save"]):
            try:
                write_snapshot(self.snapshot_path, self.engine.keyspace.dbs)
                log.warning("DB saved on disk")
            except OSError as exc:
                log.warning("Error saving DB on disk: %s", exc)
        self.close()

    # -- every loop turn -------------------------------------------------------------------

    def persist(self, waiting: int = 0) -> None:
        """Write (and per policy sync) the effects produced so far. ``durable_seq`` then says
        up to which effect they are safe: on disk with ``always``, in the kernel otherwise
        (which survives the death of the process). With ``always`` in a server the sync may
        still run when this returns (see the module docstring), unless at most one client
        is ``waiting`` for it; a write held back behind everysec's fsync, or failing, leaves
        ``durable_seq`` where it was. A failure that lasts ``aof-write-error-timeout`` ends
        in a roll-back (``roll_back``)."""
        writer = self.writer
        if writer is None:
            self.durable_seq = self.engine.effect_seq
            self._publish()
            return
        writer.fsync_policy = policy = self.config["appendfsync"]
        ended = writer.finish_sync()
        if ended is not None:
            if ended and self._sync_covers is not None:
                self._mark_durable(*self._sync_covers)
            self._sync_covers = None
        upto = self.engine.effect_seq
        if policy == "always" and self.wake is not None:
            self._group_commit(writer, upto, waiting)
        elif writer.flush():
            self._mark_durable(upto, writer.size)
        self._publish()
        if self._roll_back_due(writer):
            self.roll_back()

    def _mark_durable(self, upto: int, size: int) -> None:
        """Effects up to ``upto`` are safe, and the file ends with them at ``size``; while
        appendonly waits for its first base they are only written (see ``enabling``)."""
        if self._reload_pending:
            return  # memory still holds the dropped effects: nothing read now may leave
        self.durable_size = size
        if self.enabling:
            self._written_seq = max(self._written_seq, upto)
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
            self._mark_durable(upto, writer.size)  # nothing written since the last sync
        elif waiting <= 1 and not writer.holding:
            if writer.sync():
                self._mark_durable(upto, writer.size)
        else:
            self._sync_covers = (upto, writer.size)
            writer.start_sync()

    def _synced(self) -> None:
        """On the loop thread, after the worker's sync ended."""
        self.on_durable()

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

    def _publish(self) -> None:
        writer = self.writer
        info = self.engine.info
        error = writer.error if writer is not None else None
        info.aof_enabled = writer is not None
        self.engine.replies_wait_for_disk = writer is not None
        status = "err" if error else "ok"
        if status != info.aof_last_write_status:
            if error is not None:
                log.warning(
                    "Error writing to the AOF file: %s (writes refused until it works)", error
                )
            else:
                log.warning("AOF write error solved: the AOF file can be written again")
        if error is None:
            self.error_since = None
        elif self.error_since is None:
            self.error_since = time.monotonic()
        info.aof_last_write_status = status
        info.aof_current_size = writer.size if writer is not None else 0
        info.aof_buffer_length = len(writer.buf) if writer is not None else 0
        info.aof_rewrite_in_progress = self.rewrite_child is not None
        info.aof_rewrite_scheduled = self.rewrite_scheduled
        self.engine.refuse_writes = self._refusal(error)

    def _refusal(self, error: OSError | None) -> ReplyError | None:
        info = self.engine.info
        if error is not None and error.errno is not None:
            return aof_misconf(error)
        if (
            info.rdb_last_bgsave_status == "err"
            and self.config["stop-writes-on-bgsave-error"]
            and self.config["save"]
        ):
            return BGSAVE_MISCONF
        return None

    # -- a write error that lasts: give up the effects not on disk -------------------------

    def _roll_back_due(self, writer: AofWriter) -> bool:
        """The write error has lasted ``aof-write-error-timeout`` and something is not yet
        durable. (Not while appendonly waits for its first base: no manifest names the file
        yet, so there is nothing on disk to go back to; the writes wait instead.)"""
        if writer.error is None or self.error_since is None or self.enabling:
            return False
        if self._reload_pending:
            return False
        waited_ms = (time.monotonic() - self.error_since) * 1000
        if waited_ms < self.config["aof-write-error-timeout"]:
            return False
        # (the buffer alone is no reason: after a roll-back it holds the probe)
        return self.engine.effect_seq > self.durable_seq or writer.size != self.durable_size

    def roll_back(self) -> None:
        """Memory goes back to what is durable, in two steps. Now: the file is cut to the end
        of the last durable effect, the unwritten ones are dropped, and every client whose
        waiting replies depended on a dropped effect gets -MISCONF in place of each of them
        (they leave this turn, whatever the size of the data). Next turn
        (``_finish_roll_back``): the data is loaded again from disk (as DEBUG LOADAOF);
        replies that read the dropped effects meanwhile wait for it and fail the same way.
        Writes stay refused until a write to the file works again (``AofWriter.probe``)."""
        writer = self.writer
        if writer is None or writer.error is None or self._reload_pending:
            return
        error = writer.error
        kept = self.durable_seq
        log.warning(
            "AOF write error for %d ms (%s): dropping the %d effects not on disk, cutting %s "
            "back to %d bytes",
            int((time.monotonic() - (self.error_since or 0.0)) * 1000),
            error,
            self.engine.effect_seq - kept,
            writer.path.name,
            self.durable_size,
        )
        if self.rewrite_child is not None:  # its base may hold the dropped effects
            log.warning("Killing the AOF rewrite child: it started from the dropped data")
            self._kill_rewrite()
            self.engine.info.aof_last_bgrewrite_status = "err"
        writer.roll_back(self.durable_size)
        self._carried_error = (error, writer.injected_errno)
        self._reload_pending = True
        refusal = aof_misconf(error)
        failed = answer_dropped(self.engine, kept, refusal)
        log.warning("Answered -%s to %d clients; loading the data again", refusal.code, failed)
        if self.wake is None:
            self._finish_roll_back()
            return
        self.wake(self.on_durable)  # the server sends the replies just replaced, then:
        self.wake(self._finish_roll_back)

    def _finish_roll_back(self) -> None:
        carried, self._carried_error = self._carried_error, None
        pending, self._reload_pending = self._reload_pending, False
        if not pending or carried is None or self.writer is None:
            return  # the AOF was closed meanwhile (shutdown, appendonly no)
        kept = self.durable_seq
        self._carried_error = carried
        try:
            self._reload()
        finally:
            self._carried_error = None
        log.warning("Data loaded again from the AOF: memory is what is on disk")
        answer_dropped(self.engine, kept, aof_misconf(carried[0]))
        self.durable_seq = self.engine.effect_seq
        self.error_since = time.monotonic()  # (a later roll-back, if any, a timeout later)
        self._publish()
        if self.wake is not None:
            self.wake(self.on_durable)

    def _reload(self) -> None:
        """Empty every database and load the AOF again (DEBUG LOADAOF, a roll-back)."""
        self._close_writer(wake=False)
        self.engine.effect_sinks.clear()
        for db in self.engine.keyspace.dbs:
            db.flush()
        self._lazy_nodes.clear()  # (nodes of the keys just flushed)
        self.engine.info.snapshot_lazy_nodes = 0
        self.open(reset_stats=False)

    # -- rewrite (BGREWRITEAOF, automatic, appendonly turned on) ---------------------------

    def start_rewrite(self) -> None:
        """Start a background rewrite: a forked child writes a new base from its copy of the
        data. With the AOF on, new effects go to a new incremental file meanwhile, and the
        manifest names a loadable set at every moment: first old base + old incrs + the new
        incr, then (when the child has finished) the new base + the new incr. With the AOF
        off (BGREWRITEAOF, as Redis) the new manifest will name the new base alone."""
        if self.rewrite_child is not None:
            raise err("Background append only file rewriting already in progress")
        self.rewrite_scheduled = False
        writer = self.writer
        if writer is not None and writer.error is not None:
            # the unwritten effects must stay in the file they continue (a torn command
            # may end it): a new incremental file waits until they are written
            log.warning("Can't rewrite the AOF while it cannot be written: %s", writer.error)
            raise err(REWRITE_FAILED)
        self.dir.mkdir(parents=True, exist_ok=True)
        on_disk = self._manifest_on_disk()
        seq = next_seq(on_disk)
        incr_name: str | None = None
        if writer is not None and not self.enabling:
            incr_name = self._incr_name(seq)
            self._close_writer()
            (self.dir / incr_name).touch()
            on_disk.entries.append(ManifestEntry(incr_name, seq, "i"))
            write_manifest(self.manifest_path, on_disk)
            self.manifest = on_disk
            self._start_writer(self.dir / incr_name)
        elif writer is not None:  # appendonly yes, waiting: the incr its writer fills
            incr_name = writer.path.name
            seq = self._enable_seq
        self._fork_rewrite(seq, incr_name)

    def _manifest_on_disk(self) -> Manifest:
        if self.manifest is not None and self.writer is not None and not self.enabling:
            return self.manifest
        if not self.manifest_path.exists():
            return Manifest([])
        try:
            return load_manifest(self.manifest_path)
        except (OSError, ValueError) as exc:
            log.warning("Ignoring the unreadable AOF manifest: %s", exc)
            return Manifest([])

    def _fork_rewrite(self, seq: int, incr_name: str | None) -> None:
        base_name = self._base_name(seq)
        pid = os.fork()
        if pid == 0:  # the child: write the base and leave without running any cleanup
            code = 1
            try:
                self._write_base(self.dir / base_name)
                code = 0
            finally:
                os._exit(code)
        self.rewrite_child = Rewrite(pid, seq, base_name, incr_name)
        self._publish()
        log.warning("Background append only file rewriting started by pid %d", pid)

    def _write_base(self, path: Path) -> None:
        if path.suffix == ".hwsnap":
            write_snapshot(path, self.engine.keyspace.dbs)
        else:
            write_base(path, self.engine.keyspace.dbs)

    def _kill_rewrite(self) -> None:
        """Stop the rewrite child and remove what it was writing (Redis: killAppendOnlyChild)."""
        child = self.rewrite_child
        if child is None:
            return
        with contextlib.suppress(OSError):
            os.kill(child.pid, signal.SIGKILL)
            os.waitpid(child.pid, 0)
        self.rewrite_child = None
        for path in self.dir.glob(f"temp-*{child.base_name}"):
            path.unlink(missing_ok=True)
        (self.dir / child.base_name).unlink(missing_ok=True)
        log.warning("Killed the AOF rewrite child %d", child.pid)
        self._publish()

    def check_rewrite(self) -> None:
        """From the cron: has the child finished? Then switch the manifest to its base."""
        child = self.rewrite_child
        if child is None:
            return
        done, status = os.waitpid(child.pid, os.WNOHANG)
        if not done:
            return
        self.rewrite_child = None
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            self.engine.info.aof_last_bgrewrite_status = "err"
            log.warning("Background AOF rewrite failed (status %d)", status)
            if self.enabling:
                self.rewrite_scheduled = True  # appendonly yes still needs its base
            self._publish()
            return
        old = self._manifest_on_disk().entries
        entries = [ManifestEntry(child.base_name, child.seq, "b")]
        if child.incr_name is not None:
            entries.append(ManifestEntry(child.incr_name, child.seq, "i"))
        manifest = Manifest(entries)
        write_manifest(self.manifest_path, manifest)
        kept = {entry.name for entry in entries}
        for entry in old:
            if entry.name not in kept:
                (self.dir / entry.name).unlink(missing_ok=True)
        self.base_size = (self.dir / child.base_name).stat().st_size
        self.engine.info.aof_last_bgrewrite_status = "ok"
        log.warning("Background AOF rewrite finished successfully")
        if self.writer is not None:
            self.manifest = manifest
        if self.enabling:
            self.enabling = False
            self.durable_seq = max(self.durable_seq, self._written_seq)
            log.warning("Append only file enabled: base written, logging to %s", child.incr_name)
            if self.wake is not None:
                self.wake(self.on_durable)  # the writes made meanwhile are durable now
        self._publish()

    def maybe_auto_rewrite(self) -> None:
        """auto-aof-rewrite-percentage / -min-size, as Redis: when the incremental file has
        grown by that percentage over the base and is at least min-size."""
        writer = self.writer
        percentage = self.config["auto-aof-rewrite-percentage"]
        if writer is None or self.rewrite_child is not None or not percentage:
            return
        if self.bgsave_child is not None or writer.error is not None or self.enabling:
            return
        if writer.size < self.config["auto-aof-rewrite-min-size"]:
            return
        base = max(self.base_size, 1)
        if (writer.size * 100) // base >= percentage:
            log.warning("Starting automatic rewriting of AOF on %d%% growth", percentage)
            self.start_rewrite()

    def follow_config(self) -> None:
        """From the cron: start a rewrite that was scheduled behind a BGSAVE (BGREWRITEAOF,
        or appendonly turned on), once no child runs."""
        if not self.rewrite_scheduled or self.rewrite_child is not None:
            return
        if self.bgsave_child is not None:
            return
        try:
            self.start_rewrite()
        except ReplyError as exc:
            log.warning("The scheduled AOF rewrite could not start: %s", exc.msg)

    def _config_changed(self, name: str, value: Any) -> None:
        """CONFIG SET appendonly, inside the command as in Redis (config.c updateAppendonly)."""
        if name != "appendonly" or bool(value) == (self.writer is not None):
            return
        if value:
            try:
                self.start_aof()
            except (OSError, ReplyError) as exc:
                log.warning("Redis needs to enable the AOF but can't: %s", exc)
                if self.writer is not None:
                    self.stop_aof()
                self.config.values["appendonly"] = False
                raise InvalidConfig(name, "Unable to turn on AOF. Check server logs.") from None
        else:
            self.stop_aof()

    def start_aof(self) -> None:
        """appendonly yes at runtime (Redis: startAppendOnly): effects go at once to a new
        incremental file, and a rewrite child writes the base that goes with it (scheduled if
        a BGSAVE runs; a rewrite started while the AOF was off is replaced). Until the new
        manifest names both, nothing written is durable: those replies wait."""
        if self.rewrite_child is not None:
            log.warning(
                "AOF was enabled but there is already an AOF rewriting in background. "
                "Stopping background AOF and starting a rewrite now."
            )
            self._kill_rewrite()
        self.dir.mkdir(parents=True, exist_ok=True)
        seq = next_seq(self._manifest_on_disk())
        path = self.dir / self._incr_name(seq)
        path.unlink(missing_ok=True)  # (a stray of an earlier attempt)
        self.enabling = True
        self._enable_seq = seq
        self._written_seq = self.durable_seq = self.engine.effect_seq
        self._start_writer(path)
        self.manifest = None
        if self.bgsave_child is not None:
            self.rewrite_scheduled = True
            log.warning(
                "AOF was enabled but there is already another background operation. An AOF "
                "background was scheduled to start when possible."
            )
        else:
            self._fork_rewrite(seq, path.name)
        self._publish()

    def stop_aof(self) -> None:
        """appendonly no at runtime (Redis: stopAppendOnly): write and sync what is left,
        close the file, and stop a rewrite child."""
        self._kill_rewrite()
        self.rewrite_scheduled = False
        self._reload_pending, self._carried_error = False, None  # (no reload without AOF)
        writer = self.writer
        self._close_writer()
        self.engine.effect_sinks.clear()
        if self.enabling and writer is not None:  # no manifest names its file
            writer.path.unlink(missing_ok=True)
        self.enabling = False
        self.manifest = None
        self.durable_seq = self.engine.effect_seq
        self._publish()
        log.warning("Append only file disabled")

    # -- command hooks ---------------------------------------------------------------------

    def _save_command(self, args: list[bytes]) -> Reply:
        self.save()
        return OK

    def _bgsave_command(self, args: list[bytes]) -> Reply:
        if len(args) > 1 or (args and args[0].upper() != b"SCHEDULE"):
            raise err("syntax error")
        if args and self.rewrite_child is not None:
            self.bgsave_scheduled = True  # started by the cron once the rewrite is done
            return Status(b"Background saving scheduled")
        if self.rewrite_child is not None:
            raise err(
                "Background append only file rewriting in progress, use BGSAVE SCHEDULE in "
                "order to schedule a BGSAVE whenever possible."
            )
        self.start_bgsave()
        return Status(b"Background saving started")

    def _debug_reload(self, args: list[bytes]) -> Reply:
        """Save a snapshot, empty the data, and load the snapshot back."""
        self.save()
        for db in self.engine.keyspace.dbs:
            db.flush()
        self._lazy_nodes.clear()  # (nodes of the keys just flushed)
        self.engine.info.snapshot_lazy_nodes = 0
        try:
            self._load_snapshot(self.snapshot_path)
        except StartupError as exc:  # a read error, or the file changed since the save
            log.warning("DEBUG RELOAD: %s", exc)
            raise err("Error trying to load the RDB dump, check server logs.") from None
        return OK

    def _bgrewriteaof(self, args: list[bytes]) -> Reply:
        """As Redis 7 (bgrewriteaofCommand): also with the AOF off (a base alone), and
        scheduled behind a BGSAVE."""
        if self.rewrite_child is not None:
            raise err("Background append only file rewriting already in progress")
        if self.bgsave_child is not None:
            self.rewrite_scheduled = True
            self._publish()
            return Status(b"Background append only file rewriting scheduled")
        self.start_rewrite()
        return Status(b"Background append only file rewriting started")

    def _debug_write_error(self, args: list[bytes]) -> Reply:
        if len(args) != 1 or self.writer is None:
            raise err("usage: DEBUG AOF-WRITE-ERROR <errno name|OFF> (needs appendonly yes)")
        name = args[0].decode("ascii", "replace").upper()
        if name == "OFF":
            self.writer.injected_errno = None
        elif isinstance(getattr(errno, name, None), int):
            self.writer.injected_errno = getattr(errno, name)
        else:
            raise err(f"unknown errno name '{name}'")
        return OK

    def _debug_fsync_hold(self, args: list[bytes]) -> Reply:
        """DEBUG AOF-FSYNC-HOLD ON|OFF: background fdatasyncs wait until OFF (tests: a
        reply must not leave before its sync, and the loop must go on meanwhile)."""
        choice = args[0].upper() if len(args) == 1 else b""
        if choice not in (b"ON", b"OFF") or self.writer is None:
            raise err("usage: DEBUG AOF-FSYNC-HOLD <ON|OFF> (needs appendonly yes)")
        self.writer.hold_syncs(choice == b"ON")
        return OK

    def _debug_loadaof(self, args: list[bytes]) -> Reply:
        """Write what is buffered, empty every database, and load the AOF again."""
        if args:
            raise wrong_arity("debug|loadaof")
        if self.writer is None or self.enabling:
            return OK
        self._reload()
        return OK

    @property
    def pending(self) -> bool:
        """Effects not written yet."""
        return self.writer is not None and self.writer.pending

    def close(self) -> None:
        self._close_writer(wake=False)
