"""The streamer: moves staged log records from the database to the stream, at least once.

One round (:meth:`Streamer.run_once`), all inside one snapshot transaction:

1. select up to 1,000 staged records in id order;
2. send them in one pipelined batch, each ``XADD … IDMP streamer <staged id> *``;
3. (fault) 10% of the time send the same batch again, as a streamer that lost the reply would;
4. only after Headwater confirmed every XADD, delete exactly those staged records and commit.

A crash anywhere before the commit leaves the records staged, so the next round sends them again;
IDMP makes that re-send return the original entry IDs instead of appending duplicates, and the
consumers' ride-id rule would drop a duplicate anyway.

Trimming rides along on the XADDs (``MINID ~ X``), with ``X`` from :func:`log.trim_threshold`:
the ``MAXLEN ~ max_length`` target, but never past the oldest consumer checkpoint. Before the
XADDs carry ``X``, :func:`reconcile.archive_below` folds every entry below ``X`` into the archive
(one HSET), so the reconciliation still counts what the trim removes; a crash between the HSET
and the XADDs is harmless (see ``reconcile.py``). A round that finds nothing staged trims with
``XTRIM`` by the same rules (at most every ``idle_trim_every`` seconds): trimming that only rode on
XADDs would stop with the last ride, wherever the slowest consumer was then.

After every trim the streamer checks that the stream's first entry is still at or below the
checkpoint it trimmed for (:func:`log.kept_checkpoint`) and counts ``trims`` and
``trims_past_checkpoint``; the demo fails if the latter is ever non-zero.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import redis

from . import db
from .faults import Faults
from .log import (
    PRODUCER_ID,
    STREAM,
    command,
    ensure_stream,
    kept_checkpoint,
    stream_info,
    trim_threshold,
)
from .reconcile import archive_below
from .status import Counters

BATCH_SIZE = 1_000
DEFAULT_MAX_LENGTH = 100_000
IDLE_TRIM_EVERY_S = 1.0


class Streamer:
    """Drains ``staged_log_records`` into the stream; one instance per process."""

    def __init__(
        self,
        conn: db.Connection,
        r: redis.Redis,
        *,
        faults: Faults | None = None,
        counters: Counters | None = None,
        stream: str = STREAM,
        batch_size: int = BATCH_SIZE,
        max_length: int = DEFAULT_MAX_LENGTH,
        idle_trim_every: float = IDLE_TRIM_EVERY_S,
    ) -> None:
        self.conn = conn
        self.r = r
        self.faults = faults or Faults.none()
        self.counters = counters or Counters()
        self.stream = stream
        self.batch_size = batch_size
        self.max_length = max_length
        self.idle_trim_every = idle_trim_every
        self.next_idle_trim = 0.0  # time.monotonic() of the next idle trim
        ensure_stream(r, stream)

    def run_once(self) -> int:
        """Stream one batch; the number of staged records it moved (0: nothing staged, and then
        perhaps an idle trim)."""
        moved = self.stream_batch()
        if moved == 0:
            self.trim_when_idle()
        return moved

    def stream_batch(self) -> int:
        with self.conn.transaction("snapshot"):
            records = db.staged_batch(self.conn, self.batch_size)
            if not records:
                return 0
            floor = db.oldest_checkpoint(self.conn)
            minid = self.archive_for_trim(floor, len(records))
            self.send(records, minid)
            if self.faults.double_send():
                self.send(records, minid)
                self.counters.bump("double_sent_batches")
                self.counters.bump("resent_records", len(records))
            db.delete_staged(self.conn, [rec.id for rec in records])
        self.counters.bump("batches")
        self.counters.bump("records", len(records))
        self.check_trim(floor, minid)
        return len(records)

    def trim_when_idle(self) -> None:
        now = time.monotonic()
        if now < self.next_idle_trim:
            return
        self.next_idle_trim = now + self.idle_trim_every
        floor = db.oldest_checkpoint(self.conn)
        minid = self.archive_for_trim(floor, 0)
        if minid is not None:
            command(self.r, "XTRIM", self.stream, "MINID", "~", minid)
            self.check_trim(floor, minid)
        self.counters.bump("idle_trim_rounds")  # the demo waits for one after the catch-up

    def archive_for_trim(self, floor: str | None, adding: int) -> str | None:
        """This round's MINID (None: no trim), with every entry below it archived first."""
        minid = trim_threshold(self.r, self.stream, floor, self.max_length, adding)
        if minid is not None:
            archive_below(self.r, self.stream, minid)
        return minid

    def check_trim(self, floor: str | None, minid: str | None) -> None:
        """Count the trim, and whether it passed the checkpoint it was bounded by.

        Checkpoints only move forward, so one at or above ``floor`` now was kept as well.
        """
        if minid is None or floor is None:
            return
        info = stream_info(self.r, self.stream)
        self.counters.bump("trims")
        if not kept_checkpoint(floor, info.first_id, info.entries_added - info.length):
            self.counters.bump("trims_past_checkpoint")

    def send(self, records: Sequence[db.StagedRecord], minid: str | None) -> list[str]:
        """One pipelined batch of idempotent XADDs; raises unless every one succeeded."""
        pipe = self.r.pipeline(transaction=False)
        for rec in records:
            command(pipe, *self.xadd_args(rec, minid))
        return [reply.decode() for reply in pipe.execute(raise_on_error=True)]

    def xadd_args(self, rec: db.StagedRecord, minid: str | None) -> list[str | int]:
        args: list[str | int] = ["XADD", self.stream, "IDMP", PRODUCER_ID, rec.id]
        if minid is not None:
            args += ["MINID", "~", minid]
        args += ["*", "action", rec.action, "object", rec.object]
        for field, value in rec.data.items():
            args += [field, str(value)]
        return args
