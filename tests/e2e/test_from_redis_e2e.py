"""Headwater as a replica of a real Redis primary (issue 35): Debian's redis-server 7.0 sends
its RDB file (diskless with the EOF mark, or from disk with a length), then its command
stream; Headwater loads the one with import-rdb's reader and applies the other through its
own replication path. After the sync and after 10,000 more writes of every kind (streams
with groups and pending entries, every core type, TTLs, a Lua script), every key compares
equal, logically; WAIT on Redis counts Headwater; a cut link resumes with a partial resync."""

from __future__ import annotations

import os
import random
from collections.abc import Iterator

import pytest
import redis

from tests.helpers import ServerProcess, start_headwater, start_redis
from tests.support.logical import differences, dump
from tests.support.replicas import in_step, info, wait_until

pytestmark = pytest.mark.redis

SCRIPT = "redis.call('incr', KEYS[1]) redis.call('hset', KEYS[2], ARGV[1], ARGV[2]) return 1"


def fill(r: redis.Redis, writes: int, seed: int) -> None:
    """``writes`` commands of every kind, pipelined."""
    rng = random.Random(seed)
    pipe = r.pipeline(transaction=False)
    for i in range(writes):
        n = rng.randrange(40)
        kind = i % 12
        if kind == 0:
            pipe.xadd(f"stream:{n % 4}", {"n": i, "pad": "x" * rng.randrange(30)})
        elif kind == 1:
            pipe.set(f"str:{n}", f"v{i}", ex=rng.choice([None, 1000]))
        elif kind == 2:
            pipe.hset(f"hash:{n % 8}", f"f{n}", i)
        elif kind == 3:
            pipe.rpush(f"list:{n % 8}", i)
        elif kind == 4:
            pipe.sadd(f"set:{n % 8}", n)
        elif kind == 5:
            pipe.zadd(f"zset:{n % 8}", {f"m{n}": rng.random()})
        elif kind == 6:
            pipe.xreadgroup("g", f"c{n % 3}", {f"stream:{n % 4}": ">"}, count=2)
        elif kind == 7:
            pipe.execute_command("XACK", f"stream:{n % 4}", "g", f"{i}-0")
        elif kind == 8:
            pipe.eval(SCRIPT, 2, f"counter:{n % 4}", f"hash:{n % 8}", "lua", i)
        elif kind == 9:
            pipe.delete(f"str:{(n + 7) % 40}")
        elif kind == 10:
            pipe.lpop(f"list:{n % 8}")
        else:
            pipe.expire(f"hash:{n % 8}", 5000)
        if i % 500 == 499:
            pipe.execute()
    pipe.execute()


def same(ours: redis.Redis, theirs: redis.Redis) -> bool:
    """Equal but for groups' entries-read, which a 7.0 primary does not send (logical.py)."""
    found = differences(dump(ours, entries_read=False), dump(theirs, entries_read=False))
    assert found == []
    return True


def groups(r: redis.Redis) -> None:
    for n in range(4):
        r.xadd(f"stream:{n}", {"seed": 1})
        r.xgroup_create(f"stream:{n}", "g", id="0")


def claim_some(r: redis.Redis) -> None:
    """XCLAIM and XAUTOCLAIM (Redis propagates them as XCLAIM … FORCE JUSTID …)."""
    for n in range(4):
        pending = r.xpending_range(f"stream:{n}", "g", "-", "+", 5)
        if pending:
            r.xclaim(f"stream:{n}", "g", "c9", 0, [p["message_id"] for p in pending[:2]])
        r.xautoclaim(f"stream:{n}", "g", "c8", 0, count=2)


@pytest.fixture(params=["diskless", "disk"])
def primary(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    diskless = "yes" if request.param == "diskless" else "no"
    server = start_redis("--repl-diskless-sync", diskless, "--repl-diskless-sync-delay", "0")
    yield server
    server.stop()


def test_headwater_follows_a_redis_primary(primary: ServerProcess) -> None:
    theirs = redis.Redis(port=primary.port, socket_timeout=30)
    groups(theirs)
    fill(theirs, 3000, seed=1)
    replica = start_headwater("--replicaof", "127.0.0.1", str(primary.port))
    try:
        ours = redis.Redis(port=replica.port, socket_timeout=30)
        wait_until(lambda: in_step(theirs, ours), timeout=30, what="the full sync")
        assert differences(dump(ours), dump(theirs)) == []  # (entries-read too: in the RDB)
        fill(theirs, 10_000, seed=2)
        claim_some(theirs)
        assert theirs.wait(1, 10_000) == 1  # (Headwater's REPLCONF ACKs count)
        wait_until(lambda: in_step(theirs, ours), timeout=30, what="the stream")
        assert same(ours, theirs)
        with pytest.raises(redis.ReadOnlyError):
            ours.set("x", 1)
        assert "master_link_failed_commands" not in info(ours)
    finally:
        replica.stop()


def test_a_cut_link_resumes_with_a_partial_resync(primary: ServerProcess) -> None:
    theirs = redis.Redis(port=primary.port, socket_timeout=30)
    groups(theirs)
    replica = start_headwater("--replicaof", "127.0.0.1", str(primary.port))
    try:
        ours = redis.Redis(port=replica.port, socket_timeout=30)
        wait_until(lambda: in_step(theirs, ours), timeout=30)
        fill(theirs, 2000, seed=3)
        before = theirs.info("stats")
        theirs.client_kill_filter(_type="replica")  # (mid-stream: the link drops)
        fill(theirs, 2000, seed=4)
        wait_until(lambda: in_step(theirs, ours), timeout=30, what="the resync")
        after = theirs.info("stats")
        assert after["sync_partial_ok"] == before["sync_partial_ok"] + 1
        assert after["sync_full"] == before["sync_full"]
        assert same(ours, theirs)
    finally:
        replica.stop()


def test_a_sync_cut_mid_transfer_completes_on_the_next_one(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """kill -9 of the Headwater replica while Redis's RDB comes in (and the link cut by
    Redis in the middle of another transfer): the next sync completes, data equal."""
    primary = start_redis("--repl-diskless-sync", "no")
    theirs = redis.Redis(port=primary.port, socket_timeout=60)
    theirs.execute_command("DEBUG", "POPULATE", 150_000, "key", 64)
    groups(theirs)
    fill(theirs, 2000, seed=8)
    data = tmp_path_factory.mktemp("replica")
    args = ("--dir", str(data), "--replicaof", "127.0.0.1", str(primary.port))
    try:
        first = start_headwater(*args)
        wait_until(lambda: info(theirs)["connected_slaves"] == 1, timeout=30)
        os.kill(first.proc.pid, 9)  # (mid-transfer or mid-load: the data is not in yet)
        first.proc.wait()
        fill(theirs, 2000, seed=9)
        replica = start_headwater(*args)
        ours = redis.Redis(port=replica.port, socket_timeout=60)
        wait_until(lambda: info(theirs)["connected_slaves"] == 1, timeout=30)
        theirs.client_kill_filter(_type="replica")  # (and once more, from Redis's side)
        try:
            wait_until(lambda: in_step(theirs, ours), timeout=60, what="the last sync")
            assert ours.dbsize() == theirs.dbsize()
            assert ours.get("key:149999") == theirs.get("key:149999")
            theirs_rest = dump(theirs, 1, entries_read=False, skip=b"key:")
            assert differences(dump(ours, 1, entries_read=False, skip=b"key:"), theirs_rest) == []
        finally:
            replica.stop()
    finally:
        primary.stop()
