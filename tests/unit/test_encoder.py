from __future__ import annotations

import pytest

from headwater.errors import ReplyError
from headwater.resp.encoder import encode
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
