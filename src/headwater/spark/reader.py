"""Batch and streaming readers: offsets resolved on the driver, XRANGE pages read on executors.

Theory of operation (streaming). The driver-side reader lives in one long-running Python worker
per query and is asked, each trigger, for ``latestOffset(start, limit)``: per stream it checks
``start`` for data loss, takes the stream's last entry as the candidate end, caps it by
``maxMillisPerBatch`` (ID time, cheap) and by the row budget (``maxRecordsPerBatch``, which needs
the n-th entry ID: see ``pages.entry_ids``), and by the availableNow target. Spark journals
that end offset before any task runs; ``partitions(start, end)`` then cuts ``(start, end]`` into
deterministic time slices (``planning.py``) and ``read`` serves a slice with exclusive
``XRANGE key (<after> <until> COUNT <page>``: a pure function of the partition, so a replay after a
crash reads exactly the same entries. XREADGROUP is never used to read; a consumer group, if
asked for, only mirrors committed offsets (``commitGroup``: XGROUP SETID with ENTRIESREAD, so
XINFO GROUPS shows the true lag; Spark commits a batch when it plans the next one, so the group
trails the query by one batch).

Cost of ``maxRecordsPerBatch``: Redis has no "n-th ID after X", so when the backlog is larger
than the limit the driver pages the admitted entries' IDs with XRANGE (payloads included) before
the executors read them again; ``maxMillisPerBatch`` bounds a batch by ID time with two
single-entry reads instead.

Data loss: a start offset whose successors were trimmed (the first live entry is newer than
``start`` and is not its immediate successor, or the stream is empty although entries were added
after ``start``) fails the query unless ``failOnDataLoss=false``, which logs a warning and reads
on from the first live entry. Trimmers that keep the checkpointed entry (``MINID <checkpoint>``)
never trigger it; a trim past the checkpoint is reported even when, by luck, it removed only
entries already read, since the server keeps no record of what was trimmed.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import redis
from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from headwater.spark import client as hw
from headwater.spark import nodes as hw_nodes
from headwater.spark.arrow import PageShaper
from headwater.spark.offsets import (
    MIN_ID,
    StreamId,
    checkpoint_offsets,
    exclusive,
    format_offsets,
    predecessor,
    successor,
)
from headwater.spark.options import ReadOptions
from headwater.spark.pages import entry_ids, read_pages
from headwater.spark.planning import Slice, plan_slices, share_budget

log = logging.getLogger("headwater.spark")

#: ``getDefaultReadLimit`` when only ``maxMillisPerBatch`` is set: "limited, but not by rows".
NO_ROW_LIMIT = 2**62
#: ``commitGroup``: count at most this many unread entries to set the group's ENTRIESREAD.
LAG_COUNT_LIMIT = 1_000


class DataLossError(RuntimeError):
    """Entries after a checkpointed offset were trimmed before the query read them."""


@dataclass(frozen=True)
class StreamRange(InputPartition):
    """One partition: the entries of ``stream`` in ``(after, until]`` (IDs as ``ms-seq``)."""

    stream: str
    after: str
    until: str
    node: str = ""  # host:port of the cluster node that owned the stream when planned


def stream_ranges(slices: list[Slice], nodes: hw_nodes.Nodes) -> list[InputPartition]:
    """Partitions for the slices, each addressed to its stream's node in a cluster."""
    return [
        StreamRange(
            s.stream,
            str(s.after),
            str(s.until),
            nodes.address_for(s.stream) if nodes.clustered else "",
        )
        for s in slices
    ]


def read_range(options: ReadOptions, schema: StructType, part: InputPartition) -> Iterator[Any]:
    """Yield Arrow record batches of the partition's entries, one per XRANGE page (read as
    the reply's bytes: ``pages.py``)."""
    if not isinstance(part, StreamRange):  # Spark's placeholder for a batch with no partitions
        return
    shaper = PageShaper(schema, part.stream)
    nodes = hw_nodes.Nodes(options.url, options.connect_timeout, first=part.node)
    try:
        for page in read_pages(nodes, part.stream, part.after, part.until, options.page_size):
            yield shaper.batch(page)
    finally:
        nodes.close()


# -- offsets against the server --------------------------------------------------------------


def data_loss(start: StreamId, state: hw.StreamState | None) -> str | None:
    """Why entries after ``start`` may have been lost, or None (pure: XINFO STREAM facts)."""
    if start == MIN_ID or state is None:
        return None
    if state.last_generated < start:
        return (
            f"the stream's last ID {state.last_generated} is below the offset {start}: "
            "was the key deleted and created again?"
        )
    if state.first is None:
        if state.last_generated > start:
            return f"every entry after {start} (up to {state.last_generated}) was removed"
        return None
    if state.first > successor(start):
        return (
            f"the first entry is now {state.first}: "
            f"entries in ({start}, {state.first}) may have been trimmed"
        )
    return None


def tighten(start: StreamId, state: hw.StreamState | None) -> StreamId:
    """Move a start bound up to just before the first live entry (same entries, and the time
    slices of the first batch start where the data does)."""
    if state is None or state.first is None or state.first <= start:
        return start
    return predecessor(state.first)


def resolve_start(
    options: ReadOptions, states: Mapping[str, hw.StreamState | None]
) -> dict[str, StreamId]:
    """The exclusive start of every stream for a new query (no checkpoint yet)."""
    resolved: dict[str, StreamId] = {}
    for key, state in states.items():
        start = options.start_of(key)
        if start.kind == "latest":
            resolved[key] = state.last_generated if state is not None else MIN_ID
            continue
        after = start.after if start.after is not None else MIN_ID
        if start.kind == "id":
            check_loss(key, after, state, options.fail_on_data_loss)
        resolved[key] = tighten(after, state)
    return resolved


def check_loss(
    key: str,
    start: StreamId,
    state: hw.StreamState | None,
    fail: bool,
    warned: set[tuple[str, StreamId]] | None = None,
) -> None:
    """Raise DataLossError, or (``fail`` false) log a warning once per ``warned`` set."""
    reason = data_loss(start, state)
    if reason is None:
        return
    message = f"possible data loss in stream {key!r} after offset {start}: {reason}"
    if fail:
        raise DataLossError(
            f"{message}. Set option failOnDataLoss=false to skip the missing range and go on."
        )
    if warned is None or (key, start) not in warned:
        log.warning("%s; skipping ahead (failOnDataLoss=false)", message)
        if warned is not None:
            warned.add((key, start))


# -- batch reads -----------------------------------------------------------------------------


class HeadwaterBatchReader(DataSourceReader):
    """``spark.read.format("headwater")``: the entries in (start, end] of each stream, where end
    is each stream's last entry when the query is planned (or ``endingOffsets``)."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema

    def partitions(self) -> list[InputPartition]:
        options = self.options
        nodes = hw_nodes.Nodes(options.url, options.connect_timeout)
        try:
            nodes.discover()
            keys = hw.stream_keys(nodes, options.streams, options.pattern)
            states = hw.stream_states(nodes, keys)
            start = resolve_start(options, states)
            end = {key: self._end(key, states[key], start[key]) for key in keys}
            slices = plan_slices(start, end, self.options.min_partitions)
            return stream_ranges(slices, nodes)
        finally:
            nodes.close()

    def _end(self, key: str, state: hw.StreamState | None, start: StreamId) -> StreamId:
        end = self.options.end_of(key)
        if end is None:
            end = state.last if state is not None and state.last is not None else start
        return max(end, start)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_range(self.options, self.schema, partition)


# -- streaming reads -------------------------------------------------------------------------


class HeadwaterStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream.format("headwater")``: offsets are ``{key: last consumed ID}``."""

    def __init__(self, options: ReadOptions, schema: StructType) -> None:
        self.options = options
        self.schema = schema
        self._target: dict[str, StreamId] | None = None  # availableNow: stop here
        self._nodes: hw_nodes.Nodes | None = None
        self._warned: set[tuple[str, StreamId]] = set()  # data-loss warnings already logged

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_nodes"] = None  # connections are never pickled to executors
        return state

    @property
    def nodes(self) -> hw_nodes.Nodes:
        if self._nodes is None:
            self._nodes = hw_nodes.Nodes(self.options.url, self.options.connect_timeout)
            self._nodes.discover()
        return self._nodes

    def _states(self) -> dict[str, hw.StreamState | None]:
        """Every key to read now (a pattern finds new ones) and its state."""
        keys = hw.stream_keys(self.nodes, self.options.streams, self.options.pattern)
        return hw.stream_states(self.nodes, keys)

    def initialOffset(self) -> dict[str, str]:
        return format_offsets(resolve_start(self.options, self._states()))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_records is not None:
            return ReadMaxRows(self.options.max_records)
        if self.options.max_millis is not None:
            return ReadMaxRows(NO_ROW_LIMIT)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        states = self._states()
        self._target = {key: _tail(state) for key, state in states.items()}

    def reportLatestOffset(self) -> dict[str, str]:
        return {key: str(_tail(state)) for key, state in self._states().items()}

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: ReadLimit | None = None
    ) -> dict[str, str]:
        states = self._states()
        lows = (
            checkpoint_offsets(start, tuple(states))
            if start is not None
            else resolve_start(self.options, states)
        )
        ends = {key: self._candidate_end(key, lows[key], states[key], limit) for key in lows}
        if isinstance(limit, ReadMaxRows) and limit.max_rows < NO_ROW_LIMIT:
            ends = self._limit_rows(lows, ends, states, limit.max_rows)
        return format_offsets(ends)

    def _candidate_end(
        self, key: str, low: StreamId, state: hw.StreamState | None, limit: ReadLimit | None
    ) -> StreamId:
        """The last entry of the stream, capped by the availableNow target and ID time."""
        check_loss(key, low, state, self.options.fail_on_data_loss, self._warned)
        end = _tail(state)
        if self._target is not None:  # (a key found since is not part of availableNow)
            end = min(end, self._target.get(key, MIN_ID))
        if end <= low:
            return low
        millis = self.options.max_millis
        if millis is None or isinstance(limit, ReadAllAvailable) or limit is None:
            return end
        first = state.first if state and state.first and state.first > low else None
        first = first or hw.first_id_after(self.nodes, key, low)
        if first is None:
            return low
        cap = StreamId(first.ms + millis - 1, 2**64 - 1)
        if cap >= end:
            return end
        return hw.last_id_within(self.nodes, key, low, cap) or low

    def _limit_rows(
        self,
        lows: dict[str, StreamId],
        ends: dict[str, StreamId],
        states: Mapping[str, hw.StreamState | None],
        budget: int,
    ) -> dict[str, StreamId]:
        """Cap the batch at ``budget`` entries over all streams (fair shares)."""
        moving = [key for key in lows if ends[key] > lows[key]]
        if sum(_length(states[key]) for key in moving) <= budget:
            return ends  # every live entry fits: no need to find the n-th ID
        page = self.options.page_size
        ids = {
            key: entry_ids(self.nodes, key, lows[key], ends[key], budget, page) for key in moving
        }
        shares = share_budget({key: len(found) for key, found in ids.items()}, budget)
        capped = dict(ends)
        for key, found in ids.items():
            capped[key] = hw.to_id(found[shares[key] - 1]) if shares[key] else lows[key]
        return capped

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[InputPartition]:
        keys = tuple(end)  # the keys this batch was planned with (its journaled end offsets)
        lows = checkpoint_offsets(start, keys)
        highs = checkpoint_offsets(end, keys)
        slices = plan_slices(lows, highs, self.options.min_partitions)
        return stream_ranges(slices, self.nodes)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_range(self.options, self.schema, partition)

    def commit(self, end: dict[str, Any]) -> None:
        group = self.options.commit_group
        if group is None:
            return
        for key, sid in checkpoint_offsets(end, tuple(end)).items():
            if sid != MIN_ID:
                move_group(self.nodes, key, group, sid)

    def stop(self) -> None:
        if self._nodes is not None:
            self._nodes.close()
            self._nodes = None


def _tail(state: hw.StreamState | None) -> StreamId:
    return state.last if state is not None and state.last is not None else MIN_ID


def _length(state: hw.StreamState | None) -> int:
    return state.length if state is not None else 0


# -- commitGroup -----------------------------------------------------------------------------


def move_group(nodes: hw_nodes.Nodes, key: str, group: str, sid: StreamId) -> None:
    """Point consumer group ``group`` at ``sid`` (creating it), with ENTRIESREAD so that
    XINFO GROUPS reports a true lag (the live entries after ``sid``) when it is cheap to count."""
    args: list[Any] = [str(sid)]
    entries_read = _entries_read(nodes, key, sid)
    if entries_read is not None:
        args += ["ENTRIESREAD", entries_read]
    try:
        nodes.call(key, "XGROUP", "SETID", key, group, *args)
    except redis.ResponseError as exc:
        if "NOGROUP" not in str(exc) and "no such key" not in str(exc).lower():
            raise
        nodes.call(key, "XGROUP", "CREATE", key, group, *args, "MKSTREAM")


def _entries_read(nodes: hw_nodes.Nodes, key: str, sid: StreamId) -> int | None:
    pipe = nodes.client_for(key).pipeline(transaction=True)  # one consistent view of the stream
    hw.call(pipe, "XINFO", "STREAM", key)
    hw.call(pipe, "XRANGE", key, exclusive(sid), "+", "COUNT", LAG_COUNT_LIMIT + 1)
    try:
        info, unread = pipe.execute()
    except redis.ResponseError:
        return None
    if len(unread) > LAG_COUNT_LIMIT:
        return None
    added = int(info[info.index(b"entries-added") + 1])
    return max(added - len(unread), 0)
