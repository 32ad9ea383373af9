"""Replication IDs, offsets and the PSYNC decision (issue 17): Redis's rules from
masterTryPartialResynchronization and shiftReplicationId."""

from __future__ import annotations

import pytest

from headwater.replication.backlog import Backlog, BacklogError
from headwater.replication.state import NO_REPLID, ReplicationState, valid_replid


def test_backlog_offsets_follow_redis() -> None:
    b = Backlog(8)
    assert (b.offset, b.histlen, b.first_byte_offset) == (0, 0, 1)
    b.feed(b"abcdef")
    assert (b.offset, b.histlen, b.first_byte_offset) == (6, 6, 1)
    b.feed(b"ghij")  # wraps: the two oldest bytes are gone
    assert (b.offset, b.histlen, b.first_byte_offset) == (10, 8, 3)
    assert b.read_from(3) == b"cdefghij"
    assert b.read_from(11) == b""  # nothing missed
    assert not b.covers(2) and not b.covers(12)
    with pytest.raises(ValueError, match="not in the backlog"):
        b.read_from(2)


def test_backlog_feed_larger_than_size_keeps_newest() -> None:
    b = Backlog(4)
    b.feed(b"0123456789")
    assert b.read_from(b.first_byte_offset) == b"6789"
    b.check_invariants()


def test_check_invariants_raises() -> None:
    b = Backlog(4)
    b.histlen = 9
    with pytest.raises(BacklogError):
        b.check_invariants()


def test_ids_are_40_hex() -> None:
    state = ReplicationState(16)
    assert valid_replid(state.replid)
    assert state.replid2 == NO_REPLID and state.second_repl_offset == -1


def test_psync_decision() -> None:
    state = ReplicationState(16)
    state.backlog.feed(b"x" * 20)  # holds offsets 5..20
    assert state.can_continue(state.replid, 21)
    assert state.can_continue(state.replid, 5)
    assert not state.can_continue(state.replid, 4)  # overrun
    assert not state.can_continue(state.replid, 22)  # a replica ahead of us (it lies)
    assert not state.can_continue("f" * 40, 21)  # another history


def test_promotion_keeps_the_old_history_as_replid2() -> None:
    state = ReplicationState(64)
    state.adopt("a" * 40, 100)  # a full sync from a primary at offset 100
    state.backlog.feed(b"y" * 10)  # 101..110
    state.shift_replid()  # REPLICAOF NO ONE
    assert state.replid2 == "a" * 40 and state.second_repl_offset == 111
    assert state.replid != "a" * 40
    state.backlog.feed(b"z" * 5)  # 111..115, new history
    # another replica of the old primary, at 105 or at 110: continues
    assert state.can_continue("a" * 40, 106)
    assert state.can_continue("a" * 40, 111)
    # one that got past where the old history ended here cannot
    assert not state.can_continue("a" * 40, 112)
    assert state.can_continue(state.replid, 116)


def test_a_replica_keeps_expired_keys_for_its_primary() -> None:
    """On a replica an expired key reads as absent but stays until the primary's DEL, the
    cron expires nothing, and the primary's commands (applied while ``loading``) still find
    it (Redis: expireIfNeeded on a replica)."""
    from tests.unit.conftest import Harness

    h = Harness()
    c = h.client()
    h.call(c, "SET", "k", "v", "PX", "100")
    h.engine.keyspace.replica = True
    h.clock.advance(1000)
    assert h.call(c, "GET", "k") is None
    h.engine.cron()
    assert b"k" in c.db.data  # still there: the primary decides
    h.engine.keyspace.loading = True  # the link applying the primary's stream
    assert h.call(c, "GET", "k") == b"v"
    h.engine.keyspace.loading = False
    h.engine.keyspace.replica = False  # promoted: it expires keys itself again
    assert h.call(c, "GET", "k") is None
    assert b"k" not in c.db.data
