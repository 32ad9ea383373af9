"""Issue 18, step 4: a region's AOF (AAEFFECT and AALOCAL lines) and snapshot bring back the
same region: streams, sub-logs, groups, the vector, and the local consumer-group state."""

from __future__ import annotations

from pathlib import Path

import pytest

from headwater.activeactive.region import Region
from headwater.activeactive.rstream import RegionStream
from headwater.config import Config
from headwater.engine.replay import FailedCommand, Replayer
from headwater.persistence.rewrite import write_base
from headwater.persistence.snapshot import (
    SnapshotError,
    check_snapshot,
    load_snapshot,
    write_snapshot,
)
from tests.unit.conftest import Harness

#: what a restart must bring back, and what replies show it
READS = [
    ("AADUMP",),
    ("XINFO", "STREAM", "s"),
    ("XINFO", "GROUPS", "s"),
    ("XINFO", "CONSUMERS", "s", "g"),
    ("XPENDING", "s", "g", "-", "+", "100"),
    ("XPENDING", "s", "g"),
    ("XRANGE", "s", "-", "+"),
    ("KEYS", "*"),
]


def region_harness(mode: str = "strict", peers: bool = True) -> Harness:
    """Region 3 (with a peer configured: it keeps its own effects for it; no server, so no
    link is made)."""
    config = Config()
    config.load_value("region-id", ["3"])
    config.load_value("active-active-id-mode", [mode])
    if peers:
        config.load_value("peers", ["127.0.0.1:7999"])
    return Harness(config=config)


def local_state(region: Region) -> str:
    """Everything local to the region's groups, in one text (besides ``Region.dump``)."""
    lines = [region.dump()]
    for db, streams in sorted(region.dbs.items()):
        lines.append(f"db {db}")
        for key in sorted(streams):
            lines += _groups(key, streams[key])
    return "\n".join(lines)


def _groups(key: bytes, record: RegionStream) -> list[str]:
    lines = []
    if record.idmp is not None:
        lines.append(f"{key!r} idmp={sorted(record.idmp.producers)} added={record.idmp.added}")
    if True:
        for name, g in sorted(record.groups.items()):
            pel = {tag: (p.consumer, p.delivery_ms, p.count) for tag, p in sorted(g.pel.items())}
            lines.append(
                f"{key!r} {name!r} last={g.last_id} read={g.entries_read} cursors="
                f"{sorted(g.cursors.items())} times={sorted(g.times.items())} pel={pel} "
                f"consumers={sorted(g.consumers.items())} nacked={list(g.nacked)}"
            )
    return lines


def workload(h: Harness) -> None:
    a, b = h.client(), h.client()
    for n in range(30):
        h.call(a, "XADD", "s", "*", "n", n)
        h.clock.advance(1)
    h.call(a, "XADD", "s", "MAXLEN", "25", "*", "n", "trim")
    h.call(a, "XGROUP", "CREATE", "s", "g", "0")
    h.call(a, "XGROUP", "CREATE", "s", "g2", "$")
    h.call(a, "XREADGROUP", "GROUP", "g", "alice", "COUNT", "5", "STREAMS", "s", ">")
    h.clock.advance(100)
    h.call(b, "XREADGROUP", "GROUP", "g", "bob", "COUNT", "7", "STREAMS", "s", ">")
    h.call(b, "XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", "0")
    first = h.call(a, "XRANGE", "s", "-", "+", "COUNT", "3")
    h.call(a, "XACK", "s", "g", first[0][0], first[2][0])
    h.call(a, "XCLAIM", "s", "g", "carol", "50", first[1][0])
    h.call(a, "XAUTOCLAIM", "s", "g", "dave", "0", "0", "COUNT", "2")
    h.call(a, "XGROUP", "CREATECONSUMER", "s", "g", "erin")
    h.call(a, "XGROUP", "DELCONSUMER", "s", "g", "bob")
    h.call(a, "XREADGROUP", "GROUP", "g", "frank", "NOACK", "COUNT", "2", "STREAMS", "s", ">")
    h.call(a, "XDEL", "s", first[1][0])
    h.call(a, "XGROUP", "SETID", "g2", "x", "0")  # an error: logs nothing
    h.call(a, "XADD", "gone", "*", "a", "1")
    h.call(a, "DEL", "gone")
    h.call(a, "XADD", "moved", "*", "a", "1")
    h.call(a, "RENAME", "moved", "there")
    h.call(a, "XSETID", "there", "99999999999999-0")
    h.call(a, "SET", "plain", "value")
    h.call(a, "XADD", "s", "IDMP", "api", "ride-1", "*", "fare", "1")
    h.call(a, "XADD", "s", "IDMPAUTO", "api", "*", "fare", "2")
    h.call(a, "XADD", "s", "IDMP", "api", "ride-1", "*", "fare", "1")  # a retry
    # reference strategies (docs/design/active-active.md): XDELEX, XACKDEL, XTRIM ACKED / DELREF
    pend = h.call(a, "XPENDING", "s", "g", "-", "+", "10")
    h.call(a, "XDELEX", "s", "DELREF", "IDS", "1", pend[0][0])
    h.call(a, "XACKDEL", "s", "g", "ACKED", "IDS", "2", pend[1][0], pend[2][0])
    h.call(a, "XTRIM", "s", "MAXLEN", "=", "12", "ACKED")
    h.call(a, "XTRIM", "s", "MAXLEN", "=", "10", "DELREF")
    # XNACK (the NACK zone, in its order), XREADGROUP CLAIM / MAXCOUNT / MAXSIZE
    h.call(a, "XREADGROUP", "GROUP", "g", "ivy", "COUNT", "4", "STREAMS", "s", ">")
    pend = h.call(a, "XPENDING", "s", "g", "-", "+", "10")
    h.call(a, "XNACK", "s", "g", "FAIL", "IDS", "1", pend[-1][0])
    h.call(a, "XNACK", "s", "g", "FATAL", "IDS", "1", pend[0][0])
    h.call(a, "XNACK", "s", "g", "SILENT", "IDS", "1", pend[1][0], "RETRYCOUNT", "4")
    h.clock.advance(50)
    h.call(a, "XREADGROUP", "GROUP", "g", "gina", "CLAIM", "10", "COUNT", "2", "STREAMS", "s", ">")
    h.call(a, "XREADGROUP", "GROUP", "g", "hal", "MAXCOUNT", "2", "STREAMS", "s", ">")
    h.call(a, "XREADGROUP", "GROUP", "g", "hal", "MAXSIZE", "10", "STREAMS", "s", ">")
    # XSETID's counters and XCFGSET (replicated registers, in the dump)
    h.call(a, "XSETID", "s", "99999999999999-9", "ENTRIESADDED", "500", "MAXDELETEDID", "5-5")
    h.call(a, "XCFGSET", "s", "IDMP-DURATION", "50", "IDMP-MAXSIZE", "7")
    h.call(a, "XADD", "s", "IDMP", "api", "ride-2", "*", "fare", "3")
    # another database: its own streams, effects with a Select op, local lines under SELECT
    d = h.client()
    h.call(d, "SELECT", "5")
    h.call(d, "XADD", "s", "*", "db", "5")
    h.call(d, "XADD", "s5", "*", "db", "5")
    h.call(d, "XGROUP", "CREATE", "s", "g", "0")
    h.call(d, "XREADGROUP", "GROUP", "g", "eve", "STREAMS", "s", ">")
    h.call(d, "XNACK", "s", "g", "FAIL", "IDS", "1", h.call(d, "XRANGE", "s", "-", "+")[0][0])
    h.call(d, "XADD", "s", "IDMP", "api", "ride-9", "*", "fare", "5")
    h.call(d, "XCFGSET", "s5", "IDMP-MAXSIZE", "3")
    h.call(d, "RENAME", "s5", "s6")


def replies(h: Harness) -> list[bytes]:
    c = h.client()
    out = []
    for args in READS:
        h.engine.execute(c, [a.encode() for a in args])
        out.append(h.raw(c))
    return out


def test_replaying_the_aof_brings_back_the_same_region(tmp_path: Path) -> None:
    live = region_harness()
    workload(live)
    path = tmp_path / "appendonly.aof"
    live.write_aof(path)
    assert b"AALOCAL" in path.read_bytes() and b"AAEFFECT" in path.read_bytes()
    restarted = region_harness()
    restarted.clock.now = live.clock.now
    restarted.clock.mono = live.clock.mono
    result = Replayer(restarted.engine).replay(path, truncate_torn=False)
    assert result.commands > 0
    assert live.engine.region is not None and restarted.engine.region is not None
    before, after = live.engine.region.region, restarted.engine.region.region
    assert local_state(after) == local_state(before)
    assert before.streams[b"s"].groups[b"g"].nacked  # (the NACK zone came back too)
    assert "added=3:" in before.dump() and "idmp-maxsize=7" in before.dump()
    after.check_invariants()
    assert replies(restarted) == replies(live)
    # the IDMP map came back: a retry gets the original ID
    retry = ("XADD", "s", "IDMP", "api", "ride-1", "*", "fare", "1")
    assert restarted.call(restarted.client(), *retry) == live.call(live.client(), *retry)
    # the region makes its own sequence on from there
    c = restarted.client()
    restarted.call(c, "XADD", "s", "*", "after", "restart")
    assert after.inbox.applied[3] == before.inbox.applied[3] + 1


def test_aaeffect_replays_refuse_a_gap(tmp_path: Path) -> None:
    live = region_harness()
    c = live.client()
    live.call(c, "XADD", "s", "*", "a", "1")
    live.call(c, "XADD", "s", "*", "a", "2")
    del live.effects[0]  # the first effect lost: the log is damaged
    path = tmp_path / "appendonly.aof"
    live.write_aof(path)
    restarted = region_harness()
    with pytest.raises(FailedCommand, match="after 3:0"):
        Replayer(restarted.engine).replay(path, truncate_torn=False)


def test_a_snapshot_brings_back_the_same_region(tmp_path: Path) -> None:
    live = region_harness()
    workload(live)
    path = tmp_path / "dump.hwsnap"
    write_snapshot(path, live.engine.keyspace.dbs)
    restarted = region_harness()
    restarted.clock.now, restarted.clock.mono = live.clock.now, live.clock.mono
    keys = load_snapshot(path, restarted.engine.keyspace.dbs)
    assert keys == 1  # the plain string; the streams come with the region's record
    assert live.engine.region is not None and restarted.engine.region is not None
    before, after = live.engine.region.region, restarted.engine.region.region
    assert local_state(after) == local_state(before)
    assert after.streams.keys() == before.streams.keys()  # tombstones included
    after.check_invariants()
    assert replies(restarted)[0] == replies(live)[0]  # AADUMP
    retry = ("XADD", "s", "IDMP", "api", "ride-1", "*", "fare", "1")
    assert restarted.call(restarted.client(), *retry) == live.call(live.client(), *retry)
    assert replies(restarted)[2:] == replies(live)[2:]  # (XINFO STREAM: nodes are rebuilt)
    assert check_snapshot(path)[0], check_snapshot(path)[1]
    # the own effects peers may still need come back too (a restarted region serves them)
    live_rk, restarted_rk = live.engine.region, restarted.engine.region
    assert [e.to_line() for e in restarted_rk.own_effects()] == [
        e.to_line() for e in live_rk.own_effects()
    ]
    assert restarted_rk.own_first == live_rk.own_first == 1
    assert live_rk.trim_own(10) == 10 and live_rk.own_first == 11
    write_snapshot(path, live.engine.keyspace.dbs)
    again = region_harness()
    load_snapshot(path, again.engine.keyspace.dbs)
    assert again.engine.region is not None and again.engine.region.own_first == 11
    # a plain server refuses it, and so does another region
    with pytest.raises(SnapshotError, match="same --region-id"):
        load_snapshot(path, Harness().engine.keyspace.dbs)
    other = Config()
    other.load_value("region-id", ["4"])
    with pytest.raises(SnapshotError, match="region 3's"):
        load_snapshot(path, Harness(config=other).engine.keyspace.dbs)


def test_a_snapshot_base_and_the_aof_after_it(tmp_path: Path) -> None:
    """The AOF rewrite's shape: a snapshot base, then the effects made after it."""
    live = region_harness()
    workload(live)
    base = tmp_path / "base.hwsnap"
    write_snapshot(base, live.engine.keyspace.dbs)
    live.effects.clear()
    c = live.client()
    live.call(c, "XADD", "s", "*", "more", "1")
    live.call(c, "XREADGROUP", "GROUP", "g", "zoe", "STREAMS", "s", ">")
    live.call(c, "DEL", "there")
    incr = tmp_path / "incr.aof"
    live.write_aof(incr)
    restarted = region_harness()
    restarted.clock.now, restarted.clock.mono = live.clock.now, live.clock.mono
    load_snapshot(base, restarted.engine.keyspace.dbs)
    Replayer(restarted.engine).replay(incr, truncate_torn=False)
    assert live.engine.region is not None and restarted.engine.region is not None
    assert local_state(restarted.engine.region.region) == local_state(live.engine.region.region)
    assert replies(restarted)[2:] == replies(live)[2:]


def test_a_rewrite_in_command_form_carries_the_region(tmp_path: Path) -> None:
    """``aof-use-rdb-preamble no``: the rewritten base is commands; the region is one
    AARESTORE of its saved state, and what follows it replays on top."""
    live = region_harness()
    workload(live)
    base = tmp_path / "base.aof"
    write_base(base, live.engine.keyspace.dbs)
    assert base.read_bytes().startswith(b"*2\r\n$9\r\nAARESTORE\r\n")
    live.effects.clear()
    c = live.client()
    live.call(c, "XADD", "s", "*", "more", "1")
    incr = tmp_path / "incr.aof"
    live.write_aof(incr)
    restarted = region_harness()
    restarted.clock.now, restarted.clock.mono = live.clock.now, live.clock.mono
    for path in (base, incr):
        Replayer(restarted.engine).replay(path, truncate_torn=False)
    assert live.engine.region is not None and restarted.engine.region is not None
    assert local_state(restarted.engine.region.region) == local_state(live.engine.region.region)
    assert replies(restarted)[2:] == replies(live)[2:]
    assert restarted.call(restarted.client(), "GET", "plain") == b"value"


def vectors_part(region: Region) -> bytes:
    """The tail ``HWAA4`` added to a region's state: each origin's last vector."""
    import struct

    def word(n: int) -> bytes:
        data = b"%d" % n
        return struct.pack("<I", len(data)) + data

    part = word(len(region.inbox.vectors))
    for origin, vector in sorted(region.inbox.vectors.items()):
        part += word(origin) + word(len(vector))
        for r, seq in vector:
            part += word(r) + word(seq)
    return part


def test_a_snapshot_of_the_first_layout_still_loads() -> None:
    """HWAA1 (before the NACK zone, XSETID's counters and XCFGSET's registers) loads as a
    region without them."""
    import struct

    from headwater.activeactive.persist import MAGIC, MAGIC_V1, dump_state, load_state

    live = region_harness()
    c = live.client()
    live.call(c, "XADD", "s", "*", "a", "1")
    assert live.engine.region is not None
    region = live.engine.region.region
    v2 = dump_state(region)

    def word(data: bytes) -> bytes:
        return struct.pack("<I", len(data)) + data

    # (no adjust, floor 0-0, no settings; no other database; and without v4's last vectors)
    extras = word(b"0") + word(b"0-0") + word(b"0") + word(b"0")
    assert v2.startswith(MAGIC) and v2.count(extras) == 1
    v2 = v2[: -len(vectors_part(region))]
    v1 = MAGIC_V1 + v2[len(MAGIC) :].replace(extras, b"")
    restored = Region(3, [])
    load_state(restored, v1)
    assert restored.dump() == region.dump()
