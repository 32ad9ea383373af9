"""LOLWUT [VERSION v] [...] (Redis's ``lolwut.c``): the server's version, or with VERSION 5
Georg Nees's *Schotter* drawn in Braille characters (``lolwut5.c``'s algorithm: squares
rotated and shifted more and more at random, row after row). Other versions answer the
version line, as Redis does for a version without a drawing of its own (Redis 6's
skyline is not drawn here: VERSION 6 answers that line too)."""

from __future__ import annotations

import math
import random

from headwater import REDIS_COMPAT_VERSION
from headwater.commands.args import parse_int
from headwater.commands.context import Client, spec
from headwater.resp.types import Reply, Verbatim


def cmd_lolwut(c: Client, argv: list[bytes]) -> Reply:
    version = REDIS_COMPAT_VERSION
    args = argv
    if len(argv) >= 3 and argv[1].lower() == b"version":
        version = f"{parse_int(argv[2]) % 2**32}.0.0"  # (C's unsigned cast)
        args = argv[2:]
    schotter = (version.startswith("5.") and version[2] != "9") or version.startswith("4.9")
    if schotter:  # (Redis 5's drawing: versions 4.9 to 5.8)
        return _schotter(args)
    return Verbatim(f"Redis ver. {REDIS_COMPAT_VERSION}\n".encode())


def _schotter(args: list[bytes]) -> Reply:
    """LOLWUT VERSION 5 [columns] [squares per row] [squares per column]."""
    cols, per_row, per_col = 66, 8, 12
    if len(args) > 1:
        cols = parse_int(args[1])
    if len(args) > 2:
        per_row = parse_int(args[2])
    if len(args) > 3:
        per_col = parse_int(args[3])
    cols, per_row, per_col = _clamp(cols, 1000), _clamp(per_row, 200), _clamp(per_col, 200)
    canvas = Canvas.schotter(cols, per_row, per_col)
    text = canvas.render() + (
        f"\nGeorg Nees - schotter, plotter on paper, 1968. Redis ver. {REDIS_COMPAT_VERSION}\n"
    )
    return Verbatim(text.encode())


def _clamp(value: int, most: int) -> int:
    return min(max(value, 1), most)


class Canvas:
    def __init__(self, width: int, height: int) -> None:
        self.width, self.height = width, height
        self.pixels = bytearray(width * height)

    @classmethod
    def schotter(cls, cols: int, per_row: int, per_col: int) -> Canvas:
        width = cols * 2
        padding = 2 if width > 4 else 0
        side = (width - padding * 2) / per_row
        canvas = cls(width, int(side * per_col + padding * 2))
        for y in range(per_col):
            for x in range(per_row):
                sx = int(x * side + side / 2 + padding)
                sy = int(y * side + side / 2 + padding)
                angle = 0.0
                if y > 1:  # lower rows: more and more disorder
                    r1, r2, r3 = (random.random() / per_col * y for _ in range(3))
                    r1, r2, r3 = (r if random.random() < 0.5 else -r for r in (r1, r2, r3))
                    angle = r1
                    sx = int(sx + r2 * side / 3)  # (C's int += float: the sum truncated)
                    sy = int(sy + r3 * side / 3)
                canvas.square(sx, sy, side, angle)
        return canvas

    def set(self, x: int, y: int) -> None:
        if 0 <= x < self.width and 0 <= y < self.height:
            self.pixels[x + y * self.width] = 1

    def get(self, x: int, y: int) -> int:
        if 0 <= x < self.width and 0 <= y < self.height:
            return self.pixels[x + y * self.width]
        return 0

    def line(self, x1: int, y1: int, x2: int, y2: int) -> None:
        """Bresenham's line."""
        dx, dy = abs(x2 - x1), abs(y2 - y1)
        sx, sy = (1 if x1 < x2 else -1), (1 if y1 < y2 else -1)
        err = dx - dy
        while True:
            self.set(x1, y1)
            if x1 == x2 and y1 == y2:
                return
            e2 = err * 2
            if e2 > -dy:
                err -= dy
                x1 += sx
            if e2 < dx:
                err += dx
                y1 += sy

    def square(self, x: int, y: int, size: float, angle: float) -> None:
        """A square centred on x, y: its corners on a circle, 90 degrees apart."""
        radius = round(size / math.sqrt(2))
        k = math.pi / 4 + angle
        corners = []
        for _ in range(4):
            corners.append((round(math.sin(k) * radius + x), round(math.cos(k) * radius + y)))
            k += math.pi / 2
        for j in range(4):
            self.line(*corners[j], *corners[(j + 1) % 4])

    def render(self) -> str:
        """Each 2x4 block of pixels as one Braille character (dots 1-8)."""
        rows = []
        for y in range(0, self.height, 4):
            row = []
            for x in range(0, self.width, 2):
                bits = (
                    self.get(x, y)
                    | self.get(x, y + 1) << 1
                    | self.get(x, y + 2) << 2
                    | self.get(x + 1, y) << 3
                    | self.get(x + 1, y + 1) << 4
                    | self.get(x + 1, y + 2) << 5
                    | self.get(x, y + 3) << 6
                    | self.get(x + 1, y + 3) << 7
                )
                row.append(chr(0x2800 + bits))
            rows.append("".join(row))
        text = "\n".join(rows)
        # (Redis ends the last row with a newline too, unless its height is a multiple of 4
        # plus one)
        if self.height and (self.height - 1) % 4 != 0:
            text += "\n"
        return text


SPECS = (spec("lolwut", -1, "readonly fast", (0, 0, 0), cmd_lolwut),)
