"""Stateful model test of consumer groups, through the engine, against a plain Python model.

The model (STREAMS-REFERENCE §1.3, §4, §5, Redis 8.8 semantics) keeps the stream as a dict of
live entries plus its counters, and per group its last-delivered ID, entries-read, PEL (ID ->
owner, delivery time, delivery count; owner None for an entry XNACK released), its NACK zone
(the unowned IDs in the order they were nacked) and consumers (seen / active times). Rules
drive XADD (explicit IDs), XDEL, XTRIM MAXLEN = n, DEL, XGROUP CREATE/SETID/DESTROY/
CREATECONSUMER/DELCONSUMER, XREADGROUP (``>``, history and ``>`` with CLAIM), XACK, XNACK,
XCLAIM, XAUTOCLAIM, XPENDING ranges and clock advances over a small ID space (so IDs collide
with live, deleted, pending and nacked entries all the time), and compare every reply with the
model. After every step the invariants compare XPENDING (summary, extended, per consumer),
XINFO GROUPS (with entries-read and lag from §5), XINFO CONSUMERS and the groups of XINFO
STREAM FULL (``nacked-count`` too) with the model; check through the replies that the group
PEL is the disjoint union of the consumer PELs and the unowned entries, that every owner
exists and that delivery counts never go down (except where RETRYCOUNT or XNACK set them or a
``>`` redelivery after SETID restarts them at 1); check that ``>`` never serves an entry twice
to a group unless SETID moved the group back before it; compare each engine group's NACK zone,
in order, with the model's; and run the engine's own ``check_invariants()`` for the stream and
for every group (which checks that the zone holds every unowned entry exactly once and no
owned one).

Where Redis's claim order (a list by delivery time, ties in insertion order) and ours (ties
by ID) could differ, the model follows ours: ties only arise between entries delivered in the
same millisecond.

Rules whose command is not in the engine's table yet are skipped (preconditions), so the test
follows the consumer-group commands as they land.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import hiredis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from headwater.stream.groups import key_id
from tests.unit.conftest import Harness

StreamID = tuple[int, int]
ZERO: StreamID = (0, 0)
KEY = b"s"
GROUPS = [b"g1", b"g2", b"g3"]
CONSUMERS = [b"c1", b"c2", b"c3", b"c4"]
IDLES = [0, 1, 10, 100, 1000, 5000, 20000]
ADVANCES = [1, 10, 100, 1000, 5000]

NO_KEY_FOR_XGROUP = (
    "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want "
    "to use the MKSTREAM option to create an empty stream automatically."
)
BAD_ENTRIESREAD = "ERR value for ENTRIESREAD must be positive or -1"
BUSYGROUP = "BUSYGROUP Consumer Group name already exists"
BAD_ID = "ERR Invalid stream ID specified as stream command argument"
XADD_ZERO = "ERR The ID specified in XADD must be greater than 0-0"
XADD_SMALL = "ERR The ID specified in XADD is equal or smaller than the target stream top item"
MAX_COUNT = 2**63 - 1


def fmt(sid: StreamID) -> bytes:
    return b"%d-%d" % sid


def parse(raw: bytes) -> StreamID:
    ms, seq = raw.split(b"-")
    return int(ms), int(seq)


def nogroup_xgroup(group: bytes) -> str:
    return f"NOGROUP No such consumer group '{group.decode()}' for key name 's'"


def nogroup_key(group: bytes) -> str:
    return f"NOGROUP No such key 's' or consumer group '{group.decode()}'"


def nogroup_read(group: bytes) -> str:
    return nogroup_key(group) + " in XREADGROUP with GROUP option"


def error(reply: Any, text: str) -> None:
    assert isinstance(reply, hiredis.ReplyError), reply
    assert str(reply) == text, (str(reply), text)


# ---------------------------------------------------------------------------------------------
# The model


@dataclass
class Nack:
    owner: bytes | None  # None: released by XNACK, in the group's NACK zone
    time: int
    count: int


def bump(count: int) -> int:
    return min(count + 1, MAX_COUNT)


@dataclass
class Consumer:
    seen: int
    active: int = -1


@dataclass
class Group:
    last_id: StreamID
    entries_read: int | None  # None = invalid (-1, shown as null)
    pel: dict[StreamID, Nack] = field(default_factory=dict)
    zone: list[StreamID] = field(default_factory=list)  # unowned IDs, oldest nack first
    consumers: dict[bytes, Consumer] = field(default_factory=dict)
    #: IDs served by ``>`` while the group's position never moved back past them
    delivered: set[StreamID] = field(default_factory=set)

    def owned(self, consumer: bytes) -> list[StreamID]:
        return sorted(sid for sid, n in self.pel.items() if n.owner == consumer)

    def take(self, sid: StreamID, owner: bytes, time: int, count: int) -> Nack:
        """The entry (pending or not) becomes owner's; it leaves the zone if it was there."""
        if sid in self.zone:
            self.zone.remove(sid)
        nack = self.pel[sid] = Nack(owner, time, count)
        return nack

    def drop(self, sid: StreamID) -> None:
        if self.pel.pop(sid, None) is not None and sid in self.zone:
            self.zone.remove(sid)


class Model:
    """The stream key: live entries, counters (§1.2) and groups (§1.3)."""

    def __init__(self) -> None:
        self.exists = False
        self.entries: dict[StreamID, list[bytes]] = {}
        self.last_id: StreamID = ZERO
        self.max_deleted: StreamID = ZERO
        self.added = 0
        self.groups: dict[bytes, Group] = {}
        self.ever: list[StreamID] = []  # every ID ever added (sorted), for picking collisions

    @property
    def length(self) -> int:
        return len(self.entries)

    @property
    def first_id(self) -> StreamID:
        return min(self.entries) if self.entries else ZERO

    def live(self) -> list[StreamID]:
        return sorted(self.entries)

    # §5
    def tomb_after(self, sid: StreamID) -> bool:
        return self.length > 0 and self.max_deleted != ZERO and sid <= self.max_deleted

    def estimate(self, sid: StreamID) -> int | None:
        if self.added == 0:
            return 0
        if self.length == 0 and sid <= self.last_id:
            return self.added
        if sid != ZERO and sid < self.max_deleted:
            return None
        if sid == self.last_id:
            return self.added
        if sid > self.last_id:
            return None
        first = self.first_id
        if self.max_deleted == ZERO or self.max_deleted < first:
            if sid < first:
                return self.added - self.length
            if sid == first:
                return self.added - self.length + 1
        return None

    def lag(self, g: Group) -> int | None:
        if self.added == 0 or self.length == 0:
            return 0
        first = self.first_id
        if g.last_id < first and self.max_deleted < first:
            return self.length
        if g.entries_read is not None and not self.tomb_after(g.last_id):
            return self.added - g.entries_read
        e = self.estimate(g.last_id)
        return None if e is None else self.added - e

    def deliver(self, g: Group, sid: StreamID) -> None:
        """Advance the group over entry sid (> g.last_id), §5."""
        if (
            g.entries_read is not None
            and g.last_id >= self.first_id
            and not self.tomb_after(g.last_id)
        ):
            g.entries_read += 1
        elif self.added > 0:
            g.entries_read = self.estimate(sid)
        g.last_id = sid

    def capped(self, entries_read: int | None) -> int | None:
        if entries_read is None or entries_read == -1:
            return None
        return min(entries_read, self.added)


# ---------------------------------------------------------------------------------------------
# Strategies

id_pick = st.integers(0, 39)
# where a group starts / is moved to: "$", "0", "-", or a picked ID
group_position = st.one_of(st.sampled_from(["$", "0", "-"]), id_pick)
entries_read_arg = st.one_of(st.none(), st.integers(-2, 8))
count_arg = st.one_of(st.none(), st.integers(0, 3))


class GroupCommands(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.c = self.h.client()
        self.m = Model()
        #: delivery counts last seen through XPENDING, (group, id) -> count; a rule that may
        #: legitimately lower a count (RETRYCOUNT, a ``>`` redelivery) forgets the entry
        self.observed: dict[tuple[bytes, StreamID], int] = {}

    # -- helpers -------------------------------------------------------------------------------

    def call(self, *args: Any) -> Any:
        return self.h.call(self.c, *args)

    @property
    def now(self) -> int:
        return self.h.clock.now

    def has(self, name: str, sub: str | None = None) -> bool:
        row = self.h.engine.table.get(name.encode())
        if row is None:
            return False
        return sub is None or sub.encode() in row.subcommands

    def pick(self, sel: int) -> StreamID:
        """A pending ID (0-14), a known ID: live, deleted or trimmed (15-29), else a small
        arbitrary one, so arguments collide with real state most of the time."""
        pending = sorted({sid for g in self.m.groups.values() for sid in g.pel})
        if pending and sel < 15:
            return pending[sel % len(pending)]
        if self.m.ever and sel < 30:
            return self.m.ever[sel % len(self.m.ever)]
        return (sel % 10, sel % 3)

    def position(self, where: str | int) -> tuple[bytes, StreamID]:
        """Argument and meaning of a group position ($ needs the model's last_id)."""
        if where == "$":
            return b"$", self.m.last_id
        if where == "0":
            return b"0", ZERO
        if where == "-":
            return b"-", ZERO
        assert isinstance(where, int)
        sid = self.pick(where)
        return fmt(sid), sid

    def entry(self, sid: StreamID) -> list[Any]:
        return [fmt(sid), self.m.entries[sid]]

    @initialize(
        entries=st.integers(0, 6),
        positions=st.lists(st.sampled_from(["0", "0", "$", None]), min_size=3, max_size=3),
    )
    def setup(self, entries: int, positions: list[str | None]) -> None:
        """Start most examples with a stream and groups (None: that group is not created), so
        few steps are wasted on missing keys and groups."""
        if entries:
            self.xadd([(1, 0)] * entries)
        if self.has("XGROUP", "create"):
            for group, where in zip(GROUPS, positions, strict=True):
                if where is not None:
                    self.xgroup_create(group, where, mkstream=True, entries_read=None)

    # -- stream writes ---------------------------------------------------------------------

    @rule(steps=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=1, max_size=4))
    def xadd(self, steps: list[tuple[int, int]]) -> None:
        for gap, seq in steps:
            sid = (self.m.last_id[0] + gap, seq)
            value = b"v" + fmt(sid)
            reply = self.call("XADD", KEY, fmt(sid), "f", value)
            if sid == ZERO:
                error(reply, XADD_ZERO)
                continue
            if sid <= self.m.last_id:
                error(reply, XADD_SMALL)
                continue
            assert reply == fmt(sid)
            self.m.exists = True
            self.m.entries[sid] = [b"f", value]
            self.m.last_id = sid
            self.m.added += 1
            self.m.ever.append(sid)

    @rule(picks=st.lists(id_pick, min_size=1, max_size=3))
    def xdel(self, picks: list[int]) -> None:
        ids = [self.pick(p) for p in picks]
        reply = self.call("XDEL", KEY, *[fmt(i) for i in ids])
        gone = {i for i in ids if i in self.m.entries}
        assert reply == len(gone)
        for sid in gone:
            del self.m.entries[sid]
            self.m.max_deleted = max(self.m.max_deleted, sid)

    @rule(maxlen=st.sampled_from([0, 1, 2, 3, 4, 5, "DEL"]))
    def xtrim(self, maxlen: int | str) -> None:
        """XTRIM MAXLEN = n (default KEEPREF: PELs keep their references); now and then DEL."""
        if maxlen == "DEL":
            assert self.call("DEL", KEY) == (1 if self.m.exists else 0)
            self.m = Model()
            self.observed.clear()
            return
        reply = self.call("XTRIM", KEY, "MAXLEN", "=", maxlen)
        live = self.m.live()
        drop = live[: max(len(live) - int(maxlen), 0)]
        assert reply == len(drop)
        for sid in drop:
            del self.m.entries[sid]

    @rule(ms=st.sampled_from(ADVANCES))
    def advance(self, ms: int) -> None:
        self.h.clock.advance(ms)

    # -- XGROUP ----------------------------------------------------------------------------

    @precondition(lambda self: self.has("XGROUP", "create"))
    @rule(
        group=st.sampled_from(GROUPS),
        where=group_position,
        mkstream=st.booleans(),
        entries_read=entries_read_arg,
    )
    def xgroup_create(
        self, group: bytes, where: str | int, mkstream: bool, entries_read: int | None
    ) -> None:
        arg, sid = self.position(where)
        args: list[Any] = ["XGROUP", "CREATE", KEY, group, arg]
        if mkstream:
            args.append("MKSTREAM")
        if entries_read is not None:
            args += ["ENTRIESREAD", entries_read]
        reply = self.call(*args)
        if entries_read is not None and entries_read < -1:
            error(reply, BAD_ENTRIESREAD)
            return
        if not self.m.exists and not mkstream:
            error(reply, NO_KEY_FOR_XGROUP)
            return
        if where == "-":  # CREATE takes a strict ID; checked before MKSTREAM creates the key
            error(reply, BAD_ID)
            return
        self.m.exists = True  # MKSTREAM: an empty stream, last_id 0-0, so "$" was 0-0 too
        if group in self.m.groups:
            error(reply, BUSYGROUP)
            return
        assert reply == b"OK"
        self.m.groups[group] = Group(sid, self.m.capped(entries_read))
        self.forget_group(group)

    @precondition(lambda self: self.has("XGROUP", "setid"))
    @rule(group=st.sampled_from(GROUPS), where=group_position, entries_read=entries_read_arg)
    def xgroup_setid(self, group: bytes, where: str | int, entries_read: int | None) -> None:
        arg, sid = self.position(where)
        args: list[Any] = ["XGROUP", "SETID", KEY, group, arg]
        if entries_read is not None:
            args += ["ENTRIESREAD", entries_read]
        reply = self.call(*args)
        if entries_read is not None and entries_read < -1:
            error(reply, BAD_ENTRIESREAD)
            return
        if not self.m.exists:
            error(reply, NO_KEY_FOR_XGROUP)
            return
        g = self.m.groups.get(group)
        if g is None:
            error(reply, nogroup_xgroup(group))
            return
        assert reply == b"OK"
        g.last_id = sid
        g.entries_read = self.m.capped(entries_read)
        # entries after the new position may legitimately be served by ">" again
        g.delivered = {d for d in g.delivered if d <= sid}

    @precondition(lambda self: self.has("XGROUP", "destroy"))
    @rule(
        op=st.sampled_from(["DESTROY", "CREATECONSUMER", "DELCONSUMER"]),
        group=st.sampled_from(GROUPS),
        consumer=st.sampled_from(CONSUMERS),
    )
    def xgroup_admin(self, op: str, group: bytes, consumer: bytes) -> None:
        args: list[Any] = ["XGROUP", op, KEY, group]
        if op != "DESTROY":
            args.append(consumer)
        reply = self.call(*args)
        if not self.m.exists:
            error(reply, NO_KEY_FOR_XGROUP)
            return
        g = self.m.groups.get(group)
        if op == "DESTROY":
            assert reply == (1 if g is not None else 0)
            self.m.groups.pop(group, None)
            self.forget_group(group)
            return
        if g is None:
            error(reply, nogroup_xgroup(group))
            return
        if op == "CREATECONSUMER":
            assert reply == (0 if consumer in g.consumers else 1)
            g.consumers.setdefault(consumer, Consumer(seen=self.now))
            return
        owned = g.owned(consumer)  # DELCONSUMER: its pending entries leave the group PEL
        assert reply == len(owned)
        for sid in owned:
            del g.pel[sid]
        g.consumers.pop(consumer, None)

    def forget_group(self, group: bytes) -> None:
        self.observed = {k: v for k, v in self.observed.items() if k[0] != group}

    # -- reading ---------------------------------------------------------------------------

    def reader(self, group: bytes, consumer: bytes, reply: Any) -> tuple[Group, Consumer] | None:
        """Common XREADGROUP prologue: NOGROUP, else the (auto-created) consumer is seen now."""
        g = self.m.groups.get(group) if self.m.exists else None
        if g is None:
            error(reply, nogroup_read(group))
            return None
        cons = g.consumers.setdefault(consumer, Consumer(seen=self.now))
        cons.seen = self.now
        return g, cons

    @precondition(lambda self: self.has("XREADGROUP"))
    @rule(
        group=st.sampled_from(GROUPS),
        consumer=st.sampled_from(CONSUMERS),
        count=count_arg,
        noack=st.booleans(),
    )
    def xreadgroup_new(self, group: bytes, consumer: bytes, count: int | None, noack: bool) -> None:
        args: list[Any] = ["XREADGROUP", "GROUP", group, consumer]
        if count is not None:
            args += ["COUNT", count]
        if noack:
            args.append("NOACK")
        reply = self.call(*args, "STREAMS", KEY, ">")
        found = self.reader(group, consumer, reply)
        if found is None:
            return
        g, cons = found
        new = [sid for sid in self.m.live() if sid > g.last_id]
        if count:
            new = new[:count]
        if not new:
            assert reply is None, reply
            return
        assert reply == [[KEY, [self.entry(sid) for sid in new]]]
        for sid in new:
            assert sid not in g.delivered, f"{sid} served twice by '>' in {group!r}"
            g.delivered.add(sid)
            self.m.deliver(g, sid)
            # NOACK: nothing becomes pending and the consumer's active time is left alone
            # ("inactive" counts from the last XREADGROUP "that actually read some entries
            # into the PEL": Redis sets active_time inside its `if (group && !noack)` block)
            if not noack:
                # a PEL entry left behind by SETID-backwards (nacked or not) is reassigned
                # with count 1
                g.take(sid, consumer, self.now, 1)
                cons.active = self.now
                self.observed.pop((group, sid), None)

    @precondition(lambda self: self.has("XREADGROUP"))
    @rule(group=st.sampled_from(GROUPS), consumer=st.sampled_from(CONSUMERS))
    def xreadgroup_all(self, group: bytes, consumer: bytes) -> None:
        """Plain ``>`` without options (a second rule, so deliveries are frequent)."""
        self.xreadgroup_new(group, consumer, None, False)

    @precondition(lambda self: self.has("XREADGROUP"))
    @rule(
        group=st.sampled_from(GROUPS),
        consumer=st.sampled_from(CONSUMERS),
        start=st.one_of(st.just("0"), id_pick),
        count=count_arg,
    )
    def xreadgroup_history(
        self, group: bytes, consumer: bytes, start: str | int, count: int | None
    ) -> None:
        after = ZERO if start == "0" else self.pick(int(start))
        args: list[Any] = ["XREADGROUP", "GROUP", group, consumer]
        if count is not None:
            args += ["COUNT", count]
        reply = self.call(*args, "STREAMS", KEY, "0" if start == "0" else fmt(after))
        found = self.reader(group, consumer, reply)
        if found is None:
            return
        g, _ = found
        ids = [sid for sid in g.owned(consumer) if sid > after]
        if count:
            ids = ids[:count]
        want: list[Any] = []
        for sid in ids:
            if sid in self.m.entries:
                want.append(self.entry(sid))
                g.pel[sid].count = bump(g.pel[sid].count)
                g.pel[sid].time = self.now
            else:
                want.append([fmt(sid), None])
        assert reply == [[KEY, want]]

    # -- acknowledging and claiming ----------------------------------------------------------

    @precondition(lambda self: self.has("XACK"))
    @rule(group=st.sampled_from(GROUPS), picks=st.lists(id_pick, min_size=1, max_size=4))
    def xack(self, group: bytes, picks: list[int]) -> None:
        ids = [self.pick(p) for p in picks]
        reply = self.call("XACK", KEY, group, *[fmt(i) for i in ids])
        g = self.m.groups.get(group) if self.m.exists else None
        if g is None:
            assert reply == 0
            return
        acked = {i for i in ids if i in g.pel}
        assert reply == len(acked)
        for sid in acked:
            g.drop(sid)

    @precondition(lambda self: self.has("XNACK"))
    @rule(
        group=st.sampled_from(GROUPS),
        mode=st.sampled_from(["SILENT", "FAIL", "FATAL"]),
        picks=st.lists(id_pick, min_size=1, max_size=4),
        retrycount=st.one_of(st.none(), st.integers(0, 3)),
        force=st.booleans(),
    )
    def xnack(
        self, group: bytes, mode: str, picks: list[int], retrycount: int | None, force: bool
    ) -> None:
        ids = [self.pick(p) for p in picks]  # duplicates are processed each time
        args: list[Any] = ["XNACK", KEY, group, mode, "IDS", len(ids), *[fmt(i) for i in ids]]
        if retrycount is not None:
            args += ["RETRYCOUNT", retrycount]
        if force:
            args.append("FORCE")
        reply = self.call(*args)
        g = self.m.groups.get(group) if self.m.exists else None
        if g is None:
            error(reply, nogroup_key(group))
            return
        processed = 0
        for sid in ids:
            nack = g.pel.get(sid)
            if nack is None and (not force or sid not in self.m.entries):
                continue
            count = nack.count if nack is not None else 0
            if retrycount is not None:
                count = retrycount
            elif mode == "SILENT":
                count = max(count - 1, 0)
            elif mode == "FATAL":
                count = MAX_COUNT
            g.drop(sid)
            g.pel[sid] = Nack(None, 0, count)
            g.zone.append(sid)  # to the tail of the zone, even if it was in it
            self.observed.pop((group, sid), None)
            processed += 1
        assert reply == processed

    @precondition(lambda self: self.has("XREADGROUP"))
    @rule(
        group=st.sampled_from(GROUPS),
        consumer=st.sampled_from(CONSUMERS),
        count=count_arg,
        min_idle=st.sampled_from(IDLES),
        noack=st.booleans(),
    )
    def xreadgroup_claim(
        self, group: bytes, consumer: bytes, count: int | None, min_idle: int, noack: bool
    ) -> None:
        """``>`` with CLAIM: the NACK zone (in nack order), then owned entries idle for
        min_idle (oldest delivery first), then new entries; [id, fields, idle, count]."""
        args: list[Any] = ["XREADGROUP", "GROUP", group, consumer, "CLAIM", min_idle]
        if count is not None:
            args += ["COUNT", count]
        if noack:
            args.append("NOACK")
        reply = self.call(*args, "STREAMS", KEY, ">")
        found = self.reader(group, consumer, reply)
        if found is None:
            return
        g, cons = found
        now = self.now
        owned = sorted((n.time, sid) for sid, n in g.pel.items() if n.owner is not None)
        order = [*g.zone, *(sid for _, sid in owned)]
        claimed: list[StreamID] = []
        for sid in order:
            if now - g.pel[sid].time < min_idle:
                break
            if sid in self.m.entries:
                claimed.append(sid)
                if count and len(claimed) == count:
                    break
        want: list[Any] = []
        for sid in claimed:
            nack = g.pel[sid]
            want.append([*self.entry(sid), max(now - nack.time, 0), nack.count])
            g.take(sid, consumer, now, bump(nack.count))
            cons.active = now
        room = count - len(claimed) if count else None
        new = [sid for sid in self.m.live() if sid > g.last_id]
        if room is not None:
            new = new[:room]
        for sid in new:
            want.append([*self.entry(sid), 0, 0])
            assert sid not in g.delivered, f"{sid} served twice by '>' in {group!r}"
            g.delivered.add(sid)
            self.m.deliver(g, sid)
            if not noack:
                g.take(sid, consumer, now, 1)
                cons.active = now
                self.observed.pop((group, sid), None)
        if not want:
            assert reply is None, reply
            return
        assert reply == [[KEY, want]]

    @precondition(lambda self: self.has("XCLAIM"))
    @rule(
        group=st.sampled_from(GROUPS),
        consumer=st.sampled_from(CONSUMERS),
        min_idle=st.sampled_from(IDLES),
        picks=st.lists(id_pick, min_size=1, max_size=4),
        when=st.one_of(
            st.none(),
            st.tuples(st.just("IDLE"), st.sampled_from([-5, 0, 10, 1000, 20000])),
            st.tuples(st.just("TIME"), st.sampled_from([-20000, -1000, -10, 0, 500])),
        ),
        retrycount=st.one_of(st.none(), st.integers(0, 4)),
        force=st.booleans(),
        justid=st.booleans(),
    )
    def xclaim(
        self,
        group: bytes,
        consumer: bytes,
        min_idle: int,
        picks: list[int],
        when: tuple[str, int] | None,
        retrycount: int | None,
        force: bool,
        justid: bool,
    ) -> None:
        now = self.now
        ids = [self.pick(p) for p in picks]
        args: list[Any] = ["XCLAIM", KEY, group, consumer, min_idle, *[fmt(i) for i in ids]]
        delivery = now
        if when is not None:
            opt, value = when
            delivery = now - value if opt == "IDLE" else now + value
            args += [opt, value if opt == "IDLE" else now + value]
            if delivery < 0 or delivery > now:
                delivery = now
        if retrycount is not None:
            args += ["RETRYCOUNT", retrycount]
        if force:
            args.append("FORCE")
        if justid:
            args.append("JUSTID")
        reply = self.call(*args)
        g = self.m.groups.get(group) if self.m.exists else None
        if g is None:
            error(reply, nogroup_key(group))
            return
        cons = g.consumers.setdefault(consumer, Consumer(seen=now))
        cons.seen = now
        want: list[Any] = []
        for sid in ids:
            nack = g.pel.get(sid)
            if sid not in self.m.entries:
                g.drop(sid)  # the entry is gone: drop the reference, never returned
                continue
            if nack is None:
                if not force:
                    continue
                nack = g.pel[sid] = Nack(None, now, 1)  # ownerless: min-idle does not apply
            elif nack.owner is not None and min_idle and now - nack.time < min_idle:
                continue  # (a nacked entry is ownerless too)
            count = nack.count
            if retrycount is not None:
                count = retrycount
                self.observed.pop((group, sid), None)
            elif not justid:
                count = bump(count)
            g.take(sid, consumer, delivery, count)
            cons.active = now
            want.append(fmt(sid) if justid else self.entry(sid))
        assert reply == want

    @precondition(lambda self: self.has("XAUTOCLAIM"))
    @rule(
        group=st.sampled_from(GROUPS),
        consumer=st.sampled_from(CONSUMERS),
        min_idle=st.sampled_from(IDLES),
        start=st.one_of(st.sampled_from(["0-0", "-"]), id_pick, st.tuples(st.just("("), id_pick)),
        count=st.one_of(st.none(), st.integers(1, 4)),
        justid=st.booleans(),
    )
    def xautoclaim(
        self,
        group: bytes,
        consumer: bytes,
        min_idle: int,
        start: str | int | tuple[str, int],
        count: int | None,
        justid: bool,
    ) -> None:
        now = self.now
        if isinstance(start, str):
            arg, lo = start.encode(), ZERO
        elif isinstance(start, int):
            lo = self.pick(start)
            arg = fmt(lo)
        else:
            sid = self.pick(start[1])
            arg, lo = b"(" + fmt(sid), (sid[0], sid[1] + 1)
        args: list[Any] = ["XAUTOCLAIM", KEY, group, consumer, min_idle, arg]
        if count is not None:
            args += ["COUNT", count]
        if justid:
            args.append("JUSTID")
        reply = self.call(*args)
        g = self.m.groups.get(group) if self.m.exists else None
        if g is None:
            error(reply, nogroup_key(group))
            return
        cons = g.consumers.setdefault(consumer, Consumer(seen=now))
        cons.seen = now
        budget = 100 if count is None else count
        attempts = budget * 10
        scan = sorted(sid for sid in g.pel if sid >= lo)
        claimed: list[Any] = []
        deleted: list[bytes] = []
        i = 0
        while attempts > 0 and budget > 0 and i < len(scan):
            attempts -= 1
            sid = scan[i]
            i += 1
            nack = g.pel[sid]
            if sid not in self.m.entries:
                g.drop(sid)
                deleted.append(fmt(sid))
                budget -= 1
                continue
            if nack.owner is not None and min_idle and now - nack.time < min_idle:
                continue
            g.take(sid, consumer, now, nack.count if justid else bump(nack.count))
            cons.active = now
            claimed.append(fmt(sid) if justid else self.entry(sid))
            budget -= 1
        cursor = scan[i] if i < len(scan) else ZERO
        assert reply == [fmt(cursor), claimed, deleted]

    # -- XPENDING with ranges and filters ------------------------------------------------------

    @precondition(lambda self: self.has("XPENDING"))
    @rule(
        group=st.sampled_from(GROUPS),
        min_idle=st.one_of(st.none(), st.sampled_from(IDLES)),
        start=st.one_of(st.just("-"), id_pick),
        end=st.one_of(st.just("+"), id_pick),
        exclusive=st.booleans(),
        count=st.integers(-1, 5),
        consumer=st.one_of(st.none(), st.sampled_from(CONSUMERS)),
    )
    def xpending_range(
        self,
        group: bytes,
        min_idle: int | None,
        start: str | int,
        end: str | int,
        exclusive: bool,
        count: int,
        consumer: bytes | None,
    ) -> None:
        lo = ZERO if start == "-" else self.pick(int(start))
        hi = (2**64 - 1, 2**64 - 1) if end == "+" else self.pick(int(end))
        lo_arg = b"-" if start == "-" else fmt(lo)
        hi_arg = b"+" if end == "+" else fmt(hi)
        if exclusive and start != "-" and end != "+":
            lo_arg, hi_arg = b"(" + lo_arg, b"(" + hi_arg
        args: list[Any] = ["XPENDING", KEY, group]
        if min_idle is not None:
            args += ["IDLE", min_idle]
        args += [lo_arg, hi_arg, count]
        if consumer is not None:
            args.append(consumer)
        reply = self.call(*args)
        if exclusive and start != "-" and end != "+" and hi == ZERO:
            error(reply, "ERR invalid end ID for the interval")
            return
        g = self.m.groups.get(group) if self.m.exists else None
        if g is None:
            error(reply, nogroup_key(group))
            return
        if exclusive and start != "-" and end != "+":
            rows = [sid for sid in sorted(g.pel) if lo < sid < hi]
        else:
            rows = [sid for sid in sorted(g.pel) if lo <= sid <= hi]
        if consumer is not None:
            if consumer not in g.consumers:
                assert reply == []
                return
            rows = [sid for sid in rows if g.pel[sid].owner == consumer]
        if min_idle is not None:  # never filters nacked entries
            rows = [
                sid
                for sid in rows
                if g.pel[sid].owner is None or self.now - g.pel[sid].time >= min_idle
            ]
        rows = rows[: max(count, 0)]
        assert reply == [self.pending_row(g, sid) for sid in rows]

    def pending_row(self, g: Group, sid: StreamID) -> list[Any]:
        n = g.pel[sid]
        if n.owner is None:
            return [fmt(sid), b"", -1, n.count]
        return [fmt(sid), n.owner, max(self.now - n.time, 0), n.count]

    # -- invariants ------------------------------------------------------------------------

    @invariant()
    def engine_invariants(self) -> None:
        stream = self.h.engine.keyspace.dbs[0].get(KEY)
        if not self.m.exists:
            assert stream is None
            return
        assert stream is not None
        stream.check_invariants()
        assert stream.length == self.m.length
        assert stream.last_id == self.m.last_id
        assert stream.max_deleted_id == self.m.max_deleted
        assert stream.entries_added == self.m.added
        groups = getattr(stream, "groups", None)
        if not self.has("XREADGROUP"):
            for g in (groups or {}).values():
                check = getattr(g, "check_invariants", None)
                if check is not None:
                    check()
            return
        # the commands have landed: the group structures and their checker are required
        assert groups is not None
        assert sorted(groups) == sorted(self.m.groups)
        for name, g in groups.items():
            g.check_invariants()
            zone = [key_id(key) for key in getattr(g, "nacked", {})]
            assert zone == self.m.groups[name].zone, "NACK zone differs from the model"

    @precondition(lambda self: self.has("XPENDING"))
    @invariant()
    def pending_agrees(self) -> None:
        seen: dict[tuple[bytes, StreamID], int] = {}
        for name in GROUPS:
            summary = self.call("XPENDING", KEY, name)
            g = self.m.groups.get(name) if self.m.exists else None
            if g is None:
                error(summary, nogroup_key(name))
                continue
            if not g.pel:
                assert summary == [0, None, None, None]
            else:
                per = sorted({n.owner for n in g.pel.values() if n.owner is not None})
                assert summary == [
                    len(g.pel),
                    fmt(min(g.pel)),
                    fmt(max(g.pel)),
                    [[c, b"%d" % len(g.owned(c))] for c in per],
                ]
            full = self.call("XPENDING", KEY, name, "-", "+", 1000)
            assert full == [self.pending_row(g, sid) for sid in sorted(g.pel)]
            # the group PEL is the disjoint union of the consumer PELs; every owner exists
            union: list[Any] = []
            for consumer in CONSUMERS:
                mine = self.call("XPENDING", KEY, name, "-", "+", 1000, consumer)
                assert all(row[1] == consumer for row in mine)
                if consumer not in g.consumers:
                    assert mine == []
                union += mine
            unowned = [row for row in full if row[1] == b""]
            assert all(row[2] == -1 for row in unowned)
            assert sorted(union + unowned) == sorted(full), "group PEL != consumer PELs + zone"
            for sid_raw, owner, _, count in full:
                if owner != b"":
                    assert owner in g.consumers, f"{sid_raw!r} owned by unknown {owner!r}"
                key = (name, parse(sid_raw))
                before = self.observed.get(key)
                assert before is None or count >= before, f"delivery count of {key} went down"
                seen[key] = count
        self.observed = seen

    @precondition(lambda self: self.has("XINFO", "groups"))
    @invariant()
    def xinfo_groups_agrees(self) -> None:
        reply = self.call("XINFO", "GROUPS", KEY)
        if not self.m.exists:
            error(reply, "ERR no such key")
            return
        want = []
        for name in sorted(self.m.groups):
            g = self.m.groups[name]
            er = g.entries_read
            want.append(
                [
                    b"name",
                    name,
                    b"consumers",
                    len(g.consumers),
                    b"pending",
                    len(g.pel),
                    b"last-delivered-id",
                    fmt(g.last_id),
                    b"entries-read",
                    er,
                    b"lag",
                    self.m.lag(g),
                ]
            )
        assert reply == want

    @precondition(lambda self: self.has("XINFO", "consumers"))
    @invariant()
    def xinfo_consumers_agrees(self) -> None:
        if not self.m.exists:
            error(self.call("XINFO", "CONSUMERS", KEY, "g1"), "ERR no such key")
            return
        for name in GROUPS:
            reply = self.call("XINFO", "CONSUMERS", KEY, name)
            g = self.m.groups.get(name)
            if g is None:
                error(reply, nogroup_xgroup(name))
                continue
            want = []
            for cname in sorted(g.consumers):
                c = g.consumers[cname]
                want.append(
                    [
                        b"name",
                        cname,
                        b"pending",
                        len(g.owned(cname)),
                        b"idle",
                        self.now - c.seen,
                        b"inactive",
                        -1 if c.active == -1 else self.now - c.active,
                    ]
                )
            assert reply == want

    @invariant()
    def xinfo_full_agrees(self) -> None:
        """XINFO STREAM FULL: the groups with absolute delivery, seen and active times."""
        if not self.m.exists or not self.has("XREADGROUP"):
            return
        reply = self.call("XINFO", "STREAM", KEY, "FULL", "COUNT", 0)
        info = dict(zip(reply[::2], reply[1::2], strict=True))
        want = []
        for name in sorted(self.m.groups):
            g = self.m.groups[name]
            pel = sorted(g.pel)
            consumers = []
            for cname in sorted(g.consumers):
                c = g.consumers[cname]
                mine = g.owned(cname)
                consumers.append(
                    [
                        b"name",
                        cname,
                        b"seen-time",
                        c.seen,
                        b"active-time",
                        c.active,
                        b"pel-count",
                        len(mine),
                        b"pending",
                        [[fmt(sid), g.pel[sid].time, g.pel[sid].count] for sid in mine],
                    ]
                )
            want.append(
                [
                    b"name",
                    name,
                    b"last-delivered-id",
                    fmt(g.last_id),
                    b"entries-read",
                    g.entries_read,
                    b"lag",
                    self.m.lag(g),
                    b"pel-count",
                    len(pel),
                    b"nacked-count",
                    len(g.zone),
                    b"pending",
                    [
                        [fmt(sid), g.pel[sid].owner or b"", g.pel[sid].time, g.pel[sid].count]
                        for sid in pel
                    ],
                    b"consumers",
                    consumers,
                ]
            )
        assert info[b"groups"] == want


GroupCommands.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
TestGroupCommands = GroupCommands.TestCase
