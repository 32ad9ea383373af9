"""faststream's Redis broker against Headwater over TCP (issue #16 §4): a channel subscriber
(SUBSCRIBE / PUBLISH), a pattern subscriber, a stream subscriber in a consumer group
(XGROUP CREATE, XREADGROUP, XACK) and request/reply over a stream, where the requester
waits on a reply channel of its own."""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import ServerProcess

faststream_redis = pytest.importorskip("faststream.redis")

pytestmark = pytest.mark.e2e


def test_faststream_channels_streams_and_request_reply(headwater: ServerProcess) -> None:
    async def scenario() -> dict[str, object]:
        broker = faststream_redis.RedisBroker(f"redis://127.0.0.1:{headwater.port}")
        got: dict[str, list[object]] = {"channel": [], "pattern": [], "stream": []}
        done = asyncio.Event()

        def check_done() -> None:
            if len(got["channel"]) == 3 and len(got["pattern"]) == 1 and len(got["stream"]) == 5:
                done.set()

        @broker.subscriber("fs:news")
        async def on_channel(body: str) -> None:
            got["channel"].append(body)
            check_done()

        @broker.subscriber(channel=faststream_redis.PubSub("fs:alerts.*", pattern=True))
        async def on_pattern(body: str) -> None:
            got["pattern"].append(body)
            check_done()

        @broker.subscriber(
            stream=faststream_redis.StreamSub("fs:jobs", group="workers", consumer="w1")
        )
        async def on_stream(body: dict[str, int]) -> None:
            got["stream"].append(body["n"])
            check_done()

        @broker.subscriber(stream="fs:rpc")
        async def on_rpc(body: str) -> str:
            return body.upper()

        async with broker:
            await broker.start()
            for text in ("a", "b", "c"):
                await broker.publish(text, channel="fs:news")
            await broker.publish("disk full", channel="fs:alerts.disk")
            for n in range(5):
                await broker.publish({"n": n}, stream="fs:jobs")
            await asyncio.wait_for(done.wait(), 20)
            reply = await broker.request("ping", stream="fs:rpc", timeout=10)
            answer = await reply.decode()
            pending = await broker._connection.xpending("fs:jobs", "workers")
        return {**got, "answer": answer, "pending": pending["pending"]}

    result = asyncio.run(scenario())
    assert result["channel"] == ["a", "b", "c"]
    assert result["pattern"] == ["disk full"]
    assert result["stream"] == [0, 1, 2, 3, 4]
    assert result["answer"] == "PING"
    assert result["pending"] == 0
