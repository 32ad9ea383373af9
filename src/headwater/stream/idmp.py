"""Idempotent producers (XADD IDMP / IDMPAUTO): which (producer, iid) pairs a stream has seen.

Theory of operation
-------------------
Each producer (``pid``) has its own map from idempotent ID (``iid``) to the entry ID it
created, so producers never see each other's iids. A map holds at most the stream's
``idmp-maxsize`` iids (the oldest is evicted by each insertion beyond it) and forgets an iid
once its entry ID's milliseconds are ``idmp-duration`` seconds old; a producer whose map empties
is removed. Eviction and expiry pop the oldest iids one by one and never scan the map.

(The order is a deque beside the dict: popping a dict's first key leaves a hole that every
later ``next(iter(d))`` walks over, which made eviction O(maxsize).)

The once-a-second expiry visits only the producers that may have something to forget: a heap
holds one entry per producer keyed by the milliseconds of its oldest iid when the entry was
pushed. A producer's oldest iid only gets newer (expiry and eviction pop it; when XIDMPRECORD
recorded an older iid behind newer ones and eviction brings it to the front, the producer is
pushed again with it), so the key is a lower bound and every producer with an iid at or below
the cutoff is in the heap's prefix; a visited producer is pushed back with its new oldest.
(Walking every producer took ~44 ms a second with the 56,000 short-lived producers a Spark
writer leaves in a 100 s window; the heap makes a second with nothing to forget ~10 us.)

IDMPAUTO's iid is computed by ``auto_iid`` exactly as Redis 8.6 computes it, so an AOF or a
replica written by Redis agrees with ours: each field/value pair is hashed with XXH3-128 over
``field ‖ len(field) as u64 little-endian ‖ value``; the 128-bit hashes are combined so that
order does not matter (wrapping sums and XORs of the halves), and the iid is the 16 bytes of
``low = sum_lo ^ rotl(xor_hi, 1)`` then ``high = sum_hi ^ rotl(xor_lo, 1)``, little-endian.
"""

from __future__ import annotations

import heapq
import struct
from collections import deque
from collections.abc import Iterator, Sequence
from itertools import count
from typing import Final

import xxhash

from headwater.errors import require
from headwater.stream.ids import StreamID

_MASK64 = (1 << 64) - 1
_U64 = struct.Struct("<Q")
_TWO_U64 = struct.Struct("<QQ")
#: an XXH3-128 digest's bytes: (high, low)
_HALVES = struct.Struct(">QQ")

DURATION_RANGE = (1, 86400)  # seconds
MAXSIZE_RANGE = (1, 10000)  # iids per producer


def _rotl1(value: int) -> int:
    return ((value << 1) | (value >> 63)) & _MASK64


def auto_iid(pairs: Sequence[bytes]) -> bytes:
    """The IDMPAUTO iid of a flat field/value list (order-independent, names matter)."""
    # The digest as bytes, split into 32-bit words: ~3x cheaper than the 128-bit int and its
    # masks (compiled, the int arithmetic beyond 63 bits is boxed). XXH3-128's canonical bytes
    # are big-endian: the high half first.
    if len(pairs) == 2:  # one field (the sums and XORs of one hash are the hash)
        field = pairs[0]
        hashed = field + len(field).to_bytes(8, "little") + pairs[1]
        return _one_pair_iid(xxhash.xxh3_128_digest(hashed))
    digest = xxhash.xxh3_128_digest
    split = _HALVES.unpack
    length = _U64.pack
    sum_lo = sum_hi = xor_lo = xor_hi = 0
    for i in range(0, len(pairs), 2):
        field = pairs[i]
        hi, lo = split(digest(field + length(len(field)) + pairs[i + 1]))
        sum_lo += lo
        sum_hi += hi
        xor_lo ^= lo
        xor_hi ^= hi
    low = (sum_lo & _MASK64) ^ _rotl1(xor_hi)
    high = (sum_hi & _MASK64) ^ _rotl1(xor_lo)
    return _TWO_U64.pack(low, high)


_M32: Final = 0xFFFFFFFF
#: an iid's two little-endian u64 halves as 32-bit words, least significant first
_WORDS_LE: Final = struct.Struct("<IIII")


def _one_pair_iid(digest: bytes) -> bytes:
    """The iid of one field/value pair from its XXH3-128 digest: ``lo ^ rotl(hi, 1)`` then
    ``hi ^ rotl(lo, 1)``, as 16 little-endian bytes. Done on 32-bit words: compiled, they
    stay unboxed machine integers (64-bit halves would be boxed Python ints, ~100 ns an
    operation)."""
    # The big-endian words by indexing: compiled, native loads (cheaper than ``struct``'s
    # call and its tuple of boxed ints)
    d = digest
    h1 = (d[0] << 24) | (d[1] << 16) | (d[2] << 8) | d[3]
    h0 = (d[4] << 24) | (d[5] << 16) | (d[6] << 8) | d[7]
    l1 = (d[8] << 24) | (d[9] << 16) | (d[10] << 8) | d[11]
    l0 = (d[12] << 24) | (d[13] << 16) | (d[14] << 8) | d[15]
    # rotl(x, 1) of a 64-bit (x1, x0): each word shifts left and takes the other's top bit
    rh1, rh0 = ((h1 << 1) | (h0 >> 31)) & _M32, ((h0 << 1) | (h1 >> 31)) & _M32
    rl1, rl0 = ((l1 << 1) | (l0 >> 31)) & _M32, ((l0 << 1) | (l1 >> 31)) & _M32
    return _WORDS_LE.pack(l0 ^ rh0, l1 ^ rh1, h0 ^ rl0, h1 ^ rl1)


class Producer:
    """One producer's iids, oldest first: a dict for lookups plus a deque for the order
    (eviction and expiry pop from its left in O(1)). Entry IDs are kept as the ID tuple XADD
    made (shared, not copied: packing it into one ``ms << 64 | seq`` integer saved memory but
    cost ~2 us a command in 128-bit arithmetic, boxed in compiled code)."""

    __slots__ = ("iids", "order")

    def __init__(self) -> None:
        self.iids: dict[bytes, StreamID] = {}
        self.order: deque[bytes] = deque()

    def __len__(self) -> int:
        return len(self.iids)

    def add(self, iid: bytes, sid: StreamID) -> None:
        self.iids[iid] = sid
        self.order.append(iid)

    def pop_oldest(self) -> None:
        del self.iids[self.order.popleft()]

    def oldest_ms(self) -> int:
        return self.iids[self.order[0]][0]

    def entries(self) -> Iterator[tuple[bytes, StreamID]]:
        """(iid, entry ID), oldest first."""
        iids = self.iids
        for iid in self.order:
            yield iid, iids[iid]


class IdmpState:
    """The IDMP maps of one stream and its lifetime counters."""

    __slots__ = ("_due", "_pushes", "added", "duplicates", "producers", "tracked")

    def __init__(self) -> None:
        self.producers: dict[bytes, Producer] = {}
        #: (oldest iid's ms when pushed, tie-breaker, pid, producer): see the module doc
        self._due: list[tuple[int, int, bytes, Producer]] = []
        self._pushes = count()
        self.tracked = 0  # iids held now, all producers
        self.added = 0  # lifetime: entries added with IDMP/IDMPAUTO
        self.duplicates = 0  # lifetime: duplicates answered from the map

    def copy(self) -> IdmpState:
        """An independent twin with the same maps, order and counters (COPY of a stream)."""
        twin = IdmpState()
        for pid, producer in self.producers.items():
            copied = Producer()
            copied.iids = dict(producer.iids)
            copied.order = deque(producer.order)
            twin.adopt(pid, copied)
        twin.added = self.added
        twin.duplicates = self.duplicates
        return twin

    def forget(self, pid: bytes, iid: bytes) -> None:
        """Drop one iid (a replay learns that the primary had expired or evicted it)."""
        producer = self.producers.get(pid)
        if producer is None or iid not in producer.iids:
            return
        del producer.iids[iid]
        producer.order.remove(iid)
        self.tracked -= 1

    def lookup(self, pid: bytes, iid: bytes) -> StreamID | None:
        producer = self.producers.get(pid)
        if producer is None:
            return None
        return producer.iids.get(iid)

    def record(self, pid: bytes, iid: bytes, sid: StreamID, maxsize: int) -> None:
        """Remember a new (pid, iid) → sid; evict the producer's oldest beyond maxsize."""
        producer = self.producers.get(pid)
        if producer is None:
            producer = self.producers[pid] = Producer()
            self._schedule(pid, producer, sid[0])
        # Producer.add and pop_oldest, inlined: this runs for every XADD IDMP
        iids, order = producer.iids, producer.order
        iids[iid] = sid
        order.append(iid)
        self.added += 1
        if len(iids) <= maxsize:
            self.tracked += 1
            return
        while len(iids) > maxsize:  # once, unless maxsize was lowered
            gone_ms = iids.pop(order.popleft())[0]
            self.tracked -= 1
            oldest_ms = iids[order[0]][0]
            if oldest_ms < gone_ms:  # XIDMPRECORD put an older iid behind: keep the bound
                self._schedule(pid, producer, oldest_ms)
        self.tracked += 1

    def adopt(self, pid: bytes, producer: Producer) -> None:
        """Take a producer rebuilt elsewhere (a snapshot being loaded)."""
        self.producers[pid] = producer
        self.tracked += len(producer.iids)
        if producer.iids:
            self._schedule(pid, producer, producer.oldest_ms())

    def _schedule(self, pid: bytes, producer: Producer, oldest_ms: int) -> None:
        heapq.heappush(self._due, (oldest_ms, next(self._pushes), pid, producer))

    def expire(self, cutoff_ms: int) -> int:
        """Forget iids whose entry ms is <= cutoff_ms (oldest first, per producer); returns
        how many. Visits only the producers the heap says may hold such iids."""
        expired = 0
        due = self._due
        while due and due[0][0] <= cutoff_ms:
            _, _, pid, producer = heapq.heappop(due)
            if self.producers.get(pid) is not producer:
                continue  # removed (or removed and created again: it has its own entry)
            while producer.iids and producer.oldest_ms() <= cutoff_ms:
                producer.pop_oldest()
                expired += 1
            if producer.iids:
                self._schedule(pid, producer, producer.oldest_ms())
            else:
                del self.producers[pid]
        self.tracked -= expired
        return expired

    def clear(self) -> None:
        """Drop every map (XCFGSET changed a setting); lifetime counters stay."""
        self.producers.clear()
        self._due.clear()
        self.tracked = 0

    def check_invariants(self, maxsize: int) -> None:
        require(
            self.tracked == sum(len(p.iids) for p in self.producers.values()),
            "tracked count out of step",
        )
        due: dict[bytes, int] = {}
        for key, _, pid, p in self._due:
            if self.producers.get(pid) is p:
                due[pid] = min(key, due.get(pid, key))
        for pid, producer in self.producers.items():
            require(due[pid] <= producer.oldest_ms(), "producer missing from the expiry heap")
        for producer in self.producers.values():
            require(bool(producer.iids), "empty producer kept")
            require(len(producer.iids) <= maxsize, "producer over maxsize")
            require(list(producer.order) == list(producer.iids), "order out of step")
        require(self.added >= self.tracked, "fewer added than tracked")
