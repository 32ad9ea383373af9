"""Stream entries encoded as RESP straight from the packed nodes.

XRANGE, XREVRANGE, XREAD and XREADGROUP spend most of their time turning entries into reply
bytes. Going through ``Stream.range`` builds a tuple, a list and a bytes object per field and
value, and then the generic encoder walks them again; here each entry becomes one formatted
bytes object, cut straight out of the node's blob (its layout is documented in
``stream/node.py``), and a whole reply is one ``Raw``. An entry is ``[id, [f1, v1, ...]]``,
the same in RESP2 and RESP3.
"""

from __future__ import annotations

import importlib
import struct
from collections.abc import Callable
from functools import lru_cache
from typing import Final

from headwater.resp.types import Raw
from headwater.stream.ids import StreamID, format_id, format_id_parts
from headwater.stream.node import Node
from headwater.stream.stream import Entry, Stream

_U32 = struct.Struct("<I")
_SAME_FIELDS = 0


def entry_reply(entry: Entry) -> Raw:
    """One entry given as ``(id, pairs)``."""
    sid = format_id(entry[0])
    return Raw(b"*2\r\n$%d\r\n%s\r\n%s" % (len(sid), sid, _pairs_array(entry[1])))


def encode_entries(
    stream: Stream,
    start: StreamID,
    end: StreamID,
    count: int,
    reverse: bool = False,
    ids: list[StreamID] | None = None,
) -> list[bytes]:
    """The live entries with start <= ID <= end (at most ``count`` if > 0), one encoded
    ``[id, [f1, v1, ...]]`` each; their IDs are appended to ``ids`` if given."""
    parts: list[bytes] = []
    limit = count if count > 0 else -1
    for node, lo, hi in stream.spans(start, end, reverse):
        limit = _encode_span(node, lo, hi, reverse, limit, parts, ids)
        if not limit:
            break
    return parts


def encode_range(
    stream: Stream, start: StreamID, end: StreamID, count: int, reverse: bool = False
) -> tuple[Raw, int]:
    """The array of live entries with start <= ID <= end (at most ``count`` if > 0), and how
    many there are."""
    parts = encode_entries(stream, start, end, count, reverse)
    return array_of(parts), len(parts)


def array_of(parts: list[bytes]) -> Raw:
    """An array of already-encoded elements."""
    return Raw(b"*%d\r\n%s" % (len(parts), b"".join(parts)))


def _native_span() -> Callable[..., int] | None:
    """``_encode_span`` in C (``resp/_encode.c``'s ``entries_span``), or None (pure build)."""
    try:
        module = importlib.import_module("headwater.resp._encode")
    except ImportError:
        return None
    return getattr(module, "entries_span", None)


#: the C loop where built: ~0.1 us an entry against ~0.8 in compiled Python
_NATIVE_SPAN: Final = _native_span()


def _encode_span(
    node: Node,
    lo: int,
    hi: int,
    reverse: bool,
    limit: int,
    out: list[bytes],
    ids: list[StreamID] | None = None,
) -> int:
    """Append one encoded entry per live entry of node[lo:hi] to out, at most ``limit`` (-1:
    no limit); returns the limit left (negative: none was set)."""
    node.materialize()
    if _NATIVE_SPAN is not None:
        return _NATIVE_SPAN(
            node.fields, node.ms, node.seq, node.offsets, node.blob, node.tomb, lo, hi,
            reverse, limit, out, ids,
        )  # fmt: skip
    return _encode_span_pure(node, lo, hi, reverse, limit, out, ids)


def _encode_span_pure(
    node: Node,
    lo: int,
    hi: int,
    reverse: bool,
    limit: int,
    out: list[bytes],
    ids: list[StreamID] | None = None,
) -> int:
    """``_encode_span`` in Python (the pure build; the reference the C loop is tested on)."""
    ms, seq, offsets, blob, tomb = node.ms, node.seq, node.offsets, node.blob, node.tomb
    unpack = _U32.unpack_from
    fields = node.fields
    head = _pairs_head(fields)
    if not reverse and not node.deleted and len(fields) == 1:
        return _encode_plain_span(node, lo, hi, limit, out, ids, head)
    indexes = range(hi - 1, lo - 1, -1) if reverse else range(lo, hi)
    ntomb = len(tomb) if tomb is not None else 0
    for i in indexes:
        if not limit:
            break
        if i < ntomb and tomb[i]:  # type: ignore[index]
            continue
        if ids is not None:
            ids.append((ms[i], seq[i]))
        sid = format_id_parts(ms[i], seq[i])
        pos = offsets[i]
        if blob[pos] == _SAME_FIELDS and len(fields) == 1:
            (n,) = unpack(blob, pos + 1)
            pos += 5
            out.append(_entry_head(sid, head, n) + blob[pos : pos + n] + b"\r\n")
        else:
            out.append(b"*2\r\n$%d\r\n%s\r\n%s" % (len(sid), sid, _pairs_array(node.pairs_at(i))))
        limit -= 1
    return limit


def _encode_plain_span(
    node: Node,
    lo: int,
    hi: int,
    limit: int,
    out: list[bytes],
    ids: list[StreamID] | None,
    head: bytes,
) -> int:
    """``_encode_span`` forward over a node without tombstones whose master entry has one
    field (the common stream shape): the loop walks three zipped slices instead of indexing."""
    if limit >= 0:
        hi = min(hi, lo + limit)
    blob, unpack, pairs_at = node.blob, _U32.unpack_from, node.pairs_at
    ms, seq = node.ms[lo:hi], node.seq[lo:hi]
    i = lo
    for m, s, pos in zip(ms, seq, node.offsets[lo:hi], strict=True):
        sid = format_id_parts(m, s)
        if blob[pos] == _SAME_FIELDS:
            (n,) = unpack(blob, pos + 1)
            out.append(_entry_head(sid, head, n) + blob[pos + 5 : pos + 5 + n] + b"\r\n")
        else:
            out.append(b"*2\r\n$%d\r\n%s\r\n%s" % (len(sid), sid, _pairs_array(pairs_at(i))))
        i += 1
    if ids is not None:
        ids += zip(ms, seq, strict=True)
    return limit - (hi - lo) if limit >= 0 else limit


def _entry_head(sid: bytes, head: bytes, n: int) -> bytes:
    """An entry up to its one value, whose ``n`` bytes follow. (The value, a slice of the
    node's bytearray, is concatenated rather than formatted: ``%s`` of a bytearray takes
    CPython's slow generic path, ~1 us a value compiled.)"""
    return b"*2\r\n$%d\r\n%s\r\n%s$%d\r\n" % (len(sid), sid, head, n)


@lru_cache(maxsize=4096)
def _pairs_head(fields: tuple[bytes, ...]) -> bytes:
    """What precedes the first value of a shared-fields entry: the pairs array's header and,
    for the common one-field stream, the field name too."""
    head = b"*%d\r\n" % (2 * len(fields))
    if len(fields) == 1:
        head += b"$%d\r\n%s\r\n" % (len(fields[0]), fields[0])
    return head


def _pairs_array(pairs: list[bytes]) -> bytes:
    parts = [b"*%d\r\n" % len(pairs)]
    parts += [b"$%d\r\n%s\r\n" % (len(item), item) for item in pairs]
    return b"".join(parts)
