"""The region stream store: the operations of ``store.StreamStore`` on an active-active
region's records (issue 18; ``activeactive.rstream``).

The handlers parse and check exactly as on a plain server (they are the same handlers), then
call these operations, which ask the ``Region`` for the change (it makes and applies the
effect: the write rule exists once, in ``activeactive.apply``) and answer with the plain
server's reply shape: one region with no peers answers byte for byte as a plain server
(tests/unit/test_activeactive_server.py). Consumers, PELs and delivery cursors are local:
XREADGROUP (with CLAIM), XCLAIM, XAUTOCLAIM, XNACK, XGROUP SETID/CREATECONSUMER/DELCONSUMER
change no replicated state and make no effect (their new state is logged as AALOCAL lines).

What differs from a plain server, by design (spec/ACTIVE-ACTIVE.md, docs/design/active-active.md):
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
from headwater.commands.context import Block, Client
from headwater.commands.entries import array_of, encode_range, entry_reply
from headwater.commands.groups import (
    NEW_ONLY,
    XClaimOpts,
    XNackOpts,
    XPendingOpts,
    nacked_count,
)
from headwater.commands.idmp import NO_SUCH_MESSAGE, expire_idmp, recorded
from headwater.commands.notify import lookup_read, notify
from headwater.commands.region_keyspace import RegionKeyspace, region_of, stream_at
from headwater.commands.store import StreamStore
from headwater.commands.streams import (
    TOO_LARGE,
    ReplyCaps,
    TrimOpts,
    XAddOpts,
    XReadOpts,
    parse_read_id,
    xread_end,
)
from headwater.keyevents import STREAM
from headwater.keyspace import Database
from headwater.ops.change import Change, Written
from headwater.ops.streams import retry_of
from headwater.resp.types import NULL_ARRAY, OK, PairMap, Raw, Reply
from headwater.stream.groups import UNKNOWN, Group, advance, claimed_count, lag
from headwater.stream.idmp import auto_iid
from headwater.stream.ids import MAX_ID, MIN_ID, StreamID, format_id, incr_id
from headwater.stream.node import entry_fits, total_size

_NULL_ENTRY = Raw(b"*-1\r\n")
_NULL_ENTRY3 = Raw(b"_\r\n")
_CLAIM_INFO_OF_NEW = len(b":0\r\n:0\r\n")  # what a CLAIM read adds to a new entry


class RegionStreams(StreamStore[RegionStream, RegionGroup]):
    """The streams of an active-active region."""

    def __init__(self, rk: RegionKeyspace) -> None:
        self.rk = rk

    # -- lookups ----------------------------------------------------------------------------

    def stream(self, c: Client, key: bytes, read: bool = True) -> RegionStream | None:
        region_of(c)
        return stream_at(c, key, read)

    def group(self, stream: RegionStream, name: bytes) -> RegionGroup | None:
        return stream.groups.get(name)

    def last_id(self, stream: RegionStream) -> StreamID:
        return stream.last_id()

    # -- entries ----------------------------------------------------------------------------

    def add(self, c: Client, argv: list[bytes], opts: XAddOpts) -> Reply | Written:
        """The ID by active-active-id-mode; trims are exact."""
        rk, key = region_of(c), argv[1]
        record = stream_at(c, key, read=False)
        if record is None and opts.nomkstream:
            return None
        pairs = argv[opts.id_index + 1 :]
        idmp_key: tuple[bytes, bytes] | None = None
        if opts.idmp is not None:  # this region's map only (a producer pinned to a region)
            pid, iid = opts.idmp
            idmp_key = (pid, iid if iid is not None else auto_iid(pairs))
            original = retry_of(record.idmp, idmp_key) if record is not None else None
            if original is not None:  # a retry: nothing is added
                maxsize = c.server.config["stream-idmp-maxsize"]
                rk.record_idmp(key, idmp_key, original, maxsize, c.server.stats)
                c.db.signal_modified(key)
                return rk.written(format_id(original), 1)
        size = total_size(pairs)
        if not entry_fits(size):
            raise TOO_LARGE
        region = rk.region
        sid = region.xadd(key, argv[opts.id_index], pairs, c.server.keyspace.now_ms, size)
        if idmp_key is not None:
            maxsize = c.server.config["stream-idmp-maxsize"]
            rk.record_idmp(key, idmp_key, sid, maxsize, c.server.stats)
        trim = opts.trim
        trimmed = region.xtrim(key, trim.maxlen, trim.minid, trim.ref) if trim.given else 0
        if c.server.keyspace.notify_flags & STREAM:
            notify(c, STREAM, b"xadd", key)
            if trimmed:
                notify(c, STREAM, b"xtrim", key)
        lines = rk.take_lines()
        return rk.written(format_id(sid), 1 + trimmed, lines)

    def range(
        self,
        c: Client,
        stream: RegionStream,
        start: StreamID,
        end: StreamID,
        count: int,
        reverse: bool,
    ) -> Reply:
        return _encode(stream, start, end, count, reverse)[0]

    def length(self, stream: RegionStream) -> int:
        return stream.length

    def delete(
        self, c: Client, key: bytes, stream: RegionStream, ids: list[StreamID]
    ) -> Reply | Written:
        """Each ID in every sub-log that holds it."""
        rk = region_of(c)
        deleted = rk.region.xdel(key, ids)
        if deleted:
            notify(c, STREAM, b"xdel", key)
        return rk.written(deleted, deleted)

    def delete_ex(
        self, c: Client, key: bytes, stream: RegionStream, ids: list[StreamID], ref: bytes
    ) -> Reply | Written:
        """XDEL's rule, per ID (ACKED asks this region's groups; DELREF drops the pending
        entries in every region)."""
        rk = region_of(c)
        results: list[Reply] = list(rk.region.xdelex(key, ids, ref))
        deleted = results.count(1)
        if deleted:
            notify(c, STREAM, b"xdel", key)
        return rk.written(results, deleted)

    def trim(
        self, c: Client, argv: list[bytes], stream: RegionStream, trim: TrimOpts
    ) -> Reply | Written:
        """Exact, over the merged stream."""
        rk = region_of(c)
        removed = rk.region.xtrim(argv[1], trim.maxlen, trim.minid, trim.ref)
        if removed:
            notify(c, STREAM, b"xtrim", argv[1])
        return rk.written(removed, removed)

    def set_id(
        self,
        c: Client,
        key: bytes,
        stream: RegionStream,
        last: StreamID,
        entries_added: int | None,
        max_deleted: StreamID | None,
    ) -> Reply | Written:
        """The last ID and max-deleted ID rise (max-merged across regions); entries-added
        becomes the given count here, and concurrent XADDs elsewhere add on top."""
        rk = region_of(c)
        rk.region.xsetid(key, last, entries_added, max_deleted)
        c.db.signal_modified(key)
        notify(c, STREAM, b"xsetid", key)
        return rk.written(OK, 1)

    def read(self, c: Client, argv: list[bytes], opts: XReadOpts) -> Reply | Block:
        """Merged by ID. An entry that arrives late from another region with a smaller ID
        can be skipped (use XREADGROUP)."""
        region_of(c)
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

    # -- IDMP (settings replicated, maps per region) ----------------------------------------

    def idmp_settings(self, c: Client, stream: RegionStream) -> tuple[int, int]:
        config = c.server.config
        duration: int = stream.idmp_setting(b"duration") or config["stream-idmp-duration"]
        maxsize: int = stream.idmp_setting(b"maxsize") or config["stream-idmp-maxsize"]
        return duration, maxsize

    def configure_idmp(
        self,
        c: Client,
        key: bytes,
        stream: RegionStream,
        duration: int | None,
        maxsize: int | None,
    ) -> Reply | Written:
        """Replicated (the causally latest wins; concurrent ones by their stamps); a region
        whose setting in force changes forgets its own iids."""
        rk = region_of(c)
        if not rk.region.xcfgset(key, duration, maxsize):
            return OK  # nothing differs: nothing changes, nothing is replicated
        c.db.signal_modified(key)
        return rk.written(OK, 1)

    def record_iid(
        self, c: Client, argv: list[bytes], stream: RegionStream, sid: StreamID
    ) -> Reply | Written:
        """In this region's map (local, as every IDMP map; logged as AAIDMP)."""
        rk = region_of(c)
        if all(stream.entry(r, sid) is None for r in stream.subs):
            raise NO_SUCH_MESSAGE
        if recorded(stream.idmp, argv, sid):
            return OK
        maxsize = c.server.config["stream-idmp-maxsize"]
        rk.record_idmp(argv[1], (argv[2], argv[3]), sid, maxsize, c.server.stats)
        c.db.signal_modified(argv[1])
        return rk.written(OK, 1)

    # -- groups -----------------------------------------------------------------------------

    def create_group(
        self,
        c: Client,
        argv: list[bytes],
        stream: RegionStream | None,
        last: StreamID,
        entries_read: int,
        mkstream: bool,
    ) -> Reply | Written:
        """Replicated (delete wins); ENTRIESREAD is this region's."""
        rk = region_of(c)
        rk.region.xgroup_create(argv[2], argv[3], argv[4], mkstream=mkstream)
        record = rk.region.current[argv[2]]
        group = record.groups.get(argv[3])
        if group is not None:
            group.last_id = last
            group.entries_read = _capped(entries_read, record)
            rk.local(argv[2], group, moved=True)
        notify(c, STREAM, b"xgroup-create", argv[2])
        return rk.written(OK, 1)

    def set_group_id(
        self,
        c: Client,
        argv: list[bytes],
        stream: RegionStream,
        group: RegionGroup,
        last: StreamID,
        entries_read: int,
    ) -> Reply | Written:
        """This region's cursors only."""
        rk = region_of(c)
        rk.region.xgroup_setid(argv[2], argv[3], b"$" if argv[4] == b"$" else format_id(last))
        group.last_id = last
        group.entries_read = _capped(entries_read, stream)
        rk.local(argv[2], group, moved=True)
        c.db.signal_modified(argv[2])
        notify(c, STREAM, b"xgroup-setid", argv[2])
        return rk.written(OK, 1)

    def destroy_group(
        self, c: Client, argv: list[bytes], stream: RegionStream, group: RegionGroup
    ) -> Reply | Written:
        """Replicated; delete wins over a concurrent CREATE."""
        rk = region_of(c)
        rk.region.xgroup_destroy(argv[2], argv[3])
        notify(c, STREAM, b"xgroup-destroy", argv[2])
        return rk.written(1, 1)

    def create_consumer(
        self, c: Client, argv: list[bytes], stream: RegionStream, group: RegionGroup
    ) -> Reply | Written:
        """Local."""
        rk = region_of(c)
        if argv[4] in group.times:
            return 0
        group.touch(argv[4], c.server.keyspace.now_ms)
        rk.local(argv[2], group)
        c.db.signal_modified(argv[2])
        notify(c, STREAM, b"xgroup-createconsumer", argv[2])
        return rk.written(1, 1)

    def delete_consumer(
        self, c: Client, argv: list[bytes], stream: RegionStream, group: RegionGroup
    ) -> Reply | Written:
        """Local: how many entries it had pending."""
        rk = region_of(c)
        pending = group.delete_consumer(argv[4])
        if pending is None:
            return 0
        rk.local(argv[2], group)
        c.db.signal_modified(argv[2])
        notify(c, STREAM, b"xgroup-delconsumer", argv[2])
        return rk.written(pending, 1)

    def read_group(
        self,
        c: Client,
        argv: list[bytes],
        opts: XReadOpts,
        targets: list[tuple[RegionStream, RegionGroup, StreamID]],
    ) -> Reply | Block | Written:
        """``>`` takes from each sub-log what lies above its cursor, so a late entry is never
        skipped; CLAIM first claims this region's idle pending entries (consumers and PELs
        are local)."""
        rk = region_of(c)
        now = c.server.keyspace.now_ms
        served: list[tuple[bytes, Reply]] = []
        changed = 0
        claim_ms = opts.claim_ms
        caps = ReplyCaps(opts.maxcount, opts.maxsize, c.resp)
        for n, (key, (record, group, sid)) in enumerate(zip(opts.keys, targets, strict=True)):
            if caps.full():
                break  # MAXCOUNT / MAXSIZE reached: later streams are not served
            lookup_read(c, key)  # (Redis looks each stream up again to serve it)
            changed += _reclaim_on_access(c, rk, key, group, keep=opts.consumer)
            _touch(c, key, group, opts.consumer)
            rk.local(key, group)
            read = _GroupRead(c, caps, opts.count)
            caps.open_stream(key)
            if sid != NEW_ONLY:
                claim_ms = None  # Redis switches CLAIM off after a history read
                raw = argv[opts.id_index + n]
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
            soonest = [
                rk.region.next_claimable_ms(key, opts.group, claim_ms, now) for key in opts.keys
            ]
            waits = [ms for ms in soonest if ms is not None]
            if waits:
                retry_at = monotonic + min(waits)
        block = Block(list(opts.keys), deadline, NULL_ARRAY, retry_at_ms=retry_at)
        lines = rk.take_lines()
        return Written(block, Change(changed, lines)) if changed or lines else block

    def ack(
        self,
        c: Client,
        key: bytes,
        stream: RegionStream,
        group: RegionGroup,
        ids: list[StreamID],
    ) -> Reply | Written:
        """Replicated only as each sub-log's contiguous prefix."""
        rk = region_of(c)
        acked = rk.region.xack(key, group.name, ids)
        if acked:
            rk.local(key, group)
        return rk.written(acked, acked)

    def ack_delete(
        self,
        c: Client,
        key: bytes,
        stream: RegionStream,
        group: RegionGroup,
        ids: list[StreamID],
        ref: bytes,
    ) -> Reply | Written:
        """XACK here (its contiguous prefix replicated), then the entries' removal
        (replicated, as XDEL)."""
        rk = region_of(c)
        results: list[Reply] = list(rk.region.xackdel(key, group.name, ids, ref))
        if results.count(-1) == len(results):
            return results
        rk.local(key, group)
        c.db.signal_modified(key)
        return rk.written(results, 1)

    def nack(
        self,
        c: Client,
        key: bytes,
        stream: RegionStream,
        group: RegionGroup,
        ids: list[StreamID],
        opts: XNackOpts,
    ) -> Reply | Written:
        """Local, as every PEL change: the entries go to this region's NACK zone (a nacked
        entry is still pending, so the acknowledged prefix does not pass it)."""
        rk = region_of(c)
        done = rk.region.xnack(
            key, group.name, ids, lambda count: nacked_count(count, opts), opts.force
        )
        if not done:
            return 0
        rk.local(key, group)
        c.db.signal_modified(key)
        c.db.signal_ready(key)  # nacked entries are claimable now: wake XREADGROUP CLAIM
        return rk.written(done, done)

    def pending(
        self,
        c: Client,
        key: bytes,
        stream: RegionStream,
        group: RegionGroup,
        opts: XPendingOpts | None,
    ) -> Reply | Written:
        """This region's PEL."""
        rk = region_of(c)
        if _reclaim_on_access(c, rk, key, group):
            return rk.written(_pending_reply(c, group, opts), 1)
        return _pending_reply(c, group, opts)

    def claim(
        self,
        c: Client,
        argv: list[bytes],
        stream: RegionStream,
        group: RegionGroup,
        ids: list[StreamID],
        opts: XClaimOpts,
    ) -> Reply | Written:
        """Local."""
        rk = region_of(c)
        now = c.server.keyspace.now_ms
        changed = 0
        if opts.last_id > group.last_id:
            group.last_id = opts.last_id
            changed = 1
        changed += _reclaim_on_access(c, rk, argv[1], group, keep=argv[3])
        _touch(c, argv[1], group, argv[3])
        rk.local(argv[1], group, moved=True)
        items: list[Reply] = []
        delivery_ms = opts.delivery_ms if opts.delivery_ms is not None else now
        for sid in ids:
            live = [(sid, r) for r in sorted(stream.subs) if stream.entry(r, sid) is not None]
            lo = bisect_left(group.order, (sid, 0))
            for tag in [t for t in group.order[lo:] if t[0] == sid]:
                if tag not in live:
                    group.forget(tag)  # its entry is gone from the stream
                    changed += 1
            for tag in live:
                pending = group.pel.get(tag)
                count = claimed_count(
                    None if pending is None else pending.count,
                    None
                    if pending is None or pending.consumer is None
                    else now - pending.delivery_ms,
                    opts.min_idle,
                    opts.force,
                    opts.retrycount,
                    opts.justid,
                )
                if count is None:
                    continue
                _claim(stream, group, tag, argv[3], delivery_ms, count, opts.justid, items)
                changed += 1
        if items:
            group.touch(argv[3], now, active=True)
        return rk.written(items, changed)

    def autoclaim(
        self,
        c: Client,
        argv: list[bytes],
        stream: RegionStream,
        group: RegionGroup,
        options: tuple[int, StreamID, int, bool],
    ) -> Reply | Written:
        """Local."""
        min_idle, start, count, justid = options
        rk = region_of(c)
        changed = _reclaim_on_access(c, rk, argv[1], group, keep=argv[3])
        _touch(c, argv[1], group, argv[3])
        rk.local(argv[1], group)
        now = c.server.keyspace.now_ms
        attempts = count * 10
        lo = bisect_left(group.order, (start, 0))
        tags = group.order[lo : lo + min(attempts, len(group.pel)) + 1]
        items: list[Reply] = []
        deleted: list[Reply] = []
        i = 0
        while attempts and count and i < len(tags):
            attempts -= 1
            tag = tags[i]
            i += 1
            if stream.entry(tag[1], tag[0]) is None:
                group.forget(tag)
                deleted.append(format_id(tag[0]))
                count -= 1
                changed += 1
                continue
            pending = group.pel[tag]
            idle = None if pending.consumer is None else now - pending.delivery_ms
            new_count = claimed_count(pending.count, idle, min_idle, False, None, justid)
            if new_count is None:
                continue
            _claim(stream, group, tag, argv[3], now, new_count, justid, items)
            count -= 1
            changed += 1
        if items:
            group.touch(argv[3], now, active=True)
        cursor = format_id(tags[i][0]) if i < len(tags) else b"0-0"
        return rk.written([cursor, items, deleted], changed)

    def expire_idmp(self, dbs: list[Database], now_ms: int, duration_s: int) -> int:
        """This region's maps (local to it), and any plain stream's (none is made here: a
        database's ``idmp_keys`` stays empty)."""
        expired = sum(expire_idmp(db, now_ms) for db in dbs if db.idmp_keys)
        if self.rk.idmp_keys:
            expired += self.rk.expire_idmp(now_ms, duration_s)
        return expired

    def reclaim_idle(self, db: Database, now_ms: int, idle_ms: int) -> list[Change]:
        """Consumers are local: an idle one with nothing pending is dropped here, and its
        group's new local state logged (AALOCAL), as XGROUP DELCONSUMER does."""
        rk = self.rk
        streams = rk.region.dbs.get(db.index)
        if not streams:
            return []
        if rk.region.selected != db.index:
            rk.region.select(db.index)
        dropped = 0
        for key, record in streams.items():
            for group in record.groups.values():
                dropped += _drop_idle(rk, key, group, now_ms, idle_ms)
        lines = rk.take_lines()
        return [Change(dropped, lines)] if dropped else []

    # -- XINFO (groups' consumers and PELs: this region's) ----------------------------------

    def info_stream(self, c: Client, stream: RegionStream, full: bool, count: int) -> Reply:
        region_of(c)
        info = _stream_head(self.idmp_settings(c, stream), stream)
        if full:
            info[b"entries"] = _encode(stream, MIN_ID, MAX_ID, count)[0]
            info[b"groups"] = [
                _full_group(stream, stream.groups[name], count) for name in sorted(stream.groups)
            ]
            return info
        first = stream.entries(MIN_ID, MAX_ID, 1)
        last = stream.entries(MIN_ID, MAX_ID, 1, reverse=True)
        info[b"groups"] = len(stream.groups)
        info[b"first-entry"] = entry_reply(first[0]) if first else None
        info[b"last-entry"] = entry_reply(last[0]) if last else None
        return info

    def info_groups(self, c: Client, stream: RegionStream) -> Reply:
        region_of(c)
        stats = stream.stats()
        rows: list[Reply] = []
        for name in sorted(stream.groups):
            group = stream.groups[name]
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

    def info_consumers(self, c: Client, stream: RegionStream, group: RegionGroup) -> Reply:
        region_of(c)
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
# helpers


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


def _pending_reply(c: Client, group: RegionGroup, opts: XPendingOpts | None) -> Reply:
    """XPENDING's reply from this region's PEL."""
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


def _charged(caps: ReplyCaps, parts: list[bytes], extra: int = 0) -> list[bytes]:
    """The encoded entries that fit MAXCOUNT/MAXSIZE, charged to the caps."""
    sent: list[bytes] = []
    for part in parts:
        if caps.full():
            break
        caps.add(part, extra)
        sent.append(part)
    return sent


def _shim(group: RegionGroup) -> Group:
    """A plain group carrying this one's last ID and entries-read, for ``stream.groups``'s
    entries-read and lag rules."""
    return Group(group.name, group.last_id, group.entries_read)


def _capped(entries_read: int, record: RegionStream) -> int:
    added = record.stats().entries_added
    return min(entries_read, added) if entries_read != UNKNOWN else UNKNOWN


def _drop_idle(
    rk: RegionKeyspace,
    key: bytes,
    group: RegionGroup,
    now_ms: int,
    idle_ms: int,
    keep: bytes | None = None,
) -> int:
    """Drop the group's idle consumers (logged with its local state); how many."""
    names = group.idle_consumers(now_ms, idle_ms, keep)
    for name in names:
        group.delete_consumer(name)
    if names:
        rk.local(key, group)
    return len(names)


def _reclaim_on_access(
    c: Client, rk: RegionKeyspace, key: bytes, group: RegionGroup, keep: bytes | None = None
) -> int:
    """As a plain group's ``reclaim_idle``: XREADGROUP, XCLAIM, XAUTOCLAIM and XPENDING drop
    idle consumers, at most once a second per group."""
    idle_ms: int = c.server.config["stream-consumer-idle-reclaim-ms"]
    now = c.server.keyspace.now_ms
    if not idle_ms or not group.consumers or now - group.reclaim_checked_ms < 1000:
        return 0
    group.reclaim_checked_ms = now
    return _drop_idle(rk, key, group, now, idle_ms, keep)


def _touch(c: Client, key: bytes, group: RegionGroup, name: bytes) -> None:
    if group.touch(name, c.server.keyspace.now_ms):
        notify(c, STREAM, b"xgroup-createconsumer", key)


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


def _claim(
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


def _stream_head(settings: tuple[int, int], record: RegionStream) -> dict[bytes, Reply]:
    stats = record.stats()
    nodes = sum(len(s.nodes) for s in record.subs.values())
    duration, maxsize = settings
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


def _full_group(record: RegionStream, group: RegionGroup, count: int) -> dict[bytes, Reply]:
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
