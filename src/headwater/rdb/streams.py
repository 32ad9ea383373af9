"""Streams in RDB: Headwater's ``Stream`` to Redis's stream object and back.

A Redis stream is a radix tree of listpacks, one per node, keyed by the node's master ID (16
bytes, big-endian ms then seq). Each listpack holds (``t_stream.c``'s ``streamAppendItem``)::

    count | deleted | num-fields | field_1 ... field_N | 0          <- the master entry
    flags | ms-diff | seq-diff | value_1 ... value_N | lp-count     <- same fields as master
    flags | ms-diff | seq-diff | num-fields | f_1 | v_1 ... | lp-count   <- its own fields

``flags`` is 1 for a deleted entry plus 2 for "same fields"; the diffs are against the master
ID; ``lp-count`` is the number of elements before it in the entry (N + 3, or 2N + 4). A
Headwater node (``stream/node.py``) keeps the same entries under the same rules (node
boundaries, master fields, deleted entries kept in place), so each node maps to exactly the
listpack Redis would have, and the byte size Headwater keeps for it (``lp_bytes``) is the
listpack's.

After the nodes (RDB_TYPE_STREAM_LISTPACKS_2, Redis 7.0; ``_3`` adds each consumer's active
time, Redis 7.2; ``_4`` the IDMP section at the end, Redis 8.6 (RDB version 13);
``STREAM_LISTPACKS``, Redis 5-6.2, has neither the first ID, the max deleted ID nor
entries-added, nor a group's entries-read)::

    length | last ms | last seq | first ms | first seq | max-deleted ms | max-deleted seq
    entries-added | groups
    per group: name | last ms | last seq | entries-read | PEL size
               per pending entry: ID (16 raw bytes) | delivery time ms (int64 LE) | count
               consumers; per consumer: name | seen time | [active time] | PEL size | IDs
    [idmp-duration | idmp-maxsize | producers
     per producer: pid | count | per iid (oldest first): iid | entry ms | entry seq
     iids-added | iids-duplicates]

Groups and consumers go in name order, pending entries in ID order, producers in pid order
(the radix trees' order). A stream read from an older type has no IDMP settings of its own:
they are left 0 (outside their ranges) for the loader to fill from its configuration.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, Final, cast

from headwater.rdb import listpack
from headwater.rdb.encoding import RdbError, Reader, write_len, write_ms, write_string
from headwater.rdb.native import loop
from headwater.stream.groups import (
    MAX_COUNT,
    Consumer,
    Group,
    estimate_entries_read,
    id_key,
    key_id,
)
from headwater.stream.idmp import DURATION_RANGE, MAXSIZE_RANGE, IdmpState, Producer
from headwater.stream.ids import MIN_ID, StreamID
from headwater.stream.node import Node
from headwater.stream.stream import Stream

TYPE_STREAM_LISTPACKS = 15
TYPE_STREAM_LISTPACKS_2 = 19
TYPE_STREAM_LISTPACKS_3 = 21
TYPE_STREAM_LISTPACKS_4 = 26

_KEY = struct.Struct(">QQ")
_FLAG_DELETED = 1
_FLAG_SAMEFIELDS = 2
_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1


class Unencodable(ValueError):
    """A value the RDB format of the chosen version cannot hold."""


def _wrap64(value: int) -> int:
    """C's uint64 difference stored into an int64."""
    value %= _U64
    return value - _U64 if value > _I64_MAX else value


def _signed(value: int) -> int:
    """A length that Redis saved from an int64 (entries-read -1 is 2**64 - 1)."""
    return value - _U64 if value > _I64_MAX else value


# ---------------------------------------------------------------------------------------------
# Writing


#: ``node_listpack_pure`` in one C call (None: not built)
_NATIVE_NODE_WRITER: Final = cast("Callable[..., bytes | None] | None", loop("stream_listpack"))


def node_listpack(node: Node) -> bytes:
    """The listpack Redis keeps for this node, in one C call when that is built."""
    node.materialize()
    if _NATIVE_NODE_WRITER is not None:
        ms, seq, offsets = node.wide_columns()
        packed = _NATIVE_NODE_WRITER(
            node.fields, ms, seq, offsets, node.blob, node.tomb,
            node.count, node.deleted, node.master[0], node.master[1],
        )  # fmt: skip
        if packed is not None:
            return packed
    return node_listpack_pure(node)


def node_listpack_pure(node: Node) -> bytes:
    """``node_listpack`` in Python."""
    node.materialize()
    fields = list(node.fields)
    nfields = len(fields)
    master_ms, master_seq = node.master
    elements: list[bytes | int] = [node.count, node.deleted, nfields, *fields, 0]
    for i in range(len(node)):
        ms, seq = node.id_at(i)
        pairs = node.pairs_at(i)
        flags = 0 if node.is_live(i) else _FLAG_DELETED
        same = pairs[0::2] == fields
        if same:
            flags |= _FLAG_SAMEFIELDS
        elements += (flags, _wrap64(ms - master_ms), _wrap64(seq - master_seq))
        if same:
            elements += pairs[1::2]
            elements.append(nfields + 3)
        else:
            own = len(pairs) >> 1
            elements.append(own)
            elements += pairs
            elements.append(2 * own + 4)
    return listpack.encode(elements)


def write_stream(out: bytearray, stream: Stream, rdb_type: int = TYPE_STREAM_LISTPACKS_2) -> None:
    """The stream object (without its type byte) as Redis's ``rdbSaveObject`` writes it."""
    write_len(out, len(stream.nodes))
    for node in stream.nodes:
        write_string(out, _KEY.pack(*node.master))
        write_string(out, node_listpack(node))
    write_len(out, stream.length)
    write_len(out, stream.last_id[0])
    write_len(out, stream.last_id[1])
    if rdb_type >= TYPE_STREAM_LISTPACKS_2:
        write_len(out, stream.first_id[0])
        write_len(out, stream.first_id[1])
        write_len(out, stream.max_deleted_id[0])
        write_len(out, stream.max_deleted_id[1])
        write_len(out, stream.entries_added)
    write_len(out, len(stream.groups))
    for name in sorted(stream.groups):
        _write_group(out, stream.groups[name], rdb_type)
    if rdb_type >= TYPE_STREAM_LISTPACKS_4:
        _write_idmp(out, stream)


def _write_idmp(out: bytearray, stream: Stream) -> None:
    write_len(out, stream.idmp_duration)
    write_len(out, stream.idmp_maxsize)
    state = stream.idmp
    producers = state.producers if state is not None else {}
    write_len(out, len(producers))
    for pid in sorted(producers):
        producer = producers[pid]
        write_string(out, pid)
        write_len(out, len(producer))
        for iid, (ms, seq) in producer.entries():
            write_string(out, iid)
            write_len(out, ms)
            write_len(out, seq)
    write_len(out, state.added if state is not None else 0)
    write_len(out, state.duplicates if state is not None else 0)


def _write_group(out: bytearray, group: Group, rdb_type: int) -> None:
    if group.nacked:
        raise Unencodable(
            f"group {group.name!r} has nacked entries (XNACK), which Redis's RDB format has "
            "no place for"
        )
    write_string(out, group.name)
    write_len(out, group.last_id[0])
    write_len(out, group.last_id[1])
    if rdb_type >= TYPE_STREAM_LISTPACKS_2:
        write_len(out, group.entries_read % _U64)
    write_len(out, len(group.order))
    pel = group.pel
    for key in group.order:
        delivery_ms, count, _ = pel[key]
        out += _KEY.pack(*key_id(key))
        write_ms(out, delivery_ms)
        write_len(out, count)
    write_len(out, len(group.consumers))
    for name in sorted(group.consumers):
        consumer = group.consumers[name]
        write_string(out, name)
        write_ms(out, consumer.seen_time)
        if rdb_type >= TYPE_STREAM_LISTPACKS_3:
            write_ms(out, consumer.active_time)
        write_len(out, len(consumer.pel))
        for key in consumer.pel:
            out += _KEY.pack(*key_id(key))


# ---------------------------------------------------------------------------------------------
# Reading


def _int(element: bytes | int, what: str) -> int:
    if not isinstance(element, int):
        raise RdbError(f"stream listpack: {what} is not an integer")
    return element


#: ``_read_node_pure`` in one C call (None: not built); no answer for what Python reads
_NATIVE_NODE: Final = cast(
    "Callable[[bytes, int, int], tuple[Any, ...] | None] | None", loop("stream_node")
)


def _read_node(master: StreamID, blob: bytes, previous: StreamID | None) -> Node:
    """A Headwater node holding exactly the entries of one Redis stream listpack: its
    columns in one C call when that is built and takes the listpack (``_read_node_pure``
    then refuses it with the reason, or takes a shape Redis does not write)."""
    if _NATIVE_NODE is not None and (previous is None or master > previous):
        columns = _NATIVE_NODE(blob, master[0], master[1])
        if columns is not None:
            fields, ms, seq, offsets, data, tomb, count, deleted, lp_bytes, _, _ = columns
            node = Node(master, fields, None, lp_bytes)
            node.ms.frombytes(ms)
            node.seq.frombytes(seq)
            node.offsets.frombytes(offsets)
            node.blob = data
            node.tomb = tomb
            node.count = count
            node.deleted = deleted
            return node
    return _read_node_pure(master, blob, previous)


def _read_node_pure(master: StreamID, blob: bytes, previous: StreamID | None) -> Node:
    """``_read_node`` in Python, entry by entry (``Node.append``)."""
    els = listpack.decode_pure(blob)
    if len(els) < 4:
        raise RdbError("stream listpack without a master entry")
    count = _int(els[0], "count")
    deleted = _int(els[1], "deleted count")
    nfields = _int(els[2], "master field count")
    if nfields < 0 or 3 + nfields >= len(els) or els[3 + nfields] != 0:
        raise RdbError("stream listpack: bad master entry")
    fields = [listpack.as_bytes(f) for f in els[3 : 3 + nfields]]
    node = Node(master, fields)
    i = 4 + nfields
    n = len(els)
    dead: list[int] = []
    while i < n:
        if i + 3 > n:
            raise RdbError("stream listpack: truncated entry")
        flags = _int(els[i], "flags")
        sid = (
            (master[0] + _int(els[i + 1], "ms diff")) % _U64,
            (master[1] + _int(els[i + 2], "seq diff")) % _U64,
        )
        if flags & ~(_FLAG_DELETED | _FLAG_SAMEFIELDS):
            raise RdbError("stream listpack: unknown entry flags")
        if flags & _FLAG_SAMEFIELDS:
            start, stop = i + 3, i + 3 + nfields
            if stop >= n:
                raise RdbError("stream listpack: truncated entry")
            values = [listpack.as_bytes(v) for v in els[start:stop]]
            pairs = [x for pair in zip(fields, values, strict=True) for x in pair]
            expected = nfields + 3
        else:
            if i + 3 >= n:
                raise RdbError("stream listpack: truncated entry")
            own = _int(els[i + 3], "field count")
            start, stop = i + 4, i + 4 + 2 * own
            if own <= 0 or stop >= n:
                raise RdbError("stream listpack: bad entry field count")
            pairs = [listpack.as_bytes(x) for x in els[start:stop]]
            expected = 2 * own + 4
        if els[stop] != expected:
            raise RdbError("stream listpack: entry lp-count mismatch")
        i = stop + 1
        if len(node) == 0 and sid != master:
            raise RdbError("stream listpack: the first entry's ID is not the node's key")
        if previous is not None and sid <= previous:
            raise RdbError("stream entries out of order")
        previous = sid
        if flags & _FLAG_DELETED:
            dead.append(len(node))
        node.append(sid, pairs)
    if len(node) == 0:
        raise RdbError("stream listpack without entries")
    for index in dead:
        node.delete_at(index)
    if node.count != count or node.deleted != deleted:
        raise RdbError("stream listpack: master counts do not match its entries")
    return node


def _read_id(r: Reader) -> StreamID:
    return (r.length(), r.length())


def read_stream(r: Reader, rdb_type: int) -> Stream:
    """A stream object of type 15, 19, 21 or 26 (after its type byte)."""
    stream = Stream()
    previous: StreamID | None = None
    for _ in range(r.count(2)):
        key = r.string()
        if len(key) != 16:
            raise RdbError("stream node key is not 16 bytes")
        master: StreamID = _KEY.unpack(key)
        node = _read_node(master, r.string(), previous)
        previous = node.last_id()
        if stream.nodes:
            stream.nodes[-1].seal()
        stream.nodes.append(node)
        stream.firsts.append(master)
    stream.length = r.length()
    stream.last_id = _read_id(r)
    live = 0
    for node in stream.nodes:
        live += node.count
    if live != stream.length:
        raise RdbError(f"stream length {stream.length} but {live} live entries")
    if previous is not None and previous > stream.last_id:
        raise RdbError("a stream entry past the stream's last ID")
    first_live = _first_live(stream)
    if rdb_type >= TYPE_STREAM_LISTPACKS_2:
        stream.first_id = _read_id(r)
        stream.max_deleted_id = _read_id(r)
        stream.entries_added = r.length()
        if stream.entries_added < stream.length:
            raise RdbError("stream entries-added below its length")
    else:
        stream.entries_added = stream.length
    stream.first_id = first_live  # what Redis derives on load too, and Headwater's invariant
    for _ in range(r.count()):
        _read_group(r, stream, rdb_type)
    if rdb_type >= TYPE_STREAM_LISTPACKS_4:
        _read_idmp(r, stream)
    else:
        stream.idmp_duration = stream.idmp_maxsize = 0
    return stream


def _read_idmp(r: Reader, stream: Stream) -> None:
    """The IDMP section, checked as Redis 8.6 checks it (settings in range, no pid twice; an
    iid seen twice in one producer keeps its first). A producer holding more iids than the
    stream's maxsize keeps its newest, as its evictions would have."""
    stream.idmp_duration = r.length()
    stream.idmp_maxsize = r.length()
    if not DURATION_RANGE[0] <= stream.idmp_duration <= DURATION_RANGE[1]:
        raise RdbError("stream IDMP duration out of range")
    if not MAXSIZE_RANGE[0] <= stream.idmp_maxsize <= MAXSIZE_RANGE[1]:
        raise RdbError("stream IDMP max entries out of range")
    state = IdmpState()
    for _ in range(r.count(2)):
        pid = r.string()
        if pid in state.producers:
            raise RdbError(f"IDMP producer {pid!r} twice")
        producer = Producer()
        for _ in range(r.count(3)):
            iid = r.string()
            sid = _read_id(r)
            if iid not in producer.iids:
                producer.add(iid, sid)
        while len(producer) > stream.idmp_maxsize:
            producer.pop_oldest()
        if len(producer):
            state.adopt(pid, producer)
    state.added = r.length()
    state.duplicates = r.length()
    if state.added < state.tracked:
        raise RdbError("stream iids-added below the iids it holds")
    stream.idmp = state if state.producers or state.added or state.duplicates else None


def _first_live(stream: Stream) -> StreamID:
    """The first live entry's ID (MIN_ID for none), without an iterator."""
    for node in stream.nodes:
        for i in range(len(node)):
            if node.is_live(i):
                return node.id_at(i)
    return MIN_ID


def _read_group(r: Reader, stream: Stream, rdb_type: int) -> None:
    name = r.string()
    if name in stream.groups:
        raise RdbError(f"duplicate consumer group {name!r}")
    last_id = _read_id(r)
    if rdb_type >= TYPE_STREAM_LISTPACKS_2:
        entries_read = _signed(r.length())
        if entries_read < -1:
            raise RdbError("bad entries-read")
    else:
        entries_read = estimate_entries_read(stream, last_id)
    group = Group(name, last_id, entries_read)
    keys: list[int] = []
    pel = group.pel
    for _ in range(r.count(25)):
        key = id_key(_KEY.unpack(r.take(16)))
        delivery_ms = r.ms()
        count = r.length()
        if key in pel or (keys and key < keys[-1]):
            raise RdbError("group PEL not in ID order")
        if delivery_ms < 0 or count > MAX_COUNT:
            raise RdbError("bad pending entry")
        pel[key] = (delivery_ms, count, None)
        keys.append(key)
    group.order.extend(keys)
    for _ in range(r.count(10)):
        cname = r.string()
        if cname in group.consumers:
            raise RdbError(f"duplicate consumer {cname!r}")
        seen_time = r.ms()
        active_time = r.ms() if rdb_type >= TYPE_STREAM_LISTPACKS_3 else seen_time
        consumer = Consumer(cname, seen_time)
        consumer.active_time = active_time
        owned: list[int] = []
        for _ in range(r.count(16)):
            key = id_key(_KEY.unpack(r.take(16)))
            nack = pel.get(key)
            if nack is None or nack[2] is not None or (owned and key <= owned[-1]):
                raise RdbError("consumer PEL entry not pending in its group, or owned twice")
            pel[key] = (nack[0], nack[1], cname)
            owned.append(key)
        consumer.pel.extend(owned)
        group.consumers[cname] = consumer
    if any(nack[2] is None for nack in pel.values()):
        raise RdbError("a pending entry without a consumer")
    stream.groups[name] = group
