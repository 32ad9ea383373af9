"""Which values Redis would free in the background (``lazyfree.c``), for INFO's
``lazyfreed_objects``.

Headwater frees a value when its last reference goes, at once; but clients and Redis's own
tests read the counter to learn whether UNLINK, FLUSHALL ASYNC & co. took the lazy path, so
it counts what Redis would have handed to its background thread: a value whose freeing
effort (its number of allocations, as ``lazyfreeGetFreeEffort`` estimates it) is over
``LAZYFREE_THRESHOLD``, and every key of a database flushed asynchronously.
"""

from __future__ import annotations

from headwater.stream.stream import Stream
from headwater.structures.lists import ListValue
from headwater.structures.sets import SetValue
from headwater.structures.zsets import ZSetValue
from headwater.values import Hash

#: Redis's LAZYFREE_THRESHOLD: a value cheaper to free is freed at once
LAZYFREE_THRESHOLD = 64


def free_effort(value: object) -> int:
    """Redis's lazyfreeGetFreeEffort: the allocations freeing the value takes (1 for a
    value in one allocation: a string, a listpack, an intset)."""
    if isinstance(value, ListValue):
        return 1 if value.listpack else len(value.nodes)
    if isinstance(value, (SetValue, ZSetValue)):
        return len(value) if value.encoding_name() in (b"hashtable", b"skiplist") else 1
    if isinstance(value, Hash):
        return 1 if value.listpack else len(value)
    if isinstance(value, Stream):
        # the radix tree's nodes (Redis 7.0's XINFO shows 6 for 2 listpacks, 27 for 20, 116
        # for 80, 262 for 200), and each group with the first group's PEL for all of them
        effort = len(value.nodes) * 4 // 3 + 4
        if value.groups:
            first = next(iter(value.groups.values()))
            effort += len(value.groups) * (1 + len(first.pel))
        return effort
    return 1


def freed_lazily(value: object) -> bool:
    return free_effort(value) > LAZYFREE_THRESHOLD
