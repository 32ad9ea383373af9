"""Redis Functions: libraries of Lua functions (Redis ``functions.c``, ``function_lua.c``).

A library is Lua code whose first line is ``#!lua name=<library>``; running its top level
(with the library API: ``redis.register_function``, ``redis.log``…) registers its functions.
Loading is all or nothing: a library whose code fails, registers nothing, or names a function
another library has, changes nothing.

FUNCTION DUMP writes Redis's payload (one ``RDB_OPCODE_FUNCTION2`` string of code per library,
then the RDB version and a CRC64), so payloads move between Headwater and Redis both ways;
FUNCTION RESTORE reads LZF-compressed strings too, as Redis writes code over 20 bytes.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Any

from headwater.errors import err, require
from headwater.resp.parser import split_args

FUNCTION_FLAGS = ("no-writes", "allow-oom", "allow-stale", "no-cluster", "allow-cross-slot-keys")
_NAME = re.compile(rb"[A-Za-z0-9_]+")
_BAD_LIBRARY_NAME = (
    "Library names can only contain letters, numbers, or underscores(_) and must be at least "
    "one character long"
)
RDB_OPCODE_FUNCTION2 = 245
#: the RDB version our payloads carry: the first with functions (Redis 7.0's), which every
#: Redis since reads; we read up to Redis 8's
RDB_VERSION_WRITTEN = 10
RDB_VERSION = 12


@dataclass
class Function:
    name: bytes
    callback: Any  # the Lua function
    description: bytes | None
    flags: tuple[str, ...]
    library: Library
    #: the callback's place in the C bridge's table (0: none, lupa's call)
    slot: int = 0


@dataclass
class Library:
    name: bytes
    code: bytes
    functions: dict[bytes, Function] = field(default_factory=dict)


class RegisterError(Exception):
    """A bad call of redis.register_function: Lua sees ``ERR <text>``."""


def parse_metadata(code: bytes) -> tuple[bytes, int]:
    """The library name from ``#!lua name=…`` (split as Redis splits it: quotes allowed),
    and the length of that line (kept out of the compiled code, but not its line feed, so line
    numbers stay the user's)."""
    if not code.startswith(b"#!"):
        raise err("Missing library metadata")
    end = code.find(b"\n")
    if end < 0:
        raise err("Invalid library metadata")
    parts = split_args(code[:end])  # (Redis's sdssplitargs: name="foo" is foo)
    if not parts:
        raise err("Invalid library metadata")
    engine = parts[0][2:]
    if engine.upper() != b"LUA":
        raise err(f"Engine '{engine.decode('utf-8', 'replace')}' not found")
    name: bytes | None = None
    for part in parts[1:]:
        if part[:5].lower() != b"name=":
            raise err(f"Invalid metadata value given: {part.decode('utf-8', 'replace')}")
        if name is not None:
            raise err("Invalid metadata value, name argument was given multiple times")
        name = part[5:]
    if name is None:
        raise err("Library name was not given")
    return name, end


def check_name(name: bytes) -> None:
    if not _NAME.fullmatch(name):
        raise err(_BAD_LIBRARY_NAME)


class Registry:
    """The loaded libraries and their functions, by name: a library's name is matched as
    given, a function's whatever its case (as Redis's dicts of them: FCALL TEST runs
    ``test``)."""

    def __init__(self) -> None:
        self.libraries: dict[bytes, Library] = {}
        #: every library's functions, by their names in lower case
        self.functions: dict[bytes, Function] = {}

    def function(self, name: bytes) -> Function | None:
        return self.functions.get(name.lower())

    def add(self, library: Library, replace: bool) -> None:
        """Make ``library`` current (all checks done by ``check_add``)."""
        old = self.libraries.pop(library.name, None) if replace else None
        if old is not None:
            for name in old.functions:
                self.functions.pop(name.lower(), None)
        self.libraries[library.name] = library
        for name, function in library.functions.items():
            self.functions[name.lower()] = function

    def check_absent(self, name: bytes, restoring: bool = False) -> None:
        """Refuses a library of that name already there, with FUNCTION LOAD's text or
        FUNCTION RESTORE's (Redis's libraryJoin: the name unquoted)."""
        if name in self.libraries:
            shown = name.decode("utf-8", "replace")
            raise err(
                f"Library {shown} already exists"
                if restoring
                else f"Library '{shown}' already exists"
            )

    def check_add(self, library: Library, replace: bool, restoring: bool = False) -> None:
        if not replace:
            self.check_absent(library.name, restoring)
        for name in library.functions:
            owner = self.function(name)
            if owner is not None and owner.library.name != library.name:
                raise err(f"Function {name.decode('utf-8', 'replace')} already exists")

    def delete(self, name: bytes) -> None:
        library = self.libraries.pop(name, None)
        if library is None:
            raise err("Library not found")
        for function in library.functions:
            self.functions.pop(function.lower(), None)

    def flush(self) -> None:
        self.libraries.clear()
        self.functions.clear()

    def check_invariants(self) -> None:
        """Every function is its library's, every library's function is current, names are
        valid and each library registered at least one function."""
        count = 0
        for name, library in self.libraries.items():
            require(name == library.name, f"library {name!r} filed as {library.name!r}")
            require(bool(_NAME.fullmatch(name)), f"bad library name {name!r}")
            require(bool(library.functions), f"library {name!r} has no function")
            for fname, function in library.functions.items():
                require(function.library is library, f"{fname!r} points to another library")
                require(self.function(fname) is function, f"{fname!r} is not current")
                count += 1
        require(count == len(self.functions), "functions without a library")


# -- redis.register_function ---------------------------------------------------------------------


def read_registration(args: tuple[Any, ...], is_function: Any, items: Any) -> dict[str, Any]:
    """The arguments of one redis.register_function call (positional or one table), checked
    with Redis's texts. ``is_function(v)`` tells Lua functions, ``items(t)`` lists a table."""
    if len(args) == 2:
        name, callback = args
        if type(name) in (int, float):  # (a number is a string to Lua's C API)
            name = b"%d" % name if name == int(name) else repr(name).encode()
        if type(name) is not bytes:
            raise RegisterError("first argument to redis.register_function must be a string")
        if not is_function(callback):
            raise RegisterError("second argument to redis.register_function must be a function")
        return {"name": name, "callback": callback, "description": None, "flags": ()}
    if len(args) != 1:
        raise RegisterError("wrong number of arguments to redis.register_function")
    try:
        pairs = items(args[0])
    except TypeError:
        raise RegisterError(
            "calling redis.register_function with a single argument is only applicable to Lua "
            "table (representing named arguments)."
        ) from None
    return _named_registration(pairs, is_function, items)


def _named_registration(pairs: Any, is_function: Any, items: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": None, "callback": None, "description": None, "flags": ()}
    for key, value in pairs:
        if key == b"function_name":
            if type(value) is not bytes:
                raise RegisterError(
                    "function_name argument given to redis.register_function must be a string"
                )
            out["name"] = value
        elif key == b"callback":
            if not is_function(value):
                raise RegisterError(
                    "callback argument given to redis.register_function must be a function"
                )
            out["callback"] = value
        elif key == b"description":
            if type(value) is not bytes:
                raise RegisterError(
                    "description argument given to redis.register_function must be a string"
                )
            out["description"] = value
        elif key == b"flags":
            out["flags"] = _flags(value, items)
        else:
            raise RegisterError("unknown argument given to redis.register_function")
    if out["name"] is None:
        raise RegisterError("redis.register_function must get a function name argument")
    if out["callback"] is None:
        raise RegisterError("redis.register_function must get a callback argument")
    return out


def _flags(value: Any, items: Any) -> tuple[str, ...]:
    try:
        pairs = items(value)
    except TypeError:
        raise RegisterError(
            "flags argument to redis.register_function must be a table representing function flags"
        ) from None
    flags: list[str] = []
    for _, flag in pairs:
        text = flag.decode("utf-8", "replace") if type(flag) is bytes else None
        if text not in FUNCTION_FLAGS:
            raise RegisterError("unknown flag given")
        flags.append(text)
    return tuple(flags)


# -- DUMP / RESTORE payloads ---------------------------------------------------------------------


def _crc64_table() -> list[int]:
    poly = 0x95AC9329AC4BC9B5  # Jones, reflected (Redis's crc64)
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ poly if crc & 1 else crc >> 1
        table.append(crc)
    return table


_CRC64_TABLE = _crc64_table()


def crc64(data: bytes, crc: int = 0) -> int:
    table = _CRC64_TABLE
    for byte in data:
        crc = table[(crc ^ byte) & 0xFF] ^ (crc >> 8)
    return crc


def _rdb_length(n: int) -> bytes:
    if n < 1 << 6:
        return bytes([n])
    if n < 1 << 14:
        return bytes([0x40 | (n >> 8), n & 0xFF])
    if n <= 0xFFFFFFFF:
        return b"\x80" + struct.pack(">I", n)
    return b"\x81" + struct.pack(">Q", n)


def dump_payload(libraries: list[Library]) -> bytes:
    body = b"".join(
        bytes([RDB_OPCODE_FUNCTION2]) + _rdb_length(len(lib.code)) + lib.code for lib in libraries
    )
    body += struct.pack("<H", RDB_VERSION_WRITTEN)
    return body + struct.pack("<Q", crc64(body))


BAD_PAYLOAD = err("DUMP payload version or checksum are wrong")


def read_payload(payload: bytes) -> list[bytes]:
    """The libraries' code in a FUNCTION DUMP payload; raises Redis's errors."""
    if len(payload) < 10:
        raise BAD_PAYLOAD
    version = struct.unpack("<H", payload[-10:-8])[0]
    checksum = struct.unpack("<Q", payload[-8:])[0]
    if version > RDB_VERSION or crc64(payload[:-8]) != checksum:
        raise BAD_PAYLOAD
    reader = _RdbReader(payload[:-10])
    codes: list[bytes] = []
    while not reader.done():
        opcode = reader.byte()
        if opcode != RDB_OPCODE_FUNCTION2:
            raise err("given type is not a function")
        codes.append(reader.string())
    return codes


class _RdbReader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def done(self) -> bool:
        return self.pos >= len(self.data)

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise BAD_PAYLOAD
        chunk = self.data[self.pos : self.pos + n]
        self.pos += n
        return chunk

    def byte(self) -> int:
        return self.take(1)[0]

    def length(self) -> tuple[int, bool]:
        """(length, encoded): ``encoded`` means a special string encoding (int, LZF)."""
        first = self.byte()
        kind = first >> 6
        if kind == 0:
            return first & 0x3F, False
        if kind == 1:
            return ((first & 0x3F) << 8) | self.byte(), False
        if kind == 3:
            return first & 0x3F, True
        if first == 0x80:
            return int(struct.unpack(">I", self.take(4))[0]), False
        if first == 0x81:
            return int(struct.unpack(">Q", self.take(8))[0]), False
        raise BAD_PAYLOAD

    def string(self) -> bytes:
        n, encoded = self.length()
        if not encoded:
            return self.take(n)
        if n in (0, 1, 2):  # an integer as 1, 2 or 4 bytes
            size = 1 << n
            return b"%d" % int.from_bytes(self.take(size), "little", signed=True)
        if n == 3:
            compressed, _ = self.length()
            size, _ = self.length()
            return lzf_decompress(self.take(compressed), size)
        raise BAD_PAYLOAD


def lzf_decompress(data: bytes, size: int) -> bytes:
    out = bytearray()
    pos = 0
    try:
        while pos < len(data):
            ctrl = data[pos]
            pos += 1
            if ctrl < 32:  # a literal run
                out += data[pos : pos + ctrl + 1]
                pos += ctrl + 1
                continue
            length = ctrl >> 5
            if length == 7:
                length += data[pos]
                pos += 1
            ref = len(out) - ((ctrl & 0x1F) << 8) - data[pos] - 1
            pos += 1
            if ref < 0:
                raise BAD_PAYLOAD
            for i in range(length + 2):  # (may overlap what it copies)
                out.append(out[ref + i])
    except IndexError:
        raise BAD_PAYLOAD from None
    if len(out) != size:
        raise BAD_PAYLOAD
    return bytes(out)
