"""Stream write operations shared by the command handlers and AOF replay.

Each takes parsed arguments and changes the stream in place; what it returns is the number of
changes it made (Redis's dirty increment). Building the reply and the effect line is the
caller's part (handlers), or not needed at all (replay, which applies effects).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from headwater.keyspace import Database
from headwater.stream.idmp import IdmpState
from headwater.stream.ids import StreamID
from headwater.stream.stream import Stream

#: an entry to append: (ID, field/value list, total length of the fields and values)
Entry = tuple[StreamID, Sequence[bytes], int]
IdmpKey = tuple[bytes, bytes]


class IdmpStats(Protocol):
    """The server statistics IDMP counts into (INFO's ``stream_idmp_*``)."""

    stream_idmp_iids_added: int
    stream_idmp_iids_duplicates: int


class IdmpHolder(Protocol):
    """A stream with IDMP maps: a plain ``Stream`` or a region's ``RegionStream`` (whose
    maps are local to the region)."""

    idmp: IdmpState | None


# -- IDMP: the rules of both stores (plain and region) and of replay --------------------------


def retry_of(state: IdmpState | None, idmp_key: IdmpKey) -> StreamID | None:
    """The entry an XADD IDMP/IDMPAUTO with this (pid, iid) retries, given its stream's
    IDMP maps (``holder.idmp``: the caller reads it typed, not through the protocol): the
    one it added before, while the iid is tracked; None: a new entry."""
    return state.lookup(idmp_key[0], idmp_key[1]) if state is not None else None


def count_retry(holder: IdmpHolder, stats: IdmpStats | None) -> None:
    """A retry adds nothing: it counts as a duplicate (XINFO's ``iids-duplicates``, INFO's
    ``stream_idmp_iids_duplicates``)."""
    state = holder.idmp
    if state is None:
        state = holder.idmp = IdmpState()
    state.duplicates += 1
    if stats is not None:
        stats.stream_idmp_iids_duplicates += 1


def remember_iid(
    holder: IdmpHolder, idmp_key: IdmpKey, sid: StreamID, maxsize: int, stats: IdmpStats | None
) -> None:
    """(pid, iid) -> sid is tracked, within maxsize iids per producer."""
    state = holder.idmp
    if state is None:
        state = holder.idmp = IdmpState()
    state.record(idmp_key[0], idmp_key[1], sid, maxsize)
    if stats is not None:
        stats.stream_idmp_iids_added += 1


def expire_iids(state: IdmpState, now_ms: int, duration_s: int) -> int:
    """The once-a-second cron's rule: iids older than the duration in force are forgotten
    (only by a primary: a replica and a replay follow its effects). How many."""
    return state.expire(now_ms - duration_s * 1000)


def append_entry(
    db: Database,
    key: bytes,
    stream: Stream,
    sid: StreamID,
    pairs: Sequence[bytes],
    size: int,
    max_bytes: int,
    max_entries: int,
) -> int:
    """Append one entry whose ID the caller checked is past ``last_id`` (XADD); ``size`` is
    the total length of pairs. Returns the changes (1)."""
    stream.append(sid, pairs, max_bytes, max_entries, size)
    return _appended(db, key, 1)


def append_entries(
    db: Database, key: bytes, stream: Stream, run: list[Entry], max_bytes: int, max_entries: int
) -> int:
    """``append_entry`` for each of a run of entries (replayed XADDs), in one pass: the same
    nodes (``Stream.extend``), the same signals and count."""
    stream.extend(run, max_bytes, max_entries)
    return _appended(db, key, len(run))


def _appended(db: Database, key: bytes, count: int) -> int:
    """What appending means beyond the stream: WATCHers see the key modified and blocked
    readers are woken; each entry is one change."""
    db.signal_modified(key)
    db.signal_ready(key)
    return count


def idmp_original(
    stream: Stream, idmp_key: IdmpKey, requested: StreamID | None, replaying: bool
) -> StreamID | None:
    """The entry ID an IDMP/IDMPAUTO XADD is a retry of, or None to append it."""
    original = retry_of(stream.idmp, idmp_key)
    if replaying and requested is not None and original != requested:
        if requested <= stream.last_id:
            # The primary answered a retry of an entry this side has, whose iid it no longer
            # tracks (a replica promoted and demoted again, say): learn it again, a retry.
            remember_iid(stream, idmp_key, requested, stream.idmp_maxsize, None)
            return requested
        # The effect carries the ID the primary answered: a later one means the primary
        # appended the entry, its iid having expired there (expiry runs in the cron, which a
        # replay does not; a new ``*`` ID is then always past the old one). Treating it as
        # a retry would lose the entry.
        if stream.idmp is not None:
            stream.idmp.forget(*idmp_key)
        return None
    return original


def idmp_retry(db: Database, key: bytes, stream: Stream, stats: IdmpStats) -> int:
    """A retry: the entry exists already. Nothing is added, trimmed or woken; the key is
    marked modified and the retry counts as a change, so that replicas and replays count it
    too (Redis 8.6.2+). Returns the changes (1)."""
    count_retry(stream, stats)
    db.signal_modified(key)
    return 1


def record_idmp(
    db: Database,
    key: bytes,
    stream: Stream,
    idmp_key: IdmpKey,
    sid: StreamID,
    stats: IdmpStats,
) -> None:
    """Remember (pid, iid) → sid, and the stream for the expiry cron."""
    remember_iid(stream, idmp_key, sid, stream.idmp_maxsize, stats)
    db.idmp_keys.add(key)  # again each time: the cron drops streams it found empty
