"""A sorted set, ordered by (score, member) as Redis orders it (``t_zset.c``).

Two views of the same elements:

- ``scores``: member → score, for the lookups by member (ZSCORE, ZADD's updates, ZREM);
- the order: the elements in chunks of at most ``CHUNK``, each chunk two parallel columns,
  its scores in an ``array('d')`` (``chunk_scores[k]``) and its members in a list
  (``chunk_members[k]``); ``last_scores``/``last_members`` hold each chunk's last element.
  An insert or a removal is a ``bisect`` over the last scores, one inside a chunk's scores
  and an ``insert``/``del`` in both columns; members are compared only within a run of
  equal scores (a BYLEX set is one such run). Positions (ZRANGE by rank, ZRANK) add the
  chunks' lengths (``_counts``, remade after a change when a position is asked).

Why columns, not a list of ``(score, member)`` tuples: each probe of a bisection over tuples
reads a tuple, a float and maybe a bytes object scattered over the heap (cache misses, ~55%
of a ZADD on 100k members), where a probe of an ``array('d')`` reads 8 contiguous bytes;
the columns also spare the tuple (56 bytes) per element. The scores in the arrays are the
doubles of ``scores``'s floats (-0.0 kept; NaN never stored).

The encoding label follows Redis 7.2: ``listpack`` until the set holds more than
``zset-max-listpack-entries`` members or a member longer than ``zset-max-listpack-value``,
then ``skiplist`` for good (the *STORE commands pick it afresh for their result). The order
does not depend on it: a listpack and a skiplist iterate alike.
"""

from __future__ import annotations

import importlib
import itertools
import math
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterator
from itertools import accumulate
from typing import TYPE_CHECKING, Final, cast

CHUNK = 1024
Pair = tuple[float, bytes]


#: (Final: compiled, a C static rather than a module-dict lookup per call)
_bisect_left: Final = bisect_left
_bisect_right: Final = bisect_right


def _scores(values: list[float] | None = None) -> array[float]:
    return array("d") if values is None else array("d", values)


def ascending(scores: array[float] | list[float], members: list[bytes]) -> bool:
    """The (score, member) pairs of the two columns strictly ascend, and no score is NaN
    (what ``load_columns`` takes as it is)."""
    if scores and scores[0] != scores[0]:
        return False
    for i in range(1, len(members)):
        a, b = scores[i - 1], scores[i]
        if not a <= b or (a == b and members[i - 1] >= members[i]):
            return False
    return True


class ZSetLimits:
    """``zset-max-listpack-entries`` and ``zset-max-listpack-value``. (A plain class, not a
    NamedTuple: ZADD makes one per call, and compiled it is made without a Python frame.)"""

    __slots__ = ("listpack_entries", "listpack_value")

    def __init__(self, listpack_entries: int = 128, listpack_value: int = 64) -> None:
        self.listpack_entries = listpack_entries
        self.listpack_value = listpack_value


class ZSetInvariantError(Exception):
    """A sorted set broke one of its invariants (a bug, never bad input)."""


class ScoreRange:
    """``min``/``max`` of ZRANGEBYSCORE & co., each maybe exclusive (``(1.5``). (A plain
    class, not a NamedTuple: compiled, it is made without a call into Python.)"""

    __slots__ = ("high", "high_open", "low", "low_open")

    def __init__(
        self, low: float, high: float, low_open: bool = False, high_open: bool = False
    ) -> None:
        self.low = low
        self.high = high
        self.low_open = low_open
        self.high_open = high_open

    def above_low(self, score: float) -> bool:
        return score > self.low if self.low_open else score >= self.low

    def below_high(self, score: float) -> bool:
        return score < self.high if self.high_open else score <= self.high

    def empty(self) -> bool:
        return self.low > self.high or (self.low == self.high and (self.low_open or self.high_open))


class LexRange:
    """``[a``/``(a``/``-``/``+`` of the BYLEX forms: None stands for ``-`` or ``+``."""

    __slots__ = ("high", "high_open", "low", "low_open")

    def __init__(
        self, low: bytes | None, high: bytes | None, low_open: bool = False, high_open: bool = False
    ) -> None:
        self.low = low
        self.high = high
        self.low_open = low_open
        self.high_open = high_open

    def above_low(self, member: bytes) -> bool:
        low = self.low
        if low is None:
            return True
        return member > low if self.low_open else member >= low

    def below_high(self, member: bytes) -> bool:
        high = self.high
        if high is None:
            return True
        return member < high if self.high_open else member <= high


class ZSetValue:
    TYPE_NAME = b"zset"
    __slots__ = (
        "_before",
        "chunk_members",
        "chunk_scores",
        "last_members",
        "last_scores",
        "listpack",
        "scores",
    )

    def __init__(self, listpack: bool = True) -> None:
        self.scores: dict[bytes, float] = {}
        self.chunk_scores: list[array[float]] = []
        self.chunk_members: list[list[bytes]] = []
        self.last_scores: array[float] = _scores()
        self.last_members: list[bytes] = []
        self.listpack = listpack
        #: elements before each chunk (one more entry: the total), made when a position is
        #: asked after a change; None: stale. (A walk over the chunks per position made
        #: ZRANGEBYSCORE O(n/CHUNK) at every call.)
        self._before: list[int] | None = None

    def _counts(self) -> list[int]:
        before = self._before
        if before is None:
            before = self._before = list(accumulate(map(len, self.chunk_members), initial=0))
        return before

    @classmethod
    def for_size(cls, size_hint: int, longest: int, limits: ZSetLimits) -> ZSetValue:
        """A new sorted set for about ``size_hint`` members, the longest ``longest`` bytes
        (zsetTypeCreate)."""
        return cls(size_hint <= limits.listpack_entries and longest <= limits.listpack_value)

    def __len__(self) -> int:
        return len(self.scores)

    def __contains__(self, member: bytes) -> bool:
        return member in self.scores

    def __iter__(self) -> Iterator[Pair]:
        for scores, members in zip(self.chunk_scores, self.chunk_members, strict=True):
            yield from zip(scores, members, strict=True)

    def members(self) -> list[bytes]:
        """Every member, in order."""
        out: list[bytes] = []
        for members in self.chunk_members:
            out.extend(members)
        return out

    def encoding_name(self) -> bytes:
        return b"listpack" if self.listpack else b"skiplist"

    #: SORT … BY nosort keeps a sorted set's order (DESC reverses it)
    SORT_ORDERED = True

    def sort_elements(self) -> list[bytes]:
        """What SORT sorts: the members by rank. Redis's SORT converts a listpack sorted set
        to a skiplist first, so this does too (OBJECT ENCODING shows it afterwards)."""
        self.listpack = False
        return self.members()

    def copy(self) -> ZSetValue:
        """An independent twin with the same encoding (zsetDup; the members, immutable, are
        shared)."""
        twin = ZSetValue(self.listpack)
        twin.scores = dict(self.scores)
        twin.chunk_scores = [scores[:] for scores in self.chunk_scores]
        twin.chunk_members = [list(members) for members in self.chunk_members]
        twin.last_scores = self.last_scores[:]
        twin.last_members = list(self.last_members)
        return twin

    def prepare(self, size_hint: int, longest: int, limits: ZSetLimits) -> None:
        """Before adding about ``size_hint`` members (zsetTypeMaybeConvert)."""
        if self.listpack and (
            size_hint > limits.listpack_entries or longest > limits.listpack_value
        ):
            self.listpack = False

    # -- changes ---------------------------------------------------------------------------

    def set(self, member: bytes, score: float, limits: ZSetLimits) -> float | None:
        """Give member this score; returns its previous score (None: it is new)."""
        previous = self.scores.get(member)
        self.put(member, score, previous, limits)
        return previous

    def put(self, member: bytes, score: float, previous: float | None, limits: ZSetLimits) -> None:
        """``set`` for a caller that looked the member's score up already (``previous``,
        None: not a member)."""
        if previous is not None:
            if previous == score:  # (-0.0 and 0.0 too: Redis compares the doubles)
                return
            self._unlink(previous, member)
        elif self.listpack and (
            len(self.scores) + 1 > limits.listpack_entries or len(member) > limits.listpack_value
        ):
            self.listpack = False
        self.scores[member] = score
        self._link(score, member)

    def remove(self, member: bytes) -> bool:
        score = self.scores.pop(member, None)
        if score is None:
            return False
        self._unlink(score, member)
        return True

    def _chunk_of(self, score: float, member: bytes, right: bool) -> int:
        """The first chunk whose last element sorts at or after (score, member) (after it
        when right); the number of chunks when none does."""
        return _index(self.last_scores, self.last_members, score, member, right)

    def _index_in(self, k: int, score: float, member: bytes, right: bool) -> int:
        """How many elements of chunk k sort before (score, member) (at or before it when
        right)."""
        return _index(self.chunk_scores[k], self.chunk_members[k], score, member, right)

    def _link(self, score: float, member: bytes) -> None:
        self._before = None
        chunk_scores, chunk_members = self.chunk_scores, self.chunk_members
        if not chunk_members:
            chunk_scores.append(_scores([score]))
            chunk_members.append([member])
            self.last_scores.append(score)
            self.last_members.append(member)
            return
        k = self._chunk_of(score, member, False)
        if k == len(chunk_members):  # past every chunk's last: the tail chunk
            k -= 1
            scores, members = chunk_scores[k], chunk_members[k]
            scores.append(score)
            members.append(member)
            self.last_scores[k] = score
            self.last_members[k] = member
        else:  # (before the chunk's last: the last stays)
            scores, members = chunk_scores[k], chunk_members[k]
            i = _index(scores, members, score, member, False)
            scores.insert(i, score)
            members.insert(i, member)
        if len(members) > CHUNK:
            half = len(members) // 2
            chunk_scores[k : k + 1] = [scores[:half], scores[half:]]
            chunk_members[k : k + 1] = [members[:half], members[half:]]
            self.last_scores.insert(k, scores[half - 1])
            self.last_members.insert(k, members[half - 1])

    def _unlink(self, score: float, member: bytes) -> None:
        self._before = None
        k = self._chunk_of(score, member, False)
        scores, members = self.chunk_scores[k], self.chunk_members[k]
        i = _index(scores, members, score, member, False)
        if members[i] is not member and members[i] != member:
            raise ZSetInvariantError(f"member {member!r} not where its score puts it")
        del scores[i]
        del members[i]
        if not members:
            del self.chunk_scores[k]
            del self.chunk_members[k]
            del self.last_scores[k]
            del self.last_members[k]
        elif i == len(members):
            self.last_scores[k] = scores[i - 1]
            self.last_members[k] = members[i - 1]

    def load_ordered(self, pairs: list[Pair]) -> None:
        """Fill an empty set from pairs already in order (a snapshot's): no bisection."""
        if self.scores:
            raise ZSetInvariantError("load_ordered into a set that is not empty")
        self.scores = {member: score for score, member in pairs}
        self._before = None
        step = CHUNK // 2
        self.chunk_scores = [
            _scores([score for score, _ in pairs[i : i + step]]) for i in range(0, len(pairs), step)
        ]
        self.chunk_members = [
            [member for _, member in pairs[i : i + step]] for i in range(0, len(pairs), step)
        ]
        self.last_scores = _scores([scores[-1] for scores in self.chunk_scores])
        self.last_members = [members[-1] for members in self.chunk_members]

    def load_columns(
        self, scores: array[float], members: list[bytes], floats: list[float] | None = None
    ) -> None:
        """``load_ordered`` from the two columns (a snapshot's): ``scores`` and ``members``
        in order, taken as they are (a set of one chunk keeps both objects), with no pair
        made per element. ``floats``: the same scores as objects, when the caller has them
        (the member map takes those instead of a float made from each of the array's)."""
        if self.scores:
            raise ZSetInvariantError("load_columns into a set that is not empty")
        if len(scores) != len(members) or (floats is not None and len(floats) != len(scores)):
            raise ZSetInvariantError("load_columns of columns that differ in length")
        self.scores = dict(zip(members, scores if floats is None else floats, strict=True))
        self._before = None
        step = CHUNK // 2
        if len(members) <= step:
            self.chunk_scores = [scores] if members else []
            self.chunk_members = [members] if members else []
        else:
            starts = range(0, len(members), step)
            self.chunk_scores = [scores[i : i + step] for i in starts]
            self.chunk_members = [members[i : i + step] for i in starts]
        self.last_scores = _scores([column[-1] for column in self.chunk_scores])
        self.last_members = [column[-1] for column in self.chunk_members]

    # -- positions -------------------------------------------------------------------------

    def rank(self, member: bytes) -> int | None:
        """Member's 0-based position from the lowest, or None."""
        score = self.scores.get(member)
        if score is None:
            return None
        k = self._chunk_of(score, member, False)
        return self._counts()[k] + self._index_in(k, score, member, False)

    def by_rank(self, start: int, stop: int) -> list[Pair]:
        """Pairs at positions start..stop inclusive (already within 0..len-1)."""
        out: list[Pair] = []
        if start > stop:
            return out
        counts = self._counts()
        chunk_scores, chunk_members = self.chunk_scores, self.chunk_members
        k = bisect_right(counts, start) - 1
        while k < len(chunk_members) and counts[k] <= stop:
            position = counts[k]
            a, b = max(start - position, 0), stop - position + 1
            out.extend(zip(chunk_scores[k][a:b], chunk_members[k][a:b], strict=True))
            k += 1
        return out

    def members_by_rank(self, start: int, stop: int) -> list[bytes]:
        """The members of ``by_rank`` (no pairs made)."""
        out: list[bytes] = []
        if start > stop:
            return out
        counts = self._counts()
        chunk_members = self.chunk_members
        k = bisect_right(counts, start) - 1
        while k < len(chunk_members) and counts[k] <= stop:
            position = counts[k]
            out.extend(chunk_members[k][max(start - position, 0) : stop - position + 1])
            k += 1
        return out

    def _position(self, score: float, member: bytes, right: bool) -> int:
        """How many elements sort before (score, member) (at or before it when right)."""
        k = self._chunk_of(score, member, right)
        if k == len(self.chunk_members):
            return len(self.scores)
        return self._counts()[k] + self._index_in(k, score, member, right)

    def _score_position(self, score: float, right: bool) -> int:
        """How many elements have a score below ``score`` (at or below it when right)."""
        if right and score == math.inf:
            return len(self.scores)
        k = _score_index(self.last_scores, score, right)
        if k == len(self.chunk_scores):
            return len(self.scores)
        return self._counts()[k] + _score_index(self.chunk_scores[k], score, right)

    def score_span(self, r: ScoreRange) -> tuple[int, int]:
        """[first, end) positions of the members whose score lies in r."""
        first = self._score_position(r.low, r.low_open)
        end = self._score_position(r.high, not r.high_open)
        return first, max(end, first)

    def score_members(self, r: ScoreRange, offset: int, count: int) -> list[bytes]:
        """The members whose score lies in r (not empty), in order, the first ``offset`` of
        them left out, at most ``count`` (-1: all): ZRANGEBYSCORE … LIMIT as one search for
        the first and a walk, no positions counted (``score_span`` then ``members_by_rank``
        give the same)."""
        out: list[bytes] = []
        chunk_scores, chunk_members = self.chunk_scores, self.chunk_members
        n = len(chunk_members)
        k = _score_index(self.last_scores, r.low, r.low_open)
        if k == n:
            return out
        i = _score_index(chunk_scores[k], r.low, r.low_open)
        while offset:  # (members past the range skipped here end the walk below)
            left = len(chunk_members[k]) - i
            if offset < left:
                i += offset
                break
            offset -= left
            k, i = k + 1, 0
            if k == n:
                return out
        high, high_closed = r.high, not r.high_open
        to_the_end = high == math.inf and high_closed  # (``+inf``: no search per chunk)
        while k < n and count:
            scores, members = chunk_scores[k], chunk_members[k]
            size = len(members)
            end = size if to_the_end else _score_index(scores, high, high_closed)
            if count > 0 and end - i > count:
                end = i + count
            if end > i:
                out.extend(members[i:end])
                if count > 0:
                    count -= end - i
            if end < size:
                break
            k, i = k + 1, 0
        return out

    def lex_span(self, r: LexRange) -> tuple[int, int]:
        """[first, end) positions of the members in r, for a set whose members all have one
        score (the BYLEX forms' condition; otherwise, as Redis, the first run in order)."""
        n = len(self.scores)
        if not n:
            return 0, 0
        first_score = self.chunk_scores[0][0]
        if first_score == self.last_scores[-1]:  # one score: positions by bisection
            first = 0 if r.low is None else self._position(first_score, r.low, r.low_open)
            end = n if r.high is None else self._position(first_score, r.high, not r.high_open)
            return first, max(end, first)
        return self._lex_walk(r)

    def _lex_walk(self, r: LexRange) -> tuple[int, int]:
        position, first = 0, -1
        for member in self.members():
            if first < 0:
                if r.above_low(member):
                    if not r.below_high(member):
                        return 0, 0
                    first = position
            elif not r.below_high(member):
                return first, position
            position += 1
        return (first, position) if first >= 0 else (0, 0)

    # -- checks ----------------------------------------------------------------------------

    def check_invariants(self) -> None:
        pairs = list(self)
        if len(pairs) != len(self.scores):
            raise ZSetInvariantError(f"{len(pairs)} ordered pairs for {len(self.scores)} members")
        if any(a >= b for a, b in itertools.pairwise(pairs)):
            raise ZSetInvariantError("pairs out of order")
        for score, member in pairs:
            if self.scores.get(member) != score or score != score:
                raise ZSetInvariantError(f"member {member!r}: score {score!r} disagrees")
        columns = (self.chunk_scores, self.chunk_members, self.last_scores, self.last_members)
        if len({len(column) for column in columns}) != 1:
            raise ZSetInvariantError("the chunks' columns and lasts differ in number")
        for k, (scores, members) in enumerate(
            zip(self.chunk_scores, self.chunk_members, strict=True)
        ):
            if scores.typecode != "d" or len(scores) != len(members):
                raise ZSetInvariantError("a chunk's scores and members differ in number")
            if not members or len(members) > CHUNK:
                raise ZSetInvariantError("a chunk is empty or too long")
            if (scores[-1], members[-1]) != (self.last_scores[k], self.last_members[k]):
                raise ZSetInvariantError("a chunk's last element is wrong")
        if self._before is not None and self._before != list(
            accumulate(map(len, self.chunk_members), initial=0)
        ):
            raise ZSetInvariantError("the cached counts before each chunk are stale")


def index_pure(
    scores: array[float], members: list[bytes], score: float, member: bytes, right: bool
) -> int:
    """How many elements of a chunk sort before (score, member) (at or before it when
    right): a bisection of its scores, then of its members within a run of equal scores.
    (Also the chunk of an element, over the chunks' last scores and members.)"""
    i = _bisect_left(scores, score)
    if i < len(scores) and scores[i] == score:  # a run of this score: by member
        end = _bisect_right(scores, score, i)
        find = _bisect_right if right else _bisect_left
        i = find(members, member, i, end)
    return i


def score_index_pure(scores: array[float], score: float, right: bool) -> int:
    """How many of the scores are below score (at or below it when right)."""
    return _bisect_right(scores, score) if right else _bisect_left(scores, score)


if TYPE_CHECKING:
    IndexFn = Callable[[array[float], list[bytes], float, bytes, bool], int]
    ScoreIndexFn = Callable[[array[float], float, bool], int]


def native_search() -> tuple[IndexFn, ScoreIndexFn] | None:
    """The C bisections (``_zsearch.c``: the same answers, the doubles read in place), or
    None when they are not built (the pure build)."""
    try:
        module = importlib.import_module("headwater.structures._zsearch")
    except ImportError:
        return None
    return cast("IndexFn", module.position), cast("ScoreIndexFn", module.score_position)


def _search() -> tuple[IndexFn, ScoreIndexFn]:
    native = native_search()
    return (index_pure, score_index_pure) if native is None else native


_SEARCH: Final = _search()
_index: Final = _SEARCH[0]
_score_index: Final = _SEARCH[1]
