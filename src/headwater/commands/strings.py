"""String commands: the metadata type for checkpoints and markers.

Redis ``t_string.c`` semantics: integers are strict int64 text, INCR/APPEND/SETRANGE keep the
TTL, SET without KEEPTTL clears it, and relative expiries are propagated as absolute ``PXAT``.
INCRBYFLOAT adds in C's ``long double`` (``commands/ldouble.py``) and propagates the result
as ``SET key value KEEPTTL``, as Redis does, so a replica never redoes float arithmetic.
A string changed in place (APPEND, SETRANGE, SETBIT …) is a ``RawString``: Redis keeps such
strings ``raw``. The bit commands are in ``commands/bitops.py``.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass

from headwater.commands import ldouble
from headwater.commands.args import INT64_MAX, INT64_MIN, parse_int, strict_int
from headwater.commands.context import Client, spec
from headwater.commands.notify import lookup_read, notify
from headwater.errors import (
    NOT_FLOAT,
    NOT_INTEGER,
    OVERFLOW,
    SYNTAX,
    WRONGTYPE,
    ReplyError,
    err,
    wrong_arity,
)
from headwater.keyevents import GENERIC, STRING
from headwater.ops.change import ONE, Written, as_given, one_line
from headwater.resp.types import OK, Reply
from headwater.values import RawString

#: a plain ``SET key value``'s answer (built once: SET is a hot path)
_SET_OK = Written(OK, ONE)
TOO_BIG = err("string exceeds maximum allowed size (proto-max-bulk-len)")
OFFSET_OUT_OF_RANGE = err("offset is out of range")
NAN_OR_INF = err("increment would produce NaN or Infinity")
LCS_NOT_STRINGS = err("The specified keys must contain string values")

# ---------------------------------------------------------------------------------------------
# Lookups


def _get_string(c: Client, key: bytes) -> bytes | None:
    """A read's lookup of a string (counted in INFO stats)."""
    return _as_string(lookup_read(c, key))


def _string_to_write(c: Client, key: bytes) -> bytes | None:
    """A write's lookup of a string (not counted)."""
    return _as_string(c.db.get(key))


def _as_string(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    raise WRONGTYPE


# ---------------------------------------------------------------------------------------------
# SET and its expiry options


@dataclass
class SetOpts:
    nx: bool = False
    xx: bool = False
    get: bool = False
    keep_ttl: bool = False
    expire_at_ms: int | None = None  # absolute deadline
    #: the deadline was given as PXAT: Redis then propagates the command as it came
    given_in_pxat: bool = False


_EXPIRE_UNITS = {b"EX": (1000, False), b"PX": (1, False), b"EXAT": (1000, True), b"PXAT": (1, True)}


def expire_deadline(c: Client, raw: bytes, unit_ms: int, absolute: bool, command: str) -> int:
    """Redis's getExpireMillisecondsOrReply: the absolute deadline in ms, or an error."""
    amount = parse_int(raw)
    invalid = err(f"invalid expire time in '{command}' command")
    if amount <= 0 or (unit_ms == 1000 and amount > INT64_MAX // 1000):
        raise invalid
    amount *= unit_ms
    if not absolute:
        if amount > INT64_MAX - c.server.keyspace.now_ms:
            raise invalid
        amount += c.server.keyspace.now_ms
    return amount


def parse_set(c: Client, argv: list[bytes]) -> SetOpts:
    """SET key value [NX | XX] [GET] [EX s | PX ms | EXAT ts | PXAT ts | KEEPTTL]"""
    opts = SetOpts()
    expire: tuple[bytes, bytes] | None = None
    i = 3
    while i < len(argv):
        token = argv[i].upper()
        has_next = i + 1 < len(argv)
        if token == b"NX" and not opts.xx:
            opts.nx = True
        elif token == b"XX" and not opts.nx:
            opts.xx = True
        elif token == b"GET":
            opts.get = True
        elif token == b"KEEPTTL" and expire is None:
            opts.keep_ttl = True
        elif token in _EXPIRE_UNITS and expire is None and not opts.keep_ttl and has_next:
            expire = (token, argv[i + 1])
            i += 1
        else:
            raise SYNTAX
        i += 1
    if expire is not None:
        unit_ms, absolute = _EXPIRE_UNITS[expire[0]]
        opts.expire_at_ms = expire_deadline(c, expire[1], unit_ms, absolute, "set")
        opts.given_in_pxat = expire[0] == b"PXAT"
    return opts


def cmd_set(c: Client, argv: list[bytes]) -> Reply | Written:
    key, value = argv[1], argv[2]
    db = c.db
    if len(argv) == 3:  # the hot path: plain SET key value
        db.set(key, value)
        if c.server.keyspace.notify_flags & STRING:
            notify(c, STRING, b"set", key)
        return _SET_OK
    opts = parse_set(c, argv)
    old = _get_string(c, key) if opts.get else db.get(key)
    exists = old is not None
    if (opts.nx and exists) or (opts.xx and not exists):
        return old if opts.get else None
    db.set(key, value, keep_ttl=opts.keep_ttl)
    notify(c, STRING, b"set", key)
    change = ONE
    if opts.expire_at_ms is not None:
        db.set_expire(key, opts.expire_at_ms)
        notify(c, GENERIC, b"expire", key)
        if not opts.given_in_pxat:
            change = one_line(1, [b"SET", key, value, b"PXAT", b"%d" % opts.expire_at_ms])
    return Written(old if opts.get else OK, change)


def cmd_setnx(c: Client, argv: list[bytes]) -> Reply | Written:
    if c.db.get(argv[1]) is not None:
        return 0
    c.db.set(argv[1], argv[2])
    notify(c, STRING, b"set", argv[1])
    return Written(1, ONE)


def _setex(c: Client, argv: list[bytes], unit_ms: int) -> Reply | Written:
    name = argv[0].decode("utf-8", "replace").lower()
    deadline = expire_deadline(c, argv[2], unit_ms, False, name)
    c.db.set(argv[1], argv[3])
    c.db.set_expire(argv[1], deadline)
    notify(c, STRING, b"set", argv[1])
    notify(c, GENERIC, b"expire", argv[1])
    return Written(OK, one_line(1, [b"SET", argv[1], argv[3], b"PXAT", b"%d" % deadline]))


def cmd_setex(c: Client, argv: list[bytes]) -> Reply | Written:
    return _setex(c, argv, 1000)


def cmd_psetex(c: Client, argv: list[bytes]) -> Reply | Written:
    return _setex(c, argv, 1)


def cmd_get(c: Client, argv: list[bytes]) -> Reply:
    return _get_string(c, argv[1])


def cmd_getset(c: Client, argv: list[bytes]) -> Reply | Written:
    old = _get_string(c, argv[1])
    c.db.set(argv[1], argv[2])
    notify(c, STRING, b"set", argv[1])
    return Written(old, ONE)


def cmd_getdel(c: Client, argv: list[bytes]) -> Reply | Written:
    old = _get_string(c, argv[1])
    if old is None:
        return None
    c.db.delete(argv[1])
    notify(c, GENERIC, b"del", argv[1])
    return Written(old, one_line(1, [b"DEL", argv[1]]))  # (Redis propagates it as DEL)


def cmd_getex(c: Client, argv: list[bytes]) -> Reply | Written:
    """GETEX key [EX s | PX ms | EXAT ts | PXAT ts | PERSIST]"""
    key = argv[1]
    deadline: int | None = None
    persist = absolute = False
    if len(argv) > 2:
        token = argv[2].upper()
        if token == b"PERSIST" and len(argv) == 3:
            persist = True
        elif token in _EXPIRE_UNITS and len(argv) == 4:
            unit_ms, absolute = _EXPIRE_UNITS[token]
            deadline = expire_deadline(c, argv[3], unit_ms, absolute, "getex")
        else:
            raise SYNTAX
    value = _get_string(c, key)
    if value is None:
        return None
    keyspace = c.server.keyspace
    if deadline is not None and absolute and deadline <= keyspace.now_ms and not keyspace.loading:
        # an EXAT/PXAT already past deletes the key, as Redis's getexCommand
        c.db.delete(key)
        notify(c, GENERIC, b"del", key)
        return Written(value, one_line(1, [b"DEL", key]))
    if deadline is not None:
        c.db.set_expire(key, deadline)
        notify(c, GENERIC, b"expire", key)
        return Written(value, one_line(1, [b"PEXPIREAT", key, b"%d" % deadline]))
    if persist and c.db.persist(key):
        notify(c, GENERIC, b"persist", key)
        return Written(value, one_line(1, [b"PERSIST", key]))
    return value


def cmd_mget(c: Client, argv: list[bytes]) -> Reply:
    out: list[Reply] = []
    for key in argv[1:]:
        value = lookup_read(c, key)
        out.append(value if isinstance(value, bytes) else None)
    return out


def cmd_mset(c: Client, argv: list[bytes]) -> Reply | Written:
    if len(argv) % 2 == 0:
        raise wrong_arity(argv[0].decode("utf-8", "replace").lower())
    for i in range(1, len(argv), 2):
        c.db.set(argv[i], argv[i + 1])
        notify(c, STRING, b"set", argv[i])
    return Written(OK, as_given((len(argv) - 1) // 2))


def cmd_msetnx(c: Client, argv: list[bytes]) -> Reply | Written:
    if len(argv) % 2 == 0:
        raise wrong_arity("msetnx")
    if any(c.db.get(argv[i]) is not None for i in range(1, len(argv), 2)):
        return 0
    for i in range(1, len(argv), 2):
        c.db.set(argv[i], argv[i + 1])
        notify(c, STRING, b"set", argv[i])
    return Written(1, as_given((len(argv) - 1) // 2))


def _incr(c: Client, key: bytes, delta: int) -> Reply | Written:
    old = _string_to_write(c, key)
    current = 0
    if old is not None:
        parsed = strict_int(old)
        if parsed is None:
            raise NOT_INTEGER
        current = parsed
    result = current + delta
    if not INT64_MIN <= result <= INT64_MAX:
        raise OVERFLOW
    c.db.set(key, b"%d" % result, keep_ttl=True)
    notify(c, STRING, b"incrby", key)
    return Written(result, ONE)


def cmd_incr(c: Client, argv: list[bytes]) -> Reply | Written:
    return _incr(c, argv[1], 1)


def cmd_decr(c: Client, argv: list[bytes]) -> Reply | Written:
    return _incr(c, argv[1], -1)


def cmd_incrby(c: Client, argv: list[bytes]) -> Reply | Written:
    return _incr(c, argv[1], parse_int(argv[2]))


def cmd_decrby(c: Client, argv: list[bytes]) -> Reply | Written:
    delta = parse_int(argv[2])
    if delta == INT64_MIN:
        raise err("decrement would overflow")
    return _incr(c, argv[1], -delta)


def cmd_append(c: Client, argv: list[bytes]) -> Reply | Written:
    old = _string_to_write(c, argv[1])
    if old is None:
        c.db.set(argv[1], argv[2])
        new_len = len(argv[2])
    else:
        joined = RawString(old + argv[2])
        c.db.set(argv[1], joined, keep_ttl=True)
        new_len = len(joined)
    notify(c, STRING, b"append", argv[1])
    return Written(new_len, ONE)


def cmd_strlen(c: Client, argv: list[bytes]) -> Reply:
    value = _get_string(c, argv[1])
    return 0 if value is None else len(value)


# ---------------------------------------------------------------------------------------------
# Ranges: GETRANGE, SUBSTR, SETRANGE


def cmd_getrange(c: Client, argv: list[bytes]) -> Reply:
    """GETRANGE key start end  (SUBSTR: the same)"""
    start, end = parse_int(argv[2]), parse_int(argv[3])
    value = _get_string(c, argv[1])
    if value is None:
        return b""
    low, high = byte_range(start, end, len(value))
    return value[low:high]


def byte_range(start: int, end: int, length: int) -> tuple[int, int]:
    """Redis's GETRANGE rules for an inclusive start/end pair (negatives count from the end,
    then clamped): a half-open Python slice, empty when nothing is in range."""
    if (start < 0 and end < 0 and start > end) or length == 0:
        return 0, 0
    if start < 0:
        start = max(length + start, 0)
    if end < 0:
        end = max(length + end, 0)
    end = min(end, length - 1)
    return (start, end + 1) if start <= end else (0, 0)


def must_obey(c: Client) -> bool:
    """Redis's mustObeyClient: the AOF loader and a replica's primary are never refused for
    size limits (the command was already accepted once)."""
    return c.replaying or c.is_master


def check_string_length(c: Client, size: int) -> None:
    """Redis's checkStringLength: a string may not grow past ``proto-max-bulk-len``."""
    if size > c.server.config["proto-max-bulk-len"] and not must_obey(c):
        raise TOO_BIG


def cmd_setrange(c: Client, argv: list[bytes]) -> Reply | Written:
    """SETRANGE key offset value"""
    key, value = argv[1], argv[3]
    offset = parse_int(argv[2])
    if offset < 0:
        raise OFFSET_OUT_OF_RANGE
    old = _string_to_write(c, key)
    if not value:  # nothing to write: no key is created, no change
        return 0 if old is None else len(old)
    check_string_length(c, offset + len(value))
    base = b"" if old is None else old
    if len(base) < offset:
        base += bytes(offset - len(base))
    c.db.set(key, RawString(base[:offset] + value + base[offset + len(value) :]), keep_ttl=True)
    notify(c, STRING, b"setrange", key)
    return Written(max(len(base), offset + len(value)), ONE)


# ---------------------------------------------------------------------------------------------
# INCRBYFLOAT


def incr_float(current: bytes | None, raw_increment: bytes, not_float: ReplyError) -> bytes:
    """The formatted sum of a stored value (absent: 0) and an increment, in ``long double``
    (shared with HINCRBYFLOAT, whose stored-value error differs)."""
    value = ldouble.parse(current) if current is not None else ldouble.parse(b"0")
    if value is None:
        raise not_float
    increment = ldouble.parse(raw_increment)
    if increment is None:
        raise NOT_FLOAT
    total = value + increment
    if not total.finite:
        raise NAN_OR_INF
    return ldouble.format_human(total)


def cmd_incrbyfloat(c: Client, argv: list[bytes]) -> Reply | Written:
    """INCRBYFLOAT key increment: propagated as SET key <result> KEEPTTL"""
    key = argv[1]
    result = incr_float(_string_to_write(c, key), argv[2], NOT_FLOAT)
    c.db.set(key, result, keep_ttl=True)
    notify(c, STRING, b"incrbyfloat", key)
    return Written(result, one_line(1, [b"SET", key, result, b"KEEPTTL"]))


# ---------------------------------------------------------------------------------------------
# LCS


def cmd_lcs(c: Client, argv: list[bytes]) -> Reply:
    """LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN]"""
    values = [lookup_read(c, argv[1]), lookup_read(c, argv[2])]
    if any(v is not None and not isinstance(v, bytes) for v in values):
        raise LCS_NOT_STRINGS
    a, b = (b"" if v is None else bytes(v) for v in values)
    get_len = get_idx = with_len = False
    min_len = 0
    i = 3
    while i < len(argv):
        opt = argv[i].upper()
        if opt == b"IDX":
            get_idx = True
        elif opt == b"LEN":
            get_len = True
        elif opt == b"WITHMATCHLEN":
            with_len = True
        elif opt == b"MINMATCHLEN" and i + 1 < len(argv):
            min_len = max(parse_int(argv[i + 1]), 0)
            i += 1
        else:
            raise SYNTAX
        i += 1
    if get_idx and get_len:
        raise err("If you want both the length and indexes, please just use IDX.")
    if (len(a) + 1) * (len(b) + 1) * 4 > c.server.config["proto-max-bulk-len"]:
        raise err("Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
    table = _lcs_table(a, b)
    if get_len:
        return table[len(a)][len(b)]
    common, matches = _lcs_walk(a, b, table, min_len, with_len)
    if not get_idx:
        return common
    return {b"matches": matches, b"len": table[len(a)][len(b)]}


def _lcs_table(a: bytes, b: bytes) -> list[array[int]]:
    """LCS[i][j]: the length of the longest common subsequence of a[:i] and b[:j]."""
    rows = [array("I", bytes(4 * (len(b) + 1)))]
    for i in range(1, len(a) + 1):
        above = rows[-1]
        row = array("I", bytes(4 * (len(b) + 1)))
        ch = a[i - 1]
        left = 0
        for j in range(1, len(b) + 1):
            if b[j - 1] == ch:
                left = above[j - 1] + 1
            elif above[j] > left:
                left = above[j]
            row[j] = left
        rows.append(row)
    return rows


def _lcs_walk(
    a: bytes, b: bytes, table: list[array[int]], min_len: int, with_len: bool
) -> tuple[bytes, list[Reply]]:
    """Walk back from the end as Redis does: the common string and the matched ranges
    (last first), each ``[[a_start, a_end], [b_start, b_end]]`` (+ its length)."""
    out = bytearray()
    matches: list[Reply] = []
    i, j = len(a), len(b)
    start_a = end_a = start_b = end_b = -1
    while i > 0 and j > 0:
        emit = False
        if a[i - 1] == b[j - 1]:
            out.append(a[i - 1])
            if start_a == -1:
                start_a = end_a = i - 1
                start_b = end_b = j - 1
            else:  # (contiguous: a match always follows a match diagonally)
                start_a, start_b = start_a - 1, start_b - 1
            emit = start_a == 0 or start_b == 0
            i, j = i - 1, j - 1
        else:
            if table[i - 1][j] > table[i][j - 1]:
                i -= 1
            else:
                j -= 1
            emit = start_a != -1
        if emit:
            length = end_a - start_a + 1
            if min_len == 0 or length >= min_len:
                match: list[Reply] = [[start_a, end_a], [start_b, end_b]]
                if with_len:
                    match.append(length)
                matches.append(match)
            start_a = -1
    out.reverse()
    return bytes(out), matches


SPECS = (
    spec("get", 2, "readonly fast", (1, 1, 1), cmd_get),
    spec("set", -3, "write denyoom", (1, 1, 1), cmd_set),
    spec("setnx", 3, "write denyoom fast", (1, 1, 1), cmd_setnx),
    spec("setex", 4, "write denyoom", (1, 1, 1), cmd_setex),
    spec("psetex", 4, "write denyoom", (1, 1, 1), cmd_psetex),
    spec("getset", 3, "write denyoom fast", (1, 1, 1), cmd_getset),
    spec("getdel", 2, "write fast", (1, 1, 1), cmd_getdel),
    spec("getex", -2, "write fast", (1, 1, 1), cmd_getex),
    spec("mget", -2, "readonly fast", (1, -1, 1), cmd_mget),
    spec("mset", -3, "write denyoom", (1, -1, 2), cmd_mset),
    spec("msetnx", -3, "write denyoom", (1, -1, 2), cmd_msetnx),
    spec("incr", 2, "write denyoom fast", (1, 1, 1), cmd_incr),
    spec("decr", 2, "write denyoom fast", (1, 1, 1), cmd_decr),
    spec("incrby", 3, "write denyoom fast", (1, 1, 1), cmd_incrby),
    spec("decrby", 3, "write denyoom fast", (1, 1, 1), cmd_decrby),
    spec("append", 3, "write denyoom fast", (1, 1, 1), cmd_append),
    spec("strlen", 2, "readonly fast", (1, 1, 1), cmd_strlen),
    spec("getrange", 4, "readonly", (1, 1, 1), cmd_getrange),
    spec("substr", 4, "readonly", (1, 1, 1), cmd_getrange),
    spec("setrange", 4, "write denyoom", (1, 1, 1), cmd_setrange),
    spec("incrbyfloat", 3, "write denyoom fast", (1, 1, 1), cmd_incrbyfloat),
    spec("lcs", -3, "readonly", (1, 2, 1), cmd_lcs),
)
