from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.helpers import ServerProcess, start_headwater, start_redis

settings.register_profile("ci", max_examples=200, deadline=None, derandomize=True)
settings.register_profile("dev", max_examples=50, deadline=None)
# the pure build's tier (Makefile): the same models, fewer examples; the compiled tier runs
# them in full, and the pure tier is there to show the uncompiled modules behave the same
settings.register_profile("pure", max_examples=20, deadline=None)
settings.load_profile(
    os.environ.get("HEADWATER_HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "dev")
)


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
