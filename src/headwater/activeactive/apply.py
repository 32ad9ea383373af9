"""The write rules of active-active streams: how an effect changes a region's streams.

Every effect goes through ``apply_effect``, the local ones (right after a command made them)
and the remote ones (when the inbox finds them ready) alike, so each rule exists once. The
inbox hands effects over in causal order: when an effect is applied, the region holds
everything its sender had observed. That makes the rules short:

- ``Add``: append to the origin's sub-log (above its last ID; only RENAME's moves can make an
  ID arrive below it, then the sub-log is rebuilt in order).
- ``Remove`` / ``Cut`` / ``Delete``: remove what the sender named or observed (its horizon);
  an entry added concurrently elsewhere lies above the horizon and survives (observed-remove).
  A ``Cut`` spares the entries it names as ``kept`` (ACKED). With ``delref`` (DELREF) every
  region also drops its own pending entries of what is removed (pending entries are local, so
  each region drops its own).
- ``Delete`` and ``GroupDestroy`` remove the key's groups or the named group whoever created
  them, and record ``(origin, seq)`` in a delete clock. A ``GroupCreate`` whose sender had not
  seen a recorded delete is concurrent with it and is dropped: delete wins.
- ``SetFloor`` (XSETID) max-merges the last ID and the max-deleted ID; ENTRIESADDED sets the
  origin's own adjustment of the entries-added sum (only that origin sets it, in its order).
- ``IdmpConfig`` (XCFGSET): per setting a multi-value register: a value replaces those its
  sender had seen, the greatest stamp among the rest is in force, a DEL removes what it saw.
- ``AckPrefix`` raises a group's acknowledged prefix and cursors (max-merged), only for the
  group incarnation the sender knew (its births), never a later one.
"""

from __future__ import annotations

from headwater.activeactive.envelope import (
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
    moved_sub,
)
from headwater.activeactive.rstream import RegionGroup, RegionStream, Streams, db_streams
from headwater.stream.ids import MIN_ID


def apply_effect(dbs: dict[int, Streams], effect: Effect) -> None:
    """Apply the effect's ops in order, each to the streams of the database the last
    ``Select`` before it named (database 0 at first)."""
    streams = dbs[0]
    for op in effect.ops:
        if isinstance(op, Select):
            streams = db_streams(dbs, op.db)
        else:
            apply_op(streams, effect, op)


def _record(streams: Streams, key: bytes) -> RegionStream:
    record = streams.get(key)
    if record is None:
        record = streams[key] = RegionStream(streams.limits)
    return record


def apply_op(streams: Streams, effect: Effect, op: Op) -> None:
    if isinstance(op, Add):
        _record(streams, op.key).append(effect.origin, op.sid, op.pairs, op.size)
    elif isinstance(op, Remove):
        record_or_none = streams.get(op.key)
        if record_or_none is not None:
            for region, sid in op.entries:
                if op.delref:
                    record_or_none.drop_refs(region, sid)
                sub = record_or_none.subs.get(region)
                if sub is not None:
                    sub.delete(sid)
    elif isinstance(op, Cut):
        record_or_none = streams.get(op.key)
        if record_or_none is not None:
            record_or_none.remove_upto(op.cuts, op.kept, op.delref)
    elif isinstance(op, Delete):
        _delete(_record(streams, op.key), effect, op.horizon)
    elif isinstance(op, Move):
        _delete(_record(streams, op.src), effect, op.src_horizon)
        dst = _record(streams, op.dst)
        _delete(dst, effect, op.dst_horizon)
        for k, (_, entries) in enumerate(op.payload):
            into = moved_sub(effect.origin, effect.seq, k)
            dst.insert(into, [(sid, into, list(pairs)) for sid, pairs in entries])
    elif isinstance(op, SetFloor):
        record = _record(streams, op.key)
        record.floor = max(record.floor, op.sid)
        if op.adjust is not None:
            record.added_adjust[effect.origin] = op.adjust
        record.deleted_floor = max(record.deleted_floor, op.max_deleted)
    elif isinstance(op, IdmpConfig):
        _idmp_config(_record(streams, op.key), effect, op)
    elif isinstance(op, GroupCreate):
        _group_create(_record(streams, op.key), effect, op)
    elif isinstance(op, GroupDestroy):
        record = _record(streams, op.key)
        record.groups.pop(op.group, None)
        clock = record.destroy_clock.setdefault(op.group, {})
        clock[effect.origin] = max(clock.get(effect.origin, 0), effect.seq)
    elif isinstance(op, AckPrefix):
        _ack_prefix(streams, effect, op)
    # (a Select is apply_effect's: it picks the streams the ops after it apply to)


def _delete(record: RegionStream, effect: Effect, horizon: Points) -> None:
    record.remove_upto(horizon)
    record.groups.clear()
    for name in list(record.idmp_config):  # the settings it observed go with the stream
        _observed_remove(record, name, effect)
    origin = effect.origin
    record.del_clock[origin] = max(record.del_clock.get(origin, 0), effect.seq)


def _observed_remove(record: RegionStream, name: bytes, effect: Effect) -> None:
    """Drop the values of a setting that the effect's sender had applied."""
    kept = [(stamp, v) for stamp, v in record.idmp_config[name] if effect.seen(stamp[1]) < stamp[2]]
    if kept:
        record.idmp_config[name] = kept
    else:
        del record.idmp_config[name]


def _idmp_config(record: RegionStream, effect: Effect, op: IdmpConfig) -> None:
    """XCFGSET's settings: each given one replaces the values its sender had seen; when the
    value in force changes, this region forgets its iids (as XCFGSET does)."""
    changed = False
    for name, value in ((b"duration", op.duration), (b"maxsize", op.maxsize)):
        if not value:
            continue
        before = record.idmp_setting(name)
        if name in record.idmp_config:
            _observed_remove(record, name, effect)
        record.idmp_config.setdefault(name, []).append((effect.stamp(), value))
        changed = changed or record.idmp_setting(name) != before
    if changed and record.idmp is not None:
        record.idmp.clear()


def concurrent_delete(record: RegionStream, group: bytes, effect: Effect) -> bool:
    """Whether a DEL of the key or a DESTROY of the group, applied here, was not seen by the
    effect's sender (it is concurrent with the effect: delete wins)."""
    clocks = [record.del_clock, record.destroy_clock.get(group, {})]
    return any(effect.seen(p) < d for clock in clocks for p, d in clock.items())


def _group_create(record: RegionStream, effect: Effect, op: GroupCreate) -> None:
    if concurrent_delete(record, op.group, effect):
        return
    group = record.groups.get(op.group)
    if group is None:
        group = record.groups[op.group] = RegionGroup(op.group)
        group.cursors = dict(op.cursors)
        group.start = dict(op.cursors)
        group.last_id = max([MIN_ID, *group.cursors.values()])
    group.births.add((effect.origin, effect.seq))


def _ack_prefix(streams: Streams, effect: Effect, op: AckPrefix) -> None:
    record = streams.get(op.key)
    group = None if record is None else record.groups.get(op.group)
    if group is None or not any(effect.seen(o) >= s for o, s in group.births):
        return  # the group is gone, or is a later incarnation the sender never knew
    for region, sid in op.points:
        if sid > group.acked.get(region, (0, 0)):
            group.acked[region] = sid
        group.raise_cursor(region, sid)
