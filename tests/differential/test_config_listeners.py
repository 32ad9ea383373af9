"""CONFIG SET port / bind move the listeners, and CONFIG's maxmemory-clients and hidden
key-load-delay: what a client sees, against redis-server 7.0."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator

import pytest

from tests.differential.harness import assert_same
from tests.helpers import RawClient, ServerProcess, free_port, start_headwater, start_redis

Starter = Callable[[], ServerProcess]


@pytest.fixture
def busy_port() -> Iterator[int]:
    """A port that something else listens on."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", free_port()))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 2).close()
    except ConnectionRefusedError:
        return True
    return False


def _port_moves(start: Starter, busy_port: int) -> list[object]:
    """What a client sees when the port moves, or cannot move, or the bind changes."""
    server = start()
    old, new = server.port, free_port()
    seen: list[object] = []
    try:
        first = RawClient(old)
        seen.append(first.call("CONFIG", "SET", "port", busy_port))
        seen.append(first.call("CONFIG", "SET", "maxmemory", "5", "port", busy_port))
        seen.append(first.call("CONFIG", "GET", "maxmemory"))
        seen.append(first.call("CONFIG", "SET", "bind", "10.255.255.1"))
        seen.append(first.call("CONFIG", "GET", "bind"))
        seen.append(first.call("CONFIG", "SET", "port", new))
        seen.append(first.call("PING"))  # a connection made before stays
        seen.append(_refused(old))
        moved = RawClient(new)
        seen.append(moved.call("CONFIG", "GET", "port").endswith(b"\r\n%d\r\n" % new))
        seen.append(b"tcp_port:%d\r\n" % new in moved.call("INFO", "server"))
        seen.append(moved.call("CONFIG", "SET", "bind", "127.0.0.1 -::1"))
        seen.append(moved.call("CONFIG", "SET", "port", new))
        seen.append(RawClient(new).call("PING"))
        first.close()
        moved.close()
    finally:
        server.proc.kill()
        server.proc.wait()
        server.stop()
    return seen


def test_config_set_port_moves_the_listener(busy_port: int) -> None:
    ours = _port_moves(start_headwater, busy_port)
    theirs = _port_moves(start_redis, busy_port)
    assert ours == theirs
    assert ours[7] is True  # the old port is closed


LIMITS = [
    "CONFIG GET maxmemory-clients",
    "CONFIG SET maxmemory-clients 10%",
    "CONFIG GET maxmemory-clients",
    "CONFIG SET maxmemory-clients 1mb",
    "CONFIG GET maxmemory-clients",
    "CONFIG SET maxmemory-clients 100%",
    "CONFIG GET maxmemory-clients",
    "CONFIG SET maxmemory-clients 0%",
    "CONFIG GET maxmemory-clients",
    "CONFIG SET maxmemory-clients 101%",
    "CONFIG SET maxmemory-clients 1.5%",
    "CONFIG SET maxmemory-clients -1",
    "CONFIG SET maxmemory-clients abc",
    "CONFIG SET maxmemory 10000001 maxmemory-clients 200% client-query-buffer-limit x",
    "CONFIG GET maxmemory",
    "CONFIG SET maxmemory-clients 0",
    "CONFIG GET maxmemory-clients",
    "CONFIG GET key-load-delay",
    "CONFIG SET key-load-delay -1",
    "CONFIG GET key-load-delay",
    "CONFIG SET key-load-delay 2147483648",
    "CONFIG SET key-load-delay -2147483649",
    "CONFIG SET key-load-delay abc",
    "CONFIG SET key-load-delay 0",
    "CONFIG GET key-load-*",
    "CONFIG GET maxmemory-c*",
]


@pytest.mark.parametrize("resp", [2, 3])
def test_client_memory_limit_and_hidden_config_same_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess, resp: int
) -> None:
    assert_same(headwater, redis_server, LIMITS, resp)


LIMITS_OF_EVICTION = [
    "CONFIG GET maxmemory-samples",
    "CONFIG SET maxmemory-samples 0",
    "CONFIG SET maxmemory-samples 2147483648",
    "CONFIG SET maxmemory-samples 10",
    "CONFIG GET maxmemory-samples",
    "CONFIG SET maxmemory-samples 5",
    "CONFIG GET maxmemory-eviction-tenacity",
    "CONFIG SET maxmemory-eviction-tenacity 101",
    "CONFIG SET maxmemory-eviction-tenacity -1",
    "CONFIG SET maxmemory-eviction-tenacity 10",
]


def test_eviction_settings_same_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess
) -> None:
    assert_same(headwater, redis_server, LIMITS_OF_EVICTION, 2)


def test_info_memory_reports_no_pending_lazy_free(headwater: ServerProcess) -> None:
    client = RawClient(headwater.port)
    try:
        client.call("SET", "k", "v")
        client.call("UNLINK", "k")
        assert b"\r\nlazyfree_pending_objects:0\r\n" in client.call("INFO", "memory")
    finally:
        client.close()
