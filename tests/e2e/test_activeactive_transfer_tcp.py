"""Issue 18 over TCP: a full state transfer. Three regions keep at most a few of their own
effects for lagging peers (``active-active-keep-effects``); one region is down (killed -9, or
its links paused) while the others write and trim; when it comes back it takes a peer's whole
state in one transfer (``+AASTATE``), then goes on with effects, and every region converges
with no duplicate and no gap. Two regions cut both ways past what they keep exchange their
states and merge them (issue 32, point 8)."""

from __future__ import annotations

import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.helpers import RawClient
from tests.support.region_mesh import Region
from tests.support.region_mesh import TcpMesh as Mesh

KEEP = 5


@pytest.fixture
def mesh() -> Iterator[Mesh]:
    m = Mesh(extra=("--active-active-keep-effects", str(KEEP)))
    try:
        m.linked()
        yield m
    finally:
        m.close()


def kept(mesh: Mesh, r: int) -> int:
    return int(re.search(r"own_effects_kept:(\d+)", mesh.info(r)).group(1))  # type: ignore[union-attr]


def transfers(mesh: Mesh, r: int) -> int:
    return sum(int(n) for n in re.findall(r"state_transfers=(\d+)", mesh.info(r)))


def check_entries(mesh: Mesh, key: str, expected: int) -> None:
    for r in (1, 2, 3):
        rows = mesh[r].xrange(key)
        assert len(rows) == expected
        assert len({sid for sid, _ in rows}) == expected  # no duplicate
        fields = sorted((f[b"r"], int(f[b"n"])) for _, f in rows)
        assert len(set(fields)) == expected  # each write once: no duplicate, no gap


def test_a_region_killed_while_its_peers_trim_takes_a_state(mesh: Mesh) -> None:
    for r in (1, 2, 3):
        for n in range(3):
            mesh[r].xadd("x", {"r": r, "n": n})
    mesh[1].xgroup_create("x", "g", "0")
    mesh.converge()
    mesh.regions[3].kill9()
    for n in range(3, 40):
        mesh[1].xadd("x", {"r": 1, "n": n})
        mesh[2].xadd("x", {"r": 2, "n": n})
    # (group h starts after what region 2 holds: wait until that is all of region 1's so far,
    # which links send within a millisecond or so, else the late ones are new to h)
    mesh.wait(lambda: mesh[2].xlen("x") == 9 + 37 + 37)
    mesh[2].xgroup_create("x", "h", "$")
    mesh[1].xadd("x", {"r": 1, "n": 40})
    # the others trim what region 3 needs (it never acknowledged them)
    mesh.wait(lambda: kept(mesh, 1) <= KEEP and kept(mesh, 2) <= KEEP)
    mesh.regions[3].start()
    mesh.clients[3] = mesh.regions[3].client()
    dump = mesh.converge(timeout=20)
    assert transfers(mesh, 3) >= 1
    assert b"group b'h'" in dump
    check_entries(mesh, "x", 3 + 3 + 3 + 37 + 37 + 1)
    # it goes on with effects, both ways
    mesh[3].xadd("x", {"r": 3, "n": 3})
    mesh[1].xadd("x", {"r": 1, "n": 41})
    mesh.converge()
    check_entries(mesh, "x", 86)
    got = mesh[3].xreadgroup("h", "c", {"x": ">"})
    # (by ID: region 3's entry and region 1's n=41 may share a millisecond, either first)
    ids = [sid for sid, _ in got[0][1]]
    assert ids == sorted(ids, key=lambda sid: tuple(map(int, sid.split(b"-"))))
    assert sorted(f[b"n"] for _, f in got[0][1]) == [b"3", b"40", b"41"]
    # the transfer is in its AOF (AARESTORE): a restart comes back to the same state
    before = mesh.dumps(3)[3]
    mesh.regions[3].kill9()
    mesh.regions[3].start()
    mesh.clients[3] = mesh.regions[3].client()
    assert mesh.converge(timeout=15) == before


def test_a_cut_off_region_takes_a_state_and_keeps_its_consumers(mesh: Mesh) -> None:
    for n in range(4):
        mesh[1].xadd("x", {"r": 1, "n": n})
    mesh[1].xgroup_create("x", "g", "0")
    mesh.converge()
    mine = mesh[3].xreadgroup("g", "local", {"x": ">"}, count=1)[0][1]
    # region 3 stops hearing its peers (they hear it: its writes reach them)
    mesh[3].execute_command("AALINK", "PAUSE", "*")
    mesh[3].xadd("x", {"r": 3, "n": 0})
    got = mesh[1].xreadgroup("g", "a", {"x": ">"}, count=3)[0][1]
    mesh[1].xack("x", "g", got[0][0])
    for n in range(4, 30):
        mesh[1].xadd("x", {"r": 1, "n": n})
        mesh[2].xadd("x", {"r": 2, "n": n})
    mesh.wait(lambda: kept(mesh, 1) <= KEEP and kept(mesh, 2) <= KEEP)
    mesh.heal()
    mesh.converge(timeout=20)
    assert transfers(mesh, 3) >= 1
    check_entries(mesh, "x", 4 + 1 + 26 + 26)
    # its own consumer and pending entry stayed; nothing delivered unacknowledged is skipped
    pending = mesh[3].xpending_range("x", "g", "-", "+", 10)
    assert [(p["message_id"], p["consumer"]) for p in pending] == [(mine[0][0], b"local")]
    rest = mesh[3].xreadgroup("g", "b", {"x": ">"}, count=3)[0][1]
    # (region 1 delivered n=0..2 and acknowledged n=0; here `local` has n=0 pending)
    assert [f[b"n"] for _, f in rest] == [b"1", b"2", b"3"]
    assert [sid for sid, _ in rest][:2] == [sid for sid, _ in got[1:]]


def _wait(check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def _info(region: Region) -> str:
    raw = RawClient(region.port)
    try:
        return raw.call("INFO", "active-active").decode()
    finally:
        raw.close()


def test_a_region_without_peers_serves_one_that_lists_it() -> None:
    """Region 1 has no peers of its own: it keeps none of its own effects (nobody would
    acknowledge them) until region 2, which lists it, asks: region 2 takes its state, then
    its effects from there on, acknowledges them, and region 1 drops them."""
    root = Path(tempfile.mkdtemp(prefix="hw-aa-nopeers-"))
    (root / "r1").mkdir()
    (root / "r2").mkdir()
    alone = Region(root / "r1", 1)
    pulling: Region | None = None
    try:
        alone.start()
        c1 = alone.client()
        for n in range(5):
            c1.xadd("x", {"n": n})
        assert "own_effects_kept:0" in _info(alone)
        pulling = Region(root / "r2", 2, "--peers", f"127.0.0.1:{alone.port}")
        pulling.start()
        c2 = pulling.client()
        _wait(lambda: len(c2.xrange("x")) == 5)
        assert "state_transfers=1" in _info(pulling)
        for n in range(5, 8):
            c1.xadd("x", {"n": n})
        _wait(lambda: len(c2.xrange("x")) == 8)
        assert c2.xrange("x") == c1.xrange("x")
        assert "state_transfers=1" in _info(pulling)  # (the later ones came as effects)
        # region 2 acknowledges them (each second): region 1 drops them again
        _wait(lambda: "own_effects_kept:0" in _info(alone))
        assert b"Traceback" not in (root / "r1" / "server.log").read_bytes()
    finally:
        alone.kill9()
        if pulling is not None:
            pulling.kill9()
        shutil.rmtree(root, ignore_errors=True)


def _vector(dump: bytes) -> bytes:
    return dump.split(b"\n", 1)[0]


def test_two_regions_cut_both_ways_past_keep_effects_converge() -> None:
    """Issue 32 (8): two regions keep 50 of their own effects; cut both ways, each makes 100
    and trims what the other needs, so neither vector covers the other. Healed, each merges
    the other's state: equal streams, vectors and dumps within seconds, nothing lost."""
    m = Mesh(2, extra=("--active-active-keep-effects", "50"))
    try:
        m.linked()
        m[1].xadd("x", {"r": 1, "n": 0})
        m[1].xgroup_create("x", "g", "0")
        m.converge()
        m.isolate()
        first = m[1].xrange("x")[0][0]
        m[2].xdel("x", first)  # (region 2 deletes region 1's entry: a cross-origin removal)
        m[2].xgroup_create("x", "h", "0")
        for n in range(1, 101):
            m[1].xadd("x", {"r": 1, "n": n})
            m[2].xadd("x", {"r": 2, "n": n})
        got = m[1].xreadgroup("g", "c", {"x": ">"}, count=10)[0][1]
        m[1].xack("x", "g", *[sid for sid, _ in got])
        # (the cron trims each second what peers have not acknowledged, down to 50)
        m.wait(lambda: kept(m, 1) <= 50 and kept(m, 2) <= 50)
        m.heal()
        dump = m.converge(timeout=8)
        assert _vector(dump) == b"vector 1=103 2=102"
        assert m[1].xlen("x") == m[2].xlen("x") == 200
        assert m[1].xrange("x") == m[2].xrange("x")
        assert sorted((f[b"r"], int(f[b"n"])) for _, f in m[1].xrange("x")) == [
            (r, n) for r in (b"1", b"2") for n in range(1, 101)
        ]
        assert b"group b'g' births=[(1, 2)] acked=[1:" in dump
        assert b"group b'h'" in dump
        assert transfers(m, 1) >= 1 and transfers(m, 2) >= 1
        # both go on with effects
        m[1].xadd("x", {"r": 1, "n": 101})
        m[2].xadd("x", {"r": 2, "n": 101})
        assert m.converge().count(b"\n") == dump.count(b"\n") + 2
        for region in m.regions.values():
            log = (region.workdir / "server.log").read_bytes()
            assert b"does not cover" not in log and b"Traceback" not in log
    finally:
        m.close()
