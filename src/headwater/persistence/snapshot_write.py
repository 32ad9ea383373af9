"""A snapshot's writer (``persistence/snapshot.py`` describes the layout): the whole keyspace
record by record into a file, a megabyte or so at a time.

A module of its own so that it can be compiled (``_build.HOT_MODULES``): a snapshot of many
small keys is mostly this per-record code (import-rdb's 250,000 keys, BGSAVE, a full sync's
child); ``snapshot.py`` keeps the reading side's threads and memory maps, which stay Python.
Tests that write the older layouts pass their stream and group writers in
(``write_snapshot_to``'s ``stream_writer`` and ``group_version``).
"""

from __future__ import annotations

import struct
import sys
import zlib
from array import array
from collections.abc import Callable, Sequence
from itertools import chain
from typing import BinaryIO

from headwater.activeactive.rstream import RegionStream
from headwater.keyspace import Database
from headwater.persistence.snapshot_records import (
    _CHUNK,
    _F64,
    _I64,
    _ID,
    _NODE_ROW,
    _U8,
    _U16,
    _U32,
    _U64,
    END,
    FUNCTIONS,
    HASH2,
    HASHTTL,
    LIST,
    MAGIC,
    NOBODY,
    REGION,
    SELECT,
    SET,
    STREAM,
    STRING,
    VERSION,
    ZSET,
)
from headwater.stream.groups import Group, key_id
from headwater.stream.idmp import IdmpState
from headwater.stream.node import LazySource, Node
from headwater.stream.stream import Stream
from headwater.structures.lists import ListValue
from headwater.structures.sets import SetValue
from headwater.structures.zsets import ZSetValue
from headwater.values import Hash, RawString

#: nodes per chunk: small column buffers (~1 MB) are reused by malloc instead of faulted in anew
CHUNK_NODES = 256
#: arrays are kept in native byte order; the file is little-endian
_SWAP = sys.byteorder == "big"

#: ``_Out`` gathers small pieces up to this many bytes and writes larger ones as they are:
#: its buffer stays below malloc's mmap threshold (128 KiB, as the README advises), so it is
#: reused instead of being fresh pages at every megabyte
OUT_DIRECT = 64 * 1024


class _Out:
    """A checksumming writer that hands the file chunks of ``OUT_DIRECT`` bytes or more."""

    def __init__(self, f: BinaryIO) -> None:
        self.f = f
        self.buf = bytearray()
        self.crc = 0

    def put(self, data: bytes | bytearray | memoryview | array[int]) -> None:
        if len(data) >= OUT_DIRECT:  # (as it is: no copy into the buffer)
            self.drain()
            self.crc = zlib.crc32(data, self.crc)
            self.f.write(data)
            return
        self.buf += data
        if len(self.buf) >= OUT_DIRECT:
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


#: writes a stream's part of its record (tests: an older version's layout)
StreamWriter = Callable[["_Out", Stream], None]


def write_snapshot_to(
    f: BinaryIO,
    dbs: list[Database],
    libraries: Sequence[bytes] = (),
    stream_writer: StreamWriter | None = None,
    group_version: int = VERSION,
) -> None:
    """The whole snapshot into ``f``, a megabyte or so at a time (a full sync's child writes a
    file that the primary sends on as it grows: no fsync, no rename). ``stream_writer`` and
    ``group_version``: the test seams for older layouts (module doc)."""
    out = _Out(f)
    out.put(MAGIC + _U16.pack(VERSION))
    if libraries:
        out.put(_U8.pack(FUNCTIONS))
        out.u64(len(libraries))
        for code in libraries:
            out.blob(code)
    persisted = dbs[0].keyspace.persisted if dbs else None
    if persisted is not None:
        out.put(_U8.pack(REGION))
        out.blob(persisted.dump_state())
    for db in dbs:
        if db.data:
            out.put(_U8.pack(SELECT) + _U32.pack(db.index))
            for key, value in db.data.items():
                if not isinstance(value, RegionStream):  # (in the REGION record)
                    expire = db.expires.get(key, -1)
                    if stream_writer is not None and isinstance(value, Stream):
                        out.put(_KEY_HEAD.pack(STREAM, len(key)) + key + _I64.pack(expire))
                        stream_writer(out, value)
                    else:
                        _write_value(out, key, value, expire, group_version)
    out.put(_U8.pack(END))
    out.drain()
    f.write(_U32.pack(out.crc))


def _write_value(
    out: _Out, key: bytes, value: object, expire: int, group_version: int = VERSION
) -> None:
    if isinstance(value, Stream):
        out.put(_KEY_HEAD.pack(STREAM, len(key)) + key + _I64.pack(expire))
        _write_stream(out, value, group_version)
    elif isinstance(value, Hash) and value.ttls is not None:
        ttls = value.ttls
        out.put(_U8.pack(HASHTTL))
        out.blob(key)
        out.put(_U8.pack(value.listpack))
        out.u64(len(value))
        for field, item in value.items():
            out.blob(field)
            out.blob(item)
            when = ttls.get(field)
            out.i64(-1 if when is None else when)
        out.i64(expire)
    elif isinstance(value, Hash):
        out.put(_KEY_HEAD.pack(HASH2, len(key)) + key + _SIZE_HEAD.pack(value.listpack, len(value)))
        pairs = list(value.items())
        for start in range(0, len(pairs), _BULK):
            part = pairs[start : start + _BULK]
            out.put(_blobs([word for pair in part for word in pair]))
        out.i64(expire)
    elif isinstance(value, SetValue):
        out.put(_KEY_HEAD.pack(SET, len(key)) + key + _SIZE_HEAD.pack(value.encoding, len(value)))
        members = value.ordered()
        for start in range(0, len(members), _BULK):
            out.put(_blobs(members[start : start + _BULK]))
        out.i64(expire)
    elif isinstance(value, ZSetValue):
        out.put(_KEY_HEAD.pack(ZSET, len(key)) + key + _SIZE_HEAD.pack(value.listpack, len(value)))
        for scores, members in zip(value.chunk_scores, value.chunk_members, strict=True):
            words = zip(
                map(_U64.pack, map(len, members)), members, map(_F64.pack, scores), strict=True
            )
            out.put(b"".join(chain.from_iterable(words)))
        out.i64(expire)
    elif isinstance(value, ListValue):
        out.put(
            _KEY_HEAD.pack(LIST, len(key))
            + key
            + _LIST_HEAD.pack(value.listpack, value.fill, len(value.nodes))
        )
        for node in value.nodes:
            starts = node.normalized_starts()
            if _SWAP:
                starts = array("i", starts)
                starts.byteswap()
            starts_bytes = starts.tobytes()
            buf = node.buf
            out.put(_NODE_HEAD.pack(node.size, len(buf)))
            out.put(buf)
            out.put(_U64.pack(len(starts_bytes)) + starts_bytes)
        out.i64(expire)
    elif isinstance(value, bytes):
        raw = _STRING_HEAD.pack(isinstance(value, RawString), len(value))
        out.put(_KEY_HEAD.pack(STRING, len(key)) + key + raw + value + _I64.pack(expire))
    else:
        raise TypeError(f"cannot snapshot a {type(value).__name__}")


#: a record's type byte and its key's length; u8 and u64 (encoding, then a size); a list's
#: u8 listpack, i64 fill and u64 nodes; a list node's u64 size and u64 bytes; a string's u8 raw
#: and u64 length: the fixed fields of a record in one piece (most records are small)
_KEY_HEAD = struct.Struct("<BQ")
_SIZE_HEAD = _STRING_HEAD = struct.Struct("<BQ")
_LIST_HEAD = struct.Struct("<BqQ")
_NODE_HEAD = struct.Struct("<QQ")

#: members, fields or values written (or read) in one piece
_BULK = 4096


def _blobs(items: Sequence[bytes]) -> bytes:
    """Each of ``items`` as a ``bytes`` field (u64 length, the bytes), back to back."""
    return b"".join(chain.from_iterable(zip(map(_U64.pack, map(len, items)), items, strict=True)))


def _write_stream(out: _Out, s: Stream, group_version: int = VERSION) -> None:
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
        _write_group(out, group, group_version)
    _write_idmp(out, s.idmp)


def _write_chunk(out: _Out, nodes: list[Node], fieldsets: list[int]) -> None:
    sources = [node.lazy_source for node in nodes]
    run = _one_run(sources)
    rows = bytearray()
    entries = blob = tomb = 0
    for node, fieldset, source in zip(nodes, fieldsets, sources, strict=False):
        if source is not None:  # a lazy node: its sizes from where its buffers lie
            _columns, e0, e1, b0, b1, t0, t1 = source
            n, blen, tlen = e1 - e0, b1 - b0, t1 - t0
        else:
            n, blen = len(node), len(node.blob)
            tlen = len(node.tomb) if node.tomb is not None else 0
        master_ms, master_seq = node.master
        rows += _NODE_ROW.pack(
            master_ms, master_seq, fieldset, node.count, node.deleted, node.lp_bytes,
            n, blen, tlen,
        )  # fmt: skip
        entries += n
        blob += blen
        tomb += tlen
    out.put(_CHUNK.pack(len(nodes), entries, blob, tomb))
    out.put(rows)
    if run is not None:  # the chunk as it was loaded: each column in one piece
        (ms_v, seq_v, off_v, blob_v, tomb_v), e0, e1, b0, b1, t0, t1 = run
        for piece in (ms_v[e0 * 8 : e1 * 8], seq_v[e0 * 8 : e1 * 8], off_v[e0 * 4 : e1 * 4]):
            out.put(piece)
        out.put(blob_v[b0:b1])
        if t1 > t0:
            out.put(tomb_v[t0:t1])
        return
    # (a lazy node's columns come from the loaded bytes, as they are: no materializing)
    columns = [node.snapshot_columns() for node in nodes]
    for column in range(4):  # ms, seq, offsets, blob
        for node_columns in columns:
            out.put(node_columns[column])  # type: ignore[arg-type]
    for *_rest, node_tomb in columns:
        if node_tomb is not None:
            out.put(node_tomb)


def _one_run(sources: list[LazySource | None]) -> LazySource | None:
    """The lazy nodes' buffers as one range of their snapshot's columns, when they are all
    lazy, from the same chunk and back to back (a stream written as it was loaded), else
    None."""
    first = sources[0] if sources else None
    if first is None:
        return None
    columns, e0, e_end, b0, b_end, t0, t_end = first
    for source in sources[1:]:
        if source is None or source[0] is not columns:
            return None
        _c, e1, e2, b1, b2, t1, t2 = source
        if (e1, b1, t1) != (e_end, b_end, t_end):
            return None
        e_end, b_end, t_end = e2, b2, t2
    return (columns, e0, e_end, b0, b_end, t0, t_end)


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
