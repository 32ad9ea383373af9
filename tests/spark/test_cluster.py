"""The connector over a Redis Cluster of three Headwater primaries (issue #36, point 7): each
partition is addressed to the node that owns its stream, reads and appends follow MOVED and
ASK while slots move, the sink keeps a stream's rows in order and once, and a streaming query
carries on across a reshard between its micro-batches."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
import pytest
import redis
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType
from redis.cluster import RedisCluster

from headwater.cluster.slots import key_slot
from headwater.spark.arrow import DEFAULT_SCHEMA
from headwater.spark.client import Redirect, parse_redirect
from headwater.spark.nodes import Nodes, slot_owners, url_at
from headwater.spark.offsets import MAX_ID, MIN_ID
from headwater.spark.options import parse_read_options, parse_write_options
from headwater.spark.reader import HeadwaterBatchReader, StreamRange, read_range
from headwater.spark.writer import Appender, TaskIdentity
from tests.cluster_helpers import (
    address,
    close_slot,
    create,
    migrate_keys,
    move_slot,
    open_slot,
    owner_of,
    start_node,
)
from tests.helpers import ServerProcess

pytestmark = pytest.mark.spark

ROWS = StructType([StructField("n", StringType())])


@pytest.fixture(scope="module")
def nodes() -> Iterator[list[ServerProcess]]:
    started = [start_node("headwater", "--appendonly", "no", "--save", "") for _ in range(3)]
    try:
        create(started)
        yield started
    finally:
        for node in started:
            node.stop()


@pytest.fixture(scope="module")
def rc(nodes: list[ServerProcess]) -> Iterator[RedisCluster]:
    client = RedisCluster(host="127.0.0.1", port=nodes[0].port, decode_responses=True)
    yield client
    client.close()


def url(node: ServerProcess) -> str:
    return f"redis://127.0.0.1:{node.port}/0"


def slot(key: str) -> int:
    return key_slot(key.encode())


def other(node: ServerProcess, nodes: list[ServerProcess], step: int = 1) -> ServerProcess:
    return nodes[(nodes.index(node) + step) % len(nodes)]


def redirections(nodes: list[ServerProcess]) -> dict[str, int]:
    """MOVED and ASK replies the nodes have sent (INFO errorstats, summed)."""
    total = {"MOVED": 0, "ASK": 0}
    for node in nodes:
        client = redis.Redis(port=node.port)
        stats = client.info("errorstats")
        client.close()
        for code in total:
            total[code] += int(stats.get(f"errorstat_{code}", {}).get("count", 0))
    return total


def numbers(rc: RedisCluster, key: str) -> list[str]:
    return [fields["n"] for _, fields in rc.xrange(key)]


def test_node_urls_keep_credentials_tls_and_database() -> None:
    assert url_at("rediss://u:p%40ss@10.0.0.1:7000/0?ssl_cert_reqs=none", "10.0.0.2:7001") == (
        "rediss://u:p%40ss@10.0.0.2:7001/0?ssl_cert_reqs=none"
    )
    assert url_at("redis://h/0", "[::1]:7002") == "redis://[::1]:7002/0"
    assert Nodes("redis://:secret@[::1]:7005/0", 1).home == "[::1]:7005"
    assert Nodes("redis://example", 1).home == "example:6379"


def test_redirections_and_slot_maps_parse_as_redis_writes_them() -> None:
    assert parse_redirect("MOVED 3999 127.0.0.1:6381") == Redirect(False, 3999, "127.0.0.1:6381")
    assert parse_redirect("ASK 0 h:1") == Redirect(True, 0, "h:1")
    for other_error in ("ERR MOVED", "MOVED x h:1", "WRONGTYPE Operation", "ASK 1 h:1 extra"):
        assert parse_redirect(other_error) is None
    reply = [
        [0, 99, [b"10.0.0.1", 7000, b"id1"], [b"10.0.0.4", 7003, b"id4"]],
        [100, 16383, [b"", 7001, b"id2"]],  # no address announced: the node that answered
    ]
    owners = slot_owners(reply, "10.0.0.9:7000", ["old:1"] * 16384)
    assert owners[0] == owners[99] == "10.0.0.1:7000"
    assert owners[100] == owners[16383] == "10.0.0.9:7001"


def test_partitions_are_addressed_to_the_owning_node(
    nodes: list[ServerProcess], rc: RedisCluster
) -> None:
    keys = [f"plan:{{{i}}}" for i in range(6)]
    for key in keys:
        rc.xadd(key, {"n": "1"})
    owners = {address(owner_of(slot(key), nodes)) for key in keys}
    assert len(owners) > 1, "the keys should spread over the nodes"
    options = parse_read_options(
        {"url": url(nodes[0]), "streamsPattern": "plan:*"}, streaming=False
    )
    parts = HeadwaterBatchReader(options, DEFAULT_SCHEMA).partitions()
    assert sorted(p.stream for p in parts) == keys  # SCAN reached every primary
    for part in parts:
        assert isinstance(part, StreamRange)
        assert part.node == address(owner_of(slot(part.stream), nodes)), part


def test_a_partition_read_follows_moved_then_ask(
    nodes: list[ServerProcess], rc: RedisCluster
) -> None:
    key = "read{moving}"
    pipe = rc.pipeline()
    for n in range(700):
        pipe.xadd(key, {"n": str(n)})
    pipe.execute()
    options = parse_read_options(
        {"url": url(nodes[0]), "streams": key, "pageSize": "100"}, streaming=False
    )
    first = owner_of(slot(key), nodes)
    second, third = other(first, nodes), other(first, nodes, 2)

    def read(node: ServerProcess) -> list[str]:
        part = StreamRange(key, str(MIN_ID), str(MAX_ID), address(node))
        batches = list(read_range(options, DEFAULT_SCHEMA, part))
        return [dict(f)["n"] for b in batches for f in b.column("fields").to_pylist()]

    before = redirections(nodes)
    move_slot(slot(key), second, nodes)
    assert read(first) == [str(n) for n in range(700)]  # planned before the move: MOVED
    open_slot(slot(key), second, third)
    migrate_keys(slot(key), second, third)
    assert read(second) == [str(n) for n in range(700)]  # the key left mid-move: ASK
    close_slot(slot(key), third, nodes)
    after = redirections(nodes)
    assert after["MOVED"] > before["MOVED"] and after["ASK"] > before["ASK"], (before, after)


def test_the_sink_follows_moved_and_ask_keeping_row_order(
    nodes: list[ServerProcess], rc: RedisCluster
) -> None:
    """Rows for one stream keep their order and land once, through a completed move (MOVED)
    and an open one (ASK), with batches in flight to the old owner."""
    key = "sink{moving}"
    options = parse_write_options({"url": url(nodes[0]), "stream": key})
    appender = Appender(options, ROWS, 100, TaskIdentity("cluster-test", 0, 0))
    first = owner_of(slot(key), nodes)
    second, third = other(first, nodes), other(first, nodes, 2)

    def append(start: int) -> None:
        for chunk in range(start, start + 3000, 1000):
            rows = [{"n": str(n)} for n in range(chunk, chunk + 1000)]
            appender.add(pa.RecordBatch.from_pylist(rows))
        appender.finish()

    before = redirections(nodes)
    try:
        append(0)
        move_slot(slot(key), second, nodes)
        append(3000)  # sent to the first owner: MOVED, sent again to the second
        open_slot(slot(key), second, third)
        migrate_keys(slot(key), second, third)
        append(6000)  # the key is on the third node, the slot still the second's: ASK
        close_slot(slot(key), third, nodes)
        append(9000)
    finally:
        appender.close()
    after = redirections(nodes)
    assert after["MOVED"] > before["MOVED"] and after["ASK"] > before["ASK"], (before, after)
    assert numbers(rc, key) == [str(n) for n in range(12000)]
    assert owner_of(slot(key), nodes) is third


def test_a_streaming_copy_carries_on_across_a_reshard(
    spark: SparkSession, nodes: list[ServerProcess], rc: RedisCluster, checkpoint: Path
) -> None:
    """rides:{i} -> copy{rides:{i}} through the exactly-once sink; between two micro-batches the
    slots of half the inputs and half the outputs move to another node."""
    inputs = [f"rides:{{{i}}}" for i in range(6)]
    outputs = [f"copy{{{key}}}" for key in inputs]

    def produce(start: int) -> None:
        pipe = rc.pipeline()
        for key in inputs:
            for n in range(start, start + 200):
                pipe.xadd(key, {"n": f"{key}:{n}"})
        pipe.execute()

    produce(0)
    df = (
        spark.readStream.format("headwater")
        .option("url", url(nodes[0]))
        .option("streamsPattern", "rides:*")
        .load()
        .select(F.concat(F.lit("copy{"), "stream", F.lit("}")).alias("dest"), "fields")
    )
    query = (
        df.writeStream.format("headwater")
        .option("url", url(nodes[1]))
        .option("streamColumn", "dest")
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        query.processAllAvailable()
        before = redirections(nodes)
        for key in inputs[:3] + outputs[3:]:
            move_slot(slot(key), other(owner_of(slot(key), nodes), nodes), nodes)
        produce(200)
        query.processAllAvailable()
        produce(400)
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    assert redirections(nodes)["MOVED"] > before["MOVED"]  # the move was felt
    for source, copy in zip(inputs, outputs, strict=True):
        assert numbers(rc, copy) == numbers(rc, source) == [f"{source}:{n}" for n in range(600)]
