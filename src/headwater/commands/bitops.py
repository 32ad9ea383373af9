"""Bit commands on strings (Redis ``bitops.c``): SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP,
BITFIELD and BITFIELD_RO.

A string is a bitmap whose bit 0 is the most significant bit of its first byte. Reads treat
a missing key as an endless run of zeros; writes grow the string with zero bytes up to the
last bit they touch (never past ``proto-max-bulk-len``: an offset whose byte lies beyond it
is refused, as Redis refuses it, except for the AOF loader and a replica's primary).

Strings are immutable ``bytes`` in the keyspace, so a write builds the new value (a
``RawString``: Redis keeps bitmaps ``raw``); a write that changes nothing (SETBIT of the bit
already there, BITFIELD SET of the same value) is no change and propagates nothing. Whole-
range work (BITCOUNT, BITPOS, BITOP) runs on Python's big integers and ``bytes`` methods,
so it costs a few C loops over the bytes, not a Python loop per bit.
"""

from __future__ import annotations

from headwater.commands.args import INT64_MAX, INT64_MIN, parse_int, strict_int
from headwater.commands.context import Client, spec
from headwater.commands.notify import lookup_read, notify
from headwater.commands.strings import must_obey
from headwater.errors import SYNTAX, WRONGTYPE, err
from headwater.keyevents import GENERIC, STRING
from headwater.ops.change import ONE, Change, Written, as_given
from headwater.resp.types import Reply
from headwater.values import RawString

BAD_OFFSET = err("bit offset is not an integer or out of range")
BAD_BIT = err("bit is not an integer or out of range")
BAD_TYPE = err(
    "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."
)
M64 = (1 << 64) - 1


def _as_string(value: object) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    raise WRONGTYPE


def _read(c: Client, key: bytes) -> bytes | None:
    return _as_string(lookup_read(c, key))


def parse_offset(c: Client, raw: bytes, bits: int = 0) -> int:
    """Redis's getBitOffsetFromArgument: a bit offset, ``#n`` meaning n * bits when ``bits``
    is given (BITFIELD); its byte must lie below ``proto-max-bulk-len``."""
    hashed = bits > 0 and raw[:1] == b"#"
    offset = strict_int(raw[1:] if hashed else raw)
    if offset is None:
        raise BAD_OFFSET
    if hashed:
        offset *= bits
        if not INT64_MIN <= offset <= INT64_MAX:  # (C's multiplication wraps; refused anyway)
            raise BAD_OFFSET
    if offset < 0 or (offset >> 3 >= c.server.config["proto-max-bulk-len"] and not must_obey(c)):
        raise BAD_OFFSET
    return offset


def _grown(old: bytes | None, last_bit: int) -> bytearray:
    """The string as a mutable copy, padded with zero bytes so that ``last_bit`` exists."""
    buf = bytearray(b"" if old is None else old)
    need = (last_bit >> 3) + 1
    if len(buf) < need:
        buf.extend(bytes(need - len(buf)))
    return buf


# ---------------------------------------------------------------------------------------------
# SETBIT, GETBIT


def cmd_setbit(c: Client, argv: list[bytes]) -> Reply | Written:
    """SETBIT key offset value"""
    key = argv[1]
    offset = parse_offset(c, argv[2])
    on = strict_int(argv[3])
    if on is None or on not in (0, 1):
        raise BAD_BIT
    old = _as_string(c.db.get(key))
    buf = _grown(old, offset)
    byte, shift = offset >> 3, 7 - (offset & 7)
    was = (buf[byte] >> shift) & 1
    if old is not None and len(buf) == len(old) and was == on:
        return was
    buf[byte] = (buf[byte] & ~(1 << shift)) | (on << shift)
    c.db.set(key, RawString(buf), keep_ttl=True)
    notify(c, STRING, b"setbit", key)
    return Written(was, ONE)


def cmd_getbit(c: Client, argv: list[bytes]) -> Reply:
    """GETBIT key offset"""
    offset = parse_offset(c, argv[2])
    value = _read(c, argv[1])
    if value is None or offset >> 3 >= len(value):
        return 0
    return (value[offset >> 3] >> (7 - (offset & 7))) & 1


# ---------------------------------------------------------------------------------------------
# BITCOUNT, BITPOS


def _unit(raw: bytes) -> bool:
    """BIT (True) or BYTE (False), the unit of a BITCOUNT/BITPOS range."""
    unit = raw.upper()
    if unit == b"BIT":
        return True
    if unit == b"BYTE":
        return False
    raise SYNTAX


def _bit_range(start: int, end: int, length: int, in_bits: bool) -> tuple[int, int]:
    """A start/end pair (bytes or bits) normalised as Redis does: the inclusive range of
    bits it covers, empty (start > end) when nothing is left."""
    total = length * 8 if in_bits else length
    if start < 0:
        start = max(total + start, 0)
    if end < 0:
        end = max(total + end, 0)
    end = min(end, total - 1)
    if in_bits:
        return start, end
    return start * 8, end * 8 + 7


def _count_bits(value: bytes, first: int, last: int) -> int:
    """Set bits of ``value`` from bit ``first`` to bit ``last`` (inclusive)."""
    if first > last:
        return 0
    chunk = int.from_bytes(value[first >> 3 : (last >> 3) + 1], "big")
    chunk >>= 7 - (last & 7)
    return (chunk & ((1 << (last - first + 1)) - 1)).bit_count()


def cmd_bitcount(c: Client, argv: list[bytes]) -> Reply:
    """BITCOUNT key [start end [BYTE | BIT]]"""
    if len(argv) == 2:
        value = _read(c, argv[1])
        return 0 if value is None else _count_bits(value, 0, len(value) * 8 - 1)
    if len(argv) not in (4, 5):
        raise SYNTAX
    start, end = parse_int(argv[2]), parse_int(argv[3])
    in_bits = _unit(argv[4]) if len(argv) == 5 else False
    value = _read(c, argv[1])
    if value is None or (start < 0 and end < 0 and start > end):
        return 0
    first, last = _bit_range(start, end, len(value), in_bits)
    return _count_bits(value, first, last)


def _first_bit(value: bytes, bit: int, first: int, last: int) -> int:
    """The first bit equal to ``bit`` from ``first`` to ``last`` (inclusive), or -1."""
    pos = first
    while pos <= last and pos & 7:  # the partial first byte, bit by bit
        if (value[pos >> 3] >> (7 - (pos & 7))) & 1 == bit:
            return pos
        pos += 1
    if pos > last:
        return -1
    whole_end = (last + 1) >> 3  # bytes wholly inside the range end here
    skip = b"\x00" if bit else b"\xff"
    body = value[pos >> 3 : whole_end]
    found = len(body) - len(body.lstrip(skip))
    if found < len(body):
        byte = body[found] if bit else body[found] ^ 0xFF
        return (pos >> 3) * 8 + found * 8 + 8 - byte.bit_length()
    pos = whole_end * 8
    while pos <= last:  # the partial last byte
        if (value[pos >> 3] >> (7 - (pos & 7))) & 1 == bit:
            return pos
        pos += 1
    return -1


def cmd_bitpos(c: Client, argv: list[bytes]) -> Reply:
    """BITPOS key bit [start [end [BYTE | BIT]]]"""
    bit = parse_int(argv[2])
    if bit not in (0, 1):
        raise err("The bit argument must be 1 or 0.")
    if len(argv) > 6:
        raise SYNTAX
    end_given = len(argv) >= 5
    start = parse_int(argv[3]) if len(argv) >= 4 else 0
    in_bits = _unit(argv[5]) if len(argv) == 6 else False
    end = parse_int(argv[4]) if end_given else 0
    value = _read(c, argv[1])
    if value is None:
        return -1 if bit else 0
    if len(argv) == 3:
        first, last = 0, len(value) * 8 - 1
    else:
        if not end_given:
            end = len(value) - 1
        first, last = _bit_range(start, end, len(value), in_bits)
    if first > last:
        return -1
    pos = _first_bit(value, bit, first, last)
    if pos == -1 and bit == 0 and not end_given:
        return last + 1  # past the string: the zero padding Redis assumes
    return pos


# ---------------------------------------------------------------------------------------------
# BITOP


def cmd_bitop(c: Client, argv: list[bytes]) -> Reply | Written:
    """BITOP AND | OR | XOR | NOT destkey key [key ...]"""
    op = argv[1].upper()
    if op not in (b"AND", b"OR", b"XOR", b"NOT"):
        raise SYNTAX
    if op == b"NOT" and len(argv) != 4:
        raise err("BITOP NOT must be called with a single source key.")
    dest = argv[2]
    sources = [b"" if (v := _read(c, key)) is None else v for key in argv[3:]]
    width = max(len(s) for s in sources)
    if width:
        numbers = [int.from_bytes(s.ljust(width, b"\0"), "big") for s in sources]
        acc = numbers[0]
        if op == b"NOT":
            acc = ~acc & ((1 << (8 * width)) - 1)
        for n in numbers[1:]:
            if op == b"AND":
                acc &= n
            elif op == b"OR":
                acc |= n
            else:
                acc ^= n
        c.db.set(dest, RawString(acc.to_bytes(width, "big")))
        notify(c, STRING, b"set", dest)
        return Written(width, ONE)
    if c.db.delete(dest):
        notify(c, GENERIC, b"del", dest)
        return Written(0, ONE)
    return 0


# ---------------------------------------------------------------------------------------------
# BITFIELD, BITFIELD_RO

WRAP, SAT, FAIL = 0, 1, 2
GET, SET, INCRBY = 0, 1, 2
_OVERFLOWS = {b"WRAP": WRAP, b"SAT": SAT, b"FAIL": FAIL}


def _s64(n: int) -> int:
    """An integer cut to 64 bits and read as C's int64_t."""
    n &= M64
    return n - (1 << 64) if n >> 63 else n


def parse_type(raw: bytes) -> tuple[bool, int]:
    """``i<bits>`` (signed, 1-64) or ``u<bits>`` (unsigned, 1-63): (signed, bits)."""
    sign = raw[:1]
    bits = strict_int(raw[1:]) if sign in (b"i", b"u") else None
    if bits is None or bits < 1 or bits > (64 if sign == b"i" else 63):
        raise BAD_TYPE
    return sign == b"i", bits


def unsigned_overflow(value: int, incr: int, bits: int, how: int) -> tuple[int, int]:
    """Redis's checkUnsignedBitfieldOverflow with its C arithmetic: (0, -) when value+incr
    fits in ``bits``, else (1 or -1, the value WRAP or SAT gives). ``value`` is a uint64."""
    top = (1 << bits) - 1
    if value > top or (incr > 0 and incr > _s64(top - value)):
        direction = 1
    elif incr < 0 and incr < _s64(-value):
        direction = -1
    else:
        return 0, 0
    if how == SAT:
        return direction, top if direction > 0 else 0
    return direction, (value + incr) & M64 & top


def signed_overflow(value: int, incr: int, bits: int, how: int) -> tuple[int, int]:
    """Redis's checkSignedBitfieldOverflow, its int64 wrap-arounds included."""
    top = INT64_MAX if bits == 64 else (1 << (bits - 1)) - 1
    bottom = -top - 1
    max_incr = _s64(top - value)
    min_incr = _s64(bottom - value)
    if (
        value > top
        or (bits != 64 and incr > max_incr)
        or (value >= 0 and incr > 0 and incr > max_incr)
    ):
        direction = 1
    elif (
        value < bottom
        or (bits != 64 and incr < min_incr)
        or (value < 0 and incr < 0 and incr < min_incr)
    ):
        direction = -1
    else:
        return 0, 0
    if how == SAT:
        return direction, top if direction > 0 else bottom
    total = (value + incr) & M64
    if bits < 64:
        total &= (1 << bits) - 1
        if total >> (bits - 1):
            total -= 1 << bits
        return direction, total
    return direction, _s64(total)


def get_field(buf: bytes | bytearray, offset: int, bits: int, signed: bool) -> int:
    """The ``bits``-wide integer at bit ``offset`` (zeros past the end)."""
    first = offset >> 3
    last = (offset + bits - 1) >> 3
    chunk = bytes(buf[first : last + 1]).ljust(last - first + 1, b"\0")
    n = int.from_bytes(chunk, "big") >> (7 - ((offset + bits - 1) & 7))
    n &= (1 << bits) - 1
    if signed and n >> (bits - 1):
        n -= 1 << bits
    return n


def set_field(buf: bytearray, offset: int, bits: int, value: int) -> None:
    first = offset >> 3
    last = (offset + bits - 1) >> 3
    shift = 7 - ((offset + bits - 1) & 7)
    width = last - first + 1
    chunk = int.from_bytes(buf[first : last + 1], "big")
    mask = ((1 << bits) - 1) << shift
    chunk = (chunk & ~mask) | ((value & ((1 << bits) - 1)) << shift)
    buf[first : last + 1] = chunk.to_bytes(width, "big")


Op = tuple[int, bool, int, int, int, int]  # (opcode, signed, bits, offset, argument, overflow)


def parse_bitfield(c: Client, argv: list[bytes]) -> list[Op]:
    ops: list[Op] = []
    how = WRAP
    j = 2
    while j < len(argv):
        left = len(argv) - j - 1
        sub = argv[j].upper()
        if sub == b"GET" and left >= 2:
            opcode = GET
        elif sub == b"SET" and left >= 3:
            opcode = SET
        elif sub == b"INCRBY" and left >= 3:
            opcode = INCRBY
        elif sub == b"OVERFLOW" and left >= 1:
            kind = _OVERFLOWS.get(argv[j + 1].upper())
            if kind is None:
                raise err("Invalid OVERFLOW type specified")
            how = kind
            j += 2
            continue
        else:
            raise SYNTAX
        signed, bits = parse_type(argv[j + 1])
        offset = parse_offset(c, argv[j + 2], bits)
        argument = parse_int(argv[j + 3]) if opcode != GET else 0
        ops.append((opcode, signed, bits, offset, argument, how))
        j += 3 if opcode == GET else 4
    return ops


def _bitfield(c: Client, argv: list[bytes], read_only: bool) -> Reply | Written:
    """BITFIELD key [GET type offset | [OVERFLOW WRAP|SAT|FAIL] SET type offset value |
    INCRBY type offset increment ...]"""
    key = argv[1]
    ops = parse_bitfield(c, argv)
    writes = [op for op in ops if op[0] != GET]
    if not writes:
        value = _read(c, key)
        return [get_field(value or b"", op[3], op[2], op[1]) for op in ops]
    if read_only:
        raise err("BITFIELD_RO only supports the GET subcommand")
    old = _as_string(c.db.get(key))
    buf = _grown(old, max(op[3] + op[2] - 1 for op in writes))
    grew = old is None or len(buf) != len(old)
    changes = 0
    out: list[Reply] = []
    for opcode, signed, bits, offset, argument, how in ops:
        current = get_field(buf, offset, bits, signed)
        if opcode == GET:
            out.append(current)
            continue
        if opcode == INCRBY:
            check = signed_overflow if signed else unsigned_overflow
            overflow, limited = check(current, argument, bits, how)
            new = limited if overflow else current + argument
            answer = new
        else:
            start = argument if signed else argument & M64
            check = signed_overflow if signed else unsigned_overflow
            overflow, limited = check(start, 0, bits, how)
            new = limited if overflow else start
            answer = current
        if overflow and how == FAIL:
            out.append(None)
            continue
        out.append(answer)
        set_field(buf, offset, bits, new)
        if grew or new != current:
            changes += 1
    if changes:
        c.db.set(key, RawString(buf), keep_ttl=True)
        notify(c, STRING, b"setbit", key)
        return Written(out, as_given(changes))
    if grew:  # only FAILed writes: Redis still made room for them (silently)
        c.db.set(key, RawString(buf), keep_ttl=True)
        return Written(out, Change(0, [argv]))
    return out


def cmd_bitfield(c: Client, argv: list[bytes]) -> Reply | Written:
    return _bitfield(c, argv, read_only=False)


def cmd_bitfield_ro(c: Client, argv: list[bytes]) -> Reply | Written:
    """BITFIELD_RO key [GET type offset ...]"""
    return _bitfield(c, argv, read_only=True)


SPECS = (
    spec("setbit", 4, "write denyoom", (1, 1, 1), cmd_setbit),
    spec("getbit", 3, "readonly fast", (1, 1, 1), cmd_getbit),
    spec("bitcount", -2, "readonly", (1, 1, 1), cmd_bitcount),
    spec("bitpos", -3, "readonly", (1, 1, 1), cmd_bitpos),
    spec("bitop", -4, "write denyoom", (2, -1, 1), cmd_bitop),
    spec("bitfield", -2, "write denyoom", (1, 1, 1), cmd_bitfield),
    spec("bitfield_ro", -2, "readonly fast", (1, 1, 1), cmd_bitfield_ro),
)
