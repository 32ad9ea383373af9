"""Full syncs (the primary's side): a forked child writes the snapshot of the moment, as
BGSAVE does, into a temporary file; replicas that ask while it runs share it.

A replica that reads the EOF form (``REPLCONF capa eof``; Headwater's and Redis's do) gets it
while the child writes it, as Redis's diskless sync does: ``$EOF:<40-byte mark>\\r\\n`` at once,
then the file's bytes as they appear in it, and once the child has exited with success and
every byte has gone, the mark. With ``repl-diskless-sync no``, and for a replica without the
capability (or one that asked with SYNC), the transfer waits for the child: ``$<size>\\r\\n`` and
the file. Either way the bytes go a chunk at a time while the replica's transport holds less
than ``BULK_HIGH_WATER``, then the stream that gathered meanwhile in the replica's buffer
(``Peer.pending``). A child that fails closes its replicas' connections: a replica never
applies a snapshot that did not end (the mark, or the size, tells it where the end is).

The file is scratch (no fsync: nothing restarts from it); it is unlinked once the child has
ended, each replica reading through its own descriptor.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from headwater.commands.context import Client
from headwater.persistence.snapshot_write import write_snapshot_to
from headwater.server.children import as_writer_child, kill_child
from headwater.server.rdb_parts import remove_shares, write_rdb_parallel, writers_for
from headwater.server.redis_peer import RedisStream

if TYPE_CHECKING:
    from headwater.server.protocol import Connection
    from headwater.server.replication import Replication

log = logging.getLogger("headwater")

#: the snapshot goes to a replica in chunks of this size while its transport holds less than
#: the high-water mark (else it is tried again after BULK_RETRY_S seconds); below malloc's
#: mmap threshold (128 KiB, as the README advises), so that each chunk's memory is reused
#: instead of being fresh pages (1 MiB chunks cost the primary ~0.3 s of page faults per
#: 200 MB sent)
BULK_CHUNK = 64 * 1024
BULK_HIGH_WATER = 4 * 1024 * 1024
BULK_RETRY_S = 0.005
#: how often the primary checks a full sync's child (seconds)
CHILD_POLL_S = 0.01


@dataclass
class Peer:
    """A replica attached to this server."""

    conn: Connection
    client: Client
    ip: str
    port: int
    #: wait_bgsave (its snapshot is being made), send_bulk (being sent), online (it gets the
    #: stream), dropped (closed for its output-buffer limit)
    state: str
    #: the offset it last acknowledged, and its AOF's (``REPLCONF ACK <off> FACK <aofoff>``)
    ack_offset: int = 0
    aof_offset: int = -1
    #: when it last acknowledged (monotonic seconds)
    ack_time: float = field(default_factory=time.monotonic)
    #: the stream since its snapshot's moment, while it waits for the snapshot
    pending: bytearray = field(default_factory=bytearray)
    #: it asked with SYNC (no +FULLRESYNC line before the payload)
    old_sync: bool = False
    #: stream bytes written to it since its snapshot (the transport's buffer is the snapshot's
    #: unsent part, then these: what the output-buffer limit judges is the stream's share)
    since_snapshot: int = 0
    #: when its stream output first passed the soft limit (monotonic seconds)
    soft_since: float | None = None
    #: it reads the EOF form of the snapshot (``REPLCONF capa eof``), and it gets it
    capa_eof: bool = False
    eof_form: bool = False
    #: it gets Redis's RDB format (a Redis replica, redis-cli --rdb), not a Headwater
    #: snapshot (a Headwater replica says ``capa hwsnap``); and only that file (rdb-only)
    rdb: bool = False
    rdb_only: bool = False
    #: a Redis replica's stream, rewritten for Redis 7.0 with its own offsets (None: a
    #: Headwater replica, which gets the stream as it is)
    redis: RedisStream | None = None
    #: when its snapshot's transfer last moved (monotonic seconds; repl-timeout judges it)
    bulk_progress: float = field(default_factory=time.monotonic)


@dataclass
class SyncChild:
    """A forked child writing a snapshot for replicas."""

    pid: int
    path: Path
    offset: int
    peers: list[Peer]
    #: the database the stream is in at ``offset`` when this server is itself a replica (it
    #: proxies its primary's stream, which need not say it again): sent as ``db=<n>`` after
    #: +FULLRESYNC, where Redis puts it in the RDB (``repl-stream-db``)
    stream_db: int = 0
    #: the EOF form's mark (40 random hex digits, as Redis's)
    mark: bytes = field(default_factory=lambda: os.urandom(20).hex().encode())
    #: None while the child runs; then whether it wrote the whole snapshot
    ok: bool | None = None
    #: the snapshot's size once the child has ended
    size: int = 0
    #: it writes Redis's RDB format (for Redis replicas) rather than a Headwater snapshot
    rdb: bool = False


class FullSync:
    def __init__(self, repl: Replication) -> None:
        self.repl = repl
        #: the child whose snapshot new replicas share (of its format), and every child
        #: still running (a Redis replica and a Headwater one at once need one each)
        self.child: SyncChild | None = None
        self.running: list[SyncChild] = []
        self._temp_seq = 0

    def start(self, peer: Peer) -> None:
        """Give ``peer`` a snapshot: the one being made, or a new one."""
        child = self.child
        if child is not None and child.rdb != peer.rdb:
            child = None  # (the other format: this replica gets a snapshot of its own)
        if child is not None:  # share the snapshot being made, and what came since
            others = [p for p in child.peers if not p.client.closed]
            peer.pending = bytearray(others[0].pending) if others else bytearray()
            twin = others[0].redis if others else None
            peer.redis = twin.clone() if twin is not None else None
            if not others:
                child = None
        if child is None:
            child = self._fork(peer.rdb)
        if peer.rdb and peer.redis is None:
            peer.redis = RedisStream(child.offset)  # (its stream starts at the snapshot's)
        child.peers.append(peer)
        transport = peer.conn.transport
        if not peer.old_sync and transport is not None:
            line = b"+FULLRESYNC %s %d" % (self.repl.state.replid.encode(), child.offset)
            if child.stream_db and not child.rdb:  # (Redis reads it from the RDB's AUX)
                line += b" db=%d" % child.stream_db
            transport.write(line + b"\r\n")
        log.warning(
            "Replica %s:%d asks for synchronization: full resync, snapshot at offset %d%s",
            peer.ip,
            peer.port,
            child.offset,
            " (streamed while it is written)" if self._streams_to(peer) else "",
        )
        if self._streams_to(peer) and transport is not None:
            fd = self._open(child, peer)
            if fd is not None:
                peer.state = "send_bulk"
                peer.bulk_progress = time.monotonic()
                peer.eof_form = True
                transport.write(b"$EOF:%s\r\n" % child.mark)
                self._send_bulk(peer, child, fd, 0)

    def _streams_to(self, peer: Peer) -> bool:
        return peer.capa_eof and not peer.old_sync and self.repl.config["repl-diskless-sync"]

    def _fork(self, rdb: bool) -> SyncChild:
        self._temp_seq += 1
        suffix = "rdb" if rdb else "hwsnap"
        path = self.repl.data_dir / f"temp-repl-{os.getpid()}-{self._temp_seq}.{suffix}"
        engine = self.repl.engine
        # the stream after the snapshot starts with a SELECT (Redis: slaveseldb = -1)
        self.repl.feed.db = None
        stream_db = self.repl.stream_db_now() if self.repl.master is not None else 0
        aux = {
            "repl-stream-db": str(stream_db),
            "repl-id": self.repl.state.replid,
            "repl-offset": str(self.repl.state.offset),
        }
        writers = writers_for(engine.keyspace.total_keys()) if rdb else 1
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        pid = os.fork()
        if pid == 0:  # the child: write the snapshot and leave without running any cleanup
            as_writer_child()
            code = 1
            try:
                with os.fdopen(fd, "wb") as f:
                    libraries = engine.scripting.library_codes()
                    if rdb:
                        write_rdb_parallel(f, engine.keyspace.dbs, libraries, aux, writers, path)
                    else:
                        write_snapshot_to(f, engine.keyspace.dbs, libraries)
                code = 0
            finally:
                os._exit(code)
        os.close(fd)
        self.child = SyncChild(pid, path, self.repl.state.offset, [], stream_db, rdb=rdb)
        self.running.append(self.child)
        log.warning(
            "Background %s for replicas started by pid %d%s",
            "RDB" if rdb else "snapshot",
            pid,
            f" ({writers} writers)" if writers > 1 else "",
        )
        self.repl.server.loop.call_later(CHILD_POLL_S, self._poll_child, self.child)
        return self.child

    def _open(self, child: SyncChild, peer: Peer) -> int | None:
        """The replica's own descriptor of the snapshot file (None: it was closed)."""
        try:
            return os.open(child.path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            log.warning("Cannot read the snapshot for replicas: %s", exc)
            if peer.conn.transport is not None:
                peer.conn.transport.close()
            return None

    def _poll_child(self, child: SyncChild) -> None:
        if child.ok is not None:  # (killed)
            return
        try:
            done, status = os.waitpid(child.pid, os.WNOHANG)
        except ChildProcessError:
            done, status = child.pid, 1 << 8
        if not done:
            self.repl.server.loop.call_later(CHILD_POLL_S, self._poll_child, child)
            return
        if self.child is child:
            self.child = None
        if child in self.running:
            self.running.remove(child)
        ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        try:
            child.size = os.stat(child.path).st_size
        except OSError as exc:
            log.warning("Cannot read the snapshot for replicas: %s", exc)
            ok = False
        child.ok = ok
        if ok:
            log.warning("Snapshot for replicas written by pid %d: %d bytes", child.pid, child.size)
        for peer in child.peers:
            transport = peer.conn.transport
            if peer.client.closed or transport is None or transport.is_closing():
                continue
            if not ok:
                log.warning("Snapshot for replica %s:%d failed: closing it", peer.ip, peer.port)
                transport.close()
            elif peer.state == "wait_bgsave":
                fd = self._open(child, peer)
                if fd is not None:
                    peer.state = "send_bulk"
                    peer.bulk_progress = time.monotonic()
                    transport.write(b"$%d\r\n" % child.size)
                    self._send_bulk(peer, child, fd, 0)
        with contextlib.suppress(OSError):
            child.path.unlink()
        remove_shares(child.path)
        self.repl.update_refusal()

    def _send_bulk(self, peer: Peer, child: SyncChild, fd: int, sent: int) -> None:
        """Send the snapshot a chunk at a time while the replica's transport takes it (its
        buffer below ``BULK_HIGH_WATER``) and the file has bytes not sent yet, then (the
        EOF form) the mark, then what the stream added since: the primary's memory holds a
        few chunks, not the whole snapshot."""
        transport = peer.conn.transport
        if peer.client.closed or transport is None or transport.is_closing() or child.ok is False:
            os.close(fd)
            return
        try:
            while transport.get_write_buffer_size() < BULK_HIGH_WATER:
                end = child.size if child.ok else os.fstat(fd).st_size
                if sent >= end:  # (it has all there is: waiting is not its doing)
                    peer.bulk_progress = time.monotonic()
                    break
                chunk = os.pread(fd, min(BULK_CHUNK, end - sent), sent)
                if not chunk:
                    raise OSError(f"the snapshot file ended after {sent} of {end} bytes")
                transport.write(chunk)
                sent += len(chunk)
                peer.bulk_progress = time.monotonic()
        except OSError as exc:
            log.warning("Cannot send the snapshot to replica %s:%d: %s", peer.ip, peer.port, exc)
            os.close(fd)
            transport.close()
            return
        if not child.ok or sent < child.size:
            loop = self.repl.server.loop
            loop.call_later(BULK_RETRY_S, self._send_bulk, peer, child, fd, sent)
            return
        os.close(fd)
        if peer.eof_form:
            transport.write(child.mark)
        if peer.rdb_only:  # (redis-cli --rdb: the file was all it asked for)
            log.warning("Snapshot sent to %s:%d (rdb-only): closing it", peer.ip, peer.port)
            transport.close()
            return
        if peer.pending:
            transport.write(bytes(peer.pending))
        peer.since_snapshot = len(peer.pending)
        peer.pending = bytearray()
        peer.state = "online"
        peer.ack_time = time.monotonic()
        log.warning(
            "Synchronization with replica %s:%d succeeded (%d bytes of snapshot)",
            peer.ip,
            peer.port,
            child.size,
        )
        self.repl.update_refusal()

    def check_timeouts(self, peers: list[Peer], timeout_s: float) -> None:
        """From the cron: a replica whose snapshot has not moved for ``timeout_s`` seconds
        (it stopped reading, its host froze) is disconnected, as Redis does (``repl-timeout``,
        "Disconnecting timedout replica (full sync)"); else it would hold its transfer, and
        the file, forever."""
        now = time.monotonic()
        for peer in peers:
            if peer.state == "send_bulk" and now - peer.bulk_progress > timeout_s:
                log.warning("Disconnecting timedout replica (full sync): %s:%d", peer.ip, peer.port)
                if peer.conn.transport is not None:
                    peer.conn.transport.abort()

    def kill(self) -> None:
        for child in self.running:
            kill_child(child.pid)
            child.ok = False  # (its transfers stop at their next chunk)
            with contextlib.suppress(OSError):
                child.path.unlink()
            remove_shares(child.path)
        self.running.clear()
        self.child = None
