"""Hash field expiration (Redis 7.4): deleting due fields, lazily and from the cron.

Every path that deletes a field by expiry goes through ``expire_due``: it deletes the fields
whose deadline is past from the hash (and the hash with its last field), and logs them in
``Keyspace.expired`` as ``(db, key, fields, emptied)``, which the engine propagates as one
``HDEL key field`` per field, as Redis's propagateHashFieldDeletion does: replicas and the
AOF never expire fields by their own clocks.

Not while loading (a replayed line finds its fields as they were when it was logged) and not
on a replica (its primary sends the HDELs; reads hide the due fields meanwhile).
"""

from __future__ import annotations

import heapq

from headwater.keyspace import Database
from headwater.values import Hash


def track_field_ttls(db: Database, key: bytes, value: object) -> None:
    """A hash with field TTLs arrived at key (loaded, restored, renamed): the cron learns
    of its earliest deadline."""
    if isinstance(value, Hash) and value.ttls is not None:
        when = value.ttls.next_deadline()
        if when is not None:
            db.schedule_fields(key, when)


def may_expire(db: Database) -> bool:
    keyspace = db.keyspace
    return not keyspace.loading and not keyspace.replica and not keyspace.expiry_paused


def expire_due(db: Database, key: bytes, h: Hash, limit: int = -1) -> tuple[list[bytes], bool]:
    """Delete the fields of h (at key) that are past their deadline (at most ``limit``);
    returns them and whether the hash went with them. The caller fires the events."""
    ttls = h.ttls
    if ttls is None:
        return [], False
    fields = ttls.pop_due(db.keyspace.now_ms, len(ttls) if limit < 0 else limit)
    if not fields:
        return fields, False
    for field in fields:
        del h[field]
    emptied = not h
    if emptied:
        db.delete(key)
    else:
        db.signal_modified(key)
    db.keyspace.expired.append((db.index, key, fields, emptied))
    return fields, emptied


def active_expire_fields(db: Database, budget: int) -> list[tuple[bytes, bool]]:
    """The cron's part: up to ``budget`` due fields of the database's hashes, earliest
    hash first; returns (key, emptied) per hash touched, for the events."""
    now = db.keyspace.now_ms
    heap = db.field_deadlines
    touched: list[tuple[bytes, bool]] = []
    while heap and heap[0][0] < now and budget > 0:
        _, key = heapq.heappop(heap)
        h = db.data.get(key)
        if type(h) is not Hash or h.ttls is None or db.is_expired(key):
            continue  # stale, or the key's own expiry comes first
        due = h.ttls.next_deadline()
        if due is None:
            continue
        if due < now:
            fields, emptied = expire_due(db, key, h, budget)
            budget -= len(fields)
            touched.append((key, emptied))
            if emptied:
                continue
            due = h.ttls.next_deadline()
        if due is not None:
            heapq.heappush(heap, (due, key))
    if len(heap) > 4096 and len(heap) > 2 * len(db.data):  # (stale entries of deleted keys)
        db.field_deadlines = []
        for key, value in db.data.items():
            track_field_ttls(db, key, value)
    return touched
