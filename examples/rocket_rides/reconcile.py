"""Reconciliation: recompute ``(total_distance, last_ride_id)`` from the stream alone.

The article's safety net for "something went wrong that transactions could not stop": reduce
every ride in the log and compare each consumer's state with the result. The Spark batch job
(``spark_jobs.reconcile``) is the real one; :func:`summarize_records` is its pure-Python twin,
used by the demo's ``--no-spark`` mode and by the unit tests. Both count a ride id once however
many entries carry it, and report how many entries were duplicates.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

import redis

from . import db
from .log import STREAM, RideRecord, parse_entry, stream_id_key, xrange

PAGE = 5_000


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


@dataclass(frozen=True)
class Reconciliation:
    """The stream recomputed from scratch, and the consumers that disagree with it."""

    summary: Summary
    disagreeing: list[str]

    def to_dict(self) -> dict[str, object]:
        s = self.summary
        return {
            "entries": s.rows,
            "rides": s.distinct_rides,
            "duplicates": s.duplicates,
            "total_cents": s.total_cents,
            "last_ride_id": s.last_ride_id or 0,
            "disagreeing": self.disagreeing,
        }

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


def compare(summary: Summary, states: list[db.ConsumerState]) -> Reconciliation:
    expected = (summary.total_cents, summary.last_ride_id or 0)
    wrong = [s.name for s in states if (s.total_cents, s.last_ride_id) != expected]
    return Reconciliation(summary, wrong)


def read_all(r: redis.Redis, stream: str = STREAM) -> Iterable[RideRecord]:
    """Every entry of the stream, in pages of XRANGE (exclusive start after the first page)."""
    start = "-"
    while True:
        page = xrange(r, stream, start, "+", PAGE)
        for entry in page:
            yield parse_entry(entry)
        if len(page) < PAGE:
            return
        start = "(" + parse_entry(page[-1]).stream_id


def reconcile_in_python(
    r: redis.Redis, states: list[db.ConsumerState], stream: str = STREAM
) -> dict[str, object]:
    return compare(summarize_records(read_all(r, stream)), states).to_dict()
