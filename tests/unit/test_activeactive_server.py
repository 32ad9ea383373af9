"""Issue 18, step 2: a server with ``region-id`` serves the stream commands through the
region-aware rows (commands/regions.py). With one region and no peers its replies are
byte-identical to a plain server's, for every command of the overlay; the IDs come from
``active-active-id-mode liberal`` (Redis's rules for one writer) and the clocks are fake, so
both servers see the same times."""

from __future__ import annotations

import pytest

from headwater.activeactive.rstream import RegionStream
from headwater.commands.plain_store import PlainStreams
from headwater.commands.region_store import RegionStreams
from headwater.config import Config
from headwater.resp.encoder import encode_command
from headwater.stream.stream import Stream
from tests.unit.conftest import Harness, decode_all

SEQUENCE: list[tuple[str, ...] | int] = [
    ("XADD", "s", "1-1", "a", "1"),
    ("XADD", "s", "1-2", "b", "2", "c", "3"),
    ("XADD", "s", "*", "d", "4"),
    ("XADD", "s", "5-*", "e", "5"),
    ("XADD", "s", "1-1", "x", "y"),  # too small
    ("XADD", "s", "0-0", "x", "y"),
    ("XADD", "s", "bad", "x", "y"),
    ("XADD", "s", "*", "odd"),
    ("XADD", "s", "NOMKSTREAM", "*", "f", "6"),
    ("XADD", "s", "IDMP", "p1", "i1", "*", "a", "1"),
    ("XADD", "s", "IDMP", "p1", "i1", "*", "a", "1"),
    ("XADD", "s", "IDMPAUTO", "p2", "*", "b", "2"),
    ("XADD", "s", "IDMPAUTO", "p2", "*", "b", "2"),
    ("XADD", "s", "IDMP", "p1", "i2", "9-1", "a", "1"),
    ("XADD", "s", "IDMP", "p1", "", "*", "a", "1"),
    ("XADD", "s", "IDMP", "p1", "i3", "IDMPAUTO", "p1", "*", "a", "1"),
    ("XADD", "nope", "NOMKSTREAM", "*", "f", "6"),
    ("XADD", "s", "MAXLEN", "=", "10", "*", "g", "7"),
    ("XADD", "s", "MAXLEN", "5", "LIMIT", "1", "*", "g", "7"),
    ("XADD", "s", "MAXLEN", "-1", "*", "g", "7"),
    ("SET", "str", "v"),
    ("XADD", "str", "*", "a", "b"),
    ("XLEN", "s"),
    ("XLEN", "nope"),
    ("XLEN", "str"),
    ("XRANGE", "s", "-", "+"),
    ("XRANGE", "s", "-", "+", "COUNT", "2"),
    ("XRANGE", "s", "(1-1", "+", "COUNT", "0"),
    ("XRANGE", "s", "5", "1"),
    ("XRANGE", "s", "x", "+"),
    ("XRANGE", "s", "-", "+", "BOGUS", "1"),
    ("XRANGE", "nope", "-", "+"),
    ("XRANGE", "str", "-", "+"),
    ("XREVRANGE", "s", "+", "-"),
    ("XREVRANGE", "s", "+", "-", "COUNT", "3"),
    ("XREVRANGE", "s", "(5-1", "1-2"),
    ("XREAD", "STREAMS", "s", "0"),
    ("XREAD", "COUNT", "2", "STREAMS", "s", "nope", "1-1", "0"),
    ("XREAD", "STREAMS", "s", "+"),
    ("XREAD", "STREAMS", "s", "$"),
    ("XREAD", "STREAMS", "s"),
    ("XREAD", "STREAMS", "s", ">"),
    ("XREAD", "GROUP", "g", "c", "STREAMS", "s", "0"),
    ("XREAD", "BLOCK", "-1", "STREAMS", "s", "0"),
    ("XDEL", "s", "1-2", "9-9"),
    ("XDEL", "s", "1-2"),
    ("XDEL", "nope", "1-1"),
    ("XDEL", "s", "bad"),
    ("XLEN", "s"),
    ("XTRIM", "s", "MAXLEN", "=", "4"),
    ("XTRIM", "s", "MINID", "2"),
    ("XTRIM", "s", "MINID", "=", "0"),
    ("XTRIM", "s", "LIMIT", "5"),
    ("XTRIM", "s"),
    ("XTRIM", "s", "MAXLEN", "1", "MINID", "1"),
    ("XTRIM", "nope", "MAXLEN", "0"),
    ("XRANGE", "s", "-", "+"),
    ("XSETID", "s", "1-0"),
    ("XSETID", "s", "99999999999999-5"),
    ("XSETID", "nope", "1-1"),
    ("XSETID", "str", "1-1"),
    ("XSETID", "s", "bad"),
    ("XADD", "s", "*", "after", "setid"),
    ("XINFO", "STREAM", "s"),
    ("XINFO", "STREAM", "nope"),
    ("XINFO", "STREAM", "s", "BOGUS"),
    ("XGROUP", "CREATE", "s", "g", "0"),
    ("XGROUP", "CREATE", "s", "g", "0"),
    ("XGROUP", "CREATE", "s", "g2", "$"),
    ("XGROUP", "CREATE", "s", "g3", "bad"),
    ("XGROUP", "CREATE", "nope", "g", "0"),
    ("XGROUP", "CREATE", "new", "g", "$", "MKSTREAM"),
    ("XGROUP", "CREATE", "s", "g4", "0", "ENTRIESREAD", "1"),
    ("XGROUP", "CREATE", "s", "g5", "0", "BOGUS"),
    ("XGROUP", "HELP"),
    ("XGROUP", "NOSUCH"),
    ("XINFO", "GROUPS", "s"),
    ("XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", "s", ">"),
    100,
    ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "bob", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "0"),
    ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "s", "$"),
    ("XREADGROUP", "GROUP", "nog", "alice", "STREAMS", "s", ">"),
    ("XREADGROUP", "GROUP", "g", "alice", "STREAMS", "nope", ">"),
    ("XREADGROUP", "GROUP", "g", "carol", "NOACK", "STREAMS", "new", ">"),
    ("XINFO", "GROUPS", "s"),
    ("XINFO", "CONSUMERS", "s", "g"),
    ("XINFO", "CONSUMERS", "s", "nog"),
    ("XPENDING", "s", "g"),
    ("XPENDING", "s", "g", "-", "+", "10"),
    ("XPENDING", "s", "g", "IDLE", "50", "-", "+", "10"),
    ("XPENDING", "s", "g", "-", "+", "10", "bob"),
    ("XPENDING", "s", "g", "-", "+", "10", "nobody"),
    ("XPENDING", "s", "nog"),
    ("XPENDING", "s", "g", "-", "+"),
    200,
    ("XCLAIM", "s", "g", "carol", "150", "5-0"),
    ("XCLAIM", "s", "g", "carol", "10", "1-1", "JUSTID"),
    ("XCLAIM", "s", "g", "dave", "0", "1-1", "5-1", "RETRYCOUNT", "7", "IDLE", "5"),
    ("XCLAIM", "s", "g", "dave", "0", "1-1", "BOGUS"),
    ("XCLAIM", "s", "nog", "dave", "0", "1-1"),
    ("XPENDING", "s", "g", "-", "+", "10"),
    ("XINFO", "STREAM", "s", "FULL"),
    ("XINFO", "STREAM", "s", "FULL", "COUNT", "2"),
    ("XINFO", "STREAM", "s", "FULL", "COUNT", "0"),
    ("XINFO", "STREAM", "s", "FULL", "COUNT"),
    ("XINFO", "STREAM", "s", "FULL", "BOGUS", "1"),
    ("XAUTOCLAIM", "s", "g", "erin", "0", "0", "COUNT", "1"),
    ("XAUTOCLAIM", "s", "g", "erin", "0", "0", "JUSTID"),
    ("XAUTOCLAIM", "s", "g", "erin", "0", "0", "COUNT", "0"),
    ("XDEL", "s", "5-1"),
    ("XAUTOCLAIM", "s", "g", "frank", "0", "0"),
    ("XACK", "s", "g", "1-1", "1-1", "9-9"),
    ("XACK", "s", "g", "bad"),
    ("XACK", "nope", "g", "1-1"),
    ("XACK", "s", "nog", "1-1"),
    ("XPENDING", "s", "g"),
    ("XGROUP", "SETID", "s", "g", "0"),
    ("XGROUP", "SETID", "s", "g", "$"),
    ("XGROUP", "SETID", "s", "nog", "0"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "zed"),
    ("XGROUP", "CREATECONSUMER", "s", "g", "zed"),
    ("XGROUP", "DELCONSUMER", "s", "g", "erin"),
    ("XGROUP", "DELCONSUMER", "s", "g", "nobody"),
    ("XINFO", "CONSUMERS", "s", "g"),
    ("XINFO", "GROUPS", "s"),
    ("XGROUP", "DESTROY", "s", "g2"),
    ("XGROUP", "DESTROY", "s", "g2"),
    ("XGROUP", "DESTROY", "nope", "g2"),
    ("XINFO", "STREAM", "s"),
    ("EXISTS", "s", "new", "nope"),
    ("TYPE", "s"),
    ("TYPE", "new"),
    ("KEYS", "*"),
    ("DBSIZE",),
    ("SCAN", "0", "TYPE", "stream"),
    ("OBJECT", "ENCODING", "s"),
    ("RENAME", "s", "t"),
    ("RENAME", "nope", "t"),
    ("XRANGE", "t", "-", "+"),
    ("RENAMENX", "t", "new"),
    ("RENAME", "str", "str2"),
    ("DEL", "t", "str2", "nope"),
    ("EXISTS", "t"),
    ("XADD", "u", "1-1", "a", "b"),
    ("UNLINK", "u"),
    ("TYPE", "u"),
    ("XADD", "v", "1-1", "a", "b"),
    ("MULTI",),
    ("XADD", "v", "2-1", "c", "d"),
    ("XLEN", "v"),
    ("EXEC",),
    ("FLUSHDB",),
    ("DBSIZE",),
    ("XLEN", "v"),
    ("KEYS", "*"),
    # KEEPREF / DELREF / ACKED, XDELEX, XACKDEL
    *[("XADD", "w", f"{n}-1", "f", str(n)) for n in range(1, 7)],
    ("XGROUP", "CREATE", "w", "g1", "0"),
    ("XGROUP", "CREATE", "w", "g2", "0"),
    ("XREADGROUP", "GROUP", "g1", "c", "COUNT", "3", "STREAMS", "w", ">"),
    ("XREADGROUP", "GROUP", "g2", "c", "COUNT", "1", "STREAMS", "w", ">"),
    ("XDELEX", "w", "ACKED", "IDS", "3", "1-1", "4-1", "9-9"),
    ("XDELEX", "w", "DELREF", "IDS", "1", "1-1"),
    ("XPENDING", "w", "g1"),
    ("XPENDING", "w", "g2"),
    ("XTRIM", "w", "MAXLEN", "=", "2", "ACKED"),
    ("XACK", "w", "g1", "2-1", "3-1"),
    ("XREADGROUP", "GROUP", "g2", "c", "NOACK", "STREAMS", "w", ">"),
    ("XREADGROUP", "GROUP", "g1", "c", "COUNT", "1", "STREAMS", "w", ">"),
    ("XTRIM", "w", "MAXLEN", "=", "1", "ACKED"),
    ("XRANGE", "w", "-", "+"),
    ("XACKDEL", "w", "g1", "ACKED", "IDS", "2", "4-1", "5-1"),
    ("XACKDEL", "w", "g1", "IDS", "1", "1-1"),
    ("XACKDEL", "w", "g1", "IDS", "2", "1-1"),
    ("XACKDEL", "w", "g1", "FOO", "IDS", "1", "1-1"),
    ("XACKDEL", "w", "nog", "IDS", "1", "bad"),
    ("XACKDEL", "nope", "g", "IDS", "1", "1-1"),
    ("XREADGROUP", "GROUP", "g1", "c", "STREAMS", "w", ">"),
    ("XACKDEL", "w", "g1", "DELREF", "IDS", "1", "5-1"),
    ("XADD", "w", "DELREF", "MAXLEN", "=", "1", "7-1", "x", "y"),
    ("XADD", "w", "ACKED", "KEEPREF", "8-1", "x", "y"),
    ("XTRIM", "w", "MINID", "=", "9", "KEEPREF"),
    ("XTRIM", "w", "MINID", "=", "9", "ACKED", "DELREF"),
    ("XLEN", "w"),
    ("XDELEX", "w", "IDS", "1", "bad"),
    ("XDELEX", "w", "IDS", "0"),
    ("XDELEX", "w", "IDS", "2", "1-1"),
    ("XDELEX", "w", "KEEPREF", "IDS", "1", "1-1", "ACKED"),
    ("XDELEX", "nope", "IDS", "1", "1-1"),
    ("XDELEX", "str", "IDS", "1", "1-1"),
    ("XINFO", "STREAM", "w", "FULL"),
    ("XINFO", "GROUPS", "w"),
    ("SET", "str3", "v"),
    ("XDELEX", "str3", "IDS", "1", "1-1"),
    ("XACKDEL", "str3", "g", "IDS", "1", "1-1"),
    # XNACK, XREADGROUP CLAIM, MAXCOUNT / MAXSIZE (local: consumers and PELs)
    *[("XADD", "y", f"{n}-1", "f", "v" * n) for n in range(1, 9)],
    ("XGROUP", "CREATE", "y", "g", "0"),
    ("XREADGROUP", "GROUP", "g", "a", "COUNT", "3", "STREAMS", "y", ">"),
    100,
    ("XREADGROUP", "GROUP", "g", "b", "COUNT", "2", "STREAMS", "y", ">"),
    ("XNACK", "y", "g", "FAIL", "IDS", "2", "2-1", "9-9"),
    ("XNACK", "y", "g", "SILENT", "IDS", "1", "3-1", "RETRYCOUNT", "5"),
    ("XNACK", "y", "g", "FATAL", "IDS", "1", "6-1", "FORCE"),
    ("XNACK", "y", "g", "BOGUS", "IDS", "1", "1-1"),
    ("XNACK", "y", "nog", "FAIL", "IDS", "1", "1-1"),
    ("XNACK", "y", "g", "FAIL", "IDS", "1", "1-1", "EXTRA"),
    ("XNACK", "y", "g", "FAIL", "IDS", "1", "bad"),
    ("XNACK", "nope", "g", "FAIL", "IDS", "1", "1-1"),
    ("XPENDING", "y", "g"),
    ("XPENDING", "y", "g", "-", "+", "10"),
    ("XPENDING", "y", "g", "IDLE", "50", "-", "+", "10"),
    ("XINFO", "STREAM", "y", "FULL"),
    ("XINFO", "CONSUMERS", "y", "g"),
    ("XREADGROUP", "GROUP", "g", "c", "CLAIM", "50", "COUNT", "4", "STREAMS", "y", ">"),
    10,
    ("XREADGROUP", "GROUP", "g", "c", "CLAIM", "0", "STREAMS", "y", ">"),
    ("XREADGROUP", "GROUP", "g", "c", "CLAIM", "0", "NOACK", "STREAMS", "y", ">"),
    ("XREADGROUP", "GROUP", "g", "c", "CLAIM", "-1", "STREAMS", "y", ">"),
    ("XREAD", "CLAIM", "5", "STREAMS", "y", "0"),
    ("XREADGROUP", "GROUP", "g", "d", "MAXCOUNT", "1", "STREAMS", "y", "0"),
    ("XREADGROUP", "GROUP", "g", "c", "MAXCOUNT", "2", "STREAMS", "y", "0"),
    ("XREADGROUP", "GROUP", "g", "c", "MAXSIZE", "10", "STREAMS", "y", "0"),
    ("XREADGROUP", "GROUP", "g", "c", "MAXCOUNT", "3", "STREAMS", "y", "y", "0", "5"),
    *[("XADD", "y", f"{n}-1", "f", "v" * n) for n in range(9, 14)],
    ("XREADGROUP", "GROUP", "g", "e", "MAXSIZE", "60", "STREAMS", "y", ">"),
    ("XREADGROUP", "GROUP", "g", "e", "COUNT", "5", "MAXCOUNT", "3", "STREAMS", "y", ">"),
    ("XREADGROUP", "GROUP", "g", "e", "COUNT", "1", "MAXCOUNT", "3", "STREAMS", "y", ">"),
    ("XREADGROUP", "GROUP", "g", "e", "MAXCOUNT", "0", "STREAMS", "y", ">"),
    ("XREADGROUP", "GROUP", "g", "f", "CLAIM", "0", "MAXCOUNT", "2", "STREAMS", "y", ">"),
    ("XREADGROUP", "GROUP", "g", "f", "CLAIM", "0", "MAXSIZE", "40", "STREAMS", "y", ">"),
    ("XREAD", "MAXCOUNT", "3", "STREAMS", "y", "0"),
    ("XREAD", "MAXSIZE", "50", "STREAMS", "y", "y", "0", "5"),
    ("XREAD", "MAXCOUNT", "1", "STREAMS", "y", "y", "+", "+"),
    ("XREAD", "MAXCOUNT", "1", "COUNT", "2", "STREAMS", "y", "0"),
    ("XNACK", "y", "g", "FAIL", "IDS", "2", "7-1", "8-1"),
    ("XCLAIM", "y", "g", "z", "1000000", "7-1"),
    ("XAUTOCLAIM", "y", "g", "z", "1000000", "0"),
    ("XNACK", "y", "g", "FAIL", "IDS", "1", "9-1"),
    ("XGROUP", "DELCONSUMER", "y", "g", "f"),
    ("XDEL", "y", "9-1"),
    ("XREADGROUP", "GROUP", "g", "h", "CLAIM", "0", "COUNT", "2", "STREAMS", "y", ">"),
    ("XPENDING", "y", "g", "-", "+", "20"),
    ("XINFO", "STREAM", "y", "FULL"),
    # XSETID ENTRIESADDED / MAXDELETEDID, XCFGSET, XIDMP CFGSET / CFGGET, XIDMPRECORD
    *[("XADD", "z", f"{n}-1", "a", str(n)) for n in range(1, 4)],
    ("XDEL", "z", "2-1"),
    ("XSETID", "z", "5-0", "ENTRIESADDED", "10", "MAXDELETEDID", "4-0"),
    ("XINFO", "STREAM", "z"),
    ("XSETID", "z", "5-0", "ENTRIESADDED", "1"),
    ("XSETID", "z", "6-0", "MAXDELETEDID", "7-0"),
    ("XSETID", "z", "6-0", "ENTRIESADDED", "-1"),
    ("XSETID", "z", "6-0", "ENTRIESADDED"),
    ("XSETID", "z", "6-0", "BOGUS", "1"),
    ("XSETID", "z", "3-1", "MAXDELETEDID", "3-0"),
    ("XSETID", "nope", "6-0", "ENTRIESADDED", "10"),
    ("XSETID", "str3", "6-0", "ENTRIESADDED", "10"),
    ("XSETID", "z", "6-0", "ENTRIESADDED", "10"),
    ("XSETID", "z", "6-0", "ENTRIESADDED", "12", "MAXDELETEDID", "5-5"),
    ("XINFO", "STREAM", "z"),
    ("XCFGSET", "z", "IDMP-DURATION", "5"),
    ("XCFGSET", "z", "IDMP-DURATION", "5"),
    ("XCFGSET", "z", "IDMP-MAXSIZE", "0"),
    ("XCFGSET", "z", "IDMP-MAXSIZE", "3", "IDMP-MAXSIZE", "4"),
    ("XCFGSET", "z"),
    ("XCFGSET", "nope", "IDMP-DURATION", "5"),
    ("XCFGSET", "str3", "IDMP-DURATION", "5"),
    ("XADD", "z", "IDMP", "p", "i1", "*", "a", "1"),
    ("XIDMP", "CFGGET", "z"),
    ("XIDMP", "CFGGET", "z", "MAXSIZE"),
    ("XIDMP", "CFGGET", "z", "BOGUS"),
    ("XIDMP", "CFGSET", "z", "MAXSIZE", "2"),
    ("XINFO", "STREAM", "z"),
    ("XIDMPRECORD", "z", "p", "i2", "1-1"),
    ("XIDMPRECORD", "z", "p", "i2", "1-1"),
    ("XIDMPRECORD", "z", "p", "i2", "3-1"),
    ("XIDMPRECORD", "z", "p", "i3", "2-1"),
    ("XIDMPRECORD", "z", "", "i3", "1-1"),
    ("XIDMPRECORD", "nope", "p", "i3", "1-1"),
    ("XADD", "z", "IDMP", "p", "i2", "*", "a", "1"),
    ("XINFO", "STREAM", "z"),
]


def _config(region: bool) -> Config:
    config = Config()
    if region:
        config.load_value("region-id", ["1"])
        config.load_value("active-active-id-mode", ["liberal"])
    return config


@pytest.mark.parametrize("resp", [2, 3])
def test_one_region_answers_byte_for_byte_as_a_plain_server(resp: int) -> None:
    plain, region = Harness(config=_config(False)), Harness(config=_config(True))
    assert region.engine.region is not None and plain.engine.region is None
    pc, rc = plain.client(), region.client()
    pc.resp = rc.resp = resp
    for step in SEQUENCE:
        if isinstance(step, int):
            plain.scheduler.advance(step)
            region.scheduler.advance(step)
            continue
        argv = [a.encode() for a in step]
        plain.engine.execute(pc, list(argv))
        region.engine.execute(rc, list(argv))
        expected, got = plain.raw(pc), region.raw(rc)
        assert got == expected, f"{step}: plain {expected!r} region {got!r}"
    region.engine.region.region.check_invariants()


def test_the_overlay_runs_only_with_a_region() -> None:
    plain, region = Harness(config=_config(False)), Harness(config=_config(True))
    # one handler family: the stream commands differ only by the store they call
    for name in (b"XADD", b"XREADGROUP", b"XACK", b"XCLAIM", b"XAUTOCLAIM", b"XRANGE"):
        assert plain.engine.table[name].handler is region.engine.table[name].handler
    assert type(plain.engine.streams) is PlainStreams
    assert type(region.engine.streams) is RegionStreams
    assert plain.engine.table[b"DEL"].handler is not region.engine.table[b"DEL"].handler
    assert b"AADUMP" not in plain.engine.table and b"AADUMP" in region.engine.table
    pc, rc = plain.client(), region.client()
    plain.call(pc, "XADD", "s", "1-1", "a", "b")
    region.call(rc, "XADD", "s", "1-1", "a", "b")
    assert type(plain.engine.keyspace.dbs[0].data[b"s"]) is Stream
    assert type(region.engine.keyspace.dbs[0].data[b"s"]) is RegionStream
    # the COMMAND metadata is the plain table's
    assert decode_all(_raw(plain, pc, "COMMAND", "INFO", "XADD", "DEL", "XGROUP")) == decode_all(
        _raw(region, rc, "COMMAND", "INFO", "XADD", "DEL", "XGROUP")
    )


def _raw(h: Harness, c: object, *args: str) -> bytes:
    h.engine.execute(c, [a.encode() for a in args])  # type: ignore[arg-type]
    return h.raw(c)  # type: ignore[arg-type]


def _pair(resp: int = 2) -> tuple[Harness, Harness]:
    return Harness(config=_config(False)), Harness(config=_config(True))


@pytest.mark.parametrize(
    "reader",
    [
        ("XREAD", "BLOCK", "0", "STREAMS", "s", "$"),
        ("XREADGROUP", "GROUP", "g", "c", "BLOCK", "1000", "STREAMS", "s", ">"),
    ],
)
def test_blocked_readers_wake_alike(reader: tuple[str, ...]) -> None:
    replies = []
    for h in _pair():
        waiter, writer = h.client(), h.client()
        h.call(writer, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        h.engine.execute(waiter, [a.encode() for a in reader])
        assert h.raw(waiter) == b""  # blocked
        h.call(writer, "XADD", "s", "5-1", "f", "v")
        replies.append(h.raw(waiter))
    assert replies[0] == replies[1] != b""


def test_blocked_xreadgroup_times_out_alike() -> None:
    replies = []
    for h in _pair():
        waiter, writer = h.client(), h.client()
        h.call(writer, "XGROUP", "CREATE", "s", "g", "$", "MKSTREAM")
        h.engine.execute(waiter, b"XREADGROUP GROUP g c BLOCK 100 STREAMS s >".split())
        h.scheduler.advance(150)
        replies.append(h.raw(waiter))
    assert replies[0] == replies[1] == b"*-1\r\n"


def _region(mode: str = "strict", region_id: int = 2, peers: tuple[str, ...] = ()) -> Harness:
    config = Config()
    config.load_value("region-id", [str(region_id)])
    config.load_value("active-active-id-mode", [mode])
    if peers:
        config.load_value("peers", list(peers))
    return Harness(config=config)


def test_strict_mode_ids_and_errors() -> None:
    h = _region("strict", 2)
    c = h.client()
    now = h.clock.now_ms()
    assert h.call(c, "XADD", "s", "*", "a", "1") == f"{now}-2".encode()
    assert h.call(c, "XADD", "s", "*", "a", "1") == f"{now}-18".encode()
    assert h.call(c, "XADD", "s", str(now + 5), "a", "1") == f"{now + 5}-2".encode()
    error = str(h.call(c, "XADD", "s", f"{now + 9}-3", "a", "1"))
    assert "not allowed in active-active-id-mode strict" in error


def test_tombstones_stay_invisible_and_ids_keep_rising() -> None:
    h = _region("strict", 1)
    c = h.client()
    h.call(c, "XADD", "s", "100", "a", "1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    assert h.call(c, "DEL", "s") == 1
    region = h.engine.region
    assert region is not None and b"s" in region.region.streams  # the tombstone
    assert h.call(c, "EXISTS", "s") == 0 and h.call(c, "TYPE", "s") == b"none"
    assert h.call(c, "KEYS", "*") == [] and h.call(c, "DBSIZE") == 0
    assert h.call(c, "SCAN", "0") == [b"0", []]
    assert h.call(c, "XLEN", "s") == 0 and h.call(c, "XRANGE", "s", "-", "+") == []
    assert "requires the key to exist" in str(h.call(c, "XGROUP", "CREATE", "s", "g", "0"))
    # a deleted stream's IDs keep rising: its tombstone remembers the last one
    assert "equal or smaller" in str(h.call(c, "XADD", "s", "50", "a", "1"))
    assert h.call(c, "XADD", "s", "100", "a", "1") == b"100-17"
    assert h.call(c, "KEYS", "*") == [b"s"]
    # an XGROUP CREATE … MKSTREAM on a missing key makes a stream without entries: it exists
    h.call(c, "XGROUP", "CREATE", "e", "g", "$", "MKSTREAM")
    assert h.call(c, "EXISTS", "e") == 1 and h.call(c, "TYPE", "e") == b"stream"
    h.call(c, "XGROUP", "DESTROY", "e", "g")
    assert h.call(c, "EXISTS", "e") == 0 and h.call(c, "DBSIZE") == 1


def test_what_a_region_refuses_clearly() -> None:
    h = _region()
    c = h.client()
    h.call(c, "XADD", "s", "*", "a", "1")
    for args in [
        ("EXPIRE", "s", "10"),
        ("AAEFFECT", "1", "1", "0", "0"),
    ]:
        text = str(h.call(c, *args))
        assert "not supported in active-active mode" in text or "internal" in text, args
    assert "not supported" in str(h.call(c, "MOVE", "s", "1"))
    assert "not supported" in str(h.call(c, "SWAPDB", "0", "1"))
    assert h.call(c, "SWAPDB", "2", "3") == b"OK"  # (no streams there)


def test_streams_in_every_database() -> None:
    """Each database has its own streams (the region's records by database number; an
    effect names its database with a Select op)."""
    h = _region("strict", 1)
    c = h.client()
    h.call(c, "XADD", "s", "100", "a", "0")
    h.call(c, "SELECT", "3")
    assert h.call(c, "XADD", "s", "200", "a", "3") == b"200-1"
    assert h.call(c, "XLEN", "s") == 1 and h.call(c, "TYPE", "s") == b"stream"
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    got = h.call(c, "XREADGROUP", "GROUP", "g", "c", "STREAMS", "s", ">")
    assert got == [[b"s", [[b"200-1", [b"a", b"3"]]]]]
    assert h.call(c, "XDELEX", "s", "IDS", "1", "200-1") == [1]
    h.call(c, "XADD", "t", "5", "a", "3")
    h.call(c, "RENAME", "t", "u")
    assert sorted(h.call(c, "KEYS", "*")) == [b"s", b"u"]
    text = h.call(c, "AADUMP").decode()
    assert text.split("\ndb 3\n")[1].startswith("stream b's' floor=0-0\n  group b'g'")
    assert "stream b'u'" in text.split("\ndb 3\n")[1]
    assert "not supported" in str(h.call(c, "SWAPDB", "3", "4"))
    h.call(c, "SELECT", "0")
    assert h.call(c, "XRANGE", "s", "-", "+") == [[b"100-1", [b"a", b"0"]]]
    assert h.call(c, "EXISTS", "u") == 0
    h.call(c, "FLUSHDB")  # database 0 only
    h.call(c, "SELECT", "3")
    assert h.call(c, "EXISTS", "s", "u") == 2
    h.call(c, "FLUSHALL")
    assert h.call(c, "DBSIZE") == 0 and h.call(c, "XLEN", "u") == 0
    rk = h.engine.region
    assert rk is not None
    rk.region.check_invariants()
    assert rk.region.dump() == "vector 1=8\n"  # (FLUSHALL: one effect for both)


def test_range_trim_is_exact_and_rename_drops_groups() -> None:
    h = _region("liberal", 1)
    c = h.client()
    for n in range(1, 201):
        h.call(c, "XADD", "s", f"{n}-1", "f", "v")
    assert h.call(c, "XTRIM", "s", "MAXLEN", "~", "150") == 50
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "RENAME", "s", "t")
    assert h.call(c, "XLEN", "t") == 150 and h.call(c, "XINFO", "GROUPS", "t") == []


def test_aadump_prints_the_canonical_dump() -> None:
    h = _region("strict", 1)
    c = h.client()
    h.call(c, "XADD", "s", "100", "a", "1")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    region = h.engine.region
    assert region is not None
    assert h.call(c, "AADUMP") == region.region.dump().encode()
    text = h.call(c, "AADUMP").decode()
    assert text.startswith("vector 1=2\n") and "100-1 r1" in text and "group b'g'" in text


def test_effects_reach_the_choke_point_as_aaeffect_lines() -> None:
    h = _region("strict", 1)
    c = h.client()
    h.call(c, "XADD", "s", "MAXLEN", "1", "100", "a", "1")
    h.call(c, "XADD", "s", "MAXLEN", "1", "101", "a", "1")
    lines = h.effect_lines()
    # the first XADD cuts nothing (one effect), the second adds and cuts (two); its add
    # follows the first effect with nothing else applied between: the compact line
    assert [line[0] for line in lines] == [b"AAEFFECT", b"AAXADD", b"AAEFFECT"]
    assert lines[1] == [b"AAXADD", b"1", b"2", b"s", b"101-1", b"a", b"1"]
    assert [b"MULTI"] in [argv for _, argv in h.effects]  # one command's effects: atomic


def test_commands_that_would_replace_a_stream_are_refused() -> None:
    h = _region()
    c = h.client()
    h.call(c, "XADD", "s", "*", "a", "1")
    for args in [
        ("SET", "s", "v"),
        ("SETEX", "s", "10", "v"),
        ("GETSET", "s", "v"),
        ("MSET", "k", "v", "s", "v"),
        ("PEXPIRE", "s", "10"),
    ]:
        assert "not supported in active-active mode" in str(h.call(c, *args)), args
    assert h.call(c, "MSET", "k", "v", "k2", "v") == b"OK"
    assert h.call(c, "SET", "k", "w") == b"OK" and h.call(c, "EXPIRE", "k", "10") == 1
    assert h.call(c, "TYPE", "s") == b"stream" and h.call(c, "GET", "k") == b"w"


def test_info_active_active() -> None:
    plain = Harness()
    c = plain.client()
    assert b"region_id:0" in plain.call(c, "INFO", "active-active")
    assert b"active-active" not in plain.call(c, "INFO", "all").lower()
    h = _region("semi-strict", 2)
    c = h.client()
    h.call(c, "XADD", "s", "*", "a", "1")
    info = h.call(c, "INFO", "active-active").decode()
    assert "# Active-active" in info and "region_id:2" in info and "id_mode:semi-strict" in info
    assert "own_seq:1" in info and "vector:2=1" in info and "streams:1" in info
    assert "no region links" in str(h.call(c, "AALINK", "PAUSE", "*"))
    assert "no region links" in str(h.call(c, "AAPSYNC", "1", "1", "1", "0"))


def test_the_server_keeps_one_copy_of_its_own_effects() -> None:
    h = _region(peers=("127.0.0.1:7999",))  # (no server: no link is made)
    c = h.client()
    for _ in range(5):
        h.call(c, "XADD", "s", "*", "a", "1")
    rk = h.engine.region
    assert rk is not None
    assert rk.region.outbox == [] and [e.seq for e in rk.own_effects()] == [1, 2, 3, 4, 5]


def test_own_effects_are_kept_as_their_encoded_commands() -> None:
    """(made once for the AOF, the replicas and the links; a bytes object is untracked by
    the garbage collector: no full collection walks them)"""
    import gc

    h = _region(peers=("127.0.0.1:7999",))
    c = h.client()
    h.call(c, "XADD", "s", "*", "a", "1")
    h.call(c, "XADD", "s", "*", "a", "2")
    rk = h.engine.region
    assert rk is not None
    assert [type(line) for line in rk.own] == [bytes, bytes] and not gc.is_tracked(rk.own[0])
    assert rk.own == [encode_command(effect.to_line()) for effect in rk.own_effects()]
    assert [effect.seq for effect in rk.own_effects()] == [1, 2]
    assert h.effect_lines()[1][0] == b"AAXADD"  # (the compact line)


def test_a_region_without_peers_keeps_no_own_effects_until_one_is_asked_for() -> None:
    """Nobody would acknowledge them (no peers of its own): none kept, ``own_first`` moves
    on (a region that lists this one and asks for older ones gets a state transfer); once a
    region asks (``AAPSYNC``: ``keep_own``), the next ones are kept."""
    h = _region()
    c = h.client()
    for _ in range(3):
        h.call(c, "XADD", "s", "*", "a", "1")
    rk = h.engine.region
    assert rk is not None and not rk.keep_own
    assert rk.own == [] and rk.own_first == 4 and rk.region.inbox.applied == {2: 3}
    assert "own_effects_kept:0" in str(h.call(c, "INFO", "active-active"))
    rk.keep_own = True
    h.call(c, "XADD", "s", "*", "a", "2")
    assert rk.own_first == 4 and [e.seq for e in rk.own_effects()] == [4]
    # (a snapshot loaded into a region that keeps none brings none back)
    rk.keep_own_effects(False)
    assert rk.own == [] and rk.own_first == 5
    rk.keep_own = True
    h.call(c, "XADD", "s", "*", "a", "3")
    state = rk.dump_state()
    rk.keep_own_effects(False)
    rk.load_state(state)
    assert rk.own == [] and rk.own_first == 6


def test_a_received_effect_is_logged_with_the_line_read() -> None:
    from headwater.activeactive.envelope import Add, Effect

    h = _region(region_id=2)
    rk = h.engine.region
    assert rk is not None
    first = Effect(1, 1, ((1, 1),), (Add(b"s", (5, 1), (b"a", b"1")),))
    second = Effect(1, 2, ((1, 2),), (Add(b"s", (6, 1), (b"b", b"2")),))
    read = [e.to_line() for e in (first, second)]  # (as a link's parser gives them)
    rk.received(second, read[1])  # arrives first: waits in the inbox
    assert rk.region.receive(second) == 0 and rk.take_lines() == []
    rk.received(first, read[0])
    assert rk.region.receive(first) == 2
    lines = rk.take_lines()
    assert lines[0] is read[0] and lines[1] is read[1] and rk.received_lines == {}
    rk.received(first, read[0])  # a duplicate: already applied, nothing kept
    assert rk.region.receive(first) == 0 and rk.received_lines == {}
    assert h.call(h.client(), "XLEN", "s") == 2


@pytest.mark.parametrize("entries", ["3", "1"])
def test_node_limits_follow_the_config(entries: str) -> None:
    """``stream-node-max-entries`` shapes the sub-logs' nodes as it shapes a plain stream's
    (XINFO's radix-tree-keys), at startup and after CONFIG SET."""
    out = []
    for region in (False, True):
        config = _config(region)
        config.load_value("stream-node-max-entries", [entries])
        h = Harness(config=config)
        c = h.client()
        for n in range(1, 8):
            h.call(c, "XADD", "s", f"{n}-1", "f", "v")
        h.call(c, "CONFIG", "SET", "stream-node-max-entries", "2")
        for n in range(8, 12):
            h.call(c, "XADD", "s", f"{n}-1", "f", "v")
        h.engine.execute(c, b"XINFO STREAM s".split())
        out.append(h.raw(c))
    assert out[0] == out[1]


def test_idmp_is_per_region_expires_and_goes_with_the_stream() -> None:
    h = _region("strict", 1)
    c = h.client()
    first = h.call(c, "XADD", "s", "IDMP", "p", "i", "*", "a", "1")
    assert h.call(c, "XADD", "s", "IDMP", "p", "i", "*", "a", "1") == first
    assert [line[0] for line in h.effect_lines()] == [b"AAEFFECT", b"AAIDMP", b"AAIDMP"]
    h.scheduler.advance(101_000)  # stream-idmp-duration (100 s) later: the cron forgets it
    h.engine.cron()
    second = h.call(c, "XADD", "s", "IDMP", "p", "i", "*", "a", "1")
    assert second != first and h.call(c, "XLEN", "s") == 2
    h.call(c, "DEL", "s")  # the map goes with the stream
    third = h.call(c, "XADD", "s", "IDMP", "p", "i", "*", "a", "1")
    assert third not in (first, second) and h.call(c, "XLEN", "s") == 1


@pytest.mark.parametrize("region", [False, True], ids=["plain", "region"])
def test_idle_consumers_are_reclaimed_in_both_modes(region: bool) -> None:
    """``stream-consumer-idle-reclaim-ms`` drops idle consumers with nothing pending, by the
    cron and on access, on a plain stream and on a region's stream (whose consumers are
    local: the drop is logged as the group's AALOCAL line, not replicated)."""
    h = Harness(config=_config(region))
    c = h.client()
    h.call(c, "XADD", "s", "1-0", "f", "v")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0")
    h.call(c, "XGROUP", "CREATECONSUMER", "s", "g", "idle")
    h.call(c, "XREADGROUP", "GROUP", "g", "busy", "STREAMS", "s", ">")  # 1-0 pending
    h.call(c, "CONFIG", "SET", "stream-consumer-idle-reclaim-ms", "5000")
    h.clock.advance(10_000)
    h.effects.clear()
    h.engine.cron()
    assert [row[1] for row in h.call(c, "XINFO", "CONSUMERS", "s", "g")] == [b"busy"]
    logged = [argv[0] for _, argv in h.effects]
    assert logged == ([b"AALOCAL"] if region else [b"XGROUP"])
    # on access: once acked, "busy" (seen 13 s ago) goes; "fresh", seen 3 s ago, stays
    h.call(c, "XGROUP", "CREATECONSUMER", "s", "g", "fresh")
    h.call(c, "XACK", "s", "g", "1-0")
    h.clock.advance(3000)
    h.call(c, "XPENDING", "s", "g")
    assert [row[1] for row in h.call(c, "XINFO", "CONSUMERS", "s", "g")] == [b"fresh"]
    h.clock.advance(3000)
    h.call(c, "XPENDING", "s", "g")
    assert h.call(c, "XINFO", "CONSUMERS", "s", "g") == []
    if region:
        h.engine.region.region.check_invariants()
