"""Pub/Sub: SUBSCRIBE, PSUBSCRIBE, SSUBSCRIBE, their UNSUBSCRIBEs, PUBLISH, SPUBLISH, PUBSUB.

Theory of operation
-------------------
``PubSub`` (one per engine, ``engine.pubsub``) maps each channel, pattern and shard channel to
its subscribers, in subscription order; each ``Client`` keeps its own side (``channels``,
``patterns``, ``shard_channels``). A message is encoded once per protocol version and appended
to every receiver's ``out``, which is marked pending: it leaves with the receiver's other
replies in the transport's one write per loop turn, never one write per message.

A RESP2 client with a subscription may run only (P|S)(UN)SUBSCRIBE, PING, QUIT and RESET
(Redis's "subscribed mode"); a RESP3 client gets its messages as push frames and may run
anything. ``Client.hooked`` marks the clients whose commands take the slow path in the engine
(``hooked_call``): the restricted ones and, while a MONITOR is open, everyone (see
``commands/monitor.py``). A client with no subscription and no monitor around costs the engine
that one attribute test per command.

A subscriber's unsent output counts against ``client-output-buffer-limit pubsub`` (the
transport picks the class from ``Client.output_class``): one that does not read is dropped.
With ``appendfsync always`` a message may reveal a write not yet on disk (a keyspace event, a
PUBLISH from a client that wrote or read): its receivers' output then waits for that effect
(``hold``, compared with what is durable exactly as a reader's ``seen_seq``), since Redis writes
no output before the AOF's fsync.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol

from headwater.commands.context import (
    Block,
    Client,
    PendingReplies,
    help_handler,
    reject_subcommand,
    spec,
)
from headwater.commands.monitor import feed_monitors, output_hold, stop_monitor
from headwater.errors import ReplyError, err, require, subcommand_syntax
from headwater.glob import Matcher, compile_glob, glob_match
from headwater.ops.change import Change, ForReplicas, Written
from headwater.resp.types import Raw, Reply

if TYPE_CHECKING:
    from headwater.commands.context import CommandSpec

#: what a RESP2 client with subscriptions may still run (Redis: processCommand)
SUBSCRIBED_MODE_COMMANDS = frozenset(
    (
        "ping",
        "subscribe",
        "ssubscribe",
        "unsubscribe",
        "sunsubscribe",
        "psubscribe",
        "punsubscribe",
        "quit",
        "reset",
    )
)
#: the commands whose reply is pushes (Redis: cmdHasPushAsReply): their confirmations stay
#: where the command runs, other messages to the client running a command follow its reply
PUSH_REPLIES = frozenset(
    ("subscribe", "ssubscribe", "psubscribe", "unsubscribe", "sunsubscribe", "punsubscribe")
)
_ALREADY_SENT = Raw(b"")
REPLICA_KEYSPACE = err("Replica can't interact with the keyspace")

Subscribers = dict[Client, None]
#: each message kind's frame starts, RESP2 (array) and RESP3 (push)
_MESSAGE = (b"*3\r\n$7\r\nmessage\r\n", b">3\r\n$7\r\nmessage\r\n")
_PMESSAGE = (b"*4\r\n$8\r\npmessage\r\n", b">4\r\n$8\r\npmessage\r\n")
_SMESSAGE = (b"*3\r\n$8\r\nsmessage\r\n", b">3\r\n$8\r\nsmessage\r\n")
_SHARD_KINDS = (b"ssubscribe", b"sunsubscribe")
_PATTERN_KINDS = (b"psubscribe", b"punsubscribe")


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def _push_header(resp: int, length: int) -> bytes:
    return b">%d\r\n" % length if resp == 3 else b"*%d\r\n" % length


def confirmation(resp: int, kind: bytes, name: bytes | None, count: int) -> bytes:
    """A (un)subscribe confirmation; ``name`` None when there was nothing to unsubscribe."""
    shown = (b"_\r\n" if resp == 3 else b"$-1\r\n") if name is None else _bulk(name)
    return b"%s%s%s:%d\r\n" % (_push_header(resp, 3), _bulk(kind), shown, count)


class PubSub:
    """Every channel's, pattern's and shard channel's subscribers, and the monitors."""

    def __init__(self, pending: PendingReplies) -> None:
        self.channels: dict[bytes, Subscribers] = {}
        self.patterns: dict[bytes, Subscribers] = {}
        self.shard_channels: dict[bytes, Subscribers] = {}
        #: each pattern's compiled matcher (glob's own cache holds 1024: with more patterns,
        #: every PUBLISH would compile them all again)
        self.matchers: dict[bytes, Matcher] = {}
        #: MONITOR clients, in the order they started
        self.monitors: Subscribers = {}
        #: the engine's clients with output to flush
        self.pending = pending

    # -- delivery ------------------------------------------------------------------------

    def publish(self, channel: bytes, message: bytes, hold: int = 0) -> int:
        """Deliver to the channel's subscribers and to those of every matching pattern;
        returns how many deliveries were made (a client may count twice, as in Redis).
        ``hold``: the effect the message may reveal (see ``_deliver``), or 0."""
        receivers = 0
        subscribers = self.channels.get(channel)
        if subscribers:
            body = b"$%d\r\n%s\r\n$%d\r\n%s\r\n" % (len(channel), channel, len(message), message)
            self._deliver(subscribers, _MESSAGE, body, hold)
            receivers = len(subscribers)
        if self.patterns:
            receivers += self._publish_to_patterns(channel, message, hold)
        return receivers

    def _publish_to_patterns(self, channel: bytes, message: bytes, hold: int) -> int:
        receivers = 0
        matchers = self.matchers
        if len(matchers) > 2 * len(self.patterns) + 64:  # patterns gone since: forget theirs
            self.matchers = matchers = {p: m for p, m in matchers.items() if p in self.patterns}
        for pattern, clients in self.patterns.items():
            match = matchers.get(pattern)
            if match is None:
                match = matchers[pattern] = compile_glob(pattern)
            if match(channel):
                body = _bulk(pattern) + _bulk(channel) + _bulk(message)
                self._deliver(clients, _PMESSAGE, body, hold)
                receivers += len(clients)
        return receivers

    def spublish(self, channel: bytes, message: bytes, hold: int = 0) -> int:
        subscribers = self.shard_channels.get(channel)
        if not subscribers:
            return 0
        self._deliver(subscribers, _SMESSAGE, _bulk(channel) + _bulk(message), hold)
        return len(subscribers)

    def _deliver(
        self, clients: Subscribers, heads: tuple[bytes, bytes], body: bytes, hold: int
    ) -> None:
        """Append the message to each client's output, encoded once per protocol version
        (``heads``: the RESP2 and RESP3 starts of the frame). With ``hold`` (appendfsync
        always), the receivers' output waits until that effect is durable, as their reads'
        would: Redis writes no output before the AOF's fsync, so no message shows a write
        that a crash could still undo."""
        resp2 = heads[0] + body
        resp3 = b""
        for client in clients:
            if client.resp == 2:
                client.out.append(resp2)
            else:
                resp3 = resp3 or heads[1] + body
                client.out.append(resp3)
        self.pending.add_all(clients)
        if hold:
            for client in clients:
                if client.seen_seq < hold:
                    client.seen_seq = hold

    # -- subscriptions -------------------------------------------------------------------

    def subscribe(
        self, c: Client, names: Iterable[bytes], kind: bytes, table: dict[bytes, Subscribers]
    ) -> Raw:
        mine = _own(c, kind)
        frames = []
        for name in names:
            if name not in mine:
                mine[name] = None
                table.setdefault(name, {})[c] = None
            frames.append(confirmation(c.resp, kind, name, _count(c, kind)))
        c.update_hooked()
        return self._push(c, frames)

    def unsubscribe(
        self, c: Client, names: list[bytes], kind: bytes, table: dict[bytes, Subscribers]
    ) -> Raw:
        """``names`` empty: every subscription of that kind (one confirmation with no name
        when there is none)."""
        mine = _own(c, kind)
        targets = names or list(mine)
        frames = []
        for name in targets:
            if name in mine:
                del mine[name]
                _drop(table, name, c)
            frames.append(confirmation(c.resp, kind, name, _count(c, kind)))
        if not targets:
            frames.append(confirmation(c.resp, kind, None, _count(c, kind)))
        c.update_hooked()
        return self._push(c, frames)

    def _push(self, c: Client, frames: list[bytes]) -> Raw:
        """Confirmations are pushes, as messages are: they go to the output directly, past
        CLIENT REPLY OFF|SKIP, which silence command replies only (Redis: CLIENT_PUSHING,
        in both protocols). The command's own reply is then empty (a SKIP is spent on it)."""
        if not c.closed:
            c.out.extend(frames)
            self.pending.add(c)
        return _ALREADY_SENT

    def drop_shard_channels(self, gone: Callable[[bytes], bool]) -> None:
        """Cluster mode: the subscribers of each shard channel ``gone`` names (its slot left
        this node's shard) are unsubscribed from it, each told as by SUNSUBSCRIBE (Redis's
        removeChannelsInSlot)."""
        table = self.shard_channels
        for channel in [name for name in table if gone(name)]:
            for c in list(table.get(channel, {})):
                self.unsubscribe(c, [channel], b"sunsubscribe", table)

    def forget(self, c: Client) -> None:
        """Drop every subscription of ``c`` and its monitor, silently (RESET, a closed
        connection)."""
        for name in c.channels:
            _drop(self.channels, name, c)
        for name in c.patterns:
            _drop(self.patterns, name, c)
        for name in c.shard_channels:
            _drop(self.shard_channels, name, c)
        c.channels, c.patterns, c.shard_channels = {}, {}, {}
        stop_monitor(c)
        c.update_hooked()

    def check_invariants(self, clients: Iterable[Client]) -> None:
        """Each side mirrors the other: a client is in a channel's subscribers exactly when
        the channel is in the client's own table; no channel is kept without subscribers;
        only monitors are monitors. ``clients``: every connected client."""
        everyone = list(clients)
        for kind, table in (
            (b"subscribe", self.channels),
            (b"psubscribe", self.patterns),
            (b"ssubscribe", self.shard_channels),
        ):
            for name, subscribers in table.items():
                require(bool(subscribers), f"{kind!r} {name!r} kept with no subscriber")
                for client in subscribers:
                    require(name in _own(client, kind), f"{name!r} missing on {client.id}")
            for client in everyone:
                for name in _own(client, kind):
                    require(client in table.get(name, {}), f"{client.id} not in {name!r}")
        for client in everyone:
            require(client.monitor == (client in self.monitors), f"{client.id}: monitor flag")
            restricted = client.monitor or (client.resp == 2 and client.subscribed())
            require(client.hooked == (restricted or bool(self.monitors)), f"{client.id}: hooked")


def _own(c: Client, kind: bytes) -> dict[bytes, None]:
    """The client's own table for a (un)subscribe reply kind."""
    if kind in _SHARD_KINDS:
        return c.shard_channels
    if kind in _PATTERN_KINDS:
        return c.patterns
    return c.channels


def _count(c: Client, kind: bytes) -> int:
    """The count a confirmation shows: shard subscriptions alone, or channels and patterns."""
    if kind in _SHARD_KINDS:
        return len(c.shard_channels)
    return len(c.channels) + len(c.patterns)


def _drop(table: dict[bytes, Subscribers], name: bytes, c: Client) -> None:
    clients = table.get(name)
    if clients is not None:
        clients.pop(c, None)
        if not clients:
            del table[name]


# -- the restricted modes ---------------------------------------------------------------------


def restriction(c: Client, row: CommandSpec) -> ReplyError | None:
    """Why ``c`` may not run ``row`` now: a MONITOR touching keys, or a RESP2 subscriber
    running anything but the subscribed-mode commands (Redis's texts)."""
    if c.monitor and (row.sees_data or row.may_replicate):
        return REPLICA_KEYSPACE
    if c.resp == 2 and c.subscribed() and row.name not in SUBSCRIBED_MODE_COMMANDS:
        return err(
            f"Can't execute '{row.name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT "
            "/ RESET are allowed in this context"
        )
    return None


class Dispatcher(Protocol):
    """What ``hooked_call`` needs of the engine."""

    pubsub: PubSub

    def call(self, c: Client, row: CommandSpec, argv: list[bytes]) -> Reply | Block: ...
    def _error(self, exc: ReplyError) -> ReplyError: ...
    def _reply(self, c: Client, reply: Reply) -> None: ...


def hooked_call(
    engine: Dispatcher, c: Client, row: CommandSpec, argv: list[bytes], queued: bool = False
) -> Reply | Block:
    """``Engine.call`` for a hooked client: refuse what its mode forbids (not for what a
    transaction queued earlier: Redis judges a command when it is sent), run it, then show
    it to the monitors (after it ran, as Redis does, so a transaction's commands come before
    its EXEC)."""
    if not queued:
        refused = restriction(c, row)
        if refused is not None:
            row.rejected_calls += 1
            return engine._error(refused)
    reply = engine.call(c, row, argv)
    if engine.pubsub.monitors and not c.replaying:
        if c.monitor and not queued and not isinstance(reply, Block):
            engine._reply(c, reply)  # a monitor gets its own reply before the line
            reply = _ALREADY_SENT
        feed_monitors(engine.pubsub, c, row, argv)
    return reply


# -- commands -----------------------------------------------------------------------------------


def cmd_subscribe(c: Client, argv: list[bytes]) -> Reply:
    ps = c.server.pubsub
    return ps.subscribe(c, argv[1:], b"subscribe", ps.channels)


def cmd_psubscribe(c: Client, argv: list[bytes]) -> Reply:
    ps = c.server.pubsub
    return ps.subscribe(c, argv[1:], b"psubscribe", ps.patterns)


def cmd_ssubscribe(c: Client, argv: list[bytes]) -> Reply:
    ps = c.server.pubsub
    return ps.subscribe(c, argv[1:], b"ssubscribe", ps.shard_channels)


def cmd_unsubscribe(c: Client, argv: list[bytes]) -> Reply:
    ps = c.server.pubsub
    return ps.unsubscribe(c, argv[1:], b"unsubscribe", ps.channels)


def cmd_punsubscribe(c: Client, argv: list[bytes]) -> Reply:
    ps = c.server.pubsub
    return ps.unsubscribe(c, argv[1:], b"punsubscribe", ps.patterns)


def cmd_sunsubscribe(c: Client, argv: list[bytes]) -> Reply:
    ps = c.server.pubsub
    return ps.unsubscribe(c, argv[1:], b"sunsubscribe", ps.shard_channels)


def _to_replicas(c: Client, argv: list[bytes], reply: Reply) -> Reply | Written:
    """A message goes to the replicas' subscribers too, in its place among the effects (not
    to the AOF: as Redis); nothing is built when no one takes effects."""
    if not c.server.propagating:
        return reply
    return Written(reply, Change(0, [ForReplicas(argv)]))


def _elsewhere(c: Client, argv: list[bytes], reply: Reply, sharded: bool) -> Reply | Written:
    """Cluster mode: the message goes over the bus (to every node; a shard message to the
    other nodes of this shard), not down the replication stream (as Redis)."""
    bus = c.server.cluster_bus
    if bus is None:
        return _to_replicas(c, argv, reply)
    bus.publish(argv[1], argv[2], sharded)
    return reply


def cmd_publish(c: Client, argv: list[bytes]) -> Reply | Written:
    receivers = c.server.pubsub.publish(argv[1], argv[2], output_hold(c))
    return _elsewhere(c, argv, receivers, False)


def cmd_spublish(c: Client, argv: list[bytes]) -> Reply | Written:
    receivers = c.server.pubsub.spublish(argv[1], argv[2], output_hold(c))
    return _elsewhere(c, argv, receivers, True)


def _active(table: dict[bytes, Subscribers], argv: list[bytes], name: bytes) -> Reply:
    """PUBSUB CHANNELS / SHARDCHANNELS [pattern]: the channels with a subscriber."""
    if len(argv) > 3:
        raise subcommand_syntax(name, "PUBSUB")
    if len(argv) == 2:
        return list(table)
    return [channel for channel in table if glob_match(argv[2], channel)]


def cmd_pubsub_channels(c: Client, argv: list[bytes]) -> Reply:
    return _active(c.server.pubsub.channels, argv, argv[1])


def cmd_pubsub_shardchannels(c: Client, argv: list[bytes]) -> Reply:
    return _active(c.server.pubsub.shard_channels, argv, argv[1])


def _counts(table: dict[bytes, Subscribers], channels: list[bytes]) -> Reply:
    reply: list[Reply] = []
    for channel in channels:
        reply += [channel, len(table.get(channel, ()))]
    return reply


def cmd_pubsub_numsub(c: Client, argv: list[bytes]) -> Reply:
    return _counts(c.server.pubsub.channels, argv[2:])


def cmd_pubsub_shardnumsub(c: Client, argv: list[bytes]) -> Reply:
    return _counts(c.server.pubsub.shard_channels, argv[2:])


def cmd_pubsub_numpat(c: Client, argv: list[bytes]) -> Reply:
    return len(c.server.pubsub.patterns)


PUBSUB_HELP = [
    b"PUBSUB <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"CHANNELS [<pattern>]",
    b"    Return the currently active channels matching a <pattern> (default: '*').",
    b"NUMPAT",
    b"    Return number of subscriptions to patterns.",
    b"NUMSUB [<channel> ...]",
    b"    Return the number of subscribers for the specified channels, excluding",
    b"    pattern subscriptions(default: no channels).",
    b"SHARDCHANNELS [<pattern>]",
    b"    Return the currently active shard level channels matching a <pattern> (default: '*').",
    b"SHARDNUMSUB [<shardchannel> ...]",
    b"    Return the number of subscribers for the specified shard level channel(s)",
    b"HELP",
    b"    Prints this help.",
]

_SUB = "pubsub noscript loading stale"
_INFO = "pubsub loading stale"

SPECS = (
    spec("subscribe", -2, _SUB, handler=cmd_subscribe),
    spec("unsubscribe", -1, _SUB, handler=cmd_unsubscribe),
    spec("psubscribe", -2, _SUB, handler=cmd_psubscribe),
    spec("punsubscribe", -1, _SUB, handler=cmd_punsubscribe),
    spec("ssubscribe", -2, _SUB, (1, -1, 1), handler=cmd_ssubscribe),
    spec("sunsubscribe", -1, _SUB, (1, -1, 1), handler=cmd_sunsubscribe),
    spec("publish", 3, "pubsub loading stale fast x_may_replicate", handler=cmd_publish),
    spec(
        "spublish", 3, "pubsub loading stale fast x_may_replicate", (1, 1, 1), handler=cmd_spublish
    ),
    spec(
        "pubsub",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("pubsub|channels", -2, _INFO, handler=cmd_pubsub_channels),
            spec("pubsub|numsub", -2, _INFO, handler=cmd_pubsub_numsub),
            spec("pubsub|numpat", 2, _INFO, handler=cmd_pubsub_numpat),
            spec("pubsub|shardchannels", -2, _INFO, handler=cmd_pubsub_shardchannels),
            spec("pubsub|shardnumsub", -2, _INFO, handler=cmd_pubsub_shardnumsub),
            spec("pubsub|help", 2, "loading stale", handler=help_handler(PUBSUB_HELP)),
        ),
    ),
)
