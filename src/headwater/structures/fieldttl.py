"""The deadlines of a hash's fields (Redis 7.4 hash field expiration), kept beside the hash.

Why this shape: a hash without field TTLs must cost nothing more than before (the hash holds
``None`` in one slot), and one with them must find its due fields without a walk over all
of them (the cron and every access ask "anything due?"). So the deadlines are a dict
field -> unix ms, for lookups (HTTL, HPERSIST, "is this field expired?"), plus a min-heap of
(deadline, field) for "what is due": an entry whose deadline no longer matches the dict (the
field lost its TTL, got another, or was deleted) is stale and skipped when it reaches the
top; the heap is rebuilt when stale entries outnumber live ones.

A field is expired when its deadline is in the past (``deadline < now``), as Redis's
``hfieldIsExpired``; setting a deadline that is not in the future (``<= now``) deletes the
field at once, as ``checkAlreadyExpired``. Those rules live in ``commands/hashes.py``; this
module only orders deadlines.
"""

from __future__ import annotations

import heapq
from collections.abc import Container

from headwater.errors import require


class FieldTtls:
    __slots__ = ("deadlines", "heap")

    def __init__(self) -> None:
        self.deadlines: dict[bytes, int] = {}
        self.heap: list[tuple[int, bytes]] = []

    def __len__(self) -> int:
        return len(self.deadlines)

    def get(self, field: bytes) -> int | None:
        return self.deadlines.get(field)

    def set(self, field: bytes, when_ms: int) -> None:
        self.deadlines[field] = when_ms
        heapq.heappush(self.heap, (when_ms, field))
        if len(self.heap) > 2 * len(self.deadlines) + 64:
            self._rebuild()

    def discard(self, field: bytes) -> bool:
        """Forget the field's deadline; whether it had one."""
        return self.deadlines.pop(field, None) is not None

    def next_deadline(self) -> int | None:
        """The earliest deadline, or None without any."""
        heap, deadlines = self.heap, self.deadlines
        while heap:
            when, field = heap[0]
            if deadlines.get(field) == when:
                return when
            heapq.heappop(heap)
        return None

    def pop_due(self, now_ms: int, limit: int) -> list[bytes]:
        """Up to ``limit`` fields whose deadline is before ``now_ms`` (earliest first),
        forgotten here; the caller deletes them from the hash."""
        out: list[bytes] = []
        heap, deadlines = self.heap, self.deadlines
        while heap and len(out) < limit:
            when, field = heap[0]
            if deadlines.get(field) != when:
                heapq.heappop(heap)
                continue
            if when >= now_ms:
                break
            heapq.heappop(heap)
            del deadlines[field]
            out.append(field)
        return out

    def _rebuild(self) -> None:
        self.heap = [(when, field) for field, when in self.deadlines.items()]
        heapq.heapify(self.heap)

    def check_invariants(self, fields: Container[bytes]) -> None:
        """Every deadline belongs to a field of the hash and has its heap entry; the heap
        is a heap."""
        live = {(when, field) for field, when in self.deadlines.items()}
        require(live <= set(self.heap), "a field's deadline is missing from the heap")
        for field in self.deadlines:
            require(field in fields, f"deadline of a field the hash does not hold: {field!r}")
        heap = self.heap
        for i in range(1, len(heap)):
            require(heap[(i - 1) // 2] <= heap[i], "the deadline heap is out of order")
