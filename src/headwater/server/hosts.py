"""What each server part may reach of the server that holds it (``app.Server``).

A part is given the server under one of these narrow types, so that what it depends on is
written down and checked (mypy), and a test can hand it a small fake: a connection reaches the
connection table, the held and soft-limited sets, durability and the write flush; the links
(replication, a replica's link, the region links) the loop, the engine, durability and the
connection table; the busy poller, which serves connections while a script runs, what a
connection reaches and the listeners. None of them
reaches the others through the server.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from headwater.commands.context import Client
    from headwater.engine.core import Engine
    from headwater.server.durability import Durability
    from headwater.server.listen import Listeners
    from headwater.server.protocol import Connection
    from headwater.server.tls import TlsContexts


class Host(Protocol):
    """The loop, the engine and the write flush: what every part needs."""

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...
    @property
    def engine(self) -> Engine: ...
    @property
    def flush_scheduled(self) -> bool:
        """``schedule_flush`` was called this loop turn (the per-request path's test)."""
        ...

    def schedule_flush(self) -> None:
        """Write every client's pending output at the end of this loop turn."""
        ...


class ConnectionHost(Host, Protocol):
    """What a client connection (``protocol.Connection``) reaches."""

    @property
    def durability(self) -> Durability: ...
    @property
    def connections(self) -> dict[Client, Connection]: ...
    @property
    def held(self) -> dict[Client, None]:
        """Clients whose replies wait (CLIENT PAUSE, a durable write)."""
        ...

    @property
    def soft_limited(self) -> set[Connection]:
        """Connections past their soft output limit (their timers)."""
        ...

    def flush(self) -> None:
        """Persist, propagate and write every client's pending output now."""
        ...


class LinkHost(Host, Protocol):
    """What replication, a replica's link and the region links reach."""

    @property
    def durability(self) -> Durability: ...
    @property
    def connections(self) -> dict[Client, Connection]: ...
    @property
    def tls(self) -> TlsContexts:
        """The TLS contexts (the links' own with tls-replication or peers-tls)."""
        ...


class PollerHost(ConnectionHost, Protocol):
    """What the busy poller (a script past busy-reply-threshold) reaches: it accepts and
    serves connections itself meanwhile."""

    @property
    def listeners(self) -> Listeners: ...
