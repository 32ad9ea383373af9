"""Hash slots: Redis Cluster's key → slot function, and slot runs.

A key's slot is CRC-16/XMODEM of its hash tag, modulo 16384 (Redis's ``keyHashSlot``): the
tag is what lies between the first ``{`` and the first ``}`` after it, when that is not
empty; otherwise the whole key. ``binascii.crc_hqx`` is that CRC (poly 0x1021, init 0).
"""

from __future__ import annotations

from binascii import crc_hqx
from collections.abc import Iterable, Iterator

SLOTS = 16384
SLOT_MASK = SLOTS - 1


def key_slot(key: bytes) -> int:
    """The hash slot of ``key`` (or of a shard channel)."""
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            return crc_hqx(key[start + 1 : end], 0) & SLOT_MASK
    return crc_hqx(key, 0) & SLOT_MASK


def runs(slots: Iterable[int]) -> Iterator[tuple[int, int]]:
    """Ascending slots as maximal ``(first, last)`` runs of consecutive slots."""
    first = last = -2
    for slot in slots:
        if slot == last + 1:
            last = slot
            continue
        if first >= 0:
            yield first, last
        first = last = slot
    if first >= 0:
        yield first, last
