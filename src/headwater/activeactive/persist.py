"""A region's whole state as bytes, for snapshots (and the AOF's snapshot base).

A region's streams hold more than a keyspace shows: tombstones (records without entries or
groups, which keep IDs rising and delete-wins decidable), sub-logs, delete clocks, groups'
births and acknowledged prefixes, the local consumer-group state, and the vector of applied
sequences. ``dump_state`` writes all of it; ``load_state`` rebuilds a region that answers and
continues exactly as the saved one (its own sequence and each peer's resume point come from
the vector; effects waiting in the inbox are not saved: peers send them again).

Layout: ``HWAA4`` (``HWAA3``: without the part marked v4; ``HWAA2``: nor those marked v3;
``HWAA1``: nor those marked v2)
then a sequence of
words, each a u32 length and its bytes; integers are decimal words (sub-log numbers of
RENAME's moved sub-logs pass 2**64), IDs ``ms-seq``::

    region-id n (region seq)*n                      the vector
    n records: key floor
               n (origin seq)*n                     del_clock
               n (group n (origin seq)*n)*n         destroy_clock
               n sub-logs: sub last-id max-deleted-id entries-added n (id n field…)*n
               n groups: name n (origin seq)*n      births
                         n (sub id)*n               acked
                         n (sub id)*n               cursors
                         last-id entries-read
                         n (consumer seen active)*n
                         n (sub id consumer delivery count)*n   the PEL
                         n (sub id)*n               the NACK zone, oldest first (v2)
                         n (sub id)*n               where the group started (v3)
               IDMP: -1 | n (pid n (iid id)*n)*n added duplicates
               n (origin adjust)*n deleted-floor    XSETID's counters (v2)
               n (setting n (sum origin seq value)*n)*n   XCFGSET's registers (v2)
    n (db n records)*n                              the other databases (v2)
    n own effects: n words*n                        what peers may still need (AAEFFECT lines)
    n (origin n (region seq)*n)*n                   each origin's last vector (v4: what the
                                                    compact lines after it are read against)
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

from headwater.activeactive.envelope import Effect, from_line
from headwater.activeactive.region import Region
from headwater.activeactive.rstream import (
    NodeLimits,
    RegionGroup,
    RegionStream,
    Streams,
)
from headwater.errors import err
from headwater.stream.idmp import IdmpState, Producer
from headwater.stream.ids import MAX_ID, MIN_ID, StreamID, format_id, parse_id

MAGIC = b"HWAA4"
#: the layout without the origins' last vectors: still read (compact lines after it are read
#: against the applied vector: envelope.py)
MAGIC_V3 = b"HWAA3"
#: the layout without the groups' start cursors: still read (they start at their cursors)
MAGIC_V2 = b"HWAA2"
#: the first layout (no NACK zone, no XSETID counters, no IDMP settings): still read
MAGIC_V1 = b"HWAA1"
_LEN = struct.Struct("<I")
BAD_STATE = err("malformed active-active region state")


class _Words:
    def __init__(self) -> None:
        self.parts: list[bytes] = [MAGIC]

    def word(self, data: bytes) -> None:
        self.parts += [_LEN.pack(len(data)), data]

    def int(self, value: int) -> None:
        self.word(b"%d" % value)

    def sid(self, value: StreamID) -> None:
        self.word(format_id(value))


def dump_state(region: Region, own: Sequence[Effect] = ()) -> bytes:
    """The region's state, and ``own``: the region's own effects that peers may still need
    (a restarted region serves them from there)."""
    out = _Words()
    out.int(region.id)
    out.int(len(region.inbox.applied))
    for r, seq in sorted(region.inbox.applied.items()):
        out.int(r)
        out.int(seq)
    out.int(len(region.streams))
    for key, record in sorted(region.streams.items()):
        _dump_record(out, key, record)
    others = sorted((db, streams) for db, streams in region.dbs.items() if db and streams)
    out.int(len(others))  # (v2) the other databases' records
    for db, streams in others:
        out.int(db)
        out.int(len(streams))
        for key, record in sorted(streams.items()):
            _dump_record(out, key, record)
    out.int(len(own))
    for effect in own:
        line = effect.to_line()
        out.int(len(line))
        for word in line:
            out.word(word)
    out.int(len(region.inbox.vectors))  # (v4)
    for origin, vector in sorted(region.inbox.vectors.items()):
        out.int(origin)
        out.int(len(vector))
        for r, seq in vector:
            out.int(r)
            out.int(seq)
    return b"".join(out.parts)


def _clock(out: _Words, clock: dict[int, int]) -> None:
    out.int(len(clock))
    for origin, seq in sorted(clock.items()):
        out.int(origin)
        out.int(seq)


def _dump_record(out: _Words, key: bytes, record: RegionStream) -> None:
    out.word(key)
    out.sid(record.floor)
    _clock(out, record.del_clock)
    out.int(len(record.destroy_clock))
    for name, clock in sorted(record.destroy_clock.items()):
        out.word(name)
        _clock(out, clock)
    out.int(len(record.subs))
    for sub, stream in sorted(record.subs.items()):
        out.int(sub)
        out.sid(stream.last_id)
        out.sid(stream.max_deleted_id)
        out.int(stream.entries_added)
        out.int(stream.length)
        for sid, pairs in stream.range(MIN_ID, MAX_ID):
            out.sid(sid)
            out.int(len(pairs))
            for item in pairs:
                out.word(item)
    out.int(len(record.groups))
    for name in sorted(record.groups):
        _dump_group(out, name, record.groups[name])
    _dump_idmp(out, record.idmp)
    _clock(out, record.added_adjust)  # (v2) XSETID ENTRIESADDED / MAXDELETEDID, XCFGSET
    out.sid(record.deleted_floor)
    out.int(len(record.idmp_config))
    for name, values in sorted(record.idmp_config.items()):
        out.word(name)
        out.int(len(values))
        for (total, origin, seq), value in sorted(values):
            for number in (total, origin, seq, value):
                out.int(number)


def _dump_idmp(out: _Words, idmp: IdmpState | None) -> None:
    if idmp is None:
        out.int(-1)
        return
    out.int(len(idmp.producers))
    for pid, producer in idmp.producers.items():
        out.word(pid)
        out.int(len(producer))
        for iid, sid in producer.entries():
            out.word(iid)
            out.sid(sid)
    out.int(idmp.added)
    out.int(idmp.duplicates)


def _dump_group(out: _Words, name: bytes, g: RegionGroup) -> None:
    out.word(name)
    out.int(len(g.births))
    for origin, seq in sorted(g.births):
        out.int(origin)
        out.int(seq)
    for points in (g.acked, g.cursors):
        out.int(len(points))
        for sub, sid in sorted(points.items()):
            out.int(sub)
            out.sid(sid)
    out.sid(g.last_id)
    out.int(g.entries_read)
    names = sorted(set(g.consumers) | set(g.times))
    out.int(len(names))
    for consumer in names:
        seen, active = g.times.get(consumer, [0, -1])
        out.word(consumer)
        out.int(seen)
        out.int(active)
    out.int(len(g.order))
    for sid, sub in g.order:
        pending = g.pel[(sid, sub)]
        out.int(sub)
        out.sid(sid)
        out.word(pending.consumer or b"")
        out.int(pending.delivery_ms)
        out.int(pending.count)
    out.int(len(g.nacked))  # (v2) the NACK zone, oldest nack first
    for sid, sub in g.nacked:
        out.int(sub)
        out.sid(sid)
    out.int(len(g.start))  # (v3) where the group started
    for sub, sid in sorted(g.start.items()):
        out.int(sub)
        out.sid(sid)


class _Reader:
    def __init__(self, data: bytes) -> None:
        versions = {MAGIC: 4, MAGIC_V3: 3, MAGIC_V2: 2, MAGIC_V1: 1}
        self.version = versions.get(data[: len(MAGIC)], 0)
        if not self.version:
            raise BAD_STATE
        self.data = memoryview(data)
        self.pos = len(MAGIC)

    def word(self) -> bytes:
        if self.pos + 4 > len(self.data):
            raise BAD_STATE
        (size,) = _LEN.unpack_from(self.data, self.pos)
        end = self.pos + 4 + size
        if end > len(self.data):
            raise BAD_STATE
        word = bytes(self.data[self.pos + 4 : end])
        self.pos = end
        return word

    def int(self) -> int:
        word = self.word()
        digits = word[1:] if word[:1] == b"-" else word
        if not digits.isdigit():
            raise BAD_STATE
        return int(word)

    def sid(self) -> StreamID:
        return parse_id(self.word())

    def times(self) -> Iterator[None]:
        for _ in range(self.int()):
            yield None

    def done(self) -> bool:
        return self.pos == len(self.data)


def load_state(region: Region, data: bytes) -> list[Effect]:
    """Replace the region's streams and vector with the saved ones; the own effects saved
    with them. Raises BAD_STATE (or refuses another region's state)."""
    inp = _Reader(data)
    saved = inp.int()
    if saved != region.id:
        raise err(f"the saved active-active state is region {saved}'s, this is region {region.id}")
    applied = {}
    for _ in inp.times():
        r = inp.int()
        applied[r] = inp.int()
    limits = region.streams.limits
    streams = {}
    for _ in inp.times():
        key = inp.word()
        streams[key] = _load_record(inp, limits)
    others: dict[int, Streams] = {}
    for _ in inp.times() if inp.version >= 2 else ():
        db = inp.int()
        if db <= 0 or db in others:
            raise BAD_STATE
        others[db] = Streams()
        others[db].limits = limits
        for _ in inp.times():
            key = inp.word()
            others[db][key] = _load_record(inp, limits)
    own = []
    for _ in inp.times():
        effect = from_line([inp.word() for _ in inp.times()])
        if effect.origin != saved or effect.seq > applied.get(saved, 0):
            raise BAD_STATE
        own.append(effect)
    vectors = {}
    for _ in inp.times() if inp.version >= 4 else ():
        origin = inp.int()
        vectors[origin] = tuple((inp.int(), inp.int()) for _ in inp.times())
        if (origin, applied.get(origin, 0)) not in vectors[origin]:
            raise BAD_STATE
    if not inp.done():
        raise BAD_STATE
    region.streams.clear()
    region.streams.update(streams)
    region.dbs.clear()
    region.dbs[0] = region.streams
    region.dbs.update(others)
    region.selected, region.current = 0, region.streams
    region.inbox.applied.clear()
    region.inbox.applied.update(applied)
    region.inbox.applied.setdefault(region.id, 0)
    region.inbox.waiting.clear()
    region.inbox.waiting.update({r: {} for r in region.inbox.applied})
    region.inbox.vectors = vectors
    region.outbox.clear()
    return own


def _read_clock(inp: _Reader) -> dict[int, int]:
    clock = {}
    for _ in inp.times():
        origin = inp.int()
        clock[origin] = inp.int()
    return clock


def _load_record(inp: _Reader, limits: NodeLimits) -> RegionStream:
    record = RegionStream(limits)
    record.floor = inp.sid()
    record.del_clock = _read_clock(inp)
    for _ in inp.times():
        group = inp.word()
        record.destroy_clock[group] = _read_clock(inp)
    for _ in inp.times():
        sub = inp.int()
        stream = record.sub(sub)
        last_id, max_deleted, added = inp.sid(), inp.sid(), inp.int()
        for _ in inp.times():
            sid = inp.sid()
            pairs = [inp.word() for _ in inp.times()]
            stream.append(sid, pairs, limits.max_bytes, limits.max_entries)
        stream.last_id, stream.max_deleted_id, stream.entries_added = last_id, max_deleted, added
    for _ in inp.times():
        name = inp.word()
        record.groups[name] = _load_group(inp, name)
    record.idmp = _load_idmp(inp)
    if inp.version >= 2:
        record.added_adjust = _read_clock(inp)
        record.deleted_floor = inp.sid()
        for _ in inp.times():
            name = inp.word()
            values = record.idmp_config[name] = []
            for _ in inp.times():
                total, origin, seq, value = inp.int(), inp.int(), inp.int(), inp.int()
                values.append(((total, origin, seq), value))
    return record


def _load_idmp(inp: _Reader) -> IdmpState | None:
    producers = inp.int()
    if producers < 0:
        return None
    idmp = IdmpState()
    for _ in range(producers):
        pid = inp.word()
        producer = Producer()
        for _ in inp.times():
            iid = inp.word()
            producer.add(iid, inp.sid())
        idmp.adopt(pid, producer)
    idmp.added, idmp.duplicates = inp.int(), inp.int()
    return idmp


def _load_group(inp: _Reader, name: bytes) -> RegionGroup:
    g = RegionGroup(name)
    for _ in inp.times():
        origin = inp.int()
        g.births.add((origin, inp.int()))
    for points in (g.acked, g.cursors):
        for _ in inp.times():
            sub = inp.int()
            points[sub] = inp.sid()
    g.last_id, g.entries_read = inp.sid(), inp.int()
    for _ in inp.times():
        consumer = inp.word()
        seen, active = inp.int(), inp.int()
        g.consumer(consumer)
        g.times[consumer] = [seen, active]
    pel = []
    for _ in inp.times():
        sub = inp.int()
        sid = inp.sid()
        consumer = inp.word()
        delivery_ms, count = inp.int(), inp.int()
        pel.append(((sid, sub), consumer, delivery_ms, count))
    zone: list[tuple[StreamID, int]] = []
    if inp.version >= 2:
        for _ in inp.times():
            sub = inp.int()
            zone.append((inp.sid(), sub))
    if inp.version >= 3:
        for _ in inp.times():
            sub = inp.int()
            g.start[sub] = inp.sid()
    else:
        g.start = dict(g.cursors)
    nacked = set(zone)
    counts = {}
    for tag, consumer, delivery_ms, count in pel:
        if tag in nacked:
            counts[tag] = count
        else:
            g.claim(tag, consumer, delivery_ms, count)
    for tag in zone:
        if tag not in counts:
            raise BAD_STATE
        g.release(tag, counts[tag])
    g.touched.clear()
    g.touched_consumers.clear()
    return g


def saved_region(data: bytes) -> int:
    """The region whose state ``data`` is."""
    return _Reader(data).int()


def check_state(data: bytes) -> Region:
    """Load saved state into a fresh region and check its invariants (check-snapshot)."""
    region = Region(saved_region(data), [])
    load_state(region, data)
    region.check_invariants()
    return region
