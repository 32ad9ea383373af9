"""Distances as integer cents: the one representation that adds up "to the cent" everywhere.

Floats would make two consumers that add the same rides in a different grouping disagree in the
last digit, so a distance is parsed once (at the API, from the JSON text, never through a float)
into an ``int`` of cents, and every table, stream field and total uses that or its exact decimal
text ("456.70").
"""

from __future__ import annotations

from decimal import ROUND_HALF_EVEN, Decimal, InvalidOperation

CENT = Decimal("0.01")
MAX_AMOUNT = Decimal(10) ** 15  # beyond it quantize() needs more digits than the context has


def to_cents(value: Decimal | str) -> int:
    """Round half-even to the cent, as the API stores it (raises ValueError on non-numbers)."""
    try:
        amount = Decimal(value)
    except InvalidOperation as exc:
        raise ValueError(f"not a number: {value!r}") from exc
    if not amount.is_finite():
        raise ValueError(f"not a finite number: {value!r}")
    if abs(amount) >= MAX_AMOUNT:
        raise ValueError(f"too large: {value!r}")
    return int(amount.quantize(CENT, rounding=ROUND_HALF_EVEN) * 100)


def format_cents(cents: int) -> str:
    """The exact decimal text of an amount: 45670 → "456.70" (what the stream carries)."""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{whole}.{frac:02d}"


def format_cents_grouped(cents: int) -> str:
    """Human-readable with thousands separators for the report: 123456789 → "1,234,567.89"."""
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    return f"{sign}{whole:,}.{frac:02d}"
