"""Generic keyspace commands (Redis ``db.c`` and ``expire.c``)."""

from __future__ import annotations

from headwater.commands.args import INT64_MAX, INT64_MIN, parse_int, strict_int
from headwater.commands.context import Client, help_handler, reject_subcommand, spec
from headwater.commands.notify import lookup_read, notify, notify_in, peek_read
from headwater.errors import DB_INDEX_OUT_OF_RANGE, NO_SUCH_KEY, SYNTAX, err
from headwater.glob import compile_glob
from headwater.keyevents import GENERIC
from headwater.keyspace import Database
from headwater.ops.change import ONE, Change, Written, as_given, one_line
from headwater.ops.generic import copy_key, move_key
from headwater.ops.hashttl import track_field_ttls
from headwater.ops.lazyfree import freed_lazily
from headwater.resp.types import OK, Reply, Status
from headwater.structures.lists import ListValue
from headwater.structures.sets import SetValue
from headwater.structures.zsets import ZSetValue
from headwater.values import Hash, string_encoding, type_name

# ---------------------------------------------------------------------------------------------
# Deleting, testing, renaming


def cmd_del(c: Client, argv: list[bytes]) -> Reply | Written:
    """DEL and UNLINK (the lazy one; DEL too with ``lazyfree-lazy-user-del``)."""
    lazy = argv[0].lower() == b"unlink" or c.server.config["lazyfree-lazy-user-del"]
    deleted = 0
    for key in argv[1:]:
        value = c.db.peek(key) if lazy else None
        if c.db.delete(key):
            deleted += 1
            notify(c, GENERIC, b"del", key)
            if value is not None and freed_lazily(value):
                c.server.stats.lazyfreed_objects += 1
    return Written(deleted, as_given(deleted)) if deleted else 0


def cmd_exists(c: Client, argv: list[bytes]) -> Reply:
    return sum(1 for key in argv[1:] if peek_read(c, key) is not None)


def cmd_touch(c: Client, argv: list[bytes]) -> Reply:
    """TOUCH key [key ...]: EXISTS that counts as an access of each key."""
    return sum(1 for key in argv[1:] if lookup_read(c, key) is not None)


def cmd_type(c: Client, argv: list[bytes]) -> Reply:
    value = peek_read(c, argv[1])
    return Status(b"none" if value is None else type_name(value))


def _rename(c: Client, argv: list[bytes], nx: bool) -> Reply | Written:
    src, dst = argv[1], argv[2]
    if c.db.get(src) is None:
        raise NO_SUCH_KEY
    if src == dst:
        return 0 if nx else OK
    if c.db.get(dst) is not None:
        if nx:
            return 0
        c.db.delete(dst)
    c.db.rename(src, dst)
    track_field_ttls(c.db, dst, c.db.data[dst])
    c.db.signal_ready(dst)
    notify(c, GENERIC, b"rename_from", src)
    notify(c, GENERIC, b"rename_to", dst)
    return Written(1 if nx else OK, ONE)


def cmd_rename(c: Client, argv: list[bytes]) -> Reply | Written:
    return _rename(c, argv, nx=False)


def cmd_renamenx(c: Client, argv: list[bytes]) -> Reply | Written:
    return _rename(c, argv, nx=True)


# ---------------------------------------------------------------------------------------------
# Between databases: COPY, MOVE, SWAPDB (write rules in ops/generic.py)

SAME_OBJECT = err("source and destination objects are the same")
#: Redis's getIntFromObjectOrReply past 32 bits
INT_RANGE = err("value is out of range, value must between -2147483648 and 2147483647")


def _database(c: Client, raw: bytes) -> Database:
    """A database named by index, as Redis's getIntFromObject + selectDb check it."""
    index = parse_int(raw)
    if not -(2**31) <= index < 2**31:
        raise INT_RANGE
    dbs = c.server.keyspace.dbs
    if not 0 <= index < len(dbs):
        raise DB_INDEX_OUT_OF_RANGE
    return dbs[index]


def cmd_copy(c: Client, argv: list[bytes]) -> Reply | Written:
    """COPY source destination [DB destination-db] [REPLACE]"""
    dst, replace = c.db, False
    i = 3
    while i < len(argv):
        token = argv[i].upper()
        if token == b"REPLACE":
            replace = True
        elif token == b"DB" and i + 1 < len(argv):
            dst = _database(c, argv[i + 1])
            i += 1
        else:
            raise SYNTAX
        i += 1
    if dst is not c.db and c.server.cluster is not None:
        raise err("Copying to another database is not allowed in cluster mode")
    key, new_key = argv[1], argv[2]
    if dst is c.db and key == new_key:
        raise SAME_OBJECT
    if not copy_key(c.db, key, dst, new_key, replace):
        return 0
    notify_in(c, dst.index, GENERIC, b"copy_to", new_key)
    return Written(1, ONE)


def cmd_move(c: Client, argv: list[bytes]) -> Reply | Written:
    """MOVE key db"""
    if c.server.cluster is not None:
        raise err("MOVE is not allowed in cluster mode")
    dst = _database(c, argv[2])
    if dst is c.db:
        raise SAME_OBJECT
    key = argv[1]
    if not move_key(c.db, key, dst):
        return 0
    notify(c, GENERIC, b"move_from", key)
    notify_in(c, dst.index, GENERIC, b"move_to", key)
    return Written(1, ONE)


def _swap_index(raw: bytes, which: str) -> int:
    index = strict_int(raw)
    if index is None:
        raise err(f"invalid {which} DB index")
    return index


def cmd_swapdb(c: Client, argv: list[bytes]) -> Reply | Written:
    """SWAPDB index1 index2: clients keep their database number and see the other's keys;
    WATCHers of keys in either are told, blocked clients whose key appears are served."""
    if c.server.cluster is not None:
        raise err("SWAPDB is not allowed in cluster mode")
    first = _swap_index(argv[1], "first")
    second = _swap_index(argv[2], "second")
    keyspace = c.server.keyspace
    count = len(keyspace.dbs)
    if not (0 <= first < count and 0 <= second < count):
        raise DB_INDEX_OUT_OF_RANGE
    keyspace.swap(first, second)
    return Written(OK, ONE)


# ---------------------------------------------------------------------------------------------
# Whole-database commands


def cmd_keys(c: Client, argv: list[bytes]) -> Reply:
    return c.db.keys(argv[1])


def cmd_dbsize(c: Client, argv: list[bytes]) -> Reply:
    return len(c.db)


def cmd_randomkey(c: Client, argv: list[bytes]) -> Reply:
    return c.db.random_key()


def parse_cursor(raw: bytes) -> int:
    """C's strtoul, as Redis uses it: leading spaces and a sign are accepted, negatives wrap."""
    text = raw.decode("ascii", "replace").lstrip(" \t\n\v\f\r")
    sign = -1 if text.startswith("-") else 1
    digits = text[1:] if text[:1] in ("-", "+") else text
    if not digits.isdigit() or int(digits) >= 2**64:
        raise err("invalid cursor")
    return (sign * int(digits)) % 2**64


def parse_scan_options(
    argv: list[bytes], start: int, with_type: bool = False
) -> tuple[int, bytes | None, bytes | None]:
    """The options of the SCAN family from ``start``: COUNT (>= 1), MATCH and, for SCAN
    itself, TYPE; (count, pattern, type). Anything else is a syntax error, as in Redis."""
    count, pattern, type_filter = 10, None, None
    i = start
    while i < len(argv):
        token = argv[i].upper()
        if i + 1 >= len(argv):
            raise SYNTAX
        if token == b"COUNT":
            count = parse_int(argv[i + 1])
            if count < 1:
                raise SYNTAX
        elif token == b"MATCH":
            pattern = argv[i + 1]
        elif token == b"TYPE" and with_type:
            type_filter = argv[i + 1].lower()
        else:
            raise SYNTAX
        i += 2
    return count, pattern, type_filter


def matching(items: list[bytes], pattern: bytes | None) -> list[bytes]:
    """The items a SCAN-family MATCH pattern keeps (all of them without one, or with ``*``)."""
    if pattern is None or pattern == b"*":
        return items
    match = compile_glob(pattern)
    return [item for item in items if match(item)]


def cmd_scan(c: Client, argv: list[bytes]) -> Reply:
    """SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]"""
    cursor = parse_cursor(argv[1])
    count, pattern, type_filter = parse_scan_options(argv, 2, with_type=True)

    cursor, keys = c.db.scan(cursor, count)
    match = compile_glob(pattern) if pattern not in (None, b"*") else None
    kept: list[Reply] = []
    for key in keys:
        value = c.db.peek(key)
        if value is None or (match is not None and not match(key)):
            continue
        if type_filter is not None and type_name(value) != type_filter:
            continue
        kept.append(key)
    return [b"%d" % cursor, kept]


def _flush_mode(c: Client, argv: list[bytes]) -> bool:
    """Whether Redis would flush in the background: ASYNC, or SYNC turned into a blocking
    ASYNC (Redis 7.4+) except inside MULTI or a script."""
    if len(argv) > 2 or (len(argv) == 2 and argv[1].upper() not in (b"ASYNC", b"SYNC")):
        raise SYNTAX
    if len(argv) == 2 and argv[1].upper() == b"ASYNC":
        return True
    return not (c.is_script or c.server.in_transaction())


def _flushed(c: Client, argv: list[bytes], removed: int, lazily: bool) -> Written:
    """A flush counts one change per key removed (none on an empty keyspace, as in Redis 7)
    and is propagated even then (Redis: forceCommandPropagation)."""
    if lazily:
        c.server.stats.lazyfreed_objects += removed
    return Written(OK, Change(removed, [list(argv)]))


def cmd_flushdb(c: Client, argv: list[bytes]) -> Reply | Written:
    lazily = _flush_mode(c, argv)
    removed = c.db.flush()
    c.server.keyspace.signal_flushed()
    return _flushed(c, argv, removed, lazily)


def cmd_flushall(c: Client, argv: list[bytes]) -> Reply | Written:
    lazily = _flush_mode(c, argv)
    removed = c.server.keyspace.flush_all()
    if lazily:
        c.server.stats.lazyfreed_objects += removed
    persistence = c.server.persistence
    if persistence is not None and persistence.save_after_flushall():
        # the save counted the keys removed as saved (rdb_changes_since_last_save is 0 after
        # it, as in Redis)
        return Written(OK, Change(0, [list(argv)]))
    return _flushed(c, argv, removed, False)


# ---------------------------------------------------------------------------------------------
# Expiry


def _expire_flags(argv: list[bytes]) -> set[bytes]:
    flags: set[bytes] = set()
    for raw in argv[3:]:
        token = raw.upper()
        if token not in (b"NX", b"XX", b"GT", b"LT"):
            raise err(f"Unsupported option {raw.decode('utf-8', 'replace')}")
        flags.add(token)
    if b"NX" in flags and len(flags) > 1:
        raise err("NX and XX, GT or LT options at the same time are not compatible")
    if b"GT" in flags and b"LT" in flags:
        raise err("GT and LT options at the same time are not compatible")
    return flags


def _expire_generic(c: Client, argv: list[bytes], unit_ms: int, relative: bool) -> Reply | Written:
    """EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT key time [NX | XX | GT | LT]"""
    key = argv[1]
    flags = _expire_flags(argv)
    when = parse_int(argv[2])
    invalid = err(f"invalid expire time in '{argv[0].decode('utf-8', 'replace').lower()}' command")
    # Redis's bounds are C's LLONG_MAX / 1000 and LLONG_MIN / 1000, which round toward zero
    if unit_ms == 1000 and (when > INT64_MAX // 1000 or when < -(-INT64_MIN // 1000)):
        raise invalid
    when *= unit_ms
    if relative:
        now = c.server.keyspace.now_ms
        if when > INT64_MAX - now:
            raise invalid
        when += now
    db = c.db
    if db.get(key) is None:
        return 0
    current = db.expires.get(key)
    if flags:
        if b"NX" in flags and current is not None:
            return 0
        if b"XX" in flags and current is None:
            return 0
        if b"GT" in flags and (current is None or when <= current):
            return 0
        if b"LT" in flags and current is not None and when >= current:
            return 0
    if when <= c.server.keyspace.now_ms and not c.server.keyspace.loading:
        db.delete(key)
        notify(c, GENERIC, b"del", key)
        return Written(1, one_line(1, [b"DEL", key]))
    db.set_expire(key, when)
    notify(c, GENERIC, b"expire", key)
    return Written(1, one_line(1, [b"PEXPIREAT", key, b"%d" % when]))


def cmd_expire(c: Client, argv: list[bytes]) -> Reply | Written:
    return _expire_generic(c, argv, 1000, relative=True)


def cmd_pexpire(c: Client, argv: list[bytes]) -> Reply | Written:
    return _expire_generic(c, argv, 1, relative=True)


def cmd_expireat(c: Client, argv: list[bytes]) -> Reply | Written:
    return _expire_generic(c, argv, 1000, relative=False)


def cmd_pexpireat(c: Client, argv: list[bytes]) -> Reply | Written:
    return _expire_generic(c, argv, 1, relative=False)


def _ttl(c: Client, key: bytes, in_ms: bool, absolute: bool) -> Reply:
    if peek_read(c, key) is None:
        return -2
    when = c.db.expires.get(key)
    if when is None:
        return -1
    if absolute:
        return when if in_ms else when // 1000
    left = max(when - c.server.keyspace.now_ms, 0)
    return left if in_ms else (left + 500) // 1000


def cmd_ttl(c: Client, argv: list[bytes]) -> Reply:
    return _ttl(c, argv[1], in_ms=False, absolute=False)


def cmd_pttl(c: Client, argv: list[bytes]) -> Reply:
    return _ttl(c, argv[1], in_ms=True, absolute=False)


def cmd_expiretime(c: Client, argv: list[bytes]) -> Reply:
    return _ttl(c, argv[1], in_ms=False, absolute=True)


def cmd_pexpiretime(c: Client, argv: list[bytes]) -> Reply:
    return _ttl(c, argv[1], in_ms=True, absolute=True)


def cmd_persist(c: Client, argv: list[bytes]) -> Reply | Written:
    if c.db.get(argv[1]) is None or not c.db.persist(argv[1]):
        return 0
    notify(c, GENERIC, b"persist", argv[1])
    return Written(1, ONE)


# ---------------------------------------------------------------------------------------------
# OBJECT

#: Redis shares the integer objects 0..9999 (OBJ_SHARED_INTEGERS) and reports them as such.
_SHARED_REFCOUNT = 2147483647


def object_encoding(value: object) -> bytes:
    if isinstance(value, bytes):
        return string_encoding(value)
    if isinstance(value, Hash):
        return value.encoding_name()
    if isinstance(value, (SetValue, ZSetValue, ListValue)):
        return value.encoding_name()
    return getattr(value, "ENCODING", b"unknown")


def cmd_object_encoding(c: Client, argv: list[bytes]) -> Reply:
    value = peek_read(c, argv[2], notify_miss=False)
    return None if value is None else object_encoding(value)


def cmd_object_refcount(c: Client, argv: list[bytes]) -> Reply:
    value = peek_read(c, argv[2], notify_miss=False)
    if value is None:
        return None
    shared = isinstance(value, bytes) and string_encoding(value) == b"int"
    return _SHARED_REFCOUNT if shared and 0 <= int(value) < 10000 else 1


_POLICY_NOTE = (
    "Please note that when switching between policies at runtime LRU and LFU data will take "
    "some time to adjust."
)
LFU_NOT_SELECTED = err(
    "An LFU maxmemory policy is not selected, access frequency not tracked. " + _POLICY_NOTE
)
LFU_SELECTED = err("An LFU maxmemory policy is selected, idle time not tracked. " + _POLICY_NOTE)


def cmd_object_idletime(c: Client, argv: list[bytes]) -> Reply:
    """OBJECT IDLETIME key: seconds since the key's last access (refused under LFU)."""
    key = argv[2]
    if peek_read(c, key, notify_miss=False) is None:
        return None
    keyspace = c.server.keyspace
    if keyspace.lfu:
        raise LFU_SELECTED
    return keyspace.idle_ms(c.db.access_word(key)) // 1000


def cmd_object_freq(c: Client, argv: list[bytes]) -> Reply:
    """OBJECT FREQ key: the key's LFU counter, decayed to now (only under an LFU policy)."""
    key = argv[2]
    if peek_read(c, key, notify_miss=False) is None:
        return None
    keyspace = c.server.keyspace
    if not keyspace.lfu:
        raise LFU_NOT_SELECTED
    return keyspace.lfu_counter(c.db.access_word(key))


OBJECT_HELP = [
    b"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"ENCODING <key>",
    b"    Return the kind of internal representation used in order to store the value",
    b"    associated with a <key>.",
    b"FREQ <key>",
    b"    Return the access frequency index of the <key>. The returned integer is",
    b"    proportional to the logarithm of the recent access frequency of the key.",
    b"IDLETIME <key>",
    b"    Return the idle time of the <key>, that is the approximated number of",
    b"    seconds elapsed since the last access to the key.",
    b"REFCOUNT <key>",
    b"    Return the number of references of the value associated with the specified",
    b"    <key>.",
    b"HELP",
    b"    Prints this help.",
]


cmd_object_help = help_handler(OBJECT_HELP)


SPECS = (
    spec("del", -2, "write", (1, -1, 1), cmd_del),
    spec("unlink", -2, "write fast", (1, -1, 1), cmd_del),
    spec("exists", -2, "readonly fast", (1, -1, 1), cmd_exists),
    spec("touch", -2, "readonly fast", (1, -1, 1), cmd_touch),
    spec("type", 2, "readonly fast", (1, 1, 1), cmd_type),
    spec("rename", 3, "write", (1, 2, 1), cmd_rename),
    spec("renamenx", 3, "write fast", (1, 2, 1), cmd_renamenx),
    spec("keys", 2, "readonly", (0, 0, 0), cmd_keys),
    spec("scan", -2, "readonly", (0, 0, 0), cmd_scan),
    spec("dbsize", 1, "readonly fast", (0, 0, 0), cmd_dbsize),
    spec("randomkey", 1, "readonly", (0, 0, 0), cmd_randomkey),
    spec("flushdb", -1, "write", (0, 0, 0), cmd_flushdb),
    spec("flushall", -1, "write", (0, 0, 0), cmd_flushall),
    spec("expire", -3, "write fast", (1, 1, 1), cmd_expire),
    spec("pexpire", -3, "write fast", (1, 1, 1), cmd_pexpire),
    spec("expireat", -3, "write fast", (1, 1, 1), cmd_expireat),
    spec("pexpireat", -3, "write fast", (1, 1, 1), cmd_pexpireat),
    spec("ttl", 2, "readonly fast", (1, 1, 1), cmd_ttl),
    spec("pttl", 2, "readonly fast", (1, 1, 1), cmd_pttl),
    spec("expiretime", 2, "readonly fast", (1, 1, 1), cmd_expiretime),
    spec("pexpiretime", 2, "readonly fast", (1, 1, 1), cmd_pexpiretime),
    spec("persist", 2, "write fast", (1, 1, 1), cmd_persist),
    spec("copy", -3, "write denyoom", (1, 2, 1), cmd_copy),
    spec("move", 3, "write fast", (1, 1, 1), cmd_move),
    spec("swapdb", 3, "write fast", (0, 0, 0), cmd_swapdb),
    spec(
        "object",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("object|encoding", 3, "readonly", (2, 2, 1), cmd_object_encoding),
            spec("object|refcount", 3, "readonly", (2, 2, 1), cmd_object_refcount),
            spec("object|freq", 3, "readonly", (2, 2, 1), cmd_object_freq),
            spec("object|idletime", 3, "readonly", (2, 2, 1), cmd_object_idletime),
            spec("object|help", 2, "loading stale", handler=cmd_object_help),
        ),
    ),
)
