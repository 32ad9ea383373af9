"""Property test of active-active convergence (issue 18): three regions, random writes, random
delivery order, partitions held and released.

Rules drive XADD (``*`` and explicit IDs over a small space, so they collide), XDEL, XDELEX,
XTRIM (MAXLEN and MINID; KEEPREF, DELREF and ACKED), DEL, RENAME, XSETID (with
ENTRIESADDED and MAXDELETEDID), XCFGSET, XGROUP
CREATE/DESTROY, XREADGROUP ``>`` (and with CLAIM), XACK, XACKDEL and XNACK in any region;
deliver one queued effect of any uncut link, picked anywhere in its queue (out of order: the
inbox must buffer it); resend an effect already delivered (it must be dropped: exactly once);
cut the mesh into sides and heal it; SELECT another database. Every effect crosses its link
in its line form (``to_line``/``from_line``).

Links also lose effects, as ``active-active-keep-effects`` trims them (issue 32, point 8): a
link's queue keeps only its last few; the receiver can then only catch up by a state
transfer (``transfer.adopt_state``), taken from one peer or exchanged by two at once, whatever
the vectors (after a two-way cut neither covers the other: the states merge).

After every step each region's ``check_invariants()`` holds (in strict mode that includes: no
duplicate ID, every own ID in the region's sequence class). At the end the mesh heals and
everything is delivered; then

- every region's canonical dump is identical (convergence), and equal to a reference region's
  that applied every effect made (none lost);
- XREADGROUP never skipped: each region drains every group with ``>``; every live entry of a
  surviving group's stream was delivered by ``>`` in some region, to that incarnation of the
  group (deliveries are keyed by the group's births, so a re-created group must deliver again);
- ``>`` never served one entry twice in a region to one incarnation.

At the end, a region that lost effects of a peer takes that peer's state (and the rest is
delivered again) until nothing is lost.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from headwater.activeactive.envelope import Effect
from headwater.activeactive.persist import dump_state
from headwater.activeactive.transfer import adopt_state
from headwater.errors import ReplyError
from headwater.stream.ids import MAX_ID, MIN_ID, StreamID
from tests.support.mesh import Mesh

REGIONS = st.sampled_from([1, 2, 3])
KEYS = st.sampled_from([b"a", b"b"])
GROUPS = st.sampled_from([b"g1", b"g2"])
CONSUMERS = st.sampled_from([b"c1", b"c2"])
#: the databases the regions' commands act on (SELECT): streams of one key in two databases
#: are two streams
DATABASES = (0, 1)
REFS = st.sampled_from([b"KEEPREF", b"DELREF", b"ACKED"])
SIDES = st.sampled_from([({1}, {2, 3}), ({2}, {1, 3}), ({3}, {1, 2}), ({1}, {2}, {3})])
LINKS = st.sampled_from([(a, b) for a in (1, 2, 3) for b in (1, 2, 3) if a != b])

Tag = tuple[StreamID, int]
#: (region, key, group, births at delivery) -> tags delivered by ``>``
Deliveries = dict[tuple[int, bytes, bytes, frozenset[tuple[int, int]]], set[Tag]]


class ActiveActive(RuleBasedStateMachine):
    mode = b"strict"

    def __init__(self) -> None:
        super().__init__()
        self.mesh = Mesh(3, self.mode, wire=True)
        self.now = 10
        self.sent: dict[tuple[int, int], list[Effect]] = {link: [] for link in self.mesh.queues}
        self.deliveries: Deliveries = {}
        #: (origin, receiver) -> the last of origin's effects dropped from the link before the
        #: receiver applied it: it needs a state transfer
        self.lost: dict[tuple[int, int], int] = {}

    # -- writes ----------------------------------------------------------------------------

    @rule(region=REGIONS, key=KEYS, ms=st.integers(0, 30) | st.none(), tick=st.integers(0, 2))
    def xadd(self, region: int, key: bytes, ms: int | None, tick: int) -> None:
        self.now += tick
        id_arg = b"*" if ms is None else b"%d" % ms
        if self.mode != b"strict" and ms is not None and ms % 3 == 0:
            id_arg += b"-%d" % (ms % 2)  # full IDs where the mode takes them
        try:
            self.mesh[region].xadd(key, id_arg, [b"f", b"%d" % self.now], self.now)
        except ReplyError:
            pass  # an ID too small for this region's stream: refused, nothing changed

    @rule(region=REGIONS, key=KEYS, data=st.data())
    def xdel(self, region: int, key: bytes, data: st.DataObject) -> None:
        entries = self.mesh[region].xrange(key, MIN_ID, MAX_ID)
        if entries:
            sid = data.draw(st.sampled_from([sid for sid, _ in entries]))
            assert self.mesh[region].xdel(key, [sid]) >= 1

    @rule(region=REGIONS, key=KEYS, maxlen=st.integers(0, 3))
    def xtrim_maxlen(self, region: int, key: bytes, maxlen: int) -> None:
        before = self.mesh[region].xlen(key)
        removed = self.mesh[region].xtrim(key, maxlen=maxlen)
        assert removed == max(before - maxlen, 0)

    @rule(region=REGIONS, key=KEYS, ms=st.integers(0, 30))
    def xtrim_minid(self, region: int, key: bytes, ms: int) -> None:
        self.mesh[region].xtrim(key, minid=(ms, 0))
        assert all(sid >= (ms, 0) for sid, _ in self.mesh[region].xrange(key, MIN_ID, MAX_ID))

    @rule(region=REGIONS, key=KEYS, ref=REFS, data=st.data())
    def xdelex(self, region: int, key: bytes, ref: bytes, data: st.DataObject) -> None:
        entries = [sid for sid, _ in self.mesh[region].xrange(key, MIN_ID, MAX_ID)]
        chosen = data.draw(st.lists(st.sampled_from([*entries, (99, 99)]), max_size=3))
        results = self.mesh[region].xdelex(key, chosen, ref)
        assert len(results) == len(chosen)
        for sid, result in zip(chosen, results, strict=True):
            if result == 1:
                assert all(got != sid for got, _ in self.mesh[region].xrange(key, sid, sid))

    @rule(region=REGIONS, key=KEYS, maxlen=st.integers(0, 3), ref=REFS)
    def xtrim_ref(self, region: int, key: bytes, maxlen: int, ref: bytes) -> None:
        before = self.mesh[region].xlen(key)
        removed = self.mesh[region].xtrim(key, maxlen=maxlen, ref=ref)
        assert removed <= max(before - maxlen, 0)
        assert self.mesh[region].xlen(key) == before - removed

    @rule(region=REGIONS, key=KEYS, group=GROUPS, ref=REFS, data=st.data())
    def xackdel(
        self, region: int, key: bytes, group: bytes, ref: bytes, data: st.DataObject
    ) -> None:
        record = self.mesh[region].visible(key)
        if record is None or group not in record.groups:
            return
        pending = [sid for sid, _ in record.groups[group].order]
        chosen = data.draw(st.lists(st.sampled_from([*pending, (99, 99)]), max_size=3))
        results = self.mesh[region].xackdel(key, group, chosen, ref)
        assert len(results) == len(chosen)

    @rule(region=REGIONS, key=KEYS)
    def delete(self, region: int, key: bytes) -> None:
        self.mesh[region].delete(key)
        assert not self.mesh[region].exists(key)

    @rule(region=REGIONS, key=KEYS)
    def rename(self, region: int, key: bytes) -> None:
        other = b"b" if key == b"a" else b"a"
        try:
            self.mesh[region].rename(key, other)
        except ReplyError:
            assert not self.mesh[region].exists(key)

    @rule(region=REGIONS, key=KEYS, ahead=st.integers(0, 3))
    def xsetid(self, region: int, key: bytes, ahead: int) -> None:
        record = self.mesh[region].visible(key)
        if record is not None:
            last = record.last_id()
            self.mesh[region].xsetid(key, (last[0] + ahead, last[1]))

    @rule(region=REGIONS, key=KEYS, extra=st.integers(0, 5), deleted=st.integers(0, 30) | st.none())
    def xsetid_counters(self, region: int, key: bytes, extra: int, deleted: int | None) -> None:
        record = self.mesh[region].visible(key)
        if record is None:
            return
        last = record.last_id()
        max_deleted = None if deleted is None else min((deleted, 0), last)
        try:
            self.mesh[region].xsetid(key, last, record.length + extra, max_deleted)
        except ReplyError:
            return  # (below the max-deleted ID: refused, nothing changed)
        assert record.entries_added() == record.length + extra

    @rule(
        region=REGIONS,
        key=KEYS,
        duration=st.sampled_from([None, 5, 6]),
        maxsize=st.sampled_from([None, 2, 3]),
    )
    def xcfgset(self, region: int, key: bytes, duration: int | None, maxsize: int | None) -> None:
        if self.mesh[region].exists(key) and (duration or maxsize):
            self.mesh[region].xcfgset(key, duration, maxsize)

    # -- groups ----------------------------------------------------------------------------

    @rule(region=REGIONS, key=KEYS, group=GROUPS, mkstream=st.booleans())
    def group_create(self, region: int, key: bytes, group: bytes, mkstream: bool) -> None:
        try:
            self.mesh[region].xgroup_create(key, group, b"0", mkstream)
        except ReplyError:
            pass  # no such key (without MKSTREAM), or BUSYGROUP

    @rule(region=REGIONS, key=KEYS, group=GROUPS)
    def group_destroy(self, region: int, key: bytes, group: bytes) -> None:
        if self.mesh[region].exists(key):
            self.mesh[region].xgroup_destroy(key, group)

    @rule(region=REGIONS, key=KEYS, group=GROUPS, consumer=CONSUMERS, count=st.integers(1, 3))
    def xreadgroup(
        self, region: int, key: bytes, group: bytes, consumer: bytes, count: int
    ) -> None:
        self.read_new(region, key, group, consumer, count)

    def read_new(
        self, region: int, key: bytes, group: bytes, consumer: bytes, count: int | None
    ) -> int:
        there = self.mesh[region]
        record = there.visible(key)
        if record is None or group not in record.groups:
            return 0
        g = record.groups[group]
        births = frozenset(g.births)
        before = {r: g.cursor(r) for r in record.subs}
        got = there.xreadgroup(key, group, consumer, b">", self.now, count)
        # what was delivered, by sub-log: the live entries each cursor passed (two sub-logs
        # may hold the same ID outside strict mode)
        tags = {
            (sid, r)
            for r, sub in record.subs.items()
            for sid, _ in sub.range(before.get(r, MIN_ID), g.cursor(r))
            if sid > before.get(r, MIN_ID)
        }
        assert sorted(sid for sid, _ in tags) == sorted(sid for sid, _ in got)
        seen = self.deliveries.setdefault((region, key, group, births), set())
        assert not tags & seen, f"'>' served {sorted(tags & seen)} twice in region {region}"
        seen |= tags
        return len(got)

    @rule(region=REGIONS, key=KEYS, group=GROUPS, data=st.data())
    def xack(self, region: int, key: bytes, group: bytes, data: st.DataObject) -> None:
        record = self.mesh[region].visible(key)
        if record is None or group not in record.groups:
            return
        pending = [sid for sid, _ in record.groups[group].order]
        if pending:
            chosen = data.draw(st.lists(st.sampled_from(pending), max_size=3))
            self.mesh[region].xack(key, group, chosen)

    @rule(region=REGIONS, key=KEYS, group=GROUPS, force=st.booleans(), data=st.data())
    def xnack(
        self, region: int, key: bytes, group: bytes, force: bool, data: st.DataObject
    ) -> None:
        record = self.mesh[region].visible(key)
        if record is None or group not in record.groups:
            return
        known = [sid for sid, _ in record.groups[group].order]
        known += [sid for sid, _, _ in record.range(MIN_ID, MAX_ID, 3)]
        chosen = data.draw(st.lists(st.sampled_from([*known, (99, 99)]), max_size=3))
        self.mesh[region].xnack(key, group, chosen, lambda count: count + 1, force)

    @rule(region=REGIONS, key=KEYS, group=GROUPS, consumer=CONSUMERS, min_idle=st.integers(0, 3))
    def xreadgroup_claim(
        self, region: int, key: bytes, group: bytes, consumer: bytes, min_idle: int
    ) -> None:
        there = self.mesh[region]
        record = there.visible(key)
        if record is None or group not in record.groups:
            return
        claimed = {
            sid for sid, _, _, _ in there.claim_idle(key, group, consumer, min_idle, self.now, 2)
        }
        g = record.groups[group]
        assert all(g.pel[tag].consumer == consumer for tag in g.order if tag[0] in claimed)
        self.read_new(region, key, group, consumer, 1)

    @rule(region=REGIONS, db=st.sampled_from(DATABASES))
    def select(self, region: int, db: int) -> None:
        """The region's later commands act on another database's streams."""
        self.mesh[region].select(db)

    # -- the network -----------------------------------------------------------------------

    @rule(data=st.data())
    def deliver(self, data: st.DataObject) -> None:
        self.mesh.collect()
        links = [k for k, q in self.mesh.queues.items() if q and k not in self.mesh.cut]
        if not links:
            return
        link = data.draw(st.sampled_from(links))
        index = data.draw(st.integers(0, len(self.mesh.queues[link]) - 1))
        self.sent[link].append(self.mesh.queues[link][index])
        self.mesh.deliver_one(link, index)

    @rule(data=st.data())
    def resend(self, data: st.DataObject) -> None:
        links = [k for k, sent in self.sent.items() if sent]
        if links:
            link = data.draw(st.sampled_from(links))
            effect = data.draw(st.sampled_from(self.sent[link]))
            assert self.mesh[link[1]].receive(effect) == 0, "a duplicate was applied"

    @rule(sides=SIDES)
    def partition(self, sides: tuple[set[int], ...]) -> None:
        self.mesh.partition(*sides)

    @rule()
    def heal(self) -> None:
        self.mesh.heal()

    @rule(link=LINKS, keep=st.integers(0, 2))
    def trim(self, link: tuple[int, int], keep: int) -> None:
        """The origin keeps at most ``keep`` of its effects for this receiver (keep-effects)."""
        self.mesh.collect()
        queue = self.mesh.queues[link]
        if len(queue) > keep:
            dropped = queue[: len(queue) - keep]
            del queue[: len(queue) - keep]
            last = max(e.seq for e in dropped)
            if last > self.mesh[link[1]].inbox.applied.get(link[0], 0):
                self.lost[link] = max(self.lost.get(link, 0), last)

    @rule(link=LINKS)
    def transfer(self, link: tuple[int, int]) -> None:
        """The receiver takes the origin's whole state (over the link, if it is not cut)."""
        if link not in self.mesh.cut:
            self.take_state(link[1], dump_state(self.mesh[link[0]]))

    @rule(link=LINKS)
    def exchange(self, link: tuple[int, int]) -> None:
        """Both links of a pair transfer at once: each state is taken before either is
        adopted."""
        a, b = link
        if link not in self.mesh.cut and (b, a) not in self.mesh.cut:
            state_a, state_b = dump_state(self.mesh[a]), dump_state(self.mesh[b])
            self.take_state(a, state_b)
            self.take_state(b, state_a)

    def take_state(self, receiver: int, state: bytes) -> None:
        region = self.mesh[receiver]
        before = dict(region.inbox.applied)
        region.apply_ready(adopt_state(region, state))
        after = region.inbox.applied
        assert all(after.get(r, 0) >= s for r, s in before.items()), "a transfer lost effects"
        for (origin, to), seq in list(self.lost.items()):
            if to == receiver and after.get(origin, 0) >= seq:
                del self.lost[(origin, to)]

    @invariant()
    def invariants_hold(self) -> None:
        self.mesh.check()

    # -- the end ---------------------------------------------------------------------------

    def teardown(self) -> None:
        mesh = self.mesh
        mesh.heal()
        mesh.sync()
        while self.lost:
            origin, receiver = min(self.lost)
            self.take_state(receiver, dump_state(mesh[origin]))
            mesh.sync()
        mesh.check()
        assert mesh.converged(), "\n".join(mesh[r].dump() for r in (1, 2, 3))
        # (and to what every effect makes, whatever the links lost and the transfers merged)
        assert mesh[1].dump() == mesh.reference().dump()
        for region in (1, 2, 3):
            assert mesh[region].inbox.waiting_count() == 0
            for db in DATABASES:
                mesh[region].select(db)
                for key in mesh[region].existing_keys():
                    for group in sorted(mesh[region].current[key].groups):
                        while self.read_new(region, key, group, b"drain", None):
                            pass
        for db in DATABASES:
            mesh[1].select(db)
            self.check_nothing_skipped()

    def check_nothing_skipped(self) -> None:
        for key in self.mesh[1].existing_keys():
            record = self.mesh[1].current[key]
            live = {(sid, r) for sid, r, _ in record.range(MIN_ID, MAX_ID)}
            for name, group in record.groups.items():
                delivered: set[Tag] = set()
                for (_, k, g, births), tags in self.deliveries.items():
                    if k == key and g == name and births & group.births:
                        delivered |= tags
                missing = live - delivered
                assert not missing, f"XREADGROUP skipped {sorted(missing)} of {key!r} {name!r}"


class SemiStrict(ActiveActive):
    mode = b"semi-strict"


class Liberal(ActiveActive):
    mode = b"liberal"


TestActiveActiveStrict = ActiveActive.TestCase
TestActiveActiveSemiStrict = SemiStrict.TestCase
TestActiveActiveLiberal = Liberal.TestCase
for _case in (TestActiveActiveStrict, TestActiveActiveSemiStrict, TestActiveActiveLiberal):
    _case.settings = settings(_case.settings, stateful_step_count=60)
