"""Serving the other clients while a script is busy (Redis's processEventsWhileBlocked).

A script runs inside one event-loop callback, and asyncio's loop cannot be re-entered from
there. So, once a script has run past ``busy-reply-threshold``, its Lua hook (every 100,000
instructions) calls ``BusyPoller``, which does by hand what the loop would do: a zero-timeout
``poll`` over the connected clients' sockets and the listening sockets, reads what is ready
straight from the socket (the loop's own reader then finds nothing, which it tolerates) and
hands it to the client's ``Connection`` as the loop would; the engine answers ``-BUSY``
except to SCRIPT KILL, FUNCTION KILL, FUNCTION STATS, SHUTDOWN NOSAVE and the connection
commands; then the replies are flushed.

New connections are accepted too (``redis-cli SCRIPT KILL`` opens one): until the script
ends, an ``InterimTransport`` writes to the socket directly; on the first loop turn after
it, the socket is handed to the loop (``connect_accepted_socket``) with the same
``Connection`` and client, and whatever the interim transport could not send yet.

The client running the script is left alone (Redis protects it the same way): its next
commands wait in its socket until the script ends.
"""

from __future__ import annotations

import asyncio
import logging
import os
import select
import socket
from typing import TYPE_CHECKING, Any

from headwater.commands.context import Client
from headwater.server.protocol import READ_SIZE, Connection

if TYPE_CHECKING:
    from headwater.server.hosts import PollerHost

log = logging.getLogger("headwater")


class InterimTransport:
    """What a ``Connection`` needs of a transport, for a socket accepted while the loop
    cannot run: writes go straight to the socket, the rest waits in ``unsent``."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.unsent = b""
        self.closing = False
        self.connection: Connection | None = None

    def write(self, data: bytes) -> None:
        self.unsent += data
        self.try_send()

    def try_send(self) -> None:
        if not self.unsent or self.closing:
            return
        try:
            sent = self.sock.send(self.unsent)
        except BlockingIOError:
            return
        except OSError:
            self.abort()
            return
        self.unsent = self.unsent[sent:]

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return self.sock if name == "socket" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def get_write_buffer_size(self) -> int:
        return len(self.unsent)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.try_send()
        self.abort()

    def abort(self) -> None:
        if self.closing:
            return
        self.closing = True
        self.sock.close()
        if self.connection is not None:
            self.connection.connection_lost(None)


class BusyPoller:
    def __init__(self, server: PollerHost) -> None:
        self.server = server
        self.listening: dict[int, socket.socket] = {}
        self.interim: list[InterimTransport] = []
        self._handover_scheduled = False
        self.adopting: set[asyncio.Future[Any]] = set()

    def _listening_sockets(self) -> dict[int, socket.socket]:
        if not self.listening:
            for sock in self.server.listeners.sockets():
                dup = socket.fromfd(sock.fileno(), sock.family, sock.type)
                dup.setblocking(False)
                self.listening[dup.fileno()] = dup
        return self.listening

    def forget_listeners(self) -> None:
        """The server's listeners changed (CONFIG SET port / bind): drop the copies."""
        for dup in self.listening.values():
            dup.close()
        self.listening = {}

    def __call__(self, running: Client | None) -> None:
        poller = select.poll()
        readers: dict[int, Connection] = {}
        for client, conn in list(self.server.connections.items()):
            transport = conn.transport
            if client is running or client.fd < 0 or transport is None or transport.is_closing():
                continue
            readers[client.fd] = conn
            poller.register(client.fd, select.POLLIN)
        listening = self._listening_sockets()
        for fd in listening:
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll(0):
            if fd in listening:
                self._accept(listening[fd])
            elif fd in readers:
                self._read(fd, readers[fd])
        self.server.flush()
        for interim in self.interim:
            interim.try_send()

    def _read(self, fd: int, conn: Connection) -> None:
        try:
            data = os.read(fd, READ_SIZE)
        except OSError:  # nothing after all, or a reset: the loop sees it later
            return
        if data:  # (end of file: left for the loop, which closes the connection)
            conn.data_received(data)

    def _accept(self, listener: socket.socket) -> None:
        try:
            sock, _ = listener.accept()
        except OSError:
            return
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        conn = Connection(self.server)
        transport = InterimTransport(sock)
        transport.connection = conn
        conn.connection_made(transport)  # type: ignore[arg-type]
        self.interim.append(transport)
        if not self._handover_scheduled:
            self._handover_scheduled = True
            self.server.loop.call_soon(self._hand_over)

    def _hand_over(self) -> None:
        """The script has ended (this runs on the next loop turn): the loop takes over."""
        self._handover_scheduled = False
        interim, self.interim = self.interim, []
        for transport in interim:
            conn = transport.connection
            if transport.closing or conn is None:
                continue
            transport.connection = None
            if transport.unsent:  # before the loop's transport writes anything
                transport.sock.settimeout(1.0)
                try:
                    transport.sock.sendall(transport.unsent)
                except OSError:
                    log.warning("could not send the replies of a client served while busy")
                transport.sock.setblocking(False)
            adopt = self.server.loop.connect_accepted_socket(lambda conn=conn: conn, transport.sock)  # type: ignore[misc]
            task = asyncio.ensure_future(adopt)
            self.adopting.add(task)
            task.add_done_callback(self.adopting.discard)
