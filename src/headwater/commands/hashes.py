"""Hash commands (Redis ``t_hash.c``): field/value maps for checkpoints and markers.

A hash is ``keyspace.Hash``, a dict that remembers whether Redis would still keep it as a
listpack (for OBJECT ENCODING); it converts to ``hashtable`` for good once it has more than
``hash-max-listpack-entries`` fields or a field or value longer than ``hash-max-listpack-value``.
A hash left with no fields is deleted.
"""

from __future__ import annotations

from headwater.commands.args import INT64_MAX, INT64_MIN, parse_int, strict_int
from headwater.commands.context import Client, spec
from headwater.commands.notify import lookup_read, notify
from headwater.errors import OVERFLOW, WRONGTYPE, err, wrong_arity
from headwater.keyevents import GENERIC, HASH
from headwater.ops.change import ONE, Written, as_given
from headwater.resp.types import OK, Reply
from headwater.values import Hash

HASH_NOT_INTEGER = err("hash value is not an integer")


def _lookup(c: Client, key: bytes) -> Hash | None:
    """A read's lookup of a hash (counted in INFO stats)."""
    return _as_hash(lookup_read(c, key))


def _hash_to_write(c: Client, key: bytes) -> Hash | None:
    """A write's lookup of a hash (not counted)."""
    return _as_hash(c.db.get(key))


def _as_hash(value: object) -> Hash | None:
    if value is None or isinstance(value, Hash):
        return value
    raise WRONGTYPE


def _lookup_or_create(c: Client, key: bytes) -> Hash:
    value = _hash_to_write(c, key)
    if value is None:
        value = Hash()
        c.db.set(key, value)
    return value


def _store(c: Client, key: bytes, h: Hash, pairs: list[bytes]) -> int:
    """Set field/value pairs; returns how many fields are new."""
    added = 0
    limit_value = c.server.config["hash-max-listpack-value"]
    for i in range(0, len(pairs), 2):
        field, value = pairs[i], pairs[i + 1]
        if field not in h:
            added += 1
        h[field] = value
        if h.listpack and (len(field) > limit_value or len(value) > limit_value):
            h.listpack = False
    if h.listpack and len(h) > c.server.config["hash-max-listpack-entries"]:
        h.listpack = False
    c.db.signal_modified(key)
    return added


def cmd_hset(c: Client, argv: list[bytes]) -> Reply | Written:
    """HSET key field value [field value ...]  (HMSET: same, replies OK)"""
    if len(argv) % 2:
        raise wrong_arity(argv[0].decode("utf-8", "replace").lower())
    h = _lookup_or_create(c, argv[1])
    added = _store(c, argv[1], h, argv[2:])
    notify(c, HASH, b"hset", argv[1])
    return Written(OK if argv[0].upper() == b"HMSET" else added, ONE)


def cmd_hsetnx(c: Client, argv: list[bytes]) -> Reply | Written:
    h = _hash_to_write(c, argv[1])
    if h is not None and argv[2] in h:
        return 0
    _store(c, argv[1], h if h is not None else _lookup_or_create(c, argv[1]), argv[2:4])
    notify(c, HASH, b"hset", argv[1])
    return Written(1, ONE)


def cmd_hget(c: Client, argv: list[bytes]) -> Reply:
    h = _lookup(c, argv[1])
    return None if h is None else h.get(argv[2])


def cmd_hmget(c: Client, argv: list[bytes]) -> Reply:
    h = _lookup(c, argv[1])
    if h is None:
        return [None] * (len(argv) - 2)
    return [h.get(field) for field in argv[2:]]


def cmd_hgetall(c: Client, argv: list[bytes]) -> Reply:
    h = _lookup(c, argv[1])
    return {} if h is None else dict(h)


def cmd_hkeys(c: Client, argv: list[bytes]) -> Reply:
    h = _lookup(c, argv[1])
    return [] if h is None else list(h)


def cmd_hvals(c: Client, argv: list[bytes]) -> Reply:
    h = _lookup(c, argv[1])
    return [] if h is None else list(h.values())


def cmd_hdel(c: Client, argv: list[bytes]) -> Reply | Written:
    h = _hash_to_write(c, argv[1])
    if h is None:
        return 0
    removed = 0
    for field in argv[2:]:
        if h.pop(field, None) is not None:
            removed += 1
    if removed:
        notify(c, HASH, b"hdel", argv[1])
        if not h:
            c.db.delete(argv[1])
            notify(c, GENERIC, b"del", argv[1])
        else:
            c.db.signal_modified(argv[1])
        return Written(removed, as_given(removed))
    return removed


def cmd_hlen(c: Client, argv: list[bytes]) -> Reply:
    h = _lookup(c, argv[1])
    return 0 if h is None else len(h)


def cmd_hstrlen(c: Client, argv: list[bytes]) -> Reply:
    h = _lookup(c, argv[1])
    value = None if h is None else h.get(argv[2])
    return 0 if value is None else len(value)


def cmd_hexists(c: Client, argv: list[bytes]) -> Reply:
    h = _lookup(c, argv[1])
    return int(h is not None and argv[2] in h)


def cmd_hincrby(c: Client, argv: list[bytes]) -> Reply | Written:
    delta = parse_int(argv[3])
    h = _hash_to_write(c, argv[1])
    current = 0
    if h is not None and argv[2] in h:
        parsed = strict_int(h[argv[2]])
        if parsed is None:
            raise HASH_NOT_INTEGER
        current = parsed
    result = current + delta
    if not INT64_MIN <= result <= INT64_MAX:
        raise OVERFLOW
    _store(
        c, argv[1], h if h is not None else _lookup_or_create(c, argv[1]), [argv[2], b"%d" % result]
    )
    notify(c, HASH, b"hincrby", argv[1])
    return Written(result, ONE)


SPECS = (
    spec("hset", -4, "write denyoom fast", (1, 1, 1), cmd_hset),
    spec("hmset", -4, "write denyoom fast", (1, 1, 1), cmd_hset),
    spec("hsetnx", 4, "write denyoom fast", (1, 1, 1), cmd_hsetnx),
    spec("hget", 3, "readonly fast", (1, 1, 1), cmd_hget),
    spec("hmget", -3, "readonly fast", (1, 1, 1), cmd_hmget),
    spec("hgetall", 2, "readonly", (1, 1, 1), cmd_hgetall),
    spec("hkeys", 2, "readonly", (1, 1, 1), cmd_hkeys),
    spec("hvals", 2, "readonly", (1, 1, 1), cmd_hvals),
    spec("hdel", -3, "write fast", (1, 1, 1), cmd_hdel),
    spec("hlen", 2, "readonly fast", (1, 1, 1), cmd_hlen),
    spec("hstrlen", 3, "readonly fast", (1, 1, 1), cmd_hstrlen),
    spec("hexists", 3, "readonly fast", (1, 1, 1), cmd_hexists),
    spec("hincrby", 4, "write denyoom fast", (1, 1, 1), cmd_hincrby),
)
