"""Consumer groups in process: CLAIM reads, blocking with CLAIM, the reference strategies
(KEEPREF / DELREF / ACKED) of XTRIM, XADD and XDELEX, and the group structure itself."""

from __future__ import annotations

from typing import Any

import pytest

from headwater.stream.groups import Group, id_key, key_id
from tests.unit.conftest import Harness
from tests.unit.test_activeactive_durability import region_harness


def _setup(h: Harness, c: Any, *ids: str) -> None:
    for sid in ids:
        h.call(c, "XADD", "s", sid, "f", sid)
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")


def test_id_keys_order_like_id_tuples() -> None:
    ids = [(0, 0), (0, 2**64 - 1), (1, 0), (5, 7), (2**64 - 1, 2**64 - 1)]
    keys = [id_key(sid) for sid in ids]
    assert keys == sorted(keys)
    assert [key_id(k) for k in keys] == ids


def test_group_pel_is_the_union_of_consumer_pels_after_moves() -> None:
    group = Group(b"g", (0, 0))
    a, _ = group.consumer(b"a", 0)
    b, _ = group.consumer(b"b", 0)
    group.deliver(a, [id_key((1, 0)), id_key((2, 0))], 10)
    group.transfer(id_key((1, 0)), b, 20, 5)
    group.deliver(b, [id_key((2, 0))], 30)  # redelivered after SETID moved back: new owner
    group.check_invariants()
    assert list(a.pel) == []
    assert list(b.pel) == [id_key((1, 0)), id_key((2, 0))]
    assert group.pel[id_key((2, 0))] == (30, 1, b"b")
    assert group.delete_consumer(b"b") == 2
    assert not group.pel
    group.check_invariants()


def test_xreadgroup_claim_returns_idle_entries_first_with_their_idle_and_count() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0")
    h.call(c, "XREADGROUP", "GROUP", "g", "dead", "COUNT", "1", "STREAMS", "s", ">")
    h.clock.advance(150)
    h.call(c, "XADD", "s", "3-0", "f", "3-0")
    reply = h.call(c, "XREADGROUP", "GROUP", "g", "live", "CLAIM", "100", "STREAMS", "s", ">")
    assert reply == [
        [
            b"s",
            [
                [b"1-0", [b"f", b"1-0"], 150, 1],  # claimed: idle and count before the claim
                [b"2-0", [b"f", b"2-0"], 0, 0],  # new entries: 0, 0
                [b"3-0", [b"f", b"3-0"], 0, 0],
            ],
        ]
    ]
    assert h.call(c, "XPENDING", "s", "g") == [3, b"1-0", b"3-0", [[b"live", b"3"]]]
    assert h.call(c, "XPENDING", "s", "g", "-", "+", "1") == [[b"1-0", b"live", 0, 2]]


def test_xreadgroup_claim_count_bounds_claimed_and_new_together() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0")
    h.call(c, "XREADGROUP", "GROUP", "g", "dead", "COUNT", "2", "STREAMS", "s", ">")
    h.clock.advance(10)
    reply = h.call(
        c, "XREADGROUP", "GROUP", "g", "x", "COUNT", "2", "CLAIM", "5", "STREAMS", "s", ">"
    )
    assert [e[0] for e in reply[0][1]] == [b"1-0", b"2-0"]
    reply = h.call(c, "XREADGROUP", "GROUP", "g", "x", "CLAIM", "5", "STREAMS", "s", ">")
    assert [e[0] for e in reply[0][1]] == [b"3-0"]


def test_blocked_claim_reader_wakes_when_an_entry_becomes_claimable() -> None:
    h = Harness()
    reader, writer = h.client(), h.client()
    _setup(h, writer, "1-0")
    h.call(writer, "XREADGROUP", "GROUP", "g", "dead", "STREAMS", "s", ">")
    args = ["XREADGROUP", "GROUP", "g", "live", "BLOCK", "0", "CLAIM", "100", "STREAMS", "s", ">"]
    assert h.call(reader, *args) is None
    assert reader.gate.blocked is not None
    h.scheduler.advance(60)
    assert reader.gate.blocked is not None
    h.scheduler.advance(40)
    assert reader.gate.blocked is None
    assert h.raw(reader) == (
        b"*1\r\n*2\r\n$1\r\ns\r\n*1\r\n*4\r\n$3\r\n1-0\r\n*2\r\n$1\r\nf\r\n$3\r\n1-0\r\n"
        b":100\r\n:1\r\n"
    )


def test_blocked_claim_reader_without_pending_entries_waits_for_new_ones() -> None:
    h = Harness()
    reader, writer = h.client(), h.client()
    h.call(writer, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
    args = ["XREADGROUP", "GROUP", "g", "live", "BLOCK", "0", "CLAIM", "100", "STREAMS", "s", ">"]
    assert h.call(reader, *args) is None
    h.scheduler.advance(1000)
    assert reader.gate.blocked is not None
    h.call(writer, "XADD", "s", "5-0", "f", "v")
    assert reader.gate.blocked is None
    assert b":0\r\n:0\r\n" in h.raw(reader)


def _pending_ids(h: Harness, c: Any) -> list[bytes]:
    return [row[0] for row in h.call(c, "XPENDING", "s", "g", "-", "+", "100")]


def test_xtrim_keepref_keeps_pel_references_to_trimmed_entries() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0")
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    assert h.call(c, "XTRIM", "s", "MAXLEN", "1") == 2
    assert _pending_ids(h, c) == [b"1-0", b"2-0", b"3-0"]
    reply = h.call(c, "XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", "0")
    assert reply == [[b"s", [[b"1-0", None], [b"2-0", None], [b"3-0", [b"f", b"3-0"]]]]]


def test_xtrim_delref_removes_pel_references_of_every_group() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0")
    h.call(c, "XGROUP", "CREATE", "s", "g2", "0")
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    h.call(c, "XREADGROUP", "GROUP", "g2", "b", "STREAMS", "s", ">")
    assert h.call(c, "XTRIM", "s", "MAXLEN", "1", "DELREF") == 2
    assert _pending_ids(h, c) == [b"3-0"]
    assert h.call(c, "XPENDING", "s", "g2") == [1, b"3-0", b"3-0", [[b"b", b"1"]]]


def test_xtrim_acked_keeps_entries_a_group_still_needs_and_scans_past_them() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0", "4-0", "5-0")
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "COUNT", "4", "STREAMS", "s", ">")
    h.call(c, "XACK", "s", "g", "1-0", "2-0", "4-0")  # 3-0 pending, 5-0 not delivered
    assert h.call(c, "XTRIM", "s", "MAXLEN", "~", "0", "ACKED") == 3
    assert [e[0] for e in h.call(c, "XRANGE", "s", "-", "+")] == [b"3-0", b"5-0"]


def test_xtrim_acked_without_groups_trims_entry_by_entry_even_with_tilde() -> None:
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "stream-node-max-entries", "2")
    for n in range(1, 6):
        h.call(c, "XADD", "s", f"{n}-0", "f", "v")
    assert h.call(c, "XTRIM", "s", "MAXLEN", "~", "2") == 2  # KEEPREF: whole nodes only
    assert h.call(c, "XLEN", "s") == 3
    assert h.call(c, "XTRIM", "s", "MAXLEN", "~", "2", "ACKED") == 1
    assert h.call(c, "XLEN", "s") == 2


def test_xadd_with_acked_trims_only_acknowledged_entries() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0")
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "STREAMS", "s", ">")
    h.call(c, "XACK", "s", "g", "1-0")
    h.call(c, "XADD", "s", "ACKED", "MAXLEN", "1", "3-0", "f", "v")
    # 1-0 acked: gone; 2-0 pending and 3-0 undelivered: kept
    assert [e[0] for e in h.call(c, "XRANGE", "s", "-", "+")] == [b"2-0", b"3-0"]


def test_xdelex_strategies() -> None:
    h = Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0")
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "COUNT", "2", "STREAMS", "s", ">")
    h.call(c, "XACK", "s", "g", "1-0")
    # 1-0 acked, 2-0 pending, 3-0 not delivered; 9-0 does not exist but lies after the
    # group's last delivered ID, so ACKED calls it referenced too (STREAMS-REFERENCE XDELEX)
    reply = h.call(c, "XDELEX", "s", "ACKED", "IDS", "4", "1-0", "2-0", "3-0", "9-0")
    assert reply == [1, 2, 2, 2]
    assert h.call(c, "XDELEX", "s", "IDS", "1", "9-0") == [-1]
    assert h.call(c, "XDELEX", "s", "DELREF", "IDS", "1", "2-0") == [1]
    assert _pending_ids(h, c) == []
    assert h.call(c, "XDELEX", "s", "IDS", "1", "3-0") == [1]  # KEEPREF


@pytest.mark.parametrize("region", [False, True], ids=["plain", "region"])
def test_history_read_redelivers_without_counting_a_change(region: bool) -> None:
    """XREADGROUP of a consumer's pending entries bumps their delivery count but leaves the
    dirty counter alone (Redis 7.2+; 7.0 counted one); new entries count one per read."""
    h = region_harness("liberal") if region else Harness()
    c = h.client()
    _setup(h, c, "1-0", "2-0", "3-0")
    h.call(c, "XGROUP", "CREATECONSUMER", "s", "g", "alice")
    before = h.engine.dirty
    h.call(c, "XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", ">")
    assert h.engine.dirty == before + 1
    history = h.call(c, "XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "s", "0")
    assert [sid for sid, _ in history[0][1]] == [b"1-0", b"2-0"]
    assert h.engine.dirty == before + 1
    assert h.call(c, "XPENDING", "s", "g", "-", "+", "10")[0][3] == 2  # redelivered all the same
