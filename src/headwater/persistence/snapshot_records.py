"""A snapshot's record readers (``snapshot.py`` describes the format and the load), compiled
by mypyc: a load of many small keys (250,000 of them in the import-rdb row of
``benchmarks/bench.py``) spends most of its time in these per-record reads, which compiled
are native calls on machine integers. Fields in runs (a set's members, a hash's fields and
values, a sorted set's members and scores) are split by one C call (``_blobs.c``) in the
compiled build, by a Python loop in the pure one.
"""

from __future__ import annotations

import importlib
import struct
import sys
from array import array
from collections.abc import Callable
from typing import cast

from headwater.errors import InvariantViolation, ReplyError
from headwater.keyspace import Database
from headwater.ops.hashttl import track_field_ttls
from headwater.stream.groups import Consumer, Group, id_key
from headwater.stream.idmp import IdmpState, Producer
from headwater.stream.node import Node
from headwater.stream.stream import Stream
from headwater.structures.lists import ListInvariantError, ListValue
from headwater.structures.lists import Node as ListNode
from headwater.structures.sets import (
    HASHTABLE,
    INTSET,
    LISTPACK,
    SetInvariantError,
    SetValue,
)
from headwater.structures.zsets import ZSetInvariantError, ZSetValue, ascending
from headwater.values import Hash, RawString

MAGIC = b"HWSNAP"
VERSION = 3
#: versions this code loads (1: nodes one by one, before the columnar layout; 2: no NACK zone)
LOADABLE = (1, 2, 3)
#: the owner index of a nacked (unowned) PEL entry
NOBODY = 0xFFFFFFFF
SELECT, STRING, HASH, STREAM, FUNCTIONS, END = 0x01, 0x02, 0x03, 0x04, 0x05, 0xFF
#: an active-active region's whole state (``activeactive.persist``), before the first SELECT;
#: its visible streams are not written again as keys
REGION = 0x06
#: a set: its encoding, then its members in their order
SET = 0x07
#: a sorted set: listpack or not, then (member, score as an IEEE double) in order
ZSET = 0x08
#: a hash with its encoding (HASH, older, had none)
HASH2 = 0x09
#: a list: listpack or not, its quicklist fill, then its nodes as they are in memory (each:
#: listpack size, the members back to back, their starts as little-endian 4-byte integers)
LIST = 0x0A
#: a hash with its encoding and its fields' deadlines (only for a hash that has field TTLs)
HASHTTL = 0x0B
_F64 = struct.Struct("<d")

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_ID = struct.Struct("<QQ")
_CHUNK = struct.Struct("<4Q")
_NODE_ROW = struct.Struct("<9Q")
#: a stream's three IDs and four counters
_COUNTERS = struct.Struct("<10Q")
#: arrays are kept in native byte order; the file is little-endian
_SWAP = sys.byteorder == "big"


def native_split() -> Callable[[memoryview, int, int, int, int], tuple[list[bytes], int]] | None:
    """The C splitter of ``bytes`` fields (``_blobs.c``), or None when it is not built (the
    pure build)."""
    try:
        module = importlib.import_module("headwater.persistence._blobs")
    except ImportError:
        return None
    return cast("Callable[[memoryview, int, int, int, int], tuple[list[bytes], int]]", module.split)


_SPLIT = native_split()


class SnapshotError(Exception):
    """The file is not a snapshot this version can load."""


#: bytes of a snapshot loaded between two progress reports
REPORT_STEP = 1 << 20


class _In:
    """Reads the file's records; ``wait_for`` (given while the file is still being read)
    blocks until the bytes up to an offset are there."""

    def __init__(
        self,
        data: bytes | memoryview,
        origin: str,
        pos: int = 0,
        wait_for: Callable[[int], int] | None = None,
    ) -> None:
        self.data = memoryview(data)
        self.pos = pos
        self.origin = origin
        self.version = VERSION  # of the file, for the parts whose layout changed
        self.wait_for = wait_for
        #: bytes known to be there
        self.ready = len(self.data) if wait_for is None else 0
        #: told the offset reached, once past ``next_report`` (the loader's progress)
        self.on_progress: Callable[[int], None] | None = None
        self.next_report = 1 << 62

    def report(self) -> None:
        """The load got past ``next_report``: say where it is; the next report is a step on."""
        self.next_report = self.pos + REPORT_STEP
        if self.on_progress is not None:
            self.on_progress(self.pos)

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if end > self.ready:
            if end <= len(self.data) and self.wait_for is not None:
                self.ready = min(self.wait_for(end), len(self.data))
            if end > self.ready:  # (wait_for stops short when the bytes end before ``end``)
                raise SnapshotError(f"{self.origin}: truncated at offset {self.pos}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    # The readers below take the bytes in place while they are there (most of a load of
    # small keys is these calls: no memoryview slice each), else through ``take``.

    def u8(self) -> int:
        pos = self.pos
        if pos < self.ready:
            self.pos = pos + 1
            return int(self.data[pos])
        return int(self.take(1)[0])

    def u64(self) -> int:
        pos = self.pos
        if pos + 8 <= self.ready:
            self.pos = pos + 8
            return int(_U64.unpack_from(self.data, pos)[0])
        return int(_U64.unpack(self.take(8))[0])

    def i64(self) -> int:
        pos = self.pos
        if pos + 8 <= self.ready:
            self.pos = pos + 8
            return int(_I64.unpack_from(self.data, pos)[0])
        return int(_I64.unpack(self.take(8))[0])

    def sid(self) -> tuple[int, int]:
        ms, seq = _ID.unpack(self.take(16))
        return (ms, seq)

    def unpack(self, layout: struct.Struct) -> tuple[int, ...]:
        """Fixed-size fields in one call."""
        pos = self.pos
        if pos + layout.size <= self.ready:
            self.pos = pos + layout.size
            return layout.unpack_from(self.data, pos)
        return layout.unpack(self.take(layout.size))

    def blob(self) -> bytes:
        pos = self.pos
        if pos + 8 <= self.ready:
            (size,) = _U64.unpack_from(self.data, pos)
            end = pos + 8 + size
            if end <= self.ready:
                self.pos = end
                return bytes(self.data[pos + 8 : end])
        return bytes(self.take(self.u64()))

    def blobs(self, n: int, scored: bool = False) -> list[bytes]:
        """``n`` blobs in a row (as many as ``blob()`` calls would read), each followed by a
        f64 when ``scored`` (left in the list as its 8 bytes); in one C call while the bytes
        are there (``_blobs.c``, the compiled build), else one Python loop step each, and
        ``take`` when they are not yet, or never come."""
        tail = 8 if scored else 0
        if _SPLIT is not None:
            out, self.pos = _SPLIT(self.data, self.pos, n, self.ready, tail)
            got = len(out) >> 1 if scored else len(out)
            if got == n:
                return out
            n -= got
        else:
            out = []
        append = out.append
        data, pos, ready = self.data, self.pos, self.ready
        unpack = _U64.unpack_from
        for _ in range(n):
            if pos + 8 <= ready:
                (size,) = unpack(data, pos)
                end = pos + 8 + size
                if end + tail <= ready:
                    append(bytes(data[pos + 8 : end]))
                    if scored:
                        append(bytes(data[end : end + 8]))
                    pos = end + tail
                    continue
            self.pos = pos  # (the slow path: it waits for the bytes or raises)
            append(self.blob())
            if scored:
                append(bytes(self.take(8)))
            pos, ready = self.pos, self.ready
        self.pos = pos
        return out


def _load_records(
    inp: _In,
    dbs: list[Database],
    version: int,
    loaded: list[tuple[Database, bytes]],
    lazy: list[Node] | None,
    libraries: list[bytes],
) -> None:
    db: Database | None = None
    inp.version = version
    read_stream = _read_stream if version >= 2 else _read_stream_v1
    while True:
        kind = inp.u8()
        if kind == END:
            break
        if kind == SELECT:
            index = int(_U32.unpack(inp.take(4))[0])
            if index >= len(dbs):
                raise SnapshotError(f"{inp.origin}: database {index} does not exist here")
            db = dbs[index]
            continue
        if kind == FUNCTIONS:
            libraries.extend(inp.blob() for _ in range(inp.u64()))
            continue
        if kind == REGION:
            _load_region(inp, dbs, inp.blob())
            continue
        if db is None:
            raise SnapshotError(f"{inp.origin}: a key before any database")
        key = inp.blob()
        if kind == STREAM:
            expire = inp.i64()
            value: object = read_stream(inp, lazy)
        else:
            value, expire = _read_plain(inp, kind)
        db.data[key] = value
        loaded.append((db, key))
        if expire >= 0:
            db.set_expire(key, expire)
        if kind == HASHTTL:
            track_field_ttls(db, key, value)
        if inp.pos >= inp.next_report:
            inp.report()


def _load_region(inp: _In, dbs: list[Database], data: bytes) -> None:
    persisted = dbs[0].keyspace.persisted if dbs else None
    if persisted is None:
        raise SnapshotError(
            f"{inp.origin}: holds an active-active region's state: start the server with the "
            "same --region-id"
        )
    try:
        persisted.load_state(data)
    except (ReplyError, InvariantViolation) as exc:
        raise SnapshotError(f"{inp.origin}: active-active region state: {exc}") from None


def _read_plain(inp: _In, kind: int) -> tuple[object, int]:
    if kind == STRING:
        raw = inp.u8()
        value = inp.blob()
        return (RawString(value) if raw else value), inp.i64()
    if kind == HASHTTL:
        return _read_hash_ttl(inp), inp.i64()
    if kind in (HASH, HASH2):
        listpack = bool(inp.u8()) if kind == HASH2 else None
        h = Hash()
        words = inp.blobs(2 * inp.u64())
        h.update(zip(words[0::2], words[1::2], strict=True))
        if listpack is None:
            listpack = len(h) <= 512 and max(map(len, words), default=0) <= 64
        h.listpack = listpack
        return h, inp.i64()
    if kind == SET:
        return _read_set(inp), inp.i64()
    if kind == ZSET:
        return _read_zset(inp), inp.i64()
    if kind == LIST:
        return _read_list(inp), inp.i64()
    raise SnapshotError(f"{inp.origin}: unknown record type {kind} at offset {inp.pos - 1}")


def _read_hash_ttl(inp: _In) -> Hash:
    h = Hash()
    h.listpack = bool(inp.u8())
    ttls = h.field_ttls()
    for _ in range(inp.u64()):
        field = inp.blob()
        h[field] = inp.blob()
        when = inp.i64()
        if when >= 0:
            ttls.set(field, when)
    try:
        h.check_invariants()
    except InvariantViolation as exc:
        raise SnapshotError(f"{inp.origin}: {exc}") from None
    return h


def _read_zset(inp: _In) -> ZSetValue:
    z = ZSetValue(bool(inp.u8()))
    words = inp.blobs(inp.u64(), scored=True)
    scores = array("d", b"".join(words[1::2]))
    if _SWAP:
        scores.byteswap()
    members = words[0::2]
    try:
        # What a file can get wrong, checked on the columns: ``check_invariants`` would walk
        # the chunks that ``load_columns`` lays out from them by construction (a third of the
        # load of 50,000 small sorted sets), and pairs would be an object per element.
        if any(score != score for score in scores):
            raise ZSetInvariantError("a score that is not a number")
        if not ascending(scores, members):
            raise ZSetInvariantError("pairs out of order")
        z.load_columns(scores, members)
        if len(z.scores) != len(members):
            raise ZSetInvariantError("a member twice")
    except ZSetInvariantError as exc:
        raise SnapshotError(f"{inp.origin}: {exc}") from None
    return z


def _read_list(inp: _In) -> ListValue:
    lst = ListValue()
    lst.listpack = bool(inp.u8())
    lst.fill = inp.i64()
    count = 0
    for _ in range(inp.u64()):
        size = inp.u64()
        buf = inp.take(inp.u64())
        starts = inp.take(inp.u64())
        node = ListNode.packed(buf, starts, size)
        if _SWAP:
            node.starts.byteswap()
        lst.nodes.append(node)
        count += len(node.starts)
    lst.count = count
    try:
        for node in lst.nodes:  # (the cheap checks: a full check walks every member)
            if node.starts and (node.starts[0] != 0 or node.starts[-1] > len(node.buf)):
                raise ListInvariantError("a node's starts lie outside its members")
        if lst.listpack and len(lst.nodes) > 1:
            raise ListInvariantError("a listpack of several nodes")
    except ListInvariantError as exc:
        raise SnapshotError(f"{inp.origin}: {exc}") from None
    return lst


def _read_set(inp: _In) -> SetValue:
    encoding = inp.u8()
    if encoding not in (INTSET, LISTPACK, HASHTABLE):
        raise SnapshotError(f"{inp.origin}: unknown set encoding {encoding}")
    s = SetValue(encoding)
    s.members = dict.fromkeys(inp.blobs(inp.u64()))
    try:
        s.check_invariants()
    except SetInvariantError as exc:
        raise SnapshotError(f"{inp.origin}: {exc}") from None
    return s


def _read_counters(inp: _In) -> Stream:
    s = Stream()
    last_ms, last_seq, first_ms, first_seq, max_ms, max_seq, *counters = inp.unpack(_COUNTERS)
    s.last_id, s.first_id, s.max_deleted_id = (
        (last_ms, last_seq),
        (first_ms, first_seq),
        (max_ms, max_seq),
    )
    s.entries_added, s.length, s.idmp_duration, s.idmp_maxsize = counters
    return s


def _read_stream(inp: _In, lazy: list[Node] | None) -> Stream:
    """A version-2 stream; with ``lazy`` (a list the nodes are added to) its nodes keep their
    buffers in the file until used (``Node`` module doc)."""
    s = _read_counters(inp)
    fieldsets = []
    for _ in range(inp.u64()):
        fields = tuple(inp.blob() for _ in range(inp.u64()))
        fieldsets.append((fields, list(fields)))
    total = inp.u64()
    while len(s.nodes) < total:
        k, entries, blob_len, tomb_len = inp.unpack(_CHUNK)
        if not 0 < k <= total - len(s.nodes):
            raise SnapshotError(f"{inp.origin}: bad node chunk at offset {inp.pos}")
        rows = _NODE_ROW.iter_unpack(inp.take(k * _NODE_ROW.size))
        columns = (
            inp.take(entries * 8),  # ms
            inp.take(entries * 8),  # seq
            inp.take(entries * 4),  # offsets
            inp.take(blob_len),
            inp.take(tomb_len),
        )
        first = len(s.nodes)
        used = Node.restore_many(rows, fieldsets, columns, s.nodes, s.firsts, lazy is not None)
        if lazy is not None:
            lazy.extend(s.nodes[first:])
        if used != (entries, blob_len, tomb_len):
            raise SnapshotError(f"{inp.origin}: node chunk sizes disagree at offset {inp.pos}")
    _read_groups_and_idmp(inp, s)
    return s


def _read_stream_v1(inp: _In, lazy: list[Node] | None) -> Stream:
    s = _read_counters(inp)
    for _ in range(inp.u64()):
        master = inp.sid()
        node = Node(master, [inp.blob() for _ in range(inp.u64())])
        node.count, node.deleted, node.lp_bytes = inp.u64(), inp.u64(), inp.u64()
        for buf in (node.ms, node.seq, node.offsets):
            buf.frombytes(inp.take(inp.u64()))
        node.blob = bytearray(inp.take(inp.u64()))
        tomb = inp.blob()
        node.tomb = bytearray(tomb) if tomb else None
        s.nodes.append(node)
        s.firsts.append(master)
    _read_groups_and_idmp(inp, s)
    return s


def _read_groups_and_idmp(inp: _In, s: Stream) -> None:
    for _ in range(inp.u64()):
        group = _read_group(inp)
        s.groups[group.name] = group
    s.idmp = _read_idmp(inp)


def _read_group(inp: _In) -> Group:
    name = inp.blob()
    g = Group(name, inp.sid(), inp.i64())
    names: list[bytes] = []
    for _ in range(inp.u64()):
        consumer = Consumer(inp.blob(), inp.i64())
        consumer.active_time = inp.i64()
        g.consumers[consumer.name] = consumer
        names.append(consumer.name)
    n = inp.u64()
    arrays = [array(code) for code in ("Q", "Q", "q", "q", "I")]
    for buf in arrays:
        buf.frombytes(inp.take(inp.u64()))
        if len(buf) != n:
            raise SnapshotError(f"{inp.origin}: PEL of group {name!r} is inconsistent")
    ms, seq, times, counts, owners = arrays
    per_owner: dict[bytes | None, list[int]] = {}
    keys = []
    try:
        for i in range(n):
            key = id_key((ms[i], seq[i]))
            owner = None if owners[i] == NOBODY else names[owners[i]]
            g.pel[key] = (times[i], counts[i], owner)
            per_owner.setdefault(owner, []).append(key)
            keys.append(key)
    except IndexError:
        raise SnapshotError(f"{inp.origin}: PEL of group {name!r} names no consumer") from None
    g.order.extend(keys)
    unowned = len(per_owner.pop(None, ()))
    for owner, owned in per_owner.items():
        if owner is not None:
            g.consumers[owner].pel.extend(owned)
    if inp.version >= 3:
        _read_zone(inp, g, unowned)
    elif unowned:
        raise SnapshotError(f"{inp.origin}: PEL of group {name!r} names no consumer")
    return g


def _read_zone(inp: _In, g: Group, unowned: int) -> None:
    """The NACK zone in its order: exactly the PEL entries that have no owner."""
    n = inp.u64()
    zone_ms, zone_seq = array("Q"), array("Q")
    for buf in (zone_ms, zone_seq):
        buf.frombytes(inp.take(inp.u64()))
        if len(buf) != n:
            raise SnapshotError(f"{inp.origin}: NACK zone of group {g.name!r} is inconsistent")
    g.nacked = dict.fromkeys(id_key(sid) for sid in zip(zone_ms, zone_seq, strict=True))
    nobodys = all(k in g.pel and g.pel[k][2] is None for k in g.nacked)
    if len(g.nacked) != n or unowned != n or not nobodys:
        raise SnapshotError(f"{inp.origin}: NACK zone of group {g.name!r} is inconsistent")


def _read_idmp(inp: _In) -> IdmpState | None:
    if not inp.u8():
        return None
    state = IdmpState()
    state.added, state.duplicates = inp.u64(), inp.u64()
    for _ in range(inp.u64()):
        pid = inp.blob()
        producer = Producer()
        for _ in range(inp.u64()):
            iid = inp.blob()
            producer.add(iid, inp.sid())
        state.adopt(pid, producer)
    return state
