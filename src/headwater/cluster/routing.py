"""Where a command with keys belongs (Redis 7.0's ``getNodeByQuery``), and the error that
sends its client elsewhere (``clusterRedirectClient``).

A transaction is judged as one request: the keys of every queued command together.
"""

from __future__ import annotations

from collections.abc import Callable

from headwater.cluster.slots import key_slot
from headwater.cluster.state import REPLICA, Cluster, Node
from headwater.errors import ReplyError

# what ``route`` decides
SERVE = 0
CROSSSLOT = 1
TRYAGAIN = 2  # Redis's CLUSTER_REDIR_UNSTABLE
DOWN_UNBOUND = 3
DOWN = 4
DOWN_READONLY = 5
ASK = 6
MOVED = 7


class Request:
    """What the routing needs to know of a command besides its keys."""

    def __init__(
        self,
        write: bool,
        asking: bool = False,
        readonly_client: bool = False,
        migrate: bool = False,
        shard_pubsub: bool = False,
    ) -> None:
        self.write = write
        self.asking = asking  # the client sent ASKING, or the command implies it
        self.readonly_client = readonly_client  # READONLY: reads served by a replica
        self.migrate = migrate
        self.shard_pubsub = shard_pubsub


class Verdict:
    def __init__(self, code: int, slot: int = -1, node: Node | None = None) -> None:
        self.code = code
        self.slot = slot  # the slot of the request's keys (-1: none, or refused before)
        self.node = node  # where MOVED and ASK send the client


SERVED_WITHOUT_KEYS = Verdict(SERVE)


def route(
    cluster: Cluster,
    keys: list[bytes],
    request: Request,
    exists: Callable[[bytes], bool],
    reads_when_down: bool,
    pubsub_when_down: bool,
) -> Verdict:
    """Whether this node serves a request with ``keys`` (in command order; ``exists``
    tells whether a key is in database 0)."""
    if not keys:
        return SERVED_WITHOUT_KEYS
    first = keys[0]
    slot = key_slot(first)
    owner = cluster.owners[slot]
    if owner is None:
        return Verdict(DOWN_UNBOUND)
    myself = cluster.myself
    migrating = owner is myself and slot in cluster.migrating
    importing = not migrating and slot in cluster.importing
    several = False
    for key in keys[1:]:
        if key != first:
            if key_slot(key) != slot:
                return Verdict(CROSSSLOT)
            several = True
    missing = present = 0
    if (migrating or importing) and not request.shard_pubsub:
        for key in keys:
            if exists(key):
                present += 1
            else:
                missing += 1
    if not cluster.ok:
        if request.shard_pubsub:
            if not pubsub_when_down:
                return Verdict(DOWN)
        elif not reads_when_down:
            return Verdict(DOWN)
        elif request.write:
            return Verdict(DOWN_READONLY)
    if (migrating or importing) and request.migrate:
        return Verdict(SERVE, slot)
    if migrating and missing:
        if present:
            return Verdict(TRYAGAIN, slot)
        target = cluster.migrating[slot]
        if target is myself:  # (Redis redirects only to another node)
            return Verdict(SERVE, slot)
        return Verdict(ASK, slot, target)
    if importing and request.asking:
        if several and missing:
            return Verdict(TRYAGAIN, slot)
        return Verdict(SERVE, slot)
    if (
        (request.readonly_client or request.shard_pubsub)
        and not request.write
        and myself.flags & REPLICA
        and myself.master is owner
    ):
        return Verdict(SERVE, slot)
    if owner is not myself:
        return Verdict(MOVED, slot, owner)
    return Verdict(SERVE, slot)


def endpoint(node: Node, preferred: str) -> str:
    """The address MOVED, ASK and CLUSTER SLOTS give for ``node``
    (``cluster-preferred-endpoint-type``)."""
    if preferred == "hostname":
        return node.hostname or "?"
    if preferred == "unknown-endpoint":
        return ""
    return node.ip


def redirection(verdict: Verdict, preferred_endpoint: str, plain_port: bool) -> ReplyError:
    """The error a refused request gets (``plain_port``: a non-TLS client of a TLS cluster
    is sent to the node's plaintext port)."""
    code = verdict.code
    if code == CROSSSLOT:
        return ReplyError("CROSSSLOT", "Keys in request don't hash to the same slot")
    if code == TRYAGAIN:
        return ReplyError("TRYAGAIN", "Multiple keys request during rehashing of slot")
    if code == DOWN:
        return ReplyError("CLUSTERDOWN", "The cluster is down")
    if code == DOWN_READONLY:
        return ReplyError("CLUSTERDOWN", "The cluster is down and only accepts read commands")
    if code == DOWN_UNBOUND:
        return ReplyError("CLUSTERDOWN", "Hash slot not served")
    node = verdict.node
    if node is None:
        raise ValueError(f"verdict {code} without a node")
    port = node.pport if plain_port and node.pport else node.port
    word = "ASK" if code == ASK else "MOVED"
    return ReplyError(word, f"{verdict.slot} {endpoint(node, preferred_endpoint)}:{port}")
