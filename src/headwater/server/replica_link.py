"""A replica's link to its primary: handshake, full or partial sync, the stream, ACKs.

Theory of operation
-------------------
One task per ``REPLICAOF``, as Redis's replica state machine (replication.c,
``syncWithMaster``): connect; ``PING`` (``+PONG``, or an error about authentication, is a
Redis-protocol server); ``AUTH [masteruser] masterauth`` when set; ``REPLCONF listening-port``
and ``REPLCONF capa eof capa psync2``; then ``PSYNC <replid> <offset+1>`` with the history this
server has (``PSYNC ? -1`` if none). Every failure closes the link with a log line that says
why, and the task tries again a second later; the data served meanwhile is what it was.

* ``+FULLRESYNC <replid> <offset>``: the snapshot follows, as ``$<size>\\r\\n`` and its bytes,
  or (the EOF form, which the primary streams while its child writes it) ``$EOF:<40-byte
  mark>\\r\\n``, its bytes and the mark. It is loaded into a *fresh* keyspace beside the data
  served: by default while it arrives (``repl-diskless-load swapdb``: read from the socket
  straight into memory, ``_SnapshotReceiver``, and parsed by a thread as the bytes come,
  ``SnapshotBuffer``), or once it is all in a temporary file (``disabled``, and
  ``on-empty-db`` when this server holds keys). If the primary vanishes midway, or the
  snapshot does not load (checksum, structure, an end in the wrong place), nothing of it is
  applied and the data served is unchanged. Only then are the databases swapped, the AOF
  restarted on the new data (its base rewritten, as Redis does after a sync), and the
  primary's ID and offset adopted. Stream bytes that came with the snapshot's end are applied
  first.
* ``+CONTINUE [<replid>]``: the stream goes on from our offset (a changed ID is adopted, with
  the old one as ``replid2``, as Redis does for a promoted primary's replicas).

The stream: each command is applied through the AOF replay's own path
(``Replayer.apply_command``: the same ops, effects to this server's own sinks, so its AOF
logs them), then proxied, byte for byte, into this server's backlog and to its replicas; the
offset moves by its size. ``PING`` and ``REPLCONF GETACK`` are the link's own. Bytes that are
not RESP commands close the link (``Protocol error from master``), which then resyncs
partially from the last whole command. ``REPLCONF ACK <offset>`` goes to the primary every
second and when asked.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import ssl
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, runtime_checkable

from headwater.engine.replay import Replayer, StreamGarbage
from headwater.errors import ReplyError
from headwater.keyspace import Keyspace
from headwater.ops.dump import Limits
from headwater.persistence.rdb_load import RdbImportError, load_arriving
from headwater.persistence.snapshot import (
    EOF_MARK_SIZE,
    SnapshotBuffer,
    SnapshotError,
    load_snapshot,
    load_snapshot_buffer,
)
from headwater.rdb.rdbfile import Arriving
from headwater.replication.state import new_replid, valid_replid
from headwater.resp.encoder import encode_command
from headwater.resp.split import CommandSplitter, new_splitter
from headwater.stream.node import Node

if TYPE_CHECKING:
    from headwater.server.hosts import LinkHost
    from headwater.server.replication import Replication

log = logging.getLogger("headwater")

#: seconds between two attempts to connect
RETRY_S = 1.0
#: seconds between ACKs
ACK_PERIOD_S = 1.0
#: the snapshot's reads, and the link reader's buffer limit (its default, 64 KiB, made the
#: transfer of a large snapshot run at ~120 MB/s: a loop turn per 64 KiB)
SNAPSHOT_READ_SIZE = 1024 * 1024
#: how a Redis primary's payload (an RDB file) begins
RDB_MAGIC = b"REDIS"


class LinkError(Exception):
    """The link must be closed; the message is the log line."""


class ReplicaLink:
    def __init__(self, server: LinkHost, repl: Replication, host: str, port: int) -> None:
        self.server = server
        self.repl = repl
        self.engine = server.engine
        self.host = host
        self.port = port
        #: Redis's names: connect, connecting, handshake, sync, connected
        self.role_state = "connect"
        self.connected = False
        self.syncing = False
        self.transfer_size = 0
        self.transfer_read = 0
        #: the primary's commands this replica could not apply (a module's, a cluster's …),
        #: and the last one's name: INFO replication shows them, so a divergence is seen
        self.failed_commands = 0
        self.last_failed_command = ""
        #: monotonic seconds of the last byte from the primary, and since when the link is down
        self.last_io = 0.0
        self.down_since = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._replayer: Replayer | None = None
        self._stopped = False
        #: this server is handing its role to the primary it links to (FAILOVER): the
        #: PSYNC says so, and its answer ends the failover (or aborts it)
        self.failover = False
        #: (engine.effect_seq, stream offset) after each batch applied, not known fsynced
        #: yet, and the stream offset known fsynced (FACK)
        self._applied: deque[tuple[int, int]] = deque()
        self._fsynced = 0
        #: the FACK last sent (an ACK goes out as soon as an fsync moves it: see ``fsynced``)
        self._facked = -1

    def start(self) -> None:
        self._task = self.server.loop.create_task(self._run())

    def stop(self) -> None:
        self._stopped = True
        if self._task is not None:
            self._task.cancel()
        self._close()

    def stream_db(self) -> int:
        """The database the primary's stream is in now."""
        replayer = self._replayer
        return replayer.client.db.index if replayer is not None else self.repl.stream_db

    def cut(self) -> None:
        """Close the connection (CLIENT KILL TYPE master); the task reconnects."""
        if self._writer is not None:
            self._writer.close()

    # -- the task --------------------------------------------------------------------------

    async def _run(self) -> None:
        while not self._stopped:
            try:
                await self._session()
            except asyncio.CancelledError:
                raise
            except LinkError as exc:
                log.warning("%s", exc)
            except (OSError, EOFError, asyncio.IncompleteReadError) as exc:
                log.warning(
                    "Error condition on socket for SYNC with %s:%d: %s",
                    self.host,
                    self.port,
                    exc or "connection lost",
                )
            except TimeoutError:
                log.warning("Timeout connecting to the MASTER %s:%d...", self.host, self.port)
            except ValueError as exc:  # a line over the reader's limit: not a Redis server
                log.warning("Bad reply from MASTER %s:%d: %s", self.host, self.port, exc)
            finally:
                self._close()
            if self.failover:  # (the target could not be asked: the switch is undone)
                self.failover = False
                abort = self.repl.failover.abort
                self.server.loop.call_soon(abort, "Failover target could not be reached")
            await asyncio.sleep(RETRY_S)

    def _close(self) -> None:
        if self.connected:
            log.warning("Connection with master lost.")
        was_connected, self.connected = self.connected, False
        self.syncing = False
        if was_connected:
            self.repl.update_refusal()  # (replica-serve-stale-data no: MASTERDOWN from now)
        if self.role_state != "connect":
            self.down_since = time.monotonic()
        self.role_state = "connect"
        if self._writer is not None:
            self._writer.close()
            self._writer = None
        if self._replayer is not None:
            self.repl.stream_db = self._replayer.client.db.index
            self._replayer.client.is_master = False
            self._replayer.close()
            self._replayer = None

    def _tls(self) -> ssl.SSLContext | None:
        """The link's TLS context with ``tls-replication yes`` (the primary's TLS port)."""
        return self.server.tls.client if self.engine.config["tls-replication"] else None

    async def _session(self) -> None:
        limit_s = self.engine.config["repl-timeout"]
        self.role_state = "connecting"
        log.warning("Connecting to MASTER %s:%d", self.host, self.port)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(
                self.host, self.port, limit=SNAPSHOT_READ_SIZE, ssl=self._tls()
            ),
            limit_s,
        )
        self._writer = writer
        log.warning("MASTER <-> REPLICA sync started")
        self.role_state = "handshake"
        await self._handshake(reader, writer, limit_s)
        state = self.repl.state
        if self.repl.backlog_active or state.offset:
            replid, start = state.replid, state.offset + 1
        else:
            replid, start = "?", -1
        psync = [b"PSYNC", replid.encode(), b"%d" % start]
        writer.write(encode_command([*psync, b"FAILOVER"] if self.failover else psync))
        reply = await self._line(reader, limit_s)
        if self.failover:
            self._failover_answered(reply)
        rest = b""
        if reply.startswith(b"+FULLRESYNC"):
            rest = await self._full_sync(reader, reply, limit_s)
        elif reply.startswith(b"+CONTINUE"):
            self._continue(reply)
        else:
            raise LinkError(f"Unexpected reply to PSYNC from master: {_show(reply)}")
        await self._stream(reader, writer, limit_s, rest)

    def _failover_answered(self, reply: bytes) -> None:
        """The target's answer to PSYNC … FAILOVER: taken (the failover is over) or refused
        (aborted: this server is a primary again, later in this loop turn)."""
        self.failover = False
        failover = self.repl.failover
        if reply.startswith((b"+FULLRESYNC", b"+CONTINUE")):
            failover.psync_answered()
            return
        self.server.loop.call_soon(failover.abort, "Failover target rejected psync request")
        raise LinkError(f"Failover target rejected psync request: {_show(reply)}")

    async def _handshake(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limit_s: float
    ) -> None:
        config = self.engine.config
        writer.write(encode_command([b"PING"]))
        reply = await self._line(reader, limit_s)
        if not reply.startswith((b"+", b"-NOAUTH", b"-NOPERM", b"-ERR operation not permitted")):
            raise LinkError(f"Error reply to PING from master: '{_show(reply)}'")
        if config["masterauth"]:
            argv = [b"AUTH"]
            if config["masteruser"]:
                argv.append(config["masteruser"].encode())
            argv.append(config["masterauth"].encode())
            writer.write(encode_command(argv))
            reply = await self._line(reader, limit_s)
            if not reply.startswith(b"+"):
                raise LinkError(f"Unable to AUTH to MASTER: {_show(reply)}")
        # (over TLS the replica is reached on its TLS port, as Redis announces it)
        tls = config["tls-replication"] and config["tls-port"]
        port = b"%d" % (config["tls-port"] if tls else config["port"])
        writer.write(encode_command([b"REPLCONF", b"listening-port", port]))
        reply = await self._line(reader, limit_s)
        if not reply.startswith(b"+"):
            log.warning(
                "(Non critical) Master does not understand REPLCONF listening-port: %s",
                _show(reply),
            )
        capa = [b"capa", b"eof", b"capa", b"psync2", b"capa", b"hwsnap"]
        writer.write(encode_command([b"REPLCONF", *capa]))
        reply = await self._line(reader, limit_s)
        if not reply.startswith(b"+"):
            log.warning("(Non critical) Master does not understand REPLCONF capa: %s", _show(reply))

    async def _line(self, reader: asyncio.StreamReader, limit_s: float) -> bytes:
        """One reply line (the primary may send newlines to keep the link alive)."""
        while True:
            line = await asyncio.wait_for(reader.readline(), limit_s)
            if not line:
                raise EOFError("connection closed by the master")
            self.last_io = time.monotonic()
            if line.strip():
                return line.rstrip(b"\r\n")

    # -- sync ------------------------------------------------------------------------------

    async def _full_sync(self, reader: asyncio.StreamReader, reply: bytes, limit_s: float) -> bytes:
        """Receive and load the snapshot; returns the bytes of the stream read after it (the
        EOF form: they may arrive with its end)."""
        parts = reply.split()
        shape = len(parts) in (3, 4)
        replid = parts[1].decode("ascii", "replace") if shape else ""
        offset = _int(parts[2]) if shape else None
        # (a Headwater replica serving a full sync says which database its stream is in)
        token = parts[3] if len(parts) == 4 else b"db=0"
        db = _int(token[3:]) if token.startswith(b"db=") else None
        in_range = db is not None and 0 <= db < len(self.engine.keyspace.dbs)
        if not valid_replid(replid) or offset is None or offset < 0 or db is None or not in_range:
            raise LinkError(f"Bad +FULLRESYNC reply from master: {_show(reply)}")
        log.warning("Full resync from master: %s:%d", replid, offset)
        self.role_state = "sync"
        self.syncing = True
        header = await self._line(reader, limit_s)
        size, mark = _bulk_header(header)
        if size is None and mark is None:
            raise LinkError(
                "Bad protocol from MASTER, the first byte is not '$' (we received "
                f"'{_show(header)}'), are you sure the host and port are right?"
            )
        self.transfer_size, self.transfer_read = (-1 if size is None else size), 0
        how = f"{size} bytes" if size is not None else "streamed with an EOF mark"
        if await self._sends_rdb(reader, limit_s):
            log.warning("MASTER <-> REPLICA sync: receiving %s of a Redis RDB file", how)
            rest = await self._receive_rdb(reader, size, mark, limit_s, replid, offset, db)
            self.syncing = False
            return rest
        buffer = self._memory_for(size, mark) if self._diskless() else None
        if buffer is not None:
            log.warning("MASTER <-> REPLICA sync: receiving %s, loaded as it arrives", how)
            rest = await self._receive_and_load(
                reader, buffer, size, mark, limit_s, replid, offset, db
            )
        else:
            path = Path(self.repl.data_dir) / f"temp-{int(time.time())}.{os.getpid()}.hwsnap"
            log.warning("MASTER <-> REPLICA sync: receiving %s to disk", how)
            try:
                with _open_temp(path) as f:
                    end, rest = await self._receive(reader, size, mark, limit_s, f.write)
                    f.truncate(end)  # (the EOF form: the mark and what followed it are not)
                keys, fresh, lazy, libraries = self._load_file(path)
            finally:
                with contextlib.suppress(OSError):
                    path.unlink()
            self._install(keys, fresh, lazy, libraries, replid, offset, db)
        self.syncing = False
        return rest

    async def _sends_rdb(self, reader: asyncio.StreamReader, limit_s: float) -> bool:
        """Whether the payload is Redis's RDB format (a Redis primary) rather than a
        Headwater snapshot: its first bytes are looked at and left in the reader."""
        pending = _buffered(reader)
        if pending is None:
            return False  # (no way to look ahead: a Headwater snapshot is assumed)
        while len(pending) < len(RDB_MAGIC):
            chunk = await asyncio.wait_for(reader.read(SNAPSHOT_READ_SIZE), limit_s)
            if not chunk:
                raise LinkError("I/O error trying to sync with MASTER: connection lost")
            pending[:0] = chunk  # (read empties the buffer first: the chunk is its head)
        return bytes(pending[: len(RDB_MAGIC)]) == RDB_MAGIC

    async def _receive_rdb(
        self,
        reader: asyncio.StreamReader,
        size: int | None,
        mark: bytes | None,
        limit_s: float,
        replid: str,
        offset: int,
        stream_db: int,
    ) -> bytes:
        """A Redis primary's RDB file, converted key by key as it arrives (``load_arriving``,
        the reader of import-rdb, in a thread) into a fresh keyspace beside the data served,
        which it replaces once loaded; a transfer cut short or a file that does not load
        leaves the data served as it was."""
        engine = self.engine
        fresh = Keyspace(len(engine.keyspace.dbs))
        limits = Limits.of(engine.config)
        now_ms = int(time.time() * 1000)
        feed = ChunkFeed()
        file = Arriving(feed)
        load = functools.partial(load_arriving, file, fresh, limits, now_ms)
        loading = self.server.loop.run_in_executor(None, load)
        loading.add_done_callback(_retrieve)
        try:
            end, rest = await self._receive(reader, size, mark, limit_s, feed.put)
        except BaseException as exc:
            feed.fail(ConnectionError(f"the transfer stopped: {exc}"))
            raise
        feed.finish()
        try:
            report, libraries = await loading
            if file.end != end:
                raise RdbImportError(f"{end - file.end} bytes after the end of the RDB data")
        except (RdbImportError, ReplyError) as exc:
            raise LinkError(
                f"Failed trying to load the MASTER synchronization DB: {exc} "
                "(the data served is unchanged)"
            ) from None
        self._install(report.keys, fresh, [], libraries, replid, offset, stream_db)
        return rest

    def _diskless(self) -> bool:
        """Load from the link (``repl-diskless-load``): always (swapdb), when this server holds
        no keys (on-empty-db), or never (disabled: to a temporary file, then loaded)."""
        mode = self.engine.config["repl-diskless-load"]
        if mode == "on-empty-db":
            return all(not db.data for db in self.engine.keyspace.dbs)
        return bool(mode == "swapdb")

    def _memory_for(self, size: int | None, mark: bytes | None) -> SnapshotBuffer | None:
        """Memory to receive the snapshot into (None: there is none, it goes to disk)."""
        origin = f"snapshot from {self.host}:{self.port}"
        try:
            return SnapshotBuffer(size, origin, mark=mark or b"")
        except (SnapshotError, OSError) as exc:  # (no address space for it, a bad size)
            log.warning("Cannot receive the snapshot into memory (%s): to disk instead", exc)
            return None

    async def _receive(
        self,
        reader: asyncio.StreamReader,
        size: int | None,
        mark: bytes | None,
        limit_s: float,
        write: Callable[[bytes], object],
    ) -> tuple[int, bytes]:
        """Hand the snapshot's bytes to ``write`` as they arrive: ``size`` of them, or (the
        EOF form) up to the ``mark``. Returns the snapshot's size and what came after the
        mark, which ``write`` was given too (the sink cuts it off)."""
        tail = b""  # the last bytes before this read: a mark may begin in them
        while size is None or self.transfer_read < size:
            want = SNAPSHOT_READ_SIZE if size is None else size - self.transfer_read
            chunk = await asyncio.wait_for(reader.read(min(SNAPSHOT_READ_SIZE, want)), limit_s)
            if not chunk:
                of = "" if size is None else f" of {size}"
                raise LinkError(
                    "I/O error trying to sync with MASTER: connection lost after "
                    f"{self.transfer_read}{of} bytes of the snapshot (nothing of it is applied)"
                )
            self.last_io = time.monotonic()
            write(chunk)
            before = self.transfer_read
            self.transfer_read += len(chunk)
            if mark is None:
                continue
            found = _find_mark(tail, chunk, mark)
            if found is not None:  # (negative: the mark began in the bytes before this read)
                return before + found, chunk[found + len(mark) :]
            tail = (tail + chunk[-(len(mark) - 1) :])[-(len(mark) - 1) :]
        return self.transfer_read, b""

    async def _receive_and_load(
        self,
        reader: asyncio.StreamReader,
        buffer: SnapshotBuffer,
        size: int | None,
        mark: bytes | None,
        limit_s: float,
        replid: str,
        offset: int,
        stream_db: int,
    ) -> bytes:
        """The snapshot goes into memory as it arrives (no file) while a thread loads it into
        a fresh keyspace beside the data served (Redis's ``repl-diskless-load swapdb``); once
        both have ended the databases are swapped. A transfer cut short, or a snapshot that
        does not load, leaves the data served as it was."""
        engine = self.engine
        fresh = Keyspace(len(engine.keyspace.dbs))
        lazy: list[Node] = []
        libraries: list[bytes] = []
        load = functools.partial(load_snapshot_buffer, buffer, fresh.dbs, lazy, libraries)
        loading = self.server.loop.run_in_executor(None, load)
        loading.add_done_callback(_retrieve)
        received = False
        try:
            pending = _buffered(reader)
            transport = self._writer.transport if self._writer is not None else None
            if pending is not None and isinstance(transport, _Switchable):
                rest = await self._receive_into(reader, pending, transport, buffer, size, limit_s)
            else:  # (through the reader: a copy per read)
                _end, rest = await self._receive(reader, size, mark, limit_s, buffer.write)
            received = True
        finally:
            if not received:  # (the load stops at the first byte it misses)
                buffer.fail(ConnectionError("the transfer of the snapshot stopped"))
        try:
            keys = await loading
        except Exception as exc:  # (whatever stopped it: nothing of it is applied)
            raise LinkError(
                f"Failed trying to load the MASTER synchronization DB: {exc} "
                "(the data served is unchanged)"
            ) from None
        self._install(keys, fresh, lazy, libraries, replid, offset, stream_db)
        return rest

    async def _receive_into(
        self,
        reader: asyncio.StreamReader,
        pending: bytearray,
        transport: _Switchable,
        buffer: SnapshotBuffer,
        size: int | None,
        limit_s: float,
    ) -> bytes:
        """``_receive`` into ``buffer`` without a copy: the socket is read straight into it
        (``_SnapshotReceiver``). ``pending``: what the reader holds already. Returns b""
        (what came after the snapshot stays in the reader)."""
        take = len(pending) if size is None else min(len(pending), size)
        buffer.write(pending[:take])
        del pending[:take]
        self.transfer_read = take
        if buffer.size is not None and buffer.filled >= buffer.size:
            # the whole snapshot came with the header: what followed it is the stream's
            pending[:0] = buffer.after_end
            return b""
        loop = self.server.loop
        receiver = _SnapshotReceiver(self, buffer, size, reader, transport, loop)
        receiver.install()
        while not receiver.done.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(receiver.done), ACK_PERIOD_S)
            if not receiver.done.done() and time.monotonic() - self.last_io > limit_s:
                receiver.give_back()
                raise LinkError("Timeout receiving bulk data from MASTER...")
        receiver.done.result()
        return b""

    def _load_file(self, path: Path) -> tuple[int, Keyspace, list[Node], list[bytes]]:
        """The whole snapshot is in ``path``: load it into a fresh keyspace."""
        fresh = Keyspace(len(self.engine.keyspace.dbs))
        lazy: list[Node] = []
        libraries: list[bytes] = []
        try:
            keys = load_snapshot(path, fresh.dbs, lazy, libraries=libraries)
        except (SnapshotError, OSError) as exc:
            raise LinkError(
                f"Failed trying to load the MASTER synchronization DB from disk: {exc} "
                "(the data served is unchanged)"
            ) from None
        return keys, fresh, lazy, libraries

    def _install(
        self,
        keys: int,
        fresh: Keyspace,
        lazy: list[Node],
        libraries: list[bytes],
        replid: str,
        offset: int,
        stream_db: int,
    ) -> None:
        """The snapshot loaded: swap it in for the data, and adopt the primary's history."""
        engine = self.engine
        durability = self.server.durability
        aof_on = durability.aof.writer is not None
        if aof_on:
            durability.stop_aof()
        for db, loaded in zip(engine.keyspace.dbs, fresh.dbs, strict=True):
            db.take_contents(loaded)
        engine.keyspace.signal_flushed()  # (Redis's emptyData before a full sync's load)
        durability.snapshots.lazy_nodes[:] = lazy
        engine.info.snapshot_lazy_nodes = len(lazy)
        engine.scripting.load_libraries(libraries)
        self.repl.state.adopt(replid, offset)
        self.repl.stream_db = stream_db
        self.repl.backlog_active = True
        self.repl.disconnect_peers()
        if aof_on:
            durability.start_aof()
        engine.serve_ready()
        log.warning("MASTER <-> REPLICA sync: Finished with success (%d keys)", keys)

    def _continue(self, reply: bytes) -> None:
        parts = reply.split()
        state = self.repl.state
        if len(parts) == 2:
            replid = parts[1].decode("ascii", "replace")
            if not valid_replid(replid):
                raise LinkError(f"Bad +CONTINUE reply from master: {_show(reply)}")
            if replid != state.replid:  # the primary was promoted: its new history
                state.replid2 = state.replid
                state.second_repl_offset = state.offset + 1
                state.replid = replid
                self.repl.disconnect_peers()
        self.repl.backlog_active = True
        log.warning("Successful partial resynchronization with master (offset %d).", state.offset)

    # -- the stream ------------------------------------------------------------------------

    async def _stream(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        limit_s: float,
        first: bytes = b"",
    ) -> None:
        """Apply the stream (``first``: its bytes that came with the snapshot's end)."""
        replayer = self._replayer = Replayer(self.engine)
        master = replayer.client
        master.select(self.repl.stream_db)
        master.is_master = True
        master.addr = f"{self.host}:{self.port}"
        self.role_state = "connected"
        self.connected = True
        self.repl.update_refusal()
        log.warning("MASTER <-> REPLICA link is up")
        parser = new_splitter()
        received = bytearray()  # what the parser was fed and the backlog did not get yet
        pending = _buffered(reader)  # (what the reader holds goes first, then the socket's)
        if pending is None:
            raise LinkError("the link's reader does not show what it holds")
        first += bytes(pending)
        pending.clear()
        if first:
            parser.feed(first)
            received += first
            self._apply(parser, received)
        if reader.at_eof():  # (the primary closed before the stream's first read)
            raise EOFError("connection closed by the master")
        transport = writer.transport
        if not isinstance(transport, _Switchable):  # (asyncio's and uvloop's are)
            raise LinkError("the link's transport cannot change its protocol")
        # (the ACKs and the timeout on a timer of their own: a wait_for around each read
        # made a task and a timer handle per chunk, most of a replica's cost per command)
        keepalive = _Keepalive(self, writer, limit_s)
        applier = _StreamApplier(self, parser, received, transport, self.server.loop)
        try:
            applier.install()
            await applier.done
        except EOFError:
            if keepalive.timed_out:
                raise LinkError("MASTER timeout: no data nor PING received...") from None
            raise
        finally:
            keepalive.cancel()
            if not applier.done.done():  # (stopped: the connection's end is nobody's news)
                applier.done.cancel()

    def _apply(self, parser: CommandSplitter, received: bytearray) -> None:
        """Apply every whole command read; the bytes applied go on to the backlog. They are
        cut from ``received`` by each command's size as canonical RESP, which is what a
        primary sends (no second encoding; ``_flush_applied`` checks the cut)."""
        replayer = self._replayer
        if replayer is None:
            return
        applied = 0  # bytes of received applied and not yet flushed
        keyspace = self.engine.keyspace
        keyspace.loading = True  # the primary's commands find alive what it had alive
        failures: list[tuple[list[bytes], ReplyError]] = []
        started = time.perf_counter()
        try:
            while True:
                try:
                    size, getack = replayer.apply_link_run(parser, failures)
                except StreamGarbage as exc:
                    applied += exc.applied
                    raise LinkError(str(exc)) from None
                finally:
                    for argv, error in failures:
                        self.failed_commands += 1
                        self.last_failed_command = argv[0][:64].decode("utf-8", "replace")
                        log.warning(
                            "== CRITICAL == This replica failed to apply a command of its "
                            "master: %r: -%s %s",
                            [a[:64] for a in argv[:6]],
                            error.code,
                            error.msg,
                        )
                    failures.clear()
                applied += size
                if not getack:
                    break
                replayer.end_of_chunk()
                self._flush_applied(received, applied)
                applied = 0
                self.send_ack()
        finally:
            replayer.end_of_chunk()
            keyspace.loading = False
            self._flush_applied(received, applied)
            self.engine.serve_ready()
            self.server.schedule_flush()
            # (LATENCY's replica-link event: what applying the primary's stream held the loop)
            self.engine.latency.sample("replica-link", (time.perf_counter() - started) * 1000)

    def _flush_applied(self, received: bytearray, size: int) -> None:
        """The first ``size`` bytes of ``received`` were applied: on to the backlog and the
        sub-replicas. A cut that does not end a command means the primary did not send
        canonical RESP (Redis and Headwater always do): what was applied cannot be placed
        in the stream, so the history is dropped (the next sync is a full one) and the link
        stops, rather than offsets drift."""
        if size:
            if received[size - 1] != 0x0A:
                self.repl.state.adopt(new_replid(), 0)
                self.repl.disconnect_peers()
                raise LinkError("Protocol error from master: its stream is not canonical RESP")
            applied = bytes(received[:size])
            del received[:size]
            self.repl.broadcast(applied)
            if self.server.durability.aof.writer is not None:  # (FACK: what to map)
                self._applied.append((self.engine.effect_seq, self.repl.state.offset))
                self._fsynced_offset()  # (drops what a sync covered: the list stays short)

    def send_ack(self) -> None:
        """``REPLCONF ACK <offset> FACK <aofoffset>``: the stream applied, and how much of it
        this server's AOF has fsynced (-1 without the AOF, as Redis 7.2)."""
        writer = self._writer
        if writer is not None and self.connected and not writer.is_closing():
            offset = b"%d" % self.repl.state.offset
            self._facked = self._fsynced_offset()
            fack = b"%d" % self._facked
            writer.write(encode_command([b"REPLCONF", b"ACK", offset, b"FACK", fack]))

    def fsynced(self) -> None:
        """This server's AOF has synced: when that moved the FACK, say so now rather than at
        the next tick (a second later, as Redis's replica): a WAITAOF on the primary counting
        replicas' fsyncs (``appendfsync everysec`` on the replica) waits up to 1 s less."""
        if self.connected and self._fsynced_offset() != self._facked:
            self.send_ack()

    def _fsynced_offset(self) -> int:
        aof = self.server.durability.aof
        if aof.writer is None:
            return -1
        fsynced = aof.fsynced_seq()
        applied = self._applied
        while applied and applied[0][0] <= fsynced:
            self._fsynced = applied.popleft()[1]
        if not applied and self.engine.effect_seq <= fsynced:
            self._fsynced = self.repl.state.offset  # (commands that made no effects)
        return self._fsynced


class _Keepalive:
    """A link's timer: ``REPLCONF ACK`` every ACK_PERIOD_S, and the link cut (its reader
    then sees the end of the stream) once nothing came from the primary for ``limit_s``."""

    def __init__(self, link: ReplicaLink, writer: asyncio.StreamWriter, limit_s: float) -> None:
        self.link = link
        self.writer = writer
        self.limit_s = limit_s
        self.timed_out = False
        self.handle: asyncio.TimerHandle | None = None
        link.send_ack()
        self._arm()

    def _arm(self) -> None:
        self.handle = asyncio.get_running_loop().call_later(ACK_PERIOD_S, self._tick)

    def _tick(self) -> None:
        if time.monotonic() - self.link.last_io > self.limit_s:
            self.timed_out = True
            self.writer.transport.abort()
            return
        self.link.send_ack()
        self._arm()

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


def _bulk_header(header: bytes) -> tuple[int | None, bytes | None]:
    """``$<size>`` or ``$EOF:<40-byte mark>`` (the primary streams the snapshot and ends it
    with the mark, as Redis's diskless sync): (size, None), (None, mark) or (None, None)."""
    if header.startswith(b"$EOF:"):  # (as Redis's replica: the first 40 bytes are the mark)
        mark = header[5 : 5 + EOF_MARK_SIZE]
        return (None, mark) if len(mark) == EOF_MARK_SIZE else (None, None)
    size = _int(header[1:]) if header.startswith(b"$") else None
    return (size, None) if size is not None and size >= 0 else (None, None)


def _find_mark(tail: bytes, chunk: bytes, mark: bytes) -> int | None:
    """Where ``mark`` begins in ``chunk`` (negative: in ``tail``, the bytes before it), or
    None. Only a mark that ends in ``chunk`` counts: one wholly in ``tail`` was looked for
    in the reads before."""
    at = (tail + chunk[: len(mark) - 1]).find(mark)
    if at >= 0:
        return at - len(tail)
    at = chunk.find(mark)
    return at if at >= 0 else None


@runtime_checkable
class _Switchable(Protocol):
    """A transport whose protocol can be changed while it runs (asyncio's and uvloop's)."""

    def get_protocol(self) -> asyncio.BaseProtocol: ...
    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None: ...
    def resume_reading(self) -> None: ...
    def abort(self) -> None: ...


class _SnapshotReceiver(asyncio.BufferedProtocol):
    """The snapshot's bytes read from the socket straight into the ``SnapshotBuffer``: no
    allocation and no copy per read (through the reader, each read allocates twice and copies
    twice, and pieces of 256 KiB and more are fresh pages each time: with 200 MB that was most
    of a full sync's CPU on the replica). It stands in for the link's stream protocol during
    the transfer; once the end has come (``size`` bytes, or the EOF ``mark``) it gives the
    transport back, with the bytes read after the end fed to the reader, and sets ``done``
    to the snapshot's size."""

    def __init__(
        self,
        link: ReplicaLink,
        buffer: SnapshotBuffer,
        size: int | None,
        reader: asyncio.StreamReader,
        transport: _Switchable,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.link = link
        self.buffer = buffer
        self.size = size
        self.reader = reader
        self.transport = transport
        self.original = transport.get_protocol()
        self.done: asyncio.Future[int] = loop.create_future()
        self.done.add_done_callback(_retrieve)  # (a link stopped meanwhile never asks)

    def install(self) -> None:
        self.transport.set_protocol(self)
        self.transport.resume_reading()  # (the reader may have paused it)

    def give_back(self) -> None:
        if self.transport.get_protocol() is self:
            self.transport.set_protocol(self.original)

    def get_buffer(self, sizehint: int) -> memoryview:
        most = SNAPSHOT_READ_SIZE
        if self.size is not None:
            most = min(most, self.size - self.buffer.filled)
        return self.buffer.space(most)

    def buffer_updated(self, nbytes: int) -> None:
        buffer = self.buffer
        buffer.advance(nbytes)
        link = self.link
        link.transfer_read = buffer.filled
        link.last_io = time.monotonic()
        if buffer.size is not None and buffer.filled >= buffer.size:
            self._end(buffer.size)

    def _end(self, size: int) -> None:
        self.give_back()
        rest = self.buffer.after_end
        if rest:
            self.reader.feed_data(bytes(rest))
        if not self.done.done():
            self.done.set_result(size)

    def eof_received(self) -> bool:
        self._lost()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost()
        self.original.connection_lost(exc)

    def _lost(self) -> None:
        if not self.done.done():
            of = "" if self.size is None else f" of {self.size}"
            self.done.set_exception(
                LinkError(
                    "I/O error trying to sync with MASTER: connection lost after "
                    f"{self.buffer.filled}{of} bytes of the snapshot (nothing of it is applied)"
                )
            )


class _StreamApplier(asyncio.Protocol):
    """The link's protocol once the stream flows: each read is fed to the parser and
    applied in ``data_received``. Through the StreamReader, each read cost a future, a task
    step and the reader's own Python, a quarter of a replica's CPU under load. ``done``
    ends with the reason the stream stopped: EOFError when the connection closed (also
    after the keepalive's abort), else what applying raised (then the connection is cut)."""

    def __init__(
        self,
        link: ReplicaLink,
        parser: CommandSplitter,
        received: bytearray,
        transport: _Switchable,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.link = link
        self.parser = parser
        self.received = received
        self.transport = transport
        self.original = transport.get_protocol()
        self.done: asyncio.Future[None] = loop.create_future()

    def install(self) -> None:
        self.transport.set_protocol(self)
        self.transport.resume_reading()  # (the reader may have paused it)

    def data_received(self, data: bytes) -> None:
        if self.done.done():
            return
        link = self.link
        link.last_io = time.monotonic()
        self.parser.feed(data)
        self.received += data
        try:
            link._apply(self.parser, self.received)
        except Exception as exc:  # (LinkError, or a fault: the session ends with it)
            self.done.set_exception(exc)
            self.transport.abort()

    def eof_received(self) -> bool:
        self._lost()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost()
        self.original.connection_lost(exc)

    def _lost(self) -> None:
        if not self.done.done():
            self.done.set_exception(EOFError("connection closed by the master"))


def _buffered(reader: asyncio.StreamReader) -> bytearray | None:
    """What ``reader`` has read and not handed out yet (CPython's StreamReader keeps it in
    ``_buffer``; None where it does not, and the transfer then goes through the reader)."""
    pending = getattr(reader, "_buffer", None)
    return pending if isinstance(pending, bytearray) else None


class ChunkFeed:
    """Bytes handed from the event loop (``put``) to a thread that reads them (iterating):
    each step waits until a chunk is there; the iteration ends after ``finish`` and raises
    the failure given to ``fail``."""

    def __init__(self) -> None:
        self._chunks: deque[bytes] = deque()
        self._changed = threading.Condition()
        self._finished = False
        self._failure: Exception | None = None

    def put(self, data: bytes) -> None:
        with self._changed:
            self._chunks.append(bytes(data))
            self._changed.notify()

    def finish(self) -> None:
        with self._changed:
            self._finished = True
            self._changed.notify()

    def fail(self, exc: Exception) -> None:
        with self._changed:
            self._failure = exc
            self._changed.notify()

    def __iter__(self) -> ChunkFeed:
        return self

    def __next__(self) -> bytes:
        with self._changed:
            while not self._chunks and not self._finished and self._failure is None:
                self._changed.wait()
            if self._failure is not None:
                raise self._failure
            if self._chunks:
                return self._chunks.popleft()
            raise StopIteration


def _retrieve(future: asyncio.Future[Any]) -> None:
    """(A load whose transfer stopped ends with the failure nobody awaits any more.)"""
    if not future.cancelled():
        future.exception()


def _open_temp(path: Path) -> BinaryIO:
    return open(path, "wb")


def _int(raw: bytes) -> int | None:
    try:
        return int(raw)
    except ValueError:
        return None


def _show(raw: bytes) -> str:
    return raw[:128].decode("utf-8", "backslashreplace")
