"""The compact line of the common effect (issue 18; activeactive/envelope.py): one XADD of
database 0, made when nothing but the origin's own effects was applied since its previous one,
is written ``AAXADD <origin> <seq> <key> <id> <field> <value> …`` on the link and in the AOF;
its vector is the previous one's with the own sequence, filled in by the inbox. Replay, the
links, snapshots and state transfers read it back through the same apply; AOFs written before
it (every effect a long ``AAEFFECT`` line) still replay."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.activeactive.envelope import BAD_EFFECT, RELATIVE, Effect, from_line
from headwater.activeactive.persist import MAGIC, MAGIC_V3, dump_state, load_state
from headwater.activeactive.region import Region
from headwater.engine.replay import Replayer
from headwater.resp.encoder import encode_command
from tests.unit.test_activeactive_durability import (
    local_state,
    region_harness,
    replies,
    vectors_part,
    workload,
)


def _recording(region: Region) -> list[Effect]:
    """Every effect the region applies from now on, as applied, with its vector (an own
    effect that follows the previous one carries none: the region's last own vector)."""
    seen: list[Effect] = []

    def record(effect: Effect) -> None:
        if effect.vector == RELATIVE and effect.origin == region.id:
            vector = region.inbox.last_own_vector()
            effect = Effect(effect.origin, effect.seq, vector, effect.ops, effect.follows)
        seen.append(effect)

    region.sinks.append(record)
    return seen


def _wire(effects: list[Effect]) -> list[Effect]:
    """The effects as a link carries them: their lines, read back."""
    return [from_line(e.to_line()) for e in effects]


def test_the_common_xadd_is_written_as_the_compact_line() -> None:
    r1 = Region(1, [1, 2])
    r1.xadd(b"s", b"*", [b"f", b"v"], 1000)  # the first: no previous vector to follow
    r1.xadd(b"s", b"*", [b"f", b"v", b"g", b"w"], 1001)
    first, second = r1.take_outbox()
    assert first.to_line()[0] == b"AAEFFECT" and not first.follows
    assert second.to_line() == [b"AAXADD", b"1", b"2", b"s", b"1001-1", b"f", b"v", b"g", b"w"]
    read = from_line(second.to_line())
    assert read.vector == RELATIVE and read.ops == second.ops and read.follows
    assert from_line(read.to_line()) == read  # (a snapshot saves own effects as read)


def test_an_effect_after_a_peers_carries_its_vector() -> None:
    r1, r2 = Region(1, [1, 2]), Region(2, [1, 2])
    r2.xadd(b"s", b"*", [b"f", b"v"], 1000)
    r1.xadd(b"s", b"*", [b"f", b"v"], 1001)
    r1.receive(r2.take_outbox()[0])
    r1.xadd(b"s", b"*", [b"f", b"v"], 1002)  # region 2 moved since: the full line
    r1.xadd(b"s", b"*", [b"f", b"v"], 1003)  # nothing but own since: compact
    lines = [e.to_line() for e in r1.take_outbox()]
    assert [line[0] for line in lines] == [b"AAEFFECT", b"AAEFFECT", b"AAXADD"]
    assert lines[1][3:8] == [b"2", b"1", b"2", b"2", b"1"]  # n=2: 1:2 2:1


def test_only_one_add_of_database_0_is_compact() -> None:
    r1 = Region(1, [1])
    for n in range(2):
        r1.xadd(b"s", b"*", [b"f", b"v"], 1000 + n)
    r1.delete(b"s")
    r1.xadd(b"s", b"*", [b"f", b"v"], 1005)  # after a DEL (own): compact again
    r1.select(1)
    r1.xadd(b"s", b"*", [b"f", b"v"], 1006)  # database 1: a Select op before the Add
    names = [e.to_line()[0] for e in r1.take_outbox()]
    assert names == [b"AAEFFECT", b"AAXADD", b"AAEFFECT", b"AAXADD", b"AAEFFECT"]


@pytest.mark.parametrize(
    "line",
    [
        [b"AAXADD", b"1", b"2", b"s", b"5-1", b"f"],  # a field without its value
        [b"AAXADD", b"1", b"2", b"s", b"5-1"],  # no pair
        [b"AAXADD", b"1", b"2", b"s", b"5-1", b"f", b"v", b"g"],
        [b"AAXADD", b"x", b"2", b"s", b"5-1", b"f", b"v"],
        [b"AAXADD", b"1", b"2", b"s", b"five", b"f", b"v"],
    ],
)
def test_a_malformed_compact_line_is_refused(line: list[bytes]) -> None:
    with pytest.raises(type(BAD_EFFECT)):
        from_line(line)


def test_compact_effects_out_of_order_resolve_to_the_effects_made() -> None:
    r1, r2 = Region(1, [1, 2]), Region(2, [1, 2])
    r2.xadd(b"t", b"*", [b"a", b"1"], 900)
    r1.receive(r2.take_outbox()[0])
    made = _recording(r1)
    for n in range(5):
        r1.xadd(b"s", b"*", [b"n", b"%d" % n], 1000 + n)
    sent = r1.take_outbox()
    assert [e.follows for e in sent] == [False, True, True, True, True]
    assert [bool(e.vector) for e in sent] == [True, False, False, False, False]
    got = _recording(r2)
    wired = _wire(sent)
    # the first (full) effect last: the compact ones wait for it, then are read against it
    assert [r2.receive(e) for e in wired[1:]] == [0, 0, 0, 0]
    assert r2.inbox.waiting_count() == 4
    assert r2.receive(wired[0]) == 5
    assert got == made  # the same vectors as made
    assert r2.dump() == r1.dump()
    r2.check_invariants()
    assert [r2.receive(e) for e in wired] == [0] * 5  # duplicates: dropped


def test_a_snapshot_keeps_the_vectors_the_next_compact_line_needs() -> None:
    r1, r2 = Region(1, [1, 2]), Region(2, [1, 2])
    r2.xadd(b"t", b"*", [b"a", b"1"], 900)
    r1.receive(r2.take_outbox()[0])
    r1.xadd(b"s", b"*", [b"n", b"0"], 1000)
    r1.xadd(b"s", b"*", [b"n", b"1"], 1001)
    for effect in _wire(r1.take_outbox()):
        r2.receive(effect)
    restored = Region(2, [])
    load_state(restored, dump_state(r2))
    assert restored.inbox.vectors == r2.inbox.vectors
    r1.xadd(b"s", b"*", [b"n", b"2"], 1002)
    (made,) = r1.take_outbox()
    got = _recording(restored)
    assert restored.receive(from_line(made.to_line())) == 1
    assert [(e.ops, e.vector) for e in got] == [(made.ops, ((1, 3), (2, 1)))]
    assert r1.inbox.last_own_vector() == ((1, 3), (2, 1))
    assert restored.dump() == r1.dump()
    restored.check_invariants()


def test_a_snapshot_of_the_layout_before_still_reads_compact_lines() -> None:
    """HWAA3 saved no last vectors: a compact line after it is read against the applied
    vector (an Add's apply never reads it), and the regions converge."""
    r1, r2 = Region(1, [1, 2]), Region(2, [1, 2])
    r1.xadd(b"s", b"*", [b"n", b"0"], 1000)
    r2.receive(r1.take_outbox()[0])
    state = dump_state(r2)
    tail = vectors_part(r2)
    assert r2.inbox.vectors == {1: ((1, 1), (2, 0))} and state.endswith(tail)
    old = MAGIC_V3 + state[len(MAGIC) : -len(tail)]
    restored = Region(2, [])
    load_state(restored, old)
    assert restored.inbox.vectors == {}
    r1.xadd(b"s", b"*", [b"n", b"1"], 1001)
    (made,) = r1.take_outbox()
    assert made.follows
    assert restored.receive(from_line(made.to_line())) == 1
    assert restored.dump() == r1.dump()
    restored.check_invariants()


def _long_lines(lines: list[list[bytes]], effects: list[Effect]) -> list[list[bytes]]:
    """Each effect line in the long form every effect had before the compact line."""
    effects = list(effects)
    out = []
    for line in lines:
        if line[0] in (b"AAEFFECT", b"AAXADD"):
            e = effects.pop(0)
            assert (e.origin, e.seq) == (int(line[1]), int(line[2]))
            line = Effect(e.origin, e.seq, e.vector, e.ops).to_line()
            assert line[0] == b"AAEFFECT"
        out.append(line)
    assert not effects
    return out


def test_an_aof_of_long_lines_still_replays(tmp_path: Path) -> None:
    live = region_harness()
    assert live.engine.region is not None
    made = _recording(live.engine.region.region)
    workload(live)
    assert any(argv[0] == b"AAXADD" for _, argv in live.effects)
    # the same log as the server wrote it before the compact line
    old = [argv for _, argv in live.effects]
    new = _long_lines(old, made)
    live.effects = [(db, argv) for (db, _), argv in zip(live.effects, new, strict=True)]
    path = tmp_path / "appendonly.aof"
    live.write_aof(path)
    assert b"AAXADD" not in path.read_bytes()
    restarted = region_harness()
    restarted.clock.now, restarted.clock.mono = live.clock.now, live.clock.mono
    Replayer(restarted.engine).replay(path, truncate_torn=False)
    assert restarted.engine.region is not None
    before, after = live.engine.region.region, restarted.engine.region.region
    assert local_state(after) == local_state(before)
    assert after.inbox.vectors == before.inbox.vectors
    assert replies(restarted) == replies(live)
    after.check_invariants()
    # the long lines gave the context: the next XADD is compact
    c = restarted.client()
    restarted.call(c, "XADD", "s", "*", "after", "restart")
    restarted.call(c, "XADD", "s", "*", "after", "restart")
    assert restarted.effect_lines()[-1][0] == b"AAXADD"


def test_an_aof_with_compact_lines_replays(tmp_path: Path) -> None:
    live = region_harness()
    workload(live)
    lines = live.effect_lines()
    compact = [line for line in lines if line[0] == b"AAXADD"]
    assert len(compact) > 25 and all(len(line) == 7 for line in compact[:25])
    path = tmp_path / "appendonly.aof"
    live.write_aof(path)
    restarted = region_harness()
    restarted.clock.now, restarted.clock.mono = live.clock.now, live.clock.mono
    Replayer(restarted.engine).replay(path, truncate_torn=False)
    assert live.engine.region is not None and restarted.engine.region is not None
    before, after = live.engine.region.region, restarted.engine.region.region
    assert local_state(after) == local_state(before)
    assert after.inbox.vectors == before.inbox.vectors
    assert replies(restarted) == replies(live)


def test_aaxadd_is_internal() -> None:
    live = region_harness()
    reply = live.call(live.client(), "AAXADD", "3", "1", "s", "5-3", "f", "v")
    assert "internal" in str(reply)


def test_the_compact_line_is_encoded_as_its_words_would_be() -> None:
    """An own XADD's line is made as a RESP command once (in C where built): the same bytes
    as its words encoded, whatever the numbers' widths and the pairs."""
    from headwater.commands.region_keyspace import _compact_add_pure, compact_add

    big = 2**64 - 1
    cases = [
        (1, 1, b"k", 0, 0, (b"f", b"v")),
        (7, 123456789, b"", big, big, (b"", b"x" * 300)),
        (65535, 10, b"key\r\n", 1700000000000, 9, tuple(b"w%d" % i for i in range(20))),
    ]
    for origin, seq, key, ms, id_seq, pairs in cases:
        words = [b"AAXADD", b"%d" % origin, b"%d" % seq, key, b"%d-%d" % (ms, id_seq), *pairs]
        assert compact_add(origin, seq, key, ms, id_seq, pairs) == encode_command(words)
        assert _compact_add_pure(origin, seq, key, ms, id_seq, pairs) == encode_command(words)


def test_the_c_compact_line_refuses_what_is_not_one() -> None:
    from headwater.commands.region_keyspace import _native_compact_add

    compact_add = _native_compact_add()
    if compact_add is None:
        pytest.skip("the pure build has no C encoder")
    with pytest.raises(OverflowError):
        compact_add(1, 1, b"k", 2**64, 0, (b"f", b"v"))
    with pytest.raises(TypeError):
        compact_add(1, 1, b"k", 1, 0, (b"f", "v"))
