"""The server's listeners (server/listen.py): CONFIG SET port / bind bind the new sockets
before closing the old, keep those wanted again, and change nothing when a bind fails."""

from __future__ import annotations

import asyncio
import socket

import pytest

from headwater.server.listen import Listeners
from tests.helpers import free_port


def _answers(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 2).close()
    except ConnectionRefusedError:
        return False
    return True


async def _settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0.01)


def test_move_binds_keeps_and_refuses() -> None:
    async def scenario() -> None:
        listeners = Listeners(asyncio.get_running_loop(), asyncio.Protocol)
        old, new = free_port(), free_port()
        await listeners.start(["127.0.0.1"], old, 7)
        first = listeners.sockets()[0]
        assert first.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN) == 1

        # an optional address that is not on this machine is skipped; 127.0.0.1 is kept
        listeners.move(["127.0.0.1", "-10.255.255.1"], old, 7)
        assert listeners.sockets() == [first]

        with socket.socket() as busy:
            busy.bind(("127.0.0.1", new))
            busy.listen()
            with pytest.raises(OSError, match="in use"):
                listeners.move(["127.0.0.1"], new, 7)
            assert listeners.sockets() == [first]
            assert await asyncio.to_thread(_answers, old)
            with pytest.raises(OSError, match="assign requested address"):
                listeners.move(["10.255.255.1"], old, 7)  # not optional: refused
            assert listeners.sockets() == [first]

        listeners.move(["127.0.0.1"], new, 7)
        await _settle()
        assert await asyncio.to_thread(_answers, new)
        assert not await asyncio.to_thread(_answers, old)

        listeners.move(["127.0.0.1"], 0, 7)  # port 0: no TCP listener, as in Redis
        await _settle()
        assert listeners.sockets() == []
        assert not await asyncio.to_thread(_answers, new)
        listeners.close()

    asyncio.run(scenario())
