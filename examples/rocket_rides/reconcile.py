"""Reconciliation: recompute ``(total_distance, last_ride_id)`` from the log alone.

The article's safety net for "something went wrong that transactions could not stop": reduce
every ride in the log and compare each consumer's state with the result. The Spark batch job
(``spark_jobs.reconcile``) is the real one; :func:`summarize_records` is its pure-Python twin,
used by the demo's ``--no-spark`` mode and by the unit tests. Both count a ride id once however
many entries carry it, and report how many entries were duplicates.

The archive: reconciling a trimmed stream
-----------------------------------------
The streamer trims the stream (``MINID ~ X``, see ``log.trim_threshold``), so "every ride in the
log" is no longer in the stream. Before it sends a trim with threshold ``X`` it calls
:func:`archive_below`, which folds every entry in ``[upto, X)`` into one hash next to the stream
(``<stream>-archive``: the :class:`Summary` of everything below ``upto``, and ``upto`` itself)
with **one** HSET, so the hash is never half-updated. Then:

* MINID removes only entries below its threshold, and every threshold is at or below ``upto``
  when it is sent, so nothing at or above ``upto`` is ever removed: the log's summary is
  ``combine(archive, summary of the stream from upto on)``, counting in the second part only ride
  ids above the archive's ``last_ride_id`` (ride ids grow along the stream; a smaller one there is
  a duplicate of an archived ride, the consumers' skip rule). Entries below ``upto`` that ``~``
  left in place are not read again.
* A streamer that dies between the HSET and its XADDs leaves archived entries in the stream: they
  are below ``upto``, so nobody counts them twice, and the next archiving starts from ``upto``
  (idempotent: a threshold at or below ``upto`` archives nothing).
* A reconciliation that runs while the streamer works reads the archive, then the stream, then
  the archive's ``upto`` again: if it moved, a trim may have removed what was being read, so it
  reads again (:func:`summarize_log`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass

import redis

from . import db
from .log import STREAM, RideRecord, command, decode, parse_entry, stream_id_key, xrange

PAGE = 5_000
NOTHING_ARCHIVED = "0-0"  # ``upto`` of an empty archive: no entry has an ID below 0-0
STABLE_READ_ATTEMPTS = 10


@dataclass(frozen=True)
class Summary:
    """One reduction of stream entries: the rides above ``after_ride_id``, each counted once."""

    rows: int  # entries read
    distinct_rides: int  # distinct ride ids among them (all, not only the new ones)
    rides: int  # distinct ride ids above after_ride_id
    total_cents: int  # their distances
    last_ride_id: int | None  # the highest of them
    first_id: str | None  # lowest stream ID read
    last_id: str | None  # highest stream ID read

    @property
    def duplicates(self) -> int:
        return self.rows - self.distinct_rides


EMPTY = Summary(0, 0, 0, 0, None, None, None)


def summarize_records(records: Iterable[RideRecord], after_ride_id: int = 0) -> Summary:
    first: str | None = None
    last: str | None = None
    distances: dict[int, int] = {}
    rows = 0
    for rec in records:
        rows += 1
        distances.setdefault(rec.ride_id, rec.cents)
        if first is None or stream_id_key(rec.stream_id) < stream_id_key(first):
            first = rec.stream_id
        if last is None or stream_id_key(rec.stream_id) > stream_id_key(last):
            last = rec.stream_id
    new = {ride: cents for ride, cents in distances.items() if ride > after_ride_id}
    return Summary(
        rows=rows,
        distinct_rides=len(distances),
        rides=len(new),
        total_cents=sum(new.values()),
        last_ride_id=max(new) if new else None,
        first_id=first,
        last_id=last,
    )


def combine(earlier: Summary, later: Summary) -> Summary:
    """The summary of two consecutive parts of the stream, from each part's summary.

    ``later`` must have been reduced with ``after_ride_id = earlier.last_ride_id``: ride ids grow
    along the stream, so its rides at or below that id are duplicates of rides counted in
    ``earlier``, and only its ``rides`` are new distinct ones.
    """
    return Summary(
        rows=earlier.rows + later.rows,
        distinct_rides=earlier.distinct_rides + later.rides,
        rides=earlier.rides + later.rides,
        total_cents=earlier.total_cents + later.total_cents,
        last_ride_id=later.last_ride_id if later.last_ride_id is not None else earlier.last_ride_id,
        first_id=earlier.first_id if earlier.first_id is not None else later.first_id,
        last_id=later.last_id if later.last_id is not None else earlier.last_id,
    )


# -- the archive ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Archive:
    """The summary of every entry below ``upto`` (exclusive), whether still in the stream or not."""

    upto: str
    summary: Summary

    @property
    def last_ride_id(self) -> int:
        return self.summary.last_ride_id or 0


def archive_key(stream: str) -> str:
    return f"{stream}-archive"


def archive_to_fields(archive: Archive) -> dict[str, str]:
    """The hash's fields (None as ""); every field is always written, in one HSET."""
    fields = {"upto": archive.upto}
    for name, value in asdict(archive.summary).items():
        fields[name] = "" if value is None else str(value)
    return fields


def archive_from_fields(fields: Mapping[str, str]) -> Archive:
    if not fields:
        return Archive(NOTHING_ARCHIVED, EMPTY)

    def optional(name: str) -> str | None:
        return fields[name] or None

    last_ride = optional("last_ride_id")
    summary = Summary(
        rows=int(fields["rows"]),
        distinct_rides=int(fields["distinct_rides"]),
        rides=int(fields["rides"]),
        total_cents=int(fields["total_cents"]),
        last_ride_id=None if last_ride is None else int(last_ride),
        first_id=optional("first_id"),
        last_id=optional("last_id"),
    )
    return Archive(fields["upto"], summary)


def read_archive(r: redis.Redis, stream: str = STREAM) -> Archive:
    raw = r.hgetall(archive_key(stream))
    return archive_from_fields({decode(k): decode(v) for k, v in raw.items()})


def archive_below(r: redis.Redis, stream: str, threshold: str) -> Archive:
    """Fold every entry in ``[upto, threshold)`` into the archive, before a trim at ``threshold``.

    Nothing at or above ``upto`` was ever trimmed, so the range is complete. One HSET writes the
    new archive; a threshold at or below ``upto`` changes nothing (already archived). The
    read-modify-write assumes one streamer at a time, as the demo's single streamer worker is.
    """
    archive = read_archive(r, stream)
    if stream_id_key(threshold) <= stream_id_key(archive.upto):
        return archive
    part = summarize_records(
        read_range(r, stream, archive.upto, f"({threshold}"), archive.last_ride_id
    )
    moved = Archive(threshold, combine(archive.summary, part))
    pairs = [item for pair in archive_to_fields(moved).items() for item in pair]
    command(r, "HSET", archive_key(stream), *pairs)  # all fields at once: never half-written
    return moved


# -- reading the log --------------------------------------------------------------------------


def read_range(
    r: redis.Redis, stream: str = STREAM, start: str = "-", end: str = "+"
) -> Iterable[RideRecord]:
    """The entries from ``start`` to ``end`` (XRANGE bounds), in pages of XRANGE."""
    while True:
        page = xrange(r, stream, start, end, PAGE)
        for entry in page:
            yield parse_entry(entry)
        if len(page) < PAGE:
            return
        start = "(" + parse_entry(page[-1]).stream_id


def read_all(r: redis.Redis, stream: str = STREAM) -> Iterable[RideRecord]:
    """Every entry still in the stream (trimmed ones are in the archive only)."""
    return read_range(r, stream)


def summarize_log(
    r: redis.Redis,
    stream: str,
    summarize_retained: Callable[[Archive], Summary],
    attempts: int = STABLE_READ_ATTEMPTS,
) -> tuple[Archive, Summary]:
    """The archive and the summary of the whole log: archive + the stream from ``upto`` on.

    ``summarize_retained(archive)`` reduces the stream from ``archive.upto`` (inclusive) with
    ``after_ride_id = archive.last_ride_id``. If ``upto`` moved meanwhile, a trim may have taken
    entries while they were read: read again.
    """
    for _ in range(attempts):
        archive = read_archive(r, stream)
        retained = summarize_retained(archive)
        if read_archive(r, stream).upto == archive.upto:
            return archive, combine(archive.summary, retained)
    raise RuntimeError(f"the archive of {stream!r} moved during {attempts} reads in a row")


def summarize_retained_in_python(r: redis.Redis, stream: str) -> Callable[[Archive], Summary]:
    def summarize(archive: Archive) -> Summary:
        return summarize_records(read_range(r, stream, archive.upto), archive.last_ride_id)

    return summarize


# -- the verdict ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reconciliation:
    """The log recomputed from scratch, and the consumers that disagree with it."""

    summary: Summary
    disagreeing: list[str]
    archive: Archive

    def to_dict(self) -> dict[str, object]:
        s = self.summary
        return {
            "entries": s.rows,
            "rides": s.distinct_rides,
            "duplicates": s.duplicates,
            "total_cents": s.total_cents,
            "last_ride_id": s.last_ride_id or 0,
            "disagreeing": self.disagreeing,
            "archived_upto": self.archive.upto,
            "archived_entries": self.archive.summary.rows,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


def compare(summary: Summary, states: list[db.ConsumerState], archive: Archive) -> Reconciliation:
    expected = (summary.total_cents, summary.last_ride_id or 0)
    wrong = [s.name for s in states if (s.total_cents, s.last_ride_id) != expected]
    return Reconciliation(summary, wrong, archive)


def reconcile_in_python(
    r: redis.Redis, states: list[db.ConsumerState], stream: str = STREAM
) -> dict[str, object]:
    archive, summary = summarize_log(r, stream, summarize_retained_in_python(r, stream))
    return compare(summary, states, archive).to_dict()
