"""RDB objects: a type byte and the value's encoding, for every type Redis 7.4 writes.

Reading gives type-neutral values for the types Headwater does not hold yet (``ListValue``,
``SetValue``, ``ZSetValue``), a ``HashValue`` (field order kept; field TTLs of Redis 7.4's
hash types), ``bytes`` for strings and a Headwater ``Stream`` for streams. Writing covers what
Headwater holds (strings, hashes, streams) with the encodings Redis 7.0 chooses, and the
listpack/intset building blocks the other types will use.

Type bytes (``rdb.h``) and the Redis version that first wrote each::

    0 string          1 list (linked)     2 set            3 zset (text scores)  4 hash
    5 zset 2 (binary scores, 2.8)         9 hash zipmap    10 list ziplist       11 set intset
    12 zset ziplist   13 hash ziplist     14 list quicklist (3.2)                15 stream (5.0)
    16 hash listpack  17 zset listpack    18 list quicklist 2 (listpack nodes)   19 stream 2 (7.0)
    20 set listpack   21 stream 3 (7.2)   22/23 hash with field TTLs (7.4 RC)
    24 hash metadata (field TTLs, 7.4)    25 hash listpack with TTLs (7.4)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from headwater.rdb import intset, listpack, ziplist
from headwater.rdb.encoding import (
    RdbError,
    Reader,
    write_double,
    write_len,
    write_ms,
    write_string,
)
from headwater.rdb.streams import (
    TYPE_STREAM_LISTPACKS,
    TYPE_STREAM_LISTPACKS_2,
    TYPE_STREAM_LISTPACKS_3,
    TYPE_STREAM_LISTPACKS_4,
    read_stream,
    write_stream,
)
from headwater.stream.stream import Stream

TYPE_STRING = 0
TYPE_LIST = 1
TYPE_SET = 2
TYPE_ZSET = 3
TYPE_HASH = 4
TYPE_ZSET_2 = 5
TYPE_MODULE_PRE_GA = 6
TYPE_MODULE_2 = 7
TYPE_HASH_ZIPMAP = 9
TYPE_LIST_ZIPLIST = 10
TYPE_SET_INTSET = 11
TYPE_ZSET_ZIPLIST = 12
TYPE_HASH_ZIPLIST = 13
TYPE_LIST_QUICKLIST = 14
TYPE_HASH_LISTPACK = 16
TYPE_ZSET_LISTPACK = 17
TYPE_LIST_QUICKLIST_2 = 18
TYPE_SET_LISTPACK = 20
TYPE_HASH_METADATA_PRE_GA = 22
TYPE_HASH_LISTPACK_EX_PRE_GA = 23
TYPE_HASH_METADATA = 24
TYPE_HASH_LISTPACK_EX = 25
#: the latest field expiry Redis 7.4 represents (EB_EXPIRE_TIME_MAX, 48 bits of ms)
FIELD_EXPIRE_MAX = (1 << 48) - 1

#: the first RDB version that may hold each type (a payload's version must be at least it)
MIN_VERSION = {
    TYPE_STREAM_LISTPACKS_2: 10,
    TYPE_HASH_LISTPACK: 10,
    TYPE_ZSET_LISTPACK: 10,
    TYPE_LIST_QUICKLIST_2: 10,
    TYPE_SET_LISTPACK: 11,
    TYPE_STREAM_LISTPACKS_3: 11,
    TYPE_HASH_METADATA_PRE_GA: 12,
    TYPE_HASH_LISTPACK_EX_PRE_GA: 12,
    TYPE_HASH_METADATA: 12,
    TYPE_HASH_LISTPACK_EX: 12,
    TYPE_STREAM_LISTPACKS_4: 13,
}

#: quicklist 2 node containers
_QUICKLIST_PLAIN = 1
_QUICKLIST_PACKED = 2


@dataclass
class ListValue:
    items: list[bytes]
    #: the members of each stored listpack (or ziplist) node, as stored; None for a linked
    #: list (type 1), whose members Redis pushes one by one
    nodes: list[list[bytes]] | None = field(default=None, compare=False)

    # (each value class spells out its ``__init__``: compiled, the one ``dataclass`` makes
    # stays interpreted, ~2k instructions a value read)
    def __init__(self, items: list[bytes], nodes: list[list[bytes]] | None = None) -> None:
        self.items = items
        self.nodes = nodes


@dataclass
class SetValue:
    members: list[bytes]
    #: the payload's encoding was a listpack (its order is kept on load, as Redis 7.2 does)
    listpack: bool = False
    #: the payload's encoding was an intset: every member is int64 decimal text, ascending
    intset: bool = field(default=False, compare=False)

    def __init__(self, members: list[bytes], listpack: bool = False, intset: bool = False) -> None:
        self.members = members
        self.listpack = listpack
        self.intset = intset


@dataclass
class ZSetValue:
    """The members and their scores, two columns in the order stored (a listpack's is
    ascending; a skiplist is saved from its greatest member down)."""

    members: list[bytes]
    scores: list[float]

    def __init__(self, members: list[bytes], scores: list[float]) -> None:
        self.members = members
        self.scores = scores

    @property
    def items(self) -> list[tuple[bytes, float]]:
        """(member, score) pairs in the order stored."""
        return list(zip(self.members, self.scores, strict=True))


@dataclass
class HashValue:
    #: field -> value, in the order stored
    fields: dict[bytes, bytes]
    #: field -> absolute expiry in ms (Redis 7.4 hash field TTLs), for the fields that have one
    expires: dict[bytes, int] = field(default_factory=dict)
    #: the payload's encoding was a listpack (Redis may still convert it on load)
    listpack: bool = False

    def __init__(
        self,
        fields: dict[bytes, bytes],
        expires: dict[bytes, int] | None = None,
        listpack: bool = False,
    ) -> None:
        self.fields = fields
        self.expires = {} if expires is None else expires
        self.listpack = listpack

    @property
    def pairs(self) -> list[tuple[bytes, bytes]]:
        """(field, value) pairs in the order stored."""
        return list(self.fields.items())


Value = bytes | ListValue | SetValue | ZSetValue | HashValue | Stream


# ---------------------------------------------------------------------------------------------
# Reading


def read_type(r: Reader) -> int:
    return r.byte()


def read_value(r: Reader, rdb_type: int) -> Value:
    """The object of this type at the reader (raises ``RdbError``; empty values are errors,
    as Redis's loader treats an empty key as a corrupt one)."""
    reader = _READERS.get(rdb_type)
    if reader is None:
        if rdb_type in (TYPE_MODULE_PRE_GA, TYPE_MODULE_2):
            raise RdbError("module values are not supported")
        raise RdbError(f"unknown RDB object type {rdb_type}")
    value = reader(r, rdb_type)
    if not isinstance(value, bytes | Stream) and _empty(value):
        raise RdbError("empty collection")
    return value


def _empty(value: Value) -> bool:
    if isinstance(value, ListValue):
        return not value.items
    if isinstance(value, SetValue):
        return not value.members
    if isinstance(value, ZSetValue):
        return not value.members
    if isinstance(value, HashValue):
        return not value.fields
    return False


def _read_string(r: Reader, _t: int) -> Value:
    return r.string()


def _strings(r: Reader) -> list[bytes]:
    return r.strings(r.count())


def _as_bytes_list(elements: Sequence[bytes | int]) -> list[bytes]:
    return [listpack.as_bytes(e) for e in elements]


def _read_list(r: Reader, t: int) -> Value:
    if t == TYPE_LIST:
        return ListValue(_strings(r))
    if t == TYPE_LIST_ZIPLIST:
        items = _as_bytes_list(ziplist.decode(r.string()))
        return ListValue(items, [items])
    items = []
    nodes: list[list[bytes]] = []
    for _ in range(r.count()):
        if t == TYPE_LIST_QUICKLIST:
            node = _as_bytes_list(ziplist.decode(r.string()))
        else:
            container = r.length()
            if container == _QUICKLIST_PLAIN:
                node = [r.string()]
            elif container != _QUICKLIST_PACKED:
                raise RdbError(f"unknown quicklist container {container}")
            else:
                node = listpack.decode_text(r.string())
        if node:  # (Redis skips empty nodes)
            nodes.append(node)
            items += node
    return ListValue(items, nodes)


def _unique(members: list[bytes], what: str) -> None:
    if len(set(members)) != len(members):
        raise RdbError(f"duplicate {what}")


def _read_set(r: Reader, t: int) -> Value:
    if t == TYPE_SET:
        members = _strings(r)
    elif t == TYPE_SET_INTSET:
        # (``decode`` checked them strictly ascending: distinct)
        members = [b"%d" % v for v in intset.decode(r.string())]
        return SetValue(members, False, True)
    else:
        members = listpack.decode_text(r.string())
    _unique(members, "set members")
    return SetValue(members, t == TYPE_SET_LISTPACK, t == TYPE_SET_INTSET)


def _score(element: bytes | int) -> float:
    if isinstance(element, int):
        return float(element)
    try:
        score = float(element)
    except ValueError:
        raise RdbError(f"bad sorted set score {element!r}") from None
    if math.isnan(score):
        raise RdbError("NaN sorted set score")
    return score


def _read_zset(r: Reader, t: int) -> Value:
    members: list[bytes] = []
    scores: list[float] = []
    if t == TYPE_ZSET_2:
        flat = r.scored_strings(r.count())
        members = cast("list[bytes]", flat[0::2])
        scores = cast("list[float]", flat[1::2])
    elif t == TYPE_ZSET:
        for _ in range(r.count()):
            members.append(r.string())
            score = r.text_double()
            if math.isnan(score):
                raise RdbError("NaN sorted set score")
            scores.append(score)
    else:
        els = ziplist.decode(r.string()) if t == TYPE_ZSET_ZIPLIST else listpack.decode(r.string())
        if len(els) % 2:
            raise RdbError("sorted set listpack with an odd number of elements")
        members = [listpack.as_bytes(e) for e in els[0::2]]
        scores = [_score(e) for e in els[1::2]]
    if len(set(members)) != len(members):
        raise RdbError("duplicate sorted set members")
    return ZSetValue(members, scores)


def _read_hash(r: Reader, t: int) -> Value:
    expires: dict[bytes, int] = {}
    if t == TYPE_HASH:
        words = r.strings(2 * r.count(2))
        return _hash(words, expires, False)
    if t == TYPE_HASH_ZIPMAP:
        pairs = ziplist.decode_zipmap(r.string())
    elif t in (TYPE_HASH_ZIPLIST, TYPE_HASH_LISTPACK):
        if t == TYPE_HASH_ZIPLIST:
            els = _as_bytes_list(ziplist.decode(r.string()))
        else:
            els = listpack.decode_text(r.string())
        if len(els) % 2:
            raise RdbError("hash listpack with an odd number of elements")
        return _hash(els, expires, True)
    elif t in (TYPE_HASH_LISTPACK_EX, TYPE_HASH_LISTPACK_EX_PRE_GA):
        if t == TYPE_HASH_LISTPACK_EX:
            r.ms()  # the smallest field expiry, a hint Redis recomputes
        triples = listpack.decode(r.string())
        if len(triples) % 3:
            raise RdbError("hash listpack-ex elements are not triples")
        pairs = []
        for i in range(0, len(triples), 3):
            name = listpack.as_bytes(triples[i])
            pairs.append((name, listpack.as_bytes(triples[i + 1])))
            expiry = triples[i + 2]
            if not isinstance(expiry, int):
                raise RdbError("hash field expiry is not an integer")
            if not 0 <= expiry <= FIELD_EXPIRE_MAX:
                raise RdbError(f"hash field expiry {expiry} out of range")
            if expiry:
                expires[name] = expiry
    else:  # TYPE_HASH_METADATA(_PRE_GA): per field a TTL, then field and value
        base = r.ms() if t == TYPE_HASH_METADATA else 0
        pairs = []
        for _ in range(r.count(3)):
            stored = r.length()
            fname, fvalue = r.string(), r.string()
            if stored:
                when = stored + base - 1 if t == TYPE_HASH_METADATA else stored
                if not 0 < when <= FIELD_EXPIRE_MAX:
                    raise RdbError(f"hash field expiry {when} out of range")
                expires[fname] = when
            pairs.append((fname, fvalue))
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise RdbError("duplicate hash fields")
    listpack_types = (TYPE_HASH_ZIPMAP, TYPE_HASH_LISTPACK_EX)
    return HashValue(fields, expires, t in listpack_types)


def _hash(words: list[bytes], expires: dict[bytes, int], packed: bool) -> HashValue:
    """field, value, field, value… as a hash (no pair made per field)."""
    fields = dict(zip(words[0::2], words[1::2], strict=True))
    if 2 * len(fields) != len(words):
        raise RdbError("duplicate hash fields")
    return HashValue(fields, expires, packed)


def _read_stream(r: Reader, t: int) -> Value:
    return read_stream(r, t)


_READERS = {
    TYPE_STRING: _read_string,
    TYPE_LIST: _read_list,
    TYPE_LIST_ZIPLIST: _read_list,
    TYPE_LIST_QUICKLIST: _read_list,
    TYPE_LIST_QUICKLIST_2: _read_list,
    TYPE_SET: _read_set,
    TYPE_SET_INTSET: _read_set,
    TYPE_SET_LISTPACK: _read_set,
    TYPE_ZSET: _read_zset,
    TYPE_ZSET_2: _read_zset,
    TYPE_ZSET_ZIPLIST: _read_zset,
    TYPE_ZSET_LISTPACK: _read_zset,
    TYPE_HASH: _read_hash,
    TYPE_HASH_ZIPMAP: _read_hash,
    TYPE_HASH_ZIPLIST: _read_hash,
    TYPE_HASH_LISTPACK: _read_hash,
    TYPE_HASH_LISTPACK_EX: _read_hash,
    TYPE_HASH_LISTPACK_EX_PRE_GA: _read_hash,
    TYPE_HASH_METADATA: _read_hash,
    TYPE_HASH_METADATA_PRE_GA: _read_hash,
    TYPE_STREAM_LISTPACKS: _read_stream,
    TYPE_STREAM_LISTPACKS_2: _read_stream,
    TYPE_STREAM_LISTPACKS_3: _read_stream,
    TYPE_STREAM_LISTPACKS_4: _read_stream,
}


# ---------------------------------------------------------------------------------------------
# Writing


def write_string_object(out: bytearray, value: bytes) -> None:
    out.append(TYPE_STRING)
    write_string(out, value)


def write_hash_object(
    out: bytearray,
    pairs: Sequence[tuple[bytes, bytes]],
    as_listpack: bool,
    expires: Mapping[bytes, int] | None = None,
) -> None:
    """A hash as Redis saves it: a listpack (fields in order) or a field/value table as 7.0
    does; with field TTLs (``expires``: field -> absolute ms) as Redis 7.4 does, in an RDB
    version 12 payload::

        25 HASH_LISTPACK_EX  <min expiry ms, int64 LE> <listpack of field, value, expiry
                             triples: expiry 0 = none; fields with one first, by expiry>
        24 HASH_METADATA     <min expiry ms, int64 LE> <count> then per field
                             <len: expiry - min + 1, 0 = none> <field> <value>
    """
    if expires:
        _write_hash_with_ttls(out, pairs, as_listpack, expires)
        return
    if as_listpack:
        out.append(TYPE_HASH_LISTPACK)
        write_string(out, listpack.encode([x for pair in pairs for x in pair]))
        return
    out.append(TYPE_HASH)
    write_len(out, len(pairs))
    for name, value in pairs:
        write_string(out, name)
        write_string(out, value)


def write_hash_mapping(out: bytearray, fields: Mapping[bytes, bytes], as_listpack: bool) -> None:
    """``write_hash_object`` of a hash without field TTLs, a listpack straight from its
    mapping (no pair made per field)."""
    if as_listpack:
        out.append(TYPE_HASH_LISTPACK)
        write_string(out, listpack.encode_mapping(fields))
        return
    write_hash_object(out, list(fields.items()), False)


def _write_hash_with_ttls(
    out: bytearray,
    pairs: Sequence[tuple[bytes, bytes]],
    as_listpack: bool,
    expires: Mapping[bytes, int],
) -> None:
    for when in expires.values():
        if not 0 < when <= FIELD_EXPIRE_MAX:
            raise RdbError(f"hash field expiry {when} out of range")
    least = min(expires.values())
    if as_listpack:
        # (Redis keeps a listpackex hash's fields with a TTL first, by TTL, then the others)
        timed = sorted((p for p in pairs if p[0] in expires), key=lambda p: expires[p[0]])
        rest = [p for p in pairs if p[0] not in expires]
        elements: list[bytes | int] = []
        for name, value in timed + rest:
            elements += (name, value, expires.get(name, 0))
        out.append(TYPE_HASH_LISTPACK_EX)
        write_ms(out, least)
        write_string(out, listpack.encode(elements))
        return
    out.append(TYPE_HASH_METADATA)
    write_ms(out, least)
    write_len(out, len(pairs))
    for name, value in pairs:
        deadline = expires.get(name)
        write_len(out, 0 if deadline is None else deadline - least + 1)
        write_string(out, name)
        write_string(out, value)


def write_stream_object(
    out: bytearray, stream: Stream, rdb_type: int = TYPE_STREAM_LISTPACKS_2
) -> None:
    out.append(rdb_type)
    write_stream(out, stream, rdb_type)


def write_list_object(out: bytearray, node_values: Sequence[Sequence[bytes]]) -> None:
    """A list as a quicklist 2 of packed nodes (``node_values``: the items of each node, as
    the list's ``list-max-listpack-size`` split them), as Redis 7.0 and 7.2 save any list
    (7.2's listpack encoding as one node)."""
    out.append(TYPE_LIST_QUICKLIST_2)
    write_len(out, len(node_values))
    for node in node_values:
        write_len(out, _QUICKLIST_PACKED)
        write_string(out, listpack.encode(node))


def write_zset_object(
    out: bytearray,
    pairs: Sequence[tuple[float, bytes]],
    as_listpack: bool,
    score_text: Callable[[float], bytes],
) -> None:
    """A sorted set as Redis 7.0 saves it: a listpack of member, score (as text, stored as an
    integer when it is one) in order, or a ZSET_2 of (member, binary double) from the
    highest down (Redis writes the skiplist from its tail, so that a load inserts at the
    head)."""
    if as_listpack:
        out.append(TYPE_ZSET_LISTPACK)
        write_string(out, listpack.encode([x for s, m in pairs for x in (m, score_text(s))]))
        return
    out.append(TYPE_ZSET_2)
    write_len(out, len(pairs))
    for score, member in reversed(pairs):
        write_string(out, member)
        write_double(out, score)


def write_set_object(out: bytearray, members: Sequence[bytes], encoding: str) -> None:
    """A set as ``intset`` (every member an integer), ``listpack`` or ``hashtable``."""
    if encoding == "intset":
        out.append(TYPE_SET_INTSET)
        write_string(out, intset.encode(int(m) for m in members))
    elif encoding == "listpack":
        out.append(TYPE_SET_LISTPACK)
        write_string(out, listpack.encode(members))
    else:
        out.append(TYPE_SET)
        write_len(out, len(members))
        for member in members:
            write_string(out, member)
