"""Redis's CRC-64 (``crc64.c``): the Jones polynomial, reflected, initial value 0, no final xor.

DUMP payloads and RDB files end with this checksum of everything before it, little-endian.
Check value: ``crc64(b"123456789") == 0xE9C6D914C4B8D9CA`` (Redis's own self-test).

Computed a byte at a time from a 256-entry table; for long inputs eight tables let the loop
take eight bytes per step (the "slicing-by-8" scheme; the result is the same). The compiled
build has the same loop in C (``_crc64.c``, ~100x faster: an RDB file's checksum covers the
whole file, and here every 64-bit step is a Python integer); ``crc64`` is that one when it is
built, else ``crc64_pure``.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Final, cast

#: the Jones polynomial 0xAD93D23594C935A9, bit-reflected
_POLY = 0x95AC9329AC4BC9B5
_MASK = (1 << 64) - 1


def _tables() -> list[list[int]]:
    first: list[int] = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLY if crc & 1 else crc >> 1
        first.append(crc)
    tables = [first]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(prev[i] >> 8) ^ first[prev[i] & 0xFF] for i in range(256)])
    return tables


_T = _tables()
_T0 = _T[0]
_LITTLE = sys.byteorder == "little"


Buffer = bytes | bytearray | memoryview


def crc64_pure(data: Buffer, crc: int = 0) -> int:
    """The checksum of data, continuing from ``crc`` (0 to start)."""
    view = memoryview(data).cast("B")
    n = len(view)
    t0 = _T0
    i = 0
    if n >= 64:
        t1, t2, t3, t4, t5, t6, t7 = _T[1:]
        words = view[: n - n % 8].cast("Q") if _LITTLE else None
        if words is not None:
            for word in words:
                crc ^= word
                crc = (
                    t7[crc & 0xFF]
                    ^ t6[(crc >> 8) & 0xFF]
                    ^ t5[(crc >> 16) & 0xFF]
                    ^ t4[(crc >> 24) & 0xFF]
                    ^ t3[(crc >> 32) & 0xFF]
                    ^ t2[(crc >> 40) & 0xFF]
                    ^ t1[(crc >> 48) & 0xFF]
                    ^ t0[crc >> 56]
                )
            i = n - n % 8
    for k in range(i, n):
        crc = t0[(crc ^ view[k]) & 0xFF] ^ (crc >> 8)
    return crc & _MASK


def native_crc64() -> Callable[[Buffer, int], int] | None:
    """The C loop (``_crc64.c``), or None when it is not built (the pure build)."""
    try:
        module = importlib.import_module("headwater.rdb._crc64")
    except ImportError:
        return None
    return cast("Callable[[Buffer, int], int]", module.crc64)


_CRC64: Final = native_crc64() or crc64_pure


def crc64(data: Buffer, crc: int = 0) -> int:
    """The checksum of data, continuing from ``crc`` (0 to start)."""
    return _CRC64(data, crc)
