"""COMMAND GETKEYS and COMMAND GETKEYSANDFLAGS: the keys of a full command, and how the
command uses each (Redis 7.0 ``db.c`` getKeysFromCommandWithSpecs).

Theory of operation
-------------------
Redis describes a command's keys with *key specs*: where the search begins (an index, or
after a keyword searched from a position) and how keys follow (a range with a last key, a
step and a limit, or a count argument), each spec with its flags (RW/RO/OW/RM, access,
update, insert, delete…). Headwater serves the key specs Redis 7.0 prints in COMMAND INFO
(``command_docs.json``) and reads them back here, so both answers come from the same data.
Commands newer than that capture have their key specs written below (``_NEWER_SPECS``, from
Redis 7.4 and 8.x's command files).

As in Redis: the specs are used when every spec is complete and none has variable flags;
when a spec cannot be resolved (an ``unknown`` search, a bad key count, keys past the end)
Redis falls back to the command's own key function, which the few commands that need one
have below (``_PROCS``: SORT, SORT_RO, SET, BITFIELD, and the key-count and keyword forms,
whose fallbacks report keys without flags, byte for byte as Redis's do).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from headwater.commands.args import strict_int
from headwater.commands.context import CommandSpec

#: the order Redis prints key-spec flags in (addReplyFlagsForKeyArgs)
FLAG_ORDER = (
    "RO",
    "RW",
    "OW",
    "RM",
    "access",
    "update",
    "insert",
    "delete",
    "not_key",
    "incomplete",
    "variable_flags",
)

Flags = tuple[str, ...]
#: a key's position in the command (argv without COMMAND GETKEYS) and its flags
KeyRef = tuple[int, Flags]


class KeySpec:
    """One key spec: ``begin`` is ("index", pos) | ("keyword", word, startfrom) | ("unknown",),
    ``find`` is ("range", lastkey, keystep, limit) | ("keynum", keynumidx, firstkey, keystep)
    | ("unknown",)."""

    __slots__ = ("begin", "find", "flags")

    def __init__(self, flags: Flags, begin: tuple[Any, ...], find: tuple[Any, ...]) -> None:
        self.flags = flags
        self.begin = begin
        self.find = find


def _ordered(flags: set[str] | tuple[str, ...]) -> Flags:
    return tuple(f for f in FLAG_ORDER if f in flags)


def _map(node: Any) -> dict[str, Any]:
    return {key["b"]: value for key, value in node["m"]}


def specs_from_tree(info: Any) -> list[KeySpec]:
    """The key specs of a captured COMMAND INFO reply (its 9th element)."""
    specs: list[KeySpec] = []
    for node in info["a"][8]["s"]:
        entry = _map(node)
        flags = _ordered({item["+"] for item in entry["flags"]["s"]})
        begin, find = _map(entry["begin_search"]), _map(entry["find_keys"])
        bspec, fspec = _map(begin["spec"]), _map(find["spec"])
        btype, ftype = begin["type"]["b"], find["type"]["b"]
        if btype == "index":
            begin_t: tuple[Any, ...] = ("index", bspec["index"])
        elif btype == "keyword":
            begin_t = ("keyword", bspec["keyword"]["b"].encode(), bspec["startfrom"])
        else:
            begin_t = ("unknown",)
        if ftype == "range":
            find_t: tuple[Any, ...] = ("range", fspec["lastkey"], fspec["keystep"], fspec["limit"])
        elif ftype == "keynum":
            find_t = ("keynum", fspec["keynumidx"], fspec["firstkey"], fspec["keystep"])
        else:
            find_t = ("unknown",)
        specs.append(KeySpec(flags, begin_t, find_t))
    return specs


def _one_key(flags: Flags, index: int = 1) -> list[KeySpec]:
    return [KeySpec(flags, ("index", index), ("range", 0, 1, 0))]


_RW_UPDATE: Flags = ("RW", "update")
_RO_ACCESS: Flags = ("RO", "access")
_RW_DELETE: Flags = ("RW", "delete")

#: commands Redis 7.0 does not have: their key specs as newer Redis declares them
_NEWER_SPECS: dict[str, list[KeySpec]] = {
    **{name: _one_key(_RW_UPDATE) for name in ("hexpire", "hpexpire", "hexpireat", "hpexpireat")},
    **{name: _one_key(_RO_ACCESS) for name in ("httl", "hpttl", "hexpiretime", "hpexpiretime")},
    "hpersist": _one_key(_RW_UPDATE),
    "xdelex": _one_key(_RW_DELETE),
    "xackdel": _one_key(_RW_DELETE),
    "xcfgset": _one_key(_RW_UPDATE),
    "xidmprecord": _one_key(("RW", "insert")),
    "xidmp|cfgget": _one_key(_RO_ACCESS, 2),
    "xidmp|cfgset": _one_key(_RW_UPDATE, 2),
}


def key_specs(row: CommandSpec, captured_info: Any) -> list[KeySpec]:
    if captured_info is not None:
        return specs_from_tree(captured_info)
    newer = _NEWER_SPECS.get(row.name)
    if newer is not None:
        return newer
    if row.first_key <= 0:
        return []
    return [KeySpec((), ("index", row.first_key), ("range", row.last_key - row.first_key, 1, 0))]


def _resolve(specs: list[KeySpec], args: list[bytes], arity: int) -> list[KeyRef] | None:
    """Redis's getKeysUsingKeySpecs: the keys, or None if a spec cannot be resolved."""
    argc = len(args)
    keys: list[KeyRef] = []
    for spec in specs:
        if "not_key" in spec.flags:
            continue
        begin = spec.begin
        if begin[0] == "index":
            first = begin[1]
        elif begin[0] == "keyword":
            first = _keyword(args, begin[1], begin[2])
            if not first:
                continue
        else:
            return None
        find = spec.find
        if find[0] == "range":
            _, lastkey, step, limit = find
            if lastkey >= 0:
                last = first + lastkey
            elif not limit:
                last = argc + lastkey
            else:
                last = first + ((argc - first) // limit + lastkey)
        elif find[0] == "keynum":
            _, keynumidx, firstkey, step = find
            if keynumidx >= argc or first + keynumidx >= argc:
                return None
            numkeys = strict_int(args[first + keynumidx])
            if numkeys is None or numkeys < 0:
                return None
            first += firstkey
            last = first + numkeys - 1
        else:
            return None
        if last >= argc or last < first or first >= argc:
            return None
        for i in range(first, last + 1, step):
            if i >= argc:
                if arity < 0:
                    continue
                return None
            keys.append((i, spec.flags))
        if "incomplete" in spec.flags:
            return None
    return keys


def _keyword(args: list[bytes], word: bytes, startfrom: int) -> int:
    """The index after ``word`` searched from ``startfrom`` (backwards when negative); 0 if
    it is not there."""
    argc = len(args)
    start = startfrom if startfrom > 0 else argc + startfrom
    stop = argc - 1 if startfrom > 0 else 1
    i = start
    while i != stop:  # (the stop itself is not searched, as in Redis)
        if i >= argc or i < 1:
            return 0
        if args[i].lower() == word.lower():
            return i + 1
        i = i + 1 if start <= stop else i - 1
    return 0


# -- the commands' own key functions (Redis's getkeys_proc) ----------------------------------


def _generic(store: int, count_at: int, first: int, args: list[bytes]) -> list[KeyRef]:
    """genericGetKeys: ``atoi`` of the count, keys without flags, the stored key last."""
    num = _atoi(args[count_at]) if count_at < len(args) else 0
    if num < 1 or num > (len(args) - first):
        return []
    keys: list[KeyRef] = [(first + i, ()) for i in range(num)]
    if store:
        keys.append((store, ()))
    return keys


def _atoi(raw: bytes) -> int:
    """C's atoi: leading blanks, a sign, the digits that follow (0 if none)."""
    text = raw.lstrip(b" \t\n\v\f\r")
    sign = 1
    if text[:1] in (b"+", b"-"):
        sign = -1 if text[:1] == b"-" else 1
        text = text[1:]
    digits = b""
    for byte in text:
        if 48 <= byte <= 57:
            digits += bytes((byte,))
        else:
            break
    value = sign * int(digits) if digits else 0
    return ((value + (1 << 31)) % (1 << 32)) - (1 << 31)  # an int in C


def _sort(args: list[bytes]) -> list[KeyRef]:
    keys: list[KeyRef] = [(1, ("RO", "access"))]
    store = 0
    i = 2
    skips = {b"limit": 2, b"get": 1, b"by": 1}
    while i < len(args):
        word = args[i].lower()
        if word in skips:
            i += skips[word]
        elif word == b"store" and i + 1 < len(args):
            store = i + 1
        i += 1
    if store:
        keys.append((store, ("OW", "update")))
    return keys


def _set(args: list[bytes]) -> list[KeyRef]:
    if any(arg.lower() == b"get" for arg in args[3:]):
        return [(1, ("RW", "access", "update"))]
    return [(1, ("OW", "update"))]


def _bitfield(args: list[bytes]) -> list[KeyRef]:
    readonly = True
    i = 2
    while i < len(args):
        left = len(args) - i - 1
        word = args[i].lower()
        if word == b"get" and left >= 2:
            i += 3
        elif word in (b"set", b"incrby") and left >= 3:
            readonly = False
            break
        elif word == b"overflow" and left >= 1:
            i += 2
        else:
            readonly = False
            break
    return [(1, ("RO", "access") if readonly else ("RW", "access", "update"))]


def _georadius(args: list[bytes]) -> list[KeyRef]:
    stored = -1
    i = 5
    while i < len(args):
        if args[i].lower() in (b"store", b"storedist") and i + 1 < len(args):
            stored = i + 1
            i += 1
        i += 1
    return [(1, ())] if stored < 0 else [(1, ()), (stored, ())]


def _xread(args: list[bytes]) -> list[KeyRef]:
    streams = -1
    i = 1
    while i < len(args):
        word = args[i].lower()
        if word in (b"block", b"count"):
            i += 1
        elif word == b"group":
            i += 2
        elif word == b"noack":
            pass
        elif word == b"streams":
            streams = i
            break
        else:
            break
        i += 1
    num = len(args) - streams - 1 if streams >= 0 else 0
    if streams < 0 or num == 0 or num % 2:
        return []
    return [(i, ()) for i in range(streams + 1, len(args) - num // 2)]


_PROCS: dict[str, Callable[[list[bytes]], list[KeyRef]]] = {
    "sort": _sort,
    "sort_ro": lambda args: [(1, ("RO", "access"))],
    "set": _set,
    "bitfield": _bitfield,
    "georadius": _georadius,
    "georadiusbymember": _georadius,
    "xread": _xread,
    "xreadgroup": _xread,
    "sintercard": lambda args: _generic(0, 1, 2, args),
    "zunionstore": lambda args: _generic(1, 2, 3, args),
    "zinterstore": lambda args: _generic(1, 2, 3, args),
    "zdiffstore": lambda args: _generic(1, 2, 3, args),
    "zunion": lambda args: _generic(0, 1, 2, args),
    "zinter": lambda args: _generic(0, 1, 2, args),
    "zdiff": lambda args: _generic(0, 1, 2, args),
    "zintercard": lambda args: _generic(0, 1, 2, args),
    "eval": lambda args: _generic(0, 2, 3, args),
    "evalsha": lambda args: _generic(0, 2, 3, args),
    "eval_ro": lambda args: _generic(0, 2, 3, args),
    "evalsha_ro": lambda args: _generic(0, 2, 3, args),
    "fcall": lambda args: _generic(0, 2, 3, args),
    "fcall_ro": lambda args: _generic(0, 2, 3, args),
    "lmpop": lambda args: _generic(0, 1, 2, args),
    "blmpop": lambda args: _generic(0, 2, 3, args),
    "zmpop": lambda args: _generic(0, 1, 2, args),
    "bzmpop": lambda args: _generic(0, 2, 3, args),
}


def fixed_single_key(specs: list[KeySpec]) -> KeyRef | None:
    """The one key's place and flags when the command names exactly one key at a fixed
    index (most commands): no key-spec walk is needed for it."""
    if len(specs) != 1:
        return None
    only = specs[0]
    fixed = only.begin[0] == "index" and only.find[:3] == ("range", 0, 1)
    if not fixed or {"not_key", "incomplete", "variable_flags"} & set(only.flags):
        return None
    return only.begin[1], only.flags


def has_keys(row: CommandSpec, specs: list[KeySpec]) -> bool:
    """Redis's doesCommandHaveKeys: a key function, or a spec that is not a channel."""
    return row.name in _PROCS or any("not_key" not in spec.flags for spec in specs)


def command_keys(row: CommandSpec, specs: list[KeySpec], args: list[bytes]) -> list[KeyRef]:
    """getKeysFromCommandWithSpecs: the specs when they are complete and fixed, else (or
    when they cannot be resolved) the command's key function."""
    usable = any("not_key" not in s.flags for s in specs)
    variable = any("variable_flags" in s.flags for s in specs)
    if usable and not variable:
        keys = _resolve(specs, args, row.arity)
        if keys is not None:
            return keys
    proc = _PROCS.get(row.name)
    return proc(args) if proc is not None else []
