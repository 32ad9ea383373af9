"""A smoke test with real Redis Sentinel (issue 17; the full failover acceptance test, with
writers and WAIT, comes with the Sentinel work): three Headwater servers (a primary and two
replicas) and three Sentinels (Debian's ``redis-sentinel``) on loopback; kill -9 the primary;
Sentinel promotes a replica, the other follows it (a partial resync), and the data is
there."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.e2e.test_replication_e2e import connect, in_step, info, wait_until
from tests.helpers import ServerProcess, free_port, start_headwater, wait_for_port

pytestmark = [pytest.mark.e2e, pytest.mark.redis]


@pytest.fixture
def sentinels() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        proc.kill()
        proc.wait()


def start_sentinel(workdir: Path, primary_port: int) -> tuple[subprocess.Popen[bytes], int]:
    # Debian's redis-sentinel (make test installs it); the same binary as redis-server
    sentinel = shutil.which("redis-sentinel")
    server = shutil.which("redis-server")
    if sentinel is None and server is None:
        pytest.skip("neither redis-sentinel nor redis-server is installed")
    port = free_port()
    conf = workdir / f"sentinel-{port}.conf"
    conf.write_text(
        f"port {port}\nbind 127.0.0.1\ndir {workdir}\n"
        f"sentinel monitor mymaster 127.0.0.1 {primary_port} 2\n"
        "sentinel down-after-milliseconds mymaster 1000\n"
        "sentinel failover-timeout mymaster 10000\n"
    )
    argv = [sentinel, str(conf)] if sentinel is not None else [str(server), str(conf), "--sentinel"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_for_port(port, proc)
    return proc, port


def test_sentinel_promotes_a_replica(sentinels: list[subprocess.Popen[bytes]]) -> None:
    workdir = Path(tempfile.mkdtemp(prefix="hw-sentinel-"))
    primary = start_headwater()
    replicas: list[ServerProcess] = []
    try:
        for _ in range(2):
            replicas.append(start_headwater("--replicaof", "127.0.0.1", str(primary.port)))
        p = connect(primary)
        p.xadd("rides", {"n": "1"}, id="1-0")
        wait_until(lambda: all(in_step(p, connect(r)) for r in replicas), what="replicas")
        ports = []
        for _ in range(3):
            proc, port = start_sentinel(workdir, primary.port)
            sentinels.append(proc)
            ports.append(port)
        sentinel = redis.Redis(port=ports[0], decode_responses=True)
        wait_until(
            lambda: (
                len(sentinel.sentinel_slaves("mymaster")) == 2
                and len(sentinel.sentinel_sentinels("mymaster")) == 2
            ),
            timeout=20,
            what="Sentinel discovers the replicas and the other Sentinels",
        )
        os.kill(primary.proc.pid, 9)
        primary.proc.wait()

        def promoted() -> int | None:
            _host, port = sentinel.sentinel_get_master_addr_by_name("mymaster")
            return int(port) if int(port) != primary.port else None

        new_port = wait_until(promoted, timeout=30, what="failover")
        new, other = sorted(replicas, key=lambda r: r.port != new_port)
        new_primary, other_r = connect(new), connect(other)
        assert info(new_primary)["role"] == "master"
        assert new_primary.xrange("rides") == [(b"1-0", {b"n": b"1"})]
        wait_until(
            lambda: info(other_r).get("master_port") == new_port and in_step(new_primary, other_r),
            timeout=30,
            what="the other replica follows the new primary",
        )
        new_primary.xadd("rides", {"n": "2"}, id="2-0")
        wait_until(lambda: in_step(new_primary, other_r), what="stream from the new primary")
        assert other_r.xlen("rides") == 2
        assert info(new_primary, "stats")["sync_full"] == 0  # the other one resynced partially
    finally:
        for server in (*replicas, primary):
            server.stop()
        shutil.rmtree(workdir, ignore_errors=True)
