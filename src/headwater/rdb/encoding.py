"""RDB's primitive encodings: lengths, strings (plain, integer-encoded, LZF), times, doubles.

Lengths (the top two bits of the first byte say which form; big-endian)::

    00xxxxxx                      6-bit length
    01xxxxxx xxxxxxxx             14-bit length
    10000000 <4 bytes>            32-bit length
    10000001 <8 bytes>            64-bit length
    11xxxxxx                      a special string encoding (below), not a length

Strings: a length and the bytes, or a special encoding (little-endian integers)::

    11000000 <1 byte>             int8, as decimal text
    11000001 <2 bytes>            int16
    11000010 <4 bytes>            int32
    11000011 <clen> <len> <clen bytes>   LZF-compressed (``lzf.py``)

``Reader`` raises ``RdbError`` for anything short or malformed: every caller maps it to one
answer (RESTORE's ``Bad data format``, import-rdb's refusal with the offset).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable
from typing import Final, cast

from headwater.rdb import lzf
from headwater.rdb.native import loop

_U16 = struct.Struct("<H")
_I8 = struct.Struct("<b")
_I16 = struct.Struct("<h")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_U64 = struct.Struct("<Q")
_BE32 = struct.Struct(">I")
_BE64 = struct.Struct(">Q")
_F64 = struct.Struct("<d")

ENC_INT8 = 0
ENC_INT16 = 1
ENC_INT32 = 2
ENC_LZF = 3


class RdbError(ValueError):
    """Bytes that are not a valid RDB object (or file)."""


def is_int_text(raw: bytes) -> bool:
    """Redis's string2ll round trip: strict decimal int64 text (no '+', no leading zeros,
    no "-0"), as ``rdbTryIntegerEncoding`` and listpack's ``lpStringToInt64`` accept."""
    n = len(raw)
    if n == 0 or n > 20:
        return False
    digits = raw[1:] if raw[0] == 45 else raw
    if not digits.isdigit() or not digits.isascii() or (digits[0] == 48 and n > 1):
        return False
    return -(2**63) <= int(raw) < 2**63


# ---------------------------------------------------------------------------------------------
# Writing


def write_len(out: bytearray, n: int) -> None:
    if n < 1 << 6:
        out.append(n)
    elif n < 1 << 14:
        out += bytes(((n >> 8) | 0x40, n & 0xFF))
    elif n <= 0xFFFFFFFF:
        out.append(0x80)
        out += _BE32.pack(n)
    else:
        out.append(0x81)
        out += _BE64.pack(n)


def _write_int(out: bytearray, value: int) -> bool:
    """rdbEncodeInteger: the special int encodings, if value fits in 32 bits."""
    if -(1 << 7) <= value < 1 << 7:
        out.append(0xC0 | ENC_INT8)
        out += _I8.pack(value)
    elif -(1 << 15) <= value < 1 << 15:
        out.append(0xC0 | ENC_INT16)
        out += _I16.pack(value)
    elif -(1 << 31) <= value < 1 << 31:
        out.append(0xC0 | ENC_INT32)
        out += _I32.pack(value)
    else:
        return False
    return True


def write_string(out: bytearray, raw: bytes, compress: bool = True) -> None:
    """rdbSaveRawString: short decimal text as an integer, longer strings LZF-compressed
    when that saves at least 4 bytes (Redis's ``rdbcompression yes``), else plain."""
    n = len(raw)
    if n <= 11 and is_int_text(raw) and _write_int(out, int(raw)):
        return
    if compress and n > 20:
        packed = lzf.compress(raw, n - 4)
        if packed is not None:
            out.append(0xC0 | ENC_LZF)
            write_len(out, len(packed))
            write_len(out, n)
            out += packed
            return
    write_len(out, n)
    out += raw


def write_ms(out: bytearray, ms: int) -> None:
    """rdbSaveMillisecondTime: int64, little-endian."""
    out += _I64.pack(ms)


def write_double(out: bytearray, value: float) -> None:
    """rdbSaveBinaryDoubleValue."""
    out += _F64.pack(value)


# ---------------------------------------------------------------------------------------------
# Reading

#: ``strings(data, pos, n, end, scored) -> (list, pos)``
_Strings = Callable[[bytes | memoryview, int, int, int, bool], tuple[list[bytes | float], int]]


#: ``Reader.strings`` in one C call (None: not built); it stops before a string it leaves
#: to ``Reader.string``
_NATIVE_STRINGS: Final = cast("_Strings | None", loop("strings"))


class Reader:
    """A cursor over RDB bytes."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data: bytes | memoryview, pos: int = 0, end: int | None = None) -> None:
        # (bytes, typed so: compiled, an index or a slice of it is native, where one of a
        # ``bytes | memoryview`` went through the generic protocols, ~800 instructions)
        self.data: bytes = data if isinstance(data, bytes) else bytes(data)
        self.pos = pos
        self.end = len(data) if end is None else end

    def take(self, n: int) -> bytes:
        pos = self.pos
        if n < 0 or pos + n > self.end:
            raise RdbError(f"unexpected end of data at offset {pos} (wanted {n} bytes)")
        self.pos = pos + n
        return self.data[pos : pos + n]

    def byte(self) -> int:
        pos = self.pos
        if pos >= self.end:
            raise RdbError(f"unexpected end of data at offset {pos}")
        self.pos = pos + 1
        return self.data[pos]

    def at_end(self) -> bool:
        return self.pos >= self.end

    def len_or_special(self) -> tuple[int, bool]:
        """A length, or (the encoding, True) for a special string encoding."""
        first = self.byte()
        kind = first >> 6
        if kind == 0:
            return first & 0x3F, False
        if kind == 1:
            return ((first & 0x3F) << 8) | self.byte(), False
        if kind == 3:
            return first & 0x3F, True
        if first == 0x80:
            return _BE32.unpack(self.take(4))[0], False
        if first == 0x81:
            return _BE64.unpack(self.take(8))[0], False
        raise RdbError(f"unknown length encoding 0x{first:02x} at offset {self.pos - 1}")

    def length(self) -> int:
        n, special = self.len_or_special()
        if special:
            raise RdbError(f"a string encoding where a length belongs, offset {self.pos - 1}")
        return n

    def count(self, item_bytes: int = 1) -> int:
        """A length that counts items still to read, each of at least item_bytes bytes (a
        huge count cannot be honest: refusing it early keeps a bad payload from making the
        reader allocate or loop for nothing)."""
        n = self.length()
        if n * item_bytes > self.end - self.pos:
            raise RdbError(f"count {n} exceeds the data left at offset {self.pos}")
        return n

    def string(self) -> bytes:
        n, special = self.len_or_special()
        if not special:
            return self.take(n)
        if n == ENC_INT8:
            return b"%d" % _I8.unpack(self.take(1))[0]
        if n == ENC_INT16:
            return b"%d" % _I16.unpack(self.take(2))[0]
        if n == ENC_INT32:
            return b"%d" % _I32.unpack(self.take(4))[0]
        if n == ENC_LZF:
            clen = self.length()
            length = self.length()
            packed = self.take(clen)
            if length == 0:
                raise RdbError("LZF string of length 0")
            try:
                return lzf.decompress(packed, length)
            except lzf.LzfError as exc:
                raise RdbError(f"bad LZF string: {exc}") from None
        raise RdbError(f"unknown string encoding {n}")

    def strings(self, n: int) -> list[bytes]:
        """``n`` strings in a row (``string`` each), in one C call when that is built."""
        out: list[bytes] = []
        if _NATIVE_STRINGS is not None:
            got, self.pos = _NATIVE_STRINGS(self.data, self.pos, n, self.end, False)
            out = cast("list[bytes]", got)
            n -= len(out)
        for _ in range(n):
            out.append(self.string())
        return out

    def scored_strings(self, n: int) -> list[bytes | float]:
        """``n`` strings each followed by a binary double (a ZSET_2's members and scores), as
        one list: member, score, member, score...; a NaN score is refused."""
        out: list[bytes | float] = []
        if _NATIVE_STRINGS is not None:
            out, self.pos = _NATIVE_STRINGS(self.data, self.pos, n, self.end, True)
            n -= len(out) >> 1
        for _ in range(n):
            out.append(self.string())
            score = self.binary_double()
            if math.isnan(score):
                raise RdbError("NaN sorted set score")
            out.append(score)
        return out

    def ms(self) -> int:
        return int(_I64.unpack(self.take(8))[0])

    def u64(self) -> int:
        return int(_U64.unpack(self.take(8))[0])

    def u16(self) -> int:
        return int(_U16.unpack(self.take(2))[0])

    def binary_double(self) -> float:
        return float(_F64.unpack(self.take(8))[0])

    def text_double(self) -> float:
        """rdbLoadDoubleValue (old ZSET type): a length byte, 253 nan, 254 +inf, 255 -inf."""
        n = self.byte()
        if n == 253:
            return float("nan")
        if n == 254:
            return float("inf")
        if n == 255:
            return float("-inf")
        raw = self.take(n)
        try:
            return float(raw)
        except ValueError:
            raise RdbError(f"bad double {raw!r}") from None
