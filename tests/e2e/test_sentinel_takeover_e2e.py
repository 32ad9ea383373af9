"""The live move, Sentinel-driven (issue 35): a Redis 7.0 primary with Headwater as its
replica, watched by three Sentinels; writers confirm each write with WAIT 1; the Redis
primary is killed with -9; Sentinel promotes Headwater, and every confirmed write is there."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
import redis

from tests.helpers import start_headwater, start_redis
from tests.support.replicas import in_step, info, wait_until
from tests.support.sentinel import MASTER_NAME, start_sentinel

pytestmark = [pytest.mark.e2e, pytest.mark.redis]


def writer(port: int, name: str, confirmed: list[str], stop: threading.Event) -> None:
    r = redis.Redis(port=port, socket_timeout=2)
    n = 0
    while not stop.is_set():
        n += 1
        try:
            entry = r.xadd("rides", {"writer": name, "n": n}).decode()
            if r.wait(1, 1000) >= 1:
                confirmed.append(entry)
        except redis.RedisError:
            return  # (the primary is gone: what was confirmed is what counts)


def test_sentinel_promotes_headwater_over_a_redis_primary() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="hw-takeover-"))
    primary = start_redis()
    replica = start_headwater("--replicaof", "127.0.0.1", str(primary.port))
    sentinels = []
    try:
        theirs, ours = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
        wait_until(lambda: in_step(theirs, ours), timeout=30, what="the sync")
        for _ in range(3):
            proc, port = start_sentinel(workdir, primary.port)
            sentinels.append((proc, port))
        sentinel = redis.Redis(port=sentinels[0][1], decode_responses=True)
        wait_until(
            lambda: (
                len(sentinel.sentinel_slaves(MASTER_NAME)) == 1
                and len(sentinel.sentinel_sentinels(MASTER_NAME)) == 2
            ),
            timeout=30,
            what="Sentinel discovers Headwater and the other Sentinels",
        )
        confirmed: list[str] = []
        stop = threading.Event()
        threads = [
            threading.Thread(target=writer, args=(primary.port, f"w{i}", confirmed, stop))
            for i in range(4)
        ]
        for thread in threads:
            thread.start()
        wait_until(lambda: len(confirmed) >= 200, timeout=30, what="confirmed writes")
        os.kill(primary.proc.pid, 9)
        primary.proc.wait()
        stop.set()
        for thread in threads:
            thread.join(10)

        def promoted() -> bool:
            return int(sentinel.sentinel_get_master_addr_by_name(MASTER_NAME)[1]) == replica.port

        wait_until(promoted, timeout=60, what="Sentinel promotes Headwater")
        wait_until(lambda: info(ours)["role"] == "master", timeout=30)
        present = {entry_id.decode() for entry_id, _ in ours.xrange("rides")}
        missing = [entry for entry in confirmed if entry not in present]
        assert missing == [], f"{len(missing)} of {len(confirmed)} confirmed writes lost"
        ours.xadd("rides", {"after": "takeover"})  # (and it takes writes)
    finally:
        for proc, _port in sentinels:
            proc.kill()
            proc.wait()
        replica.stop()
        primary.stop()
        shutil.rmtree(workdir, ignore_errors=True)
