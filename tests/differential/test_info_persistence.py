"""INFO persistence has Redis 7.0's fields, in Redis's order (the values are each server's
own), so that tools reading them (redis_exporter, RedisInsight, scripts) find them; plus
``snapshot_lazy_nodes``, Headwater's own. The timings move as Redis's do: -1 until a
BGSAVE or a rewrite ran, then its seconds, and the counters count."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from tests.helpers import RawClient, ServerProcess, start_headwater, start_redis
from tests.support.replicas import wait_until

pytestmark = pytest.mark.redis

OWN = {"snapshot_lazy_nodes"}


def names(port: int) -> list[str]:
    client = RawClient(port)
    try:
        text = client.call("INFO", "persistence").decode()
    finally:
        client.close()
    return [line.split(":")[0] for line in text.splitlines() if ":" in line]


@pytest.fixture
def both() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    ours = start_headwater("--appendonly", "yes")
    theirs = start_redis("--appendonly", "yes")
    yield ours, theirs
    ours.stop()
    theirs.stop()


def test_the_fields_are_redis_fields_in_redis_order(
    both: tuple[ServerProcess, ServerProcess],
) -> None:
    ours, theirs = both
    assert [n for n in names(ours.port) if n not in OWN] == names(theirs.port)
    for server in both:
        redis.Redis(port=server.port).config_set("appendonly", "no")
    assert [n for n in names(ours.port) if n not in OWN] == names(theirs.port)


def test_saves_and_rewrites_are_timed_and_counted(
    both: tuple[ServerProcess, ServerProcess],
) -> None:
    for r in (redis.Redis(port=server.port) for server in both):
        before = r.info("persistence")
        assert (before["rdb_last_bgsave_time_sec"], before["rdb_current_bgsave_time_sec"]) == (
            -1, -1,
        )  # fmt: skip
        assert before["aof_last_rewrite_time_sec"] == -1
        r.set("k", "v")
        r.bgsave()
        wait_until(lambda r=r: r.info("persistence")["rdb_bgsave_in_progress"] == 0)
        time.sleep(0.2)
        r.bgrewriteaof()
        wait_until(lambda r=r: r.info("persistence")["aof_rewrite_in_progress"] == 0)
        after = r.info("persistence")
        assert after["rdb_last_bgsave_time_sec"] >= 0
        assert after["rdb_saves"] == before["rdb_saves"] + 1
        assert after["aof_last_rewrite_time_sec"] >= 0
        assert after["aof_rewrites"] == before["aof_rewrites"] + 1
        assert after["aof_base_size"] > 0
