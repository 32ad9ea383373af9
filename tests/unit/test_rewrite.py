"""AOF rewrite round trip: a random workload, then the rewrite's commands replayed on an empty
engine must give the same keyspace, as seen by a canonical dump of everything a rewrite
carries (STREAMS rewrite limits are in persistence/rewrite.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.engine.replay import Replayer
from headwater.keyspace import Database
from headwater.persistence.rewrite import rewrite_commands, write_base
from headwater.persistence.snapshot import (
    SnapshotError,
    check_snapshot,
    load_snapshot,
    write_snapshot,
)
from headwater.persistence.snapshot_write import write_snapshot_to
from headwater.stream.groups import key_id
from headwater.stream.stream import Stream
from headwater.structures.lists import ListValue
from headwater.structures.sets import SetValue
from headwater.structures.zsets import ZSetValue
from headwater.values import Hash
from tests.unit.conftest import Harness


def canonical(dbs: list[Database]) -> dict[tuple[int, bytes], Any]:
    """Everything a rewrite promises to keep, per (db, key)."""
    out: dict[tuple[int, bytes], Any] = {}
    for db in dbs:
        for key, value in db.data.items():
            ttl = db.expires.get(key)
            if isinstance(value, Stream):
                value.check_invariants()
                out[db.index, key] = (_stream(value), ttl)
            elif isinstance(value, Hash):
                value.check_invariants()
                deadlines = {} if value.ttls is None else dict(value.ttls.deadlines)
                out[db.index, key] = ("hash", dict(value), deadlines, ttl)
            elif isinstance(value, ZSetValue):
                value.check_invariants()
                out[db.index, key] = ("zset", list(value), ttl)
            elif isinstance(value, ListValue):
                # (members in order: replayed RPUSHes lay the nodes out by the push rules)
                value.check_invariants()
                out[db.index, key] = ("list", list(value), ttl)
            elif isinstance(value, SetValue):
                # (members only: replaying SADDs may choose another encoding and order, as
                # it does for Redis's own AOF rewrite)
                value.check_invariants()
                out[db.index, key] = ("set", set(value.members), ttl)
            else:
                out[db.index, key] = (type(value).__name__, bytes(value), ttl)
    return out


def _stream(s: Stream) -> Any:
    live = {sid for sid, _ in s.range((0, 0), (2**64 - 1, 2**64 - 1))}
    groups = {}
    for name, g in s.groups.items():
        g.check_invariants()
        pel = {k: nack for k, nack in g.pel.items() if key_id(k) in live}
        zone = [k for k in g.nacked if key_id(k) in live]  # the NACK zone, in its order
        groups[name] = (g.last_id, g.entries_read, pel, sorted(g.consumers), zone)
    idmp = {}
    if s.idmp is not None:
        for pid, producer in s.idmp.producers.items():
            kept = [(iid, sid) for iid, sid in producer.entries() if sid in live]
            if kept:
                idmp[pid] = kept
    return (
        s.range((0, 0), (2**64 - 1, 2**64 - 1)),
        s.last_id,
        s.entries_added,
        s.max_deleted_id,
        s.idmp_duration,
        s.idmp_maxsize,
        groups,
        idmp,
    )


ids = st.integers(1, 30).map(lambda n: f"{n}-0")
ops = st.one_of(
    st.tuples(st.just("add"), st.sampled_from(["s", "t"]), st.integers(1, 3)),
    st.tuples(st.just("idmp"), st.sampled_from(["p", "q"]), st.integers(0, 5)),
    st.tuples(st.just("read"), st.sampled_from(["g1", "g2"]), st.sampled_from(["a", "b"])),
    st.tuples(st.just("ack"), st.sampled_from(["g1", "g2"]), ids),
    st.tuples(
        st.just("nack"),
        st.sampled_from(["g1", "g2"]),
        st.sampled_from(["SILENT", "FAIL", "FATAL"]),
        st.lists(ids, min_size=1, max_size=4),
        st.sampled_from([[], ["FORCE"], ["RETRYCOUNT", "7"], ["RETRYCOUNT", "2", "FORCE"]]),
    ),
    st.tuples(st.just("del"), ids),
    st.tuples(st.just("trim"), st.integers(0, 8)),
    st.tuples(st.just("kv"), st.integers(0, 3), st.booleans()),
    st.tuples(st.just("cfg"), st.integers(1, 4)),
    st.tuples(st.just("advance"), st.integers(1, 300)),
)


def apply(h: Harness, c: Any, op: tuple[Any, ...], counter: list[int]) -> None:
    kind, *args = op
    if kind == "add":
        for _ in range(args[1]):
            counter[0] += 1
            h.call(c, "XADD", args[0], f"{counter[0]}-0", "f", counter[0], "g", "x")
    elif kind == "idmp":
        h.call(c, "XADD", "s", "IDMP", args[0], f"iid{args[1]}", "*", "f", "i")
    elif kind == "read":
        h.call(c, "XREADGROUP", "GROUP", args[0], args[1], "COUNT", 3, "STREAMS", "s", ">")
    elif kind == "ack":
        h.call(c, "XACK", "s", args[0], args[1])
    elif kind == "nack":
        group, mode, nacked, options = args
        h.call(c, "XNACK", "s", group, mode, "IDS", len(nacked), *nacked, *options)
    elif kind == "del":
        h.call(c, "XDEL", "s", args[0])
    elif kind == "trim":
        h.call(c, "XTRIM", "s", "MAXLEN", args[0])
    elif kind == "kv":
        h.call(c, "SELECT", args[0])
        h.call(c, "SET", "k", "v", *(["PX", "100000"] if args[1] else []))
        h.call(c, "HSET", "h", "a", args[0], "b", "2")
        h.call(c, "APPEND", "raw", "x")
        h.call(c, "HSET", "ht", "a", 1, "b", 2, "c", args[0])
        h.call(c, "HPEXPIRE", "ht", 100_000 + args[0], "FIELDS", 2, "a", "b")
        h.call(c, "HPEXPIRE", "ht", 200_000, "FIELDS", 1, "c")
        h.call(c, "HPERSIST", "ht", "FIELDS", 1, "b")
        h.call(c, "SADD", "ints", args[0], 7, -3)
        h.call(c, "SADD", "mixed", args[0], "a", "b" * 70)
        h.call(c, "SADD", "big", *range(args[0] * 100, args[0] * 100 + 700))
        h.call(c, "SREM", "ints", 7)
        h.call(c, "ZADD", "z", args[0], "a", 1.5, "b", "-inf", "c", 0.1, "d")
        h.call(c, "ZADD", "zbig", *[x for n in range(200) for x in (n % 9 + 0.25, f"m{n}")])
        h.call(c, "ZINCRBY", "z", 2, "a")
        h.call(c, "RPUSH", "l", args[0], "a", "b" * 70, -(2**40))
        h.call(c, "LPUSH", "lbig", *[f"e{n}-{args[0]}" for n in range(300)])
        h.call(c, "LINSERT", "lbig", "AFTER", f"e150-{args[0]}", "y" * 500)
        h.call(c, "LREM", "l", 1, "a")
        h.call(c, "SELECT", 0)
    elif kind == "cfg":
        h.call(c, "XCFGSET", "s", "IDMP-MAXSIZE", args[0])
    elif kind == "advance":
        h.clock.advance(args[0])


@settings(max_examples=150, deadline=None)
@given(workload=st.lists(ops, min_size=5, max_size=50))
def test_rewrite_then_replay_gives_the_same_keyspace(
    workload: list[tuple[Any, ...]], tmp_path_factory: Any
) -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XGROUP", "CREATE", "s", "g1", "0", "MKSTREAM")
    h.call(c, "XGROUP", "CREATE", "s", "g2", "$")
    h.call(c, "XGROUP", "CREATE", "empty", "g", "$", "MKSTREAM")
    counter = [0]
    for op in workload:
        apply(h, c, op, counter)
    path = Path(tmp_path_factory.mktemp("rw")) / "base.aof"
    write_base(path, h.engine.keyspace.dbs)
    fresh = Harness()
    fresh.clock.advance(h.clock.now_ms() - fresh.clock.now_ms())
    replayer = Replayer(fresh.engine)
    replayer.replay(path, truncate_torn=False)  # (a line that fails raises FailedCommand)
    assert canonical(fresh.engine.keyspace.dbs) == canonical(h.engine.keyspace.dbs)
    assert list(rewrite_commands(fresh.engine.keyspace.dbs))  # and it rewrites again


def exact_state(dbs: list[Database]) -> dict[tuple[int, bytes], Any]:
    """Everything, down to node layout, tombstones, consumer times and IDMP counters: a
    snapshot keeps the keyspace exactly as it is in memory."""
    out: dict[tuple[int, bytes], Any] = {}
    for db in dbs:
        for key, value in db.data.items():
            ttl = db.expires.get(key)
            if isinstance(value, SetValue):
                out[db.index, key] = ("SetValue", value.encoding, value.ordered(), ttl)
                continue
            if isinstance(value, ZSetValue):
                out[db.index, key] = ("ZSetValue", value.listpack, list(value), ttl)
                continue
            if isinstance(value, ListValue):
                value.check_invariants()
                layout = [(n.items(), n.size) for n in value.nodes]
                out[db.index, key] = ("ListValue", value.listpack, value.fill, layout, ttl)
                continue
            if isinstance(value, Hash):
                value.check_invariants()
                deadlines = None if value.ttls is None else dict(value.ttls.deadlines)
                out[db.index, key] = ("Hash", dict(value), value.listpack, deadlines, ttl)
                continue
            if not isinstance(value, Stream):
                out[db.index, key] = (type(value).__name__, value, ttl)
                continue
            for n in value.nodes:
                n.materialize()  # (a lazy node's buffers are placeholders until then)
            nodes = [
                (n.master, n.fields, list(n.ms), list(n.seq), list(n.offsets), bytes(n.blob),
                 bytes(n.tomb or b""), n.count, n.deleted, n.lp_bytes)
                for n in value.nodes
            ]  # fmt: skip
            groups = {
                name: (
                    g.last_id,
                    g.entries_read,
                    dict(g.pel),
                    list(g.order),
                    {
                        c.name: (c.seen_time, c.active_time, list(c.pel))
                        for c in g.consumers.values()
                    },
                    list(g.nacked),
                )
                for name, g in value.groups.items()
            }
            idmp = value.idmp
            idmp_state = (
                None
                if idmp is None
                else (
                    idmp.tracked,
                    idmp.added,
                    idmp.duplicates,
                    {pid: list(p.entries()) for pid, p in idmp.producers.items()},
                )
            )
            out[db.index, key] = (
                nodes,
                value.firsts,
                value.length,
                value.last_id,
                value.first_id,
                value.max_deleted_id,
                value.entries_added,
                value.idmp_duration,
                value.idmp_maxsize,
                groups,
                idmp_state,
                ttl,
            )
    return out


@settings(max_examples=40, deadline=None)
@given(workload=st.lists(ops, min_size=5, max_size=50))
def test_snapshot_round_trip_is_exact(
    workload: list[tuple[Any, ...]], tmp_path_factory: Any
) -> None:
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "stream-node-max-entries", "4")
    h.call(c, "XGROUP", "CREATE", "s", "g1", "0", "MKSTREAM")
    h.call(c, "XGROUP", "CREATE", "s", "g2", "$")
    counter = [0]
    for op in workload:
        apply(h, c, op, counter)
    path = Path(tmp_path_factory.mktemp("snap")) / "dump.hwsnap"
    with open(path, "wb") as f:  # (the format is under test, not durability: no fsyncs)
        write_snapshot_to(f, h.engine.keyspace.dbs)
    fresh = Harness()
    assert load_snapshot(path, fresh.engine.keyspace.dbs) == h.engine.keyspace.total_keys()
    assert exact_state(fresh.engine.keyspace.dbs) == exact_state(h.engine.keyspace.dbs)
    ok, report = check_snapshot(path)
    assert ok, report


def test_damaged_snapshots_are_refused(tmp_path: Path) -> None:
    h = Harness()
    c = h.client()
    h.call(c, "XADD", "s", "1-1", "f", "v")
    path = tmp_path / "dump.hwsnap"
    write_snapshot(path, h.engine.keyspace.dbs)
    data = bytes(path.read_bytes())
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF
    for damaged in (data[:-1], data[:20], bytes(flipped), b"REDIS0009" + data[9:]):
        path.write_bytes(bytes(damaged))
        with pytest.raises(SnapshotError):
            load_snapshot(path, Harness().engine.keyspace.dbs)
        assert not check_snapshot(path)[0]
