"""Full syncs (the primary's side): a forked child writes the snapshot of the moment, as
BGSAVE does; replicas that ask while it runs share it; once it is written, each replica gets
``$<size>\\r\\n`` and the file a chunk at a time as its transport drains, then the stream that
gathered meanwhile in its buffer (``Peer.pending``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from headwater.commands.context import Client
from headwater.persistence.snapshot import write_snapshot
from headwater.server.children import kill_child

if TYPE_CHECKING:
    from headwater.server.protocol import Connection
    from headwater.server.replication import Replication

log = logging.getLogger("headwater")

#: the snapshot goes to a replica in chunks of this size while its transport holds less than
#: the high-water mark (else it is tried again after BULK_RETRY_S seconds)
BULK_CHUNK = 1024 * 1024
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


class FullSync:
    def __init__(self, repl: Replication) -> None:
        self.repl = repl
        self.child: SyncChild | None = None
        self._temp_seq = 0

    def start(self, peer: Peer) -> None:
        """Give ``peer`` a snapshot: the one being made, or a new one."""
        child = self.child
        if child is not None:  # share the snapshot being made, and what came since
            others = [p for p in child.peers if not p.client.closed]
            peer.pending = bytearray(others[0].pending) if others else bytearray()
            if not others:
                child = None
        if child is None:
            child = self._fork()
        child.peers.append(peer)
        if not peer.old_sync:
            transport = peer.conn.transport
            if transport is not None:
                line = b"+FULLRESYNC %s %d" % (self.repl.state.replid.encode(), child.offset)
                if child.stream_db:
                    line += b" db=%d" % child.stream_db
                transport.write(line + b"\r\n")
        log.warning(
            "Replica %s:%d asks for synchronization: full resync, snapshot at offset %d",
            peer.ip,
            peer.port,
            child.offset,
        )

    def _fork(self) -> SyncChild:
        self._temp_seq += 1
        path = self.repl.data_dir / f"temp-repl-{os.getpid()}-{self._temp_seq}.hwsnap"
        engine = self.repl.engine
        # the stream after the snapshot starts with a SELECT (Redis: slaveseldb = -1)
        self.repl.feed.db = None
        pid = os.fork()
        if pid == 0:  # the child: write the snapshot and leave without running any cleanup
            code = 1
            try:
                write_snapshot(path, engine.keyspace.dbs, engine.scripting.library_codes())
                code = 0
            finally:
                os._exit(code)
        stream_db = self.repl.stream_db_now() if self.repl.master is not None else 0
        self.child = SyncChild(pid, path, self.repl.state.offset, [], stream_db)
        self.repl.server.loop.call_later(CHILD_POLL_S, self._poll_child)
        return self.child

    def _poll_child(self) -> None:
        child = self.child
        if child is None:
            return
        try:
            done, status = os.waitpid(child.pid, os.WNOHANG)
        except ChildProcessError:
            done, status = child.pid, 1 << 8
        if not done:
            self.repl.server.loop.call_later(CHILD_POLL_S, self._poll_child)
            return
        self.child = None
        ok = os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
        for peer in child.peers:
            transport = peer.conn.transport
            if peer.client.closed or transport is None or transport.is_closing():
                continue
            if not ok:
                log.warning("Snapshot for replica %s:%d failed: closing it", peer.ip, peer.port)
                transport.close()
                continue
            try:  # each replica reads its own handle (the file is unlinked below)
                f = open(child.path, "rb")  # noqa: SIM115 (closed by _send_bulk)
                size = os.fstat(f.fileno()).st_size
            except OSError as exc:
                log.warning("Cannot read the snapshot for replicas: %s", exc)
                transport.close()
                continue
            peer.state = "send_bulk"
            transport.write(b"$%d\r\n" % size)
            self._send_bulk(peer, f, size, 0)
        with contextlib.suppress(OSError):
            child.path.unlink()
        self.repl.update_refusal()

    def _send_bulk(self, peer: Peer, f: BinaryIO, size: int, sent: int) -> None:
        """Send the snapshot a chunk at a time while the replica's transport takes it (its
        buffer below ``BULK_HIGH_WATER``), then what the stream added since: the primary's
        memory holds a few chunks, not the whole snapshot."""
        transport = peer.conn.transport
        if peer.client.closed or transport is None or transport.is_closing():
            f.close()
            return
        try:
            while sent < size and transport.get_write_buffer_size() < BULK_HIGH_WATER:
                chunk = f.read(min(BULK_CHUNK, size - sent))
                if not chunk:
                    raise OSError(f"the snapshot file ended after {sent} of {size} bytes")
                transport.write(chunk)
                sent += len(chunk)
        except OSError as exc:
            log.warning("Cannot send the snapshot to replica %s:%d: %s", peer.ip, peer.port, exc)
            f.close()
            transport.close()
            return
        if sent < size:
            self.repl.server.loop.call_later(BULK_RETRY_S, self._send_bulk, peer, f, size, sent)
            return
        f.close()
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
            size,
        )
        self.repl.update_refusal()

    def kill(self) -> None:
        child = self.child
        if child is None:
            return
        kill_child(child.pid)
        with contextlib.suppress(OSError):
            child.path.unlink()
        self.child = None
