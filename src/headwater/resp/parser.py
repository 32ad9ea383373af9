"""Request parsing: bytes in, argv lists out.

Theory of operation
-------------------
Two parsers share one byte stream:

* the **fast path** is a splitter of canonical commands (``split.py``: C in the compiled
  build). Every client library sends arrays of bulk strings in canonical form (``*<n>\r\n``
  then ``$<len>\r\n<data>\r\n``, no sign, no leading zeros); the splitter takes those at
  ~0.4 us a command and stops, with nothing taken, at anything else;
* the **slow path** (``_ExactParser``) is a pure-Python transcription of Redis's request
  grammar (``processInlineBuffer`` / ``processMultibulkBuffer``): inline commands with quoting,
  ``*0`` and ``*-1``, ``proto-max-bulk-len``, the unauthenticated limits and the exact
  ``Protocol error: …`` texts.

The fast path runs while the stream is canonical. Where the splitter stops (a command that
starts with a byte other than ``*``, as inline commands and RESP3 values such as ``~1`` do,
which Redis runs as inline commands; a header that is not canonical; a header over Redis's
limits), the rest goes to the slow path at that command boundary, before anything of it
runs. The slow path hands back as soon as its buffer is empty.

The limits are the splitter's: a multibulk count over ``INT_MAX`` and a bulk length over
``proto-max-bulk-len``; for a client that must authenticate first, more than 10 arguments or
one over 16 KB. Redis refuses such a header as soon as it arrives; the splitter stops at it
as soon as it is whole, so the exact grammar answers as Redis does, before the data. The
splitter allocates nothing for a command until all of it is here: a header such as
``*2147483647\r\n`` costs nothing while its words do not come (hiredis's reader would allocate
the whole list at once).

Unauthenticated clients stay on the fast path: a flood of ``-NOAUTH`` commands must cost as
little to refuse as it can (the slow path takes ~10 us a command).

Redis finds line ends with ``strchr`` on a NUL-terminated buffer, so a NUL byte before the
``\n`` of an inline command (or the ``\r`` of a header) hides it: Redis keeps waiting, until the
64 KB limit. The slow path does the same (``_find``); a NUL in a header is not canonical, so
the splitter never decides it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Literal

from headwater.resp.split import CommandSplitter, new_splitter

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


class RequestParser:
    """Incremental request parser for one connection: ``feed(bytes)``, then ``next()`` until
    it returns ``None`` (more data needed). Raises ``RequestError`` on a protocol violation,
    after which the parser must not be used again. ``auth_required`` and the two limits may
    change between reads (AUTH, CONFIG SET); ``feed`` applies them."""

    def __init__(
        self,
        max_bulk_len: int = 512 * 1024 * 1024,
        max_query_buffer: int = 1024 * 1024 * 1024,
        auth_required: bool = False,
    ) -> None:
        self.max_bulk_len = max_bulk_len
        self.max_query_buffer = max_query_buffer
        self.auth_required = auth_required
        split = self._split = new_splitter()
        # (bound once: a call through the Protocol would look the method up each time)
        self._feed: Callable[[bytes], int] = split.feed
        self._gets: Callable[[], list[bytes] | Literal[False]] = split.gets
        self._exact: _ExactParser | None = None
        self._ready: deque[list[bytes]] = deque()  # inline commands parsed in one go
        #: the limits the splitter has (see ``_limit``)
        self._limited_bulk = -1
        self._limited_auth = False
        self._limit()

    def buffered(self) -> int:
        """Bytes received but not yet returned as commands (for CLIENT LIST ``qbuf``)."""
        if self._exact is not None:
            return self._exact.buffered()
        return sum(wire_size(c) for c in self._ready) + self._split.pending

    def _limit(self) -> None:
        """Redis's header limits, as the splitter's."""
        split: CommandSplitter = self._split
        if self.auth_required:
            split.max_words = UNAUTH_MAX_ARGS
            split.max_bulk = min(UNAUTH_MAX_BULK, self.max_bulk_len)
        else:
            split.max_words = _INT_MAX
            split.max_bulk = self.max_bulk_len
        self._limited_bulk = self.max_bulk_len
        self._limited_auth = self.auth_required

    def feed(self, data: bytes) -> None:
        if not data:
            return
        if self._exact is not None:
            self._exact.feed(data)
            return
        if data[0] != 42 and not self._split.pending:  # 42: "*"; else an inline command
            commands = _whole_inline_lines(data)
            if commands is not None:
                self._ready.extend(commands)
            else:
                exact = self._exact = _ExactParser(self)
                exact.feed(data)
            return
        if self.max_bulk_len != self._limited_bulk or self.auth_required != self._limited_auth:
            self._limit()
        held = self._feed(data)
        if held > self.max_query_buffer or (held > UNAUTH_MAX_QUERY_BUFFER and self.auth_required):
            raise RequestError("query buffer limit reached", reply=False)

    def next(self) -> list[bytes] | None:
        if self._ready:
            return self._ready.popleft()
        while True:
            exact = self._exact
            if exact is not None:
                cmd = exact.next()
                if exact.is_empty():
                    self._exact = None  # back to the fast path at this boundary
                return cmd
            try:
                argv = self._gets()
            except ValueError:  # not canonical, or over a limit: Redis's grammar decides
                self._exact = _ExactParser(self)
                self._exact.feed(self._split.take_rest())
                continue
            return argv if argv is not False else None

    def authenticated(self, done: bool) -> None:
        """The client authenticated (or, RESET, no longer is): the limits of its next
        commands change, those of the commands already here included."""
        self.auth_required = not done
        self._limit()


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
