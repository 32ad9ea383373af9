"""redis-py's client-side cache (RESP3, ``cache_config``) against Headwater, with a second
client writing (issue 33): under interleavings hypothesis chooses (reads through the cache,
writes, deletes, expiries, FLUSHALL, hash and stream writes, writes made by a script), the
cached client never returns a value other than the server's at that moment."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.cache import CacheConfig

from tests.helpers import ServerProcess, start_headwater

KEYS = ["k1", "k2", "h1"]


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    process = start_headwater("--appendonly", "no")
    yield process
    process.stop()


_STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("read"), st.sampled_from(KEYS)),
        st.tuples(st.just("set"), st.sampled_from(KEYS[:2]), st.integers(0, 99)),
        st.tuples(st.just("hset"), st.just("h1"), st.integers(0, 99)),
        st.tuples(st.just("del"), st.sampled_from(KEYS)),
        st.tuples(st.just("expire"), st.sampled_from(KEYS)),
        st.tuples(st.just("script"), st.sampled_from(KEYS[:2]), st.integers(0, 99)),
        st.tuples(st.just("flushall")),
        st.tuples(st.just("own_set"), st.sampled_from(KEYS[:2]), st.integers(0, 99)),
    ),
    min_size=1,
    max_size=30,
)


def _read(client: redis.Redis, key: str) -> object:
    if key.startswith("h"):
        return client.hget(key, "f")
    return client.get(key)


def _apply(writer: redis.Redis, cached: redis.Redis, step: tuple[object, ...]) -> None:
    kind = step[0]
    if kind == "set":
        writer.set(str(step[1]), str(step[2]))
    elif kind == "own_set":
        cached.set(str(step[1]), str(step[2]))
    elif kind == "hset":
        writer.hset(str(step[1]), "f", str(step[2]))
    elif kind == "del":
        writer.delete(str(step[1]))
    elif kind == "expire":
        writer.pexpire(str(step[1]), 1)
    elif kind == "script":
        writer.eval("return redis.call('set', KEYS[1], ARGV[1])", 1, str(step[1]), str(step[2]))
    elif kind == "flushall":
        writer.flushall()


def _agree(cached: redis.Redis, truth: redis.Redis, key: str) -> None:
    """The cache says what the server says. A key past its deadline is deleted (and its
    invalidation sent) only when the server next meets it, as in Redis: if the truth's read
    is what deleted it, the cache read before may still have had it, once."""
    got, want = _read(cached, key), _read(truth, key)
    if got != want:
        assert _read(cached, key) == _read(truth, key), (key, got, want)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=_STEPS)
def test_the_cache_never_serves_a_stale_value(
    server: ServerProcess, steps: list[tuple[object, ...]]
) -> None:
    writer = redis.Redis(port=server.port, socket_timeout=10)
    truth = redis.Redis(port=server.port, socket_timeout=10)
    cached = redis.Redis(
        port=server.port, protocol=3, cache_config=CacheConfig(), socket_timeout=10
    )
    try:
        writer.flushall()
        for step in steps:
            if step[0] == "read":
                _agree(cached, truth, str(step[1]))
            else:
                _apply(writer, cached, step)
        for key in KEYS:  # everything cached is still right at the end
            _agree(cached, truth, key)
    finally:
        for client in (writer, truth, cached):
            client.close()


def test_reads_are_served_from_the_cache(server: ServerProcess) -> None:
    """The cache is really used: a second read is not sent to the server."""
    cached = redis.Redis(port=server.port, protocol=3, cache_config=CacheConfig())
    admin = redis.Redis(port=server.port)
    try:
        admin.set("warm", "v")
        before = admin.info("commandstats").get("cmdstat_get", {}).get("calls", 0)
        assert cached.get("warm") == b"v"
        assert cached.get("warm") == b"v"
        assert cached.get("warm") == b"v"
        after = admin.info("commandstats")["cmdstat_get"]["calls"]
        assert after - before == 1
        admin.set("warm", "w")
        assert cached.get("warm") == b"w"
    finally:
        cached.close()
        admin.close()
