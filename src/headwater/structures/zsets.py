"""A sorted set, ordered by (score, member) as Redis orders it (``t_zset.c``).

Two views of the same elements:

- ``scores``: member → score, for the lookups by member (ZSCORE, ZADD's updates, ZREM);
- ``order``: the ``(score, member)`` pairs in order, in chunks of at most ``CHUNK`` pairs
  (``lasts[i]`` is the last pair of ``chunks[i]``), so that an insert or a removal is one
  ``bisect`` over the chunks and a ``list.insert`` into one of them; positions (ZRANGE by
  rank, ZRANK) walk the chunks' lengths.

The pairs share their score and member objects with ``scores``; a pair of a float and bytes
is untracked by the cyclic GC after its first collection, so a million elements add no GC
pause. The encoding label follows Redis 7.2: ``listpack`` until the set holds more than
``zset-max-listpack-entries`` members or a member longer than ``zset-max-listpack-value``,
then ``skiplist`` for good (the *STORE commands pick it afresh for their result). The order
does not depend on it: a listpack and a skiplist iterate alike.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator
from itertools import accumulate
from typing import NamedTuple

CHUNK = 1024
Pair = tuple[float, bytes]


class ZSetLimits(NamedTuple):
    """``zset-max-listpack-entries`` and ``zset-max-listpack-value``."""

    listpack_entries: int = 128
    listpack_value: int = 64


class ZSetInvariantError(Exception):
    """A sorted set broke one of its invariants (a bug, never bad input)."""


class ScoreRange(NamedTuple):
    """``min``/``max`` of ZRANGEBYSCORE & co., each maybe exclusive (``(1.5``)."""

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False

    def above_low(self, score: float) -> bool:
        return score > self.low if self.low_open else score >= self.low

    def below_high(self, score: float) -> bool:
        return score < self.high if self.high_open else score <= self.high

    def empty(self) -> bool:
        return self.low > self.high or (self.low == self.high and (self.low_open or self.high_open))


class LexRange(NamedTuple):
    """``[a``/``(a``/``-``/``+`` of the BYLEX forms: None stands for ``-`` or ``+``."""

    low: bytes | None
    high: bytes | None
    low_open: bool = False
    high_open: bool = False

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
    __slots__ = ("_before", "chunks", "lasts", "listpack", "scores")

    def __init__(self, listpack: bool = True) -> None:
        self.scores: dict[bytes, float] = {}
        self.chunks: list[list[Pair]] = []
        self.lasts: list[Pair] = []
        self.listpack = listpack
        #: pairs before each chunk (one more entry: the total), made when a position is
        #: asked after a change; None: stale. (A walk over the chunks per position made
        #: ZRANGEBYSCORE O(n/CHUNK) at every call.)
        self._before: list[int] | None = None

    def _counts(self) -> list[int]:
        before = self._before
        if before is None:
            before = self._before = list(accumulate(map(len, self.chunks), initial=0))
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
        for chunk in self.chunks:
            yield from chunk

    def encoding_name(self) -> bytes:
        return b"listpack" if self.listpack else b"skiplist"

    #: SORT … BY nosort keeps a sorted set's order (DESC reverses it)
    SORT_ORDERED = True

    def sort_elements(self) -> list[bytes]:
        """What SORT sorts: the members by rank. Redis's SORT converts a listpack sorted set
        to a skiplist first, so this does too (OBJECT ENCODING shows it afterwards)."""
        self.listpack = False
        return [member for _, member in self]

    def copy(self) -> ZSetValue:
        """An independent twin with the same encoding (zsetDup; the pairs, immutable, are
        shared)."""
        twin = ZSetValue(self.listpack)
        twin.scores = dict(self.scores)
        twin.chunks = [list(chunk) for chunk in self.chunks]
        twin.lasts = list(self.lasts)
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
        if previous is not None:
            if previous == score:  # (-0.0 and 0.0 too: Redis compares the doubles)
                return previous
            self._unlink((previous, member))
        elif self.listpack and (
            len(self.scores) + 1 > limits.listpack_entries or len(member) > limits.listpack_value
        ):
            self.listpack = False
        self.scores[member] = score
        self._link((score, member))
        return previous

    def remove(self, member: bytes) -> bool:
        score = self.scores.pop(member, None)
        if score is None:
            return False
        self._unlink((score, member))
        return True

    def _link(self, pair: Pair) -> None:
        self._before = None
        lasts, chunks = self.lasts, self.chunks
        if not chunks:
            chunks.append([pair])
            lasts.append(pair)
            return
        k = bisect_left(lasts, pair)
        if k == len(lasts):  # past every chunk's last: the tail chunk
            k -= 1
            chunks[k].append(pair)
            lasts[k] = pair
        else:
            insort(chunks[k], pair)
        if len(chunks[k]) > CHUNK:
            chunk = chunks[k]
            half = len(chunk) // 2
            chunks[k : k + 1] = [chunk[:half], chunk[half:]]
            lasts[k : k + 1] = [chunk[half - 1], chunk[-1]]

    def _unlink(self, pair: Pair) -> None:
        self._before = None
        lasts, chunks = self.lasts, self.chunks
        k = bisect_left(lasts, pair)
        chunk = chunks[k]
        i = bisect_left(chunk, pair)
        del chunk[i]
        if not chunk:
            del chunks[k]
            del lasts[k]
        elif i == len(chunk):
            lasts[k] = chunk[-1]

    def load_ordered(self, pairs: list[Pair]) -> None:
        """Fill an empty set from pairs already in order (a snapshot's): no bisection."""
        if self.scores:
            raise ZSetInvariantError("load_ordered into a set that is not empty")
        self.scores = {member: score for score, member in pairs}
        self._before = None
        self.chunks = [pairs[i : i + CHUNK // 2] for i in range(0, len(pairs), CHUNK // 2)]
        self.lasts = [chunk[-1] for chunk in self.chunks]

    # -- positions -------------------------------------------------------------------------

    def rank(self, member: bytes) -> int | None:
        """Member's 0-based position from the lowest, or None."""
        score = self.scores.get(member)
        if score is None:
            return None
        pair = (score, member)
        k = bisect_left(self.lasts, pair)
        return self._counts()[k] + bisect_left(self.chunks[k], pair)

    def by_rank(self, start: int, stop: int) -> list[Pair]:
        """Pairs at positions start..stop inclusive (already within 0..len-1)."""
        out: list[Pair] = []
        if start > stop:
            return out
        counts = self._counts()
        chunks = self.chunks
        k = bisect_right(counts, start) - 1
        while k < len(chunks) and counts[k] <= stop:
            position = counts[k]
            out.extend(chunks[k][max(start - position, 0) : stop - position + 1])
            k += 1
        return out

    def _position(self, pair: Pair, right: bool) -> int:
        """How many pairs sort before ``pair`` (after it too when right)."""
        find = bisect_right if right else bisect_left
        lasts = self.lasts
        k = find(lasts, pair)
        if k == len(lasts):
            return len(self.scores)
        return self._counts()[k] + find(self.chunks[k], pair)

    def _score_position(self, score: float, right: bool) -> int:
        """How many pairs have a score below ``score`` (at or below it when right). Bisects
        with a one-item tuple, which sorts before every pair of its score (compared in C,
        without a key function called per probe); "at or below" is "below the next double"."""
        if right:
            if score == math.inf:
                return len(self.scores)
            score = math.nextafter(score, math.inf)
        probe = (score,)
        lasts = self.lasts
        k = bisect_left(lasts, probe)
        if k == len(lasts):
            return len(self.scores)
        return self._counts()[k] + bisect_left(self.chunks[k], probe)

    def score_span(self, r: ScoreRange) -> tuple[int, int]:
        """[first, end) positions of the members whose score lies in r."""
        first = self._score_position(r.low, r.low_open)
        end = self._score_position(r.high, not r.high_open)
        return first, max(end, first)

    def lex_span(self, r: LexRange) -> tuple[int, int]:
        """[first, end) positions of the members in r, for a set whose members all have one
        score (the BYLEX forms' condition; otherwise, as Redis, the first run in order)."""
        n = len(self.scores)
        if not n:
            return 0, 0
        first_score = self.chunks[0][0][0]
        if first_score == self.lasts[-1][0]:  # one score: positions by bisection
            first = 0 if r.low is None else self._position((first_score, r.low), r.low_open)
            end = n if r.high is None else self._position((first_score, r.high), not r.high_open)
            return first, max(end, first)
        return self._lex_walk(r)

    def _lex_walk(self, r: LexRange) -> tuple[int, int]:
        position, first = 0, -1
        for pair in self:
            member = pair[1]
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
        for chunk, last in zip(self.chunks, self.lasts, strict=True):
            if not chunk or len(chunk) > CHUNK or chunk[-1] != last:
                raise ZSetInvariantError("a chunk is empty, too long, or its last is wrong")
        if len(self.chunks) != len(self.lasts):
            raise ZSetInvariantError("chunks and lasts differ in number")
        if self._before is not None and self._before != list(
            accumulate(map(len, self.chunks), initial=0)
        ):
            raise ZSetInvariantError("the cached counts before each chunk are stale")
