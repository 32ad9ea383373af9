"""``HeadwaterDataSource``: the format ``headwater`` for ``spark.read``/``readStream``/``write``/
``writeStream``.

Every factory method runs on the driver (in a PySpark planning worker) before any task: it
parses the options, checks the schema and pings the server with a short timeout, so mistakes
fail the query at ``load()``/``start()``/``save()`` with a message naming the option. The
objects it returns are pickled to executors and hold only parsed options and the schema.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from headwater.spark import client as hw
from headwater.spark.arrow import DEFAULT_SCHEMA, check_schema
from headwater.spark.options import ReadOptions, parse_read_options, parse_write_options
from headwater.spark.reader import HeadwaterBatchReader, HeadwaterStreamReader
from headwater.spark.writer import HeadwaterBatchWriter, HeadwaterStreamWriter


class HeadwaterDataSource(DataSource):
    """Redis-protocol streams (Headwater, Redis 8.6+) as a Spark source and sink."""

    @classmethod
    def name(cls) -> str:
        return "headwater"

    def schema(self) -> StructType:
        # Called at load() when no schema is given: the earliest point to reject bad options.
        self._read_options(streaming=None)
        return DEFAULT_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return HeadwaterBatchReader(self._read_options(streaming=False), _checked(schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return HeadwaterStreamReader(self._read_options(streaming=True), _checked(schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return HeadwaterBatchWriter(parse_write_options(self.options), schema, overwrite)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return HeadwaterStreamWriter(parse_write_options(self.options), schema, overwrite)

    def _read_options(self, *, streaming: bool | None) -> ReadOptions:
        options = parse_read_options(self.options, streaming=streaming)
        hw.check_server(options.url, options.connect_timeout)
        return options


def _checked(schema: StructType) -> StructType:
    check_schema(schema)
    return schema
