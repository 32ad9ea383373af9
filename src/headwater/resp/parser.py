"""Request parsing: bytes in, argv lists out.

Theory of operation
-------------------
Two parsers share one byte stream:

* the **fast path** is hiredis's C reader. It parses well-formed RESP arrays of bulk strings
  at ~0.2 us per command, but it knows nothing of inline commands, Redis's limits or Redis's
  error texts;
* the **slow path** (``_ExactParser``) is a pure-Python transcription of Redis's request
  grammar (``processInlineBuffer`` / ``processMultibulkBuffer``): inline commands with quoting,
  ``proto-max-bulk-len``, the unauthenticated limits and the exact ``Protocol error: …`` texts.

The fast path runs while the stream is well-formed RESP. We hand over to the slow path, at the
last command boundary, when (1) a command starts with a byte other than ``*`` (inline, or a
RESP3 aggregate such as ``~1`` that Redis runs as an inline command), (2) hiredis raises or
yields something that is not an array of bulk strings, (3) the bytes hiredis took for a command
are not its canonical encoding (see below), (4) a single command grows past
``FAST_PATH_MAX_PENDING`` bytes, (5) a client that must authenticate first sends a command
over the unauthenticated limits (more than 10 arguments, or one over 16 KB: the exact grammar
gives Redis's error, and before the command runs), (6) a batch ends inside a command whose
headers so far Redis would not accept (``_plausible``, which knows those limits too), or (7) a
chunk holds something hiredis must not see (``_suspicious``). The slow path hands back as soon
as its buffer is empty.

Unauthenticated clients stay on the fast path: a flood of ``-NOAUTH`` commands must cost as
little to refuse as it can (the slow path takes ~10 us a command, hiredis well under 1).

Counting bytes. hiredis only accepts canonical RESP (``*<n>\r\n`` then ``$<len>\r\n<data>\r\n``,
no leading zeros), so a command's byte size follows from its argv (``wire_size``, ~0.3 us).
The fast path keeps the unparsed bytes in ``_buf`` and the offset ``_pos`` of the next command
in it; each command hiredis returns must start with ``*`` at ``_pos`` and fit in the bytes
received, end with CRLF and be followed by the end of the data or another ``*`` (aligned),
or hiredis was fed something non-canonical (``*1\r\n+PING\r\n``: a simple string where Redis
requires ``$``) and the slow path takes over *before* the command runs. At the end of a batch,
``_pos == len(_buf)`` means we stand at a command boundary.

What hiredis must never see (``_suspicious``, one translate and a few substring searches per
chunk):

* a big aggregate header: hiredis allocates the whole list when it reads the header, so
  ``*2147483647\r\n`` costs 16 GB of address space and, when the reader is freed, seconds of
  a stalled event loop (``>``, ``~``, ``|`` and ``%`` likewise);

Redis finds line ends with ``strchr`` on a NUL-terminated buffer, so a NUL byte before the
``\n`` of an inline command (or the ``\r`` of a header) hides it: Redis keeps waiting, until the
64 KB limit. The slow path does the same (``_find``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import hiredis

#: Above this many buffered bytes of one unfinished command, parse it on the exact path.
FAST_PATH_MAX_PENDING = 1 << 20
#: An aggregate header with this many digits (1,000,000 elements) or more goes to the exact path.
BIG_AGGREGATE = 7
#: digits fold to ``0`` and the aggregate marks (``*>~|%``) to ``*``: "a mark then 7 digits" is
#: then one substring search (one pass over a copy rather than five)
_FOLD_MARKS = bytes.maketrans(b"123456789>~|%", b"000000000****")
#: Redis's PROTO_INLINE_MAX_SIZE: the longest inline line or length header we wait for.
INLINE_MAX_SIZE = 64 * 1024
#: Limits for clients that have not authenticated yet (Redis: authRequired()).
UNAUTH_MAX_ARGS = 10
UNAUTH_MAX_BULK = 16384
#: Redis 7.4+ closes an unauthenticated client whose query buffer passes 1 MB, whatever
#: ``client-query-buffer-limit`` says.
UNAUTH_MAX_QUERY_BUFFER = 1024 * 1024
_INT_MAX = 2**31 - 1


class RequestError(Exception):
    """A protocol violation; the message is the reply text (``Protocol error: …``).

    ``reply`` is false when Redis closes the connection without replying (query buffer limit).
    """

    def __init__(self, message: str, reply: bool = True) -> None:
        super().__init__(message)
        self.reply = reply


def wire_size(argv: list[bytes]) -> int:
    """Bytes of argv as canonical RESP: ``*<n>\r\n`` then ``$<len>\r\n<arg>\r\n`` each."""
    size = 0
    for arg in argv:
        n = len(arg)
        size += n + (6 if n < 10 else 7 if n < 100 else 8 if n < 1000 else 5 + len(str(n)))
    n = len(argv)
    return size + (4 if n < 10 else 3 + len(str(n)))


def bulks_size(cmd: list[Any]) -> int:
    """``wire_size`` of a command from hiredis; -1 if an argument is not bytes (a nested
    array, an integer...). (``Any``: until checked here, the items may be anything, and
    compiled code would check a declared ``bytes`` on reading.) A plain loop: compiled, a
    type check and a length per argument, no intermediate objects."""
    size = 0
    for item in cmd:
        if not isinstance(item, bytes):
            return -1
        n = len(item)
        size += n + (6 if n < 10 else 7 if n < 100 else 8 if n < 1000 else 5 + len(str(n)))
    n = len(cmd)
    return size + (4 if n < 10 else 3 + len(str(n)))


class RequestParser:
    """Incremental request parser for one connection: ``feed(bytes)``, then ``next()`` until
    it returns ``None`` (more data needed). Raises ``RequestError`` on a protocol violation,
    after which the parser must not be used again."""

    def __init__(
        self,
        max_bulk_len: int = 512 * 1024 * 1024,
        max_query_buffer: int = 1024 * 1024 * 1024,
        auth_required: bool = False,
    ) -> None:
        self.max_bulk_len = max_bulk_len
        self.max_query_buffer = max_query_buffer
        self.auth_required = auth_required
        self._reader = hiredis.Reader()
        self._exact: _ExactParser | None = None
        self._buf = b""  # bytes fed to hiredis since the last boundary
        self._pos = 0  # where in _buf the next command starts
        self._held: list[bytes] = []  # chunks kept from hiredis (see _suspicious)
        self._ready: deque[list[bytes]] = deque()  # inline commands parsed in one go

    def buffered(self) -> int:
        """Bytes received but not yet returned as commands (for CLIENT LIST ``qbuf``)."""
        if self._exact is not None:
            return self._exact.buffered()
        return (
            sum(wire_size(c) for c in self._ready)
            + len(self._buf)
            - self._pos
            + sum(len(chunk) for chunk in self._held)
        )

    def feed(self, data: bytes) -> None:
        if not data:
            return
        if self._exact is not None:
            self._exact.feed(data)
        elif self._held or self._suspicious(data):
            if self._buf:
                self._held.append(data)  # moved to the exact path by _end_of_batch
            else:
                self._exact = self._new_exact()
                self._exact.feed(data)
        elif not self._buf and data[0] != 42:  # 42: "*"; anything else starts an inline command
            commands = _whole_inline_lines(data)
            if commands is not None:
                self._ready.extend(commands)
            else:
                self._exact = self._new_exact()
                self._exact.feed(data)
        else:
            self._reader.feed(data)
            self._buf = self._buf + data if self._buf else data
            if self.auth_required and len(self._buf) - self._pos > UNAUTH_MAX_QUERY_BUFFER:
                raise RequestError("query buffer limit reached", reply=False)

    def _suspicious(self, data: bytes) -> bool:
        """Does the chunk hold something hiredis must not parse (see the module doc)?
        Markers split between the previous chunk and this one count too (``_FOLD_MARKS``):
        only the end of an unfinished command can hold the start of one, and ``_buf`` ends
        with it then (an empty ``_buf`` means the last chunk ended a command, with CRLF)."""
        buf = self._buf
        text = buf[-BIG_AGGREGATE:] + data if buf else data
        return b"*0000000" in text.translate(_FOLD_MARKS)

    def next(self) -> list[bytes] | None:
        if self._ready:
            return self._ready.popleft()
        while True:
            exact = self._exact
            if exact is not None:
                return self._next_exact(exact)
            try:
                cmd = self._reader.gets()
            except Exception:  # ProtocolError, or MemoryError on "|2000000000": let Redis's
                self._to_exact()  # grammar decide
                continue
            if cmd is False:
                return self._end_of_batch()
            buf, pos = self._buf, self._pos
            if pos >= len(buf) or buf[pos] != 42:  # not "*": "~1", ">1"... (inline to Redis)
                self._to_exact()
                continue
            if type(cmd) is list and cmd:
                end = pos + bulks_size(cmd)
                if end < pos:  # not all bulk strings
                    self._to_exact()
                    continue
                # Aligned: a canonical command ends with CRLF, followed by the end of the data
                # or another "*" (42). A simple or verbatim string sent where Redis wants a bulk
                # string ("+hi" for "$2\r\nhi") changes the length, so the computed end lands
                # elsewhere; an inline command after a RESP one also fails this, harmlessly: it
                # costs a slow parse. (Inline: a call per command costs more than the test.)
                size = len(buf)
                if (
                    end > size
                    or buf[end - 1] != 10
                    or buf[end - 2] != 13
                    or (end < size and buf[end] != 42)
                ):
                    self._to_exact()  # the command was not sent canonically: let the exact
                    continue  # grammar judge it before it runs
                if self.auth_required and _over_unauthenticated_limits(cmd, end - pos):
                    self._to_exact()  # the exact grammar replies as Redis does, at its header
                    continue
                self._pos = end
                return cmd
            if cmd is None or cmd == []:
                # Redis skips "*0" and "*-1" (multibulk length <= 0) silently.
                self._pos = pos + (5 if cmd is None else 4)
                continue
            self._to_exact()  # a top-level value that is not an array

    def _end_of_batch(self) -> list[bytes] | None:
        """hiredis wants more data: are we at a command boundary, or inside a command?"""
        if self._held:
            return self._next_exact(self._to_exact())
        buf, pos = self._buf, self._pos
        if pos == len(buf):
            if buf:
                self._buf = b""
                self._pos = 0
            return None
        if pos:
            buf = self._buf = buf[pos:]
            self._pos = 0
        if len(buf) > FAST_PATH_MAX_PENDING or not self._plausible(buf):
            return self._next_exact(self._to_exact())
        return None

    def _plausible(self, partial: bytes) -> bool:
        """Run the exact grammar over an unfinished command: Redis rejects a bad header as
        soon as it arrives, while hiredis would wait for more bytes. A command the exact
        grammar completes (``>2\r\n`` after a command is an inline command) is not
        plausible either."""
        probe = _ExactParser(self)
        try:
            probe.feed(partial)
            return probe.next() is None
        except RequestError:
            return False

    def _to_exact(self) -> _ExactParser:
        """Re-parse everything after the last returned command (and the held chunks) on
        the exact path."""
        rest = self._buf[self._pos :]
        self._reader = hiredis.Reader()
        self._buf = b""
        self._pos = 0
        exact = self._exact = self._new_exact()
        exact.feed(rest)
        held, self._held = self._held, []
        for chunk in held:
            exact.feed(chunk)
        return exact

    def _new_exact(self) -> _ExactParser:
        return _ExactParser(self)

    def _next_exact(self, exact: _ExactParser) -> list[bytes] | None:
        """The next command of the exact path (``exact`` is ``self._exact``)."""
        cmd = exact.next()
        if exact.is_empty():
            self._exact = None  # back to the fast path at this boundary
        return cmd


class _ExactParser:
    """Redis's request grammar, byte for byte (networking.c)."""

    def __init__(self, owner: RequestParser) -> None:
        self.owner = owner
        self.buf = bytearray()
        self.pos = 0
        self.argv: list[bytes] = []
        self.args_left = 0  # of the multibulk being read; 0 when at a command boundary
        self.bulk_len = -1

    def feed(self, data: bytes) -> None:
        if self.pos > 65536 and self.pos * 2 > len(self.buf):
            del self.buf[: self.pos]
            self.pos = 0
        self.buf += data
        buffered = len(self.buf) - self.pos
        owner = self.owner
        if buffered > owner.max_query_buffer or (
            buffered > UNAUTH_MAX_QUERY_BUFFER and owner.auth_required
        ):
            raise RequestError("query buffer limit reached", reply=False)

    def buffered(self) -> int:
        return len(self.buf) - self.pos

    def is_empty(self) -> bool:
        return self.pos == len(self.buf) and self.args_left == 0

    def next(self) -> list[bytes] | None:
        while self.pos < len(self.buf) or self.args_left:
            if self.args_left == 0:
                if self.buf[self.pos] != 42:
                    cmd = self._inline()
                    if cmd is None:
                        return None
                    if cmd:
                        return cmd
                    continue
                if not self._multibulk_header():
                    return None
                if self.args_left == 0:
                    continue  # "*0" / "*-1": nothing to run
            if not self._bulks():
                return None
            argv, self.argv = self.argv, []
            return argv
        return None

    def _find(self, byte: bytes) -> int:
        """``strchr(buf + pos, byte)``: the first ``byte`` at or after pos, unless a NUL comes
        first (Redis's query buffer is a C string there); -1 if none."""
        found = self.buf.find(byte, self.pos)
        if found >= 0 and self.buf.find(b"\0", self.pos, found) >= 0:
            return -1
        return found

    def _line_end(self, too_big: str) -> int:
        """Index of the ``\\r`` ending the header at pos, or -1 if not all here yet."""
        cr = self._find(b"\r")
        if cr < 0:
            if len(self.buf) - self.pos > INLINE_MAX_SIZE:
                raise RequestError(f"Protocol error: {too_big}")
            return -1
        if cr + 1 >= len(self.buf):
            return -1  # Redis waits for the byte after "\r" without checking the size
        return cr

    def _inline(self) -> list[bytes] | None:
        nl = self._find(b"\n")
        if nl < 0:
            if len(self.buf) - self.pos > INLINE_MAX_SIZE:
                raise RequestError("Protocol error: too big inline request")
            return None
        end = nl - 1 if nl > self.pos and self.buf[nl - 1] == 13 else nl
        line = bytes(self.buf[self.pos : end])
        self.pos = nl + 1
        if len(line.translate(None, _SPLIT_SPECIAL)) == len(line):
            return line.split()  # no quotes, escapes, NUL, \v or \f: plain whitespace split
        argv = split_args(line)
        if argv is None:
            raise RequestError("Protocol error: unbalanced quotes in request")
        return argv

    def _multibulk_header(self) -> bool:
        cr = self._line_end("too big mbulk count string")
        if cr < 0:
            return False
        count = _strict_int(self.buf[self.pos + 1 : cr])
        if count is None or count > _INT_MAX:
            raise RequestError("Protocol error: invalid multibulk length")
        if count > UNAUTH_MAX_ARGS and self.owner.auth_required:
            raise RequestError("Protocol error: unauthenticated multibulk length")
        self.pos = cr + 2
        self.args_left = max(count, 0)
        self.bulk_len = -1
        return True

    def _bulks(self) -> bool:
        buf = self.buf
        while self.args_left:
            if self.bulk_len < 0:
                cr = self._line_end("too big bulk count string")
                if cr < 0:
                    return False
                if buf[self.pos] != 36:  # "$"
                    got = chr(buf[self.pos])
                    raise RequestError(f"Protocol error: expected '$', got '{got}'")
                n = _strict_int(buf[self.pos + 1 : cr])
                if n is None or n < 0 or n > self.owner.max_bulk_len:
                    raise RequestError("Protocol error: invalid bulk length")
                if n > UNAUTH_MAX_BULK and self.owner.auth_required:
                    raise RequestError("Protocol error: unauthenticated bulk length")
                self.pos = cr + 2
                self.bulk_len = n
            if len(buf) - self.pos < self.bulk_len + 2:
                return False
            self.argv.append(bytes(buf[self.pos : self.pos + self.bulk_len]))
            self.pos += self.bulk_len + 2
            self.bulk_len = -1
            self.args_left -= 1
        return True


def _over_unauthenticated_limits(cmd: list[bytes], size: int) -> bool:
    """Would Redis refuse a header of this command (``size`` bytes on the wire) from a client
    that must authenticate first?"""
    if len(cmd) > UNAUTH_MAX_ARGS:
        return True
    return size > UNAUTH_MAX_BULK and max(map(len, cmd)) > UNAUTH_MAX_BULK


def _whole_inline_lines(data: bytes) -> list[list[bytes]] | None:
    """A chunk of complete, plain inline commands (telnet, ``redis-benchmark -t ping_inline``)
    parsed at once; None when the exact parser must look (a line starting with ``*``, a NUL,
    a partial line, quoting, or more than the inline limit)."""
    if data[-1] != 10 or len(data) > INLINE_MAX_SIZE or b"\0" in data or b"\n*" in data:
        return None
    commands = []
    for line in data.split(b"\n")[:-1]:
        if line.endswith(b"\r"):
            line = line[:-1]
        if len(line.translate(None, _SPLIT_SPECIAL)) != len(line):
            return None
        argv = line.split()
        if argv:
            commands.append(argv)
    return commands


def _strict_int(raw: bytes | bytearray) -> int | None:
    """Redis's string2ll: optional '-', digits, no leading zeros, no '+', fits int64."""
    if not raw or len(raw) > 20:
        return None
    digits = raw[1:] if raw[0] == 45 else raw
    if not digits or not digits.isdigit() or (digits[0] == 48 and len(raw) > 1):
        return None
    value = int(raw)
    if not -(2**63) <= value < 2**63:
        return None
    return value


#: bytes after which bytes.split() and sdssplitargs could disagree
_SPLIT_SPECIAL = b"\"'\\\0\x0b\x0c"
_ESCAPES = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord("b"): 8, ord("a"): 7}
_HEX = b"0123456789abcdefABCDEF"
_SPACE = b" \n\r\t\v\f"


def split_args(line: bytes) -> list[bytes] | None:
    """Split an inline command like Redis's ``sdssplitargs``; ``None`` on unbalanced quotes."""
    args: list[bytes] = []
    i, n = 0, len(line)
    while True:
        while i < n and line[i] in _SPACE:
            i += 1
        if i >= n or line[i] == 0:
            return args
        current = bytearray()
        in_double = in_single = False
        while True:
            if i >= n or line[i] == 0:
                if in_double or in_single:
                    return None
                break
            ch = line[i]
            if in_double:
                if (
                    ch == 92
                    and i + 3 < n
                    and line[i + 1] == ord("x")
                    and line[i + 2] in _HEX
                    and line[i + 3] in _HEX
                ):
                    current.append(int(line[i + 2 : i + 4], 16))
                    i += 3
                elif ch == 92 and i + 1 < n and line[i + 1] != 0:
                    i += 1
                    current.append(_ESCAPES.get(line[i], line[i]))
                elif ch == 34:
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        return None  # closing quote must be followed by a space
                    in_double = False
                    i += 1
                    break
                else:
                    current.append(ch)
            elif in_single:
                if ch == 92 and i + 1 < n and line[i + 1] == 39:
                    i += 1
                    current.append(39)
                elif ch == 39:
                    if i + 1 < n and line[i + 1] not in _SPACE:
                        return None
                    in_single = False
                    i += 1
                    break
                else:
                    current.append(ch)
            elif ch in b" \n\r\t":
                break
            elif ch == 34:
                in_double = True
            elif ch == 39:
                in_single = True
            else:
                current.append(ch)
            i += 1
        args.append(bytes(current))
