"""Argument parsing shared by handlers, with Redis's exact rules and errors."""

from __future__ import annotations

from typing import Final

from mypy_extensions import i64

from headwater.errors import NOT_FLOAT, NOT_INTEGER, ReplyError

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


def strict_int(raw: bytes) -> int | None:
    """Redis's ``string2ll``: optional ``-``, digits, no leading zeros or ``+``, fits int64."""
    n = len(raw)
    if n == 0 or n > 20:
        return None
    start = 1 if raw[0] == 45 else 0  # "-"
    if start == n or (raw[start] == 48 and n > 1):  # ("0" alone; never "-0" nor "01")
        return None
    if n > 18:  # (up to 18 characters the digits fit a machine word: no range to check)
        if not raw[start:].isdigit():
            return None
        big = int(raw)
        return big if INT64_MIN <= big <= INT64_MAX else None
    value: i64 = 0  # (machine words: mypyc's int boxes past 2**30 on a multiply)
    i: i64 = start
    while i < n:
        digit: i64 = raw[i] - 48
        if digit < 0 or digit > 9:
            return None
        value = value * 10 + digit
        i += 1
    return -value if start else value


def parse_int(raw: bytes, error: ReplyError = NOT_INTEGER) -> int:
    value = strict_int(raw)
    if value is None:
        raise error
    return value


def parse_float(raw: bytes, error: ReplyError = NOT_FLOAT) -> float:
    """Redis's ``string2ld``-style parse: no spaces, no empty string, nan rejected."""
    text = raw.decode("ascii", "replace")
    if not text or text[0].isspace() or text[-1].isspace():
        raise error
    try:
        value = float(text)
    except ValueError:
        raise error from None
    if value != value:
        raise error
    return value


_DOUBLE_CHARS = frozenset(b"0123456789+-.eE")


def parse_double(raw: bytes, error: ReplyError = NOT_FLOAT) -> float:
    """C's ``strtod`` on the whole argument, as Redis's getDoubleFromObject: decimal (with an
    exponent), ``inf``/``infinity`` with a sign, hexadecimal; no spaces, no ``_``; NaN
    refused."""
    if not raw or len(raw) > 256:
        raise error
    if raw.isdigit():  # (the usual score or count: ASCII digits only, nothing to check)
        return float(raw)
    text = raw.decode("ascii", "replace")
    lowered = text.lower().lstrip("+-")
    try:
        if lowered in ("inf", "infinity"):
            value = float(text)
        elif lowered.startswith("0x"):
            value = float.fromhex(text)
        elif all(byte in _DOUBLE_CHARS for byte in raw) and any(ch.isdigit() for ch in text):
            value = float(text)
        else:
            raise error
    except ValueError:
        raise error from None
    if value != value:
        raise error
    return value


def upper(raw: bytes) -> bytes:
    return raw.upper()


def index_range(start: int, stop: int, n: int) -> tuple[int, int]:
    """The index rules of LRANGE, LTRIM and ZRANGE by rank (negatives count from the end,
    then clamped): (start, stop) inclusive within the n members, start > stop if none."""
    if start < 0:
        start += n
    if stop < 0:
        stop += n
    start = max(start, 0)
    if start > stop or start >= n:
        return 1, 0
    return start, min(stop, n - 1)
