"""The keys of each hash slot (Redis's slot_to_keys), kept by database 0 in cluster mode:
COUNTKEYSINSLOT, GETKEYSINSLOT (redis-cli's reshard asks it for every slot) and the keys a
node deletes when it loses a slot, without a walk over the whole keyspace.

The keyspace tells it of every key added and removed; writes that bypass it (a snapshot
being loaded) are caught by the count: an index whose size is not the keyspace's is built
again before it answers.
"""

from __future__ import annotations

from collections.abc import Iterable

from headwater.cluster.slots import SLOTS, key_slot


class SlotIndex:
    def __init__(self) -> None:
        #: per slot, its keys in insertion order (None: none yet)
        self.keys: list[dict[bytes, None] | None] = [None] * SLOTS
        self.size = 0

    def add(self, key: bytes) -> None:
        slot = key_slot(key)
        keys = self.keys[slot]
        if keys is None:
            keys = self.keys[slot] = {}
        if key not in keys:
            keys[key] = None
            self.size += 1

    def discard(self, key: bytes) -> None:
        keys = self.keys[key_slot(key)]
        if keys is not None and key in keys:
            del keys[key]
            self.size -= 1

    def clear(self) -> None:
        self.keys = [None] * SLOTS
        self.size = 0

    def rebuild(self, keys: Iterable[bytes]) -> None:
        self.clear()
        for key in keys:
            self.add(key)

    def count(self, slot: int) -> int:
        keys = self.keys[slot]
        return 0 if keys is None else len(keys)

    def newest(self, slot: int, limit: int) -> list[bytes]:
        """Up to ``limit`` keys of ``slot``, newest first (the order of Redis's lists)."""
        keys = self.keys[slot]
        if not keys:
            return []
        found: list[bytes] = []
        for key in reversed(keys):
            if len(found) >= limit:
                break
            found.append(key)
        return found
