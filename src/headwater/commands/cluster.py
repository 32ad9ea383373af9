"""CLUSTER, ASKING, READONLY and READWRITE (Redis 7.0's cluster.c commands and replies).

Without ``cluster-enabled yes`` every one of them answers Redis's "This instance has cluster
support disabled". The replies' texts (CLUSTER NODES, INFO) are Redis's formats; the node
table and slots they show are ``headwater.cluster.state``'s.
"""

from __future__ import annotations

import ipaddress
import os
from typing import Any

from headwater.cluster.bus import ClusterBus
from headwater.cluster.nodes_conf import (
    NodesConfError,
    lock,
    node_line,
    nodes_text,
    parse,
    save,
)
from headwater.cluster.routing import endpoint
from headwater.cluster.slot_index import SlotIndex
from headwater.cluster.slots import SLOTS, key_slot
from headwater.cluster.state import (
    FAIL,
    MASTER,
    MESSAGE_TYPES,
    MYSELF,
    PFAIL,
    Cluster,
    Node,
    random_node_name,
)
from headwater.commands.args import parse_int, strict_int
from headwater.commands.context import (
    Client,
    CommandSpec,
    ServerAPI,
    help_handler,
    reject_subcommand,
    spec,
)
from headwater.config import Config
from headwater.errors import SYNTAX, ReplyError, err, subcommand_syntax, wrong_arity
from headwater.resp.types import OK, Reply, Status, Verbatim

DISABLED = err("This instance has cluster support disabled")


def config_path(config: Config) -> str:
    path: str = os.path.join(config["dir"], config["cluster-config-file"])
    return path


def attach_cluster(config: Config, now_ms: int) -> Cluster | None:
    """The cluster state of a node started with ``cluster-enabled yes`` (else None): what
    its nodes.conf holds, or a new master that knows only itself (then saved at once, so
    that its name survives a restart). Raises ``NodesConfError`` for a file it cannot
    read."""
    if not config["cluster-enabled"]:
        return None
    timeout = lambda: int(config["cluster-node-timeout"])  # noqa: E731
    path = config_path(config)
    try:
        lock(path)
    except OSError as exc:
        raise NodesConfError(f"{path}: {exc}") from None
    try:
        with open(path, encoding="utf-8") as file:
            text = file.read()
    except FileNotFoundError:
        text = ""
    except (OSError, UnicodeDecodeError) as exc:
        raise NodesConfError(f"{path}: {exc}") from None
    if text.strip():
        try:
            cluster = parse(text, timeout, now_ms, random_node_name)
        except NodesConfError as exc:
            raise NodesConfError(f"{path}: {exc}") from None
    else:
        myself = Node(random_node_name(), MYSELF | MASTER)
        cluster = Cluster(myself, timeout)
    _announce(config, cluster.myself)
    save(path, cluster)
    return cluster


def _announce(config: Config, myself: Node) -> None:
    """Where this node says it listens (the configuration wins over the file)."""
    port = config["cluster-announce-port"] or config["port"]
    myself.port = port
    myself.cport = config["cluster-announce-bus-port"] or config["cluster-port"] or port + 10000
    myself.hostname = config["cluster-announce-hostname"]
    if config["cluster-announce-ip"]:
        myself.ip = config["cluster-announce-ip"]


def cluster_of(c: Client) -> Cluster:
    cluster = c.server.cluster
    if cluster is None:
        raise DISABLED
    return cluster


# -- the node table as text and replies ---------------------------------------------------


def info_text(cluster: Cluster) -> str:
    myself = cluster.myself
    lines = [
        f"cluster_state:{'ok' if cluster.ok else 'fail'}",
        f"cluster_slots_assigned:{cluster.assigned_count()}",
        f"cluster_slots_ok:{cluster.assigned_count() - cluster.failing_slots(FAIL | PFAIL)}",
        f"cluster_slots_pfail:{cluster.failing_slots(PFAIL)}",
        f"cluster_slots_fail:{cluster.failing_slots(FAIL)}",
        f"cluster_known_nodes:{len(cluster.nodes)}",
        f"cluster_size:{cluster.size}",
        f"cluster_current_epoch:{cluster.current_epoch}",
        f"cluster_my_epoch:{cluster.epoch_of(myself)}",
    ]
    for direction, counts in (("sent", cluster.sent), ("received", cluster.received)):
        for name, count in zip(MESSAGE_TYPES, counts, strict=True):
            if count:
                lines.append(f"cluster_stats_messages_{name}_{direction}:{count}")
        lines.append(f"cluster_stats_messages_{direction}:{sum(counts)}")
    lines.append(f"total_cluster_links_buffer_limit_exceeded:{cluster.links_buffer_limit_exceeded}")
    return "".join(line + "\r\n" for line in lines)


def _node_entry(c: Client, node: Node) -> list[Any]:
    preferred = c.server.config["cluster-preferred-endpoint-type"]
    where = endpoint(node, preferred)
    extra: dict[bytes, bytes] = {}
    if preferred != "ip":
        extra[b"ip"] = node.ip.encode()
    if preferred != "hostname" and node.hostname:
        extra[b"hostname"] = node.hostname.encode()
    shown: bytes | None = None if preferred == "unknown-endpoint" else where.encode()
    return [shown, node.port, node.name.encode(), extra]


def _replica_available(c: Client, node: Node) -> bool:
    if node.flags & FAIL:
        return False
    offset = _own_offset(c) if node.flags & MYSELF else node.repl_offset
    return offset != 0


def _own_offset(c: Client) -> int:
    replication = c.server.replication
    return replication.offset if replication is not None else 0


def cmd_cluster_slots(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    reply: list[Any] = []
    owners = cluster.owners
    start = 0
    while start < SLOTS:
        owner = owners[start]
        end = start
        while end + 1 < SLOTS and owners[end + 1] is owner:
            end += 1
        if owner is not None:
            entry: list[Any] = [start, end, _node_entry(c, owner)]
            entry += [_node_entry(c, r) for r in owner.replicas if _replica_available(c, r)]
            reply.append(entry)
        start = end + 1
    return reply


def _shard_node(c: Client, node: Node) -> dict[bytes, Any]:
    preferred = c.server.config["cluster-preferred-endpoint-type"]
    entry: dict[bytes, Any] = {b"id": node.name.encode()}
    if node.port:
        entry[b"port"] = node.port
    entry[b"ip"] = node.ip.encode()
    entry[b"endpoint"] = endpoint(node, preferred).encode()
    if node.hostname:
        entry[b"hostname"] = node.hostname.encode()
    is_master = node.is_master
    entry[b"role"] = b"master" if is_master else b"replica"
    offset = _own_offset(c) if node.flags & MYSELF else node.repl_offset
    entry[b"replication-offset"] = offset
    if node.flags & FAIL:
        health = b"fail"
    elif not is_master and offset == 0:
        health = b"loading"
    else:
        health = b"online"
    entry[b"health"] = health
    return entry


def cmd_cluster_shards(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    shards: list[Any] = []
    for node in cluster.nodes.values():
        if not node.is_master:
            continue
        slots: list[int] = []
        for first, last in cluster.ranges_of(node):
            slots += (first, last)
        members = [_shard_node(c, node), *(_shard_node(c, r) for r in node.replicas)]
        shards.append({b"slots": slots, b"nodes": members})
    return shards


def cmd_cluster_nodes(c: Client, argv: list[bytes]) -> Reply:
    return Verbatim(nodes_text(cluster_of(c)).encode())


def cmd_cluster_info(c: Client, argv: list[bytes]) -> Reply:
    return Verbatim(info_text(cluster_of(c)).encode())


def cmd_cluster_myid(c: Client, argv: list[bytes]) -> Reply:
    return cluster_of(c).myself.name.encode()


def cmd_cluster_myshardid(c: Client, argv: list[bytes]) -> Reply:
    """Redis 7.2's shard ID. Here the name of the shard's primary: every node of a shard
    gives the same one (7.0's bus carries no shard ID), and it changes with a failover."""
    myself = cluster_of(c).myself
    return (myself.master if myself.master is not None else myself).name.encode()


def cmd_cluster_links(c: Client, argv: list[bytes]) -> Reply:
    """One map per bus connection: this node's links to the others ("to") and theirs to
    it ("from")."""
    cluster = cluster_of(c)
    reply: list[Any] = []
    for node in cluster.nodes.values():
        for direction, link in ((b"to", node.link), (b"from", node.inbound)):
            if link is None or (direction == b"to" and not node.connected):
                continue
            buffered = link.buffered()
            reply.append(
                {
                    b"direction": direction,
                    b"node": node.name.encode(),
                    b"create-time": link.created_ms,
                    b"events": b"rw" if buffered else b"r",
                    b"send-buffer-allocated": buffered,
                    b"send-buffer-used": buffered,
                }
            )
    return reply


def _lookup(cluster: Cluster, raw: bytes) -> Node | None:
    """Redis's clusterLookupNode: a 40-character name this node knows, else None."""
    return cluster.nodes.get(raw.decode("latin-1")) if len(raw) == 40 else None


def _known(cluster: Cluster, raw: bytes) -> Node:
    node = _lookup(cluster, raw)
    if node is None:
        raise err(f"Unknown node {raw.decode('utf-8', 'replace')}")
    return node


def cmd_cluster_count_failure_reports(c: Client, argv: list[bytes]) -> Reply:
    node = _known(cluster_of(c), argv[2])
    bus = c.server.cluster_bus
    return bus.failure_reports(node, int(c.server.clock.now_ms())) if bus is not None else 0


def cmd_cluster_replicas(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    node = _known(cluster, argv[2])
    if not node.is_master:
        raise err("The specified node is not a master")
    return [node_line(cluster, r).encode() for r in node.replicas]


# -- keys and slots ---------------------------------------------------------------------


def cmd_cluster_keyslot(c: Client, argv: list[bytes]) -> Reply:
    cluster_of(c)
    return key_slot(argv[2])


def slot_index(server: ServerAPI) -> SlotIndex:
    """Database 0's keys by slot, made whole again if writes went around it (a load)."""
    db = server.keyspace.dbs[0]
    index = db.slots
    if index is None:
        index = db.slots = SlotIndex()
    if index.size != len(db.data):
        index.rebuild(db.data)
    return index


def keys_in_db(server: ServerAPI, slot: int, limit: int = 2**63) -> list[bytes]:
    """Keys of database 0 in ``slot``, newest first (the order of Redis's slot lists)."""
    return slot_index(server).newest(slot, limit)


def cmd_cluster_countkeysinslot(c: Client, argv: list[bytes]) -> Reply:
    cluster_of(c)
    slot = parse_int(argv[2])
    if not 0 <= slot < SLOTS:
        raise err("Invalid slot")
    return slot_index(c.server).count(slot)


def cmd_cluster_getkeysinslot(c: Client, argv: list[bytes]) -> Reply:
    cluster_of(c)
    slot = parse_int(argv[2])
    count = parse_int(argv[3])
    if count < 0 or not 0 <= slot < SLOTS:
        raise err("Invalid slot or number of keys")
    return keys_in_db(c.server, slot, count)


def _slot(raw: bytes) -> int:
    """Redis's getSlotOrReply."""
    try:
        slot = parse_int(raw)
    except ReplyError:
        slot = -1
    if not 0 <= slot < SLOTS:
        raise err("Invalid or out of range slot")
    return slot


def _check_slots(cluster: Cluster, chosen: bytearray, delete: bool, first: int, last: int) -> None:
    """Redis's checkSlotAssignmentsOrReply for ``first..last``."""
    for slot in range(first, last + 1):
        owner = cluster.owners[slot]
        if delete and owner is None:
            raise err(f"Slot {slot} is already unassigned")
        if not delete and owner is not None:
            raise err(f"Slot {slot} is already busy")
        if chosen[slot]:
            raise err(f"Slot {slot} specified multiple times")
        chosen[slot] = 1


def _apply_slots(c: Client, cluster: Cluster, chosen: bytearray, delete: bool) -> Reply:
    for slot in range(SLOTS):
        if chosen[slot]:
            cluster.importing.pop(slot, None)
            if delete:
                cluster.unassign(slot)
            else:
                cluster.assign(slot, cluster.myself)
    changed(c, cluster)
    return OK


def changed(c: Client, cluster: Cluster) -> None:
    """The slots or nodes changed: the state is judged again at once; nodes.conf is written
    by the server before the reply leaves (Redis does both before its next sleep)."""
    full_coverage = c.server.config["cluster-require-full-coverage"]
    cluster.update_state(int(c.server.clock.now_ms()), full_coverage)
    drop_foreign_channels(c.server, cluster)


def drop_foreign_channels(server: ServerAPI, cluster: Cluster) -> None:
    """Shard channels whose slot this node's shard no longer serves lose their subscribers."""
    pubsub = server.pubsub
    if not pubsub.shard_channels:
        return
    myself = cluster.myself
    shard = myself.master if myself.master is not None else myself

    def gone(channel: bytes) -> bool:
        return cluster.owners[key_slot(channel)] is not shard

    pubsub.drop_shard_channels(gone)


def cmd_cluster_saveconfig(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    try:
        save(config_path(c.server.config), cluster)
    except OSError as exc:
        raise err(f"error saving the cluster node config: {exc.strerror}") from None
    return OK


def _addslots(c: Client, argv: list[bytes], delete: bool) -> Reply:
    cluster = cluster_of(c)
    slots = [_slot(raw) for raw in argv[2:]]
    chosen = bytearray(SLOTS)
    for slot in slots:
        _check_slots(cluster, chosen, delete, slot, slot)
    return _apply_slots(c, cluster, chosen, delete)


def cmd_cluster_addslots(c: Client, argv: list[bytes]) -> Reply:
    return _addslots(c, argv, False)


def cmd_cluster_delslots(c: Client, argv: list[bytes]) -> Reply:
    return _addslots(c, argv, True)


def _slot_ranges(c: Client, argv: list[bytes], delete: bool) -> Reply:
    cluster = cluster_of(c)
    if len(argv) % 2:
        raise wrong_arity(f"cluster|{argv[1].decode('utf-8', 'replace').lower()}")
    chosen = bytearray(SLOTS)
    for at in range(2, len(argv), 2):
        first, last = _slot(argv[at]), _slot(argv[at + 1])
        if first > last:
            raise err(f"start slot number {first} is greater than end slot number {last}")
        _check_slots(cluster, chosen, delete, first, last)
    return _apply_slots(c, cluster, chosen, delete)


def cmd_cluster_addslotsrange(c: Client, argv: list[bytes]) -> Reply:
    return _slot_ranges(c, argv, False)


def cmd_cluster_delslotsrange(c: Client, argv: list[bytes]) -> Reply:
    return _slot_ranges(c, argv, True)


def cmd_cluster_flushslots(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    if len(c.server.keyspace.dbs[0]):
        raise err("DB must be empty to perform CLUSTER FLUSHSLOTS.")
    for slot in cluster.slots_of(cluster.myself):
        cluster.unassign(slot)
    changed(c, cluster)
    return OK


def _node_for_slot(cluster: Cluster, raw: bytes) -> Node:
    """MIGRATING/IMPORTING's target: a known master."""
    node = _lookup(cluster, raw)
    if node is None:
        raise err(f"I don't know about node {raw.decode('utf-8', 'replace')}")
    if not node.is_master:
        raise err("Target node is not a master")
    return node


def cmd_cluster_setslot(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    myself = cluster.myself
    if not myself.is_master:
        raise err("Please use SETSLOT only with masters.")
    slot = _slot(argv[2])
    action = argv[3].lower()
    if action == b"migrating" and len(argv) == 5:
        if cluster.owners[slot] is not myself:
            raise err(f"I'm not the owner of hash slot {slot}")
        cluster.migrating[slot] = _node_for_slot(cluster, argv[4])
    elif action == b"importing" and len(argv) == 5:
        if cluster.owners[slot] is myself:
            raise err(f"I'm already the owner of hash slot {slot}")
        cluster.importing[slot] = _node_for_slot(cluster, argv[4])
    elif action == b"stable" and len(argv) == 4:
        cluster.importing.pop(slot, None)
        cluster.migrating.pop(slot, None)
    elif action == b"node" and len(argv) == 5:
        _setslot_node(c, cluster, slot, _known(cluster, argv[4]))
    else:
        raise err("Invalid CLUSTER SETSLOT action or number of arguments. Try CLUSTER HELP")
    cluster.changed = True
    changed(c, cluster)
    return OK


def _setslot_node(c: Client, cluster: Cluster, slot: int, node: Node) -> None:
    if not node.is_master:
        raise err("Target node is not a master")
    myself = cluster.myself
    holds = bool(slot_index(c.server).count(slot))
    if cluster.owners[slot] is myself and node is not myself and holds:
        raise err(
            f"Can't assign hashslot {slot} to a different node while I still hold keys for "
            "this hash slot."
        )
    if not holds:
        cluster.migrating.pop(slot, None)
    was_mine = cluster.owners[slot] is myself
    if cluster.owners[slot] is not None:
        cluster.unassign(slot)
    cluster.assign(slot, node)
    migration = c.server.config["cluster-allow-replica-migration"]
    bus = c.server.cluster_bus
    if was_mine and node is not myself and not myself.numslots and migration and bus:
        bus.follow(node)  # (a master left without slots follows their taker)
    if node is myself and slot in cluster.importing:
        cluster.bump_epoch()  # (the slot moved by hand: a new epoch tells the others)
        del cluster.importing[slot]


# -- membership ------------------------------------------------------------------------


def _bus(c: Client) -> ClusterBus:
    bus = c.server.cluster_bus
    if bus is None:
        raise err("the cluster bus is not running")
    return bus


def cmd_cluster_meet(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    if len(argv) > 5:
        raise subcommand_syntax(argv[1], "CLUSTER")
    host, port_text = argv[2].decode("latin-1"), argv[3].decode("latin-1")
    port = strict_int(argv[3])
    if port is None:
        raise err(f"Invalid TCP base port specified: {port_text}")
    cport = port + 10000
    if len(argv) == 5:
        given = strict_int(argv[4])
        if given is None:
            raise err(f"Invalid TCP bus port specified: {argv[4].decode('latin-1')}")
        cport = given
    try:
        ip = str(ipaddress.ip_address(host))
    except ValueError:
        ip = ""
    if not ip or not 0 < port <= 65535 or not 0 < cport <= 65535:
        raise err(f"Invalid node address specified: {host}:{port_text}")
    _bus(c).meet(ip, port, cport, int(c.server.clock.now_ms()))
    changed(c, cluster)
    return OK


def cmd_cluster_forget(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    node = _known(cluster, argv[2])
    myself = cluster.myself
    if node is myself:
        raise err("I tried hard but I can't forget myself...")
    if myself.master is node:
        raise err("Can't forget my master!")
    _bus(c).forget(node, int(c.server.clock.now_ms()))
    changed(c, cluster)
    return OK


def cmd_cluster_replicate(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    node = _known(cluster, argv[2])
    myself = cluster.myself
    if node is myself:
        raise err("Can't replicate myself")
    if not node.is_master:
        raise err("I can only replicate a master, not a replica.")
    if myself.is_master and (myself.numslots or len(c.server.keyspace.dbs[0])):
        raise err("To set a master the node must be empty and without assigned slots.")
    _bus(c).follow(node)
    changed(c, cluster)
    return OK


def cmd_cluster_failover(c: Client, argv: list[bytes]) -> Reply:
    """CLUSTER FAILOVER [FORCE|TAKEOVER], sent to a replica."""
    cluster = cluster_of(c)
    if len(argv) > 3:
        raise subcommand_syntax(argv[1], "CLUSTER")
    force = takeover = False
    if len(argv) == 3:
        mode = argv[2].lower()
        if mode not in (b"force", b"takeover"):
            raise SYNTAX
        takeover = mode == b"takeover"
        force = True
    myself = cluster.myself
    if myself.is_master:
        raise err("You should send CLUSTER FAILOVER to a replica")
    master = myself.master
    if master is None:
        raise err("I'm a replica but my master is unknown to me")
    if not force and (master.flags & FAIL or not master.connected):
        raise err("Master is down or failed, please use CLUSTER FAILOVER FORCE")
    _bus(c).failover.manual(force, takeover, int(c.server.clock.now_ms()))
    changed(c, cluster)
    return OK


# -- epochs and reset --------------------------------------------------------------------


def cmd_cluster_bumpepoch(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    word = "BUMPED" if cluster.bump_epoch() else "STILL"
    changed(c, cluster)
    return Status(f"{word} {cluster.myself.config_epoch}".encode())


def cmd_cluster_set_config_epoch(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    epoch = parse_int(argv[2])
    if epoch < 0:
        raise err(f"Invalid config epoch specified: {epoch}")
    if len(cluster.nodes) > 1:
        raise err(
            "The user can assign a config epoch only when the node does not know any other node."
        )
    if cluster.myself.config_epoch:
        raise err("Node config epoch is already non-zero")
    cluster.myself.config_epoch = epoch
    cluster.current_epoch = max(cluster.current_epoch, epoch)
    cluster.changed = True
    changed(c, cluster)
    return OK


def cmd_cluster_reset(c: Client, argv: list[bytes]) -> Reply:
    cluster = cluster_of(c)
    hard = False
    if len(argv) > 3:
        raise subcommand_syntax(argv[1], "CLUSTER")
    if len(argv) == 3:
        mode = argv[2].lower()
        if mode not in (b"hard", b"soft"):
            raise SYNTAX
        hard = mode == b"hard"
    if cluster.myself.is_master and len(c.db):
        raise err("CLUSTER RESET can't be called with master nodes containing keys")
    cluster.reset(hard)
    changed(c, cluster)
    return OK


# -- the client flags --------------------------------------------------------------------


def cmd_asking(c: Client, argv: list[bytes]) -> Reply:
    cluster_of(c)
    c.asking = True
    return OK


def cmd_readonly(c: Client, argv: list[bytes]) -> Reply:
    cluster_of(c)
    c.readonly_cluster = True
    return OK


def cmd_readwrite(c: Client, argv: list[bytes]) -> Reply:
    cluster_of(c)
    c.readonly_cluster = False
    return OK


CLUSTER_HELP = [
    line.encode()
    for line in (
        "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "ADDSLOTS <slot> [<slot> ...]",
        "    Assign slots to current node.",
        "ADDSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
        "    Assign slots which are between <start-slot> and <end-slot> to current node.",
        "BUMPEPOCH",
        "    Advance the cluster config epoch.",
        "COUNT-FAILURE-REPORTS <node-id>",
        "    Return number of failure reports for <node-id>.",
        "COUNTKEYSINSLOT <slot>",
        "    Return the number of keys in <slot>.",
        "DELSLOTS <slot> [<slot> ...]",
        "    Delete slots information from current node.",
        "DELSLOTSRANGE <start slot> <end slot> [<start slot> <end slot> ...]",
        "    Delete slots information which are between <start-slot> and <end-slot> from "
        "current node.",
        "FAILOVER [FORCE|TAKEOVER]",
        "    Promote current replica node to being a master.",
        "FORGET <node-id>",
        "    Remove a node from the cluster.",
        "GETKEYSINSLOT <slot> <count>",
        "    Return key names stored by current node in a slot.",
        "FLUSHSLOTS",
        "    Delete current node own slots information.",
        "INFO",
        "    Return information about the cluster.",
        "KEYSLOT <key>",
        "    Return the hash slot for <key>.",
        "MEET <ip> <port> [<bus-port>]",
        "    Connect nodes into a working cluster.",
        "MYID",
        "    Return the node id.",
        "NODES",
        "    Return cluster configuration seen by node. Output format:",
        "    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
        "REPLICATE <node-id>",
        "    Configure current node as replica to <node-id>.",
        "RESET [HARD|SOFT]",
        "    Reset current node (default: soft).",
        "SET-CONFIG-EPOCH <epoch>",
        "    Set config epoch of current node.",
        "SETSLOT <slot> (IMPORTING <node-id>|MIGRATING <node-id>|STABLE|NODE <node-id>)",
        "    Set slot state.",
        "REPLICAS <node-id>",
        "    Return <node-id> replicas.",
        "SAVECONFIG",
        "    Force saving cluster configuration on disk.",
        "SLOTS",
        "    Return information about slots range mappings. Each range is made of:",
        "    start, end, master and replicas IP addresses, ports and ids",
        "SHARDS",
        "    Return information about slot range mappings and the nodes associated with them.",
        "LINKS",
        "    Return information about all network links between this node and its peers.",
        "    Output format is an array where each array element is a map containing attributes "
        "of a link",
        "HELP",
        "    Prints this help.",
    )
]


def _cluster_help(c: Client, argv: list[bytes]) -> Reply:
    cluster_of(c)
    reply: Reply = _HELP(c, argv)
    return reply


_HELP = help_handler(CLUSTER_HELP)
_ADMIN = "admin stale no_async_loading"

SPECS: tuple[CommandSpec, ...] = (
    spec(
        "cluster",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("cluster|info", 2, "stale", handler=cmd_cluster_info),
            spec("cluster|nodes", 2, "stale", handler=cmd_cluster_nodes),
            spec("cluster|slots", 2, "stale", handler=cmd_cluster_slots),
            spec("cluster|shards", 2, "stale", handler=cmd_cluster_shards),
            spec("cluster|myid", 2, "stale", handler=cmd_cluster_myid),
            spec("cluster|myshardid", 2, "stale", handler=cmd_cluster_myshardid),
            spec("cluster|links", 2, "stale", handler=cmd_cluster_links),
            spec("cluster|keyslot", 3, "stale", handler=cmd_cluster_keyslot),
            spec("cluster|countkeysinslot", 3, "stale", handler=cmd_cluster_countkeysinslot),
            spec("cluster|getkeysinslot", 4, "stale", handler=cmd_cluster_getkeysinslot),
            spec(
                "cluster|count-failure-reports",
                3,
                "admin stale",
                handler=cmd_cluster_count_failure_reports,
            ),
            spec("cluster|replicas", 3, "admin stale", handler=cmd_cluster_replicas),
            spec("cluster|slaves", 3, "admin stale", handler=cmd_cluster_replicas),
            spec("cluster|addslots", -3, _ADMIN, handler=cmd_cluster_addslots),
            spec("cluster|delslots", -3, _ADMIN, handler=cmd_cluster_delslots),
            spec("cluster|addslotsrange", -4, _ADMIN, handler=cmd_cluster_addslotsrange),
            spec("cluster|delslotsrange", -4, _ADMIN, handler=cmd_cluster_delslotsrange),
            spec("cluster|flushslots", 2, _ADMIN, handler=cmd_cluster_flushslots),
            spec("cluster|setslot", -4, _ADMIN, handler=cmd_cluster_setslot),
            spec("cluster|bumpepoch", 2, _ADMIN, handler=cmd_cluster_bumpepoch),
            spec("cluster|saveconfig", 2, _ADMIN, handler=cmd_cluster_saveconfig),
            spec("cluster|set-config-epoch", 3, _ADMIN, handler=cmd_cluster_set_config_epoch),
            spec("cluster|reset", -2, "admin noscript stale", handler=cmd_cluster_reset),
            spec("cluster|meet", -4, _ADMIN, handler=cmd_cluster_meet),
            spec("cluster|forget", 3, _ADMIN, handler=cmd_cluster_forget),
            spec("cluster|replicate", 3, _ADMIN, handler=cmd_cluster_replicate),
            spec("cluster|failover", -2, _ADMIN, handler=cmd_cluster_failover),
            spec("cluster|help", 2, "loading stale", handler=_cluster_help),
        ),
    ),
    spec("asking", 1, "fast", handler=cmd_asking),
    spec("readonly", 1, "loading stale fast", handler=cmd_readonly),
    spec("readwrite", 1, "loading stale fast", handler=cmd_readwrite),
)
