"""The cluster bus's rules (Redis 7.0's clusterProcessPacket, clusterSendPing and the bus
part of clusterCron): what a node sends, and what it does with what it receives.

Pure: the sockets are the server's (``server/cluster_bus.py``), reached through a ``Wire``;
time comes in ``now_ms`` arguments and randomness from an injected ``random.Random``.

Membership: CLUSTER MEET adds a node in handshake under a made-up name; the link to it sends
MEET, and the PONG that answers tells its real name. A node learns the others from the
gossip entries of the known nodes' PINGs and PONGs, under their real names (7.0: no
handshake for gossiped nodes). Slots: a master's header carries its slots and config epoch;
a slot goes to the claimant with the greater epoch (UPDATE tells a node that claims a slot
whose owner has a greater one). Failures: a node that does not answer a PING within the node
timeout is PFAIL; when the masters' reports of it reach a majority it is FAIL, and a FAIL
message tells everyone.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Protocol

from headwater.cluster import bus_codec as codec
from headwater.cluster.bus_codec import Gossip, Message
from headwater.cluster.failover import Failover
from headwater.cluster.state import (
    FAIL,
    HANDSHAKE,
    MASTER,
    MEET,
    MIGRATE_TO,
    MYSELF,
    NOADDR,
    PFAIL,
    REPLICA,
    Cluster,
    Node,
)

#: a forgotten node is not re-added from gossip for this long (CLUSTER_BLACKLIST_TTL)
BLACKLIST_TTL_MS = 60_000
#: failure reports older than node timeout times this are dropped
FAIL_REPORT_VALIDITY_MULT = 2
#: a master with slots that came back stays FAIL for node timeout times this
FAIL_UNDO_TIME_MULT = 2


class Wire(Protocol):
    """The server's side of the bus: links and what the bus asks of the node."""

    def connect(self, node: Node) -> None:
        """Open an outbound link to ``node`` (``ClusterBus.link_up`` follows, or nothing)."""

    def disconnect(self, node: Node) -> None:
        """Drop ``node``'s outbound link (the next cron opens a new one)."""

    def send(self, link: Any, message: Message) -> None:
        """Send on a link, inbound or outbound."""

    def offset(self) -> int:
        """The replication offset the header carries."""

    def delete_slot_keys(self, slot: int) -> None:
        """This node lost ``slot`` while it held keys of it: they go."""

    def keys_in_slot(self, slot: int) -> int: ...

    def became_replica(self, master: Node) -> None:
        """This node is now a replica of ``master`` (replication follows it)."""

    def state_changed(self) -> None:
        """nodes.conf must be written, the state judged again."""

    def save_now(self) -> None:
        """nodes.conf written (and synced) before anything else is sent (votes, epochs)."""

    def master_data_age_ms(self) -> int:
        """How long since this replica last heard from its master's replication link."""

    def became_master(self) -> None:
        """This replica won an election: it stops replicating and serves writes."""

    def pause_writes(self, duration_ms: int) -> None:
        """A manual failover: writes wait until the replica has caught up."""

    def unpause_writes(self) -> None: ...

    def deliver(self, channel: bytes, payload: bytes, sharded: bool) -> None:
        """A message published on another node, for this node's subscribers."""


class ClusterBus:
    def __init__(
        self,
        cluster: Cluster,
        wire: Wire,
        node_timeout_ms: Callable[[], int],
        rng: random.Random | None = None,
    ) -> None:
        self.cluster = cluster
        self.wire = wire
        self.node_timeout_ms = node_timeout_ms
        self.rng = rng or random.Random()
        #: forgotten node names → until when they stay forgotten
        self.blacklist: dict[str, int] = {}
        #: node name → {reporting master name: report time}
        self.fail_reports: dict[str, dict[str, int]] = {}
        self.cron_runs = 0
        self.failover = Failover(self)
        #: cluster-announce-ip and -hostname, cluster-allow-replica-migration (the server
        #: keeps them current)
        self.announced_ip = ""
        self.hostname = ""
        self.allow_replica_migration = True

    # -- building messages ---------------------------------------------------------------

    def header(self, kind: int) -> Message:
        cluster = self.cluster
        myself = cluster.myself
        m = Message(kind, myself.name)
        owner = myself.master if myself.master is not None else myself
        m.port, m.cport, m.pport = myself.port, myself.cport, myself.pport
        m.current_epoch = cluster.current_epoch
        m.config_epoch = owner.config_epoch
        m.offset = self.wire.offset()
        m.myslots = bytes(owner.bits)
        m.master = myself.master.name if myself.master is not None else ""
        m.myip = self.announced_ip
        m.flags = myself.flags
        m.state_ok = cluster.ok
        m.hostname = self.hostname
        if myself.flags & MASTER and self.failover.mf_end_ms:
            m.mflags |= codec.MF_PAUSED  # (a manual failover: writes are held)
        return m

    def ping(self, kind: int, now_ms: int) -> Message:
        """A PING, PONG or MEET with its gossip entries (Redis's clusterSendPing)."""
        m = self.header(kind)
        nodes = list(self.cluster.nodes.values())
        fresh = len(nodes) - 2
        wanted = min(max(len(nodes) // 10, 3), fresh)
        chosen: set[str] = set()
        tries = wanted * 3
        while fresh > 0 and tries > 0 and len(m.gossip) < wanted:
            tries -= 1
            node = self.rng.choice(nodes)
            if node.flags & (MYSELF | PFAIL) or node.name in chosen:
                continue
            if node.flags & (HANDSHAKE | NOADDR) or (node.link is None and not node.numslots):
                fresh -= 1
                continue
            chosen.add(node.name)
            m.gossip.append(self._gossip(node))
        for node in nodes:
            pfail = node.flags & PFAIL and not node.flags & (HANDSHAKE | NOADDR)
            if pfail and node.name not in chosen:
                m.gossip.append(self._gossip(node))
        return m

    def _gossip(self, node: Node) -> Gossip:
        return Gossip(
            node.name,
            node.ping_sent_ms // 1000,
            node.pong_received_ms // 1000,
            node.ip,
            node.port,
            node.cport,
            node.flags,
            node.pport,
        )

    def send_ping(self, node: Node, kind: int, now_ms: int) -> None:
        """A PING (or MEET) on ``node``'s outbound link; the PONG is awaited from now."""
        if node.link is None:
            return
        if kind == codec.PING and not node.ping_sent_ms:
            node.ping_sent_ms = now_ms
        self._count_sent(kind)
        self.wire.send(node.link, self.ping(kind, now_ms))

    def send(self, node: Node, message: Message) -> None:
        """A message on ``node``'s outbound link (if it is up)."""
        if node.link is not None and node.connected:
            self.send_on(node.link, message)

    def send_on(self, link: Any, message: Message) -> None:
        self._count_sent(message.kind)
        self.wire.send(link, message)

    def broadcast(self, message: Message) -> None:
        for node in self.cluster.nodes.values():
            if node.link is not None and node.connected and not node.flags & (MYSELF | HANDSHAKE):
                self._count_sent(message.kind)
                self.wire.send(node.link, message)

    def follow(self, master: Node) -> None:
        """This node becomes a replica of ``master`` (Redis's clusterSetMaster): a manual
        failover it was part of ends, its paused writes resume."""
        self.failover.reset()
        self.wire.became_replica(master)

    def publish(self, channel: bytes, payload: bytes, sharded: bool) -> None:
        """PUBLISH to every node; SPUBLISH to the other nodes of my shard."""
        m = self.header(codec.PUBLISHSHARD if sharded else codec.PUBLISH)
        m.channel, m.payload = channel, payload
        if not sharded:
            self.broadcast(m)
            return
        myself = self.cluster.myself
        master = myself.master if myself.master is not None else myself
        for node in (master, *master.replicas):
            if node is not myself:
                self.send(node, m)

    def broadcast_pong(self, now_ms: int) -> None:
        for node in self.cluster.nodes.values():
            if node.link is not None and node.connected and not node.flags & (MYSELF | HANDSHAKE):
                self._count_sent(codec.PONG)
                self.wire.send(node.link, self.ping(codec.PONG, now_ms))

    def _count_sent(self, kind: int) -> None:
        if kind < len(self.cluster.sent):
            self.cluster.sent[kind] += 1

    # -- membership ----------------------------------------------------------------------

    def meet(self, ip: str, port: int, cport: int, now_ms: int) -> None:
        """CLUSTER MEET: a node in handshake under a made-up name, unless one is already
        in handshake at that address (Redis's clusterStartHandshake)."""
        for node in self.cluster.nodes.values():
            if node.flags & HANDSHAKE and (node.ip, node.port, node.cport) == (ip, port, cport):
                return
        node = Node(self.cluster.new_name(), HANDSHAKE | MEET, ip, port, cport)
        node.created_ms = now_ms
        self.cluster.add(node)

    def forget(self, node: Node, now_ms: int) -> None:
        self.blacklist[node.name] = now_ms + BLACKLIST_TTL_MS
        self.remove(node)

    def remove(self, node: Node) -> None:
        if node.link is not None:
            self.wire.disconnect(node)
        for reports in self.fail_reports.values():
            reports.pop(node.name, None)
        self.fail_reports.pop(node.name, None)
        self.cluster.remove(node)
        self.wire.state_changed()

    def link_up(self, node: Node, now_ms: int) -> None:
        """The outbound link to ``node`` connected: MEET if asked, else a PING."""
        node.connected = True
        kind = codec.MEET if node.flags & MEET else codec.PING
        old_ping = node.ping_sent_ms
        self.send_ping(node, kind, now_ms)
        if old_ping:
            node.ping_sent_ms = old_ping  # (a reconnection does not restart the wait)
        node.flags &= ~MEET

    def link_down(self, node: Node) -> None:
        node.link = None
        node.connected = False

    # -- receiving -----------------------------------------------------------------------

    def receive(self, link: Any, link_node: Node | None, m: Message, now_ms: int) -> None:
        """A message arrived on ``link`` (``link_node``: the node of an outbound link)."""
        cluster = self.cluster
        if m.kind < len(cluster.received):
            cluster.received[m.kind] += 1
        sender = cluster.nodes.get(m.sender)
        if sender is not None and sender.flags & HANDSHAKE:
            sender = None
        if sender is not None:
            sender.data_received_ms = now_ms
            if m.current_epoch > cluster.current_epoch:
                cluster.current_epoch = m.current_epoch
                cluster.changed = cluster.must_sync = True
            if m.config_epoch > sender.config_epoch and not m.master:
                sender.config_epoch = m.config_epoch
                cluster.changed = cluster.must_sync = True
            sender.repl_offset = m.offset
            self.failover.master_paused_at(sender, m)
        kind = m.kind
        if kind in (codec.PING, codec.PONG, codec.MEET):
            self._on_ping(link, link_node, sender, m, now_ms)
        elif kind == codec.FAIL and sender is not None:
            failing = cluster.nodes.get(m.about)
            if failing is not None and not failing.flags & (FAIL | MYSELF):
                failing.flags = (failing.flags | FAIL) & ~PFAIL
                failing.fail_time_ms = now_ms
                self.wire.state_changed()
        elif kind == codec.UPDATE and sender is not None:
            self._on_update(m, now_ms)
        elif kind == codec.AUTH_REQUEST and sender is not None:
            self.failover.vote(sender, m, now_ms)
        elif kind == codec.AUTH_ACK and sender is not None:
            self.failover.acked(sender, m.current_epoch)
        elif kind == codec.MFSTART and sender is not None:
            self.failover.mfstart(sender, link, now_ms)
        elif kind in (codec.PUBLISH, codec.PUBLISHSHARD) and sender is not None:
            self.wire.deliver(m.channel, m.payload, kind == codec.PUBLISHSHARD)

    def _on_ping(
        self, link: Any, link_node: Node | None, sender: Node | None, m: Message, now_ms: int
    ) -> None:
        cluster = self.cluster
        myself = cluster.myself
        if m.kind == codec.MEET and sender is None and link_node is None:
            node = Node(cluster.new_name(), HANDSHAKE, m.myip or link.peer_ip, m.port, m.cport)
            node.pport = m.pport
            node.created_ms = now_ms
            cluster.add(node)
            self.wire.state_changed()
        if m.kind in (codec.PING, codec.MEET):
            learns = not self.announced_ip and (m.kind == codec.MEET or not myself.ip)
            if learns and link.local_ip and myself.ip != link.local_ip:
                myself.ip = link.local_ip  # (the address the peer reached this node at)
                self.wire.state_changed()
            self._count_sent(codec.PONG)
            self.wire.send(link, self.ping(codec.PONG, now_ms))
        if link_node is not None and link_node.flags & HANDSHAKE:
            self._handshake_done(link_node, sender, m, now_ms)
            return
        if link_node is not None and link_node.name != m.sender:
            link_node.flags |= NOADDR  # (another node answers at that address now)
            link_node.ip, link_node.port, link_node.cport = "", 0, 0
            self.wire.disconnect(link_node)
            self.wire.state_changed()
            return
        if sender is None:
            return
        if m.kind == codec.PING and link_node is None:
            self._update_address(sender, m.myip or link.peer_ip, m)
        if link_node is not None and m.kind == codec.PONG:
            link_node.pong_received_ms = now_ms
            link_node.ping_sent_ms = 0
            if link_node.flags & PFAIL:
                link_node.flags &= ~PFAIL
                self.wire.state_changed()
            elif link_node.flags & FAIL:
                self._clear_failure_if_needed(link_node, now_ms)
        if m.hostname != sender.hostname:
            sender.hostname = m.hostname
            self.wire.state_changed()
        self._role(sender, m)
        self._slots(sender, m, now_ms)
        self._gossip_section(sender, m, now_ms)

    def _handshake_done(self, node: Node, sender: Node | None, m: Message, now_ms: int) -> None:
        """The first PONG of a node in handshake: its real name (or a node known already,
        at a new address: the handshake entry goes)."""
        cluster = self.cluster
        if sender is not None:
            self._update_address(sender, node.ip, m)
            self.remove(node)
            return
        cluster.rename(node, m.sender)
        node.flags &= ~HANDSHAKE
        node.flags |= m.flags & (MASTER | REPLICA)
        node.pong_received_ms = now_ms
        node.ping_sent_ms = 0
        self.wire.state_changed()

    def _update_address(self, node: Node, ip: str, m: Message) -> None:
        if (node.ip, node.port, node.cport, node.pport) == (ip, m.port, m.cport, m.pport):
            return
        node.ip, node.port, node.cport, node.pport = ip, m.port, m.cport, m.pport
        if node.link is not None:
            self.wire.disconnect(node)
        node.flags &= ~NOADDR
        self.wire.state_changed()

    def _role(self, sender: Node, m: Message) -> None:
        cluster = self.cluster
        if not m.master:
            if sender.flags & REPLICA:
                cluster.set_master_role(sender)
                self.wire.state_changed()
            return
        master = cluster.nodes.get(m.master)
        if sender.flags & MASTER:
            cluster.unassign_all(sender)
            sender.flags = (sender.flags & ~(MASTER | MIGRATE_TO)) | REPLICA
            self.wire.state_changed()
        if master is not None and sender.master is not master:
            cluster.set_replica_of(sender, master)
            self.wire.state_changed()

    def _slots(self, sender: Node, m: Message, now_ms: int) -> None:
        cluster = self.cluster
        owner = sender if sender.flags & MASTER else sender.master
        if owner is None or bytes(owner.bits) == m.myslots:
            self._epoch_collision(sender)
            return
        if sender.flags & MASTER:
            self.update_slots(sender, m.config_epoch, m.myslots)
        # a claim older than what this node knows: the sender is told (UPDATE)
        for slot in codec.claimed_beyond(m.myslots, sender.bits):
            current = cluster.owners[slot]
            if current is None or current is sender:
                continue
            if current.config_epoch > m.config_epoch:
                update = self.header(codec.UPDATE)
                update.about = current.name
                update.update_epoch = current.config_epoch
                update.update_slots = bytes(current.bits)
                if sender.link is not None and sender.connected:
                    self._count_sent(codec.UPDATE)
                    self.wire.send(sender.link, update)
                break
        self._epoch_collision(sender)

    def _epoch_collision(self, sender: Node) -> None:
        """Two masters with one config epoch: the one with the smaller name takes a new
        epoch (Redis's clusterHandleConfigEpochCollision)."""
        cluster = self.cluster
        myself = cluster.myself
        if (
            sender.flags & MASTER
            and myself.flags & MASTER
            and sender.config_epoch == myself.config_epoch
            and sender.name > myself.name
        ):
            cluster.current_epoch += 1
            myself.config_epoch = cluster.current_epoch
            cluster.changed = cluster.must_sync = True
            self.wire.state_changed()

    def update_slots(self, sender: Node, epoch: int, bitmap: bytes) -> None:
        """Slots ``sender`` claims with ``epoch`` (Redis's clusterUpdateSlotsConfigWith)."""
        cluster = self.cluster
        myself = cluster.myself
        if sender is myself:
            return
        my_master = myself.master if myself.master is not None else myself
        new_master: Node | None = None
        lost_with_keys: list[int] = []
        held_before = bytes(sender.bits)
        migrated = 0
        for slot in codec.claimed_beyond(bitmap, held_before):
            current = cluster.owners[slot]
            if slot in cluster.importing:
                continue
            if current is None or current.config_epoch < epoch:
                if current is myself and self.wire.keys_in_slot(slot):
                    lost_with_keys.append(slot)
                if current is my_master:
                    new_master = sender
                    migrated += 1
                if current is not None:
                    cluster.unassign(slot)
                cluster.assign(slot, sender)
                self.wire.state_changed()
        if new_master is not None and not my_master.numslots:
            # (without replica migration, only if all the sender claims it took from us)
            kept = sum(bin(a & b).count("1") for a, b in zip(bitmap, held_before, strict=True))
            allowed = self.allow_replica_migration or kept == migrated
        if new_master is not None and not my_master.numslots and allowed:
            self.follow(new_master)
        else:
            for slot in lost_with_keys:
                self.wire.delete_slot_keys(slot)

    def _on_update(self, m: Message, now_ms: int) -> None:
        node = self.cluster.nodes.get(m.about)
        if node is None or node.config_epoch >= m.update_epoch:
            return
        if node.flags & REPLICA:
            self.cluster.set_master_role(node)
        node.config_epoch = m.update_epoch
        self.wire.state_changed()
        self.update_slots(node, m.update_epoch, m.update_slots)

    def _gossip_section(self, sender: Node, m: Message, now_ms: int) -> None:
        cluster = self.cluster
        for g in m.gossip:
            node = cluster.nodes.get(g.name)
            if node is None:
                if g.flags & NOADDR or self.blacklist.get(g.name, 0) > now_ms:
                    continue
                if not g.name or len(g.name) != codec.NAME_LEN:
                    continue
                flags = g.flags & ~(MYSELF | HANDSHAKE | MEET)
                node = Node(g.name, flags, g.ip, g.port, g.cport)
                node.pport = g.pport
                cluster.add(node)
                self.wire.state_changed()
                continue
            if sender.flags & MASTER and node is not cluster.myself:
                if g.flags & (FAIL | PFAIL):
                    self.fail_reports.setdefault(node.name, {})[sender.name] = now_ms
                    self.mark_failing_if_needed(node, now_ms)
                else:
                    self.fail_reports.get(node.name, {}).pop(sender.name, None)
            healthy = not g.flags & (FAIL | PFAIL) and not node.ping_sent_ms
            if healthy and not self.failure_reports(node, now_ms):
                pong = g.pong_received_s * 1000
                if now_ms + 500 >= pong > node.pong_received_ms:
                    node.pong_received_ms = pong
            if (
                node.flags & (FAIL | PFAIL)
                and not g.flags & NOADDR
                and node.link is None
                and (node.ip, node.port, node.cport) != (g.ip, g.port, g.cport)
                and g.ip
            ):
                node.ip, node.port, node.cport = g.ip, g.port, g.cport
                node.flags &= ~NOADDR

    # -- failures ------------------------------------------------------------------------

    def failure_reports(self, node: Node, now_ms: int) -> int:
        """Reports of ``node`` failing that are still valid (old ones are dropped)."""
        reports = self.fail_reports.get(node.name)
        if not reports:
            return 0
        oldest = now_ms - self.node_timeout_ms() * FAIL_REPORT_VALIDITY_MULT
        for name in [name for name, when in reports.items() if when < oldest]:
            del reports[name]
        return len(reports)

    def mark_failing_if_needed(self, node: Node, now_ms: int) -> None:
        cluster = self.cluster
        if not node.flags & PFAIL or node.flags & FAIL:
            return
        failures = self.failure_reports(node, now_ms)
        if cluster.myself.flags & MASTER:
            failures += 1
        if failures < cluster.size // 2 + 1:
            return
        node.flags = (node.flags | FAIL) & ~PFAIL
        node.fail_time_ms = now_ms
        fail = self.header(codec.FAIL)
        fail.about = node.name
        self.broadcast(fail)
        self.wire.state_changed()

    def _clear_failure_if_needed(self, node: Node, now_ms: int) -> None:
        undo = self.node_timeout_ms() * FAIL_UNDO_TIME_MULT
        if node.flags & REPLICA or not node.numslots or now_ms - node.fail_time_ms > undo:
            node.flags &= ~FAIL
            self.wire.state_changed()

    # -- the cron (every 100 ms) ---------------------------------------------------------

    def cron(self, now_ms: int) -> None:
        cluster = self.cluster
        timeout = self.node_timeout_ms()
        handshake_timeout = max(timeout, 1000)
        self.cron_runs += 1
        for name, until in list(self.blacklist.items()):
            if until <= now_ms:
                del self.blacklist[name]
        for node in list(cluster.nodes.values()):
            if node.flags & (MYSELF | NOADDR):
                continue
            if node.flags & HANDSHAKE and now_ms - node.created_ms > handshake_timeout:
                self.remove(node)
                continue
            if node.link is None:
                node.link_created_ms = now_ms
                self.wire.connect(node)
        if self.cron_runs % 10 == 0:
            self._ping_the_stalest(now_ms)
        for node in list(cluster.nodes.values()):
            if node.flags & (MYSELF | NOADDR | HANDSHAKE):
                continue
            self._check_node(node, now_ms, timeout)
        self.failover.cron(now_ms)

    def _ping_the_stalest(self, now_ms: int) -> None:
        candidates = [
            node
            for node in self.cluster.nodes.values()
            if node.connected and not node.ping_sent_ms and not node.flags & (MYSELF | HANDSHAKE)
        ]
        sample = self.rng.sample(candidates, min(5, len(candidates)))
        if sample:
            stalest = min(sample, key=lambda node: node.pong_received_ms)
            self.send_ping(stalest, codec.PING, now_ms)

    def _check_node(self, node: Node, now_ms: int, timeout: int) -> None:
        waited = now_ms - node.ping_sent_ms
        if (
            node.connected
            and now_ms - node.link_created_ms > timeout
            and node.ping_sent_ms
            and waited > timeout // 2
            and now_ms - node.data_received_ms > timeout // 2
        ):
            self.wire.disconnect(node)  # (a link that hangs: a new one next cron)
        idle = now_ms - node.pong_received_ms > timeout // 2
        if node.connected and not node.ping_sent_ms and idle:
            self.send_ping(node, codec.PING, now_ms)
        if not node.ping_sent_ms:
            return
        delay = min(waited, now_ms - node.data_received_ms)
        if delay > timeout and not node.flags & (PFAIL | FAIL):
            node.flags |= PFAIL
            self.wire.state_changed()
