"""Streaming reads and writes in the shared session (issue #7): admission control, availableNow,
data-loss detection, the commit group, and a sink whose batch is replayed after a failure
between the write and the commit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import redis
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming import StreamingQuery, StreamingQueryException

from tests.spark.faults import CommitFailsOnce

pytestmark = pytest.mark.spark


def source(spark: SparkSession, url: str, **options: str) -> DataFrame:
    reader = spark.readStream.format("headwater").option("url", url)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def run_to_end(df: DataFrame, checkpoint: Path, name: str | None = None) -> StreamingQuery:
    """Run with trigger(availableNow): into a memory table ``name``, or (no name) into the
    ``noop`` sink, which unlike the memory sink can restart from a checkpoint."""
    writer = df.writeStream.option("checkpointLocation", str(checkpoint))
    writer = writer.format("memory").queryName(name) if name else writer.format("noop")
    query = writer.trigger(availableNow=True).start()
    query.awaitTermination(180)
    return query


def batch_sizes(query: StreamingQuery) -> list[int]:
    return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]


def fill(
    r: redis.Redis, key: str, count: int, first_ms: int = 1_000_000, step: int = 1
) -> list[str]:
    pipe = r.pipeline(transaction=False)
    for i in range(count):
        pipe.xadd(key, {"n": str(i)}, id=f"{first_ms + i * step}-0")
    pipe.execute()
    return [sid for sid, _ in r.xrange(key)]


def test_max_records_per_batch_shares_rows_fairly_and_mirrors_a_group(
    spark: SparkSession, hw_url: str, r: redis.Redis, checkpoint: Path
) -> None:
    """1000 + 200 entries, 300 per batch: 150/150, then 250/50 (the small stream runs out),
    then 300 and 300 from the big one."""
    ids = fill(r, "capped", 1000)
    small = fill(r, "capped-small", 200, first_ms=1_500_000)
    df = source(
        spark,
        hw_url,
        streams="capped,capped-small",
        maxRecordsPerBatch="300",
        commitGroup="spark-mirror",
    )
    query = run_to_end(df, checkpoint, "capped")
    assert batch_sizes(query) == [300, 300, 300, 300]
    got = spark.sql("select stream, id from capped").collect()
    assert sorted(row.id for row in got if row.stream == "capped") == sorted(ids)
    assert sorted(row.id for row in got if row.stream == "capped-small") == sorted(small)
    # Spark commits a batch's source offsets when it plans the next one, so the group trails
    # the query by one batch (700 of "capped" read by then), with a lag that counts exactly
    # the entries after it.
    [group] = r.xinfo_groups("capped")
    mirrored = (group["name"], group["last-delivered-id"], group["lag"])
    assert mirrored == ("spark-mirror", ids[699], 300)
    assert r.xinfo_groups("capped-small")[0]["lag"] == 0


def test_max_millis_per_batch_cuts_by_id_time(
    spark: SparkSession, hw_url: str, r: redis.Redis, checkpoint: Path
) -> None:
    fill(r, "timed", 400, first_ms=5_000_000, step=10)  # one entry every 10 ms: 4 s of IDs
    df = source(spark, hw_url, streams="timed", maxMillisPerBatch="1000")
    query = run_to_end(df, checkpoint)
    assert batch_sizes(query) == [100, 100, 100, 100]


def test_data_loss_fails_the_query_unless_told_to_skip(
    spark: SparkSession, hw_url: str, r: redis.Redis, checkpoint: Path
) -> None:
    fill(r, "lossy", 100)
    run_to_end(source(spark, hw_url, streams="lossy"), checkpoint)
    fill(r, "lossy", 100, first_ms=2_000_000)  # 100 more, then trim 50 of them unread
    r.xtrim("lossy", minid="2000050-0", approximate=False)
    with pytest.raises((StreamingQueryException, PySparkException), match="possible data loss"):
        run_to_end(source(spark, hw_url, streams="lossy"), checkpoint)
    query = run_to_end(source(spark, hw_url, streams="lossy", failOnDataLoss="false"), checkpoint)
    assert batch_sizes(query) == [50]


def test_starting_offsets_latest_skips_existing_entries(
    spark: SparkSession, hw_url: str, r: redis.Redis, checkpoint: Path
) -> None:
    fill(r, "late", 50)
    df = source(spark, hw_url, streams="late", startingOffsets="latest")
    assert batch_sizes(run_to_end(df, checkpoint)) == []


def test_streams_pattern_finds_new_streams_from_their_start(
    spark: SparkSession, hw_url: str, r: redis.Redis, checkpoint: Path
) -> None:
    """A key created after the query started is read from its first entry; the other keys
    go on from their checkpointed offsets."""
    fill(r, "pat-s:a", 100)
    fill(r, "pat-s:b", 50)
    first = run_to_end(source(spark, hw_url, streamsPattern="pat-s:*"), checkpoint)
    assert sum(batch_sizes(first)) == 150
    fill(r, "pat-s:a", 20, first_ms=5_000_000)
    fill(r, "pat-s:c", 30)
    second = run_to_end(source(spark, hw_url, streamsPattern="pat-s:*"), checkpoint)
    assert sum(batch_sizes(second)) == 50


def test_bad_streaming_options_fail_at_start(
    spark: SparkSession, hw_url: str, checkpoint: Path
) -> None:
    df = source(spark, hw_url, streams="x", endingOffsets="latest")  # fine for a batch read
    with pytest.raises((StreamingQueryException, PySparkException), match="batch reads only"):
        run_to_end(df, checkpoint)


@pytest.mark.parametrize("idempotence", ["position", "none"])
def test_batch_replayed_after_a_failed_commit(
    spark: SparkSession,
    hw_url: str,
    r: redis.Redis,
    checkpoint: Path,
    idempotence: str,
) -> None:
    """Batch 1 is written, its commit fails (a driver crash at the worst moment), the query
    restarts from the checkpoint and writes batch 1 again: IDMP makes that a no-op."""
    src, out = f"replay-src-{idempotence}", f"replay-out-{idempotence}"
    fill(r, src, 900)
    spark.dataSource.register(CommitFailsOnce)

    def start() -> Any:
        df = source(spark, hw_url, streams=src, maxRecordsPerBatch="300")
        return (
            df.writeStream.format(CommitFailsOnce.name())
            .option("url", hw_url)
            .option("stream", out)
            .option("idempotence", idempotence)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )

    with pytest.raises(
        (StreamingQueryException, PySparkException), match="injected driver failure"
    ):
        start().awaitTermination(180)
    assert r.xlen(out) == 600  # batches 0 and 1 written, only batch 0 committed
    start().awaitTermination(180)
    values = sorted(int(fields["n"]) for _, fields in r.xrange(out))
    if idempotence == "position":
        assert values == list(range(900))
    else:
        assert len(values) == 1200 and set(values) == set(range(900))
