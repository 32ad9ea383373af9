"""Streams over TCP with redis-py, sync and asyncio, RESP2 and RESP3 (issue #3)."""

from __future__ import annotations

import asyncio

import pytest
import redis
import redis.asyncio as aioredis

from tests.helpers import ServerProcess

pytestmark = pytest.mark.e2e


@pytest.mark.asyncio
async def test_a_million_entries_produced_sync_resp2_read_asyncio_resp3(
    headwater: ServerProcess,
) -> None:
    """One million entries: written by sync redis-py over RESP2, read back by asyncio
    redis-py over RESP3, every entry exactly once, in order."""
    key = "million"
    total, batch = 1_000_000, 20_000
    writer = redis.Redis(port=headwater.port, protocol=2)
    writer.delete(key)
    ids: list[bytes] = []
    for start in range(0, total, batch):
        pipe = writer.pipeline(transaction=False)
        for i in range(start, start + batch):
            pipe.xadd(key, {"n": i})
        ids.extend(pipe.execute())
    assert writer.xlen(key) == total
    assert len(set(ids)) == total
    reader = aioredis.Redis(port=headwater.port, protocol=3)
    try:
        seen, last = 0, "0-0"
        while True:
            chunk = await reader.xread({key: last}, count=100_000)
            if not chunk:
                break
            entries = chunk[key.encode()][0]
            for sid, fields in entries:
                assert sid == ids[seen]
                assert fields == {b"n": str(seen).encode()}
                seen += 1
            last = entries[-1][0]
        assert seen == total
        assert (await reader.xrevrange(key, count=1))[0][0] == ids[-1]
    finally:
        await reader.aclose()
        writer.delete(key)


@pytest.mark.asyncio
@pytest.mark.parametrize("protocol", [2, 3])
async def test_200_blocked_readers_woken_by_one_xadd(
    headwater: ServerProcess, protocol: int
) -> None:
    key = f"fanout:{protocol}"
    clients = [aioredis.Redis(port=headwater.port, protocol=protocol) for _ in range(201)]
    writer, readers = clients[0], clients[1:]
    try:
        await writer.delete(key)
        tasks = [asyncio.create_task(r.xread({key: "$"}, block=20_000)) for r in readers]
        for _ in range(200):  # wait until every reader is parked
            info = await writer.info("clients")
            if info["blocked_clients"] >= 200:
                break
            await asyncio.sleep(0.05)
        assert info["blocked_clients"] >= 200
        sid = await writer.xadd(key, {"f": "v"})
        results = await asyncio.wait_for(asyncio.gather(*tasks), timeout=10)
        for result in results:
            entries = result[0][1] if protocol == 2 else result[key.encode()][0]
            assert entries == [(sid, {b"f": b"v"})]
        assert (await writer.info("clients"))["blocked_clients"] == 0
    finally:
        for client in clients:
            await client.aclose()


def test_xread_block_times_out_with_none(headwater: ServerProcess) -> None:
    r = redis.Redis(port=headwater.port)
    assert r.xread({"never": "$"}, block=100) in (None, [], {})


def test_client_unblock_releases_a_blocked_xread(headwater: ServerProcess) -> None:
    import threading

    r = redis.Redis(port=headwater.port)
    blocked = redis.Redis(port=headwater.port)
    target = blocked.client_id()
    result: list[object] = []
    thread = threading.Thread(target=lambda: result.append(blocked.xread({"u": "$"}, block=0)))
    thread.start()
    for _ in range(100):
        if r.info("clients")["blocked_clients"]:
            break
        threading.Event().wait(0.02)
    assert r.client_unblock(target) == 1
    thread.join(5)
    assert not thread.is_alive() and result and not result[0]


@pytest.mark.parametrize("protocol", [2, 3])
def test_xread_maxcount_maxsize_over_tcp(headwater: ServerProcess, protocol: int) -> None:
    """Redis 8.10's cumulative caps, sent raw (execute_command) and through redis-py's own
    max_count / max_size arguments, in RESP2 and RESP3."""
    r = redis.Redis(port=headwater.port, protocol=protocol)
    keys = [f"caps:{protocol}:{n}" for n in range(3)]
    r.delete(*keys)
    for key in keys:
        for n in range(1, 4):
            r.xadd(key, {"f": "x" * n}, id=f"{n}-0")
    raw = r.execute_command("XREAD", "COUNT", 2, "MAXCOUNT", 3, "STREAMS", *keys, 0, 0, 0)
    # redis-py's RESP3 callback wraps each key's entries in a list
    shaped = [(k, v[0]) for k, v in raw.items()] if protocol == 3 else [(k, v) for k, v in raw]
    assert [(k.decode(), len(v)) for k, v in shaped] == [(keys[0], 2), (keys[1], 1)]
    got = r.xread(dict.fromkeys(keys, "0"), count=2, max_count=3)
    rows = list(got.items()) if protocol == 3 else got
    assert [len(entries if protocol == 2 else entries[0]) for _, entries in rows] == [2, 1]
    got = r.xread(dict.fromkeys(keys, "0"), max_size=1)  # one oversized entry, at least
    rows = list(got.items()) if protocol == 3 else got
    assert len(rows) == 1
    with pytest.raises(redis.ResponseError, match=r"^MAXCOUNT must be a positive integer$"):
        r.execute_command("XREAD", "MAXCOUNT", 0, "STREAMS", keys[0], 0)
    with pytest.raises(redis.ResponseError, match=r"^MAXSIZE must be a positive integer$"):
        r.execute_command("XREAD", "MAXSIZE", -1, "STREAMS", keys[0], 0)
    with pytest.raises(redis.ResponseError, match="MAXCOUNT must be greater than or equal"):
        r.execute_command("XREAD", "COUNT", 3, "MAXCOUNT", 2, "STREAMS", keys[0], 0)
    # XREADGROUP: what the caps leave out stays undelivered
    for key in keys:
        r.xgroup_create(key, "g", "0")
    r.execute_command(
        "XREADGROUP", "GROUP", "g", "c", "MAXCOUNT", 4, "STREAMS", *keys, ">", ">", ">"
    )
    assert [r.xpending(key, "g")["pending"] for key in keys] == [3, 1, 0]
    got = r.xreadgroup("g", "c", dict.fromkeys(keys, ">"), max_count=2)
    rows = list(got.items()) if protocol == 3 else got
    assert [(k.decode(), len(v if protocol == 2 else v[0])) for k, v in rows] == [(keys[1], 2)]
    r.delete(*keys)


def test_blocked_xreadgroup_with_maxcount_gets_only_maxcount(headwater: ServerProcess) -> None:
    import threading

    r = redis.Redis(port=headwater.port)
    blocked = redis.Redis(port=headwater.port)
    key = "caps:block"
    r.delete(key)
    r.xgroup_create(key, "g", "$", mkstream=True)
    result: list[object] = []

    def read() -> None:
        result.append(
            blocked.execute_command(
                "XREADGROUP", "GROUP", "g", "c", "MAXCOUNT", 2, "BLOCK", 5000, "STREAMS", key, ">"
            )
        )

    thread = threading.Thread(target=read)
    thread.start()
    for _ in range(200):
        if r.info("clients")["blocked_clients"]:
            break
        threading.Event().wait(0.02)
    pipe = r.pipeline(transaction=True)
    for n in range(1, 5):
        pipe.xadd(key, {"n": n}, id=f"{n}-0")
    pipe.execute()
    thread.join(5)
    assert not thread.is_alive()
    ((name, entries),) = result[0]  # type: ignore[misc]
    assert name == key.encode() and [e[0] for e in entries] == [b"1-0", b"2-0"]
    assert r.xpending(key, "g")["pending"] == 2
    r.delete(key)
