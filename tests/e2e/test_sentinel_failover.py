"""Issue 17's acceptance test: failover by real Redis Sentinel under write load.

Three Headwater servers (a primary and two replicas) and three Sentinels
(Debian's ``redis-sentinel``) on loopback. Eight writer threads use redis-py's ``Sentinel``:
each appends ``XADD rides IDMP w<i> <n> * …`` and then confirms it with ``WAIT 1`` (writers
0-3) or ``WAITAOF 0 1`` (writers 4-7); a write that fails is retried with the same idempotent
ID, against whatever primary Sentinel names by then. In the middle, one server is killed with
``kill -9`` (the primary, or a replica) or the primary's replica links are cut. After it:

- every write that WAIT/WAITAOF confirmed on a replica is in the stream exactly once, and no
  write is there twice (the IDMP map travelled with the data);
- the servers still up hold the same stream;
- a killed server, restarted on its own data, rejoins as a replica of the current primary
  (Sentinel tells it to) and catches up; the INFO counters say whether that was a partial
  resync (its history allowed it) or a full one.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator

import pytest
import redis
from redis.sentinel import Sentinel

from tests.helpers import ServerProcess
from tests.support.replicas import connect, in_step, info, wait_until
from tests.support.sentinel import Cluster, sentinel_cluster, start_on

pytestmark = [pytest.mark.e2e, pytest.mark.redis]

WRITERS = 8
RETRYABLE = (redis.ConnectionError, redis.TimeoutError, redis.ReadOnlyError)


@pytest.fixture
def cluster() -> Iterator[Cluster]:
    with sentinel_cluster() as started:
        yield started
        print(started.logs())  # (pytest shows it when the test failed)


class Writers:
    """Eight writer threads; ``confirmed`` holds the (writer, n) that a replica confirmed."""

    def __init__(self, sentinel_ports: list[int]) -> None:
        self.sentinel_ports = sentinel_ports
        self.stop = threading.Event()
        self.confirmed: set[tuple[int, int]] = set()
        self.attempted: set[tuple[int, int]] = set()
        self.failures: list[BaseException] = []
        self.lock = threading.Lock()
        self.threads = [threading.Thread(target=self._run, args=(i,)) for i in range(WRITERS)]

    def __enter__(self) -> Writers:
        for thread in self.threads:
            thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(timeout=60)

    def count(self) -> int:
        with self.lock:
            return len(self.confirmed)

    def _run(self, writer: int) -> None:
        sentinel = Sentinel(
            [("127.0.0.1", port) for port in self.sentinel_ports], socket_timeout=2.0
        )
        primary = sentinel.master_for("mymaster", socket_timeout=2.0)
        n = 0
        try:
            while not self.stop.is_set():
                with self.lock:
                    self.attempted.add((writer, n))
                try:
                    confirmed = self._write(primary, writer, n)
                except RETRYABLE:
                    time.sleep(0.1)  # the same n again: IDMP keeps it to one entry
                    continue
                if confirmed:
                    with self.lock:
                        self.confirmed.add((writer, n))
                n += 1
        except BaseException as exc:  # (reported by the test)
            self.failures.append(exc)

    @staticmethod
    def _write(primary: redis.Redis, writer: int, n: int) -> bool:
        primary.execute_command(
            "XADD", "rides", "IDMP", f"w{writer}", str(n), "*", "w", str(writer), "n", str(n)
        )  # fmt: skip
        if writer < WRITERS // 2:
            return int(primary.execute_command("WAIT", 1, 2000)) >= 1
        _local, replicas = primary.execute_command("WAITAOF", 0, 1, 2000)
        return int(replicas) >= 1


def stream_writes(r: redis.Redis) -> list[tuple[int, int]]:
    return [(int(f[b"w"]), int(f[b"n"])) for _id, f in r.xrange("rides")]


def check_exactly_once(writers: Writers, r: redis.Redis) -> None:
    writes = stream_writes(r)
    assert len(writes) == len(set(writes)), "a write is in the stream twice"
    missing = writers.confirmed - set(writes)
    assert not missing, f"{len(missing)} confirmed writes lost, e.g. {sorted(missing)[:5]}"
    assert set(writes) <= writers.attempted


def kill_9(server: ServerProcess) -> None:
    os.kill(server.proc.pid, 9)
    server.proc.wait()


def restart(cluster: Cluster, server: ServerProcess) -> ServerProcess:
    again = start_on(server.workdir, server.port)
    cluster.servers[cluster.servers.index(server)] = again
    return again


def rejoins(cluster: Cluster, server: ServerProcess) -> int:
    """Wait until ``server`` is a replica of the current primary, in step with it (writers
    may still be writing: ``all_in_step`` compares the streams once they stop); the primary's
    port. (The current primary is asked each time: Sentinels racing on one failover may make
    a second one, whose higher epoch wins.)"""
    r = connect(server)

    def in_step_with_the_primary() -> int:
        port = cluster.primary_port()
        replication = info(r)
        if replication.get("role") != "slave" or replication.get("master_port") != port:
            return 0
        return port if in_step(connect(cluster.by_port(port)), r) else 0

    port: int = wait_until(
        in_step_with_the_primary, timeout=60, what="the restarted server rejoins as a replica"
    )
    return port


def all_in_step(cluster: Cluster) -> redis.Redis:
    primary_server = cluster.by_port(cluster.primary_port())
    primary = connect(primary_server)
    others = [connect(s) for s in cluster.servers if s is not primary_server]
    wait_until(lambda: all(in_step(primary, o) for o in others), timeout=30, what="in step")
    for other in others:
        assert stream_writes(other) == stream_writes(primary)
    return primary


def test_kill_9_of_the_primary_under_load(cluster: Cluster) -> None:
    old = cluster.by_port(cluster.primary_port())
    with Writers(cluster.sentinel_ports) as writers:
        wait_until(lambda: writers.count() >= 200, timeout=30, what="confirmed writes")
        kill_9(old)
        new_port = wait_until(
            lambda: (p := cluster.primary_port()) != old.port and p, timeout=30, what="failover"
        )
        before = writers.count()
        wait_until(lambda: writers.count() >= before + 200, timeout=30, what="writes resume")
    assert not writers.failures, writers.failures
    primary = connect(cluster.by_port(new_port))
    assert info(primary)["role"] == "master"
    check_exactly_once(writers, primary)
    survivors = [s for s in cluster.servers if s is not old]
    before = {s.port: info(connect(s), "stats") for s in survivors}
    again = restart(cluster, old)
    port = rejoins(cluster, again)
    stats = info(connect(cluster.by_port(port)), "stats")
    partial = stats["sync_partial_ok"] - before[port]["sync_partial_ok"]
    full = stats["sync_full"] - before[port]["sync_full"]
    assert partial + full >= 1, (before[port], stats)  # it resynced, one way or the other
    check_exactly_once(writers, all_in_step(cluster))


def test_kill_9_of_a_replica_under_load(cluster: Cluster) -> None:
    primary_port = cluster.primary_port()
    victim = next(s for s in cluster.servers if s.port != primary_port)
    with Writers(cluster.sentinel_ports) as writers:
        wait_until(lambda: writers.count() >= 200, timeout=30, what="confirmed writes")
        kill_9(victim)
        before = writers.count()
        wait_until(lambda: writers.count() >= before + 200, timeout=30, what="writes go on")
        again = restart(cluster, victim)
        rejoins(cluster, again)
    assert not writers.failures, writers.failures
    assert cluster.primary_port() == primary_port  # no failover for a replica
    check_exactly_once(writers, all_in_step(cluster))


def test_replica_links_cut_and_healed_under_load(cluster: Cluster) -> None:
    primary_port = cluster.primary_port()
    primary = connect(cluster.by_port(primary_port))
    with Writers(cluster.sentinel_ports) as writers:
        wait_until(lambda: writers.count() >= 200, timeout=30, what="confirmed writes")
        partial_before = info(primary, "stats")["sync_partial_ok"]
        assert primary.execute_command("CLIENT", "KILL", "TYPE", "replica") == 2
        wait_until(
            lambda: info(primary, "stats")["sync_partial_ok"] >= partial_before + 2,
            timeout=30,
            what="both replicas resync partially",
        )
        before = writers.count()
        wait_until(lambda: writers.count() >= before + 200, timeout=30, what="writes go on")
    assert not writers.failures, writers.failures
    assert cluster.primary_port() == primary_port
    check_exactly_once(writers, all_in_step(cluster))
