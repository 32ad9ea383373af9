"""Clients waiting on keys (Redis ``blocked.c``).

Theory of operation
-------------------
A handler that cannot answer yet returns ``Block(keys, deadline, timeout_reply)``. The engine
registers a ``Waiter`` at the tail of each key's queue (``Database.blocking[key]``), so clients
are served first-come first-served. A write that could satisfy waiters calls
``Database.signal_ready(key)``; after the current command (or transaction) finishes, the engine
re-runs each waiting client's command in FIFO order (Redis 7 re-executes blocked commands rather
than serving them with type-specific code). A command that blocks again keeps its place. The
wait ends on success, timeout (a timer), CLIENT UNBLOCK, or disconnection.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from headwater.commands.context import Client, CommandSpec
from headwater.keyspace import Database
from headwater.resp.types import Reply


class Waiter:
    __slots__ = (
        "argv",
        "client",
        "db",
        "keys",
        "retry_timer",
        "row",
        "timeout_reply",
        "timer",
        "wakes_on",
    )

    def __init__(
        self,
        client: Client,
        row: CommandSpec,
        argv: list[bytes],
        keys: list[bytes],
        timeout_reply: Reply,
        wakes_on: type | None = None,
    ) -> None:
        self.client = client
        self.row = row
        self.argv = argv
        self.db: Database = client.db
        self.keys = list(dict.fromkeys(keys))
        self.timeout_reply = timeout_reply
        self.wakes_on = wakes_on
        self.timer: Any = None
        self.retry_timer: Any = None


class BlockingRegistry:
    def __init__(self) -> None:
        self.count = 0  # blocked clients

    def add(self, waiter: Waiter) -> None:
        for key in waiter.keys:
            queue = waiter.db.blocking.get(key)
            if queue is None:
                queue = waiter.db.blocking[key] = deque()
            queue.append(waiter)
        waiter.client.gate.blocked = waiter
        self.count += 1

    def remove(self, waiter: Waiter) -> None:
        for key in waiter.keys:
            queue = waiter.db.blocking.get(key)
            if queue is None:
                continue
            try:
                queue.remove(waiter)
            except ValueError:
                pass
            if not queue:
                del waiter.db.blocking[key]
        for timer in (waiter.timer, waiter.retry_timer):
            if timer is not None:
                timer.cancel()
        waiter.timer = waiter.retry_timer = None
        waiter.client.gate.blocked = None
        self.count -= 1

    def waiters_for(self, db: Database, key: bytes) -> list[Waiter]:
        queue = db.blocking.get(key)
        return list(queue) if queue else []

    @staticmethod
    def keys_count(dbs: list[Database]) -> int:
        return sum(len(db.blocking) for db in dbs)

    @staticmethod
    def keys_on_nokey_count(dbs: list[Database]) -> int:
        """Keys with a waiter that a deletion wakes too (XREADGROUP: it answers NOGROUP), as
        Redis's ``total_blocking_keys_on_nokey`` counts them."""
        return sum(
            any(waiter.wakes_on is None for waiter in queue)
            for db in dbs
            for queue in db.blocking.values()
        )
