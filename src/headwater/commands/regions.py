"""Stream commands of an active-active region (issue 18; docs/active-active.md).

A server started with ``region-id`` builds a ``Region`` (``activeactive``) and swaps the
stream rows of its command table for the ones below (``AA_SPECS``, an overlay); a server
without ``region-id`` never imports a line of this on its command path: it runs the plain
handlers, untouched.

Theory of operation
-------------------
Each handler parses exactly as the plain one (the same parsers, so the same errors), asks the
``Region`` for the change (which makes and applies the effect: the write rule exists once,
in ``activeactive.apply``) and answers with the plain server's reply shape. Every effect the
region applies, its own or a peer's, passes ``RegionKeyspace.__call__`` (one of
``Region.sinks``), which keeps database 0 in step: a stream that exists (entries or groups) is
in ``db.data`` (so KEYS, SCAN, EXISTS, DBSIZE, TYPE and WATCH see it), a tombstone is not, and
blocked readers of a changed key are woken. The effects' lines (``AAEFFECT …``) go back to the
engine in the handler's ``Written``, so the engine's choke point (``Engine.effect_sinks``)
logs them: the AOF replays them through ``AAEFFECT``, which calls ``Region.replay``.

Consumers, PELs and delivery cursors are local: XREADGROUP, XCLAIM, XAUTOCLAIM, XGROUP
SETID/CREATECONSUMER/DELCONSUMER change no replicated state and make no effect.

What differs from a plain server, by design (spec/ACTIVE-ACTIVE.md): strict and semi-strict
modes pick IDs of the region's sequence class; a deleted stream's IDs keep rising (its
tombstone remembers them); ``~`` trims are exact; XSETID never lowers the last ID. Not
supported here yet (a clear error): IDMP/IDMPAUTO, KEEPREF/DELREF/ACKED, XDELEX, XACKDEL,
XNACK, XREAD/XREADGROUP MAXCOUNT/MAXSIZE/CLAIM, XINFO STREAM FULL, XSETID ENTRIESADDED/
MAXDELETEDID, and streams outside database 0.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Protocol

from headwater.activeactive.envelope import Effect, Move, from_line
from headwater.activeactive.journal import apply_local, local_line
from headwater.activeactive.persist import dump_state, load_state
from headwater.activeactive.region import Region
from headwater.activeactive.rstream import RegionGroup, RegionStream, Tag
from headwater.commands import groups as plain_groups
from headwater.commands import keys as plain_keys
from headwater.commands import strings
from headwater.commands.args import parse_int
from headwater.commands.context import Block, Client, CommandSpec, Handler, spec
from headwater.commands.entries import array_of, encode_range, entry_reply
from headwater.commands.groups import (
    BUSYGROUP,
    KEY_REQUIRED,
    nogroup,
    nogroup_for_key,
    parse_xautoclaim,
    parse_xclaim,
    parse_xpending,
)
from headwater.commands.notify import lookup_read, notify
from headwater.commands.streams import (
    LISTPACK_MAX,
    TOO_LARGE,
    XTRIM_NO_STRATEGY,
    TrimOpts,
    parse_xadd,
    parse_xread,
)
from headwater.config import Config
from headwater.errors import (
    NO_SUCH_KEY,
    SYNTAX,
    WRONGTYPE,
    ReplyError,
    err,
    subcommand_syntax,
)
from headwater.keyevents import GENERIC, STREAM
from headwater.keyspace import Database, Keyspace
from headwater.ops.change import Change, Written
from headwater.resp.types import NULL_ARRAY, OK, PairMap, Raw, Reply
from headwater.stream.groups import UNKNOWN, Group, advance, bumped, lag
from headwater.stream.ids import MAX_ID, MIN_ID, StreamID, format_id, incr_id, parse_id
from headwater.stream.ids import parse_range_bound as bound

DB0_ONLY = err("active-active streams live in database 0: SELECT 0 to use them")
AAEFFECT_INTERNAL = err(
    "AAEFFECT and AALOCAL are internal: they are only replayed from this region's AOF"
)
_NULL_ENTRY = Raw(b"*-1\r\n")
_NULL_ENTRY3 = Raw(b"_\r\n")


def unsupported(what: str) -> ReplyError:
    return err(f"{what} is not supported in active-active mode (region-id is set)")


class Links(Protocol):
    """The server layer's links to the peer regions (server/aa_links.py)."""

    def aapsync(self, c: Client, peer: int, vector: dict[int, int]) -> Reply: ...
    def pause(self, peer: bytes, paused: bool) -> int:
        """How many links it changed; -1 when none is named so."""
        ...

    def info_lines(self) -> list[str]: ...


class RegionKeyspace:
    """The region of a server and its database 0, kept in step (one of ``Region.sinks``)."""

    def __init__(self, region: Region, db: Database) -> None:
        self.region = region
        self.db = db
        #: this region's own effects, in sequence order, from ``own_first`` on: what peers
        #: resume from (rebuilt by the AOF replay; a snapshot keeps none of them)
        self.own: list[Effect] = []
        self.own_first = 1
        #: the links to the peers (the server layer sets them; None: no peers, or no server)
        self.links: Links | None = None
        #: effects applied since the handler last took them (their lines go to the engine)
        self.applied: list[Effect] = []
        #: groups whose local state a command may have changed, and whether their cursors or
        #: counters did (logged as AALOCAL lines after the effects)
        self.groups: list[tuple[bytes, RegionGroup, bool]] = []
        region.sinks.append(self)

    def __call__(self, effect: Effect) -> None:
        for op in effect.ops:
            if isinstance(op, Move):
                self.sync(op.src)
                self.sync(op.dst)
            else:
                self.sync(op.key)
        self.applied.append(effect)
        if effect.origin == self.region.id:
            self.own.append(effect)

    def sync(self, key: bytes) -> None:
        """Make ``db.data[key]`` the stream when it exists, nothing when it is a tombstone;
        watchers and blocked readers of the key hear of the change."""
        db = self.db
        record = self.region.streams.get(key)
        current = db.data.get(key)
        if record is not None and record.exists():
            if current is not record:
                db.set(key, record)
            else:
                db.signal_modified(key)
                if db.blocking:
                    db.signal_ready(key)
        elif isinstance(current, RegionStream):
            db.delete(key)

    def local(self, key: bytes, group: RegionGroup, moved: bool = False) -> None:
        """A command may have changed the group's local state (``moved``: its cursors or
        counters): log it after the effects."""
        self.groups.append((key, group, moved))

    # -- snapshots (``Keyspace.persisted``) ------------------------------------------------

    def dump_state(self) -> bytes:
        return dump_state(self.region)

    def load_state(self, data: bytes) -> None:
        """A snapshot's region: replaces this one; database 0 shows its visible streams."""
        load_state(self.region, data)
        self.own.clear()  # (a snapshot keeps the state, not the effects that made it)
        self.own_first = self.region.inbox.applied[self.region.id] + 1
        for key, value in list(self.db.data.items()):
            if isinstance(value, RegionStream) and key not in self.region.streams:
                self.db.delete(key)
        for key in self.region.streams:
            self.sync(key)

    def reset(self) -> None:
        """Forget everything (before the data is loaded again: DEBUG LOADAOF, DEBUG RELOAD)."""
        region = self.region
        region.streams.clear()
        region.inbox.applied.clear()
        region.inbox.applied[region.id] = 0
        region.inbox.waiting.clear()
        region.inbox.waiting[region.id] = {}
        region.outbox.clear()
        self.own.clear()
        self.own_first = 1
        self.applied.clear()
        self.groups.clear()

    def take_lines(self) -> list[list[bytes]]:
        effects, self.applied = self.applied, []
        lines = [effect.to_line() for effect in effects]
        touched, self.groups = self.groups, []
        logged: list[RegionGroup] = []
        for key, group, moved in touched:
            if any(group is g for g in logged):
                continue
            changed = bool(moved or group.touched or group.touched_consumers)
            changed = changed or any(g is group and m for _, g, m in touched)
            record = self.region.streams.get(key)
            if changed and record is not None and record.groups.get(group.name) is group:
                lines.append(local_line(key, group))
                logged.append(group)
        return lines

    def written(self, reply: Reply, dirty: int | None = None) -> Reply | Written:
        """The reply, with the lines of the effects applied (if any) for the engine."""
        lines = self.take_lines()
        changes = len(lines) if dirty is None else dirty
        if not lines and not changes:
            return reply
        return Written(reply, Change(changes, lines))


def attach_region(config: Config, keyspace: Keyspace) -> RegionKeyspace | None:
    """The region of a server started with ``region-id`` (None without)."""
    region_id: int = config["region-id"]
    if not region_id:
        return None
    region = Region(region_id, [region_id], config["active-active-id-mode"].encode())
    rk = RegionKeyspace(region, keyspace.dbs[0])
    keyspace.persisted = rk
    return rk


# ---------------------------------------------------------------------------------------------
# lookups


def _rk(c: Client) -> RegionKeyspace:
    rk = c.server.region
    if rk is None:  # (the rows are only installed with a region)
        raise unsupported("this command without a region")
    if c.db is not rk.db:
        raise DB0_ONLY
    return rk


def _record(c: Client, key: bytes, read: bool = True) -> RegionStream | None:
    """The stream at key (a read's lookup counts a hit or a miss); WRONGTYPE for another
    type."""
    value = lookup_read(c, key) if read else c.db.get(key)
    if value is None or isinstance(value, RegionStream):
        return value
    raise WRONGTYPE


def _group(c: Client, key: bytes, name: bytes) -> tuple[RegionStream, RegionGroup] | None:
    record = _record(c, key)
    group = None if record is None else record.groups.get(name)
    return None if record is None or group is None else (record, group)


def _encode(
    record: RegionStream, start: StreamID, end: StreamID, count: int, reverse: bool = False
) -> tuple[Raw, list[StreamID]]:
    """The entries start..end, merged by ID, as one array (one writing region: its sub-log
    encoded straight from the packed nodes); and their IDs."""
    subs = [s for s in record.subs.values() if s.length]
    if len(subs) == 1:
        raw, _ = encode_range(subs[0], start, end, count, reverse)
        ids = [sid for sid, _ in subs[0].range(start, end, count or None, reverse)]
        return raw, ids
    entries = record.entries(start, end, count or None, reverse)
    return array_of([entry_reply(e) for e in entries]), [sid for sid, _ in entries]


# ---------------------------------------------------------------------------------------------
# XADD / XRANGE / XREVRANGE / XLEN / XDEL / XTRIM / XSETID


def _check_trim(trim: TrimOpts) -> None:
    if trim.ref != b"KEEPREF":
        raise unsupported("DELREF and ACKED")


def cmd_xadd(c: Client, argv: list[bytes]) -> Reply | Written:
    """XADD key [NOMKSTREAM] [<MAXLEN | MINID> [= | ~] threshold [LIMIT n]] <* | id> field
    value [...]: the ID by active-active-id-mode; trims are exact."""
    opts = parse_xadd(c, argv)
    if opts.idmp is not None:
        raise unsupported("XADD IDMP/IDMPAUTO")
    _check_trim(opts.trim)
    rk, key = _rk(c), argv[1]
    record = _record(c, key, read=False)
    if record is None and opts.nomkstream:
        return None
    pairs = argv[opts.id_index + 1 :]
    if sum(map(len, pairs)) > LISTPACK_MAX:
        raise TOO_LARGE
    region = rk.region
    sid = region.xadd(key, argv[opts.id_index], pairs, c.server.keyspace.now_ms)
    trim = opts.trim
    trimmed = region.xtrim(key, trim.maxlen, trim.minid) if trim.given else 0
    if c.server.keyspace.notify_flags & STREAM:
        notify(c, STREAM, b"xadd", key)
        if trimmed:
            notify(c, STREAM, b"xtrim", key)
    return rk.written(format_id(sid), 1 + trimmed)


def _range(c: Client, argv: list[bytes], reverse: bool) -> Reply:
    """XRANGE key start end [COUNT count] / XREVRANGE key end start [COUNT count]"""
    _rk(c)
    lo_raw, hi_raw = (argv[3], argv[2]) if reverse else (argv[2], argv[3])
    start, end = bound(lo_raw, is_start=True), bound(hi_raw, is_start=False)
    count: int | None = None
    i = 4
    while i < len(argv):
        if argv[i].upper() == b"COUNT" and i + 1 < len(argv):
            count = max(parse_int(argv[i + 1]), 0)
            i += 2
        else:
            raise SYNTAX
    record = _record(c, argv[1])
    if record is None:
        return []
    if count == 0:
        return NULL_ARRAY
    return _encode(record, start, end, count or 0, reverse)[0]


def cmd_xrange(c: Client, argv: list[bytes]) -> Reply:
    return _range(c, argv, reverse=False)


def cmd_xrevrange(c: Client, argv: list[bytes]) -> Reply:
    return _range(c, argv, reverse=True)


def cmd_xlen(c: Client, argv: list[bytes]) -> Reply:
    _rk(c)
    record = _record(c, argv[1])
    return 0 if record is None else record.length


def cmd_xdel(c: Client, argv: list[bytes]) -> Reply | Written:
    """XDEL key id [id ...]: each ID in every sub-log that holds it."""
    rk = _rk(c)
    record = _record(c, argv[1], read=False)
    if record is None:
        return 0
    deleted = rk.region.xdel(argv[1], [parse_id(raw) for raw in argv[2:]])
    if deleted:
        notify(c, STREAM, b"xdel", argv[1])
    return rk.written(deleted, deleted)


def cmd_xtrim(c: Client, argv: list[bytes]) -> Reply | Written:
    """XTRIM key <MAXLEN | MINID> [= | ~] threshold [LIMIT count]: exact, over the merged
    stream."""
    from headwater.commands.streams import LIMIT_NO_STRATEGY, _parse_trim_token

    rk = _rk(c)
    trim = TrimOpts()
    i = 2
    while i < len(argv):
        token = argv[i].upper()
        end = _parse_trim_token(argv, i, token, trim)
        if end is not None:
            i = end + 1
        elif token in (b"KEEPREF", b"DELREF", b"ACKED"):
            if token != b"KEEPREF":
                raise unsupported("DELREF and ACKED")
            i += 1
        else:
            raise SYNTAX
    if trim.limit and not trim.given:
        raise LIMIT_NO_STRATEGY
    if not trim.given:
        raise XTRIM_NO_STRATEGY
    if trim.limit_given and not trim.approx and not c.replaying:
        raise err("syntax error, LIMIT cannot be used without the special ~ option")
    if _record(c, argv[1], read=False) is None:
        return 0
    removed = rk.region.xtrim(argv[1], trim.maxlen, trim.minid)
    if removed:
        notify(c, STREAM, b"xtrim", argv[1])
    return rk.written(removed, removed)


def cmd_xsetid(c: Client, argv: list[bytes]) -> Reply | Written:
    """XSETID key last-id: the stream's last ID rises (max-merged across regions)."""
    rk = _rk(c)
    sid = parse_id(argv[2])
    if len(argv) > 3:
        if argv[3].upper() in (b"ENTRIESADDED", b"MAXDELETEDID") and len(argv) % 2:
            raise unsupported("XSETID ENTRIESADDED/MAXDELETEDID")
        raise SYNTAX
    if _record(c, argv[1], read=False) is None:
        raise NO_SUCH_KEY
    rk.region.xsetid(argv[1], sid)
    notify(c, STREAM, b"xsetid", argv[1])
    return rk.written(OK, 1)


# ---------------------------------------------------------------------------------------------
# XREAD


def cmd_xread(c: Client, argv: list[bytes]) -> Reply | Block:
    """XREAD [COUNT n] [BLOCK ms] STREAMS key [key ...] id [id ...], merged by ID. An entry
    that arrives late from another region with a smaller ID can be skipped (use XREADGROUP)."""
    _rk(c)
    opts = parse_xread(c, argv)
    if opts.maxcount or opts.maxsize:
        raise unsupported("XREAD MAXCOUNT/MAXSIZE")
    resolved: list[tuple[RegionStream | None, StreamID | None]] = []
    for n, key in enumerate(opts.keys):
        raw = argv[opts.id_index + n]
        record = _record(c, key)
        if raw == b"$":
            after: StreamID | None = record.last_id() if record is not None else MIN_ID
        elif raw == b"+":
            after = None
        elif raw == b">":
            raise err(
                "The > ID can be specified only when calling XREADGROUP using the GROUP "
                "<group> <consumer> option."
            )
        else:
            after = parse_id(raw)
        resolved.append((record, after))
    served: list[tuple[bytes, Reply]] = []
    for key, (record, after) in zip(opts.keys, resolved, strict=True):
        lookup_read(c, key)  # (Redis looks each stream up again to serve it)
        if record is None or not record.length:
            continue
        if after is None:
            last = record.entries(MIN_ID, MAX_ID, 1, reverse=True)
            served.append((key, Raw(b"*1\r\n" + entry_reply(last[0]))))
            continue
        start = incr_id(after)
        if start is None or record.last_live_id() <= after:
            continue
        served.append((key, _encode(record, start, MAX_ID, opts.count)[0]))
    if served:
        if c.resp == 3:
            return PairMap(served)
        return [[key, entries] for key, entries in served]
    if opts.block_ms is None:
        return NULL_ARRAY
    for n, raw in enumerate(argv[opts.id_index :]):
        if raw == b"$":  # later retries must not chase entries added after we blocked
            argv[opts.id_index + n] = format_id(resolved[n][1] or MIN_ID)
    deadline = c.server.clock.monotonic_ms() + opts.block_ms if opts.block_ms else 0
    return Block(list(opts.keys), deadline, NULL_ARRAY, wakes_on=RegionStream)


# ---------------------------------------------------------------------------------------------
# consumer groups: XGROUP


def _shim(group: RegionGroup) -> Group:
    """A plain group carrying this one's last ID and entries-read, for ``stream.groups``'s
    entries-read and lag rules."""
    return Group(group.name, group.last_id, group.entries_read)


def _capped(entries_read: int, record: RegionStream) -> int:
    added = record.stats().entries_added
    return min(entries_read, added) if entries_read != UNKNOWN else UNKNOWN


def _xgroup_target(
    c: Client, argv: list[bytes], needs_group: bool, mkstream: bool = False
) -> tuple[RegionStream | None, RegionGroup | None]:
    record = _record(c, argv[2], read=False)
    group = record.groups.get(argv[3]) if record is not None else None
    if not mkstream:
        if record is None:
            raise KEY_REQUIRED
        if group is None and needs_group:
            raise nogroup_for_key(argv[2], argv[3])
    return record, group


def cmd_xgroup_create(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP CREATE key group <id | $> [MKSTREAM] [ENTRIESREAD n]: replicated (delete
    wins); ENTRIESREAD is this region's."""
    rk = _rk(c)
    opts = plain_groups._parse_xgroup_options(argv, create=True)
    record, _ = _xgroup_target(c, argv, needs_group=False, mkstream=opts.mkstream)
    if len(argv) > 8:
        raise subcommand_syntax(argv[1], "XGROUP")
    if argv[4] == b"$":
        last = record.last_id() if record is not None else MIN_ID
    else:
        last = parse_id(argv[4])
    if record is not None and argv[3] in record.groups:
        raise BUSYGROUP
    rk.region.xgroup_create(argv[2], argv[3], argv[4], mkstream=opts.mkstream)
    record = rk.region.streams[argv[2]]
    group = record.groups.get(argv[3])
    if group is not None:
        group.last_id = last
        group.entries_read = _capped(opts.entries_read, record)
        rk.local(argv[2], group, moved=True)
    notify(c, STREAM, b"xgroup-create", argv[2])
    return rk.written(OK, 1)


def cmd_xgroup_setid(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP SETID key group <id | $> [ENTRIESREAD n]: this region's cursors only."""
    rk = _rk(c)
    opts = plain_groups._parse_xgroup_options(argv, create=False)
    record, group = _xgroup_target(c, argv, needs_group=True)
    if record is None or group is None or len(argv) not in (5, 7):
        raise subcommand_syntax(argv[1], "XGROUP")
    last = record.last_id() if argv[4] == b"$" else parse_id(argv[4], strict=False)
    rk.region.xgroup_setid(argv[2], argv[3], b"$" if argv[4] == b"$" else format_id(last))
    group.last_id = last
    group.entries_read = _capped(opts.entries_read, record)
    rk.local(argv[2], group, moved=True)
    c.db.signal_modified(argv[2])
    notify(c, STREAM, b"xgroup-setid", argv[2])
    return rk.written(OK, 1)


def cmd_xgroup_destroy(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP DESTROY key group: replicated; delete wins over a concurrent CREATE."""
    rk = _rk(c)
    _, group = _xgroup_target(c, argv, needs_group=False)
    if group is None:
        return 0
    rk.region.xgroup_destroy(argv[2], argv[3])
    notify(c, STREAM, b"xgroup-destroy", argv[2])
    return rk.written(1, 1)


def cmd_xgroup_createconsumer(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP CREATECONSUMER key group consumer (local)"""
    rk = _rk(c)
    _, group = _xgroup_target(c, argv, needs_group=True)
    if group is None or argv[4] in group.times:
        return 0
    group.touch(argv[4], c.server.keyspace.now_ms)
    rk.local(argv[2], group)
    c.db.signal_modified(argv[2])
    notify(c, STREAM, b"xgroup-createconsumer", argv[2])
    return rk.written(1, 1)


def cmd_xgroup_delconsumer(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP DELCONSUMER key group consumer (local): how many entries it had pending."""
    rk = _rk(c)
    _, group = _xgroup_target(c, argv, needs_group=True)
    pending = None if group is None else group.delete_consumer(argv[4])
    if group is None or pending is None:
        return 0
    rk.local(argv[2], group)
    c.db.signal_modified(argv[2])
    notify(c, STREAM, b"xgroup-delconsumer", argv[2])
    return rk.written(pending, 1)


# ---------------------------------------------------------------------------------------------
# XREADGROUP / XACK


def _touch(c: Client, key: bytes, group: RegionGroup, name: bytes) -> None:
    if group.touch(name, c.server.keyspace.now_ms):
        notify(c, STREAM, b"xgroup-createconsumer", key)


def _read_targets(
    c: Client, argv: list[bytes], group: bytes, keys: list[bytes], id_index: int
) -> list[tuple[RegionStream, RegionGroup, bytes]]:
    targets = []
    for n, key in enumerate(keys):
        found = _group(c, key, group)
        if found is None:
            raise nogroup(key, group, " in XREADGROUP with GROUP option")
        raw = argv[id_index + n]
        if raw in (b"$", b"+"):
            sym = raw.decode()
            raise err(
                f"The {sym} ID is meaningless in the context of XREADGROUP: you want to read the "
                "history of this consumer by specifying a proper ID, or use the > ID to get new "
                f"messages. The {sym} ID would just return an empty result set."
            )
        if raw != b">":
            parse_id(raw)
        targets.append((*found, raw))
    return targets


def _history_reply(c: Client, rows: list[tuple[StreamID, list[bytes] | None]]) -> Raw:
    parts: list[bytes] = []
    null = _NULL_ENTRY3 if c.resp == 3 else _NULL_ENTRY
    for sid, pairs in rows:
        if pairs is None:
            raw = format_id(sid)
            parts.append(b"*2\r\n$%d\r\n%s\r\n%s" % (len(raw), raw, null))
        else:
            parts.append(entry_reply((sid, pairs)))
    return array_of(parts)


def _advance(record: RegionStream, group: RegionGroup, ids: list[StreamID]) -> None:
    """Keep the group's last-delivered-id and entries-read as Redis would (an entry that
    arrived late, below the last ID, makes the count unknown)."""
    if ids and ids[0] > group.last_id:
        shim = _shim(group)
        advance(record.stats(), shim, ids)
        group.last_id, group.entries_read = shim.last_id, shim.entries_read
    elif ids:
        group.last_id = max(group.last_id, ids[-1])
        group.entries_read = UNKNOWN


def cmd_xreadgroup(c: Client, argv: list[bytes]) -> Reply | Block | Written:
    """XREADGROUP GROUP g consumer [COUNT n] [BLOCK ms] [NOACK] STREAMS key [...] id [...]:
    ``>`` takes from each sub-log what lies above its cursor, so a late entry is never
    skipped."""
    rk = _rk(c)
    opts = parse_xread(c, argv, group=True)
    if opts.maxcount or opts.maxsize or opts.claim_ms is not None:
        raise unsupported("XREADGROUP MAXCOUNT/MAXSIZE/CLAIM")
    targets = _read_targets(c, argv, opts.group, opts.keys, opts.id_index)
    now = c.server.keyspace.now_ms
    served: list[tuple[bytes, Reply]] = []
    changed = 0
    count = opts.count or None
    for key, (record, group, raw) in zip(opts.keys, targets, strict=True):
        lookup_read(c, key)  # (Redis looks each stream up again to serve it)
        _touch(c, key, group, opts.consumer)
        rk.local(key, group)
        if raw != b">":
            rows = rk.region.xreadgroup(key, opts.group, opts.consumer, raw, now, count)
            served.append((key, _history_reply(c, rows)))
            changed += any(pairs is not None for _, pairs in rows)
            continue
        rows = rk.region.xreadgroup(key, opts.group, opts.consumer, b">", now, count, opts.noack)
        if not rows:
            continue
        _advance(record, group, [sid for sid, _ in rows])
        rk.local(key, group, moved=True)
        if not opts.noack:
            group.touch(opts.consumer, now, active=True)
        served.append((key, array_of([entry_reply((sid, p)) for sid, p in rows if p])))
        changed += 1
    if served:
        reply: Reply = PairMap(served) if c.resp == 3 else [[k, e] for k, e in served]
        return rk.written(reply, changed)
    if opts.block_ms is None:
        return rk.written(NULL_ARRAY, changed)
    deadline = c.server.clock.monotonic_ms() + opts.block_ms if opts.block_ms else 0
    block = Block(list(opts.keys), deadline, NULL_ARRAY)
    lines = rk.take_lines()
    return Written(block, Change(changed, lines)) if changed or lines else block


def cmd_xack(c: Client, argv: list[bytes]) -> Reply | Written:
    """XACK key group id [id ...]: replicated only as each sub-log's contiguous prefix."""
    rk = _rk(c)
    ids = [parse_id(raw) for raw in argv[3:]]
    found = _group(c, argv[1], argv[2])
    if found is None:
        return 0
    acked = rk.region.xack(argv[1], argv[2], ids)
    if acked:
        rk.local(argv[1], found[1])
    return rk.written(acked, acked)


# ---------------------------------------------------------------------------------------------
# XPENDING / XCLAIM / XAUTOCLAIM (the local PEL)


def cmd_xpending(c: Client, argv: list[bytes]) -> Reply:
    """XPENDING key group [[IDLE min-idle] start end count [consumer]]"""
    _rk(c)
    opts = parse_xpending(argv)
    found = _group(c, argv[1], argv[2])
    if found is None:
        raise nogroup(argv[1], argv[2])
    group = found[1]
    if opts is None:
        if not group.pel:
            return [0, None, None, NULL_ARRAY]
        owners: list[Reply] = [
            [name, b"%d" % len(tags)] for name, tags in sorted(group.consumers.items()) if tags
        ]
        first, last = group.order[0][0], group.order[-1][0]
        return [len(group.pel), format_id(first), format_id(last), owners]
    if opts.consumer is not None:
        tags = group.consumers.get(opts.consumer)
        if tags is None:
            return []
    else:
        tags = group.order
    now = c.server.keyspace.now_ms
    rows: list[Reply] = []
    for tag in tags[bisect_left(tags, (opts.start, 0)) :]:
        if tag[0] > opts.end or len(rows) >= opts.count:
            break
        pending = group.pel[tag]
        idle = now - pending.delivery_ms
        if opts.min_idle and idle < opts.min_idle:
            continue
        rows.append([format_id(tag[0]), pending.consumer, max(idle, 0), pending.count])
    return rows


def _claim(
    c: Client,
    record: RegionStream,
    group: RegionGroup,
    tag: Tag,
    consumer: bytes,
    delivery_ms: int,
    count: int,
    justid: bool,
    items: list[Reply],
) -> None:
    group.claim(tag, consumer, delivery_ms, count)
    if justid:
        items.append(format_id(tag[0]))
    else:
        pairs = record.entry(tag[1], tag[0])
        items.append(entry_reply((tag[0], pairs or [])))


def cmd_xclaim(c: Client, argv: list[bytes]) -> Reply | Written:
    """XCLAIM key group consumer min-idle id [id ...] [IDLE ms] [TIME ms] [RETRYCOUNT n]
    [FORCE] [JUSTID] [LASTID id] (local)"""
    rk = _rk(c)
    found = _group(c, argv[1], argv[2])
    if found is None:
        raise nogroup(argv[1], argv[2])
    record, group = found
    now = c.server.keyspace.now_ms
    opts = parse_xclaim(argv, now)
    changed = 0
    if opts.last_id > group.last_id:
        group.last_id = opts.last_id
        changed = 1
    _touch(c, argv[1], group, argv[3])
    rk.local(argv[1], group, moved=True)
    items: list[Reply] = []
    delivery_ms = opts.delivery_ms if opts.delivery_ms is not None else now
    for raw in opts.ids:
        sid = parse_id(raw)
        live = [(sid, r) for r in sorted(record.subs) if record.entry(r, sid) is not None]
        for tag in [t for t in group.order[bisect_left(group.order, (sid, 0)) :] if t[0] == sid]:
            if tag not in live:
                group.forget(tag)  # its entry is gone from the stream
                changed += 1
        for tag in live:
            pending = group.pel.get(tag)
            if pending is None and not opts.force:
                continue
            if pending is not None and opts.min_idle and now - pending.delivery_ms < opts.min_idle:
                continue
            count = 1 if pending is None else pending.count
            if opts.retrycount is not None:
                count = opts.retrycount
            elif not opts.justid:
                count = bumped(count)
            _claim(c, record, group, tag, argv[3], delivery_ms, count, opts.justid, items)
            changed += 1
    if items:
        group.touch(argv[3], now, active=True)
    return rk.written(items, changed)


def cmd_xautoclaim(c: Client, argv: list[bytes]) -> Reply | Written:
    """XAUTOCLAIM key group consumer min-idle start [COUNT n] [JUSTID] (local)"""
    rk = _rk(c)
    min_idle, start, count, justid = parse_xautoclaim(argv)
    found = _group(c, argv[1], argv[2])
    if found is None:
        raise nogroup(argv[1], argv[2])
    record, group = found
    _touch(c, argv[1], group, argv[3])
    rk.local(argv[1], group)
    now = c.server.keyspace.now_ms
    attempts = count * 10
    lo = bisect_left(group.order, (start, 0))
    tags = group.order[lo : lo + min(attempts, len(group.pel)) + 1]
    items: list[Reply] = []
    deleted: list[Reply] = []
    changed = 0
    i = 0
    while attempts and count and i < len(tags):
        attempts -= 1
        tag = tags[i]
        i += 1
        if record.entry(tag[1], tag[0]) is None:
            group.forget(tag)
            deleted.append(format_id(tag[0]))
            count -= 1
            changed += 1
            continue
        pending = group.pel[tag]
        if min_idle and now - pending.delivery_ms < min_idle:
            continue
        new_count = pending.count if justid else bumped(pending.count)
        _claim(c, record, group, tag, argv[3], now, new_count, justid, items)
        count -= 1
        changed += 1
    if items:
        group.touch(argv[3], now, active=True)
    cursor = format_id(tags[i][0]) if i < len(tags) else b"0-0"
    return rk.written([cursor, items, deleted], changed)


# ---------------------------------------------------------------------------------------------
# XINFO


def _existing(c: Client, key: bytes) -> RegionStream:
    record = _record(c, key)
    if record is None:
        raise NO_SUCH_KEY
    return record


def cmd_xinfo_stream(c: Client, argv: list[bytes]) -> Reply:
    """XINFO STREAM key (FULL: not yet in active-active mode)"""
    _rk(c)
    record = _existing(c, argv[2])
    if len(argv) > 3:
        if argv[3].upper() == b"FULL" and len(argv) in (4, 6):
            raise unsupported("XINFO STREAM FULL")
        raise subcommand_syntax(argv[1], "XINFO")
    stats = record.stats()
    nodes = sum(len(s.nodes) for s in record.subs.values())
    config = c.server.config
    first = record.entries(MIN_ID, MAX_ID, 1)
    last = record.entries(MIN_ID, MAX_ID, 1, reverse=True)
    return {
        b"length": stats.length,
        b"radix-tree-keys": nodes,
        b"radix-tree-nodes": max(nodes * 2, 1) if nodes else 1,
        b"last-generated-id": format_id(stats.last_id),
        b"max-deleted-entry-id": format_id(stats.max_deleted_id),
        b"entries-added": stats.entries_added,
        b"recorded-first-entry-id": format_id(stats.first_id),
        b"idmp-duration": config["stream-idmp-duration"],
        b"idmp-maxsize": config["stream-idmp-maxsize"],
        b"pids-tracked": 0,
        b"iids-tracked": 0,
        b"iids-added": 0,
        b"iids-duplicates": 0,
        b"groups": len(record.groups),
        b"first-entry": entry_reply(first[0]) if first else None,
        b"last-entry": entry_reply(last[0]) if last else None,
    }


def cmd_xinfo_groups(c: Client, argv: list[bytes]) -> Reply:
    """XINFO GROUPS key (consumers and pending: this region's)"""
    _rk(c)
    record = _existing(c, argv[2])
    stats = record.stats()
    rows: list[Reply] = []
    for name in sorted(record.groups):
        group = record.groups[name]
        rows.append(
            {
                b"name": name,
                b"consumers": len(group.consumers),
                b"pending": len(group.pel),
                b"last-delivered-id": format_id(group.last_id),
                b"entries-read": None if group.entries_read == UNKNOWN else group.entries_read,
                b"lag": lag(stats, _shim(group)),
            }
        )
    return rows


def cmd_xinfo_consumers(c: Client, argv: list[bytes]) -> Reply:
    """XINFO CONSUMERS key group (this region's consumers)"""
    _rk(c)
    record = _existing(c, argv[2])
    group = record.groups.get(argv[3])
    if group is None:
        raise nogroup_for_key(argv[2], argv[3])
    now = c.server.keyspace.now_ms
    rows: list[Reply] = []
    for name in sorted(group.consumers):
        seen, active = group.times.get(name, [now, -1])
        rows.append(
            {
                b"name": name,
                b"pending": len(group.consumers[name]),
                b"idle": max(now - seen, 0),
                b"inactive": max(now - active, 0) if active >= 0 else -1,
            }
        )
    return rows


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
    if rk is None or c.db is not rk.db:
        return plain_keys.cmd_del(c, argv)
    streams, others = _streams_and_others(c, argv[1:])
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
    if rk is None or (c.db is not rk.db and not every_db):
        return plain(c, argv)
    plain_keys._flush_mode(argv)
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
    if rk is None or c.db is not rk.db:
        return plain(c, argv)
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


#: stream commands whose active-active rules are not built yet: refused with a clear error
UNSUPPORTED = ("xdelex", "xackdel", "xnack")


def _refused(name: str) -> Handler:
    def refuse(c: Client, argv: list[bytes]) -> Reply:
        raise unsupported(name)

    return refuse


# ---------------------------------------------------------------------------------------------
# AADUMP / AAEFFECT


def cmd_aadump(c: Client, argv: list[bytes]) -> Reply:
    """AADUMP: the region's canonical dump (``Region.dump``): every visible stream with its
    entries and sub-logs, its groups (births, acknowledged prefixes) and the applied vector;
    equal in every region once all effects are delivered."""
    return _rk(c).region.dump().encode()


def cmd_aapsync(c: Client, argv: list[bytes]) -> Reply:
    """AAPSYNC <region> <n> (<region> <applied seq>) * n: a peer region asks for this region's
    own effects after what its vector says it applied; the connection then carries them."""
    rk = _rk(c)
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


def cmd_aalink(c: Client, argv: list[bytes]) -> Reply:
    """AALINK PAUSE|RESUME <region id | host:port | *>: stop (or start again) receiving a
    peer's effects, for tests and maintenance; how many links it changed."""
    rk = _rk(c)
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
        f"streams:{sum(1 for r in region.streams.values() if r.exists())}",
        f"tombstones:{sum(1 for r in region.streams.values() if not r.exists())}",
        f"own_effects_kept:{len(rk.own)}",
    ]
    if rk.links is not None:
        lines += rk.links.info_lines()
    return lines


def cmd_aalocal(c: Client, argv: list[bytes]) -> Reply | Written:
    """AALOCAL key group … (internal): this region's local group state, replayed from its AOF
    (``activeactive.journal``)."""
    rk = c.server.region
    if rk is None or not c.replaying:
        raise AAEFFECT_INTERNAL
    apply_local(rk.region.streams, argv)
    return Written(OK, Change(1))


def cmd_aaeffect(c: Client, argv: list[bytes]) -> Reply | Written:
    """AAEFFECT origin seq … (internal): an effect of this region's AOF, replayed through the
    same apply as when it was made (``Region.replay``)."""
    rk = c.server.region
    if rk is None or not c.replaying:
        raise AAEFFECT_INTERNAL
    rk.region.replay(from_line(argv))
    rk.take_lines()
    return Written(OK, Change(1))


#: the plain table's rows whose handlers a region replaces (their arity, flags and keys stay)
HANDLERS: dict[str, Handler] = {
    "xadd": cmd_xadd,
    "xrange": cmd_xrange,
    "xrevrange": cmd_xrevrange,
    "xlen": cmd_xlen,
    "xdel": cmd_xdel,
    "xtrim": cmd_xtrim,
    "xsetid": cmd_xsetid,
    "xread": cmd_xread,
    "xgroup|create": cmd_xgroup_create,
    "xgroup|setid": cmd_xgroup_setid,
    "xgroup|destroy": cmd_xgroup_destroy,
    "xgroup|createconsumer": cmd_xgroup_createconsumer,
    "xgroup|delconsumer": cmd_xgroup_delconsumer,
    "xreadgroup": cmd_xreadgroup,
    "xack": cmd_xack,
    "xpending": cmd_xpending,
    "xclaim": cmd_xclaim,
    "xautoclaim": cmd_xautoclaim,
    "xinfo|stream": cmd_xinfo_stream,
    "xinfo|groups": cmd_xinfo_groups,
    "xinfo|consumers": cmd_xinfo_consumers,
    "del": cmd_del,
    "unlink": cmd_del,
    "flushdb": cmd_flushdb,
    "flushall": cmd_flushall,
    "rename": cmd_rename,
    "renamenx": cmd_renamenx,
    "expire": _not_on_streams("EXPIRE", plain_keys.cmd_expire),
    "pexpire": _not_on_streams("PEXPIRE", plain_keys.cmd_pexpire),
    "expireat": _not_on_streams("EXPIREAT", plain_keys.cmd_expireat),
    "pexpireat": _not_on_streams("PEXPIREAT", plain_keys.cmd_pexpireat),
    **{name: _refused(name.upper()) for name in UNSUPPORTED},
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
    spec("aalocal", -7, "write", (0, 0, 0), cmd_aalocal),
    spec("aapsync", -3, "admin noscript", (0, 0, 0), cmd_aapsync),
    spec("aalink", 3, "admin noscript", (0, 0, 0), cmd_aalink),
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
