"""Issue 18: a full state transfer (``activeactive.transfer``), in memory. A region whose peers
no longer keep the effects it needs (it was cut off while they trimmed, or it is new) takes
one peer's state in one piece, keeps its own local group state, and then goes on with
effects: every region converges, with no duplicate and no gap. Issue 32 (8): the state is
merged with the receiver's whatever the vectors, so two regions that trimmed each other's
effects during a two-way cut converge too, to what the effects would have made."""

from __future__ import annotations

from headwater.activeactive.persist import dump_state
from headwater.activeactive.region import Region
from headwater.activeactive.transfer import adopt_state, covers
from headwater.stream.idmp import IdmpState
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


def test_a_region_that_applied_more_merges_the_state() -> None:
    """Issue 32 (8): the donor's vector does not cover the receiver's (it applied an effect of
    region 3 the donor has not): the receiver no longer refuses, it merges, keeping its own
    effect; once the donor has that effect too, both are equal."""
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"*", [b"a", b"1"], 100)
    mesh.sync()
    mesh.partition({1, 2}, {3})
    mesh[3].xadd(b"x", b"*", [b"mine", b"3"], 200)  # region 1 has not got this one
    mesh[1].xadd(b"x", b"*", [b"theirs", b"1"], 300)
    mesh.collect()
    trimmed(mesh, 3)
    take_state(mesh, 3, 1)
    assert mesh[3].inbox.applied == {1: 2, 2: 0, 3: 1}
    assert [p for _, p in mesh[3].xrange(b"x", MIN_ID, MAX_ID)] == [
        [b"a", b"1"],
        [b"mine", b"3"],
        [b"theirs", b"1"],
    ]
    mesh.heal()
    mesh.sync()
    mesh.check()
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


def diverge(mesh: Mesh) -> None:
    """Two regions share streams and groups, then are cut from each other and both write:
    entries, deletes of the other region's entries, trims across both sub-logs, group
    creates, destroys and acknowledgements, XSETID, XCFGSET, DEL and RENAME (issue 32, 8)."""
    for r in (1, 2):
        for n in range(4):
            mesh[r].xadd(b"x", b"*", [b"r", b"%d" % r, b"n", b"%d" % n], 100 + n)
        mesh[r].xadd(b"z", b"*", [b"r", b"%d" % r], 100)
    mesh[1].xgroup_create(b"x", b"g", b"0")
    mesh[1].xgroup_create(b"x", b"gone", b"0")
    mesh[2].xadd(b"y", b"*", [b"y", b"0"], 110)
    mesh[1].xcfgset(b"x", 5, None)
    mesh.sync()
    # region 2's local state: a consumer with pending entries
    mesh[2].xreadgroup(b"x", b"g", b"local2", b">", 150, count=2)
    mesh.partition({1}, {2})
    shared = ids(mesh[1].xrange(b"x", MIN_ID, MAX_ID))
    for n in range(4, 9):
        mesh[1].xadd(b"x", b"*", [b"r", b"1", b"n", b"%d" % n], 200 + n)
        mesh[2].xadd(b"x", b"*", [b"r", b"2", b"n", b"%d" % n], 200 + n)
    # each deletes an entry of the other's sub-log; the same one, and one each
    mesh[1].xdel(b"x", [shared[1], shared[6]])  # (100-2: region 2's; 103-1: region 1's)
    mesh[2].xdel(b"x", [shared[0], shared[6]])  # (100-1: region 1's)
    mesh[1].xtrim(b"x", maxlen=10)
    mesh[2].xtrim(b"x", minid=(102, 0))
    # groups: region 1 delivers and acknowledges a prefix of g and of gone, region 2
    # destroys gone (delete wins) and both create a group of their own
    got = mesh[1].xreadgroup(b"x", b"g", b"c1", b">", 300, count=4)
    mesh[1].xack(b"x", b"g", [sid for sid, _ in got[:2]])
    gone = mesh[1].xreadgroup(b"x", b"gone", b"c1", b">", 300, count=2)
    mesh[1].xack(b"x", b"gone", [sid for sid, _ in gone])
    mesh[2].xgroup_destroy(b"x", b"gone")
    mesh[1].xgroup_create(b"x", b"h1", b"0")
    mesh[2].xgroup_create(b"x", b"h2", b"$")
    mesh[2].xgroup_create(b"x", b"both", b"0")
    mesh[1].xgroup_create(b"x", b"both", b"0")
    # registers and counters, concurrently
    mesh[1].xcfgset(b"x", 6, None)
    mesh[2].xcfgset(b"x", 7, 3)
    mesh[1].xsetid(b"x", (400, 0), entries_added=50)
    # a DEL observes only what region 1 held: region 2's concurrent entry survives
    mesh[1].delete(b"y")
    mesh[2].xadd(b"y", b"*", [b"y", b"1"], 300)
    # a RENAME in region 2 while region 1 writes to its source
    mesh[2].rename(b"z", b"w")
    mesh[1].xadd(b"z", b"*", [b"r", b"1", b"late", b"1"], 310)
    mesh.collect()


def exchange(mesh: Mesh, a: int, b: int) -> None:
    """Each region takes the other's state, both states taken before either is adopted (the
    two links of a healed cut transfer at the same time)."""
    state_a, state_b = dump_state(mesh[a]), dump_state(mesh[b])
    mesh[a].apply_ready(adopt_state(mesh[a], state_b))
    mesh[b].apply_ready(adopt_state(mesh[b], state_a))


def test_two_regions_that_trimmed_each_others_effects_merge_by_state() -> None:
    """Issue 32 (8): after a two-way cut, each region trimmed the effects the other needs and
    neither vector covers the other. Both take the other's state and merge: they end equal,
    and equal to what the effects would have made."""
    reference = Mesh(2)
    diverge(reference)
    reference.heal()
    reference.sync()
    assert reference.converged()
    mesh = Mesh(2)
    diverge(mesh)
    trimmed(mesh, 1)
    trimmed(mesh, 2)
    assert not covers(mesh[1].inbox.applied, mesh[2].inbox.applied)
    assert not covers(mesh[2].inbox.applied, mesh[1].inbox.applied)
    exchange(mesh, 1, 2)
    mesh.check()
    assert mesh[1].dump() == mesh[2].dump() == reference[1].dump()
    assert b"both" in mesh[1].visible(b"x").groups  # type: ignore[union-attr]
    assert b"gone" not in mesh[1].visible(b"x").groups  # type: ignore[union-attr]
    # region 2's own consumer and pending entries are still here
    assert mesh[2].xinfo_consumers(b"x", b"g") == [b"local2"]
    assert len(mesh[2].xpending(b"x", b"g")) == 2
    # both go on with effects
    mesh.heal()
    mesh[1].xadd(b"x", b"*", [b"after", b"1"], 500)
    mesh[2].xadd(b"x", b"*", [b"after", b"2"], 500)
    mesh.sync()
    mesh.check()
    assert mesh.converged()


def test_one_side_merges_then_the_other_takes_a_covering_state() -> None:
    """The links of a healed cut may transfer one after the other: the first region merges,
    the second then gets a state that covers its own."""
    reference = Mesh(2)
    diverge(reference)
    reference.heal()
    reference.sync()
    mesh = Mesh(2)
    diverge(mesh)
    trimmed(mesh, 1)
    trimmed(mesh, 2)
    take_state(mesh, 2, 1)
    assert covers(mesh[2].inbox.applied, mesh[1].inbox.applied)
    take_state(mesh, 1, 2)
    mesh.check()
    assert mesh[1].dump() == mesh[2].dump() == reference[1].dump()


def test_idmp_maps_stay_unless_the_donor_deleted_the_stream_unseen() -> None:
    """IDMP maps are local: a merge keeps the receiver's, but not for a stream the donor
    deleted (and wrote again) while the receiver did not see it, as a DEL would drop them."""
    mesh = Mesh(2)
    for key in (b"kept", b"deleted"):
        mesh[2].xadd(key, b"*", [b"f", b"1"], 100)
    mesh.sync()
    for key in (b"kept", b"deleted"):
        record = mesh[2].visible(key)
        assert record is not None
        record.idmp = IdmpState()
        record.idmp.record(b"p", b"i", (100, 2), 10)
    mesh.partition({1}, {2})
    mesh[1].delete(b"deleted")
    mesh[1].xadd(b"deleted", b"*", [b"f", b"2"], 200)
    mesh[2].xadd(b"kept", b"*", [b"f", b"3"], 200)  # (region 2 applied what 1 has not)
    mesh.collect()
    trimmed(mesh, 2)
    take_state(mesh, 2, 1)
    kept, deleted = mesh[2].visible(b"kept"), mesh[2].visible(b"deleted")
    assert kept is not None and kept.idmp is not None and kept.idmp.lookup(b"p", b"i")
    assert deleted is not None and deleted.idmp is None
