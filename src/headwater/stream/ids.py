"""Stream entry IDs: ``(ms, seq)`` pairs of uint64, ordered lexicographically.

IDs are plain tuples so that comparisons, sorting and bisecting are done in C. Parsing follows
Redis's ``streamGenericParseIDOrReply`` (see STREAMS-REFERENCE §1.1): the part before the first
``-`` is the milliseconds, the rest the sequence; each part is an unsigned 64-bit integer as C's
``strtoull`` reads it (leading spaces, ``+`` and leading zeros are accepted; empty parts,
trailing junk, negatives and overflow are not).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Final, cast

from mypy_extensions import i64

from headwater.errors import err

StreamID = tuple[int, int]

UINT64_MAX = 2**64 - 1
MIN_ID: StreamID = (0, 0)
MAX_ID: StreamID = (UINT64_MAX, UINT64_MAX)

INVALID_ID = err("Invalid stream ID specified as stream command argument")
ID_TOO_SMALL = err("The ID specified in XADD is equal or smaller than the target stream top item")

#: Marker for ``<ms>-*`` (XADD only): the sequence is chosen by the stream.
AUTO_SEQ = -1


def _format_parts_pure(ms: int, seq: int) -> bytes:
    return b"%d-%d" % (ms, seq)


def _native_format_parts() -> Callable[[int, int], bytes] | None:
    """The C formatter (``_pack.c``), or None when it is not built (the pure build)."""
    try:
        module = importlib.import_module("headwater.stream._pack")
    except ImportError:
        return None
    return cast(Callable[[int, int], bytes], module.format_id)


#: ``b"%d-%d" % (ms, seq)``, in C where built (compiled, the bytes formatting costs ~1.5k
#: instructions, once per XADD and once per entry of every read's reply)
format_id_parts: Final[Callable[[int, int], bytes]] = _native_format_parts() or _format_parts_pure


def format_id(sid: StreamID) -> bytes:
    ms, seq = sid
    return format_id_parts(ms, seq)


def _native_plain_id() -> Callable[[bytes], StreamID | None] | None:
    """The C parser of plain IDs (``_pack.c``), or None when it is not built."""
    try:
        module = importlib.import_module("headwater.stream._pack")
    except ImportError:
        return None
    return cast(Callable[[bytes], "StreamID | None"], module.plain_id)


def _plain_id(raw: bytes) -> StreamID | None:
    """``<ms>-<seq>`` with both parts plain decimal of at most 18 digits (what clients send,
    and what every ID reply looks like), parsed digit by digit on machine words (``i64``:
    compiled, a few ns a digit and no objects, where an ``int`` past 2**30 goes through a
    boxed multiply per digit); None for anything else, left to ``parse_id``'s general rules."""
    n: i64 = len(raw)
    ms: i64 = 0
    i: i64 = 0
    while i < n and i <= 18:
        digit: i64 = raw[i] - 48
        if digit < 0 or digit > 9:
            break
        ms = ms * 10 + digit
        i += 1
    if i == 0 or i > 18 or i >= n - 1 or raw[i] != 45 or n - i - 1 > 18:
        return None
    seq: i64 = 0
    i += 1
    while i < n:
        digit = raw[i] - 48
        if digit < 0 or digit > 9:
            return None
        seq = seq * 10 + digit
        i += 1
    return (ms, seq)


def _uint64(raw: bytes) -> int | None:
    """Redis's string2ull: a strict int64 first, else C strtoull (spaces, '+', zeros ok)."""
    if raw.isdigit():  # the usual case; 19 digits always fit
        value = int(raw)
        return value if len(raw) < 20 or value <= UINT64_MAX else None
    if not raw:
        return None
    text = raw.lstrip(b" \t\n\v\f\r")
    if text[:1] == b"+":
        text = text[1:]
    if not text or not text.isdigit():
        return None
    value = int(text)
    return value if value <= UINT64_MAX else None


#: ``_plain_id``, in C where built (a replica parses one per applied XADD)
plain_id: Final[Callable[[bytes], StreamID | None]] = _native_plain_id() or _plain_id


def parse_id(
    raw: bytes, *, strict: bool = True, missing_seq: int = 0, allow_auto_seq: bool = False
) -> StreamID:
    """Parse an explicit ID; raises INVALID_ID.

    ``strict`` refuses ``-`` and ``+``; ``missing_seq`` is used for ``<ms>`` without a sequence
    (0 for starts, UINT64_MAX for range ends); ``allow_auto_seq`` admits ``<ms>-*`` (XADD),
    returned with ``seq == AUTO_SEQ``."""
    plain = plain_id(raw)
    if plain is not None:
        return plain
    if len(raw) > 127:
        raise INVALID_ID
    if not strict and len(raw) == 1:
        if raw == b"-":
            return MIN_ID
        if raw == b"+":
            return MAX_ID
    ms_part, dash, seq_part = raw.partition(b"-")
    ms = _uint64(ms_part)
    if ms is None:
        raise INVALID_ID
    if not dash:
        return (ms, missing_seq)
    if allow_auto_seq and seq_part == b"*":
        return (ms, AUTO_SEQ)
    seq = _uint64(seq_part)
    if seq is None:
        raise INVALID_ID
    return (ms, seq)


def incr_id(sid: StreamID) -> StreamID | None:
    """The next ID, or None past the maximum."""
    ms, seq = sid
    if seq < UINT64_MAX:
        return (ms, seq + 1)
    if ms < UINT64_MAX:
        return (ms + 1, 0)
    return None


def decr_id(sid: StreamID) -> StreamID | None:
    """The previous ID, or None below 0-0."""
    ms, seq = sid
    if seq > 0:
        return (ms, seq - 1)
    if ms > 0:
        return (ms - 1, UINT64_MAX)
    return None


def parse_range_bound(raw: bytes, *, is_start: bool) -> StreamID:
    """A range argument of XRANGE/XREVRANGE/XPENDING/XAUTOCLAIM: non-strict, with ``(`` for an
    exclusive bound. Raises INVALID_ID or the interval errors."""
    if len(raw) > 1 and raw[:1] == b"(":
        sid = parse_id(raw[1:], strict=True, missing_seq=0 if is_start else UINT64_MAX)
        moved = incr_id(sid) if is_start else decr_id(sid)
        if moved is None:
            which = "start" if is_start else "end"
            raise err(f"invalid {which} ID for the interval")
        return moved
    return parse_id(raw, strict=False, missing_seq=0 if is_start else UINT64_MAX)


def follows(sid: StreamID, last: StreamID) -> bool:
    """The one rule of entry IDs: a new entry's ID is above the last ID its stream gave out,
    whoever chose it (XADD's ``*`` or explicit ID, a replayed effect, a region's ID mode).
    ``Stream.append``/``extend`` refuse any other (``above``)."""
    return sid > last


def above(sid: StreamID, last: StreamID) -> StreamID:
    """``sid`` if it ``follows`` last, else XADD's error."""
    if sid <= last:
        raise ID_TOO_SMALL
    return sid
