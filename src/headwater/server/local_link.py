"""A client of the server inside its own process: what the web console runs commands through.

Theory of operation
-------------------
The console is a Redis client like any other (RedisInsight is one), so every rule it meets is
the server's own: ACL checks as its user (a user without write permission gets NOPERM for
XACK), replies held until the AOF has them, XREAD BLOCK's wait, Pub/Sub's messages, CLIENT
LIST and INFO counting it. Nothing of the console is a second copy of a command.

It is not a socket: ``LocalTransport`` is an asyncio transport whose writes feed a hiredis
reader, and a real ``Connection`` (server/protocol.py) sits on it, the same class a TCP
client gets; requests go in through ``Connection.data_received`` as RESP. The connection's
peer is the HTTP client's address, so CLIENT LIST shows who looks and protected-mode applies
as to any client.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import hiredis

from headwater.resp.encoder import encode_command
from headwater.server.protocol import Connection

if TYPE_CHECKING:
    from headwater.server.hosts import ConnectionHost


class LinkClosed(Exception):
    """The server closed the local connection (CLIENT KILL, shutdown, a protocol error)."""


class PeerSocket:
    """What a connection asks of its socket: the two addresses, and no file descriptor."""

    def __init__(self, peer: tuple[str, int], local: tuple[str, int]) -> None:
        self._peer = peer
        self._local = local

    def getpeername(self) -> tuple[str, int]:
        return self._peer

    def getsockname(self) -> tuple[str, int]:
        return self._local

    def fileno(self) -> int:
        return -1


class LocalTransport(asyncio.Transport):
    """The server's side of a local connection: its writes are the client's input."""

    def __init__(self, link: LocalClient, sock: PeerSocket) -> None:
        super().__init__()
        self._link = link
        self._sock = sock
        self._closing = False

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._closing:
            self._link.received(bytes(data))

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        if not self._closing:
            self._closing = True
            asyncio.get_running_loop().call_soon(self._link.lost)

    def abort(self) -> None:
        self.close()

    def get_write_buffer_size(self) -> int:
        return 0  # (every write is taken at once)

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        return None

    def pause_reading(self) -> None:
        return None  # (the local client sends only when asked: nothing to hold back)

    def resume_reading(self) -> None:
        return None

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self._sock if name == "socket" else default


class LocalClient:
    """One connection to the server from inside it; ``call`` one command, ``pipeline``
    several at once, ``message`` what a subscribed connection receives."""

    def __init__(self, host: ConnectionHost, peer: tuple[str, int], local: tuple[str, int]) -> None:
        self._host = host
        self._reader = hiredis.Reader()
        self._replies: asyncio.Queue[Any] = asyncio.Queue()
        self.closed = False
        self.connection = Connection(host)
        self.transport = LocalTransport(self, PeerSocket(peer, local))
        self.connection.connection_made(self.transport)

    def received(self, data: bytes) -> None:
        reader = self._reader
        reader.feed(data)
        reply = reader.gets()
        while reply is not False:
            self._replies.put_nowait(reply)
            reply = reader.gets()

    def lost(self) -> None:
        if not self.closed:
            self.closed = True
            self.connection.connection_lost(None)
            self._replies.put_nowait(LinkClosed())

    def send(self, *commands: Sequence[bytes | str | int]) -> None:
        """Send commands without waiting for their replies."""
        if self.closed:
            raise LinkClosed()
        data = b"".join(encode_command([_arg(a) for a in argv]) for argv in commands)
        self.connection.data_received(data)

    async def reply(self) -> Any:
        """The next reply or message (hiredis values: bytes, int, list, ReplyError)."""
        reply = await self._replies.get()
        if isinstance(reply, LinkClosed):
            self._replies.put_nowait(reply)  # (for whoever waits next)
            raise reply
        return reply

    async def call(self, *argv: bytes | str | int) -> Any:
        self.send(argv)
        return await self.reply()

    async def pipeline(self, commands: Sequence[Sequence[bytes | str | int]]) -> list[Any]:
        self.send(*commands)
        return [await self.reply() for _ in commands]

    def close(self) -> None:
        self.transport.close()


def _arg(value: bytes | str | int) -> bytes:
    if isinstance(value, bytes):
        return value
    return str(value).encode()


def is_error(reply: Any) -> bool:
    return isinstance(reply, hiredis.ReplyError)
