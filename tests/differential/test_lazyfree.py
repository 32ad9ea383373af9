"""INFO's lazyfreed_objects against Debian's redis-server (7.0): which UNLINKs and flushes
Redis hands to its background thread (a value over 64 allocations to free, every key of a
FLUSHALL/FLUSHDB ASYNC). Headwater frees at once but counts the same (ops/lazyfree.py).

7.0 flushes SYNC in the foreground; 7.4+ runs it as a blocking ASYNC outside MULTI and
scripts: that is tests/unit/test_lazyfree.py's."""

from __future__ import annotations

import time

import pytest

from tests.helpers import RawClient, ServerProcess

Step = list[list[str]]

STEPS: dict[str, Step] = {
    "small values are freed at once": [
        ["SADD", "s", *map(str, range(50))],  # intset
        ["SADD", "h", *(f"m{i}" for i in range(50))],  # hashtable, 50 members
        ["RPUSH", "l", *map(str, range(50))],
        ["UNLINK", "s", "h", "l"],
    ],
    "big set, hash and sorted set": [
        ["SADD", "s", *(f"m{i}" for i in range(200))],
        ["HSET", "h", *(f"f{i // 2}" for i in range(400))],
        ["ZADD", "z", *(x for i in range(200) for x in (str(i), f"m{i}"))],
        ["UNLINK", "s", "h", "z", "missing"],
    ],
    "big list": [["RPUSH", "l", *("x" * 100 for _ in range(20000))], ["UNLINK", "l"]],
    "DEL is not lazy by default": [["SADD", "s", *(f"m{i}" for i in range(200))], ["DEL", "s"]],
    "flush async": [
        ["SET", "a", "1"],
        ["SET", "b", "2"],
        ["FLUSHALL", "ASYNC"],
        ["SET", "c", "3"],
        ["FLUSHDB", "ASYNC"],
    ],
}


def _field(info: str, name: str) -> int:
    return int(info.split(f"{name}:")[1].split("\r\n")[0])


def lazyfreed(client: RawClient) -> int:
    """The counter, once Redis's background thread has freed what it was given."""
    deadline = time.monotonic() + 5
    info = client.call("INFO", "memory").decode()
    while _field(info, "lazyfree_pending_objects") and time.monotonic() < deadline:
        time.sleep(0.01)
        info = client.call("INFO", "memory").decode()
    time.sleep(0.01)  # (the thread counts a free just after it takes it off the pending)
    return _field(client.call("INFO", "memory").decode(), "lazyfreed_objects")


def counts(server: ServerProcess, steps: Step) -> list[int]:
    client = RawClient(server.port)
    client.call("FLUSHALL")
    client.call("CONFIG", "SET", "stream-node-max-entries", "5")
    client.call("CONFIG", "RESETSTAT")
    seen = []
    for step in steps:
        assert not client.call(*step).startswith(b"-")
        seen.append(lazyfreed(client))
    client.call("CONFIG", "SET", "stream-node-max-entries", "100")
    client.close()
    return seen


def stream_steps(entries: int, groups: int) -> Step:
    steps = [["XADD", "st", "*", "f", str(i)] for i in range(entries)]
    steps += [["XGROUP", "CREATE", "st", f"g{i}", "0"] for i in range(groups)]
    return [*steps, ["UNLINK", "st"]]


STEPS["big stream"] = stream_steps(400, 0)
STEPS["small stream"] = stream_steps(100, 0)
STEPS["small stream, some groups"] = stream_steps(10, 40)
STEPS["small stream, many groups"] = stream_steps(10, 70)


def script_steps(scripts: int, flush: list[str]) -> Step:
    # (the servers are shared: scripts other tests loaded go first, freed at once)
    loads = [["SCRIPT", "LOAD", f"return {i}"] for i in range(scripts)]
    return [["SCRIPT", "FLUSH", "SYNC"], *loads, ["SCRIPT", *flush]]


STEPS["script flush async, many scripts"] = script_steps(100, ["FLUSH", "ASYNC"])
STEPS["script flush async, few scripts"] = script_steps(64, ["FLUSH", "ASYNC"])
STEPS["script flush sync"] = script_steps(100, ["FLUSH", "SYNC"])
STEPS["script flush, lazyfree-lazy-user-flush"] = [
    ["CONFIG", "SET", "lazyfree-lazy-user-flush", "yes"],
    *script_steps(70, ["FLUSH"]),
    ["CONFIG", "SET", "lazyfree-lazy-user-flush", "no"],
]


@pytest.mark.parametrize("name", STEPS)
def test_lazyfreed_objects_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess, name: str
) -> None:
    assert counts(headwater, STEPS[name]) == counts(redis_server, STEPS[name])
