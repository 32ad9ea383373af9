"""DEBUG DIGEST-VALUE (what ``redis-cli --cluster`` compares when a key being moved exists
on both nodes): the same digest as redis-server for values of every type and encoding,
with and without a TTL, and for a missing key."""

from __future__ import annotations

import pytest

from tests.differential.harness import assert_same

VALUES = [
    "SET s hello",
    "SET n 12345",
    "SET ttl v EX 1000",
    "RPUSH l a b 17 c",
    "RPUSH big " + " ".join(f"item{i}" for i in range(200)),
    "SADD si 1 2 3 -7",
    "SADD ss x y z",
    "ZADD zs 1.5 a 2 b -0.25 c 1e300 d inf e",
    "ZADD zbig " + " ".join(f"{i / 3} m{i}" for i in range(200)),
    "HSET h f v g w 10 20",
    "HSET hbig " + " ".join(f"f{i} " + "x" * 80 for i in range(3)),
    "XADD x 1-1 a 1 b 2",
    "XADD x 2-5 c 3",
    "XADD x 3-0 a 1 b 2",
    "PFADD hll a b c",
]


@pytest.mark.parametrize("resp", [2, 3])
def test_digests_match_redis(headwater: object, redis_server: object, resp: int) -> None:
    keys = "s n ttl l big si ss zs zbig h hbig x hll missing"
    assert_same(
        headwater,  # type: ignore[arg-type]
        redis_server,  # type: ignore[arg-type]
        [*VALUES, f"DEBUG DIGEST-VALUE {keys}", "DEBUG DIGEST-VALUE"],
        resp,
    )
