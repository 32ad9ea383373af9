"""Consumer-group commands: XGROUP, XREADGROUP, XACK, XACKDEL, XNACK, XPENDING, XCLAIM,
XAUTOCLAIM.

Semantics, argument order and error texts follow STREAMS-REFERENCE §4-7 (Redis 8.8). The
structures live in ``stream/groups.py``; this module parses, calls them, and says what to
propagate. Group state changes never propagate as the command itself: XREADGROUP, XCLAIM and
XAUTOCLAIM emit one ``XCLAIM … FORCE JUSTID LASTID`` per delivered or claimed entry and
``XGROUP SETID … ENTRIESREAD`` when the group moved (§7), so a replica or an AOF replay rebuilds
the same PELs whatever its clock says. XNACK emits ``XNACK … FAIL IDS n id… RETRYCOUNT c
FORCE`` with each entry's resulting count, which gives the same zone whatever count the
replica had.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from headwater.commands.args import parse_int
from headwater.commands.context import Block, Client, help_handler, reject_subcommand, spec
from headwater.commands.entries import entry_reply
from headwater.commands.notify import notify
from headwater.commands.store import find_group
from headwater.commands.streams import (
    ReplyCaps,
    XReadOpts,
    parse_ref_and_ids,
    parse_xread,
    read_entries,
)
from headwater.errors import SYNTAX, ReplyError, c_text, err, subcommand_syntax
from headwater.keyevents import STREAM
from headwater.keyspace import Database
from headwater.ops.change import Change, Effects, Written, one_line
from headwater.ops.groups import claim_entry, forget_entry
from headwater.ops.groups import touch_consumer as touch_consumer_op
from headwater.resp.types import NULL_ARRAY, Raw, Reply
from headwater.stream.groups import (
    KEY_BASE,
    MAX_COUNT,
    UNKNOWN,
    Consumer,
    Group,
    Nack,
    advance,
    bumped,
    claim_time,
    claimed_count,
    id_key,
    key_id,
)
from headwater.stream.ids import (
    MAX_ID,
    MIN_ID,
    StreamID,
    format_id,
    incr_id,
    parse_id,
    parse_range_bound,
)
from headwater.stream.stream import Stream

BUSYGROUP = ReplyError("BUSYGROUP", "Consumer Group name already exists")
KEY_REQUIRED = err(
    "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use "
    "the MKSTREAM option to create an empty stream automatically."
)
_NULL_ENTRY = Raw(b"*-1\r\n")  # a deleted entry in a history read: RESP2 null array
_NULL_ENTRY3 = Raw(b"_\r\n")


def nogroup(key: bytes, group: bytes, suffix: str = "") -> ReplyError:
    return ReplyError(
        "NOGROUP", f"No such key '{c_text(key)}' or consumer group '{c_text(group)}'{suffix}"
    )


def nogroup_for_key(key: bytes, group: bytes) -> ReplyError:
    return ReplyError(
        "NOGROUP", f"No such consumer group '{c_text(group)}' for key name '{c_text(key)}'"
    )


def reclaim_idle(
    c: Client, key: bytes, group: Group, fx: Effects, keep: bytes | None = None
) -> None:
    """Drop the group's idle consumers with nothing pending when
    ``stream-consumer-idle-reclaim-ms`` is set; each drop propagates as DELCONSUMER."""
    idle_ms: int = c.server.config["stream-consumer-idle-reclaim-ms"]
    now = c.server.keyspace.now_ms
    # at most once a second per group: the scan is over all its consumers
    if not idle_ms or not group.consumers or now - group.reclaim_checked_ms < 1000:
        return
    group.reclaim_checked_ms = now
    for name in group.idle_consumers(now, idle_ms, keep):
        group.delete_consumer(name)
        fx.add(1, delconsumer_effect(key, group, name))


def createconsumer_effect(key: bytes, group: Group, name: bytes) -> list[bytes]:
    """A consumer's creation as an effect (XREADGROUP's: see ``_add_creation``)."""
    return [b"XGROUP", b"CREATECONSUMER", key, group.name, name]


def delconsumer_effect(key: bytes, group: Group, name: bytes) -> list[bytes]:
    return [b"XGROUP", b"DELCONSUMER", key, group.name, name]


def reclaim_idle_everywhere(db: Database, now_ms: int, idle_ms: int) -> list[Change]:
    """The cron's pass over a database: drop idle consumers with nothing pending in every
    group; returns one change per consumer dropped (its DELCONSUMER effect)."""
    effects: list[Change] = []
    for key, value in db.data.items():
        if not isinstance(value, Stream) or not value.groups:
            continue
        for group in value.groups.values():
            for name in group.idle_consumers(now_ms, idle_ms):
                group.delete_consumer(name)
                effects.append(one_line(1, delconsumer_effect(key, group, name)))
    return effects


def touch_consumer(c: Client, key: bytes, group: Group, name: bytes, fx: Effects) -> Consumer:
    """The named consumer (created on first use, which counts as a write and propagates as
    CREATECONSUMER) with its seen time set to now."""
    consumer, created = touch_consumer_op(group, name, c.server.keyspace.now_ms)
    if created:
        fx.add(created, createconsumer_effect(key, group, name))
        notify(c, STREAM, b"xgroup-createconsumer", key)
    return consumer


def drop_creation_if_claimed(fx: Effects, at: int) -> None:
    """The consumer's creation ``touch_consumer`` added at ``at`` leaves the effects if an
    XCLAIM to that consumer after it creates it on the replica anyway: Redis sends no
    CREATECONSUMER there. A creation nothing else propagates (a read that found nothing,
    a claim that claimed nothing) stays, so that replaying the effects rebuilds the same
    consumers, where Redis's replicas lack such a consumer."""
    lines = fx.lines
    if lines is None or len(lines) <= at:
        return
    created = lines[at]
    if not isinstance(created, list) or created[:2] != [b"XGROUP", b"CREATECONSUMER"]:
        return
    name = created[4]
    for line in lines[at + 1 :]:
        if isinstance(line, list) and line[0] == b"XCLAIM" and line[3] == name:
            del lines[at]
            return


def _claim_effect(
    key: bytes, group: Group, sid_raw: bytes, nack: Nack, last_id: StreamID | None = None
) -> list[bytes]:
    delivery_ms, count, owner = nack
    if owner is None:  # a nacked entry whose stream entry is gone: dropping it is an XACK
        return [b"XACK", key, group.name, sid_raw]
    last_raw = format_id(last_id or group.last_id)
    return _xclaim_line(
        key, group.name, owner, sid_raw, b"%d" % delivery_ms, b"%d" % count, last_raw
    )


def _xclaim_line(
    key: bytes, group: bytes, owner: bytes, sid_raw: bytes, time_raw: bytes, count_raw: bytes,
    last_raw: bytes,
) -> list[bytes]:  # fmt: skip
    """The effect that gives an entry's NACK to ``owner`` and moves the group to LASTID."""
    return [
        b"XCLAIM", key, group, owner, b"0", sid_raw, b"TIME", time_raw,
        b"RETRYCOUNT", count_raw, b"FORCE", b"JUSTID", b"LASTID", last_raw,
    ]  # fmt: skip


def _new_claim_effects(
    effects: list[list[bytes]],
    key: bytes,
    group: bytes,
    consumer: bytes,
    now: int,
    ids: list[StreamID],
) -> None:
    """``_claim_effect`` of each newly delivered entry (delivered now, once, to consumer),
    built in one loop: LASTID is the group's position right after the entry, the entry's
    own ID, as Redis sends it."""
    time_raw = b"%d" % now
    for sid in ids:
        sid_raw = format_id(sid)
        effects.append(_xclaim_line(key, group, consumer, sid_raw, time_raw, b"1", sid_raw))


def _setid_effect(key: bytes, group: Group) -> list[bytes]:
    return [
        b"XGROUP", b"SETID", key, group.name, format_id(group.last_id),
        b"ENTRIESREAD", b"%d" % group.entries_read,
    ]  # fmt: skip


# ---------------------------------------------------------------------------------------------
# XGROUP


@dataclass
class XGroupOpts:
    mkstream: bool = False
    entries_read: int = UNKNOWN


def _parse_xgroup_options(argv: list[bytes], create: bool) -> XGroupOpts:
    opts = XGroupOpts()
    i = 5
    while i < len(argv):
        token = argv[i].upper()
        if token == b"MKSTREAM" and create:
            opts.mkstream = True
            i += 1
        elif token == b"ENTRIESREAD" and i + 1 < len(argv):
            opts.entries_read = parse_int(argv[i + 1])
            if opts.entries_read < 0 and opts.entries_read != UNKNOWN:
                raise err("value for ENTRIESREAD must be positive or -1")
            i += 2
        else:
            raise subcommand_syntax(argv[1], "XGROUP")
    return opts


def _xgroup_target(
    c: Client, argv: list[bytes], needs_group: bool, mkstream: bool = False
) -> tuple[Any, Any]:
    """Redis's checks shared by the XGROUP subcommands: WRONGTYPE, then (unless MKSTREAM) the
    key must exist, and for some subcommands the group too."""
    store = c.server.streams
    stream = store.stream(c, argv[2], read=False)
    group = store.group(stream, argv[3]) if stream is not None else None
    if not mkstream:
        if stream is None:
            raise KEY_REQUIRED
        if group is None and needs_group:
            raise nogroup_for_key(argv[2], argv[3])
    return stream, group


def _capped(entries_read: int, stream: Stream) -> int:
    return min(entries_read, stream.entries_added) if entries_read != UNKNOWN else UNKNOWN


def cmd_xgroup_create(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP CREATE key group <id | $> [MKSTREAM] [ENTRIESREAD entries-read]"""
    opts = _parse_xgroup_options(argv, create=True)
    stream, group = _xgroup_target(c, argv, needs_group=False, mkstream=opts.mkstream)
    if len(argv) > 8:
        raise subcommand_syntax(argv[1], "XGROUP")
    store = c.server.streams
    if argv[4] == b"$":
        last = store.last_id(stream) if stream is not None else MIN_ID
    else:
        last = parse_id(argv[4])
    if group is not None:
        raise BUSYGROUP
    return store.create_group(c, argv, stream, last, opts.entries_read, opts.mkstream)


def cmd_xgroup_setid(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP SETID key group <id | $> [ENTRIESREAD entries-read]"""
    opts = _parse_xgroup_options(argv, create=False)
    stream, group = _xgroup_target(c, argv, needs_group=True)
    if len(argv) not in (5, 7):
        raise subcommand_syntax(argv[1], "XGROUP")
    store = c.server.streams
    last = store.last_id(stream) if argv[4] == b"$" else parse_id(argv[4], strict=False)
    return store.set_group_id(c, argv, stream, group, last, opts.entries_read)


def cmd_xgroup_destroy(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP DESTROY key group"""
    stream, group = _xgroup_target(c, argv, needs_group=False)
    if group is None:
        return 0
    return c.server.streams.destroy_group(c, argv, stream, group)


def cmd_xgroup_createconsumer(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP CREATECONSUMER key group consumer"""
    stream, group = _xgroup_target(c, argv, needs_group=True)
    return c.server.streams.create_consumer(c, argv, stream, group)


def cmd_xgroup_delconsumer(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP DELCONSUMER key group consumer"""
    stream, group = _xgroup_target(c, argv, needs_group=True)
    return c.server.streams.delete_consumer(c, argv, stream, group)


XGROUP_HELP = [
    b"XGROUP <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"CREATE <key> <groupname> <id|$> [option]",
    b"    Create a new consumer group. Options are:",
    b"    * MKSTREAM",
    b"      Create the empty stream if it does not exist.",
    b"    * ENTRIESREAD entries_read",
    b"      Set the group's entries_read counter (internal use).",
    b"CREATECONSUMER <key> <groupname> <consumer>",
    b"    Create a new consumer in the specified group.",
    b"DELCONSUMER <key> <groupname> <consumer>",
    b"    Remove the specified consumer.",
    b"DESTROY <key> <groupname>",
    b"    Remove the specified group.",
    b"SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    b"    Set the current group ID and entries_read counter.",
    b"HELP",
    b"    Print this help.",
]


# ---------------------------------------------------------------------------------------------
# XREADGROUP


NEW_ONLY = MAX_ID  # ``>``: Redis represents it as the maximum ID, and so do we


def refuse_symbolic_id(raw: bytes) -> None:
    """XREADGROUP takes ``>`` or an ID: ``$`` and ``+`` are errors (a region's XREADGROUP
    too)."""
    if raw in (b"$", b"+"):
        sym = raw.decode()
        raise err(
            f"The {sym} ID is meaningless in the context of XREADGROUP: you want to read the "
            "history of this consumer by specifying a proper ID, or use the > ID to get new "
            f"messages. The {sym} ID would just return an empty result set."
        )


def _read_ids(c: Client, argv: list[bytes], opts: XReadOpts) -> list[tuple[Any, Any, StreamID]]:
    """Every stream, its group and its ID, all checked before anything is served."""
    targets: list[tuple[Any, Any, StreamID]] = []
    for n, key in enumerate(opts.keys):
        found = find_group(c, key, opts.group)
        if found is None:
            raise nogroup(key, opts.group, " in XREADGROUP with GROUP option")
        raw = argv[opts.id_index + n]
        refuse_symbolic_id(raw)
        sid = NEW_ONLY if raw == b">" else parse_id(raw)
        targets.append((*found, sid))
    return targets


class _Delivery:
    """What one XREADGROUP call produced, and what it must propagate."""

    def __init__(self, c: Client, key: bytes, stream: Stream, group: Group) -> None:
        self.c = c
        self.key = key
        self.stream = stream
        self.group = group
        self.effects: list[list[bytes]] = []
        #: the read changed the group (a delivery, a claim): one change for the dirty
        #: counter; a read that changed nothing, or only redelivered pending entries (their
        #: count and time), counts none (Redis 7.2+)
        self.changed = False


def _serve_history(
    d: _Delivery, consumer: Consumer, after: StreamID, count: int, caps: ReplyCaps
) -> list[bytes]:
    """This consumer's pending entries with ID > after, delivered again (deleted entries as
    ``[id, nil]``), within COUNT and the caps."""
    start = incr_id(after)
    group, stream, now = d.group, d.stream, d.c.server.keyspace.now_ms
    parts: list[bytes] = []
    if start is None:
        return parts
    limit = caps.per_stream(count)
    keys = consumer.pel.irange(id_key(start))
    sized = caps.max_bytes > 0
    for key in islice(keys, limit) if limit else keys:
        if sized and caps.full():
            break  # not sent, so not redelivered either
        sid = key_id(key)
        pairs = stream.get(sid)
        if pairs is None:
            null = _NULL_ENTRY3 if d.c.resp == 3 else _NULL_ENTRY
            raw_id = format_id(sid)
            parts.append(b"*2\r\n$%d\r\n%s\r\n%s" % (len(raw_id), raw_id, null))
            caps.add(parts[-1])
            continue
        group.redeliver(key, now)
        parts.append(entry_reply((sid, pairs)))
        caps.add(parts[-1])
        if d.c.server.propagating:
            # Redis does not propagate this, leaving replicas with older counts and
            # times; we do, so that replicas and replays agree on the PEL.
            d.effects.append(_claim_effect(d.key, group, format_id(sid), group.pel[key]))
    return parts


_CLAIM_INFO_OF_NEW = len(b":0\r\n:0\r\n")  # what _with_claim_info adds to a new entry


def _serve_new(
    d: _Delivery, consumer: Consumer, count: int, noack: bool, caps: ReplyCaps, extra: int = 0
) -> list[bytes]:
    """Entries after the group's last delivered ID, encoded, within COUNT and the caps (each
    charged ``extra`` bytes more): the group moves past them and, unless NOACK, they become
    pending for the consumer. Entries the caps leave out are not delivered at all."""
    group, stream = d.group, d.stream
    start = incr_id(group.last_id)
    assert start is not None
    ids: list[StreamID] = []
    parts = read_entries(stream, start, count, caps, ids, extra)
    if not parts:
        return parts
    d.changed = True
    advance(stream, group, ids)
    now = d.c.server.keyspace.now_ms
    if not noack:
        group.deliver(consumer, [ms * KEY_BASE + seq for ms, seq in ids], now)
        consumer.active_time = now  # Redis: only deliveries that create a NACK count
        if d.c.server.propagating:
            _new_claim_effects(d.effects, d.key, group.name, consumer.name, now, ids)
    if d.c.server.propagating:
        d.effects.append(_setid_effect(d.key, group))
    return parts


def _serve_with_claim(
    d: _Delivery, consumer: Consumer, count: int, noack: bool, min_idle: int, caps: ReplyCaps
) -> list[bytes]:
    """XREADGROUP … CLAIM: idle pending entries first (the nacked ones, then the oldest
    delivery first), then new ones; every entry carries its idle time and delivery count
    before this read (0, 0 when new). A nacked entry's delivery time is 0, so it is idle
    since the epoch, as in Redis. Entries gone from the stream are skipped. Claimed entries
    count against COUNT and the caps like new ones; one the caps leave out is not claimed."""
    group, stream, now = d.group, d.stream, d.c.server.keyspace.now_ms
    limit = caps.per_stream(count)
    claimable: list[tuple[int, int, StreamID, list[bytes]]] = []
    for key in group.claim_order():
        delivery_ms, count, owner = group.pel[key]
        owned_for = None if owner is None else now - delivery_ms
        if claimed_count(count, owned_for, min_idle, False, None, False) is None:
            break  # in delivery-time order: nothing after this one is idle enough either
        sid = key_id(key)
        pairs = stream.get(sid)
        if pairs is not None:
            claimable.append((delivery_ms, key, sid, pairs))
            if len(claimable) == limit:
                break
    parts: list[bytes] = []
    for delivery_ms, key, sid, pairs in claimable:
        if caps.full():
            break
        old_count = group.pel[key][1]
        group.transfer(key, consumer, now, bumped(old_count))
        d.changed = True
        entry = entry_reply((sid, pairs))
        parts.append(_with_claim_info(entry, max(now - delivery_ms, 0), old_count))
        caps.add(parts[-1])
        if d.c.server.propagating:
            d.effects.append(_claim_effect(d.key, group, format_id(sid), group.pel[key]))
    if parts:
        consumer.active_time = now  # (new entries count only without NOACK: _serve_new)
    room = limit - len(parts) if limit else 0
    if (
        (not limit or room > 0)
        and not caps.full()
        and stream.length
        and stream.last_live_id() > group.last_id
    ):
        new = _serve_new(d, consumer, room, noack, caps, _CLAIM_INFO_OF_NEW)
        parts += [_with_claim_info(p, 0, 0) for p in new]
    return parts


def _with_claim_info(entry: bytes, idle_ms: int, count: int) -> bytes:
    """``[id, fields]`` → ``[id, fields, idle, count]``."""
    return b"*4\r\n%s:%d\r\n:%d\r\n" % (entry[4:], idle_ms, count)


def cmd_xreadgroup(c: Client, argv: list[bytes]) -> Reply | Block | Written:
    opts = parse_xread(c, argv, group=True)
    targets = _read_ids(c, argv, opts)
    return c.server.streams.read_group(c, argv, opts, targets)


def _next_claimable_ms(
    targets: list[tuple[Stream, Group, StreamID]], min_idle: int, now_ms: int
) -> int | None:
    """Milliseconds until the first pending entry of these groups is idle for min_idle: per
    group the first one in claim order whose stream entry still exists (Redis looks at the
    head of its delivery-time list the same way)."""
    times: list[int] = []
    for stream, group, _ in targets:
        for key in group.claim_order():
            found = stream.find(key_id(key))
            if found is not None and found[0].is_live(found[1]):
                times.append(group.pel[key][0])
                break
    return max(min(times) + min_idle - now_ms, 1) if times else None


# ---------------------------------------------------------------------------------------------
# XACK / XACKDEL


def cmd_xack(c: Client, argv: list[bytes]) -> Reply | Written:
    """XACK key group id [id ...]"""
    found = find_group(c, argv[1], argv[2])
    if found is None:
        return 0
    ids = [parse_id(raw) for raw in argv[3:]]
    return c.server.streams.ack(c, argv[1], *found, ids)


def cmd_xackdel(c: Client, argv: list[bytes]) -> Reply | Written:
    """XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]"""
    store = c.server.streams
    stream = store.stream(c, argv[1], read=False)
    ref, raw_ids = parse_ref_and_ids(argv, 3)
    group = store.group(stream, argv[2]) if stream is not None else None
    if group is None:
        return [-1] * len(raw_ids)
    ids = [parse_id(raw) for raw in raw_ids]
    return store.ack_delete(c, argv[1], stream, group, ids, ref)


# ---------------------------------------------------------------------------------------------
# XNACK


_XNACK_MODES = (b"SILENT", b"FAIL", b"FATAL")


@dataclass
class XNackOpts:
    mode: bytes = b"FAIL"
    ids: list[bytes] = field(default_factory=list)
    retrycount: int | None = None
    force: bool = False


def parse_xnack(argv: list[bytes]) -> XNackOpts:
    """<SILENT | FAIL | FATAL> IDS numids id [id ...] [RETRYCOUNT count] [FORCE], the options
    in any order. Several of Redis's texts already start with ``ERR``, so the client reads
    ``ERR ERR …``: kept for byte compatibility."""
    opts = XNackOpts(mode=argv[3].upper())
    if opts.mode not in _XNACK_MODES:
        raise err("ERR mode must be SILENT, FAIL, or FATAL")
    ids_at = 0
    i = 4
    while i < len(argv):
        token = argv[i].upper()
        more = len(argv) - 1 - i
        if token == b"IDS" and more:
            numids = parse_int(argv[i + 1], err("numids must be a positive integer"))
            if not 1 <= numids <= 2**31 - 1:
                raise err("numids must be a positive integer")
            ids_at = i + 2
            if numids > len(argv) - ids_at:
                raise err("ERR number of IDs doesn't match numids")
            opts.ids = argv[ids_at : ids_at + numids]
            i = ids_at + numids
            continue
        if token == b"FORCE":
            opts.force = True
        elif token == b"RETRYCOUNT" and more:
            i += 1
            opts.retrycount = parse_int(argv[i])
            if opts.retrycount < 0:
                raise err("ERR Invalid RETRYCOUNT value, must be >= 0")
        else:
            raise err(f"ERR Unrecognized XNACK option '{c_text(argv[i])}'")
        i += 1
    if not ids_at:
        raise err("ERR syntax error, expected IDS keyword")
    return opts


def nacked_count(count: int, opts: XNackOpts) -> int:
    """The delivery count after XNACK: RETRYCOUNT, else SILENT takes the failed delivery back,
    FAIL keeps it and FATAL marks the entry as never to be retried."""
    if opts.retrycount is not None:
        return opts.retrycount
    if opts.mode == b"SILENT":
        return max(count - 1, 0)
    if opts.mode == b"FATAL":
        return MAX_COUNT
    return count


def cmd_xnack(c: Client, argv: list[bytes]) -> Reply | Written:
    """XNACK key group <SILENT | FAIL | FATAL> IDS numids id [id ...] [RETRYCOUNT count]
    [FORCE]"""
    found = find_group(c, argv[1], argv[2])
    if found is None:
        raise nogroup(argv[1], argv[2])
    opts = parse_xnack(argv)
    ids = [parse_id(raw) for raw in opts.ids]
    return c.server.streams.nack(c, argv[1], *found, ids, opts)


# ---------------------------------------------------------------------------------------------
# XPENDING


@dataclass
class XPendingOpts:
    min_idle: int = 0
    start: StreamID = MIN_ID
    end: StreamID = MAX_ID
    count: int = 0
    consumer: bytes | None = None


def parse_xpending(argv: list[bytes]) -> XPendingOpts | None:
    """XPENDING key group [[IDLE min-idle-time] start end count [consumer]]; None for the
    summary form."""
    argc = len(argv)
    if argc != 3 and not 6 <= argc <= 9:
        raise SYNTAX
    if argc == 3:
        return None
    opts = XPendingOpts()
    at = 3
    if argv[3].upper() == b"IDLE":
        opts.min_idle = parse_int(argv[4])
        if argc < 8:
            raise SYNTAX
        at = 5
    opts.count = max(parse_int(argv[at + 2]), 0)
    opts.start = parse_range_bound(argv[at], is_start=True)
    opts.end = parse_range_bound(argv[at + 1], is_start=False)
    if at + 3 < argc:
        opts.consumer = argv[at + 3]
    return opts


def cmd_xpending(c: Client, argv: list[bytes]) -> Reply | Written:
    opts = parse_xpending(argv)
    found = find_group(c, argv[1], argv[2])
    if found is None:
        raise nogroup(argv[1], argv[2])
    return c.server.streams.pending(c, argv[1], *found, opts)


def _xpending_reply(c: Client, group: Group, opts: XPendingOpts | None) -> Reply:
    if opts is None:
        return _pending_summary(group)
    pel = group.pel
    if opts.consumer is not None:
        consumer = group.consumers.get(opts.consumer)
        if consumer is None:
            return []
        keys = group.pending_keys(opts.start, opts.end, consumer)
    else:
        keys = group.pending_keys(opts.start, opts.end)
    now = c.server.keyspace.now_ms
    rows: list[Reply] = []
    for key in keys:
        if len(rows) >= opts.count:
            break
        delivery_ms, count, owner = pel[key]
        if owner is None:  # nacked: nobody's, not idle in any sense, never filtered by IDLE
            rows.append([format_id(key_id(key)), b"", -1, count])
            continue
        if opts.min_idle and now - delivery_ms < opts.min_idle:
            continue
        rows.append([format_id(key_id(key)), owner, max(now - delivery_ms, 0), count])
    return rows


def _pending_summary(group: Group) -> Reply:
    if not group.pel:
        return [0, None, None, NULL_ARRAY]
    owners = [
        [name, b"%d" % len(consumer.pel)]
        for name, consumer in sorted(group.consumers.items())
        if consumer.pel
    ]
    first, last = group.order.first(), group.order.last()
    return [len(group.pel), format_id(key_id(first)), format_id(key_id(last)), owners]


# ---------------------------------------------------------------------------------------------
# XCLAIM / XAUTOCLAIM


@dataclass
class XClaimOpts:
    min_idle: int = 0
    ids: list[bytes] = field(default_factory=list)
    delivery_ms: int | None = None  # IDLE/TIME, resolved to an absolute time
    retrycount: int | None = None
    force: bool = False
    justid: bool = False
    last_id: StreamID = MIN_ID


def parse_xclaim(argv: list[bytes], now: int) -> XClaimOpts:
    """XCLAIM key group consumer min-idle-time id [id ...] [IDLE ms] [TIME ms]
    [RETRYCOUNT count] [FORCE] [JUSTID] [LASTID lastid]"""
    opts = XClaimOpts()
    opts.min_idle = max(parse_int(argv[4], err("Invalid min-idle-time argument for XCLAIM")), 0)
    i = 5
    while i < len(argv):
        try:
            parse_id(argv[i])
        except ReplyError:
            break
        opts.ids.append(argv[i])
        i += 1
    while i < len(argv):
        token = argv[i].upper()
        more = i + 1 < len(argv)
        if token == b"FORCE":
            opts.force = True
        elif token == b"JUSTID":
            opts.justid = True
        elif token == b"IDLE" and more:
            i += 1
            opts.delivery_ms = now - parse_int(
                argv[i], err("Invalid IDLE option argument for XCLAIM")
            )
        elif token == b"TIME" and more:
            i += 1
            opts.delivery_ms = parse_int(argv[i], err("Invalid TIME option argument for XCLAIM"))
        elif token == b"RETRYCOUNT" and more:
            i += 1
            count = parse_int(argv[i], err("Invalid RETRYCOUNT option argument for XCLAIM"))
            opts.retrycount = count if count >= 0 else None  # Redis: negative = not given
        elif token == b"LASTID" and more:
            i += 1
            opts.last_id = parse_id(argv[i])
        else:
            raise err(f"Unrecognized XCLAIM option '{c_text(argv[i])}'")
        i += 1
    opts.delivery_ms = claim_time(opts.delivery_ms, now)
    return opts


class _Claimer:
    """Claims for one XCLAIM/XAUTOCLAIM call: the reply items and the effects."""

    def __init__(self, c: Client, key: bytes, stream: Stream, group: Group, fx: Effects) -> None:
        self.c, self.key, self.stream, self.group = c, key, stream, group
        self.items: list[Reply] = []
        self.fx = fx
        self.claimed = False  # an XCLAIM effect carries LASTID, so no SETID is needed
        self.propagating = c.server.propagating

    def forget(self, key: int) -> None:
        """The entry is gone from the stream: its NACK goes too (and is propagated)."""
        nack = self.group.pel[key]
        self.claimed = True
        effect = None
        if self.propagating:
            effect = _claim_effect(self.key, self.group, format_id(key_id(key)), nack)
        self.fx.add(forget_entry(self.group, key), effect)

    def claim(
        self, key: int, consumer: Consumer, delivery_ms: int, count: int, justid: bool
    ) -> None:
        group = self.group
        now = self.c.server.keyspace.now_ms
        dirty = claim_entry(group, key, consumer, delivery_ms, count, now)
        sid = key_id(key)
        if justid:
            self.items.append(format_id(sid))
        else:
            pairs = self.stream.get(sid)
            assert pairs is not None
            self.items.append(entry_reply((sid, pairs)))
        self.claimed = True
        effect = None
        if self.propagating:
            effect = _claim_effect(self.key, group, format_id(sid), group.pel[key])
        self.fx.add(dirty, effect)

    def finish(self, reply: Reply) -> Reply | Written:
        if not self.fx.dirty:
            return reply
        self.c.db.signal_modified(self.key)
        return Written(reply, self.fx)


def cmd_xclaim(c: Client, argv: list[bytes]) -> Reply | Written:
    found = find_group(c, argv[1], argv[2])
    if found is None:
        raise nogroup(argv[1], argv[2])
    opts = parse_xclaim(argv, c.server.keyspace.now_ms)
    ids = [parse_id(raw) for raw in opts.ids]
    return c.server.streams.claim(c, argv, *found, ids, opts)


def parse_xautoclaim(argv: list[bytes]) -> tuple[int, StreamID, int, bool]:
    """XAUTOCLAIM key group consumer min-idle-time start [COUNT count] [JUSTID]"""
    min_idle = max(parse_int(argv[4], err("Invalid min-idle-time argument for XAUTOCLAIM")), 0)
    start = parse_range_bound(argv[5], is_start=True)
    count, justid = 100, False
    max_count = (2**63 - 1) // 16
    i = 6
    while i < len(argv):
        token = argv[i].upper()
        if token == b"COUNT" and i + 1 < len(argv):
            count = parse_int(argv[i + 1], err("COUNT must be > 0"))
            if not 1 <= count <= max_count:
                raise err("COUNT must be > 0")
            i += 2
        elif token == b"JUSTID":
            justid = True
            i += 1
        else:
            raise SYNTAX
    return min_idle, start, count, justid


def cmd_xautoclaim(c: Client, argv: list[bytes]) -> Reply | Written:
    options = parse_xautoclaim(argv)
    found = find_group(c, argv[1], argv[2])
    if found is None:
        raise nogroup(argv[1], argv[2])
    return c.server.streams.autoclaim(c, argv, *found, options)


SPECS = (
    spec(
        "xgroup",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("xgroup|create", -5, "write denyoom", (2, 2, 1), cmd_xgroup_create),
            spec("xgroup|setid", -5, "write", (2, 2, 1), cmd_xgroup_setid),
            spec("xgroup|destroy", 4, "write", (2, 2, 1), cmd_xgroup_destroy),
            spec("xgroup|createconsumer", 5, "write denyoom", (2, 2, 1), cmd_xgroup_createconsumer),
            spec("xgroup|delconsumer", 5, "write", (2, 2, 1), cmd_xgroup_delconsumer),
            spec("xgroup|help", 2, "loading stale", handler=help_handler(XGROUP_HELP)),
        ),
    ),
    spec("xreadgroup", -7, "write blocking movablekeys", (0, 0, 0), cmd_xreadgroup),
    spec("xack", -4, "write fast", (1, 1, 1), cmd_xack),
    spec("xackdel", -6, "write fast", (1, 1, 1), cmd_xackdel),
    spec("xnack", -7, "write fast", (1, 1, 1), cmd_xnack),
    spec("xpending", -3, "readonly", (1, 1, 1), cmd_xpending),
    spec("xclaim", -6, "write fast", (1, 1, 1), cmd_xclaim),
    spec("xautoclaim", -6, "write fast", (1, 1, 1), cmd_xautoclaim),
)
