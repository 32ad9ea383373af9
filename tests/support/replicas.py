"""Waiting on replication between real servers: a replica in step with its primary, INFO
read as a dict, and a client for a ``ServerProcess``."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis

from tests.helpers import ServerProcess


def wait_until(check: Callable[[], Any], timeout: float = 10.0, what: str = "") -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what or check}")
        time.sleep(0.05)


def info(r: redis.Redis, section: str = "replication") -> dict[str, Any]:
    return r.info(section)  # type: ignore[no-any-return]


def link_up(r: redis.Redis) -> bool:
    return info(r).get("master_link_status") == "up"


def in_step(primary: redis.Redis, replica: redis.Redis) -> bool:
    """The replica applied everything the primary has sent."""
    offset = info(primary)["master_repl_offset"]
    return bool(info(replica).get("slave_repl_offset") == offset and link_up(replica))


def connect(server: ServerProcess) -> redis.Redis:
    return redis.Redis(port=server.port, socket_timeout=10)
