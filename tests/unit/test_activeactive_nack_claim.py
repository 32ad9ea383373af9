"""XNACK and XREADGROUP … CLAIM across three regions, step by step (issue 18).

Consumers and PELs are local (spec/ACTIVE-ACTIVE.md), so both act on the region's own pending
entries and make no effect. A nacked entry is still pending: the acknowledged prefix a region
replicates stops before it, so a redirection to another region re-reads it (at-least-once),
and once it is claimed and acknowledged the prefix moves on.
"""

from __future__ import annotations

from headwater.activeactive.envelope import AckPrefix
from headwater.stream.groups import MAX_COUNT
from headwater.stream.ids import StreamID
from tests.support.mesh import Mesh


def read_ids(rows: list[tuple[StreamID, list[bytes] | None]]) -> list[StreamID]:
    return [sid for sid, _ in rows]


def stream_of(mesh: Mesh, n: int = 4) -> Mesh:
    for ms in range(1, n + 1):
        mesh[1].xadd(b"x", b"%d" % ms, [b"f", b"%d" % ms], 0)
    mesh[1].xgroup_create(b"x", b"g", b"0")
    mesh.sync()
    return mesh


def test_a_nacked_entry_holds_the_acknowledged_prefix_back() -> None:
    mesh = stream_of(Mesh(3))
    got = mesh[1].xreadgroup(b"x", b"g", b"alice", b">", 100, 3)
    assert read_ids(got) == [(1, 1), (2, 1), (3, 1)]
    assert mesh[1].xnack(b"x", b"g", [(1, 1)], lambda count: count) == 1  # t1: FAIL
    assert mesh[1].outbox == []  # local: no effect
    assert mesh[1].xpending(b"x", b"g")[0] == ((1, 1), b"", 1)  # nobody's
    mesh[1].xack(b"x", b"g", [(2, 1), (3, 1)])
    assert mesh[1].outbox == []  # 1-1 is still pending: no prefix to replicate
    mesh.sync()
    # a redirection to region 2 reads everything again: nothing was acknowledged as a prefix
    assert read_ids(mesh[2].xreadgroup(b"x", b"g", b"bob", b">", 200)) == [
        (1, 1),
        (2, 1),
        (3, 1),
        (4, 1),
    ]
    # region 1 claims the nacked entry (first, whatever its idle time) and acknowledges it
    claimed = mesh[1].claim_idle(b"x", b"g", b"carol", 10_000, 300)
    assert [(sid, idle, count) for sid, _, idle, count in claimed] == [((1, 1), 300, 1)]
    mesh[1].xack(b"x", b"g", [(1, 1)])
    assert [e.ops for e in mesh[1].outbox] == [(AckPrefix(b"x", b"g", ((1, (3, 1)),)),)]
    mesh.sync()
    assert read_ids(mesh[3].xreadgroup(b"x", b"g", b"dan", b">", 400)) == [(4, 1)]
    assert mesh.converged()
    mesh.check()


def test_claim_takes_only_this_regions_idle_entries_nack_zone_first() -> None:
    mesh = stream_of(Mesh(3))
    mesh[1].xreadgroup(b"x", b"g", b"alice", b">", 100, 2)  # 1-1, 2-1 at 100
    mesh[2].xreadgroup(b"x", b"g", b"bob", b">", 100, 4)  # region 2's own PEL
    mesh[1].xnack(b"x", b"g", [(2, 1)], lambda count: MAX_COUNT)  # FATAL
    # region 3 has nothing pending: CLAIM claims nothing there
    assert mesh[3].claim_idle(b"x", b"g", b"c", 0, 500) == []
    # region 1: the NACK zone first, then by delivery time; region 2's entries are not its own
    claimed = mesh[1].claim_idle(b"x", b"g", b"c", 50, 500)
    assert [(sid, count) for sid, _, _, count in claimed] == [((2, 1), MAX_COUNT), ((1, 1), 1)]
    assert [sid for sid, _, _ in mesh[1].xpending(b"x", b"g")] == [(1, 1), (2, 1)]
    assert {owner for _, owner, _ in mesh[1].xpending(b"x", b"g")} == {b"c"}
    assert {owner for _, owner, _ in mesh[2].xpending(b"x", b"g")} == {b"bob"}
    # not idle enough: nothing (entries just claimed at 500)
    assert mesh[1].claim_idle(b"x", b"g", b"d", 50, 520) == []
    assert mesh[1].next_claimable_ms(b"x", b"g", 50, 520) == 30
    mesh.check()


def test_xnack_force_creates_an_unowned_entry_and_delconsumer_keeps_it() -> None:
    mesh = stream_of(Mesh(3))
    assert mesh[2].xnack(b"x", b"g", [(4, 1), (9, 9)], lambda count: count, force=True) == 1
    mesh[2].xgroup_createconsumer(b"x", b"g", b"c")
    assert mesh[2].xpending(b"x", b"g") == [((4, 1), b"", 0)]
    got = mesh[2].claim_idle(b"x", b"g", b"c", 1_000_000, 5)
    assert [sid for sid, _, _, _ in got] == [(4, 1)]
    assert mesh[1].xpending(b"x", b"g") == [] and mesh[1].outbox == []
    mesh.check()
