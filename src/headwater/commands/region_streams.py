"""Stream and consumer-group commands of an active-active region (issue 18).

Each handler parses exactly as the plain one (the same parsers, so the same errors), asks the
``Region`` for the change (which makes and applies the effect: the write rule exists once,
in ``activeactive.apply``) and answers with the plain server's reply shape: one region with no
peers answers byte for byte as a plain server (tests/unit/test_activeactive_server.py).
Consumers, PELs and delivery cursors are local: XREADGROUP (with CLAIM), XCLAIM, XAUTOCLAIM,
XNACK, XGROUP SETID/CREATECONSUMER/DELCONSUMER change no replicated state and make no effect
(their new state is logged as AALOCAL lines).

What differs from a plain server, by design (spec/ACTIVE-ACTIVE.md, docs/active-active.md):
strict and semi-strict modes pick IDs of the region's sequence class; a deleted stream's IDs
keep rising (its tombstone remembers them); ``~`` trims are exact; XSETID never lowers the
last ID nor the max-deleted ID, and its ENTRIESADDED is this region's adjustment of a sum;
ACKED asks this region's groups; DELREF drops every region's own pending entries; XCFGSET's
settings are replicated while the IDMP maps stay per region. Streams outside database 0 are
refused (a clear error).
"""

from __future__ import annotations

from bisect import bisect_left

from headwater.activeactive.rstream import RegionGroup, RegionStream, Tag
from headwater.commands import groups as plain_groups
from headwater.commands.context import Block, Client
from headwater.commands.entries import array_of, encode_range, entry_reply
from headwater.commands.groups import (
    BUSYGROUP,
    KEY_REQUIRED,
    nacked_count,
    nogroup,
    nogroup_for_key,
    parse_xautoclaim,
    parse_xclaim,
    parse_xnack,
    parse_xpending,
    refuse_symbolic_id,
)
from headwater.commands.idmp import (
    NO_SUCH_MESSAGE,
    parse_cfgget,
    parse_idmp_settings,
    parse_xidmprecord,
    recorded,
)
from headwater.commands.notify import lookup_read, notify
from headwater.commands.region_keyspace import (
    RegionKeyspace,
    group_at,
    region_of,
    stream_at,
)
from headwater.commands.streams import (
    LIMIT_NO_TILDE,
    LISTPACK_MAX,
    TOO_LARGE,
    ReplyCaps,
    XAddOpts,
    parse_read_id,
    parse_ref_and_ids,
    parse_xadd,
    parse_xrange,
    parse_xread,
    parse_xsetid,
    parse_xtrim,
    xread_end,
)
from headwater.commands.xinfo import parse_xinfo_stream
from headwater.errors import NO_SUCH_KEY, subcommand_syntax
from headwater.keyevents import STREAM
from headwater.ops.change import Change, Written
from headwater.resp.types import NULL_ARRAY, OK, PairMap, Raw, Reply
from headwater.stream.groups import UNKNOWN, Group, advance, bumped, lag
from headwater.stream.idmp import auto_iid
from headwater.stream.ids import MAX_ID, MIN_ID, StreamID, format_id, incr_id, parse_id
from headwater.stream.node import total_size

_PLAIN_XADD = XAddOpts()  # (never mutated)
_NULL_ENTRY = Raw(b"*-1\r\n")
_NULL_ENTRY3 = Raw(b"_\r\n")


# ---------------------------------------------------------------------------------------------
# XADD / XRANGE / XREVRANGE / XLEN / XDEL / XTRIM / XSETID


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


def cmd_xadd(c: Client, argv: list[bytes]) -> Reply | Written:
    """XADD key [NOMKSTREAM] [<MAXLEN | MINID> [= | ~] threshold [LIMIT n]] <* | id> field
    value [...]: the ID by active-active-id-mode; trims are exact."""
    # ``XADD key * field value …``, the usual shape: no option to parse (as the plain handler)
    opts = _PLAIN_XADD if argv[2] == b"*" and len(argv) % 2 else parse_xadd(c, argv)
    rk, key = region_of(c), argv[1]
    record = stream_at(c, key, read=False)
    if record is None and opts.nomkstream:
        return None
    pairs = argv[opts.id_index + 1 :]
    idmp_key: tuple[bytes, bytes] | None = None
    if opts.idmp is not None:  # this region's map only (a producer pinned to a region)
        pid, iid = opts.idmp
        idmp_key = (pid, iid if iid is not None else auto_iid(pairs))
        state = record.idmp if record is not None else None
        original = state.lookup(*idmp_key) if state is not None else None
        if state is not None and original is not None:  # a retry: nothing is added
            rk.record_idmp(key, idmp_key, original, c.server.config["stream-idmp-maxsize"])
            c.server.stats.stream_idmp_iids_duplicates += 1
            c.db.signal_modified(key)
            return rk.written(format_id(original), 1)
    size = total_size(pairs)
    if size > LISTPACK_MAX:
        raise TOO_LARGE
    region = rk.region
    sid = region.xadd(key, argv[opts.id_index], pairs, c.server.keyspace.now_ms, size)
    if idmp_key is not None:
        rk.record_idmp(key, idmp_key, sid, c.server.config["stream-idmp-maxsize"])
        c.server.stats.stream_idmp_iids_added += 1
    trim = opts.trim
    trimmed = region.xtrim(key, trim.maxlen, trim.minid, trim.ref) if trim.given else 0
    if c.server.keyspace.notify_flags & STREAM:
        notify(c, STREAM, b"xadd", key)
        if trimmed:
            notify(c, STREAM, b"xtrim", key)
    lines = rk.take_lines()
    return rk.written(format_id(sid), 1 + trimmed, lines)


def _range(c: Client, argv: list[bytes], reverse: bool) -> Reply:
    """XRANGE key start end [COUNT count] / XREVRANGE key end start [COUNT count]"""
    region_of(c)
    start, end, count = parse_xrange(argv, reverse)
    record = stream_at(c, argv[1])
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
    region_of(c)
    record = stream_at(c, argv[1])
    return 0 if record is None else record.length


def cmd_xdel(c: Client, argv: list[bytes]) -> Reply | Written:
    """XDEL key id [id ...]: each ID in every sub-log that holds it."""
    rk = region_of(c)
    record = stream_at(c, argv[1], read=False)
    if record is None:
        return 0
    deleted = rk.region.xdel(argv[1], [parse_id(raw) for raw in argv[2:]])
    if deleted:
        notify(c, STREAM, b"xdel", argv[1])
    return rk.written(deleted, deleted)


def cmd_xdelex(c: Client, argv: list[bytes]) -> Reply | Written:
    """XDELEX key [KEEPREF | DELREF | ACKED] IDS numids id [id ...]: XDEL's rule, per ID
    (ACKED asks this region's groups; DELREF drops the pending entries in every region)."""
    rk = region_of(c)
    record = stream_at(c, argv[1], read=False)
    ref, raw_ids = parse_ref_and_ids(argv, 2)
    if record is None:
        return [-1] * len(raw_ids)
    results: list[Reply] = list(rk.region.xdelex(argv[1], [parse_id(r) for r in raw_ids], ref))
    deleted = results.count(1)
    if deleted:
        notify(c, STREAM, b"xdel", argv[1])
    return rk.written(results, deleted)


def cmd_xtrim(c: Client, argv: list[bytes]) -> Reply | Written:
    """XTRIM key <MAXLEN | MINID> [= | ~] threshold [LIMIT count]: exact, over the merged
    stream."""
    rk = region_of(c)
    trim = parse_xtrim(argv)
    if trim.limit_given and not trim.approx and not c.replaying:
        raise LIMIT_NO_TILDE
    if stream_at(c, argv[1], read=False) is None:
        return 0
    removed = rk.region.xtrim(argv[1], trim.maxlen, trim.minid, trim.ref)
    if removed:
        notify(c, STREAM, b"xtrim", argv[1])
    return rk.written(removed, removed)


def cmd_xsetid(c: Client, argv: list[bytes]) -> Reply | Written:
    """XSETID key last-id [ENTRIESADDED entries-added] [MAXDELETEDID max-deleted-id]: the
    last ID and max-deleted ID rise (max-merged across regions); entries-added becomes the
    given count here, and concurrent XADDs elsewhere add on top."""
    rk = region_of(c)
    sid, entries_added, max_deleted = parse_xsetid(argv)
    if stream_at(c, argv[1], read=False) is None:
        raise NO_SUCH_KEY
    rk.region.xsetid(argv[1], sid, entries_added, max_deleted)
    c.db.signal_modified(argv[1])
    notify(c, STREAM, b"xsetid", argv[1])
    return rk.written(OK, 1)


# ---------------------------------------------------------------------------------------------
# XCFGSET / XIDMP CFGSET / CFGGET / XIDMPRECORD (IDMP: settings replicated, maps per region)


def _idmp_config(
    c: Client, argv: list[bytes], at: int, names: tuple[bytes, bytes]
) -> Reply | Written:
    rk = region_of(c)
    if stream_at(c, argv[at], read=False) is None:
        raise NO_SUCH_KEY
    duration, maxsize = parse_idmp_settings(argv, at + 1, names)
    if not rk.region.xcfgset(argv[at], duration, maxsize):
        return OK  # nothing differs: nothing changes, nothing is replicated
    c.db.signal_modified(argv[at])
    return rk.written(OK, 1)


def cmd_xcfgset(c: Client, argv: list[bytes]) -> Reply | Written:
    """XCFGSET key [IDMP-DURATION duration] [IDMP-MAXSIZE maxsize]: replicated (the causally
    latest wins; concurrent ones by their stamps); a region whose setting in force changes
    forgets its own iids."""
    return _idmp_config(c, argv, 1, (b"IDMP-DURATION", b"IDMP-MAXSIZE"))


def cmd_xidmp_cfgset(c: Client, argv: list[bytes]) -> Reply | Written:
    """XIDMP CFGSET key [DURATION duration] [MAXSIZE maxsize]: XCFGSET in the seed's words."""
    return _idmp_config(c, argv, 2, (b"DURATION", b"MAXSIZE"))


def _idmp_settings(c: Client, record: RegionStream) -> tuple[int, int]:
    config = c.server.config
    duration: int = record.idmp_setting(b"duration") or config["stream-idmp-duration"]
    maxsize: int = record.idmp_setting(b"maxsize") or config["stream-idmp-maxsize"]
    return duration, maxsize


def cmd_xidmp_cfgget(c: Client, argv: list[bytes]) -> Reply:
    """XIDMP CFGGET key [DURATION] [MAXSIZE]"""
    region_of(c)
    record = stream_at(c, argv[2], read=False)
    if record is None:
        raise NO_SUCH_KEY
    wanted = parse_cfgget(argv)
    duration, maxsize = _idmp_settings(c, record)
    values = {b"duration": duration, b"maxsize": maxsize}
    return {name: values[name] for name in (wanted or list(values))}


def cmd_xidmprecord(c: Client, argv: list[bytes]) -> Reply | Written:
    """XIDMPRECORD key pid iid stream-id: record an iid in this region's map (local, as
    every IDMP map; logged as AAIDMP)."""
    rk = region_of(c)
    sid = parse_xidmprecord(argv)
    record = stream_at(c, argv[1], read=False)
    if record is None:
        raise NO_SUCH_KEY
    if all(record.entry(r, sid) is None for r in record.subs):
        raise NO_SUCH_MESSAGE
    if recorded(record.idmp, argv, sid):
        return OK
    rk.record_idmp(argv[1], (argv[2], argv[3]), sid, c.server.config["stream-idmp-maxsize"])
    c.server.stats.stream_idmp_iids_added += 1
    c.db.signal_modified(argv[1])
    return rk.written(OK, 1)


# ---------------------------------------------------------------------------------------------
# XREAD


def _charged(caps: ReplyCaps, parts: list[bytes], extra: int = 0) -> list[bytes]:
    """The encoded entries that fit MAXCOUNT/MAXSIZE, charged to the caps."""
    sent: list[bytes] = []
    for part in parts:
        if caps.full():
            break
        caps.add(part, extra)
        sent.append(part)
    return sent


def cmd_xread(c: Client, argv: list[bytes]) -> Reply | Block:
    """XREAD [COUNT n] [BLOCK ms] STREAMS key [key ...] id [id ...], merged by ID. An entry
    that arrives late from another region with a smaller ID can be skipped (use XREADGROUP)."""
    region_of(c)
    opts = parse_xread(c, argv)
    resolved: list[tuple[RegionStream | None, StreamID | None]] = []
    for n, key in enumerate(opts.keys):
        raw = argv[opts.id_index + n]
        record = stream_at(c, key)
        if raw == b"$":
            after: StreamID | None = record.last_id() if record is not None else MIN_ID
        else:
            after = parse_read_id(raw)
        resolved.append((record, after))
    served: list[tuple[bytes, Reply]] = []
    caps = ReplyCaps(opts.maxcount, opts.maxsize, c.resp)
    capped = bool(opts.maxcount or opts.maxsize)
    for key, (record, after) in zip(opts.keys, resolved, strict=True):
        if caps.full():
            break  # MAXCOUNT / MAXSIZE reached: later streams are not served
        lookup_read(c, key)  # (Redis looks each stream up again to serve it)
        if record is None or not record.length:
            continue
        if after is None:
            last = entry_reply(record.entries(MIN_ID, MAX_ID, 1, reverse=True)[0])
            caps.open_stream(key)
            caps.add(last)
            served.append((key, Raw(b"*1\r\n" + last)))
            continue
        start = incr_id(after)
        if start is None or record.last_live_id() <= after:
            continue
        if capped:
            caps.open_stream(key)
            rows = record.entries(start, MAX_ID, caps.per_stream(opts.count) or None)
            served.append((key, array_of(_charged(caps, [entry_reply(e) for e in rows]))))
        else:
            served.append((key, _encode(record, start, MAX_ID, opts.count)[0]))
    return xread_end(c, argv, opts, served, resolved, RegionStream)


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
    record = stream_at(c, argv[2], read=False)
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
    rk = region_of(c)
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
    record = rk.region.current[argv[2]]
    group = record.groups.get(argv[3])
    if group is not None:
        group.last_id = last
        group.entries_read = _capped(opts.entries_read, record)
        rk.local(argv[2], group, moved=True)
    notify(c, STREAM, b"xgroup-create", argv[2])
    return rk.written(OK, 1)


def cmd_xgroup_setid(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP SETID key group <id | $> [ENTRIESREAD n]: this region's cursors only."""
    rk = region_of(c)
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
    rk = region_of(c)
    _, group = _xgroup_target(c, argv, needs_group=False)
    if group is None:
        return 0
    rk.region.xgroup_destroy(argv[2], argv[3])
    notify(c, STREAM, b"xgroup-destroy", argv[2])
    return rk.written(1, 1)


def cmd_xgroup_createconsumer(c: Client, argv: list[bytes]) -> Reply | Written:
    """XGROUP CREATECONSUMER key group consumer (local)"""
    rk = region_of(c)
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
    rk = region_of(c)
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
        found = group_at(c, key, group)
        if found is None:
            raise nogroup(key, group, " in XREADGROUP with GROUP option")
        raw = argv[id_index + n]
        refuse_symbolic_id(raw)
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
    """XREADGROUP GROUP g consumer [COUNT n] [MAXCOUNT n] [MAXSIZE bytes] [BLOCK ms]
    [CLAIM min-idle] [NOACK] STREAMS key [...] id [...]: ``>`` takes from each sub-log what
    lies above its cursor, so a late entry is never skipped; CLAIM first claims this region's
    idle pending entries (consumers and PELs are local)."""
    rk = region_of(c)
    opts = parse_xread(c, argv, group=True)
    targets = _read_targets(c, argv, opts.group, opts.keys, opts.id_index)
    now = c.server.keyspace.now_ms
    served: list[tuple[bytes, Reply]] = []
    changed = 0
    claim_ms = opts.claim_ms
    caps = ReplyCaps(opts.maxcount, opts.maxsize, c.resp)
    for key, (record, group, raw) in zip(opts.keys, targets, strict=True):
        if caps.full():
            break  # MAXCOUNT / MAXSIZE reached: later streams are not served
        lookup_read(c, key)  # (Redis looks each stream up again to serve it)
        _touch(c, key, group, opts.consumer)
        rk.local(key, group)
        read = _GroupRead(c, caps, opts.count)
        caps.open_stream(key)
        if raw != b">":
            claim_ms = None  # Redis switches CLAIM off after a history read
            rk.region.xreadgroup(
                key, opts.group, opts.consumer, raw, now, read.count, admit=read.admit_history
            )
            caps.close_stream(True)
            served.append((key, array_of(read.parts)))
            continue  # (a redelivery is no change for the dirty counter: Redis 7.2+)
        if claim_ms is not None:
            read.claim(rk, key, opts.group, opts.consumer, claim_ms, now)
        new: list[tuple[StreamID, list[bytes] | None]] = []
        if read.room():
            new = rk.region.xreadgroup(
                key, opts.group, opts.consumer, b">", now, read.left(), opts.noack, read.admit
            )
        caps.close_stream(bool(read.parts))
        if read.claimed or new:
            changed += 1
            group.touch(opts.consumer, now, active=read.claimed > 0 or not opts.noack)
        if new:
            _advance(record, group, [sid for sid, _ in new])
            rk.local(key, group, moved=True)
        if read.parts:
            served.append((key, array_of(read.parts)))
    if served:
        reply: Reply = PairMap(served) if c.resp == 3 else [[k, e] for k, e in served]
        return rk.written(reply, changed)
    if opts.block_ms is None:
        return rk.written(NULL_ARRAY, changed)
    monotonic = c.server.clock.monotonic_ms()
    deadline = monotonic + opts.block_ms if opts.block_ms else 0
    retry_at = 0.0
    if claim_ms is not None:
        soonest = [rk.region.next_claimable_ms(key, opts.group, claim_ms, now) for key in opts.keys]
        waits = [ms for ms in soonest if ms is not None]
        if waits:
            retry_at = monotonic + min(waits)
    block = Block(list(opts.keys), deadline, NULL_ARRAY, retry_at_ms=retry_at)
    lines = rk.take_lines()
    return Written(block, Change(changed, lines)) if changed or lines else block


_CLAIM_INFO_OF_NEW = len(b":0\r\n:0\r\n")  # what _with_claim_info adds to a new entry


class _GroupRead:
    """One stream's part of an XREADGROUP: the entries sent, within COUNT and the caps."""

    def __init__(self, c: Client, caps: ReplyCaps, count: int) -> None:
        self.c = c
        self.caps = caps
        self.count = caps.per_stream(count) or None  # (None: no limit)
        self.parts: list[bytes] = []
        self.claimed = 0
        self.with_claim = False  # entries carry [idle, count] (CLAIM)

    def room(self) -> bool:
        return (self.count is None or len(self.parts) < self.count) and not self.caps.full()

    def left(self) -> int | None:
        return None if self.count is None else self.count - len(self.parts)

    def admit_history(self, sid: StreamID, pairs: list[bytes] | None) -> bool:
        if self.caps.max_bytes and self.caps.full():
            return False  # not sent, so not redelivered either
        part: bytes
        if pairs is None:
            null = _NULL_ENTRY3 if self.c.resp == 3 else _NULL_ENTRY
            raw = format_id(sid)
            part = b"*2\r\n$%d\r\n%s\r\n%s" % (len(raw), raw, null)
        else:
            part = entry_reply((sid, pairs))
        self.caps.add(part)
        self.parts.append(part)
        return True

    def admit(self, sid: StreamID, pairs: list[bytes] | None) -> bool:
        """A new entry: sent (and so delivered) while the caps allow."""
        if self.caps.full():
            return False
        part: bytes = entry_reply((sid, pairs or []))
        if self.with_claim:
            self.caps.add(part, _CLAIM_INFO_OF_NEW)
            part = b"*4\r\n%s:0\r\n:0\r\n" % part[4:]
        else:
            self.caps.add(part)
        self.parts.append(part)
        return True

    def claim(
        self, rk: RegionKeyspace, key: bytes, group: bytes, consumer: bytes, min_idle: int, now: int
    ) -> None:
        """CLAIM's idle pending entries first; every entry of the reply then carries
        ``[idle, delivery count]`` (0, 0 for new ones)."""
        self.with_claim = True

        def admit_claimed(sid: StreamID, pairs: list[bytes], idle: int, old: int) -> bool:
            if self.caps.full():
                return False
            entry = entry_reply((sid, pairs))
            part = b"*4\r\n%s:%d\r\n:%d\r\n" % (entry[4:], idle, old)
            self.caps.add(part)
            self.parts.append(part)
            return True

        rows = rk.region.claim_idle(key, group, consumer, min_idle, now, self.count, admit_claimed)
        self.claimed = len(rows)


def cmd_xack(c: Client, argv: list[bytes]) -> Reply | Written:
    """XACK key group id [id ...]: replicated only as each sub-log's contiguous prefix."""
    rk = region_of(c)
    ids = [parse_id(raw) for raw in argv[3:]]
    found = group_at(c, argv[1], argv[2])
    if found is None:
        return 0
    acked = rk.region.xack(argv[1], argv[2], ids)
    if acked:
        rk.local(argv[1], found[1])
    return rk.written(acked, acked)


def cmd_xackdel(c: Client, argv: list[bytes]) -> Reply | Written:
    """XACKDEL key group [KEEPREF | DELREF | ACKED] IDS numids id [id ...]: XACK here (its
    contiguous prefix replicated), then the entries' removal (replicated, as XDEL)."""
    rk = region_of(c)
    record = stream_at(c, argv[1], read=False)
    ref, raw_ids = parse_ref_and_ids(argv, 3)
    group = record.groups.get(argv[2]) if record is not None else None
    if record is None or group is None:
        return [-1] * len(raw_ids)
    ids = [parse_id(raw) for raw in raw_ids]
    results: list[Reply] = list(rk.region.xackdel(argv[1], argv[2], ids, ref))
    if results.count(-1) == len(results):
        return results
    rk.local(argv[1], group)
    c.db.signal_modified(argv[1])
    return rk.written(results, 1)


def cmd_xnack(c: Client, argv: list[bytes]) -> Reply | Written:
    """XNACK key group <SILENT | FAIL | FATAL> IDS numids id [id ...] [RETRYCOUNT count]
    [FORCE] (local, as every PEL change: the entries go to this region's NACK zone; a
    nacked entry is still pending, so the acknowledged prefix does not pass it)."""
    rk = region_of(c)
    found = group_at(c, argv[1], argv[2])
    if found is None:
        raise nogroup(argv[1], argv[2])
    opts = parse_xnack(argv)
    sids = [parse_id(raw) for raw in opts.ids]
    done = rk.region.xnack(
        argv[1], argv[2], sids, lambda count: nacked_count(count, opts), opts.force
    )
    if not done:
        return 0
    rk.local(argv[1], found[1])
    c.db.signal_modified(argv[1])
    c.db.signal_ready(argv[1])  # nacked entries are claimable now: wake XREADGROUP CLAIM
    return rk.written(done, done)


# ---------------------------------------------------------------------------------------------
# XPENDING / XCLAIM / XAUTOCLAIM (the local PEL)


def cmd_xpending(c: Client, argv: list[bytes]) -> Reply:
    """XPENDING key group [[IDLE min-idle] start end count [consumer]]"""
    region_of(c)
    opts = parse_xpending(argv)
    found = group_at(c, argv[1], argv[2])
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
        if pending.consumer is None:  # nacked: nobody's, never filtered by IDLE
            rows.append([format_id(tag[0]), b"", -1, pending.count])
            continue
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
    rk = region_of(c)
    found = group_at(c, argv[1], argv[2])
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
            if (
                pending is not None
                and pending.consumer is not None  # (a nacked entry is claimable whatever)
                and opts.min_idle
                and now - pending.delivery_ms < opts.min_idle
            ):
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
    rk = region_of(c)
    min_idle, start, count, justid = parse_xautoclaim(argv)
    found = group_at(c, argv[1], argv[2])
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
        if pending.consumer is not None and min_idle and now - pending.delivery_ms < min_idle:
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
    record = stream_at(c, key)
    if record is None:
        raise NO_SUCH_KEY
    return record


def cmd_xinfo_stream(c: Client, argv: list[bytes]) -> Reply:
    """XINFO STREAM key [FULL [COUNT count]] (groups' consumers and PELs: this region's)"""
    region_of(c)
    record = _existing(c, argv[2])
    full, count = parse_xinfo_stream(argv)
    info = _stream_head(c, record)
    if full:
        info[b"entries"] = _encode(record, MIN_ID, MAX_ID, count)[0]
        info[b"groups"] = [
            _full_group(c, record, record.groups[name], count) for name in sorted(record.groups)
        ]
        return info
    first = record.entries(MIN_ID, MAX_ID, 1)
    last = record.entries(MIN_ID, MAX_ID, 1, reverse=True)
    info[b"groups"] = len(record.groups)
    info[b"first-entry"] = entry_reply(first[0]) if first else None
    info[b"last-entry"] = entry_reply(last[0]) if last else None
    return info


def _full_group(
    c: Client, record: RegionStream, group: RegionGroup, count: int
) -> dict[bytes, Reply]:
    tags = group.order[:count] if count else group.order
    pending: list[Reply] = []
    for sid, sub in tags:
        p = group.pel[(sid, sub)]
        pending.append([format_id(sid), p.consumer or b"", p.delivery_ms, p.count])
    consumers: list[Reply] = []
    for name in sorted(group.consumers):
        own = group.consumers[name]
        seen, active = group.times.get(name, [0, -1])
        rows: list[Reply] = []
        for sid, sub in own[:count] if count else own:
            p = group.pel[(sid, sub)]
            rows.append([format_id(sid), p.delivery_ms, p.count])
        consumers.append(
            {
                b"name": name,
                b"seen-time": seen,
                b"active-time": active,
                b"pel-count": len(own),
                b"pending": rows,
            }
        )
    return {
        b"name": group.name,
        b"last-delivered-id": format_id(group.last_id),
        b"entries-read": None if group.entries_read == UNKNOWN else group.entries_read,
        b"lag": lag(record.stats(), _shim(group)),
        b"pel-count": len(group.pel),
        b"nacked-count": len(group.nacked),
        b"pending": pending,
        b"consumers": consumers,
    }


def _stream_head(c: Client, record: RegionStream) -> dict[bytes, Reply]:
    stats = record.stats()
    nodes = sum(len(s.nodes) for s in record.subs.values())
    duration, maxsize = _idmp_settings(c, record)
    idmp = record.idmp
    return {
        b"length": stats.length,
        b"radix-tree-keys": nodes,
        b"radix-tree-nodes": max(nodes * 2, 1) if nodes else 1,
        b"last-generated-id": format_id(stats.last_id),
        b"max-deleted-entry-id": format_id(stats.max_deleted_id),
        b"entries-added": stats.entries_added,
        b"recorded-first-entry-id": format_id(stats.first_id),
        b"idmp-duration": duration,
        b"idmp-maxsize": maxsize,
        b"pids-tracked": len(idmp.producers) if idmp is not None else 0,
        b"iids-tracked": idmp.tracked if idmp is not None else 0,
        b"iids-added": idmp.added if idmp is not None else 0,
        b"iids-duplicates": idmp.duplicates if idmp is not None else 0,
    }


def cmd_xinfo_groups(c: Client, argv: list[bytes]) -> Reply:
    """XINFO GROUPS key (consumers and pending: this region's)"""
    region_of(c)
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
    region_of(c)
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
