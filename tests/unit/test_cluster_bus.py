"""The cluster bus's rules on a simulated network: nodes whose messages go through the real
codec (encoded, decoded) over in-memory links, a clock advanced 100 ms per cron. Meeting,
gossip, slot propagation, epoch collisions, failure detection, elections and manual
failover, each checked on every node's view (with ``check_invariants``)."""

from __future__ import annotations

import random
from collections import deque
from typing import Any

from headwater.cluster import bus_codec as codec
from headwater.cluster.bus import ClusterBus
from headwater.cluster.slots import SLOTS
from headwater.cluster.state import FAIL, MASTER, MYSELF, REPLICA, Cluster, Node


class Link:
    def __init__(self, owner: Sim, peer: Sim, node: Node | None) -> None:
        self.owner, self.peer, self.node = owner, peer, node
        self.other: Link | None = None
        self.peer_ip, self.local_ip = peer.ip, owner.ip
        self.open = True


class Sim:
    """One simulated node: its state, its bus, and the Wire the bus talks to."""

    def __init__(self, net: Network, index: int) -> None:
        self.net = net
        self.ip = f"10.0.0.{index}"
        self.port, self.cport = 7000, 17000
        names = iter(f"{index:02d}{n:038x}" for n in range(1, 1000))
        me = Node(f"{index:02d}" + "f" * 38, MYSELF | MASTER, "", self.port, self.cport)
        self.cluster = Cluster(me, lambda: 2000, new_name=lambda: next(names))
        self.bus = ClusterBus(self.cluster, self, lambda: 2000, random.Random(index))
        self.up = True
        self.offset_value = 0
        self.became: list[str] = []
        self.paused = False

    # the Wire
    def connect(self, node: Node) -> None:
        target = self.net.by_address.get((node.ip, node.cport))
        link = Link(self, target, node) if target is not None else None
        node.link = link
        if target is None or not target.up or not self.up:
            self.net.later(lambda: self._failed(node, link))
            return
        back = Link(target, self, None)
        link.other, back.other = back, link  # type: ignore[union-attr]
        self.net.later(lambda: self._connected(node, link))

    def _failed(self, node: Node, link: Any) -> None:
        if node.link is link:
            self.bus.link_down(node)
            if not node.ping_sent_ms:
                node.ping_sent_ms = self.net.now

    def _connected(self, node: Node, link: Link) -> None:
        if node.link is link:
            self.bus.link_up(node, self.net.now)

    def disconnect(self, node: Node) -> None:
        link = node.link
        self.bus.link_down(node)
        if isinstance(link, Link):
            link.open = False

    def send(self, link: Any, message: codec.Message) -> None:
        raw = codec.encode(message)
        other = link.other
        if not link.open or other is None or not other.owner.up or not self.up:
            return
        self.net.queue.append((other, raw))

    def offset(self) -> int:
        return self.offset_value

    def keys_in_slot(self, slot: int) -> int:
        return 0

    def delete_slot_keys(self, slot: int) -> None:
        pass

    def became_replica(self, master: Node) -> None:
        self.cluster.migrating.clear()
        self.cluster.importing.clear()
        self.cluster.set_replica_of(self.cluster.myself, master)
        self.became.append("replica")

    def became_master(self) -> None:
        self.became.append("master")

    def state_changed(self) -> None:
        pass

    def save_now(self) -> None:
        pass

    def master_data_age_ms(self) -> int:
        return 0

    def pause_writes(self, duration_ms: int) -> None:
        self.paused = True

    def unpause_writes(self) -> None:
        self.paused = False

    def deliver(self, channel: bytes, payload: bytes, sharded: bool) -> None:
        self.net.published.append((self.ip, channel, payload, sharded))


class Network:
    def __init__(self, size: int) -> None:
        self.now = 1_800_000_000_000
        self.queue: deque[tuple[Link, bytes]] = deque()
        self.pending: list[Any] = []
        self.published: list[tuple[str, bytes, bytes, bool]] = []
        self.sims = [Sim(self, i + 1) for i in range(size)]
        self.by_address = {(s.ip, s.cport): s for s in self.sims}

    def later(self, action: Any) -> None:
        self.pending.append(action)

    def step(self) -> None:
        self.now += 100
        actions, self.pending = self.pending, []
        for action in actions:
            action()
        for sim in self.sims:
            if sim.up:
                sim.bus.cron(self.now)
        while self.queue:
            link, raw = self.queue.popleft()
            sim = link.owner
            if sim.up:
                sim.bus.receive(link, link.node, codec.decode(raw), self.now)
        for sim in self.sims:
            if sim.up:
                sim.cluster.update_state(self.now, True)

    def run(self, seconds: float) -> None:
        for _ in range(int(seconds * 10)):
            self.step()

    def meet_all(self) -> None:
        first = self.sims[0]
        for sim in self.sims[1:]:
            sim.bus.meet(first.ip, first.port, first.cport, self.now)

    def check(self) -> None:
        for sim in self.sims:
            sim.cluster.check_invariants()


def split_slots(sims: list[Sim]) -> None:
    """The slots in three even runs over ``sims`` (three of them), config epochs 1, 2, 3."""
    third = SLOTS // 3
    for index, sim in enumerate(sims):
        last = SLOTS - 1 if index == 2 else (index + 1) * third - 1
        for slot in range(index * third, last + 1):
            sim.cluster.assign(slot, sim.cluster.myself)
        sim.cluster.myself.config_epoch = sim.cluster.current_epoch = index + 1


def three_masters() -> Network:
    net = Network(3)
    split_slots(net.sims)
    net.meet_all()
    net.run(5)
    return net


def owners_seen(sim: Sim) -> list[str | None]:
    return [o.name if o is not None else None for o in sim.cluster.owners]


def test_three_masters_meet_learn_each_other_and_agree_on_the_slots() -> None:
    net = three_masters()
    net.check()
    views = {sim.ip: owners_seen(sim) for sim in net.sims}
    assert len({tuple(v) for v in views.values()}) == 1
    for sim in net.sims:
        assert len(sim.cluster.nodes) == 3
        assert sim.cluster.ok
        assert sim.cluster.myself.ip == sim.ip  # (learned from the MEET's link)
        for node in sim.cluster.nodes.values():
            assert node.flags & MASTER
            assert node is sim.cluster.myself or node.connected
    assert all(sim.cluster.sent[codec.MEET] <= 2 for sim in net.sims)


def test_equal_epochs_are_told_apart() -> None:
    net = Network(3)
    for sim in net.sims:
        sim.cluster.assign(int(sim.ip[-1]), sim.cluster.myself)
    net.meet_all()
    net.run(5)
    epochs = [sim.cluster.myself.config_epoch for sim in net.sims]
    assert len(set(epochs)) == 3


def test_a_slot_moved_by_hand_reaches_every_node() -> None:
    net = three_masters()
    first, second = net.sims[0], net.sims[1]
    slot = 7
    second_me = second.cluster.myself
    node_there = first.cluster.nodes[second_me.name]
    first.cluster.unassign(slot)
    first.cluster.assign(slot, node_there)  # (SETSLOT NODE on the source)
    second.cluster.importing[slot] = second.cluster.nodes[first.cluster.myself.name]
    second.cluster.unassign(slot)
    second.cluster.assign(slot, second_me)
    second.cluster.bump_epoch()
    del second.cluster.importing[slot]
    net.run(3)
    net.check()
    for sim in net.sims:
        assert sim.cluster.owners[slot].name == second_me.name


def replicas_for(net: Network) -> None:
    """Nodes 4..6 replicate nodes 1..3."""
    for master, replica in zip(net.sims[:3], net.sims[3:], strict=True):
        node = replica.cluster.nodes[master.cluster.myself.name]
        replica.became_replica(node)
        replica.offset_value = 100


def six_nodes() -> Network:
    net = Network(6)
    split_slots(net.sims[:3])
    net.meet_all()
    net.run(5)
    replicas_for(net)
    net.run(3)
    return net


def test_a_killed_master_is_failed_and_its_replica_takes_its_slots() -> None:
    net = six_nodes()
    net.check()
    dead, heir = net.sims[0], net.sims[3]
    dead_name = dead.cluster.myself.name
    for sim in net.sims[1:]:
        assert sim.cluster.nodes[dead_name].replicas[0].name == heir.cluster.myself.name
    dead.up = False
    net.run(10)
    net.check()
    assert heir.became == ["replica", "master"]
    heir_name = heir.cluster.myself.name
    for sim in net.sims[1:]:
        assert sim.cluster.nodes[dead_name].flags & FAIL
        assert sim.cluster.owners[0].name == heir_name
        assert sim.cluster.ok
    assert heir.cluster.myself.config_epoch > 3
    dead.up = True  # it comes back: it learns it lost its slots and follows the heir
    net.run(6)
    assert dead.cluster.myself.flags & REPLICA
    assert dead.cluster.myself.master.name == heir_name


def test_manual_failover_waits_for_the_master_and_swaps_roles() -> None:
    net = six_nodes()
    master, replica = net.sims[1], net.sims[4]
    master.offset_value = replica.offset_value = 500
    replica.bus.failover.manual(False, False, net.now)
    net.step()
    assert master.paused  # (its writes wait while the replica catches up)
    net.run(3)
    assert replica.cluster.myself.flags & MASTER
    assert not master.paused
    assert master.cluster.myself.flags & REPLICA
    net.check()


def test_takeover_needs_no_vote() -> None:
    net = six_nodes()
    for sim in net.sims[:3]:
        sim.up = False  # no master can vote
    replica = net.sims[5]
    replica.bus.failover.manual(True, True, net.now)
    assert replica.cluster.myself.flags & MASTER
    assert replica.cluster.myself.numslots == SLOTS - 2 * (SLOTS // 3)


def test_publish_reaches_every_node_and_spublish_only_the_shard() -> None:
    net = six_nodes()
    net.sims[0].bus.publish(b"news", b"hello", False)
    net.sims[0].bus.publish(b"shard", b"hi", True)
    net.run(0.2)
    everyone = sorted(ip for ip, channel, _, _ in net.published if channel == b"news")
    assert everyone == sorted(sim.ip for sim in net.sims[1:])
    shard = [ip for ip, channel, _, _ in net.published if channel == b"shard"]
    assert shard == [net.sims[3].ip]


def test_a_forgotten_node_is_not_learned_again_from_gossip() -> None:
    net = three_masters()
    first, third = net.sims[0], net.sims[2]
    forgotten = first.cluster.nodes[third.cluster.myself.name]
    first.bus.forget(forgotten, net.now)
    net.run(3)
    assert third.cluster.myself.name not in first.cluster.nodes
    net.check()


def test_a_replica_migrates_to_an_orphaned_master() -> None:
    net = Network(7)
    split_slots(net.sims[:3])
    net.meet_all()
    net.run(5)
    masters = [sim.cluster.myself.name for sim in net.sims[:3]]
    for replica, master in zip(net.sims[3:], [0, 0, 1, 2], strict=True):
        replica.became_replica(replica.cluster.nodes[masters[master]])
    net.run(3)
    net.sims[6].up = False  # the third master's only replica dies
    net.run(15)
    net.check()
    movers = [s for s in net.sims[3:5] if s.cluster.myself.master.name == masters[2]]
    assert len(movers) == 1  # one of the first master's two replicas moved over
    smallest = min(net.sims[3:5], key=lambda s: s.cluster.myself.name)
    assert movers[0] is smallest
    for sim in net.sims[:6]:
        node = sim.cluster.nodes[movers[0].cluster.myself.name]
        assert node.master is not None and node.master.name == masters[2]
