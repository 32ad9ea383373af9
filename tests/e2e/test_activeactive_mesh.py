"""Issue 18 over TCP: three regions on loopback (``--region-id N --peers …``), a full mesh of
links, convergence of their canonical dumps (AADUMP), links cut and healed with ``AALINK``,
and a region killed with -9 that catches up from its peers."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest

from tests.support.region_mesh import TcpMesh as Mesh


@pytest.fixture
def mesh() -> Iterator[Mesh]:
    m = Mesh()
    try:
        m.linked()
        yield m
    finally:
        m.close()


def test_writes_in_every_region_converge(mesh: Mesh) -> None:
    for r in (1, 2, 3):
        for n in range(20):
            mesh[r].xadd("x", {"r": r, "n": n})
    dump = mesh.converge()
    assert dump.count(b" r1 ") == dump.count(b" r2 ") == dump.count(b" r3 ") == 20
    ids = [sid for sid, _ in mesh[1].xrange("x")]
    assert len(ids) == len(set(ids)) == 60  # strict mode: no duplicate ID
    assert [sid for sid, _ in mesh[2].xrange("x")] == ids
    info = mesh.info(1)
    assert "region_id:1" in info and "vector:1=20,2=20,3=20" in info


def test_a_cut_link_heals_and_resumes(mesh: Mesh) -> None:
    mesh[1].xadd("x", {"a": 1})
    mesh.converge()
    mesh.cut(1, 2)
    mesh[1].xadd("x", {"from": 1})
    mesh[2].xadd("x", {"from": 2})
    mesh.wait(lambda: mesh[3].xlen("x") == 3)  # region 3 hears both
    time.sleep(0.3)
    # each effects ships only from its own region (no relaying): 1 and 2 miss each other's
    assert mesh[1].xlen("x") == 2 and mesh[2].xlen("x") == 2
    info = mesh.info(2)
    assert "state=paused" in info
    mesh.heal()
    mesh.converge()
    assert mesh[3].xlen("x") == 3


def test_a_region_killed_catches_up_from_its_peers(mesh: Mesh) -> None:
    for n in range(10):
        mesh[1].xadd("x", {"n": n})
    mesh.converge()
    mesh.regions[3].kill9()
    for n in range(10):
        mesh[1].xadd("x", {"later": n})
        mesh[2].xadd("x", {"later": n})
    mesh.regions[3].start()
    mesh.clients[3] = mesh.regions[3].client()
    dump = mesh.converge(timeout=15)
    assert mesh[3].xlen("x") == 30 and b"vector 1=20 2=10\n" in dump
