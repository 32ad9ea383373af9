"""Stream IDs as the connector's offsets, and the JSON the user and Spark's checkpoint carry.

Theory of operation: an offset is a JSON object ``{"<stream key>": "<ms>-<seq>"}``, one entry per
stream of the ``streams`` option and in that order (Spark compares offsets as JSON text, so the
order must be stable). The value is the **last ID consumed**: the next read starts strictly after
it (``XRANGE key (<id> ...``), as XREAD and consumer groups count. ``0-0`` means "before
everything" (no entry can have ID 0-0). Ending offsets (batch reads) are inclusive.

This module is pure: parsing, formatting and ID arithmetic, no I/O and no pyspark.
"""

from __future__ import annotations

import json
from typing import NamedTuple

UINT64_MAX = 2**64 - 1


class OffsetError(ValueError):
    """An offset, ID or offsets JSON the user gave (or a checkpoint holds) is malformed."""


class StreamId(NamedTuple):
    """An entry ID; tuple ordering is Redis's (ms first, then seq)."""

    ms: int
    seq: int

    def __str__(self) -> str:
        return f"{self.ms}-{self.seq}"


MIN_ID = StreamId(0, 0)
MAX_ID = StreamId(UINT64_MAX, UINT64_MAX)


def parse_id(text: str, *, what: str = "stream ID") -> StreamId:
    """``"<ms>-<seq>"`` or ``"<ms>"`` (seq 0), both parts unsigned 64-bit decimals."""
    ms_part, dash, seq_part = text.partition("-")
    if not _is_uint64(ms_part) or (dash and not _is_uint64(seq_part)):
        raise OffsetError(f"invalid {what} {text!r}: expected '<ms>-<seq>' (unsigned integers)")
    return StreamId(int(ms_part), int(seq_part) if dash else 0)


def _is_uint64(part: str) -> bool:
    return part.isascii() and part.isdigit() and int(part) <= UINT64_MAX


def successor(sid: StreamId) -> StreamId:
    """The smallest ID greater than ``sid`` (``sid`` itself at the maximum)."""
    if sid.seq < UINT64_MAX:
        return StreamId(sid.ms, sid.seq + 1)
    return StreamId(sid.ms + 1, 0) if sid.ms < UINT64_MAX else sid


def predecessor(sid: StreamId) -> StreamId:
    """The largest ID smaller than ``sid`` (``0-0`` stays ``0-0``)."""
    if sid.seq > 0:
        return StreamId(sid.ms, sid.seq - 1)
    return StreamId(sid.ms - 1, UINT64_MAX) if sid.ms > 0 else sid


def last_id_before_ms(ms: int) -> StreamId:
    """The exclusive lower bound that admits every entry whose time is ``>= ms``."""
    return predecessor(StreamId(ms, 0))


def exclusive(sid: StreamId) -> str:
    """An XRANGE start bound that excludes ``sid`` (Redis >= 6.2 syntax)."""
    return f"({sid}"


# -- offsets JSON --------------------------------------------------------------------------------

#: Per-stream words allowed in the offsets JSON in place of an ID.
EARLIEST = "earliest"
LATEST = "latest"


def parse_offsets_json(text: str, streams: tuple[str, ...], *, option: str) -> dict[str, str]:
    """``{"key": "<id>" | "earliest" | "latest"}`` covering exactly ``streams``; values are
    returned normalised (IDs as ``ms-seq``), words as given in lower case."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetError(f"option {option!r} is not valid JSON ({exc.msg}): {text!r}") from None
    if not isinstance(raw, dict):
        raise OffsetError(f"option {option!r} must be a JSON object {{stream: id}}: {text!r}")
    unknown = sorted(set(raw) - set(streams))
    if unknown:
        raise OffsetError(f"option {option!r} names streams not in 'streams': {unknown}")
    missing = [key for key in streams if key not in raw]
    if missing:
        raise OffsetError(f"option {option!r} has no offset for streams {missing}")
    return {key: _offset_value(raw[key], key, option) for key in streams}


def _offset_value(value: object, key: str, option: str) -> str:
    if not isinstance(value, str):
        raise OffsetError(
            f"option {option!r}: the offset of {key!r} must be a string ('<ms>-<seq>', "
            f"'earliest' or 'latest'), got {value!r}"
        )
    word = value.strip().lower()
    if word in (EARLIEST, LATEST):
        return word
    return str(parse_id(value.strip(), what=f"offset of {key!r} in option {option!r}"))


def checkpoint_offsets(offsets: dict[str, object], streams: tuple[str, ...]) -> dict[str, StreamId]:
    """Parse an offset Spark hands back (from its checkpoint). A stream the checkpoint does not
    know (added to ``streams`` since) starts at ``0-0``, as Kafka starts new partitions at the
    earliest offset; streams no longer listed are dropped."""
    parsed: dict[str, StreamId] = {}
    for key in streams:
        value = offsets.get(key)
        if value is None:
            parsed[key] = MIN_ID
        elif isinstance(value, str):
            parsed[key] = parse_id(value, what=f"checkpointed offset of {key!r}")
        else:
            raise OffsetError(f"checkpointed offset {json.dumps(offsets)} is not a stream ID map")
    return parsed


def format_offsets(offsets: dict[str, StreamId]) -> dict[str, str]:
    return {key: str(sid) for key, sid in offsets.items()}
