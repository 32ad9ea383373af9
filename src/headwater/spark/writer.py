"""The sink: rows appended with ``XADD key IDMP <pid> <iid> * f v ...``, pipelined.

Theory of operation. Spark retries a failed task, and after a driver crash re-runs the last
uncommitted micro-batch with the same batch id and (the source being deterministic) the same
rows. Every append therefore carries an idempotent-producer pair that a retry reproduces, and
the server answers a repeated pair with the entry it already holds instead of appending again:

* ``position`` (default): pid = ``spark:<sink>:<queryId>:<partition>:<batchId>:<chunk>``, iid =
  the row's position in its chunk. Chunks hold at most the stream's IDMP window
  (``idmp-maxsize``, 100 by default in Redis 8.6), so no producer ever has to forget an iid of
  its own chunk. The query id keeps a new checkpoint (whose batch ids restart at 0) from
  being taken for a replay of an old one. Needs the same rows in the same order on a retry.
* ``column:<name>``: iid = that column's value (a business key, or ``source:id``), pid =
  ``spark:<sink>:<crc32(iid) mod idempotenceProducers>``. Order-independent; each producer must
  see at most ``idmp-maxsize`` keys per batch, so raise ``idempotenceProducers`` or the window
  for large batches.
* ``none``: plain XADD, at-least-once (a retry appends again).

Guarantees last as long as the server remembers the pairs: ``idmp-duration`` seconds (100 by
default); options ``idmpDuration``/``idmpMaxsize`` set the target stream's values with XCFGSET
before the query starts (XCFGSET clears the stream's IDMP history when a value changes, so set
them once, not per query). Batch writes (``df.write``) use a random run id per write in place of
the query id and 0 as the batch id: task retries dedupe, a second ``save()`` appends again.

Row to entry: a ``fields`` column of type map is the entry's field/value pairs; otherwise every
column except ``streamColumn`` becomes a field named after it, its value as a string (booleans
``true``/``false``, numbers as Arrow prints them, nested values as JSON, binary as raw bytes),
null values skipped. A row with no non-null value cannot be an entry and fails the task.
"""

from __future__ import annotations

import json
import logging
import uuid
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa  # type: ignore[import-untyped]
import pyarrow.compute as pc  # type: ignore[import-untyped]
import redis
from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import MapType, StructType

from headwater.spark import client as hw
from headwater.spark import nodes as hw_nodes
from headwater.spark.options import OptionError, WriteOptions

log = logging.getLogger("headwater.spark")

#: Redis 8.6's default ``stream-idmp-maxsize``: the window when nothing better is known.
DEFAULT_WINDOW = 100
#: Rows per pipelined round trip (several chunks, each with its own producer id).
FLUSH_ROWS = 2_000


def position_producer(sink: str, query: str, partition: int, batch: int, chunk: int) -> str:
    return f"spark:{sink}:{query}:{partition}:{batch}:{chunk}"


def column_producer(sink: str, iid: str, producers: int) -> str:
    """A stable hash (crc32, not Python's salted ``hash``) spreads keys over producers."""
    return f"spark:{sink}:{zlib.crc32(iid.encode()) % producers}"


@dataclass(frozen=True)
class TaskIdentity:
    query: str
    partition: int
    batch: int


def task_identity(run_id: str) -> TaskIdentity:
    """Query id, partition id and batch id of the running task (``run_id`` and batch 0 outside
    a streaming query)."""
    ctx = TaskContext.get()
    if ctx is None:
        return TaskIdentity(run_id, 0, 0)
    query = ctx.getLocalProperty("sql.streaming.queryId")
    batch = ctx.getLocalProperty("streaming.sql.batchId")
    return TaskIdentity(query or run_id, ctx.partitionId(), int(batch) if batch else 0)


@dataclass
class HeadwaterCommit(WriterCommitMessage):
    partition: int
    rows: int


# -- rows to commands ------------------------------------------------------------------------

Value = bytes | None
Command = tuple[bytes, ...]


def column_values(column: pa.Array) -> list[Value]:
    """A column's values as field values (UTF-8 or raw bytes), or None."""
    kind = column.type
    if pa.types.is_binary(kind):
        return list(column.to_pylist())
    if pa.types.is_nested(kind):
        return [
            None if v is None else json.dumps(v, default=str).encode() for v in column.to_pylist()
        ]
    if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
        column = pc.cast(column, pa.string())
    return list(column.cast(pa.binary()).to_pylist())


def _pairs_from_columns(
    names: Sequence[bytes], columns: Sequence[list[Value]]
) -> Iterator[Command]:
    for values in zip(*columns, strict=True):
        yield tuple(
            item
            for name, value in zip(names, values, strict=True)
            if value is not None
            for item in (name, value)
        )


def _pairs_from_map(column: pa.Array) -> Iterator[Command]:
    for pairs in column.to_pylist():
        yield tuple(
            item.encode() if isinstance(item, str) else item
            for key, value in pairs or ()
            if value is not None
            for item in (key, value)
        )


class Appender:
    """Turns the record batches of one task into pipelined XADDs (the executor side).

    Each row becomes ``head + pairs``: the head is ``XADD key [IDMP pid iid] *`` (see the
    module docstring for pid and iid), the pairs its fields. Everything is bytes, so hiredis
    packs commands without encoding."""

    def __init__(self, options: WriteOptions, schema: StructType, window: int, task: TaskIdentity):
        self.options = options
        self.window = window
        self.task = task
        self.has_map = any(
            f.name == "fields" and isinstance(f.dataType, MapType) for f in schema.fields
        )
        self.field_names = [f.name for f in schema.fields if f.name != options.stream_column]
        self.iids = [str(position).encode() for position in range(window)]
        self.rows = 0
        self.per_producer: Counter[bytes] = Counter()  # column mode: keys per producer id
        self.warned = False
        self.nodes = hw_nodes.Nodes(options.url, options.connect_timeout)
        self.nodes.discover()
        self.pipelines: dict[str, hw.RawPipeline] = {}
        self.pending: list[Command] = []

    def add(self, batch: pa.RecordBatch) -> None:
        heads = self._heads(self._keys(batch), batch)
        for head, pairs in zip(heads, self._pairs(batch), strict=True):
            if not pairs:
                raise ValueError(
                    f"row {self.rows} of partition {self.task.partition} has no non-null "
                    "value: a stream entry needs at least one field"
                )
            self.pending.append(head + pairs)
            self.rows += 1
            if len(self.pending) >= FLUSH_ROWS:
                self.flush()
        self.flush()

    def _keys(self, batch: pa.RecordBatch) -> list[bytes]:
        if self.options.stream is not None:
            return [self.options.stream.encode()] * batch.num_rows
        keys = column_values(batch.column(self.options.stream_column))
        if any(key is None for key in keys):
            raise ValueError(f"column {self.options.stream_column!r} (streamColumn) has a null")
        return keys  # type: ignore[return-value]  # no None left

    def _heads(self, keys: list[bytes], batch: pa.RecordBatch) -> list[Command]:
        """``XADD key [IDMP pid iid] *`` for every row of the batch."""
        mode = self.options.idempotence
        if mode == "none":
            return [(b"XADD", key, b"*") for key in keys]
        if mode == "column":
            return self._column_heads(keys, batch)
        return self._position_heads(keys)

    def _position_heads(self, keys: list[bytes]) -> list[Command]:
        heads: list[Command] = []
        pid, chunk, task = b"", -1, self.task
        for row, key in enumerate(keys, self.rows):
            if row // self.window != chunk:
                chunk = row // self.window
                sink = self.options.sink
                pid = position_producer(
                    sink, task.query, task.partition, task.batch, chunk
                ).encode()
            heads.append((b"XADD", key, b"IDMP", pid, self.iids[row % self.window], b"*"))
        return heads

    def _column_heads(self, keys: list[bytes], batch: pa.RecordBatch) -> list[Command]:
        iids = self._column_iids(batch)
        pids = [self._column_pid(iid) for iid in iids]
        self._check_window(pids)
        return [
            (b"XADD", key, b"IDMP", pid, iid, b"*")
            for key, pid, iid in zip(keys, pids, iids, strict=True)
        ]

    def _check_window(self, pids: Iterable[bytes]) -> None:
        """Column mode: warn (once) when a producer gets more keys in this task than its IDMP
        window remembers, since a replay of the oldest ones would then append them again."""
        self.per_producer.update(pids)
        pid, count = max(self.per_producer.items(), key=lambda item: item[1])
        if count > self.window and not self.warned:
            self.warned = True
            log.warning(
                "producer %s got %d keys in one task, more than the IDMP window (%d): raise "
                "idempotenceProducers or idmpMaxsize to keep replays exactly-once",
                pid.decode(),
                count,
                self.window,
            )

    def _column_iids(self, batch: pa.RecordBatch) -> list[bytes]:
        values = column_values(batch.column(self.options.key_column))
        if any(value is None for value in values):
            raise ValueError(f"column {self.options.key_column!r} (the idempotence key) has a null")
        return values  # type: ignore[return-value]  # no None left

    def _column_pid(self, iid: bytes) -> bytes:
        text = iid.decode(errors="backslashreplace")
        return column_producer(self.options.sink, text, self.options.producers).encode()

    def _pairs(self, batch: pa.RecordBatch) -> Iterator[Command]:
        if self.has_map:
            return _pairs_from_map(batch.column("fields"))
        columns = [column_values(batch.column(name)) for name in self.field_names]
        return _pairs_from_columns([name.encode() for name in self.field_names], columns)

    def flush(self) -> None:
        if not self.pending:
            return
        self._resend_redirected()
        for address, commands in self.nodes.split(self.pending).items():
            self._pipeline(address).send(commands)  # an error reply fails the task: retried
        self.pending = []

    def finish(self) -> None:
        """Wait for every reply (the task may only succeed once all rows are appended)."""
        self.flush()
        for pipeline in self.pipelines.values():
            pipeline.drain()
        self._resend_redirected()

    def _pipeline(self, address: str) -> hw.RawPipeline:
        pipeline = self.pipelines.get(address)
        if pipeline is None:
            pipeline = hw.RawPipeline(self.nodes.client_at(address))
            self.pipelines[address] = pipeline
        return pipeline

    def _resend_redirected(self) -> None:
        """Rows a cluster node answered MOVED or ASK (they did not run) go, in their order,
        where they belong, before any newer row: so a stream keeps the order of its rows
        across a reshard. Every reply in flight is read first, since a redirected row may have
        successors of the same stream in flight."""
        for rounds in range(hw_nodes.MAX_REDIRECTS):
            if not any(pipeline.redirected for pipeline in self.pipelines.values()):
                return
            hw_nodes.redirect_pause(rounds)
            redirected: list[tuple[Command, hw.Redirect]] = []
            for pipeline in list(self.pipelines.values()):
                pipeline.drain()
                redirected += [(tuple(row), to) for row, to in pipeline.redirected]
                pipeline.redirected = []
            for address, commands in self._reroute(redirected).items():
                self._pipeline(address).send(commands)
            for pipeline in list(self.pipelines.values()):
                pipeline.drain()
        raise RuntimeError(f"rows still redirected after {hw_nodes.MAX_REDIRECTS} tries")

    def _reroute(self, redirected: list[tuple[Command, hw.Redirect]]) -> dict[str, list[Command]]:
        """The redirected rows by destination: MOVED ones by the corrected map (one refresh
        for all), ASK ones to the importing node behind ``ASKING``."""
        moved = {redirect.slot: redirect for _, redirect in redirected if not redirect.ask}
        if moved:
            self.nodes.refresh()
            for redirect in moved.values():
                self.nodes.learn(redirect, refresh=False)
        groups: dict[str, list[Command]] = {}
        for command, redirect in redirected:
            if redirect.ask:
                groups.setdefault(redirect.address, []).extend([(b"ASKING",), command])
            else:
                groups.setdefault(self.nodes.address_for(command[1]), []).append(command)
        return groups

    def close(self) -> None:
        for pipeline in self.pipelines.values():
            pipeline.close()
        self.nodes.close()


# -- the driver side -----------------------------------------------------------------------


def prepare_target(options: WriteOptions) -> int:
    """Check the server, apply idmpMaxsize/idmpDuration, and return the IDMP window (rows per
    position-mode chunk). Runs on the driver when the writer is created."""
    hw.check_server(options.url, options.connect_timeout, need_idmp=options.idempotence != "none")
    nodes = hw_nodes.Nodes(options.url, options.connect_timeout)
    try:
        nodes.discover()
        if options.stream is None:
            return _config_window(nodes.client_at(nodes.home))
        if options.idmp_maxsize is not None or options.idmp_duration is not None:
            _configure(nodes, options)
        state = hw.stream_states(nodes, [options.stream])[options.stream]
        if state is not None and state.idmp_maxsize is not None:
            return state.idmp_maxsize
        return _config_window(nodes.client_for(options.stream))
    finally:
        nodes.close()


def _config_window(client: redis.Redis) -> int:
    """The server's default window for new streams (CONFIG GET may be refused: assume 100)."""
    try:
        reply = hw.call(client, "CONFIG", "GET", "stream-idmp-maxsize")
    except redis.ResponseError:
        return DEFAULT_WINDOW
    return int(reply[1]) if len(reply) == 2 else DEFAULT_WINDOW


def _configure(nodes: hw_nodes.Nodes, options: WriteOptions) -> None:
    """XCFGSET the target stream when a value differs (creating an empty stream if needed:
    XCFGSET needs the key, and a group created with MKSTREAM and dropped leaves just that)."""
    key = options.stream
    assert key is not None
    state = hw.stream_states(nodes, [key])[key]
    if state is None:
        group = f"headwater-spark-init-{uuid.uuid4().hex}"
        nodes.call(key, "XGROUP", "CREATE", key, group, "$", "MKSTREAM")
        nodes.call(key, "XGROUP", "DESTROY", key, group)
        state = hw.stream_states(nodes, [key])[key]
    args: list[Any] = []
    if options.idmp_duration is not None and state and state.idmp_duration != options.idmp_duration:
        args += ["IDMP-DURATION", options.idmp_duration]
    if options.idmp_maxsize is not None and state and state.idmp_maxsize != options.idmp_maxsize:
        args += ["IDMP-MAXSIZE", options.idmp_maxsize]
    if args:
        log.warning("XCFGSET %s %s: this clears the stream's IDMP history", key, args)
        nodes.call(key, "XCFGSET", key, *args)


class _WriterBase:
    def __init__(self, options: WriteOptions, schema: StructType, overwrite: bool) -> None:
        if overwrite:
            raise OptionError("the headwater sink only appends: use mode('append')")
        check_columns(options, schema)
        self.options = options
        self.schema = schema
        self.window = prepare_target(options)
        self.run_id = uuid.uuid4().hex  # batch writes: one id per save(), shared by retries

    def _write(self, batches: Iterator[pa.RecordBatch]) -> HeadwaterCommit:
        task = task_identity(self.run_id)
        appender = Appender(self.options, self.schema, self.window, task)
        try:
            for batch in batches:
                appender.add(batch)
            appender.finish()
        finally:
            appender.close()
        return HeadwaterCommit(task.partition, appender.rows)


def check_columns(options: WriteOptions, schema: StructType) -> None:
    names = set(schema.fieldNames())
    for option, column in (
        ("streamColumn", options.stream_column),
        ("idempotence", options.key_column),
    ):
        if column is not None and column not in names:
            raise OptionError(f"option {option!r} names column {column!r}, not in {sorted(names)}")


def _rows(messages: Sequence[WriterCommitMessage | None]) -> int:
    return sum(m.rows for m in messages if isinstance(m, HeadwaterCommit))


class HeadwaterBatchWriter(_WriterBase, DataSourceArrowWriter):
    """``df.write.format("headwater").mode("append")``."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        log.info("appended %d rows to %s", _rows(messages), self.options.sink)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("write to %s aborted after %d rows", self.options.sink, _rows(messages))


class HeadwaterStreamWriter(_WriterBase, DataSourceStreamArrowWriter):
    """``df.writeStream.format("headwater")``."""

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        return self._write(iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.info("batch %d: appended %d rows to %s", batchId, _rows(messages), self.options.sink)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning(
            "batch %d to %s aborted after %d rows; its retry dedupes them (IDMP)",
            batchId,
            self.options.sink,
            _rows(messages),
        )
