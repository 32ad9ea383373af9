"""A replica's link to its primary: handshake, full or partial sync, the stream, ACKs.

Theory of operation
-------------------
One task per ``REPLICAOF``, as Redis's replica state machine (replication.c,
``syncWithMaster``): connect; ``PING`` (``+PONG``, or an error about authentication, is a
Redis-protocol server); ``AUTH [masteruser] masterauth`` when set; ``REPLCONF listening-port``
and ``REPLCONF capa eof capa psync2``; then ``PSYNC <replid> <offset+1>`` with the history this
server has (``PSYNC ? -1`` if none). Every failure closes the link with a log line that says
why, and the task tries again a second later; the data served meanwhile is what it was.

* ``+FULLRESYNC <replid> <offset>``: ``$<size>\\r\\n`` and the snapshot follow. They are written
  to a temporary file and loaded into a *fresh* keyspace only once every byte has arrived; if
  the primary vanishes midway, or the file does not load (checksum, structure), nothing of it
  is applied. Only then are the databases swapped, the AOF restarted on the new data (its
  base rewritten, as Redis does after a sync), and the primary's ID and offset adopted.
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
import logging
import os
import time
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

import hiredis

from headwater.engine.replay import Replayer
from headwater.keyspace import Keyspace
from headwater.persistence.snapshot import SnapshotError, load_snapshot
from headwater.replication.state import new_replid, valid_replid
from headwater.resp.encoder import encode_command
from headwater.resp.parser import bulks_size
from headwater.stream.node import Node

if TYPE_CHECKING:
    from headwater.server.app import Server
    from headwater.server.replication import Replication

log = logging.getLogger("headwater")

#: seconds between two attempts to connect
RETRY_S = 1.0
#: seconds between ACKs
ACK_PERIOD_S = 1.0
READ_SIZE = 64 * 1024
#: the snapshot's reads, and the link reader's buffer limit (its default, 64 KiB, made the
#: transfer of a large snapshot run at ~120 MB/s: a loop turn per 64 KiB)
SNAPSHOT_READ_SIZE = 1024 * 1024


class LinkError(Exception):
    """The link must be closed; the message is the log line."""


class ReplicaLink:
    def __init__(self, server: Server, repl: Replication, host: str, port: int) -> None:
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
        #: monotonic seconds of the last byte from the primary, and since when the link is down
        self.last_io = 0.0
        self.down_since = time.monotonic()
        self._task: asyncio.Task[None] | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._replayer: Replayer | None = None
        self._stopped = False
        #: (engine.effect_seq, stream offset) after each batch applied, not known fsynced
        #: yet, and the stream offset known fsynced (FACK)
        self._applied: deque[tuple[int, int]] = deque()
        self._fsynced = 0

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
            await asyncio.sleep(RETRY_S)

    def _close(self) -> None:
        if self.connected:
            log.warning("Connection with master lost.")
        self.connected = False
        self.syncing = False
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

    async def _session(self) -> None:
        limit_s = self.engine.config["repl-timeout"]
        self.role_state = "connecting"
        log.warning("Connecting to MASTER %s:%d", self.host, self.port)
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(self.host, self.port, limit=SNAPSHOT_READ_SIZE), limit_s
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
        writer.write(encode_command([b"PSYNC", replid.encode(), b"%d" % start]))
        reply = await self._line(reader, limit_s)
        if reply.startswith(b"+FULLRESYNC"):
            await self._full_sync(reader, reply, limit_s)
        elif reply.startswith(b"+CONTINUE"):
            self._continue(reply)
        else:
            raise LinkError(f"Unexpected reply to PSYNC from master: {_show(reply)}")
        await self._stream(reader, writer, limit_s)

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
        port = b"%d" % self.engine.config["port"]
        writer.write(encode_command([b"REPLCONF", b"listening-port", port]))
        reply = await self._line(reader, limit_s)
        if not reply.startswith(b"+"):
            log.warning(
                "(Non critical) Master does not understand REPLCONF listening-port: %s",
                _show(reply),
            )
        writer.write(encode_command([b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]))
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

    async def _full_sync(self, reader: asyncio.StreamReader, reply: bytes, limit_s: float) -> None:
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
        size = _int(header[1:]) if header.startswith(b"$") else None
        if size is None or size < 0:
            raise LinkError(
                "Bad protocol from MASTER, the first byte is not '$' (we received "
                f"'{_show(header)}'), are you sure the host and port are right?"
            )
        self.transfer_size, self.transfer_read = size, 0
        path = Path(self.repl.data_dir) / f"temp-{int(time.time())}.{os.getpid()}.hwsnap"
        try:
            await self._receive(reader, path, size, limit_s)
            self._load(path, replid, offset, db)
        finally:
            with contextlib.suppress(OSError):
                path.unlink()
        self.syncing = False

    async def _receive(
        self, reader: asyncio.StreamReader, path: Path, size: int, limit_s: float
    ) -> None:
        with _open_temp(path) as f:
            while self.transfer_read < size:
                chunk = await asyncio.wait_for(
                    reader.read(min(SNAPSHOT_READ_SIZE, size - self.transfer_read)), limit_s
                )
                if not chunk:
                    raise LinkError(
                        "I/O error trying to sync with MASTER: connection lost after "
                        f"{self.transfer_read} of {size} bytes of the snapshot (nothing of it "
                        "is applied)"
                    )
                f.write(chunk)
                self.transfer_read += len(chunk)
                self.last_io = time.monotonic()

    def _load(self, path: Path, replid: str, offset: int, stream_db: int) -> None:
        """The whole snapshot is here: load it beside the data, then swap."""
        engine = self.engine
        durability = self.server.durability
        fresh = Keyspace(len(engine.keyspace.dbs))
        lazy: list[Node] = []
        libraries: list[bytes] = []
        try:
            keys = load_snapshot(path, fresh.dbs, lazy, libraries=libraries)
        except (SnapshotError, OSError) as exc:
            raise LinkError(
                f"Failed trying to load the MASTER synchronization DB from disk: {exc} "
                "(the data served is unchanged)"
            ) from None
        aof_on = durability.aof.writer is not None
        if aof_on:
            durability.stop_aof()
        for db, loaded in zip(engine.keyspace.dbs, fresh.dbs, strict=True):
            db.take_contents(loaded)
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
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, limit_s: float
    ) -> None:
        replayer = self._replayer = Replayer(self.engine)
        master = replayer.client
        master.select(self.repl.stream_db)
        master.is_master = True
        master.addr = f"{self.host}:{self.port}"
        self.role_state = "connected"
        self.connected = True
        self.repl.update_refusal()
        log.warning("MASTER <-> REPLICA link is up")
        parser = hiredis.Reader()
        received = bytearray()  # what the parser was fed and the backlog did not get yet
        # (the ACKs and the timeout on a timer of their own: a wait_for around each read
        # made a task and a timer handle per chunk, most of a replica's cost per command)
        keepalive = _Keepalive(self, writer, limit_s)
        try:
            while True:
                data = await reader.read(READ_SIZE)
                if not data:
                    if keepalive.timed_out:
                        raise LinkError("MASTER timeout: no data nor PING received...")
                    raise EOFError("connection closed by the master")
                self.last_io = time.monotonic()
                parser.feed(data)
                received += data
                self._apply(parser, received)
        finally:
            keepalive.cancel()

    def _apply(self, parser: hiredis.Reader, received: bytearray) -> None:
        """Apply every whole command read; the bytes applied go on to the backlog. They are
        cut from ``received`` by each command's size as canonical RESP, which is what a
        primary sends (no second encoding; ``_flush_applied`` checks the cut)."""
        replayer = self._replayer
        if replayer is None:
            return
        applied = 0  # bytes of received applied and not yet flushed
        keyspace = self.engine.keyspace
        keyspace.loading = True  # the primary's commands find alive what it had alive
        try:
            while True:
                try:
                    argv = parser.gets()
                except hiredis.ProtocolError as exc:
                    raise LinkError(
                        f"Protocol error from master ({exc}): garbage on the replication link"
                    ) from None
                if argv is False:
                    break
                size = bulks_size(argv) if type(argv) is list and argv else -1
                if size < 0:
                    raise LinkError(
                        f"Protocol error from master: {_show(repr(argv).encode())} is not a command"
                    )
                applied += size
                name = argv[0].upper()
                if name == b"PING":
                    continue
                if name == b"REPLCONF" and len(argv) > 1 and argv[1].upper() == b"GETACK":
                    replayer.end_of_chunk()
                    self._flush_applied(received, applied)
                    applied = 0
                    self.send_ack()
                    continue
                error = replayer.apply_streamed(argv)
                if error is not None:
                    log.warning(
                        "== CRITICAL == This replica failed to apply a command of its master: "
                        "%r: -%s %s",
                        [a[:64] for a in argv[:6]],
                        error.code,
                        error.msg,
                    )
        finally:
            replayer.end_of_chunk()
            keyspace.loading = False
            self._flush_applied(received, applied)
            self.engine.serve_ready()
            self.server.schedule_flush()

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
            fack = b"%d" % self._fsynced_offset()
            writer.write(encode_command([b"REPLCONF", b"ACK", offset, b"FACK", fack]))

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


def _open_temp(path: Path) -> BinaryIO:
    return open(path, "wb")


def _int(raw: bytes) -> int | None:
    try:
        return int(raw)
    except ValueError:
        return None


def _show(raw: bytes) -> str:
    return raw[:128].decode("utf-8", "backslashreplace")
