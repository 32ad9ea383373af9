"""Issue #31 item 8, byte for byte against redis-server 7.0: a score is C's strtod on the whole
argument, however long (DBL_MAX written out takes 309 digits) and refused only out of range;
expire times refuse what would overflow once made milliseconds (Redis's bounds are
LLONG_MIN / 1000 and LLONG_MAX / 1000 rounded toward zero, then the base time added)."""

from __future__ import annotations

import sys

import pytest

from tests.differential.harness import assert_same
from tests.helpers import ServerProcess

DBL_MAX_DIGITS = f"{int(sys.float_info.max)}"

SCORES = [
    DBL_MAX_DIGITS,
    "-" + DBL_MAX_DIGITS,
    DBL_MAX_DIGITS + "0",  # ten times too big: out of range
    "1." + "0" * 6000,
    "0." + "0" * 400 + "1",  # too small to be anything but zero
    "1e309",
    "-1e309",
    "1e-400",
    "0e-400",
    "0x1p-1080",
    "0x1p1024",
    "+-inf",
    "-inf",
]


@pytest.mark.parametrize("score", SCORES, ids=lambda s: s[:12] + f"..({len(s)})")
def test_scores_like_redis(
    headwater: ServerProcess, redis_server: ServerProcess, score: str
) -> None:
    commands = [
        ["ZADD", "z", score, "a"],
        ["ZSCORE", "z", "a"],
        ["ZINCRBY", "y", score, "a"],
        ["ZADD", "x", "1", "m"],
        ["ZRANGEBYSCORE", "x", "-" + score if score[0] != "-" else score[1:], score],
        ["ZCOUNT", "x", "(" + score, "+inf"],
    ]
    for resp in (2, 3):
        assert_same(headwater, redis_server, commands, resp)


EXPIRES = [
    ["EXPIRE", "k", "-9223372036854776"],
    ["EXPIRE", "k", "-9223372036854775"],
    ["EXPIRE", "k", "9223372036854776"],
    ["EXPIRE", "k", "9223372036854775"],
    ["PEXPIRE", "k", "9223372036854775807"],
    ["PEXPIRE", "k", "-9223372036854775808"],
    ["EXPIREAT", "k", "-9223372036854776"],
    ["EXPIREAT", "k", "9223372036854776"],
    ["PEXPIREAT", "k", "9223372036854775807"],
    ["SET", "k", "v", "EX", "9223372036854776"],
    ["SET", "k", "v", "EX", "9223372036854775"],
    ["SET", "k", "v", "PX", "9223372036854775807"],
    ["SET", "k", "v", "EXAT", "9223372036854776"],
    ["SET", "k", "v", "PXAT", "9223372036854775807"],
    ["SET", "k", "v", "EX", "-1"],
    ["GETEX", "k", "EX", "9223372036854776"],
    ["GETEX", "k", "PX", "9223372036854775807"],
    ["GETEX", "k", "EXAT", "9223372036854776"],
    ["GETEX", "k", "PXAT", "9223372036854775807"],
    ["GETEX", "k", "EXAT", "1"],  # past: the key goes
    ["GETEX", "k", "PXAT", "1"],
]


@pytest.mark.parametrize("command", EXPIRES, ids=" ".join)
def test_expire_overflow_like_redis(
    headwater: ServerProcess, redis_server: ServerProcess, command: list[str]
) -> None:
    # the key's fate shows whether a time was taken (a past one deletes it)
    commands = [["SET", "k", "v"], command, ["EXISTS", "k"]]
    assert_same(headwater, redis_server, commands, 2)
