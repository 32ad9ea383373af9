"""The turn of a roll-back, driven by hand: ``Server.flush`` on an event loop that is not
running, so that no queued callback runs unless the test says so (what a busy box does when
the loop polls for input before the callbacks the roll-back queued)."""

from __future__ import annotations

import asyncio
import errno
from collections.abc import Iterator
from pathlib import Path

import pytest

from headwater.commands.context import Client
from headwater.commands.gate import ReplyGate
from headwater.config import Config
from headwater.server.app import Server
from tests.support.file_ops import FaultyFileOps


class FakeConnection:
    """What ``Server.flush`` needs of a connection: ``send`` the client's output."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.sent: list[bytes] = []

    def send(self) -> None:
        self.sent.append(b"".join(self.client.out))
        self.client.out.clear()


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def test_a_read_sent_after_the_roll_back_reply_sees_the_durable_data(
    tmp_path: Path, loop: asyncio.AbstractEventLoop
) -> None:
    """The writer's -MISCONF leaves in the flush that rolls back; a read that arrives after
    it (before any callback the roll-back queued has run) is answered from the data loaded
    again, not failed with -MISCONF for having run on the dropped entry."""
    ops = FaultyFileOps()
    server = Server(Config(), loop, str(tmp_path), ops=ops)
    server.durability.open()
    engine = server.engine
    conns: dict[Client, FakeConnection] = {}
    for _ in range(2):
        gate = ReplyGate(server.durability.may_reply, lambda: None)
        client = engine.new_client("127.0.0.1:1", "127.0.0.1:2", gate)
        conns[client] = FakeConnection(client)
    server.connections.update(conns)  # type: ignore[arg-type]
    writer, reader = conns
    engine.execute(writer, [b"CONFIG", b"SET", b"aof-write-error-timeout", b"0"])
    engine.execute(writer, [b"XADD", b"s", b"1-1", b"f", b"kept"])
    server.flush()
    assert conns[writer].sent[-1] == b"+OK\r\n$3\r\n1-1\r\n"
    ops.fail_writes(errno.ENOSPC)
    engine.execute(writer, [b"XADD", b"s", b"2-1", b"f", b"lost"])
    server.flush()  # the write fails, the error has lasted 0 ms: roll-back
    assert conns[writer].sent[-1].startswith(b"-MISCONF ")
    engine.execute(reader, [b"XLEN", b"s"])
    server.flush()
    assert conns[reader].sent == [b":1\r\n"]
    server.durability.close()
