"""Seed 004's tables (t1…t11) over TCP: three regions on loopback (four for the XACK table),
step by step, region by region (issue 18). The same tables as the pure core's
``tests/unit/test_activeactive_seed.py``, now through the commands, the AOF-logged effects and
the links: a concurrent step runs with every link cut (``isolate``), "— Sync —" heals the
links and waits until the regions' dumps are equal. Milliseconds-only IDs stand in for the
seed's clock (strict mode picks the sequence: ``…-1`` in region 1, ``…-2`` in region 2)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.support.region_mesh import TcpMesh

T1, T2 = 1589929244828, 1589929246795


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
    """The module's mesh, all links working at the start and the end of each test."""
    strict.sync()
    yield strict
    strict.sync()


def ids(c: redis.Redis, key: str) -> list[bytes]:
    return [sid for sid, _ in c.xrange(key)]


def groups(c: redis.Redis, key: str) -> list[bytes]:
    return [g["name"] for g in c.xinfo_groups(key)]


def own_seq(mesh: TcpMesh, r: int) -> int:
    line = next(x for x in mesh.info(r).splitlines() if x.startswith("own_seq:"))
    return int(line.split(":")[1])


def xreadgroup(c: redis.Redis, key: str, group: str, consumer: str, sid: str = ">") -> list[bytes]:
    got = c.xreadgroup(group, consumer, {key: sid})
    return [entry[0] for _, entries in got or [] for entry in entries]


def test_t1_t4_concurrent_xadd_converges_without_duplicate_ids(mesh: TcpMesh) -> None:
    mesh.isolate()
    assert mesh[1].xadd("s1", {"text": "hello"}, id=str(T1)) == b"%d-1" % T1  # t1
    assert mesh[2].xadd("s1", {"text": "goodbye"}, id=str(T2)) == b"%d-2" % T2
    assert ids(mesh[1], "s1") == [b"%d-1" % T1]  # t2
    assert ids(mesh[2], "s1") == [b"%d-2" % T2]
    assert ids(mesh[3], "s1") == []
    mesh.sync()  # t3
    for r in (1, 2, 3):  # t4
        assert ids(mesh[r], "s1") == [b"%d-1" % T1, b"%d-2" % T2]
    assert mesh[3].xrange("s1")[1][1] == {b"text": b"goodbye"}


def test_t1_t6_del_is_observed_remove_a_concurrent_xadd_survives(mesh: TcpMesh) -> None:
    mesh[1].xadd("s2", {"text": "hello"}, id=str(T1))  # t1
    mesh.sync()  # t2
    for r in (1, 2, 3):  # t3
        assert ids(mesh[r], "s2") == [b"%d-1" % T1]
    mesh.isolate()
    assert mesh[1].delete("s2") == 1  # t4
    mesh[2].xadd("s2", {"text": "goodbye"}, id=str(T2))
    assert mesh[1].exists("s2") == 0
    mesh.sync()  # t5
    for r in (1, 2, 3):  # t6
        assert ids(mesh[r], "s2") == [b"%d-2" % T2]


def test_strict_mode_refuses_full_ids_naming_the_mode(mesh: TcpMesh) -> None:
    with pytest.raises(redis.ResponseError, match="active-active-id-mode strict"):
        mesh[1].xadd("s3", {"f1": "v1"}, id="100-1")
    assert mesh[1].exists("s3") == 0


def test_t1_t7_xread_may_skip_an_entry_that_arrives_late(mesh: TcpMesh) -> None:
    mesh.isolate()
    assert mesh[1].xadd("s4", {"f1": "v1"}, id="110") == b"110-1"  # t1
    assert mesh[2].xadd("s4", {"f1": "v1"}, id="115") == b"115-2"
    assert mesh[1].xadd("s4", {"f1": "v1"}, id="120") == b"120-1"  # t2
    assert mesh[1].xadd("s4", {"f1": "v1"}, id="130") == b"130-1"  # t3
    got = mesh[1].xread({"s4": "0"}, count=2)  # t4
    assert [e[0] for e in got[0][1]] == [b"110-1", b"120-1"]
    mesh.sync()  # t5
    got = mesh[1].xread({"s4": "120-1"}, count=2)  # t6: 115-2 is never seen by this reader
    assert [e[0] for e in got[0][1]] == [b"130-1"]
    for r in (1, 2, 3):  # t7
        got = mesh[r].xread({"s4": "0"})
        assert [e[0] for e in got[0][1]] == [b"110-1", b"115-2", b"120-1", b"130-1"]


def test_t1_t4_concurrent_group_creation_merges(mesh: TcpMesh) -> None:
    mesh[1].xadd("s5", {"f": "v"})
    mesh.sync()
    mesh.isolate()
    mesh[1].xgroup_create("s5", "g1", "0")  # t1
    mesh[2].xgroup_create("s5", "g2", "0")
    assert groups(mesh[1], "s5") == [b"g1"]  # t2
    assert groups(mesh[2], "s5") == [b"g2"]
    mesh.sync()  # t3
    for r in (1, 2, 3):  # t4
        assert groups(mesh[r], "s5") == [b"g1", b"g2"]
    with pytest.raises(redis.ResponseError, match="BUSYGROUP"):
        mesh[3].xgroup_create("s5", "g1", "0")


def test_t1_t6_del_wins_over_a_concurrent_group_create(mesh: TcpMesh) -> None:
    mesh[1].xgroup_create("s6", "group1", "0", mkstream=True)  # t1
    mesh.sync()  # t2
    for r in (1, 2, 3):  # t3
        assert groups(mesh[r], "s6") == [b"group1"]
    mesh.isolate()
    mesh[1].delete("s6")  # t4
    mesh[2].xgroup_create("s6", "group2", "0")
    assert groups(mesh[2], "s6") == [b"group1", b"group2"]
    mesh.sync()  # t5
    for r in (1, 2, 3):  # t6
        assert mesh[r].exists("s6") == 0


def test_destroy_wins_over_a_concurrent_create_of_the_same_group(mesh: TcpMesh) -> None:
    mesh.isolate()
    mesh[1].xgroup_create("s7", "g1", "0", mkstream=True)  # t1
    mesh.sync(1, 2)  # t2: region 3 has not synced yet
    assert groups(mesh[1], "s7") == [b"g1"] == groups(mesh[2], "s7")  # t3
    assert mesh[3].exists("s7") == 0
    mesh.isolate()
    assert mesh[1].xgroup_destroy("s7", "g1") == 1  # t4
    mesh[3].xgroup_create("s7", "g1", "0", mkstream=True)
    mesh.sync()  # t5
    for r in (1, 2, 3):  # t6
        assert mesh[r].exists("s7") == 0


def test_t1_t8_group_existence_replicates_consumers_stay_local(mesh: TcpMesh) -> None:
    assert mesh[1].xadd("s8", {"text": "hello"}, id="110") == b"110-1"  # t1
    mesh[1].xgroup_create("s8", "group1", "0")  # t2
    assert xreadgroup(mesh[1], "s8", "group1", "Alice") == [b"110-1"]  # t3
    mesh.sync()  # t4
    for r in (1, 2):
        assert ids(mesh[r], "s8") == [b"110-1"]  # t5
        assert groups(mesh[r], "s8") == [b"group1"]  # t6
    assert [c["name"] for c in mesh[1].xinfo_consumers("s8", "group1")] == [b"Alice"]  # t7
    assert mesh[2].xinfo_consumers("s8", "group1") == []
    assert mesh[1].xpending("s8", "group1")["pending"] == 1  # t8
    assert mesh[2].xpending("s8", "group1")["pending"] == 0
    # traffic redirected to region 2 reads the unacknowledged entry again (at-least-once),
    # and the read makes no effect
    before = own_seq(mesh, 2)
    assert xreadgroup(mesh[2], "s8", "group1", "Bob") == [b"110-1"]
    assert own_seq(mesh, 2) == before


def test_xreadgroup_never_skips_a_late_entry(mesh: TcpMesh) -> None:
    mesh[1].xgroup_create("s9", "g", "0", mkstream=True)
    mesh.sync()
    mesh.isolate()
    assert mesh[1].xadd("s9", {"f": "a"}, id="200") == b"200-1"
    assert mesh[2].xadd("s9", {"f": "b"}, id="150") == b"150-2"  # concurrent, smaller
    assert xreadgroup(mesh[1], "s9", "g", "c") == [b"200-1"]
    mesh.sync()
    assert mesh[1].xread({"s9": "200-1"}) == []  # XREAD past 200-1 skips 150-2
    assert xreadgroup(mesh[1], "s9", "g", "c") == [b"150-2"]  # XREADGROUP does not
    assert xreadgroup(mesh[1], "s9", "g", "c", "0") == [b"150-2", b"200-1"]


def test_xsetid_fails_below_the_last_id_and_replicates(mesh: TcpMesh) -> None:
    mesh[1].xadd("s10", {"f": "v"}, id="100")
    mesh.sync()
    with pytest.raises(redis.ResponseError, match="smaller than the target stream top item"):
        mesh[2].execute_command("XSETID", "s10", "99-0")
    mesh[2].execute_command("XSETID", "s10", "500-0")
    mesh.sync()
    assert mesh[1].xinfo_stream("s10")["last-generated-id"] == b"500-0"
    assert mesh[1].xadd("s10", {"f": "v"}, id="500") == b"500-1"


def test_rename_deletes_group_information(mesh: TcpMesh) -> None:
    mesh[1].xadd("s11", {"f": "v"}, id="100")
    mesh[1].xgroup_create("s11", "g", "0")
    mesh.sync()
    mesh[2].rename("s11", "s11b")
    mesh.sync()
    for r in (1, 2, 3):
        assert mesh[r].exists("s11") == 0
        assert ids(mesh[r], "s11b") == [b"100-1"]
        assert mesh[r].xinfo_groups("s11b") == []


def test_a_stream_without_entries_or_groups_does_not_exist(mesh: TcpMesh) -> None:
    sid = mesh[1].xadd("s12", {"f": "v"}, id="1000")
    mesh.sync()
    assert mesh[2].xdel("s12", sid) == 1
    mesh.sync()
    for r in (1, 2, 3):
        assert mesh[r].exists("s12") == 0
        assert b"s12" not in mesh[r].keys("*")
    assert mesh[1].xadd("s12", {"f": "v"}, id="1000") == b"1000-17"  # IDs keep rising


@pytest.mark.parametrize("mode", ["semi-strict", "liberal"])
def test_t1_t3_full_ids_can_duplicate_outside_strict_mode(mode: str) -> None:
    mesh = TcpMesh(3, mode)
    try:
        mesh.linked()
        mesh.isolate()
        assert mesh[1].xadd("x", {"f1": "v1"}, id="100-1") == b"100-1"  # t1
        assert mesh[2].xadd("x", {"f1": "v1"}, id="100-1") == b"100-1"
        mesh.sync()  # t2
        for r in (1, 2, 3):  # t3
            assert ids(mesh[r], "x") == [b"100-1", b"100-1"]
            assert mesh[r].xlen("x") == 2
    finally:
        mesh.close()


def test_t1_t11_xack_replicates_only_a_contiguous_prefix() -> None:
    """Regions 1-3 as the seed's table; region 4 takes the redirected traffic of t9 (so that
    regions 2 and 3 stay unread for t11)."""
    mesh = TcpMesh(4, "semi-strict")
    try:
        mesh.linked()
        for sid in ("110-0", "120-0", "130-0"):  # t1-t3
            mesh[1].xadd("x", {"f1": "v1"}, id=sid)
        mesh[1].xgroup_create("x", "g1", "0")  # t4
        assert xreadgroup(mesh[1], "x", "g1", "Alice") == [b"110-0", b"120-0", b"130-0"]  # t5
        mesh.sync()
        mesh.isolate()
        seq = own_seq(mesh, 1)
        assert mesh[1].xack("x", "g1", "110-0") == 1  # t6: the prefix grows: an effect
        assert own_seq(mesh, 1) == seq + 1
        mesh.sync()  # t7
        assert mesh[1].xack("x", "g1", "130-0") == 1  # t8
        assert own_seq(mesh, 1) == seq + 1  # t9: 120-0 still pending: no effect for 130-0
        mesh.isolate()
        assert xreadgroup(mesh[4], "x", "g1", "Bob") == [b"120-0", b"130-0"]
        assert mesh[1].xack("x", "g1", "120-0") == 1  # t10: the prefix reaches 130-0
        assert own_seq(mesh, 1) == seq + 2
        mesh.sync(1, 2, 3)  # t11
        for r in (2, 3):  # a redirection reads nothing already acknowledged
            assert xreadgroup(mesh[r], "x", "g1", "Bob") == []
    finally:
        mesh.close()
