"""Snapshots: the whole keyspace in one versioned, checksummed binary file.

Layout (all integers little-endian)::

    "HWSNAP" u16 version
    records...                        one byte of record type, then its fields
    0xFF u32 crc32                    of every byte before the checksum

    0x01 SELECT    u32 db
    0x02 STRING    bytes key, u8 raw, bytes value, i64 expire (-1: none)
    0x03 HASH      bytes key, u64 n, n * (bytes field, bytes value), i64 expire
    0x04 STREAM    bytes key, i64 expire, the stream (below)

``bytes`` is a u64 length then the bytes. A stream is its counters and settings, then its nodes
*as they are in memory* (the ID arrays, offsets, blob and tombstones are written with one
``tobytes`` each and read back with one ``frombytes``: loading costs per node, not per entry),
then its groups (PEL as parallel arrays) and IDMP maps. The CRC-32 (zlib, C speed) detects a
torn or corrupted file; a version this code does not know is refused.
"""

from __future__ import annotations

import os
import struct
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
VERSION = 1
SELECT, STRING, HASH, STREAM, END = 0x01, 0x02, 0x03, 0x04, 0xFF

_U8 = struct.Struct("<B")
_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_ID = struct.Struct("<QQ")


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

    def put(self, data: bytes | bytearray | memoryview) -> None:
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
    for n in (s.entries_added, s.length, s.idmp_duration, s.idmp_maxsize, len(s.nodes)):
        out.u64(n)
    for node in s.nodes:
        out.sid(node.master)
        out.u64(len(node.fields))
        for name in node.fields:
            out.blob(name)
        for n in (node.count, node.deleted, node.lp_bytes):
            out.u64(n)
        for buf in (node.ms, node.seq, node.offsets):
            out.blob(buf.tobytes())
        out.blob(node.blob)
        out.blob(node.tomb if node.tomb is not None else b"")
    out.u64(len(s.groups))
    for group in s.groups.values():
        _write_group(out, group)
    _write_idmp(out, s.idmp)


def _write_group(out: _Out, g: Group) -> None:
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
        owners.append(index[owner])
    out.u64(len(ms))
    for buf in (ms, seq, times, counts, owners):
        out.blob(buf.tobytes())


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
    def __init__(self, data: bytes, origin: str) -> None:
        self.data = memoryview(data)
        self.pos = 0
        self.origin = origin

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


def verify(data: bytes, origin: str) -> None:
    if len(data) < len(MAGIC) + 2 + 1 + 4 or not data.startswith(MAGIC):
        raise SnapshotError(f"{origin}: not a Headwater snapshot")
    (version,) = _U16.unpack_from(data, len(MAGIC))
    if version != VERSION:
        raise SnapshotError(f"{origin}: snapshot version {version} is not supported")
    (crc,) = _U32.unpack_from(data, len(data) - 4)
    if zlib.crc32(memoryview(data)[:-4]) != crc:
        raise SnapshotError(f"{origin}: checksum mismatch (the file is damaged)")


def load_snapshot(path: Path, dbs: list[Database]) -> int:
    """Load the file into empty databases; returns the number of keys."""
    data = path.read_bytes()
    verify(data, str(path))
    inp = _In(data[:-4], str(path))
    inp.take(len(MAGIC) + 2)
    db: Database | None = None
    keys = 0
    while True:
        kind = inp.u8()
        if kind == END:
            break
        if kind == SELECT:
            index = int(_U32.unpack(inp.take(4))[0])
            if index >= len(dbs):
                raise SnapshotError(f"{path}: database {index} does not exist here")
            db = dbs[index]
            continue
        if db is None:
            raise SnapshotError(f"{path}: a key before any database")
        key, value, expire = _read_value(inp, kind)
        db.data[key] = value
        if expire >= 0:
            db.set_expire(key, expire)
        keys += 1
    if inp.pos != len(inp.data):
        raise SnapshotError(f"{path}: data after the end marker")
    return keys


def _read_value(inp: _In, kind: int) -> tuple[bytes, object, int]:
    key = inp.blob()
    if kind == STRING:
        raw = inp.u8()
        value = inp.blob()
        return key, (RawString(value) if raw else value), inp.i64()
    if kind == HASH:
        h = Hash()
        for _ in range(inp.u64()):
            field = inp.blob()
            h[field] = inp.blob()
        return key, h, inp.i64()
    if kind == STREAM:
        expire = inp.i64()
        return key, _read_stream(inp), expire
    raise SnapshotError(f"{inp.origin}: unknown record type {kind} at offset {inp.pos - 1}")


def _read_stream(inp: _In) -> Stream:
    s = Stream()
    s.last_id, s.first_id, s.max_deleted_id = inp.sid(), inp.sid(), inp.sid()
    s.entries_added, s.length, s.idmp_duration, s.idmp_maxsize = (
        inp.u64(),
        inp.u64(),
        inp.u64(),
        inp.u64(),
    )
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
    for _ in range(inp.u64()):
        group = _read_group(inp)
        s.groups[group.name] = group
    s.idmp = _read_idmp(inp)
    return s


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
    per_owner: dict[bytes, list[int]] = {}
    keys = []
    for i in range(n):
        key = id_key((ms[i], seq[i]))
        owner = names[owners[i]]
        g.pel[key] = (times[i], counts[i], owner)
        per_owner.setdefault(owner, []).append(key)
        keys.append(key)
    g.order.extend(keys)
    for owner, owned in per_owner.items():
        g.consumers[owner].pel.extend(owned)
    return g


def _read_idmp(inp: _In) -> IdmpState | None:
    if not inp.u8():
        return None
    state = IdmpState()
    state.added, state.duplicates = inp.u64(), inp.u64()
    for _ in range(inp.u64()):
        pid = inp.blob()
        producer = state.producers[pid] = Producer()
        for _ in range(inp.u64()):
            iid = inp.blob()
            producer.add(iid, inp.sid())
        state.tracked += len(producer.iids)
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
