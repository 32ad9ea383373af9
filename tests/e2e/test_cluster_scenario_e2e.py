"""Issue #36's scenario on an all-Headwater cluster: ``redis-cli --cluster create`` with three
primaries and three replicas; a producer appending with XADD IDMP (each entry confirmed by
WAIT on the connection that wrote it, retried with the same idempotent ID on any failure)
and a consumer group read through redis-py's ``RedisCluster``; half the slots resharded under
that load; then kill -9 of a primary, whose replica takes over. Every confirmed entry is
there exactly once, and the group's pending entries are what the consumer left pending."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator

import pytest
import redis
from redis.cluster import RedisCluster

from headwater.cluster.slots import key_slot
from tests.cluster_helpers import (
    address,
    check,
    create,
    node_id,
    redis_cli,
    role,
    start_node,
    wait_until_ok,
)
from tests.helpers import ServerProcess

pytestmark = pytest.mark.e2e

STREAMS = [f"orders:{{{i}}}" for i in range(12)]
E = redis.exceptions
#: what a producer retries after refreshing its map of the slots
RETRIABLE = (E.MovedError, E.TryAgainError, E.ClusterDownError, E.BusyLoadingError, E.ReadOnlyError)


@pytest.fixture
def cluster() -> Iterator[list[ServerProcess]]:
    nodes = [start_node("headwater") for _ in range(6)]
    yield nodes
    for node in nodes:
        node.stop()


class Router:
    """Which node serves a slot, refreshed from CLUSTER SLOTS whenever a reply says the map
    moved; one connection per node (WAIT counts the writes of its own connection)."""

    def __init__(self, nodes: list[ServerProcess]) -> None:
        self.ports = [n.port for n in nodes]
        self.owner: dict[int, int] = {}
        self.clients: dict[int, redis.Redis] = {}
        self.refresh()

    def client(self, port: int) -> redis.Redis:
        if port not in self.clients:
            self.clients[port] = redis.Redis(port=port, socket_timeout=5)
        return self.clients[port]

    def refresh(self) -> None:
        for port in self.ports:
            try:
                ranges = self.client(port).execute_command("CLUSTER", "SLOTS")
            except redis.RedisError:
                continue
            for start, end, master, *_ in ranges:
                for slot in range(start, end + 1):
                    self.owner[slot] = int(master[1])
            return

    def close(self) -> None:
        for client in self.clients.values():
            client.close()


class Producer(threading.Thread):
    def __init__(self, nodes: list[ServerProcess]) -> None:
        super().__init__(daemon=True)
        self.router = Router(nodes)
        self.stop = threading.Event()
        self.confirmed: set[int] = set()
        self.sent = 0
        self.retries = 0
        self.why: Counter[str] = Counter()

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            self.append(n)
            n += 1
        self.router.close()

    def append(self, n: int) -> None:
        stream = STREAMS[n % len(STREAMS)]
        asking_port: int | None = None
        while not self.stop.is_set():
            port = asking_port or self.router.owner[key_slot(stream.encode())]
            pipe = self.router.client(port).pipeline(transaction=False)
            if asking_port:
                pipe.execute_command("ASKING")
            pipe.execute_command("XADD", stream, "IDMP", "producer", f"e{n}", "*", "n", n)
            pipe.execute_command("WAIT", 1, 2000)
            try:
                replies = pipe.execute(raise_on_error=False)
            except (redis.ConnectionError, redis.TimeoutError) as exc:
                self.router.clients.pop(port, None)
                self._retry(type(exc).__name__)
                continue
            added, acked = replies[-2], replies[-1]
            if isinstance(added, E.AskError) and not isinstance(added, E.MovedError):
                asking_port = added.port
                self.why["ASK"] += 1
                continue
            if isinstance(added, redis.ResponseError):
                assert isinstance(added, RETRIABLE), repr(added)
                asking_port = None
                self._retry(type(added).__name__)
                continue
            self.sent += 1
            if isinstance(acked, int) and acked >= 1:
                self.confirmed.add(n)
                return
            self._retry("WAIT")  # (not on a replica yet: sent again, IDMP keeps it once)

    def _retry(self, why: str) -> None:
        self.why[why] += 1
        self.retries += 1
        time.sleep(0.05)
        self.router.refresh()


class Consumer(threading.Thread):
    """Reads through RedisCluster as group ``g``; acknowledges every other entry."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.rc = RedisCluster(host="127.0.0.1", port=port)
        self.stop = threading.Event()
        self.pending: dict[str, set[bytes]] = {s: set() for s in STREAMS}
        self.read = 0

    def run(self) -> None:
        flip = False
        while not self.stop.is_set():
            for stream in STREAMS:
                try:
                    reply = self.rc.xreadgroup("g", "c1", {stream: ">"}, count=20)
                except redis.RedisError:
                    time.sleep(0.05)
                    continue
                for _, entries in reply:
                    for entry_id, _ in entries:
                        self.read += 1
                        flip = not flip
                        if flip:
                            self.rc.xack(stream, "g", entry_id)
                        else:
                            self.pending[stream].add(entry_id)
            time.sleep(0.01)
        self.rc.close()


def barrier(nodes: list[ServerProcess]) -> None:
    """Everything written so far is on a replica: on each primary, a write and a WAIT on one
    connection (the replication stream is ordered, so earlier writes are there too)."""
    for node in nodes:
        if role(node) != "master":
            continue
        client = redis.Redis(port=node.port)
        try:
            slots = client.execute_command("CLUSTER", "SLOTS")
            mine = [r for r in slots if int(r[2][1]) == node.port]
            if not mine:
                continue
            key = next(
                k
                for k in (f"barrier{i}" for i in range(100_000))
                if mine[0][0] <= key_slot(k.encode()) <= mine[0][1]
            )
            client.set(key, "1")
            assert client.wait(1, 5000) >= 1
        finally:
            client.close()


def test_create_produce_reshard_and_fail_over(cluster: list[ServerProcess]) -> None:
    create(cluster, replicas=1)
    check(cluster[0])
    setup = RedisCluster(host="127.0.0.1", port=cluster[0].port)
    for stream in STREAMS:
        setup.xgroup_create(stream, "g", id="$", mkstream=True)
    setup.close()
    producer, consumer = Producer(cluster), Consumer(cluster[0].port)
    producer.start()
    consumer.start()
    time.sleep(1)
    masters = [n for n in cluster if role(n) == "master"]
    target = masters[0]
    began = time.monotonic()
    redis_cli(
        "--cluster", "reshard", address(cluster[1]), "--cluster-from", "all",
        "--cluster-to", node_id(target), "--cluster-slots", "8192", "--cluster-yes",
        timeout=600,
    )  # fmt: skip
    resharded = time.monotonic()
    wait_until_ok(cluster)
    time.sleep(0.5)
    consumer.stop.set()
    consumer.join(30)
    barrier(cluster)
    os.kill(target.proc.pid, signal.SIGKILL)
    target.proc.wait()
    survivors = [n for n in cluster if n is not target]
    deadline = time.monotonic() + 30
    while not any(role(n) == "master" and n not in masters for n in survivors):
        assert time.monotonic() < deadline, "no replica took over"
        time.sleep(0.2)
    took_over = time.monotonic()
    time.sleep(1)  # (writes go on against the new primary)
    producer.stop.set()
    producer.join(60)
    # the reshard and the kill were felt: streams moved away (MOVED), a primary vanished
    assert producer.why["MovedError"] and producer.why["ConnectionError"], producer.why
    print(
        f"reshard of 8192 slots {resharded - began:.1f} s, failover {took_over - resharded:.1f} s;"
        f" {len(producer.confirmed)} entries confirmed, {producer.sent} sent,"
        f" {producer.retries} retries {dict(producer.why)}; {consumer.read} read by the group"
    )
    rc = RedisCluster(host="127.0.0.1", port=survivors[0].port)
    try:
        seen: list[int] = []
        for stream in STREAMS:
            seen += [int(fields[b"n"]) for _, fields in rc.xrange(stream)]
        assert len(seen) == len(set(seen)), "an entry appended twice"
        missing = producer.confirmed - set(seen)
        assert not missing, f"{len(missing)} confirmed entries lost"
        for stream in STREAMS:
            pel = rc.xpending_range(stream, "g", min="-", max="+", count=100_000)
            assert {p["message_id"] for p in pel} == consumer.pending[stream], stream
    finally:
        rc.close()
    out = subprocess.run(
        ["redis-cli", "--cluster", "check", address(survivors[0])],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert "[OK] All 16384 slots covered." in out.stdout, out.stdout
