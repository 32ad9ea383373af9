"""The taskiq application of test_taskiq_e2e: a RedisStreamBroker and one task that records
each run in a hash (``done``: task number -> runs). A worker started with
``HW_TASKIQ_CRASH_MARKER`` dies (os._exit, no cleanup) at the start of its 30th task, once:
the marker file says it already did, so the worker taskiq starts again in its place works."""

from __future__ import annotations

import os

import redis.asyncio
from taskiq_redis import RedisStreamBroker

URL = os.environ.get("HW_TASKIQ_URL", "redis://127.0.0.1:6379")
CRASH_MARKER = os.environ.get("HW_TASKIQ_CRASH_MARKER")
CRASH_AT = 30

broker = RedisStreamBroker(
    URL,
    queue_name="tasks",
    xread_block=200,
    xread_count=20,
    idle_timeout=1500,  # ms: a dead worker's entries are claimed after this
    unacknowledged_lock_timeout=5,
)
_client: redis.asyncio.Redis | None = None
_runs = 0


@broker.task
async def record(n: int) -> None:
    global _client, _runs
    _runs += 1
    if CRASH_MARKER and _runs == CRASH_AT and not os.path.exists(CRASH_MARKER):  # noqa: ASYNC240
        os.close(os.open(CRASH_MARKER, os.O_CREAT | os.O_WRONLY))
        os._exit(1)  # mid-batch: this task and the rest of the batch stay pending
    if _client is None:
        _client = redis.asyncio.Redis.from_url(URL)
    await _client.hincrby("done", str(n), 1)
