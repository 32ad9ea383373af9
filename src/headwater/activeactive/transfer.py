"""A full state transfer: a region whose peers no longer keep the effects it needs takes one
peer's state in one piece, then goes on with effects.

Theory of operation
-------------------
A region keeps its own effects until every peer has acknowledged them (or, with
``active-active-keep-effects``, at most that many). A peer that asks for effects no longer
kept (it was down while the others trimmed, it lost its data, or it is new) cannot be served
effect by effect. The donor then sends its whole region state in the snapshot's layout
(``persist.dump_state``: records with tombstones, sub-logs and their counters, delete clocks,
groups with births and acknowledged prefixes, XCFGSET registers, and the applied vector), and
after it its own effects from the one after that vector's, as usual.

The receiver adopts it only when the donor's vector *covers* its own (every component at
least as large): the donor then holds every effect the receiver applied, and, effects being
applied in causal order, the donor's replicated state is exactly the receiver's with the
missing effects applied. So the receiver takes the donor's replicated state as it is and
keeps what is local to it:

- per stream, its IDMP maps (a stream deleted meanwhile loses them, as with a DEL);
- per group of the same incarnation (a birth in common), its consumers, PEL, NACK zone,
  last-delivered ID and entries-read, and its cursors raised to the group's start and
  acknowledged prefix; a group it did not have starts, as a group created by an effect
  would, at its start cursors raised to the acknowledged prefix: nothing the donor delivered
  but did not acknowledge is skipped here.

The donor's local state (its consumers, PELs, IDMP maps) is dropped. The effects waiting in
the receiver's inbox that the state holds are dropped; those that became ready are applied.
A receiver whose vector is not covered (it applied something the donor has not) refuses the
state (``NOT_COVERED``); its link asks again later, when the donor has caught up.

What it costs: the transfer is as large as a snapshot of the donor's streams (every entry of
every sub-log), sent and loaded in one piece on the event loops of both regions, and the
receiver logs its new state as one ``AARESTORE`` line in its AOF.
"""

from __future__ import annotations

from headwater.activeactive.envelope import Effect
from headwater.activeactive.persist import load_state, saved_region
from headwater.activeactive.region import Region
from headwater.activeactive.rstream import RegionGroup, RegionStream
from headwater.errors import ReplyError, err
from headwater.stream.ids import MIN_ID


def not_covered(donor: int, theirs: dict[int, int], mine: dict[int, int]) -> ReplyError:
    ahead = ",".join(
        f"{r}={s}" for r, s in sorted(mine.items()) if s > theirs.get(r, 0) and r != donor
    )
    return err(f"state transfer: region {donor}'s vector does not cover this one ({ahead})")


def covers(theirs: dict[int, int], mine: dict[int, int]) -> bool:
    """Whether a vector holds every effect another one names."""
    return all(theirs.get(r, 0) >= s for r, s in mine.items())


def adopt_state(region: Region, data: bytes) -> list[Effect]:
    """Make a donor's state (``persist.dump_state`` of another region) this region's, keeping
    what is local here; the effects of the inbox that became ready (not applied yet: the
    caller applies them, after logging the new state). Raises ``NOT_COVERED``-style errors
    when the donor's vector does not cover this region's (nothing changed then)."""
    donor = Region(saved_region(data), [], region.mode, region.capacity)
    donor.streams.limits = region.streams.limits
    load_state(donor, data)
    vector = donor.inbox.applied
    if donor.id == region.id:
        raise err("state transfer: the state is this region's own")
    if not covers(vector, region.inbox.applied):
        raise not_covered(donor.id, vector, region.inbox.applied)
    for db, streams in donor.dbs.items():
        streams.limits = region.streams.limits
        mine = region.dbs.get(db)
        for key, record in streams.items():
            _keep_local(record, mine.get(key) if mine is not None else None)
    region.streams.clear()
    region.streams.update(donor.streams)
    for db in [n for n in region.dbs if n]:
        del region.dbs[db]
    for db, streams in donor.dbs.items():
        if db:
            region.dbs[db] = streams
    region.selected, region.current = 0, region.streams
    return region.inbox.adopt(dict(vector), donor.inbox.vectors)


def _keep_local(record: RegionStream, old: RegionStream | None) -> None:
    record.idmp = old.idmp if old is not None and record.exists() else None
    for name, group in list(record.groups.items()):
        before = old.groups.get(name) if old is not None else None
        if before is not None and before.births & group.births:
            before.births = set(group.births)
            before.acked = dict(group.acked)
            before.start = dict(group.start)
            _raise_cursors(before)
            record.groups[name] = before
        else:
            record.groups[name] = _fresh(group)


def _fresh(group: RegionGroup) -> RegionGroup:
    """The group as an effect would have made it here: no consumers, nothing pending."""
    g = RegionGroup(group.name)
    g.births = set(group.births)
    g.acked = dict(group.acked)
    g.start = dict(group.start)
    g.cursors = dict(group.start)
    _raise_cursors(g)
    g.last_id = max([MIN_ID, *g.start.values()])
    return g


def _raise_cursors(g: RegionGroup) -> None:
    for sub, sid in g.start.items():
        g.raise_cursor(sub, sid)
    for sub, sid in g.acked.items():
        g.raise_cursor(sub, sid)
