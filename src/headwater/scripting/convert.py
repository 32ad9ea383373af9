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
(RESP2 scripts) or booleans (``redis.setresp(3)``); anything else is a null.
"""

from __future__ import annotations

import math
from typing import Any

from lupa import lua51

from headwater.errors import ReplyError, ScriptReplyError
from headwater.resp.encoder import encode_into
from headwater.resp.types import PairMap, Raw, Reply, RSet, Status

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


def _is_table(value: object) -> bool:
    return bool(lua51.lua_type(value) == "table")


def error_from_text(text: bytes) -> ReplyError:
    """``-text`` as Redis writes it: the code (INFO errorstats) is the first word."""
    return ScriptReplyError(text)


def lua_to_reply(value: Any, script_resp: int, client_resp: int) -> Reply:
    kind = type(value)
    if kind is bytes:
        return value  # type: ignore[no-any-return]
    if kind is int:
        return value  # type: ignore[no-any-return]
    if kind is float:
        return lua_number_to_int(value)
    if kind is bool:
        if script_resp == 3:
            return value  # type: ignore[no-any-return]
        return 1 if value else None
    if _is_table(value):
        return _table_to_reply(value, script_resp, client_resp)
    return None


def _table_to_reply(table: Any, script_resp: int, client_resp: int) -> Reply:
    # (ok and err texts are C strings to Redis: they end at a NUL)
    err = table[b"err"]
    if type(err) is bytes:  # (Redis trims the line feeds it ends with, maps the others)
        return error_from_text(err.split(b"\0", 1)[0].rstrip(b"\r\n"))
    ok = table[b"ok"]
    if type(ok) is bytes:
        return Status(ok.split(b"\0", 1)[0].replace(b"\r", b" ").replace(b"\n", b" "))
    double = table[b"double"]
    if type(double) in (int, float):
        return float(double)
    big = table[b"big_number"]
    if type(big) is bytes:
        text = big.replace(b"\r", b" ").replace(b"\n", b" ")
        return Raw(b"(%s\r\n" % text) if client_resp == 3 else text
    mapping = table[b"map"]
    if _is_table(mapping):
        return PairMap(
            (lua_to_reply(k, script_resp, client_resp), lua_to_reply(v, script_resp, client_resp))
            for k, v in mapping.items()
        )
    members = table[b"set"]
    if _is_table(members):
        return RSet(lua_to_reply(k, script_resp, client_resp) for k in members)
    verbatim = table[b"verbatim_string"]
    if _is_table(verbatim):
        fmt, text = verbatim[b"format"], verbatim[b"string"]
        if type(fmt) is bytes and type(text) is bytes:
            if client_resp == 3:
                return Raw(b"=%d\r\n%s:%s\r\n" % (len(text) + 4, fmt[:3], text))
            return text
    items: list[Reply] = []
    index = 1
    while True:
        item = table[index]
        if item is None:
            return items
        items.append(lua_to_reply(item, script_resp, client_resp))
        index += 1
