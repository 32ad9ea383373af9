"""The cluster bus's sockets: the bus port (``cluster-port``, else the client port + 10000),
one outbound link per known node, and the 100 ms cron. What the messages mean is
``headwater.cluster.bus``'s; this module frames them, and does what the rules ask of the
node (its replication, its keys, nodes.conf).
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from typing import TYPE_CHECKING, Any

from headwater.cluster import bus_codec as codec
from headwater.cluster.bus import ClusterBus
from headwater.cluster.nodes_conf import save
from headwater.cluster.state import Cluster, Node
from headwater.commands.cluster import (
    config_path,
    drop_foreign_channels,
    keys_in_db,
    slot_index,
)
from headwater.engine.pause import PAUSE_WRITE
from headwater.server.listen import Listeners

if TYPE_CHECKING:
    from headwater.server.app import Server

log = logging.getLogger("headwater.cluster")

CRON_S = 0.1


class BusLink(asyncio.Protocol):
    """One bus connection: inbound (a peer's link to this node) or outbound (``node``)."""

    def __init__(self, links: ClusterLinks, node: Node | None) -> None:
        self.links = links
        self.node = node
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.peer_ip = ""
        self.local_ip = ""
        self.created_ms = links.now_ms()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        peer = transport.get_extra_info("peername")
        local = transport.get_extra_info("sockname")
        self.peer_ip = peer[0] if peer else ""
        self.local_ip = local[0] if local else ""
        node = self.node
        if node is not None:
            if node.link is not self:  # (dropped while it connected)
                transport.close()
                return
            self.links.bus.link_up(node, self.links.now_ms())
            self.links.after()

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        while len(buffer) >= 8:
            try:
                total = codec.frame_length(bytes(buffer[:8]))
            except codec.BusError as exc:
                log.warning("Dropping a cluster bus link: %s", exc)
                self.close()
                return
            if len(buffer) < total:
                return
            raw = bytes(buffer[:total])
            del buffer[:total]
            try:
                message = codec.decode(raw)
            except codec.BusError as exc:
                log.warning("Ignoring a cluster bus message: %s", exc)
                continue
            self.links.received(self, message)
            if self.transport is None or self.transport.is_closing():
                return

    def connection_lost(self, exc: Exception | None) -> None:
        node = self.node
        if node is not None and node.link is self:
            self.links.bus.link_down(node)
        for known in self.links.cluster.nodes.values():
            if known.inbound is self:
                known.inbound = None
        self.transport = None

    def buffered(self) -> int:
        transport = self.transport
        return transport.get_write_buffer_size() if transport is not None else 0

    def write(self, data: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()


class ClusterLinks:
    """The server's side of the bus (``headwater.cluster.bus.Wire``)."""

    def __init__(self, server: Server, cluster: Cluster) -> None:
        self.server = server
        self.engine = server.engine
        self.cluster = cluster
        config = server.config
        self.bus = ClusterBus(
            cluster, self, lambda: int(config["cluster-node-timeout"]), random.Random()
        )
        self.bus.announced_ip = config["cluster-announce-ip"]
        self.bus.hostname = config["cluster-announce-hostname"]
        self.bus.allow_replica_migration = config["cluster-allow-replica-migration"]
        self.listeners = Listeners(server.loop, lambda: BusLink(self, None))
        self._dirty = False
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def now_ms(self) -> int:
        return int(self.engine.clock.now_ms())  # (wall clock: gossip carries times)

    async def start(self) -> None:
        config = self.server.config
        port = config["cluster-port"] or config["port"] + 10000
        await self.listeners.start(config["bind"], port, config["tcp-backlog"])
        self._timer = self.server.loop.call_later(CRON_S, self._cron)

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self.listeners.close()
        for node in self.cluster.nodes.values():
            if isinstance(node.link, BusLink):
                node.link.close()

    def _cron(self) -> None:
        try:
            config = self.server.config
            self.bus.announced_ip = config["cluster-announce-ip"]
            self.bus.hostname = config["cluster-announce-hostname"]
            self.bus.allow_replica_migration = config["cluster-allow-replica-migration"]
            failover = self.bus.failover
            failover.validity_factor = config["cluster-replica-validity-factor"]
            failover.ping_period_s = config["repl-ping-replica-period"]
            failover.no_failover = config["cluster-replica-no-failover"]
            failover.migration_barrier = config["cluster-migration-barrier"]
            self.bus.cron(self.now_ms())
            if not self.cluster.ok:  # (as Redis: judged again while down, else on changes)
                self._dirty = True
            self.after()
        except Exception:
            log.exception("the cluster bus's cron failed")
        self._timer = self.server.loop.call_later(CRON_S, self._cron)

    def received(self, link: BusLink, message: codec.Message) -> None:
        self.bus.receive(link, link.node, message, self.now_ms())
        if link.node is None:  # (an inbound link: whose it is, once the sender is known)
            sender = self.cluster.nodes.get(message.sender)
            if sender is not None and sender.inbound is not link:
                sender.inbound = link
        self.after()

    def after(self) -> None:
        """What a change asks for: the state judged again, nodes.conf written."""
        if not self._dirty and not self.cluster.changed:
            return
        self._dirty = False
        full = self.server.config["cluster-require-full-coverage"]
        self.cluster.update_state(self.now_ms(), full)
        drop_foreign_channels(self.engine, self.cluster)
        if self.cluster.changed:
            try:
                save(config_path(self.server.config), self.cluster)
            except OSError as exc:
                log.error("Could not save the cluster configuration: %s", exc)

    # -- the Wire ------------------------------------------------------------------------

    def connect(self, node: Node) -> None:
        if not node.ip or not node.cport:
            return
        link = BusLink(self, node)
        node.link = link
        task = self.server.loop.create_task(self._connect(link, node))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _connect(self, link: BusLink, node: Node) -> None:
        loop = self.server.loop
        try:
            await loop.create_connection(lambda: link, node.ip, node.cport)
        except OSError:
            if node.link is link:
                self.bus.link_down(node)
                if not node.ping_sent_ms:  # (failure detection counts from the attempt)
                    node.ping_sent_ms = self.now_ms()

    def disconnect(self, node: Node) -> None:
        link = node.link
        self.bus.link_down(node)
        if isinstance(link, BusLink):
            link.close()

    def send(self, link: Any, message: codec.Message) -> None:
        link.write(codec.encode(message))

    def offset(self) -> int:
        replication = self.engine.replication
        return replication.offset if replication is not None else 0

    def keys_in_slot(self, slot: int) -> int:
        return slot_index(self.engine).count(slot)

    def delete_slot_keys(self, slot: int) -> None:
        client = self.engine.new_client("cluster")
        client.replaying = True  # (obeyed: the slot is no longer this node's)
        for key in keys_in_db(self.engine, slot):
            self.engine.apply(client, [b"DEL", key])
        self.engine.client_closed(client)

    def became_replica(self, master: Node) -> None:
        cluster = self.cluster
        cluster.migrating.clear()
        cluster.importing.clear()
        cluster.set_replica_of(cluster.myself, master)
        replication = self.server.replication
        replication.become_replica_of((master.ip, master.port), False)
        self._dirty = True

    def state_changed(self) -> None:
        self._dirty = True

    def save_now(self) -> None:
        self.cluster.changed = True
        self._dirty = True
        self.after()

    def master_data_age_ms(self) -> int:
        link = self.server.replication.link
        if link is None:
            return 0
        now = time.monotonic()
        since = link.last_io if link.connected else link.down_since
        return int((now - since) * 1000) if since else 0

    def became_master(self) -> None:
        self.server.replication.become_primary_again()
        self._dirty = True

    def pause_writes(self, duration_ms: int) -> None:
        engine = self.engine
        engine.failover_paused = True
        engine.pause_clients(duration_ms, PAUSE_WRITE)

    def deliver(self, channel: bytes, payload: bytes, sharded: bool) -> None:
        pubsub = self.engine.pubsub
        if sharded:
            pubsub.spublish(channel, payload)
        else:
            pubsub.publish(channel, payload)
        self.server.schedule_flush()

    def unpause_writes(self) -> None:
        engine = self.engine
        if engine.failover_paused:
            engine.failover_paused = False
            engine.unpause_clients()
