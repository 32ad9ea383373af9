"""Hash commands (Redis ``t_hash.c``): field/value maps for checkpoints and markers.

A hash is ``values.Hash``, a dict that remembers whether Redis would still keep it as a
listpack (for OBJECT ENCODING); it converts to ``hashtable`` for good once it has more than
``hash-max-listpack-entries`` fields or a field or value longer than ``hash-max-listpack-value``.
A hash left with no fields is deleted.

Field expiration (Redis 7.4: HEXPIRE and its family, HTTL…, HPERSIST): a hash's deadlines
are ``Hash.ttls`` (``structures/fieldttl.py``), None for a hash that never had one, so that
such hashes pay nothing. Every lookup below first deletes the fields that are due
(``ops/hashttl.py``: propagated as HDEL, ``hexpired`` fired, the hash deleted with its last
field), so no reply ever shows an expired field; on a replica, reads see a copy without
them instead (its primary's HDELs delete them). HSET of a field drops its TTL; HINCRBY and
HINCRBYFLOAT keep it. The HEXPIRE family propagates as HPEXPIREAT of the fields it set, and
fields it deleted (a deadline not in the future) as HDEL, as Redis does.
"""

from __future__ import annotations

import random

from headwater.commands import ldouble
from headwater.commands.args import INT64_MAX, INT64_MIN, parse_int, strict_int
from headwater.commands.context import Client, spec
from headwater.commands.keys import matching, parse_cursor, parse_scan_options
from headwater.commands.notify import notify, read_as, write_as
from headwater.commands.sets import scan_step
from headwater.commands.strings import incr_float
from headwater.errors import (
    NOT_FLOAT,
    OVERFLOW,
    SYNTAX,
    ReplyError,
    err,
    wrong_arity,
)
from headwater.keyevents import GENERIC, HASH
from headwater.ops.change import ONE, Change, Line, Written, as_given
from headwater.ops.hashttl import expire_due, may_expire
from headwater.resp.types import OK, Reply
from headwater.values import Hash

HASH_NOT_INTEGER = err("hash value is not an integer")
HASH_NOT_FLOAT = err("hash value is not a float")
#: Redis's HFE_MAX_ABS_TIME_MSEC: (2**48 - 1) >> 2, the latest deadline a field may get
HFE_MAX_MS = ((1 << 48) - 1) >> 2
FIELDS_MISSING = err("Mandatory argument FIELDS is missing or not at the right position")
NUMFIELDS_MISMATCH = err("The `numfields` parameter must match the number of arguments")
#: HRANDFIELD's picks (a test may seed it)
rng = random.Random()

# ---------------------------------------------------------------------------------------------
# Lookups (with the lazy expiry of fields)


def _live(c: Client, key: bytes, h: Hash | None, read: bool) -> Hash | None:
    """The hash without its due fields: deleted on a primary (None if it went with them);
    on a replica a read gets a copy without them, a write (its primary's) the hash."""
    if h is None or h.ttls is None:
        return h
    due = h.ttls.next_deadline()
    now = c.server.keyspace.now_ms
    if due is None or due >= now or c.server.keyspace.loading:
        return h
    if not may_expire(c.db):
        return _visible(h, now) if read else h
    _fields, emptied = expire_due(c.db, key, h)
    notify(c, HASH, b"hexpired", key)
    if emptied:
        notify(c, GENERIC, b"del", key)
        return None
    return h


def _visible(h: Hash, now: int) -> Hash | None:
    """A copy of h without the fields past their deadline (a replica's read)."""
    ttls = h.ttls
    if ttls is None:
        return h
    copy = Hash()
    copy.listpack = h.listpack
    copy_ttls = copy.field_ttls()
    for field, value in h.items():
        when = ttls.get(field)
        if when is None or when >= now:
            copy[field] = value
            if when is not None:
                copy_ttls.set(field, when)
    return copy or None


def _lookup(c: Client, key: bytes) -> Hash | None:
    """A read's lookup of a hash (counted in INFO stats)."""
    return _live(c, key, read_as(c, key, Hash), True)


def _hash_to_write(c: Client, key: bytes) -> Hash | None:
    """A write's lookup of a hash (not counted)."""
    return _live(c, key, write_as(c, key, Hash), False)


def _lookup_or_create(c: Client, key: bytes) -> Hash:
    value = _hash_to_write(c, key)
    if value is None:
        value = Hash()
        c.db.set(key, value)
    return value


def _store(c: Client, key: bytes, h: Hash, pairs: list[bytes], keep_ttl: bool = False) -> int:
    """Set field/value pairs; returns how many fields are new. A field set anew loses its
    TTL unless ``keep_ttl`` (HINCRBY*)."""
    added = 0
    limit_value = c.server.config["hash-max-listpack-value"]
    ttls = None if keep_ttl else h.ttls
    for i in range(0, len(pairs), 2):
        field, value = pairs[i], pairs[i + 1]
        if field not in h:
            added += 1
        elif ttls is not None:
            ttls.discard(field)
        h[field] = value
        if h.listpack and (len(field) > limit_value or len(value) > limit_value):
            h.listpack = False
    if h.listpack and len(h) > c.server.config["hash-max-listpack-entries"]:
        h.listpack = False
    c.db.signal_modified(key)
    return added


# ---------------------------------------------------------------------------------------------
# Fields and values


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
    ttls = h.ttls
    for field in argv[2:]:
        if h.pop(field, None) is not None:
            removed += 1
            if ttls is not None:
                ttls.discard(field)
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
    target = h if h is not None else _lookup_or_create(c, argv[1])
    _store(c, argv[1], target, [argv[2], b"%d" % result], keep_ttl=True)
    notify(c, HASH, b"hincrby", argv[1])
    return Written(result, ONE)


def cmd_hincrbyfloat(c: Client, argv: list[bytes]) -> Reply | Written:
    """HINCRBYFLOAT key field increment: propagated as HSET key field <result> (and, for a
    field with a TTL, HPEXPIREAT of it: HSET alone would drop the TTL on replay)."""
    key, field = argv[1], argv[2]
    increment = ldouble.parse(argv[3])
    if increment is None:
        raise NOT_FLOAT
    if not increment.finite:
        raise err("value is NaN or Infinity")
    h = _hash_to_write(c, key)
    current = None if h is None else h.get(field)
    result = incr_float(current, argv[3], HASH_NOT_FLOAT)
    target = h if h is not None else _lookup_or_create(c, key)
    _store(c, key, target, [field, result], keep_ttl=True)
    notify(c, HASH, b"hincrbyfloat", key)
    line = [b"HSET", key, field, result]
    when = None if target.ttls is None else target.ttls.get(field)
    if when is None:
        return Written(result, Change(1, [line]))
    expire = [b"HPEXPIREAT", key, b"%d" % when, b"FIELDS", b"1", field]
    return Written(result, Change(1, [line, expire]))


# ---------------------------------------------------------------------------------------------
# HRANDFIELD, HSCAN


def cmd_hrandfield(c: Client, argv: list[bytes]) -> Reply:
    """HRANDFIELD key [count [WITHVALUES]]"""
    if len(argv) == 2:
        h = _lookup(c, argv[1])
        return None if h is None else rng.choice(list(h))
    count = strict_int(argv[2])
    if count is None:
        raise err("value is not an integer or out of range")
    if count < -INT64_MAX:
        raise err(f"value is out of range, value must between {-INT64_MAX} and {INT64_MAX}")
    if len(argv) > 4 or (len(argv) == 4 and argv[3].upper() != b"WITHVALUES"):
        raise SYNTAX
    with_values = len(argv) == 4
    if with_values and not -(INT64_MAX // 2) <= count <= INT64_MAX // 2:
        raise err("value is out of range")
    h = _lookup(c, argv[1])
    if h is None or count == 0:
        return []
    fields = list(h)
    if count < 0:  # with repetitions
        picked = [rng.choice(fields) for _ in range(-count)]
    elif count >= len(fields):
        picked = fields
    else:
        picked = rng.sample(fields, count)
    if not with_values:
        return picked
    if c.resp == 3:
        return [[f, h[f]] for f in picked]
    return [x for f in picked for x in (f, h[f])]


def cmd_hscan(c: Client, argv: list[bytes]) -> Reply:
    """HSCAN key cursor [MATCH pattern] [COUNT count] [NOVALUES]"""
    cursor = parse_cursor(argv[2])
    h = _lookup(c, argv[1])  # (before the options, as in Redis: a missing key answers at once)
    if h is None:
        return [b"0", []]
    options: list[bytes] = []
    no_values = False
    i = 3
    while i < len(argv):
        token = argv[i].upper()
        if token in (b"MATCH", b"COUNT") and i + 1 < len(argv):
            options += argv[i : i + 2]
            i += 2
            continue
        if token == b"NOVALUES":
            no_values = True
        else:
            options.append(argv[i])
        i += 1
    count, pattern, _ = parse_scan_options([*argv[:3], *options], 3)
    if h.listpack:  # everything at once, as Redis does for a listpack
        cursor, found = 0, list(h)
    else:
        cursor, found = scan_step(list(h), cursor, count)
    found = matching(found, pattern)
    if no_values:
        return [b"%d" % cursor, found]
    return [b"%d" % cursor, [x for f in found for x in (f, h[f])]]


# ---------------------------------------------------------------------------------------------
# Field expiration (Redis 7.4)

NO_FIELD, NOT_MET, SET_OK, DELETED = -2, 0, 1, 2
_CONDITIONS = (b"NX", b"XX", b"GT", b"LT")


def _fields(argv: list[bytes], at: int, count_error: ReplyError) -> list[bytes]:
    """``FIELDS numfields field …`` starting at argv[at]: the fields."""
    if argv[at].upper() != b"FIELDS":
        raise FIELDS_MISSING
    numfields = parse_int(argv[at + 1], count_error)
    if numfields < 1:
        raise count_error
    if numfields != len(argv) - at - 2:
        raise NUMFIELDS_MISMATCH
    return argv[at + 2 :]


def _deadline(c: Client, name: str, raw: bytes, unit_ms: int, relative: bool) -> int:
    """Redis's parseExpireTime for fields: an absolute deadline in ms up to HFE_MAX_MS."""
    value = parse_int(raw)
    if value < 0:
        raise err("invalid expire time, must be >= 0")
    invalid = err(f"invalid expire time in '{name}' command")
    if unit_ms == 1000:
        if value > HFE_MAX_MS // 1000:
            raise invalid
        value *= 1000
    base = c.server.keyspace.now_ms if relative else 0
    if value > HFE_MAX_MS - base:
        raise invalid
    return value + base


def _hexpire(c: Client, argv: list[bytes], unit_ms: int, relative: bool) -> Reply | Written:
    """HEXPIRE key seconds [NX | XX | GT | LT] FIELDS numfields field [field ...] (and
    HPEXPIRE, HEXPIREAT, HPEXPIREAT)"""
    key = argv[1]
    h = _hash_to_write(c, key)
    when = _deadline(c, argv[0].decode("utf-8", "replace").lower(), argv[2], unit_ms, relative)
    condition = argv[3].upper()
    at = 4 if condition in _CONDITIONS else 3
    fields = _fields(argv, at, err("Parameter `numFields` should be greater than 0"))
    if h is None:
        return [NO_FIELD] * len(fields)
    now = c.server.keyspace.now_ms
    past = when <= now and may_expire(c.db)
    ttls = h.ttls
    earliest = None if ttls is None else ttls.next_deadline()
    results: list[Reply] = []
    updated: list[bytes] = []
    lines: list[Line] = []
    for field in fields:
        if field not in h:
            results.append(NO_FIELD)
            continue
        prev = None if ttls is None else ttls.get(field)
        if prev is None:
            met = condition not in (b"XX", b"GT")  # (no TTL: an infinite one, for GT/LT)
        else:
            met = not (
                (condition == b"GT" and prev >= when)
                or (condition == b"LT" and prev <= when)
                or condition == b"NX"
            )
        if not met:
            results.append(NOT_MET)
        elif past:
            del h[field]
            if ttls is not None:
                ttls.discard(field)
            lines.append([b"HDEL", key, field])
            results.append(DELETED)
        else:
            ttls = h.field_ttls()
            ttls.set(field, when)
            updated.append(field)
            results.append(SET_OK)
    if not updated and not lines:
        return results
    dirty = len(updated) + len(lines)
    c.db.signal_modified(key)
    notify(c, HASH, b"hdel" if lines else b"hexpire", key)
    if not h:
        c.db.delete(key)
        notify(c, GENERIC, b"del", key)
    if updated:
        if earliest is None or when < earliest:
            c.db.schedule_fields(key, when)
        keep = [condition] if at == 4 else []
        lines.append(
            [b"HPEXPIREAT", key, b"%d" % when, *keep, b"FIELDS", b"%d" % len(updated), *updated]
        )
    return Written(results, Change(dirty, lines))


def cmd_hexpire(c: Client, argv: list[bytes]) -> Reply | Written:
    return _hexpire(c, argv, 1000, True)


def cmd_hpexpire(c: Client, argv: list[bytes]) -> Reply | Written:
    return _hexpire(c, argv, 1, True)


def cmd_hexpireat(c: Client, argv: list[bytes]) -> Reply | Written:
    return _hexpire(c, argv, 1000, False)


def cmd_hpexpireat(c: Client, argv: list[bytes]) -> Reply | Written:
    return _hexpire(c, argv, 1, False)


def _httl(c: Client, argv: list[bytes], in_seconds: bool, relative: bool) -> Reply:
    """HTTL key FIELDS numfields field [field ...] (and HPTTL, HEXPIRETIME, HPEXPIRETIME)"""
    h = _lookup(c, argv[1])
    fields = _fields(argv, 2, err("Number of fields must be a positive integer"))
    if h is None:
        return [NO_FIELD] * len(fields)
    now = c.server.keyspace.now_ms
    base = now if relative else 0
    out: list[Reply] = []
    for field in fields:
        when = None if h.ttls is None else h.ttls.get(field)
        if field not in h or (when is not None and when < now):
            out.append(NO_FIELD)
        elif when is None:
            out.append(-1)
        else:
            out.append((when + 999 - base) // 1000 if in_seconds else when - base)
    return out


def cmd_httl(c: Client, argv: list[bytes]) -> Reply:
    return _httl(c, argv, True, True)


def cmd_hpttl(c: Client, argv: list[bytes]) -> Reply:
    return _httl(c, argv, False, True)


def cmd_hexpiretime(c: Client, argv: list[bytes]) -> Reply:
    return _httl(c, argv, True, False)


def cmd_hpexpiretime(c: Client, argv: list[bytes]) -> Reply:
    return _httl(c, argv, False, False)


def cmd_hpersist(c: Client, argv: list[bytes]) -> Reply | Written:
    """HPERSIST key FIELDS numfields field [field ...]"""
    key = argv[1]
    h = _hash_to_write(c, key)
    fields = _fields(argv, 2, err("Number of fields must be a positive integer"))
    if h is None:
        return [NO_FIELD] * len(fields)
    now = c.server.keyspace.now_ms
    out: list[Reply] = []
    changed = False
    for field in fields:
        when = None if h.ttls is None else h.ttls.get(field)
        if field not in h or (when is not None and when < now):
            out.append(NO_FIELD)
        elif when is None or h.ttls is None:
            out.append(-1)
        else:
            h.ttls.discard(field)
            out.append(1)
            changed = True
    if not changed:
        return out
    notify(c, HASH, b"hpersist", key)
    c.db.signal_modified(key)
    return Written(out, ONE)


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
    spec("hincrbyfloat", 4, "write denyoom fast", (1, 1, 1), cmd_hincrbyfloat),
    spec("hrandfield", -2, "readonly", (1, 1, 1), cmd_hrandfield),
    spec("hscan", -3, "readonly", (1, 1, 1), cmd_hscan),
    spec("hexpire", -6, "write fast", (1, 1, 1), cmd_hexpire),
    spec("hpexpire", -6, "write fast", (1, 1, 1), cmd_hpexpire),
    spec("hexpireat", -6, "write fast", (1, 1, 1), cmd_hexpireat),
    spec("hpexpireat", -6, "write fast", (1, 1, 1), cmd_hpexpireat),
    spec("httl", -5, "readonly fast", (1, 1, 1), cmd_httl),
    spec("hpttl", -5, "readonly fast", (1, 1, 1), cmd_hpttl),
    spec("hexpiretime", -5, "readonly fast", (1, 1, 1), cmd_hexpiretime),
    spec("hpexpiretime", -5, "readonly fast", (1, 1, 1), cmd_hpexpiretime),
    spec("hpersist", -5, "write fast", (1, 1, 1), cmd_hpersist),
)
