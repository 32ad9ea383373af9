"""The way back (issue 35): Debian's redis-server 7.0 as a replica of Headwater gets an RDB
file it loads (version 10, Redis's encodings), then Headwater's stream; `redis-cli --rdb`
against Headwater and `headwater export-rdb` offline write files that redis-check-rdb
accepts and Redis loads, holding the same data, key by key."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import redis

from tests.e2e.test_from_redis_e2e import claim_some, fill, groups
from tests.helpers import HEADWATER, ROOT, start_headwater, start_redis
from tests.support.logical import differences, dump
from tests.support.replicas import in_step, wait_until

pytestmark = pytest.mark.redis


def check_rdb(path: Path) -> None:
    checker = shutil.which("redis-check-rdb")
    if checker is None:
        pytest.skip("needs redis-check-rdb (Debian's redis-tools)")
    done = subprocess.run([checker, str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0 and "RDB looks OK" in done.stdout, done.stdout + done.stderr


def test_redis_replicates_from_headwater() -> None:
    primary = start_headwater()
    try:
        ours = redis.Redis(port=primary.port, socket_timeout=30)
        groups(ours)
        ours.function_load(
            "#!lua name=lib\nredis.register_function{function_name='one', "
            "callback=function() return 1 end, flags={'no-writes'}}"
        )
        fill(ours, 3000, seed=5)
        replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
        try:
            theirs = redis.Redis(port=replica.port, socket_timeout=30)
            wait_until(lambda: in_step(ours, theirs), timeout=30, what="the full sync")
            assert differences(dump(theirs), dump(ours)) == []
            assert theirs.fcall_ro("one", 0) == 1  # (the library came along)
            fill(ours, 10_000, seed=6)
            claim_some(ours)
            assert ours.wait(1, 10_000) == 1  # (Redis's ACKs count)
            wait_until(lambda: in_step(ours, theirs), timeout=30, what="the stream")
            assert differences(dump(theirs), dump(ours)) == []
        finally:
            replica.stop()
    finally:
        primary.stop()


def test_a_big_keyspace_is_written_by_several_processes(tmp_path: Path) -> None:
    """50,000 keys beside the usual mix: the RDB for the Redis replica is written by one
    process per core (two at least here, when the machine has them), and Redis loads the
    same data as from one writer."""
    log = tmp_path / "headwater.log"
    primary = start_headwater("--logfile", str(log))
    try:
        ours = redis.Redis(port=primary.port, socket_timeout=60)
        groups(ours)
        fill(ours, 2000, seed=8)
        pipe = ours.pipeline(transaction=False)
        for i in range(50_000):
            if i % 2:
                pipe.hset(f"bulk:h{i}", mapping={"a": i, "b": "x" * (i % 30)})
            else:
                pipe.sadd(f"bulk:s{i}", i, i + 1, "m")
        pipe.execute()
        replica = start_redis("--replicaof", "127.0.0.1", str(primary.port))
        try:
            theirs = redis.Redis(port=replica.port, socket_timeout=60)
            wait_until(lambda: in_step(ours, theirs), timeout=60, what="the full sync")
            assert differences(dump(theirs, skip=b"bulk:"), dump(ours, skip=b"bulk:")) == []
            assert theirs.dbsize() == ours.dbsize()
            for i in range(0, 50_000, 997):
                key = f"bulk:h{i}" if i % 2 else f"bulk:s{i}"
                read = theirs.hgetall if i % 2 else theirs.smembers
                assert read(key) == (ours.hgetall if i % 2 else ours.smembers)(key), key
        finally:
            replica.stop()
    finally:
        primary.stop()
    started = [line for line in log.read_text().splitlines() if "RDB for replicas" in line]
    cores = len(os.sched_getaffinity(0))
    assert len(started) == 1 and ((cores > 1) == ("writers)" in started[0])), started


def test_redis_cli_rdb_and_export_rdb_write_files_redis_loads(tmp_path: Path) -> None:
    data = tmp_path / "hw"
    data.mkdir()
    primary = start_headwater("--dir", str(data))  # (kept after the server stops)
    try:
        ours = redis.Redis(port=primary.port, socket_timeout=30)
        groups(ours)
        fill(ours, 3000, seed=7)
        expected = dump(ours)
        fetched = tmp_path / "fetched.rdb"
        done = subprocess.run(
            ["redis-cli", "-p", str(primary.port), "--rdb", str(fetched)],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        check_rdb(fetched)
        ours.shutdown()  # (saves; export-rdb reads the directory at rest)
    finally:
        primary.stop()
    exported = tmp_path / "exported.rdb"
    done = subprocess.run(
        [*HEADWATER, "export-rdb", "--dir", str(data), str(exported)],
        capture_output=True, text=True, timeout=120, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "RDB version 10" in done.stdout
    check_rdb(exported)
    for path in (fetched, exported):
        loaded = start_redis("--dir", str(tmp_path), "--dbfilename", path.name)
        try:
            assert differences(dump(redis.Redis(port=loaded.port)), expected) == []
        finally:
            loaded.stop()


def extensions(r: redis.Redis) -> None:
    """Headwater's own commands (Redis 8.x's), which Redis 7.0 lacks."""
    for n in range(20):
        r.execute_command("XADD", "ext", "IDMP", "p1", f"i{n}", "*", "n", n)
    r.execute_command("XADD", "ext", "IDMP", "p1", "i0", "*", "n", 0)  # (a duplicate: no entry)
    r.execute_command("XCFGSET", "ext", "IDMP-DURATION", 200)
    r.xgroup_create("ext", "g", id="0")
    r.xreadgroup("g", "c1", {"ext": ">"}, count=6)
    first = [entry_id for entry_id, _ in r.xrange("ext", count=4)]
    r.execute_command("XACKDEL", "ext", "g", "IDS", 2, *first[:2])
    r.execute_command("XDELEX", "ext", "IDS", 1, first[2])
    r.execute_command("XTRIM", "ext", "MAXLEN", "=", 15, "KEEPREF")
    r.hset("fields", mapping={"a": 1, "b": 2})
    r.execute_command("HEXPIRE", "fields", 1000, "FIELDS", 1, "a")


def test_a_redis_replica_gets_headwater_extensions_in_7_0_terms(tmp_path: Path) -> None:
    primary = start_headwater()
    try:
        ours = redis.Redis(port=primary.port, socket_timeout=30)
        ours.set("warm", 1)
        logfile = tmp_path / "redis.log"
        replica = start_redis(
            "--replicaof", "127.0.0.1", str(primary.port), "--logfile", str(logfile)
        )
        try:
            theirs = redis.Redis(port=replica.port, socket_timeout=30)
            wait_until(lambda: theirs.get("warm") == b"1", timeout=30, what="the full sync")
            extensions(ours)
            ours.set("last", 1)
            # WAIT counts it although the rewritten commands' bytes differ from ours
            assert ours.wait(1, 10_000) == 1
            wait_until(lambda: theirs.get("last") == b"1", timeout=30)
            assert differences(dump(theirs), dump(ours)) == []
            log = logfile.read_text(errors="replace")
            assert "CRITICAL" not in log  # (Redis refused nothing it was sent)
            # its offsets are not ours any more: a reconnection is a full sync
            before = ours.info("stats")
            ours.client_kill_filter(_type="replica")
            ours.set("after", 1)
            wait_until(lambda: theirs.get("after") == b"1", timeout=30, what="the resync")
            after = ours.info("stats")
            assert after["sync_full"] == before["sync_full"] + 1
            assert differences(dump(theirs), dump(ours)) == []
        finally:
            replica.stop()
    finally:
        primary.stop()


def test_export_rdb_refuses_a_directory_without_data(tmp_path: Path) -> None:
    done = subprocess.run(
        [*HEADWATER, "export-rdb", "--dir", str(tmp_path), str(tmp_path / "out.rdb")],
        capture_output=True, text=True, timeout=60, cwd=ROOT, check=False,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr == (
        f"headwater export-rdb: {tmp_path} holds no data (no AOF manifest, no dump.hwsnap)\n"
    )
    assert not (tmp_path / "out.rdb").exists()
