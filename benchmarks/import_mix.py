"""Import-rdb's mix of every type (the import-rdb row of ``bench.py`` and the full syncs of
``migration_sync.py``): the commands that fill a server with it."""

from __future__ import annotations

from collections.abc import Iterator

import hiredis
from harness import VALUE16

#: import-rdb's mix: of each type a fifth of the elements, half of that in BIG_KEYS big keys
#: (Redis encodes them as hashtable, quicklist, skiplist, stream), half in keys of SMALL
#: elements each (listpack, and intset for the sets)
IMPORT_TYPES = ("stream", "hash", "list", "set", "zset")
IMPORT_BIG_KEYS = 4
IMPORT_SMALL = 10


def import_rdb_mix(elements: int) -> tuple[Iterator[bytes], dict[str, tuple[int, int]]]:
    """The commands (RESP chunks for ``redis-cli --pipe``) that fill the import-rdb row's
    keyspace, and per type (big keys, elements of each; small keys, elements of each)."""
    share = elements // len(IMPORT_TYPES)
    big = share // 2 // IMPORT_BIG_KEYS
    small_keys = (share - big * IMPORT_BIG_KEYS) // IMPORT_SMALL
    layout = {kind: (big, small_keys) for kind in IMPORT_TYPES}
    value = VALUE16.encode()

    def words(kind: str, key: bytes, numbers: range, small: bool) -> list[bytes]:
        if kind == "hash":
            return [b"HSET", key, *(w for i in numbers for w in (b"field:%010d" % i, value))]
        if kind == "list":
            return [b"RPUSH", key, *(b"member:%09d" % i for i in numbers)]
        if kind == "set":  # small sets of integers: intsets
            return [b"SADD", key, *((b"%d" if small else b"member:%09d") % i for i in numbers)]
        return [b"ZADD", key, *(w for i in numbers for w in (b"%d" % i, b"member:%09d" % i))]

    def commands(kind: str, key: bytes, numbers: range, small: bool) -> list[bytes]:
        if kind == "stream":  # (an XADD per entry, with explicit IDs)
            return [
                hiredis.pack_command((b"XADD", key, b"%d-1" % (i + 1), b"f", value))
                for i in numbers
            ]
        return [hiredis.pack_command(tuple(words(kind, key, numbers, small)))]

    def keys(kind: str) -> Iterator[tuple[bytes, range, bool]]:
        for k in range(IMPORT_BIG_KEYS):
            key = b"big:%s:%d" % (kind.encode(), k)
            for start in range(0, big, 100):
                yield key, range(start, min(start + 100, big)), False
        for k in range(small_keys):
            yield b"small:%s:%d" % (kind.encode(), k), range(IMPORT_SMALL), True

    def chunks() -> Iterator[bytes]:
        for kind in IMPORT_TYPES:
            batch: list[bytes] = []
            for key, numbers, small in keys(kind):
                batch += commands(kind, key, numbers, small)
                if len(batch) >= 1000:
                    yield b"".join(batch)
                    batch = []
            yield b"".join(batch)

    return chunks(), layout
