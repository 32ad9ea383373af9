"""Listening sockets bound synchronously, so that CONFIG SET port / bind can answer whether
the bind worked before it replies (asyncio's ``create_server`` binds inside a coroutine).

``Listeners`` keeps one asyncio server per socket. A change binds what is new while the old
sockets still serve, keeps those whose address is wanted again (``bind`` gaining an address
leaves the others alone: rebinding one in use would fail), and closes the rest only once
every new bind has worked (Redis's changeListener; on failure nothing changed).
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import ssl
from collections.abc import Callable
from typing import Any

#: a ``-``-prefixed (optional) bind address is skipped when it fails for one of these
#: (Redis's listenToPort: the address or its family is not on this machine)
_ABSENT = {errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT, errno.ESOCKTNOSUPPORT}

Address = tuple[int, Any]  # (family, sockaddr)


def addresses(hosts: list[str], port: int) -> list[tuple[Address, bool]]:
    """Each address to listen on, and whether it is optional (``-`` prefix)."""
    wanted: dict[Address, bool] = {}
    for host in hosts:
        optional = host.startswith("-")
        try:
            infos = socket.getaddrinfo(
                host.lstrip("-"), port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )
        except OSError:
            if optional:
                continue
            raise
        for family, _, _, _, sockaddr in infos:
            wanted.setdefault((family, sockaddr[:2]), optional)
    return list(wanted.items())


def bind(address: Address, backlog: int) -> socket.socket:
    family, sockaddr = address
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind(sockaddr)
        sock.listen(backlog)
        sock.setblocking(False)
    except OSError:
        sock.close()
        raise
    return sock


class Listeners:
    """The server's listening sockets, each served by its own asyncio server."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        protocol: Callable[[], Any],
        tls: Callable[[], ssl.SSLContext] | None = None,
    ) -> None:
        self.loop = loop
        self.protocol = protocol
        #: the TLS listeners' context (server/tls.py), asked when a server starts; None: plain
        self.tls = tls
        #: every listening socket by address, from its bind on (its server may be starting)
        self.bound: dict[Address, socket.socket] = {}
        self.servers: dict[Address, asyncio.AbstractServer] = {}
        #: servers being started by ``move`` (a reference keeps the task)
        self._starting: set[asyncio.Task[None]] = set()

    async def start(self, hosts: list[str], port: int, backlog: int) -> None:
        for address, sock in self._bind_new(hosts, port, backlog):
            self.bound[address] = sock
            await self._serve(address, sock, backlog)

    def move(self, hosts: list[str], port: int, backlog: int) -> None:
        """Listen on ``hosts``:``port`` (port 0: nowhere, as in Redis); raises OSError with
        the old listeners untouched."""
        fresh = self._bind_new(hosts, port, backlog) if port else []
        kept = {address for address, _ in addresses(hosts, port)} if port else set()
        for address in [a for a in self.bound if a not in kept]:
            self._close(address)
        for address, sock in fresh:
            self.bound[address] = sock
            task = self.loop.create_task(self._serve(address, sock, backlog))
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    async def _serve(self, address: Address, sock: socket.socket, backlog: int) -> None:
        # (the server listens again: with the backlog given, not asyncio's default of 100)
        context = self.tls() if self.tls is not None else None
        server = await self.loop.create_server(
            self.protocol, sock=sock, backlog=backlog, ssl=context
        )
        if self.bound.get(address) is sock:
            self.servers[address] = server
        else:  # closed by a later change while it started
            server.close()

    def _close(self, address: Address) -> None:
        del self.bound[address]
        server = self.servers.pop(address, None)
        if server is not None:
            server.close()
        # (else its server is starting: ``_serve`` closes it, seeing the socket gone)

    def sockets(self) -> list[socket.socket]:
        return list(self.bound.values())

    def close(self) -> None:
        for address in list(self.bound):
            self._close(address)

    def _bind_new(
        self, hosts: list[str], port: int, backlog: int
    ) -> list[tuple[Address, socket.socket]]:
        bound: list[tuple[Address, socket.socket]] = []
        try:
            for address, optional in addresses(hosts, port):
                if address in self.bound:
                    continue
                try:
                    bound.append((address, bind(address, backlog)))
                except OSError as exc:
                    if not (optional and exc.errno in _ABSENT):
                        raise
        except OSError:
            for _, sock in bound:
                sock.close()
            raise
        return bound
