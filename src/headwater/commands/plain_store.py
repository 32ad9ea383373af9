"""The plain stream store: the operations of ``store.StreamStore`` on ``stream.Stream`` values
(a server without ``region-id``).

Each operation takes what its handler parsed and looked up, changes the stream and its groups
through ``stream/`` and ``ops/``, and returns the reply with its ``Change``: the effect lines
replicas and the AOF get (``streams.py``'s and ``groups.py``'s module docstrings say which),
and the dirty count. Replay and a replica apply those lines through the same handlers, so
through these same operations.
"""

from __future__ import annotations

from itertools import islice

from headwater.commands.context import Block, Client
from headwater.commands.entries import array_of, encode_range, entry_reply
from headwater.commands.groups import (
    NEW_ONLY,
    XClaimOpts,
    XNackOpts,
    XPendingOpts,
    _capped,
    _Claimer,
    _Delivery,
    _next_claimable_ms,
    _serve_history,
    _serve_new,
    _serve_with_claim,
    _setid_effect,
    _xpending_reply,
    drop_creation_if_claimed,
    nacked_count,
    reclaim_idle,
    reclaim_idle_everywhere,
    touch_consumer,
)
from headwater.commands.idmp import NO_SUCH_MESSAGE, apply_idmp_settings, expire_idmp, recorded
from headwater.commands.notify import count_read, lookup_read, notify
from headwater.commands.store import StreamStore
from headwater.commands.streams import (
    EXHAUSTED,
    TOO_LARGE,
    ReplyCaps,
    TrimOpts,
    XAddOpts,
    XReadOpts,
    _delete_with_ref,
    _idmp_retry,
    _resolve_read_ids,
    _rewrite_trim,
    apply_trim,
    lookup_stream,
    new_stream,
    next_id,
    read_entries,
    xread_end,
)
from headwater.commands.xinfo import _by_name, _entries_read, _full_group, _stream_head
from headwater.errors import WRONGTYPE, err
from headwater.keyevents import STREAM
from headwater.keyspace import Database
from headwater.ops.change import ONE, Change, Effects, Written, as_given, one_line
from headwater.ops.groups import move_last_id
from headwater.ops.streams import append_entry, idmp_original, record_idmp
from headwater.resp.types import NULL_ARRAY, OK, PairMap, Raw, Reply
from headwater.stream.groups import (
    Group,
    claimed_count,
    drop_references,
    id_key,
    key_id,
    lag,
    nack_commands,
    referenced,
)
from headwater.stream.idmp import auto_iid
from headwater.stream.ids import MAX_ID, MIN_ID, StreamID, format_id, incr_id
from headwater.stream.node import entry_fits, total_size
from headwater.stream.stream import Stream


class PlainStreams(StreamStore[Stream, Group]):
    """Streams as Redis keeps them."""

    # -- lookups ----------------------------------------------------------------------------

    def stream(self, c: Client, key: bytes, read: bool = True) -> Stream | None:
        value = lookup_read(c, key) if read else c.db.get(key)
        if value is None or isinstance(value, Stream):
            return value
        raise WRONGTYPE

    def group(self, stream: Stream, name: bytes) -> Group | None:
        return stream.groups.get(name)

    def last_id(self, stream: Stream) -> StreamID:
        return stream.last_id

    # -- entries ----------------------------------------------------------------------------

    def add(self, c: Client, argv: list[bytes], opts: XAddOpts) -> Reply | Written:
        key = argv[1]
        stream = lookup_stream(c, key)
        if stream is None:
            if opts.nomkstream:
                return None
            stream = new_stream(c)
            c.db.set(key, stream)
        pairs = argv[opts.id_index + 1 :]
        idmp_key: tuple[bytes, bytes] | None = None
        if opts.idmp is not None:
            pid, iid = opts.idmp
            idmp_key = (pid, iid if iid is not None else auto_iid(pairs))
            original = idmp_original(stream, idmp_key, opts.id, c.replaying)
            if original is not None:
                return _idmp_retry(c, argv, opts.id_index, stream, original)
        if stream.last_id == MAX_ID:
            raise EXHAUSTED
        sid = next_id(stream, opts.id, c.server.keyspace.now_ms)
        size = total_size(pairs)
        if not entry_fits(size):
            raise TOO_LARGE
        settings = c.server.config.values  # (the dict itself: no method call per lookup)
        max_bytes: int = settings["stream-node-max-bytes"]
        max_entries: int = settings["stream-node-max-entries"]
        dirty = append_entry(c.db, key, stream, sid, pairs, size, max_bytes, max_entries)
        if idmp_key is not None:
            record_idmp(c.db, key, stream, idmp_key, sid, c.server.stats)
        reply = format_id(sid)
        trim = opts.trim
        trimmed = apply_trim(stream, trim) if trim.given else 0
        if c.server.keyspace.notify_flags & STREAM:
            notify(c, STREAM, b"xadd", key)
            if trimmed:
                notify(c, STREAM, b"xtrim", key)
        if not c.server.propagating:
            return Written(reply, ONE)  # (nobody reads the effect: not built)
        effect = list(argv)
        effect[opts.id_index] = reply
        if trim.given and trim.approx:
            _rewrite_trim(effect, stream, trim)
        return Written(reply, one_line(dirty, effect))

    def range(
        self,
        c: Client,
        stream: Stream,
        start: StreamID,
        end: StreamID,
        count: int,
        reverse: bool,
    ) -> Reply:
        return encode_range(stream, start, end, count, reverse)[0]

    def length(self, stream: Stream) -> int:
        return stream.length

    def delete(self, c: Client, key: bytes, stream: Stream, ids: list[StreamID]) -> Reply | Written:
        deleted = sum(1 for sid in ids if stream.delete(sid))
        if not deleted:
            return 0
        c.db.signal_modified(key)
        notify(c, STREAM, b"xdel", key)
        return Written(deleted, as_given(deleted))

    def delete_ex(
        self, c: Client, key: bytes, stream: Stream, ids: list[StreamID], ref: bytes
    ) -> Reply | Written:
        results: list[Reply] = [_delete_with_ref(stream, sid, ref) for sid in ids]
        deleted = results.count(1)
        if not deleted:
            return results
        c.db.signal_modified(key)
        notify(c, STREAM, b"xdel", key)
        return Written(results, as_given(deleted))

    def trim(self, c: Client, argv: list[bytes], stream: Stream, trim: TrimOpts) -> Reply | Written:
        removed = apply_trim(stream, trim)
        if not removed:
            return 0
        c.db.signal_modified(argv[1])
        notify(c, STREAM, b"xtrim", argv[1])
        effect = list(argv)
        if trim.approx:
            _rewrite_trim(effect, stream, trim)
        return Written(removed, one_line(removed, effect))

    def set_id(
        self,
        c: Client,
        key: bytes,
        stream: Stream,
        last: StreamID,
        entries_added: int | None,
        max_deleted: StreamID | None,
    ) -> Reply | Written:
        if last < stream.max_deleted_id:
            raise err("The ID specified in XSETID is smaller than current max_deleted_entry_id")
        if stream.length:
            if last < stream.last_live_id():
                raise err("The ID specified in XSETID is smaller than the target stream top item")
            if entries_added is not None and entries_added < stream.length:
                raise err(
                    "The entries_added specified in XSETID is smaller than the target stream length"
                )
        stream.last_id = last
        if entries_added is not None:
            stream.entries_added = entries_added
        if max_deleted is not None and max_deleted != MIN_ID:
            stream.max_deleted_id = max_deleted
        c.db.signal_modified(key)
        notify(c, STREAM, b"xsetid", key)
        return Written(OK, ONE)

    def read(self, c: Client, argv: list[bytes], opts: XReadOpts) -> Reply | Block:
        resolved = _resolve_read_ids(c, argv, opts)
        caps = ReplyCaps(opts.maxcount, opts.maxsize, c.resp)
        served: list[tuple[bytes, Reply]] = []
        for key, (stream, after) in zip(opts.keys, resolved, strict=True):
            if caps.full():
                break  # MAXCOUNT / MAXSIZE reached: later streams are not served
            count_read(c, key, stream)  # (Redis looks each stream up again: counted twice)
            if stream is None or not stream.length:
                continue
            if after is None:
                last = stream.last_entry()
                if last is not None:
                    entry = entry_reply(last)
                    caps.open_stream(key)
                    caps.add(entry)
                    served.append((key, Raw(b"*1\r\n" + entry)))
                continue
            if stream.last_live_id() <= after:
                continue
            start = incr_id(after)
            if start is None:
                continue
            if opts.maxcount or opts.maxsize:
                caps.open_stream(key)
                served.append((key, array_of(read_entries(stream, start, opts.count, caps))))
            else:
                served.append((key, encode_range(stream, start, MAX_ID, opts.count)[0]))
        return xread_end(c, argv, opts, served, resolved, Stream)

    # -- IDMP -------------------------------------------------------------------------------

    def idmp_settings(self, c: Client, stream: Stream) -> tuple[int, int]:
        return stream.idmp_duration, stream.idmp_maxsize

    def configure_idmp(
        self, c: Client, key: bytes, stream: Stream, duration: int | None, maxsize: int | None
    ) -> Reply | Written:
        changed = apply_idmp_settings(c, key, stream, duration, maxsize)
        return Written(OK, ONE) if changed else OK

    def record_iid(
        self, c: Client, argv: list[bytes], stream: Stream, sid: StreamID
    ) -> Reply | Written:
        if stream.get(sid) is None:
            raise NO_SUCH_MESSAGE
        if recorded(stream.idmp, argv, sid):
            return OK
        record_idmp(c.db, argv[1], stream, (argv[2], argv[3]), sid, c.server.stats)
        c.db.signal_modified(argv[1])
        return Written(OK, ONE)

    # -- groups -----------------------------------------------------------------------------

    def create_group(
        self,
        c: Client,
        argv: list[bytes],
        stream: Stream | None,
        last: StreamID,
        entries_read: int,
        mkstream: bool,
    ) -> Reply | Written:
        if stream is None:
            stream = new_stream(c)
            c.db.set(argv[2], stream)
        stream.groups[argv[3]] = Group(argv[3], last, _capped(entries_read, stream))
        c.db.signal_modified(argv[2])
        notify(c, STREAM, b"xgroup-create", argv[2])
        return Written(OK, ONE)

    def set_group_id(
        self,
        c: Client,
        argv: list[bytes],
        stream: Stream,
        group: Group,
        last: StreamID,
        entries_read: int,
    ) -> Reply | Written:
        group.last_id = last
        group.entries_read = _capped(entries_read, stream)
        c.db.signal_modified(argv[2])
        notify(c, STREAM, b"xgroup-setid", argv[2])
        return Written(OK, ONE)

    def destroy_group(
        self, c: Client, argv: list[bytes], stream: Stream, group: Group
    ) -> Reply | Written:
        del stream.groups[argv[3]]
        c.db.signal_modified(argv[2])
        notify(c, STREAM, b"xgroup-destroy", argv[2])
        c.db.signal_ready(argv[2])  # blocked XREADGROUP clients of the group get NOGROUP
        return Written(1, ONE)

    def create_consumer(
        self, c: Client, argv: list[bytes], stream: Stream, group: Group
    ) -> Reply | Written:
        _, created = group.consumer(argv[4], c.server.keyspace.now_ms)
        if not created:
            return 0
        c.db.signal_modified(argv[2])
        notify(c, STREAM, b"xgroup-createconsumer", argv[2])
        return Written(1, ONE)

    def delete_consumer(
        self, c: Client, argv: list[bytes], stream: Stream, group: Group
    ) -> Reply | Written:
        pending = group.delete_consumer(argv[4])
        if pending is None:
            return 0
        c.db.signal_modified(argv[2])
        notify(c, STREAM, b"xgroup-delconsumer", argv[2])
        return Written(pending, ONE)

    def read_group(
        self,
        c: Client,
        argv: list[bytes],
        opts: XReadOpts,
        targets: list[tuple[Stream, Group, StreamID]],
    ) -> Reply | Block | Written:
        served: list[tuple[bytes, Reply]] = []
        fx = Effects()
        claim_ms = opts.claim_ms
        caps = ReplyCaps(opts.maxcount, opts.maxsize, c.resp)
        for key, (stream, group, sid) in zip(opts.keys, targets, strict=True):
            if caps.full():
                break  # MAXCOUNT / MAXSIZE reached: later streams are not served
            count_read(c, key, stream)  # (Redis looks each stream up again: counted twice)
            d = _Delivery(c, key, stream, group)
            reclaim_idle(c, key, group, fx, keep=opts.consumer)
            created_at = len(fx.lines or ())
            consumer = touch_consumer(c, key, group, opts.consumer, fx)
            parts: list[bytes] | None = None
            caps.open_stream(key)
            if sid != NEW_ONLY:
                parts = _serve_history(d, consumer, sid, opts.count, caps)
                claim_ms = None  # Redis switches CLAIM off after a history read
            elif claim_ms is not None:
                parts = (
                    _serve_with_claim(d, consumer, opts.count, opts.noack, claim_ms, caps) or None
                )
            elif stream.length and stream.last_live_id() > group.last_id:
                parts = _serve_new(d, consumer, opts.count, opts.noack, caps)
            caps.close_stream(parts is not None)
            if parts is not None:
                served.append((key, array_of(parts)))
            fx.add(int(d.changed))
            lines = fx.lines
            if lines is not None:
                lines += d.effects
            if not opts.noack:  # (Redis propagates the creation with NOACK)
                drop_creation_if_claimed(fx, created_at)
        if served:
            if c.resp == 3:
                return Written(PairMap(served), fx)
            return Written([[key, entries] for key, entries in served], fx)
        if opts.block_ms is None:
            return Written(NULL_ARRAY, fx)
        monotonic = c.server.clock.monotonic_ms()
        deadline = monotonic + opts.block_ms if opts.block_ms else 0
        retry_at = 0.0
        if claim_ms is not None:
            soonest = _next_claimable_ms(targets, claim_ms, c.server.keyspace.now_ms)
            if soonest is not None:
                retry_at = monotonic + soonest
        return Written(Block(list(opts.keys), deadline, NULL_ARRAY, retry_at_ms=retry_at), fx)

    def ack(
        self, c: Client, key: bytes, stream: Stream, group: Group, ids: list[StreamID]
    ) -> Reply | Written:
        acked = sum(1 for sid in ids if group.ack(id_key(sid)))
        if not acked:
            return 0
        c.db.signal_modified(key)
        return Written(acked, as_given(acked))

    def ack_delete(
        self,
        c: Client,
        key: bytes,
        stream: Stream,
        group: Group,
        ids: list[StreamID],
        ref: bytes,
    ) -> Reply | Written:
        results: list[Reply] = []
        for sid in ids:
            if not group.ack(id_key(sid)):
                results.append(-1)
            elif ref == b"ACKED" and referenced(stream, sid):
                results.append(2)
            else:
                if ref == b"DELREF":
                    drop_references(stream, sid)
                stream.delete(sid)
                results.append(1)
        if results.count(-1) == len(results):
            return results
        c.db.signal_modified(key)
        return Written(results, ONE)

    def nack(
        self,
        c: Client,
        key: bytes,
        stream: Stream,
        group: Group,
        ids: list[StreamID],
        opts: XNackOpts,
    ) -> Reply | Written:
        nacked: list[tuple[int, int]] = []  # (key, resulting count), in processing order
        for sid in ids:
            pel_key = id_key(sid)
            nack = group.pel.get(pel_key)
            if nack is None and (not opts.force or stream.get(sid) is None):
                continue  # not pending, and FORCE creates entries only for existing ones
            count = nacked_count(nack[1] if nack is not None else 0, opts)
            group.release(pel_key, count)
            nacked.append((pel_key, count))
        if not nacked:
            return 0
        c.db.signal_modified(key)
        c.db.signal_ready(key)  # nacked entries are claimable now: wake XREADGROUP CLAIM
        return Written(len(nacked), Change(len(nacked), [*nack_commands(key, group.name, nacked)]))

    def pending(
        self, c: Client, key: bytes, stream: Stream, group: Group, opts: XPendingOpts | None
    ) -> Reply | Written:
        if not c.server.config["stream-consumer-idle-reclaim-ms"]:
            return _xpending_reply(c, group, opts)  # (the usual case: nothing to allocate)
        fx = Effects()
        reclaim_idle(c, key, group, fx)
        reply = _xpending_reply(c, group, opts)
        return Written(reply, fx) if fx.dirty else reply

    def claim(
        self,
        c: Client,
        argv: list[bytes],
        stream: Stream,
        group: Group,
        ids: list[StreamID],
        opts: XClaimOpts,
    ) -> Reply | Written:
        now = c.server.keyspace.now_ms
        moved_last_id = move_last_id(group, opts.last_id)
        fx = Effects()
        reclaim_idle(c, argv[1], group, fx, keep=argv[3])
        created_at = len(fx.lines or ())
        consumer = touch_consumer(c, argv[1], group, argv[3], fx)
        claimer = _Claimer(c, argv[1], stream, group, fx)
        delivery_ms = now if opts.delivery_ms is None else opts.delivery_ms
        for sid in ids:
            key = id_key(sid)
            nack = group.pel.get(key)
            if stream.get(sid) is None:
                if nack is not None:
                    claimer.forget(key)
                continue
            count = claimed_count(
                None if nack is None else nack[1],
                None if nack is None or nack[2] is None else now - nack[0],
                opts.min_idle,
                opts.force,
                opts.retrycount,
                opts.justid,
            )
            if count is not None:
                claimer.claim(key, consumer, delivery_ms, count, opts.justid)
        if moved_last_id and not claimer.claimed:
            fx.add(1, _setid_effect(argv[1], group))
        drop_creation_if_claimed(fx, created_at)
        return claimer.finish(claimer.items)

    def autoclaim(
        self,
        c: Client,
        argv: list[bytes],
        stream: Stream,
        group: Group,
        options: tuple[int, StreamID, int, bool],
    ) -> Reply | Written:
        min_idle, start, count, justid = options
        fx = Effects()
        reclaim_idle(c, argv[1], group, fx, keep=argv[3])
        created_at = len(fx.lines or ())
        consumer = touch_consumer(c, argv[1], group, argv[3], fx)
        now = c.server.keyspace.now_ms
        claimer = _Claimer(c, argv[1], stream, group, fx)
        attempts = count * 10
        # Keys are looked at in order and only looked-at ones are removed, so a snapshot of
        # the next attempts + 1 keys stays valid; the one after the last examined is the cursor.
        keys = list(islice(group.order.irange(id_key(start)), min(attempts, len(group.pel)) + 1))
        deleted: list[Reply] = []
        i = 0
        while attempts and count and i < len(keys):
            attempts -= 1
            key = keys[i]
            i += 1
            sid = key_id(key)
            if stream.get(sid) is None:
                claimer.forget(key)
                deleted.append(format_id(sid))
                count -= 1
                continue
            delivery_ms, delivered, owner = group.pel[key]
            idle = None if owner is None else now - delivery_ms
            new_count = claimed_count(delivered, idle, min_idle, False, None, justid)
            if new_count is None:
                continue
            claimer.claim(key, consumer, now, new_count, justid)
            count -= 1
        cursor = format_id(key_id(keys[i])) if i < len(keys) else b"0-0"
        drop_creation_if_claimed(fx, created_at)
        return claimer.finish([cursor, claimer.items, deleted])

    def expire_idmp(self, dbs: list[Database], now_ms: int, duration_s: int) -> int:
        return sum(expire_idmp(db, now_ms) for db in dbs if db.idmp_keys)

    def reclaim_idle(self, db: Database, now_ms: int, idle_ms: int) -> list[Change]:
        return reclaim_idle_everywhere(db, now_ms, idle_ms)

    # -- XINFO ------------------------------------------------------------------------------

    def info_stream(self, c: Client, stream: Stream, full: bool, count: int) -> Reply:
        info = _stream_head(stream)
        if full:
            info[b"entries"] = encode_range(stream, MIN_ID, MAX_ID, count)[0]
            info[b"groups"] = [_full_group(stream, group, count) for group in _by_name(stream)]
            return info
        info[b"groups"] = len(stream.groups)
        first, last = stream.first_entry(), stream.last_entry()
        info[b"first-entry"] = entry_reply(first) if first is not None else None
        info[b"last-entry"] = entry_reply(last) if last is not None else None
        return info

    def info_groups(self, c: Client, stream: Stream) -> Reply:
        return [
            {
                b"name": group.name,
                b"consumers": len(group.consumers),
                b"pending": len(group.pel),
                b"last-delivered-id": format_id(group.last_id),
                b"entries-read": _entries_read(group),
                b"lag": lag(stream, group),
            }
            for group in _by_name(stream)
        ]

    def info_consumers(self, c: Client, stream: Stream, group: Group) -> Reply:
        now = c.server.keyspace.now_ms
        return [
            {
                b"name": consumer.name,
                b"pending": len(consumer.pel),
                b"idle": max(now - consumer.seen_time, 0),
                b"inactive": (
                    max(now - consumer.active_time, 0) if consumer.active_time >= 0 else -1
                ),
            }
            for consumer in (group.consumers[name] for name in sorted(group.consumers))
        ]
