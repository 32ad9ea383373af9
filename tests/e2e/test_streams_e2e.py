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
