"""Fixtures for the Spark connector tests: one SparkSession for the whole run, one Headwater
server per module.

A local session costs 10-25 s to start on a 2-core box, so every Spark test shares the
session-scoped ``spark`` fixture (master ``local[2,4]``: two threads, and a task may fail up to
four times, so tests can make tasks fail and watch the retry). Python workers run this venv's
interpreter with the repository on ``PYTHONPATH``, so classes defined in ``tests.spark`` can be
unpickled by them. Checkpoints go to tmpfs when there is one (a micro-batch costs half as much).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.helpers import ROOT, ServerProcess, start_headwater

pytest.importorskip("pyspark")

from pyspark.sql import SparkSession

#: Set before the session starts: Python workers (children of the JVM) inherit it.
SCRATCH_ENV = "HEADWATER_SPARK_TEST_DIR"


def _scratch_root() -> str:
    shm = Path("/dev/shm")
    return tempfile.mkdtemp(prefix="hw-spark-", dir=shm if shm.is_dir() else None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under pytest-xdist (``--dist loadgroup``) every Spark test runs on one worker, which
    starts the one session they share."""
    for item in items:
        if "tests/spark/" in item.nodeid:
            item.add_marker(pytest.mark.xdist_group("spark"))


@pytest.fixture(scope="session")
def scratch() -> Iterator[Path]:
    """A per-run directory (tmpfs if possible) for checkpoints and test markers."""
    root = _scratch_root()
    os.environ[SCRATCH_ENV] = root
    yield Path(root)
    shutil.rmtree(root, ignore_errors=True)


def spark_env() -> None:
    """Make Python workers use this interpreter and see the repository's packages."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    os.environ["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))


def build_session(scratch: Path, master: str = "local[2,4]") -> SparkSession:
    spark_env()
    builder = (
        SparkSession.builder.master(master)
        .appName("headwater-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.local.dir", str(scratch / "local"))
        .config("spark.sql.warehouse.dir", str(scratch / "warehouse"))
        .config("spark.sql.streaming.forceDeleteTempCheckpointLocation", "true")
        .config("spark.driver.extraJavaOptions", "-XX:+UseSerialGC")
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


@pytest.fixture(scope="session")
def spark(scratch: Path) -> Iterator[SparkSession]:
    session = build_session(scratch)
    yield session
    session.stop()


@pytest.fixture
def checkpoint(scratch: Path, request: pytest.FixtureRequest) -> Path:
    path = Path(tempfile.mkdtemp(prefix=f"ck-{request.node.name[:40]}-", dir=scratch))
    shutil.rmtree(path)
    return path


@pytest.fixture(scope="module")
def hw_server() -> Iterator[ServerProcess]:
    server = start_headwater("--appendonly", "no", "--save", "")
    yield server
    server.stop()


@pytest.fixture(scope="module")
def hw_url(hw_server: ServerProcess) -> str:
    return f"redis://127.0.0.1:{hw_server.port}/0"


@pytest.fixture(scope="module")
def r(hw_server: ServerProcess) -> Iterator[redis.Redis]:
    client = redis.Redis(port=hw_server.port, decode_responses=True)
    yield client
    client.close()
