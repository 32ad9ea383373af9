"""Redis's glob-style pattern matching (``stringmatchlen`` in Redis's util.c), on bytes.

Syntax: ``*`` (any run), ``?`` (one byte), ``[...]`` (one byte of a class: ``^`` negates, ``a-z``
is a range in either order, ``\\x`` is ``x`` itself, an unterminated class takes the rest of the
pattern) and ``\\x`` outside a class (``x`` itself). ``nocase`` folds ASCII letters, as
``tolower`` does in Redis's C locale.

Redis walks the pattern with a recursion on each ``*``, cut short two ways: once the rest of the
pattern after a ``*`` fails from every position, no earlier ``*`` is tried longer (so only the
latest ``*`` is ever backtracked), and a ``*`` nested more than 1000 deep never matches. Both
mean the answer is plain glob matching, found without backtracking: the pieces between the
``*``s have a fixed length, so each one goes at the leftmost place it fits (in a regex whose
atomic groups never move a placed piece again; a long pattern is walked by hand). Two of
Redis's quirks stay: the empty string matches only the empty pattern (not even ``*``), and a
pattern with more than 1000 ``*`` runs before its last piece matches nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from operator import methodcaller

#: a compiled pattern: its answer is truthy when the subject matches
Matcher = Callable[[bytes], object]

#: Redis gives up on a ``*`` nested deeper than this (``nesting > 1000``)
MAX_NESTING = 1000

_STAR, _QUESTION, _OPEN, _BACKSLASH = b"*"[0], b"?"[0], b"["[0], b"\\"[0]
_CLOSE, _CARET, _DASH = b"]"[0], b"^"[0], b"-"[0]
_ALL = frozenset(range(256))

#: A piece of pattern between ``*``s: one set of allowed bytes per subject byte.
Piece = list[frozenset[int]]


def _char(byte: int, nocase: bool) -> int:
    """The value Redis compares for a byte: a C ``char`` (signed, so above 127 is negative),
    through ``tolower`` in the C locale (ASCII letters only) when matching without case."""
    value = byte - 256 if byte > 127 else byte
    if nocase and 65 <= value <= 90:
        return value + 32
    return value


@lru_cache(maxsize=4096)  # (a long pattern repeats its few classes)
def _literal(byte: int, nocase: bool) -> frozenset[int]:
    if not nocase:
        return frozenset((byte,))
    value = _char(byte, True)
    return frozenset(c for c in range(256) if _char(c, True) == value)


@lru_cache(maxsize=4096)  # (a long pattern repeats its few classes)
def _range(start: int, end: int, nocase: bool) -> frozenset[int]:
    """``start-end`` in a class: Redis orders the ends first, then folds the ends and the byte."""
    low, high = sorted((_char(start, False), _char(end, False)))
    low, high = _char(low % 256, nocase), _char(high % 256, nocase)
    return frozenset(c for c in range(256) if low <= _char(c, nocase) <= high)


def _class(pattern: bytes, i: int, nocase: bool) -> tuple[frozenset[int], int]:
    """The bytes a class allows, its ``[`` at ``i - 1``; and the index after it."""
    n = len(pattern)
    negate = i < n and pattern[i] == _CARET
    if negate:
        i += 1
    members: set[int] = set()
    while i < n:
        byte = pattern[i]
        if byte == _BACKSLASH and i + 1 < n:  # escaped: exact, even with nocase (as in Redis)
            members.add(pattern[i + 1])
            i += 2
        elif byte == _CLOSE:
            break
        elif i + 2 < n and pattern[i + 1] == _DASH:  # may end at "]", as in Redis
            members |= _range(byte, pattern[i + 2], nocase)
            i += 3
        else:
            members |= _literal(byte, nocase)
            i += 1
    allowed = _ALL - members if negate else frozenset(members)
    return allowed, i + 1  # past "]", or past the end when unterminated


def _tokens(pattern: bytes, nocase: bool) -> list[frozenset[int] | None]:
    """The pattern as one set of allowed bytes per subject byte, and None for each ``*`` run."""
    tokens: list[frozenset[int] | None] = []
    i, n = 0, len(pattern)
    while i < n:
        byte = pattern[i]
        if byte == _STAR:
            if not tokens or tokens[-1] is not None:
                tokens.append(None)
            i += 1
        elif byte == _QUESTION:
            tokens.append(_ALL)
            i += 1
        elif byte == _OPEN:
            allowed, i = _class(pattern, i + 1, nocase)
            tokens.append(allowed)
        else:
            if byte == _BACKSLASH and i + 1 < n:
                i += 1
            tokens.append(_literal(pattern[i], nocase))
            i += 1
    return tokens


def _pieces(tokens: list[frozenset[int] | None]) -> list[Piece]:
    """The pieces between ``*`` runs: first and last may be empty, the others never are."""
    pieces: list[Piece] = [[]]
    for token in tokens:
        if token is None:
            pieces.append([])
        else:
            pieces[-1].append(token)
    return pieces


def _literal_bytes(piece: Piece) -> bytes | None:
    """The piece's bytes when each of its positions allows exactly one byte."""
    if all(len(allowed) == 1 for allowed in piece):
        return bytes(next(iter(allowed)) for allowed in piece)
    return None


@lru_cache(maxsize=4096)  # (a long pattern repeats its few classes)
def _byte_class(allowed: frozenset[int]) -> bytes:
    """A regex for one byte of ``allowed``: the byte itself, any byte, or a class of runs."""
    if len(allowed) == 1:
        return re.escape(bytes(allowed))
    if len(allowed) == 256:
        return b"[\\s\\S]"
    if not allowed:
        return b"(?!)"
    runs: list[bytes] = []
    members = sorted(allowed)
    first = last = members[0]
    for byte in [*members[1:], -1]:
        if byte == last + 1:
            last = byte
            continue
        runs.append(b"\\x%02x-\\x%02x" % (first, last) if last > first else b"\\x%02x" % first)
        first = last = byte
    return b"[" + b"".join(runs) + b"]"


def _regex(piece: Piece) -> bytes:
    return b"".join(_byte_class(allowed) for allowed in piece)


def _glob_regex(pieces: list[Piece]) -> re.Pattern[bytes]:
    """The pieces as a regex that cannot backtrack much: a middle piece goes at the first
    place it fits (an atomic group, never revisited), the last one at the end."""
    middle = b"".join(b"(?>[\\s\\S]*?" + _regex(piece) + b")" for piece in pieces[1:-1])
    tail = b"[\\s\\S]*" + _regex(pieces[-1]) + b"\\Z"
    return re.compile(_regex(pieces[0]) + middle + tail)


#: past this many bytes of classes and "?"s, compiling a regex costs more than walking the
#: pattern by hand (some 100 us a class: a pattern of 100k classes took 20 s to compile)
MAX_REGEX_CLASSES = 256


def _fits(piece: Piece, subject: bytes, start: int) -> bool:
    return all(subject[start + k] in allowed for k, allowed in enumerate(piece))


def _classes(pieces: list[Piece]) -> int:
    return sum(len(allowed) > 1 for piece in pieces for allowed in piece)


def _exactly(piece: Piece) -> Matcher:
    return lambda subject: len(subject) == len(piece) and _fits(piece, subject, 0)


class _Walk:
    """The pieces placed by hand, for a pattern too long to compile: the first at the start,
    each middle one at the first place it fits, the last at the end."""

    def __init__(self, pieces: list[Piece]) -> None:
        self.pieces = pieces

    def __call__(self, subject: bytes) -> bool:
        head, *middle, tail = self.pieces
        if len(subject) < len(head) or not _fits(head, subject, 0):
            return False
        start = len(head)
        for piece in middle:
            last = len(subject) - len(piece)
            while start <= last and not _fits(piece, subject, start):
                start += 1
            if start > last:
                return False
            start += len(piece)
        tail_start = len(subject) - len(tail)
        return tail_start >= start and _fits(tail, subject, tail_start)


def _never(subject: bytes) -> bool:
    return False


# (methodcaller: a C-level call per subject, where a lambda would add a Python frame; KEYS
# prefix* over 300k short keys 140 -> 100 ms)
def _starts(prefix: bytes) -> Matcher:
    return methodcaller("startswith", prefix)


def _ends(suffix: bytes) -> Matcher:
    return methodcaller("endswith", suffix)


def _contains(inner: bytes) -> Matcher:
    return methodcaller("__contains__", inner)


def _matcher(pattern: bytes, nocase: bool) -> Matcher:
    pieces = _pieces(_tokens(pattern, nocase))
    if len(pieces) == 1:  # no "*": the whole subject, one byte per token
        text = _literal_bytes(pieces[0])
        if text is not None:
            return text.__eq__
        if _classes(pieces) > MAX_REGEX_CLASSES:
            return _exactly(pieces[0])
        return re.compile(_regex(pieces[0]) + b"\\Z").match
    # Each "*" run but a final one recurses a level deeper in Redis, which stops past 1000.
    if len(pieces) - 1 - (not pieces[-1]) > MAX_NESTING:
        return _never
    texts = [_literal_bytes(piece) for piece in pieces]
    head, tail = texts[0], texts[-1]
    # Quicker forms. Only "*"s alone could match the empty subject, which Redis refuses (its
    # loop stops before a "*" can match nothing there): all the others need a byte anyway.
    if len(pieces) == 2 and head == b"" == tail:
        return bool
    if len(pieces) == 2 and head is not None and tail == b"":
        return _starts(head)
    if len(pieces) == 2 and head == b"" and tail is not None:
        return _ends(tail)
    inner = texts[1]
    if len(pieces) == 3 and head == b"" == tail and inner is not None:
        return _contains(inner)
    return _glob_regex(pieces).match if _classes(pieces) <= MAX_REGEX_CLASSES else _Walk(pieces)


@lru_cache(maxsize=1024)
def compile_glob(pattern: bytes, nocase: bool = False) -> Matcher:
    """A function telling whether a subject matches ``pattern``, as Redis's stringmatchlen."""
    return _matcher(pattern, nocase)


def glob_match(pattern: bytes, subject: bytes, nocase: bool = False) -> bool:
    return bool(compile_glob(pattern, nocase)(subject))
