"""Canonical RESP commands split out of a byte stream: the C ``Splitter`` (``_split.c``), or
in the pure build ``HiredisSplitter``: hiredis's reader, with ``PySplitter`` (the same scan as
the C one, in Python) judging what hiredis cannot be trusted with.

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
from typing import Any, Literal, Protocol, cast

import hiredis

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


class HiredisSplitter(PySplitter):
    """The pure build's splitter: hiredis's C reader finds the commands, ``PySplitter``'s
    scan judges whatever hiredis cannot be trusted with. A command hiredis returns is taken
    when it is canonical where it lies: an array of bytes no longer than the limits, whose
    canonical size (``bulks_size``) ends with CRLF at the end of the bytes or before the next
    ``*``; else, and at a command cut short (its headers may already be over a limit), the
    scan decides from the command's start, with the C splitter's words. hiredis allocates an
    aggregate's whole list at its header, so a chunk with a big one (``_suspicious``) is not
    given to it: the scan goes on until the bytes held are used up."""

    def __init__(self) -> None:
        super().__init__()
        self._reader: hiredis.Reader | None = hiredis.Reader()

    def feed(self, data: bytes) -> int:
        reader = self._reader
        # (a header split between the bytes held and these counts too)
        tail = self._buf[-BIG_AGGREGATE:]
        if reader is not None and (_suspicious(data) or _suspicious(tail + data[:BIG_AGGREGATE])):
            reader = self._reader = None
        held = super().feed(data)
        if reader is not None:
            reader.feed(data)
        return held

    def take_rest(self) -> bytes:
        self._reader = hiredis.Reader()
        return super().take_rest()

    def gets(self) -> list[bytes] | Literal[False]:
        reader, buf, pos = self._reader, self._buf, self._pos
        if pos == len(buf):
            return False
        if reader is None:
            return self._scanned()
        try:
            cmd = reader.gets()
        except Exception:  # (ProtocolError, or MemoryError on a big aggregate)
            return self._scanned()
        if cmd is False or type(cmd) is not list or not cmd:
            return self._scanned()
        size = bulks_size(cmd)
        end = pos + size
        if (
            size < 0
            or buf[pos] != 42
            or end > len(buf)
            or buf[end - 2] != 13
            or buf[end - 1] != 10
            or (end < len(buf) and buf[end] != 42)
            or len(cmd) > self.max_words
            or (size > self.max_bulk and max(map(len, cmd)) > self.max_bulk)
        ):
            return self._scanned()
        self._taken += size
        self._pos = end
        return cast(list[bytes], cmd)

    def _scanned(self) -> list[bytes] | Literal[False]:
        """``PySplitter``'s answer at the command's start; hiredis, out of step with it
        now, starts again at the next boundary (if it is not one already)."""
        self._reader = None
        argv = super().gets()
        if self._pos == len(self._buf):
            self._reader = hiredis.Reader()  # (nothing held: in step again)
        return argv


#: an aggregate header with this many digits (1,000,000 elements) or more is kept from hiredis
BIG_AGGREGATE = 7
#: digits fold to ``0`` and the aggregate marks (``*>~|%``) to ``*``: "a mark then 7 digits"
#: is then one substring search
_FOLD_MARKS = bytes.maketrans(b"123456789>~|%", b"000000000****")


def _suspicious(data: bytes | bytearray) -> bool:
    return b"*0000000" in data.translate(_FOLD_MARKS)


def bulks_size(cmd: list[Any]) -> int:
    """The canonical size of a command from hiredis; -1 if an argument is not bytes."""
    size = 0
    for item in cmd:
        if not isinstance(item, bytes):
            return -1
        n = len(item)
        size += n + (6 if n < 10 else 7 if n < 100 else 8 if n < 1000 else 5 + len(str(n)))
    n = len(cmd)
    return size + (4 if n < 10 else 3 + len(str(n)))


def new_splitter() -> CommandSplitter:
    """The C splitter when it is built, else ``HiredisSplitter``."""
    try:
        module = importlib.import_module("headwater.resp._split")
    except ImportError:
        return HiredisSplitter()
    return cast(CommandSplitter, module.Splitter())
