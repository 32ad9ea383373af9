"""FLUSHALL and FLUSHDB SYNC count their keys as lazily freed, as Redis 7.4+ runs them as a
blocking ASYNC, except inside MULTI or a script, which cannot block (Redis's
CLIENT_AVOID_BLOCKING_ASYNC_FLUSH). Redis 7.0 (tests/differential/test_lazyfree.py) flushes
SYNC in the foreground."""

from __future__ import annotations

import pytest

from tests.unit.conftest import Harness


def lazyfreed(h: Harness) -> int:
    return h.engine.stats.lazyfreed_objects


@pytest.mark.parametrize("flush", [["FLUSHALL"], ["FLUSHALL", "SYNC"], ["FLUSHDB", "SYNC"]])
def test_a_sync_flush_counts_its_keys_outside_multi_and_scripts(flush: list[str]) -> None:
    h = Harness()
    c = h.client()
    for key in ("a", "b", "c"):
        h.call(c, "SET", key, "1")
    h.call(c, *flush)
    assert lazyfreed(h) == 3
    h.call(c, "SET", "d", "1")
    h.call(c, "MULTI")
    h.call(c, *flush)
    h.call(c, "EXEC")
    h.call(c, "SET", "e", "1")
    h.call(c, "EVAL", f"return redis.call('{flush[0]}', 'SYNC')", "0")
    assert lazyfreed(h) == 3
    assert h.call(c, "DBSIZE") == 0


def test_an_async_flush_counts_its_keys_in_multi_too() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "SET", "a", "1")
    h.call(c, "MULTI")
    h.call(c, "FLUSHALL", "ASYNC")
    h.call(c, "EXEC")
    assert lazyfreed(h) == 1


def _load_functions(h: Harness, c: object, count: int) -> None:
    for i in range(count):
        body = f"#!lua name=lib{i}\nredis.register_function('f{i}', function() return {i} end)"
        h.call(c, "FUNCTION", "LOAD", body)


@pytest.mark.parametrize(
    ("count", "flush", "counted"),
    [
        (65, ["ASYNC"], 66),  # (Redis 7.4+ counts the library context too; 7.0 did not)
        (64, ["ASYNC"], 0),
        (100, ["SYNC"], 0),
        (100, [], 0),
    ],
)
def test_function_flush_async_counts_functions_past_the_threshold(
    count: int, flush: list[str], counted: int
) -> None:
    h = Harness()
    c = h.client()
    _load_functions(h, c, count)
    h.call(c, "FUNCTION", "FLUSH", *flush)
    assert lazyfreed(h) == counted
    assert h.call(c, "FUNCTION", "LIST") == []


def test_lazyfree_lazy_user_flush_makes_function_flush_async() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "lazyfree-lazy-user-flush", "yes")
    _load_functions(h, c, 70)
    h.call(c, "FUNCTION", "FLUSH")
    assert lazyfreed(h) == 71
