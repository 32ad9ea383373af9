"""The replication backlog: the last ``repl-backlog-size`` bytes of the replication stream.

Why this shape
--------------
The replication stream is the effects the AOF gets (RESP commands, a ``SELECT`` before each
change of database) plus the primary's PINGs. Every byte of it has an *offset*: the first
byte ever fed is offset 1, and ``offset`` (Redis: ``master_repl_offset``) is the offset of the
last byte fed. A replica that lost its link asks ``PSYNC <replid> <offset+1>``; if the backlog
still holds that byte, the primary sends the bytes from there on (``+CONTINUE``) instead of a
whole snapshot. The backlog is a fixed ring, so feeding costs a slice copy and never grows::

    buf:  [ ... oldest bytes ... | newest bytes ... ]
                                 ^ idx: where the next byte goes (wraps at size)
    held: the ``histlen`` bytes before idx (wrapping), offsets
          first_byte_offset .. offset (inclusive)

Rules: ``0 <= histlen <= size``; ``first_byte_offset == offset - histlen + 1``; a PSYNC for
``start`` can continue iff ``first_byte_offset <= start <= offset + 1`` (``start == offset + 1``
means "nothing missed": zero bytes to send). Resizing keeps the newest bytes that fit.
"""

from __future__ import annotations


class BacklogError(Exception):
    """An invariant of the backlog does not hold (a bug, never bad input)."""


class Backlog:
    """A byte ring over the replication stream (see the module doc)."""

    def __init__(self, size: int, offset: int = 0) -> None:
        if size < 1:
            raise ValueError("the backlog size must be at least 1 byte")
        self.size = size
        self.buf = bytearray(size)
        #: where the next byte goes
        self.idx = 0
        #: how many bytes the ring holds (at most ``size``)
        self.histlen = 0
        #: the offset of the last byte fed (Redis: master_repl_offset)
        self.offset = offset

    @property
    def first_byte_offset(self) -> int:
        """The offset of the oldest byte held (``offset + 1`` when empty)."""
        return self.offset - self.histlen + 1

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        n = len(data)
        if not n:
            return
        size = self.size
        if n >= size:
            self.buf[:] = data[n - size :]
            self.idx = 0
            self.histlen = size
        else:
            idx = self.idx
            first = min(n, size - idx)
            self.buf[idx : idx + first] = data[:first]
            if first < n:
                self.buf[: n - first] = data[first:]
            self.idx = (idx + n) % size
            self.histlen = min(size, self.histlen + n)
        self.offset += n

    def covers(self, start: int) -> bool:
        """Whether the bytes from offset ``start`` on are all held."""
        return self.first_byte_offset <= start <= self.offset + 1

    def read_from(self, start: int) -> bytes:
        """The bytes from offset ``start`` to ``offset`` (``covers(start)`` must hold)."""
        if not self.covers(start):
            raise ValueError(f"offset {start} is not in the backlog")
        n = self.offset - start + 1
        if not n:
            return b""
        begin = (self.idx - n) % self.size
        if begin + n <= self.size:
            return bytes(self.buf[begin : begin + n])
        return bytes(self.buf[begin:]) + bytes(self.buf[: self.idx])

    def reset(self, offset: int) -> None:
        """Forget every byte; the next byte fed has offset ``offset + 1`` (after a full sync
        from a primary: its offset)."""
        self.idx = 0
        self.histlen = 0
        self.offset = offset

    def resize(self, size: int) -> None:
        """``CONFIG SET repl-backlog-size``: keep the newest bytes that fit."""
        if size < 1:
            raise ValueError("the backlog size must be at least 1 byte")
        keep = min(self.histlen, size)
        newest = self.read_from(self.offset - keep + 1)
        offset = self.offset
        self.size = size
        self.buf = bytearray(size)
        self.idx = 0
        self.histlen = 0
        self.offset = offset - keep
        self.feed(newest)

    def check_invariants(self) -> None:
        if len(self.buf) != self.size:
            raise BacklogError(f"buffer of {len(self.buf)} bytes, size {self.size}")
        if not 0 <= self.histlen <= self.size:
            raise BacklogError(f"histlen {self.histlen} outside 0..{self.size}")
        if not 0 <= self.idx < self.size:
            raise BacklogError(f"idx {self.idx} outside 0..{self.size - 1}")
        if self.first_byte_offset < 1 and self.histlen:
            raise BacklogError(f"first byte offset {self.first_byte_offset} below 1")
