"""Commands split out of a replication stream: the C ``Splitter`` (``_split.c``), or in the
pure build the same interface over hiredis.

A primary's stream is canonical RESP, arrays of bulk strings only. The link needs each
command as a list of bytes and the bytes the whole commands took (its offset, its backlog);
anything else at a command's start is garbage, which the link refuses without applying it.
"""

from __future__ import annotations

import importlib
from typing import Literal, Protocol, cast

import hiredis

from headwater.resp.parser import bulks_size


class CommandSplitter(Protocol):
    """``feed`` bytes; ``gets`` the next whole command or False; ValueError (nothing taken)
    at anything that is not a command; ``taken``: bytes of the commands returned."""

    @property
    def taken(self) -> int: ...

    def feed(self, data: bytes) -> None: ...

    def gets(self) -> list[bytes] | Literal[False]: ...


class HiredisSplitter:
    """The pure build's splitter: hiredis's reader, each command sized as canonical RESP
    (the link checks that the cut falls at a command's end)."""

    def __init__(self) -> None:
        self._reader = hiredis.Reader()
        self._taken = 0

    @property
    def taken(self) -> int:
        return self._taken

    def feed(self, data: bytes) -> None:
        self._reader.feed(data)

    def gets(self) -> list[bytes] | Literal[False]:
        try:
            argv = self._reader.gets()
        except hiredis.ProtocolError as exc:
            raise ValueError(str(exc)) from None
        if argv is False:
            return False
        size = bulks_size(argv) if type(argv) is list and argv else -1
        if size < 0:
            raise ValueError(f"{_shown(argv)} is not a command")
        self._taken += size
        return cast(list[bytes], argv)


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def new_splitter() -> CommandSplitter:
    """The C splitter when it is built, else hiredis's."""
    try:
        module = importlib.import_module("headwater.resp._split")
    except ImportError:
        return HiredisSplitter()
    return cast(CommandSplitter, module.Splitter())
