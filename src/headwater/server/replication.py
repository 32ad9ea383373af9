"""Replication in a server: the primary's side (replicas attached by SYNC/PSYNC, the full sync,
the stream, ACKs, WAIT, min-replicas) and the switch between roles (REPLICAOF). The replica's
side, the link to a primary, is ``ReplicaLink`` (replica_link.py).

Theory of operation
-------------------
The replication stream is the effects the AOF gets: a sink in ``engine.effect_sinks`` (an
``EffectLog``, the AOF's encoder, with its ``SELECT`` before each change of database) gathers
them while this server is a primary with a backlog (from the first replica on, as Redis
creates its backlog). Once per loop turn ``flush`` moves what gathered into the backlog and
writes it to every replica that is online; a replica waiting for its snapshot collects it in
its own buffer meanwhile. A replica does not make a stream of its own: the bytes its primary
sends are applied and then proxied, as they are, into its backlog and to its own replicas,
so that every server names the same byte by the same (replication ID, offset) and a promoted
replica can continue the others' streams (PSYNC2).

Full sync: ``PSYNC`` with an unknown history or an offset the backlog no longer holds gets
``+FULLRESYNC <replid> <offset>``; a forked child writes the snapshot of that moment (as
BGSAVE does) to a temporary file, which goes to the replica while it is written (the EOF
form, ``$EOF:<mark>``) or once it is (``$<size>``), then what the stream added since
(repl_sync.py). Replicas that ask while a child runs share its snapshot. Partial resync:
``+CONTINUE <replid>`` and the backlog from the replica's offset on.

ACKs: every replica sends ``REPLCONF ACK <offset>`` each second (and when asked by ``REPLCONF
GETACK *``, which WAIT puts in the stream); its offset and the time of its last ACK (its lag)
decide WAIT and ``min-replicas-to-write``.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING

from headwater.commands.context import Block, Client
from headwater.engine.pause import Held
from headwater.errors import NOT_INTEGER, ReplyError, err
from headwater.persistence.effect_log import EffectLog
from headwater.replication.hold import TimedHold
from headwater.replication.state import ReplicationState, new_replid, valid_replid
from headwater.resp.encoder import encode_command
from headwater.resp.types import Raw, Reply, Status
from headwater.server.failover import NO_FAILOVER, Failover
from headwater.server.redis_peer import RedisStream, continues_unchanged
from headwater.server.repl_sync import FullSync, Peer
from headwater.server.repl_wait import Waits

if TYPE_CHECKING:
    from headwater.server.hosts import LinkHost
    from headwater.server.protocol import Connection
    from headwater.server.replica_link import ReplicaLink

log = logging.getLogger("headwater")

READONLY = ReplyError("READONLY", "You can't write against a read only replica.")
NOREPLICAS = ReplyError("NOREPLICAS", "Not enough good replicas to write.")
MASTERDOWN = ReplyError(
    "MASTERDOWN", "Link with MASTER is down and replica-serve-stale-data is set to 'no'."
)
NOMASTERLINK = ReplyError("NOMASTERLINK", "Can't SYNC while not connected with my master")
NO_REPLY = Raw(b"")
UNBLOCKED_ROLE = ReplyError(
    "UNBLOCKED",
    "force unblock from blocking operation, instance state changed (master -> replica?)",
)
GETACK = encode_command([b"REPLCONF", b"GETACK", b"*"])
PING = encode_command([b"PING"])
#: the names of a full sync's snapshot files (repl_sync.py's, replica_link.py's)
STALE_SYNC_FILE = re.compile(r"temp-(repl-\d+-\d+|\d+\.\d+)\.hwsnap")
#: the replication ID and offset a clean shutdown leaves in the data directory
STATE_FILE = "replication.state"


class Replication:
    def __init__(self, server: LinkHost, data_dir: str) -> None:
        self.server = server
        self.engine = engine = server.engine
        self.config = engine.config
        self.data_dir = Path(data_dir)
        self.state = ReplicationState(self.config["repl-backlog-size"])
        #: the effects of this turn, encoded for the stream (while ``feeding``)
        self.feed = EffectLog(for_replicas=True)
        self.feeding = False
        #: whether this turn's stream goes out now or with the next turns' (hold.py)
        self.hold = TimedHold(self.config["repl-stream-hold-us"], self._hold_ended)
        #: the backlog exists (Redis creates it with the first replica)
        self.backlog_active = False
        #: what save_state writes, taken as the server stops (``close``)
        self.state_at_close: str | None = None
        self.peers: list[Peer] = []
        #: what replicas said with REPLCONF before their PSYNC, by client id
        self.handshakes: dict[int, dict[str, str]] = {}
        #: full syncs: the snapshot child and the transfers
        self.full_sync = FullSync(self)
        #: the primary this server replicates (None: it is a primary) and its link
        self.master: tuple[str, int] | None = None
        self.link: ReplicaLink | None = None
        #: the database the primary's stream is in (kept across a cut: a partial resync
        #: goes on where the stream was, without a SELECT)
        self.stream_db = 0
        #: clients in WAIT and WAITAOF
        self.waits = Waits(self)
        self._getack_due = False
        self._last_ping = time.monotonic()
        #: FAILOVER (server/failover.py)
        self.failover = Failover(self)
        engine.replication = self
        self.config.listeners.append(self._config_changed)

    @property
    def state_path(self) -> Path:
        return self.data_dir / STATE_FILE

    def start(self) -> None:
        """At startup: the history a clean shutdown left (as Redis's RDB keeps its
        replication ID and offset), then the ``replicaof`` directive."""
        self._load_state()
        self._remove_stale_files()
        target = self.config["replicaof"]
        if target is not None:
            self._become_replica(target)
        self.update_refusal()

    def _remove_stale_files(self) -> None:
        """Snapshots for or from a full sync that a crash left behind (the primary's child
        writes ``temp-repl-<pid>-<n>.hwsnap``, a replica receives into ``temp-<time>.<pid>
        .hwsnap``): nothing ever reads them again."""
        for path in self.data_dir.glob("temp-*.hwsnap"):
            if STALE_SYNC_FILE.fullmatch(path.name):
                with contextlib.suppress(OSError):
                    path.unlink()
                    log.warning("Removed %s, left by a full sync that did not end", path.name)

    def close(self) -> None:
        """Shutdown: the link stops applying, so the state to save is taken first (a stopped
        link reads as a replica between syncs)."""
        self.state_at_close = self._state_text()
        if self.link is not None:
            self.link.stop()
        self.full_sync.kill()
        self.flush(force=True)

    def _state_text(self) -> str | None:
        """Our replication ID, offset and stream database now, or None when the data is at
        no offset we could name."""
        if self.master is not None:
            if self.link is None or not self.link.connected:
                return None  # a replica between syncs
        elif not self.backlog_active:
            return None  # no replication history (no replica ever attached)
        return f"{self.state.replid} {self.offset} {self.stream_db_now()}\n"

    def save_state(self) -> None:
        """At a clean shutdown whose data is on disk (the AOF, closed): the state ``close``
        took, so that the restarted server continues its history (its replicas, or its new
        primary, resync partially). A crash leaves no such file: the data on disk may then be
        behind or ahead of any offset we could name."""
        text = self.state_at_close
        if text is None:
            return
        try:
            tmp = self.state_path.with_suffix(".tmp")
            tmp.write_text(text)
            os.replace(tmp, self.state_path)
        except OSError as exc:
            log.warning("Cannot save the replication state: %s", exc)

    def stream_db_now(self) -> int:
        if self.master is None:
            return self.feed.db or 0  # (None: the next effect says its database anyway)
        if self.link is not None and self.link.connected:
            return self.link.stream_db()
        return self.stream_db

    def _load_state(self) -> None:
        path = self.state_path
        try:
            text = path.read_text()
        except FileNotFoundError:
            return
        except OSError as exc:
            log.warning("Cannot read the replication state %s: %s", path, exc)
            return
        finally:
            with contextlib.suppress(OSError):
                path.unlink()  # used once: a later crash must not find it
        parts = text.split()
        if len(parts) != 3 or not valid_replid(parts[0]) or not all(map(str.isdigit, parts[1:])):
            log.warning("Ignoring the unreadable replication state %s", path)
            return
        self.state.adopt(parts[0], int(parts[1]))
        self.stream_db = int(parts[2])
        self.backlog_active = True
        if self.master is None and self.config["replicaof"] is None:
            self._start_feeding()
        log.warning("Replication history restored: %s at offset %s", parts[0], parts[1])

    # -- the stream ------------------------------------------------------------------------

    def _start_feeding(self) -> None:
        if not self.feeding:
            self.feed.db = None  # the stream's next effect says its database
            self.engine.effect_sinks.append(self.feed.append)
            self.feeding = True

    def _stop_feeding(self) -> None:
        if self.feeding:
            self.flush(force=True)
            self.engine.effect_sinks.remove(self.feed.append)
            self.feeding = False

    def _activate_backlog(self) -> None:
        if not self.backlog_active:
            self.backlog_active = True
            if self.master is None:
                self._start_feeding()

    def flush(self, force: bool = False) -> None:
        """Once per loop turn: the effects gathered go to the backlog and the replicas, or
        wait up to ``repl-stream-hold-us`` to go with the next turns' (hold.py). ``force``:
        now, before what must follow them (a PING, a new replica's sync, a change of role)."""
        buf = self.feed.buf
        if buf and (
            force
            or self.waits.waiting
            or self._getack_due
            or not self.hold.held(self.server.loop, len(buf))
        ):
            data = bytes(buf)
            buf.clear()
            self.hold.sent(self.server.loop)
            self.broadcast(data)
            self.waits.turn_fed(self.engine.effect_seq, self.state.offset)
        if self._getack_due:
            self._getack_due = False
            if self.peers and self.master is None:
                self.broadcast(GETACK)
        if self.waits.waiting:  # (WAITAOF: the local fsync may have moved)
            self.waits.check()

    def _hold_ended(self) -> None:
        self.flush(force=True)

    def broadcast(self, data: bytes) -> None:
        """Bytes of the stream: into the backlog, to the replicas online, into the buffers
        of those waiting for their snapshot."""
        self.state.backlog.feed(data)
        for peer in self.peers:
            out = data if peer.redis is None else peer.redis.translate(data)
            if peer.state == "online":
                transport = peer.conn.transport
                if transport is not None and not transport.is_closing():
                    transport.write(out)
                    peer.since_snapshot += len(out)
                    self._check_output_limit(peer)
            elif peer.state in ("wait_bgsave", "send_bulk"):
                peer.pending += out
                if len(peer.pending) > self._limits()[0] > 0:
                    self._drop(peer, len(peer.pending))

    def _limits(self) -> tuple[int, int, int]:
        limits: dict[str, tuple[int, int, int]] = self.config["client-output-buffer-limit"]
        return limits["slave"]

    def _check_output_limit(self, peer: Peer) -> None:
        """``client-output-buffer-limit replica`` (Redis: 256mb hard, 64mb for 60 s soft) on
        what of the stream the replica has not read; the snapshot's transfer does not count."""
        transport = peer.conn.transport
        if transport is None or transport.is_closing():
            return
        size = min(transport.get_write_buffer_size(), peer.since_snapshot)
        hard, soft, seconds = self._limits()
        if hard and size >= hard:
            self._drop(peer, size)
        elif soft and size >= soft:
            now = time.monotonic()
            if peer.soft_since is None:
                peer.soft_since = now
            elif now - peer.soft_since >= seconds:
                self._drop(peer, size)
        else:
            peer.soft_since = None

    def _drop(self, peer: Peer, size: int) -> None:
        log.warning(
            "Client id=%d (replica %s:%d) scheduled to be closed ASAP for overcoming of output "
            "buffer limits (%d bytes of the stream unread).",
            peer.client.id,
            peer.ip,
            peer.port,
            size,
        )
        self.engine.stats.client_output_buffer_limit_disconnections += 1
        if peer.conn.transport is not None:
            peer.conn.transport.abort()
        peer.state = "dropped"  # (counted out at once; the cron forgets it)

    def request_acks(self) -> None:
        """Ask every replica for an ACK now (``REPLCONF GETACK *`` at the end of the turn)."""
        self._getack_due = True
        self.server.schedule_flush()

    @property
    def due(self) -> bool:
        """Stream bytes wait for ``flush``."""
        return bool(self.feed.buf) or self._getack_due

    @property
    def offset(self) -> int:
        """master_repl_offset, with what this turn gathered."""
        return self.state.offset + len(self.feed.buf)

    # -- the primary's commands ------------------------------------------------------------

    def replconf(self, c: Client, args: list[bytes]) -> Reply:
        conf = self.handshakes.setdefault(c.id, {})
        for i in range(0, len(args), 2):
            option, value = args[i].lower(), args[i + 1]
            if option == b"listening-port":
                port = _int(value)
                if port is None:
                    raise NOT_INTEGER
                conf["port"] = str(port)
            elif option == b"ip-address":
                conf["ip"] = value.decode("utf-8", "replace")
            elif option == b"capa":
                conf["capa"] = conf.get("capa", "") + " " + value.decode("utf-8", "replace")
            elif option == b"ack":
                self._ack(c, args[i + 1 :])
                return NO_REPLY
            elif option == b"getack":
                if self.link is not None:
                    self.link.send_ack()
                return NO_REPLY
            elif option == b"rdb-only":  # (redis-cli --rdb: the file, then the connection ends)
                conf["rdb-only"] = "1" if value == b"1" else ""
            elif option == b"rdb-filter-only":
                pass
            else:
                raise err(f"Unrecognized REPLCONF option: {args[i].decode('utf-8', 'replace')}")
        return Status(b"OK")

    def _continuation(self, c: Client, replid: str, offset: int) -> bytes | None:
        """What PSYNC's continuation sends (the backlog from ``offset``), or None: our
        history lacks the offset, or (a Redis replica) what it missed would not reach it
        unchanged, so that its offsets would no longer be ours."""
        if not self.state.can_continue(replid, offset):
            return None
        backlog = self.state.backlog.read_from(offset)
        capas = self.handshakes.get(c.id, {}).get("capa", "").split()
        return backlog if "hwsnap" in capas or continues_unchanged(backlog) else None

    def _ack(self, c: Client, args: list[bytes]) -> None:
        """``REPLCONF ACK <offset> [FACK <aofoffset>]`` from an attached replica."""
        peer = self._peer_of(c)
        offset = _int(args[0]) if args else None
        if peer is None or offset is None:
            return
        if peer.redis is not None:  # (its count of bytes, in the primary's terms)
            offset = peer.redis.primary_for(offset)
        if offset > peer.ack_offset:
            peer.ack_offset = offset
        if len(args) >= 3 and args[1].lower() == b"fack":
            fack = _int(args[2])
            if fack is not None and fack > peer.aof_offset:
                peer.aof_offset = fack
        peer.ack_time = time.monotonic()
        self.waits.check()
        self.update_refusal()
        self.failover.check()

    def psync(self, c: Client, replid: str, offset: int | None, failover: bool = False) -> Reply:
        """PSYNC (``offset`` given) or SYNC (None). ``failover``: PSYNC … FAILOVER from a
        primary handing its role to this replica (server/failover.py)."""
        if c.is_replica:
            return NO_REPLY
        if failover:
            self._take_over(c, replid, offset)
        if self.failover.state != NO_FAILOVER:
            raise ReplyError("NOMASTERLINK", "Can't SYNC while failing over")
        if self.master is not None and (self.link is None or not self.link.connected):
            raise NOMASTERLINK
        conn = self.server.connections.get(c)
        if conn is None or conn.transport is None:
            raise err("PSYNC needs a network client")
        self._activate_backlog()
        self.flush(force=True)
        conn.send()  # replies queued before this one leave first
        stats = self.engine.stats
        backlog = None if offset is None else self._continuation(c, replid, offset)
        if backlog is not None:
            peer = self._attach(conn, c, "online")
            if peer.rdb:
                peer.redis = RedisStream(self.state.offset)
            conn.transport.write(b"+CONTINUE %s\r\n" % self.state.replid.encode() + backlog)
            stats.sync_partial_ok += 1
            log.warning(
                "Partial resynchronization request from %s:%d accepted. Sending %d bytes of "
                "backlog starting from offset %d.",
                peer.ip,
                peer.port,
                len(backlog),
                offset,
            )
            return NO_REPLY
        if offset is not None and replid != "?":
            stats.sync_partial_err += 1
            log.warning(
                "Partial resynchronization not accepted: replid %s offset %d (ours: %s %d, "
                "backlog from %d)",
                replid,
                offset,
                self.state.replid,
                self.state.offset,
                self.state.backlog.first_byte_offset,
            )
        stats.sync_full += 1
        peer = self._attach(conn, c, "wait_bgsave")
        peer.old_sync = offset is None
        self.full_sync.start(peer)
        return NO_REPLY

    def _take_over(self, c: Client, replid: str, offset: int | None) -> None:
        """The primary hands its role over (Redis's syncCommand, PSYNC … FAILOVER): this
        replica becomes the primary, its history going on under a new ID."""
        if self.master is None:
            raise err("PSYNC FAILOVER can't be sent to a master.")
        if replid != self.state.replid:
            raise err("PSYNC FAILOVER replid must match my replid.")
        self._become_primary()
        log.warning("Failover request received for replid %s, offset %s.", replid, offset)

    def _attach(self, conn: Connection, c: Client, state: str) -> Peer:
        conf = self.handshakes.pop(c.id, {})
        host = c.addr.rsplit(":", 1)[0].strip("[]")
        peer = Peer(conn, c, conf.get("ip", host), int(conf.get("port", "0")), state)
        capas = conf.get("capa", "").split()
        peer.capa_eof = "eof" in capas
        # (a Headwater replica says it reads Headwater's snapshots; Redis gets an RDB file)
        peer.rdb = "hwsnap" not in capas
        peer.rdb_only = bool(conf.get("rdb-only"))
        c.is_replica = True
        c.reply_on = False  # nothing but the stream goes to a replica (Redis: no replies)
        self.peers.append(peer)
        self.update_refusal()
        return peer

    def _peer_of(self, c: Client) -> Peer | None:
        for peer in self.peers:
            if peer.client is c:
                return peer
        return None

    def disconnect_peers(self) -> None:
        """Close every attached replica (our history changed: they reconnect and resync)."""
        for peer in self.peers:
            transport = peer.conn.transport
            if transport is not None:
                transport.close()
        self.peers.clear()
        self.update_refusal()

    # -- WAIT and WAITAOF (repl_wait.py) --------------------------------------------------

    def wait(self, c: Client, replicas: int, timeout_ms: int) -> Reply | Block:
        return self.waits.wait(c, replicas, timeout_ms)

    def waitaof(self, c: Client, local: int, replicas: int, timeout_ms: int) -> Reply | Block:
        return self.waits.waitaof(c, local, replicas, timeout_ms)

    # -- roles -----------------------------------------------------------------------------

    def history_lost(self) -> None:
        """The data was loaded again from disk (a roll-back after a lasting AOF write error
        dropped effects the replicas may have): a new history, no second ID, the replicas
        disconnected, so that they come back with a full sync (Redis: changeReplicationId
        and clearReplicationId2)."""
        if self.master is not None:
            # a replica no longer has what its offset claims: a full sync, from scratch
            self.state.adopt(new_replid(), 0)
            self.backlog_active = False
            self.disconnect_peers()
            self.cut_link()
            log.warning("Data reloaded from disk: the link to the primary starts over")
            return
        self.feed.buf.clear()
        self.state.replid = new_replid()
        self.state.clear_replid2()
        self.feed.db = None
        self.disconnect_peers()
        log.warning("Data reloaded from disk: new replication ID %s", self.state.replid)

    def cut_link(self) -> None:
        if self.link is not None:
            self.link.cut()

    def is_replica(self) -> bool:
        return self.master is not None

    def backlog_size(self) -> int:
        return self.state.backlog.size if self.backlog_active else 0

    def replicaof(self, c: Client, target: tuple[str, int] | None) -> Reply:
        if self.failover.state != NO_FAILOVER:
            raise err("REPLICAOF not allowed while failing over.")
        who = f"id={c.id} addr={c.addr} laddr={c.laddr}"
        if target is None:
            if self.master is not None:
                self._become_primary()
                log.warning("MASTER MODE enabled (user request from '%s')", who)
            return Status(b"OK")
        if self.master == target:
            log.warning(
                "REPLICAOF would result into synchronization with the master we are already "
                "connected with. No operation performed."
            )
            return Status(b"OK Already connected to specified master")
        self._become_replica(target)
        log.warning("REPLICAOF %s:%d enabled (user request from '%s')", *target, who)
        return Status(b"OK")

    def become_replica_of(self, target: tuple[str, int], failover: bool) -> None:
        """FAILOVER's switch: a replica of ``target``, whose link asks it to take over."""
        self._become_replica(target, failover)
        log.warning("REPLICAOF %s:%d enabled (failover)", *target)

    def become_primary_again(self) -> None:
        """An aborted switch: a primary again, under a new replication ID (Redis's
        replicationUnsetMaster)."""
        if self.master is not None:
            self._become_primary()
            log.warning("MASTER MODE enabled (failover aborted)")

    def failover_command(
        self, target: tuple[str, int] | None, timeout_ms: int, force: bool, abort: bool
    ) -> Reply:
        if abort:
            return self.failover.abort_command()
        return self.failover.start(target, timeout_ms, force)

    def _become_replica(self, target: tuple[str, int], failover: bool = False) -> None:
        from headwater.server.replica_link import ReplicaLink

        if self.link is not None:
            self.link.stop()
        self._stop_feeding()
        self.disconnect_peers()
        self.full_sync.kill()
        self.master = target
        self.config.values["replicaof"] = target
        self._unblock_all()
        self.link = ReplicaLink(self.server, self, *target)
        self.link.failover = failover
        self.link.start()
        self.update_refusal()

    def _unblock_all(self) -> None:
        """Becoming a replica ends every wait (Redis: disconnectAllBlockedClients): an
        XREADGROUP that ran later would change the group here, not on the primary."""
        for client in list(self.engine.clients.values()):
            blocked = client.gate.blocked
            # (a command held by a pause is not under way: it runs, or is refused, when the
            # pause ends, as Redis's postponed clients)
            if blocked is not None and type(blocked) is not Held:
                self.engine.end_wait(client, UNBLOCKED_ROLE)
        for request in list(self.waits.waiting):
            self.waits.end(request)
        self.server.schedule_flush()

    def _become_primary(self) -> None:
        if self.link is not None:
            self.link.stop()
            self.link = None
        self.master = None
        self.config.values["replicaof"] = None
        self.state.shift_replid()
        self.disconnect_peers()
        self.full_sync.kill()
        if self.backlog_active:
            self._start_feeding()
        self.update_refusal()

    def role(self) -> Reply:
        if self.master is None:
            online = [p for p in self.peers if p.state == "online"]
            replicas = [[p.ip.encode(), b"%d" % p.port, b"%d" % p.ack_offset] for p in online]
            return [b"master", self.offset, replicas]
        link = self.link
        state = link.role_state if link is not None else "connect"
        offset = self.state.offset if link is not None and link.connected else -1
        host, port = self.master
        return [b"slave", host.encode(), port, state.encode(), offset]

    # -- what INFO shows, and whether writes are refused -----------------------------------

    def info_lines(self) -> list[str]:
        lines: list[str] = []
        now = time.monotonic()
        if self.master is None:
            lines.append("role:master")
        else:
            lines.append("role:slave")
            lines.extend(self._replica_info(now, self.master))
        lines.append(f"connected_slaves:{len(self.peers)}")
        for n, peer in enumerate(self.peers):
            lag = int(now - peer.ack_time)
            lines.append(
                f"slave{n}:ip={peer.ip},port={peer.port},state={peer.state},"
                f"offset={peer.ack_offset},lag={lag}"
            )
        backlog = self.state.backlog
        lines += [
            f"master_failover_state:{self.failover.state}",
            f"master_replid:{self.state.replid}",
            f"master_replid2:{self.state.replid2}",
            f"master_repl_offset:{self.offset}",
            f"second_repl_offset:{self.state.second_repl_offset}",
            f"repl_backlog_active:{int(self.backlog_active)}",
            f"repl_backlog_size:{backlog.size}",
            f"repl_backlog_first_byte_offset:{backlog.first_byte_offset}",
            f"repl_backlog_histlen:{backlog.histlen}",
        ]
        return lines

    def _replica_info(self, now: float, master: tuple[str, int]) -> list[str]:
        link = self.link
        up = link is not None and link.connected
        last_io = int(now - link.last_io) if link is not None and link.last_io else -1
        lines = [
            f"master_host:{master[0]}",
            f"master_port:{master[1]}",
            f"master_link_status:{'up' if up else 'down'}",
            f"master_last_io_seconds_ago:{last_io if up else -1}",
            f"master_sync_in_progress:{int(link is not None and link.syncing)}",
            f"slave_read_repl_offset:{self.state.offset}",
            f"slave_repl_offset:{self.state.offset}",
        ]
        if link is not None and link.syncing:
            total, read = link.transfer_size, link.transfer_read
            lines += [
                f"master_sync_total_bytes:{total}",
                f"master_sync_read_bytes:{read}",
                f"master_sync_left_bytes:{total - read}",
                f"master_sync_perc:{read * 100 / total if total else 0:.2f}",
                f"master_sync_last_io_seconds_ago:{last_io}",
            ]
        if not up:
            down = int(now - link.down_since) if link is not None and link.down_since else -1
            lines.append(f"master_link_down_since_seconds:{down}")
        lines += [
            f"slave_priority:{self.config['replica-priority']}",
            f"slave_read_only:{int(self.config['replica-read-only'])}",
            "replica_announced:1",
        ]
        if link is not None and link.failed_commands:  # (Headwater's own: a divergence)
            lines += [
                f"master_link_failed_commands:{link.failed_commands}",
                f"master_link_last_failed_command:{link.last_failed_command}",
            ]
        return lines

    def update_refusal(self) -> None:
        """READONLY on a read-only replica; NOREPLICAS on a primary with fewer good replicas
        than ``min-replicas-to-write`` (good: online, lag at most ``min-replicas-max-lag``);
        MASTERDOWN on a replica whose link is down with ``replica-serve-stale-data no``."""
        refusal: ReplyError | None = None
        config = self.config
        self.engine.keyspace.replica = self.master is not None
        stale = self.master is not None and (self.link is None or not self.link.connected)
        serve_stale = config["replica-serve-stale-data"]
        self.engine.stale_refusal = MASTERDOWN if stale and not serve_stale else None
        if self.master is not None:
            if config["replica-read-only"]:
                refusal = READONLY
        elif config["min-replicas-to-write"] and config["min-replicas-max-lag"]:
            max_lag = config["min-replicas-max-lag"]
            now = time.monotonic()
            good = sum(1 for p in self.peers if p.state == "online" and now - p.ack_time <= max_lag)
            if good < config["min-replicas-to-write"]:
                refusal = NOREPLICAS
        self.engine.replication_refusal = refusal

    def _config_changed(self, name: str, value: object) -> None:
        if name == "repl-backlog-size":
            self.state.backlog.resize(int(value))  # type: ignore[call-overload]
        elif name == "repl-stream-hold-us":
            self.hold.policy.hold_s = int(value) / 1e6  # type: ignore[call-overload]
        elif name in (
            "replica-read-only",
            "replica-serve-stale-data",
            "min-replicas-to-write",
            "min-replicas-max-lag",
        ):
            self.update_refusal()

    # -- the cron --------------------------------------------------------------------------

    def cron(self) -> None:
        now = time.monotonic()
        self.peers = [p for p in self.peers if not p.client.closed and p.state != "dropped"]
        for client_id in [i for i in self.handshakes if i not in self.engine.clients]:
            del self.handshakes[client_id]
        if self.master is None and self.peers:
            if now - self._last_ping >= self.config["repl-ping-replica-period"]:
                self._last_ping = now
                self.flush(force=True)
                self.broadcast(PING)
            timeout = self.config["repl-timeout"]
            self.full_sync.check_timeouts(self.peers, timeout)
            for peer in self.peers:
                if peer.state == "online":
                    self._check_output_limit(peer)
                if peer.state == "online" and now - peer.ack_time > timeout:
                    log.warning("Disconnecting timedout replica %s:%d", peer.ip, peer.port)
                    if peer.conn.transport is not None:
                        peer.conn.transport.close()
        self.waits.check()
        self.update_refusal()
        self.failover.check()
        self.flush()


def _int(raw: bytes) -> int | None:
    try:
        return int(raw)
    except ValueError:
        return None
