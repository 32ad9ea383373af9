"""taskiq-redis's RedisStreamBroker over TCP (issue #16): its workers release a redis-py
``Lock`` (EVALSHA) after every XREADGROUP, and claim a dead worker's entries with
XAUTOCLAIM. 1000 tasks, two workers, one of which dies in the middle of a batch: every task
runs exactly once and nothing is left pending."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.helpers import ROOT, ServerProcess, start_headwater

pytest.importorskip("taskiq_redis")
pytestmark = pytest.mark.e2e

TASKS = 1000
ENQUEUE_PAUSE_S = 0.005


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    process = start_headwater()
    yield process
    process.stop()


def _worker(url: str, log: Path, crash_marker: Path | None) -> subprocess.Popen[bytes]:
    env = dict(os.environ, HW_TASKIQ_URL=url)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if crash_marker is not None:
        env["HW_TASKIQ_CRASH_MARKER"] = str(crash_marker)
    argv = [sys.executable, "-m", "taskiq", "worker", "tests.e2e.taskiq_app:broker",
            "--workers", "1", "--max-async-tasks", "1", "--no-configure-logging"]  # fmt: skip
    out = open(log, "wb")  # noqa: SIM115 (the worker writes to it until it is stopped)
    return subprocess.Popen(
        argv, env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
    )


async def _enqueue(url: str) -> None:
    os.environ["HW_TASKIQ_URL"] = url
    sys.path.insert(0, str(ROOT))
    from tests.e2e import taskiq_app

    broker = taskiq_app.RedisStreamBroker(url, queue_name="tasks")
    broker.register_task(taskiq_app.record.original_func, "tests.e2e.taskiq_app:record")
    await broker.startup()
    try:
        task = broker.find_task("tests.e2e.taskiq_app:record")
        assert task is not None
        # Paced (about 5 s for all): taskiq-redis reclaims a dead worker's entries (XAUTOCLAIM,
        # after idle_timeout) only right after a read that fetched new tasks, so the tasks
        # must still be coming when the crashed worker's entries have been idle that long.
        # Sent at once, a fast server can hand out every task first, and nothing reclaims
        # the dead worker's entries (on Redis too).
        for n in range(TASKS):
            await task.kiq(n)
            await asyncio.sleep(ENQUEUE_PAUSE_S)
    finally:
        await broker.shutdown()


def _wait_for(condition: object, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_two_workers_one_crashing_run_every_task_once(
    server: ServerProcess, tmp_path: Path
) -> None:
    url = f"redis://127.0.0.1:{server.port}"
    client = redis.Redis(port=server.port)
    marker = tmp_path / "crashed"
    workers = [
        _worker(url, tmp_path / "steady.log", None),
        _worker(url, tmp_path / "crashing.log", marker),
    ]
    try:
        # the workers create the group at "$": tasks sent before that would be skipped
        _wait_for(lambda: len(client.xinfo_groups("tasks")) == 1 if client.exists("tasks")
                  else False, 60, "the consumer group")  # fmt: skip
        time.sleep(1.0)  # both workers in their read loop
        asyncio.run(_enqueue(url))
        _wait_for(lambda: client.hlen("done") == TASKS, 240, f"{TASKS} tasks done")
        _wait_for(lambda: client.xpending("tasks", "taskiq")["pending"] == 0, 60, "no pending")
        runs = client.hgetall("done")
        assert sorted(int(n) for n in runs) == list(range(TASKS))
        assert {int(v) for v in runs.values()} == {1}, "a task ran twice"
        assert marker.exists(), "the crashing worker never crashed"
        assert client.xlen("tasks") == TASKS
    finally:
        for worker in workers:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.pid, signal.SIGTERM)
        for worker in workers:
            try:
                worker.wait(20)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()
