"""The cluster as one node sees it (Redis's ``clusterState`` and ``clusterNode``).

``Cluster`` holds the known nodes, who owns each of the 16384 slots, the slots being
migrated or imported, the epochs, and whether the cluster is up. It changes only through its
methods, each of which keeps ``check_invariants`` true: a slot's owner is a known master
that counts it in ``numslots``; a replica's master knows it among its replicas.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Protocol

from headwater.cluster.slots import SLOTS, runs

#: the set bits of each byte value
_BITS = [tuple(bit for bit in range(8) if value >> bit & 1) for value in range(256)]

# node flags: Redis's CLUSTER_NODE_* bits (the bus carries them as they are)
MASTER = 1
REPLICA = 2
PFAIL = 4
FAIL = 8
MYSELF = 16
HANDSHAKE = 32
NOADDR = 64
MEET = 128
MIGRATE_TO = 256
NOFAILOVER = 512

#: CLUSTER NODES's flag words, in Redis's order (MEET and MIGRATE_TO are never shown)
FLAG_WORDS = (
    (MYSELF, "myself"),
    (MASTER, "master"),
    (REPLICA, "slave"),
    (PFAIL, "fail?"),
    (FAIL, "fail"),
    (HANDSHAKE, "handshake"),
    (NOADDR, "noaddr"),
    (NOFAILOVER, "nofailover"),
)

#: the bus's message types, by number (CLUSTER INFO's statistics name them so)
MESSAGE_TYPES = (
    "ping",
    "pong",
    "meet",
    "fail",
    "publish",
    "auth-req",
    "auth-ack",
    "update",
    "mfstart",
    "module",
    "publishshard",
)

#: a master waits this long after its first state update before it may serve (Redis's
#: CLUSTER_WRITABLE_DELAY): the cluster gets a chance to tell a rebooted node it lost slots
WRITABLE_DELAY_MS = 2000
#: bounds of the wait after leaving a minority partition (CLUSTER_{MIN,MAX}_REJOIN_DELAY)
MIN_REJOIN_DELAY_MS = 500
MAX_REJOIN_DELAY_MS = 5000


def random_node_name() -> str:
    """A new node ID: 40 random hex characters (Redis's getRandomHexChars)."""
    return os.urandom(20).hex()


#: a stretch of whole bytes set, or one byte partly set
_SEGMENT = re.compile(rb"\xff+|[^\x00\xff]")


def _ranges(bits: bytearray) -> list[tuple[int, int]]:
    """The runs of set bits: stretches of whole bytes set are found by a regex (C speed)
    and taken at once; only the bytes partly set are read bit by bit."""
    found: list[tuple[int, int]] = []
    start = last = -2  # the run being built: its first and last slot
    for match in _SEGMENT.finditer(bits):
        first = match.start()
        if bits[first] == 0xFF:
            low, high = first << 3, (match.end() << 3) - 1
            if low == last + 1:
                last = high
            else:
                if start >= 0:
                    found.append((start, last))
                start, last = low, high
            continue
        byte, base = bits[first], first << 3
        for bit in range(8):
            if byte >> bit & 1:
                slot = base + bit
                if slot == last + 1:
                    last = slot
                else:
                    if start >= 0:
                        found.append((start, last))
                    start = last = slot
    if start >= 0:
        found.append((start, last))
    return found


class ClusterStateError(Exception):
    """An invariant of the cluster state does not hold."""


class BusLinkInfo(Protocol):
    """What CLUSTER LINKS shows of a bus connection (the server's object)."""

    created_ms: int

    def buffered(self) -> int:
        """Bytes written to it and not sent yet."""
        ...


class Node:
    """One node of the cluster (myself included)."""

    def __init__(self, name: str, flags: int, ip: str = "", port: int = 0, cport: int = 0) -> None:
        self.name = name  # 40 lowercase hex characters
        self.flags = flags
        self.ip = ip
        self.port = port
        self.cport = cport
        self.pport = 0  # the plaintext port when ``port`` is TLS
        self.hostname = ""
        self.master: Node | None = None
        self.replicas: list[Node] = []
        self.config_epoch = 0
        self.ping_sent_ms = 0
        self.pong_received_ms = 0
        self.connected = False  # an outbound bus link is up
        self.repl_offset = 0
        self.numslots = 0
        #: its slots as the bus's bitmap (slot j: bit j & 7 of byte j >> 3), and as runs
        #: (None: to be worked out again)
        self.bits = bytearray(SLOTS // 8)
        self.ranges: list[tuple[int, int]] | None = []
        # the bus (cluster/bus.py): the server's outbound link (None: none), the peer's
        # link to this node once it said who it is, and times
        self.link: BusLinkInfo | None = None
        self.inbound: BusLinkInfo | None = None
        self.created_ms = 0
        self.link_created_ms = 0
        self.data_received_ms = 0
        self.fail_time_ms = 0
        self.voted_time_ms = 0  # (a master: when this node last voted for a replica of it)
        self.orphaned_ms = 0  # (a master: since when it has had no working replica)

    @property
    def is_master(self) -> bool:
        return bool(self.flags & MASTER)

    def flag_words(self) -> str:
        words = [word for bit, word in FLAG_WORDS if self.flags & bit]
        return ",".join(words) if words else "noflags"


class Cluster:
    """The cluster state of one node (see the module doc)."""

    def __init__(
        self,
        myself: Node,
        node_timeout_ms: Callable[[], int],
        new_name: Callable[[], str] = random_node_name,
    ) -> None:
        self.myself = myself
        self._new_name = new_name
        self.nodes: dict[str, Node] = {myself.name: myself}
        self.owners: list[Node | None] = [None] * SLOTS
        self.unassigned = SLOTS
        self.migrating: dict[int, Node] = {}
        self.importing: dict[int, Node] = {}
        self.current_epoch = 0
        self.last_vote_epoch = 0
        self.ok = False
        self.size = 1  # (Redis's initial value, until the first state update)
        self._node_timeout_ms = node_timeout_ms
        self._first_update_ms = -1
        self._minority_ms = 0
        #: messages sent and received on the bus, by type
        self.sent = [0] * len(MESSAGE_TYPES)
        self.received = [0] * len(MESSAGE_TYPES)
        self.links_buffer_limit_exceeded = 0
        #: the state changed in a way nodes.conf must keep; and must reach the disk before
        #: anything else is said (an epoch taken, a vote given)
        self.changed = False
        self.must_sync = False

    # -- slots -------------------------------------------------------------------------------

    def assign(self, slot: int, node: Node) -> None:
        """``node`` serves ``slot`` (which must be unassigned)."""
        if self.owners[slot] is not None:
            raise ClusterStateError(f"slot {slot} is assigned already")
        self.owners[slot] = node
        self.unassigned -= 1
        node.numslots += 1
        node.bits[slot >> 3] |= 1 << (slot & 7)
        node.ranges = None
        self.changed = True

    def unassign(self, slot: int) -> None:
        """Nobody serves ``slot`` any more (it must be assigned)."""
        owner = self.owners[slot]
        if owner is None:
            raise ClusterStateError(f"slot {slot} is unassigned already")
        self.owners[slot] = None
        self.unassigned += 1
        owner.numslots -= 1
        owner.bits[slot >> 3] &= ~(1 << (slot & 7))
        owner.ranges = None
        self.changed = True

    def slots_of(self, node: Node) -> list[int]:
        if not node.numslots:
            return []
        bits = _BITS
        return [(i << 3) + b for i, byte in enumerate(node.bits) if byte for b in bits[byte]]

    def ranges_of(self, node: Node) -> list[tuple[int, int]]:
        """``node``'s slots as ascending runs (kept until its slots change)."""
        if node.ranges is None:
            node.ranges = _ranges(node.bits)
        return node.ranges

    def unassign_all(self, node: Node) -> None:
        for slot in self.slots_of(node):
            self.unassign(slot)

    # -- nodes ---------------------------------------------------------------------------

    def new_name(self) -> str:
        return self._new_name()

    def add(self, node: Node) -> None:
        if node.name in self.nodes:
            raise ClusterStateError(f"node {node.name} is known already")
        self.nodes[node.name] = node
        self.changed = True

    def remove(self, node: Node) -> None:
        """Forget ``node``: its slots become unassigned, its replicas lose their master."""
        if node is self.myself:
            raise ClusterStateError("a node cannot remove itself")
        self.unassign_all(node)
        for table in (self.migrating, self.importing):
            for slot in [s for s, n in table.items() if n is node]:
                del table[slot]
        for replica in node.replicas:
            replica.master = None
        if node.master is not None:
            node.master.replicas.remove(node)
            node.master = None
        del self.nodes[node.name]
        self.changed = True

    def rename(self, node: Node, name: str) -> None:
        del self.nodes[node.name]
        node.name = name
        self.nodes[name] = node
        self.changed = True

    def set_master_role(self, node: Node) -> None:
        """``node`` is a master (no longer anyone's replica). Another node promoted so is
        one replicas may migrate to (MIGRATE_TO: its old master had replicas)."""
        if node.flags & MASTER:
            return
        if node.master is not None:
            node.master.replicas.remove(node)
            node.master = None
        node.flags = (node.flags & ~REPLICA) | MASTER
        if node is not self.myself:
            node.flags |= MIGRATE_TO
        self.changed = True

    def set_replica_of(self, node: Node, master: Node) -> None:
        if node.master is not None:
            node.master.replicas.remove(node)
        node.master = master
        master.replicas.append(node)
        master.flags |= MIGRATE_TO  # (a master that had replicas: an orphan if it loses them)
        node.flags = (node.flags & ~(MASTER | MIGRATE_TO)) | REPLICA
        self.changed = True

    def assigned_count(self) -> int:
        return SLOTS - self.unassigned

    def failing_slots(self, flag: int) -> int:
        """Assigned slots whose owner carries ``flag`` (PFAIL or FAIL)."""
        return sum(node.numslots for node in self.nodes.values() if node.flags & flag)

    # -- the cluster's health (Redis's clusterUpdateState) -----------------------------------

    def update_state(self, now_ms: int, full_coverage: bool) -> None:
        if self._first_update_ms < 0:
            self._first_update_ms = now_ms
        myself = self.myself
        if myself.is_master and not self.ok and now_ms - self._first_update_ms < WRITABLE_DELAY_MS:
            return
        ok = True
        if full_coverage:
            ok = self.unassigned == 0 and not any(
                node.numslots and node.flags & FAIL for node in self.nodes.values()
            )
        self.size = reachable = 0
        for node in self.nodes.values():
            if node.is_master and node.numslots:
                self.size += 1
                if not node.flags & (FAIL | PFAIL):
                    reachable += 1
        if reachable < self.size // 2 + 1:
            ok = False
            self._minority_ms = now_ms
        if ok == self.ok:
            return
        rejoin = min(max(self._node_timeout_ms(), MIN_REJOIN_DELAY_MS), MAX_REJOIN_DELAY_MS)
        if ok and myself.is_master and now_ms - self._minority_ms < rejoin:
            return
        self.ok = ok

    def reset(self, hard: bool) -> None:
        """CLUSTER RESET (Redis's clusterReset): no slots, no open slots, no other node;
        HARD also zeroes the epochs and takes a new name."""
        myself = self.myself
        if myself.master is not None:
            myself.master.replicas.remove(myself)
            myself.master = None
        myself.flags = (myself.flags & ~REPLICA) | MASTER
        self.migrating.clear()
        self.importing.clear()
        for slot, owner in enumerate(self.owners):
            if owner is not None:
                self.unassign(slot)
        for node in self.nodes.values():
            node.replicas = []
        self.nodes = {myself.name: myself}
        if hard:
            self.current_epoch = self.last_vote_epoch = myself.config_epoch = 0
            myself.name = self._new_name()
            self.nodes = {myself.name: myself}
        self.changed = True

    # -- epochs --------------------------------------------------------------------------

    def bump_epoch(self) -> bool:
        """CLUSTER BUMPEPOCH: a new config epoch for myself unless mine is already the
        greatest epoch known (Redis's clusterBumpConfigEpochWithoutConsensus)."""
        greatest = max(self.current_epoch, *(n.config_epoch for n in self.nodes.values()))
        myself = self.myself
        if myself.config_epoch and myself.config_epoch == greatest:
            return False
        self.current_epoch += 1
        myself.config_epoch = self.current_epoch
        self.changed = self.must_sync = True
        return True

    def epoch_of(self, node: Node) -> int:
        """The config epoch shown for ``node``: its master's for a replica (Redis 7.0)."""
        if node.flags & REPLICA and node.master is not None:
            return node.master.config_epoch
        return node.config_epoch

    # -- invariants ----------------------------------------------------------------------

    def check_invariants(self) -> None:
        counts: dict[str, int] = {}
        for slot, owner in enumerate(self.owners):
            if owner is None:
                continue
            if self.nodes.get(owner.name) is not owner:
                raise ClusterStateError(f"slot {slot} is owned by unknown node {owner.name}")
            counts[owner.name] = counts.get(owner.name, 0) + 1
        if self.unassigned != self.owners.count(None):
            raise ClusterStateError(f"{self.unassigned} slots counted unassigned")
        for node in self.nodes.values():
            if node.numslots != counts.get(node.name, 0):
                raise ClusterStateError(f"node {node.name} counts {node.numslots} slots")
            if sum(bin(byte).count("1") for byte in node.bits) != node.numslots:
                raise ClusterStateError(f"node {node.name}'s slot bitmap disagrees")
            if self.ranges_of(node) != list(runs(self.slots_of(node))):
                raise ClusterStateError(f"node {node.name}'s slot runs disagree")
            if node.master is not None and node not in node.master.replicas:
                raise ClusterStateError(f"replica {node.name} unknown to its master")
        if not self.myself.flags & MYSELF or self.nodes.get(self.myself.name) is not self.myself:
            raise ClusterStateError("myself is not in the node table")
        for table in (self.migrating, self.importing):
            for slot, node in table.items():
                if not 0 <= slot < SLOTS or self.nodes.get(node.name) is not node:
                    raise ClusterStateError(f"open slot {slot} names an unknown node")
