"""The stream features a region used to refuse, over TCP: three regions on loopback, step by
step, region by region (issue 18; the rules in docs/design/active-active.md). A concurrent step runs
with every link cut (``isolate``); "— Sync —" heals the links and waits until the regions'
dumps (AADUMP) are equal. Milliseconds-only IDs: strict mode picks ``…-1`` in region 1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.support.region_mesh import TcpMesh


@pytest.fixture(scope="module")
def strict() -> Iterator[TcpMesh]:
    mesh = TcpMesh(3, "strict")
    try:
        mesh.linked()
        yield mesh
    finally:
        mesh.close()


@pytest.fixture
def mesh(strict: TcpMesh) -> Iterator[TcpMesh]:
    strict.sync()
    yield strict
    strict.sync()


def ids(c: redis.Redis, key: str) -> list[bytes]:
    return [sid for sid, _ in c.xrange(key)]


def pending(c: redis.Redis, key: str, group: str = "g") -> list[bytes]:
    return [row["message_id"] for row in c.xpending_range(key, group, "-", "+", 100)]


def filled(mesh: TcpMesh, key: str, n: int = 5) -> None:
    for ms in range(1, n + 1):
        mesh[1].xadd(key, {"f": ms}, id=str(ms))
    mesh[1].xgroup_create(key, "g", "0")
    mesh.sync()


def test_xdelex_delref_drops_every_regions_own_pending_entries(mesh: TcpMesh) -> None:
    filled(mesh, "r1")
    for r in (1, 2, 3):  # consumers are local: each region delivers 1-1 and 2-1 itself
        mesh[r].xreadgroup("g", f"c{r}", {"r1": ">"}, count=2)
    mesh.isolate()
    assert mesh[1].execute_command("XDELEX", "r1", "DELREF", "IDS", 2, "1-1", "9-9") == [1, -1]
    assert pending(mesh[2], "r1") == [b"1-1", b"2-1"]  # t1
    mesh.sync()  # t2
    for r in (1, 2, 3):  # t3
        assert pending(mesh[r], "r1") == [b"2-1"]
        assert ids(mesh[r], "r1") == [b"2-1", b"3-1", b"4-1", b"5-1"]


def test_acked_asks_the_deleting_regions_groups(mesh: TcpMesh) -> None:
    filled(mesh, "r2")
    mesh.isolate()
    mesh[2].xreadgroup("g", "c", {"r2": ">"}, count=3)
    mesh[2].xack("r2", "g", "1-1", "2-1", "3-1")  # a contiguous prefix: replicated
    assert mesh[1].execute_command("XDELEX", "r2", "ACKED", "IDS", 1, "1-1") == [2]  # not yet
    mesh.sync()
    assert mesh[1].execute_command("XDELEX", "r2", "ACKED", "IDS", 2, "1-1", "4-1") == [1, 2]
    assert mesh[1].execute_command("XTRIM", "r2", "MAXLEN", "=", "0", "ACKED") == 2
    mesh.sync()
    for r in (1, 2, 3):
        assert ids(mesh[r], "r2") == [b"4-1", b"5-1"]


def test_xackdel_replicates_the_prefix_and_the_removal(mesh: TcpMesh) -> None:
    filled(mesh, "r3")
    mesh[1].xreadgroup("g", "alice", {"r3": ">"}, count=3)
    reply = mesh[1].execute_command("XACKDEL", "r3", "g", "IDS", 3, "1-1", "3-1", "9-9")
    assert reply == [1, 1, -1]
    mesh.sync()
    for r in (1, 2, 3):
        assert ids(mesh[r], "r3") == [b"2-1", b"4-1", b"5-1"]
    # the acknowledged prefix (1-1) reached region 3: a redirection starts after it
    got = mesh[3].xreadgroup("g", "bob", {"r3": ">"})
    assert [e[0] for e in got[0][1]] == [b"2-1", b"4-1", b"5-1"]


def test_xnack_and_claim_stay_local_and_hold_the_prefix_back(mesh: TcpMesh) -> None:
    filled(mesh, "r4", 3)
    mesh[1].xreadgroup("g", "alice", {"r4": ">"})
    assert mesh[1].execute_command("XNACK", "r4", "g", "FAIL", "IDS", 1, "1-1") == 1
    mesh[1].xack("r4", "g", "2-1", "3-1")
    mesh.sync()
    assert pending(mesh[2], "r4") == []  # PELs are local
    got = mesh[2].xreadgroup("g", "bob", {"r4": ">"})  # nothing acknowledged as a prefix
    assert [e[0] for e in got[0][1]] == [b"1-1", b"2-1", b"3-1"]
    claimed = mesh[1].execute_command(
        "XREADGROUP", "GROUP", "g", "carol", "CLAIM", 60000, "STREAMS", "r4", ">"
    )
    assert [e[0] for e in claimed[0][1]] == [b"1-1"]  # the nacked entry, whatever min-idle
    mesh[1].xack("r4", "g", "1-1")  # now the prefix reaches 3-1
    mesh.sync()
    assert mesh[3].xreadgroup("g", "dan", {"r4": ">"}) == []
    got = mesh[1].execute_command("XREAD", "MAXCOUNT", 2, "STREAMS", "r4", "r4", "0", "0")
    assert [len(entries) for _, entries in got] == [2]


def test_xsetid_counters_and_xcfgset_replicate(mesh: TcpMesh) -> None:
    filled(mesh, "r5", 3)
    mesh.isolate()
    mesh[1].execute_command("XSETID", "r5", "3-1", "ENTRIESADDED", 100, "MAXDELETEDID", "2-0")
    mesh[2].xadd("r5", {"f": "late"}, id="4")  # concurrent: adds on top
    mesh[3].execute_command("XCFGSET", "r5", "IDMP-DURATION", 30)
    mesh.sync()
    for r in (1, 2, 3):
        info = mesh[r].xinfo_stream("r5")
        assert info["entries-added"] == 101
        assert info["max-deleted-entry-id"] == b"2-0"
        assert info["idmp-duration"] == 30
    mesh[2].execute_command("XIDMP", "CFGSET", "r5", "DURATION", 40)  # after it: wins
    mesh.sync()
    got = mesh[1].execute_command("XIDMP", "CFGGET", "r5", "DURATION")
    assert got in ({b"duration": 40}, [b"duration", 40])  # (as the client shapes a map)


def test_streams_outside_database_0_replicate_in_their_database(mesh: TcpMesh) -> None:
    one, two = (redis.Redis(port=mesh.regions[r].port, db=4, socket_timeout=10) for r in (1, 2))
    try:
        mesh.isolate()
        assert one.xadd("d4", {"f": "one"}, id="10") == b"10-1"  # t1
        assert two.xadd("d4", {"f": "two"}, id="11") == b"11-2"
        two.xgroup_create("d4", "g", "0")
        mesh[1].xadd("d4", {"f": "db0"}, id="12")  # database 0's d4: another stream
        mesh.sync()  # t2
        for c in (one, two):  # t3
            assert ids(c, "d4") == [b"10-1", b"11-2"]
            assert [g["name"] for g in c.xinfo_groups("d4")] == [b"g"]
        assert ids(mesh[2], "d4") == [b"12-1"] and mesh[2].xinfo_groups("d4") == []
        assert b"\ndb 4\n" in mesh[3].execute_command("AADUMP")
        one.flushdb()  # database 4 only
        mesh.sync()
        assert two.exists("d4") == 0 and mesh[2].exists("d4") == 1
    finally:
        one.close()
        two.close()
