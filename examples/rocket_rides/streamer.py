"""The streamer: moves staged log records from the database to the stream, at least once.

One round (:meth:`Streamer.run_once`), all inside one snapshot transaction:

1. select up to 1,000 staged records in id order;
2. send them in one pipelined batch, each ``XADD … IDMP streamer <staged id> *``;
3. (fault) 10% of the time send the same batch again, as a streamer that lost the reply would;
4. only after Headwater confirmed every XADD, delete exactly those staged records and commit.

A crash anywhere before the commit leaves the records staged, so the next round sends them again;
IDMP makes that re-send return the original entry IDs instead of appending duplicates, and the
consumers' ride-id rule would drop a duplicate anyway. Trimming rides along on the XADDs
(``MINID ~``), computed by :func:`log.trim_threshold` so it never passes a consumer checkpoint.
"""

from __future__ import annotations

from collections.abc import Sequence

import redis

from . import db
from .faults import Faults
from .log import PRODUCER_ID, STREAM, command, ensure_stream, trim_threshold
from .status import Counters

BATCH_SIZE = 1_000
DEFAULT_MAX_LENGTH = 100_000


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
    ) -> None:
        self.conn = conn
        self.r = r
        self.faults = faults or Faults.none()
        self.counters = counters or Counters()
        self.stream = stream
        self.batch_size = batch_size
        self.max_length = max_length
        ensure_stream(r, stream)

    def run_once(self) -> int:
        """Stream one batch; the number of staged records it moved (0: nothing staged)."""
        with self.conn.transaction("snapshot"):
            records = db.staged_batch(self.conn, self.batch_size)
            if not records:
                return 0
            floor = db.oldest_checkpoint(self.conn)
            minid = trim_threshold(self.r, self.stream, floor, self.max_length, len(records))
            self.send(records, minid)
            if self.faults.double_send():
                self.send(records, minid)
                self.counters.bump("double_sent_batches")
                self.counters.bump("resent_records", len(records))
            db.delete_staged(self.conn, [rec.id for rec in records])
        self.counters.bump("batches")
        self.counters.bump("records", len(records))
        return len(records)

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
