"""The connector against a real ``redis-server`` (issue #7: "works against any Redis"): Debian
ships Redis 7.0, which has streams but not XADD IDMP (Redis 8.6). Reads, batch and streaming,
equal XRANGE there too; a plain writer (``idempotence=none``) appends; an IDMP writer is refused
before any task runs, with a message that says why."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from tests.helpers import ServerProcess, redis_available, start_redis

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(not redis_available(), reason="redis-server is not installed"),
]

N = 1200


@pytest.fixture(scope="module")
def real() -> Iterator[ServerProcess]:
    server = start_redis()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def url(real: ServerProcess) -> str:
    return f"redis://127.0.0.1:{real.port}/0"


@pytest.fixture(scope="module")
def rr(real: ServerProcess) -> Iterator[redis.Redis]:
    client = redis.Redis(port=real.port, decode_responses=True)
    pipe = client.pipeline(transaction=False)
    for i in range(N):
        pipe.xadd("src", {"n": str(i), "pad": "y" * (i % 7)})
    pipe.execute()
    yield client
    client.close()


def test_batch_read_equals_xrange(spark: SparkSession, url: str, rr: redis.Redis) -> None:
    df = spark.read.format("headwater").option("url", url).option("streams", "src")
    got = sorted((row.id, dict(row.fields)) for row in df.load().collect())
    assert got == sorted(rr.xrange("src"))


def test_streaming_read_gets_every_entry_once(
    spark: SparkSession, url: str, rr: redis.Redis, checkpoint: Path
) -> None:
    df = (
        spark.readStream.format("headwater")
        .option("url", url)
        .option("streams", "src")
        .option("maxRecordsPerBatch", "500")
        .load()
    )
    query = (
        df.writeStream.format("memory")
        .queryName("real_redis_stream")
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(180)
    ids = [row.id for row in spark.sql("select id from real_redis_stream").collect()]
    assert sorted(ids) == sorted(sid for sid, _ in rr.xrange("src"))
    assert [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]] == [500, 500, 200]


def test_plain_writer_appends_and_idmp_writer_is_refused(
    spark: SparkSession, url: str, rr: redis.Redis
) -> None:
    df = spark.range(100).selectExpr("id as n")
    writer = df.write.format("headwater").mode("append").option("url", url)
    writer.option("idempotence", "none").save("plain")
    assert sorted(int(f["n"]) for _, f in rr.xrange("plain")) == list(range(100))
    with pytest.raises(PySparkException, match=r"\(XADD IDMP\) need Redis 8\.6\+"):
        writer.option("idempotence", "position").save("idmp")
    assert not rr.exists("idmp")
