"""Integer arguments as Redis's ``string2ll`` reads them (every COUNT, MAXLEN, numkeys…):
against a reference written from its rules, on every kind of input."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from headwater.commands.args import strict_int


def reference(raw: bytes) -> int | None:
    """string2ll's rules: '-' then digits, no '+', spaces or '_', no leading zero (but "0"
    alone), within int64."""
    body = raw[1:] if raw[:1] == b"-" else raw
    if not body or not body.isdigit() or (body[:1] == b"0" and raw != b"0"):
        return None
    value = int(raw)
    return value if -(2**63) <= value < 2**63 else None


@given(st.binary(max_size=22) | st.text("0123456789-+ _", max_size=22).map(str.encode))
def test_strict_int_reads_as_string2ll(raw: bytes) -> None:
    assert strict_int(raw) == reference(raw)


@given(st.integers(min_value=-(2**64), max_value=2**64))
def test_strict_int_round_trips_every_int64_and_refuses_beyond(value: int) -> None:
    expected = value if -(2**63) <= value < 2**63 else None
    assert strict_int(b"%d" % value) == expected


def test_strict_int_edges() -> None:
    for raw in (b"", b"-", b"-0", b"01", b"+1", b" 1", b"1 ", b"1_0", b"\xd9\xa1", b"1" * 21):
        assert strict_int(raw) is None, raw
    assert strict_int(b"0") == 0
    assert strict_int(b"9223372036854775807") == 2**63 - 1
    assert strict_int(b"-9223372036854775808") == -(2**63)
    assert strict_int(b"9223372036854775808") is None
