#!/usr/bin/env python3
"""The PySpark connector (issue #7) against a Headwater server this script starts.

Measures, on a ``local[2]`` session, over one stream of ``--entries`` (default 1,000,000)
entries of 100 bytes (one field ``p`` with a 99-byte value):

  * streaming read: ``readStream.format("headwater")`` with ``trigger(availableNow=True)`` into
    the ``noop`` sink, whole query wall time including Spark's per-query and per-batch overhead
    (target >= 100,000 entries/s), and the rate of its micro-batches as Spark reports it
    (``processedRowsPerSecond``: rows over ``triggerExecution``; issue 37's target >= 1,000,000
    entries/s); then again with ``maxRecordsPerBatch`` (the driver pages the IDs of each batch
    first: Redis has no "n-th ID") and with ``maxMillisPerBatch`` (cut by ID time: two
    single-entry reads per batch);
  * batch read: ``read.format("headwater")`` into ``noop``, against a plain redis-py loop of
    ``XRANGE key (<last> + COUNT 10000`` with its default reply parsing into dicts
    (target: at most 2x the loop's time);
  * write: ``--write-rows`` (default 500,000) rows of a 100-byte string column appended with
    ``XADD key IDMP <pid> <iid> * ...`` (position idempotence, the default), checked by XLEN
    (target >= 50,000 rows/s), and the same with plain XADD (``idempotence=none``): the ratio
    of the two is what exactly-once costs (issue 37's target >= 0.95).

Each figure is the median of ``--repeat`` runs; the Spark session is started once and warmed
up by a small read and write and two untimed streaming reads of the whole stream first. The
box is shared: the script prints the load average and the share of CPU other processes used
during each timed run (like bench.py's "noisy" flag), and the share of a CPU the server used
(near 100%: the server is the bottleneck).

Usage::

    .venv/bin/python benchmarks/bench_spark.py [--quick] [--repeat 3] [--entries 1000000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import redis

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import (
    CLOCK_TICKS,
    REPO,
    ServerProcess,
    cpu_times,
    free_port,
    headwater_argv,
    running,
)

KEY = "bench"
VALUE = b"v" * 99  # field "p" (1 byte) + 99-byte value: 100 bytes per entry
LOAD_BATCH = 2_000
STREAM_TARGET = 100_000.0  # entries/s, whole query
STREAM_BATCH_TARGET = 1_000_000.0  # entries/s in Spark's micro-batches, no limit (issue 37)
#: untimed streaming reads of the whole stream first: a query that runs for hours runs JIT-
#: compiled code; the first reads of a fresh JVM run 20-30% slower
WARMUP_STREAMS = 2
BATCH_RATIO_TARGET = 2.0  # connector time / redis-py loop time
WRITE_TARGET = 50_000.0  # rows/s
WRITE_RATIO_TARGET = 0.95  # exactly-once (IDMP) rows/s over plain XADD's (issue 37)


@dataclass
class Timed:
    seconds: float
    background: float  # share of all CPUs used by other processes meanwhile
    server: float  # share of one CPU the Headwater server used


def timed(action: Callable[[], object], own_pids: Sequence[int], server_pid: int) -> Timed:
    """Run ``action``; also measure how busy the box was with work not started by us, and how
    busy the server was (near 100%: the server is the bottleneck)."""
    busy0, total0 = cpu_times()
    own0, server0 = _tree_ticks(own_pids), _tree_ticks([server_pid])
    start = time.perf_counter()
    action()
    seconds = time.perf_counter() - start
    busy1, total1 = cpu_times()
    own = _tree_ticks(own_pids) - own0
    other = max(busy1 - busy0 - own, 0)
    server = (_tree_ticks([server_pid]) - server0) / CLOCK_TICKS / seconds
    return Timed(seconds, other / (total1 - total0) if total1 > total0 else 0.0, server)


def _tree_ticks(roots: Sequence[int]) -> int:
    """CPU ticks (user + system, children reaped included) of ``roots`` and their descendants."""
    total = 0
    for pid in _with_descendants(roots):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(x) for x in fields[11:15])
    return total


def _with_descendants(roots: Sequence[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found, todo = list(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


# -- the workloads ---------------------------------------------------------------------------


def load_stream(client: redis.Redis, entries: int) -> None:
    for start in range(0, entries, LOAD_BATCH):
        pipe = client.pipeline(transaction=False)
        for _ in range(min(LOAD_BATCH, entries - start)):
            pipe.xadd(KEY, {"p": VALUE})
        pipe.execute()


def redis_py_loop(port: int) -> int:
    """The baseline: page through the stream with redis-py's ordinary XRANGE."""
    client = redis.Redis(port=port)
    count, last = 0, "-"
    while True:
        page = client.xrange(KEY, last, "+", count=10_000)
        count += len(page)
        if len(page) < 10_000:
            return count
        last = "(" + page[-1][0].decode()


def batch_read(spark: Any, url: str) -> None:
    df = spark.read.format("headwater").option("url", url).option("streams", KEY)
    df.option("minPartitions", "2").load().write.format("noop").mode("overwrite").save()


def stream_read(spark: Any, url: str, limit: tuple[str, int] | None) -> list[dict[str, Any]]:
    """availableNow into noop; ``limit`` is (option, value), e.g. ("maxRecordsPerBatch", n).
    Returns the query's progress reports, one per micro-batch."""
    checkpoint = tempfile.mkdtemp(prefix="bench-spark-ck-", dir=_tmpfs())
    reader = spark.readStream.format("headwater").option("url", url).option("streams", KEY)
    reader = reader.option("minPartitions", "2")
    if limit is not None:
        reader = reader.option(*limit)
    query = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    return list(query.recentProgress)


def triggers_rate(progress: Sequence[dict[str, Any]]) -> float:
    """Rows a second over the query's micro-batches, as Spark counts them (its
    ``processedRowsPerSecond``: input rows over ``triggerExecution``), summed over batches."""
    rows = sum(p["numInputRows"] for p in progress)
    ms = sum(p["durationMs"].get("triggerExecution", 0) for p in progress)
    return rows * 1000.0 / ms if ms else 0.0


def write_rows(spark: Any, url: str, key: str, rows: int, idempotence: str = "position") -> None:
    df = spark.range(0, rows, numPartitions=2).selectExpr("lpad(cast(id as string), 99, 'v') as p")
    writer = df.write.format("headwater").mode("append").option("url", url).option("stream", key)
    writer.option("idempotence", idempotence).save()


def _tmpfs() -> str | None:
    return "/dev/shm" if Path("/dev/shm").is_dir() else None


# -- the run -------------------------------------------------------------------------------


def start_spark() -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def median_run(label: str, runs: list[Timed], per_second: int | None = None) -> float:
    seconds = statistics.median(run.seconds for run in runs)
    background = max(run.background for run in runs)
    server = statistics.median(run.server for run in runs)
    rate = f"  {per_second / seconds:>10,.0f} /s" if per_second else ""
    each = ", ".join(f"{run.seconds:.2f}" for run in runs)
    print(
        f"{label:<56} {seconds:7.2f} s{rate}   runs [{each}]  "
        f"server CPU {server:.0%}, other CPU <= {background:.0%}"
    )
    return seconds


def run(args: argparse.Namespace) -> int:
    port = free_port()
    data_dir = Path(tempfile.mkdtemp(prefix="bench-spark-hw-"))
    server = ServerProcess(
        "headwater", headwater_argv(args.python, port, data_dir), port, data_dir / "log"
    )
    with running([server]):
        client = redis.Redis(port=port)
        url = f"redis://127.0.0.1:{port}/0"
        started = time.perf_counter()
        load_stream(client, args.entries)
        took = time.perf_counter() - started
        print(f"loaded {client.xlen(KEY):,} entries of 100 bytes in {took:.1f} s")
        spark = start_spark()
        try:
            return measure(spark, url, port, server, args)
        finally:
            spark.stop()


@dataclass
class Bench:
    """What every figure needs: the session, the server, and the processes that are ours."""

    spark: Any
    url: str
    port: int
    pids: list[int]
    server_pid: int
    args: argparse.Namespace

    def runs(self, action: Callable[[], object]) -> list[Timed]:
        return [timed(action, self.pids, self.server_pid) for _ in range(self.args.repeat)]


def measure(
    spark: Any, url: str, port: int, server: ServerProcess, args: argparse.Namespace
) -> int:
    bench = Bench(spark, url, port, [os.getpid(), server.pid or 0], server.pid or 0, args)
    write_rows(spark, url, "warmup", 1000)  # JVM, Python workers and imports warm
    spark.read.format("headwater").option("url", url).option("streams", "warmup").load().count()
    for _ in range(WARMUP_STREAMS):  # the JIT compiles the Arrow-to-row path of a long query
        stream_read(spark, url, None)
    failures = [*batch_figures(bench), *stream_figures(bench), *write_figures(bench)]
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"load average at the end: {load}; nproc {os.cpu_count()}")
    if failures:
        print(f"short of target: {', '.join(failures)}")
    return 0


def batch_figures(bench: Bench) -> list[str]:
    n = bench.args.entries
    loop_s = median_run(
        "redis-py XRANGE loop (COUNT 10000)", bench.runs(lambda: redis_py_loop(bench.port)), n
    )
    batch = bench.runs(lambda: batch_read(bench.spark, bench.url))
    ratio = median_run("connector batch read -> noop", batch, n) / loop_s
    print(f"{'  batch read / redis-py loop':<56} {ratio:7.2f} x   (target <= {BATCH_RATIO_TARGET})")
    return ["batch read"] if ratio > BATCH_RATIO_TARGET else []


def stream_figures(bench: Bench) -> list[str]:
    """Each streaming run twice over: the whole query's wall time (which includes the ~1 s
    Spark takes to start the source's Python process on the driver, once a query), and the
    rate of its micro-batches as Spark reports it (the target's measure)."""
    n, args, failures = bench.args.entries, bench.args, []
    limits: list[tuple[str, int] | None] = [None]
    limits += [("maxRecordsPerBatch", rows) for rows in args.max_records]
    limits += [("maxMillisPerBatch", ms) for ms in args.max_millis]
    for limit in limits:
        label = "connector streaming read" + (f", {limit[0]}={limit[1]}" if limit else "")
        reports: list[list[dict[str, Any]]] = []

        def run(lim: tuple[str, int] | None = limit, into: list[Any] = reports) -> None:
            into.append(stream_read(bench.spark, bench.url, lim))

        if n / median_run(label, bench.runs(run), n) < STREAM_TARGET:
            failures.append(label)
        rates = [triggers_rate(report) for report in reports]
        rate = statistics.median(rates)
        each = ", ".join(f"{r:,.0f}" for r in rates)
        wanted = f"(target >= {STREAM_BATCH_TARGET:,.0f})" if limit is None else ""
        print(
            f"{'  its micro-batches (Spark processedRowsPerSecond)':<56} {rate:>18,.0f} /s   "
            f"runs [{each}]  {wanted}"
        )
        if limit is None and rate < STREAM_BATCH_TARGET:
            failures.append(label + " (micro-batches)")
    return failures


def write_figures(bench: Bench) -> list[str]:
    """IDMP (position mode, the default) and plain XADD (idempotence=none), taking turns on
    fresh streams; their ratio is what exactly-once costs."""
    rows, failures = bench.args.write_rows, []
    modes = (("position", "XADD IDMP (position)"), ("none", "XADD (idempotence=none)"))
    runs: dict[str, list[Timed]] = {mode: [] for mode, _ in modes}
    for i in range(bench.args.repeat):
        for mode, _ in modes:
            key = f"written-{mode}-{i}"
            action = partial(write_rows, bench.spark, bench.url, key, rows, mode)
            runs[mode].append(timed(action, bench.pids, bench.server_pid))
            assert redis.Redis(port=bench.port).xlen(key) == rows
    seconds = {
        mode: median_run(f"connector write, {label}", runs[mode], rows) for mode, label in modes
    }
    if rows / seconds["position"] < WRITE_TARGET:
        failures.append("write")
    ratio = seconds["none"] / seconds["position"]
    print(f"{'  exactly-once / plain write':<56} {ratio:7.2f} x   (target >= {WRITE_RATIO_TARGET})")
    if ratio < WRITE_RATIO_TARGET:
        failures.append("exactly-once write ratio")
    return failures


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="100,000 entries, one run")
    parser.add_argument("--repeat", type=int, default=None, help="runs per figure (default 3)")
    parser.add_argument("--entries", type=int, default=None, help="stream size (1,000,000)")
    parser.add_argument("--write-rows", type=int, default=None, help="rows written (500,000)")
    parser.add_argument(
        "--max-records",
        type=int,
        nargs="*",
        default=[250_000],
        help="maxRecordsPerBatch values for extra streaming runs (default 250000)",
    )
    parser.add_argument(
        "--max-millis",
        type=int,
        nargs="*",
        default=[5_000],
        help="maxMillisPerBatch values for extra streaming runs (default 5000)",
    )
    parser.add_argument("--python", default=str(REPO / ".venv" / "bin" / "python"))
    args = parser.parse_args(argv)
    args.repeat = args.repeat or (1 if args.quick else 3)
    args.entries = args.entries or (100_000 if args.quick else 1_000_000)
    args.write_rows = args.write_rows or (50_000 if args.quick else 500_000)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    return run(parse_args(argv))


if __name__ == "__main__":
    sys.exit(main())
