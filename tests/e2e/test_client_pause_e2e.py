"""CLIENT PAUSE over TCP with redis-py (issue #19): a paused write completes after CLIENT
UNPAUSE and after the timeout, reads go through a WRITE pause, a pipelined client keeps its
order, and a pause keeps expired keys (and their DELs) out of the AOF until it ends."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.helpers import ServerProcess, encode_command, start_headwater


@pytest.fixture
def server() -> Iterator[ServerProcess]:
    proc = start_headwater("--appendonly", "yes", "--appendfsync", "always")
    yield proc
    proc.stop()


def _client(server: ServerProcess) -> redis.Redis:
    return redis.Redis(port=server.port, socket_timeout=10)


class Background:
    """A command run on its own connection in a thread; ``done`` once it answered."""

    def __init__(self, server: ServerProcess, *args: str) -> None:
        self.client = _client(server)
        self.result: object = None
        self.finished_at = 0.0
        self.thread = threading.Thread(target=self._run, args=args, daemon=True)
        self.thread.start()

    def _run(self, *args: str) -> None:
        self.result = self.client.execute_command(*args)
        self.finished_at = time.monotonic()

    @property
    def done(self) -> bool:
        return not self.thread.is_alive()

    def join(self) -> object:
        self.thread.join(10)
        assert self.done
        return self.result


def test_paused_write_completes_after_unpause(server: ServerProcess) -> None:
    r = _client(server)
    r.set("k", "old")
    assert r.client_pause(100_000, all=False)
    writer = Background(server, "SET", "k", "new")
    time.sleep(0.3)
    assert not writer.done  # held, not refused
    assert r.get("k") == b"old"  # reads go through a WRITE pause
    assert r.info("clients")["blocked_clients"] == 1
    assert r.client_unpause()
    assert writer.join() is True
    assert r.get("k") == b"new"
    assert r.info("clients")["blocked_clients"] == 0


def test_paused_write_completes_after_the_timeout(server: ServerProcess) -> None:
    r = _client(server)
    started = time.monotonic()
    assert r.client_pause(400, all=False)
    writer = Background(server, "INCR", "n")
    assert writer.join() == 1
    assert writer.finished_at - started >= 0.35
    assert r.get("n") == b"1"


def test_pause_all_holds_reads_until_the_timeout(server: ServerProcess) -> None:
    r = _client(server)
    r.set("k", "v")
    started = time.monotonic()
    assert r.client_pause(400)  # ALL
    reader = Background(server, "GET", "k")
    time.sleep(0.15)
    assert not reader.done
    assert reader.join() == b"v"
    assert reader.finished_at - started >= 0.35


def test_pipelined_client_keeps_its_order(server: ServerProcess) -> None:
    r = _client(server)
    assert r.client_pause(100_000, all=False)
    results: list[object] = []

    def pipelined() -> None:
        pipe = _client(server).pipeline(transaction=False)
        for i in range(50):
            pipe.rpush("log", f"p{i}")
            pipe.get("k")
        pipe.lrange("log", 0, -1)
        results.extend(pipe.execute())

    thread = threading.Thread(target=pipelined, daemon=True)
    thread.start()
    time.sleep(0.3)
    other = Background(server, "RPUSH", "log", "other")
    time.sleep(0.2)
    assert thread.is_alive() and not other.done
    r.client_unpause()
    thread.join(10)
    assert other.join() == 51  # after the whole pipeline of the client held first
    assert results[-1] == [f"p{i}".encode() for i in range(50)]
    assert results[:100:2] == list(range(1, 51))
    assert r.lrange("log", 0, -1)[-1] == b"other"


def test_pause_keeps_expiry_out_of_the_aof(server: ServerProcess) -> None:
    r = _client(server)
    r.set("e", "1", px=100)
    r.set("keep", "1")
    assert r.client_pause(100_000, all=False)
    time.sleep(0.5)  # past the TTL and several expiry cycles
    assert r.get("e") is None  # reads as gone...
    assert r.dbsize() == 2  # ...but is still there, and no DEL was written
    aof = b"".join(p.read_bytes() for p in Path(server.workdir, "appendonlydir").glob("*.incr.aof"))
    assert b"DEL" not in aof
    assert r.info("stats")["expired_keys"] == 0
    r.client_unpause()
    deadline = time.monotonic() + 5
    while r.dbsize() != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert r.dbsize() == 1
    aof = b"".join(p.read_bytes() for p in Path(server.workdir, "appendonlydir").glob("*.incr.aof"))
    assert b"$3\r\nDEL\r\n$1\r\ne\r\n" in aof


def test_killed_held_client_is_forgotten(server: ServerProcess) -> None:
    r = _client(server)
    assert r.client_pause(100_000, all=False)
    writer = socket.create_connection(("127.0.0.1", server.port))  # (redis-py would retry)
    writer.sendall(encode_command("SET", "k", "v"))
    time.sleep(0.2)
    (held,) = [c for c in r.client_list() if "b" in c["flags"]]
    assert held["cmd"] == "set"
    assert r.client_unblock(int(held["id"])) == 0  # a pause is not a wait
    assert r.client_kill_filter(_id=int(held["id"])) == 1
    assert writer.recv(100) == b""
    writer.close()
    assert r.info("clients")["blocked_clients"] == 0
    r.client_unpause()
    time.sleep(0.1)
    assert r.get("k") is None  # the held command of a closed client never runs
