"""Canonical RESP commands split out of a byte stream: the C ``Splitter`` (``_split.c``), or
in the pure build ``PySplitter``, the same scan in Python.

Canonical is what every client library and every primary sends: an array of bulk strings,
``*<n>\r\n`` then ``$<len>\r\n<data>\r\n`` for each word, lengths without sign or leading
zeros. The replica's link needs each command as a list of bytes and the bytes the whole
commands took (its offset, its backlog); a client's connection (``parser.py``) needs them
fast, and to stop, with nothing taken, at anything else: an inline command, a RESP3 value
where Redis wants a bulk string, a header over Redis's limits. The exact grammar judges
those.
"""

from __future__ import annotations

import importlib
from typing import Literal, Protocol, cast

#: the splitter's limits when none are set: more is not a command a server sends
MAX_WORDS = 1 << 31
MAX_BULK = 1 << 40


class CommandSplitter(Protocol):
    """``feed`` bytes (it returns ``pending``); ``gets`` the next whole command or False;
    ValueError (nothing taken) at anything that is not a canonical command, or whose header
    is over ``max_words`` or ``max_bulk``; ``taken``: bytes of the commands returned;
    ``pending``: bytes held after them, which ``take_rest`` hands over."""

    max_words: int
    max_bulk: int

    @property
    def taken(self) -> int: ...

    @property
    def pending(self) -> int: ...

    def feed(self, data: bytes) -> int: ...

    def gets(self) -> list[bytes] | Literal[False]: ...

    def take_rest(self) -> bytes: ...


class PySplitter:
    """``_split.c`` in Python, error messages included (the pure build). Each ``gets``
    scans the command's headers from its start: a long command arriving in many reads
    costs a header scan per read, not a copy."""

    def __init__(self) -> None:
        self.max_words = MAX_WORDS
        self.max_bulk = MAX_BULK
        self._buf = bytearray()
        self._pos = 0
        self._taken = 0

    @property
    def taken(self) -> int:
        return self._taken

    @property
    def pending(self) -> int:
        return len(self._buf) - self._pos

    def feed(self, data: bytes) -> int:
        if self._pos and self._pos * 2 >= len(self._buf):
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data
        return len(self._buf) - self._pos

    def take_rest(self) -> bytes:
        rest = bytes(self._buf[self._pos :])
        self._buf = bytearray()
        self._pos = 0
        return rest

    def gets(self) -> list[bytes] | Literal[False]:
        buf = self._buf
        header = _header(buf, self._pos, 42, self.max_words)  # "*"
        if header is None:
            return False
        words, at = header
        if words == 0:
            raise ValueError("an empty command")
        argv = []
        for _ in range(words):
            header = _header(buf, at, 36, self.max_bulk)  # "$"
            if header is None:
                return False
            size, at = header
            if len(buf) - at < size + 2:
                return False
            if buf[at + size] != 13 or buf[at + size + 1] != 10:
                raise ValueError("a bulk string not followed by CRLF")
            argv.append(bytes(buf[at : at + size]))
            at += size + 2
        self._taken += at - self._pos
        self._pos = at
        return argv


def _header(buf: bytearray, at: int, mark: int, limit: int) -> tuple[int, int] | None:
    """``<mark><digits>\\r\\n`` at ``at``: its number and the index after it; None when the
    bytes end first; ValueError when it is not canonical or over ``limit``."""
    end = len(buf)
    if at >= end:
        return None
    if buf[at] != mark:
        raise ValueError(f"expected '{chr(mark)}', got byte 0x{buf[at]:02x}")
    p = first = at + 1
    n = 0
    while p < end and 48 <= buf[p] <= 57:
        if p - first >= 15 or (p > first and n == 0):
            raise ValueError(f"a '{chr(mark)}' length that is not canonical")
        n = n * 10 + buf[p] - 48
        p += 1
    if p < end and (buf[p] != 13 or p == first):
        raise ValueError(f"a '{chr(mark)}' length that is not canonical")
    if p + 1 >= end:
        return None
    if buf[p + 1] != 10:
        raise ValueError(f"a '{chr(mark)}' length that is not canonical")
    if n > limit:
        raise ValueError(f"a '{chr(mark)}' length over the limit")
    return n, p + 2


def new_splitter() -> CommandSplitter:
    """The C splitter when it is built, else ``PySplitter``."""
    try:
        module = importlib.import_module("headwater.resp._split")
    except ImportError:
        return PySplitter()
    return cast(CommandSplitter, module.Splitter())
