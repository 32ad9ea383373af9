"""Defect 5: a snapshot file changed while its nodes are still loaded lazily.

The nodes of a loaded snapshot are copied into their own buffers when first used and by the
cron, a few seconds after the start. Before the fix they stayed in a mapping of the file until
then, so ``cp backup.hwsnap dump.hwsnap`` (which truncates the same inode, then writes) killed
the server with SIGBUS at its next read of a node, with nothing in the log. The file is now read
into the server's own memory before the first client: whatever happens to it afterwards, the
server stays up and serves exactly the data it loaded.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.helpers import HEADWATER, ROOT, free_port, loaded

pytestmark = pytest.mark.e2e

ENTRIES = 200_000
#: entries in the older snapshot, the backup that is copied over the newer one
BACKUP_ENTRIES = 10_000
Entries = list[tuple[bytes, dict[bytes, bytes]]]


class Server:
    """headwater on a data directory of the test's, logging to a file there."""

    def __init__(self, data: Path, *args: str) -> None:
        self.port = free_port()
        self.log = data.parent / "server.log"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(
                [*HEADWATER, "server", "--port", str(self.port), "--dir", str(data), *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                cwd=ROOT,
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"exited with {self.proc.returncode}\n{self.tail()}"
            if loaded(self.port):  # (the port opens before the load: wait for its end)
                return
            time.sleep(0.01)
        raise AssertionError(f"did not listen\n{self.tail()}")

    def client(self) -> redis.Redis:
        return redis.Redis(port=self.port, socket_timeout=30)

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for server in started:
        server.stop()


def _lazy_nodes(r: redis.Redis) -> int:
    return int(r.info("persistence")["snapshot_lazy_nodes"])


def _read_all(r: redis.Redis) -> Entries:
    entries: Entries = []
    start = b"-"
    while page := r.xrange("s", start, "+", count=10_000):
        entries += page
        start = b"(" + page[-1][0]
    return entries


def _saved_stream(tmp_path: Path, servers: list[Server]) -> tuple[Path, Path, Entries]:
    """A snapshot of ENTRIES entries (dump.hwsnap) and an older one of BACKUP_ENTRIES (the
    backup), and the entries of the newer one."""
    data = tmp_path / "data"
    data.mkdir()
    server = Server(data, "--save", "", "--appendonly", "no")
    servers.append(server)
    r = server.client()
    for start in range(0, ENTRIES, 10_000):
        if start == BACKUP_ENTRIES:
            assert r.save()
            shutil.copyfile(data / "dump.hwsnap", tmp_path / "backup.hwsnap")
        pipe = r.pipeline(transaction=False)
        for i in range(start, start + 10_000):
            pipe.xadd("s", {"n": i, "pad": "x" * (i % 29)})
        pipe.execute()
    entries = _read_all(r)
    assert r.save()
    server.stop()
    return data / "dump.hwsnap", tmp_path / "backup.hwsnap", entries


def test_a_snapshot_overwritten_in_place_while_loaded_lazily(
    tmp_path: Path, servers: list[Server]
) -> None:
    dump, backup, entries = _saved_stream(tmp_path, servers)
    inode, size = dump.stat().st_ino, dump.stat().st_size
    # hz 1: the cron, which copies the lazy nodes, first runs a second after the start
    server = Server(dump.parent, "--save", "", "--appendonly", "no", "--hz", "1")
    servers.append(server)
    r = server.client()
    assert _lazy_nodes(r) > 0
    shutil.copyfile(backup, dump)  # O_TRUNC: the same inode, shorter, other bytes
    assert dump.stat().st_ino == inode and dump.stat().st_size < size // 10
    assert _lazy_nodes(r) > 0, "the cron copied every node first: the test proves nothing"
    try:
        read = _read_all(r)
    except redis.ConnectionError:  # (SIGBUS before the fix: -7)
        code = server.proc.wait(10)
        raise AssertionError(f"the server died: exit code {code}\n{server.tail()}") from None
    assert read == entries
    assert r.xlen("s") == ENTRIES
    deadline = time.monotonic() + 60
    while _lazy_nodes(r):
        assert time.monotonic() < deadline, "the cron never copied every node"
        time.sleep(0.2)
    assert r.ping() and server.proc.poll() is None
    assert r.save()  # and what it saves is what it loaded, not the backup's entries
    server.stop()
    server = Server(dump.parent, "--save", "", "--appendonly", "no")
    servers.append(server)
    assert _read_all(server.client()) == entries
