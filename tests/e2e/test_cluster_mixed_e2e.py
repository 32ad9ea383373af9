"""Issue #36's mixed cluster, the live-migration path for cluster users: three redis-server
7.0 primaries, then a Headwater node joins (``redis-cli --cluster add-node``), takes slots
holding keys of every type by ``reshard`` (Redis MIGRATEs them to it with RESTORE-ASKING),
serves them, and gives them back (Headwater MIGRATEs them to Redis). ``--cluster check`` is
OK after each step, and every key reads the same as written, wherever it lives."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from tests.cluster_helpers import (
    address,
    check,
    create,
    node_id,
    redis_cli,
    start_node,
    wait_until_ok,
)
from tests.helpers import ServerProcess

pytestmark = pytest.mark.e2e


@pytest.fixture
def mixed() -> Iterator[tuple[list[ServerProcess], ServerProcess]]:
    redises = [start_node("redis") for _ in range(3)]
    ours = start_node("headwater")
    yield redises, ours
    for node in (*redises, ours):
        node.stop()


def fill(rc: RedisCluster, count: int) -> dict[str, object]:
    """Keys of every type, spread over the slots; returns what reading them must give."""
    expected: dict[str, object] = {}
    for i in range(count):
        kind = i % 7
        key = f"k{kind}:{i}"
        if kind == 0:
            rc.set(key, f"v{i}")
        elif kind == 1:
            rc.rpush(key, "a", str(i))
        elif kind == 2:
            rc.hset(key, mapping={"f": str(i), "g": "x"})
        elif kind == 3:
            rc.sadd(key, "m", str(i))
        elif kind == 4:
            rc.zadd(key, {"a": 1.5, str(i): i})
        elif kind == 5:
            rc.xadd(key, {"n": str(i)}, id="1-1")
            rc.xgroup_create(key, "g", id="0")
            rc.xreadgroup("g", "alice", {key: ">"})
        else:
            rc.set(key, str(i), px=600_000)
        expected[key] = read(rc, key)
    return expected


def read(rc: RedisCluster, key: str) -> object:
    kind = rc.type(key).decode()
    if kind == "string":
        return (rc.get(key), rc.pttl(key) > 0)
    if kind == "list":
        return rc.lrange(key, 0, -1)
    if kind == "hash":
        return rc.hgetall(key)
    if kind == "set":
        return sorted(rc.smembers(key))
    if kind == "zset":
        return rc.zrange(key, 0, -1, withscores=True)
    if kind == "stream":
        groups = [(g["name"], g["pending"]) for g in rc.xinfo_groups(key)]
        return (rc.xrange(key), groups, rc.xpending(key, "g")["pending"])
    raise AssertionError(f"{key}: {kind}")


def reshard(source: str, target: str, slots: int, via: ServerProcess) -> None:
    out = redis_cli(
        "--cluster", "reshard", address(via), "--cluster-from", source, "--cluster-to", target,
        "--cluster-slots", str(slots), "--cluster-yes", timeout=600,
    )  # fmt: skip
    assert "[ERR]" not in out, out


def keys_on(node: ServerProcess) -> int:
    client = redis.Redis(port=node.port)
    try:
        return int(client.dbsize())
    finally:
        client.close()


def test_a_headwater_node_joins_a_redis_cluster_and_moves_keys_both_ways(
    mixed: tuple[list[ServerProcess], ServerProcess],
) -> None:
    redises, ours = mixed
    create(redises)
    out = redis_cli("--cluster", "add-node", address(ours), address(redises[0]))
    assert "[OK] New node added correctly." in out, out
    wait_until_ok([*redises, ours])  # (every node has heard of the new one)
    rc = RedisCluster(host="127.0.0.1", port=redises[0].port)
    try:
        expected = fill(rc, 700)
        ours_id = node_id(ours)
        reshard("all", ours_id, 800, redises[1])
        wait_until_ok([*redises, ours])
        check(ours)
        check(redises[2])
        held = keys_on(ours)
        assert held > 0  # (800 of 16384 slots: ~34 of the 700 keys)
        rc.nodes_manager.initialize()
        for key, value in expected.items():
            assert read(rc, key) == value, key
        # the keys Headwater now serves take writes, and go back to Redis with them
        moved = [k for k in expected if rc.get_node_from_key(k).port == ours.port]
        assert len(moved) == held
        for key in moved:
            if key.startswith("k0:"):
                rc.append(key, "+")
                expected[key] = read(rc, key)
        reshard(ours_id, node_id(redises[0]), 800, redises[2])
        wait_until_ok([*redises, ours])
        check(redises[1])
        assert keys_on(ours) == 0
        rc.nodes_manager.initialize()
        for key, value in expected.items():
            assert read(rc, key) == value, key
    finally:
        rc.close()
