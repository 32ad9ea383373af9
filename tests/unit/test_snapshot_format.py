"""Snapshot format versions and the load's failure modes (issue #6): version 3 (columnar node
chunks, loaded without per-entry work, and the groups' NACK zones) is written; version 1 and 2
files still load; unknown versions are refused by number; a damaged file loads nothing, also
when its checksum is computed by a thread while the nodes are built. Defect 5 (#14): the file is
read into private memory, so a read error fails the load (an OSError, not a SIGBUS later) and
nothing done to the file afterwards changes the loaded nodes."""

from __future__ import annotations

import errno
import functools
import os
import struct
import weakref
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import headwater.persistence.snapshot as snapshot
import headwater.persistence.snapshot_records as snapshot_records
from headwater.keyspace import Database
from headwater.persistence.snapshot import SnapshotError, load_snapshot, write_snapshot
from headwater.stream.groups import key_id
from headwater.stream.node import Node
from headwater.stream.stream import Stream
from tests.unit.conftest import Harness
from tests.unit.test_rewrite import exact_state


def _filled(entries: int = 3000, nack: bool = True) -> Harness:
    """Streams with several chunks of nodes, tombstones, other field names, a group with
    pending entries (some nacked, out of ID order, unless not nack: versions before 3 cannot
    hold them), IDMP maps, a TTL, and a string and a hash beside them."""
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "stream-node-max-entries", "5")
    h.call(c, "XGROUP", "CREATE", "s", "g", "0", "MKSTREAM")
    for i in range(1, entries + 1):
        fields = ["f", "v" * (i % 7)] if i % 11 else ["other", "x", "f", "y"]
        h.call(c, "XADD", "s", f"{i}-{i % 3}", *fields)
    h.call(c, "XADD", "s", "IDMP", "p", "iid", "*", "f", "i")
    h.call(c, "XREADGROUP", "GROUP", "g", "a", "COUNT", 10, "STREAMS", "s", ">")
    h.call(c, "XDEL", "s", "5-2", "6-0", "7-1")
    if nack:
        assert h.call(c, "XNACK", "s", "g", "FAIL", "IDS", 3, "8-2", "3-0", "6-0") == 3
    h.call(c, "XADD", "t", "1-1", "f", "v")
    h.call(c, "PEXPIRE", "t", 100_000)
    h.call(c, "SET", "k", "v")
    h.call(c, "HSET", "h", "a", "1")
    return h


def _fresh() -> list[Database]:
    return Harness().engine.keyspace.dbs


def _write_old_version(
    path: Path,
    dbs: list[Database],
    version: int,
    stream_writer: Callable[[snapshot._Out, Stream], None] | None = None,
) -> None:
    """Relabel a snapshot written with groups as that version laid them out."""
    write_snapshot(path, dbs, (), stream_writer, version)
    data = bytearray(path.read_bytes())
    data[6:8] = struct.pack("<H", version)
    data[-4:] = struct.pack("<I", snapshot.zlib.crc32(data[:-4]))
    path.write_bytes(bytes(data))


def _write_v1(path: Path, dbs: list[Database]) -> None:
    """The version 1 layout (nodes one by one), as the code before issue #6 wrote it."""

    def stream_v1(out: snapshot._Out, s: Stream) -> None:
        for sid in (s.last_id, s.first_id, s.max_deleted_id):
            out.sid(sid)
        for n in (s.entries_added, s.length, s.idmp_duration, s.idmp_maxsize, len(s.nodes)):
            out.u64(n)
        for node in s.nodes:
            out.sid(node.master)
            out.u64(len(node.fields))
            for name in node.fields:
                out.blob(name)
            for n in (node.count, node.deleted, node.lp_bytes):
                out.u64(n)
            for buf in node.wide_columns():
                out.blob(buf.tobytes())
            out.blob(node.blob)
            out.blob(node.tomb if node.tomb is not None else b"")
        out.u64(len(s.groups))
        for group in s.groups.values():
            snapshot._write_group(out, group, 1)
        snapshot._write_idmp(out, s.idmp)

    _write_old_version(path, dbs, 1, stream_v1)


def test_version_3_round_trip_across_chunks(tmp_path: Path) -> None:
    h = _filled()
    path = tmp_path / "dump.hwsnap"
    write_snapshot(path, h.engine.keyspace.dbs)
    assert path.read_bytes()[6:8] == struct.pack("<H", 3)
    dbs = _fresh()
    assert load_snapshot(path, dbs) == 4
    assert exact_state(dbs) == exact_state(h.engine.keyspace.dbs)
    stream = dbs[0].data[b"s"]
    assert len(stream.nodes) > snapshot.CHUNK_NODES  # more than one chunk
    assert stream.nodes[0].fields is stream.nodes[1].fields  # shared, not one copy per node


def test_version_3_keeps_the_nack_zone_in_its_order(tmp_path: Path) -> None:
    h = _filled(400)
    path = tmp_path / "dump.hwsnap"
    write_snapshot(path, h.engine.keyspace.dbs)
    dbs = _fresh()
    load_snapshot(path, dbs)
    group = dbs[0].data[b"s"].groups[b"g"]
    assert [key_id(k) for k in group.nacked] == [(8, 2), (3, 0), (6, 0)]
    group.check_invariants()
    assert snapshot.check_snapshot(path)[0]


def test_version_2_files_still_load(tmp_path: Path) -> None:
    h = _filled(400, nack=False)
    path = tmp_path / "dump.hwsnap"
    _write_old_version(path, h.engine.keyspace.dbs, 2)
    dbs = _fresh()
    assert load_snapshot(path, dbs) == 4
    assert exact_state(dbs) == exact_state(h.engine.keyspace.dbs)
    assert not dbs[0].data[b"s"].groups[b"g"].nacked


def test_version_1_files_still_load(tmp_path: Path) -> None:
    h = _filled(400, nack=False)
    path = tmp_path / "dump.hwsnap"
    _write_v1(path, h.engine.keyspace.dbs)
    dbs = _fresh()
    assert load_snapshot(path, dbs) == 4
    assert exact_state(dbs) == exact_state(h.engine.keyspace.dbs)
    ok, report = snapshot.check_snapshot(path)
    assert ok, report


def test_unknown_versions_are_refused_by_number(tmp_path: Path) -> None:
    path = tmp_path / "dump.hwsnap"
    write_snapshot(path, Harness().engine.keyspace.dbs)
    data = bytearray(path.read_bytes())
    data[6:8] = struct.pack("<H", 4)
    path.write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match="snapshot version 4 is not supported"):
        load_snapshot(path, _fresh())
    path.write_bytes(b"")
    with pytest.raises(SnapshotError, match="not a Headwater snapshot"):
        load_snapshot(path, _fresh())


@pytest.mark.parametrize("threaded", [True, False])
def test_a_damaged_file_loads_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threaded: bool
) -> None:
    """Damage inside the node data parses fine and only the checksum catches it: with the
    threaded checksum the nodes are built first, then removed again."""
    monkeypatch.setattr(snapshot, "THREADED_CRC_BYTES", 0 if threaded else 1 << 40)
    h = _filled()
    path = tmp_path / "dump.hwsnap"
    write_snapshot(path, h.engine.keyspace.dbs)
    good = path.read_bytes()
    for where in (len(good) // 2, len(good) - 40, 12):
        damaged = bytearray(good)
        damaged[where] ^= 0x5A
        path.write_bytes(bytes(damaged))
        dbs = _fresh()
        with pytest.raises(SnapshotError):
            load_snapshot(path, dbs)
        assert all(not db.data and not db.expires for db in dbs)
    path.write_bytes(good)
    assert load_snapshot(path, _fresh()) == 4


def _lazy_copy(tmp_path: Path, h: Harness) -> tuple[Harness, list[Node]]:
    """A second engine whose keyspace was loaded lazily from a snapshot of h's, and the list
    of its lazy nodes."""
    path = tmp_path / "lazy.hwsnap"
    write_snapshot(path, h.engine.keyspace.dbs)
    copy, lazy = Harness(), []
    assert load_snapshot(path, copy.engine.keyspace.dbs, lazy) == 4
    copy.call(copy.client(), "CONFIG", "SET", "stream-node-max-entries", "5")
    return copy, lazy


def test_lazy_load_copies_no_node_until_it_is_used(tmp_path: Path) -> None:
    h = _filled()
    copy, lazy = _lazy_copy(tmp_path, h)
    nodes = copy.engine.keyspace.dbs[0].data[b"s"].nodes
    assert all(node.is_lazy for node in nodes) and len(lazy) == len(nodes) + 1  # and t's
    c, r = copy.client(), h.client()
    assert copy.call(c, "XRANGE", "s", "100", "120") == h.call(r, "XRANGE", "s", "100", "120")
    used = [i for i, node in enumerate(nodes) if not node.is_lazy]
    assert 0 < len(used) <= 6 and max(used) < 40  # only the nodes that hold 100..120
    assert copy.call(c, "XLEN", "s") == h.call(r, "XLEN", "s")
    assert sum(not node.is_lazy for node in nodes) == len(used)  # a counter: nothing copied


def test_lazy_nodes_take_every_command_as_loaded_ones(tmp_path: Path) -> None:
    """Writes that touch lazy nodes first (XDEL marks a tombstone, trimming drops and edits
    nodes, XADD appends to the tail, XSETID, XCLAIM, XACK) give exactly the state of the
    original engine, node layout included; then the cron's materialization finishes."""
    h = _filled()
    copy, lazy = _lazy_copy(tmp_path, h)
    script = [
        ("XDEL", "s", "40-1", "41-2", "2999-2"),
        ("XTRIM", "s", "MINID", "~", "300"),
        ("XTRIM", "s", "MAXLEN", "=", "2500"),
        ("XADD", "s", "*", "f", "tail"),
        ("XRANGE", "s", "-", "+", "COUNT", "3"),
        ("XREVRANGE", "s", "+", "-", "COUNT", "3"),
        ("XCLAIM", "s", "g", "b", "0", "1-1", "2-2"),
        ("XACK", "s", "g", "3-0"),
        ("XINFO", "STREAM", "s"),
        ("XADD", "t", "2-0", "f", "v"),
    ]
    c, r = copy.client(), h.client()
    for argv in script:
        assert copy.call(c, *argv) == h.call(r, *argv), argv
    assert snapshot.materialize_some(lazy, 10.0) == 0
    stream = copy.engine.keyspace.dbs[0].data[b"s"]
    assert not any(node.is_lazy for node in stream.nodes)
    stream.check_invariants()
    assert exact_state(copy.engine.keyspace.dbs) == exact_state(h.engine.keyspace.dbs)


def test_materialize_some_keeps_to_its_budget(tmp_path: Path) -> None:
    copy, lazy = _lazy_copy(tmp_path, _filled(2000))
    data = copy.engine.keyspace.dbs[0].data
    nodes = data[b"s"].nodes + data[b"t"].nodes
    left = snapshot.materialize_some(lazy, 0.0)  # one step of 64 at least, then the deadline
    assert left == len(nodes) - 64 and sum(not n.is_lazy for n in nodes) == 64
    assert [n.is_lazy for n in data[b"s"].nodes[:64]] == [False] * 64  # in the file's order
    assert snapshot.materialize_some(lazy, 10.0) == 0
    assert not any(node.is_lazy for node in nodes)


def test_unowned_entries_without_a_zone_are_refused(tmp_path: Path) -> None:
    """Version 2 had no unowned entries: a file that claims to be 2 but has one is damaged."""
    h = _filled(400)
    path = tmp_path / "dump.hwsnap"
    _write_old_version(path, h.engine.keyspace.dbs, 2)
    dbs = _fresh()
    with pytest.raises(SnapshotError, match="names no consumer"):
        load_snapshot(path, dbs)
    assert not dbs[0].data  # nothing half-loaded


# ---------------------------------------------------------------------------------------------
# The file is read into private memory: nothing done to it after the load reaches the data


def _failing_read(calls_before_failure: int) -> snapshot.ReadAt:
    """A reader that reads as ``pread_into`` does, then fails with EIO (a disk error)."""
    calls = 0

    def read_at(fd: int, into: memoryview, offset: int) -> int:
        nonlocal calls
        calls += 1
        if calls > calls_before_failure:
            raise OSError(errno.EIO, "Input/output error")
        return snapshot.pread_into(fd, into, offset)

    return read_at


@pytest.mark.parametrize("threaded", [True, False])
def test_a_read_error_fails_the_load_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threaded: bool
) -> None:
    """A disk error while the file is read is an OSError of the load (never a signal later),
    and leaves the databases empty; threaded, the nodes built before it are removed again."""
    monkeypatch.setattr(snapshot, "THREADED_CRC_BYTES", 0 if threaded else 1 << 40)
    monkeypatch.setattr(snapshot, "READ_CHUNK", 4096)
    path = tmp_path / "dump.hwsnap"
    write_snapshot(path, _filled().engine.keyspace.dbs)
    assert path.stat().st_size > 10 * 4096
    for good_reads in (0, 1, 5):
        dbs = _fresh()
        with pytest.raises(OSError, match="Input/output error") as failure:
            load_snapshot(path, dbs, [], _failing_read(good_reads))
        assert failure.value.errno == errno.EIO
        assert all(not db.data and not db.expires for db in dbs)
    assert load_snapshot(path, _fresh(), [], _failing_read(1 << 30)) == 4


def test_a_file_that_shrinks_while_it_is_read_fails_the_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot, "THREADED_CRC_BYTES", 0)
    monkeypatch.setattr(snapshot, "READ_CHUNK", 4096)
    path = tmp_path / "dump.hwsnap"
    write_snapshot(path, _filled().engine.keyspace.dbs)

    def read_then_truncate(fd: int, into: memoryview, offset: int) -> int:
        if offset >= 3 * 4096:
            os.truncate(path, offset)
        return snapshot.pread_into(fd, into, offset)

    dbs = _fresh()
    with pytest.raises(SnapshotError, match=r"the file shrank to \d+ bytes while it was read"):
        load_snapshot(path, dbs, [], read_then_truncate)
    assert all(not db.data for db in dbs)


@pytest.mark.parametrize("threaded", [True, False])
def test_lazy_nodes_keep_their_data_when_the_file_is_overwritten(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threaded: bool
) -> None:
    """Overwriting the file in place (same inode, same size, other bytes: what ``cp`` does
    without shrinking it) after a lazy load changes nothing the server holds."""
    monkeypatch.setattr(snapshot, "THREADED_CRC_BYTES", 0 if threaded else 1 << 40)
    h = _filled()
    copy, lazy = _lazy_copy(tmp_path, h)
    path = tmp_path / "lazy.hwsnap"
    size = path.stat().st_size
    with open(path, "r+b") as f:  # no O_TRUNC: a shrunk mapping would kill this process
        f.write(bytes(range(256)) * (size // 256) + bytes(size % 256))
    assert path.stat().st_size == size
    assert snapshot.materialize_some(lazy, 10.0) == 0
    assert exact_state(copy.engine.keyspace.dbs) == exact_state(h.engine.keyspace.dbs)


def test_the_private_copy_is_freed_once_every_node_is_copied(tmp_path: Path) -> None:
    copy, lazy = _lazy_copy(tmp_path, _filled(2000))
    node = copy.engine.keyspace.dbs[0].data[b"s"].nodes[0]
    assert node._lazy is not None
    memory = weakref.ref(node._lazy[0][0].obj)  # what the columns are views of
    assert memory() is not None
    snapshot.materialize_some(lazy, 0.0)
    assert memory() is not None
    snapshot.materialize_some(lazy, 10.0)
    assert memory() is None


def test_debug_reload_reports_a_failed_load(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DEBUG RELOAD answers Redis's error (the reason goes to the log), and the server goes on
    with empty databases, as Redis does."""
    import headwater.server.snapshots as snapshots_module
    from headwater.server.durability import Durability

    h = _filled(50)
    c = h.client()
    h.call(c, "CONFIG", "SET", "appendonly", "no")
    Durability(h.engine.config, h.engine, str(tmp_path)).open()
    failing = functools.partial(load_snapshot, read_at=_failing_read(0))
    monkeypatch.setattr(snapshots_module, "load_snapshot", failing)
    reply = h.call(c, "DEBUG", "RELOAD")
    assert str(reply) == "ERR Error trying to load the RDB dump, check server logs."
    assert h.call(c, "DBSIZE") == 0
    assert h.call(c, "SET", "k", "v") == b"OK"


def test_a_prefetched_copy_is_used_by_the_load_of_the_same_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server starts reading its snapshot before its imports (``prefetch``); the load
    takes that copy if the file is still the one prefetched, else reads the file itself."""
    monkeypatch.setattr(snapshot, "THREADED_CRC_BYTES", 0)
    monkeypatch.setattr(snapshot, "READ_CHUNK", 4096)
    monkeypatch.setattr(snapshot, "_prefetched", {})
    h = _filled()
    path = tmp_path / "dump.hwsnap"
    write_snapshot(path, h.engine.keyspace.dbs)
    snapshot.prefetch(path)
    (copy,) = snapshot._prefetched.values()
    dbs, lazy = _fresh(), []
    assert load_snapshot(path, dbs, lazy) == 4
    assert not snapshot._prefetched
    assert lazy[-1]._lazy is not None and lazy[-1]._lazy[0][0].obj is copy.memory
    assert exact_state(dbs) == exact_state(h.engine.keyspace.dbs)


def test_a_prefetched_copy_of_a_file_changed_since_is_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshot, "THREADED_CRC_BYTES", 0)
    monkeypatch.setattr(snapshot, "_prefetched", {})
    path = tmp_path / "dump.hwsnap"
    old, new = _filled(1000), _filled(1200)
    write_snapshot(path, old.engine.keyspace.dbs)
    snapshot.prefetch(path)
    write_snapshot(path, new.engine.keyspace.dbs)  # renamed over it: another file
    dbs = _fresh()
    assert load_snapshot(path, dbs) == 4
    assert exact_state(dbs) == exact_state(new.engine.keyspace.dbs)
    assert not snapshot._prefetched  # (and the stale copy's file is closed)
    snapshot.prefetch(path)
    with open(path, "r+b") as f:  # the same file, written in place: another size or time
        f.seek(0, os.SEEK_END)
        f.write(b"\0")
    with pytest.raises(SnapshotError):
        load_snapshot(path, _fresh())  # read again, and the byte added makes it invalid
    snapshot.prefetch(tmp_path / "missing.hwsnap")
    assert not snapshot._prefetched


def test_a_hash_keeps_its_encoding_and_old_records_derive_it(tmp_path: Path) -> None:
    h = Harness()
    c = h.client()
    h.call(c, "HSET", "big", *[x for i in range(600) for x in (f"f{i}", i)])
    h.call(c, "HSET", "long", "f", "v" * 70)
    h.call(c, "HSET", "shrunk", *[x for i in range(600) for x in (f"f{i}", i)])
    h.call(c, "HDEL", "shrunk", *[f"f{i}" for i in range(590)])  # (never back to listpack)
    h.call(c, "HSET", "small", "a", "1")
    path = tmp_path / "dump.hwsnap"
    snapshot.write_snapshot(path, h.engine.keyspace.dbs)
    fresh = Harness()
    snapshot.load_snapshot(path, fresh.engine.keyspace.dbs)
    c2 = fresh.client()
    for key, encoding in (("big", b"hashtable"), ("long", b"hashtable"),
                          ("shrunk", b"hashtable"), ("small", b"listpack")):  # fmt: skip
        assert fresh.call(c2, "OBJECT", "ENCODING", key) == encoding, key
    # a file written before HASH2 (a HASH record: no encoding) reads it from the sizes


def _old_hash_record(pairs: list[tuple[bytes, bytes]]) -> bytes:
    """A HASH record's body (after its key), as files before HASH2 hold it."""

    def blob(raw: bytes) -> bytes:
        return struct.pack("<Q", len(raw)) + raw

    body = struct.pack("<Q", len(pairs)) + b"".join(blob(f) + blob(v) for f, v in pairs)
    return body + struct.pack("<q", -1)


def _read_zset_record(pairs: list[tuple[bytes, float]]) -> tuple[object, int]:
    inp = snapshot_records._In(_zset_record(pairs), "test")
    return snapshot_records._read_plain(inp, snapshot_records.ZSET)


def test_an_old_hash_record_gets_its_encoding_from_its_sizes() -> None:
    for pairs, listpack in (
        ([(b"f%d" % i, b"v") for i in range(512)], True),
        ([(b"f%d" % i, b"v") for i in range(513)], False),
        ([(b"f", b"v" * 65)], False),
    ):
        value, expire = snapshot_records._read_plain(
            snapshot_records._In(_old_hash_record(pairs), "test"), snapshot_records.HASH
        )
        assert expire == -1 and len(value) == len(pairs)  # type: ignore[arg-type]
        assert value.listpack is listpack  # type: ignore[attr-defined]


def _pure_blobs(data: bytes, n: int, scored: bool, ready: int) -> tuple[list[bytes], int]:
    """``_In.blobs`` by the Python loop: what it returns and where it stops, or the error."""
    saved = snapshot_records._SPLIT
    snapshot_records._SPLIT = None
    try:
        inp = snapshot_records._In(data[:ready], "f")
        try:
            return inp.blobs(n, scored), inp.pos
        except SnapshotError as exc:
            return [str(exc).encode()], -1
    finally:
        snapshot_records._SPLIT = saved


@given(
    st.lists(st.binary(max_size=40), max_size=30),
    st.booleans(),
    st.integers(0, 40),
    st.integers(0, 2000),
)
def test_the_c_splitter_agrees_with_the_python_loop(
    words: list[bytes], scored: bool, extra: int, cut: int
) -> None:
    """The compiled build's splitter (``_blobs.c``) reads the same fields as the Python loop,
    for any count, with or without scores, also when the bytes end early (the same error at
    the same offset) or when the count asks for more fields than there are bytes."""
    if snapshot_records._SPLIT is None:
        pytest.skip("the pure build (no _blobs module)")
    tail = b"\x01" * 8 if scored else b""
    data = b"".join(struct.pack("<Q", len(w)) + w + tail for w in words)
    ready = min(cut, len(data))
    for n in (len(words), len(words) + extra, max(0, len(words) - extra)):
        inp = snapshot_records._In(data[:ready], "f")
        try:
            got: tuple[list[bytes], int] = (inp.blobs(n, scored), inp.pos)
        except SnapshotError as exc:
            got = ([str(exc).encode()], -1)
        assert got == _pure_blobs(data, n, scored, ready)
    # a count far beyond the bytes (a corrupt file) is refused, not allocated
    with pytest.raises(SnapshotError):
        snapshot_records._In(data, "f").blobs(2**62)


def test_the_c_splitter_continues_where_the_bytes_have_not_arrived() -> None:
    """With the file still arriving (``wait_for``), the fields past the bytes that are there
    are read once they come."""
    if snapshot_records._SPLIT is None:
        pytest.skip("the pure build (no _blobs module)")
    words = [b"a" * i for i in range(50)]
    data = b"".join(struct.pack("<Q", len(w)) + w for w in words)
    inp = snapshot_records._In(data, "f", 0, lambda end: end)
    inp.ready = 300  # (the first fields are there, the rest come through wait_for)
    assert inp.blobs(len(words)) == words
    assert inp.pos == len(data)


def _zset_record(pairs: list[tuple[bytes, float]]) -> bytes:
    body = b"\x01" + struct.pack("<Q", len(pairs))
    for member, score in pairs:
        body += struct.pack("<Q", len(member)) + member + struct.pack("<d", score)
    return body + struct.pack("<q", -1)


def _read_zset_record(pairs: list[tuple[bytes, float]]) -> tuple[object, int]:
    inp = snapshot_records._In(_zset_record(pairs), "test")
    return snapshot_records._read_plain(inp, snapshot_records.ZSET)


@pytest.mark.parametrize(
    ("pairs", "error"),
    [
        ([(b"a", 2.0), (b"b", 1.0)], "out of order"),
        ([(b"b", 1.0), (b"a", 1.0)], "out of order"),
        ([(b"a", 1.0), (b"a", 2.0)], "a member twice"),
        ([(b"a", 1.0), (b"b", float("nan"))], "not a number"),
    ],
)
def test_a_bad_sorted_set_record_is_refused(pairs: list[tuple[bytes, float]], error: str) -> None:
    """The load checks a sorted set's pairs (order, no member twice, no NaN) instead of
    walking the chunks it builds from them: a bad record is still refused."""
    with pytest.raises(SnapshotError, match=error):
        _read_zset_record(pairs)


def test_a_good_sorted_set_record_loads_checked() -> None:
    pairs = [(b"m%05d" % i, float(i // 3)) for i in range(1000)]
    value, expire = _read_zset_record(pairs)
    assert expire == -1
    value.check_invariants()  # type: ignore[attr-defined]
    assert list(value) == [(score, member) for member, score in pairs]  # type: ignore[call-overload]
