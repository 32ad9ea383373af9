"""MEMORY USAGE: what Redis 7.2 would say a key costs, estimated from the value.

Method
------
Headwater's own memory per key (Python objects) is not what clients compare with; tools
that call MEMORY USAGE (redis-rdb-tools, RedisInsight, key-size scanners) expect Redis's
figures. So this computes Redis's own estimate (``objectComputeSize`` plus the key's ``sds``
and its ``dictEntry``) from the value's contents and encoding, with Redis's struct sizes and
jemalloc's size classes:

- an allocation of n bytes costs its jemalloc size class (8, 16, 32, 48 … by 16 to 128,
  then four classes per doubling), as ``zmalloc_size`` reports it;
- an ``sds`` of length n has a header of 1, 3, 5, 9 or 17 bytes by its length (+1 for the
  NUL); a string APPEND made has the greedy capacity (twice its length) APPEND gives it;
- strings: ``int`` 16 bytes (the robj), ``embstr`` one allocation of robj + sds, ``raw``
  robj + sds;
- listpacks (small hashes, sets, sorted sets) and intsets: their exact byte size as Redis's
  encoders would make it (``stream.node.lp_str``: integers as integers), in one allocation;
- hashtables (big hashes and sets) and skiplists: the dict (56 bytes) and its table (8 bytes
  a slot, a power of two ≥ the size, at least 4), plus the average cost of the first
  ``samples`` elements (sds, dictEntry, skiplist node: a node's expected size over Redis's
  random levels) times their number, as Redis samples the first ones it iterates;
- streams: the robj and stream structs, the radix tree by Redis's own recipe (16 bytes a key
  plus 244 a node, a node per listpack plus one), the listpacks (the sealed ones shrunk to
  fit, the tail at least its preallocation of ``min(stream-node-max-bytes, 4096)``, sampled
  as Redis samples them), and the groups' PELs, NACKs and consumers.

Small values come out exactly as Redis 7.2 reports them (``tests/differential`` compares
the ones whose encoding 7.0 shares); big hashtables are within a few percent (Redis's table
may be mid-rehash, and its sample is in hash order). Lists: a listpack's allocation, or the
quicklist (40 bytes) and its average node (32 bytes and its listpack) over the first
``samples`` nodes times their number. Any other type provides ``memory_usage(samples)`` (the
robj included) to be counted.
"""

from __future__ import annotations

import sys

from headwater.resp.encoder import format_double
from headwater.stream.node import lp_str
from headwater.stream.stream import Stream
from headwater.structures.lists import EMPTY_SIZE, ListValue
from headwater.structures.sets import INTSET, LISTPACK, SetValue
from headwater.structures.zsets import ZSetValue
from headwater.values import EMBSTR_MAX, Hash, RawString, string_encoding

ROBJ = 16  # sizeof(robj)
DICT_ENTRY = 24  # sizeof(dictEntry)
DICT = 56  # sizeof(dict)
LP_HEADER = 6  # total bytes (4) + element count (2)
INTSET_HEADER = 8  # encoding (4) + length (4)
STREAM = 80  # sizeof(stream)
STREAM_CG = 40  # sizeof(streamCG)
STREAM_NACK = 24  # sizeof(streamNACK)
STREAM_CONSUMER = 32  # sizeof(streamConsumer) (7.2: with active_time)
RAX_NODE = 4 + 8 * 30  # sizeof(raxNode) plus Redis's fixed overhead per node
STREAM_ID = 16
ZSET = 16  # sizeof(zset)
QUICKLIST = 40  # sizeof(quicklist)
QUICKLIST_NODE = 32  # sizeof(quicklistNode)
ZSKIPLIST = 32  # sizeof(zskiplist)
ZSKIPLIST_NODE = 24  # sizeof(zskiplistNode) without its levels
ZSKIPLIST_LEVEL = 16
ZSKIPLIST_MAXLEVEL = 32
LISTPACK_PREALLOC = 4096  # STREAM_LISTPACK_MAX_PRE_ALLOCATE
DEFAULT_SAMPLES = 5  # OBJ_COMPUTE_SIZE_DEF_SAMPLES


def malloc_size(n: int) -> int:
    """jemalloc's size class for an allocation of n bytes (what zmalloc_size reports)."""
    if n <= 8:
        return 8
    if n <= 128:
        return (n + 15) & ~15
    spacing = (1 << ((n - 1).bit_length() - 1)) // 4
    return (n + spacing - 1) // spacing * spacing


def _sds_header(capacity: int) -> int:
    if capacity < 1 << 5:
        return 1
    if capacity < 1 << 8:
        return 3
    if capacity < 1 << 16:
        return 5
    return 9 if capacity < 1 << 32 else 17


def sds_size(n: int) -> int:
    """The allocation of an sds made for exactly n bytes (sdsnewlen)."""
    header = _sds_header(n) if n else 3
    return malloc_size(header + n + 1)


def _greedy_sds_size(n: int) -> int:
    """The allocation of an sds grown by APPEND to n bytes (sdsMakeRoomFor's doubling)."""
    capacity = n * 2 if n < 1024 * 1024 else n + 1024 * 1024
    return malloc_size(max(_sds_header(capacity), 3) + capacity + 1)


def listpack_bytes(elements: list[bytes]) -> int:
    return LP_HEADER + sum(map(lp_str, elements)) + 1


def _slots(n: int) -> int:
    """A dict's table size holding n entries (at least 4, a power of two ≥ n)."""
    return max(4, 1 << (n - 1).bit_length()) if n > 0 else 4


def _sampled(costs: list[int], n: int) -> int:
    """Redis's average of the sampled elements' costs, times the element count."""
    return int(sum(costs) / len(costs) * n) if costs else 0


def _expected_node() -> float:
    """The expected allocation of a skiplist node over Redis's random levels (p = 1/4)."""
    total, p = 0.0, 0.75
    for level in range(1, ZSKIPLIST_MAXLEVEL + 1):
        chance = p * 0.25 ** (level - 1) if level < ZSKIPLIST_MAXLEVEL else 0.25 ** (level - 1)
        total += chance * malloc_size(ZSKIPLIST_NODE + ZSKIPLIST_LEVEL * level)
    return total


_NODE = _expected_node()
_HEADER_NODE = malloc_size(ZSKIPLIST_NODE + ZSKIPLIST_LEVEL * ZSKIPLIST_MAXLEVEL)


def _string(value: bytes) -> int:
    encoding = string_encoding(value)
    if encoding == b"int":
        return ROBJ
    if isinstance(value, RawString):
        return ROBJ + _greedy_sds_size(len(value))
    if encoding == b"embstr" and len(value) <= EMBSTR_MAX:
        return malloc_size(ROBJ + 3 + len(value) + 1)
    return ROBJ + sds_size(len(value))


def _hash(value: Hash, samples: int) -> int:
    if value.listpack:
        flat = [item for pair in value.items() for item in pair]
        return ROBJ + malloc_size(listpack_bytes(flat))
    costs: list[int] = []
    for field, item in value.items():
        if len(costs) >= samples:
            break
        costs.append(sds_size(len(field)) + sds_size(len(item)) + DICT_ENTRY)
    return ROBJ + DICT + 8 * _slots(len(value)) + _sampled(costs, len(value))


def _set(value: SetValue, samples: int) -> int:
    if value.encoding == INTSET:
        numbers = [int(m) for m in value.members]
        low, high = min(numbers, default=0), max(numbers, default=0)
        width = 8
        if low >= -(2**31) and high < 2**31:
            width = 2 if low >= -(2**15) and high < 2**15 else 4
        return ROBJ + malloc_size(INTSET_HEADER + width * len(numbers))
    if value.encoding == LISTPACK:
        return ROBJ + malloc_size(listpack_bytes(value.ordered()))
    costs: list[int] = []
    for member in value.members:
        if len(costs) >= samples:
            break
        costs.append(DICT_ENTRY + sds_size(len(member)))
    return ROBJ + DICT + 8 * _slots(len(value)) + _sampled(costs, len(value))


def _zset(value: ZSetValue, samples: int) -> int:
    if value.listpack:
        flat = [item for score, member in value for item in (member, format_double(score))]
        return ROBJ + malloc_size(listpack_bytes(flat))
    size = ROBJ + ZSET + ZSKIPLIST + DICT + 8 * _slots(len(value)) + _HEADER_NODE
    costs: list[int] = []
    for _, member in value:
        if len(costs) >= samples:
            break
        costs.append(int(sds_size(len(member)) + DICT_ENTRY + _NODE))
    return size + _sampled(costs, len(value))


def _list(value: ListValue, samples: int) -> int:
    """objectComputeSize of a list: a listpack's allocation, or the quicklist's struct and
    the average node (its struct and its listpack) of the first ``samples`` times their
    number."""
    if value.listpack:
        size = value.nodes[0].size if value.nodes else EMPTY_SIZE
        return ROBJ + malloc_size(size)
    nodes = value.nodes
    sampled = [QUICKLIST_NODE + malloc_size(node.size) for node in nodes[:samples]]
    return ROBJ + QUICKLIST + (sum(sampled) * len(nodes) // len(sampled) if sampled else 0)


def _rax(keys: int) -> int:
    """Redis's streamRadixTreeMemoryUsage for a tree of ``keys`` IDs (a node per key plus
    the head, for IDs that share most of their bytes)."""
    return keys * STREAM_ID + (keys + 1) * RAX_NODE


def _stream(value: Stream, samples: int, node_max_bytes: int) -> int:
    size = ROBJ + STREAM + _rax(len(value.nodes))
    prealloc = LISTPACK_PREALLOC
    if 0 < node_max_bytes < prealloc:
        prealloc = node_max_bytes
    nodes = value.nodes
    last = len(nodes) - 1

    def allocation(i: int) -> int:
        used = malloc_size(nodes[i].lp_bytes)
        return max(used, malloc_size(prealloc)) if i == last else used

    sampled = [allocation(i) for i in range(min(samples, len(nodes)))]
    if len(nodes) <= len(sampled):
        size += sum(sampled)
    elif sampled:
        size += sum(sampled) // len(sampled) * last + allocation(last)
    for group in value.groups.values():
        size += STREAM_CG + _rax(len(group.pel)) + STREAM_NACK * len(group.pel)
        for consumer in group.consumers.values():
            size += STREAM_CONSUMER + len(consumer.name) + _rax(len(consumer.pel))
    return size


def value_usage(value: object, samples: int, node_max_bytes: int = 4096) -> int:
    """Redis's objectComputeSize of a keyspace value (module doc); ``samples`` >= 1."""
    if isinstance(value, bytes):
        return _string(value)
    if isinstance(value, Hash):
        return _hash(value, samples)
    if isinstance(value, SetValue):
        return _set(value, samples)
    if isinstance(value, ZSetValue):
        return _zset(value, samples)
    if isinstance(value, Stream):
        return _stream(value, samples, node_max_bytes)
    if isinstance(value, ListValue):
        return _list(value, samples)
    measure = getattr(value, "memory_usage", None)  # (any other type may say its size)
    if measure is not None:
        size: int = measure(samples)
        return size
    return ROBJ + sys.getsizeof(value)  # (a type that measures nothing: its Python object)


def key_usage(key: bytes, value: object, samples: int, node_max_bytes: int = 4096) -> int:
    """MEMORY USAGE: the value, the key's sds and its dictEntry."""
    return value_usage(value, samples, node_max_bytes) + sds_size(len(key)) + DICT_ENTRY
