"""Connector logic without a Spark session: offsets, options, planning, data-loss rules,
producer ids, Arrow shaping, and the writer's retry semantics against a live server.

Issue #7. These run in a second each; the Spark-driven behaviour is in the other modules."""

from __future__ import annotations

import itertools

import pyarrow as pa
import pytest
import redis
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import (
    BooleanType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from headwater.spark.arrow import (
    DEFAULT_SCHEMA,
    PageShaper,
    SchemaError,
    cast_strings,
    check_schema,
    field_values,
)
from headwater.spark.client import RawPipeline, StreamState, open_client
from headwater.spark.offsets import (
    MAX_ID,
    MIN_ID,
    UINT64_MAX,
    OffsetError,
    StreamId,
    checkpoint_offsets,
    last_id_before_ms,
    parse_id,
    predecessor,
    successor,
)
from headwater.spark.options import OptionError, parse_read_options, parse_write_options
from headwater.spark.pages import columns_of, page_of
from headwater.spark.planning import plan_slices, share_budget, time_slices
from headwater.spark.reader import data_loss, tighten
from headwater.spark.writer import (
    Appender,
    HeadwaterBatchWriter,
    TaskIdentity,
    column_producer,
    position_producer,
)

ids = st.builds(StreamId, st.integers(0, 2**45), st.integers(0, UINT64_MAX))


# -- offsets ---------------------------------------------------------------------------------


def test_parse_id_accepts_ms_seq_and_bare_ms() -> None:
    assert parse_id("1700000000000-5") == StreamId(1700000000000, 5)
    assert parse_id("42") == StreamId(42, 0)
    assert str(StreamId(7, 9)) == "7-9"


@pytest.mark.parametrize("text", ["", "-1", "1-", "a-1", "1-b", "1--2", "+1", f"{2**64}-0", "1-2 "])
def test_parse_id_rejects_malformed(text: str) -> None:
    with pytest.raises(OffsetError, match="invalid"):
        parse_id(text)


@given(ids)
def test_successor_and_predecessor_are_inverse(sid: StreamId) -> None:
    assert successor(sid) > sid or sid == MAX_ID
    assert predecessor(successor(sid)) == sid


def test_predecessor_of_zero_and_time_bound() -> None:
    assert predecessor(MIN_ID) == MIN_ID
    assert last_id_before_ms(1000) == StreamId(999, UINT64_MAX)
    assert last_id_before_ms(0) == MIN_ID


def test_checkpoint_offsets_start_new_streams_at_the_beginning() -> None:
    assert checkpoint_offsets({"a": "1-2", "gone": "5-5"}, ("a", "b")) == {
        "a": StreamId(1, 2),
        "b": MIN_ID,
    }
    with pytest.raises(OffsetError, match="not a stream ID map"):
        checkpoint_offsets({"a": 12}, ("a",))
    with pytest.raises(OffsetError, match="invalid checkpointed offset"):
        checkpoint_offsets({"a": "1-x"}, ("a",))


# -- options ---------------------------------------------------------------------------------


def read_opts(streaming: bool = True, **options: str) -> object:
    return parse_read_options({"streams": "a,b", **options}, streaming=streaming)


def test_read_options_defaults_and_case_insensitive_names() -> None:
    opts = parse_read_options(
        {"STREAMS": " a , b ", "MaxRecordsPerBatch": "10", "minpartitions": "3"}, streaming=True
    )
    assert opts.streams == ("a", "b")
    assert opts.max_records == 10 and opts.min_partitions == 3
    assert opts.fail_on_data_loss and opts.commit_group is None
    assert {s.kind for s in opts.starting.values()} == {"earliest"}


def test_starting_offsets_json_and_timestamp() -> None:
    opts = parse_read_options(
        {"streams": "a,b", "startingOffsets": '{"a": "5-1", "b": "latest"}'}, streaming=True
    )
    assert opts.starting["a"].after == StreamId(5, 1) and opts.starting["b"].kind == "latest"
    opts = parse_read_options({"streams": "a", "startingTimestamp": "1000"}, streaming=True)
    assert opts.starting["a"].after == StreamId(999, UINT64_MAX)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"streams": "a", "maxRecordsPerBatc": "5"}, "unknown option"),
        ({}, "'streams' .* or 'streamsPattern' is required"),
        ({"streamsPattern": "p:*", "startingOffsets": '{"p:a": "1-0"}'}, "names keys"),
        ({"streams": "a", "streamsPattern": " "}, "must not be empty"),
        ({"streams": "a,,b"}, "empty key"),
        ({"streams": "a,a"}, "twice"),
        ({"streams": "a", "startingOffsets": "{nope"}, "not valid JSON"),
        ({"streams": "a", "startingOffsets": "[1]"}, "JSON object"),
        ({"streams": "a", "startingOffsets": '{"b": "1-0"}'}, "not in 'streams'"),
        ({"streams": "a,b", "startingOffsets": '{"a": "1-0"}'}, "no offset for streams"),
        ({"streams": "a", "startingOffsets": '{"a": 5}'}, "must be a string"),
        ({"streams": "a", "startingOffsets": '{"a": "x-1"}'}, "invalid offset"),
        ({"streams": "a", "startingOffsets": "latest", "startingTimestamp": "5"}, "not both"),
        ({"streams": "a", "maxRecordsPerBatch": "ten"}, "must be an integer"),
        ({"streams": "a", "maxRecordsPerBatch": "0"}, "must be >= 1"),
        ({"streams": "a", "minPartitions": "-2"}, "between 1 and"),
        ({"streams": "a", "failOnDataLoss": "yes"}, "'true' or 'false'"),
        ({"streams": "a", "connectTimeout": "0"}, "must be > 0"),
        ({"streams": "a", "endingOffsets": "latest"}, "batch reads only"),
        ({"streams": "a", "commitGroup": " "}, "must not be empty"),
    ],
)
def test_bad_stream_read_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_read_options(options, streaming=True)


def test_streams_pattern_alone_or_with_keys() -> None:
    opts = parse_read_options({"streamsPattern": "rides:*"}, streaming=True)
    assert (opts.streams, opts.pattern) == ((), "rides:*")
    assert opts.start_of("rides:eu").kind == "earliest"
    opts = parse_read_options(
        {"streams": "a", "streamsPattern": "p:*", "startingOffsets": "latest"}, streaming=True
    )
    assert opts.streams == ("a",)
    assert opts.start_of("a").kind == opts.start_of("p:found").kind == "latest"
    opts = parse_read_options({"streamsPattern": "p:*", "startingTimestamp": "7"}, streaming=True)
    assert opts.start_of("p:x").after == StreamId(6, UINT64_MAX)
    with pytest.raises(OptionError, match="'endingOffsets' names keys"):
        parse_read_options({"streamsPattern": "p:*", "endingOffsets": "{}"}, streaming=False)


def test_batch_reads_refuse_streaming_options() -> None:
    with pytest.raises(OptionError, match="streaming reads only"):
        parse_read_options({"streams": "a", "maxRecordsPerBatch": "5"}, streaming=False)
    with pytest.raises(OptionError, match="cannot be 'earliest'"):
        parse_read_options({"streams": "a", "endingOffsets": "earliest"}, streaming=False)
    opts = parse_read_options({"path": "a", "endingOffsets": '{"a": "9-9"}'}, streaming=False)
    assert opts.streams == ("a",) and opts.ending == {"a": StreamId(9, 9)}


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "exactly one of option 'stream'"),
        ({"stream": "a", "streamColumn": "k"}, "exactly one"),
        ({"stream": "a", "path": "b"}, "not both"),
        ({"stream": "a", "idempotence": "sometimes"}, "'position', 'column:<name>' or 'none'"),
        ({"stream": "a", "idempotence": "column:"}, "column:<name>"),
        ({"stream": "a", "idmpMaxsize": "20000"}, "between 1 and 10000"),
        ({"streamColumn": "k", "idmpDuration": "50"}, "need a fixed 'stream'"),
        ({"stream": "a", "streams": "b"}, "unknown option"),
    ],
)
def test_bad_write_options(options: dict[str, str], message: str) -> None:
    with pytest.raises(OptionError, match=message):
        parse_write_options(options)


def test_write_options_modes() -> None:
    assert parse_write_options({"stream": "out"}).idempotence == "position"
    opts = parse_write_options({"streamColumn": "dest", "idempotence": "Column:ride_id"})
    assert (opts.idempotence, opts.key_column, opts.sink) == ("column", "ride_id", "@dest")


# -- planning --------------------------------------------------------------------------------


def test_time_slices_cover_the_range_without_overlap() -> None:
    after, until = StreamId(1000, 3), StreamId(2000, 7)
    slices = time_slices(after, until, 4)
    assert slices[0][0] == after and slices[-1][1] == until
    assert all(lo < hi for lo, hi in slices)
    assert all(a[1] == b[0] for a, b in itertools.pairwise(slices))
    assert [hi.ms for _, hi in slices[:-1]] == [1250, 1500, 1750]


@given(ids, ids, st.integers(1, 20))
def test_time_slices_are_contiguous_and_deterministic(a: StreamId, b: StreamId, k: int) -> None:
    after, until = min(a, b), max(a, b)
    slices = time_slices(after, until, k)
    assert slices == time_slices(after, until, k)
    if after == until:
        assert slices == []
        return
    assert 1 <= len(slices) <= k
    assert slices[0][0] == after and slices[-1][1] == until
    assert all(lo < hi for lo, hi in slices)
    assert all(x[1] == y[0] for x, y in itertools.pairwise(slices))


def test_one_millisecond_is_not_split() -> None:
    assert time_slices(StreamId(5, 0), StreamId(5, 99), 8) == [(StreamId(5, 0), StreamId(5, 99))]


def test_plan_slices_skips_idle_streams_and_shares_min_partitions() -> None:
    start = {"a": StreamId(0, 0), "b": StreamId(10, 0), "c": StreamId(0, 0)}
    end = {"a": StreamId(100, 0), "b": StreamId(10, 0), "c": StreamId(100, 0)}
    slices = plan_slices(start, end, 4)
    assert [s.stream for s in slices] == ["a", "a", "c", "c"]
    assert plan_slices(start, start, 4) == []


def test_share_budget_is_fair_and_exact() -> None:
    assert share_budget({"a": 100, "b": 100}, 50) == {"a": 25, "b": 25}
    assert share_budget({"a": 3, "b": 100, "c": 0}, 50) == {"a": 3, "b": 47, "c": 0}
    assert share_budget({"a": 10, "b": 10}, 100) == {"a": 10, "b": 10}
    assert share_budget({"a": 5, "b": 5, "c": 5}, 4) == {"a": 2, "b": 1, "c": 1}


@given(st.dictionaries(st.text(min_size=1, max_size=3), st.integers(0, 50)), st.integers(0, 200))
def test_share_budget_never_exceeds(available: dict[str, int], budget: int) -> None:
    shares = share_budget(available, budget)
    assert sum(shares.values()) == min(budget, sum(available.values()))
    assert all(0 <= shares[k] <= available[k] for k in available)


# -- data loss -------------------------------------------------------------------------------


def state(first: StreamId | None, last_generated: StreamId) -> StreamState:
    return StreamState(
        length=0 if first is None else 1,
        last_generated=last_generated,
        max_deleted=MIN_ID,
        entries_added=1,
        first=first,
        last=first,
        idmp_maxsize=100,
        idmp_duration=100,
    )


def test_data_loss_rules() -> None:
    lo = StreamId(100, 5)
    assert data_loss(lo, state(StreamId(90, 0), StreamId(200, 0))) is None  # checkpoint live
    assert data_loss(lo, state(StreamId(100, 6), StreamId(200, 0))) is None  # next entry
    assert data_loss(MIN_ID, state(StreamId(500, 0), StreamId(600, 0))) is None  # earliest
    assert data_loss(lo, None) is None
    assert "trimmed" in (data_loss(lo, state(StreamId(150, 0), StreamId(200, 0))) or "")
    assert "removed" in (data_loss(lo, state(None, StreamId(200, 0))) or "")
    assert data_loss(lo, state(None, lo)) is None  # emptied, nothing added since
    assert "created again" in (data_loss(lo, state(StreamId(1, 0), StreamId(2, 0))) or "")


def test_tighten_moves_up_to_the_first_entry_only() -> None:
    assert tighten(MIN_ID, state(StreamId(500, 0), StreamId(600, 0))) == StreamId(499, UINT64_MAX)
    assert tighten(StreamId(700, 0), state(StreamId(500, 0), StreamId(800, 0))) == StreamId(700, 0)
    assert tighten(MIN_ID, None) == MIN_ID


# -- producer ids ----------------------------------------------------------------------------


def test_position_producer_ids_name_query_partition_batch_and_chunk() -> None:
    assert position_producer("out", "q1", 3, 7, 2) == "spark:out:q1:3:7:2"


def test_position_mode_heads_chunk_rows_by_the_window(hw_url: str) -> None:
    """Row r of a partition gets pid ...:<r // window> and iid r % window, across batches."""
    options = parse_write_options({"url": hw_url, "stream": "heads"})
    appender = Appender(options, SCHEMA, 100, TaskIdentity("q", 3, 7))
    try:
        appender.rows = 190
        heads = appender._heads([b"heads"] * 20, _batch(20))
    finally:
        appender.close()
    assert heads[0] == (b"XADD", b"heads", b"IDMP", b"spark:heads:q:3:7:1", b"90", b"*")
    assert heads[9][3:5] == (b"spark:heads:q:3:7:1", b"99")
    assert heads[10][3:5] == (b"spark:heads:q:3:7:2", b"0")


def test_column_producer_is_stable_and_spread() -> None:
    assert column_producer("out", "ride-1", 1024) == column_producer("out", "ride-1", 1024)
    spread = {column_producer("out", f"ride-{i}", 16) for i in range(1000)}
    assert len(spread) == 16  # crc32 spreads keys over every producer
    assert column_producer("out", "x", 1) == "spark:out:0"


# -- Arrow shaping ---------------------------------------------------------------------------


def test_default_schema_batch_from_raw_entries() -> None:
    entries = [[b"5-1", [b"a", b"1", b"b", b"x"]], [b"6-0", [b"a", b"2"]]]
    batch = PageShaper(DEFAULT_SCHEMA, "s").batch(page_of(columns_of(entries)))
    assert batch.to_pylist() == [
        {"stream": "s", "id": "5-1", "ms": 5, "seq": 1, "fields": [("a", "1"), ("b", "x")]},
        {"stream": "s", "id": "6-0", "ms": 6, "seq": 0, "fields": [("a", "2")]},
    ]


def test_typed_schema_batch_casts_fields_and_nulls_what_does_not_parse() -> None:
    schema = StructType(
        [
            StructField("id", StringType()),
            StructField("ms", TimestampType()),
            StructField("n", IntegerType()),
            StructField("x", DoubleType()),
            StructField("ok", BooleanType()),
            StructField("amount", DecimalType(10, 2)),
        ]
    )
    entries = [
        [b"1000-0", [b"n", b"7", b"x", b"1.5", b"ok", b"true", b"amount", b"12.345"]],
        [b"2000-0", [b"n", b"seven", b"ok", b"false"]],
    ]
    rows = PageShaper(schema, "s").batch(page_of(columns_of(entries))).to_pylist()
    assert rows[0]["n"] == 7 and rows[0]["x"] == 1.5 and rows[0]["ok"] is True
    assert str(rows[0]["amount"]) == "12.35"
    assert rows[0]["ms"].timestamp() == 1.0
    assert rows[1]["n"] is None and rows[1]["x"] is None and rows[1]["amount"] is None


def test_a_field_column_takes_the_last_of_a_repeated_name_and_null_for_none() -> None:
    entries = [
        [b"1-0", [b"a", b"1", b"b", b"2", b"a", b"3"]],
        [b"2-0", []],
        [b"3-0", [b"b", b"4"]],
        [b"4-0", [b"a", b"5"]],
    ]
    page = page_of(columns_of(entries))
    assert field_values(page, b"a").to_pylist() == [b"3", None, None, b"5"]
    assert field_values(page, b"b").to_pylist() == [b"2", None, b"4", None]
    assert field_values(page, b"zz").to_pylist() == [None] * 4
    assert field_values(page_of(columns_of([])), b"a").to_pylist() == []


def test_cast_strings_handles_zone_less_timestamps() -> None:
    target = pa.timestamp("us", tz="UTC")
    got = cast_strings([b"2024-01-02T03:04:05Z", b"2024-01-02 03:04:05", b"nope"], target)
    assert got.to_pylist()[0] == got.to_pylist()[1] and got.to_pylist()[2] is None


def test_check_schema_rejects_unsupported_columns() -> None:
    check_schema(DEFAULT_SCHEMA)
    with pytest.raises(SchemaError, match="column 'ms'"):
        check_schema(StructType([StructField("ms", StringType())]))
    with pytest.raises(SchemaError, match="column 'tags'"):
        check_schema(StructType([StructField("tags", MapType(StringType(), LongType()))]))


# -- the writer's retry semantics, without Spark -----------------------------------------


def _batch(n: int) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"n": i, "name": f"r{i}"} for i in range(n)])


SCHEMA = StructType([StructField("n", LongType()), StructField("name", StringType())])


@pytest.mark.parametrize(("idempotence", "expected"), [("position", 250), ("none", 500)])
def test_writing_the_same_partition_twice(
    hw_url: str, r: redis.Redis, idempotence: str, expected: int
) -> None:
    """A retried task (same query, partition and batch) appends nothing the second time with
    IDMP; plain XADD appends everything again."""
    key = f"retry-{idempotence}"
    writer = HeadwaterBatchWriter(
        parse_write_options({"url": hw_url, "stream": key, "idempotence": idempotence}),
        SCHEMA,
        overwrite=False,
    )
    for _ in range(2):
        message = writer.write(iter([_batch(250)]))
        assert message.rows == 250  # type: ignore[attr-defined]
    assert r.xlen(key) == expected
    assert [e[1]["name"] for e in r.xrange(key, count=3)] == ["r0", "r1", "r2"]


def test_column_mode_dedupes_across_writes(hw_url: str, r: redis.Redis) -> None:
    options = {"url": hw_url, "stream": "by-key", "idempotence": "column:n"}
    for _ in range(2):  # two separate writers: two runs, same business keys
        writer = HeadwaterBatchWriter(parse_write_options(options), SCHEMA, overwrite=False)
        writer.write(iter([_batch(120)]))
    assert r.xlen("by-key") == 120


def test_writer_refuses_overwrite_and_unknown_columns(hw_url: str) -> None:
    with pytest.raises(OptionError, match="only appends"):
        HeadwaterBatchWriter(parse_write_options({"url": hw_url, "stream": "x"}), SCHEMA, True)
    options = parse_write_options({"url": hw_url, "streamColumn": "dest"})
    with pytest.raises(OptionError, match="names column 'dest'"):
        HeadwaterBatchWriter(options, SCHEMA, False)


def test_rows_without_values_fail_clearly(hw_url: str) -> None:
    writer = HeadwaterBatchWriter(
        parse_write_options({"url": hw_url, "stream": "empty-row"}), SCHEMA, False
    )
    batch = pa.RecordBatch.from_pylist([{"n": None, "name": None}], schema=_batch(1).schema)
    with pytest.raises(ValueError, match="no non-null value"):
        writer.write(iter([batch]))


def test_pipeline_resends_batches_in_flight_after_a_lost_connection(
    hw_url: str, r: redis.Redis
) -> None:
    """The server drops the writer's connection with a batch in flight: the pipeline
    reconnects and sends it again, and IDMP keeps the entries it already appended single."""
    pipe = RawPipeline(open_client(hw_url, 5))
    try:
        pipe.send([("CLIENT", "ID")])
        [client_id] = pipe.receive()
        batches = [
            [  # 100 iids per producer: the default IDMP window
                (
                    "XADD",
                    "cut",
                    "IDMP",
                    f"p{b}:{i // 100}",
                    str(i % 100),
                    "*",
                    "n",
                    str(b * 500 + i),
                )
                for i in range(500)
            ]
            for b in range(3)
        ]
        pipe.send(batches[0])
        assert r.execute_command("CLIENT", "KILL", "ID", client_id) == 1
        pipe.send(batches[1])
        pipe.send(batches[2])
        pipe.drain()
    finally:
        pipe.close()
    values = sorted(int(fields["n"]) for _, fields in r.xrange("cut"))
    assert values == list(range(1500))
    assert r.xinfo_stream("cut")["iids-duplicates"] > 0  # something was sent twice
