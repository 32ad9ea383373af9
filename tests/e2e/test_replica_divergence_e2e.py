"""A primary's command this replica cannot apply (a module's, a cluster's) is not skipped in
silence (issue 35): the link goes on, logs it, and INFO replication counts it with the last
one's name. The primary here is a few lines of Python speaking Redis's side of PSYNC: an
empty RDB file, then a write Headwater has, one it has not, and another it has."""

from __future__ import annotations

import asyncio
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from headwater.rdb.crc64 import crc64
from tests.helpers import encode_command, free_port, start_headwater
from tests.support.replicas import info, wait_until

pytestmark = pytest.mark.e2e

REPLID = "a" * 40


def empty_rdb() -> bytes:
    body = b"REDIS0010\xff"
    return body + struct.pack("<Q", crc64(body))


async def serve_one_replica(
    port: int, ready: threading.Event, stop: asyncio.Event, rdb: bytes
) -> None:
    async def session(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            line = await reader.readline()
            if not line:
                return
            if line.startswith(b"*"):
                words = [await _bulk(reader) for _ in range(int(line[1:]))]
            else:
                words = line.split()
            name = words[0].upper()
            if name == b"PSYNC":
                writer.write(b"+FULLRESYNC %s 0\r\n$%d\r\n%s" % (REPLID.encode(), len(rdb), rdb))
                writer.write(
                    encode_command("SET", "before", "1")
                    + encode_command("MODULE.THING", "x")
                    + encode_command("SET", "after", "1")
                )
                await writer.drain()
                await stop.wait()
                return
            writer.write(b"+OK\r\n" if name != b"PING" else b"+PONG\r\n")
            await writer.drain()

    server = await asyncio.start_server(session, "127.0.0.1", port)
    ready.set()
    async with server:
        await stop.wait()


async def _bulk(reader: asyncio.StreamReader) -> bytes:
    size = int((await reader.readline())[1:])
    data = await reader.readexactly(size + 2)
    return data[:-2]


@pytest.fixture
def fake_primary(request: pytest.FixtureRequest) -> Iterator[int]:
    """A primary whose full sync sends ``request.param`` as its RDB (an empty file unless a
    test says otherwise)."""
    rdb = getattr(request, "param", None) or empty_rdb()
    port = free_port()
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    stop = asyncio.Event()
    thread = threading.Thread(
        target=lambda: loop.run_until_complete(serve_one_replica(port, ready, stop, rdb)),
        daemon=True,
    )
    thread.start()
    ready.wait(10)
    yield port
    loop.call_soon_threadsafe(stop.set)
    thread.join(10)


def test_a_command_the_replica_lacks_is_counted_not_skipped_in_silence(fake_primary: int) -> None:
    replica = start_headwater("--replicaof", "127.0.0.1", str(fake_primary))
    try:
        r = redis.Redis(port=replica.port, socket_timeout=10)
        wait_until(lambda: r.get("after") == b"1", timeout=20, what="the stream applied")
        assert r.get("before") == b"1"
        replication = info(r)
        assert replication["master_link_failed_commands"] == 1
        assert replication["master_link_last_failed_command"] == "MODULE.THING"
        assert replication["master_link_status"] == "up"
    finally:
        replica.stop()


@pytest.mark.parametrize("fake_primary", [empty_rdb() + b"junk!"], indirect=True)
def test_bytes_after_the_rdb_fail_the_sync(fake_primary: int, tmp_path: Path) -> None:
    """A transfer that goes on past the RDB file's checksum (within the size it announced)
    is refused, as a file that does not load: the data served stays as it was."""
    log = tmp_path / "replica.log"
    replica = start_headwater("--replicaof", "127.0.0.1", str(fake_primary), "--logfile", str(log))
    try:
        want = (
            "Failed trying to load the MASTER synchronization DB: 5 bytes after the end of the "
            "RDB data (the data served is unchanged)"
        )
        wait_until(lambda: want in log.read_text(), timeout=20, what="the refusal logged")
        r = redis.Redis(port=replica.port, socket_timeout=10)
        assert info(r)["master_link_status"] == "down" and r.get("before") is None
    finally:
        replica.stop()
