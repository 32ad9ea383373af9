"""Batch reads and writes through ``format("headwater")`` (issue #7): what Spark reads equals
XRANGE, options fail before the query starts, and a write whose tasks fail mid-partition ends
with every row exactly once under IDMP (and duplicated without it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
import redis
from pyspark.errors import PySparkException
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.utils import AnalysisException

from tests.helpers import free_port

pytestmark = pytest.mark.spark

N_A, N_B = 1500, 400


@pytest.fixture(scope="module")
def streams(r: redis.Redis) -> dict[str, list[tuple[str, dict[str, str]]]]:
    """Two streams with explicit, time-spread IDs (so time slices have something to cut)."""
    pipe = r.pipeline(transaction=False)
    for i in range(N_A):
        pipe.xadd("a", {"n": str(i), "payload": "x" * 20}, id=f"{1_000_000 + i * 10}-{i % 3}")
    for i in range(N_B):
        pipe.xadd("b", {"n": str(i), "flag": "true" if i % 2 else "false"}, id=f"{2_000_000 + i}-0")
    pipe.execute()
    return {key: r.xrange(key) for key in ("a", "b")}


def read(spark: SparkSession, url: str, schema: str | None = None, **options: str) -> DataFrame:
    reader = spark.read.format("headwater").option("url", url)
    if schema is not None:
        reader = reader.schema(schema)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def rows(df: DataFrame) -> list[tuple[Any, ...]]:
    return sorted(tuple(row) for row in df.collect())


def xrange_rows(streams: dict[str, list[tuple[str, dict[str, str]]]], key: str) -> list[Any]:
    return [
        (key, sid, int(sid.split("-")[0]), int(sid.split("-")[1]), fields)
        for sid, fields in streams[key]
    ]


def test_format_is_registered_without_register(
    spark: SparkSession, hw_url: str, streams: Any
) -> None:
    """PySpark found ``pyspark_headwater.DefaultSource`` on the path: no explicit register()."""
    df = read(spark, hw_url, streams="b")
    assert df.columns == ["stream", "id", "ms", "seq", "fields"]
    assert df.schema.simpleString() == (
        "struct<stream:string,id:string,ms:bigint,seq:bigint,fields:map<string,string>>"
    )


def test_batch_read_equals_xrange(spark: SparkSession, hw_url: str, streams: Any) -> None:
    df = read(spark, hw_url, streams="a,b")
    got = sorted((s, i, ms, seq, dict(f)) for s, i, ms, seq, f in df.collect())
    expected = sorted(xrange_rows(streams, "a") + xrange_rows(streams, "b"))
    assert got == expected


def test_min_partitions_slices_by_time_and_reads_the_same(
    spark: SparkSession, hw_url: str, streams: Any
) -> None:
    df = read(spark, hw_url, streams="a,b", minPartitions="6", pageSize="100")
    assert df.rdd.getNumPartitions() == 6
    per_partition = df.rdd.glom().map(len).collect()
    assert all(n > 0 for n in per_partition) and sum(per_partition) == N_A + N_B
    assert rows(df.select("id")) == rows(read(spark, hw_url, streams="a,b").select("id"))


def test_typed_schema_maps_fields_by_name(spark: SparkSession, hw_url: str, streams: Any) -> None:
    schema = "stream string, id string, ms timestamp, seq long, n int, flag boolean, gone double"
    df = read(spark, hw_url, schema, streams="b")
    first = df.orderBy("id").first()
    assert first is not None
    assert (first.n, first.flag, first.gone, first.seq) == (0, False, None, 0)
    assert first.ms.timestamp() == 2000.0
    total = df.groupBy().sum("n").first()
    assert total is not None and total[0] == sum(range(N_B))
    assert df.where("flag").count() == N_B // 2


def test_starting_and_ending_offsets_bound_the_read(
    spark: SparkSession, hw_url: str, streams: Any
) -> None:
    ids_a = [sid for sid, _ in streams["a"]]
    df = read(
        spark,
        hw_url,
        streams="a",
        startingOffsets=f'{{"a": "{ids_a[9]}"}}',  # exclusive: the last ID already seen
        endingOffsets=f'{{"a": "{ids_a[19]}"}}',  # inclusive
    )
    assert [row.id for row in df.orderBy("ms", "seq").collect()] == ids_a[10:20]
    latest = read(spark, hw_url, streams="a", startingOffsets="latest")
    assert latest.count() == 0


def test_starting_timestamp_keeps_entries_at_or_after_it(
    spark: SparkSession, hw_url: str, streams: Any
) -> None:
    df = read(spark, hw_url, streams="a", startingTimestamp=str(1_000_000 + 100 * 10))
    assert df.count() == N_A - 100
    assert read(spark, hw_url, streams="missing-key").count() == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"streams": "a", "maxRecordsPerBatc": "10"}, "unknown option"),
        ({"streams": "a", "startingOffsets": '{"a": 1-0}'}, "not valid JSON"),
        ({"streams": "a", "minPartitions": "many"}, "must be an integer"),
        ({}, "'streams' .* or 'streamsPattern' is required"),
        ({"streams": "a", "url": "http://x"}, "redis://"),
    ],
)
def test_bad_options_fail_at_load(
    spark: SparkSession, hw_url: str, options: dict[str, str], message: str
) -> None:
    options = dict(options)
    url = options.pop("url", hw_url)
    with pytest.raises((AnalysisException, PySparkException), match=message):
        read(spark, url, **options)


def test_unreachable_server_fails_at_load_quickly(spark: SparkSession) -> None:
    url = f"redis://127.0.0.1:{free_port()}/0"
    with pytest.raises((AnalysisException, PySparkException), match="cannot reach"):
        read(spark, url, streams="a", connectTimeout="1")


def test_bad_option_with_user_schema_fails_before_tasks(spark: SparkSession, hw_url: str) -> None:
    with pytest.raises((AnalysisException, PySparkException), match="must be 'true' or 'false'"):
        read(spark, hw_url, "id string", streams="a", failOnDataLoss="maybe").collect()


def test_streams_pattern_reads_every_matching_stream(
    spark: SparkSession, hw_url: str, r: redis.Redis
) -> None:
    """``streamsPattern`` reads the streams whose key matches (SCAN MATCH … TYPE stream):
    not other keys, not keys of other types."""
    for key, n in (("pat:a", 30), ("pat:b", 20), ("other:c", 5)):
        for i in range(n):
            r.xadd(key, {"n": str(i)})
    r.set("pat:not-a-stream", "x")
    df = read(spark, hw_url, streamsPattern="pat:*")
    got = sorted((row.stream, row.id) for row in df.collect())
    want = sorted((key, sid) for key in ("pat:a", "pat:b") for sid, _ in r.xrange(key))
    assert got == want
    both = read(spark, hw_url, streams="other:c", streamsPattern="pat:?")
    assert both.count() == 55


# -- writes --------------------------------------------------------------------------------


def test_batch_write_round_trip(spark: SparkSession, hw_url: str, r: redis.Redis) -> None:
    df = spark.range(300).selectExpr(
        "id as n", "cast(id % 2 = 0 as boolean) as even", "id * 0.5 as half", "null as gone"
    )
    df.write.format("headwater").mode("append").option("url", hw_url).save("written")
    entries = r.xrange("written")
    assert len(entries) == 300
    assert sorted(int(f["n"]) for _, f in entries) == list(range(300))
    assert {"n": "3", "even": "false", "half": "1.5"} in [f for _, f in entries]
    back = read(spark, hw_url, "n long, half double, even boolean", streams="written")
    assert back.groupBy().sum("n").first()[0] == sum(range(300))  # type: ignore[index]


def test_stream_column_routes_rows(spark: SparkSession, hw_url: str, r: redis.Redis) -> None:
    df = spark.range(100).selectExpr("concat('route-', id % 3) as dest", "id as n")
    df.write.format("headwater").mode("append").option("url", hw_url).option(
        "streamColumn", "dest"
    ).save()
    assert [r.xlen(f"route-{i}") for i in range(3)] == [34, 33, 33]
    assert set(r.xrange("route-0")[0][1]) == {"n"}  # the routing column is not a field


def fail_first_attempt(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Pass rows through, but die after 300 rows on a task's first attempt: the rows already
    handed on have been appended by then (the writer flushes per Arrow batch)."""
    import time

    from pyspark import TaskContext

    ctx = TaskContext.get()
    seen = 0
    for batch in batches:
        for start in range(0, batch.num_rows, 100):
            piece = batch.slice(start, 100)
            yield piece
            seen += piece.num_rows
            if ctx is not None and ctx.attemptNumber() == 0 and seen >= 300:
                time.sleep(1.0)  # let the writer flush what it has
                raise RuntimeError("injected task failure")


@pytest.mark.parametrize("idempotence", ["position", "none"])
def test_tasks_failing_mid_partition(
    spark: SparkSession, hw_url: str, r: redis.Redis, idempotence: str
) -> None:
    """Every write task fails once after appending part of its partition and is retried
    (master local[2,4]): with IDMP the retry's rows dedupe, with plain XADD they repeat."""
    key = f"mid-{idempotence}"
    # Spark regroups the writer's input into Arrow batches (10,000 rows by default) and sends
    # them through a 64 KB socket buffer: 100-row batches of 1 KB rows reach the writer at
    # once instead of at the end of the task.
    df = spark.range(0, 1000, numPartitions=2).selectExpr("id as n", "repeat('x', 1000) as pad")
    df = df.mapInArrow(fail_first_attempt, "n long, pad string")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "100")
    try:
        df.write.format("headwater").mode("append").option("url", hw_url).option(
            "stream", key
        ).option("idempotence", idempotence).save()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
    values = [int(f["n"]) for _, f in r.xrange(key)]
    assert set(values) == set(range(1000))
    duplicates_prevented = r.xinfo_stream(key)["iids-duplicates"]
    if idempotence == "position":
        assert len(values) == 1000
        assert duplicates_prevented >= 200  # the retries re-sent rows IDMP had already seen
    else:
        assert len(values) >= 1000 + 200  # the rows appended before each failure, twice
