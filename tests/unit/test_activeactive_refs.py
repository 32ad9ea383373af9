"""KEEPREF / DELREF / ACKED, XDELEX and XACKDEL across three regions, step by step (issue 18).

The rules (docs/design/active-active.md, "Reference strategies"): a deletion names only what its
region saw (observed-remove, as XDEL and XTRIM); pending entries are local, so DELREF makes
every region drop its *own* pending entries of what is removed; ACKED asks the deleting
region's groups: its cursors (which the acknowledged prefixes of other regions raise) and its
own pending entries. XACKDEL is an XACK (its contiguous prefix replicated) and an XDEL in one
effect.
"""

from __future__ import annotations

from headwater.activeactive.envelope import AckPrefix, Cut, Remove
from headwater.stream.ids import MAX_ID, MIN_ID, StreamID
from tests.support.mesh import Mesh


def ids(mesh: Mesh, region: int, key: bytes = b"x") -> list[StreamID]:
    return [sid for sid, _ in mesh[region].xrange(key, MIN_ID, MAX_ID)]


def pending(mesh: Mesh, region: int, group: bytes = b"g") -> list[StreamID]:
    return [sid for sid, _, _ in mesh[region].xpending(b"x", group)]


def stream_of(mesh: Mesh, n: int = 5) -> Mesh:
    """Entries 1-1 … n-1 made in region 1, and group g, everywhere."""
    for ms in range(1, n + 1):
        mesh[1].xadd(b"x", b"%d" % ms, [b"f", b"%d" % ms], 0)
    mesh[1].xgroup_create(b"x", b"g", b"0")
    mesh.sync()
    return mesh


def test_concurrent_xdelex_of_one_entry_converges() -> None:
    mesh = stream_of(Mesh(3))
    assert mesh[1].xdelex(b"x", [(2, 1), (9, 9)]) == [1, -1]  # t1
    assert mesh[2].xdelex(b"x", [(2, 1)]) == [1]
    mesh[3].xadd(b"x", b"6", [b"f", b"6"], 0)
    assert mesh[1].outbox[-1].ops == (Remove(b"x", ((1, (2, 1)),)),)
    mesh.sync()  # t2
    for region in (1, 2, 3):  # t3
        assert ids(mesh, region) == [(1, 1), (3, 1), (4, 1), (5, 1), (6, 3)]
    assert mesh.converged()
    mesh.check()


def test_delref_drops_the_pending_entries_of_every_region() -> None:
    mesh = stream_of(Mesh(3))
    # each region delivers 1-1 and 2-1 to a consumer of its own (consumers are local)
    for region in (1, 2, 3):
        mesh[region].xreadgroup(b"x", b"g", b"c%d" % region, b">", 0, 2)
        assert pending(mesh, region) == [(1, 1), (2, 1)]
    assert mesh[1].xdelex(b"x", [(1, 1)], b"KEEPREF") == [1]
    assert mesh[1].xdelex(b"x", [(2, 1)], b"DELREF") == [1]
    assert pending(mesh, 1) == [(1, 1)]  # KEEPREF leaves its pending entry behind
    mesh.sync()
    for region in (2, 3):  # DELREF's travels: each region drops its own
        assert pending(mesh, region) == [(1, 1)]
        assert ids(mesh, region) == [(3, 1), (4, 1), (5, 1)]
    assert mesh.converged()
    mesh.check()


def test_acked_asks_this_regions_cursors_and_pending_entries() -> None:
    mesh = stream_of(Mesh(3))
    # region 2 delivers 1-1..3-1 and acknowledges them all: a contiguous prefix
    mesh[2].xreadgroup(b"x", b"g", b"c", b">", 0, 3)
    mesh[2].xack(b"x", b"g", [(1, 1), (2, 1), (3, 1)])
    # region 1 has not heard of it: for it the group still needs every entry
    assert mesh[1].xdelex(b"x", [(1, 1)], b"ACKED") == [2]
    assert mesh[1].outbox == []  # (nothing deleted: no effect)
    mesh.sync()  # the acknowledged prefix reaches region 1 and raises its cursor
    assert mesh[1].xdelex(b"x", [(1, 1), (4, 1)], b"ACKED") == [1, 2]
    # a second group that never read 2-1 keeps it
    mesh[3].xgroup_create(b"x", b"h", b"0")
    mesh.sync()
    assert mesh[2].xdelex(b"x", [(2, 1)], b"ACKED") == [2]
    mesh[2].xgroup_destroy(b"x", b"h")
    assert mesh[2].xdelex(b"x", [(2, 1)], b"ACKED") == [1]
    mesh.sync()
    for region in (1, 2, 3):
        assert ids(mesh, region) == [(3, 1), (4, 1), (5, 1)]
    assert mesh.converged()
    mesh.check()


def test_xtrim_acked_spares_what_the_group_needs_and_every_region_spares_it() -> None:
    mesh = stream_of(Mesh(3))
    mesh[1].xreadgroup(b"x", b"g", b"c", b">", 0, 4)
    mesh[1].xack(b"x", b"g", [(1, 1), (3, 1)])  # 2-1 and 4-1 stay pending, 5-1 unread
    assert mesh[1].xtrim(b"x", maxlen=1, ref=b"ACKED") == 2  # 1-1 and 3-1; goes on past 2-1
    assert mesh[1].outbox[-1].ops == (Cut(b"x", ((1, (3, 1)),), ((1, (2, 1)),)),)
    mesh[2].xadd(b"x", b"6", [b"f", b"6"], 0)  # concurrent: above every horizon
    mesh.sync()
    for region in (1, 2, 3):
        assert ids(mesh, region) == [(2, 1), (4, 1), (5, 1), (6, 2)]
    assert mesh.converged()
    mesh.check()


def test_xtrim_delref_and_xadd_with_a_strategy() -> None:
    mesh = stream_of(Mesh(3))
    mesh[2].xreadgroup(b"x", b"g", b"c", b">", 0, 2)
    assert mesh[1].xtrim(b"x", minid=(2, 0), ref=b"DELREF") == 1
    assert mesh[1].outbox[-1].ops == (Cut(b"x", ((1, (1, 1)),), (), True),)
    mesh.sync()
    assert pending(mesh, 2) == [(2, 1)]  # region 2 dropped its pending 1-1 with the entry
    assert mesh.converged()


def test_xackdel_acknowledges_the_prefix_and_removes_in_one_effect() -> None:
    mesh = stream_of(Mesh(3, b"semi-strict"))
    mesh[1].xreadgroup(b"x", b"g", b"Alice", b">", 0, 3)
    assert mesh[1].xackdel(b"x", b"g", [(1, 1), (3, 1), (9, 9)]) == [1, 1, -1]
    (effect,) = mesh[1].outbox
    assert effect.ops == (
        AckPrefix(b"x", b"g", ((1, (1, 1)),)),  # 2-1 still pending: the prefix stops at 1-1
        Remove(b"x", ((1, (1, 1)), (1, (3, 1)))),
    )
    mesh.sync()
    assert ids(mesh, 2) == [(2, 1), (4, 1), (5, 1)]
    assert mesh[1].xackdel(b"x", b"g", [(2, 1)], b"DELREF") == [1]
    mesh.sync()
    # a redirection to region 3 reads nothing already acknowledged in region 1
    got = mesh[3].xreadgroup(b"x", b"g", b"Bob", b">", 0)
    assert [sid for sid, _ in got] == [(4, 1), (5, 1)]
    # ACKED: acknowledged here, kept while another group has not read it
    mesh[2].xgroup_create(b"x", b"h", b"0")
    mesh.sync()
    assert mesh[3].xackdel(b"x", b"g", [(4, 1)], b"ACKED") == [2]
    mesh.sync()
    for region in (1, 2, 3):
        assert ids(mesh, region) == [(4, 1), (5, 1)]
    assert mesh.converged()
    mesh.check()
