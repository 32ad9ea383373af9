"""Issue 18 over TCP: XREADGROUP never skips an entry (the model test checks it in memory).
Three regions write one stream concurrently while a consumer in region 1 reads it with
XREADGROUP ``>``; links are cut so that entries with smaller IDs arrive late, after the
consumer read past them. Every entry of the converged stream is delivered in region 1, once.
(XREAD, by contrast, may skip them: docs/design/active-active.md.)"""

from __future__ import annotations

import itertools
import threading
import time

import redis

from tests.support.region_mesh import TcpMesh as Mesh


def sid_key(sid: bytes) -> tuple[int, int]:
    ms, seq = sid.split(b"-")
    return int(ms), int(seq)


def read_new(c: redis.Redis, delivered: list[bytes]) -> int:
    got = c.xreadgroup("g", "reader", {"x": ">"}, count=50)
    rows = got[0][1] if got else []
    delivered += [sid for sid, _ in rows]
    return len(rows)


def test_a_late_entry_below_what_was_read_is_delivered(mesh: Mesh) -> None:
    mesh[1].xgroup_create("x", "g", "$", mkstream=True)
    mesh.converge()
    # regions 1 and 3 stop hearing region 2 (region 3's entry must not follow 2's causally,
    # else region 1 would wait for 2's before applying it)
    mesh[1].execute_command("AALINK", "PAUSE", "2")
    mesh[3].execute_command("AALINK", "PAUSE", "2")
    late = mesh[2].xadd("x", {"from": 2})
    time.sleep(0.01)
    after = [mesh[1].xadd("x", {"from": 1}), mesh[3].xadd("x", {"from": 3})]
    mesh.wait(lambda: mesh[1].xlen("x") == 2)
    delivered: list[bytes] = []
    read_new(mesh[1], delivered)
    assert sorted(delivered) == sorted(after) and sid_key(late) < min(
        map(sid_key, after)
    )  # read past its ID
    last = mesh[1].xrange("x")[-1][0]
    assert mesh[1].xread({"x": last}) == []
    mesh.heal()
    mesh.wait(lambda: mesh[1].xlen("x") == 3)
    assert mesh[1].xread({"x": last}) == []  # XREAD skips it: its ID is below
    read_new(mesh[1], delivered)
    assert delivered[-1] == late  # XREADGROUP does not


def test_concurrent_writers_and_cuts_never_make_xreadgroup_skip(mesh: Mesh) -> None:
    mesh[1].xgroup_create("x", "g", "0", mkstream=True)
    mesh.converge()
    stop = threading.Event()
    errors: list[BaseException] = []

    def write(r: int) -> None:
        c = mesh.regions[r].client()
        n = 0
        try:
            while not stop.is_set():
                c.xadd("x", {"r": r, "n": n})
                n += 1
                time.sleep(0.002)
        except BaseException as exc:  # (reported by the test)
            errors.append(exc)

    writers = [threading.Thread(target=write, args=(r,)) for r in (1, 2, 3)]
    for t in writers:
        t.start()
    delivered: list[bytes] = []
    reader = mesh.regions[1].client()
    try:
        for step in range(12):
            # region 1 hears one peer late for a while: its entries arrive below what the
            # reader already took from the other regions
            late = 2 if step % 2 else 3
            mesh[1].execute_command("AALINK", "PAUSE", str(late))
            for _ in range(5):
                read_new(reader, delivered)
                time.sleep(0.03)
            mesh[1].execute_command("AALINK", "RESUME", str(late))
            read_new(reader, delivered)
    finally:
        stop.set()
        for t in writers:
            t.join()
    assert errors == []
    mesh.converge(timeout=20)
    while read_new(reader, delivered):
        pass
    stream = [sid for sid, _ in mesh[1].xrange("x")]
    assert len(stream) > 100
    assert len(delivered) == len(set(delivered))  # each once
    assert sorted(delivered, key=sid_key) == stream  # and none skipped
    # a late entry really arrived below what had been read (else the test proves nothing)
    keys = [sid_key(sid) for sid in delivered]
    assert any(b < a for a, b in itertools.pairwise(keys))
