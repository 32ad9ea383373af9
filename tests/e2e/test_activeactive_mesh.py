"""Issue 18 over TCP: three regions on loopback (``--region-id N --peers …``), a full mesh of
links, convergence of their canonical dumps (AADUMP), links cut and healed with ``AALINK``,
and a region killed with -9 that catches up from its peers."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from tests.e2e.test_activeactive_e2e import Region
from tests.helpers import RawClient, free_port


class Mesh:
    def __init__(self, n: int = 3, mode: str = "strict") -> None:
        self.root = Path(tempfile.mkdtemp(prefix="hw-mesh-"))
        ports = [free_port() for _ in range(n)]
        self.regions: dict[int, Region] = {}
        for r in range(1, n + 1):
            others = ",".join(f"127.0.0.1:{p}" for i, p in enumerate(ports, 1) if i != r)
            workdir = self.root / f"r{r}"
            workdir.mkdir()
            region = Region(workdir, r, "--peers", others, "--active-active-id-mode", mode)
            region.port = ports[r - 1]
            self.regions[r] = region
        for region in self.regions.values():
            region.start()
        self.clients = {r: region.client() for r, region in self.regions.items()}

    def __getitem__(self, r: int) -> redis.Redis:
        return self.clients[r]

    def info(self, r: int) -> str:
        raw = RawClient(self.regions[r].port)
        try:
            return raw.call("INFO", "active-active").decode()
        finally:
            raw.close()

    def dumps(self, *regions: int) -> dict[int, bytes]:
        return {r: self.clients[r].execute_command("AADUMP") for r in regions or self.clients}

    def converge(self, *regions: int, timeout: float = 10.0) -> bytes:
        """Wait until the regions' dumps are equal; the dump."""
        deadline = time.monotonic() + timeout
        while True:
            dumps = self.dumps(*regions)
            if len(set(dumps.values())) == 1:
                return next(iter(dumps.values()))
            if time.monotonic() > deadline:
                text = "\n".join(f"--- region {r}\n{d.decode()}" for r, d in dumps.items())
                raise AssertionError(f"no convergence in {timeout}s\n{text}")
            time.sleep(0.05)

    def wait(self, check: Callable[[], bool], timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while not check():
            if time.monotonic() > deadline:
                raise AssertionError("timed out")
            time.sleep(0.05)

    def cut(self, a: int, b: int) -> None:
        """No effects between a and b, either way."""
        self.clients[a].execute_command("AALINK", "PAUSE", str(b))
        self.clients[b].execute_command("AALINK", "PAUSE", str(a))

    def heal(self) -> None:
        for c in self.clients.values():
            c.execute_command("AALINK", "RESUME", "*")

    def close(self) -> None:
        for region in self.regions.values():
            region.kill9()
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def mesh() -> Iterator[Mesh]:
    m = Mesh()
    try:
        m.wait(lambda: all(m.info(r).count("state=connected") == 2 for r in (1, 2, 3)))
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
