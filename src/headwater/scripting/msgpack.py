"""``cmsgpack`` and ``struct`` for scripts, as Redis ships them (lua-cmsgpack 0.4.0, Roberto
Ierusalimschy's struct library), written in Python: to Lua they are C functions, as in Redis.

Values cross as lupa gives them: Lua strings are ``bytes``, numbers ``int`` or ``float``,
tables lupa tables; ``LuaTables`` makes new ones. Errors are ``LibraryError`` texts.
"""

from __future__ import annotations

import math
import struct as pystruct
from collections.abc import Callable
from typing import Any, Protocol

from lupa import lua51


class LibraryError(Exception):
    """An error a library function raises: Lua sees the text, like a C library's
    ``luaL_error``, after the caller's position (unless ``located`` already)."""

    def __init__(self, text: str, located: bool = False) -> None:
        super().__init__(text)
        self.text = text
        self.located = located


class LuaTables(Protocol):
    def table_from(self, *args: Any) -> Any: ...


MAX_NESTING = 16  # lua-cmsgpack's LUACMSGPACK_MAX_NESTING: deeper tables are packed as nil


def _is_table(value: Any) -> bool:
    return bool(lua51.lua_type(value) == "table")


# -- cmsgpack: packing ---------------------------------------------------------------------------


def _pack_int(n: int, out: bytearray) -> None:
    if n >= 0:
        if n <= 127:
            out.append(n)
        elif n <= 0xFF:
            out += b"\xcc" + pystruct.pack(">B", n)
        elif n <= 0xFFFF:
            out += b"\xcd" + pystruct.pack(">H", n)
        elif n <= 0xFFFFFFFF:
            out += b"\xce" + pystruct.pack(">I", n)
        else:
            out += b"\xcf" + pystruct.pack(">Q", n)
    elif n >= -32:
        out += pystruct.pack(">b", n)
    elif n >= -128:
        out += b"\xd0" + pystruct.pack(">b", n)
    elif n >= -32768:
        out += b"\xd1" + pystruct.pack(">h", n)
    elif n >= -(2**31):
        out += b"\xd2" + pystruct.pack(">i", n)
    else:
        out += b"\xd3" + pystruct.pack(">q", n)


def _pack_number(n: float, out: bytearray) -> None:
    if not math.isinf(n) and not math.isnan(n) and -(2.0**63) <= n < 2.0**63 and n == int(n):
        _pack_int(int(n), out)
        return
    single = pystruct.unpack(">f", pystruct.pack(">f", n))[0] if abs(n) < 3.5e38 else None
    if single is not None and (single == n or (math.isnan(n) and math.isnan(single))):
        out += b"\xca" + pystruct.pack(">f", n)
    else:
        out += b"\xcb" + pystruct.pack(">d", n)


def _pack_bytes(data: bytes, out: bytearray) -> None:
    n = len(data)
    if n < 32:
        out.append(0xA0 | n)
    elif n <= 0xFF:
        out += b"\xd9" + pystruct.pack(">B", n)
    elif n <= 0xFFFF:
        out += b"\xda" + pystruct.pack(">H", n)
    else:
        out += b"\xdb" + pystruct.pack(">I", n)
    out += data


def _array_length(table: Any) -> int | None:
    """lua-cmsgpack's table_is_an_array: the keys are exactly 1..n (n, else None)."""
    count = biggest = 0
    for key in table:
        if type(key) is bytes:
            try:
                key = float(key)
            except ValueError:
                return None
        if type(key) not in (int, float) or key <= 0 or key != int(key):
            return None
        biggest = max(biggest, int(key))
        count += 1
    return count if biggest == count else None


def _pack_table(table: Any, level: int, out: bytearray) -> None:
    length = _array_length(table)
    if length is not None:
        if length <= 15:
            out.append(0x90 | length)
        elif length <= 0xFFFF:
            out += b"\xdc" + pystruct.pack(">H", length)
        else:
            out += b"\xdd" + pystruct.pack(">I", length)
        for i in range(1, length + 1):
            _pack_value(table[i], level + 1, out)
        return
    items = list(table.items())
    n = len(items)
    if n <= 15:
        out.append(0x80 | n)
    elif n <= 0xFFFF:
        out += b"\xde" + pystruct.pack(">H", n)
    else:
        out += b"\xdf" + pystruct.pack(">I", n)
    for key, value in items:
        _pack_value(key, level + 1, out)
        _pack_value(value, level + 1, out)


def _pack_value(value: Any, level: int, out: bytearray) -> None:
    kind = type(value)
    if kind is bytes:
        _pack_bytes(value, out)
    elif kind is bool:
        out.append(0xC3 if value else 0xC2)
    elif kind is int or kind is float:
        _pack_number(value, out)
    elif _is_table(value) and level < MAX_NESTING:
        _pack_table(value, level, out)
    else:  # nil, functions, userdata, too deep a table
        out.append(0xC0)


def cmsgpack_pack(*args: Any) -> bytes:
    if not args:
        raise LibraryError("bad argument #0 to 'pack' (MessagePack pack needs input.)")
    out = bytearray()
    for value in args:
        _pack_value(value, 0, out)
    return bytes(out)


# -- cmsgpack: unpacking -------------------------------------------------------------------------

_MISSING = "Missing bytes in input."
_BAD = "Bad data format in input."
_FIXED = {
    0xCA: ">f", 0xCB: ">d", 0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
    0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q",
}  # fmt: skip
_SIZED = {0xC4: ">B", 0xC5: ">H", 0xC6: ">I", 0xD9: ">B", 0xDA: ">H", 0xDB: ">I"}


class _Reader:
    def __init__(self, lua: LuaTables, data: bytes, pos: int = 0) -> None:
        self.lua = lua
        self.data = data
        self.pos = pos

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise LibraryError(_MISSING)
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def number(self, fmt: str) -> Any:
        return pystruct.unpack(fmt, self.take(pystruct.calcsize(fmt)))[0]

    def value(self) -> Any:
        tag = self.take(1)[0]
        if tag <= 0x7F:
            return tag
        if tag >= 0xE0:
            return tag - 256
        if 0xA0 <= tag <= 0xBF:
            return self.take(tag & 0x1F)
        if 0x90 <= tag <= 0x9F:
            return self.array(tag & 0x0F)
        if 0x80 <= tag <= 0x8F:
            return self.map(tag & 0x0F)
        if tag == 0xC0:
            return None
        if tag in (0xC2, 0xC3):
            return tag == 0xC3
        if tag in _FIXED:
            return self.number(_FIXED[tag])
        if tag in _SIZED:
            return self.take(self.number(_SIZED[tag]))
        if tag in (0xDC, 0xDD):
            return self.array(self.number(">H" if tag == 0xDC else ">I"))
        if tag in (0xDE, 0xDF):
            return self.map(self.number(">H" if tag == 0xDE else ">I"))
        raise LibraryError(_BAD)

    def array(self, n: int) -> Any:
        return self.lua.table_from([self.value() for _ in range(n)])

    def map(self, n: int) -> Any:
        pairs = {}
        for _ in range(n):
            key = self.value()
            value = self.value()
            if key is not None:
                pairs[key] = value
        return self.lua.table_from(pairs)


def cmsgpack_functions(lua: LuaTables) -> dict[bytes, Callable[..., Any]]:
    def checked_string(name: str, args: tuple[Any, ...]) -> bytes:
        if not args or type(args[0]) not in (bytes, int, float):
            got = "no value" if not args else "table"
            raise LibraryError(f"bad argument #1 to '{name}' (string expected, got {got})")
        data = args[0]
        return data if type(data) is bytes else str(data).encode()

    def unpack_some(name: str, args: tuple[Any, ...], limit: int, offset: int) -> tuple[Any, ...]:
        data = checked_string(name, args)
        if offset < 0 or offset > len(data):
            raise LibraryError(
                f"bad argument #{3 if name == 'unpack_limit' else 2} to '{name}' "
                "(Start offset %d greater than input length %d.)" % (offset, len(data))
            )
        reader = _Reader(lua, data, offset)
        values: list[Any] = []
        while reader.pos < len(data) and (limit <= 0 or len(values) < limit):
            values.append(reader.value())
        if limit <= 0:
            return tuple(values)
        next_offset = reader.pos if reader.pos < len(data) else -1
        return (next_offset, *values)

    def unpack(*args: Any) -> tuple[Any, ...]:
        return unpack_some("unpack", args, 0, 0)

    def unpack_one(*args: Any) -> tuple[Any, ...]:
        offset = int(args[1]) if len(args) > 1 and args[1] is not None else 0
        return unpack_some("unpack_one", args, 1, offset)

    def unpack_limit(*args: Any) -> tuple[Any, ...]:
        limit = int(args[1]) if len(args) > 1 and args[1] is not None else 0
        offset = int(args[2]) if len(args) > 2 and args[2] is not None else 0
        return unpack_some("unpack_limit", args, limit, offset)

    return {
        b"pack": cmsgpack_pack,
        b"unpack": unpack,
        b"unpack_one": unpack_one,
        b"unpack_limit": unpack_limit,
    }


# -- struct --------------------------------------------------------------------------------------

_MAXINTSIZE = 32
_NATIVE = {"b": 1, "B": 1, "h": 2, "H": 2, "l": 8, "L": 8, "T": 8, "i": 4, "I": 4, "f": 4, "d": 8}


class _Format:
    """Reads a struct format: endianness, alignment, then one option at a time."""

    def __init__(self, fmt: bytes, name: str) -> None:
        self.fmt = fmt.decode("latin-1")
        self.name = name
        self.pos = 0
        self.little = True
        self.align = 1

    def number(self, default: int) -> int:
        start = self.pos
        while self.pos < len(self.fmt) and self.fmt[self.pos].isdigit():
            self.pos += 1
        return int(self.fmt[start : self.pos]) if self.pos > start else default

    def options(self) -> Any:
        """Yields (option, size) for each value-taking or padding option."""
        while self.pos < len(self.fmt):
            opt = self.fmt[self.pos]
            self.pos += 1
            if opt == " ":
                continue
            if opt in "<>=":
                self.little = opt != ">"
                continue
            if opt == "!":
                self.align = self.number(8)
                continue
            if opt in "iI":
                size = self.number(4)
                if size > _MAXINTSIZE:
                    raise LibraryError(
                        f"integral size {size} is larger than limit of {_MAXINTSIZE}"
                    )
                yield opt, size
            elif opt == "c":
                yield opt, self.number(1)
            elif opt in _NATIVE:
                yield opt, _NATIVE[opt]
            elif opt in "xs":
                yield opt, 1 if opt == "x" else 0
            else:
                raise LibraryError(
                    f"bad argument #1 to '{self.name}' (invalid format option '{opt}')"
                )

    def padding(self, offset: int, opt: str, size: int) -> int:
        align = size
        if opt in "cs" or align <= 1 or self.align <= 1:
            return 0
        align = min(align, self.align)
        if align & (align - 1):
            raise LibraryError(f"bad argument #1 to '{self.name}' (alignment must be power of 2)")
        return (align - (offset & (align - 1))) & (align - 1)


def _int_bytes(value: int, size: int, little: bool) -> bytes:
    data = (value & ((1 << (8 * size)) - 1)).to_bytes(size, "little")
    return data if little else data[::-1]


def struct_pack(*args: Any) -> bytes:
    if not args or type(args[0]) is not bytes:
        raise LibraryError("bad argument #1 to 'pack' (string expected, got no value)")
    fmt = _Format(args[0], "pack")
    values = list(args[1:])
    out = bytearray()
    arg = 0

    def next_value(kind: str) -> Any:
        nonlocal arg
        arg += 1
        if arg > len(values) or values[arg - 1] is None:
            raise LibraryError(f"bad argument #{arg + 1} to 'pack' ({kind} expected, got nil)")
        return values[arg - 1]

    previous = 0
    for opt, size in fmt.options():
        out += b"\0" * fmt.padding(len(out), opt, size)
        if opt == "x":
            out.append(0)
        elif opt in "bBhHlLTiI":
            number = next_value("number")
            out += _int_bytes(int(float(number)), size, fmt.little)
            previous = int(float(number))
        elif opt in "fd":
            number = float(next_value("number"))
            code = ("<" if fmt.little else ">") + opt
            out += pystruct.pack(code, number)
        elif opt == "c":
            text = next_value("string")
            text = text if type(text) is bytes else str(text).encode()
            if size == 0:
                size = len(text)
            if len(text) < size:
                raise LibraryError(f"bad argument #{arg + 1} to 'pack' (string too short)")
            out += text[:size]
        elif opt == "s":
            text = next_value("string")
            text = text if type(text) is bytes else str(text).encode()
            out += text + b"\0"
    del previous
    return bytes(out)


def struct_unpack(*args: Any) -> tuple[Any, ...]:
    if len(args) < 2 or type(args[0]) is not bytes or type(args[1]) is not bytes:
        raise LibraryError("bad argument #2 to 'unpack' (string expected, got no value)")
    fmt = _Format(args[0], "unpack")
    data = args[1]
    pos = int(args[2]) - 1 if len(args) > 2 and args[2] is not None else 0
    if pos < 0 or pos > len(data):
        raise LibraryError("bad argument #3 to 'unpack' (offset out of range)")
    values: list[Any] = []
    previous: int | None = None
    for opt, size in fmt.options():
        pos += fmt.padding(pos, opt, size)
        if opt == "x":
            pos += 1
            continue
        if opt == "c" and size == 0:
            if previous is None:
                raise LibraryError("format 'c0' needs a previous size")
            size = previous
            values.pop()
        if opt == "s":
            end = data.find(b"\0", pos)
            if end < 0:
                raise LibraryError("unfinished string in data")
            values.append(data[pos:end])
            pos = end + 1
            continue
        if pos + size > len(data):
            raise LibraryError("bad argument #2 to 'unpack' (data string too short)")
        chunk = data[pos : pos + size]
        pos += size
        if opt == "c":
            values.append(chunk)
            previous = None
        elif opt in "fd":
            code = ("<" if fmt.little else ">") + opt
            values.append(pystruct.unpack(code, chunk)[0])
        else:
            number = int.from_bytes(chunk, "little" if fmt.little else "big", signed=opt.islower())
            values.append(number)
            previous = number
    return (*values, pos + 1)


def struct_size(*args: Any) -> int:
    if not args or type(args[0]) is not bytes:
        raise LibraryError("bad argument #1 to 'size' (string expected, got no value)")
    fmt = _Format(args[0], "size")
    total = 0
    for opt, size in fmt.options():
        if opt == "s" or (opt == "c" and size == 0):
            option = "s" if opt == "s" else "c0"
            raise LibraryError(f"bad argument #1 to 'size' (option '{option}' has no fixed size)")
        total += fmt.padding(total, opt, size) + size
    return total


def struct_functions() -> dict[bytes, Callable[..., Any]]:
    return {b"pack": struct_pack, b"unpack": struct_unpack, b"size": struct_size}
