"""redis-py's own calls for the string and hash commands of #19 (its argument building and
reply parsing, RESP2 and RESP3), over TCP against a Headwater process."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import redis

from tests.helpers import ServerProcess

pytestmark = pytest.mark.e2e


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def r(request: pytest.FixtureRequest, headwater: ServerProcess) -> Iterator[redis.Redis]:
    client = redis.Redis(port=headwater.port, protocol=request.param, socket_timeout=10)
    client.flushall()
    yield client
    client.close()


def test_strings(r: redis.Redis) -> None:
    r.set("s", "Hello World")
    assert r.getrange("s", 0, 4) == b"Hello"
    assert r.setrange("s", 6, "Redis") == 11
    assert r.get("s") == b"Hello Redis"
    assert r.incrbyfloat("f", 10.5) == 10.5
    assert r.incrbyfloat("f", 0.1) == pytest.approx(10.6)
    assert r.get("f") == b"10.6"
    r.mset({"a": "ohmytext", "b": "mynewtext"})
    assert r.lcs("a", "b") == b"mytext"
    assert r.lcs("a", "b", len=True) == 6
    assert r.setbit("bits", 7, 1) == 0
    assert r.getbit("bits", 7) == 1
    assert r.bitcount("bits") == 1
    assert r.bitpos("bits", 1) == 7
    assert r.bitop("NOT", "inv", "bits") == 1
    assert r.get("inv") == b"\xfe"
    bf = r.bitfield("bf")
    assert bf.set("i8", 0, 100).incrby("i8", 0, 100).execute() == [0, -56]
    assert r.bitfield_ro("bf", "i8", 0) == [-56]
    with pytest.raises(redis.ResponseError, match="proto-max-bulk-len"):
        r.setrange("s", 536870912, "x")
    with pytest.raises(redis.ResponseError, match="bit offset"):
        r.setbit("bits", 2**32 * 8, 1)


def test_hashes(r: redis.Redis) -> None:
    r.hset("h", mapping={"a": "1", "b": "2", "c": "3"})
    assert r.hincrbyfloat("h", "a", 0.5) == 1.5
    assert set(r.hrandfield("h", 3)) == {b"a", b"b", b"c"}
    pairs = r.hrandfield("h", -2, withvalues=True)
    assert len(pairs) in (2, 4)
    cursor, found = r.hscan("h", 0, match="b")
    assert (cursor, found) == (0, {b"b": b"2"})
    assert r.hexpire("h", 100, "a", "zz") == [1, -2]
    assert r.httl("h", "a", "b") == [100, -1]
    assert r.hpexpire("h", 50, "b", gt=True) == [0]
    assert r.hpexpire("h", 50, "b") == [1]
    assert r.hpersist("h", "a") == [1]
    assert r.hexpiretime("h", "a") == [-1]
    time.sleep(0.1)
    assert r.hgetall("h") == {b"a": b"1.5", b"c": b"3"}
    assert r.hlen("h") == 2
