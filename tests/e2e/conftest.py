from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers import ServerProcess, redis_available, start_headwater
from tests.support.region_mesh import TcpMesh


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "e2e" in str(item.fspath) and "redis_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.redis)
            if not redis_available():
                item.add_marker(pytest.mark.skip(reason="redis-server not installed"))


@pytest.fixture(scope="module")
def private_headwater() -> Iterator[ServerProcess]:
    """A Headwater process of the module's own, for tests that change its configuration."""
    server = start_headwater()
    yield server
    server.stop()


@pytest.fixture
def mesh() -> Iterator[TcpMesh]:
    """Three regions over TCP, linked both ways (a test file may define its own)."""
    m = TcpMesh()
    try:
        m.linked()
        yield m
    finally:
        m.close()
