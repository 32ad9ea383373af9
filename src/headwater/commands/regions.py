"""The command table of an active-active region (issue 18; docs/design/active-active.md).

A server started with ``region-id`` builds a ``Region`` (``attach_region``) and gives the
plain stream rows of its command table the region's handlers (``overlay``: their arity,
flags and keys stay, so COMMAND INFO is unchanged); a server without ``region-id`` runs the
plain handlers, untouched. The stream and group commands keep their handlers, which call the
region's stream store (``region_store.RegionStreams``, ``c.server.streams``); here are
the generic key commands on stream keys (DEL/UNLINK/FLUSHDB/FLUSHALL observed-remove,
RENAME/RENAMENX by value; EXPIRE and SET-like commands refused on a stream key), and the
region's own commands: AADUMP (the canonical dump), AAEFFECT and AALOCAL (replayed from the
AOF only), AAPSYNC (a peer's link), AALINK (pause and resume links), and INFO active-active.
"""

from __future__ import annotations

from headwater.activeactive.envelope import from_line
from headwater.activeactive.journal import apply_local
from headwater.activeactive.rstream import RegionStream, db_streams
from headwater.commands import keys as plain_keys
from headwater.commands import sort, strings
from headwater.commands.args import strict_int
from headwater.commands.context import Client, CommandSpec, Handler, spec
from headwater.commands.notify import notify
from headwater.commands.region_keyspace import (
    RegionKeyspace,
    attach_region,
    region_of,
    unsupported,
)
from headwater.errors import NO_SUCH_KEY, SYNTAX, err
from headwater.keyevents import GENERIC
from headwater.ops.change import Change, Written
from headwater.resp.types import OK, Reply
from headwater.stream.ids import parse_id

__all__ = ["HANDLERS", "RegionKeyspace", "attach_region", "info_lines", "overlay"]

AAEFFECT_INTERNAL = err(
    "AAEFFECT, AAXADD, AALOCAL, AAIDMP and AARESTORE are internal: they are only replayed "
    "from this region's AOF"
)


# ---------------------------------------------------------------------------------------------
# keys: DEL / UNLINK / FLUSHDB / FLUSHALL / RENAME / RENAMENX (observed-remove on streams)


def _streams_and_others(c: Client, keys: list[bytes]) -> tuple[list[bytes], list[bytes]]:
    streams: list[bytes] = []
    others: list[bytes] = []
    for key in keys:
        (streams if isinstance(c.db.get(key), RegionStream) else others).append(key)
    return streams, others


def cmd_del(c: Client, argv: list[bytes]) -> Reply | Written:
    """DEL/UNLINK key [key ...]: a stream is deleted observed-remove (what this region had
    seen; an entry added concurrently elsewhere survives)."""
    rk = c.server.region
    if rk is None:
        return plain_keys.cmd_del(c, argv)
    streams, others = _streams_and_others(c, argv[1:])
    rk.region.select(c.db.index)
    deleted = rk.region.delete(*streams)
    lines = rk.take_lines()
    gone = [key for key in others if c.db.delete(key)]
    for key in argv[1:]:
        if key in streams or key in gone:
            notify(c, GENERIC, b"del", key)
    if gone:
        lines.append([argv[0], *gone])
    total = deleted + len(gone)
    return Written(total, Change(total, lines)) if total else 0


def _flush(c: Client, argv: list[bytes], every_db: bool) -> Reply | Written:
    rk = c.server.region
    plain = plain_keys.cmd_flushall if every_db else plain_keys.cmd_flushdb
    if rk is None:
        return plain(c, argv)
    plain_keys._flush_mode(c, argv)  # (its syntax check, before the region flushes)
    rk.region.select(c.db.index)
    if every_db:
        rk.region.flushall()
    else:
        rk.region.flushdb()
    lines = rk.take_lines()
    result = plain(c, argv)
    if isinstance(result, Written):
        lines.append(list(argv))
        return Written(result.reply, Change(result.change.dirty + len(lines) - 1, lines))
    return result


def cmd_flushdb(c: Client, argv: list[bytes]) -> Reply | Written:
    return _flush(c, argv, every_db=False)


def cmd_flushall(c: Client, argv: list[bytes]) -> Reply | Written:
    return _flush(c, argv, every_db=True)


def _rename(c: Client, argv: list[bytes], nx: bool) -> Reply | Written:
    """RENAME/RENAMENX: a stream moves by value (its groups are dropped, spec); a stream at
    the destination is deleted observed-remove."""
    rk = c.server.region
    plain = plain_keys.cmd_renamenx if nx else plain_keys.cmd_rename
    if rk is None:
        return plain(c, argv)
    rk.region.select(c.db.index)
    src, dst = argv[1], argv[2]
    source, target = c.db.get(src), c.db.get(dst)
    if not isinstance(source, RegionStream) and not isinstance(target, RegionStream):
        return plain(c, argv)
    if source is None:
        raise NO_SUCH_KEY
    if src == dst:
        return 0 if nx else OK
    if target is not None and nx:
        return 0
    if not isinstance(source, RegionStream):  # a value moves onto a stream: delete it first
        rk.region.delete(dst)
        lines = rk.take_lines()
        result = plain(c, argv)
        lines.append(list(argv))
        reply = result.reply if isinstance(result, Written) else result
        return Written(reply, Change(len(lines), lines))
    lines = []
    if target is not None and not isinstance(target, RegionStream):
        c.db.delete(dst)
        lines.append([b"DEL", dst])
    rk.region.rename(src, dst)
    lines += rk.take_lines()
    notify(c, GENERIC, b"rename_from", src)
    notify(c, GENERIC, b"rename_to", dst)
    return Written(1 if nx else OK, Change(len(lines), lines))


def cmd_rename(c: Client, argv: list[bytes]) -> Reply | Written:
    return _rename(c, argv, nx=False)


def cmd_renamenx(c: Client, argv: list[bytes]) -> Reply | Written:
    return _rename(c, argv, nx=True)


def _not_on_streams(name: str, handler: Handler, step: int = 0) -> Handler:
    """A command that would change a stream key behind the region's back (EXPIRE, or SET
    replacing it): refused on a stream key, the plain one otherwise. ``step``: the keys are
    every step-th argument from the first (MSET), else only the first."""

    def refuse_on_streams(c: Client, argv: list[bytes]) -> Reply | Written:
        keys = argv[1::step] if step else argv[1:2]
        if any(isinstance(c.db.get(key), RegionStream) for key in keys):
            raise unsupported(f"{name} on a stream key")
        result: Reply | Written = handler(c, argv)
        return result

    return refuse_on_streams


def _region_stream_at(c: Client, key: bytes) -> bool:
    return c.server.region is not None and isinstance(c.db.data.get(key), RegionStream)


def _copy(c: Client, argv: list[bytes]) -> Reply | Written:
    """COPY: a region stream is neither copied nor replaced (its region record would not
    follow); other values copy as on a plain server."""
    if _region_stream_at(c, argv[1]) or _region_stream_at(c, argv[2]):
        raise unsupported("COPY of or onto a stream key")
    result: Reply | Written = plain_keys.cmd_copy(c, argv)
    return result


def _move(c: Client, argv: list[bytes]) -> Reply | Written:
    """MOVE: a region stream stays in its database (its record would not follow)."""
    if _region_stream_at(c, argv[1]):
        raise unsupported("MOVE of a stream key")
    result: Reply | Written = plain_keys.cmd_move(c, argv)
    return result


def _swapdb(c: Client, argv: list[bytes]) -> Reply | Written:
    """SWAPDB: a database that holds region records (streams or their tombstones) cannot be
    swapped (the records are the region's, by database number, in every region)."""
    rk = c.server.region
    if rk is not None:
        for raw in argv[1:3]:
            index = strict_int(raw)
            if index is not None and rk.region.dbs.get(index):
                raise unsupported("SWAPDB of a database with streams")
    result: Reply | Written = plain_keys.cmd_swapdb(c, argv)
    return result


def _sort(c: Client, argv: list[bytes]) -> Reply | Written:
    """SORT … STORE onto a region stream is refused (it would replace it behind the
    region's back)."""
    if c.server.region is not None:
        for i in range(2, len(argv) - 1):
            if argv[i].upper() == b"STORE" and _region_stream_at(c, argv[i + 1]):
                raise unsupported("SORT ... STORE onto a stream key")
    result: Reply | Written = sort.cmd_sort(c, argv)
    return result


# ---------------------------------------------------------------------------------------------
# AADUMP / AAEFFECT


def cmd_aadump(c: Client, argv: list[bytes]) -> Reply:
    """AADUMP: the region's canonical dump (``Region.dump``): every visible stream with its
    entries and sub-logs, its groups (births, acknowledged prefixes) and the applied vector;
    equal in every region once all effects are delivered."""
    return region_of(c).region.dump().encode()


def cmd_aapsync(c: Client, argv: list[bytes]) -> Reply:
    """AAPSYNC <region> <n> (<region> <applied seq>) * n: a peer region asks for this region's
    own effects after what its vector says it applied; the connection then carries them."""
    rk = region_of(c)
    if rk.links is None:
        raise err("AAPSYNC: this server has no region links")
    try:
        count = int(argv[2])
        words = argv[3:]
        if count < 0 or len(words) != 2 * count:
            raise ValueError
        vector = {int(words[i]): int(words[i + 1]) for i in range(0, len(words), 2)}
        peer = int(argv[1])
    except ValueError:
        raise err("AAPSYNC <region> <n> (<region> <seq>)*n: not a vector") from None
    if peer == rk.region.id:
        raise err("AAPSYNC: a region cannot pull its own effects")
    return rk.links.aapsync(c, peer, vector)


def cmd_aaack(c: Client, argv: list[bytes]) -> Reply:
    """AAACK <region> <seq> [<origin> <applied>]… (a peer's link): the peer holds this
    region's effects up to seq durably (and, when given, every origin's up to its applied
    sequence: what this region need not keep for relaying)."""
    rk = region_of(c)
    if rk.links is None:
        raise err("AAACK: this server has no region links")
    try:
        peer, seq = int(argv[1]), int(argv[2])
        words = argv[3:]
        if len(words) % 2:
            raise ValueError
        vector = {int(words[i]): int(words[i + 1]) for i in range(0, len(words), 2)}
    except ValueError:
        raise err("AAACK <region> <seq> [<origin> <seq>]…: not integers") from None
    rk.links.ack(peer, seq, vector)
    return OK


def cmd_aarelay(c: Client, argv: list[bytes]) -> Reply:
    """AARELAY <origin> <seq> (on a peer's link, after AAPSYNC): send it, besides this
    region's own effects, origin's effects from seq on (it is cut off from origin); 0 stops."""
    rk = region_of(c)
    if rk.links is None:
        raise err("AARELAY: this server has no region links")
    try:
        origin, start = int(argv[1]), int(argv[2])
    except ValueError:
        raise err("AARELAY <origin> <seq>: not integers") from None
    rk.links.relay(c, origin, start)
    return OK


def cmd_aalink(c: Client, argv: list[bytes]) -> Reply:
    """AALINK PAUSE|RESUME <region id | host:port | *>: stop (or start again) receiving a
    peer's effects, for tests and maintenance; how many links it changed."""
    rk = region_of(c)
    action = argv[1].upper()
    if action not in (b"PAUSE", b"RESUME"):
        raise SYNTAX
    if rk.links is None:
        raise err("AALINK: this server has no region links (no --peers)")
    changed = rk.links.pause(argv[2], action == b"PAUSE")
    if changed < 0:
        raise err(f"AALINK: no peer link named '{argv[2].decode(errors='replace')}'")
    return changed


def info_lines(c: Client) -> list[str]:
    """INFO active-active: the region, its vector, and each peer link."""
    rk = c.server.region
    if rk is None:
        return ["region_id:0"]
    region = rk.region
    vector = ",".join(f"{r}={s}" for r, s in sorted(region.inbox.applied.items()))
    lines = [
        f"region_id:{region.id}",
        f"id_mode:{region.mode.decode()}",
        f"own_seq:{region.inbox.applied[region.id]}",
        f"vector:{vector}",
        f"waiting_effects:{region.inbox.waiting_count()}",
        f"streams:{sum(1 for d in region.dbs.values() for r in d.values() if r.exists())}",
        f"tombstones:{sum(1 for d in region.dbs.values() for r in d.values() if not r.exists())}",
        f"own_effects_kept:{len(rk.own)}",
        f"relay_effects_kept:{sum(len(kept) for kept in rk.relayed.values())}",
    ]
    if rk.links is not None:
        lines += rk.links.info_lines()
    return lines


def cmd_aarestore(c: Client, argv: list[bytes]) -> Reply | Written:
    """AARESTORE <state> (internal): a rewritten AOF's base in command form (``aof-use-rdb-
    preamble no``) carries the whole region as one command (``activeactive.persist``)."""
    rk = c.server.region
    if rk is None or not c.replaying:
        raise AAEFFECT_INTERNAL
    rk.load_state(argv[1])
    return Written(OK, Change(1))


def cmd_aaidmp(c: Client, argv: list[bytes]) -> Reply | Written:
    """AAIDMP key pid iid id (internal): an IDMP iid this region recorded, replayed from its
    AOF."""
    rk = c.server.region
    if rk is None or not c.replaying:
        raise AAEFFECT_INTERNAL
    sid = parse_id(argv[4])
    rk.region.select(c.db.index)
    rk.replay_idmp(argv[1], (argv[2], argv[3]), sid, c.server.config["stream-idmp-maxsize"])
    return Written(OK, Change(1))


def cmd_aalocal(c: Client, argv: list[bytes]) -> Reply | Written:
    """AALOCAL key group … (internal): this region's local group state, replayed from its AOF
    (``activeactive.journal``)."""
    rk = c.server.region
    if rk is None or not c.replaying:
        raise AAEFFECT_INTERNAL
    apply_local(db_streams(rk.region.dbs, c.db.index), argv)
    return Written(OK, Change(1))


def cmd_aaeffect(c: Client, argv: list[bytes]) -> Reply | Written:
    """AAEFFECT origin seq … and AAXADD origin seq key id field value … (internal, the
    compact line: activeactive/envelope.py): an effect of this region's AOF, replayed through
    the same apply as when it was made (``Region.replay``)."""
    rk = c.server.region
    if rk is None or not c.replaying:
        raise AAEFFECT_INTERNAL
    rk.region.replay(from_line(argv))
    rk.take_lines()
    return Written(OK, Change(1))


#: the plain table's rows whose handlers a region replaces (their arity, flags and keys stay)
HANDLERS: dict[str, Handler] = {
    "del": cmd_del,
    "unlink": cmd_del,
    "flushdb": cmd_flushdb,
    "flushall": cmd_flushall,
    "rename": cmd_rename,
    "renamenx": cmd_renamenx,
    "copy": _copy,
    "move": _move,
    "swapdb": _swapdb,
    "sort": _sort,
    "expire": _not_on_streams("EXPIRE", plain_keys.cmd_expire),
    "pexpire": _not_on_streams("PEXPIRE", plain_keys.cmd_pexpire),
    "expireat": _not_on_streams("EXPIREAT", plain_keys.cmd_expireat),
    "pexpireat": _not_on_streams("PEXPIREAT", plain_keys.cmd_pexpireat),
}


def plain_handler(name: str) -> Handler:
    """The plain table's handler of a command (its ``SPECS`` row)."""
    for row in strings.SPECS:
        if row.name == name and row.handler is not None:
            return row.handler
    raise KeyError(name)


#: commands that replace a key of any type: refused on a stream key (its region record would
#: stay behind the new value)
for _name, _step in (("set", 0), ("setex", 0), ("psetex", 0), ("getset", 0), ("mset", 2)):
    HANDLERS[_name] = _not_on_streams(_name.upper(), plain_handler(_name), _step)


#: rows a region adds
NEW_ROWS = (
    spec("aadump", 1, "readonly", (0, 0, 0), cmd_aadump),
    spec("aaeffect", -5, "write", (0, 0, 0), cmd_aaeffect),
    spec("aaxadd", -7, "write", (0, 0, 0), cmd_aaeffect),
    spec("aalocal", -7, "write", (0, 0, 0), cmd_aalocal),
    spec("aapsync", -3, "admin noscript", (0, 0, 0), cmd_aapsync),
    spec("aalink", 3, "admin noscript", (0, 0, 0), cmd_aalink),
    spec("aaack", -3, "admin noscript", (0, 0, 0), cmd_aaack),
    spec("aarelay", 3, "admin noscript", (0, 0, 0), cmd_aarelay),
    spec("aarestore", 2, "write", (0, 0, 0), cmd_aarestore),
    spec("aaidmp", 5, "write", (0, 0, 0), cmd_aaidmp),
)


def overlay(table: dict[bytes, CommandSpec]) -> None:
    """Give the table's stream rows the region's handlers, and add AADUMP and AAEFFECT (the
    table is the engine's own copy: ``build_table`` makes fresh rows)."""
    for name, handler in HANDLERS.items():
        top, _, sub = name.partition("|")
        row = table[top.upper().encode()]
        if sub:
            row = row.subcommands[sub.encode()]
        row.handler = handler
    for row in NEW_ROWS:
        table[row.name.upper().encode()] = row.fresh()
