"""A streaming query in a process of its own, for the kill -9 tests: Headwater stream -> Spark
-> Headwater stream, exactly once.

    python -m tests.spark.stream_job URL SOURCE SINK CHECKPOINT [--drain] [--held]
        [--idempotence=MODE]

Reads ``SOURCE`` in micro-batches of at most 1000 entries and appends each entry's fields to
``SINK`` with the default position idempotence (IDMP window kept for 10 minutes, longer than a
restart takes), or ``MODE``. Runs until killed; with ``--drain`` it uses
``trigger(availableNow=True)`` and exits 0 once everything present at start is written. With
``--held`` the sink is ``tests.spark.faults.CommitHeld``: batch 1's commit waits to be killed.
"""

from __future__ import annotations

import sys

from pyspark.sql import SparkSession


def main(argv: list[str]) -> int:
    url, source, sink, checkpoint = argv[:4]
    flags = argv[4:]
    drain = "--drain" in flags
    idempotence = next(
        (flag.split("=", 1)[1] for flag in flags if flag.startswith("--idempotence=")), "position"
    )
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("headwater-kill-test")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    sink_format = "headwater"
    if "--held" in flags:
        from tests.spark.faults import CommitHeld

        spark.dataSource.register(CommitHeld)
        sink_format = CommitHeld.name()
    df = (
        spark.readStream.format("headwater")
        .option("url", url)
        .option("streams", source)
        .option("maxRecordsPerBatch", "1000")
        .load()
    )
    writer = (
        df.writeStream.format(sink_format)
        .option("url", url)
        .option("stream", sink)
        .option("idempotence", idempotence)
        .option("idmpDuration", "600")
        .option("checkpointLocation", checkpoint)
    )
    writer = (
        writer.trigger(availableNow=True) if drain else writer.trigger(processingTime="0 seconds")
    )
    query = writer.start()
    print("started", flush=True)
    query.awaitTermination()
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
