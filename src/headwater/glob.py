"""Redis's glob-style pattern matching (``stringmatchlen``), compiled to regular expressions.

Supported: ``*``, ``?``, ``[abc]``, ``[^abc]``, ``[a-z]`` (either order), and ``\\`` escapes.
Matching is on bytes and case-sensitive, as in KEYS, SCAN MATCH and CONFIG GET (which folds case
itself).
"""

from __future__ import annotations

import re
from functools import lru_cache


def _class(pattern: bytes, i: int) -> tuple[bytes, int]:
    """Translate a ``[...]`` class starting after ``[``; returns (regex, index after ``]``)."""
    n = len(pattern)
    negate = i < n and pattern[i] == ord("^")
    if negate:
        i += 1
    parts: list[bytes] = []
    while i < n and pattern[i] != ord("]"):
        ch = pattern[i]
        if ch == ord("\\") and i + 1 < n:
            i += 1
            parts.append(re.escape(pattern[i : i + 1]))
        elif i + 2 < n and pattern[i + 1] == ord("-") and pattern[i + 2] != ord("]"):
            lo, hi = sorted((ch, pattern[i + 2]))
            parts.append(re.escape(bytes([lo])) + b"-" + re.escape(bytes([hi])))
            i += 2
        else:
            parts.append(re.escape(bytes([ch])))
        i += 1
    # An unterminated class runs to the end of the pattern, as in Redis.
    body = b"".join(parts)
    if not body:
        return (b"[^\\s\\S]" if not negate else b"[\\s\\S]"), i + 1
    return b"[" + (b"^" if negate else b"") + body + b"]", i + 1


@lru_cache(maxsize=256)
def compile_glob(pattern: bytes, nocase: bool = False) -> re.Pattern[bytes]:
    out: list[bytes] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == ord("*"):
            out.append(b"[\\s\\S]*")
        elif ch == ord("?"):
            out.append(b"[\\s\\S]")
        elif ch == ord("["):
            regex, i = _class(pattern, i + 1)
            out.append(regex)
            continue
        elif ch == ord("\\") and i + 1 < n:
            i += 1
            out.append(re.escape(pattern[i : i + 1]))
        else:
            out.append(re.escape(bytes([ch])))
        i += 1
    flags = re.IGNORECASE if nocase else 0
    return re.compile(b"".join(out) + b"\\Z", flags)


def glob_match(pattern: bytes, subject: bytes, nocase: bool = False) -> bool:
    if pattern == b"*":
        return True
    return compile_glob(pattern, nocase).match(subject) is not None
