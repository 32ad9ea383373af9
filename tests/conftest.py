from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.helpers import ServerProcess, start_headwater, start_redis

settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=50, deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(scope="session")
def headwater() -> Iterator[ServerProcess]:
    server = start_headwater()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[ServerProcess]:
    server = start_redis()
    yield server
    server.stop()
