"""MEMORY DOCTOR and LOLWUT against redis-server 7.0 (issue 33): the report of an empty
instance and the errors byte for byte in RESP2 and RESP3; LOLWUT's drawing is random in
Redis too, so its shape is checked (tests/unit/test_lolwut.py)."""

from __future__ import annotations

import pytest

from tests.differential.harness import assert_same
from tests.helpers import ServerProcess

CASES = [
    "MEMORY DOCTOR",
    "MEMORY DOCTOR extra",
    "LOLWUT VERSION x",
    "LOLWUT VERSION 5 x",
    "LOLWUT VERSION 5 10 x",
    "LOLWUT VERSION 5 10 2 x",
]


@pytest.mark.parametrize("resp", [2, 3])
def test_operability_replies_match_redis(
    headwater: ServerProcess, redis_server: ServerProcess, resp: int
) -> None:
    assert_same(headwater, redis_server, CASES, resp)
