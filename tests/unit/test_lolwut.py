"""LOLWUT (Redis's lolwut.c): the version line by default, Georg Nees's Schotter with
VERSION 5 (Braille characters, Redis's canvas sizes and clamps, the credit line)."""

from __future__ import annotations

import pytest

from headwater import REDIS_COMPAT_VERSION
from headwater.commands.lolwut import Canvas
from headwater.engine import Engine


def _lolwut(*args: str) -> str:
    engine = Engine()
    c = engine.new_client()
    engine.execute(c, [b"LOLWUT", *(a.encode() for a in args)])
    raw = b"".join(c.out)
    length, _, rest = raw.partition(b"\r\n")
    assert length.startswith(b"$")
    return rest[: int(length[1:])].decode()


def test_the_version_line() -> None:
    assert _lolwut() == f"Redis ver. {REDIS_COMPAT_VERSION}\n"
    assert _lolwut("VERSION", "7") == f"Redis ver. {REDIS_COMPAT_VERSION}\n"
    assert _lolwut("VERSION", "-1") == f"Redis ver. {REDIS_COMPAT_VERSION}\n"


@pytest.mark.parametrize(
    ("args", "rows", "columns"),
    # (the rows and columns redis-server 7.0 draws for the same arguments)
    [((), 49, 66), (("10",), 7, 10), (("1",), 1, 1), (("0",), 1, 1), (("10", "2", "2"), 5, 10)],
)
def test_schotter_shapes(args: tuple[str, ...], rows: int, columns: int) -> None:
    text = _lolwut("VERSION", "5", *args)
    drawing, credit = text.rsplit("\n", 2)[0], text.rsplit("\n", 2)[1]
    version = REDIS_COMPAT_VERSION
    assert credit == f"Georg Nees - schotter, plotter on paper, 1968. Redis ver. {version}"
    lines = drawing.rstrip("\n").split("\n")
    assert len(lines) == rows and all(len(line) == columns for line in lines)
    assert all(0x2800 <= ord(ch) <= 0x28FF for line in lines for ch in line)
    assert any(ord(ch) != 0x2800 for line in lines for ch in line)  # something is drawn


def test_the_canvas_draws_squares() -> None:
    canvas = Canvas(20, 20)
    canvas.square(10, 10, 8, 0.0)
    corners = [(6, 6), (14, 14), (6, 14), (14, 6)]
    assert all(canvas.get(*corner) for corner in corners)
    assert not canvas.get(10, 10)  # (an outline)
