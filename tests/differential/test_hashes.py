"""The rest of the hash commands (#19) that Redis 7.0 has, byte for byte against Debian's
redis-server 7.0 in RESP2 and RESP3: HINCRBYFLOAT, HRANDFIELD (the deterministic cases: a
count covering the hash, a one-field hash, errors, RESP3's pairs), HSCAN.

Field expiration (HEXPIRE …) and HSCAN NOVALUES are Redis 7.4: unit tests against the 7.4
source (tests/unit/test_hash_ttl.py).
"""

from __future__ import annotations

import pytest

from tests.differential.harness import UNORDERED as U
from tests.differential.harness import assert_same
from tests.helpers import ServerProcess

BIG = " ".join(f"f{n} v{n}" for n in range(600))

SCENARIOS: dict[str, list[str]] = {
    "hincrbyfloat": [
        "HINCRBYFLOAT h f 10.5",
        "HINCRBYFLOAT h f 0.1",
        "HINCRBYFLOAT h f -10.6",
        "HGET h f",
        "HSET h i 5 s abc big 1.7976931348623157e308",
        "HINCRBYFLOAT h i 1.5e3",
        "HINCRBYFLOAT h s 1",
        "HINCRBYFLOAT h big 1.7976931348623157e308",
        "HINCRBYFLOAT h big 1e308",
        "HINCRBYFLOAT h f inf",
        "HINCRBYFLOAT h f -inf",
        "HINCRBYFLOAT h f nan",
        "HINCRBYFLOAT h f abc",
        "HINCRBYFLOAT h f 1e5000",
        "HINCRBYFLOAT h f ''",
        "HINCRBYFLOAT h f 0x10",
        U + "HGETALL h",
        "SET str x",
        "HINCRBYFLOAT str f 1",
        "HINCRBYFLOAT str f x",
        "HINCRBYFLOAT h f",
        "HINCRBYFLOAT new f 3",
        "OBJECT ENCODING new",
    ],
    "hrandfield": [
        "HRANDFIELD nokey",
        "HRANDFIELD nokey 3",
        "HRANDFIELD nokey -3 WITHVALUES",
        "HRANDFIELD nokey 0",
        "HSET one a 1",
        "HRANDFIELD one",
        "HRANDFIELD one 1",
        "HRANDFIELD one -3",
        "HRANDFIELD one -3 WITHVALUES",
        "HRANDFIELD one 5 WITHVALUES",
        "HRANDFIELD one 0",
        "HRANDFIELD one 0 WITHVALUES",
        "HSET h a 1 b 2 c 3",
        "HRANDFIELD h 3",
        "HRANDFIELD h 10 WITHVALUES",
        "HRANDFIELD h 3 withvalues",
        "HRANDFIELD h x",
        "HRANDFIELD h 1 FOO",
        "HRANDFIELD h 1 WITHVALUES x",
        "HRANDFIELD h -9223372036854775808",
        "HRANDFIELD h 9223372036854775807 WITHVALUES",
        "HRANDFIELD h -9223372036854775807 WITHVALUES",
        "HRANDFIELD h 4611686018427387904 WITHVALUES",
        "HRANDFIELD h 4611686018427387903",
        "SET str x",
        "HRANDFIELD str",
        "HRANDFIELD str 1",
        "HRANDFIELD str 0",
    ],
    "hscan": [
        "HSCAN nokey 0",
        "HSET h a 1 b 2 c 3 ab 4",
        "HSCAN h 0",
        "HSCAN h 0 MATCH a*",
        "HSCAN h 0 COUNT 1",
        "HSCAN h 0 MATCH x* COUNT 100",
        "HSCAN h x",
        "HSCAN h 0 COUNT 0",
        "HSCAN h 0 COUNT",
        "HSCAN h 0 FOO 1",
        "HSCAN h 0 MATCH",
        "SET str x",
        "HSCAN str 0",
        "HSCAN nokey 0 FOO",
        f"HSET big {BIG}",
        "OBJECT ENCODING big",
        U + "HSCAN big 0 MATCH f1?9 COUNT 1000",
        U + "HSCAN big 0 MATCH f59? COUNT 10000",
    ],
}


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_same_bytes_as_redis(
    headwater: ServerProcess, redis_server: ServerProcess, name: str, resp: int
) -> None:
    assert_same(headwater, redis_server, SCENARIOS[name], resp)  # type: ignore[arg-type]
