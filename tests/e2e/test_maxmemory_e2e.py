"""maxmemory enforced over TCP (issue 33): the issue's case (50 MB, allkeys-lru, a runaway
writer) stays under the limit with keys evicted; each policy evicts what it should (LRU the
idle keys, LFU the rarely read, volatile-* only keys with a TTL, volatile-ttl the nearest
expiry first); evictions reach the AOF and a replica as DEL, fire the evicted event and
invalidate tracking clients; noeviction answers -OOM to a runaway producer and the server
lives; maxmemory-clients evicts the client holding the most output."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.helpers import ServerProcess, start_headwater
from tests.support.replicas import connect, in_step, wait_until

MB = 1024 * 1024


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    process = start_headwater("--appendonly", "yes")
    yield process
    process.stop()


def _counted(client: redis.Redis) -> int:
    """used_memory as maxmemory counts it (the meter runs while maxmemory is set)."""
    if not int(client.config_get("maxmemory")["maxmemory"]):
        client.config_set("maxmemory", str(1 << 40))
    memory = client.info("memory")
    return int(memory["used_memory"]) - int(memory["mem_not_counted_for_evict"])


def _fill(client: redis.Redis, count: int, prefix: str = "k", size: int = 100) -> None:
    with client.pipeline(transaction=False) as pipe:
        for i in range(count):
            pipe.set(f"{prefix}:{i}", "x" * size)
            if i % 1000 == 999:
                pipe.execute()
        pipe.execute()


def test_the_issue_case_stays_under_the_limit(server: ServerProcess) -> None:
    client = connect(server)
    client.config_set("maxmemory", "50mb")
    client.config_set("maxmemory-policy", "allkeys-lru")
    _fill(client, 600_000)
    info = client.info("all")
    assert info["evicted_keys"] > 0
    assert info["used_memory"] <= 50 * MB + MB  # (one command's worth over, at most)
    assert 200_000 < client.dbsize() < 600_000


def test_lru_evicts_the_idle_keys(server: ServerProcess) -> None:
    client = connect(server)
    _fill(client, 5_000, "old")
    time.sleep(1.1)  # (LRU's clock counts seconds)
    hot = [f"old:{i}" for i in range(0, 5_000, 10)]
    for key in hot:
        client.get(key)
    used = _counted(client)
    client.config_set("maxmemory-policy", "allkeys-lru")
    client.config_set("maxmemory", str(used))
    _fill(client, 3_000, "new")
    assert client.info("stats")["evicted_keys"] > 2_000
    survivors = sum(client.exists(key) for key in hot)
    assert survivors > 0.9 * len(hot)  # the sampled approximation spares recent keys


def test_volatile_policies_touch_only_keys_with_a_ttl(server: ServerProcess) -> None:
    client = connect(server)
    _fill(client, 2_000, "keep")
    with client.pipeline(transaction=False) as pipe:
        for i in range(2_000):
            pipe.set(f"ttl:{i}", "x" * 100, ex=1000 + i)
        pipe.execute()
    used = _counted(client)
    client.config_set("maxmemory-policy", "volatile-ttl")
    client.config_set("maxmemory", str(used - 50_000))
    client.set("trigger", "v")
    assert all(client.exists(f"keep:{i}") for i in range(0, 2_000, 50))
    gone = [i for i in range(2_000) if not client.exists(f"ttl:{i}")]
    assert gone and sum(gone) / len(gone) < 1_000  # the nearest expiries went first
    client.config_set("maxmemory", "1")
    for i in range(2_000):
        client.delete(f"ttl:{i}")
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        client.set("more", "v")  # nothing volatile is left to evict
    assert client.get("keep:0") is not None


def test_evictions_reach_the_aof_the_replica_events_and_tracking(server: ServerProcess) -> None:
    replica = start_headwater("--replicaof", "127.0.0.1", str(server.port))
    try:
        client = connect(server)
        events = client.pubsub()
        client.config_set("notify-keyspace-events", "Ee")
        events.psubscribe("__keyevent@0__:evicted")
        cached = redis.Redis(port=server.port, protocol=3)
        cached.execute_command("CLIENT", "TRACKING", "ON")
        _fill(client, 1_000)
        assert cached.get("k:0") is not None  # tracked
        client.config_set("maxmemory-policy", "allkeys-random")
        client.config_set("maxmemory", str(_counted(client) - 20_000))
        client.set("trigger", "v")
        client.config_set("maxmemory", "0")  # (no more evictions: the counts stay put)
        evicted = client.info("stats")["evicted_keys"]
        assert evicted > 0
        wait_until(lambda: in_step(client, connect(replica)), what="the replica")
        assert connect(replica).dbsize() == client.dbsize()
        aof = b"".join(p.read_bytes() for p in Path(server.workdir).rglob("*.aof"))
        assert aof.count(b"$3\r\nDEL\r\n") >= evicted
        messages = [events.get_message(timeout=1) for _ in range(evicted + 1)]
        assert sum(1 for m in messages if m and m["type"] == "pmessage") == evicted
    finally:
        replica.stop()


def test_noeviction_answers_oom_to_a_runaway_producer(server: ServerProcess) -> None:
    client = connect(server)
    client.config_set("maxmemory", "5mb")
    refused = 0
    for _ in range(100_000):
        try:
            client.xadd("runaway", {"payload": "x" * 200})
        except redis.exceptions.OutOfMemoryError:  # (any other error fails the test)
            refused += 1
            if refused > 100:
                break
    assert refused > 100
    assert client.xlen("runaway") > 1_000
    assert client.ping()
    client.config_set("maxmemory", "0")
    client.xadd("runaway", {"payload": "ok"})


def test_maxmemory_clients_evicts_the_biggest_client(server: ServerProcess) -> None:
    client = connect(server)
    client.set("big", "x" * 2_000_000)
    greedy = redis.Redis(port=server.port, socket_timeout=5).connection_pool.get_connection()
    greedy.send_command("CLIENT", "SETNAME", "greedy")
    greedy.read_response()
    for _ in range(20):  # replies it does not read pile up in its output buffer
        greedy.send_command("GET", "big")
    client.config_set("maxmemory-clients", "4mb")  # (the kernel holds part of the output)
    wait_until(lambda: client.info("stats")["evicted_clients"] >= 1, what="a client evicted")
    names = [c["name"] for c in client.client_list()]
    assert "greedy" not in names
