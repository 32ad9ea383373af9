"""Issue 18: a full state transfer (``activeactive.transfer``), in memory. A region whose peers
no longer keep the effects it needs (it was cut off while they trimmed, or it is new) takes
one peer's state in one piece, keeps its own local group state, and then goes on with
effects: every region converges, with no duplicate and no gap."""

from __future__ import annotations

import pytest

from headwater.activeactive.persist import dump_state
from headwater.activeactive.region import Region
from headwater.activeactive.transfer import adopt_state, covers
from headwater.errors import ReplyError
from headwater.stream.ids import MAX_ID, MIN_ID
from tests.support.mesh import Mesh


def ids(rows: list[tuple[tuple[int, int], object]]) -> list[tuple[int, int]]:
    return [sid for sid, _ in rows]


def take_state(mesh: Mesh, receiver: int, donor: int) -> int:
    """``receiver`` takes ``donor``'s state; the effects it made ready, applied."""
    ready = adopt_state(mesh[receiver], dump_state(mesh[donor]))
    mesh[receiver].apply_ready(ready)
    return len(ready)


def trimmed(mesh: Mesh, receiver: int) -> None:
    """Every peer forgot the effects ``receiver`` has not had yet (they trimmed them)."""
    for link in mesh.queues:
        if link[1] == receiver:
            mesh.queues[link] = []


def test_a_region_back_after_its_peers_trimmed_takes_a_state_and_goes_on() -> None:
    mesh = Mesh(3)
    for r in (1, 2, 3):
        mesh[r].xadd(b"x", b"*", [b"r", b"%d" % r], 100)
    mesh[1].xgroup_create(b"x", b"g", b"0")
    mesh.sync()
    # region 3 reads (local state: a consumer, pending entries), then is cut off
    assert len(mesh[3].xreadgroup(b"x", b"g", b"c3", b">", 200, count=2)) == 2
    mesh.partition({1, 2}, {3})
    for n in range(5):
        mesh[1].xadd(b"x", b"*", [b"n", b"%d" % n], 300 + n)
        mesh[2].xadd(b"y", b"*", [b"n", b"%d" % n], 300 + n)
    mesh[2].xgroup_create(b"y", b"h", b"$")  # a group region 3 never heard of
    mesh[2].xadd(b"y", b"*", [b"after", b"h"], 400)
    mesh[1].delete(b"x")
    mesh[1].xadd(b"x", b"*", [b"again", b"1"], 500)
    mesh.sync(1, 2)
    mesh.collect()
    trimmed(mesh, 3)
    # region 2 makes more that region 1 has not applied yet: region 3 gets them as effects
    mesh.cut.add((2, 1))  # (region 1 gets them later)
    mesh[2].xadd(b"y", b"*", [b"late", b"2"], 600)
    mesh.collect()
    before = dict(mesh[3].inbox.applied)
    take_state(mesh, 3, 1)
    assert covers(mesh[3].inbox.applied, before)
    assert mesh[3].dump() == mesh[1].dump()
    mesh.heal()
    mesh.sync()
    mesh[2].xadd(b"y", b"*", [b"later", b"2"], 700)
    mesh.sync()
    mesh.check()
    # every region converges, with each entry once (no duplicate, no gap)
    dumps = {r: mesh[r].dump() for r in (1, 2, 3)}
    assert len(set(dumps.values())) == 1, dumps
    assert mesh[3].xlen(b"y") == 8
    rows = mesh[3].xrange(b"y", MIN_ID, MAX_ID)
    assert len({sid for sid, _ in rows}) == 8
    # the group region 3 never heard of starts where it started at region 2 (`$`)
    got = mesh[3].xreadgroup(b"y", b"h", b"c", b">", 800)
    assert [p for _, p in got] == [[b"after", b"h"], [b"late", b"2"], [b"later", b"2"]]


def test_local_group_state_is_kept_and_nothing_unacknowledged_is_skipped() -> None:
    mesh = Mesh(3)
    for n in range(4):
        mesh[1].xadd(b"x", b"*", [b"n", b"%d" % n], 100 + n)
    mesh[1].xgroup_create(b"x", b"g", b"0")
    mesh.sync()
    first = mesh[3].xreadgroup(b"x", b"g", b"mine", b">", 200, count=1)
    mesh.partition({1, 2}, {3})
    # region 1 delivers two entries and acknowledges only the first: the prefix replicates
    got = mesh[1].xreadgroup(b"x", b"g", b"a", b">", 300, count=3)
    mesh[1].xack(b"x", b"g", [got[0][0]])
    mesh.sync(1, 2)
    mesh.collect()
    trimmed(mesh, 3)
    take_state(mesh, 3, 2)
    # region 3's own consumer and its pending entry are still here
    assert mesh[3].xpending(b"x", b"g") == [(first[0][0], b"mine", 1)]
    assert mesh[3].xinfo_consumers(b"x", b"g") == [b"mine"]  # (none of region 1's came)
    # `>` skips what was acknowledged in region 1, returns what it delivered unacknowledged
    rest = ids(mesh[3].xreadgroup(b"x", b"g", b"b", b">", 400))
    assert rest == [*ids(got)[1:], (103, 1)]


def test_a_region_that_applied_more_refuses_the_state() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"*", [b"a", b"1"], 100)
    mesh.sync()
    mesh.partition({1, 2}, {3})
    mesh[3].xadd(b"x", b"*", [b"mine", b"3"], 200)  # region 1 has not got this one
    before = mesh[3].dump()
    with pytest.raises(ReplyError, match="does not cover"):
        adopt_state(mesh[3], dump_state(mesh[1]))
    assert mesh[3].dump() == before  # nothing changed
    mesh.heal()
    mesh.sync(3, 1)  # region 1 gets it: now its state covers region 3's
    take_state(mesh, 3, 1)
    mesh.sync()
    assert mesh.converged()


def test_a_new_region_joins_a_mesh_with_history() -> None:
    mesh = Mesh(3)
    for r in (1, 2, 3):
        for n in range(3):
            mesh[r].xadd(b"x", b"*", [b"r", b"%d" % r], 100 + n)
    mesh[2].xgroup_create(b"x", b"g", b"0")
    mesh[3].xdel(b"x", [ids(mesh[3].xrange(b"x", MIN_ID, MAX_ID))[0]])
    mesh[1].xsetid(b"x", (900, 0))
    mesh.sync()
    new = Region(4, [1, 2, 3, 4])
    ready = adopt_state(new, dump_state(mesh[2]))
    assert ready == []
    assert new.dump() == mesh[1].dump()
    # it writes; the others apply its effects (an origin they did not know)
    new.xadd(b"x", b"*", [b"r", b"4"], 1000)
    for effect in new.take_outbox():
        for r in (1, 2, 3):
            mesh[r].receive(effect)
    assert {mesh[r].dump() for r in (1, 2, 3)} == {new.dump()}
    assert ids(new.xreadgroup(b"x", b"g", b"c", b">", 1100))[-1] == (1000, 4)
    new.check_invariants()


def test_the_own_sequence_goes_on_after_what_the_donor_holds() -> None:
    """A region that lost its data takes back its own effects from a peer: it goes on after
    them (never reusing a sequence a peer holds)."""
    mesh = Mesh(3)
    mesh[3].xadd(b"x", b"*", [b"a", b"1"], 100)
    mesh[3].xadd(b"x", b"*", [b"a", b"2"], 101)
    mesh.sync()
    lost = Region(3, [1, 2, 3])
    adopt_state(lost, dump_state(mesh[1]))
    assert lost.inbox.applied[3] == 2
    lost.xadd(b"x", b"*", [b"a", b"3"], 102)
    effect = lost.take_outbox()[0]
    assert effect.seq == 3
    mesh[1].receive(effect)
    assert mesh[1].dump() == lost.dump()
