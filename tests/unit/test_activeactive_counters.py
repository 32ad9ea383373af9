"""XSETID's ENTRIESADDED / MAXDELETEDID and XCFGSET's IDMP settings across three regions, step
by step (issue 18; docs/design/active-active.md).

- MAXDELETEDID, like the last ID, never falls: max-merged.
- ENTRIESADDED n makes the count n in the region that sets it; it is that region's own
  adjustment of the sum of the sub-logs' counts, so XADDs made concurrently elsewhere add on
  top (as a counter does) and every region ends with the same count.
- XCFGSET's settings are replicated: the causally latest wins, concurrent ones are ordered by
  their effects' stamps; a DEL removes the settings it observed (a concurrent XCFGSET survives,
  as a concurrent XADD does). A region whose setting in force changes forgets its own iids.
"""

from __future__ import annotations

import pytest

from headwater.activeactive.region import XSETID_ADDED_TOO_SMALL
from headwater.errors import ReplyError
from tests.support.mesh import Mesh


def added(mesh: Mesh, region: int, key: bytes = b"x") -> int:
    record = mesh[region].visible(key)
    assert record is not None
    return record.entries_added()


def test_entries_added_is_set_here_and_concurrent_xadds_add_on_top() -> None:
    mesh = Mesh(3)
    for ms in (1, 2, 3):
        mesh[1].xadd(b"x", b"%d" % ms, [b"f", b"v"], 0)
    mesh.sync()
    mesh[1].xsetid(b"x", (3, 1), entries_added=100)  # t1
    mesh[2].xadd(b"x", b"4", [b"f", b"v"], 0)  # concurrent
    assert added(mesh, 1) == 100 and added(mesh, 2) == 4
    with pytest.raises(ReplyError) as raised:
        mesh[3].xsetid(b"x", (3, 1), entries_added=2)
    assert raised.value is XSETID_ADDED_TOO_SMALL
    mesh.sync()  # t2
    for region in (1, 2, 3):  # t3
        assert added(mesh, region) == 101
    # setting it again in another region makes it that region's number, everywhere
    mesh[3].xsetid(b"x", (4, 2), entries_added=50)
    mesh.sync()
    for region in (1, 2, 3):
        assert added(mesh, region) == 50
    assert mesh.converged()
    mesh.check()


def test_max_deleted_id_is_max_merged() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"10", [b"f", b"v"], 0)
    mesh.sync()
    mesh[1].xsetid(b"x", (20, 0), max_deleted=(5, 0))
    mesh[2].xsetid(b"x", (30, 0), max_deleted=(7, 0))
    mesh.sync()
    for region in (1, 2, 3):
        info = mesh[region].xinfo_stream(b"x")
        assert info["last-generated-id"] == (30, 0)
        assert mesh[region].streams[b"x"].max_deleted_id() == (7, 0)
    # a lower one changes nothing and makes no effect
    mesh[3].xsetid(b"x", (30, 0), max_deleted=(6, 0))
    assert mesh[3].outbox == []
    assert mesh.converged()


def test_xcfgset_later_wins_concurrent_ones_agree() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"1", [b"f", b"v"], 0)
    mesh.sync()
    assert mesh[1].xcfgset(b"x", 10, None)
    assert not mesh[1].xcfgset(b"x", 10, None)  # the same value: nothing to do
    mesh.sync()
    assert mesh[2].xcfgset(b"x", 20, 7)  # after it: wins
    mesh.sync()
    for region in (1, 2, 3):
        record = mesh[region].streams[b"x"]
        assert (record.idmp_setting(b"duration"), record.idmp_setting(b"maxsize")) == (20, 7)
    # concurrent settings of one value, and of two different ones
    mesh[1].xcfgset(b"x", 30, None)
    mesh[3].xcfgset(b"x", 40, 9)
    mesh.sync()
    values = {mesh[r].streams[b"x"].idmp_setting(b"duration") for r in (1, 2, 3)}
    assert len(values) == 1 and values <= {30, 40}
    assert {mesh[r].streams[b"x"].idmp_setting(b"maxsize") for r in (1, 2, 3)} == {9}
    assert mesh.converged()
    mesh.check()


def test_del_removes_the_settings_it_saw_a_concurrent_one_survives() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"1", [b"f", b"v"], 0)
    mesh[1].xcfgset(b"x", 10, 5)
    mesh.sync()
    mesh[1].delete(b"x")  # t1: saw duration 10, maxsize 5
    mesh[2].xcfgset(b"x", 60, None)  # concurrent
    mesh[2].xadd(b"x", b"2", [b"f", b"v"], 0)
    mesh.sync()
    for region in (1, 2, 3):
        record = mesh[region].streams[b"x"]
        assert record.idmp_setting(b"duration") == 60  # survived
        assert record.idmp_setting(b"maxsize") == 0  # removed: the server's default again
    assert mesh.converged()


def test_a_changed_setting_forgets_this_regions_iids() -> None:
    from headwater.stream.idmp import IdmpState

    mesh = Mesh(3)
    sid = mesh[1].xadd(b"x", b"1", [b"f", b"v"], 0)
    mesh.sync()
    for region in (1, 2):
        state = mesh[region].streams[b"x"].idmp = IdmpState()
        state.record(b"p", b"i", sid, 100)
    mesh[3].xcfgset(b"x", None, 100)  # region 3 changes maxsize (0 = the default) to 100
    mesh.sync()
    for region in (1, 2):  # the setting in force changed: each region forgot its own iids
        state = mesh[region].streams[b"x"].idmp
        assert state is not None and state.lookup(b"p", b"i") is None
