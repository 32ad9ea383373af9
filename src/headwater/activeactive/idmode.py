"""``active-active-id-mode``: how XADD picks an ID when several regions write one stream.

Rules (spec/ACTIVE-ACTIVE.md, seed 004):

- ``strict`` (the default): ``*``, ``<ms>`` and ``<ms>-*`` are accepted; the server picks the
  sequence. Region R (1 ≤ R ≤ C, C the region capacity) uses only the sequences
  ``R, R + C, R + 2C, …``: sequences of two regions are never equal (they differ modulo C),
  so two regions never make the same ID. The first entry of a millisecond from region 1 is
  ``…-1``, from region 2 ``…-2``, as in the seed. A full ``<ms>-<seq>`` is refused with an
  error naming the mode.
- ``semi-strict``: as strict, and a full ID above the stream's last ID is accepted (duplicates
  across regions become possible: the user chose that).
- ``liberal``: any ID above the region's own last ID (its sub-log's); ``<ms>`` gets
  sequence 0 and ``*`` works as in Redis. Duplicates across regions are possible.

In strict and semi-strict modes a new ID is above the stream's merged last ID, so what one
region sees grows monotonically. The sequence can overflow: ``*`` then moves to the next
millisecond, an explicit ``<ms>`` is refused as too small (as Redis refuses ``<ms>-*``).
"""

from __future__ import annotations

from typing import Final

from headwater.errors import ReplyError, err
from headwater.stream.ids import (
    AUTO_SEQ,
    ID_TOO_SMALL,
    MIN_ID,
    UINT64_MAX,
    StreamID,
    above,
    parse_id,
)

MODES: Final = (b"strict", b"semi-strict", b"liberal")
#: regions 1..DEFAULT_CAPACITY by default (spec: N ≤ 16)
DEFAULT_CAPACITY: Final = 16

ID_ZERO = err("The ID specified in XADD must be greater than 0-0")
FULL_ID_IN_STRICT = err(
    "a full stream ID (ms-seq) is not allowed in active-active-id-mode strict: "
    "use * or give the milliseconds only (or set active-active-id-mode semi-strict or liberal)"
)
BAD_MODE = err("active-active-id-mode must be one of strict, semi-strict, liberal")


def bad_region(region: int, capacity: int) -> ReplyError:
    return err(f"region-id must be between 1 and {capacity} (the region capacity), got {region}")


def parse_mode(raw: bytes) -> bytes:
    mode = raw.lower()
    if mode not in MODES:
        raise BAD_MODE
    return mode


def check_region(region: int, capacity: int) -> None:
    if not 1 <= region <= capacity:
        raise bad_region(region, capacity)


class IdRequest:
    """XADD's ID argument: ``*`` (ms None), ``<ms>`` or ``<ms>-*`` (seq None), or a full ID."""

    __slots__ = ("ms", "seq")

    def __init__(self, ms: int | None, seq: int | None) -> None:
        self.ms = ms
        self.seq = seq

    @staticmethod
    def parse(raw: bytes) -> IdRequest:
        # (the class named, not ``cls``: compiled, that is a direct call of the constructor)
        if raw == b"*":
            return _AUTO
        ms, seq = parse_id(raw, allow_auto_seq=True)
        if b"-" not in raw or seq == AUTO_SEQ:
            return IdRequest(ms, None)
        return IdRequest(ms, seq)


#: ``*`` (never modified: ``next_id`` only reads a request)
_AUTO: Final = IdRequest(None, None)


def region_seq_after(region: int, capacity: int, after: int | None) -> int | None:
    """The smallest sequence of this region (≡ region mod capacity, ≥ region) above
    ``after`` (None: the first); None if it would pass UINT64_MAX."""
    if after is None or after < region:
        return region
    steps = (after - region) // capacity + 1
    seq = region + steps * capacity
    return seq if seq <= UINT64_MAX else None


def next_id(
    mode: bytes,
    region: int,
    capacity: int,
    request: IdRequest,
    merged_last: StreamID,
    own_last: StreamID,
    now_ms: int,
) -> StreamID:
    """The ID of a new entry made in ``region``; raises the mode's errors."""
    if mode == b"liberal":
        return _liberal(request, merged_last, own_last, now_ms)
    if request.seq is not None:
        if mode == b"strict":
            raise FULL_ID_IN_STRICT
        return _above((request.ms or 0, request.seq), merged_last)
    if request.ms is None:
        ms = max(now_ms, merged_last[0])
        seq = region_seq_after(region, capacity, merged_last[1] if ms == merged_last[0] else None)
        if seq is None:  # this millisecond is used up: the next one
            return (ms + 1, region)
        return (ms, seq)
    ms = request.ms
    if ms < merged_last[0]:
        raise ID_TOO_SMALL
    seq = region_seq_after(region, capacity, merged_last[1] if ms == merged_last[0] else None)
    if seq is None:
        raise ID_TOO_SMALL
    return (ms, seq)


def _above(sid: StreamID, last: StreamID) -> StreamID:
    if sid == MIN_ID:
        raise ID_ZERO
    return above(sid, last)


def _liberal(
    request: IdRequest, merged_last: StreamID, own_last: StreamID, now_ms: int
) -> StreamID:
    if request.ms is None:  # '*': Redis's rule, over everything this region has seen
        ms = max(now_ms, merged_last[0])
        if ms == merged_last[0]:
            if merged_last[1] == UINT64_MAX:
                return (ms + 1, 0)
            return (ms, merged_last[1] + 1)
        return (ms, 0)
    return _above((request.ms, request.seq or 0), own_last)
