"""The PySpark connector: Headwater (or Redis 8.6+) streams as the Spark format ``headwater``.

Why it exists: Spark's Kafka source and spark-redis need JARs (and spark-redis stops at Spark
3.2), so PySpark 4 had no way to read Redis streams. This is a pure-Python data source
(``pyspark.sql.datasource``, PySpark >= 4.2) that talks to the server with redis-py only.

Installing ``headwater[spark]`` registers the format by itself: PySpark imports every top-level
``pyspark_*`` module on the path and registers its ``DefaultSource`` (``pyspark_headwater``).
``register(spark)`` does it explicitly, for a session that started before the install.

Reading (offsets are ``{"<key>": "<last consumed ID>"}`` in Spark's checkpoint)::

    df = (spark.readStream.format("headwater")
          .option("url", "redis://localhost:6379/0")
          .option("streams", "rides")                # comma-separated keys, and/or
          .option("streamsPattern", "rides:*")       # every stream matching (found again
                                                     # at each micro-batch)
          .option("startingOffsets", "earliest")     # latest, or {"rides": "1700000000000-0"}
          .option("maxRecordsPerBatch", "100000")    # optional admission control
          .load())                                   # stream, id, ms, seq, fields

``spark.read`` takes the same options plus ``endingOffsets``; a schema given with ``.schema()``
maps columns from the entry's fields by name (see ``arrow.py``). Writing (exactly-once with
XADD IDMP, see ``writer.py``)::

    (df.writeStream.format("headwater").option("url", url).option("stream", "totals")
       .option("checkpointLocation", path).start())
    df.write.format("headwater").mode("append").option("stream", "totals").save()

Every option is listed in ``options.py``; the modules: ``offsets`` (IDs and offset JSON),
``planning`` (partitions, row budgets: pure), ``client`` (the redis-py side), ``arrow`` (schemas,
XRANGE pages to record batches), ``reader``, ``writer``, ``datasource``.
"""

from __future__ import annotations

from pyspark.sql import SparkSession

from headwater.spark.datasource import HeadwaterDataSource

__all__ = ["HeadwaterDataSource", "register"]


def register(spark: SparkSession) -> None:
    """Register the ``headwater`` format with ``spark`` (needed only without auto-registration)."""
    spark.dataSource.register(HeadwaterDataSource)
