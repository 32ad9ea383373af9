"""C's ``long double`` as Redis's INCRBYFLOAT and HINCRBYFLOAT use it, emulated exactly.

Why: Redis adds increments in x86-64's 80-bit extended precision (a 64-bit significand) and
prints the sum with ``"%.17Lf"`` (trailing zeros and dot trimmed, Redis's ``LD_STR_HUMAN``).
A Python float (53 bits) gives other digits: ``10.5 + 0.1`` prints ``10.59999999999999964``
in double precision, ``10.6`` in extended precision. So values are kept as exact
``Fraction``s, rounded to the extended format after each step (round half to even, as the
FPU), and printed by exact decimal rounding of the binary value, as glibc's printf does.

Rules (Redis ``string2ld``/``ld2string``, glibc ``strtold``):

* parse: the whole argument, no leading space, at most 5 KiB; decimal with an optional
  exponent, hexadecimal (``0x1.8p3``), ``inf``/``infinity`` with a sign; NaN refused; a
  value past the extended range (overflow to infinity, or underflow to zero) refused.
* a sum that is infinite is refused by the caller ("increment would produce NaN or
  Infinity"); ``-0`` prints as ``0``.
"""

from __future__ import annotations

import re
from fractions import Fraction

#: significand bits of the x87 extended format, and its exponent range (normalised values
#: are m * 2**e with 2**63 <= m < 2**64; e from -16445 for subnormals)
_MANT = 64
_MIN_EXP = -16382 - 63  # the exponent of the smallest subnormal's last bit
_MAX = Fraction((1 << _MANT) - 1) * Fraction(2) ** (16383 - 63)
#: Redis's MAX_LONG_DOUBLE_CHARS
MAX_CHARS = 5 * 1024

_DECIMAL = re.compile(rb"([+-]?)(\d+\.?\d*|\.\d+)(?:[eE]([+-]?\d+))?")
_HEX = re.compile(rb"([+-]?)0[xX]([0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP]([+-]?\d+))?")


class LongDouble:
    """A finite extended-precision value (an exact ``Fraction``) or an infinity."""

    __slots__ = ("inf", "value")

    def __init__(self, value: Fraction, inf: int = 0) -> None:
        self.value = value
        self.inf = inf  # +1 or -1 for an infinity, else 0

    def __add__(self, other: LongDouble) -> LongDouble:
        if self.inf or other.inf:
            if self.inf and other.inf and self.inf != other.inf:
                return LongDouble(Fraction(0), 2)  # NaN (refused by the caller)
            return LongDouble(Fraction(0), self.inf or other.inf)
        return rounded(self.value + other.value)

    @property
    def finite(self) -> bool:
        return self.inf == 0


def rounded(exact: Fraction) -> LongDouble:
    """``exact`` rounded to the nearest extended-precision value (ties to even)."""
    if exact == 0:
        return LongDouble(Fraction(0))
    sign = -1 if exact < 0 else 1
    x = abs(exact)
    # the exponent e with 2**63 <= x / 2**e < 2**64, floored at the subnormal exponent
    e = x.numerator.bit_length() - x.denominator.bit_length() - _MANT
    while x >= Fraction(2) ** (e + _MANT):
        e += 1
    while x < Fraction(2) ** (e + _MANT - 1):
        e -= 1
    e = max(e, _MIN_EXP)
    scaled = x / (Fraction(2) ** e)
    m = scaled.numerator // scaled.denominator
    rest = scaled - m
    if rest > Fraction(1, 2) or (rest == Fraction(1, 2) and m & 1):
        m += 1
    result = Fraction(m) * Fraction(2) ** e
    if result > _MAX:
        return LongDouble(Fraction(0), sign)
    return LongDouble(sign * result)


def parse(raw: bytes) -> LongDouble | None:
    """Redis's ``string2ld``: the value, or None if the argument is not a valid float."""
    if not raw or len(raw) > MAX_CHARS or raw[:1].isspace():
        return None
    lowered = raw.lower()
    body = lowered.lstrip(b"+-")
    if len(lowered) - len(body) > 1:
        return None
    if body in (b"inf", b"infinity"):
        return LongDouble(Fraction(0), -1 if lowered.startswith(b"-") else 1)
    hexa = _HEX.fullmatch(raw)
    if hexa is not None:
        sign, digits, exp = hexa.groups()
        whole, _, frac = digits.partition(b".")
        mantissa = int((whole + frac) or b"0", 16)
        exact = Fraction(mantissa) * Fraction(2) ** (int(exp or b"0") - 4 * len(frac))
    else:
        dec = _DECIMAL.fullmatch(raw)
        if dec is None:
            return None
        sign, digits, exp = dec.groups()
        whole, _, frac = digits.partition(b".")
        power = int(exp or b"0") - len(frac)
        if abs(power) > 100_000:  # far past the range either way: a plain overflow/underflow
            return None if int((whole + frac) or b"0") else LongDouble(Fraction(0))
        exact = Fraction(int((whole + frac) or b"0")) * Fraction(10) ** power
    if sign == b"-":
        exact = -exact
    value = rounded(exact)
    if not value.finite or (value.value == 0 and exact != 0):
        return None  # ERANGE: overflow, or underflow to zero
    return value


def format_human(value: LongDouble) -> bytes:
    """``"%.17Lf"`` with trailing zeros (and then the dot) removed; ``-0`` is ``0``."""
    if not value.finite:
        return b"inf" if value.inf > 0 else b"-inf"
    x = value.value
    negative = x < 0
    scaled = abs(x) * 10**17
    q, r = divmod(scaled.numerator, scaled.denominator)
    twice = 2 * r
    if twice > scaled.denominator or (twice == scaled.denominator and q & 1):
        q += 1
    digits = b"%018d" % q
    text = digits[:-17] + b"." + digits[-17:]
    text = text.rstrip(b"0").rstrip(b".")
    if negative and text != b"0":
        return b"-" + text
    return text
