"""Consumers that keep a running ``total_distance`` from the stream, exactly once.

Both kinds follow the article's rules:

* read a batch after the checkpoint, add up the rides, and write the new total *and* the new
  checkpoint in one database transaction, so a crash before the commit changes neither and the
  batch is simply read again (at-least-once delivery, exactly-once effect);
* skip every ride id at or below the last consumed one: records arrive in ride-id order except
  for a re-sent batch, so this drops duplicates even if IDMP had not already stopped them.

:class:`PlainConsumer` tracks its own position (``XRANGE (<checkpoint> + COUNT n``).
:class:`GroupReader` lets Headwater track it: ``XREADGROUP … >`` delivers, ``XACK`` after the
commit acknowledges, and a restarted reader (a new consumer name, as a new process would have)
first takes over what its dead predecessors left pending with ``XAUTOCLAIM``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import redis

from . import db
from .faults import Faults
from .log import STREAM, RideRecord, decode, parse_entry, stream_id_key, xrange
from .status import Counters

BATCH_SIZE = 500
GROUP = "rocket-rides-readers"


@dataclass(frozen=True)
class Applied:
    """The outcome of adding a batch to a state: the new state and what was skipped."""

    state: db.ConsumerState
    consumed: int
    skipped: int


def apply_records(state: db.ConsumerState, records: Sequence[RideRecord]) -> Applied:
    """Add the rides not yet counted; the checkpoint moves past every record read.

    The checkpoint advances even over skipped duplicates (the article's loop did not, so a
    batch made only of duplicates would be read forever).
    """
    total, last_ride, last_id = state.total_cents, state.last_ride_id, state.last_stream_id
    consumed = skipped = 0
    for rec in records:
        if stream_id_key(rec.stream_id) > stream_id_key(last_id):
            last_id = rec.stream_id
        if rec.ride_id <= last_ride:
            skipped += 1
            continue
        total += rec.cents
        last_ride = rec.ride_id
        consumed += 1
    after = replace(state, total_cents=total, last_ride_id=last_ride, last_stream_id=last_id)
    return Applied(after, consumed, skipped)


class PlainConsumer:
    """Reads by XRANGE from its own checkpoint; one instance per consumer name at a time."""

    def __init__(
        self,
        name: str,
        conn: db.Connection,
        r: redis.Redis,
        *,
        faults: Faults | None = None,
        counters: Counters | None = None,
        stream: str = STREAM,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        self.name = name
        self.conn = conn
        self.r = r
        self.faults = faults or Faults.none()
        self.counters = counters or Counters()
        self.stream = stream
        self.batch_size = batch_size
        db.register_consumer(conn, name)

    def run_once(self) -> int:
        """Consume one batch; the number of records read (0: caught up)."""
        before = db.consumer_state(self.conn, self.name)
        entries = xrange(self.r, self.stream, f"({before.last_stream_id}", "+", self.batch_size)
        if not entries:
            return 0
        applied = apply_records(before, [parse_entry(e) for e in entries])
        commit(self.conn, before, applied, self.faults, self.counters)
        return len(entries)


def commit(
    conn: db.Connection,
    before: db.ConsumerState,
    applied: Applied,
    faults: Faults,
    counters: Counters,
) -> None:
    """State and checkpoint in one transaction, with the injected crash just before COMMIT."""
    with conn.transaction("write"):
        db.save_progress(conn, before, applied.state)
        faults.crash_point("after processing a batch, before committing it")
    counters.bump("batches")
    counters.bump("consumed", applied.consumed)
    if applied.skipped:
        counters.bump("skipped_duplicates", applied.skipped)


class GroupReader:
    """Reads through a consumer group; restarted incarnations take over pending entries."""

    def __init__(
        self,
        name: str,
        conn: db.Connection,
        r: redis.Redis,
        *,
        incarnation: int = 0,
        faults: Faults | None = None,
        counters: Counters | None = None,
        stream: str = STREAM,
        group: str = GROUP,
        batch_size: int = BATCH_SIZE,
    ) -> None:
        self.name = name
        self.conn = conn
        self.r = r
        self.faults = faults or Faults.none()
        self.counters = counters or Counters()
        self.stream = stream
        self.group = group
        self.batch_size = batch_size
        self.member = f"{name}-{incarnation}"
        self.claim_cursor: str | None = "0-0"  # None once the predecessors' entries are taken
        db.register_consumer(conn, name)
        self._create_group()

    def _create_group(self) -> None:
        try:
            self.r.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def run_once(self) -> int:
        """Consume one batch: orphans first (in ID order), then new entries."""
        entries: list[Any] = []
        if self.claim_cursor is not None:
            entries, deleted = self._claim()
            if deleted:
                self.r.xack(self.stream, self.group, *deleted)  # trimmed: consumed long ago
        if self.claim_cursor is None and not entries:
            entries = self._read_new()
        if not entries:
            return 0
        before = db.consumer_state(self.conn, self.name)
        applied = apply_records(before, [parse_entry(e) for e in entries])
        commit(self.conn, before, applied, self.faults, self.counters)
        self.r.xack(self.stream, self.group, *[decode(e[0]) for e in entries])
        return len(entries)

    def _claim(self) -> tuple[list[Any], list[str]]:
        """XAUTOCLAIM every pending entry (min idle 0: predecessors are known dead).

        Taking them all before reading ``>`` keeps ride ids in order, which the skip rule needs.
        """
        assert self.claim_cursor is not None
        reply = self.r.xautoclaim(
            self.stream, self.group, self.member, 0, self.claim_cursor, count=self.batch_size
        )
        cursor, entries = decode(reply[0]), list(reply[1])
        deleted = [decode(i) for i in reply[2]] if len(reply) > 2 else []
        if entries:
            self.counters.bump("claimed", len(entries))
        if cursor == "0-0" and not entries:
            self.claim_cursor = None
            self._forget_dead_members()
        else:
            self.claim_cursor = cursor
        return entries, deleted

    def _read_new(self) -> list[Any]:
        reply = self.r.xreadgroup(
            self.group, self.member, {self.stream: ">"}, count=self.batch_size
        )
        if not reply:
            return []
        if isinstance(reply, dict):  # RESP3
            return list(reply[self.stream.encode()][0])
        return list(reply[0][1])

    def _forget_dead_members(self) -> None:
        """XGROUP DELCONSUMER the predecessors once nothing of theirs is pending."""
        for member in self.r.xinfo_consumers(self.stream, self.group):
            name = decode(member["name"])
            if name != self.member and int(member["pending"]) == 0:
                self.r.xgroup_delconsumer(self.stream, self.group, name)
