"""LATENCY's link events (issue 33): a replica records ``replica-link`` when applying its
primary's stream holds its loop past ``latency-monitor-threshold``, a region records
``region-link`` for a peer's effects."""

from __future__ import annotations

import redis

from tests.helpers import start_headwater
from tests.support.region_mesh import TcpMesh
from tests.support.replicas import connect, in_step, wait_until


def _events(client: redis.Redis) -> set[str]:
    return {str(row[0], "ascii") for row in client.execute_command("LATENCY", "LATEST")}


def _load(client: redis.Redis, key: str, entries: int) -> None:
    with client.pipeline(transaction=False) as pipe:
        for n in range(entries):
            pipe.xadd(key, {"n": n, "payload": "x" * 64})
        pipe.execute()


def test_a_replica_records_replica_link() -> None:
    primary = start_headwater()
    replica = start_headwater(
        "--replicaof", "127.0.0.1", str(primary.port), "--latency-monitor-threshold", "1"
    )
    try:
        p, r = connect(primary), connect(replica)
        wait_until(lambda: in_step(p, r), what="the link")
        for _ in range(5):
            _load(p, "s", 20_000)
        wait_until(lambda: in_step(p, r), timeout=30, what="the replica")
        assert "replica-link" in _events(r)
        assert "replica-link" not in _events(p)
    finally:
        replica.stop()
        primary.stop()


def test_a_region_records_region_link() -> None:
    mesh = TcpMesh(n=2, extra=("--latency-monitor-threshold", "1"))
    try:
        for _ in range(5):
            _load(mesh[1], "x", 20_000)
        mesh.converge(timeout=60)
        assert "region-link" in _events(mesh[2])
    finally:
        mesh.close()
