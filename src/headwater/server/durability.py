"""The server's durability: wires the persistence parts together, and is what the server
and the persistence commands talk to.

The parts, one job each:

* ``AofLog`` (aof_log.py): the AOF directory and the writer of its last incremental file,
  written each loop turn (``persist``) with the fsync policy (group commit with ``always``),
  and how far effects are durable (``may_reply``);
* ``load_aof`` (aof_load.py): replaying the AOF at startup and for DEBUG LOADAOF;
* ``AofRewrite`` (aof_rewrite.py): BGREWRITEAOF, the automatic rewrite, a rewrite scheduled
  behind a BGSAVE;
* ``RollBack`` (rollback.py): a write error that lasts ``aof-write-error-timeout``;
* ``Snapshots`` (snapshots.py): SAVE, BGSAVE, loading a snapshot, DEBUG RELOAD;
* ``SaveRules`` (save_rules.py): ``save <seconds> <changes>`` and BGSAVE SCHEDULE.

This class opens the data at startup, switches the AOF on and off (``CONFIG SET appendonly``,
inside the command as Redis 7: ``appendonly yes`` opens a new incremental file and forks the
rewrite of its base; the manifest names them only once the base is written, so the replies of
the writes made meanwhile wait for that), publishes the state INFO shows and whether writes
are refused (``-MISCONF``), and answers SAVE, BGSAVE, BGREWRITEAOF and DEBUG RELOAD/LOADAOF
(the ``Persistence`` the command table's rows call: ``engine.persistence``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from headwater.commands.context import Client
from headwater.config import Config, InvalidConfig
from headwater.engine import Engine
from headwater.errors import ReplyError, err
from headwater.persistence.aof import SYSTEM_FILE_OPS, FileOps
from headwater.persistence.manifest import Manifest
from headwater.resp.types import Reply, Status
from headwater.server.aof_load import StartupError, load_aof
from headwater.server.aof_log import AofLog, Wake, next_seq
from headwater.server.aof_rewrite import IN_PROGRESS, AofRewrite
from headwater.server.loading import LoadWatch
from headwater.server.rollback import RollBack, aof_misconf
from headwater.server.save_rules import SaveRules
from headwater.server.snapshots import Snapshots

__all__ = ["BGSAVE_MISCONF", "Durability", "StartupError"]

log = logging.getLogger("headwater")


BGSAVE_MISCONF = ReplyError(
    "MISCONF",
    "Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. "
    "Commands that may modify the data set are disabled, because this instance is configured "
    "to report errors during writes if RDB snapshotting fails (stop-writes-on-bgsave-error "
    "option). Please check the Redis logs for details about the RDB error.",
)

BGSAVE_DURING_REWRITE = (
    "Background append only file rewriting in progress, use BGSAVE SCHEDULE in order to "
    "schedule a BGSAVE whenever possible."
)


class Durability:
    def __init__(
        self,
        config: Config,
        engine: Engine,
        data_dir: str,
        wake: Wake | None = None,
        ops: FileOps = SYSTEM_FILE_OPS,
    ) -> None:
        self.config = config
        self.engine = engine
        self.aof = AofLog(config, engine, data_dir, wake, ops)
        self.aof.on_durable = self.persist
        self.snapshots = Snapshots(config, engine, data_dir, self._publish)
        self.save_rules = SaveRules(config, engine, self.snapshots)
        self.rewrite = AofRewrite(config, engine, self.aof, self._bgsave_running, self._publish)
        self.rollback = RollBack(
            config, engine, self.aof, self.rewrite, self._reload, self._publish
        )
        engine.persistence = self
        config.listeners.append(self._config_changed)
        #: called after the data was loaded again from disk (replicas may hold effects a
        #: roll-back dropped: replication starts a new history)
        self.on_reload: Callable[[], None] = lambda: None

    @property
    def on_durable(self) -> Callable[[], None]:
        """Called on the loop thread when replies held for the AOF may go (the server's)."""
        return self.aof.on_durable

    @on_durable.setter
    def on_durable(self, callback: Callable[[], None]) -> None:
        self.aof.on_durable = callback

    def _bgsave_running(self) -> bool:
        return self.snapshots.child is not None

    # -- startup ---------------------------------------------------------------------------

    def open(self, reset_stats: bool = True, watch: LoadWatch | None = None) -> None:
        """Load the data: the AOF if ``appendonly``, else the snapshot; then log to the AOF.
        ``watch`` follows the load (server/loading.py)."""
        aof = self.aof
        if not self.config["appendonly"]:
            self.snapshots.load_file(watch)
            return
        aof.dir.mkdir(parents=True, exist_ok=True)
        if aof.manifest_path.exists():
            manifest = self._load_aof(reset_stats, watch)
        else:
            # Switching a snapshot-only setup to the AOF: start from the snapshot (Redis
            # would start empty), and make it the base of the new log.
            self.snapshots.load_file(watch)
            manifest = aof.fresh_manifest()
        aof.attach(manifest)
        self._publish()

    def _load_aof(self, reset_stats: bool, watch: LoadWatch | None = None) -> Manifest:
        engine = self.engine
        truncated = self.config["aof-load-truncated"]
        path = self.aof.manifest_path
        manifest = load_aof(engine, path, truncated, self.snapshots.load, watch)
        if reset_stats:
            engine.stats.reset()
        # Changes since the last save restart from what was loaded (Redis: dirty = 0 after a
        # load); both counters, so that their difference never goes negative.
        engine.dirty = engine.dirty_at_last_save = 0
        return manifest

    def _reload(self) -> None:
        """Empty every database and load the AOF again (DEBUG LOADAOF, a roll-back)."""
        self.aof.close_writer(wake=False)
        self.aof.detach_sink()
        self.snapshots.flush_all()
        self.open(reset_stats=False)
        self.on_reload()

    # -- every loop turn, and the cron -----------------------------------------------------

    def persist(self, waiting: int = 0) -> None:
        """Write (and per policy sync) the effects produced so far. ``durable_seq`` then says
        up to which effect they are safe: on disk with ``always``, in the kernel otherwise
        (which survives the death of the process). With ``always`` in a server the sync may
        still run when this returns (see ``AofLog``), unless at most one client is
        ``waiting`` for it; a write held back behind everysec's fsync, or failing, leaves
        ``durable_seq`` where it was. A failure that lasts ``aof-write-error-timeout`` ends
        in a roll-back (``RollBack``)."""
        self.aof.persist(waiting)
        self._publish()
        if self.rollback.due():
            self.rollback.start()

    def finish_roll_back(self) -> None:
        """A roll-back started this turn: load the data again now that the replies it failed
        have been sent, before the loop reads another command. (A command read in between
        would run on the dropped effects: a read sent after the writer's -MISCONF got
        -MISCONF itself.)"""
        if self.aof.reload_pending:
            self.rollback.finish()

    def may_reply(self, c: Client) -> bool:
        """Whether the client's replies may leave (see ``AofLog.may_reply``)."""
        return self.aof.may_reply(c)

    def holds_nobody(self) -> bool:
        """Every effect so far is durable: ``may_reply`` is true for every client (the flush
        then asks no gate; ``reload_pending`` keeps ``durable_seq`` behind, see
        ``AofLog.mark_durable``)."""
        return self.aof.durable_seq >= self.engine.effect_seq

    @property
    def syncing(self) -> bool:
        """A background sync is in flight: its end will call ``on_durable``."""
        return self.aof.syncing

    @property
    def pending(self) -> bool:
        """Effects not written yet."""
        return self.aof.pending

    def cron(self) -> None:
        """Each cron tick: retry a failed write (and start everysec's fsync), then the
        children, the scheduled and automatic saves and rewrites, the lazy nodes."""
        self.persist()
        self.rewrite.run_scheduled()
        self.rewrite.check()
        self.snapshots.check_bgsave()
        self.rewrite.maybe_auto()
        self.save_rules.run(rewriting=self.rewrite.child is not None)
        self.snapshots.materialize_loaded()

    # -- the persistence commands (engine.persistence) -------------------------------------

    def save(self) -> None:
        self.snapshots.save()

    def bgsave(self, schedule: bool) -> Reply:
        if schedule and self.rewrite.child is not None:
            self.save_rules.bgsave_scheduled = True  # started by the cron once it is done
            return Status(b"Background saving scheduled")
        if self.rewrite.child is not None:
            raise err(BGSAVE_DURING_REWRITE)
        self.snapshots.start_bgsave()
        return Status(b"Background saving started")

    def bgrewriteaof(self) -> Reply:
        """As Redis 7 (bgrewriteaofCommand): also with the AOF off (a base alone), and
        scheduled behind a BGSAVE."""
        if self.rewrite.child is not None:
            raise err(IN_PROGRESS)
        if self._bgsave_running():
            self.rewrite.scheduled = True
            self._publish()
            return Status(b"Background append only file rewriting scheduled")
        self.rewrite.start()
        return Status(b"Background append only file rewriting started")

    def save_after_flushall(self) -> bool:
        """Redis's flushAllDataAndResetRDB: with save rules configured, the snapshot on disk
        must not keep the flushed keys (a restart would bring them back), so it is saved
        again at once; a background save is stopped either way (its snapshot holds them)."""
        if not self.config["save"]:
            self.snapshots.stop_bgsave()
            return False
        self.snapshots.save_after_flush()
        return True

    def debug_reload(self) -> None:
        self.snapshots.reload()

    def debug_loadaof(self) -> None:
        """Write what is buffered, empty every database, and load the AOF again."""
        if self.aof.writer is not None and not self.aof.enabling:
            self._reload()

    # -- CONFIG SET appendonly -------------------------------------------------------------

    def _config_changed(self, name: str, value: Any) -> None:
        """CONFIG SET appendonly, inside the command as in Redis (config.c updateAppendonly)."""
        if name != "appendonly" or bool(value) == (self.aof.writer is not None):
            return
        if not value:
            self.stop_aof()
            return
        try:
            self.start_aof()
        except (OSError, ReplyError) as exc:
            log.warning("Redis needs to enable the AOF but can't: %s", exc)
            if self.aof.writer is not None:
                self.stop_aof()
            self.config.values["appendonly"] = False
            raise InvalidConfig(name, "Unable to turn on AOF. Check server logs.") from None

    def start_aof(self) -> None:
        """appendonly yes at runtime (Redis: startAppendOnly): effects go at once to a new
        incremental file, and a rewrite child writes the base that goes with it (scheduled if
        a BGSAVE runs; a rewrite started while the AOF was off is replaced). Until the new
        manifest names both, nothing written is durable: those replies wait."""
        aof = self.aof
        if self.rewrite.child is not None:
            log.warning(
                "AOF was enabled but there is already an AOF rewriting in background. "
                "Stopping background AOF and starting a rewrite now."
            )
            self.rewrite.kill()
        aof.dir.mkdir(parents=True, exist_ok=True)
        seq = next_seq(aof.manifest_on_disk())
        path = aof.dir / aof.incr_name(seq)
        path.unlink(missing_ok=True)  # (a stray of an earlier attempt)
        aof.begin_enabling(seq)
        aof.start_writer(path)
        aof.manifest = None
        if self._bgsave_running():
            self.rewrite.scheduled = True
            log.warning(
                "AOF was enabled but there is already another background operation. An AOF "
                "background was scheduled to start when possible."
            )
        else:
            self.rewrite.fork(seq, path.name)
        self._publish()

    def stop_aof(self) -> None:
        """appendonly no at runtime (Redis: stopAppendOnly): write and sync what is left,
        close the file, and stop a rewrite child."""
        aof = self.aof
        self.rewrite.kill()
        self.rewrite.scheduled = False
        writer = aof.writer
        aof.close_writer()
        self.aof.detach_sink()
        if aof.enabling and writer is not None:  # no manifest names its file
            writer.path.unlink(missing_ok=True)
        aof.disabled()  # (no reload without AOF either)
        self._publish()
        log.warning("Append only file disabled")

    # -- what INFO shows, and whether writes are refused -----------------------------------

    def _publish(self) -> None:
        aof = self.aof
        writer = aof.writer
        info = self.engine.info
        error = writer.error if writer is not None else None
        info.aof_enabled = writer is not None
        self.engine.replies_wait_for_disk = writer is not None
        self._note_write_status(error)
        info.aof_current_size = writer.size if writer is not None else 0
        info.aof_buffer_length = len(writer.buf) if writer is not None else 0
        info.aof_base_size = aof.base_size
        info.aof_pending_bio_fsync = int(writer is not None and writer.syncing)
        info.aof_rewrite_in_progress = self.rewrite.child is not None
        info.aof_rewrite_scheduled = self.rewrite.scheduled
        self.engine.refuse_writes = self._refusal(error)

    def _note_write_status(self, error: OSError | None) -> None:
        """Log a change of the AOF write status, and when the error in progress began."""
        info = self.engine.info
        status = "err" if error else "ok"
        if status != info.aof_last_write_status:
            if error is not None:
                log.warning(
                    "Error writing to the AOF file: %s (writes refused until it works)", error
                )
            else:
                log.warning("AOF write error solved: the AOF file can be written again")
        if error is None:
            self.aof.error_since = None
        elif self.aof.error_since is None:
            self.aof.error_since = time.monotonic()
        info.aof_last_write_status = status

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

    # -- the end ---------------------------------------------------------------------------

    def shutdown(self, save: bool | None) -> None:
        """Stopping: sync the AOF, and save a snapshot if asked or if save rules exist."""
        self.snapshots.kill_child()
        self.rewrite.kill()
        if save or (save is None and self.config["save"]):
            self.snapshots.save_at_shutdown()
        self.close()

    def close(self) -> None:
        self.aof.close_writer(wake=False)
