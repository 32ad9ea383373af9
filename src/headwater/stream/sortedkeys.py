"""A sorted set of integers kept in chunks, for pending-entries lists.

Why not one list, a tree, or ``sortedcontainers``
------------------------------------------------
PELs grow at the tail (XREADGROUP delivers IDs in increasing order) and shrink anywhere
(XACK). One Python list makes a removal O(n); a tree costs a Python object per key. Chunks of
at most ``CHUNK`` sorted ints, plus the list of each chunk's last key, make every operation one
``bisect`` over the chunks and one inside a chunk, and an append of keys larger than all others
(the common case) a plain ``list.extend`` (``sortedcontainers.SortedList`` does the same work
per key through several Python calls, which made deliveries 3x slower).

Invariants (``check_invariants``): chunks are non-empty, each sorted and strictly increasing,
and ``lasts[i]`` is the last key of ``chunks[i]``; keys increase across chunks.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Iterator

from headwater.errors import require

CHUNK = 512


class SortedKeys:
    __slots__ = ("chunks", "lasts", "size")

    def __init__(self, keys: Iterable[int] = ()) -> None:
        self.chunks: list[list[int]] = []
        self.lasts: list[int] = []
        self.size = 0
        self.extend(sorted(set(keys)))

    def __len__(self) -> int:
        return self.size

    def __bool__(self) -> bool:
        return self.size > 0

    def __iter__(self) -> Iterator[int]:
        for chunk in self.chunks:
            yield from chunk

    def __contains__(self, key: int) -> bool:
        k = bisect_left(self.lasts, key)
        if k == len(self.lasts):
            return False
        chunk = self.chunks[k]
        i = bisect_left(chunk, key)
        return chunk[i] == key

    def first(self) -> int:
        return self.chunks[0][0]

    def copy(self) -> SortedKeys:
        """An independent twin (COPY of a stream)."""
        twin = SortedKeys()
        twin.chunks = [list(chunk) for chunk in self.chunks]
        twin.lasts = list(self.lasts)
        twin.size = self.size
        return twin

    def last(self) -> int:
        return self.lasts[-1]

    # -- changes ---------------------------------------------------------------------------

    def extend(self, keys: list[int]) -> None:
        """Add keys given in increasing order; the fast path is when all are larger than
        every key present (a delivery), otherwise each is added on its own."""
        if not keys:
            return
        if self.lasts and keys[0] <= self.lasts[-1]:
            for key in keys:
                self.add(key)
            return
        if not self.chunks:
            self.chunks.append([])
            self.lasts.append(keys[0])
        tail = self.chunks[-1]
        tail.extend(keys)
        self.lasts[-1] = keys[-1]
        self.size += len(keys)
        if len(tail) > CHUNK:
            self._split(len(self.chunks) - 1)

    def add(self, key: int) -> bool:
        """Insert key; False if it was present."""
        lasts = self.lasts
        if not lasts or key > lasts[-1]:
            self.extend([key])
            return True
        k = bisect_left(lasts, key)
        chunk = self.chunks[k]
        i = bisect_left(chunk, key)
        if chunk[i] == key:
            return False
        chunk.insert(i, key)
        self.size += 1
        if len(chunk) > CHUNK:
            self._split(k)
        return True

    def remove(self, key: int) -> bool:
        """Delete key; False if it was absent. The oldest key is found without a search:
        consumers mostly acknowledge in delivery order."""
        chunks = self.chunks
        if chunks and chunks[0][0] == key:
            k, i, chunk = 0, 0, chunks[0]
        else:
            k = bisect_left(self.lasts, key)
            if k == len(self.lasts):
                return False
            chunk = chunks[k]
            i = bisect_left(chunk, key)
            if chunk[i] != key:
                return False
        del chunk[i]
        self.size -= 1
        if not chunk:
            del self.chunks[k]
            del self.lasts[k]
        elif i == len(chunk):
            self.lasts[k] = chunk[-1]
        return True

    def _split(self, k: int) -> None:
        chunk = self.chunks[k]
        pieces = [chunk[i : i + CHUNK] for i in range(0, len(chunk), CHUNK)]
        self.chunks[k : k + 1] = pieces
        self.lasts[k : k + 1] = [piece[-1] for piece in pieces]

    # -- ranges ----------------------------------------------------------------------------

    def irange(self, lo: int, hi: int | None = None) -> Iterator[int]:
        """Keys with lo <= key (<= hi), ascending. The set must not change while iterating."""
        chunks = self.chunks
        k = bisect_left(self.lasts, lo)
        if k == len(chunks):
            return
        i = bisect_left(chunks[k], lo)
        while k < len(chunks):
            chunk = chunks[k]
            for j in range(i, len(chunk)):
                key = chunk[j]
                if hi is not None and key > hi:
                    return
                yield key
            k += 1
            i = 0

    def check_invariants(self) -> None:
        require(len(self.chunks) == len(self.lasts), "chunks and maxima out of step")
        previous: int | None = None
        total = 0
        for chunk, last in zip(self.chunks, self.lasts, strict=True):
            require(bool(chunk), "empty chunk")
            require(chunk[-1] == last, "stale chunk maximum")
            for key in chunk:
                require(previous is None or key > previous, "keys not strictly increasing")
                previous = key
            total += len(chunk)
        require(total == self.size, "size out of step")
