"""Seed 004's example tables (t1…t11), step by step, three regions, region by region (issue 18).

Each test follows one table of the seed: a row is a step, "— Sync —" is ``mesh.sync()``. The
seed's IDs are kept where they are consistent; where a table contradicts itself (the DEL table
shows ``…828-2`` in region 2 for an entry region 1 made as ``…828-1``) the test follows the
rule the table illustrates and says so.
"""

from __future__ import annotations

import pytest

from headwater.activeactive.envelope import AckPrefix
from headwater.activeactive.region import BUSYGROUP
from headwater.errors import ReplyError
from headwater.stream.ids import MAX_ID, MIN_ID
from tests.support.mesh import Mesh

T1, T2 = 1589929244828, 1589929246795


def ids(entries: list[tuple[tuple[int, int], object]]) -> list[tuple[int, int]]:
    return [sid for sid, _ in entries]


def xrange_ids(mesh: Mesh, region: int, key: bytes) -> list[tuple[int, int]]:
    return ids(mesh[region].xrange(key, MIN_ID, MAX_ID))


def test_concurrent_xadd_converges_without_duplicate_ids() -> None:
    mesh = Mesh(3)
    # t1
    assert mesh[1].xadd(b"messages", b"*", [b"text", b"hello"], T1) == (T1, 1)
    assert mesh[2].xadd(b"messages", b"*", [b"text", b"goodbye"], T2) == (T2, 2)
    # t2
    assert xrange_ids(mesh, 1, b"messages") == [(T1, 1)]
    assert xrange_ids(mesh, 2, b"messages") == [(T2, 2)]
    assert xrange_ids(mesh, 3, b"messages") == []
    # t3
    mesh.sync()
    # t4
    for region in (1, 2, 3):
        assert xrange_ids(mesh, region, b"messages") == [(T1, 1), (T2, 2)]
    assert mesh[3].xrange(b"messages", MIN_ID, MAX_ID)[1][1] == [b"text", b"goodbye"]
    assert mesh.converged()
    mesh.check()


def test_del_is_observed_remove_a_concurrent_xadd_survives() -> None:
    """The seed's t1-t6; its t3 row shows region 2 holding ``…828-2``, a typo for ``…828-1``
    (the entry region 1 made)."""
    mesh = Mesh(3)
    mesh[1].xadd(b"messages", b"*", [b"text", b"hello"], T1)  # t1
    mesh.sync()  # t2
    for region in (1, 2, 3):  # t3
        assert xrange_ids(mesh, region, b"messages") == [(T1, 1)]
    # t4: region 1 deletes what it sees; region 2 adds at the same time
    assert mesh[1].delete(b"messages") == 1
    assert mesh[2].xadd(b"messages", b"*", [b"text", b"goodbye"], T2) == (T2, 2)
    assert not mesh[1].exists(b"messages")
    mesh.sync()  # t5
    for region in (1, 2, 3):  # t6
        assert xrange_ids(mesh, region, b"messages") == [(T2, 2)]
    assert mesh.converged()
    mesh.check()


@pytest.mark.parametrize("mode", [b"semi-strict", b"liberal"])
def test_full_ids_can_duplicate_outside_strict_mode(mode: bytes) -> None:
    mesh = Mesh(3, mode)
    assert mesh[1].xadd(b"x", b"100-1", [b"f1", b"v1"], 0) == (100, 1)  # t1
    assert mesh[2].xadd(b"x", b"100-1", [b"f1", b"v1"], 0) == (100, 1)
    mesh.sync()  # t2
    for region in (1, 2, 3):  # t3
        assert xrange_ids(mesh, region, b"x") == [(100, 1), (100, 1)]
        assert mesh[region].xlen(b"x") == 2
    assert mesh.converged()


def test_strict_mode_refuses_full_ids_naming_the_mode() -> None:
    mesh = Mesh(3)
    with pytest.raises(ReplyError, match="active-active-id-mode strict"):
        mesh[1].xadd(b"x", b"100-1", [b"f1", b"v1"], 0)
    assert not mesh[1].exists(b"x")
    assert mesh[1].outbox == []


def test_xread_may_skip_an_entry_that_arrives_late() -> None:
    mesh = Mesh(3)
    assert mesh[1].xadd(b"x", b"110", [b"f1", b"v1"], 0) == (110, 1)  # t1
    assert mesh[2].xadd(b"x", b"115", [b"f1", b"v1"], 0) == (115, 2)
    assert mesh[1].xadd(b"x", b"120", [b"f1", b"v1"], 0) == (120, 1)  # t2
    assert mesh[1].xadd(b"x", b"130", [b"f1", b"v1"], 0) == (130, 1)  # t3
    assert ids(mesh[1].xread(b"x", MIN_ID, 2)) == [(110, 1), (120, 1)]  # t4
    mesh.sync()  # t5
    # t6: the reader continues after the last ID it got and never sees 115-2
    assert ids(mesh[1].xread(b"x", (120, 1), 2)) == [(130, 1)]
    everything = [(110, 1), (115, 2), (120, 1), (130, 1)]
    for region in (1, 2, 3):  # t7
        assert ids(mesh[region].xread(b"x", MIN_ID)) == everything
    assert mesh.converged()


def test_concurrent_group_creation_merges() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"*", [b"f", b"v"], 1000)
    mesh.sync()
    mesh[1].xgroup_create(b"x", b"g1", b"0")  # t1
    mesh[2].xgroup_create(b"x", b"g2", b"0")
    assert mesh[1].xinfo_groups(b"x") == [b"g1"]  # t2
    assert mesh[2].xinfo_groups(b"x") == [b"g2"]
    mesh.sync()  # t3
    for region in (1, 2, 3):  # t4
        assert mesh[region].xinfo_groups(b"x") == [b"g1", b"g2"]
    assert mesh.converged()
    with pytest.raises(ReplyError) as raised:
        mesh[3].xgroup_create(b"x", b"g1", b"0")
    assert raised.value is BUSYGROUP


def test_del_wins_over_a_concurrent_group_create() -> None:
    mesh = Mesh(3)
    mesh[1].xgroup_create(b"x", b"group1", b"0", mkstream=True)  # t1
    mesh.sync()  # t2
    for region in (1, 2, 3):  # t3
        assert mesh[region].xinfo_groups(b"x") == [b"group1"]
    mesh[1].delete(b"x")  # t4
    mesh[2].xgroup_create(b"x", b"group2", b"0")
    assert mesh[2].xinfo_groups(b"x") == [b"group1", b"group2"]
    mesh.sync()  # t5
    for region in (1, 2, 3):  # t6
        assert not mesh[region].exists(b"x")
    assert mesh.converged()
    mesh.check()


def test_destroy_wins_over_a_concurrent_create_of_the_same_group() -> None:
    mesh = Mesh(3)
    mesh[1].xgroup_create(b"x", b"g1", b"0", mkstream=True)  # t1
    mesh.sync(1, 2)  # t2: region 3 has not synced yet
    assert mesh[1].xinfo_groups(b"x") == [b"g1"]  # t3
    assert mesh[2].xinfo_groups(b"x") == [b"g1"]
    assert not mesh[3].exists(b"x")
    assert mesh[1].xgroup_destroy(b"x", b"g1") == 1  # t4
    mesh[3].xgroup_create(b"x", b"g1", b"0", mkstream=True)
    mesh.sync()  # t5
    for region in (1, 2, 3):  # t6
        assert not mesh[region].exists(b"x")
    assert mesh.converged()
    mesh.check()


def test_group_existence_replicates_consumers_stay_local() -> None:
    mesh = Mesh(3)
    assert mesh[1].xadd(b"messages", b"110", [b"text", b"hello"], 0) == (110, 1)  # t1
    mesh[1].xgroup_create(b"messages", b"group1", b"0")  # t2
    got = mesh[1].xreadgroup(b"messages", b"group1", b"Alice", b">", 5)  # t3
    assert ids(got) == [(110, 1)]
    mesh.sync()  # t4
    for region in (1, 2):
        assert xrange_ids(mesh, region, b"messages") == [(110, 1)]  # t5
        assert mesh[region].xinfo_groups(b"messages") == [b"group1"]  # t6
    assert mesh[1].xinfo_consumers(b"messages", b"group1") == [b"Alice"]  # t7
    assert mesh[2].xinfo_consumers(b"messages", b"group1") == []
    assert mesh[1].xpending(b"messages", b"group1") == [((110, 1), b"Alice", 1)]  # t8
    assert mesh[2].xpending(b"messages", b"group1") == []
    # traffic redirected to region 2 reads the unacknowledged entry again (at-least-once)
    assert ids(mesh[2].xreadgroup(b"messages", b"group1", b"Bob", b">", 6)) == [(110, 1)]
    assert mesh[2].outbox == []  # XREADGROUP makes no effect
    assert mesh.converged()


def test_xack_replicates_only_a_contiguous_prefix() -> None:
    # regions 1-3 as the seed's table; region 4 takes the redirected traffic of t9
    mesh = Mesh(4, b"semi-strict")
    mesh[1].xadd(b"x", b"110-0", [b"f1", b"v1"], 0)  # t1
    mesh[1].xadd(b"x", b"120-0", [b"f1", b"v1"], 0)  # t2
    mesh[1].xadd(b"x", b"130-0", [b"f1", b"v1"], 0)  # t3
    mesh[1].xgroup_create(b"x", b"g1", b"0")  # t4
    got = mesh[1].xreadgroup(b"x", b"g1", b"Alice", b">", 5)  # t5
    assert ids(got) == [(110, 0), (120, 0), (130, 0)]
    mesh.sync()
    assert mesh[1].xack(b"x", b"g1", [(110, 0)]) == 1  # t6
    assert [e.ops for e in mesh[1].outbox] == [(AckPrefix(b"x", b"g1", ((1, (110, 0)),)),)]
    mesh.sync()  # t7: the XACK effect for 110-0 travels
    assert mesh[2].streams[b"x"].groups[b"g1"].acked == {1: (110, 0)}
    assert mesh[1].xack(b"x", b"g1", [(130, 0)]) == 1  # t8
    assert mesh[1].outbox == []  # t9: 120-0 is still pending: no XACK effect for 130-0
    # a redirection now re-reads 120-0 and 130-0 (a region of their own: regions 2 and 3 stay
    # unread for t11)
    assert ids(mesh[4].xreadgroup(b"x", b"g1", b"Bob", b">", 7)) == [(120, 0), (130, 0)]
    assert mesh[1].xack(b"x", b"g1", [(120, 0)]) == 1  # t10
    assert [e.ops for e in mesh[1].outbox] == [(AckPrefix(b"x", b"g1", ((1, (130, 0)),)),)]
    mesh.sync()  # t11: the XACK effect for 130-0
    for region in (2, 3):  # a redirection reads nothing already acknowledged
        assert mesh[region].xreadgroup(b"x", b"g1", b"Bob", b">", 8) == []
    assert mesh.converged()
    mesh.check()


def test_xreadgroup_never_skips_a_late_entry() -> None:
    mesh = Mesh(3)
    mesh[1].xgroup_create(b"x", b"g", b"0", mkstream=True)
    mesh.sync()
    assert mesh[1].xadd(b"x", b"200", [b"f", b"a"], 0) == (200, 1)
    assert mesh[2].xadd(b"x", b"150", [b"f", b"b"], 0) == (150, 2)  # concurrent, smaller
    assert ids(mesh[1].xreadgroup(b"x", b"g", b"c", b">", 1)) == [(200, 1)]
    mesh.sync()
    assert ids(mesh[1].xread(b"x", (200, 1))) == []  # XREAD past 200-1 skips 150-2
    assert ids(mesh[1].xreadgroup(b"x", b"g", b"c", b">", 2)) == [(150, 2)]  # XREADGROUP does not
    # a history read walks the consumer's pending entries merged by ID
    assert ids(mesh[1].xreadgroup(b"x", b"g", b"c", b"0", 3)) == [(150, 2), (200, 1)]


def test_xsetid_fails_below_the_last_id_and_replicates() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"100", [b"f", b"v"], 0)
    mesh.sync()
    with pytest.raises(ReplyError, match="smaller than the target stream top item"):
        mesh[2].xsetid(b"x", (99, 0))
    mesh[2].xsetid(b"x", (500, 0))
    mesh.sync()
    assert mesh[1].xinfo_stream(b"x")["last-generated-id"] == (500, 0)
    assert mesh[1].xadd(b"x", b"*", [b"f", b"v"], 0) == (500, 1)
    mesh.sync()
    assert mesh.converged()


def test_rename_deletes_group_information() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"100", [b"f", b"v"], 0)
    mesh[1].xgroup_create(b"x", b"g", b"0")
    mesh.sync()
    mesh[2].rename(b"x", b"y")
    mesh.sync()
    for region in (1, 2, 3):
        assert not mesh[region].exists(b"x")
        assert xrange_ids(mesh, region, b"y") == [(100, 1)]
        assert mesh[region].xinfo_groups(b"y") == []
    assert mesh.converged()
    mesh.check()


def test_a_stream_without_entries_or_groups_does_not_exist() -> None:
    mesh = Mesh(3)
    sid = mesh[1].xadd(b"x", b"*", [b"f", b"v"], 1000)
    mesh.sync()
    assert mesh[2].xdel(b"x", [sid]) == 1
    mesh.sync()
    for region in (1, 2, 3):
        assert not mesh[region].exists(b"x")
        assert mesh[region].existing_keys() == []
    # the record stays as a tombstone: the next ID still rises past the deleted one
    assert mesh[1].xadd(b"x", b"*", [b"f", b"v"], 1000) == (1000, 17)
    mesh.sync()
    assert mesh.converged()
