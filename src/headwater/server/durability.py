"""The server's side of durability: load the AOF at startup, write effects each loop turn.

Startup (``open``): with ``appendonly yes``, ``<dir>/<appenddirname>/`` holds a manifest and
the files it names; the base (if any) and then every incremental file are replayed through
the engine, a torn tail of the last file is cut off (``aof-load-truncated``), and effects are
then appended to the last incremental file. Without a manifest a fresh one is created.

Each loop turn (``persist``) writes the effects of that turn before any reply is sent; with
``appendfsync always`` it also syncs them, and if that fails the replies are held: the server
keeps them until a later turn manages to write, and refuses new writes with ``-MISCONF``.
"""

from __future__ import annotations

import errno
import logging
import os
from pathlib import Path

from headwater.config import Config
from headwater.engine import Engine
from headwater.engine.replay import Replayer
from headwater.errors import ReplyError, err
from headwater.persistence.aof import AofWriter
from headwater.persistence.manifest import (
    Manifest,
    ManifestEntry,
    fsync_dir,
    load_manifest,
    write_manifest,
)
from headwater.persistence.rewrite import write_base
from headwater.resp.types import OK, Reply, Status

log = logging.getLogger("headwater")


class StartupError(Exception):
    """The data on disk cannot be loaded: the server must not start (and not overwrite it)."""


class Durability:
    def __init__(self, config: Config, engine: Engine, data_dir: str) -> None:
        self.config = config
        self.engine = engine
        self.dir = Path(data_dir) / config["appenddirname"]
        self.manifest_path = self.dir / f"{config['appendfilename']}.manifest"
        self.writer: AofWriter | None = None
        self.manifest: Manifest | None = None
        self.base_size = 0
        #: (pid, seq, base name, incr name) while a rewrite child runs
        self.rewrite_child: tuple[int, int, str, str] | None = None
        engine.hooks[b"DEBUG AOF-WRITE-ERROR"] = self._debug_write_error
        engine.hooks[b"DEBUG LOADAOF"] = self._debug_loadaof
        engine.hooks[b"BGREWRITEAOF"] = self._bgrewriteaof

    # -- startup ---------------------------------------------------------------------------

    def open(self) -> None:
        if not self.config["appendonly"]:
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        manifest = self._load() if self.manifest_path.exists() else self._fresh_manifest()
        self.manifest = manifest
        if manifest.base is not None:
            self.base_size = (self.dir / manifest.base.name).stat().st_size
        incr = manifest.incrs[-1]
        self.writer = AofWriter(self.dir / incr.name, self.config["appendfsync"])
        self.engine.effect_sinks.append(self.writer.append)
        self._publish()

    def _fresh_manifest(self) -> Manifest:
        name = f"{self.config['appendfilename']}.1.incr.aof"
        manifest = Manifest([ManifestEntry(name, 1, "i")])
        (self.dir / name).touch()
        fsync_dir(self.dir)
        write_manifest(self.manifest_path, manifest)
        return manifest

    def _load(self) -> Manifest:
        try:
            manifest = load_manifest(self.manifest_path)
        except (OSError, ValueError) as exc:
            raise StartupError(f"Bad AOF manifest: {exc}") from None
        if not manifest.incrs:
            raise StartupError(f"{self.manifest_path}: no incremental AOF file is named")
        files = ([manifest.base] if manifest.base else []) + manifest.incrs
        replayer = Replayer(self.engine)
        loaded = 0
        try:
            for n, entry in enumerate(files):
                path = self.dir / entry.name
                if entry.kind == "b" and not entry.name.endswith(".aof"):
                    raise StartupError(f"{path}: snapshot bases are not supported yet")
                last = n == len(files) - 1
                result = replayer.replay(path, last and self.config["aof-load-truncated"])
                loaded += result.commands
                if result.failed:
                    log.warning("%s: %d commands failed while loading", path, result.failed)
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
        self.engine.stats.reset()
        self.engine.dirty = 0
        log.warning("DB loaded from append only file: %d commands", loaded)
        return manifest

    # -- every loop turn -------------------------------------------------------------------

    def persist(self) -> bool:
        """Write (and per policy sync) this turn's effects; False while replies must wait."""
        writer = self.writer
        if writer is None:
            return True
        writer.fsync_policy = self.config["appendfsync"]
        writer.flush()
        self._publish()
        return not (writer.fsync_policy == "always" and writer.pending)

    def _publish(self) -> None:
        writer = self.writer
        info = self.engine.info
        error = writer.error if writer is not None else None
        info.aof_enabled = writer is not None
        info.aof_last_write_status = "err" if error else "ok"
        info.aof_current_size = writer.size if writer is not None else 0
        info.aof_buffer_length = len(writer.buf) if writer is not None else 0
        info.aof_rewrite_in_progress = self.rewrite_child is not None
        self.engine.refuse_writes = (
            ReplyError("MISCONF", f"Errors writing to the AOF file: {os.strerror(error.errno)}")
            if error is not None and error.errno is not None
            else None
        )

    # -- rewrite (BGREWRITEAOF, automatic, appendonly turned on) ---------------------------

    def start_rewrite(self) -> None:
        """Start a background rewrite: a forked child writes a new base from its copy of the
        data while new effects go to a new incremental file. The manifest names a loadable
        set at every moment: first old base + old incrs + the new incr, then (when the child
        has finished) the new base + the new incr."""
        if self.rewrite_child is not None:
            raise err("Background append only file rewriting already in progress")
        if self.writer is None or self.manifest is None:
            raise err("Append only file is not enabled")
        seq = self.manifest.next_incr_seq()
        base_name = f"{self.config['appendfilename']}.{seq}.base.aof"
        incr_name = f"{self.config['appendfilename']}.{seq}.incr.aof"
        self.writer.close()
        (self.dir / incr_name).touch()
        self.manifest.entries.append(ManifestEntry(incr_name, seq, "i"))
        write_manifest(self.manifest_path, self.manifest)
        self.writer = AofWriter(self.dir / incr_name, self.config["appendfsync"])
        self.engine.effect_sinks[:] = [self.writer.append]
        pid = os.fork()
        if pid == 0:  # the child: write the base and leave without running any cleanup
            code = 1
            try:
                write_base(self.dir / base_name, self.engine.keyspace.dbs)
                code = 0
            finally:
                os._exit(code)
        self.rewrite_child = (pid, seq, base_name, incr_name)
        log.warning("Background append only file rewriting started by pid %d", pid)

    def check_rewrite(self) -> None:
        """From the cron: has the child finished? Then switch the manifest to its base."""
        if self.rewrite_child is None:
            return
        pid, seq, base_name, incr_name = self.rewrite_child
        done, status = os.waitpid(pid, os.WNOHANG)
        if not done:
            return
        self.rewrite_child = None
        if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
            self.engine.info.aof_last_bgrewrite_status = "err"
            log.warning("Background AOF rewrite failed (status %d)", status)
            return
        assert self.manifest is not None
        old = [e for e in self.manifest.entries if e.name != incr_name]
        self.manifest = Manifest(
            [ManifestEntry(base_name, seq, "b"), ManifestEntry(incr_name, seq, "i")]
        )
        write_manifest(self.manifest_path, self.manifest)
        for entry in old:
            (self.dir / entry.name).unlink(missing_ok=True)
        self.base_size = (self.dir / base_name).stat().st_size
        self.engine.info.aof_last_bgrewrite_status = "ok"
        log.warning("Background AOF rewrite finished successfully")

    def maybe_auto_rewrite(self) -> None:
        """auto-aof-rewrite-percentage / -min-size, as Redis: when the incremental file has
        grown by that percentage over the base and is at least min-size."""
        writer = self.writer
        percentage = self.config["auto-aof-rewrite-percentage"]
        if writer is None or self.rewrite_child is not None or not percentage:
            return
        if writer.size < self.config["auto-aof-rewrite-min-size"]:
            return
        base = max(self.base_size, 1)
        if (writer.size * 100) // base >= percentage:
            log.warning("Starting automatic rewriting of AOF on %d%% growth", percentage)
            self.start_rewrite()

    def follow_config(self) -> None:
        """CONFIG SET appendonly at runtime (from the cron). Turning it on writes a base of
        the current data in the foreground (like SAVE) and starts a fresh incremental file;
        turning it off syncs and closes the file."""
        wanted = bool(self.config["appendonly"])
        if wanted == (self.writer is not None) or self.rewrite_child is not None:
            return
        if not wanted:
            assert self.writer is not None
            self.writer.close()
            self.writer = None
            self.engine.effect_sinks.clear()
            self._publish()
            log.warning("Append only file disabled")
            return
        self.dir.mkdir(parents=True, exist_ok=True)
        old = load_manifest(self.manifest_path).entries if self.manifest_path.exists() else []
        seq = max((e.seq for e in old), default=0) + 1
        base = ManifestEntry(f"{self.config['appendfilename']}.{seq}.base.aof", seq, "b")
        incr = ManifestEntry(f"{self.config['appendfilename']}.{seq}.incr.aof", seq, "i")
        write_base(self.dir / base.name, self.engine.keyspace.dbs)
        (self.dir / incr.name).touch()
        self.manifest = Manifest([base, incr])
        write_manifest(self.manifest_path, self.manifest)
        for entry in old:
            (self.dir / entry.name).unlink(missing_ok=True)
        self.base_size = (self.dir / base.name).stat().st_size
        self.writer = AofWriter(self.dir / incr.name, self.config["appendfsync"])
        self.engine.effect_sinks[:] = [self.writer.append]
        self._publish()
        log.warning("Append only file enabled: base written, logging to %s", incr.name)

    # -- command hooks ---------------------------------------------------------------------

    def _bgrewriteaof(self, args: list[bytes]) -> Reply:
        if self.writer is None:
            raise err("Append only file is not enabled")  # Redis would also start one
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

    def _debug_loadaof(self, args: list[bytes]) -> Reply:
        """Write what is buffered, empty every database, and load the AOF again."""
        if args:
            raise err("wrong number of arguments for 'debug|loadaof' command")
        if self.writer is None:
            return OK
        self.writer.close()
        self.writer = None
        self.engine.effect_sinks.clear()
        for db in self.engine.keyspace.dbs:
            db.flush()
        self.open()
        return OK

    @property
    def pending(self) -> bool:
        """Effects not written yet."""
        return self.writer is not None and self.writer.pending

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
