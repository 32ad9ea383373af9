"""Snapshots: the whole keyspace in one versioned, checksummed binary file.

Layout (all integers little-endian)::

    "HWSNAP" u16 version
    records...                        one byte of record type, then its fields
    0xFF u32 crc32                    of every byte before the checksum

    0x01 SELECT    u32 db
    0x02 STRING    bytes key, u8 raw, bytes value, i64 expire (-1: none)
    0x03 HASH      bytes key, u64 n, n * (bytes field, bytes value), i64 expire
    0x04 STREAM    bytes key, i64 expire, the stream (below)

``bytes`` is a u64 length then the bytes. A stream (version 2 and 3) is::

    3 * (u64 ms, u64 seq)             last_id, first_id, max_deleted_id
    4 * u64                           entries_added, length, idmp_duration, idmp_maxsize
    u64 F, F * (u64 n, n * bytes)     the distinct master field lists ("fieldsets")
    u64 N                             nodes, then chunks of CHUNK_NODES (256) until N:
      u64 k, u64 E, u64 B, u64 T      nodes in the chunk; their entries, blob and tomb bytes
      k * 9 u64                       per node: master ms, master seq, fieldset, count,
                                      deleted, lp_bytes, entries, blob bytes, tomb bytes
      E * u64 | E * u64 | E * u32     the nodes' ms, seq and offsets arrays, back to back
      B bytes | T bytes               the nodes' blobs, then their tombstones (T: none)
    the groups (PEL as parallel arrays) and the IDMP maps

A group is its name, last ID, entries-read, its consumers (name, seen and active times), then
the PEL as five ``bytes`` arrays (ms u64, seq u64, delivery time i64, count i64, owner u32:
the consumer's index, or ``NOBODY`` for a nacked entry), and since version 3 the NACK zone
in its order as two arrays (ms u64, seq u64).

Theory of operation: the nodes are written *as they are in memory*, so loading costs a few
C-level operations per node and nothing per entry. A chunk's node table is read with one
``struct.iter_unpack`` and each node takes its share of the chunk's columns with one copy per
column (``Node.restore_many``). The file is memory-mapped and its CRC-32 (zlib, C speed) is
computed by a thread while the nodes are built: ``zlib.crc32`` releases the GIL, so on a
second core the check costs little load time.

Lazy loading (what the server does): copying ~200 MB of columns into fresh memory is most of
a 5M-entry load (page faults), so with a ``lazy`` list the nodes are built without their
buffers, which stay in the mapping until a command first reads them (``Node`` module doc); the
server's cron copies the rest with ``materialize_some`` (~5% of a core: a few seconds for 5M
entries), after which the mapping is released. The checksum is still verified before the load
returns. The mapped file is never written in place (snapshots are renamed into place), so a
mapping stays valid even after a rewrite replaces or deletes the file. Loading
goes into empty databases; if the checksum or the structure turns out wrong, the keys loaded so
far are removed again and ``SnapshotError`` says why. The garbage collector is off during the
load, and the first load of a process freezes what it built (``load_snapshot``). A version
this code does not know is refused; version 1 (node by node, fields per node) and version 2
(no NACK zone: written before XNACK, when every pending entry had an owner) still load.

Why no compression: a 5,000,000-entry stream of 16-byte values is ~210 MB (Redis's RDB: 28 MB,
LZF). zlib inflates ~0.6 GB/s on the project's machines, so inflating it alone would take
~0.35 s, more than building its nodes from the page cache (~0.2 s), and the standard library has
nothing faster. Loading speed matters more than size here; a version 3 could add a fast codec
(LZ4) as an optional dependency.
"""

from __future__ import annotations

import gc
import mmap
import os
import struct
import sys
import threading
import time
import zlib
from array import array
from pathlib import Path
from typing import BinaryIO

from headwater.keyspace import Database, Hash, Keyspace, RawString
from headwater.persistence.manifest import fsync_dir
from headwater.stream.groups import Consumer, Group, id_key, key_id
from headwater.stream.idmp import IdmpState, Producer
from headwater.stream.node import Node
from headwater.stream.stream import Stream

MAGIC = b"HWSNAP"
VERSION = 3
#: versions this code loads (1: nodes one by one, before the columnar layout; 2: no NACK zone)
LOADABLE = (1, 2, 3)
#: the owner index of a nacked (unowned) PEL entry
NOBODY = 0xFFFFFFFF
SELECT, STRING, HASH, STREAM, END = 0x01, 0x02, 0x03, 0x04, 0xFF

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_ID = struct.Struct("<QQ")
_CHUNK = struct.Struct("<4Q")
_NODE_ROW = struct.Struct("<9Q")
#: nodes per chunk: small column buffers (~1 MB) are reused by malloc instead of faulted in anew
CHUNK_NODES = 256
#: files at least this big are checksummed by a thread while they load
THREADED_CRC_BYTES = 4 << 20
#: arrays are kept in native byte order; the file is little-endian
_SWAP = sys.byteorder == "big"


class SnapshotError(Exception):
    """The file is not a snapshot this version can load."""


# ---------------------------------------------------------------------------------------------
# Writing


class _Out:
    """A checksumming writer that hands the file large chunks."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.buf = bytearray()
        self.crc = 0

    def put(self, data: bytes | bytearray | memoryview | array[int]) -> None:
        self.buf += data
        if len(self.buf) >= 1 << 20:
            self.drain()

    def drain(self) -> None:
        self.crc = zlib.crc32(self.buf, self.crc)
        self.f.write(self.buf)
        self.buf.clear()

    def blob(self, data: bytes | bytearray) -> None:
        self.put(_U64.pack(len(data)))
        self.put(data)

    def u64(self, value: int) -> None:
        self.put(_U64.pack(value))

    def i64(self, value: int) -> None:
        self.put(_I64.pack(value))

    def sid(self, value: tuple[int, int]) -> None:
        self.put(_ID.pack(*value))


def write_snapshot(path: Path, dbs: list[Database]) -> None:
    """Write durably: a temporary file, fsync, rename, fsync of the directory."""
    tmp = path.with_name(f"temp-{os.getpid()}-{path.name}")
    with open(tmp, "wb") as f:
        out = _Out(f)
        out.put(MAGIC + _U16.pack(VERSION))
        for db in dbs:
            if db.data:
                out.put(_U8.pack(SELECT) + _U32.pack(db.index))
                for key, value in db.data.items():
                    _write_value(out, key, value, db.expires.get(key, -1))
        out.put(_U8.pack(END))
        out.drain()
        f.write(_U32.pack(out.crc))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def _write_value(out: _Out, key: bytes, value: object, expire: int) -> None:
    if isinstance(value, Stream):
        out.put(_U8.pack(STREAM))
        out.blob(key)
        out.i64(expire)
        _write_stream(out, value)
    elif isinstance(value, Hash):
        out.put(_U8.pack(HASH))
        out.blob(key)
        out.u64(len(value))
        for field, item in value.items():
            out.blob(field)
            out.blob(item)
        out.i64(expire)
    elif isinstance(value, bytes):
        out.put(_U8.pack(STRING))
        out.blob(key)
        out.put(_U8.pack(isinstance(value, RawString)))
        out.blob(value)
        out.i64(expire)
    else:
        raise TypeError(f"cannot snapshot a {type(value).__name__}")


def _write_stream(out: _Out, s: Stream) -> None:
    for sid in (s.last_id, s.first_id, s.max_deleted_id):
        out.sid(sid)
    for n in (s.entries_added, s.length, s.idmp_duration, s.idmp_maxsize):
        out.u64(n)
    fieldsets: dict[tuple[bytes, ...], int] = {}
    index = [fieldsets.setdefault(node.fields, len(fieldsets)) for node in s.nodes]
    out.u64(len(fieldsets))
    for fields in fieldsets:
        out.u64(len(fields))
        for name in fields:
            out.blob(name)
    out.u64(len(s.nodes))
    for start in range(0, len(s.nodes), CHUNK_NODES):
        _write_chunk(out, s.nodes[start : start + CHUNK_NODES], index[start:])
    out.u64(len(s.groups))
    for group in s.groups.values():
        _write_group(out, group)
    _write_idmp(out, s.idmp)


def _write_chunk(out: _Out, nodes: list[Node], fieldsets: list[int]) -> None:
    rows = bytearray()
    entries = blob = tomb = 0
    for node, fieldset in zip(nodes, fieldsets, strict=False):
        n, tlen = len(node.ms), len(node.tomb) if node.tomb is not None else 0
        master_ms, master_seq = node.master
        rows += _NODE_ROW.pack(
            master_ms, master_seq, fieldset, node.count, node.deleted, node.lp_bytes,
            n, len(node.blob), tlen,
        )  # fmt: skip
        entries += n
        blob += len(node.blob)
        tomb += tlen
    out.put(_CHUNK.pack(len(nodes), entries, blob, tomb))
    out.put(rows)
    for column in ("ms", "seq", "offsets"):
        for node in nodes:
            out.put(_little_endian(getattr(node, column)))
    for node in nodes:
        out.put(node.blob)
    for node in nodes:
        if node.tomb is not None:
            out.put(node.tomb)


def _little_endian(values: array[int]) -> array[int] | bytes:
    if not _SWAP:
        return values
    swapped = array(values.typecode, values)
    swapped.byteswap()
    return swapped


def _write_group(out: _Out, g: Group, version: int = VERSION) -> None:
    """The group as this version lays it out (tests write older versions to load them)."""
    out.blob(g.name)
    out.sid(g.last_id)
    out.i64(g.entries_read)
    names = list(g.consumers)
    index = {name: i for i, name in enumerate(names)}
    out.u64(len(names))
    for name in names:
        consumer = g.consumers[name]
        out.blob(name)
        out.i64(consumer.seen_time)
        out.i64(consumer.active_time)
    ms, seq, times, counts, owners = (array("Q"), array("Q"), array("q"), array("q"), array("I"))
    for key in g.order:
        delivery_ms, count, owner = g.pel[key]
        sid = key_id(key)
        ms.append(sid[0])
        seq.append(sid[1])
        times.append(delivery_ms)
        counts.append(min(count, 2**63 - 1))
        owners.append(NOBODY if owner is None else index[owner])
    out.u64(len(ms))
    for buf in (ms, seq, times, counts, owners):
        out.blob(buf.tobytes())
    if version < 3:
        return
    zone_ms, zone_seq = array("Q"), array("Q")
    for key in g.nacked:
        sid = key_id(key)
        zone_ms.append(sid[0])
        zone_seq.append(sid[1])
    out.u64(len(zone_ms))
    out.blob(zone_ms.tobytes())
    out.blob(zone_seq.tobytes())


def _write_idmp(out: _Out, idmp: IdmpState | None) -> None:
    if idmp is None:
        out.put(_U8.pack(0))
        return
    out.put(_U8.pack(1))
    for n in (idmp.added, idmp.duplicates, len(idmp.producers)):
        out.u64(n)
    for pid, producer in idmp.producers.items():
        out.blob(pid)
        out.u64(len(producer))
        for iid, sid in producer.entries():
            out.blob(iid)
            out.sid(sid)


# ---------------------------------------------------------------------------------------------
# Reading


class _In:
    def __init__(self, data: bytes | memoryview, origin: str, pos: int = 0) -> None:
        self.data = memoryview(data)
        self.pos = pos
        self.origin = origin
        self.version = VERSION  # of the file, for the parts whose layout changed

    def take(self, n: int) -> memoryview:
        end = self.pos + n
        if end > len(self.data):
            raise SnapshotError(f"{self.origin}: truncated at offset {self.pos}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def u8(self) -> int:
        return int(self.take(1)[0])

    def u64(self) -> int:
        return int(_U64.unpack(self.take(8))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def sid(self) -> tuple[int, int]:
        ms, seq = _ID.unpack(self.take(16))
        return (ms, seq)

    def blob(self) -> bytes:
        return bytes(self.take(self.u64()))


_HEADER = len(MAGIC) + 2
_SMALLEST = _HEADER + 1 + 4  # header, END, checksum


def _version(data: bytes | mmap.mmap, origin: str) -> int:
    if len(data) < _SMALLEST or data[: len(MAGIC)] != MAGIC:
        raise SnapshotError(f"{origin}: not a Headwater snapshot")
    (version,) = _U16.unpack_from(data, len(MAGIC))
    if version not in LOADABLE:
        raise SnapshotError(
            f"{origin}: snapshot version {version} is not supported (this server loads "
            f"versions {', '.join(map(str, LOADABLE))})"
        )
    return int(version)


def _checksum_ok(data: memoryview) -> bool:
    (crc,) = _U32.unpack_from(data, len(data) - 4)
    return zlib.crc32(data[:-4]) == int(crc)


class _Checksum:
    """The file's CRC-32, computed on a thread (big files) or at once (small ones)."""

    def __init__(self, data: memoryview) -> None:
        self.ok: bool | None = None
        self._thread: threading.Thread | None = None
        if len(data) < THREADED_CRC_BYTES:
            self.ok = _checksum_ok(data)
        else:
            self._thread = threading.Thread(
                target=self._run, args=(data,), name="snapshot-crc", daemon=True
            )
            self._thread.start()

    def _run(self, data: memoryview) -> None:
        self.ok = _checksum_ok(data)

    def result(self) -> bool:
        if self._thread is not None:
            self._thread.join()
        return bool(self.ok)


def load_snapshot(path: Path, dbs: list[Database], lazy: list[Node] | None = None) -> int:
    """Load the file into empty databases; returns the number of keys. On any error the
    databases are left as they were (empty) and SnapshotError says why. Given a ``lazy``
    list, stream nodes keep their buffers in the file until they are used or
    ``materialize_some(lazy, ...)`` copies them; the list gets them (the checksum is verified
    before this returns all the same)."""
    origin = str(path)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < _SMALLEST:
            raise SnapshotError(f"{origin}: not a Headwater snapshot")
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    version = _version(data, origin)
    view = memoryview(data)
    checksum = _Checksum(view)
    if checksum.ok is False:
        raise SnapshotError(f"{origin}: checksum mismatch (the file is damaged)")
    loaded: list[tuple[Database, bytes]] = []
    lazy_nodes: list[Node] | None = [] if lazy is not None else None
    collecting = gc.isenabled()
    gc.disable()  # nodes are acyclic; collections during the load would only walk them
    try:
        _load_records(_In(view[:-4], origin, _HEADER), dbs, version, loaded, lazy_nodes)
        intact = checksum.result()
        if intact and collecting and not gc.get_freeze_count():
            # The process's first load (its startup): what it built is long-lived and
            # acyclic. In the permanent generation it is never walked by the collector (the
            # first collection after a 5,000,000-entry load would take ~50 ms) and a BGSAVE
            # child does not touch its pages (copy-on-write). Later loads (DEBUG RELOAD)
            # leave the collector alone, so that no runtime garbage is frozen.
            gc.freeze()
    except (SnapshotError, struct.error, ValueError, IndexError, OverflowError) as exc:
        _unload(loaded)
        if not checksum.result():
            raise SnapshotError(f"{origin}: checksum mismatch (the file is damaged)") from None
        if isinstance(exc, SnapshotError):
            raise
        raise SnapshotError(f"{origin}: bad structure: {type(exc).__name__}: {exc}") from None
    finally:
        if collecting:
            gc.enable()
    if not intact:
        _unload(loaded)
        raise SnapshotError(f"{origin}: checksum mismatch (the file is damaged)")
    if lazy is not None and lazy_nodes:
        lazy.extend(reversed(lazy_nodes))  # materialize_some pops: the file's order
    return len(loaded)


def materialize_some(lazy: list[Node], budget_s: float) -> int:
    """Copy nodes of ``lazy`` (filled by ``load_snapshot``) out of their snapshot file for
    about ``budget_s`` seconds, at least one step of 64; returns how many are left. Once none
    is left, nothing refers to the file's mapping any more and it is released."""
    deadline = time.perf_counter() + budget_s
    while lazy:
        for _ in range(min(64, len(lazy))):
            lazy.pop().materialize()
        if time.perf_counter() >= deadline:
            break
    return len(lazy)


def _unload(loaded: list[tuple[Database, bytes]]) -> None:
    for db, key in loaded:
        db.data.pop(key, None)
        db.expires.pop(key, None)


def _load_records(
    inp: _In,
    dbs: list[Database],
    version: int,
    loaded: list[tuple[Database, bytes]],
    lazy: list[Node] | None,
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
    if inp.pos != len(inp.data):
        raise SnapshotError(f"{inp.origin}: data after the end marker")


def _read_plain(inp: _In, kind: int) -> tuple[object, int]:
    if kind == STRING:
        raw = inp.u8()
        value = inp.blob()
        return (RawString(value) if raw else value), inp.i64()
    if kind == HASH:
        h = Hash()
        for _ in range(inp.u64()):
            field = inp.blob()
            h[field] = inp.blob()
        return h, inp.i64()
    raise SnapshotError(f"{inp.origin}: unknown record type {kind} at offset {inp.pos - 1}")


def _read_counters(inp: _In) -> Stream:
    s = Stream()
    s.last_id, s.first_id, s.max_deleted_id = inp.sid(), inp.sid(), inp.sid()
    s.entries_added, s.length, s.idmp_duration, s.idmp_maxsize = (
        inp.u64(),
        inp.u64(),
        inp.u64(),
        inp.u64(),
    )
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
        k, entries, blob_len, tomb_len = _CHUNK.unpack(inp.take(_CHUNK.size))
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


def check_snapshot(path: Path) -> tuple[bool, str]:
    """``headwater check-snapshot FILE``: checksum, structure and stream invariants."""
    keyspace = Keyspace(16)
    try:
        keys = load_snapshot(path, keyspace.dbs)
        for db in keyspace.dbs:
            for value in db.data.values():
                if isinstance(value, Stream):
                    value.check_invariants()
                    for group in value.groups.values():
                        group.check_invariants()
    except (SnapshotError, AssertionError, ValueError, struct.error) as exc:
        return False, f"Snapshot {path} is not valid: {exc or type(exc).__name__}"
    size = path.stat().st_size
    return True, f"Snapshot {path} is valid: {keys} keys, {size} bytes, checksum ok"


def main(args: list[str]) -> int:
    if len(args) != 1:
        print("usage: headwater check-snapshot <file>")
        return 1
    path = Path(args[0])
    if not path.is_file():
        print(f"Cannot open file {path}")
        return 1
    ok, report = check_snapshot(path)
    print(report)
    return 0 if ok else 1
