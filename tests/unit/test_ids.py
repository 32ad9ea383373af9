"""``parse_id`` against a plain model of Redis's rules (streamGenericParseIDOrReply with C's
strtoull per part): its fast path for plain decimal IDs, with the memo of the last
milliseconds and the table of small sequence numbers, must answer what the rules answer, in
any order of calls."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.errors import ReplyError
from headwater.stream.ids import AUTO_SEQ, MAX_ID, MIN_ID, UINT64_MAX, StreamID, parse_id


def _strtoull(part: bytes) -> int | None:
    text = part.lstrip(b" \t\n\v\f\r")
    if text[:1] == b"+":
        text = text[1:]
    if not text or not all(48 <= byte <= 57 for byte in text):
        return None
    value = int(text)
    return value if value <= UINT64_MAX else None


def _model(raw: bytes, strict: bool, missing_seq: int, auto: bool) -> StreamID | None:
    if len(raw) > 127:
        return None
    if not strict and raw in (b"-", b"+"):
        return MIN_ID if raw == b"-" else MAX_ID
    ms_part, dash, seq_part = raw.partition(b"-")
    ms = _strtoull(ms_part)
    if ms is None:
        return None
    if not dash:
        return (ms, missing_seq)
    if auto and seq_part == b"*":
        return (ms, AUTO_SEQ)
    seq = _strtoull(seq_part)
    return None if seq is None else (ms, seq)


def _parsed(raw: bytes, strict: bool, missing_seq: int, auto: bool) -> StreamID | None:
    try:
        return parse_id(raw, strict=strict, missing_seq=missing_seq, allow_auto_seq=auto)
    except ReplyError:
        return None


digits = st.text("0123456789", min_size=1, max_size=21)
#: around the uint64 limit (19 digits always fit, 20 may not), zeros, a common prefix
_EDGES = ["0", "00", "1700000000000", "18446744073709551615", "18446744073709551616",
          "99999999999999999999", "9999999999999999999", "01023", "1023", "1024"]  # fmt: skip
raw_id = st.one_of(
    st.tuples(digits, digits).map(lambda t: f"{t[0]}-{t[1]}".encode()),
    st.tuples(st.sampled_from(_EDGES), st.sampled_from(_EDGES) | digits).map(
        lambda t: f"{t[0]}-{t[1]}".encode()
    ),
    st.text("0123456789-+ *\t", max_size=45).map(str.encode),
    st.integers(100, 140).map(lambda n: b"1-" + b"0" * (n - 2)),
)


@settings(max_examples=400)
@given(
    raws=st.lists(raw_id, min_size=1, max_size=6),
    strict=st.booleans(),
    missing_seq=st.sampled_from([0, UINT64_MAX]),
    auto=st.booleans(),
)
def test_parse_id_follows_the_rules(
    raws: list[bytes], strict: bool, missing_seq: int, auto: bool
) -> None:
    for raw in raws:
        assert _parsed(raw, strict, missing_seq, auto) == _model(raw, strict, missing_seq, auto)
