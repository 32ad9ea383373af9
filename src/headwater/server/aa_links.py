"""The links of an active-active region to its peers (issue 18; docs/design/active-active.md).

Theory of operation
-------------------
Each region ships only its own effects, and each peer pulls them: for every ``--peers``
entry a ``PeerLink`` task connects (``AUTH masterauth`` when set), sends ``AAPSYNC <me> <n>
(<region> <applied>) * n`` (its whole applied vector), and reads ``+AASTREAM <region>`` then
the peer's own effects as ``AAEFFECT`` arrays, in sequence order, from the one after what the
vector says it applied. Each is handed to ``Region.receive`` (the inbox applies it exactly once,
in causal order; one that arrives twice is dropped), and what got applied goes through the
engine's choke point (``Engine.apply_change``) like any write: the AOF logs it, so a restart
resumes from the vector the log rebuilds, and asks for nothing it had. A broken link logs why
and tries again every second. ``AAPING <seq>`` lines (each second) say the peer's last own
sequence, which gives the lag.

The serving side (``aapsync``): the connection becomes a *feed* that gets this region's own
effects, those ``RegionKeyspace.own`` holds from the asked sequence on. An own effect is
shipped only once it is durable here (``durable_seq`` of the AOF has passed the engine effect
that logged it): a region that crashed must never come back with a sequence number a peer
already holds for another effect. Feeds are written once per loop turn (``flush``), after the
AOF write.

Each second a link acknowledges (``AAACK <me> <seq>``, on its own connection) the peer's
effects that are durable here; once every peer has acknowledged an own effect, it is dropped
from memory (``RegionKeyspace.trim_own``). The own effects still kept are saved with the
region in snapshots, so a region restarted from a snapshot (or a rewritten AOF) still serves
them.

``AALINK PAUSE|RESUME <region | host:port | *>`` closes a link and keeps it closed, or lets it
connect again: the test seam for partitions (and maintenance).

A peer that asks for own effects no longer kept (``active-active-keep-effects`` trimmed them,
it lost its data, or it is new) gets ``+AASTATE <region>`` and this region's whole state
(``activeactive.transfer``) once it is durable here, then the own effects after it. The peer
merges the state with its own, whatever the two vectors: after a two-way cut, both regions
trimmed what the other needs and each is the other's donor (issue 32).

Relaying: each second a region asks, for each peer whose own link is not connected, one
connected peer to relay that peer's effects (``AARELAY origin next``, on its link); the
serving side sends them from ``RegionKeyspace.relayed`` besides its own, and keeps them until
every other peer's durable vector (sent with ``AAACK``) holds them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import hiredis

from headwater.activeactive.envelope import Effect, from_line
from headwater.activeactive.transfer import covers
from headwater.commands.context import Client
from headwater.commands.region_keyspace import RegionKeyspace
from headwater.errors import ReplyError, err
from headwater.ops.change import Change
from headwater.replication.hold import TimedHold
from headwater.resp.encoder import encode_command, encode_command_into
from headwater.resp.types import Raw, Reply

# a real import, not under TYPE_CHECKING: compiled by mypyc, ``Feed.conn``'s annotation is
# protocol's native class, whose type object the module's top level reads; with the module
# never imported it was NULL and the import died with a segmentation fault
from headwater.server.protocol import Connection

if TYPE_CHECKING:
    from headwater.server.hosts import LinkHost

log = logging.getLogger("headwater")

RETRY_S = 1.0
PING_S = 1.0
READ_SIZE = 64 * 1024
NO_REPLY = Raw(b"")


class LinkError(Exception):
    """The link must be closed; the message is the log line."""


@dataclass
class Feed:
    """A peer region pulling this region's own effects."""

    conn: Connection
    client: Client
    region: int
    next_seq: int  # the next own sequence to send
    #: a state transfer to send first (``activeactive.transfer``), once the engine effect
    #: ``state_bound`` (the last one the state holds) is durable here
    state: bytes | None = None
    state_bound: int = 0
    #: origins the peer asked this region to relay (``AARELAY``), each with the next
    #: sequence to send
    relay: dict[int, int] = field(default_factory=dict)


@dataclass
class PeerLink:
    """This region's link to one peer: it pulls the peer's own effects."""

    host: str
    port: int
    region: int = 0  # learnt from +AASTREAM
    state: str = "connect"  # connect, connecting, connected, paused
    paused: bool = False
    received_seq: int = 0  # the highest sequence received from the peer
    peer_seq: int = 0  # the peer's last own sequence (AAPING)
    last_io: float = 0.0
    connected_since: float = 0.0
    applied_effects: int = 0
    #: the peer announced a state transfer (``+AASTATE``): the next reply is the state
    expect_state: bool = False
    state_transfers: int = 0
    #: origins this link's peer was asked to relay (it is connected, their own links not)
    relaying: set[int] = field(default_factory=set)
    relayed_effects: int = 0
    #: (engine effect sequence that logged them, the peer's applied sequence then): what may
    #: be acknowledged once the AOF has it; and the last sequence acknowledged
    unacked: list[tuple[int, int]] = field(default_factory=list)
    acked: int = 0
    task: asyncio.Task[None] | None = None
    writer: asyncio.StreamWriter | None = None
    wake: asyncio.Event = field(default_factory=asyncio.Event)

    def name(self) -> str:
        return f"{self.host}:{self.port}"


class _Watchdog:
    """A link's timeout: the connection is aborted (its reader then sees the end of the
    stream) once nothing came from the peer for ``limit_s`` (it sends AAPING each second)."""

    def __init__(self, link: PeerLink, writer: asyncio.StreamWriter, limit_s: float) -> None:
        self.link = link
        self.writer = writer
        self.limit_s = limit_s
        self.timed_out = False
        self.handle: asyncio.TimerHandle | None = None
        link.last_io = time.monotonic()
        self._arm()

    def _arm(self) -> None:
        self.handle = asyncio.get_running_loop().call_later(PING_S, self._tick)

    def _tick(self) -> None:
        if time.monotonic() - self.link.last_io > self.limit_s:
            self.timed_out = True
            self.writer.transport.abort()
            return
        self._arm()

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class RegionLinks:
    def __init__(self, server: LinkHost, rk: RegionKeyspace) -> None:
        self.server = server
        self.engine = server.engine
        self.rk = rk
        self.region = rk.region
        self.feeds: list[Feed] = []
        self.links = [PeerLink(host, port) for host, port in self.engine.config["peers"]]
        #: whether own effects go to the feeds this turn or with the next turns'
        #: (``repl-stream-hold-us``, as the replicas' stream: replication/hold.py)
        self.hold = TimedHold(self.engine.config["repl-stream-hold-us"], self._hold_ended)
        #: per own effect (index in ``rk.own``), the engine effect sequence that logged it
        self._bounds: list[int] = []
        #: per peer region, the last of our sequences it said it holds durably (AAACK)
        self.peer_acks: dict[int, int] = {}
        #: per peer region, its durable vector (AAACK): what it need not be relayed
        self.peer_vectors: dict[int, dict[int, int]] = {}
        #: (engine effect sequence, the vector then), taken each second: once the AOF has
        #: that effect, the vector is durable here and goes with the acknowledgements
        self._marks: list[tuple[int, dict[int, int]]] = []
        self._durable_vector: dict[int, int] = {}
        #: the regions that asked for this region's effects (``AAPSYNC``)
        self.askers: set[int] = set()
        self._last_ping = time.monotonic()
        rk.links = self

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """After recovery: what the AOF replay rebuilt is durable already."""
        self._bounds = [0] * len(self.rk.own)
        self.rk.forget_relayed()  # (what the replay kept: peers get it from its origin)
        for link in self.links:
            link.task = self.server.loop.create_task(self._run(link))

    def close(self) -> None:
        self.hold.cancel()  # (peers ask again for what was held: AAPSYNC)
        for link in self.links:
            if link.task is not None:
                link.task.cancel()
            if link.writer is not None:
                link.writer.close()

    # -- the serving side ------------------------------------------------------------------

    def aapsync(self, c: Client, peer: int, vector: dict[int, int]) -> Reply:
        conn = self.server.connections.get(c)
        if conn is None or conn.transport is None:
            raise err("AAPSYNC needs a network client")
        start = vector.get(self.region.id, 0) + 1
        state: bytes | None = None
        if start < self.rk.own_first:
            # (a full state transfer, whatever the vectors: the peer merges it with its own
            # state, so one that applied what this region has not is caught up too)
            state = self.rk.dump_state(with_own=False)
            start = self.region.inbox.applied[self.region.id] + 1
        conn.send()  # replies queued before this one leave first
        c.reply_on = False
        # (a region without peers of its own kept none: from now on, for this one)
        self.rk.keep_own = True
        self.askers.add(peer)
        feed = Feed(conn, c, peer, start)
        if state is None:
            conn.transport.write(b"+AASTREAM %d\r\n" % self.region.id)
            log.warning("Region link from %s: sending own effects from %d", c.addr, start)
        else:
            feed.state, feed.state_bound = state, self.engine.effect_seq
            merged = "" if covers(self.region.inbox.applied, vector) else " (to merge)"
            log.warning(
                "Region link from %s (region %d): a full state transfer%s (%d bytes), then "
                "own effects from %d",
                c.addr,
                peer,
                merged,
                len(state),
                start,
            )
        self.feeds.append(feed)
        self._send(feed)
        return NO_REPLY

    def flush(self, force: bool = False) -> None:
        """Once per loop turn, after the AOF write: own effects now durable go to the
        feeds, or wait up to ``repl-stream-hold-us`` to go with the next turns' (a write to
        each peer a turn would wake each peer, and make a system call, that often)."""
        missing = len(self.rk.own) - len(self._bounds)
        if missing > 0:
            self._bounds += [self.engine.effect_seq] * missing
        if not self.feeds:
            return
        hold, loop = self.hold, self.server.loop
        if not force:
            hold.policy.hold_s = self.engine.config["repl-stream-hold-us"] / 1e6  # (CONFIG SET)
            if hold.held(loop, 0):
                return
        wrote = False
        for feed in list(self.feeds):
            wrote = self._send(feed) or wrote
        if wrote:
            hold.sent(loop)

    def _hold_ended(self) -> None:
        self.flush(force=True)

    def _shippable(self) -> int:
        """How many of ``rk.own`` may leave: those logged at or before the durable effect."""
        durable = self._durable_seq()
        bounds = self._bounds
        lo, hi = 0, len(bounds)
        while lo < hi:  # bounds only grow: the first one not durable yet
            mid = (lo + hi) // 2
            if bounds[mid] <= durable:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _send(self, feed: Feed) -> bool:
        """What the feed may have now; whether own effects went out."""
        transport = feed.conn.transport
        if transport is None or transport.is_closing() or feed.client.closed:
            self.feeds.remove(feed)
            return False
        if feed.state is not None:
            if self._durable_seq() < feed.state_bound:
                return False  # (the state must not hold what a crash here could still lose)
            transport.write(b"+AASTATE %d\r\n$%d\r\n" % (self.region.id, len(feed.state)))
            transport.write(feed.state)
            transport.write(b"\r\n")
            feed.state = None
        upto = self._shippable()
        first = feed.next_seq - self.rk.own_first
        if first < 0:  # (trimmed under a lagging feed: the peer asks again, for a state)
            transport.close()
            self.feeds.remove(feed)
            return False
        if feed.relay:
            self._send_relayed(feed, transport)
        if first >= upto:
            return False
        transport.write(b"".join(self.rk.own[first:upto]))
        feed.next_seq = self.rk.own_first + upto
        return True

    def _send_relayed(self, feed: Feed, transport: asyncio.WriteTransport) -> None:
        """Other origins' effects the peer asked for (it is cut off from them), as applied
        here: the peer's inbox applies each once, in causal order."""
        for origin, nxt in list(feed.relay.items()):
            kept = self.rk.relayed.get(origin)
            if kept is None:
                continue
            first = nxt - self.rk.relay_first[origin]
            if first < 0:  # (no longer kept here: the peer gets them some other way)
                del feed.relay[origin]
                continue
            if first < len(kept):
                transport.write(_encoded(kept[first:]))
                feed.relay[origin] = self.rk.relay_first[origin] + len(kept)

    def relay(self, c: Client, origin: int, start: int) -> None:
        """AARELAY from a peer's link (the client that sent AAPSYNC)."""
        feed = next((f for f in self.feeds if f.client is c), None)
        if feed is None:
            raise err("AARELAY: only on a region link, after AAPSYNC")
        if origin in (self.region.id, feed.region) or start <= 0:
            feed.relay.pop(origin, None)
            return
        if origin not in feed.relay:
            log.warning(
                "Region link to region %d: relaying region %d's effects", feed.region, origin
            )
        feed.relay[origin] = start
        self._send(feed)

    def _durable_seq(self) -> int:
        if not self.engine.config["appendonly"]:
            return self.engine.effect_seq
        durable: int = self.server.durability.aof.durable_seq
        return durable

    def _send_acks(self) -> None:
        """Tell each peer how far its effects are durable here (``AAACK``): it may then
        forget them; with the durable vector, so that it keeps others' effects for relaying
        only while some peer lacks them."""
        durable = self._durable_seq()
        marks = self._marks
        done_marks = [m for m in marks if m[0] <= durable]
        if done_marks:
            self._durable_vector = done_marks[-1][1]
            del marks[: len(done_marks)]
        marks.append((self.engine.effect_seq, dict(self.region.inbox.applied)))
        vector = self._durable_vector
        for link in self.links:
            done = [seq for bound, seq in link.unacked if bound <= durable]
            del link.unacked[: len(done)]
            if link.writer is None or link.state != "connected":
                continue
            if (done and done[-1] > link.acked) or vector:
                link.acked = max([link.acked, *done])
                argv = [b"AAACK", b"%d" % self.region.id, b"%d" % link.acked]
                for region, seq in sorted(vector.items()):
                    if region not in (link.region, self.region.id):
                        argv += [b"%d" % region, b"%d" % seq]
                link.writer.write(encode_command(argv))

    def ack(self, peer: int, seq: int, vector: dict[int, int]) -> None:
        """AAACK from a peer: it holds our effects up to ``seq`` durably. Once every peer
        does, they are dropped from memory (and from later snapshots)."""
        if seq > self.peer_acks.get(peer, 0):
            self.peer_acks[peer] = seq
        if vector:
            self.peer_vectors[peer] = vector
        # (a region without peers of its own: the regions that asked for its effects)
        regions = {link.region for link in self.links} if self.links else set(self.askers)
        if not regions or 0 in regions or not regions <= set(self.peer_acks):
            return  # a peer never heard from: keep everything
        dropped = self.rk.trim_own(min(self.peer_acks[r] for r in regions))
        del self._bounds[:dropped]

    def _trim_relayed(self) -> None:
        """Others' effects are kept for relaying until every other peer holds them (or,
        with ``active-active-keep-effects``, at most that many per origin)."""
        regions = {link.region for link in self.links}
        keep: int = self.engine.config["active-active-keep-effects"]
        for origin, kept in list(self.rk.relayed.items()):
            others = regions - {origin}
            if not others:  # (two regions: no peer to relay them to; min() of nothing raised)
                self.rk.trim_relayed(origin, self.rk.relay_first[origin] - 1 + len(kept))
            elif 0 not in others and others <= set(self.peer_vectors):
                upto = min(self.peer_vectors[r].get(origin, 0) for r in others)
                self.rk.trim_relayed(origin, upto)
            if keep and len(kept) > keep:
                self.rk.trim_relayed(origin, self.rk.relay_first[origin] - 1 + len(kept) - keep)

    def _trim_kept(self) -> None:
        """``active-active-keep-effects`` (0: no limit): at most that many own effects are
        kept for peers that lag; one that needs older ones gets a full state transfer."""
        keep: int = self.engine.config["active-active-keep-effects"]
        if not keep or len(self.rk.own) <= keep:
            return
        drop = min(len(self.rk.own) - keep, self._shippable())
        if drop > 0:
            dropped = self.rk.trim_own(self.rk.own_first - 1 + drop)
            del self._bounds[:dropped]

    def cron(self) -> None:
        now = time.monotonic()
        if now - self._last_ping < PING_S:
            return
        self._last_ping = now
        self._send_acks()
        self._trim_kept()
        self._trim_relayed()
        self._ask_relays()
        ping = encode_command([b"AAPING", b"%d" % self.region.inbox.applied[self.region.id]])
        for feed in list(self.feeds):
            transport = feed.conn.transport
            if transport is None or transport.is_closing():
                self.feeds.remove(feed)
            else:
                transport.write(ping)

    # -- the pulling side ------------------------------------------------------------------

    def _ask_relays(self) -> None:
        """Each second: for each peer whose own link is not connected, ask one connected
        link's peer to relay its effects (``AARELAY origin next``); stop once the peer's own
        link is back. Each effect keeps its origin and sequence; the inbox applies it once."""
        relay: bool = self.engine.config["active-active-relay"]
        connected = [
            link for link in self.links if link.state == "connected" and link.writer is not None
        ]
        for link in self.links:
            origin = link.region
            if not origin:
                continue
            cut = relay and link.state != "connected"
            via = next((v for v in connected if v is not link), None) if cut else None
            for other in connected:
                writer = other.writer
                if writer is None or other is link:
                    continue
                if other is via and origin not in other.relaying:
                    other.relaying.add(origin)
                    start = self.region.inbox.applied.get(origin, 0) + 1
                    writer.write(encode_command([b"AARELAY", b"%d" % origin, b"%d" % start]))
                elif other is not via and origin in other.relaying:
                    other.relaying.discard(origin)
                    writer.write(encode_command([b"AARELAY", b"%d" % origin, b"0"]))

    def pause(self, peer: bytes, paused: bool) -> int:
        """How many links it changed; -1 when none is named so."""
        changed = 0
        named_any = False
        for link in self.links:
            named = peer in (b"*", link.name().encode(), b"%d" % link.region)
            named_any = named_any or named
            if named and link.paused != paused:
                link.paused = paused
                changed += 1
                if paused and link.writer is not None:
                    link.writer.close()
                link.wake.set()
        return changed if named_any or peer == b"*" else -1

    async def _run(self, link: PeerLink) -> None:
        while True:
            if link.paused:
                link.state = "paused"
                link.wake.clear()
                await link.wake.wait()
                continue
            try:
                await self._session(link)
            except asyncio.CancelledError:
                raise
            except LinkError as exc:
                log.warning("Region link %s: %s", link.name(), exc)
            # (a name of its own: compiled, ``exc`` above is typed LinkError, and an OSError
            # bound to it raised a TypeError that ended the link's task for good)
            except (OSError, EOFError, asyncio.IncompleteReadError, TimeoutError) as lost:
                if not link.paused:
                    log.warning("Region link %s: %s", link.name(), lost or "connection lost")
            except Exception:  # a bug must not end the link for good: log it, try again
                log.exception("Region link %s failed", link.name())
            finally:
                if link.writer is not None:
                    link.writer.close()
                    link.writer = None
                link.state = "paused" if link.paused else "connect"
            if not link.paused:
                link.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(link.wake.wait(), RETRY_S)

    def _tls(self) -> ssl.SSLContext | None:
        """The links' TLS context with ``peers-tls yes`` (the peers' TLS ports)."""
        return self.server.tls.client if self.engine.config["peers-tls"] else None

    async def _session(self, link: PeerLink) -> None:
        link.state = "connecting"
        limit_s = float(self.engine.config["repl-timeout"])
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(link.host, link.port, ssl=self._tls()), limit_s
        )
        link.writer = writer
        link.expect_state = False
        link.relaying.clear()  # (a new feed there: it relays nothing yet)
        # (a new session acknowledges again what is here, once it is durable: the peer may
        # have restarted and forgotten)
        link.acked = 0
        if link.region:
            applied_seq = self.region.inbox.applied.get(link.region, 0)
            link.unacked.append((self.engine.effect_seq, applied_seq))
        config = self.engine.config
        if config["masterauth"]:
            argv = [b"AUTH"]
            if config["masteruser"]:
                argv.append(config["masteruser"].encode())
            writer.write(encode_command([*argv, config["masterauth"].encode()]))
        applied = self.region.inbox.applied
        argv = [b"AAPSYNC", b"%d" % self.region.id, b"%d" % len(applied)]
        for region, seq in sorted(applied.items()):
            argv += [b"%d" % region, b"%d" % seq]
        writer.write(encode_command(argv))
        reply = hiredis.Reader()
        await self._stream(link, reader, writer, reply, limit_s)

    async def _stream(
        self,
        link: PeerLink,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        parser: hiredis.Reader,
        limit_s: float,
    ) -> None:
        streaming = False
        # (the timeout on a timer of its own, as the replica link: a wait_for around each read
        # made a task and a timer handle per chunk)
        watchdog = _Watchdog(link, writer, limit_s)
        try:
            while True:
                data = await reader.read(READ_SIZE)
                if not data:
                    if watchdog.timed_out:
                        raise TimeoutError(f"no data nor AAPING for {limit_s:g} s")
                    raise EOFError("connection closed by the peer")
                link.last_io = time.monotonic()
                streaming = self._feed(link, parser, data, streaming)
        finally:
            watchdog.cancel()

    def _feed(self, link: PeerLink, parser: hiredis.Reader, data: bytes, streaming: bool) -> bool:
        """Parse what was read; apply the effects in it (in one go); whether the handshake
        is done."""
        parser.feed(data)
        effects: list[Effect] = []
        while (item := parser.gets()) is not False:
            if isinstance(item, hiredis.ReplyError):
                raise LinkError(f"refused: {item}")
            if not streaming:
                if link.expect_state:
                    self._adopt(link, item)
                    streaming = True
                else:
                    streaming = self._handshake(link, item)
                continue
            if not isinstance(item, list) or not item:
                raise LinkError(f"not an effect: {item!r:.80}")
            if item[0] == b"AAPING" and len(item) == 2:
                link.peer_seq = max(link.peer_seq, int(item[1]))
                continue
            try:
                effect = from_line(item)
            except ReplyError as exc:
                raise LinkError(f"{exc.msg}: {item[:6]!r}") from None
            if effect.origin != link.region:
                link.relayed_effects += 1  # (relayed: this region asked for them)
            effects.append(effect)
            self.rk.received(effect, item)  # (logged as read: no second line made)
        if effects:
            self._apply(link, effects)
        return streaming

    def _handshake(self, link: PeerLink, item: object) -> bool:
        if item == b"OK":
            return False  # AUTH's reply
        if not isinstance(item, bytes) or not item.startswith((b"AASTREAM ", b"AASTATE ")):
            raise LinkError(f"unexpected reply to AAPSYNC: {item!r:.80}")
        region = int(item.split()[1])
        if item.startswith(b"AASTATE "):
            link.expect_state = True  # (the state comes next, then the effects)
        if region == self.region.id:
            raise LinkError("the peer is this region itself")
        if not link.region:  # (the first session: what is here is acknowledged too)
            applied_seq = self.region.inbox.applied.get(region, 0)
            link.unacked.append((self.engine.effect_seq, applied_seq))
        link.region = region
        link.state = "connected"
        link.connected_since = time.monotonic()
        if link.expect_state:
            log.warning("Region link %s: region %d sends its whole state", link.name(), region)
            return False
        log.warning("Region link %s: streaming region %d's effects", link.name(), region)
        return True

    def _adopt(self, link: PeerLink, item: object) -> None:
        """The peer's state (``+AASTATE``): it becomes this region's; logged, and what it made
        ready is applied."""
        link.expect_state = False
        if not isinstance(item, bytes):
            raise LinkError(f"not a region state: {item!r:.80}")
        engine = self.engine
        engine.keyspace.now_ms = engine.clock.now_ms()
        own_first, own_kept = self.rk.own_first, len(self.rk.own)
        started = time.monotonic()
        try:
            ready = self.rk.adopt(item)
        except ReplyError as exc:
            raise LinkError(exc.msg) from None
        if self.rk.own_first != own_first or len(self.rk.own) != own_kept:
            self._bounds = [0] * len(self.rk.own)  # (what is left of them is durable)
        link.applied_effects += ready
        link.state_transfers += 1
        lines = self.rk.take_lines()
        engine.apply_change(0, [], Change(len(lines), lines))
        link.unacked.append((engine.effect_seq, self.region.inbox.applied.get(link.region, 0)))
        engine.serve_ready()
        self.server.schedule_flush()
        log.warning(
            "Region link %s: merged region %d's state (%d bytes, %.0f ms); vector now %s",
            link.name(),
            link.region,
            len(item),
            (time.monotonic() - started) * 1000,
            ",".join(f"{r}={s}" for r, s in sorted(self.region.inbox.applied.items())),
        )

    def _apply(self, link: PeerLink, effects: list[Effect]) -> None:
        engine = self.engine
        started = time.perf_counter()
        self._apply_effects(link, effects)
        # (LATENCY's region-link event: what applying a peer's effects held the loop)
        engine.latency.sample("region-link", (time.perf_counter() - started) * 1000)

    def _apply_effects(self, link: PeerLink, effects: list[Effect]) -> None:
        engine = self.engine
        engine.keyspace.now_ms = engine.clock.now_ms()
        for effect in effects:
            if effect.origin == link.region:
                link.received_seq = max(link.received_seq, effect.seq)
            link.applied_effects += self.region.receive(effect)
        lines = self.rk.take_lines()
        if lines:
            engine.apply_change(0, [], Change(len(lines), lines))
            link.unacked.append((engine.effect_seq, self.region.inbox.applied.get(link.region, 0)))
        link.peer_seq = max(link.peer_seq, link.received_seq)
        engine.serve_ready()
        self.server.schedule_flush()

    def info_lines(self) -> list[str]:
        now = time.monotonic()
        lines = [f"peers:{len(self.links)}", f"feeds:{len(self.feeds)}"]
        applied = self.region.inbox.applied
        for n, link in enumerate(self.links):
            seq = applied.get(link.region, 0) if link.region else 0
            lag = max(link.peer_seq - seq, 0)
            io = int((now - link.last_io) * 1000) if link.last_io else -1
            lines.append(
                f"peer{n}:host={link.host},port={link.port},region={link.region},"
                f"state={link.state},applied_seq={seq},received_seq={link.received_seq},"
                f"peer_seq={link.peer_seq},lag={lag},last_io_ms={io},"
                f"acked_by_peer={self.peer_acks.get(link.region, 0)},"
                f"state_transfers={link.state_transfers},"
                f"relaying={'+'.join(str(r) for r in sorted(link.relaying)) or '-'},"
                f"relayed_effects={link.relayed_effects}"
            )
        return lines


def _encoded(lines: list[tuple[bytes, ...]]) -> bytearray:
    """Effect lines as the commands a link ships, in one buffer (in C where built: the
    compiled ``encode_command`` of each line cost ~5k instructions an XADD's effect)."""
    buf = bytearray()
    for line in lines:
        encode_command_into(buf, list(line))
    return buf
