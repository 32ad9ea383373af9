"""Issue 18 over TCP: relaying. With the link between regions 1 and 3 cut both ways and both
of theirs to region 2 up, each gets the other's effects through region 2 (``AARELAY``):
every effect keeps its origin and per-origin sequence, is applied once, in per-origin order,
and nothing loops. Once the link heals, relaying stops and effects flow directly again."""

from __future__ import annotations

import re
import time

from tests.support.region_mesh import TcpMesh as Mesh


def field(info: str, name: str) -> list[str]:
    return re.findall(rf"{name}=([^,\r\n]+)", info)


def test_a_cut_pair_hears_each_other_through_the_third_region(mesh: Mesh) -> None:
    mesh[1].xgroup_create("x", "g", "0", mkstream=True)
    mesh.converge()
    mesh.cut(1, 3)
    for n in range(30):
        mesh[1].xadd("x", {"r": 1, "n": n})
        mesh[3].xadd("x", {"r": 3, "n": n})
    # regions 1 and 3 converge through region 2 while their own link is still cut
    dump = mesh.converge(timeout=15)
    assert b"vector 1=31 3=30\n" in dump
    for r in (1, 2, 3):
        rows = mesh[r].xrange("x")
        assert len(rows) == len({sid for sid, _ in rows}) == 60
    for r, origin in ((1, 3), (3, 1)):
        info = mesh.info(r)
        assert "state=paused" in info
        assert field(info, "relaying") == ["-", str(origin)] or field(info, "relaying") == [
            str(origin),
            "-",
        ]
        assert sum(int(n) for n in field(info, "relayed_effects")) >= 30
    # region 2 forgets what it relayed once both hold it
    mesh.wait(lambda: "relay_effects_kept:0" in mesh.info(2), timeout=10)
    # healed: relaying stops, effects flow directly again
    mesh.heal()
    mesh.linked()
    mesh.wait(lambda: all(field(mesh.info(r), "relaying") == ["-", "-"] for r in (1, 3)))
    before = [sum(int(n) for n in field(mesh.info(r), "relayed_effects")) for r in (1, 3)]
    mesh[1].xadd("x", {"r": 1, "n": 30})
    mesh[3].xadd("x", {"r": 3, "n": 30})
    mesh.converge()
    after = [sum(int(n) for n in field(mesh.info(r), "relayed_effects")) for r in (1, 3)]
    assert after == before


def test_relaying_can_be_turned_off() -> None:
    mesh = Mesh(extra=("--active-active-relay", "no"))
    try:
        mesh.linked()
        mesh.cut(1, 3)
        mesh[1].xadd("x", {"r": 1})
        mesh.wait(lambda: mesh[2].xlen("x") == 1)
        time.sleep(2.5)  # (relays are asked each second)
        assert mesh[3].xlen("x") == 0
        mesh.heal()
        mesh.converge()
    finally:
        mesh.close()


def test_two_regions_keep_nothing_to_relay_and_their_cron_goes_on() -> None:
    """With one peer there is nobody to relay its effects to: each second they are dropped.
    (Finding no other peer, the trim took min() of nothing, raised, and the server's cron,
    which reschedules itself last, never ran again: no AOF fsync each second, no expiry.)"""
    mesh = Mesh(n=2)
    try:
        mesh.linked()
        for rounds in range(2):  # (the cron runs again after the first trim)
            for r in (1, 2):
                mesh[r].xadd("x", {"r": r, "round": rounds})
            mesh.converge()
            for r in (1, 2):
                mesh.wait(lambda r=r: "relay_effects_kept:0" in mesh.info(r), timeout=5)
        mesh[1].set("k", "v", px=100)  # (active expiry: only the cron removes it)
        mesh.wait(lambda: mesh[1].dbsize() == 1, timeout=5)
    finally:
        mesh.close()
