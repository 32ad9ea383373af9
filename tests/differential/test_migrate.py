"""MIGRATE against redis-server: the same MIGRATE from Headwater and from Redis, each to a
redis-server of its own, gives the same replies (errors included) and leaves the same keys
on both sides; keys of every type arrive whole (the target's DEBUG DIGEST-VALUE agrees)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.differential.harness import argv_of
from tests.helpers import RawClient, ServerProcess, free_port, start_headwater, start_redis

FILL = [
    "SET str hello",
    "SET ttl v PX 100000",
    "RPUSH list a b c",
    "HSET hash f v g w",
    "SADD set x y z",
    "ZADD zset 1 a 2 b",
    "XADD stream 1-1 f v",
    "XGROUP CREATE stream g 0",
    "XREADGROUP GROUP g alice STREAMS stream >",
    "PFADD hll a b c",
]
KEYS = ["str", "ttl", "list", "hash", "set", "zset", "stream", "hll"]


@pytest.fixture
def servers() -> Iterator[tuple[ServerProcess, ServerProcess, ServerProcess, ServerProcess]]:
    ours, theirs = start_headwater(), start_redis()
    our_target, their_target = start_redis(), start_redis()
    yield ours, theirs, our_target, their_target
    for server in (ours, theirs, our_target, their_target):
        server.stop()


def _scenario(target_port: int, dead_port: int) -> list[str]:
    to = f"MIGRATE 127.0.0.1 {target_port}"
    return [
        *FILL,
        f"{to} missing 0 5000",
        f"{to} str 0 5000",
        "EXISTS str",
        f"{to} str 0 5000",
        f"{to} list 0 5000 COPY",
        "EXISTS list",
        f"{to} list 0 5000",
        f"{to} list 0 5000 REPLACE",
        "EXISTS list",
        f'{to} "" 0 5000 KEYS hash set zset missing',
        f'{to} "" 1 5000 KEYS stream ttl hll',
        f"{to} x 0 5000 KEYS a",
        f"{to} x 0 5000 FOO",
        f"{to} x 0 5000 AUTH",
        f"{to} x 0 5000 AUTH2 u",
        f"{to} x x 5000",
        f"{to} x 0 x",
        "SET x 1",
        f"{to} x 0 5000 AUTH secret",
        f"MIGRATE 127.0.0.1 {dead_port} x 0 500",
        "MIGRATE 127.0.0.1 x x 0 500",
        "DBSIZE",
    ]


def test_migrate_answers_and_moves_as_redis(
    servers: tuple[ServerProcess, ServerProcess, ServerProcess, ServerProcess],
) -> None:
    ours, theirs, our_target, their_target = servers
    dead = free_port()
    for source, target in ((ours, our_target), (theirs, their_target)):
        source.replies = []  # type: ignore[attr-defined]
        client = RawClient(source.port)
        for command in _scenario(target.port, dead):
            source.replies.append(client.call(*argv_of(command)))  # type: ignore[attr-defined]
        client.close()
    commands = _scenario(0, dead)
    for command, got, want in zip(commands, ours.replies, theirs.replies, strict=True):  # type: ignore[attr-defined]
        if "Target instance replied" in want.decode() or "IOERR" in want.decode():
            assert got.split(b":")[0] == want.split(b":")[0], command
            continue
        assert got == want, f"{command!r}: headwater {got!r} != redis {want!r}"
    mine, reference = RawClient(our_target.port), RawClient(their_target.port)
    for db in (b"0", b"1"):
        mine.call("SELECT", db)
        reference.call("SELECT", db)
        assert mine.call("DBSIZE") == reference.call("DBSIZE")
        for key in KEYS:
            digest = mine.call("DEBUG", "DIGEST-VALUE", key)
            assert digest == reference.call("DEBUG", "DIGEST-VALUE", key), (db, key)
        ttl = mine.call("PTTL", "ttl")
        assert ttl.startswith(b":-2") == reference.call("PTTL", "ttl").startswith(b":-2")
    mine.call("SELECT", "1")
    assert int(mine.call("PTTL", "ttl")[1:]) > 90_000  # (the TTL went along)
    mine.close()
    reference.close()
