"""Rocket Rides with Spark (issue #7, UNIFIED-LOG.md).

The acceptance scenario ("the same scenario is a test"): the demo runs as `make demo` runs it,
at a smaller scale — a Headwater server, the API, the streamer, two plain consumers, the group
reader and the Spark consumer, faults on, Headwater killed -9 and restarted mid-run, the stream
trimmed to about 1,000 entries while the consumers (Spark with failOnDataLoss on) read it. It
must exit 0 (every total equal to the rides table's to the cent, the Spark reconciliation over
the archive and the rest of the stream included, no trim past a checkpoint) and leave no process
behind. The other tests pin the Spark consumer's exactly-once rules on the
shared session: a crashed micro-batch commits nothing, a replayed one is skipped by its batch
id, and a new checkpoint cannot count a ride twice.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from examples.rocket_rides import db
from examples.rocket_rides.faults import Faults, InjectedCrash
from examples.rocket_rides.log import decode
from examples.rocket_rides.reconcile import archive_below, read_all, summarize_records
from examples.rocket_rides.spark_jobs import SparkConsumer, read_batch, reconcile, summarize
from examples.rocket_rides.streamer import Streamer
from pyspark.sql import SparkSession

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "rocket_rides" / "demo.py"
RIDES = 2_000
CONSUMERS = ("consumer-0", "consumer-1", "group-reader", "spark")

pytestmark = [
    pytest.mark.spark,
    pytest.mark.timeout(900),
    pytest.mark.skipif(shutil.which("java") is None, reason="Spark needs Java 17"),
    pytest.mark.skipif(importlib.util.find_spec("pyspark") is None, reason="needs pyspark"),
]


def run_demo(run_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(DEMO), "--rides", str(RIDES), "--run-dir", str(run_dir), *flags]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=840)


def table_rows(stdout: str) -> dict[str, list[str]]:
    """The demo's table as {row label: [cells]} (labels without the "(kind)" suffix)."""
    rows = {}
    for line in stdout.splitlines():
        if line.startswith("| ") and line.endswith(" |"):
            cells = [c.strip() for c in line[1:-1].split("|")]
            rows[cells[0].split(" (")[0]] = cells[1:]
    return rows


def removed_by_trimming(stdout: str) -> int:
    found = re.findall(r"removed by trimming ([\d,]*\d)", stdout)
    assert len(found) == 1, stdout
    return int(found[0].replace(",", ""))


def processes_mentioning(text: str) -> list[str]:
    """Command lines of live processes that mention ``text`` (our run directory)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args and str(os.getpid()) != cmdline.parent.name:
            found.append(args)
    return found


def test_demo_with_faults_and_a_server_kill_agrees_to_the_cent(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    done = run_demo(run_dir, "--kill-server", "--seed", "11", "--keep-run-dir")
    report = f"stdout:\n{done.stdout[-4000:]}\nstderr:\n{done.stderr[-4000:]}"
    assert done.returncode == 0, report

    rows = table_rows(done.stdout)
    expected_total = rows["expected"][0]
    for name in CONSUMERS:
        total, last_ride, _crashes, agrees = rows[name]
        assert (total, last_ride, agrees) == (expected_total, f"{RIDES:,}", "yes"), report
    assert rows["reconciliation"][0] == expected_total and rows["reconciliation"][3] == "yes"

    recon = json.loads((run_dir / "reconciliation.json").read_text())
    assert (recon["entries"], recon["rides"], recon["duplicates"]) == (RIDES, RIDES, 0)
    assert recon["disagreeing"] == []
    # Trimmed while everyone read (MAXLEN ~ 1,000 of 2,000), never past a checkpoint.
    assert removed_by_trimming(done.stdout) > 0 and recon["archived_entries"] > 0, report
    assert (
        rows["trimming"][0].startswith("yes: ") and ", 0 past a checkpoint;" in rows["trimming"][0]
    )
    assert rows["first entry <= every checkpoint"][0].startswith("yes: "), report
    status = {p.stem: json.loads(p.read_text()) for p in (run_dir / "status").glob("*.json")}
    assert status["spark"]["batches"] >= 1
    assert sum(status[n].get("crashes", 0) for n in CONSUMERS) > 0  # faults did happen
    assert "Headwater kill -9: 1" in done.stdout
    assert processes_mentioning(str(run_dir)) == []


# -- the Spark consumer's exactly-once rules, on the shared session ---------------------------


@pytest.fixture
def rides_stream(hw_url: str, tmp_path: Path) -> tuple[db.Connection, str]:
    """Five rides (1.00 … 5.00) streamed to a stream of the test's own; the database with them."""
    key = f"rocket-rides-{tmp_path.name}"
    database = db.Database(f"sqlite:///{tmp_path / 'rides.db'}")
    database.create_schema(reset=True)
    conn = database.connect()
    for cents in (100, 200, 300, 400, 500):
        db.insert_ride(conn, cents)
    streamer = Streamer(conn, redis.Redis.from_url(hw_url), stream=key)
    while streamer.run_once():
        pass
    return conn, key


def test_spark_consumer_counts_a_micro_batch_once(
    spark: SparkSession, hw_url: str, checkpoint: Path, rides_stream: tuple[db.Connection, str]
) -> None:
    conn, key = rides_stream
    checkpoint.mkdir(parents=True)
    (checkpoint / "metadata").write_text('{"id": "query-1"}')  # what Spark writes at start
    consumer = SparkConsumer(
        "spark", conn, spark, hw_url, checkpoint, faults=Faults(script=iter([True])), stream=key
    )
    batch = read_batch(spark, hw_url, key)

    with pytest.raises(InjectedCrash):
        consumer.process_batch(batch, 0)  # crashes before its commit: nothing changed
    assert db.consumer_state(conn, "spark").total_cents == 0

    consumer.process_batch(batch, 0)  # Spark re-runs the batch after the restart
    consumer.process_batch(batch, 0)  # and once more (crash after commit, before Spark's log)
    state = db.consumer_state(conn, "spark")
    assert (state.total_cents, state.last_ride_id, state.last_batch_id) == (1_500, 5, 0)

    (checkpoint / "metadata").write_text('{"id": "query-2"}')  # a new checkpoint restarts ids
    consumer.process_batch(batch, 0)
    state = db.consumer_state(conn, "spark")
    assert (state.total_cents, state.query_id) == (1_500, "query-2")  # ride ids already counted


def test_spark_reconciliation_adds_the_archive_to_the_rest_of_the_stream(
    spark: SparkSession, hw_url: str, r: redis.Redis, rides_stream: tuple[db.Connection, str]
) -> None:
    """Rides 1-2 archived and trimmed: Spark reads from the archive's upto (inclusive) on."""
    _, key = rides_stream
    third = decode(r.xrange(key, "-", "+")[2][0])
    archive_below(r, key, third)
    r.xtrim(key, minid=third, approximate=False)  # exact: two entries really go
    assert r.xlen(key) == 3
    assert read_batch(spark, hw_url, key, third).count() == 3
    result = reconcile(spark, hw_url, [], stream=key).to_dict()
    assert (result["total_cents"], result["last_ride_id"], result["entries"]) == (1_500, 5, 5)
    assert (result["archived_upto"], result["archived_entries"]) == (third, 2)


def test_spark_summary_matches_the_python_reconciliation(
    spark: SparkSession, hw_url: str, r: redis.Redis, rides_stream: tuple[db.Connection, str]
) -> None:
    _, key = rides_stream
    r.xadd(key, {"action": "create", "object": "ride", "id": "2", "distance": "2.00"})
    expected = summarize_records(read_all(redis.Redis.from_url(hw_url), key), after_ride_id=1)
    got = summarize(read_batch(spark, hw_url, key), after_ride_id=1)
    assert got == expected
    assert (got.rows, got.duplicates, got.total_cents, got.last_ride_id) == (6, 1, 1_400, 5)
