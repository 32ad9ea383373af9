"""A full state transfer: a region whose peers no longer keep the effects it needs takes one
peer's state in one piece, merges it with its own, then goes on with effects.

Theory of operation
-------------------
A region keeps its own effects until every peer has acknowledged them (or, with
``active-active-keep-effects``, at most that many). A peer that asks for effects no longer
kept (it was down or cut off while the others trimmed, it lost its data, or it is new) cannot
be served effect by effect. The donor then sends its whole region state in the snapshot's
layout (``persist.dump_state``: records with tombstones, sub-logs and their counters, delete
clocks, groups with births and acknowledged prefixes, XCFGSET registers, and the applied
vector), and after it its own effects from the one after that vector's, as usual.

The receiver *merges* that state with its own (issue 32, point 8). Requiring the donor's
vector to cover the receiver's is not enough: after a two-way cut each side trimmed what the
other needs and applied what the other has not, so neither could ever be the donor. Instead,
each state is what its region's applied effects made (``State(v)``; the write rules converge
whatever the order), and the merge builds ``State(mine ⊔ theirs)``, the state the effects of
both would have made, from the two states alone:

- *An effect undoes only what its sender had observed* (envelope.py: removals name entries
  or per-sub-log horizons, a DEL or XCFGSET drops the values its sender had seen). So a
  thing (an entry, an XCFGSET value) is in the merge when one side holds it and each side
  that *had* it still holds it: a side that had it and holds it no longer applied an effect
  that undid it. A side had an entry when it lies at or below the side's last ID of its
  sub-log (a sub-log grows only by its origin's effects, in ID order, and a moved sub-log of
  RENAME is filled once), and an XCFGSET value when its stamp's effect is in the side's
  vector.
- Sub-log counters only grow with their origin's effects: last ID, entries-added and
  max-deleted ID take the larger; XSETID's floors too; each origin's ENTRIESADDED adjustment
  comes from the side that applied more of that origin's effects; delete clocks (per origin,
  the last DEL or DESTROY) take the larger.
- *Groups, delete wins.* A group's births on one side are all after every delete that side
  applied; they survive the merge unless the other side applied a DEL of the key or a
  DESTROY of the group this side has not seen (its clock names a later sequence than this
  side's vector): that delete is concurrent with them, or after them. The surviving sides'
  births are joined and their acknowledged prefixes max-merged (an acknowledgement counts
  for the incarnation its sender knew: one known to a side that survives is in that side's).

When the donor's vector covers the receiver's, every rule above gives the donor's replicated
state: the old adoption is the merge's special case. The merge is symmetric, so the two links
of a healed cut may both transfer at once; each region ends with the same state and the
component-wise largest vector, and the effects after it follow on. Nothing either side
applied is lost.

What is local stays the receiver's:

- per stream, its IDMP maps (a stream deleted meanwhile loses them, as with a DEL; a change of
  the XCFGSET setting in force clears them, as XCFGSET does);
- per group of a surviving incarnation of its own, its consumers, PEL, NACK zone, start,
  last-delivered ID and entries-read, with its cursors raised to the merged acknowledged
  prefix; a group it did not have (or whose incarnation here did not survive) starts, as a
  group created by an effect would, at the donor's start cursors raised to the acknowledged
  prefix: nothing the donor delivered but did not acknowledge is skipped here. (A pending
  entry here whose stream entry the donor removed with DELREF stays pending, as after a
  KEEPREF removal: the state does not say which removals were DELREF.)

The donor's local state (its consumers, PELs, IDMP maps) is dropped. The effects waiting in
the receiver's inbox that the merged state holds are dropped; those that became ready are
applied. Nothing of the receiver changes before the whole merge is built.

What it costs: the transfer is as large as a snapshot of the donor's streams (every entry of
every sub-log), sent and merged in one piece on the event loops of both regions (a lookup in
the other side per entry at or below its horizon), and the receiver logs its new state as one
``AARESTORE`` line in its AOF.
"""

from __future__ import annotations

from collections.abc import Callable

from headwater.activeactive.envelope import Effect, Vector
from headwater.activeactive.persist import load_state, saved_region
from headwater.activeactive.region import Region
from headwater.activeactive.rstream import NodeLimits, RegionGroup, RegionStream, Stamp, Streams
from headwater.errors import err
from headwater.stream.ids import MIN_ID, StreamID
from headwater.stream.stream import Stream

#: an XCFGSET register's value: (the stamp of the effect that set it, the value)
Value = tuple[Stamp, int]


def covers(theirs: dict[int, int], mine: dict[int, int]) -> bool:
    """Whether a vector holds every effect another one names."""
    return all(theirs.get(r, 0) >= s for r, s in mine.items())


def adopt_state(region: Region, data: bytes) -> list[Effect]:
    """Merge a donor's state (``persist.dump_state`` of another region) into this region's,
    keeping what is local here; the effects of the inbox that became ready (not applied yet:
    the caller applies them, after logging the new state)."""
    donor = Region(saved_region(data), [], region.mode, region.capacity)
    donor.streams.limits = region.streams.limits
    load_state(donor, data)
    if donor.id == region.id:
        raise err("state transfer: the state is this region's own")
    merge = _Merge(region.inbox.applied, donor.inbox.applied, region.streams.limits)
    dbs = {
        db: merge.streams(region.dbs.get(db), donor.dbs.get(db))
        for db in sorted(set(region.dbs) | set(donor.dbs))
    }
    vector = merge.vector()
    vectors = _last_vectors(vector, region.inbox.vectors, donor.inbox.vectors)
    # (the merge is built: only now does this region change)
    for change in merge.deferred:
        change()
    region.streams.clear()
    region.streams.update(dbs.pop(0))
    for db in [n for n in region.dbs if n]:
        del region.dbs[db]
    region.dbs.update(dbs)
    region.selected, region.current = 0, region.streams
    return region.inbox.adopt(vector, vectors)


def _last_vectors(
    vector: dict[int, int], mine: dict[int, Vector], theirs: dict[int, Vector]
) -> dict[int, Vector]:
    """Each origin's last vector, from the side that applied that origin's last effect."""
    out: dict[int, Vector] = {}
    for origin, seq in vector.items():
        for source in (mine, theirs):
            last = source.get(origin)
            if last is not None and (origin, seq) in last:
                out[origin] = last
                break
    return out


class _Merge:
    """``State(mine ⊔ theirs)`` from this region's state (applied vector ``mine``) and a
    donor's (``theirs``), record by record (see the module's docstring)."""

    def __init__(self, mine: dict[int, int], theirs: dict[int, int], limits: NodeLimits) -> None:
        self.mine = mine
        self.theirs = theirs
        self.limits = limits
        #: changes to this region's own objects (its groups, IDMP maps), made once the whole
        #: merge is built
        self.deferred: list[Callable[[], None]] = []

    def vector(self) -> dict[int, int]:
        regions = set(self.mine) | set(self.theirs)
        return {r: max(self.mine.get(r, 0), self.theirs.get(r, 0)) for r in sorted(regions)}

    def streams(self, mine: Streams | None, theirs: Streams | None) -> Streams:
        out = Streams()
        out.limits = self.limits
        for key in sorted(set(mine or ()) | set(theirs or ())):
            own = mine.get(key) if mine is not None else None
            came = theirs.get(key) if theirs is not None else None
            out[key] = self.record(own, came)
        return out

    def record(self, mine: RegionStream | None, theirs: RegionStream | None) -> RegionStream:
        if theirs is None and mine is not None:
            return mine  # (the donor never had the key: it undid nothing of it)
        if theirs is None:
            raise err("state transfer: a key neither side has")
        if mine is None:  # (this region never had the key)
            theirs.limits = self.limits
            theirs.groups = {name: _fresh(g) for name, g in theirs.groups.items()}
            theirs.idmp = None
            return theirs
        out = RegionStream(self.limits)
        for sub in sorted(set(mine.subs) | set(theirs.subs)):
            out.subs[sub] = _merge_sub(mine.subs.get(sub), theirs.subs.get(sub))
        out.floor = max(mine.floor, theirs.floor)
        out.deleted_floor = max(mine.deleted_floor, theirs.deleted_floor)
        out.added_adjust = self._adjustments(mine.added_adjust, theirs.added_adjust)
        out.idmp_config = self._registers(mine.idmp_config, theirs.idmp_config)
        out.del_clock = _later(mine.del_clock, theirs.del_clock)
        for name in sorted(set(mine.destroy_clock) | set(theirs.destroy_clock)):
            clocks = mine.destroy_clock.get(name, {}), theirs.destroy_clock.get(name, {})
            out.destroy_clock[name] = _later(*clocks)
        out.groups = self._groups(mine, theirs)
        self._keep_idmp(out, mine, theirs)
        return out

    def _adjustments(self, mine: dict[int, int], theirs: dict[int, int]) -> dict[int, int]:
        """XSETID ENTRIESADDED: each origin's adjustment as the side that applied more of
        that origin's effects has it (only the origin sets it, in its order)."""
        out: dict[int, int] = {}
        for origin in sorted(set(mine) | set(theirs)):
            ahead = self.theirs.get(origin, 0) > self.mine.get(origin, 0)
            first, other = (theirs, mine) if ahead else (mine, theirs)
            out[origin] = first[origin] if origin in first else other[origin]
        return out

    def _registers(
        self, mine: dict[bytes, list[Value]], theirs: dict[bytes, list[Value]]
    ) -> dict[bytes, list[Value]]:
        """XCFGSET's registers: a value stays when each side that had applied its effect
        still holds it (whatever dropped it there had seen it)."""
        out: dict[bytes, list[Value]] = {}
        for name in sorted(set(mine) | set(theirs)):
            here, there = set(mine.get(name, ())), set(theirs.get(name, ()))
            kept = [
                value
                for value in sorted(here | there)
                if (value in here or not _had(self.mine, value[0]))
                and (value in there or not _had(self.theirs, value[0]))
            ]
            if kept:
                out[name] = kept
        return out

    def _groups(self, mine: RegionStream, theirs: RegionStream) -> dict[bytes, RegionGroup]:
        """Per group, the sides whose incarnation survives the other's deletes: this
        region's group (its local state) joined with the donor's replicated parts, or the
        donor's as an effect would have made it here."""
        out: dict[bytes, RegionGroup] = {}
        for name in sorted(set(mine.groups) | set(theirs.groups)):
            own = None if _deleted_unseen(theirs, name, self.mine) else mine.groups.get(name)
            came = None if _deleted_unseen(mine, name, self.theirs) else theirs.groups.get(name)
            if own is not None:
                out[name] = own
                if came is not None:
                    self.deferred.append(_joiner(own, came))
            elif came is not None:
                out[name] = _fresh(came)
        return out

    def _keep_idmp(self, out: RegionStream, mine: RegionStream, theirs: RegionStream) -> None:
        """This region's IDMP maps stay with a stream that still exists and that the donor
        did not delete unseen here (a DEL drops them, as in Redis); cleared when the XCFGSET
        setting in force changed (as XCFGSET does)."""
        idmp = mine.idmp
        if idmp is None or not out.exists() or _unseen(theirs.del_clock, self.mine):
            return
        out.idmp = idmp
        settings = (b"duration", b"maxsize")
        if any(out.idmp_setting(s) != mine.idmp_setting(s) for s in settings):
            self.deferred.append(idmp.clear)


def _had(vector: dict[int, int], stamp: Stamp) -> bool:
    """Whether a side with this vector applied the effect of the stamp (sum, origin, seq)."""
    return vector.get(stamp[1], 0) >= stamp[2]


def _later(mine: dict[int, int], theirs: dict[int, int]) -> dict[int, int]:
    """Two clocks (origin -> sequence of its last such effect), merged."""
    out = dict(mine)
    for origin, seq in theirs.items():
        out[origin] = max(out.get(origin, 0), seq)
    return out


def _unseen(clock: dict[int, int], vector: dict[int, int]) -> bool:
    """Whether a side applied an effect of a clock (origin -> sequence of its last such
    effect) that a side with ``vector`` has not."""
    return any(seq > vector.get(origin, 0) for origin, seq in clock.items())


def _deleted_unseen(record: RegionStream, group: bytes, vector: dict[int, int]) -> bool:
    """Whether the side of ``record`` applied a DEL of the key or a DESTROY of the group
    that a side with ``vector`` had not: every birth there is concurrent with it or before
    it, and does not survive it (delete wins)."""
    return _unseen(record.del_clock, vector) or _unseen(record.destroy_clock.get(group, {}), vector)


def _merge_sub(mine: Stream | None, theirs: Stream | None) -> Stream:
    """One sub-log: each entry that a side had (at or below its last ID) and holds no
    longer, an effect there removed. This region's sub-log is never changed (copied when
    it must)."""
    if mine is None or theirs is None:
        found = mine if mine is not None else theirs
        if found is None:
            raise err("state transfer: a sub-log neither side has")
        return found
    ahead, behind = (mine, theirs) if mine.last_id > theirs.last_id else (theirs, mine)
    removed = _removed_behind(ahead, behind)
    max_deleted = max(mine.max_deleted_id, theirs.max_deleted_id)
    added = max(mine.entries_added, theirs.entries_added)
    if removed or ahead.max_deleted_id != max_deleted or ahead.entries_added != added:
        if ahead is mine:
            ahead = mine.copy()
        for sid in removed:
            ahead.delete(sid)
        ahead.max_deleted_id, ahead.entries_added = max_deleted, added
    return ahead


def _removed_behind(ahead: Stream, behind: Stream) -> list[StreamID]:
    """The entries ``ahead`` holds that ``behind`` had (at or below its last ID) but holds
    no longer: both walked once, in ID order."""
    horizon = behind.last_id
    held = behind.iter_ids()
    other = next(held, None)
    removed: list[StreamID] = []
    for sid in ahead.iter_ids():
        if sid > horizon:
            break
        while other is not None and other < sid:
            other = next(held, None)
        if other != sid:
            removed.append(sid)
    return removed


def _joiner(own: RegionGroup, came: RegionGroup) -> Callable[[], None]:
    """The change that joins the donor's replicated parts of a group into this region's."""

    def join() -> None:
        own.births |= came.births
        for sub, sid in came.acked.items():
            if sid > own.acked.get(sub, MIN_ID):
                own.acked[sub] = sid
            own.raise_cursor(sub, sid)

    return join


def _fresh(group: RegionGroup) -> RegionGroup:
    """The group as an effect would have made it here: no consumers, nothing pending."""
    g = RegionGroup(group.name)
    g.births = set(group.births)
    g.acked = dict(group.acked)
    g.start = dict(group.start)
    g.cursors = dict(group.start)
    for sub, sid in g.acked.items():
        g.raise_cursor(sub, sid)
    g.last_id = max([MIN_ID, *g.start.values()])
    return g
