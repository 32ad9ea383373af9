"""A snapshot loaded while it arrives from a primary, without a file (issue 17, full sync <= 2x
a snapshot load): ``SnapshotBuffer`` filled by one thread while ``load_snapshot_buffer``
parses it in another, with the size given at once (``$<size>``) or only at the end (the EOF
form). Whatever goes wrong (the transfer cut short, a damaged byte, an end in the wrong place)
the load raises and the databases stay empty: a replica never applies a partial snapshot."""

from __future__ import annotations

import io
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from headwater.keyspace import Database
from headwater.persistence.snapshot import (
    SnapshotBuffer,
    SnapshotError,
    load_snapshot,
    load_snapshot_buffer,
    write_snapshot_to,
)
from headwater.stream.node import Node
from headwater.stream.stream import Stream
from tests.unit.test_rewrite import exact_state
from tests.unit.test_snapshot_format import _filled, _fresh

MARK = b"m" * 40


def _payload(entries: int = 3000) -> tuple[bytes, list[Database]]:
    h = _filled(entries)
    out = io.BytesIO()
    write_snapshot_to(out, h.engine.keyspace.dbs, [b"#!lua name=lib\nreturn 1"])
    return out.getvalue(), h.engine.keyspace.dbs


def _load_while(
    buffer: SnapshotBuffer, feed: Callable[[], None]
) -> tuple[list[Database], int | BaseException, list[Node], list[bytes]]:
    """Run the load in a thread while ``feed`` writes (as the replica's event loop does)."""
    dbs = _fresh()
    lazy: list[Node] = []
    libraries: list[bytes] = []
    result: list[int | BaseException] = []

    def load() -> None:
        try:
            result.append(load_snapshot_buffer(buffer, dbs, lazy, libraries))
        except BaseException as exc:  # (reported below)
            result.append(exc)

    thread = threading.Thread(target=load)
    thread.start()
    feed()
    thread.join(timeout=30)
    assert not thread.is_alive(), "the load did not end"
    return dbs, result[0], lazy, libraries


def _in_pieces(buffer: SnapshotBuffer, data: bytes, piece: int = 4093) -> None:
    for i in range(0, len(data), piece):
        buffer.write(data[i : i + piece])


def test_sized_snapshot_loads_while_it_arrives() -> None:
    data, source = _payload()
    buffer = SnapshotBuffer(len(data), "test")
    dbs, keys, lazy, libraries = _load_while(buffer, lambda: _in_pieces(buffer, data))
    assert keys == 4
    assert lazy  # the nodes keep their buffers in the received bytes until used
    assert libraries == [b"#!lua name=lib\nreturn 1"]
    assert exact_state(dbs) == exact_state(source)


@pytest.mark.parametrize("piece", [4093, 1 << 20])
def test_eof_form_ends_where_the_mark_was_found(piece: int) -> None:
    """The EOF form: the size is known only at the end, and the bytes after the mark (the
    stream that follows) were written too: they are not part of the snapshot. In one piece
    with a stream longer than the mark, the checksum thread must not sum past the end (it
    once did, when the mark was looked for after the piece was added: seen in CI as a full
    sync refused for a checksum mismatch)."""
    data, source = _payload()
    stream = b"*1\r\n$4\r\nPING\r\n" * 50
    buffer = SnapshotBuffer(None, "test", capacity=len(data) + 4096, mark=MARK)
    dbs, keys, _lazy, _libraries = _load_while(
        buffer, lambda: _in_pieces(buffer, data + MARK + stream, piece)
    )
    assert keys == 4
    assert exact_state(dbs) == exact_state(source)
    assert buffer.size == len(data)
    assert bytes(buffer.after_end) == stream


def test_eof_form_mark_split_between_pieces() -> None:
    """The mark arrives in two reads (its first byte alone at the end of one)."""
    data, source = _payload()
    buffer = SnapshotBuffer(None, "test", capacity=len(data) + 4096, mark=MARK)

    def feed() -> None:
        buffer.write(data + MARK[:1])
        buffer.write(MARK[1:] + b"+after")

    dbs, keys, _lazy, _libraries = _load_while(buffer, feed)
    assert (keys, buffer.size, bytes(buffer.after_end)) == (4, len(data), b"+after")
    assert exact_state(dbs) == exact_state(source)


def test_eof_form_needs_a_mark() -> None:
    with pytest.raises(SnapshotError, match="needs a mark of 40 bytes"):
        SnapshotBuffer(None, "test", capacity=100, mark=b"short")


def test_transfer_cut_short_loads_nothing() -> None:
    data, _source = _payload()
    buffer = SnapshotBuffer(len(data), "test")

    def feed() -> None:
        _in_pieces(buffer, data[: len(data) // 2])
        buffer.fail(ConnectionError("the primary went away"))

    dbs, result, _lazy, _libraries = _load_while(buffer, feed)
    assert isinstance(result, ConnectionError)
    assert all(not db.data for db in dbs)


@pytest.mark.parametrize("sized", [True, False])
def test_a_damaged_byte_loads_nothing(sized: bool) -> None:
    data, _source = _payload()
    damaged = bytearray(data)
    damaged[len(data) // 2] ^= 0x40  # inside a node's blob: only the checksum sees it
    size, mark = (len(data), b"") if sized else (None, MARK)
    buffer = SnapshotBuffer(size, "test", capacity=len(data) + 64, mark=mark)

    def feed() -> None:
        _in_pieces(buffer, bytes(damaged) + mark)

    dbs, result, _lazy, _libraries = _load_while(buffer, feed)
    assert isinstance(result, SnapshotError)
    assert "checksum" in str(result)
    assert all(not db.data for db in dbs)


def test_an_end_in_the_wrong_place_loads_nothing() -> None:
    """The mark found before the snapshot's own end (or after it, or at its very start):
    refused."""
    data, _source = _payload()
    for sent in (data[:-10] + MARK + data[-10:], data + b"xyz" + MARK, MARK + data):
        buffer = SnapshotBuffer(None, "test", capacity=len(data) + 64, mark=MARK)

        def feed(b: SnapshotBuffer = buffer, d: bytes = sent) -> None:
            _in_pieces(b, d)

        dbs, result, _lazy, _libraries = _load_while(buffer, feed)
        assert isinstance(result, SnapshotError), sent[:60]
        assert all(not db.data for db in dbs)


def test_more_than_the_capacity_is_refused() -> None:
    buffer = SnapshotBuffer(None, "test", capacity=100, mark=MARK)
    with pytest.raises(SnapshotError, match="more than 100 bytes"):
        buffer.write(b"x" * 101)
    buffer.fail(SnapshotError("stop"))
    buffer.finish()


def test_snapshot_written_right_after_a_lazy_load_is_the_same_bytes(tmp_path: Path) -> None:
    """A full sync's child often writes right after the primary loaded its snapshot: lazy
    nodes are written from the loaded bytes as they are, without being materialized."""
    data, _source = _payload()
    path = tmp_path / "a.hwsnap"
    path.write_bytes(data)
    dbs = _fresh()
    lazy: list[Node] = []
    load_snapshot(path, dbs, lazy)
    assert lazy and all(node.is_lazy for node in lazy)
    again = io.BytesIO()
    write_snapshot_to(again, dbs, [b"#!lua name=lib\nreturn 1"])
    assert again.getvalue() == data
    assert all(node.is_lazy for node in lazy)


def test_a_chunk_no_longer_as_loaded_is_written_node_by_node(tmp_path: Path) -> None:
    """A chunk whose nodes are no longer all lazy and back to back (one materialized by a
    read) is written node by node: the same bytes. And a stream with a new node and a
    tombstone, loaded lazily and written again, loads as the state it came from."""
    data, source = _payload()
    path = tmp_path / "a.hwsnap"
    path.write_bytes(data)
    dbs = _fresh()
    load_snapshot(path, dbs, [])
    stream = dbs[0].data[b"s"]
    assert isinstance(stream, Stream)
    stream.nodes[3].materialize()
    again = io.BytesIO()
    write_snapshot_to(again, dbs, [b"#!lua name=lib\nreturn 1"])
    assert again.getvalue() == data  # (materializing changes no byte)
    h = _filled()
    c = h.client()
    h.call(c, "XADD", "s", "9999999-0", "f", "new")  # a new last node
    h.call(c, "XDEL", "s", "100-1")  # a tombstone in a loaded node
    path.write_bytes(_bytes_of(h.engine.keyspace.dbs))
    dbs = _fresh()
    load_snapshot(path, dbs, [])
    reloaded = _fresh()
    buffer = SnapshotBuffer(None, "test", capacity=len(data) + 4096, mark=MARK)
    buffer.write(_bytes_of(dbs) + MARK)
    load_snapshot_buffer(buffer, reloaded)
    assert exact_state(reloaded) == exact_state(h.engine.keyspace.dbs)
    assert exact_state(source)  # (the first harness is untouched)


def _bytes_of(dbs: list[Database]) -> bytes:
    out = io.BytesIO()
    write_snapshot_to(out, dbs)
    return out.getvalue()
