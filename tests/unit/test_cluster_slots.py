"""Hash slots: ``key_slot`` against a bitwise CRC-16/XMODEM and the hash-tag rule written
out plainly, and ``runs`` against the slots it groups."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from headwater.cluster.slots import SLOTS, key_slot, runs


def crc16_xmodem(data: bytes) -> int:
    """The reference: poly 0x1021, init 0, no reflection, bit by bit."""
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def reference_slot(key: bytes) -> int:
    if b"{" in key:
        start = key.index(b"{")
        rest = key[start + 1 :]
        if b"}" in rest and rest.index(b"}") > 0:
            return crc16_xmodem(rest[: rest.index(b"}")]) % SLOTS
    return crc16_xmodem(key) % SLOTS


def test_redis_documented_slots() -> None:
    assert crc16_xmodem(b"123456789") == 0x31C3
    assert key_slot(b"foo") == 12182
    assert key_slot(b"somekey") == 11058
    assert key_slot(b"{user1000}.following") == key_slot(b"user1000") == 3443
    assert key_slot(b"foo{}{bar}") == key_slot(b"foo{}{bar}") == 8363
    assert key_slot(b"foo{{bar}}zap") == key_slot(b"{bar") == 4015
    assert key_slot(b"foo{bar}{zap}") == key_slot(b"bar") == 5061
    assert key_slot(b"") == 0


@given(st.binary(max_size=40) | st.lists(st.sampled_from([b"{", b"}", b"a", b"b"])).map(b"".join))
def test_key_slot_matches_the_reference(key: bytes) -> None:
    assert key_slot(key) == reference_slot(key)


@given(st.sets(st.integers(0, SLOTS - 1)))
def test_runs_cover_exactly_the_slots(slots: set[int]) -> None:
    found = list(runs(sorted(slots)))
    covered = [s for first, last in found for s in range(first, last + 1)]
    assert covered == sorted(slots)
    for (_, last), (first, _) in itertools.pairwise(found):
        assert first > last + 1  # maximal: runs never touch
