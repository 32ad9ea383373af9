"""Read-only: the ziplist (Redis ``ziplist.c``, before 7.0) and the zipmap (before 2.6).

Redis still loads payloads and RDB files that hold them (lists, sets, hashes and sorted sets
saved by older versions), converting them on load, so we read them and never write them.

Ziplist (little-endian)::

    <zlbytes u32> <zltail u32> <zllen u16> <entry> ... 0xFF
    entry: <prevlen: 1 byte < 254, or 0xFE + u32> <encoding> <data>
    00pppppp                  string, 6-bit length
    01pppppp qqqqqqqq         string, 14-bit length (big-endian)
    10000000 <u32 big-endian> string, 32-bit length
    11000000 int16 | 11010000 int32 | 11100000 int64 | 11110000 int24 | 11111110 int8
    1111xxxx                  xxxx - 1: an immediate 0..12

Zipmap::

    <zmlen u8> (<len> <key> <len> <free u8> <value> <free bytes>)* 0xFF
    len: one byte < 254, or 254 + u32 little-endian
"""

from __future__ import annotations

import struct

from headwater.rdb.encoding import RdbError

_HEADER = struct.Struct("<IIH")
_U32 = struct.Struct("<I")
_BE32 = struct.Struct(">I")
_INTS = {0xC0: 2, 0xD0: 4, 0xE0: 8, 0xF0: 3, 0xFE: 1}


def decode(blob: bytes) -> list[bytes | int]:
    n = len(blob)
    if n < 11:
        raise RdbError("ziplist shorter than its header")
    zlbytes, zltail, zllen = _HEADER.unpack_from(blob, 0)
    if zlbytes != n or blob[-1] != 0xFF or zltail >= n:
        raise RdbError("ziplist header does not match its size")
    out: list[bytes | int] = []
    pos = 10
    end = n - 1
    prev_size = 0
    last = 10
    while pos < end:
        start = pos
        first = blob[pos]
        if first < 254:
            prevlen = first
            pos += 1
        else:
            if first != 0xFE or pos + 5 > end:
                raise RdbError("bad ziplist prevlen")
            (prevlen,) = _U32.unpack_from(blob, pos + 1)
            pos += 5
        if prevlen != prev_size:
            raise RdbError("ziplist prevlen does not match the previous entry")
        if pos >= end:
            raise RdbError("ziplist entry past the end")
        enc = blob[pos]
        kind = enc >> 6
        value: bytes | int
        if kind == 0:
            size = enc & 0x3F
            value = blob[pos + 1 : pos + 1 + size]
            pos += 1 + size
        elif kind == 1:
            size = ((enc & 0x3F) << 8) | blob[pos + 1]
            value = blob[pos + 2 : pos + 2 + size]
            pos += 2 + size
        elif enc == 0x80:
            (size,) = _BE32.unpack_from(blob, pos + 1)
            value = blob[pos + 5 : pos + 5 + size]
            pos += 5 + size
        elif enc in _INTS:
            width = _INTS[enc]
            value = int.from_bytes(blob[pos + 1 : pos + 1 + width], "little", signed=True)
            pos += 1 + width
        elif 0xF1 <= enc <= 0xFD:
            value = (enc & 0x0F) - 1
            pos += 1
        else:
            raise RdbError(f"bad ziplist encoding 0x{enc:02x}")
        if pos > end:
            raise RdbError("ziplist entry past the end")
        last = start
        prev_size = pos - start
        out.append(value)
    if out and last != zltail:
        raise RdbError("ziplist tail offset is wrong")
    if zllen != 0xFFFF and zllen != len(out):
        raise RdbError("ziplist length does not match its entries")
    return out


def decode_zipmap(blob: bytes) -> list[tuple[bytes, bytes]]:
    """The (field, value) pairs of a zipmap."""
    n = len(blob)
    pos = 1
    pairs: list[tuple[bytes, bytes]] = []

    def length() -> int:
        nonlocal pos
        if pos >= n:
            raise RdbError("zipmap past the end")
        first = blob[pos]
        if first < 254:
            pos += 1
            return first
        if first != 254 or pos + 5 > n:
            raise RdbError("bad zipmap length")
        pos += 5
        return int(_U32.unpack_from(blob, pos - 4)[0])

    if n < 2:
        raise RdbError("zipmap too short")
    while True:
        if pos >= n:
            raise RdbError("zipmap without its end byte")
        if blob[pos] == 0xFF:
            if pos != n - 1:
                raise RdbError("bytes after the zipmap's end")
            return pairs
        klen = length()
        key = blob[pos : pos + klen]
        pos += klen
        vlen = length()
        if pos >= n:
            raise RdbError("zipmap past the end")
        free = blob[pos]
        pos += 1
        value = blob[pos : pos + vlen]
        pos += vlen + free
        if pos > n:
            raise RdbError("zipmap past the end")
        pairs.append((key, value))
