"""The server a test starts runs the build ``make test`` means to test: the compiled run's
servers are compiled, the pure run's (PYTHONPATH on a copy of the source without .so files)
are pure, so that the pure tier's differential and e2e tests really test the pure build."""

from __future__ import annotations

import os

import pytest
import redis

from tests.helpers import start_headwater


def test_a_started_server_runs_the_expected_build() -> None:
    expected = os.environ.get("HEADWATER_EXPECT_BUILD")
    if not expected:
        pytest.skip("HEADWATER_EXPECT_BUILD is not set (make test sets it)")
    server = start_headwater()
    try:
        info = redis.Redis(port=server.port).info("server")
        assert info["headwater_build"] == expected
    finally:
        server.stop()
