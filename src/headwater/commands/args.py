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
_HEX_CHARS = frozenset(b"0123456789abcdefABCDEF+-.xXpP")
_INF: Final = float("inf")


def strtod(raw: bytes, error: ReplyError = NOT_FLOAT) -> float:
    """C's ``strtod`` on the whole argument: decimal (an exponent, any number of digits),
    ``inf``/``infinity`` with a sign, hexadecimal; no spaces, no ``_``, no NaN. Out of range
    reads as C's does: infinity when too big, zero when too small."""
    if raw.isdigit():  # (the usual score or count: ASCII digits only, nothing to check)
        return float(raw)
    text = raw.decode("ascii", "replace")
    lowered = text.lower().lstrip("+-")
    try:
        if lowered in ("inf", "infinity"):
            return float(text)
        if lowered.startswith("0x") and all(byte in _HEX_CHARS for byte in raw):
            try:
                return float.fromhex(text)
            except OverflowError:
                return -_INF if text.startswith("-") else _INF
        if all(byte in _DOUBLE_CHARS for byte in raw) and any(ch.isdigit() for ch in text):
            return float(text)
    except ValueError:
        raise error from None
    raise error


def out_of_range(raw: bytes, value: float) -> bool:
    """Whether strtod set ``ERANGE`` reading ``raw`` as ``value``: infinity from a number
    too big, or zero from one too small."""
    if value in (_INF, -_INF):
        return raw.lower().lstrip(b"+-") not in (b"inf", b"infinity")
    if value != 0:
        return False
    lowered = raw.lower().lstrip(b"+-")
    mantissa = lowered[2:].partition(b"p")[0] if lowered.startswith(b"0x") else lowered
    return bool(mantissa.partition(b"e")[0].strip(b"0."))


def parse_double(raw: bytes, error: ReplyError = NOT_FLOAT) -> float:
    """Redis's getDoubleFromObject (``string2d``): ``strtod`` on the whole argument, refused
    when empty, or out of range."""
    if not raw:
        raise error
    value = strtod(raw, error)
    if (value in (_INF, -_INF) or value == 0) and out_of_range(raw, value):
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
