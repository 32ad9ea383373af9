"""The Spark side: a Structured Streaming consumer and the reconciliation batch job.

Both read ``rocket-rides-log`` through Headwater's PySpark data source (format ``headwater``:
columns ``stream, id, ms, seq, fields map<string,string>``) and reduce rows with one Spark job,
:func:`summarize`, which adds up each ride once (duplicates of a ride id count once).

Streaming consumer, exactly once
--------------------------------
Spark keeps the source offsets (stream IDs) in its checkpoint and, after a failure, re-runs the
last planned micro-batch with the same batch id and the same ID range. ``foreachBatch`` therefore
upserts idempotently: in one database transaction it adds the batch's rides to the total and
records ``(query_id, batch_id)``; a batch id already recorded for this query is skipped. Rides at
or below the recorded ``last_ride_id`` are skipped as for the plain consumers, so a fresh Spark
checkpoint that starts from the database's position cannot count twice either.

Its ``checkpoints.last_stream_id`` is the *start offset* of its last committed micro-batch (the
entry just before the batch's first): Spark may re-read that batch after a restart, so the
streamer must keep it (MINID keeps the threshold entry itself).

Trimming while the query runs (``failOnDataLoss`` stays on, its default): the connector fails a
micro-batch whose start offset ``s`` lost its successors (first live entry above ``s``'s
successor). Every start offset Spark can plan or replay is at or above the registered one: a
replay starts at the start offset of the last batch Spark logged, which is the registered batch
or a later one (a crash before the database commit leaves the previous batch registered), and a
new batch starts at the end of the last. The streamer trims only below the oldest registered
checkpoint, so the first live entry never passes a start offset and the check never fires; were
it to fire, the query would fail, restart and fail again, and the demo would report it.

Reconciliation (:func:`reconcile`): the archive (everything the streamer trimmed, see
``reconcile.py``) plus one batch read of the stream from the archive's ``upto`` on.

Fault injection raises inside ``foreachBatch`` before the commit; the query dies, and
:meth:`SparkConsumer.run` restarts it from the same checkpoint, as a scheduler would.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from . import db
from .consumers import Applied, commit
from .faults import Faults, InjectedCrash
from .log import STREAM, connect, decode, stream_id_key, xrevrange
from .reconcile import NOTHING_ARCHIVED, Archive, Reconciliation, Summary, compare, summarize_log
from .status import Counters

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

SOURCE_FORMAT = "headwater"
TRIGGER = "1 second"


def build_session(app_name: str = "rocket-rides") -> SparkSession:
    """A small local session: 2 cores, 2 shuffle partitions (the default 200 costs seconds)."""
    from pyspark.sql import SparkSession

    # Spark's Python workers run `python3` from PATH unless told otherwise; they must be this
    # interpreter (the venv), which can import the connector.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master("local[2]")
        .appName(app_name)
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register_source(spark)
    return spark


def register_source(spark: SparkSession) -> None:
    """Make format ``headwater`` known to this session.

    Installing ``headwater[spark]`` registers it already; registering again is harmless and
    covers a source checkout that was never pip-installed.
    """
    from headwater.spark import register

    register(spark)


def read_stream(spark: SparkSession, url: str, stream: str, starting: str) -> DataFrame:
    return (
        spark.readStream.format(SOURCE_FORMAT)
        .option("url", url)
        .option("streams", stream)
        .option("startingOffsets", starting)
        .load()
    )


def read_batch(
    spark: SparkSession, url: str, stream: str, start: str = NOTHING_ARCHIVED
) -> DataFrame:
    """The entries from ``start`` (inclusive) to the stream's last one when the job is planned.

    ``startingOffsets`` is exclusive (the last ID already seen), so it gets ``start``'s
    predecessor; the connector fails the read if an entry at or above ``start`` was trimmed.
    """
    from headwater.spark.offsets import parse_id, predecessor

    after = json.dumps({stream: str(predecessor(parse_id(start)))})
    return (
        spark.read.format(SOURCE_FORMAT)
        .option("url", url)
        .option("streams", stream)
        .option("startingOffsets", after)
        .load()
    )


def summarize(df: DataFrame, after_ride_id: int = 0) -> Summary:
    """Reduce stream rows with one Spark job (a shuffle by ride id, then one row)."""
    from pyspark.sql import functions as F

    rides = df.select(
        F.col("ms"),
        F.col("seq"),
        F.col("fields").getItem("id").cast("long").alias("ride_id"),
        F.col("fields").getItem("distance").cast("decimal(18,2)").alias("distance"),
    )
    per_ride = rides.groupBy("ride_id").agg(
        F.first("distance").alias("distance"),
        F.count(F.lit(1)).alias("copies"),
        F.min(F.struct("ms", "seq")).alias("lo"),
        F.max(F.struct("ms", "seq")).alias("hi"),
    )
    new = F.col("ride_id") > F.lit(after_ride_id)
    row = per_ride.agg(
        F.sum(F.when(new, F.col("distance"))).alias("total"),
        F.max(F.when(new, F.col("ride_id"))).alias("last_ride_id"),
        F.count(F.when(new, F.lit(1))).alias("rides"),
        F.sum("copies").alias("rows"),
        F.count(F.lit(1)).alias("distinct_rides"),
        F.min("lo").alias("lo"),
        F.max("hi").alias("hi"),
    ).collect()[0]
    return _summary(row)


def _summary(row: Any) -> Summary:
    total = row["total"]
    return Summary(
        rows=int(row["rows"] or 0),
        distinct_rides=int(row["distinct_rides"] or 0) if row["rows"] else 0,
        rides=int(row["rides"] or 0),
        total_cents=int(total * 100) if total is not None else 0,
        last_ride_id=None if row["last_ride_id"] is None else int(row["last_ride_id"]),
        first_id=None if row["lo"] is None else f"{row['lo']['ms']}-{row['lo']['seq']}",
        last_id=None if row["hi"] is None else f"{row['hi']['ms']}-{row['hi']['seq']}",
    )


class SparkConsumer:
    """The Structured Streaming consumer; :meth:`run` keeps its query alive until stopped."""

    def __init__(
        self,
        name: str,
        conn: db.Connection,
        spark: SparkSession,
        url: str,
        checkpoint_dir: Path,
        *,
        faults: Faults | None = None,
        counters: Counters | None = None,
        stream: str = STREAM,
    ) -> None:
        self.name = name
        self.conn = conn
        self.spark = spark
        self.url = url
        self.checkpoint_dir = checkpoint_dir
        self.faults = faults or Faults.none()
        self.counters = counters or Counters()
        self.stream = stream
        self.crashed = False  # set by an injected crash inside foreachBatch
        self.r = connect(url)
        db.register_consumer(conn, name)

    def query_id(self) -> str:
        """The query's id, stable across restarts from the same checkpoint (Spark's metadata)."""
        meta = json.loads((self.checkpoint_dir / "metadata").read_text())
        return str(meta["id"])

    def starting_offsets(self) -> str:
        """Where a *new* checkpoint starts: the database's position (a resumed one ignores it)."""
        state = db.consumer_state(self.conn, self.name)
        if state.last_stream_id == "0-0":
            return "earliest"
        return json.dumps({self.stream: state.last_stream_id})

    def process_batch(self, df: DataFrame, batch_id: int) -> None:
        """foreachBatch: add the micro-batch once, with its batch id, in one transaction."""
        before = db.consumer_state(self.conn, self.name)
        query_id = self.query_id()
        if (
            before.query_id == query_id
            and before.last_batch_id is not None
            and batch_id <= before.last_batch_id
        ):
            self.counters.bump("replayed_batches_skipped")
            return
        started = time.monotonic()
        s = summarize(df, before.last_ride_id)
        print(
            f"{self.name}: batch {batch_id}: {s.rows} entries, {s.rides} new rides,"
            f" up to ride {s.last_ride_id} ({time.monotonic() - started:.1f}s)",
            flush=True,
        )
        after = replace(
            before,
            total_cents=before.total_cents + s.total_cents,
            last_ride_id=max(before.last_ride_id, s.last_ride_id or 0),
            last_stream_id=self.replay_floor(s.first_id, before.last_stream_id),
            query_id=query_id,
            last_batch_id=batch_id,
        )
        applied = Applied(after, s.rides, s.duplicates)
        try:
            commit(self.conn, before, applied, self.faults, self.counters)
        except InjectedCrash:
            self.crashed = True
            raise

    def replay_floor(self, first_id: str | None, before: str) -> str:
        """The entry just before this batch's first one: the batch's start offset, from which
        Spark re-reads if it restarts before logging the batch as done. The streamer's MINID
        keeps it, so the connector never mistakes the replay for data loss."""
        if first_id is None:
            return before
        previous = xrevrange(self.r, self.stream, f"({first_id}", "-", 1)
        floor = decode(previous[0][0]) if previous else before
        return max(before, floor, key=stream_id_key)

    def start(self) -> StreamingQuery:
        df = read_stream(self.spark, self.url, self.stream, self.starting_offsets())
        return (
            df.writeStream.foreachBatch(self.process_batch)
            .option("checkpointLocation", str(self.checkpoint_dir))
            .trigger(processingTime=TRIGGER)
            .queryName(self.name.replace("-", "_"))
            .start()
        )

    def warm_up(self) -> None:
        """Run the batch reduction once before streaming: the first Spark job of a session
        pays for JIT, code generation and Python workers (15-25 s on a busy 2-core box), and
        the first micro-batch would otherwise swallow every ride sent meanwhile."""
        started = time.monotonic()
        summarize(read_batch(self.spark, self.url, self.stream), 0)
        print(f"{self.name}: warmed up in {time.monotonic() - started:.1f}s", flush=True)

    def run(self, stop: threading.Event, max_failures: int = 30) -> None:
        """Run the query until ``stop``; an injected crash or a lost server restarts it."""
        failures = 0
        while not stop.is_set():
            self.crashed = False
            try:
                self._run_query(stop)
            except Exception as exc:
                if self.crashed:
                    self.counters.bump("crashes")
                    failures = 0
                    continue
                failures += 1
                self.counters.bump("query_failures")
                if failures > max_failures:
                    raise
                print(f"{self.name}: query failed, restarting: {str(exc)[:300]}", flush=True)
                stop.wait(1.0)

    def _run_query(self, stop: threading.Event) -> None:
        """Start the query (load() fails at once if Headwater is down) and wait for its end."""
        query = self.start()
        self.counters.bump("query_starts")
        while query.isActive and not stop.is_set():
            query.awaitTermination(1)
        query.stop()
        if not stop.is_set():
            raise RuntimeError(f"query stopped by itself: {query.exception()}")


def reconcile(
    spark: SparkSession, url: str, states: list[db.ConsumerState], stream: str = STREAM
) -> Reconciliation:
    """Recompute (total_distance, last_ride_id) from the archive and the stream after it, and
    list who differs."""

    def summarize_retained(archive: Archive) -> Summary:
        return summarize(read_batch(spark, url, stream, archive.upto), archive.last_ride_id)

    r = connect(url)
    try:
        archive, summary = summarize_log(r, stream, summarize_retained)
    finally:
        r.close()
    return compare(summary, states, archive)
