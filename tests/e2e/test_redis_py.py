"""redis-py, sync and asyncio, RESP2 and RESP3, over TCP against a Headwater process."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest
import redis
import redis.asyncio

from tests.helpers import ServerProcess

pytestmark = pytest.mark.e2e

PROTOCOLS = [2, 3]


@pytest.fixture(params=PROTOCOLS, ids=["resp2", "resp3"])
def client(request: pytest.FixtureRequest, headwater: ServerProcess) -> Iterator[redis.Redis]:
    r = redis.Redis(port=headwater.port, protocol=request.param, socket_timeout=10)
    r.flushall()
    yield r
    r.close()


def _info_checks(info: dict[str, object]) -> None:
    assert info["redis_version"] == "8.10.0"
    assert info["server_name"] == "headwater"
    assert info["arch_bits"] == 64
    assert info["cluster_enabled"] == 0
    assert isinstance(info["blocked_clients"], int)
    assert isinstance(info["total_error_replies"], int)
    assert isinstance(info["tcp_port"], int)
    assert info["tcp_port"] > 0


def _raw_call(client: redis.Redis, *args: str) -> object:
    """Send a command and return the reply without redis-py's response callbacks."""
    conn = client.connection_pool.get_connection()
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        client.connection_pool.release(conn)


# -- sync -----------------------------------------------------------------------------------


def test_strings_hashes_expiry(client: redis.Redis) -> None:
    assert client.set("k", "v") is True
    assert client.get("k") == b"v"
    assert client.get("missing") is None
    assert client.incr("n") == 1
    assert client.incr("n", 41) == 42
    assert client.hset("h", mapping={"a": "1", "b": "2"}) == 2
    assert client.hgetall("h") == {b"a": b"1", b"b": b"2"}
    assert client.hget("h", "a") == b"1"
    assert client.ttl("k") == -1
    assert client.expire("k", 100) is True
    assert 95 <= client.ttl("k") <= 100
    assert client.ttl("missing") == -2
    assert client.pexpire("n", 50_000) is True
    assert 45_000 <= client.pttl("n") <= 50_000
    assert client.delete("k", "n", "h", "missing") == 3
    assert client.exists("k", "n", "h") == 0


def test_sets(client: redis.Redis) -> None:
    assert client.sadd("s", "a", "b", "c", 1) == 4
    assert client.smembers("s") == {b"a", b"b", b"c", b"1"}
    assert bool(client.sismember("s", "a")) and not client.sismember("s", "z")
    assert [bool(x) for x in client.smismember("s", ["a", "z"])] == [True, False]
    assert client.scard("s") == 4
    assert client.sadd("t", "b", "x") == 2
    assert client.sinter("s", "t") == {b"b"}
    assert client.sunion("s", "t") == {b"a", b"b", b"c", b"1", b"x"}
    assert client.sdiff("s", "t") == {b"a", b"c", b"1"}
    assert client.sintercard(2, ["s", "t"]) == 1
    assert client.sinterstore("d", ["s", "t"]) == 1
    assert client.smove("s", "t", "a")
    assert set(client.sscan_iter("s")) == {b"b", b"c", b"1"}
    assert set(client.sscan_iter("t")) == {b"a", b"b", b"x"}
    popped = client.spop("t", 10)
    assert popped is not None and sorted(popped) == [b"a", b"b", b"x"]
    assert client.exists("t") == 0
    assert client.srem("s", "b", "c", "1", "a") == 3
    assert client.type("d") == b"set"
    assert client.srandmember("d") == b"b"


def test_sorted_sets(client: redis.Redis) -> None:
    assert client.zadd("z", {"a": 1, "b": 2.5, "c": 3}) == 3
    pairs = client.zrange("z", 0, -1, withscores=True)  # (RESP3: lists, RESP2: tuples)
    assert [tuple(p) for p in pairs] == [(b"a", 1.0), (b"b", 2.5), (b"c", 3.0)]
    assert client.zscore("z", "b") == 2.5
    assert client.zincrby("z", 1, "a") == 2.0
    assert client.zrank("z", "a") == 0
    assert client.zrangebyscore("z", "(2", "+inf") == [b"b", b"c"]
    assert client.zrevrange("z", 0, 0) == [b"c"]
    assert client.zcount("z", 2, 3) == 3
    resp3 = client.connection_pool.connection_kwargs.get("protocol") == 3
    assert client.zpopmin("z") == ([b"a", 2.0] if resp3 else [(b"a", 2.0)])  # (as with Redis)
    key, popped = client.zmpop(1, ["z"], max=True)  # (scores as redis-py gives them)
    assert key == b"z" and [(m, float(s)) for m, s in popped] == [(b"c", 3.0)]
    assert client.zrem("z", "b") == 1
    assert client.exists("z") == 0
    assert client.zadd("l", {"x": 0, "y": 0}) == 2
    assert client.zrangebylex("l", "-", "[x") == [b"x"]
    assert dict(client.zscan_iter("l")) == {b"x": 0.0, b"y": 0.0}


def test_lists(client: redis.Redis, headwater: ServerProcess) -> None:
    assert client.rpush("l", "a", "b", "c") == 3
    assert client.lpush("l", "z") == 4
    assert client.lrange("l", 0, -1) == [b"z", b"a", b"b", b"c"]
    assert client.lindex("l", -1) == b"c"
    assert client.linsert("l", "BEFORE", "b", "x") == 5
    assert client.lset("l", 0, "first") is True
    assert client.lpos("l", "b") == 3
    assert client.lpos("l", "nope", count=0) == []
    assert client.lrem("l", 0, "x") == 1
    assert client.ltrim("l", 0, 2) is True
    assert client.lpop("l", 2) == [b"first", b"a"]
    assert client.lmove("l", "m", "LEFT", "RIGHT") == b"b"
    assert client.exists("l") == 0
    assert client.rpoplpush("m", "m") == b"b"
    assert client.lmpop(2, "nope", "m", direction="RIGHT", count=5) == [b"m", [b"b"]]
    assert client.blpop(["m"], timeout=0.05) is None  # (a timeout: None in both protocols)
    client.rpush("q", *[f"job-{i}" for i in range(5000)])
    assert client.llen("q") == 5000
    assert client.lrange("q", 0, -1)[4999] == b"job-4999"
    assert client.object("encoding", "q") == b"quicklist"
    # a blocked client is served by a push from another
    blocked = redis.Redis(port=headwater.port, socket_timeout=10)
    try:
        client.delete("jobs")
        got: list[object] = []
        waiter = threading.Thread(target=lambda: got.append(blocked.brpop(["jobs"], timeout=5)))
        waiter.start()
        time.sleep(0.2)
        client.lpush("jobs", "j1")
        waiter.join(5)
        assert got == [(b"jobs", b"j1")] or got == [[b"jobs", b"j1"]]
    finally:
        blocked.close()


async def _async_lists(port: int) -> None:
    r = redis.asyncio.Redis(port=port)
    try:
        await r.delete("al")
        assert await r.rpush("al", 1, 2, 3) == 3
        assert await r.blmove("al", "al2", 1, "LEFT", "RIGHT") == b"1"
        assert await r.brpoplpush("al", "al2", 1) == b"3"
        assert await r.lrange("al2", 0, -1) == [b"3", b"1"]  # (RPOPLPUSH pushes at the head)
    finally:
        await r.aclose()


def test_lists_asyncio(headwater: ServerProcess) -> None:
    asyncio.run(_async_lists(headwater.port))


def test_pipeline_without_transaction(client: redis.Redis) -> None:
    pipe = client.pipeline(transaction=False)
    for i in range(100):
        pipe.set(f"p{i}", i)
    for i in range(100):
        pipe.get(f"p{i}")
    pipe.incr("p0")
    pipe.hset("ph", "f", "v")
    results = pipe.execute()
    assert results[:100] == [True] * 100
    assert results[100:200] == [str(i).encode() for i in range(100)]
    assert results[200:] == [1, 1]


def test_pipeline_transaction(client: redis.Redis) -> None:
    pipe = client.pipeline(transaction=True)
    pipe.set("t", "1").incr("t").get("t").hset("th", mapping={"x": "y"}).hgetall("th")
    assert pipe.execute() == [True, 2, b"2", 1, {b"x": b"y"}]
    # An error inside the transaction does not abort the rest (Redis semantics).
    pipe = client.pipeline(transaction=True)
    pipe.set("s", "abc").incr("s").get("s")
    results = pipe.execute(raise_on_error=False)
    assert results[0] is True
    assert isinstance(results[1], redis.ResponseError)
    assert results[2] == b"abc"


def test_client_name_and_list(client: redis.Redis) -> None:
    assert client.client_getname() is None
    assert client.client_setname("e2e-client") is True
    # redis-py decodes the name for RESP2 only, as it does against redis-server.
    assert client.client_getname() in ("e2e-client", b"e2e-client")
    me = client.client_id()
    listed = client.client_list()
    assert isinstance(listed, list)
    mine = [c for c in listed if int(c["id"]) == me]
    assert len(mine) == 1
    assert mine[0]["name"] == "e2e-client"
    assert mine[0]["addr"].startswith("127.0.0.1:")
    assert client.client_info()["name"] == "e2e-client"


def test_info(client: redis.Redis) -> None:
    _info_checks(client.info())
    server = client.info("server")
    assert server["redis_version"] == "8.10.0"
    assert "blocked_clients" in client.info("clients")
    everything = client.info("everything")
    assert "total_error_replies" in everything


def test_config_get_set(client: redis.Redis, private_headwater: ServerProcess) -> None:
    assert client.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    r = redis.Redis(
        port=private_headwater.port, protocol=client.get_connection_kwargs()["protocol"]
    )
    try:
        assert r.config_set("maxmemory-policy", "allkeys-lru") is True
        assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "allkeys-lru"}
        got = r.config_get("max*")
        assert got["maxmemory-policy"] == "allkeys-lru"
        assert "maxclients" in got
        with pytest.raises(redis.ResponseError):
            r.config_set("maxmemory-policy", "no-such-policy")
        with pytest.raises(redis.ResponseError):
            r.config_set("no-such-parameter", "1")
        assert r.config_set("maxmemory-policy", "noeviction") is True
    finally:
        r.close()


def test_watch_conflict(client: redis.Redis, headwater: ServerProcess) -> None:
    other = redis.Redis(port=headwater.port)
    try:
        client.set("w", "0")
        with client.pipeline(transaction=True) as pipe:
            pipe.watch("w")
            assert pipe.get("w") == b"0"
            other.set("w", "changed")
            pipe.multi()
            pipe.set("w", "mine")
            with pytest.raises(redis.WatchError):
                pipe.execute()
        assert client.get("w") == b"changed"
        # Without interference the same transaction goes through.
        with client.pipeline(transaction=True) as pipe:
            pipe.watch("w")
            pipe.multi()
            pipe.set("w", "mine")
            assert pipe.execute() == [True]
        assert other.get("w") == b"mine"
    finally:
        other.close()


def test_select_isolation(client: redis.Redis, headwater: ServerProcess) -> None:
    proto = client.get_connection_kwargs()["protocol"]
    db1 = redis.Redis(port=headwater.port, db=1, protocol=proto)
    try:
        client.set("iso", "db0")
        assert db1.get("iso") is None
        db1.set("iso", "db1")
        assert client.get("iso") == b"db0"
        assert db1.get("iso") == b"db1"
        assert client.dbsize() == 1
        assert db1.dbsize() == 1
        with pytest.raises(redis.ResponseError):
            client.execute_command("SELECT", 16)
    finally:
        db1.close()


def test_command_introspection(client: redis.Redis) -> None:
    count = client.command_count()
    assert isinstance(count, int)
    assert count > 50
    # redis-py's command_info() raises NotImplementedError by design; command() parses
    # COMMAND (all rows) and COMMAND INFO goes through execute_command.
    table = client.command()
    assert table["get"]["arity"] == 2
    assert len(table) == count
    rows = client.execute_command("COMMAND", "INFO", "get", "hset")
    assert set(rows) == {"get", "hset"}
    # COMMAND DOCS and COMMAND INFO with unknown names have no client-side parser: read raw.
    docs = _raw_call(client, "COMMAND", "DOCS", "get", "set")
    assert b"summary" in repr(docs).encode()
    assert _raw_call(client, "COMMAND", "INFO", "get", "nosuchcommand")[1] is None
    listed = client.command_list()
    assert "hgetall" in [name.decode() if isinstance(name, bytes) else name for name in listed]
    assert _raw_call(client, "COMMAND", "GETKEYS", "SET", "a", "b") == [b"a"]


def test_errors_are_response_errors(client: redis.Redis) -> None:
    client.set("str", "x")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        client.hget("str", "f")
    with pytest.raises(redis.ResponseError, match="unknown command"):
        client.execute_command("NOSUCHCOMMAND")
    with pytest.raises(redis.ResponseError, match="not an integer"):
        client.incr("str")
    assert client.ping() is True


# -- asyncio --------------------------------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.parametrize("protocol", PROTOCOLS, ids=["resp2", "resp3"])
async def test_async_client(headwater: ServerProcess, protocol: int) -> None:
    r = redis.asyncio.Redis(port=headwater.port, protocol=protocol, socket_timeout=10)
    other = redis.asyncio.Redis(port=headwater.port, protocol=protocol, socket_timeout=10)
    try:
        await r.flushall()
        assert await r.set("ak", "v") is True
        assert await r.get("ak") == b"v"
        assert await r.incr("an") == 1
        assert await r.hset("ah", mapping={"a": "1"}) == 1
        assert await r.hgetall("ah") == {b"a": b"1"}
        assert await r.expire("ak", 60) is True
        assert 55 <= await r.ttl("ak") <= 60

        async with r.pipeline(transaction=False) as pipe:
            for _ in range(50):
                pipe.incr("counter")
            assert await pipe.execute() == list(range(1, 51))
        async with r.pipeline(transaction=True) as pipe:
            pipe.set("tx", "a").get("tx").incr("counter")
            assert await pipe.execute() == [True, b"a", 51]

        assert await r.client_setname("async-e2e") is True
        assert await r.client_getname() in ("async-e2e", b"async-e2e")
        names = [c["name"] for c in await r.client_list()]
        assert "async-e2e" in names

        _info_checks(await r.info())
        assert (await r.config_get("maxclients"))["maxclients"].isdigit()

        await r.set("aw", "0")
        async with r.pipeline(transaction=True) as pipe:
            await pipe.watch("aw")
            await other.set("aw", "1")
            pipe.multi()
            pipe.set("aw", "2")
            with pytest.raises(redis.WatchError):
                await pipe.execute()
        assert await r.get("aw") == b"1"

        assert await r.command_count() > 50
        assert (await r.command())["get"]["arity"] == 2
        assert await r.command_count() == len(await r.command())
    finally:
        await r.aclose()
        await other.aclose()


@pytest.mark.asyncio
async def test_async_concurrent_clients(headwater: ServerProcess) -> None:
    clients = [redis.asyncio.Redis(port=headwater.port) for _ in range(20)]
    try:
        await clients[0].delete("shared")

        async def bump(r: redis.asyncio.Redis) -> None:
            for _ in range(50):
                await r.incr("shared")

        await asyncio.gather(*(bump(r) for r in clients))
        assert await clients[0].get("shared") == b"1000"
    finally:
        for r in clients:
            await r.aclose()
