"""XRANGE pages read as the reply's bytes and split straight into Arrow arrays.

An executor reads a partition one ``XRANGE key (<after> <until> COUNT <page>`` at a time. Parsed
by hiredis, a page of 10,000 entries becomes 50,000 Python objects that the Arrow conversion
then walks again: about 1 us an entry on the executor, twice what the server spends. Here the
command is sent on a connection of the node's client and the reply's bytes, as they arrive,
are scanned by ``_pages.split_xrange`` (C): the entry IDs, field names and values each end up
in one buffer with Arrow's int32 offsets, and each entry's first pair gives a map column's
offsets. Arrow arrays are made over those buffers without copying them again.

A reply that is not a page of entries (an error: ``MOVED``, ``ASK``, ``LOADING``, a key of
another type) is read to its end, so the connection stays in step, and the command is sent
again through ``Nodes.call``, which follows redirections and raises the others as redis-py
does; XRANGE has no effect, so running it twice is harmless.

Without the C module (the pure build) ``split_xrange_py`` does the same splitting with
hiredis, and gives the same buffers (``tests/spark/test_pages.py`` checks both on generated
replies).
"""

from __future__ import annotations

import importlib
import itertools
import socket
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import hiredis
import pyarrow as pa  # type: ignore[import-untyped]
import redis
from redis.connection import Connection

from headwater.spark import nodes as hw_nodes
from headwater.spark.offsets import StreamId

#: (count, ids, id offsets, pair offsets, fields, field offsets, values, value offsets)
Columns = tuple[int, bytes, bytes, bytes, bytes, bytes, bytes, bytes]
#: where a scan of a partial reply stopped (opaque: handed back with more bytes)
Progress = tuple[int, ...]
Splitter = Callable[[Any, Progress | None], tuple[Progress | None, Columns | None]]

#: bytes asked of the socket at a time (a page of 10,000 100-byte entries is ~1.5 MB)
READ_SIZE = 1 << 20
_OFFSET = array("i").itemsize  # Arrow's binary offsets are int32


@dataclass(frozen=True)
class Page:
    """One XRANGE reply as Arrow arrays: ``ids``, ``fields`` and ``values`` are binary;
    entry i's pairs are ``fields[pair_offsets[i]:pair_offsets[i + 1]]`` and the same of
    ``values``."""

    ids: pa.Array
    pair_offsets: pa.Array
    fields: pa.Array
    values: pa.Array

    def __len__(self) -> int:
        return len(self.ids)

    def last_id(self) -> bytes:
        last: bytes = self.ids[len(self.ids) - 1].as_py()
        return last


def page_of(columns: Columns) -> Page:
    count, ids, id_offsets, pair_offsets, fields, field_offsets, values, value_offsets = columns
    pairs = len(field_offsets) // _OFFSET - 1
    return Page(
        _binary(count, id_offsets, ids),
        pa.Array.from_buffers(pa.int32(), count + 1, [None, pa.py_buffer(pair_offsets)]),
        _binary(pairs, field_offsets, fields),
        _binary(pairs, value_offsets, values),
    )


def _binary(count: int, offsets: bytes, data: bytes) -> pa.Array:
    return pa.Array.from_buffers(
        pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(data)]
    )


# -- splitting a reply ---------------------------------------------------------------------


def split_xrange_py(
    buf: Any, progress: Progress | None = None
) -> tuple[Progress | None, Columns | None]:
    """``_pages.split_xrange`` with hiredis (the pure build): ``((0,), None)`` while ``buf``
    holds no whole reply (``progress`` is not used: the reply is parsed again from its start),
    ValueError unless it holds exactly one page of entries."""
    reader = hiredis.Reader()
    reader.feed(bytes(buf))
    try:
        reply = reader.gets()
    except hiredis.ProtocolError as exc:
        raise ValueError("not an XRANGE reply") from exc
    if reply is False:
        return (0,), None
    if reader.has_data() or not _is_page(reply):
        raise ValueError("not an XRANGE reply")
    return None, columns_of(reply)


def _is_page(reply: Any) -> bool:
    return isinstance(reply, list) and all(
        isinstance(entry, list)
        and len(entry) == 2
        and isinstance(entry[0], bytes)
        and isinstance(entry[1], list)
        and len(entry[1]) % 2 == 0
        and all(isinstance(word, bytes) for word in entry[1])
        for entry in reply
    )


def columns_of(entries: Sequence[Any]) -> Columns:
    """The columns of a parsed page (``[[id, [f1, v1, ...]], ...]``, bytes)."""
    ids = [entry[0] for entry in entries]
    flats = [entry[1] for entry in entries]
    pairs = list(itertools.chain.from_iterable(flats))
    fields, values = pairs[0::2], pairs[1::2]
    datas = b"".join(ids), b"".join(fields), b"".join(values)
    if max(map(len, datas)) > 2**31 - 1:
        raise OverflowError("an XRANGE page over Arrow's 2 GiB offsets")
    pair_offsets = array("i", [0, *itertools.accumulate(len(flat) >> 1 for flat in flats)])
    return (
        len(entries),
        datas[0],
        _offsets(ids),
        pair_offsets.tobytes(),
        datas[1],
        _offsets(fields),
        datas[2],
        _offsets(values),
    )


def _offsets(words: Sequence[bytes]) -> bytes:
    return array("i", [0, *itertools.accumulate(map(len, words))]).tobytes()


def _splitter() -> Splitter:
    try:
        module = importlib.import_module("headwater.spark._pages")
    except ImportError:
        return split_xrange_py
    split: Splitter = module.split_xrange
    return split


split_xrange: Splitter = _splitter()


# -- reading a page ------------------------------------------------------------------------


def read_page(nodes: hw_nodes.Nodes, key: str, args: Sequence[Any]) -> Page:
    """XRANGE ``args`` on the node that owns ``key``, as a Page (see the module doc)."""
    columns = _read_columns(nodes.client_for(key), args)
    if columns is None:
        return page_of(columns_of(nodes.call(key, *args)))
    return page_of(columns)


def read_pages(
    nodes: hw_nodes.Nodes,
    key: str,
    after: str,
    until: str,
    page_size: int,
    limit: int | None = None,
) -> Iterator[Page]:
    """The entries of ``key`` in ``(after, until]`` (IDs as ``ms-seq``), page by page, at most
    ``limit`` of them."""
    start, left = "(" + after, limit
    while left is None or left > 0:
        count = page_size if left is None else min(page_size, left)
        page = read_page(nodes, key, ("XRANGE", key, start, until, "COUNT", count))
        if len(page):
            yield page
        if len(page) < count:
            return
        if left is not None:
            left -= len(page)
        start = "(" + page.last_id().decode()


def entry_ids(
    nodes: hw_nodes.Nodes, key: str, after: StreamId, until: StreamId, limit: int, page: int
) -> list[bytes]:
    """Up to ``limit`` entry IDs (raw, unparsed) in ``(after, until]``, paging with XRANGE.

    Redis has no IDs-only range read, so the payloads cross the wire and are dropped here:
    this is what a count limit (``maxRecordsPerBatch``) costs, once per admitted entry (split
    in C like an executor's pages, the values never become Python objects)."""
    ids: list[bytes] = []
    for found in read_pages(nodes, key, str(after), str(until), page, limit):
        ids.extend(found.ids.to_pylist())
    return ids


def _read_columns(client: redis.Redis, args: Sequence[Any]) -> Columns | None:
    """The reply's columns, or None if it was no page (read to its end all the same)."""
    pool = client.connection_pool
    connection = pool.get_connection()
    try:
        packed = bytes(hiredis.pack_command(tuple(args)))
        connection.send_packed_command([packed])  # type: ignore[no-untyped-call]
        return _receive(connection)
    except OSError as exc:
        connection.disconnect()  # type: ignore[no-untyped-call]
        if isinstance(exc, socket.timeout):
            raise redis.TimeoutError(f"XRANGE reply: {exc}") from exc
        raise redis.ConnectionError(f"XRANGE reply: {exc}") from exc
    except BaseException:
        connection.disconnect()  # type: ignore[no-untyped-call]  # a reply half read
        raise
    finally:
        pool.release(connection)


def _receive(connection: Connection) -> Columns | None:
    sock = connection._sock
    if sock is None:
        raise redis.ConnectionError("not connected")
    buf, filled, progress = bytearray(READ_SIZE), 0, None
    while True:
        if filled == len(buf):
            buf.extend(bytes(len(buf)))
        got = sock.recv_into(memoryview(buf)[filled:])
        if not got:
            raise redis.ConnectionError("connection closed by the server")
        filled += got
        try:
            progress, columns = split_xrange(memoryview(buf)[:filled], progress)
        except ValueError:
            _read_to_end(sock, bytes(buf[:filled]))
            return None
        if columns is not None:
            return columns


def _read_to_end(sock: socket.socket, start: bytes) -> None:
    reader = hiredis.Reader()
    reader.feed(start)
    while reader.gets() is False:
        data = sock.recv(READ_SIZE)
        if not data:
            raise redis.ConnectionError("connection closed by the server")
        reader.feed(data)
