"""RESTORE over real processes (issue 19): a replica restores the same key from the effect,
and a RESTORE acknowledged with ``appendfsync always`` survives ``kill -9``."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator

import pytest
import redis

from tests.e2e.test_replication_e2e import in_step, wait_until
from tests.helpers import ServerProcess, start_headwater

pytestmark = pytest.mark.e2e


def _stream_payload(r: redis.Redis) -> bytes:
    for i in range(200):
        r.xadd("src", {"f": i, "g": "x" * (i % 30)}, id=f"{i + 1}-1")
    r.xdel("src", "5-1", "77-1")
    r.xgroup_create("src", "grp", "0")
    r.xreadgroup("grp", "alice", {"src": ">"}, count=20)
    r.xreadgroup("grp", "bob", {"src": ">"}, count=3)
    payload = r.dump("src")
    assert isinstance(payload, bytes)
    return payload


@pytest.fixture
def pair() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    primary = start_headwater()
    replica = start_headwater("--repl-timeout", "5")
    yield primary, replica
    replica.stop()
    primary.stop()


def test_replica_restores_the_same_key(pair: tuple[ServerProcess, ServerProcess]) -> None:
    primary_p, replica_p = pair
    primary = redis.Redis(port=primary_p.port, socket_timeout=10)
    replica = redis.Redis(port=replica_p.port, socket_timeout=10)
    assert replica.execute_command("REPLICAOF", "127.0.0.1", primary_p.port) == b"OK"
    payload = _stream_payload(primary)
    assert primary.restore("copy", 100_000, payload)
    primary.set("s", "hello")
    assert primary.restore("s", 0, primary.dump("s"), replace=True)
    wait_until(lambda: in_step(primary, replica), what="RESTORE replicated")
    assert replica.dump("copy") == payload
    assert replica.pexpiretime("copy") == primary.pexpiretime("copy") > 0
    assert replica.get("s") == b"hello"


def test_restore_survives_kill_9() -> None:
    workdir = tempfile.mkdtemp(prefix="hw-restore-")
    try:
        server = start_headwater("--dir", workdir, "--appendfsync", "always")
        r = redis.Redis(port=server.port, socket_timeout=10)
        payload = _stream_payload(r)
        assert r.restore("copy", 0, payload)
        assert r.restore("src", 0, payload, replace=True, absttl=False)
        server.proc.kill()
        server.proc.wait()
        shutil.rmtree(server.workdir, ignore_errors=True)  # (its own, unused: --dir given)
        again = start_headwater("--dir", workdir, port=server.port)
        try:
            r = redis.Redis(port=again.port, socket_timeout=10)
            assert r.dump("copy") == payload
            assert r.dump("src") == payload
        finally:
            again.proc.kill()
            again.proc.wait()
            shutil.rmtree(again.workdir, ignore_errors=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
