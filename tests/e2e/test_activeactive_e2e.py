"""Issue 18 over real processes: a region (``--region-id``) survives ``kill -9`` with the
same canonical dump (AADUMP), through its AOF and through an AOF rewrite's snapshot base, and
nothing a writer saw acknowledged is lost."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.support.region_mesh import Region


@pytest.fixture
def region() -> Iterator[Region]:
    workdir = Path(tempfile.mkdtemp(prefix="hw-aa-"))
    node = Region(workdir, 1, "--appendfsync", "always")
    try:
        yield node
    finally:
        node.kill9()
        shutil.rmtree(workdir, ignore_errors=True)


def load(node: Region, seconds: float, writers: int = 4) -> dict[int, list[bytes]]:
    """``writers`` clients XADD to their own stream and one shared stream, and read and ack
    through a group, for ``seconds``; the IDs each saw acknowledged."""
    acked: dict[int, list[bytes]] = {n: [] for n in range(writers)}
    stop = time.monotonic() + seconds

    def write(n: int) -> None:
        c = node.client()
        with contextlib.suppress(redis.ConnectionError, redis.TimeoutError):
            while time.monotonic() < stop:
                acked[n].append(c.xadd(f"w{n}", {"n": len(acked[n])}))
                c.xadd("shared", {"w": n})
                got = c.xreadgroup("g", f"c{n}", {"shared": ">"}, count=2)
                for _, entries in got or []:
                    if entries:
                        c.xack("shared", "g", entries[0][0])

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return acked


def pel(c: redis.Redis) -> list[tuple[bytes, bytes, int]]:
    rows = c.xpending_range("shared", "g", "-", "+", 1000)
    return [(r["message_id"], r["consumer"], r["times_delivered"]) for r in rows]


def test_kill9_restart_gives_the_same_dump(region: Region) -> None:
    region.start()
    c = region.client()
    c.xgroup_create("shared", "g", "0", mkstream=True)
    acked = load(region, 1.0)
    c.delete("w0")
    c.execute_command("XTRIM", "w1", "MAXLEN", "5")
    before = c.execute_command("AADUMP")
    pending = pel(c)
    region.kill9()
    region.start()
    c = region.client()
    assert c.execute_command("AADUMP") == before
    assert pel(c) == pending
    for n in (2, 3):  # nothing acknowledged is lost
        ids = [sid for sid, _ in c.xrange(f"w{n}")]
        assert ids == acked[n]
    assert c.exists("w0") == 0 and c.xlen("w1") == 5
    # it goes on with its own sequence
    c.xadd("w2", {"after": "restart"})
    assert c.execute_command("AADUMP").splitlines()[0] != before.splitlines()[0]


def test_kill9_under_load_after_a_rewrite(region: Region) -> None:
    region.start()
    c = region.client()
    c.xgroup_create("shared", "g", "0", mkstream=True)
    first = load(region, 0.5)
    c.bgrewriteaof()
    deadline = time.monotonic() + 20
    while c.info("persistence")["aof_rewrite_in_progress"] and time.monotonic() < deadline:
        time.sleep(0.05)
    bases = [p.name for p in (region.workdir / "appendonlydir").iterdir() if ".base." in p.name]
    assert bases, "the rewrite made no snapshot base"
    killer = threading.Timer(0.4, region.kill9)
    killer.start()
    acked = load(region, 5.0)  # ends when the kill cuts the writers off
    killer.join()
    region.start()
    c = region.client()
    for n, later in acked.items():
        ids = first[n] + later
        have = [sid for sid, _ in c.xrange(f"w{n}")]
        assert have[: len(ids)] == ids or have == ids, n  # acknowledged: all there, in order
        assert len(have) <= len(ids) + 1  # at most the one in flight at the kill
    dump = c.execute_command("AADUMP")
    region.kill9()
    region.start()
    assert region.client().execute_command("AADUMP") == dump


def test_debug_loadaof_and_reload_bring_back_the_same_region(region: Region) -> None:
    region.start()
    c = region.client()
    c.xgroup_create("shared", "g", "0", mkstream=True)
    load(region, 0.3, writers=2)
    c.delete("w0")
    before = c.execute_command("AADUMP")
    pending = pel(c)
    assert c.execute_command("DEBUG", "LOADAOF") == b"OK"
    assert c.execute_command("AADUMP") == before and pel(c) == pending
    assert c.execute_command("DEBUG", "RELOAD") == b"OK"
    assert c.execute_command("AADUMP") == before and pel(c) == pending
    assert c.exists("w0") == 0 and c.exists("w1") == 1
