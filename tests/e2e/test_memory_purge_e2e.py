"""MEMORY PURGE gives freed memory back to the system (glibc's ``malloc_trim``), as Redis's
asks jemalloc to: a deleted stream's pages leave the process's resident set."""

from __future__ import annotations

import pytest

from tests.helpers import bulk_load, encode_command, raw_client, start_headwater

pytestmark = pytest.mark.e2e


def rss(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))


def test_purge_returns_a_deleted_streams_memory() -> None:
    server = start_headwater("--appendonly", "no", "--save", "")
    try:
        with raw_client(server.port) as c:
            before = rss(server.proc.pid)
            bulk_load(server.port, encode_command("XADD", "big", "*", "f", "0" * 16), 200_000)
            grown = rss(server.proc.pid) - before
            assert c.call("DEL", "big") == b":1\r\n"
            assert c.call("MEMORY", "PURGE") == b"+OK\r\n"
            left = rss(server.proc.pid) - before
            assert grown > 5 << 20 and left < grown / 2, (grown, left)
    finally:
        server.stop()
