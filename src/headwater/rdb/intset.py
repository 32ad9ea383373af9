"""Intset (Redis ``intset.c``): a sorted array of distinct integers, all of one width.

Layout (little-endian)::

    <encoding u32: 2, 4 or 8 (bytes per integer)> <length u32> <integers, ascending>

The width is the smallest that holds every member (Redis upgrades it as members grow, and
never downgrades it; a set rebuilt from its members gets the smallest).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable

from headwater.rdb.encoding import RdbError

_HEADER = struct.Struct("<II")
_FORMATS = {2: "h", 4: "i", 8: "q"}


def width_for(value: int) -> int:
    if -(2**15) <= value < 2**15:
        return 2
    if -(2**31) <= value < 2**31:
        return 4
    if -(2**63) <= value < 2**63:
        return 8
    raise ValueError(f"{value} does not fit in int64")


def encode(members: Iterable[int], width: int = 0) -> bytes:
    """An intset of these members (duplicates dropped); ``width`` forces a wider encoding."""
    values = sorted(set(members))
    for value in (values[0], values[-1]) if values else ():
        width = max(width, width_for(value))
    width = width or 2
    return _HEADER.pack(width, len(values)) + struct.pack(
        f"<{len(values)}{_FORMATS[width]}", *values
    )


def decode(blob: bytes) -> list[int]:
    """The members, checked as Redis's ``intsetValidateIntegrity`` (deep) checks them."""
    if len(blob) < 8:
        raise RdbError("intset shorter than its header")
    width, length = _HEADER.unpack_from(blob, 0)
    if width not in _FORMATS:
        raise RdbError(f"intset with encoding {width}")
    if len(blob) != 8 + width * length:
        raise RdbError("intset size does not match its length")
    if length == 0:
        raise RdbError("empty intset")
    values = list(struct.unpack_from(f"<{length}{_FORMATS[width]}", blob, 8))
    for i in range(1, length):  # (a loop: compiled, ``pairwise`` makes a tuple per step)
        if values[i - 1] >= values[i]:
            raise RdbError("intset members are not ascending and distinct")
    return values
