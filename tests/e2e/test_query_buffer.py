"""CLIENT LIST's qbuf and qbuf-free: the query buffer Redis would hold (server/querybuf.py),
checked as Redis's unit/querybuf checks it, on Headwater and on redis-server 7.0 alike."""

from __future__ import annotations

import re
import shutil
import time
from collections.abc import Callable, Iterator

import pytest

from tests.helpers import RawClient, ServerProcess, start_headwater, start_redis

pytestmark = pytest.mark.e2e

STARTERS: dict[str, Callable[[], ServerProcess]] = {
    "headwater": lambda: start_headwater("--appendonly", "no"),
    "redis": start_redis,
}


@pytest.fixture(params=list(STARTERS))
def server(request: pytest.FixtureRequest) -> Iterator[ServerProcess]:
    if request.param == "redis" and shutil.which("redis-server") is None:
        pytest.skip("redis-server not installed")
    started = STARTERS[request.param]()
    yield started
    started.stop()


def buffer_of(observer: RawClient, name: str) -> tuple[int, int]:
    """(idle seconds, qbuf + qbuf-free) of the client called ``name``."""
    listing = observer.call("CLIENT", "LIST").decode()
    line = next(line for line in listing.split("\n") if f" name={name} " in line)
    idle = int(re.search(r" idle=(\d+)", line).group(1))  # type: ignore[union-attr]
    held = int(re.search(r" qbuf=(\d+)", line).group(1))  # type: ignore[union-attr]
    free = int(re.search(r" qbuf-free=(\d+)", line).group(1))  # type: ignore[union-attr]
    return idle, held + free


def wait_for(check: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_read_buffer_is_freed_once_the_client_is_idle(server: ServerProcess) -> None:
    observer, client = RawClient(server.port), RawClient(server.port)
    observer.call("CONFIG", "SET", "hz", "100")
    client.call("CLIENT", "SETNAME", "test_client")
    _, size = buffer_of(observer, "test_client")
    assert 16384 <= size < 32768

    def freed() -> bool:
        idle, size = buffer_of(observer, "test_client")
        return idle >= 3 and size == 0

    assert wait_for(freed, 8)


def test_a_big_argument_has_its_room_until_the_client_is_idle(server: ServerProcess) -> None:
    observer, client = RawClient(server.port), RawClient(server.port)
    observer.call("CONFIG", "SET", "hz", "100")
    client.call("CLIENT", "SETNAME", "test_client")
    client.send_raw(b"*3\r\n$3\r\nset\r\n$1\r\na\r\n$1000000\r\n")
    time.sleep(0.05)
    assert buffer_of(observer, "test_client")[1] >= 1000000
    assert wait_for(lambda: buffer_of(observer, "test_client")[1] < 1000000, 8)
    assert buffer_of(observer, "test_client")[0] >= 3
