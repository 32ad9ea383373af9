"""Consumer groups: a group's position in the stream and its pending-entries lists (PELs).

Theory of operation
-------------------
A group remembers the last ID it delivered (``last_id``) and how many entries that is in the
stream's history (``entries_read``, -1 when unknown). Every entry delivered without NOACK stays
*pending* until acknowledged: the group PEL maps the entry's ID to a NACK, the delivery time,
the delivery count and the owning consumer, and the owner's own PEL lists the same ID. The
group PEL is therefore always the disjoint union of the consumer PELs (``check_invariants``).

Since Redis 8.8 an entry can also be pending for *nobody*: XNACK releases it (owner None,
delivery time 0) into the group's NACK zone, ``nacked``, a dict used as an ordered set that
keeps the order of nacking (oldest first). XREADGROUP … CLAIM serves the zone first, in that
order, before the owned entries; a claim or a ``>`` redelivery takes the entry out again. The
group PEL is then the disjoint union of the consumer PELs and the zone.

IDs are keyed as one integer, ``ms * KEY_BASE + seq``, which orders like the ``(ms, seq)``
tuple since every seq is below ``KEY_BASE``. ``KEY_BASE`` is not ``1 << 64``: Python hashes an
int modulo 2**61 - 1, where ``1 << 64`` is 8, so ``ms << 64 | seq`` hashed to ``8*ms + seq``
and the IDs of a busy stream (many per millisecond) shared a few thousand hash values: 400k
such keys took 1.8 µs per dict insert instead of 0.12. ``KEY_BASE`` is congruent to a large
odd multiplier instead, which spreads neighbouring milliseconds over the whole hash space.
The group PEL is a dict from key to NACK plus ``order``, the same keys sorted; each consumer's
PEL is a sorted set of keys (``SortedKeys``: appends of increasing keys are a list extend,
other changes O(log n)). XPENDING, XAUTOCLAIM and history reads walk them in ID order. A NACK
is a tuple of ints and the owner's name, which the garbage collector stops tracking, so a
million pending entries add no GC work.

Times are absolute milliseconds from the caller (the engine's command clock); nothing here
reads a clock. The entries-read and lag arithmetic follows STREAMS-REFERENCE §5.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from headwater.errors import require
from headwater.stream.ids import MIN_ID, StreamID, format_id
from headwater.stream.sortedkeys import SortedKeys
from headwater.stream.stream import Stream

#: entries_read when the group's position in the history is unknown (Redis: SCG_INVALID...)
UNKNOWN = -1
#: above every sequence number; congruent to 0x9E3779B97F4A7C1 modulo 2**61 - 1 (see above)
KEY_BASE = (1 << 64) + 0x9E3779B97F4A7C1 - 8

#: delivery counts saturate here (Redis: LLONG_MAX)
MAX_COUNT = (1 << 63) - 1

#: (delivery time ms, delivery count, owner name; None when nacked: in the NACK zone)
Nack = tuple[int, int, bytes | None]


def idle_consumer(pending: int, seen_ms: int, now_ms: int, idle_ms: int) -> bool:
    """The seed's reclamation rule (``stream-consumer-idle-reclaim-ms``; Redis keeps consumers
    for ever): a consumer with nothing pending, not seen for idle_ms, may be dropped. Plain
    groups and a region's local consumers both ask it."""
    return not pending and now_ms - seen_ms >= idle_ms


def id_key(sid: StreamID) -> int:
    return sid[0] * KEY_BASE + sid[1]


def key_id(key: int) -> StreamID:
    ms, seq = divmod(key, KEY_BASE)
    return (ms, seq)


def claimed_count(
    count: int | None,
    idle_ms: int | None,
    min_idle: int,
    force: bool,
    retrycount: int | None,
    justid: bool,
) -> int | None:
    """XCLAIM's and XAUTOCLAIM's rule for one entry of the stream, on plain and region
    streams and in replay: the delivery count it has once claimed, or None when it is not
    claimed. ``count`` is its count (None: not pending, which only FORCE claims, as a new
    NACK with count 1), ``idle_ms`` how long its owner has had it (None: nobody owns it, a
    nacked entry, claimable whatever min-idle says). RETRYCOUNT sets the count; else a claim
    counts as a delivery, except with JUSTID."""
    if count is None:
        if not force:
            return None
        count = 1
    elif idle_ms is not None and min_idle and idle_ms < min_idle:
        return None
    if retrycount is not None:
        return retrycount
    return count if justid else bumped(count)


def claim_time(time_ms: int | None, now_ms: int) -> int:
    """The delivery time a claim gives (XCLAIM's IDLE/TIME, an effect's TIME): now, unless
    one in [0, now] was asked for."""
    return time_ms if time_ms is not None and 0 <= time_ms <= now_ms else now_ms


def bumped(count: int) -> int:
    """One more delivery, saturating at MAX_COUNT."""
    return count + 1 if count < MAX_COUNT else MAX_COUNT


def nack_commands(
    key: bytes, group: bytes, items: list[tuple[int, int]], limit: int = 64
) -> list[list[bytes]]:
    """``XNACK key group FAIL IDS n id… RETRYCOUNT c FORCE`` commands that put these
    (pending key, count) entries at the tail of the NACK zone in this order whatever the
    group held before (FORCE creates missing ones): consecutive entries sharing a count go in
    one command of at most limit IDs. They are XNACK's effects and the AOF rewrite of a zone."""
    batches: list[tuple[int, list[bytes]]] = []
    for pel_key, count in items:
        if not batches or batches[-1][0] != count or len(batches[-1][1]) >= limit:
            batches.append((count, []))
        batches[-1][1].append(format_id(key_id(pel_key)))
    commands: list[list[bytes]] = []
    for count, ids in batches:
        head = [b"XNACK", key, group, b"FAIL", b"IDS", b"%d" % len(ids)]
        commands.append([*head, *ids, b"RETRYCOUNT", b"%d" % count, b"FORCE"])
    return commands


class Consumer:
    __slots__ = ("active_time", "name", "pel", "seen_time")

    def __init__(self, name: bytes, now_ms: int) -> None:
        self.name = name
        self.pel = SortedKeys()
        self.seen_time = now_ms  # last attempt to read or claim
        self.active_time = -1  # last successful delivery or claim (-1: never)

    def copy(self) -> Consumer:
        twin = Consumer(self.name, self.seen_time)
        twin.pel = self.pel.copy()
        twin.active_time = self.active_time
        return twin


class Group:
    __slots__ = (
        "consumers",
        "entries_read",
        "last_id",
        "nacked",
        "name",
        "order",
        "pel",
        "reclaim_checked_ms",
    )

    def __init__(self, name: bytes, last_id: StreamID, entries_read: int = UNKNOWN) -> None:
        self.name = name
        self.last_id = last_id
        self.entries_read = entries_read
        self.pel: dict[int, Nack] = {}
        self.order = SortedKeys()  # the keys of pel, sorted
        self.consumers: dict[bytes, Consumer] = {}
        self.nacked: dict[int, None] = {}  # the NACK zone: unowned keys, oldest nack first
        self.reclaim_checked_ms = 0  # last look for idle consumers (when reclaiming is on)

    def copy(self) -> Group:
        """An independent twin: PEL, NACK zone and consumers with their times (COPY of a
        stream; NACK tuples are immutable and shared)."""
        twin = Group(self.name, self.last_id, self.entries_read)
        twin.pel = dict(self.pel)
        twin.order = self.order.copy()
        twin.consumers = {name: consumer.copy() for name, consumer in self.consumers.items()}
        twin.nacked = dict(self.nacked)
        twin.reclaim_checked_ms = self.reclaim_checked_ms
        return twin

    # -- consumers -------------------------------------------------------------------------

    def consumer(self, name: bytes, now_ms: int) -> tuple[Consumer, bool]:
        """The named consumer, created if missing; and whether it was created."""
        consumer = self.consumers.get(name)
        if consumer is not None:
            return consumer, False
        consumer = self.consumers[name] = Consumer(name, now_ms)
        return consumer, True

    def delete_consumer(self, name: bytes) -> int | None:
        """Remove a consumer and its pending entries (not the nacked ones, which nobody owns);
        their count, None if no such consumer."""
        consumer = self.consumers.pop(name, None)
        if consumer is None:
            return None
        for key in consumer.pel:
            del self.pel[key]
            self.order.remove(key)
        return len(consumer.pel)

    def idle_consumers(self, now_ms: int, idle_ms: int, keep: bytes | None = None) -> list[bytes]:
        """Consumers with nothing pending that have not been seen for idle_ms (the seed's
        reclamation of idle consumers; Redis keeps them forever)."""
        return [
            name
            for name, consumer in self.consumers.items()
            if idle_consumer(len(consumer.pel), consumer.seen_time, now_ms, idle_ms)
            and name != keep
        ]

    # -- the PEL ---------------------------------------------------------------------------

    def deliver(self, consumer: Consumer, keys: list[int], now_ms: int) -> None:
        """New deliveries (``>``) of keys in increasing order: pending for consumer with count
        1. A key already pending (the group was moved back by SETID) changes owner and starts
        counting again."""
        pel = self.pel
        if not pel or keys[0] > self.order.last():
            # the usual case: all new, past everything pending; they share one NACK tuple
            pel.update(dict.fromkeys(keys, (now_ms, 1, consumer.name)))
            self.order.extend(keys)
            consumer.pel.extend(keys)
            return
        fresh: list[int] = []
        for key in keys:
            previous = pel.get(key)
            if previous is None:
                fresh.append(key)
            else:
                self._disown(key, previous[2], consumer.name)
            pel[key] = (now_ms, 1, consumer.name)
        self.order.extend(fresh)
        consumer.pel.extend(keys)

    def _disown(self, key: int, owner: bytes | None, new_owner: bytes) -> None:
        """Take a pending key from its owner's PEL (or the zone) for new_owner; keeps it
        where it is when the owner does not change."""
        if owner is None:
            del self.nacked[key]
        elif owner != new_owner:
            self.consumers[owner].pel.remove(key)

    def redeliver(self, key: int, now_ms: int) -> None:
        """A history read served the entry again."""
        _, count, owner = self.pel[key]
        self.pel[key] = (now_ms, bumped(count), owner)

    def transfer(self, key: int, consumer: Consumer, delivery_ms: int, count: int) -> None:
        """Make a pending (or new, for FORCE) entry consumer's, with these time and count."""
        previous = self.pel.get(key)
        if previous is None:
            self.order.add(key)
            consumer.pel.add(key)
        elif previous[2] != consumer.name:
            self._disown(key, previous[2], consumer.name)
            consumer.pel.add(key)
        self.pel[key] = (delivery_ms, count, consumer.name)

    def release(self, key: int, count: int) -> None:
        """XNACK: the entry (pending, or new for FORCE) belongs to nobody, with delivery time
        0 and this count, at the tail of the NACK zone (a nacked one moves there again)."""
        previous = self.pel.get(key)
        if previous is None:
            self.order.add(key)
        elif previous[2] is None:
            del self.nacked[key]
        else:
            self.consumers[previous[2]].pel.remove(key)
        self.nacked[key] = None
        self.pel[key] = (0, count, None)

    def ack(self, key: int) -> bool:
        nack = self.pel.pop(key, None)
        if nack is None:
            return False
        self.order.remove(key)
        owner = nack[2]
        if owner is None:
            del self.nacked[key]
        else:
            self.consumers[owner].pel.remove(key)
        return True

    def claim_order(self) -> Iterator[int]:
        """Pending keys in the order XREADGROUP … CLAIM considers them: the NACK zone first
        (oldest nack first), then the owned entries by delivery time (then ID), sorted only
        if the zone did not satisfy the caller. Nothing may change the PEL while iterating."""
        yield from self.nacked
        owned = sorted((nack[0], key) for key, nack in self.pel.items() if nack[2] is not None)
        for _, key in owned:
            yield key

    def pending_keys(
        self, start: StreamID, end: StreamID, consumer: Consumer | None = None
    ) -> Iterator[int]:
        """IDs (as keys) pending with start <= ID <= end, ascending, from the group PEL or one
        consumer's. Nothing may change the PEL while iterating."""
        if start > end:
            return iter(())
        keys = self.order if consumer is None else consumer.pel
        return keys.irange(id_key(start), id_key(end))

    def is_referenced(self, sid: StreamID) -> bool:
        """Whether the group still needs the entry: not yet delivered, or pending (ACKED)."""
        return sid > self.last_id or id_key(sid) in self.pel

    # -- introspection ---------------------------------------------------------------------

    def check_invariants(self) -> None:
        union: set[int] = set()
        for name, consumer in self.consumers.items():
            require(consumer.name == name, "consumer filed under another name")
            consumer.pel.check_invariants()
            keys = set(consumer.pel)
            require(not keys & union, "an ID pending for two consumers")
            union |= keys
            for key in keys:
                nack = self.pel.get(key)
                require(nack is not None, "consumer PEL entry missing from the group PEL")
                require(nack is None or nack[2] == name, "consumer PEL entry owned by another")
        zone = set(self.nacked)
        require(not zone & union, "a nacked ID is also in a consumer PEL")
        unowned = {key for key, nack in self.pel.items() if nack[2] is None}
        require(zone == unowned, "NACK zone is not exactly the unowned PEL entries")
        require(union | zone == set(self.pel), "group PEL is not consumer PELs + NACK zone")
        require(list(self.order) == sorted(self.pel), "order is not the sorted PEL keys")
        self.order.check_invariants()
        for key, (delivery_ms, count, owner) in self.pel.items():
            if owner is None:
                require(delivery_ms == 0, f"nacked entry {key_id(key)} has a delivery time")
            else:
                require(owner in self.consumers, "PEL entry owned by a missing consumer")
            require(0 <= count <= MAX_COUNT, "delivery count out of range")
            require(delivery_ms >= 0, "negative delivery time")
        require(self.entries_read >= UNKNOWN, "entries_read below -1")


# ---------------------------------------------------------------------------------------------
# entries-read and lag (STREAMS-REFERENCE §5)


def _tombstone_at_or_after(stream: Stream, sid: StreamID) -> bool:
    """Whether XDEL may have removed an entry at or after sid (the count from sid on is then
    unknown)."""
    return bool(stream.length) and stream.max_deleted_id != MIN_ID and sid <= stream.max_deleted_id


def estimate_entries_read(stream: Stream, sid: StreamID) -> int:
    """How many entries of the stream's history lie at or before sid, or UNKNOWN."""
    added, length = stream.entries_added, stream.length
    if added == 0:
        return 0
    if length == 0 and sid <= stream.last_id:
        return added
    if sid != MIN_ID and sid < stream.max_deleted_id:
        return UNKNOWN
    if sid == stream.last_id:
        return added
    if sid > stream.last_id:
        return UNKNOWN
    first, max_deleted = stream.first_id, stream.max_deleted_id
    if max_deleted == MIN_ID or max_deleted < first:
        if sid < first:
            return added - length
        if sid == first:
            return added - length + 1
    return UNKNOWN


def advance(stream: Stream, group: Group, ids: list[StreamID]) -> None:
    """The group delivered these entries (increasing, all > its last_id): move it past them
    and count them. Once the count is known and no tombstone lies after the group's position,
    that stays true for the rest of the batch, so the rest is counted at once."""
    for n, sid in enumerate(ids):
        if (
            group.entries_read != UNKNOWN
            and group.last_id >= stream.first_id
            and not _tombstone_at_or_after(stream, group.last_id)
        ):
            group.entries_read += len(ids) - n
            group.last_id = ids[-1]
            return
        if stream.entries_added:
            group.entries_read = estimate_entries_read(stream, sid)
        group.last_id = sid


def lag(stream: Stream, group: Group) -> int | None:
    """Entries not yet delivered to the group, None when it cannot be known."""
    if stream.entries_added == 0 or stream.length == 0:
        return 0
    first = stream.first_id
    if group.last_id < first and stream.max_deleted_id < first:
        return stream.length
    if group.entries_read != UNKNOWN and not _tombstone_at_or_after(stream, group.last_id):
        return stream.entries_added - group.entries_read
    estimate = estimate_entries_read(stream, group.last_id)
    return None if estimate == UNKNOWN else stream.entries_added - estimate


# ---------------------------------------------------------------------------------------------
# Reference strategies of XADD/XTRIM/XDELEX/XACKDEL: KEEPREF, DELREF, ACKED


def referenced(stream: Stream, sid: StreamID) -> bool:
    """Whether some group has not delivered the entry yet or has it pending (ACKED keeps
    such entries)."""
    return any(group.is_referenced(sid) for group in stream.groups.values())


def drop_references(stream: Stream, sid: StreamID) -> None:
    """Remove the entry from every group's PEL (DELREF)."""
    key = id_key(sid)
    for group in stream.groups.values():
        group.ack(key)


def trim_policy(
    stream: Stream, ref: bytes
) -> tuple[Callable[[StreamID], bool] | None, Callable[[StreamID], None] | None]:
    """The ``keep`` and ``on_remove`` callbacks of ``Stream.trim`` for a strategy."""
    if ref == b"ACKED":
        return (lambda sid: referenced(stream, sid)), None
    if ref == b"DELREF":
        return None, (lambda sid: drop_references(stream, sid))
    return None, None
