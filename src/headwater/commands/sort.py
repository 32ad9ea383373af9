"""SORT and SORT_RO (Redis ``sort.c``).

SORT key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]] [ASC | DESC]
[ALPHA] [STORE destination]

Theory of operation
-------------------
The value is read through a small interface, ``Sortable``, so that any collection type can be
sorted: ``sort_elements()`` gives its elements in its own order, and ``SORT_ORDERED`` says
whether that order means something (lists, sorted sets: ``BY nosort`` keeps it and DESC
reverses it) or not (sets: ``BY nosort`` returns the iteration order, DESC is ignored). Any
other type is WRONGTYPE.

Then, as Redis does: a BY pattern without ``*`` means no sorting (``dontsort``); a set not
sorted but stored, or read by a script, is sorted ALPHA after all (its order would differ
between servers); weights come from the element itself or from the key (``*`` replaced by
the element; ``key->field`` reads a hash field) the pattern names; numeric weights are parsed
with C's ``strtod`` rules (``c_strtod``), and one that does not parse fails the whole command
with ``One or more scores can't be converted into double`` (a missing weight key is 0).
Numeric ties are broken by the elements' bytes, so the order is total; ALPHA compares bytes
(with STORE) or as ``strcoll`` in the C locale (up to the first NUL byte); a missing ALPHA
weight sorts first. LIMIT is clamped exactly as Redis clamps it. GET patterns (``#``: the
element itself) fill the reply, nil (or an empty string when stored) for a missing key.
A BY pattern with ``*`` and any GET read keys no key spec names, so a user with key patterns
may use them only through a selector that allows the command and reads every key (7.0).

STORE writes the result as a list at the destination (deleting it when the result is empty),
with the ``sortstore`` event; its effect is the command as given (deterministic: the sort is
a total order but for ALPHA ties between equal weights, where, as in Redis, the order is the
input's).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import ClassVar, NamedTuple, Protocol, runtime_checkable

from headwater.commands.acl import full_key_access
from headwater.commands.args import parse_int
from headwater.commands.context import Client, spec
from headwater.commands.introspection import lookup
from headwater.commands.notify import lookup_read, notify
from headwater.errors import SYNTAX, WRONGTYPE, err
from headwater.keyevents import GENERIC, LIST
from headwater.ops.change import Change, Written
from headwater.resp.types import Reply
from headwater.structures.lists import ListValue
from headwater.values import Hash

SCORES_NOT_DOUBLES = err("One or more scores can't be converted into double")
BY_DENIED = err("BY option of SORT denied due to insufficient ACL permissions.")
GET_DENIED = err("GET option of SORT denied due to insufficient ACL permissions.")


@runtime_checkable
class Sortable(Protocol):
    """What a value type provides to be sorted (module doc)."""

    SORT_ORDERED: ClassVar[bool]

    def sort_elements(self) -> list[bytes]: ...


class SortOpts(NamedTuple):
    desc: bool
    alpha: bool
    start: int  # LIMIT offset as given (0 without LIMIT)
    limit_count: int  # LIMIT count as given (-1 without LIMIT)
    by: bytes | None
    dontsort: bool  # a BY pattern without '*'
    gets: list[bytes]
    store: bytes | None


def parse_sort(argv: list[bytes], readonly: bool, reads_any_key: bool = True) -> SortOpts:
    """The options from argv[2] on, with Redis's errors in Redis's order; a BY pattern and
    GET need a user who may read any key (``reads_any_key``): they name keys of their own."""
    desc = alpha = dontsort = False
    start, count = 0, -1
    by: bytes | None = None
    store: bytes | None = None
    gets: list[bytes] = []
    i, n = 2, len(argv)
    while i < n:
        token = argv[i].upper()
        left = n - i - 1
        if token == b"ASC":
            desc = False
        elif token == b"DESC":
            desc = True
        elif token == b"ALPHA":
            alpha = True
        elif token == b"LIMIT" and left >= 2:
            start, count = parse_int(argv[i + 1]), parse_int(argv[i + 2])
            i += 2
        elif token == b"STORE" and left >= 1 and not readonly:
            store = argv[i + 1]
            i += 1
        elif token == b"BY" and left >= 1:
            by = argv[i + 1]
            dontsort = b"*" not in _c_string(by)
            if not dontsort and not reads_any_key:
                raise BY_DENIED
            i += 1
        elif token == b"GET" and left >= 1:
            if not reads_any_key:
                raise GET_DENIED
            gets.append(argv[i + 1])
            i += 1
        else:
            raise SYNTAX
        i += 1
    return SortOpts(desc, alpha, start, count, by, dontsort, gets, store)


def _c_string(raw: bytes) -> bytes:
    """What C's string functions see of an argument: up to its first NUL byte."""
    nul = raw.find(b"\0")
    return raw if nul < 0 else raw[:nul]


# ---------------------------------------------------------------------------------------------
# Weights


_STRTOD = re.compile(
    rb"[ \t\n\v\f\r]*[+-]?(?:"
    rb"0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?[0-9]+)?"
    rb"|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?"
    rb"|[iI][nN][fF](?:[iI][nN][iI][tT][yY])?"
    rb"|[nN][aA][nN](?:\([0-9A-Za-z_]*\))?"
    rb")"
)
_TINY = 2.2250738585072014e-308  # DBL_MIN: below it a result is subnormal


def c_strtod(raw: bytes) -> float | None:
    """A weight as SORT parses it: glibc's ``strtod`` over the C string (up to a NUL), which
    must take all of it; None where Redis reports the score unconvertible (trailing bytes,
    NaN, overflow, or an inexact underflow: ERANGE). An empty string is 0."""
    text = _c_string(raw)
    if not text:
        return 0.0
    if _STRTOD.fullmatch(text) is None:
        return None
    body = text.strip(b" \t\n\v\f\r").decode("ascii")
    lowered = body.lower().lstrip("+-")
    if lowered.startswith("nan"):
        return None
    if lowered.startswith("inf"):
        return float(body[: len(body) - len(lowered)] + "inf")
    try:
        value = float.fromhex(body) if lowered.startswith("0x") else float(body)
    except OverflowError:
        return None
    if value in (float("inf"), float("-inf")):
        return None  # overflow
    if abs(value) < _TINY and _inexact(body, lowered, value):
        return None  # underflow
    return value


def _inexact(body: str, lowered: str, value: float) -> bool:
    """Whether a tiny result differs from the number written (glibc's ERANGE)."""
    if lowered.startswith("0x"):
        mantissa, _, exponent = lowered[2:].partition("p")
        whole, _, fraction = mantissa.partition(".")
        digits = int((whole + fraction) or "0", 16)
        exact = Fraction(digits) * Fraction(2) ** (int(exponent or "0") - 4 * len(fraction))
    else:
        exact = Fraction(lowered)
    return Fraction(value) != abs(exact)


def lookup_by_pattern(c: Client, pattern: bytes, element: bytes) -> bytes | None:
    """The string a BY or GET pattern names for an element (Redis's lookupKeyByPattern):
    ``#`` is the element; otherwise the first ``*`` is replaced by it and the key read (a
    string), or with ``->field`` after the ``*`` that field of the hash; None when there is
    no ``*``, no such key or field, or a value of another type."""
    if pattern == b"#":
        return element
    seen = _c_string(pattern)
    star = seen.find(b"*")
    if star < 0:
        return None
    arrow = seen.find(b"->", star + 1)
    field: bytes | None = None
    end = len(pattern)
    if arrow >= 0 and arrow + 2 < len(seen):
        field = pattern[arrow + 2 :]
        end = arrow
    key = pattern[:star] + element + pattern[star + 1 : end]
    value = lookup_read(c, key)
    if value is None:
        return None
    if field is not None:
        return value.get(field) if isinstance(value, Hash) else None
    return value if isinstance(value, bytes) else None


# ---------------------------------------------------------------------------------------------
# The command


def _limits(opts: SortOpts, size: int) -> tuple[int, int]:
    """[start, end] of the output, clamped exactly as Redis clamps LIMIT."""
    start = min(max(opts.start, 0), size)
    count = min(max(opts.limit_count, -1), size)
    end = size - 1 if count < 0 else start + count - 1
    if start >= size:
        start, end = size - 1, size - 2
    return start, min(end, size - 1)


def _sorted(c: Client, elements: list[bytes], opts: SortOpts, alpha: bool) -> list[bytes]:
    """The elements in SORT's order (raises SCORES_NOT_DOUBLES after all lookups)."""
    by = opts.by
    if alpha:
        if by is None:
            binary = opts.store is not None
            return sorted(elements, key=(None if binary else _c_string), reverse=opts.desc)
        weights = [lookup_by_pattern(c, by, e) for e in elements]
        binary = opts.store is not None
        keyed = [
            ((0, b"") if w is None else (1, w if binary else _c_string(w)), i)
            for i, w in enumerate(weights)
        ]
        # (a stable sort of the elements by weight alone: ties keep the input order)
        keyed.sort(key=lambda pair: pair[0], reverse=opts.desc)
        return [elements[i] for _, i in keyed]
    failed = False
    scored: list[tuple[float, bytes]] = []
    for element in elements:
        raw = element if by is None else lookup_by_pattern(c, by, element)
        score = 0.0 if raw is None else c_strtod(raw)
        if score is None:
            failed, score = True, 0.0
        scored.append((score, element))
    if failed:
        raise SCORES_NOT_DOUBLES
    scored.sort(reverse=opts.desc)
    return [element for _, element in scored]


def sort_generic(c: Client, argv: list[bytes], readonly: bool) -> Reply | Written:
    opts = parse_sort(argv, readonly, _reads_any_key(c, argv, readonly))
    value = lookup_read(c, argv[1])
    if value is not None and not isinstance(value, Sortable):
        raise WRONGTYPE
    elements = value.sort_elements() if value is not None else []
    ordered = value is None or value.SORT_ORDERED
    dontsort, alpha = opts.dontsort, opts.alpha
    if dontsort and not ordered and (opts.store is not None or c.is_script):
        dontsort, alpha = False, True  # a set's order would differ elsewhere: sort it
        opts = opts._replace(by=None)
    start, end = _limits(opts, len(elements))
    if dontsort:
        if ordered and opts.desc:
            elements.reverse()
    else:
        elements = _sorted(c, elements, opts, alpha)
    chosen = elements[start : end + 1] if end >= start else []
    if opts.store is not None:
        return _store(c, opts.store, chosen, opts.gets)
    if not opts.gets:
        return list(chosen)
    out: list[Reply] = []
    for element in chosen:
        out.extend(lookup_by_pattern(c, pattern, element) for pattern in opts.gets)
    return out


def _reads_any_key(c: Client, argv: list[bytes], readonly: bool) -> bool:
    row = lookup(c, b"sort_ro" if readonly else b"sort")
    return row is None or full_key_access(c, row, argv)


def _store(c: Client, key: bytes, chosen: list[bytes], gets: list[bytes]) -> Reply | Written:
    """STORE: the result as a list at key (the key deleted when empty); its length."""
    if gets:
        result = [
            lookup_by_pattern(c, pattern, element) or b"" for element in chosen for pattern in gets
        ]
    else:
        result = chosen
    if not result:
        if c.db.delete(key):
            notify(c, GENERIC, b"del", key)
            return Written(0, Change(1))
        return 0
    c.db.set(key, store_as_list(c, result))
    notify(c, LIST, b"sortstore", key)
    return Written(len(result), Change(len(result)))


def store_as_list(c: Client, elements: list[bytes]) -> object:
    """The list SORT … STORE writes (Redis: a quicklist, then listTypeTryConversion)."""
    return ListValue.of(elements, c.server.config["list-max-listpack-size"])


def cmd_sort(c: Client, argv: list[bytes]) -> Reply | Written:
    return sort_generic(c, argv, readonly=False)


def cmd_sort_ro(c: Client, argv: list[bytes]) -> Reply | Written:
    return sort_generic(c, argv, readonly=True)


SPECS = (
    spec("sort", -2, "write denyoom movablekeys", (1, 1, 1), cmd_sort),
    spec("sort_ro", -2, "readonly movablekeys", (1, 1, 1), cmd_sort_ro),
)
