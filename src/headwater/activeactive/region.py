"""One region of an active-active database: its streams, its vector, its effects.

Theory of operation
-------------------
A write command decides, from what this region holds, the deterministic ops of its change
(the ID XADD picks, the horizon DEL observed, the per-sub-log cut of XTRIM…), wraps them in an
``Effect`` with the next own sequence and the current vector, applies it through
``apply_effect`` (the one place of the write rules) and puts it in ``outbox`` for the links to
ship. ``receive`` takes a peer's effect; the inbox applies each exactly once, in causal order.
Reads merge the sub-logs by ID. Consumers, PELs and delivery cursors are local: XREADGROUP
(and its CLAIM), XNACK, XGROUP SETID/CREATECONSUMER/DELCONSUMER make no effect; XACK (and
XACKDEL's acknowledgement) makes one only when the acknowledged prefix of a sub-log grows.

Nothing here reads a clock or does I/O: times come in as ``now_ms`` and effects go out through
``outbox``. ``dump`` is the canonical text form that converged regions share.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence

from headwater.activeactive.apply import apply_effect
from headwater.activeactive.envelope import (
    MOVED_BASE,
    AckPrefix,
    Add,
    Cut,
    Delete,
    Effect,
    GroupCreate,
    GroupDestroy,
    IdmpConfig,
    Move,
    Op,
    Points,
    Remove,
    Select,
    SetFloor,
)
from headwater.activeactive.idmode import (
    DEFAULT_CAPACITY,
    IdRequest,
    check_region,
    next_id,
    parse_mode,
)
from headwater.activeactive.inbox import Inbox
from headwater.activeactive.rstream import (
    ABOVE_SUBS,
    RegionGroup,
    RegionStream,
    Streams,
    db_streams,
)
from headwater.errors import NO_SUCH_KEY, ReplyError, err, require
from headwater.stream.groups import bumped, claimed_count
from headwater.stream.ids import MAX_ID, MIN_ID, StreamID, decr_id, format_id, parse_id

Entry = tuple[StreamID, list[bytes]]
#: asked before each entry a group read would deliver (its ID, and its fields or None for a
#: deleted one in a history read): False stops the read there (MAXSIZE)
Admit = Callable[[StreamID, list[bytes] | None], bool]
#: the same for a claim: (ID, fields, idle ms, delivery count before the claim)
ClaimAdmit = Callable[[StreamID, list[bytes], int, int], bool]

BUSYGROUP = ReplyError("BUSYGROUP", "Consumer Group name already exists")
XGROUP_NO_KEY = err(
    "The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use "
    "the MKSTREAM option to create an empty stream automatically."
)
XSETID_TOO_SMALL = err("The ID specified in XSETID is smaller than the target stream top item")
XSETID_ADDED_TOO_SMALL = err(
    "The entries_added specified in XSETID is smaller than the target stream length"
)
XSETID_BELOW_DELETED = err(
    "The ID specified in XSETID is smaller than current max_deleted_entry_id"
)
WRONG_PAIRS = err("wrong number of arguments for 'xadd' command")


def no_group(key: bytes, group: bytes) -> ReplyError:
    return ReplyError(
        "NOGROUP",
        f"No such key '{key.decode(errors='replace')}' or consumer group "
        f"'{group.decode(errors='replace')}' in XREADGROUP with GROUP option",
    )


def _extras(record: RegionStream) -> str:
    """The dump's stream line's rarer parts, only when set (XSETID's counters, XCFGSET)."""
    text = ""
    if record.added_adjust:
        text += " added=" + ",".join(f"{r}:{a}" for r, a in sorted(record.added_adjust.items()))
    if record.deleted_floor != MIN_ID:
        text += f" maxdel={format_id(record.deleted_floor).decode()}"
    for name in sorted(record.idmp_config):
        text += f" idmp-{name.decode()}={record.idmp_setting(name)}"
    return text


def _dump_stream(lines: list[str], key: bytes, record: RegionStream) -> None:
    lines.append(f"stream {key!r} floor={format_id(record.floor).decode()}{_extras(record)}")
    for sid, region, pairs in record.range(MIN_ID, MAX_ID):
        lines.append(f"  {format_id(sid).decode()} r{region} {pairs!r}")
    for name in sorted(record.groups):
        g = record.groups[name]
        acked = " ".join(f"{r}:{format_id(s).decode()}" for r, s in sorted(g.acked.items()))
        lines.append(f"  group {name!r} births={sorted(g.births)} acked=[{acked}]")


class Region:
    def __init__(
        self,
        region_id: int,
        regions: Iterable[int],
        mode: bytes = b"strict",
        capacity: int = DEFAULT_CAPACITY,
    ) -> None:
        check_region(region_id, capacity)
        self.id = region_id
        self.mode = parse_mode(mode)
        self.capacity = capacity
        #: the records of every database with streams, by number; ``streams`` is database 0's
        self.streams = Streams()
        self.dbs: dict[int, Streams] = {0: self.streams}
        #: the database the commands act on (``select``; the server selects the client's)
        self.selected = 0
        self.current = self.streams
        self.inbox = Inbox(region_id, regions)
        self.outbox: list[Effect] = []
        #: whether own effects go to ``outbox`` (in-process meshes read it; a server's links
        #: ship the lines its sink keeps instead, and turn it off)
        self.keep_outbox = True
        #: called with every effect applied here, own and remote, in the order applied: the
        #: seam for the AOF (a log that ``replay`` reads back into the same state)
        self.sinks: list[Callable[[Effect], None]] = []

    # -- effects ---------------------------------------------------------------------------

    @property
    def vector(self) -> dict[int, int]:
        return dict(self.inbox.applied)

    def select(self, db: int) -> None:
        """Later commands act on this database's streams (their effects say so: ``Select``)."""
        if db != self.selected:
            self.selected = db
            self.current = db_streams(self.dbs, db)

    def _commit(self, ops: list[Op]) -> Effect:
        if self.selected and not (ops and isinstance(ops[0], Select)):
            ops = [Select(self.selected), *ops]
        seq, vector, follows = self.inbox.next_own()
        # (the common effect, one XADD after nothing but own effects: the compact line,
        # without a vector; any other effect carries its own)
        compact = follows and len(ops) == 1 and isinstance(ops[0], Add)
        if follows and not compact:
            vector = self.inbox.last_own_vector()
        effect = Effect(self.id, seq, vector, tuple(ops), compact)
        self._apply(effect)
        if self.keep_outbox:
            self.outbox.append(effect)
        return effect

    def _apply(self, effect: Effect) -> None:
        apply_effect(self.dbs, effect)
        for sink in self.sinks:
            sink(effect)

    def take_outbox(self) -> list[Effect]:
        effects, self.outbox = self.outbox, []
        return effects

    def receive(self, effect: Effect) -> int:
        """File a peer's effect; apply every effect that became ready. How many were."""
        ready = self.inbox.offer(effect)
        for each in ready:
            self._apply(each)
        return len(ready)

    def apply_ready(self, effects: Iterable[Effect]) -> None:
        """Apply effects the inbox already counted as applied (after a state transfer)."""
        for effect in effects:
            self._apply(effect)

    def replay(self, effect: Effect) -> None:
        """Apply an effect read back from this region's log (a restart): own and remote
        effects in the order they were applied, each the next of its origin. Afterwards the
        region makes its own sequence on from there and asks its peers to resume at
        ``inbox.resume_point``: nothing is lost, nothing applied twice."""
        self._apply(self.inbox.mark_applied(effect))

    # -- keys ------------------------------------------------------------------------------

    def visible(self, key: bytes) -> RegionStream | None:
        """The stream if it exists (entries or groups); None for a missing key or a
        tombstone."""
        record = self.current.get(key)
        return record if record is not None and record.exists() else None

    def exists(self, key: bytes) -> bool:
        return self.visible(key) is not None

    def existing_keys(self) -> list[bytes]:
        return sorted(k for k, r in self.current.items() if r.exists())

    def delete(self, *keys: bytes) -> int:
        """DEL/UNLINK: observed-remove of each existing key."""
        ops: list[Op] = []
        for key in dict.fromkeys(keys):
            record = self.visible(key)
            if record is not None:
                ops.append(Delete(key, record.horizon()))
        if ops:
            self._commit(ops)
        return len(ops)

    def flushdb(self) -> None:
        self.delete(*self.existing_keys())

    def flushall(self) -> None:
        """FLUSHALL: every database's streams, observed-remove, in one effect."""
        ops: list[Op] = []
        for db, streams in sorted(self.dbs.items()):
            doomed = [Delete(k, r.horizon()) for k, r in sorted(streams.items()) if r.exists()]
            if doomed:
                ops += [Select(db), *doomed]
        if ops:
            self._commit(ops)

    def rename(self, src: bytes, dst: bytes) -> None:
        record = self.visible(src)
        if record is None:
            raise NO_SUCH_KEY
        if src == dst:
            return
        target = self.current.get(dst)
        dst_horizon = target.horizon() if target is not None else ()
        payload = tuple(
            (sub, tuple((sid, tuple(pairs)) for sid, pairs in stream.range(MIN_ID, MAX_ID)))
            for sub, stream in sorted(record.subs.items())
            if stream.length
        )
        self._commit([Move(src, dst, record.horizon(), dst_horizon, payload)])

    # -- entries ---------------------------------------------------------------------------

    def xadd(
        self, key: bytes, id_arg: bytes, pairs: Sequence[bytes], now_ms: int, size: int = -1
    ) -> StreamID:
        """``size``: the bytes of the pairs, when the caller measured them already."""
        if not pairs or len(pairs) % 2:
            raise WRONG_PAIRS
        request = IdRequest.parse(id_arg)
        record = self.current.get(key)
        merged = record.last_id() if record is not None else MIN_ID
        own = MIN_ID
        if record is not None and self.mode == b"liberal":
            # (liberal mode checks against the region's own last ID, never below XSETID's;
            # by parts: compiled, ``max`` of two IDs boxes both)
            own = record.own_last(self.id)
            floor = record.floor
            if floor[0] > own[0] or (floor[0] == own[0] and floor[1] > own[1]):
                own = floor
        sid = next_id(self.mode, self.id, self.capacity, request, merged, own, now_ms)
        self._commit([Add(key, sid, tuple(pairs), size)])
        return sid

    def xdel(self, key: bytes, ids: Iterable[StreamID]) -> int:
        record = self.visible(key)
        if record is None:
            return 0
        found: list[tuple[int, StreamID]] = []
        for sid in dict.fromkeys(ids):
            found += [(r, sid) for r, s in sorted(record.subs.items()) if s.get(sid) is not None]
        if found:
            self._commit([Remove(key, tuple(found))])
        return len(found)

    def xtrim(
        self,
        key: bytes,
        maxlen: int | None = None,
        minid: StreamID | None = None,
        ref: bytes = b"KEEPREF",
    ) -> int:
        """Exact MAXLEN or MINID trim of the merged stream; each sub-log loses a prefix, named
        by its last removed ID. ACKED spares the entries a group still needs here (``kept``:
        the trim goes on past them, as Redis's); DELREF drops the removed entries' pending
        entries, in every region."""
        record = self.visible(key)
        if record is None:
            return 0
        acked = ref == b"ACKED" and bool(record.groups)
        if maxlen is not None:
            budget = max(record.length - maxlen, 0)
        elif minid is not None and decr_id(minid) is not None:
            budget = record.length
        else:
            budget = 0
        cuts: dict[int, StreamID] = {}
        kept: list[tuple[int, StreamID]] = []
        removed = 0
        for sid, region in record.merged_ids() if budget else ():
            if removed >= budget or (minid is not None and sid >= minid):
                break
            if acked and record.referenced(region, sid):
                kept.append((region, sid))
                continue
            cuts[region] = sid
            removed += 1
        if cuts:
            spared = tuple(sorted((r, sid) for r, sid in kept if sid < cuts.get(r, MIN_ID)))
            self._commit([Cut(key, tuple(sorted(cuts.items())), spared, ref == b"DELREF")])
        return removed

    def xdelex(self, key: bytes, ids: Sequence[StreamID], ref: bytes = b"KEEPREF") -> list[int]:
        """XDELEX: per ID 1 (deleted, in every sub-log that holds it), -1 (no such entry) or 2
        (ACKED: a group still needs it here). One effect removes them all."""
        record = self.visible(key)
        if record is None:
            return [-1] * len(ids)
        results: list[int] = []
        found: list[tuple[int, StreamID]] = []
        gone: set[tuple[int, StreamID]] = set()
        for sid in ids:
            live = [
                (r, sid)
                for r, s in sorted(record.subs.items())
                if (r, sid) not in gone and s.get(sid) is not None
            ]
            if not live:
                # (as Redis: ACKED answers 2 for an ID some group has not reached, even one
                # that does not exist)
                acked = ref == b"ACKED" and any(record.referenced(r, sid) for r in record.subs)
                results.append(2 if acked else -1)
                continue
            if ref == b"ACKED":
                live = [(r, x) for r, x in live if not record.referenced(r, x)]
                if not live:
                    results.append(2)
                    continue
            found += live
            gone.update(live)
            results.append(1)
        if found:
            self._commit([Remove(key, tuple(found), ref == b"DELREF")])
        return results

    def xackdel(
        self, key: bytes, group: bytes, ids: Sequence[StreamID], ref: bytes = b"KEEPREF"
    ) -> list[int]:
        """XACKDEL: acknowledge each ID in the group (here), then delete its entries; per ID
        1 (acknowledged and deleted, or already gone), 2 (ACKED: acknowledged, but another
        group still needs it here) or -1 (not pending in the group here). One effect carries
        the acknowledged prefix (as XACK) and the removal."""
        record = self.visible(key)
        g = None if record is None else record.groups.get(group)
        if record is None or g is None:
            return [-1] * len(ids)
        results: list[int] = []
        doomed: list[tuple[int, StreamID]] = []
        for sid in ids:
            tags = g.ack_tags(sid)
            if not tags:
                results.append(-1)
                continue
            subs = [(r, x) for x, r in tags]
            if ref == b"ACKED" and any(record.referenced(r, x) for r, x in subs):
                results.append(2)
                continue
            doomed += [(r, x) for r, x in subs if record.entry(r, x) is not None]
            results.append(1)
        ops: list[Op] = []
        points = self.ack_points(record, g)
        if points:
            ops.append(AckPrefix(key, group, points))
        if doomed:
            ops.append(Remove(key, tuple(sorted(set(doomed))), ref == b"DELREF"))
        if ops:
            self._commit(ops)
        return results

    def xsetid(
        self,
        key: bytes,
        sid: StreamID,
        entries_added: int | None = None,
        max_deleted: StreamID | None = None,
    ) -> None:
        """XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]: the last ID and the
        max-deleted ID never fall (max-merged); entries-added becomes n here (this region's
        adjustment of the sum: concurrent XADDs elsewhere add on top)."""
        record = self.visible(key)
        if record is None:
            raise NO_SUCH_KEY
        if sid < record.max_deleted_id():
            raise XSETID_BELOW_DELETED
        if record.length:
            if sid < record.last_live_id():
                raise XSETID_TOO_SMALL
            if entries_added is not None and entries_added < record.length:
                raise XSETID_ADDED_TOO_SMALL
        adjust: int | None = None
        if entries_added is not None:
            mine = record.added_adjust.get(self.id, 0)
            wanted = entries_added - (record.entries_added() - mine)
            adjust = wanted if wanted != mine else None
        deleted = MIN_ID
        if max_deleted is not None and max_deleted > record.max_deleted_id():
            deleted = max_deleted
        # (a lower last ID changes nothing: the floor max-merges)
        if sid > record.last_id() or adjust is not None or deleted != MIN_ID:
            self._commit([SetFloor(key, sid, adjust, deleted)])

    def xcfgset(self, key: bytes, duration: int | None, maxsize: int | None) -> bool:
        """XCFGSET: the settings that differ from those in force (replicated); False when
        none does (nothing changes, no effect)."""
        record = self.visible(key)
        if record is None:
            raise NO_SUCH_KEY
        d = duration if duration is not None and duration != record.idmp_setting(b"duration") else 0
        m = maxsize if maxsize is not None and maxsize != record.idmp_setting(b"maxsize") else 0
        if not d and not m:
            return False
        self._commit([IdmpConfig(key, d, m)])
        return True

    # -- reads (merged by ID) --------------------------------------------------------------

    def xrange(
        self, key: bytes, start: StreamID, end: StreamID, count: int | None = None
    ) -> list[Entry]:
        record = self.visible(key)
        if record is None:
            return []
        return record.entries(start, end, count)

    def xrevrange(
        self, key: bytes, end: StreamID, start: StreamID, count: int | None = None
    ) -> list[Entry]:
        record = self.visible(key)
        if record is None:
            return []
        return record.entries(start, end, count, reverse=True)

    def xread(self, key: bytes, after: StreamID, count: int | None = None) -> list[Entry]:
        record = self.visible(key)
        if record is None:
            return []
        return [(sid, pairs) for sid, _, pairs in record.after(after, count)]

    def xlen(self, key: bytes) -> int:
        record = self.visible(key)
        return 0 if record is None else record.length

    def xinfo_stream(self, key: bytes) -> dict[str, object]:
        record = self.visible(key)
        if record is None:
            raise NO_SUCH_KEY
        first = record.range(MIN_ID, MAX_ID, 1)
        last = record.range(MIN_ID, MAX_ID, 1, reverse=True)
        return {
            "length": record.length,
            "last-generated-id": record.last_id(),
            "groups": len(record.groups),
            "first-entry": first[0][0] if first else None,
            "last-entry": last[0][0] if last else None,
            "sub-logs": {r: s.length for r, s in sorted(record.subs.items())},
        }

    def xinfo_groups(self, key: bytes) -> list[bytes]:
        record = self.visible(key)
        if record is None:
            raise NO_SUCH_KEY
        return sorted(record.groups)

    def xinfo_consumers(self, key: bytes, group: bytes) -> list[bytes]:
        return sorted(self._group(key, group)[1].consumers)

    def xpending(self, key: bytes, group: bytes) -> list[tuple[StreamID, bytes, int]]:
        g = self._group(key, group)[1]
        return [(sid, g.pel[(sid, r)].consumer or b"", g.pel[(sid, r)].count) for sid, r in g.order]

    # -- consumer groups -------------------------------------------------------------------

    def _group(self, key: bytes, group: bytes) -> tuple[RegionStream, RegionGroup]:
        record = self.visible(key)
        g = None if record is None else record.groups.get(group)
        if record is None or g is None:
            raise no_group(key, group)
        return record, g

    def _start_cursors(self, record: RegionStream | None, id_arg: bytes) -> Points:
        if id_arg == b"$":
            return record.horizon() if record is not None else ()
        sid = parse_id(id_arg)
        subs = set(self.inbox.applied) | (set(record.subs) if record is not None else set())
        return tuple((r, sid) for r in sorted(subs))

    def xgroup_create(
        self, key: bytes, group: bytes, id_arg: bytes, mkstream: bool = False
    ) -> None:
        record = self.visible(key)
        if record is None and not mkstream:
            raise XGROUP_NO_KEY
        if record is not None and group in record.groups:
            raise BUSYGROUP
        self._commit([GroupCreate(key, group, self._start_cursors(record, id_arg))])

    def xgroup_destroy(self, key: bytes, group: bytes) -> int:
        record = self.visible(key)
        if record is None:
            raise XGROUP_NO_KEY
        if group not in record.groups:
            return 0
        self._commit([GroupDestroy(key, group)])
        return 1

    def xgroup_setid(self, key: bytes, group: bytes, id_arg: bytes) -> None:
        """Local only: moves this region's cursors."""
        record, g = self._group(key, group)
        g.cursors = dict(self._start_cursors(record, id_arg))

    def xgroup_createconsumer(self, key: bytes, group: bytes, consumer: bytes) -> int:
        g = self._group(key, group)[1]
        if consumer in g.consumers:
            return 0
        g.consumer(consumer)
        return 1

    def xreadgroup(
        self,
        key: bytes,
        group: bytes,
        consumer: bytes,
        id_arg: bytes,
        now_ms: int,
        count: int | None = None,
        noack: bool = False,
        admit: Admit | None = None,
    ) -> list[tuple[StreamID, list[bytes] | None]]:
        """``>``: per sub-log what lies above its cursor, merged by ID; an ID: this consumer's
        pending entries above it, merged by ID (None for an entry deleted since). ``admit``
        (MAXSIZE) is asked before each entry: one it refuses, and every one after it, is not
        delivered."""
        record, g = self._group(key, group)
        tags = g.consumer(consumer)
        if id_arg != b">":
            start = parse_id(id_arg)
            out: list[tuple[StreamID, list[bytes] | None]] = []
            for sid, region in tags[bisect_right(tags, (start, ABOVE_SUBS)) :]:
                if count is not None and len(out) >= count:
                    break
                pairs = record.entry(region, sid)
                if admit is not None and not admit(sid, pairs):
                    break
                if pairs is not None:  # (a deleted entry is answered, not delivered again)
                    pending = g.pel[(sid, region)]
                    pending.count = bumped(pending.count)
                    pending.delivery_ms = now_ms
                    g.touched.add((sid, region))
                out.append((sid, pairs))
            return out
        delivered = record.new_for(g, count)
        served: list[tuple[StreamID, list[bytes] | None]] = []
        for sid, region, pairs in delivered:
            if admit is not None and not admit(sid, pairs):
                break
            g.raise_cursor(region, sid)
            if not noack:
                g.add_pending((sid, region), consumer, now_ms)
            served.append((sid, pairs))
        return served

    def claim_idle(
        self,
        key: bytes,
        group: bytes,
        consumer: bytes,
        min_idle: int,
        now_ms: int,
        count: int | None = None,
        admit: ClaimAdmit | None = None,
    ) -> list[tuple[StreamID, list[bytes], int, int]]:
        """XREADGROUP … CLAIM's first part (local, as every PEL change): this region's pending
        entries idle for at least ``min_idle`` ms, the NACK zone first (oldest nack first),
        then the oldest delivery first, go to ``consumer``; entries gone from the stream are
        skipped. Each as (ID, fields, idle ms, delivery count), both as they were before;
        ``admit`` is asked with the same before each claim (MAXSIZE)."""
        record, g = self._group(key, group)
        out: list[tuple[StreamID, list[bytes], int, int]] = []
        for tag in g.claim_order():
            if count is not None and len(out) >= count:
                break
            pending = g.pel[tag]
            owned_for = None if pending.consumer is None else now_ms - pending.delivery_ms
            new_count = claimed_count(pending.count, owned_for, min_idle, False, None, False)
            if new_count is None:
                break  # in delivery-time order: nothing after this one is idle enough either
            pairs = record.entry(tag[1], tag[0])
            if pairs is None:
                continue
            idle, old = max(now_ms - pending.delivery_ms, 0), pending.count
            if admit is not None and not admit(tag[0], pairs, idle, old):
                break
            g.claim(tag, consumer, now_ms, new_count)
            out.append((tag[0], pairs, idle, old))
        return out

    def next_claimable_ms(self, key: bytes, group: bytes, min_idle: int, now_ms: int) -> int | None:
        """Milliseconds until the first pending entry (whose stream entry exists) is idle
        for ``min_idle``: when a blocked XREADGROUP … CLAIM tries again."""
        record, g = self._group(key, group)
        for tag in g.claim_order():
            if record.entry(tag[1], tag[0]) is not None:
                pending = g.pel[tag]
                if pending.consumer is None:
                    return 1
                return max(pending.delivery_ms + min_idle - now_ms, 1)
        return None

    def xnack(
        self,
        key: bytes,
        group: bytes,
        ids: Sequence[StreamID],
        counts: Callable[[int], int],
        force: bool = False,
    ) -> int:
        """XNACK (local): each pending entry with these IDs (with ``force`` also a live entry
        not pending) belongs to nobody, with delivery time 0 and the count ``counts`` gives
        for its count (0 when new), at the tail of the NACK zone; how many."""
        record, g = self._group(key, group)
        done = 0
        for sid in ids:
            lo = bisect_left(g.order, (sid, 0))
            tags = [t for t in g.order[lo : lo + len(record.subs) + 1] if t[0] == sid]
            if not tags and force:
                tags = [(sid, r) for r in sorted(record.subs) if record.entry(r, sid) is not None]
            for tag in tags:
                pending = g.pel.get(tag)
                g.release(tag, counts(pending.count if pending is not None else 0))
                done += 1
        return done

    def xack(self, key: bytes, group: bytes, ids: Iterable[StreamID]) -> int:
        """Acknowledge; replicate the acknowledged prefix of each sub-log when it grows."""
        record = self.visible(key)
        g = None if record is None else record.groups.get(group)
        if record is None or g is None:
            return 0
        acked = sum(g.ack(sid) for sid in dict.fromkeys(ids))
        points = self.ack_points(record, g)
        if points:
            self._commit([AckPrefix(key, group, points)])
        return acked

    @staticmethod
    def ack_points(record: RegionStream, g: RegionGroup) -> Points:
        """Per sub-log, the greatest entry delivered here with nothing pending at or below
        it, where that is above the prefix already acknowledged (seed t1…t11)."""
        points: list[tuple[int, StreamID]] = []
        for region, sub in sorted(record.subs.items()):
            cursor = g.cursor(region)
            if cursor == MIN_ID:
                continue
            low = g.min_pending(region)
            if low is None:
                candidate: StreamID | None = cursor
            else:
                below = decr_id(low)
                rows = [] if below is None else sub.range(MIN_ID, min(below, cursor), 1, True)
                candidate = rows[0][0] if rows else None
            if candidate is not None and candidate > g.acked.get(region, MIN_ID):
                points.append((region, candidate))
        return tuple(points)

    # -- convergence and checks ------------------------------------------------------------

    def dump(self) -> str:
        """One deterministic text of every stream, group and the vector: equal in every
        region once all effects are delivered."""
        # (regions nothing was applied from are left out: a region learns its peers' ids
        # only when their links connect)
        vector = " ".join(f"{r}={s}" for r, s in sorted(self.inbox.applied.items()) if s)
        lines = [f"vector {vector}"]
        for db, streams in sorted(self.dbs.items()):
            keys = sorted(k for k, r in streams.items() if r.exists())
            if db and keys:
                lines.append(f"db {db}")
            for key in keys:
                _dump_stream(lines, key, streams[key])
        return "\n".join(lines) + "\n"

    def check_invariants(self) -> None:
        self.inbox.check_invariants()
        require(self.dbs[0] is self.streams, "database 0's records replaced")
        require(self.current is self.dbs[self.selected], "the selected database is stale")
        for record in (r for streams in self.dbs.values() for r in streams.values()):
            record.check_invariants()
            if self.mode == b"strict":
                own = record.subs.get(self.id)
                for sid in own.iter_ids() if own is not None else ():
                    require(
                        sid[1] % self.capacity == self.id % self.capacity,
                        f"strict-mode entry {sid} of region {self.id} off its sequence class",
                    )
                # regions' own sub-logs only: a RENAME concurrent with writes to its
                # destination may bring in an equal ID (docs/design/active-active.md)
                ids = [sid for sid, r, _ in record.range(MIN_ID, MAX_ID) if r < MOVED_BASE]
                require(len(ids) == len(set(ids)), "a duplicate ID in strict mode")
