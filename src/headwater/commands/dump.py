"""DUMP and RESTORE (Redis ``cluster.c``): values moved in Redis's payload format.

The codec is ``headwater.rdb``; the value conversions and the write rule are ``ops/dump.py``.
A RESTORE is checked completely (options, key, TTL, version and checksum, the whole object)
before anything changes, so a refused one leaves the keyspace as it was.
"""

from __future__ import annotations

from dataclasses import dataclass

from headwater.commands.args import INT64_MAX, parse_int
from headwater.commands.context import Client, spec
from headwater.commands.notify import lookup_read, notify
from headwater.errors import SYNTAX, ReplyError, err
from headwater.keyevents import GENERIC
from headwater.ops.change import ONE, Change, Written, one_line, server_del
from headwater.ops.dump import Limits, decode_payload, dump_payload, restore
from headwater.resp.types import OK, Reply

BUSYKEY = ReplyError("BUSYKEY", "Target key name already exists.")


def cmd_dump(c: Client, argv: list[bytes]) -> Reply:
    """DUMP key"""
    value = lookup_read(c, argv[1])
    return None if value is None else dump_payload(value)


@dataclass
class RestoreOpts:
    replace: bool = False
    absttl: bool = False
    idle_s: int = -1  # IDLETIME: the key's idle time (under an LRU or no eviction policy)
    freq: int = -1  # FREQ: the key's LFU counter (under an LFU policy)


def parse_restore(argv: list[bytes]) -> RestoreOpts:
    """RESTORE key ttl serialized-value [REPLACE] [ABSTTL] [IDLETIME seconds] [FREQ frequency]
    (IDLETIME and FREQ exclude each other, as Redis's parser has it)"""
    opts = RestoreOpts()
    i = 4
    while i < len(argv):
        token = argv[i].lower()
        more = len(argv) - i - 1
        if token == b"replace":
            opts.replace = True
        elif token == b"absttl":
            opts.absttl = True
        elif token == b"idletime" and more >= 1 and opts.freq == -1:
            opts.idle_s = parse_int(argv[i + 1])
            if opts.idle_s < 0:
                raise err("Invalid IDLETIME value, must be >= 0")
            i += 1
        elif token == b"freq" and more >= 1 and opts.idle_s == -1:
            opts.freq = parse_int(argv[i + 1])
            if not 0 <= opts.freq <= 255:
                raise err("Invalid FREQ value, must be >= 0 and <= 255")
            i += 1
        else:
            raise SYNTAX
        i += 1
    return opts


def cmd_restore(c: Client, argv: list[bytes]) -> Reply | Written:
    key = argv[1]
    opts = parse_restore(argv)
    db = c.db
    if not opts.replace and db.get(key) is not None:
        raise BUSYKEY
    ttl = parse_int(argv[2])
    if ttl < 0:
        raise err("Invalid TTL value, must be >= 0")
    value = decode_payload(argv[3], Limits.of(c.server.config))
    keyspace = c.server.keyspace
    if ttl and not opts.absttl:
        if ttl > INT64_MAX - keyspace.now_ms:  # (Redis 7.0 overflows here, undefined in C)
            raise err("invalid expire time in 'restore' command")
        ttl += keyspace.now_ms
    if ttl and ttl <= keyspace.now_ms and not keyspace.loading and not keyspace.replica:
        # already expired: the key is only deleted (if REPLACE found one), as in Redis
        if opts.replace and db.delete(key):
            notify(c, GENERIC, b"del", key)
            lazy = c.server.config["lazyfree-lazy-server-del"]
            return Written(OK, one_line(1, server_del(key, lazy)))
        return OK
    restore(db, key, value, ttl, opts.replace)
    word = keyspace.restored_word(opts.idle_s, opts.freq)
    if word is not None:
        db.lru[key] = word
    notify(c, GENERIC, b"restore", key)
    change: Change = ONE
    if ttl and not opts.absttl:  # propagated with the deadline, as Redis rewrites it
        change = one_line(1, [argv[0], key, b"%d" % ttl, *argv[3:], b"ABSTTL"])
    return Written(OK, change)


SPECS = (
    spec("dump", 2, "readonly", (1, 1, 1), cmd_dump),
    spec("restore", -4, "write denyoom", (1, 1, 1), cmd_restore),
    # (cluster mode: served on a slot being imported without ASKING; MIGRATE sends it)
    spec("restore-asking", -4, "write denyoom asking", (1, 1, 1), cmd_restore),
)
