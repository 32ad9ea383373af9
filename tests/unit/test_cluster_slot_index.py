"""The slot index against the keyspace it follows: after any run of SET, DEL, RENAME,
FLUSHDB and expiry on database 0, each slot's keys are exactly the keys of that slot, newest
first (hypothesis); a load that writes around it is caught and rebuilt."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from headwater.cluster.slot_index import SlotIndex
from headwater.cluster.slots import key_slot
from headwater.commands.cluster import slot_index
from tests.unit.conftest import Harness

# a few keys sharing slots (hash tags) and a few of their own
KEYS = [b"{a}1", b"{a}2", b"{a}3", b"{b}1", b"x", b"y", b"zz"]
ops = st.lists(
    st.tuples(
        st.sampled_from(["set", "del", "rename", "flush", "pexpire"]),
        st.sampled_from(KEYS),
        st.sampled_from(KEYS),
    ),
    max_size=40,
)


@given(ops)
def test_the_index_follows_the_keyspace(steps: list[tuple[str, bytes, bytes]]) -> None:
    h = Harness()
    c = h.client()
    db = h.engine.keyspace.dbs[0]
    db.slots = SlotIndex()
    for op, key, other in steps:
        if op == "set":
            h.call(c, "SET", key, "v")
        elif op == "del":
            h.call(c, "DEL", key)
        elif op == "rename":
            h.call(c, "RENAME", key, other)
        elif op == "flush":
            h.call(c, "FLUSHDB")
        else:
            h.call(c, "PEXPIRE", key, "1")
        index = db.slots
        assert index.size == len(db.data)
        for slot in {key_slot(k) for k in KEYS}:
            expected = [k for k in reversed(db.data) if key_slot(k) == slot]
            assert index.newest(slot, 100) == expected
            assert index.count(slot) == len(expected)


def test_writes_around_the_index_are_caught() -> None:
    h = Harness()
    c = h.client()
    db = h.engine.keyspace.dbs[0]
    db.slots = SlotIndex()
    h.call(c, "SET", "x", "1")
    db.data[b"{x}loaded"] = b"v"  # (what a snapshot's load does)
    index = slot_index(h.engine)
    assert index.count(key_slot(b"x")) == 2
    assert index.newest(key_slot(b"x"), 1) == [b"{x}loaded"]
