"""A stream in an active-active database: one sub-log per region, read merged by ID.

Why this shape
--------------
Each region appends only to its own sub-log, an ordinary packed ``Stream``, so a sub-log is
ordered by ID and by the order its region made the entries; any region may remove entries of
any sub-log. Reads merge the sub-logs by ``(ID, region)`` (the region breaks ties between equal
IDs, which only semi-strict and liberal modes can make), so after a sync every region returns
the same sequence::

    sub 1: 110-1 120-1 130-1          merged: 110-1 115-2 120-1 130-1
    sub 2:   115-2

A group keeps, per sub-log, the last ID it delivered there (``cursors``): ``>`` takes from each
sub-log what lies above its cursor, so an entry that arrives late from another region, with an
ID below what other sub-logs already delivered, is still delivered: XREADGROUP never skips.
The group's pending entries are keyed ``(ID, sub-log)`` in one ordered list, so history reads
walk them merged by ID. Consumers and PELs are local; only the group's existence (``births``)
and its acknowledged prefixes (``acked``) are replicated.

A stream with no entries and no groups does not exist (``exists``); its record stays as a
tombstone that keeps the sub-logs' last IDs and the delete clocks (see region.py).
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterable, Iterator, Sequence
from itertools import islice

from headwater.errors import require
from headwater.stream.groups import idle_consumer
from headwater.stream.idmp import IdmpState
from headwater.stream.ids import MAX_ID, MIN_ID, StreamID, incr_id
from headwater.stream.stream import Stream

#: an entry as merged reads return it: (ID, sub-log region, field/value pairs)
MergedEntry = tuple[StreamID, int, list[bytes]]
#: a pending entry's key: (ID, sub-log region); orders like merged reads
Tag = tuple[StreamID, int]
#: above every sub-log number (RENAME's moved sub-logs pass 2**64): ``(sid, ABOVE_SUBS)``
#: sorts after every tag of sid
ABOVE_SUBS = 1 << 160
#: an effect's place in a total order that extends causality (``Effect.stamp``)
Stamp = tuple[int, int, int]

#: node limits of sub-logs by default (a server gives its stream-node-max-*: NodeLimits)
NODE_MAX_BYTES = 4096
NODE_MAX_ENTRIES = 100


class NodeLimits:
    """``stream-node-max-bytes`` and ``-entries`` for a region's sub-logs: one object shared
    by the region's streams, so that CONFIG SET reaches them all."""

    __slots__ = ("max_bytes", "max_entries")

    def __init__(self, max_bytes: int = NODE_MAX_BYTES, max_entries: int = NODE_MAX_ENTRIES):
        self.max_bytes = max_bytes
        self.max_entries = max_entries


DEFAULT_LIMITS = NodeLimits()


class Pending:
    """A pending entry: its owner (None: nacked, in the group's NACK zone, with delivery time
    0), delivery time (ms) and delivery count."""

    __slots__ = ("consumer", "count", "delivery_ms")

    def __init__(self, consumer: bytes | None, delivery_ms: int, count: int) -> None:
        self.consumer = consumer
        self.delivery_ms = delivery_ms
        self.count = count


class RegionGroup:
    __slots__ = (
        "acked",
        "births",
        "by_sub",
        "consumers",
        "cursors",
        "entries_read",
        "last_id",
        "nacked",
        "name",
        "order",
        "pel",
        "reclaim_checked_ms",
        "start",
        "times",
        "touched",
        "touched_consumers",
    )

    def __init__(self, name: bytes) -> None:
        self.name = name
        #: the creates merged into this group, (origin, seq) (replicated)
        self.births: set[tuple[int, int]] = set()
        #: per sub-log, the acknowledged prefix some region reported (replicated, max-merged)
        self.acked: dict[int, StreamID] = {}
        #: per sub-log, the last ID delivered by ``>`` here (or acknowledged elsewhere)
        self.cursors: dict[int, StreamID] = {}
        #: per sub-log, where the group started (the first create applied here): with
        #: ``acked``, the cursors a region that gets this group by a state transfer starts at
        self.start: dict[int, StreamID] = {}
        self.pel: dict[Tag, Pending] = {}
        self.order: list[Tag] = []  # the keys of pel, sorted
        self.by_sub: dict[int, list[StreamID]] = {}  # sub-log -> its pending IDs, sorted
        self.consumers: dict[bytes, list[Tag]] = {}  # name -> its pending tags, sorted
        #: the NACK zone (XNACK): pending entries nobody owns, oldest nack first (local)
        self.nacked: dict[Tag, None] = {}
        #: what XINFO shows, local: the last ID delivered here (or set by CREATE/SETID) and
        #: Redis's entries-read counter (-1: unknown), kept by the server's handlers
        self.last_id: StreamID = MIN_ID
        self.entries_read = -1
        #: consumer -> [seen-time, active-time] (ms; active -1: never), local
        self.times: dict[bytes, list[int]] = {}
        #: the pending entries and consumers changed since the server last logged this
        #: group's local state (``journal.local_line``)
        self.touched: set[Tag] = set()
        self.touched_consumers: set[bytes] = set()
        #: when a command last looked for idle consumers to drop (at most once a second)
        self.reclaim_checked_ms = 0

    def cursor(self, region: int) -> StreamID:
        return self.cursors.get(region, MIN_ID)

    def consumer(self, name: bytes) -> list[Tag]:
        return self.consumers.setdefault(name, [])

    def add_pending(self, tag: Tag, consumer: bytes, now_ms: int) -> None:
        previous = self.pel.get(tag)
        if previous is not None:  # delivered again after SETID moved the group back
            self._unown(tag, previous.consumer)
        else:
            insort(self.order, tag)
            insort(self.by_sub.setdefault(tag[1], []), tag[0])
        self.pel[tag] = Pending(consumer, now_ms, 1)
        insort(self.consumer(consumer), tag)
        self.touched.add(tag)

    def _unown(self, tag: Tag, consumer: bytes | None) -> None:
        if consumer is None:
            del self.nacked[tag]
            return
        tags = self.consumers[consumer]
        del tags[bisect_left(tags, tag)]

    def release(self, tag: Tag, count: int) -> None:
        """XNACK: the entry (pending, or new for FORCE) belongs to nobody, with delivery time
        0 and this count, at the tail of the NACK zone (a nacked one moves there again)."""
        previous = self.pel.get(tag)
        if previous is None:
            insort(self.order, tag)
            insort(self.by_sub.setdefault(tag[1], []), tag[0])
        else:
            self._unown(tag, previous.consumer)
        self.nacked[tag] = None
        self.pel[tag] = Pending(None, 0, count)
        self.touched.add(tag)

    def claim_order(self) -> list[Tag]:
        """Pending entries in the order XREADGROUP … CLAIM considers them: the NACK zone
        first (oldest nack first), then the owned ones by delivery time, then ID."""
        owned = sorted(
            (p.delivery_ms, tag) for tag, p in self.pel.items() if p.consumer is not None
        )
        return [*self.nacked, *(tag for _, tag in owned)]

    def touch(self, consumer: bytes, now_ms: int, active: bool = False) -> bool:
        """A consumer tried to read or claim (``active``: and got something); whether it
        was created."""
        times = self.times.get(consumer)
        created = times is None
        if times is None:
            times = self.times[consumer] = [now_ms, -1]
            self.consumer(consumer)
        times[0] = now_ms
        if active or created:  # (a seen time alone is not logged: as Redis, not replicated)
            self.touched_consumers.add(consumer)
        if active:
            times[1] = now_ms
        return created

    def claim(self, tag: Tag, consumer: bytes, delivery_ms: int, count: int) -> None:
        """XCLAIM/XAUTOCLAIM: the pending entry (created by FORCE) now belongs to consumer."""
        pending = self.pel.get(tag)
        if pending is None:
            self.add_pending(tag, consumer, delivery_ms)
            pending = self.pel[tag]
        elif pending.consumer != consumer:
            self._unown(tag, pending.consumer)
            insort(self.consumer(consumer), tag)
            pending.consumer = consumer
        pending.delivery_ms = delivery_ms
        pending.count = count
        self.touched.add(tag)

    def forget(self, tag: Tag) -> None:
        """Drop a pending entry whose stream entry is gone."""
        pending = self.pel.pop(tag)
        self._unown(tag, pending.consumer)
        self.touched.add(tag)
        del self.order[bisect_left(self.order, tag)]
        ids = self.by_sub[tag[1]]
        del ids[bisect_left(ids, tag[0])]

    def idle_consumers(self, now_ms: int, idle_ms: int, keep: bytes | None = None) -> list[bytes]:
        """This region's consumers that ``idle_consumer`` says may be dropped."""
        return [
            name
            for name, tags in self.consumers.items()
            if idle_consumer(len(tags), self.times.get(name, [now_ms])[0], now_ms, idle_ms)
            and name != keep
        ]

    def delete_consumer(self, name: bytes) -> int | None:
        """XGROUP DELCONSUMER: the consumer and its pending entries; how many it had (None:
        no such consumer)."""
        tags = self.consumers.get(name)
        if tags is None:
            return None
        count = len(tags)
        for tag in list(tags):
            self.forget(tag)
        del self.consumers[name]
        self.times.pop(name, None)
        self.touched_consumers.add(name)
        return count

    def ack(self, sid: StreamID) -> int:
        """Acknowledge every pending entry with this ID (one per sub-log that has it)."""
        return len(self.ack_tags(sid))

    def ack_tags(self, sid: StreamID) -> list[Tag]:
        """``ack``, and the pending entries it acknowledged."""
        lo = bisect_left(self.order, (sid, 0))
        hi = bisect_right(self.order, (sid, ABOVE_SUBS))
        tags = self.order[lo:hi]
        for tag in tags:
            pending = self.pel.pop(tag)
            self._unown(tag, pending.consumer)
            self.touched.add(tag)
            ids = self.by_sub[tag[1]]
            del ids[bisect_left(ids, sid)]
        del self.order[lo:hi]
        return tags

    def min_pending(self, region: int) -> StreamID | None:
        """The smallest pending ID of a sub-log."""
        ids = self.by_sub.get(region)
        return ids[0] if ids else None

    def raise_cursor(self, region: int, sid: StreamID) -> None:
        if sid > self.cursor(region):
            self.cursors[region] = sid

    def check_invariants(self) -> None:
        require(self.order == sorted(self.pel), "group order is not the sorted PEL")
        union: list[Tag] = []
        for name, tags in self.consumers.items():
            require(tags == sorted(tags), f"consumer {name!r} PEL out of order")
            for tag in tags:
                require(self.pel[tag].consumer == name, "a PEL entry filed under another owner")
            union += tags
        unowned = [tag for tag, p in self.pel.items() if p.consumer is None]
        require(sorted(unowned) == sorted(self.nacked), "the NACK zone is not the unowned PEL")
        for tag in self.nacked:
            require(self.pel[tag].delivery_ms == 0, "a nacked entry with a delivery time")
        union += self.nacked
        require(sorted(union) == self.order, "group PEL is not consumer PELs + NACK zone")
        require(bool(self.births), "a group nobody created")
        require({r for _, r in self.order} <= set(self.by_sub), "a pending sub-log not indexed")
        for sub, ids in self.by_sub.items():
            require(ids == sorted(sid for sid, r in self.order if r == sub), "by_sub is stale")
        for region, sid in self.acked.items():
            require(self.cursor(region) >= sid, "a cursor below its acknowledged prefix")


class RegionStream:
    #: what TYPE and OBJECT ENCODING say of it in the keyspace
    TYPE_NAME = b"stream"
    ENCODING = b"stream"

    __slots__ = (
        "added_adjust",
        "del_clock",
        "deleted_floor",
        "destroy_clock",
        "floor",
        "groups",
        "idmp",
        "idmp_config",
        "limits",
        "subs",
    )

    def __init__(self, limits: NodeLimits = DEFAULT_LIMITS) -> None:
        self.limits = limits
        #: this region's IDMP maps (local: never shipped; spec/ACTIVE-ACTIVE.md)
        self.idmp: IdmpState | None = None
        self.subs: dict[int, Stream] = {}
        #: XSETID's last ID (max-merged)
        self.floor: StreamID = MIN_ID
        #: XSETID ENTRIESADDED: origin -> its adjustment of the entries-added sum (set by the
        #: origin only, in its order); MAXDELETEDID: a max-merged max-deleted-entry-id
        self.added_adjust: dict[int, int] = {}
        self.deleted_floor: StreamID = MIN_ID
        #: XCFGSET: setting (b"duration", b"maxsize") -> its values, each with the stamp of
        #: the effect that set it (a multi-value register; the greatest stamp is the value)
        self.idmp_config: dict[bytes, list[tuple[Stamp, int]]] = {}
        self.groups: dict[bytes, RegionGroup] = {}
        #: origin -> seq of the latest DEL (or RENAME) of this key applied from it
        self.del_clock: dict[int, int] = {}
        #: group -> origin -> seq of the latest XGROUP DESTROY applied from it
        self.destroy_clock: dict[bytes, dict[int, int]] = {}

    # -- shape -----------------------------------------------------------------------------

    def sub(self, region: int) -> Stream:
        stream = self.subs.get(region)
        if stream is None:
            stream = self.subs[region] = Stream()
        return stream

    @property
    def length(self) -> int:
        return sum(s.length for s in self.subs.values())

    def exists(self) -> bool:
        if self.groups:
            return True
        for s in self.subs.values():  # noqa: SIM110 (loops, not generators: run on every XADD)
            if s.length:
                return True
        return False

    def last_id(self) -> StreamID:
        """The merged last ID: the greatest ever made in any sub-log, or XSETID's. (By parts:
        compiled, a tuple comparison boxes both IDs, ~1k instructions on every XADD.)"""
        last_ms, last_seq = self.floor
        for s in self.subs.values():
            ms, seq = s.last_id
            if ms > last_ms or (ms == last_ms and seq > last_seq):
                last_ms, last_seq = ms, seq
        return last_ms, last_seq

    def own_last(self, region: int) -> StreamID:
        stream = self.subs.get(region)
        return stream.last_id if stream is not None else MIN_ID

    def last_live_id(self) -> StreamID:
        """The greatest ID of a live entry (0-0: none)."""
        return max([MIN_ID, *(s.last_live_id() for s in self.subs.values() if s.length)])

    def max_deleted_id(self) -> StreamID:
        return max([self.deleted_floor, *(s.max_deleted_id for s in self.subs.values())])

    def entries_added(self) -> int:
        added = sum(s.entries_added for s in self.subs.values())
        for adjust in self.added_adjust.values():
            added += adjust
        return added

    def idmp_setting(self, name: bytes) -> int:
        """The XCFGSET value of a setting (``b"duration"``, ``b"maxsize"``); 0: never set
        (the server's ``stream-idmp-*``)."""
        values = self.idmp_config.get(name)
        return max(values)[1] if values else 0

    def stats(self) -> Stream:
        """An empty ``Stream`` that carries the merged stream's counters (length, last,
        first and max-deleted IDs, entries-added), for the entries-read and lag rules of
        ``stream.groups`` and for XINFO."""
        view = Stream()
        live = [s for s in self.subs.values() if s.length]
        view.length = sum(s.length for s in live)
        view.entries_added = self.entries_added()
        view.last_id = self.last_id()
        view.max_deleted_id = self.max_deleted_id()
        if live:
            view.first_id = min(s.first_id for s in live)
        elif self.subs:
            view.first_id = max(self.subs.values(), key=lambda s: s.last_id).first_id
        return view

    def horizon(self) -> tuple[tuple[int, StreamID], ...]:
        """Per sub-log, the last ID it ever held: everything this region observed."""
        return tuple(
            (region, s.last_id) for region, s in sorted(self.subs.items()) if s.last_id != MIN_ID
        )

    # -- merged reads ----------------------------------------------------------------------

    def range(
        self, start: StreamID, end: StreamID, count: int | None = None, reverse: bool = False
    ) -> list[MergedEntry]:
        """Live entries with start <= ID <= end, merged by (ID, region); descending with
        reverse. Each sub-log gives at most count, so the merge reads O(count) per sub-log."""
        if count is not None and count <= 0:
            return []
        runs = [
            [(sid, region, pairs) for sid, pairs in s.range(start, end, count, reverse)]
            for region, s in sorted(self.subs.items())
        ]
        merged = heapq.merge(*runs, key=lambda e: (e[0], e[1]), reverse=reverse)
        return list(islice(merged, count))

    def entries(
        self, start: StreamID, end: StreamID, count: int | None = None, reverse: bool = False
    ) -> list[tuple[StreamID, list[bytes]]]:
        """``range`` without the sub-logs, as the replies want it. When one sub-log alone has
        entries in the range (one writing region: the usual case) its list is the answer."""
        if count is not None and count <= 0:
            return []
        runs = []
        for region, s in sorted(self.subs.items()):
            run = s.range(start, end, count, reverse)
            if run:
                runs.append((region, run))
        if len(runs) <= 1:
            return runs[0][1] if runs else []
        tagged = [[(sid, region, pairs) for sid, pairs in run] for region, run in runs]
        merged = heapq.merge(*tagged, key=lambda e: (e[0], e[1]), reverse=reverse)
        return [(sid, pairs) for sid, _, pairs in islice(merged, count)]

    def after(self, sid: StreamID, count: int | None = None) -> list[MergedEntry]:
        """XREAD: the entries with ID > sid, merged."""
        start = incr_id(sid)
        return [] if start is None else self.range(start, MAX_ID, count)

    def merged_ids(self) -> Iterator[tuple[StreamID, int]]:
        """Every live entry's (ID, sub-log), merged by ID, lazily."""
        return heapq.merge(*[_tagged(s, region) for region, s in sorted(self.subs.items())])

    def entry(self, region: int, sid: StreamID) -> list[bytes] | None:
        stream = self.subs.get(region)
        return None if stream is None else stream.get(sid)

    def new_for(self, group: RegionGroup, count: int | None) -> list[MergedEntry]:
        """What ``>`` delivers: per sub-log the entries above its cursor, merged by ID."""
        runs = []
        for region, s in sorted(self.subs.items()):
            start = incr_id(group.cursor(region))
            if start is not None:
                runs.append([(sid, region, p) for sid, p in s.range(start, MAX_ID, count)])
        merged = heapq.merge(*runs, key=lambda e: (e[0], e[1]))
        return list(islice(merged, count))

    # -- removals (observed-remove) --------------------------------------------------------

    def remove_upto(
        self,
        points: Iterable[tuple[int, StreamID]],
        kept: Iterable[tuple[int, StreamID]] = (),
        delref: bool = False,
    ) -> int:
        """Remove each named sub-log's entries at or below its point, except the ``kept``
        ones; with ``delref`` drop the removed entries' pending entries in every group. The
        number removed."""
        keep_set = set(kept)
        removed = 0
        for region, point in points:
            stream = self.subs.get(region)
            if stream is None:
                continue
            if delref and self.groups:
                for sid, _ in stream.range(MIN_ID, point):
                    if (region, sid) not in keep_set:
                        self.drop_refs(region, sid)
            above = incr_id(point)
            if keep_set:
                mine = {sid for r, sid in keep_set if r == region}
                removed += stream.trim(
                    maxlen=0 if above is None else None,
                    minid=above,
                    keep=mine.__contains__ if mine else None,
                )
            elif above is None:
                removed += stream.length
                stream.trim(maxlen=0)
            else:
                removed += stream.trim(minid=above)
        return removed

    # -- references (KEEPREF / DELREF / ACKED) ---------------------------------------------

    def referenced(self, region: int, sid: StreamID) -> bool:
        """ACKED's test, with what this region knows: some group has not delivered the
        entry here (its cursor of the sub-log is below it: neither read here nor inside an
        acknowledged prefix another region replicated) or has it pending here."""
        for group in self.groups.values():
            if sid > group.cursor(region) or (sid, region) in group.pel:
                return True
        return False

    def drop_refs(self, region: int, sid: StreamID) -> None:
        """DELREF: the entry is no longer pending in any group (of this region)."""
        tag = (sid, region)
        for group in self.groups.values():
            if tag in group.pel:
                group.forget(tag)

    def append(self, region: int, sid: StreamID, pairs: Sequence[bytes], size: int = -1) -> None:
        """XADD's entry, in its origin's sub-log (``insert`` for one entry, without the
        lists); ``size``: the bytes of the pairs, when known."""
        stream = self.subs.get(region)
        if stream is None:
            stream = self.subs[region] = Stream()
        limits = self.limits  # (the sub-log refuses an ID at or below its last: Stream.append)
        stream.append(sid, pairs, limits.max_bytes, limits.max_entries, size if size >= 0 else None)

    def insert(self, region: int, entries: list[MergedEntry]) -> None:
        """Append entries, in ascending ID order above the sub-log's last ID: a region's own
        sub-log grows by its origin's effects, in that origin's order, and a moved sub-log
        is filled once (RENAME). Anything else is a bug."""
        stream = self.sub(region)
        for sid, _, pairs in entries:  # (an ID at or below the last: Stream.append refuses it)
            stream.append(sid, pairs, self.limits.max_bytes, self.limits.max_entries)

    # -- introspection ---------------------------------------------------------------------

    def check_invariants(self) -> None:
        for region, stream in self.subs.items():
            require(region >= 1, "a sub-log of no region")
            stream.check_invariants()
        for name, group in self.groups.items():
            require(group.name == name, "group filed under another name")
            group.check_invariants()


def _tagged(stream: Stream, region: int) -> Iterator[tuple[StreamID, int]]:
    for sid in stream.iter_ids():
        yield (sid, region)


class Streams(dict[bytes, RegionStream]):
    """A region's records by key, and the node limits new ones take."""

    __slots__ = ("limits",)

    def __init__(self) -> None:
        super().__init__()
        self.limits = DEFAULT_LIMITS


def db_streams(dbs: dict[int, Streams], db: int) -> Streams:
    """A database's records (made on first use, with database 0's node limits)."""
    streams = dbs.get(db)
    if streams is None:
        streams = dbs[db] = Streams()
        streams.limits = dbs[0].limits
    return streams
