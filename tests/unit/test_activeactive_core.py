"""The parts of the active-active core (issue 18): the inbox's exactly-once causal delivery and
resume points, the effect line form, the ID modes and their errors, delete-wins and the ack
prefix's guard against a later incarnation of a group."""

from __future__ import annotations

import pytest

from headwater.activeactive.envelope import (
    BAD_EFFECT,
    AckPrefix,
    Add,
    Cut,
    Delete,
    Effect,
    GroupCreate,
    GroupDestroy,
    IdmpConfig,
    Move,
    Remove,
    Select,
    SetFloor,
    from_line,
)
from headwater.activeactive.idmode import (
    FULL_ID_IN_STRICT,
    ID_TOO_SMALL,
    IdRequest,
    next_id,
    parse_mode,
    region_seq_after,
)
from headwater.activeactive.inbox import Inbox
from headwater.activeactive.region import Region
from headwater.errors import InvariantViolation, ReplyError
from headwater.stream.ids import MAX_ID, MIN_ID, UINT64_MAX
from tests.support.mesh import Mesh


def effect(origin: int, seq: int, **seen: int) -> Effect:
    vector = {1: 0, 2: 0, 3: 0, origin: seq}
    vector.update({int(k[1:]): v for k, v in seen.items()})
    return Effect(origin, seq, tuple(sorted(vector.items())), (SetFloor(b"k", (seq, origin)),))


# -- the inbox ----------------------------------------------------------------------------------


def test_inbox_applies_in_per_origin_order_buffering_early_ones() -> None:
    inbox = Inbox(3, [1, 2, 3])
    assert inbox.offer(effect(1, 2)) == []
    assert inbox.offer(effect(1, 3)) == []
    assert inbox.waiting_count() == 2
    assert [e.seq for e in inbox.offer(effect(1, 1))] == [1, 2, 3]
    assert inbox.resume_point(1) == 4
    assert inbox.waiting_count() == 0
    inbox.check_invariants()


def test_inbox_drops_duplicates_and_own_effects() -> None:
    inbox = Inbox(3, [1, 2, 3])
    assert len(inbox.offer(effect(1, 1))) == 1
    assert inbox.offer(effect(1, 1)) == []  # applied already
    assert inbox.offer(effect(1, 3)) == []
    assert inbox.offer(effect(1, 3)) == []  # waiting already
    assert inbox.waiting_count() == 1
    assert inbox.offer(effect(3, 1)) == []  # own effect echoed back
    assert inbox.applied == {1: 1, 2: 0, 3: 0}


def test_inbox_waits_for_what_the_sender_had_seen() -> None:
    inbox = Inbox(3, [1, 2, 3])
    assert inbox.offer(effect(1, 1, r2=2)) == []  # region 1 had seen two of region 2's
    assert inbox.offer(effect(2, 1)) == [effect(2, 1)]
    released = inbox.offer(effect(2, 2))
    assert [(e.origin, e.seq) for e in released] == [(2, 2), (1, 1)]
    inbox.check_invariants()


def test_inbox_invariants_catch_a_ready_effect_left_waiting() -> None:
    inbox = Inbox(3, [1, 2, 3])
    inbox.waiting[1][1] = effect(1, 1)
    with pytest.raises(InvariantViolation, match="ready effect"):
        inbox.check_invariants()


def test_resume_after_a_broken_link_sends_nothing_twice() -> None:
    mesh = Mesh(3)
    for n in range(5):
        mesh[1].xadd(b"k", b"*", [b"n", b"%d" % n], 100 + n)
    mesh.collect()
    for _ in range(2):
        mesh.deliver_one((1, 2))
    assert mesh[2].inbox.resume_point(1) == 3
    # the link breaks: region 1 resends from the point region 2 asks for
    sent = mesh.queues[(1, 2)]
    mesh.queues[(1, 2)] = [e for e in sent if e.seq >= mesh[2].inbox.resume_point(1)]
    mesh.sync()
    assert mesh[2].xlen(b"k") == 5
    assert mesh.converged()


# -- the line form ------------------------------------------------------------------------------


def test_every_op_survives_its_line_form() -> None:
    points = ((1, (5, 1)), (2, (7, 2)))
    ops = (
        Add(b"k", (5, 1), (b"f", b"v", b"g", b"")),
        Remove(b"k", points),
        Remove(b"k", points, delref=True),
        Cut(b"k", points),
        Cut(b"k", points, kept=((1, (4, 1)),)),
        Cut(b"k", points, delref=True),
        Delete(b"k", ()),
        Move(b"a", b"b", points, (), ((1, (((5, 1), (b"f", b"v")),)), (2, ()))),
        SetFloor(b"k", MAX_ID),
        SetFloor(b"k", (5, 0), -3, (4, 1)),
        SetFloor(b"k", (5, 0), None, (4, 1)),
        IdmpConfig(b"k", 5, 0),
        Select(3),
        GroupCreate(b"k", b"g", points),
        GroupDestroy(b"k", b"g"),
        AckPrefix(b"k", b"g", points),
    )
    original = Effect(2, 9, ((1, 3), (2, 9), (3, 0)), ops)
    assert from_line(original.to_line()) == original


def test_effects_and_ops_are_values() -> None:
    """Equal by their fields (the model tests and the inbox's tests compare them), hashable,
    shown with them; never equal to another op with the same fields, nor to a tuple."""
    add = Add(b"k", (5, 1), (b"f", b"v"))
    same = Add(b"k", (5, 1), (b"f", b"v"))
    assert add == same and hash(add) == hash(same)
    assert not add != same  # noqa: SIM202 (__ne__ is its own method)
    assert add != Add(b"k", (5, 1), (b"f", b"w"))
    assert Delete(b"k", ()) != Cut(b"k", ())  # same fields, another op
    assert add != (b"k", (5, 1), (b"f", b"v"))
    assert repr(add) == "Add(b'k', (5, 1), (b'f', b'v'))"
    made = Effect(1, 2, ((1, 2),), (add,))
    assert made == Effect(1, 2, ((1, 2),), (same,)) and len({made, from_line(made.to_line())}) == 1
    assert made != Effect(1, 3, ((1, 3),), (add,))
    assert repr(made) == "Effect(1, 2, ((1, 2),), (Add(b'k', (5, 1), (b'f', b'v')),))"


@pytest.mark.parametrize(
    "line",
    [
        [b"SET", b"k", b"v"],
        [b"AAEFFECT", b"1"],
        [b"AAEFFECT", b"1", b"1", b"0", b"1", b"NOPE", b"k"],
        [b"AAEFFECT", b"1", b"1", b"0", b"1", b"SETFLOOR", b"k", b"x-y"],
        [b"AAEFFECT", b"1", b"1", b"0", b"0", b"extra"],
        [b"AAEFFECT", b"-1", b"1", b"0", b"0"],
    ],
)
def test_a_malformed_line_is_refused(line: list[bytes]) -> None:
    with pytest.raises(ReplyError) as raised:
        from_line(line)
    assert raised.value is BAD_EFFECT or "Invalid stream ID" in str(raised.value)


# -- ID modes -----------------------------------------------------------------------------------


def test_strict_sequences_are_the_regions_class() -> None:
    assert region_seq_after(1, 16, None) == 1
    assert region_seq_after(2, 16, 1) == 2
    assert region_seq_after(2, 16, 2) == 18
    assert region_seq_after(16, 16, None) == 16
    assert region_seq_after(16, 16, 16) == 32
    assert region_seq_after(3, 16, 100) == 115
    assert region_seq_after(3, 16, UINT64_MAX - 2) is None


def test_strict_mode_in_one_millisecond_never_collides() -> None:
    made = set()
    regions = [Region(r, [1, 2, 3]) for r in (1, 2, 3)]
    for region in regions:
        for _ in range(20):
            made.add(region.xadd(b"k", b"*", [b"f", b"v"], 5))
    assert len(made) == 60
    assert all(ms == 5 for ms, _ in made)


def test_strict_mode_errors() -> None:
    region = Region(2, [1, 2, 3])
    with pytest.raises(ReplyError) as raised:
        region.xadd(b"k", b"10-5", [b"f", b"v"], 0)
    assert raised.value is FULL_ID_IN_STRICT
    assert "active-active-id-mode strict" in str(raised.value)
    assert region.xadd(b"k", b"10", [b"f", b"v"], 0) == (10, 2)
    assert region.xadd(b"k", b"10-*", [b"f", b"v"], 0) == (10, 18)
    with pytest.raises(ReplyError) as raised:
        region.xadd(b"k", b"9", [b"f", b"v"], 0)
    assert raised.value is ID_TOO_SMALL
    assert region.xadd(b"k", b"*", [b"f", b"v"], 3) == (10, 34)  # the clock went back


def test_semi_strict_and_liberal_rules() -> None:
    semi = Region(1, [1, 2], b"semi-strict")
    assert semi.xadd(b"k", b"10-5", [b"f", b"v"], 0) == (10, 5)
    assert semi.xadd(b"k", b"10", [b"f", b"v"], 0) == (10, 17)
    with pytest.raises(ReplyError, match="equal or smaller"):
        semi.xadd(b"k", b"10-17", [b"f", b"v"], 0)
    liberal = Region(1, [1, 2], b"liberal")
    assert liberal.xadd(b"k", b"10", [b"f", b"v"], 0) == (10, 0)
    assert liberal.xadd(b"k", b"*", [b"f", b"v"], 0) == (10, 1)
    with pytest.raises(ReplyError, match="greater than 0-0"):
        Region(1, [1], b"liberal").xadd(b"k", b"0-0", [b"f", b"v"], 0)


def test_liberal_checks_only_the_regions_own_last_id() -> None:
    request = IdRequest.parse(b"5-0")
    assert next_id(b"liberal", 1, 16, request, (9, 0), (4, 0), 0) == (5, 0)
    with pytest.raises(ReplyError):
        next_id(b"liberal", 1, 16, request, (9, 0), (5, 0), 0)


def test_bad_mode_and_region() -> None:
    with pytest.raises(ReplyError, match="strict, semi-strict, liberal"):
        parse_mode(b"loose")
    assert parse_mode(b"SEMI-STRICT") == b"semi-strict"
    with pytest.raises(ReplyError, match="between 1 and 16"):
        Region(17, [1])
    with pytest.raises(ReplyError, match="wrong number of arguments"):
        Region(1, [1]).xadd(b"k", b"*", [b"f"], 0)


# -- groups and acks ----------------------------------------------------------------------------


def test_an_ack_never_reaches_a_later_incarnation_of_the_group() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"1", [b"f", b"v"], 0)
    mesh[1].xadd(b"x", b"2", [b"f", b"v"], 0)
    mesh[1].xgroup_create(b"x", b"g", b"0")
    mesh.sync()
    # region 3 reads and acknowledges everything while region 2 re-creates the group
    assert len(mesh[3].xreadgroup(b"x", b"g", b"c", b">", 0)) == 2
    mesh[3].xack(b"x", b"g", [(1, 1), (2, 1)])
    mesh[2].xgroup_destroy(b"x", b"g")
    mesh[2].xgroup_create(b"x", b"g", b"0")
    mesh.sync()
    # the re-created group has delivered nothing yet: the old ack must not skip its entries
    assert [sid for sid, _ in mesh[1].xreadgroup(b"x", b"g", b"c", b">", 0)] == [(1, 1), (2, 1)]
    assert mesh.converged()


def test_xdel_and_xtrim_name_only_what_the_sender_saw() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"10", [b"f", b"v"], 0)
    mesh[1].xadd(b"x", b"20", [b"f", b"v"], 0)
    mesh.sync()
    assert mesh[2].xadd(b"x", b"*", [b"f", b"v"], 0) == (20, 2)  # concurrent with the trim
    assert mesh[1].xtrim(b"x", maxlen=0) == 2
    mesh.sync()
    assert [sid for sid, _ in mesh[3].xrange(b"x", MIN_ID, MAX_ID)] == [(20, 2)]
    assert mesh.converged()


# -- the log seam -------------------------------------------------------------------------------


def test_a_region_rebuilt_from_its_log_resumes_without_gaps_or_duplicates() -> None:
    mesh = Mesh(3)
    log: list[Effect] = []
    mesh[2].sinks.append(log.append)
    mesh[1].xadd(b"x", b"*", [b"f", b"1"], 100)
    mesh[2].xadd(b"x", b"*", [b"f", b"2"], 100)
    mesh.sync()
    mesh[2].xgroup_create(b"x", b"g", b"0")
    mesh[3].delete(b"x")
    mesh.sync(2, 3)
    mesh[1].xadd(b"x", b"*", [b"f", b"3"], 101)  # region 2 misses it: it "crashes" now
    mesh.collect()
    pending_for_2 = mesh.queues[(1, 2)]
    assert [(e.origin, e.seq) for e in log] == [(2, 1), (1, 1), (2, 2), (3, 1)]
    restarted = Region(2, [1, 2, 3])
    for each in (from_line(e.to_line()) for e in log):
        restarted.replay(each)
    assert restarted.dump() == mesh[2].dump()
    assert restarted.inbox.resume_point(1) == 2
    mesh.regions[2] = restarted
    # the peers resend from the resume points (plus a stale duplicate): nothing twice
    mesh.queues[(1, 2)] = [e for e in log if e.origin == 1] + pending_for_2
    mesh.sync()
    assert restarted.xadd(b"x", b"*", [b"f", b"4"], 102) == (102, 2)
    assert restarted.outbox[-1].seq == 3
    mesh.sync()
    assert mesh.converged()
    mesh.check()


def test_a_damaged_log_is_refused() -> None:
    region = Region(1, [1, 2])
    with pytest.raises(InvariantViolation, match="after 2:0"):
        region.replay(effect(2, 2))


# -- regressions the property test found --------------------------------------------------------


def test_rename_concurrent_with_del_of_its_source_converges() -> None:
    """RENAME carries its entries by value: a DEL of the source applied first (region 1) or
    second (region 2) leaves the same copy."""
    mesh = Mesh(3, b"semi-strict")
    mesh[1].xadd(b"a", b"*", [b"f", b"10"], 10)
    mesh.sync(1, 2)
    mesh[1].delete(b"a")
    mesh[2].rename(b"a", b"b")
    mesh.sync()
    for region in (1, 2, 3):
        assert not mesh[region].exists(b"a")
        assert [sid for sid, _ in mesh[region].xrange(b"b", MIN_ID, MAX_ID)] == [(10, 1)]
    assert mesh.converged()


def test_concurrent_renames_keep_both_copies_in_sub_logs_of_their_own() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"a", b"*", [b"f", b"v"], 10)
    mesh.sync()
    mesh[1].rename(b"a", b"b")
    mesh[2].rename(b"a", b"b")
    mesh.sync()
    assert [sid for sid, _ in mesh[3].xrange(b"b", MIN_ID, MAX_ID)] == [(10, 1), (10, 1)]
    assert mesh.converged()
    mesh.check()


def test_xdel_of_a_duplicated_id_removes_every_copy_the_sender_saw() -> None:
    mesh = Mesh(3, b"liberal")
    mesh[1].xadd(b"x", b"5-0", [b"f", b"1"], 0)
    mesh[2].xadd(b"x", b"5-0", [b"f", b"2"], 0)
    mesh.sync()
    assert mesh[3].xdel(b"x", [(5, 0)]) == 2
    mesh.sync()
    assert not mesh[1].exists(b"x")
    assert mesh.converged()


def test_group_created_at_dollar_still_delivers_a_concurrent_late_entry() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"100", [b"f", b"old"], 0)
    mesh.sync()
    mesh[1].xadd(b"x", b"200", [b"f", b"new"], 0)
    mesh[1].xgroup_create(b"x", b"g", b"$")  # after 200-1 in sub-log 1
    mesh[2].xadd(b"x", b"150", [b"f", b"late"], 0)  # (150, 2): region 1 had not seen it
    mesh.sync()
    for region in (1, 2, 3):
        got = mesh[region].xreadgroup(b"x", b"g", b"c", b">", 0)
        assert [sid for sid, _ in got] == [(150, 2)]


def test_setid_and_consumers_stay_local() -> None:
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"100", [b"f", b"v"], 0)
    mesh[1].xgroup_create(b"x", b"g", b"$")
    mesh.sync()
    mesh[1].xgroup_setid(b"x", b"g", b"0")
    assert mesh[1].xgroup_createconsumer(b"x", b"g", b"alice") == 1
    assert mesh[1].outbox == []
    assert [sid for sid, _ in mesh[1].xreadgroup(b"x", b"g", b"alice", b">", 0)] == [(100, 1)]
    assert mesh[2].xreadgroup(b"x", b"g", b"bob", b">", 0) == []
    assert mesh[2].xinfo_consumers(b"x", b"g") == [b"bob"]
    with pytest.raises(ReplyError, match="NOGROUP"):
        mesh[2].xreadgroup(b"x", b"nope", b"bob", b">", 0)


def test_merged_reads_agree_with_a_sorted_reference() -> None:
    mesh = Mesh(3, b"liberal")
    for n in range(30):
        region = 1 + n % 3 if n < 20 else 1  # IDs 1-0… in every region, duplicated
        mesh[region].xadd(b"x", b"%d-0" % (n // 3 + 1 if n < 20 else n), [b"n", b"%d" % n], 0)
    mesh.sync()
    record = mesh[3].streams[b"x"]
    reference = sorted(
        (sid, r, p) for r, s in record.subs.items() for sid, p in s.range(MIN_ID, MAX_ID)
    )
    assert record.range(MIN_ID, MAX_ID) == reference
    for count in (None, 1, 4, 100):
        for reverse in (False, True):
            want = list(reversed(reference)) if reverse else reference
            want = want if count is None else want[:count]
            assert record.entries(MIN_ID, MAX_ID, count, reverse) == [(s, p) for s, _, p in want]
    assert mesh[3].xrevrange(b"x", (5, 0), (3, 0)) == [
        (s, p) for s, _, p in reversed(reference) if (3, 0) <= s <= (5, 0)
    ]
    assert record.entries(MIN_ID, MAX_ID, 0) == []


def test_streams_of_other_databases_converge_apart() -> None:
    """A key names one stream per database; an effect's ``Select`` ops say which (issue 18)."""
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"100", [b"db", b"0"], 0)
    mesh[2].select(2)
    mesh[2].xadd(b"x", b"200", [b"db", b"2"], 0)
    assert mesh[2].outbox[0].ops[0] == Select(2)
    mesh.sync()
    assert mesh[3].xlen(b"x") == 1
    mesh[3].select(2)
    assert [sid for sid, _ in mesh[3].xrange(b"x", MIN_ID, MAX_ID)] == [(200, 2)]
    mesh[3].delete(b"x")  # database 2's x only
    mesh[1].select(2)
    mesh[1].xadd(b"x", b"300", [b"db", b"2"], 0)  # concurrent: survives
    mesh.sync()
    for region in (1, 2, 3):
        mesh[region].select(0)
        assert mesh[region].xlen(b"x") == 1
        mesh[region].select(2)
        assert [sid for sid, _ in mesh[region].xrange(b"x", MIN_ID, MAX_ID)] == [(300, 1)]
    mesh[2].flushall()
    mesh.sync()
    assert mesh.converged() and mesh[1].dump().count("stream") == 0
    mesh.check()


def test_an_entry_of_a_renamed_stream_can_be_acknowledged() -> None:
    """Its sub-log is a moved one (numbered past 2**64): XACK and a history read find it."""
    mesh = Mesh(3)
    mesh[1].xadd(b"x", b"100", [b"f", b"v"], 0)
    mesh[1].rename(b"x", b"y")
    mesh[1].xgroup_create(b"y", b"g", b"0")
    assert [sid for sid, _ in mesh[1].xreadgroup(b"y", b"g", b"c", b">", 0)] == [(100, 1)]
    assert mesh[1].xreadgroup(b"y", b"g", b"c", b"100-1", 0) == []  # (after 100-1: none)
    assert mesh[1].xack(b"y", b"g", [(100, 1)]) == 1
    assert mesh[1].xpending(b"y", b"g") == []
    mesh.check()
