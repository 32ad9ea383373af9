"""An active-active region inside a server: the region and the databases kept in step.

A server started with ``region-id`` holds a ``RegionKeyspace``: the ``Region``
(``activeactive``) and the server's databases. Every effect the region applies, its own or a
peer's, passes ``RegionKeyspace.__call__`` (one of ``Region.sinks``), which keeps each database
in step with the region's records of that database number: a stream that exists (entries or
groups) is in ``db.data`` (so KEYS, SCAN, EXISTS, DBSIZE, TYPE and WATCH see it), a tombstone
is not, and blocked readers of a changed key are woken. The applied effects' lines (``AAEFFECT
…``), followed by ``AALOCAL`` lines for the groups a command changed locally, go back to the
engine in the handler's ``Written`` (``written``, ``take_lines``), so the engine's choke point
(``Engine.effect_sinks``) logs them. Snapshots save and load the region through
``Keyspace.persisted`` (``dump_state``, ``load_state``).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Final, Protocol, cast

from headwater.activeactive.envelope import Add, Effect, Move, Select, from_line
from headwater.activeactive.journal import local_line
from headwater.activeactive.persist import dump_state, load_state
from headwater.activeactive.region import Region
from headwater.activeactive.rstream import NodeLimits, RegionGroup, RegionStream
from headwater.activeactive.transfer import adopt_state
from headwater.commands.context import Client
from headwater.commands.notify import lookup_read
from headwater.config import Config
from headwater.errors import WRONGTYPE, ReplyError, err
from headwater.keyspace import Database, Keyspace
from headwater.ops.change import Change, Line, Written
from headwater.ops.streams import IdmpStats, count_retry, expire_iids, remember_iid, retry_of
from headwater.resp.encoder import encode_command
from headwater.resp.split import new_splitter
from headwater.resp.types import Reply
from headwater.stream.ids import StreamID, format_id


def _compact_add_pure(
    origin: int, seq: int, key: bytes, ms: int, id_seq: int, pairs: tuple[bytes, ...]
) -> bytes:
    line = [b"AAXADD", b"%d" % origin, b"%d" % seq, key, b"%d-%d" % (ms, id_seq)]
    line.extend(pairs)
    return encode_command(line)


CompactAdd = Callable[[int, int, bytes, int, int, tuple[bytes, ...]], bytes]


def _native_compact_add() -> CompactAdd | None:
    """The C encoder of the compact line (``resp/_encode.c``), or None (the pure build)."""
    try:
        module = importlib.import_module("headwater.resp._encode")
    except ImportError:
        return None
    return cast(CompactAdd, module.compact_add)


#: ``encode_command`` of a compact line (``AAXADD …``), from its parts
compact_add: Final[CompactAdd] = _native_compact_add() or _compact_add_pure


def effect_command(effect: Effect) -> bytes:
    """The effect's line as a RESP command: what the AOF, the replicas and the peers get. An
    own effect is encoded once for all of them; the compact line in C straight from its
    parts, without the line's list nor a bytes object per number."""
    if effect.follows:
        op = effect.ops[0]
        if len(effect.ops) == 1 and isinstance(op, Add):
            ms, id_seq = op.sid
            return compact_add(effect.origin, effect.seq, op.key, ms, id_seq, op.pairs)
    return encode_command(effect.to_line())


def decode_command(command: bytes) -> list[bytes]:
    """The words of one RESP command (an own effect kept encoded)."""
    splitter = new_splitter()
    splitter.feed(command)
    words = splitter.gets()
    if words is False or splitter.pending:
        raise ValueError("not one whole RESP command")
    return words


def unsupported(what: str) -> ReplyError:
    return err(f"{what} is not supported in active-active mode (region-id is set)")


class Links(Protocol):
    """The server layer's links to the peer regions (server/aa_links.py)."""

    def aapsync(self, c: Client, peer: int, vector: dict[int, int]) -> Reply: ...
    def pause(self, peer: bytes, paused: bool) -> int:
        """How many links it changed; -1 when none is named so."""
        ...

    def info_lines(self) -> list[str]: ...
    def ack(self, peer: int, seq: int, vector: dict[int, int]) -> None: ...
    def relay(self, c: Client, origin: int, start: int) -> None: ...


class RegionKeyspace:
    """The region of a server and its databases, kept in step (one of ``Region.sinks``)."""

    def __init__(self, region: Region, dbs: list[Database]) -> None:
        self.region = region
        region.keep_outbox = False  # (the links ship ``own``, which this sink fills)
        #: the server's databases: the region's records of database n are kept in dbs[n]
        self.dbs = dbs
        self.db = dbs[0]
        #: this region's own effects, in sequence order, from ``own_first`` on: what peers
        #: resume from (rebuilt by the AOF replay; snapshots save them), each as its RESP
        #: command (``effect_command``): made once for the AOF, the replicas and every link,
        #: and a bytes object is untracked by the garbage collector
        self.own: list[bytes] = []
        self.own_first = 1
        #: whether own effects are kept in ``own`` at all: a region with no peers of its own
        #: (``peers`` empty: nobody would ever acknowledge them) keeps none until a region
        #: that lists it asks for them (``AAPSYNC``, ``keep_own_effects``); one that asks for
        #: older ones gets a state transfer, as after ``active-active-keep-effects``
        self.keep_own = True
        #: the remote effects applied here, per origin, as their lines, from
        #: ``relay_first[origin]`` on: what this region relays to a peer cut off from their
        #: origin (``AARELAY``); trimmed once every peer holds them
        self.relayed: dict[int, list[tuple[bytes, ...]]] = {}
        self.relay_first: dict[int, int] = {}
        #: the links to the peers (the server layer sets them; None: no peers, or no server)
        self.links: Links | None = None
        #: local lines (AAIDMP) a command made, logged after its effects
        self.local_lines: list[list[bytes]] = []
        #: (database, key) of the streams that may hold IDMP iids (the expiry cron's)
        self.idmp_keys: set[tuple[int, bytes]] = set()
        #: the lines of the effects applied since the handler last took them (for the engine;
        #: own effects' already encoded)
        self.applied: list[Line] = []
        #: the lines received for remote effects not applied yet, by (origin, seq): a link
        #: gives them (``received``) so that the line read is logged as it came
        self.received_lines: dict[tuple[int, int], list[bytes]] = {}
        #: groups whose local state a command may have changed, and whether their cursors or
        #: counters did (logged as AALOCAL lines after the effects)
        self.groups: list[tuple[bytes, RegionGroup, bool]] = []
        region.sinks.append(self)

    def __call__(self, effect: Effect) -> None:
        db = 0
        for op in effect.ops:
            if isinstance(op, Select):
                db = op.db
            elif isinstance(op, Move):
                self.sync(op.src, db)
                self.sync(op.dst, db)
            else:
                self.sync(op.key, db)
        origin = effect.origin
        if origin == self.region.id:
            command = effect_command(effect)
            self.applied.append(command)
            if self.keep_own:
                self.own.append(command)
            else:  # (``own`` is empty: it would start at the next one)
                self.own_first = effect.seq + 1
            return
        line: list[bytes] | None = None
        if self.received_lines:
            line = self.received_lines.pop((origin, effect.seq), None)
        if line is None:
            line = effect.to_line()
        self.applied.append(line)
        kept = self.relayed.get(origin)
        if kept is None:
            kept = self.relayed[origin] = []
            self.relay_first[origin] = effect.seq
        kept.append(tuple(line))

    def received(self, effect: Effect, line: list[bytes]) -> None:
        """A link read ``line`` for ``effect`` (which it is about to offer): when the effect
        is applied, that line is logged, not a new one made from the effect."""
        if effect.seq > self.region.inbox.applied.get(effect.origin, 0):
            self.received_lines[(effect.origin, effect.seq)] = line

    def keep_own_effects(self, keep: bool) -> None:
        """Keep own effects from the next one on (a region asked for them), or none (a region
        without peers, until one asks): ``own`` is emptied, peers asking for what it held get
        a state transfer."""
        self.keep_own = keep
        if not keep:
            self.own = []
            self.own_first = self.region.inbox.applied[self.region.id] + 1

    def own_effects(self) -> list[Effect]:
        """The own effects kept (``own``), decoded."""
        return [from_line(decode_command(command)) for command in self.own]

    def sync(self, key: bytes, index: int = 0) -> None:
        """Make ``db.data[key]`` (of database ``index``) the stream when it exists, nothing
        when it is a tombstone; watchers and blocked readers of the key hear of the change."""
        if index == 0:  # (the usual case, without a lookup)
            db, record = self.db, self.region.streams.get(key)
        else:
            if index >= len(self.dbs):
                return  # (a peer with more databases: kept in the region, out of reach)
            db = self.dbs[index]
            streams = self.region.dbs.get(index)
            record = streams.get(key) if streams is not None else None
        current = db.data.get(key)
        if record is not None and record.exists():
            if current is not record:
                db.set(key, record)
            else:
                db.signal_modified(key)
                if db.blocking:
                    db.signal_ready(key)
        elif isinstance(current, RegionStream):
            db.delete(key)
        if record is not None and record.idmp is not None and not record.exists():
            record.idmp = None  # (a deleted stream's IDMP maps go with it, as in Redis)

    def local(self, key: bytes, group: RegionGroup, moved: bool = False) -> None:
        """A command may have changed the group's local state (``moved``: its cursors or
        counters): log it after the effects."""
        self.groups.append((key, group, moved))

    # -- snapshots (``Keyspace.persisted``) ------------------------------------------------

    def dump_state(self, with_own: bool = True) -> bytes:
        return dump_state(self.region, self.own_effects() if with_own else ())

    def load_state(self, data: bytes) -> None:
        """A snapshot's region: replaces this one; each database shows its visible streams."""
        own = load_state(self.region, data)  # (and the own effects peers may need)
        if not self.keep_own:
            own = []
        self.own = [effect_command(effect) for effect in own]
        own_seq = self.region.inbox.applied[self.region.id]
        self.own_first = own[0].seq if own else own_seq + 1
        self.received_lines.clear()
        self.forget_relayed()
        self._sync_all()

    def adopt(self, data: bytes) -> int:
        """A state transfer (``activeactive.transfer``): a peer's state is merged into this
        region's (whatever the two vectors; raises on a malformed state, changing nothing),
        logged as one ``AARESTORE`` line of the whole new state, then the effects it made
        ready; how many of those."""
        me = self.region.id
        own_seq = self.region.inbox.applied.get(me, 0)
        ready = adopt_state(self.region, data)
        if self.region.inbox.applied[me] != own_seq:
            # (this region lost effects of its own that the donor holds: it goes on after
            # them, and can no longer serve them)
            self.own = []
            self.own_first = self.region.inbox.applied[me] + 1
        applied = self.region.inbox.applied
        self.received_lines = {
            k: line for k, line in self.received_lines.items() if k[1] > applied.get(k[0], 0)
        }
        self._sync_all()
        self.forget_relayed()
        self.applied.append([b"AARESTORE", self.dump_state()])
        self.region.apply_ready(ready)
        for index, db in enumerate(self.dbs):
            streams = self.region.dbs.get(index)
            if db.blocking and streams is not None:
                for key in list(db.blocking):
                    if key in streams:
                        db.signal_ready(key)
        return len(ready)

    def _sync_all(self) -> None:
        """Each database shows the region's visible streams, and only those."""
        for index, db in enumerate(self.dbs):
            known = self.region.dbs.get(index)
            for key, value in list(db.data.items()):
                if isinstance(value, RegionStream) and (known is None or key not in known):
                    db.delete(key)
        self.idmp_keys.clear()
        for index, streams in self.region.dbs.items():
            for key, record in streams.items():
                self.sync(key, index)
                if record.idmp is not None:
                    self.idmp_keys.add((index, key))

    # -- IDMP (local to the region) ---------------------------------------------------------

    def record_idmp(
        self,
        key: bytes,
        idmp_key: tuple[bytes, bytes],
        sid: StreamID,
        maxsize: int,
        stats: IdmpStats | None = None,
    ) -> None:
        """An XADD IDMP added sid (or was a retry of it): remember (pid, iid) -> sid here
        (or count the duplicate), and log it (AAIDMP)."""
        self.replay_idmp(key, idmp_key, sid, maxsize, stats)
        self.local_lines.append([b"AAIDMP", key, idmp_key[0], idmp_key[1], format_id(sid)])

    def replay_idmp(
        self,
        key: bytes,
        idmp_key: tuple[bytes, bytes],
        sid: StreamID,
        maxsize: int,
        stats: IdmpStats | None = None,
    ) -> None:
        record = self.region.current.get(key)
        if record is None or not record.exists():
            return
        if retry_of(record.idmp, idmp_key) == sid:
            count_retry(record, stats)
            return
        maxsize = record.idmp_setting(b"maxsize") or maxsize  # (XCFGSET's, if set)
        remember_iid(record, idmp_key, sid, maxsize, stats)
        self.idmp_keys.add((self.region.selected, key))

    def expire_idmp(self, now_ms: int, duration_s: int) -> int:
        """The once-a-second cron: forget iids older than ``stream-idmp-duration``."""
        expired = 0
        for index, key in list(self.idmp_keys):
            streams = self.region.dbs.get(index)
            record = streams.get(key) if streams is not None else None
            if record is None or record.idmp is None or not record.idmp.producers:
                self.idmp_keys.discard((index, key))
                continue
            duration = record.idmp_setting(b"duration") or duration_s  # (XCFGSET's, if set)
            expired += expire_iids(record.idmp, now_ms, duration)
        return expired

    def trim_relayed(self, origin: int, upto: int) -> int:
        """Every peer holds origin's effects up to ``upto``: no need to relay them."""
        kept = self.relayed.get(origin)
        if kept is None:
            return 0
        drop = min(max(upto - self.relay_first[origin] + 1, 0), len(kept))
        if drop:
            del kept[:drop]
            self.relay_first[origin] += drop
        return drop

    def forget_relayed(self) -> None:
        """After a replay or a state transfer: the kept remote effects no longer follow on
        from what is applied without a gap."""
        self.relayed.clear()
        self.relay_first.clear()

    def trim_own(self, upto: int) -> int:
        """Every peer has applied (durably) this region's effects up to ``upto``: they need
        not be kept; how many were dropped."""
        drop = min(max(upto - self.own_first + 1, 0), len(self.own))
        if drop:
            del self.own[:drop]
            self.own_first += drop
        return drop

    def reset(self) -> None:
        """Forget everything (before the data is loaded again: DEBUG LOADAOF, DEBUG RELOAD)."""
        region = self.region
        region.streams.clear()
        for index in [n for n in region.dbs if n]:
            del region.dbs[index]
        region.select(0)
        region.inbox.applied.clear()
        region.inbox.applied[region.id] = 0
        region.inbox.waiting.clear()
        region.inbox.waiting[region.id] = {}
        region.outbox.clear()
        self.own.clear()
        self.own_first = 1
        self.forget_relayed()
        self.applied.clear()
        self.received_lines.clear()
        self.groups.clear()
        self.local_lines.clear()
        self.idmp_keys.clear()

    def take_lines(self) -> list[Line]:
        lines, self.applied = self.applied, []
        if self.local_lines:
            lines += self.local_lines
            self.local_lines = []
        if not self.groups:
            return lines
        touched, self.groups = self.groups, []
        logged: list[RegionGroup] = []
        for key, group, moved in touched:
            if any(group is g for g in logged):
                continue
            changed = bool(moved or group.touched or group.touched_consumers)
            changed = changed or any(g is group and m for _, g, m in touched)
            record = self.region.current.get(key)
            if changed and record is not None and record.groups.get(group.name) is group:
                lines.append(local_line(key, group))
                logged.append(group)
        return lines

    def written(
        self,
        reply: Reply,
        dirty: int | None = None,
        lines: list[Line] | None = None,
    ) -> Reply | Written:
        """The reply, with the lines of the effects applied (if any) for the engine
        (``lines``: the handler took them already)."""
        if lines is None:
            lines = self.take_lines()
        changes = len(lines) if dirty is None else dirty
        if not lines and not changes:
            return reply
        return Written(reply, Change(changes, lines))


def attach_region(config: Config, keyspace: Keyspace) -> RegionKeyspace | None:
    """The region of a server started with ``region-id`` (None without)."""
    region_id: int = config["region-id"]
    if not region_id:
        return None
    region = Region(region_id, [region_id], config["active-active-id-mode"].encode())
    limits = region.streams.limits = NodeLimits(
        config["stream-node-max-bytes"], config["stream-node-max-entries"]
    )

    def node_limits_changed(name: str, value: object) -> None:
        if name == "stream-node-max-bytes" and isinstance(value, int):
            limits.max_bytes = value
        elif name == "stream-node-max-entries" and isinstance(value, int):
            limits.max_entries = value

    config.listeners.append(node_limits_changed)
    rk = RegionKeyspace(region, keyspace.dbs)
    # (no peers of its own: no region acknowledges own effects; kept once one asks)
    rk.keep_own_effects(bool(config["peers"]))
    keyspace.persisted = rk
    return rk


# ---------------------------------------------------------------------------------------------
# lookups


def region_of(c: Client) -> RegionKeyspace:
    """The server's region, acting on the client's database."""
    rk = c.server.region
    if rk is None:  # (the rows are only installed with a region)
        raise unsupported("this command without a region")
    index = c.db.index
    if rk.region.selected != index:
        rk.region.select(index)
    return rk


def stream_at(c: Client, key: bytes, read: bool = True) -> RegionStream | None:
    """The stream at key (a read's lookup counts a hit or a miss); WRONGTYPE for another
    type."""
    value = lookup_read(c, key) if read else c.db.get(key)
    if value is None or isinstance(value, RegionStream):
        return value
    raise WRONGTYPE
