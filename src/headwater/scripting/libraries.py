"""The libraries Redis preloads for scripts: ``cjson`` and ``bit`` here, ``cmsgpack`` and
``struct`` in ``msgpack``.

``cjson`` follows lua-cjson 2.1.0 as Redis ships it: arrays are tables whose keys are all
positive integers (excessively sparse ones are refused), everything else an object (number
keys as strings), numbers as ``%.14g``, ``/`` escaped, ``cjson.null`` for JSON null; its
error texts are lua-cjson's. It is written in Lua here, and called through a Python function:
to Lua that is a C function, so, as with the real C library, an error names the script's
line (``user_script:1: Cannot serialise …``) even after a tail call.

``bit`` follows LuaBitOp (Redis's): 32-bit results, arguments normalised as ``bit.tobit``
does (rounded to an integer, taken modulo 2^32, signed).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.scripting.msgpack import LibraryError, cmsgpack_functions, struct_functions

CJSON = r"""
local null = ...
local type, pairs, tostring, error, select = type, pairs, tostring, error, select
local floor = math.floor
local concat, format, char, sub = table.concat, string.format, string.char, string.sub
local huge = math.huge

local escapes = {}
for i = 0, 31 do escapes[char(i)] = format('\\u%04x', i) end
escapes['\b'], escapes['\t'], escapes['\n'], escapes['\f'], escapes['\r'] =
  '\\b', '\\t', '\\n', '\\f', '\\r'
escapes['"'], escapes['\\'], escapes['/'], escapes['\127'] = '\\"', '\\\\', '\\/', '\\u007f'

local function fail(kind, reason) error('Cannot serialise ' .. kind .. ': ' .. reason, 0) end

-- the settings a script may change (they last, as in Redis's one Lua state); lua-cjson's
-- defaults
local settings = {encode_max_depth = 1000, decode_max_depth = 1000, encode_invalid_numbers = false}

local function number(n)
  if n ~= n or n == huge or n == -huge then
    local invalid = settings.encode_invalid_numbers
    if invalid == 'null' then return 'null' end
    if not invalid then fail('number', 'must not be NaN or Inf') end
    if n ~= n then return 'nan' end  -- (Redis's lua-cjson: as its number formatter writes them)
    return n < 0 and '-inf' or 'inf'
  end
  return format('%.14g', n)
end

local function array_length(t)
  local max, items = 0, 0
  for k in pairs(t) do
    if type(k) == 'number' and k >= 1 and floor(k) == k then
      if k > max then max = k end
      items = items + 1
    else
      return -1
    end
  end
  if max > items * 2 and max > 10 then fail('table', 'excessively sparse array') end
  return max
end

local encode_value
local function encode_table(t, depth, out)
  if depth > settings.encode_max_depth then
    error('Cannot serialise, excessive nesting (' .. depth .. ')', 0)
  end
  local n = array_length(t)
  if n > 0 then
    out[#out + 1] = '['
    for i = 1, n do
      if i > 1 then out[#out + 1] = ',' end
      encode_value(t[i], depth, out)
    end
    out[#out + 1] = ']'
    return
  end
  out[#out + 1] = '{'
  local first = true
  for k, v in pairs(t) do
    if not first then out[#out + 1] = ',' end
    first = false
    local kind = type(k)
    if kind == 'number' then
      out[#out + 1] = '"' .. number(k) .. '":'
    elseif kind == 'string' then
      out[#out + 1] = '"' .. (k:gsub('[%c"\\/]', escapes)) .. '":'
    else
      fail(kind, 'table key must be a number or string')
    end
    encode_value(v, depth, out)
  end
  out[#out + 1] = '}'
end

function encode_value(v, depth, out)
  local kind = type(v)
  if kind == 'string' then
    out[#out + 1] = '"' .. (v:gsub('[%c"\\/]', escapes)) .. '"'
  elseif kind == 'number' then
    out[#out + 1] = number(v)
  elseif kind == 'boolean' then
    out[#out + 1] = v and 'true' or 'false'
  elseif kind == 'table' then
    encode_table(v, depth + 1, out)
  elseif v == nil or v == null then
    out[#out + 1] = 'null'
  else
    fail(kind, 'type not supported')
  end
end

local function encode(v)
  local out = {}
  encode_value(v, 0, out)
  return concat(out)
end

-- decoding: a tokenizer with lua-cjson's token names, for its error texts
local text, pos
local function token_error(expected, found, at)
  error('Expected ' .. expected .. ' but found ' .. found .. ' at character ' .. at, 0)
end

local function utf8(code)
  if code < 0x80 then return char(code) end
  if code < 0x800 then return char(0xC0 + floor(code / 64), 0x80 + code % 64) end
  if code < 0x10000 then
    return char(0xE0 + floor(code / 4096), 0x80 + floor(code / 64) % 64, 0x80 + code % 64)
  end
  return char(0xF0 + floor(code / 262144), 0x80 + floor(code / 4096) % 64,
    0x80 + floor(code / 64) % 64, 0x80 + code % 64)
end

local simple_escapes = {['"'] = '"', ['\\'] = '\\', ['/'] = '/', b = '\b', f = '\f',
  n = '\n', r = '\r', t = '\t'}

-- a token: kind, value, start; kind 'error' carries its message as value
local function next_token()
  local start = text:find('[^ \t\n\r]', pos)
  if not start then pos = #text + 1 return 'T_END', nil, #text + 1 end
  local c = sub(text, start, start)
  pos = start + 1
  if c == '{' then return 'T_OBJ_BEGIN', nil, start end
  if c == '}' then return 'T_OBJ_END', nil, start end
  if c == '[' then return 'T_ARR_BEGIN', nil, start end
  if c == ']' then return 'T_ARR_END', nil, start end
  if c == ':' then return 'T_COLON', nil, start end
  if c == ',' then return 'T_COMMA', nil, start end
  if c == '"' then
    local parts = {}
    local i = start + 1
    while true do
      local quote = text:find('["\\]', i)
      if not quote then pos = #text + 1 return 'error', 'unexpected end of string', pos end
      parts[#parts + 1] = sub(text, i, quote - 1)
      if sub(text, quote, quote) == '"' then pos = quote + 1 break end
      local e = sub(text, quote + 1, quote + 1)
      if simple_escapes[e] then
        parts[#parts + 1] = simple_escapes[e]
        i = quote + 2
      elseif e == 'u' then
        local hex = sub(text, quote + 2, quote + 5)
        local code = #hex == 4 and hex:match('^%x%x%x%x$') and tonumber(hex, 16)
        if not code then return 'error', 'invalid unicode escape code', quote end
        i = quote + 6
        if code >= 0xD800 and code < 0xDC00 then
          local low = sub(text, i, i + 1) == '\\u' and tonumber(sub(text, i + 2, i + 5), 16)
          if not low or low < 0xDC00 or low > 0xDFFF then
            return 'error', 'invalid unicode escape code', quote
          end
          code = 0x10000 + (code - 0xD800) * 1024 + (low - 0xDC00)
          i = i + 6
        elseif code >= 0xDC00 and code <= 0xDFFF then
          return 'error', 'invalid unicode escape code', quote
        end
        parts[#parts + 1] = utf8(code)
      else
        return 'error', 'invalid escape code', quote
      end
    end
    return 'T_STRING', concat(parts), start
  end
  if c == '-' or c:match('%d') then
    local literal = text:match('^-?[%d.eE+-]*', start)
    local n = tonumber(literal)
    if n == nil or literal:match('^-?0[xX]') then return 'error', 'invalid number', start end
    pos = start + #literal
    return 'T_NUMBER', n, start
  end
  for word, kind in pairs({['true'] = 'T_BOOLEAN', ['false'] = 'T_BOOLEAN', null = 'T_NULL'}) do
    if sub(text, start, start + #word - 1) == word then
      pos = start + #word
      if kind == 'T_NULL' then return kind, null, start end
      return kind, word == 'true', start
    end
  end
  return 'error', 'invalid token', start
end

local function found(kind, value) return kind == 'error' and value or kind end

local decode_value
local function decode_object(depth)
  local t = {}
  local kind, value, at = next_token()
  if kind == 'T_OBJ_END' then return t end
  while true do
    if kind ~= 'T_STRING' then token_error('object key string', found(kind, value), at) end
    local key = value
    kind, value, at = next_token()
    if kind ~= 'T_COLON' then token_error('colon', found(kind, value), at) end
    t[key] = decode_value(depth, next_token())
    kind, value, at = next_token()
    if kind == 'T_OBJ_END' then return t end
    if kind ~= 'T_COMMA' then token_error('comma or object end', found(kind, value), at) end
    kind, value, at = next_token()
  end
end

local function decode_array(depth)
  local t = {}
  local kind, value, at = next_token()
  if kind == 'T_ARR_END' then return t end
  local i = 1
  while true do
    t[i] = decode_value(depth, kind, value, at)
    i = i + 1
    kind, value, at = next_token()
    if kind == 'T_ARR_END' then return t end
    if kind ~= 'T_COMMA' then token_error('comma or array end', found(kind, value), at) end
    kind, value, at = next_token()
  end
end

function decode_value(depth, kind, value, at)
  if kind == 'T_OBJ_BEGIN' or kind == 'T_ARR_BEGIN' then
    depth = depth + 1
    if depth > settings.decode_max_depth then
      error('Found too many nested data structures (' .. depth .. ') at character ' .. at, 0)
    end
    if kind == 'T_OBJ_BEGIN' then return decode_object(depth) end
    return decode_array(depth)
  end
  if kind == 'T_STRING' or kind == 'T_NUMBER' or kind == 'T_BOOLEAN' or kind == 'T_NULL' then
    return value
  end
  token_error('value', found(kind, value), at)
end

local function decode(json)
  if type(json) ~= 'string' and type(json) ~= 'number' then
    error("bad argument #1 to 'decode' (string expected, got " .. type(json) .. ')', 0)
  end
  text, pos = tostring(json), 1
  local result = decode_value(0, next_token())
  local kind, value, at = next_token()
  if kind ~= 'T_END' then token_error('the end', found(kind, value), at) end
  text = nil
  return result
end

-- cjson.encode_max_depth([depth]) and decode_max_depth: the setting, after it is changed
local function depth_option(name)
  return function(...)
    local depth = ...
    if select('#', ...) > 1 then error("bad argument #2 to '?' (found too many arguments)", 0) end
    if depth ~= nil then
      if type(depth) ~= 'number' or depth < 1 or depth > 2147483647 or floor(depth) ~= depth then
        error("bad argument #1 to '?' (expected integer between 1 and 2147483647)", 0)
      end
      settings[name] = depth
    end
    return settings[name]
  end
end
-- cjson.encode_invalid_numbers([true | false | 'null'])
local function invalid_numbers(...)
  local value = ...
  if select('#', ...) > 1 then error("bad argument #2 to '?' (found too many arguments)", 0) end
  if value ~= nil then
    local options = {[true] = true, [false] = false, on = true, off = false, null = 'null'}
    if options[value] == nil then
      error("bad argument #1 to '?' (invalid option '" .. tostring(value) .. "')", 0)
    end
    value = options[value]
    settings.encode_invalid_numbers = value
  end
  return settings.encode_invalid_numbers
end

return {encode = encode, decode = decode, encode_max_depth = depth_option('encode_max_depth'),
  decode_max_depth = depth_option('decode_max_depth'), encode_invalid_numbers = invalid_numbers}
"""

#: what the cjson code returns
CJSON_FUNCTIONS = (
    b"encode",
    b"decode",
    b"encode_max_depth",
    b"decode_max_depth",
    b"encode_invalid_numbers",
)

_MASK = 0xFFFFFFFF


def tobit(value: Any) -> int:
    """LuaBitOp's normalisation: rounded half to even, modulo 2^32, as a signed int."""
    n = round(float(value)) & _MASK
    return n - (1 << 32) if n & 0x80000000 else n


def _numbers(name: str, args: tuple[Any, ...], count: int | None = None) -> list[int]:
    if not args:
        raise LibraryError(f"bad argument #1 to '{name}' (number expected, got no value)")
    out: list[int] = []
    for i, arg in enumerate(args[:count] if count else args, 1):
        if type(arg) is bytes:
            try:
                arg = float(arg)
            except ValueError:
                raise LibraryError(
                    f"bad argument #{i} to '{name}' (number expected, got string)"
                ) from None
        elif type(arg) not in (int, float):
            kind = {type(None): "nil", bool: "boolean"}.get(type(arg), "table")
            raise LibraryError(f"bad argument #{i} to '{name}' (number expected, got {kind})")
        out.append(tobit(arg))
    return out


def _shift(name: str, args: tuple[Any, ...], op: Callable[[int, int], int]) -> int:
    if len(args) < 2:
        raise LibraryError(f"bad argument #2 to '{name}' (number expected, got no value)")
    value, n = _numbers(name, args, 2)
    return tobit(op(value & _MASK, n & 31))


def _fold(name: str, args: tuple[Any, ...], op: Callable[[int, int], int]) -> int:
    values = _numbers(name, args)
    result = values[0]
    for value in values[1:]:
        result = op(result, value)
    return tobit(result)


def bit_functions() -> dict[bytes, Callable[..., Any]]:
    def tohex(*args: Any) -> bytes:
        value = _numbers("tohex", args, 1)[0]
        digits = _numbers("tohex", args[1:], 1)[0] if len(args) > 1 else 8
        upper = digits < 0
        digits = min(abs(digits), 8)
        text = format(value & _MASK, "08X" if upper else "08x")[8 - digits :]
        return text.encode()

    def arshift(*args: Any) -> int:
        if len(args) < 2:
            raise LibraryError("bad argument #2 to 'arshift' (number expected, got no value)")
        value, n = _numbers("arshift", args, 2)
        return tobit(value >> (n & 31))

    def rotate(name: str, left: bool) -> Callable[..., int]:
        def rot(*args: Any) -> int:
            if len(args) < 2:
                raise LibraryError(f"bad argument #2 to '{name}' (number expected, got no value)")
            value, n = _numbers(name, args, 2)
            n = (n & 31) if left else (-n & 31)
            u = value & _MASK
            return tobit(((u << n) | (u >> (32 - n))) & _MASK)

        return rot

    def bswap(*args: Any) -> int:
        u = _numbers("bswap", args, 1)[0] & _MASK
        return tobit(int.from_bytes(u.to_bytes(4, "little"), "big"))

    return {
        b"tobit": lambda *a: _numbers("tobit", a, 1)[0],
        b"tohex": tohex,
        b"bnot": lambda *a: tobit(~_numbers("bnot", a, 1)[0]),
        b"band": lambda *a: _fold("band", a, lambda x, y: x & y),
        b"bor": lambda *a: _fold("bor", a, lambda x, y: x | y),
        b"bxor": lambda *a: _fold("bxor", a, lambda x, y: x ^ y),
        b"lshift": lambda *a: _shift("lshift", a, lambda x, n: x << n),
        b"rshift": lambda *a: _shift("rshift", a, lambda x, n: x >> n),
        b"arshift": arshift,
        b"rol": rotate("rol", True),
        b"ror": rotate("ror", False),
        b"bswap": bswap,
    }


def install(lua: Any, entry: Any) -> None:
    """Give the scripts' API of a Lua state (lupa's runtime, the prelude's ``entry``) its
    ``cjson`` and ``bit``."""
    where = entry.where

    def located(function: Callable[..., Any]) -> Callable[..., Any]:
        """Errors name the calling script's line, as luaL_error's do."""

        def call(*args: Any) -> Any:
            try:
                return function(*args)
            except LibraryError as exc:
                if exc.located:
                    raise
                position = where().decode("utf-8", "surrogateescape")
                raise LibraryError(position + exc.text, located=True) from None

        return call

    null = lua.eval("newproxy(true)")
    lua.eval(
        "function(null) getmetatable(null).__tostring = function() return 'userdata: (nil)' end end"
    )(null)
    protect = entry.protect
    impl: dict[bytes, Any] = {}

    def cjson_function(name: bytes) -> Any:
        """One of the Lua cjson's functions: its code runs on the first use (its ~29 KB of
        the Lua state are not held by a server whose scripts never use cjson)."""
        if not impl:
            functions = lua.execute(CJSON, null, name="=headwater")
            impl.update((key, functions[key]) for key in CJSON_FUNCTIONS)
        return impl[name]

    def c_function(name: str, one_argument: bool = True) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            if one_argument and len(args) != 1:
                raise LibraryError(f"bad argument #1 to '{name}' (expected 1 argument)")
            ok, result = protect(cjson_function(name.encode()), *args)
            if not ok:
                raise LibraryError(result.decode("utf-8", "surrogateescape"))
            return result

        return call

    def configure(*args: Any) -> Any:  # the other cjson settings: kept as they are
        return args[0] if args else None

    cjson: dict[bytes, Any] = {
        b"encode": located(c_function("encode")),
        b"decode": located(c_function("decode")),
        b"null": null,
        b"_NAME": b"cjson",
        b"_VERSION": b"2.1.0",
    }
    for setting in (
        b"encode_sparse_array",
        b"encode_number_precision",
        b"encode_keep_buffer",
        b"decode_invalid_numbers",
    ):
        cjson[setting] = configure
    for setting in CJSON_FUNCTIONS[2:]:
        cjson[setting] = located(c_function(setting.decode(), one_argument=False))
    table = lua.table_from(cjson)
    table[b"new"] = lambda *args: table
    entry.install(b"cjson", table)
    for name, functions in (
        (b"bit", bit_functions()),
        (b"cmsgpack", cmsgpack_functions(lua)),
        (b"struct", struct_functions()),
    ):
        entry.install(name, lua.table_from({k: located(f) for k, f in functions.items()}))
