"""Fault injection for the Spark tests: a ``headwater`` sink whose commit fails once.

Spark journals a micro-batch's offsets, runs the write tasks, then calls the sink's ``commit``
on the driver and only then records the batch as done. Failing in ``commit`` after the rows were
appended is the driver crash that matters for exactly-once: the restarted query runs the same
batch again. The marker file (under the session's scratch directory, shared with every Python
worker through the environment) makes the failure happen once per sink.

This module must be importable by PySpark's Python workers: the test session puts the
repository on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
from pathlib import Path

from pyspark.sql.datasource import DataSourceStreamWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from headwater.spark import HeadwaterDataSource
from headwater.spark.options import parse_write_options
from headwater.spark.writer import HeadwaterStreamWriter

SCRATCH_ENV = "HEADWATER_SPARK_TEST_DIR"
#: The batch whose commit fails (the first one has to succeed, to test a replay mid-query).
FAILING_BATCH = 1


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
