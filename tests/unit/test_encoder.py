from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from headwater._build import build_kind
from headwater.errors import ReplyError
from headwater.resp import encoder
from headwater.resp.encoder import encode, encode_command
from headwater.resp.types import NULL_ARRAY, OK, RSet, Status, Verbatim


@pytest.mark.parametrize(
    ("value", "resp2", "resp3"),
    [
        (b"ab", b"$2\r\nab\r\n", b"$2\r\nab\r\n"),
        (5, b":5\r\n", b":5\r\n"),
        (-7, b":-7\r\n", b":-7\r\n"),
        (None, b"$-1\r\n", b"_\r\n"),
        (NULL_ARRAY, b"*-1\r\n", b"_\r\n"),
        ([b"a", 1], b"*2\r\n$1\r\na\r\n:1\r\n", b"*2\r\n$1\r\na\r\n:1\r\n"),
        ({b"k": 1}, b"*2\r\n$1\r\nk\r\n:1\r\n", b"%1\r\n$1\r\nk\r\n:1\r\n"),
        (Status(b"PONG"), b"+PONG\r\n", b"+PONG\r\n"),
        (OK, b"+OK\r\n", b"+OK\r\n"),
        (Verbatim(b"x:1"), b"$3\r\nx:1\r\n", b"=7\r\ntxt:x:1\r\n"),
        (RSet([b"a"]), b"*1\r\n$1\r\na\r\n", b"~1\r\n$1\r\na\r\n"),
        (True, b":1\r\n", b"#t\r\n"),
        (1.5, b"$3\r\n1.5\r\n", b",1.5\r\n"),
        (ReplyError("WRONGTYPE", "bad\r\nthing"), b"-WRONGTYPE bad  thing\r\n", None),
    ],
)
def test_encoding(value: object, resp2: bytes, resp3: bytes | None) -> None:
    assert encode(value, 2) == resp2  # type: ignore[arg-type]
    assert encode(value, 3) == (resp3 if resp3 is not None else resp2)  # type: ignore[arg-type]


def test_unknown_type_is_refused() -> None:
    with pytest.raises(TypeError):
        encode(object())  # type: ignore[arg-type]


@given(st.lists(st.binary(max_size=300), max_size=12), st.binary(max_size=40))
def test_commands_into_a_buffer_as_encode_command_writes_them(
    argv: list[bytes], before: bytes
) -> None:
    """The C encoder (``_encode.c``, the compiled build's) appends what ``encode_command``
    returns, after what the buffer held, for any words (lengths past the header table's 256,
    and past one digit); the pure build's fallback too."""
    argv = [*argv, b"x" * 1000] if len(argv) % 3 == 0 else argv
    for into in (encoder.encode_command_into, encoder._command_into_pure):
        buf = bytearray(before)
        into(buf, argv)
        assert buf == before + encode_command(argv)


def test_the_compiled_build_encodes_effects_in_c() -> None:
    native = encoder._native_command_into()
    assert (native is not None) == (build_kind() == "compiled")
    if native is not None:
        assert encoder.encode_command_into is native
        with pytest.raises(TypeError):
            native(bytearray(), [b"SET", "k", b"v"])  # type: ignore[list-item]
        with pytest.raises(TypeError):
            native(b"", [b"PING"])  # type: ignore[arg-type]
        buf = bytearray(b"kept")
        native(buf, [b"X" * 123456])
        assert buf == b"kept*1\r\n$123456\r\n" + b"X" * 123456 + b"\r\n"
