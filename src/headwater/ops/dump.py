"""DUMP and RESTORE: keyspace values to Redis payloads and back, and RESTORE's one write rule.

``dump_payload`` serializes a value as Redis 7.0 would (``createDumpPayload``); ``decode_payload``
turns a payload into a value ready for the keyspace, or raises a ``ReplyError`` with Redis's
text, having changed nothing; ``restore`` puts it at the key. The handler (``commands/dump.py``),
AOF replay and the replica link all reach ``restore`` through the same command line, since the
effect of a RESTORE is a RESTORE with an absolute TTL (``RESTORE key <unix ms> payload …
ABSTTL``), as in Redis.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from headwater.config import Config
from headwater.errors import ReplyError, err
from headwater.keyspace import Database
from headwater.ops.hashttl import track_field_ttls
from headwater.rdb import payload as rdb_payload
from headwater.rdb.encoding import RdbError
from headwater.rdb.objects import (
    HashValue,
    ListValue,
    Value,
    write_hash_mapping,
    write_hash_object,
    write_list_object,
    write_set_object,
    write_stream_object,
    write_string_object,
    write_zset_object,
)
from headwater.rdb.objects import SetValue as RdbSet
from headwater.rdb.objects import ZSetValue as RdbZSet
from headwater.rdb.streams import TYPE_STREAM_LISTPACKS_2, TYPE_STREAM_LISTPACKS_4, Unencodable
from headwater.resp.encoder import format_double
from headwater.stream.stream import Stream
from headwater.structures.lists import ListValue as KeyspaceList
from headwater.structures.lists import Node
from headwater.structures.sets import HASHTABLE, INTSET, LISTPACK, SetLimits, SetValue
from headwater.structures.zsets import ZSetLimits, ZSetValue, ascending
from headwater.values import Hash

BAD_PAYLOAD = err("DUMP payload version or checksum are wrong")
BAD_DATA = err("Bad data format")


#: values whose type Headwater does not hold yet: refused by name, never dropped
def dump_payload(value: object) -> bytes:
    """The DUMP payload of a keyspace value (RDB version 10, what Redis 7.0 writes; 12, Redis
    7.4's, for a hash with field TTLs)."""
    out = bytearray()
    version = write_object(out, value)
    return rdb_payload.wrap(out, version)


def write_object(out: bytearray, value: object) -> int:
    """The value's RDB object (type byte first) into ``out``; the RDB version it needs (10,
    Redis 7.0's; 12, Redis 7.4's, for a hash with field TTLs; 13, Redis 8.6's, for a stream
    with IDMP history, so that a stream MIGRATE moves keeps deduplicating its producers'
    retries)."""
    if isinstance(value, bytes):
        write_string_object(out, value)
    elif isinstance(value, Hash):
        ttls = value.ttls
        if ttls is not None and len(ttls):
            # Redis 7.4's layouts for field TTLs, in an RDB version 12 payload (7.0 cannot
            # load these; a hash without field TTLs stays 7.0's)
            expires = {f: when for f in value if (when := ttls.get(f)) is not None}
            write_hash_object(out, list(value.items()), value.listpack, expires)
            return rdb_payload.VERSION_7_4
        write_hash_mapping(out, value, value.listpack)
    elif isinstance(value, SetValue):
        # (intsets as intsets; any other set as a plain set, which Redis 7.0 can load and
        # 7.2 turns back into a listpack when it is small: 7.0 has no listpack sets)
        encoding = "intset" if value.encoding == INTSET else "hashtable"
        write_set_object(out, value.ordered(), encoding)
    elif isinstance(value, ZSetValue):
        write_zset_object(out, list(value), value.listpack, format_double)
    elif isinstance(value, KeyspaceList):
        # (a quicklist 2 of its nodes, as both 7.0 and 7.2 save a list; a listpack as one)
        write_list_object(out, value.node_items())
    elif isinstance(value, Stream):
        if has_idmp_history(value):
            _write_stream(out, value, TYPE_STREAM_LISTPACKS_4)
            return rdb_payload.VERSION_8_6
        _write_stream(out, value)
    else:
        raise err("DUMP of this type is not supported")
    return rdb_payload.VERSION_7_0


def has_idmp_history(stream: Stream) -> bool:
    """The stream remembers producers' iids (what Redis 7.0's format has no place for)."""
    return stream.idmp is not None and bool(stream.idmp.producers)


def _write_stream(out: bytearray, stream: Stream, rdb_type: int = TYPE_STREAM_LISTPACKS_2) -> None:
    try:
        write_stream_object(out, stream, rdb_type)
    except Unencodable as exc:
        raise err(f"DUMP is not possible: {exc}") from None


def write_object_70(out: bytearray, value: object) -> None:
    """The value's RDB object as Redis 7.0 can load it: a hash's field TTLs and a stream's
    IDMP history left out (an RDB version 10 file, a Redis 7.0 replica)."""
    if isinstance(value, Hash) and value.ttls is not None and len(value.ttls):
        write_hash_mapping(out, value, value.listpack)
    elif isinstance(value, Stream):
        _write_stream(out, value)
    else:
        write_object(out, value)


def payload_for_redis_70(raw: bytes) -> bytes:
    """A DUMP payload Redis 7.0 RESTOREs: ``raw`` itself when it already is one (or is not a
    payload at all: the replica answers it as it would have), else its value written again
    by ``write_object_70``. (The version is read from the footer first: the usual payload
    goes through without its checksum computed a second time.)"""
    try:
        if rdb_payload.version_of(raw) <= rdb_payload.VERSION_7_0:
            return raw
        value = decode_payload(raw, Limits())
    except (rdb_payload.PayloadError, ReplyError):
        return raw
    out = bytearray()
    write_object_70(out, value)
    return rdb_payload.wrap(out, rdb_payload.VERSION_7_0)


_DEFAULT_SETS = SetLimits()
_DEFAULT_ZSETS = ZSetLimits()


@dataclass(frozen=True)
class Limits:
    """The settings a loaded value takes from the server's configuration."""

    hash_max_entries: int = 512
    hash_max_value: int = 64
    stream_idmp_duration: int = 100
    stream_idmp_maxsize: int = 100
    sets: SetLimits = _DEFAULT_SETS
    zsets: ZSetLimits = _DEFAULT_ZSETS
    #: ``list-max-listpack-size``
    list_fill: int = -2

    @classmethod
    def of(cls, config: Config) -> Limits:
        """The limits of a server with this configuration (RESTORE's, an RDB file's load)."""
        return cls(
            config["hash-max-listpack-entries"],
            config["hash-max-listpack-value"],
            config["stream-idmp-duration"],
            config["stream-idmp-maxsize"],
            SetLimits(
                config["set-max-intset-entries"],
                config["set-max-listpack-entries"],
                config["set-max-listpack-value"],
            ),
            ZSetLimits(config["zset-max-listpack-entries"], config["zset-max-listpack-value"]),
            config["list-max-listpack-size"],
        )


def decode_payload(raw: bytes, limits: Limits) -> object:
    """The keyspace value a payload holds. Raises Redis's RESTORE errors (the version or
    checksum; ``Bad data format``)."""
    try:
        rdb_payload.verify(raw)
    except rdb_payload.PayloadError:
        raise BAD_PAYLOAD from None
    try:
        _, decoded = rdb_payload.load(raw)
    except RdbError:
        raise BAD_DATA from None
    return keyspace_value(decoded, limits)


def keyspace_value(decoded: Value, limits: Limits) -> object:
    """A decoded RDB value as the keyspace holds it (a string, a ``Hash`` with the encoding
    Redis would give it by these limits, a ``Stream``)."""
    if isinstance(decoded, bytes):
        return decoded
    if isinstance(decoded, Stream):
        if not decoded.idmp_duration:  # (a type before Redis 8.6's: no settings of its own)
            decoded.idmp_duration = limits.stream_idmp_duration
            decoded.idmp_maxsize = limits.stream_idmp_maxsize
        return decoded
    if isinstance(decoded, HashValue):
        h = Hash()
        h.update(decoded.fields)
        if decoded.expires:
            ttls = h.field_ttls()
            for field, when in decoded.expires.items():
                ttls.set(field, when)
        h.listpack = len(h) <= limits.hash_max_entries and _within(h, limits.hash_max_value)
        return h
    if isinstance(decoded, RdbSet):
        return _loaded_set(decoded, limits.sets)
    if isinstance(decoded, RdbZSet):
        return _loaded_zset(decoded, limits.zsets)
    if isinstance(decoded, ListValue):
        return loaded_list(decoded, limits.list_fill)
    raise BAD_DATA  # (the reader makes no other kind of value)


def _within(h: Hash, longest: int) -> bool:
    """No field nor value of the hash is longer than ``longest`` bytes."""
    for f, v in h.items():  # noqa: SIM110 (compiled, a loop makes no generator)
        if len(f) > longest or len(v) > longest:
            return False
    return True


def _loaded_zset(decoded: RdbZSet, limits: ZSetLimits) -> ZSetValue:
    """The set with the encoding zsetTypeCreate gives it for its number and lengths. (The
    reader refused duplicate members and NaN scores.) A listpack is stored in order, and a
    skiplist from its greatest member down: either is taken as its columns, without a pair
    per element; anything else is sorted."""
    members = decoded.members
    longest = 0
    for member in members:
        if len(member) > longest:
            longest = len(member)
    z = ZSetValue.for_size(len(members), longest, limits)
    scores = decoded.scores  # (checked as a list: an array's items are boxed one by one)
    if not ascending(scores, members):
        scores, members = scores[::-1], members[::-1]
        if not ascending(scores, members):
            z.load_ordered(sorted(zip(decoded.scores, decoded.members, strict=True)))
            return z
    z.load_columns(array("d", scores), members, scores)
    return z


def _loaded_set(decoded: RdbSet, limits: SetLimits) -> SetValue:
    """A set as Redis 7.2's loader builds it: a listpack payload stays a listpack in its
    order (while within the limits); any other starts as an intset (a hashtable past
    ``set-max-intset-entries``) and converts as members are added."""
    if decoded.listpack:
        s = SetValue(LISTPACK)
    elif len(decoded.members) > limits.intset_entries:
        # (a hashtable from the start stays one: its members in one go; the reader refused
        # duplicates)
        s = SetValue(HASHTABLE)
        s.members = dict.fromkeys(decoded.members)
        return s
    elif decoded.intset:
        # (an intset within the limit stays one, its members as they come: what adding them
        # one by one gives, without testing each for an integer)
        s = SetValue(INTSET)
        s.members = dict.fromkeys(decoded.members)
        return s
    else:
        s = SetValue(INTSET)
    for member in decoded.members:
        s.add(member, limits)
    return s


def loaded_list(decoded: ListValue, fill: int) -> KeyspaceList:
    """A list as Redis 7.2's loader builds it: a quicklist of the stored nodes as they are
    (a linked list's members pushed one by one), then a listpack if it fits one."""
    lst = KeyspaceList.quicklist(fill)
    if decoded.nodes is None:
        for member in decoded.items:
            lst.push(member, head=False)
    else:
        lst.nodes = [Node.of(members) for members in decoded.nodes]
        lst.count = len(decoded.items)
    lst.shrunk(fill, halve=False)
    return lst


def restore(db: Database, key: bytes, value: object, deadline_ms: int, replace: bool) -> bool:
    """Put a decoded value at key (replacing what is there when ``replace``), with an absolute
    deadline (0: none). Returns whether an old value was deleted."""
    deleted = replace and db.delete(key)
    db.set(key, value)
    if deadline_ms:
        db.set_expire(key, deadline_ms)
    track_field_ttls(db, key, value)
    db.signal_ready(key)
    return deleted
