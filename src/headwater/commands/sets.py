"""Set commands (Redis ``t_set.c``), on ``structures.sets.SetValue``.

Every write returns its change: SADD, SREM, SMOVE and the *STORE commands propagate as
given (they are deterministic); SPOP, which picks at random, propagates what it did: SREMs
of the members it popped (Redis rewrites it the same way, with a DEL when it took them all).
A set left empty is deleted.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Iterable

from headwater.commands.args import parse_int
from headwater.commands.context import Client, spec
from headwater.commands.keys import matching, parse_cursor, parse_scan_options
from headwater.commands.notify import emptied, notify, read_as, write_as
from headwater.errors import SYNTAX, err
from headwater.keyevents import GENERIC, SET
from headwater.ops.change import ONE, Change, Line, Written, as_given, server_del
from headwater.resp.types import Reply, RSet
from headwater.structures.sets import HASHTABLE, INTSET, SetLimits, SetValue

OUT_OF_RANGE_POSITIVE = err("value is out of range, must be positive")
NUMKEYS_NOT_POSITIVE = err("numkeys should be greater than 0")
LIMIT_NEGATIVE = err("LIMIT can't be negative")
#: members per SREM line when SPOP's effect is spelled out (Redis: 1024)
SPOP_BATCH = 1024
#: SRANDMEMBER's and SPOP's picks (a test may seed it)
rng = random.Random()


def limits_of(c: Client) -> SetLimits:
    settings = c.server.config.values  # (the dict itself: no method call per lookup)
    return SetLimits(
        settings["set-max-intset-entries"],
        settings["set-max-listpack-entries"],
        settings["set-max-listpack-value"],
    )


def cmd_sadd(c: Client, argv: list[bytes]) -> Reply | Written:
    key, members = argv[1], argv[2:]
    limits = limits_of(c)
    s = write_as(c, key, SetValue)
    if s is None:
        s = SetValue.for_first(members[0], len(members), limits)
        c.db.set(key, s)
    else:
        s.prepare(len(members), limits)
    added = sum(s.add(member, limits) for member in members)
    if added:
        c.db.signal_modified(key)
        notify(c, SET, b"sadd", key)
        return Written(added, as_given(added))
    return 0


def cmd_srem(c: Client, argv: list[bytes]) -> Reply | Written:
    key = argv[1]
    s = write_as(c, key, SetValue)
    if s is None:
        return 0
    removed = 0
    for member in argv[2:]:
        if s.remove(member):
            removed += 1
            if not s.members:
                break
    if not removed:
        return 0
    notify(c, SET, b"srem", key)
    emptied(c, key, not s.members)
    return Written(removed, as_given(removed))


def cmd_smove(c: Client, argv: list[bytes]) -> Reply | Written:
    source, destination, member = argv[1], argv[2], argv[3]
    src = write_as(c, source, SetValue)
    if src is None:  # (before the destination's type is checked, as in Redis)
        return 0
    dst = write_as(c, destination, SetValue)
    if src is dst:
        return int(member in src)
    if not src.remove(member):
        return 0
    notify(c, SET, b"srem", source)
    limits = limits_of(c)
    if not src.members:
        c.db.delete(source)
        notify(c, GENERIC, b"del", source)
    if dst is None:
        dst = SetValue.for_first(member, 1, limits)
        c.db.set(destination, dst)
    c.db.signal_modified(source)
    dirty = 1
    if dst.add(member, limits):  # (a member already there leaves the destination untouched)
        dirty += 1
        c.db.signal_modified(destination)
        notify(c, SET, b"sadd", destination)
    return Written(1, as_given(dirty))


def cmd_sismember(c: Client, argv: list[bytes]) -> Reply:
    s = read_as(c, argv[1], SetValue)
    return int(s is not None and argv[2] in s)


def cmd_smismember(c: Client, argv: list[bytes]) -> Reply:
    s = read_as(c, argv[1], SetValue)
    if s is None:
        return [0] * (len(argv) - 2)
    return [int(member in s) for member in argv[2:]]


def cmd_scard(c: Client, argv: list[bytes]) -> Reply:
    s = read_as(c, argv[1], SetValue)
    return 0 if s is None else len(s)


def cmd_smembers(c: Client, argv: list[bytes]) -> Reply:
    s = read_as(c, argv[1], SetValue)
    return RSet() if s is None else RSet(s.ordered())


# -- random picks --------------------------------------------------------------------------


def cmd_spop(c: Client, argv: list[bytes]) -> Reply | Written:
    if len(argv) > 3:
        raise SYNTAX
    if len(argv) == 3:
        return _spop_count(c, argv[1], argv[2])
    key = argv[1]
    s = write_as(c, key, SetValue)
    if s is None:
        return None
    member = rng.choice(list(s.members))
    s.remove(member)
    notify(c, SET, b"spop", key)
    emptied(c, key, not s.members)
    return Written(member, Change(1, [[b"SREM", key, member]]))


def _spop_count(c: Client, key: bytes, raw: bytes) -> Reply | Written:
    count = parse_int(raw, OUT_OF_RANGE_POSITIVE)  # (Redis: getPositiveLongFromObject)
    if count < 0:
        raise OUT_OF_RANGE_POSITIVE
    s = write_as(c, key, SetValue)
    if s is None or count == 0:
        return RSet()
    notify(c, SET, b"spop", key)
    if count >= len(s):  # all taken: propagated as the set's deletion (as in Redis)
        popped = s.ordered()
        s.members.clear()
        emptied(c, key, True)
        lazy = c.server.config["lazyfree-lazy-server-del"]
        return Written(RSet(popped), Change(len(popped), [server_del(key, lazy)]))
    popped = rng.sample(list(s.members), count)
    for member in popped:
        s.remove(member)
    emptied(c, key, not s.members)
    lines: list[Line] = [
        [b"SREM", key, *popped[i : i + SPOP_BATCH]] for i in range(0, len(popped), SPOP_BATCH)
    ]
    return Written(RSet(popped), Change(len(popped), lines))


def cmd_srandmember(c: Client, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise SYNTAX
    if len(argv) == 2:
        s = read_as(c, argv[1], SetValue)
        return None if s is None else rng.choice(list(s.members))
    count = parse_int(argv[2])
    if count == -(2**63):  # (LONG_MIN has no positive twin)
        raise err(
            "value is out of range, value must between -9223372036854775807 and 9223372036854775807"
        )
    s = read_as(c, argv[1], SetValue)
    if s is None or count == 0:
        return []
    members = list(s.members)
    if count < 0:
        return [rng.choice(members) for _ in range(-count)]
    if count >= len(members):
        return s.ordered()
    return rng.sample(members, count)


# -- algebra -------------------------------------------------------------------------------


def _operands(c: Client, keys: Iterable[bytes], write: bool) -> list[SetValue | None]:
    """Every key's set (None when missing); a key of another type is an error."""
    look = write_as if write else read_as
    return [look(c, key, SetValue) for key in keys]


def _intersection(sets: list[SetValue | None], limit: int = 0) -> list[bytes]:
    """Members of every set, in the smallest set's order (Redis walks the smallest)."""
    if not sets or any(s is None for s in sets):
        return []
    present = [s for s in sets if s is not None]
    ordered = sorted(present, key=len)
    first, others = ordered[0], ordered[1:]
    found: list[bytes] = []
    for member in first.ordered():
        if all(member in other for other in others):
            found.append(member)
            if limit and len(found) >= limit:
                break
    return found


def _union_or_diff(sets: list[SetValue | None], union: bool, limits: SetLimits) -> SetValue:
    """The result as Redis builds it: a new set (intset at first) the members are added to."""
    result = SetValue(INTSET)
    if union:
        for s in sets:
            if s is not None:
                for member in s.ordered():
                    result.add(member, limits)
        return result
    first = sets[0]
    if first is None:
        return result
    others = [s for s in sets[1:] if s is not None]
    for member in first.ordered():
        if not any(member in other for other in others):
            result.add(member, limits)
    return result


def _built(members: list[bytes], limits: SetLimits) -> SetValue:
    result = SetValue(INTSET)
    for member in members:
        result.add(member, limits)
    return result


def cmd_sinter(c: Client, argv: list[bytes]) -> Reply:
    return RSet(_intersection(_operands(c, argv[1:], write=False)))


def cmd_sunion(c: Client, argv: list[bytes]) -> Reply:
    result = _union_or_diff(_operands(c, argv[1:], write=False), True, limits_of(c))
    return RSet(result.ordered())


def cmd_sdiff(c: Client, argv: list[bytes]) -> Reply:
    result = _union_or_diff(_operands(c, argv[1:], write=False), False, limits_of(c))
    return RSet(result.ordered())


def _store(c: Client, destination: bytes, result: SetValue, event: bytes) -> Written:
    """The *STORE commands: destination replaced by result (deleted when it is empty)."""
    if result.members:
        c.db.set(destination, result)
        notify(c, SET, event, destination)
        return Written(len(result), ONE)
    if c.db.delete(destination):
        notify(c, GENERIC, b"del", destination)
        return Written(0, ONE)
    return Written(0, as_given(0))


def cmd_sinterstore(c: Client, argv: list[bytes]) -> Reply | Written:
    members = _intersection(_operands(c, argv[2:], write=True))
    return _store(c, argv[1], _built(members, limits_of(c)), b"sinterstore")


def cmd_sunionstore(c: Client, argv: list[bytes]) -> Reply | Written:
    result = _union_or_diff(_operands(c, argv[2:], write=True), True, limits_of(c))
    return _store(c, argv[1], result, b"sunionstore")


def cmd_sdiffstore(c: Client, argv: list[bytes]) -> Reply | Written:
    result = _union_or_diff(_operands(c, argv[2:], write=True), False, limits_of(c))
    return _store(c, argv[1], result, b"sdiffstore")


def cmd_sintercard(c: Client, argv: list[bytes]) -> Reply:
    """SINTERCARD numkeys key [key ...] [LIMIT limit]"""
    numkeys = parse_int(argv[1], NUMKEYS_NOT_POSITIVE)
    if numkeys <= 0:
        raise NUMKEYS_NOT_POSITIVE
    if numkeys > len(argv) - 2:
        raise err("Number of keys can't be greater than number of args")
    limit = 0
    i = 2 + numkeys
    while i < len(argv):
        if argv[i].upper() == b"LIMIT" and i + 1 < len(argv):
            limit = parse_int(argv[i + 1], LIMIT_NEGATIVE)
            if limit < 0:
                raise LIMIT_NEGATIVE
            i += 2
        else:
            raise SYNTAX
    return len(_intersection(_operands(c, argv[2 : 2 + numkeys], write=False), limit))


# -- SSCAN ---------------------------------------------------------------------------------


def cmd_sscan(c: Client, argv: list[bytes]) -> Reply:
    """SSCAN key cursor [MATCH pattern] [COUNT count]"""
    cursor = parse_cursor(argv[2])
    s = read_as(
        c, argv[1], SetValue
    )  # (before the options, as in Redis: a missing key answers at once)
    if s is None:
        return [b"0", []]
    count, pattern, _ = parse_scan_options(argv, 3)
    if s.encoding != HASHTABLE:  # intset and listpack: everything at once (Redis does the same)
        cursor, found = 0, s.ordered()
    else:
        cursor, found = scan_step(list(s.members), cursor, count)
    found = matching(found, pattern)
    return [b"%d" % cursor, found]


def scan_step(items: list[bytes], cursor: int, count: int) -> tuple[int, list[bytes]]:
    """One step of a scan in order of a fixed hash (as the keyspace's SCAN): the cursor is
    the next hash plus one, so an item present throughout is returned at least once."""
    floor = cursor - 1 if cursor else 0
    crc = zlib.crc32
    hashed = sorted((h, item) for item in items if (h := crc(item)) >= floor)
    if not hashed:
        return 0, []
    taken = hashed[:count]
    last = taken[-1][0]
    batch = [item for h, item in hashed if h <= last]
    more = len(batch) < len(hashed)
    return (last + 2 if more else 0), batch


SPECS = (
    spec("sadd", -3, "write denyoom fast", (1, 1, 1), cmd_sadd),
    spec("srem", -3, "write fast", (1, 1, 1), cmd_srem),
    spec("smove", 4, "write fast", (1, 2, 1), cmd_smove),
    spec("sismember", 3, "readonly fast", (1, 1, 1), cmd_sismember),
    spec("smismember", -3, "readonly fast", (1, 1, 1), cmd_smismember),
    spec("scard", 2, "readonly fast", (1, 1, 1), cmd_scard),
    spec("smembers", 2, "readonly", (1, 1, 1), cmd_smembers),
    spec("spop", -2, "write fast", (1, 1, 1), cmd_spop),
    spec("srandmember", -2, "readonly", (1, 1, 1), cmd_srandmember),
    spec("sinter", -2, "readonly", (1, -1, 1), cmd_sinter),
    spec("sinterstore", -3, "write denyoom", (1, -1, 1), cmd_sinterstore),
    spec("sintercard", -3, "readonly movablekeys", (0, 0, 0), cmd_sintercard),
    spec("sunion", -2, "readonly", (1, -1, 1), cmd_sunion),
    spec("sunionstore", -3, "write denyoom", (1, -1, 1), cmd_sunionstore),
    spec("sdiff", -2, "readonly", (1, -1, 1), cmd_sdiff),
    spec("sdiffstore", -3, "write denyoom", (1, -1, 1), cmd_sdiffstore),
    spec("sscan", -3, "readonly", (1, 1, 1), cmd_sscan),
)
