"""Listpack (Redis ``listpack.c``): the flat encoding of small lists, sets, hashes, sorted sets
and stream nodes, read and written byte for byte as Redis does.

Layout (little-endian)::

    <total bytes u32> <element count u16> <element> ... <element> 0xFF

The count saturates at 65535 (then only a walk knows it). Each element is its encoding, its
data, and ``backlen``, the size of encoding + data in 1-5 bytes, so the list can be walked
backwards::

    0xxxxxxx                         7-bit unsigned integer
    10xxxxxx <data>                  string of up to 63 bytes
    110xxxxx yyyyyyyy                13-bit signed integer
    1110xxxx yyyyyyyy <data>         string of up to 4095 bytes (length big-endian in 12 bits)
    11110000 <len u32> <data>        longer string
    11110001 <2 bytes>               16-bit signed integer
    11110010 <3 bytes>               24-bit signed integer
    11110011 <4 bytes>               32-bit signed integer
    11110100 <8 bytes>               64-bit signed integer

A string that is strict decimal int64 text is stored as an integer (``lpAppend`` tries
``lpStringToInt64``), so reading gives the text back. Elements are ``bytes`` or ``int``;
``decode`` returns each as Redis would hand it out (``int`` for integer encodings).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable, Mapping
from typing import Final, cast

from headwater.rdb.encoding import RdbError, is_int_text
from headwater.rdb.native import loop

_U32 = struct.Struct("<I")
_HEADER = struct.Struct("<IH")
_END = 0xFF
HEADER_SIZE = 6
#: the count field's value when it no longer counts
COUNT_UNKNOWN = 65535

Element = bytes | int


def _backlen(size: int) -> bytes:
    if size <= 127:
        return bytes((size,))
    if size < 16383:
        return bytes((size >> 7, (size & 127) | 128))
    if size < 2097151:
        return bytes((size >> 14, ((size >> 7) & 127) | 128, (size & 127) | 128))
    if size < 268435455:
        return bytes(
            (size >> 21, ((size >> 14) & 127) | 128, ((size >> 7) & 127) | 128, (size & 127) | 128)
        )
    return bytes(
        (
            size >> 28,
            ((size >> 21) & 127) | 128,
            ((size >> 14) & 127) | 128,
            ((size >> 7) & 127) | 128,
            (size & 127) | 128,
        )
    )


def encode_int(value: int) -> bytes:
    """One integer element, backlen included."""
    if 0 <= value <= 127:
        body = bytes((value,))
    elif -4096 <= value <= 4095:
        v = value & 0x1FFF
        body = bytes(((v >> 8) | 0xC0, v & 0xFF))
    elif -32768 <= value <= 32767:
        body = b"\xf1" + (value & 0xFFFF).to_bytes(2, "little")
    elif -8388608 <= value <= 8388607:
        body = b"\xf2" + (value & 0xFFFFFF).to_bytes(3, "little")
    elif -(2**31) <= value < 2**31:
        body = b"\xf3" + (value & 0xFFFFFFFF).to_bytes(4, "little")
    elif -(2**63) <= value < 2**63:
        body = b"\xf4" + (value & 0xFFFFFFFFFFFFFFFF).to_bytes(8, "little")
    else:
        raise ValueError(f"{value} does not fit in int64")
    return body + _backlen(len(body))


def encode_str(raw: bytes) -> bytes:
    """One string element, backlen included (stored as an integer if it is one)."""
    if len(raw) <= 20 and is_int_text(raw):
        return encode_int(int(raw))
    n = len(raw)
    if n < 64:
        body = bytes((0x80 | n,)) + raw
    elif n < 4096:
        body = bytes(((n >> 8) | 0xE0, n & 0xFF)) + raw
    else:
        body = b"\xf0" + _U32.pack(n) + raw
    return body + _backlen(len(body))


#: the whole element (encoding byte, backlen 1) of each 7-bit unsigned integer
_SMALL_INTS = [bytes((v, 1)) for v in range(128)]
#: bytes that may start decimal integer text
_INT_FIRST = frozenset(b"-0123456789")


#: ``encode_pure`` in one C call (None: not built); it leaves odd elements to Python
_NATIVE_ENCODE: Final = cast("Callable[[list[Element]], bytes | None] | None", loop("encode"))


def encode(elements: Iterable[Element]) -> bytes:
    """A listpack of these elements (``int`` as integers, ``bytes`` as ``lpAppend`` would),
    in one C call when that is built."""
    if _NATIVE_ENCODE is not None:
        items = elements if isinstance(elements, list) else list(elements)
        packed = _NATIVE_ENCODE(items)
        if packed is not None:
            return packed
        return encode_pure(items)
    return encode_pure(elements)


#: ``encode_mapping`` in one C call (None: not built)
_NATIVE_MAPPING: Final = cast(
    "Callable[[Mapping[bytes, bytes]], bytes | None] | None", loop("encode_mapping")
)


def encode_mapping(pairs: Mapping[bytes, bytes]) -> bytes:
    """``encode`` of the keys and values, alternately (a hash's listpack), in one C call
    when that is built."""
    if _NATIVE_MAPPING is not None:
        packed = _NATIVE_MAPPING(pairs)
        if packed is not None:
            return packed
    return encode_pure([x for pair in pairs.items() for x in pair])


def encode_pure(elements: Iterable[Element]) -> bytes:
    """``encode`` in Python. The common elements (small integers, short strings that are
    not integers) are written inline; the rest by ``encode_int``/``encode_str``."""
    out = bytearray(HEADER_SIZE)
    count = 0
    small = _SMALL_INTS
    int_first = _INT_FIRST
    for e in elements:
        count += 1
        if isinstance(e, int):
            out += small[e] if 0 <= e <= 127 else encode_int(e)
            continue
        n = len(e)
        if n < 64 and (n == 0 or e[0] not in int_first or not is_int_text(e)):
            out.append(0x80 | n)
            out += e
            out.append(n + 1)
        else:
            out += encode_str(e)
    out.append(_END)
    _HEADER.pack_into(out, 0, len(out), min(count, COUNT_UNKNOWN))
    return bytes(out)


#: ``decode_pure`` in one C call (None: not built); no answer for a listpack Python refuses
_NATIVE: Final = cast("Callable[[bytes, bool], list[Element] | None] | None", loop("decode"))


def decode(blob: bytes) -> list[Element]:
    """The elements of a listpack (``decode_pure``, in one C call when it is built)."""
    if _NATIVE is not None:
        out = _NATIVE(blob, False)
        if out is not None:
            return out
    return decode_pure(blob)


def decode_text(blob: bytes) -> list[bytes]:
    """The elements as Redis hands them out (``as_bytes``: integers as decimal text)."""
    if _NATIVE is not None:
        out = _NATIVE(blob, True)
        if out is not None:
            return cast("list[bytes]", out)
    return [as_bytes(e) for e in decode_pure(blob)]


def decode_pure(blob: bytes) -> list[Element]:
    """The elements of a listpack, checked as Redis's deep validation checks it: the header's
    size, every element within bounds with a backlen that matches, the count, the end byte."""
    n = len(blob)
    if n < HEADER_SIZE + 1:
        raise RdbError("listpack shorter than its header")
    total, count = _HEADER.unpack_from(blob, 0)
    if total != n:
        raise RdbError(f"listpack header says {total} bytes, it has {n}")
    if blob[-1] != _END:
        raise RdbError("listpack without its end byte")
    out: list[Element] = []
    pos = HEADER_SIZE
    end = n - 1
    while pos < end:
        start = pos
        first = blob[pos]
        value: Element
        if first < 0x80:  # the usual elements: checked and taken inline
            if blob[pos + 1] != 1:
                raise RdbError(f"listpack element at {start} has a wrong backlen")
            out.append(first)
            pos += 2
            continue
        if first < 0xC0:  # a string of up to 63 bytes: its backlen is one byte
            size = first & 0x3F
            pos += 1 + size
            if pos >= end or blob[pos] != size + 1:
                raise RdbError(f"listpack element at {start} has a wrong backlen or size")
            out.append(blob[start + 1 : pos])
            pos += 1
            continue
        if first < 0xE0:
            if pos + 2 > end:
                raise RdbError("listpack element past the end")
            v = ((first & 0x1F) << 8) | blob[pos + 1]
            value = v - 0x2000 if v >= 0x1000 else v
            pos += 2
        elif first < 0xF0:
            if pos + 2 > end:
                raise RdbError("listpack element past the end")
            size = ((first & 0x0F) << 8) | blob[pos + 1]
            value = blob[pos + 2 : pos + 2 + size]
            pos += 2 + size
        elif first == 0xF0:
            if pos + 5 > end:
                raise RdbError("listpack element past the end")
            (size,) = _U32.unpack_from(blob, pos + 1)
            value = blob[pos + 5 : pos + 5 + size]
            pos += 5 + size
        elif 0xF1 <= first <= 0xF4:
            width = (2, 3, 4, 8)[first - 0xF1]
            if pos + 1 + width > end:
                raise RdbError("listpack element past the end")
            value = int.from_bytes(blob[pos + 1 : pos + 1 + width], "little", signed=True)
            pos += 1 + width
        else:
            raise RdbError(f"bad listpack encoding byte 0x{first:02x} at {pos}")
        if pos > end:
            raise RdbError("listpack element past the end")
        back = _backlen(pos - start)
        if blob[pos : pos + len(back)] != back:
            raise RdbError(f"listpack element at {start} has a wrong backlen")
        pos += len(back)
        if pos > end:
            raise RdbError("listpack element past the end")
        out.append(value)
    if count != COUNT_UNKNOWN and count != len(out):
        raise RdbError(f"listpack header counts {count} elements, it has {len(out)}")
    return out


def as_bytes(element: Element) -> bytes:
    """An element as Redis hands it out: integers as decimal text."""
    return b"%d" % element if isinstance(element, int) else element
