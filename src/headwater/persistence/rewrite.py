"""AOF rewrite: the commands that rebuild a keyspace, for a compact base file.

For each database a ``SELECT``, then per key (in the database's order):

* strings: ``SET`` (then ``APPEND`` for a raw-encoded one, so OBJECT ENCODING survives);
  hashes: ``HSET`` in chunks, then one ``HPEXPIREAT key ms FIELDS n …`` per distinct field
  deadline (Redis 7.4's rewrite of field TTLs); then ``PEXPIREAT`` if the key has a TTL.
* streams: ``XADD key <id> …`` per live entry (an empty stream is created by
  ``XADD … MAXLEN 0`` or, if it never had an entry, by ``XGROUP CREATE … MKSTREAM`` of a
  temporary group), ``XSETID`` with ENTRIESADDED and MAXDELETEDID, ``XCFGSET`` and one
  ``XIDMPRECORD`` per tracked iid (oldest first), and per group ``XGROUP CREATE … ENTRIESREAD``,
  ``XGROUP CREATECONSUMER`` per consumer, ``XCLAIM … FORCE JUSTID`` per owned pending entry
  and, for the NACK zone, ``XNACK … FAIL IDS n id… RETRYCOUNT c FORCE`` batches (at most 64
  IDs sharing a count) in zone order, so the order of nacking survives the rewrite.

What a rewrite cannot carry (as in Redis): pending entries and iids whose stream entry was
deleted (XCLAIM FORCE and XIDMPRECORD need the entry), tombstones and node boundaries,
consumers' seen/active times, and lifetime counters such as iids-added.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from pathlib import Path

from headwater.activeactive.rstream import RegionStream
from headwater.keyspace import Database
from headwater.persistence.aof import encode_command
from headwater.persistence.manifest import fsync_dir
from headwater.resp.encoder import encode_command_into, format_double
from headwater.stream.groups import UNKNOWN, Group, key_id, nack_commands
from headwater.stream.ids import MIN_ID, format_id
from headwater.stream.stream import Entry, Stream
from headwater.structures.lists import ListValue
from headwater.structures.sets import SetValue
from headwater.structures.zsets import ZSetValue
from headwater.values import Hash, RawString

Command = list[bytes]
_HSET_CHUNK = 64
#: members per RPUSH (Redis's AOF_REWRITE_ITEMS_PER_CMD)
_LIST_CHUNK = 64


def rewrite_commands(dbs: list[Database]) -> Iterator[Command]:
    persisted = dbs[0].keyspace.persisted if dbs else None
    if persisted is not None:  # an active-active region: its whole state, as one command
        yield [b"AARESTORE", persisted.dump_state()]
    for db in dbs:
        if not db.data:
            continue
        yield [b"SELECT", b"%d" % db.index]
        for key, value in list(db.data.items()):
            if isinstance(value, RegionStream):
                continue  # (in AARESTORE)
            yield from _value_commands(key, value)
            when = db.expires.get(key)
            if when is not None:
                yield [b"PEXPIREAT", key, b"%d" % when]


def _value_commands(key: bytes, value: object) -> Iterator[Command]:
    if isinstance(value, Stream):
        yield from _stream_commands(key, value)
    elif isinstance(value, Hash):
        items = [x for pair in value.items() for x in pair]
        for i in range(0, len(items), 2 * _HSET_CHUNK):
            yield [b"HSET", key, *items[i : i + 2 * _HSET_CHUNK]]
        if value.ttls is not None:
            yield from _field_ttl_commands(key, value.ttls.deadlines)
    elif isinstance(value, SetValue):
        members = value.ordered()
        for i in range(0, len(members), _HSET_CHUNK * 2):
            yield [b"SADD", key, *members[i : i + _HSET_CHUNK * 2]]
    elif isinstance(value, ZSetValue):
        items = [x for score, member in value for x in (format_double(score), member)]
        for i in range(0, len(items), 2 * _HSET_CHUNK):
            yield [b"ZADD", key, *items[i : i + 2 * _HSET_CHUNK]]
    elif isinstance(value, ListValue):
        # (RPUSH batches as Redis's rewriteListObject; replay lays the nodes out by the push
        # rules, so a layout LINSERT made may come back packed differently, as in Redis)
        batch: list[bytes] = []
        for member in value:
            batch.append(member)
            if len(batch) == _LIST_CHUNK:
                yield [b"RPUSH", key, *batch]
                batch = []
        if batch:
            yield [b"RPUSH", key, *batch]
    elif isinstance(value, RawString):  # APPEND to an existing string makes it raw
        yield [b"SET", key, b""]
        yield [b"APPEND", key, bytes(value)]
    elif isinstance(value, bytes):
        yield [b"SET", key, value]
    else:
        raise TypeError(f"cannot rewrite a {type(value).__name__}")


def _field_ttl_commands(key: bytes, deadlines: dict[bytes, int]) -> Iterator[Command]:
    by_deadline: dict[int, list[bytes]] = {}
    for field, when in deadlines.items():
        by_deadline.setdefault(when, []).append(field)
    for when, fields in sorted(by_deadline.items()):
        for i in range(0, len(fields), 2 * _HSET_CHUNK):
            chunk = fields[i : i + 2 * _HSET_CHUNK]
            yield [b"HPEXPIREAT", key, b"%d" % when, b"FIELDS", b"%d" % len(chunk), *chunk]


def _entry_command(key: bytes, entry: Entry) -> Command:
    return [b"XADD", key, format_id(entry[0]), *entry[1]]


def _stream_commands(key: bytes, stream: Stream) -> Iterator[Command]:
    if stream.length:
        for node in stream.nodes:
            entries: list[Entry] = []
            node.collect(0, len(node), False, -1, entries)
            for entry in entries:
                yield _entry_command(key, entry)
    elif stream.last_id != MIN_ID:
        yield [b"XADD", key, b"MAXLEN", b"0", format_id(stream.last_id), b"x", b"y"]
    else:
        yield [b"XGROUP", b"CREATE", key, b"headwater-rewrite", b"0", b"MKSTREAM"]
        yield [b"XGROUP", b"DESTROY", key, b"headwater-rewrite"]
    yield [
        b"XSETID", key, format_id(stream.last_id),
        b"ENTRIESADDED", b"%d" % stream.entries_added,
        b"MAXDELETEDID", format_id(stream.max_deleted_id),
    ]  # fmt: skip
    yield [
        b"XCFGSET", key,
        b"IDMP-DURATION", b"%d" % stream.idmp_duration,
        b"IDMP-MAXSIZE", b"%d" % stream.idmp_maxsize,
    ]  # fmt: skip
    if stream.idmp is not None:
        for pid, producer in stream.idmp.producers.items():
            for iid, sid in producer.entries():
                if stream.get(sid) is not None:
                    yield [b"XIDMPRECORD", key, pid, iid, format_id(sid)]
    for name in sorted(stream.groups):
        yield from _group_commands(key, stream, stream.groups[name])


def _group_commands(key: bytes, stream: Stream, group: Group) -> Iterator[Command]:
    create = [b"XGROUP", b"CREATE", key, group.name, format_id(group.last_id)]
    if group.entries_read != UNKNOWN:
        create += [b"ENTRIESREAD", b"%d" % group.entries_read]
    yield create
    for name in group.consumers:
        yield [b"XGROUP", b"CREATECONSUMER", key, group.name, name]
    for pel_key in group.order:
        delivery_ms, count, owner = group.pel[pel_key]
        sid = key_id(pel_key)
        if owner is None or stream.get(sid) is None:
            continue
        yield [
            b"XCLAIM", key, group.name, owner, b"0", format_id(sid),
            b"TIME", b"%d" % delivery_ms, b"RETRYCOUNT", b"%d" % count, b"FORCE", b"JUSTID",
        ]  # fmt: skip
    zone = [
        (pel_key, group.pel[pel_key][1])
        for pel_key in group.nacked
        if stream.get(key_id(pel_key)) is not None
    ]
    yield from nack_commands(key, group.name, zone)


def write_base(path: Path, dbs: list[Database], libraries: Sequence[bytes] = ()) -> None:
    """Write the rewrite to path durably (a temporary file renamed into place); the
    FUNCTION ``libraries`` first, as FUNCTION LOAD REPLACE."""
    tmp = path.with_name(f"temp-rewrite-{path.name}")
    with open(tmp, "wb") as f:
        chunk = bytearray()
        for code in libraries:
            chunk += encode_command([b"FUNCTION", b"LOAD", b"REPLACE", code])
        for argv in rewrite_commands(dbs):
            encode_command_into(chunk, argv)
            if len(chunk) >= 1 << 20:
                f.write(chunk)
                chunk.clear()
        f.write(chunk)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)
