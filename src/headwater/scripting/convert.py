"""Conversions between Redis replies and Lua values, both ways, as Redis documents them.

RESP → Lua (what ``redis.call`` returns): the command's reply is encoded in the script's
protocol (``redis.setresp``) and read back, as Redis reads its fake client's output:

=====================  =========================================================
RESP                   Lua
=====================  =========================================================
integer                number
bulk string            string; null bulk → false
array                  table (1-based); null array → false
status                 ``{ok=…}``
error                  ``{err=…}`` (``redis.call`` raises it, ``redis.pcall`` returns it)
RESP3 null             nil
RESP3 boolean          true/false
RESP3 double           ``{double=number}``
RESP3 big number       ``{big_number=string}``
RESP3 verbatim         ``{verbatim_string={format=…, string=…}}``
RESP3 map / set        ``{map={k=v…}}`` / ``{set={k=true…}}``
=====================  =========================================================

Lua → reply (what a script returns): strings are bulk strings, numbers integers (truncated
toward zero), tables arrays up to the first nil, unless they hold ``err``, ``ok``, ``double``,
``big_number``, ``map``, ``set`` or ``verbatim_string``; ``true`` is 1 and ``false`` a null
(RESP2 scripts) or booleans (``redis.setresp(3)``); anything else is a null. Tables are read
raw (a metatable's ``__index`` never runs: ``return _G`` is an empty array), and only as deep
as Redis's Lua stack lets its converter go (``lua_to_reply``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from lupa import lua51

from headwater.errors import ReplyError, ScriptReplyError
from headwater.resp.encoder import encode_into
from headwater.resp.types import Raw, Reply, Status

LLONG_MIN = -(2**63)


def lua_number_to_int(value: float) -> int:
    """A C ``(long long)`` cast of a Lua number: NaN, infinities and out-of-range values give
    LLONG_MIN, as on x86-64."""
    if math.isnan(value) or math.isinf(value) or not -(2.0**63) <= value < 2.0**63:
        return LLONG_MIN
    return int(value)


# -- RESP → Lua --------------------------------------------------------------------------------


class ReplyReader:
    """Reads one encoded reply into Lua values (tables made by ``lua.table_from``, the
    ``{ok=…}`` and ``{err=…}`` ones by Lua functions: a call into Lua costs half of a
    ``table_from``)."""

    def __init__(self, lua: Any, make_ok: Any = None, make_err: Any = None) -> None:
        self.lua = lua
        self.make_ok = make_ok or (lambda text: lua.table_from({b"ok": text}))
        self.make_err = make_err or (lambda text: lua.table_from({b"err": text}))
        self.data = b""
        self.pos = 0

    def read(self, data: bytes) -> tuple[bool, Any]:
        """The value, and whether the top-level reply was an error."""
        self.data, self.pos = data, 0
        return data[:1] == b"-", self._value()

    def _line(self) -> bytes:
        end = self.data.index(b"\r\n", self.pos)
        line = self.data[self.pos + 1 : end]
        self.pos = end + 2
        return line

    def _bulk(self, size: int) -> bytes:
        start = self.pos
        self.pos = start + size + 2
        return self.data[start : start + size]

    def _value(self) -> Any:
        kind = self.data[self.pos : self.pos + 1]
        line = self._line()
        table = self.lua.table_from
        if kind == b"$":
            size = int(line)
            return False if size < 0 else self._bulk(size)
        if kind == b":":
            return int(line)
        if kind == b"+":
            return self.make_ok(line)
        if kind == b"-":
            return self.make_err(line)
        if kind in (b"*", b">"):
            count = int(line)
            if count < 0:
                return False
            return table([self._value() for _ in range(count)])
        if kind == b"_":
            return None
        if kind == b"#":
            return line == b"t"
        if kind == b",":
            return table({b"double": float(line)})
        if kind == b"(":
            return table({b"big_number": line})
        if kind == b"=":
            text = self._bulk(int(line))
            verbatim = table({b"format": text[:3], b"string": text[4:]})
            return table({b"verbatim_string": verbatim})
        if kind == b"%":
            pairs = {}
            for _ in range(int(line)):
                key = self._value()
                pairs[key] = self._value()
            return table({b"map": table(pairs)})
        if kind == b"~":
            members = {self._value(): True for _ in range(int(line))}
            return table({b"set": table(members)})
        if kind == b"|":  # attributes: skipped, the reply follows
            for _ in range(2 * int(line)):
                self._value()
            return self._value()
        raise ValueError(f"unexpected reply type {kind!r}")


def reply_to_lua(reader: ReplyReader, reply: Reply, resp: int) -> tuple[bool, Any]:
    """A command's reply as a Lua value (and whether it is an error); the common shapes
    without encoding them."""
    kind = type(reply)
    if kind is bytes or kind is int:
        return False, reply
    if isinstance(reply, Status):  # (SET's +OK: without encoding it and reading it back)
        return False, reader.make_ok(bytes(reply))
    if reply is None and resp == 2:
        return False, False
    if isinstance(reply, ReplyError):
        return True, reader.make_err(reply.line())
    out: list[bytes] = []
    encode_into(out, reply, resp)
    return reader.read(b"".join(out))


# -- Lua → reply -------------------------------------------------------------------------------

#: Lua 5.1's LUAI_MAXCSTACK: ``lua_checkstack`` refuses to grow a C function's stack past it
LUA_STACK_LIMIT = 8000
#: where Redis's luaReplyToRedisReply finds a script's result: on the Lua stack after the
#: error handler
RESULT_SLOT = 2
#: what each of its steps asks ``lua_checkstack`` for (a map needs four slots)
STEP_ROOM = 4
#: where a nested value sits on Redis's stack, relative to its table's slot: an array's item
#: (table, item); a map's key (table, map, key, value, key) and value; a set's member
ITEM_SLOT, KEY_SLOT, VALUE_SLOT, MEMBER_SLOT = 1, 4, 3, 3
STACK_LIMIT_ERROR = b"-ERR reached lua stack limit\r\n"


def _is_table(value: object) -> bool:
    return bool(lua51.lua_type(value) == "table")


def error_from_text(text: bytes, counted: bool = False) -> ReplyError:
    """``-text`` as Redis writes it: the code (INFO errorstats) is the first word; ``counted``
    when the error was counted where it arose (a command ``redis.call`` ran)."""
    return ScriptReplyError(text, counted)


def _plain_value(value: Any, script_resp: int) -> Reply:
    """A value that is not a table: strings are bulk strings, numbers integers (truncated
    toward zero), booleans 1/null (RESP2 scripts) or booleans; anything else a null."""
    kind = type(value)
    if kind is bytes or kind is int:
        return value  # type: ignore[no-any-return]
    if kind is float:
        return lua_number_to_int(value)
    if kind is bool:
        if script_resp == 3:
            return value  # type: ignore[no-any-return]
        return 1 if value else None
    return None


def lua_to_reply(
    value: Any, script_resp: int, client_resp: int, shape: Any, count_error: Callable[[str], None]
) -> Reply:
    """A script's result as its reply, by Redis's rules (luaReplyToRedisReply). ``shape`` is
    the prelude's ``reply_shape``: what a table stands for, read with raw accesses (a
    metatable's ``__index`` never runs). A top-level error is a ReplyError; a table that holds
    others is encoded here, without recursion, for ``client_resp``: as deep as Redis's Lua
    stack lets it go, where ``-ERR reached lua stack limit`` stands for what is deeper (a
    table that holds itself). An error nested in it is counted (``count_error``, by its
    code) unless it is a command's, counted then."""
    if not _is_table(value):
        return _plain_value(value, script_resp)
    kind, first, second = shape(value)
    if kind == b"err":
        return error_from_text(_error_text(first), counted=second is True)
    if kind in (b"array", b"map", b"set"):
        return Raw(_encode_nested(value, script_resp, client_resp, shape, count_error))
    return _leaf(kind, first, second, client_resp)


def _error_text(text: bytes) -> bytes:
    # (a C string to Redis: it ends at a NUL; Redis trims the line feeds it ends with)
    return text.split(b"\0", 1)[0].rstrip(b"\r\n")


def _leaf(kind: bytes, first: Any, second: Any, client_resp: int) -> Reply:
    """A table that stands for one reply: ``{err=…}``, ``{ok=…}``, ``{double=…}``,
    ``{big_number=…}``, ``{verbatim_string={format=…, string=…}}``."""
    if kind == b"err":
        return error_from_text(_error_text(first))
    if kind == b"ok":  # (a C string to Redis, its line feeds made spaces)
        return Status(first.split(b"\0", 1)[0].replace(b"\r", b" ").replace(b"\n", b" "))
    if kind == b"double":
        return float(first)
    if kind == b"big_number":
        text = first.replace(b"\r", b" ").replace(b"\n", b" ")
        return Raw(b"(%s\r\n" % text) if client_resp == 3 else text
    if kind == b"verbatim":
        if client_resp == 3:
            return Raw(b"=%d\r\n%s:%s\r\n" % (len(second) + 4, first[:3], second))
        return second  # type: ignore[no-any-return]
    raise ValueError(f"unexpected reply shape {kind!r}")


def _encode_nested(
    table: Any, script_resp: int, client_resp: int, shape: Any, count_error: Callable[[str], None]
) -> bytes:
    """A table that holds others (an array, ``{map=…}``, ``{set=…}``), encoded depth first
    from an explicit stack of (value, its slot on Redis's Lua stack)."""
    out: list[bytes] = []
    pending: list[tuple[Any, int]] = [(table, RESULT_SLOT)]
    while pending:
        value, slot = pending.pop()
        if slot + STEP_ROOM > LUA_STACK_LIMIT:
            out.append(STACK_LIMIT_ERROR)
            count_error("ERR")
            continue
        if not _is_table(value):
            encode_into(out, _plain_value(value, script_resp), client_resp)
            continue
        kind, first, second = shape(value)
        if kind == b"array":
            out.append(b"*%d\r\n" % first)
            pending.extend((value[index], slot + ITEM_SLOT) for index in range(first, 0, -1))
        elif kind == b"map":
            pairs: list[tuple[Any, Any]] = list(first.items())
            count = len(pairs)
            out.append(b"%%%d\r\n" % count if client_resp == 3 else b"*%d\r\n" % (2 * count))
            pairs.reverse()  # (the stack: the first pair on top)
            for key, item in pairs:
                pending.append((item, slot + VALUE_SLOT))
                pending.append((key, slot + KEY_SLOT))
        elif kind == b"set":
            members: list[Any] = list(first.keys())
            out.append(b"~%d\r\n" % len(members) if client_resp == 3 else b"*%d\r\n" % len(members))
            members.reverse()
            pending.extend((member, slot + MEMBER_SLOT) for member in members)
        else:
            leaf = _leaf(kind, first, second, client_resp)
            if isinstance(leaf, ReplyError) and second is not True:
                count_error(leaf.code)
            encode_into(out, leaf, client_resp)
    return b"".join(out)
