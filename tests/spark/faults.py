"""Fault injection for the Spark tests: ``headwater`` sinks whose commit fails once, or
waits to be killed.

Spark journals a micro-batch's offsets, runs the write tasks, then calls the sink's ``commit``
on the driver and only then records the batch as done. Failing in ``commit`` after the rows were
appended is the driver crash that matters for exactly-once: the restarted query runs the same
batch again. The marker file (under the session's scratch directory, shared with every Python
worker through the environment) makes the failure happen once per sink. ``CommitHeld`` does the
same for a separate driver process: it announces the written batch with its marker and waits in
``commit`` for the test's ``kill -9``.

This module must be importable by PySpark's Python workers: the test session puts the
repository on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from headwater.spark import HeadwaterDataSource
from headwater.spark.options import parse_write_options
from headwater.spark.writer import HeadwaterStreamWriter

SCRATCH_ENV = "HEADWATER_SPARK_TEST_DIR"
#: The batch whose commit fails (the first one has to succeed, to test a replay mid-query).
FAILING_BATCH = 1
#: How long a held commit waits for the kill (the test gives up well before).
HOLD_S = 600.0


class CommitFailsOnce(HeadwaterDataSource):
    @classmethod
    def name(cls) -> str:
        return "headwater_commit_fails_once"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return FailingCommitWriter(parse_write_options(self.options), schema, overwrite)


class FailingCommitWriter(HeadwaterStreamWriter):
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        marker = Path(os.environ[SCRATCH_ENV]) / f"commit-failed-{self.options.sink}"
        if batchId == FAILING_BATCH and not marker.exists():
            marker.touch()
            raise RuntimeError(f"injected driver failure after batch {batchId} was written")
        super().commit(messages, batchId)


class CommitHeld(HeadwaterDataSource):
    @classmethod
    def name(cls) -> str:
        return "headwater_commit_held"

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return HeldCommitWriter(parse_write_options(self.options), schema, overwrite)


class HeldCommitWriter(HeadwaterStreamWriter):
    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        marker = held_marker(self.options.sink)
        if batchId == FAILING_BATCH and not marker.exists():
            marker.touch()  # batch 1 is written: the test may kill the driver now
            time.sleep(HOLD_S)
        super().commit(messages, batchId)


def held_marker(sink: str) -> Path:
    return Path(os.environ[SCRATCH_ENV]) / f"commit-held-{sink}"
