"""The node table as text: CLUSTER NODES's lines, and nodes.conf (Redis's
``cluster-config-file``), which is those lines without nodes in handshake plus a ``vars``
line with the epochs.

``parse`` reads a file Redis or Headwater wrote and refuses anything else with the line it
stopped at: a node keeps its name, epochs and slots across restarts only through this file.
"""

from __future__ import annotations

import fcntl
import os
import re
from collections.abc import Callable

from headwater.cluster.slots import SLOTS
from headwater.cluster.state import FLAG_WORDS, HANDSHAKE, MYSELF, REPLICA, Cluster, Node

_NAME = re.compile(r"[0-9a-f]{40}\Z")
#: flag words a file may hold: the shown ones, and Redis's aliases
_FLAGS = {word: bit for bit, word in FLAG_WORDS} | {"noflags": 0}


class NodesConfError(Exception):
    """nodes.conf cannot be read (the message names the line)."""


class NodesConfBusy(NodesConfError):
    """Another node holds this nodes.conf."""


#: path -> the descriptor holding its lock, for the life of the process (one node per file)
_LOCKS: dict[str, int] = {}


def lock(path: str) -> None:
    """Take nodes.conf for this process, as Redis does (``flock``, not blocking): a second
    node started on the same file is refused before it reads or writes it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise NodesConfBusy(
            f"Sorry, the cluster configuration file {os.path.basename(path)} is already used "
            "by a different Redis Cluster node. Please make sure that different nodes use "
            "different cluster configuration files."
        ) from None
    old = _LOCKS.pop(path, None)
    _LOCKS[path] = fd
    if old is not None:
        os.close(old)


def node_line(cluster: Cluster, node: Node) -> str:
    """One line of CLUSTER NODES (and of nodes.conf), without its newline."""
    address = f"{node.ip}:{node.port}@{node.cport}"
    if node.hostname:
        address += f",{node.hostname}"
    master = node.master.name if node.master is not None else "-"
    link = "connected" if node.connected or node.flags & MYSELF else "disconnected"
    parts = [
        node.name,
        address,
        node.flag_words(),
        master,
        str(node.ping_sent_ms),
        str(node.pong_received_ms),
        str(cluster.epoch_of(node)),
        link,
    ]
    for first, last in cluster.ranges_of(node):
        parts.append(str(first) if first == last else f"{first}-{last}")
    if node.flags & MYSELF:
        for slot in sorted(set(cluster.migrating) | set(cluster.importing)):
            if slot in cluster.migrating:
                parts.append(f"[{slot}->-{cluster.migrating[slot].name}]")
            else:
                parts.append(f"[{slot}-<-{cluster.importing[slot].name}]")
    return " ".join(parts)


def nodes_text(cluster: Cluster) -> str:
    """CLUSTER NODES: every known node, handshakes included."""
    return "".join(node_line(cluster, node) + "\n" for node in cluster.nodes.values())


def render(cluster: Cluster) -> str:
    """nodes.conf's contents."""
    lines = [
        node_line(cluster, node) + "\n"
        for node in cluster.nodes.values()
        if not node.flags & HANDSHAKE
    ]
    lines.append(
        f"vars currentEpoch {cluster.current_epoch} lastVoteEpoch {cluster.last_vote_epoch}\n"
    )
    return "".join(lines)


def save(path: str, cluster: Cluster) -> None:
    """Write nodes.conf. When an epoch or a vote changed (``cluster.must_sync``): a new file,
    synced, renamed over the old one (a crash leaves the old file or the new, and a node
    never forgets a vote or an epoch it gave). Otherwise in place, as Redis writes it: one
    write padded with newlines to the old length (a kill between it and the truncation
    leaves blank lines, which the loader skips), about 20 times cheaper than a rename."""
    text = render(cluster).encode("utf-8")
    if cluster.must_sync:
        temp = f"{path}.tmp-{os.getpid()}"
        with open(temp, "wb") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temp, path)
        if path in _LOCKS:
            lock(path)  # (the lock was on the file just replaced)
        directory = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
    else:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        try:
            old = os.fstat(fd).st_size
            os.pwrite(fd, text.ljust(old, b"\n"), 0)
            if old > len(text):
                os.ftruncate(fd, len(text))
        finally:
            os.close(fd)
    cluster.changed = cluster.must_sync = False


def parse(
    text: str, node_timeout_ms: Callable[[], int], now_ms: int, new_name: Callable[[], str]
) -> Cluster:
    """The cluster state a nodes.conf holds (raises ``NodesConfError``)."""
    reader = _Reader(now_ms)
    for number, line in enumerate(text.split("\n"), 1):
        words = line.split()
        if not words:
            continue
        try:
            reader.line(words)
        except NodesConfError as exc:
            raise NodesConfError(f"line {number}: {exc}") from None
    return reader.cluster(node_timeout_ms, new_name)


class _Reader:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms
        self.nodes: dict[str, Node] = {}
        self.slots: list[tuple[int, Node]] = []
        self.open: list[tuple[int, bool, str]] = []  # (slot, migrating, node name)
        self.myself: Node | None = None
        self.epochs = (0, 0)

    def node(self, name: str) -> Node:
        if not _NAME.match(name):
            raise NodesConfError(f"invalid node name '{name}'")
        node = self.nodes.get(name)
        if node is None:
            node = self.nodes[name] = Node(name, 0)
        return node

    def line(self, words: list[str]) -> None:
        if words[0] == "vars":
            self.variables(words[1:])
            return
        if len(words) < 8:
            raise NodesConfError("a node line needs at least 8 fields")
        node = self.node(words[0])
        self.address(node, words[1])
        node.flags = self.flags(words[2])
        if node.flags & MYSELF:
            if self.myself is not None:
                raise NodesConfError("two nodes are 'myself'")
            self.myself = node
        if words[3] != "-":
            master = self.node(words[3])
            node.master = master
            master.replicas.append(node)
        node.ping_sent_ms = self.now_ms if _number(words[4]) else 0
        node.pong_received_ms = self.now_ms if _number(words[5]) else 0
        node.config_epoch = _number(words[6])
        for word in words[8:]:
            self.slot_word(node, word)

    def address(self, node: Node, text: str) -> None:
        address, _, hostname = text.partition(",")
        host_port, at, cport = address.rpartition("@")
        if not at:
            host_port, cport = address, ""
        ip, colon, port = host_port.rpartition(":")
        if not colon:
            raise NodesConfError(f"invalid address '{text}'")
        node.ip, node.port, node.hostname = ip, _number(port), hostname
        node.cport = _number(cport) if cport else node.port + 10000

    def flags(self, text: str) -> int:
        flags = 0
        for word in text.split(","):
            if word not in _FLAGS:
                raise NodesConfError(f"unknown flag '{word}'")
            flags |= _FLAGS[word]
        return flags

    def slot_word(self, node: Node, word: str) -> None:
        if word.startswith("["):
            body = word.strip("[]")
            migrating = "->-" in body
            number, _, name = body.partition("->-" if migrating else "-<-")
            self.open.append((_slot(number), migrating, name))
            return
        low, _, high = word.partition("-")
        start = _slot(low)
        end = _slot(high) if high else start
        for slot in range(start, end + 1):
            self.slots.append((slot, node))

    def variables(self, words: list[str]) -> None:
        if len(words) % 2:
            raise NodesConfError("'vars' needs name value pairs")
        values = dict(zip(words[0::2], words[1::2], strict=True))
        self.epochs = (
            _number(values.get("currentEpoch", "0")),
            _number(values.get("lastVoteEpoch", "0")),
        )

    def cluster(self, node_timeout_ms: Callable[[], int], new_name: Callable[[], str]) -> Cluster:
        myself = self.myself
        if myself is None:
            raise NodesConfError("no line describes this node ('myself')")
        cluster = Cluster(myself, node_timeout_ms, new_name)
        cluster.nodes = dict(self.nodes)
        for node in cluster.nodes.values():
            if node.master is not None and node.flags & REPLICA:
                node.config_epoch = 0  # (shown as its master's)
        for slot, node in self.slots:
            if cluster.owners[slot] is not None:
                raise NodesConfError(f"slot {slot} is assigned twice")
            cluster.assign(slot, node)
        for slot, migrating, name in self.open:
            target = cluster.nodes.get(name)
            if target is None:
                raise NodesConfError(f"open slot {slot} names unknown node '{name}'")
            (cluster.migrating if migrating else cluster.importing)[slot] = target
        cluster.current_epoch, cluster.last_vote_epoch = self.epochs
        cluster.check_invariants()
        cluster.changed = False
        return cluster


def _number(text: str) -> int:
    if not text.isdigit():
        raise NodesConfError(f"'{text}' is not a number")
    return int(text)


def _slot(text: str) -> int:
    slot = _number(text)
    if slot >= SLOTS:
        raise NodesConfError(f"slot {slot} is out of range")
    return slot
