"""Redis's glob matching (headwater.glob) against two references: a walk that follows Redis's
stringmatchlen step by step (its recursion on "*", the cut when the rest fails everywhere, the
nesting bound, the bytes read past the pattern's end as C's NUL), and fnmatch where the two
syntaxes agree."""

from __future__ import annotations

import fnmatch
import re
import time

from hypothesis import example, given, settings
from hypothesis import strategies as st

from headwater.glob import MAX_NESTING, MAX_REGEX_CLASSES, compile_glob, glob_match


class _Walk:
    """Redis's matching, one pattern byte at a time; exponential on some patterns, so only for
    short ones."""

    def __init__(self, nocase: bool) -> None:
        self.nocase = nocase
        self.give_up = False  # Redis's skipLongerMatches

    def char(self, byte: int, fold: bool) -> int:
        value = byte - 256 if byte > 127 else byte  # a signed C char
        return value + 32 if fold and 65 <= value <= 90 else value

    def same(self, a: int, b: int) -> bool:
        return self.char(a, self.nocase) == self.char(b, self.nocase)

    def match(self, pattern: bytes, subject: bytes, depth: int) -> bool:
        if depth > MAX_NESTING:
            return False
        p, s = 0, 0

        def at(i: int) -> int:  # C reads the NUL after the pattern
            return pattern[i] if i < len(pattern) else 0

        while p < len(pattern) and s < len(subject):
            byte = pattern[p]
            if byte == ord("*"):
                while at(p + 1) == ord("*"):
                    p += 1
                if p == len(pattern) - 1:
                    return True
                for start in range(s, len(subject)):
                    if self.match(pattern[p + 1 :], subject[start:], depth + 1):
                        return True
                    if self.give_up:
                        return False
                self.give_up = True
                return False
            if byte == ord("["):
                p, ok = self.bracket(pattern, p + 1, subject[s])
                if not ok:
                    return False
            else:
                if byte == ord("\\") and p + 1 < len(pattern):
                    p += 1
                if byte != ord("?") and not self.same(pattern[p], subject[s]):
                    return False
            s += 1
            p += 1
            if s == len(subject):
                while at(p) == ord("*"):
                    p += 1
                break
        return p == len(pattern) and s == len(subject)

    def bracket(self, pattern: bytes, p: int, c: int) -> tuple[int, bool]:
        """Redis's class loop from after "[": the index of its last byte, and the verdict."""
        negate = p < len(pattern) and pattern[p] == ord("^")
        p += negate
        found = False
        while True:
            left = len(pattern) - p
            if left >= 2 and pattern[p] == ord("\\"):
                p += 1
                found |= pattern[p] == c
            elif left > 0 and pattern[p] == ord("]"):
                break
            elif left == 0:
                p -= 1
                break
            elif left >= 3 and pattern[p + 1] == ord("-"):
                low, high = sorted((self.char(pattern[p], False), self.char(pattern[p + 2], False)))
                low, high = (self.char(x % 256, self.nocase) for x in (low, high))
                found |= low <= self.char(c, self.nocase) <= high
                p += 2
            else:
                found |= self.same(pattern[p], c)
            p += 1
        return p, found != negate


def redis_walk(pattern: bytes, subject: bytes, nocase: bool = False) -> bool:
    return _Walk(nocase).match(pattern, subject, 0)


_SPECIAL = "ab?*[]^-\\"
patterns = st.text(alphabet=_SPECIAL + "Az", max_size=9).map(str.encode)
subjects = st.binary(max_size=8) | st.text(alphabet="abAz-]^\\[*", max_size=8).map(str.encode)


@settings(max_examples=2000)
@given(patterns, subjects, st.booleans())
def test_glob_agrees_with_redis_walk(pattern: bytes, subject: bytes, nocase: bool) -> None:
    assert glob_match(pattern, subject, nocase) == redis_walk(pattern, subject, nocase)


@given(st.binary(max_size=6), st.binary(max_size=6), st.booleans())
def test_glob_agrees_with_redis_walk_on_any_bytes(
    pattern: bytes, subject: bytes, nocase: bool
) -> None:
    assert glob_match(pattern, subject, nocase) == redis_walk(pattern, subject, nocase)


@settings(max_examples=300)
@given(patterns, subjects, st.booleans())
@example(b"?*a", b"a", False)  # the last piece may not overlap the first
@example(b"*ab*b", b"abb", False)
@example(b"*ab*b", b"ab", False)  # nor a middle one
def test_long_patterns_walked_by_hand_agree_with_redis_walk(
    pattern: bytes, subject: bytes, nocase: bool
) -> None:
    """Past MAX_REGEX_CLASSES classes a pattern is not compiled to a regex but walked."""
    pad = MAX_REGEX_CLASSES + 1
    long_pattern, long_subject = b"?" * pad + pattern, b"x" * pad + subject
    got = glob_match(long_pattern, long_subject, nocase)
    assert got == redis_walk(long_pattern, long_subject, nocase)


def _fnmatch(pattern: bytes, subject: bytes) -> bool:
    text = pattern.decode("latin-1").replace("[^", "[!")
    return re.fullmatch(fnmatch.translate(text), subject.decode("latin-1"), re.S) is not None


@given(
    st.text(alphabet="ab?*[]^", max_size=8).map(str.encode),
    st.text(alphabet="ab", min_size=1, max_size=8).map(str.encode),
)
def test_glob_agrees_with_fnmatch_on_plain_classes(pattern: bytes, subject: bytes) -> None:
    balanced = pattern.count(b"[") == pattern.count(b"]") and b"[]" not in pattern
    if not balanced or b"[^]" in pattern or b"[!" in pattern:
        return
    assert glob_match(pattern, subject) == _fnmatch(pattern, subject)


def test_escapes_ranges_and_negation() -> None:
    assert glob_match(b"h\\*llo", b"h*llo") and not glob_match(b"h\\*llo", b"hello")
    assert glob_match(b"h[a-c]llo", b"hbllo") and glob_match(b"h[c-a]llo", b"hbllo")
    assert not glob_match(b"h[^e]llo", b"hello") and glob_match(b"h[^e]llo", b"hallo")
    assert glob_match(b"[\\]]", b"]") and glob_match(b"a\\", b"a\\")


def test_redis_quirks() -> None:
    # the empty subject matches only the empty pattern
    assert not glob_match(b"*", b"") and glob_match(b"", b"")
    # "[a-]" is the range "]".."a", and the class runs on to the end of the pattern
    assert glob_match(b"[a-]bc", b"^") and not glob_match(b"[a-]bc", b"abc")
    # an unterminated class: "[^" takes any byte, "[" none
    assert glob_match(b"[^", b"x") and not glob_match(b"[", b"x")
    # an escape in a class keeps its case under nocase; a range folds
    assert not glob_match(b"[\\A]", b"a", nocase=True) and glob_match(b"[A-C]", b"b", True)
    # bytes above 127 are negative chars in a range
    assert glob_match(b"[a-\xff]", b"A") and not glob_match(b"[a-\xff]", b"b")


def test_more_than_1000_nested_stars_never_match() -> None:
    deep = b"a*" * MAX_NESTING
    assert glob_match(deep + b"b", b"a" * MAX_NESTING + b"b")
    assert not glob_match(b"a*" + deep + b"b", b"a" * (MAX_NESTING + 1) + b"b")
    assert glob_match(b"a*" + deep, b"a" * (MAX_NESTING + 1))  # a final "*" does not nest


def test_pathological_pattern_is_quick() -> None:
    started = time.perf_counter()
    assert not glob_match(b"a*a*a*a*a*a*a*a*a*a*b", b"a" * 40)
    assert not glob_match(b"*a" * 200 + b"b", b"a" * 10_000)
    assert time.perf_counter() - started < 0.5


def test_quick_forms_match_like_the_general_walk() -> None:
    for pattern in (b"*", b"ab*", b"*ab", b"*ab*", b"ab", b"a?", b"a*b*c"):
        for subject in (b"", b"ab", b"xab", b"abx", b"xabx", b"a", b"abc", b"aXbYc"):
            matched = bool(compile_glob(pattern)(subject))
            assert matched == redis_walk(pattern, subject), (pattern, subject)
