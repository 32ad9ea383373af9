"""Snapshot format versions and the load's failure modes (issue #6): version 2 (columnar node
chunks, loaded without per-entry work) is written; version 1 files still load; unknown versions
are refused by number; a damaged file loads nothing, also when its checksum is computed by a
thread while the nodes are built."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

import headwater.persistence.snapshot as snapshot
from headwater.keyspace import Database
from headwater.persistence.snapshot import SnapshotError, load_snapshot, write_snapshot
from headwater.stream.stream import Stream
from tests.unit.conftest import Harness
from tests.unit.test_rewrite import exact_state


def _filled(entries: int = 3000) -> Harness:
    """Streams with several chunks of nodes, tombstones, other field names, a group with
    pending entries, IDMP maps, a TTL, and a string and a hash beside them."""
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
    h.call(c, "XADD", "t", "1-1", "f", "v")
    h.call(c, "PEXPIRE", "t", 100_000)
    h.call(c, "SET", "k", "v")
    h.call(c, "HSET", "h", "a", "1")
    return h


def _fresh() -> list[Database]:
    return Harness().engine.keyspace.dbs


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
            for buf in (node.ms, node.seq, node.offsets):
                out.blob(buf.tobytes())
            out.blob(node.blob)
            out.blob(node.tomb if node.tomb is not None else b"")
        out.u64(len(s.groups))
        for group in s.groups.values():
            snapshot._write_group(out, group)
        snapshot._write_idmp(out, s.idmp)

    original = snapshot._write_stream
    snapshot._write_stream = stream_v1  # type: ignore[assignment]
    try:
        write_snapshot(path, dbs)
    finally:
        snapshot._write_stream = original
    data = bytearray(path.read_bytes())
    data[6:8] = struct.pack("<H", 1)
    data[-4:] = struct.pack("<I", snapshot.zlib.crc32(data[:-4]))
    path.write_bytes(bytes(data))


def test_version_2_round_trip_across_chunks(tmp_path: Path) -> None:
    h = _filled()
    path = tmp_path / "dump.hwsnap"
    write_snapshot(path, h.engine.keyspace.dbs)
    assert path.read_bytes()[6:8] == struct.pack("<H", 2)
    dbs = _fresh()
    assert load_snapshot(path, dbs) == 4
    assert exact_state(dbs) == exact_state(h.engine.keyspace.dbs)
    stream = dbs[0].data[b"s"]
    assert len(stream.nodes) > snapshot.CHUNK_NODES  # more than one chunk
    assert stream.nodes[0].fields is stream.nodes[1].fields  # shared, not one copy per node


def test_version_1_files_still_load(tmp_path: Path) -> None:
    h = _filled(400)
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
    data[6:8] = struct.pack("<H", 3)
    path.write_bytes(bytes(data))
    with pytest.raises(SnapshotError, match="snapshot version 3 is not supported"):
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
