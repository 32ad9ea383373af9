"""A stream node: up to ``stream-node-max-entries`` entries packed into a few flat buffers.

Why this shape
--------------
A Python object per entry costs ~234 bytes and makes every full GC walk a million objects.
A node instead holds its entries in five objects, whatever their number::

    ms      array('Q')   entry ID milliseconds          8 B/entry
    seq     array('Q')   entry ID sequence numbers      8 B/entry (sealed: 1 B usually)
    offsets array('I')   where each entry starts in blob  4 B/entry (sealed: 2 B usually)
    blob    bytearray    the entries' fields and values, packed
    tomb    bytearray    1 = deleted (XDEL marks in place); None until the first deletion

A sealed node (one the stream will not append to again) keeps ``seq`` and ``offsets`` in the
narrowest array type their largest value fits (sequence numbers within one millisecond are
small; a node's blob is a few KB): 9 of ~55 bytes an entry of a bulk-loaded stream. Reads
index them as any array; whatever hands them to C or to a file takes ``wide_columns``, and an
append to a narrowed node (a stream trimmed back to it) widens it first.

Entry layout in ``blob`` (little-endian u32 lengths)::

    +------+---------------------------------------+
    | 0x00 | len v1 | v1 | ... | len vN | vN        |   same field names as the master entry
    +------+---------------------------------------+
    | 0x01 | N | len f1 | f1 | len v1 | v1 | ...   |   its own field names
    +------+---------------------------------------+

The master entry is the field list of the node's first entry (as in Redis), so a stream whose
entries share their field names stores each name once per node.

Lazy nodes
----------
A snapshot is loaded without copying entries (``restore_many(..., lazy=True)``): a node then
holds only its counters and where its columns lie in the file's bytes (``_lazy``: slices of the
process's private copy of the file, never of a mapping of it), and its five buffers are shared
empty placeholders. Every method that reads or writes a buffer first checks ``_lazy`` and
copies the node's share into buffers of its own once (``_materialize``); code outside this
class calls ``materialize()`` before it reads the buffers. (No ``__getattr__`` on unset slots:
the class is compiled by mypyc, whose attribute reads bypass it.) The server materialises the
rest a little at a time from its cron, so the copy of the file is freed soon after startup
(``persistence/snapshot.materialize_some``).

Listpack accounting
-------------------
Redis starts a new node when the tail's listpack would reach ``stream-node-max-bytes`` or holds
``stream-node-max-entries`` entries (live + deleted). Trimming with ``~`` only drops whole nodes,
so to trim exactly as Redis does we keep ``lp_bytes``: the size Redis's listpack for this node
would have, computed with listpack's encoding rules (STREAMS-REFERENCE §1.4). The rule itself
is written once, in ``room``: the C packer (``_pack.c``) is handed the budget it computes and
only counts against it.
"""

from __future__ import annotations

import importlib
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import Final, Protocol, TypeAlias, cast

from headwater.errors import require
from headwater.stream.ids import StreamID

_U32 = struct.Struct("<I")
_SAME_FIELDS = 0
_OWN_FIELDS = 1
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


# ---------------------------------------------------------------------------------------------
# Listpack element sizes


#: the largest entry a stream takes (fields and values together): Redis's limit of a
#: listpack element, checked before any ID is taken
ENTRY_MAX: Final = 1 << 30


def entry_fits(size: int) -> bool:
    """Whether an entry of this ``total_size`` may be added (XADD, plain or region, and the
    replay's runs; XADD answers TOO_LARGE otherwise)."""
    return 0 <= size <= ENTRY_MAX


def total_size(parts: Sequence[bytes]) -> int:
    """The bytes of an entry's fields and values together (a loop: compiled, ``sum(map(len,
    …))`` reads three builtins by name and calls through them on every XADD)."""
    size = 0
    # (compiled, a list or a tuple is walked by index: the generic loop made an iterator
    # object each time; an active-active region's entries come as tuples)
    if isinstance(parts, list):
        for part in parts:
            size += len(part)
    elif isinstance(parts, tuple):
        for each in parts:
            size += len(each)
    else:
        for item in parts:
            size += len(item)
    return size


def _lp_int_payload(value: int) -> int:
    if 0 <= value <= 127:
        return 1
    if -4096 <= value <= 4095:
        return 2
    if -32768 <= value <= 32767:
        return 3
    if -8388608 <= value <= 8388607:
        return 4
    if -(2**31) <= value < 2**31:
        return 5
    return 9


def _lp_backlen(size: int) -> int:
    if size <= 127:
        return 1
    if size < 16383:
        return 2
    if size < 2097151:
        return 3
    if size < 268435455:
        return 4
    return 5


def lp_int(value: int) -> int:
    """Bytes of an integer element (encoding + backlen)."""
    if 0 <= value <= 127:
        return 2
    payload = _lp_int_payload(value)
    return payload + _lp_backlen(payload)


def _as_int64(raw: bytes) -> int | None:
    """listpack's lpStringToInt64: strict decimal, no leading zeros or '+', fits int64."""
    n = len(raw)
    if n == 0 or n > 20:
        return None
    digits = raw[1:] if raw[0] == 45 else raw
    if not digits.isdigit() or (digits[0] == 48 and n > 1):
        return None
    value = int(raw)
    return value if INT64_MIN <= value <= INT64_MAX else None


def lp_str(raw: bytes) -> int:
    """Bytes of a string element; strings that look like integers are stored as integers."""
    n = len(raw)
    if n <= 20 and raw[:1] in _INT_START and (as_int := _as_int64(raw)) is not None:
        return lp_int(as_int)
    payload = 1 + n if n < 64 else 2 + n if n < 4096 else 5 + n
    return payload + _lp_backlen(payload)


_INT_START = frozenset(b"-0123456789"[i : i + 1] for i in range(11))


def _value_lp(value: bytes) -> int:
    """``lp_str(value)``, by table for the strings that cannot be integers (most values)."""
    n = len(value)
    if (0 < n <= 20 and (value.isdigit() or value[0] == 45)) or n >= _STRING_LP_MAX:
        return lp_str(value)  # it may be stored as an integer
    size: int = _STRING_LP[n]
    return size


def _delta_lp(delta: int) -> int:
    """Bytes of an ID delta element: C's uint64 difference stored into an int64."""
    if 0 <= delta <= 127:
        return 2
    return lp_int(delta if INT64_MIN <= delta <= INT64_MAX else _wrap64(delta))


def _wrap64(value: int) -> int:
    """C's uint64 difference stored into an int64."""
    value &= 2**64 - 1
    return value - 2**64 if value > INT64_MAX else value


#: arrays are kept in native byte order; snapshots are little-endian
_SWAP = sys.byteorder == "big"
#: a lazy node's source: the chunk's columns (ms, seq, offsets, blob, tomb bytes) and the
#: node's entries [e0, e1), blob bytes [b0, b1) and tomb bytes [t0, t1) in them
LazySource = tuple[tuple[memoryview, ...], int, int, int, int, int, int]

#: bytes of a node's column, as ``snapshot_columns`` gives them
Buffer: TypeAlias = "memoryview | array[int] | bytearray"
#: the values at which an integer element's encoded size grows
_LP_INT_STEPS = frozenset((128, 4096, 32768, 8388608, 2**31))
#: listpack header (total bytes u32 + element count u16) and end marker
LP_OVERHEAD = 7
#: lp_str of a string of n bytes that cannot be an integer, for n < _STRING_LP_MAX
_STRING_LP_MAX = 4096
_STRING_LP = [*range(2, 66), *range(67, 129), *range(130, _STRING_LP_MAX + 4)]


def _pack_values(blob: bytearray, pairs: Sequence[bytes]) -> int:
    """Append the values of pairs to blob as ``append`` does; returns their listpack bytes."""
    lp = 0
    for k in range(1, len(pairs), 2):
        value = pairs[k]
        blob += _U32.pack(len(value)) + value
        lp += _value_lp(value)
    return lp


# ---------------------------------------------------------------------------------------------
# When a node is full: Redis's rule, written here and nowhere else

#: Redis's STREAM_LISTPACK_MAX_SIZE: the byte cap when stream-node-max-bytes is 0 (or more)
LISTPACK_MAX_SIZE: Final = 1 << 30
#: the entry budget when stream-node-max-entries is 0: more entries than a node of
#: ``LISTPACK_MAX_SIZE`` bytes can hold (a small int: unboxed, and Final: inlined, when
#: compiled)
NO_ENTRY_BOUND: Final = 1 << 60


def byte_limit(max_bytes: int) -> int:
    """The listpack size a node stays under, from stream-node-max-bytes (0, or more than
    Redis's cap, means the cap)."""
    return max_bytes if 0 < max_bytes <= LISTPACK_MAX_SIZE else LISTPACK_MAX_SIZE


def room(held: int, lp_bytes: int, limit: int, max_entries: int) -> tuple[int, int, int]:
    """What a node holding ``held`` entries (live and deleted) in ``lp_bytes`` listpack bytes
    may still take: ``(free, bytes_left, entries_left)``, a budget read by ``fits``.

    Redis's streamAppendItem starts a new node when the tail's listpack bytes plus the new
    entry's raw size (its fields' and values' lengths) reach stream-node-max-bytes, or when
    the tail holds stream-node-max-entries entries (0: no bound); it checks only a node that
    exists, so a new node takes its first entry whatever its size (``free``). This is the one
    place the rule is written: ``Node.takes``, ``Node.extend``'s loop and ``_pack.c`` (which
    only counts against the budget) all read it."""
    free = 0 if held else 1
    entries_left = max_entries - held if max_entries else NO_ENTRY_BOUND
    return free, limit - 1 - lp_bytes, entries_left


def fits(free: int, bytes_left: int, entries_left: int, spent: int, taken: int, size: int) -> bool:
    """An entry of raw size ``size`` fits in a ``room`` budget of which ``taken`` entries and
    ``spent`` listpack bytes are used: one of the first ``free`` whatever its size, else while
    the entries and the bytes last (``_pack.pack_run`` counts in the same terms)."""
    return taken < free or (taken < entries_left and spent + size <= bytes_left)


class _PackRun(Protocol):
    """``_pack.pack_run`` (its module docstring)."""

    def __call__(
        self, blob: bytearray, entries: list[tuple[StreamID, Sequence[bytes], int]], start: int,
        free: int, bytes_left: int, entries_left: int, master_ms: int, master_seq: int,
        field_list: list[bytes], count: int, /,
    ) -> tuple[int, int, bytes, bytes, bytes]: ...  # fmt: skip


class _AppendOne(Protocol):
    """``_pack.append_one`` (its module docstring)."""

    def __call__(
        self, blob: bytearray, ms: array[int], seq: array[int], offsets: array[int],
        sid: StreamID, pairs: Sequence[bytes], field_list: list[bytes], master_ms: int,
        master_seq: int, count: int, /,
    ) -> int: ...  # fmt: skip


class Packer:
    """The C functions that write entries into a node's buffers (``_pack.c``): they pack and
    measure the bytes, and take entries only within the budget ``room`` gives them. Where a
    node is given None instead, it packs in Python (the pure build; the tests run both on the
    same entries, ``tests/unit/test_stream_pack_equivalence.py``)."""

    __slots__ = ("append_one", "pack_run")

    def __init__(self, append_one: _AppendOne, pack_run: _PackRun) -> None:
        self.append_one = append_one
        self.pack_run = pack_run


def _native_pack() -> Packer | None:
    """The C packer (``_pack.c``), or None when it is not built (the pure build)."""
    try:
        module = importlib.import_module("headwater.stream._pack")
    except ImportError:
        return None
    return Packer(cast(_AppendOne, module.append_one), cast(_PackRun, module.pack_run))


#: the build's packer: what a stream packs its entries with unless told otherwise
NATIVE_PACKER: Final = _native_pack()


#: what a lazy node's buffers are until it is materialized (never written: every writer
#: materializes first, and ``check_invariants`` verifies they stayed empty)
_PLACEHOLDER_IDS = array("Q")
_PLACEHOLDER_OFFSETS = array("I")
_PLACEHOLDER_BLOB = bytearray()


def _narrowest(values: array[int], codes: str) -> array[int]:
    """``values`` in the first of the unsigned array ``codes`` that holds its largest value
    (``values`` itself when that is its own type)."""
    top = max(values) if values else 0
    for code in codes:
        if top >> (8 * _ITEMSIZE[code]) == 0:
            return values if values.typecode == code else array(code, values)
    return values


_ITEMSIZE: Final = {code: array(code).itemsize for code in "BHIQ"}


def master_lp_bytes(fields: Sequence[bytes]) -> int:
    """Listpack bytes of an empty node whose master entry has these fields (count, deleted,
    number of fields, the fields, the terminating 0)."""
    return LP_OVERHEAD + lp_int(0) * 2 + lp_int(len(fields)) + sum(map(lp_str, fields)) + lp_int(0)


class Node:
    __slots__ = (
        "_lazy",
        "blob",
        "count",
        "deleted",
        "field_list",
        "fields",
        "lp_bytes",
        "master",
        "ms",
        "offsets",
        "seq",
        "tomb",
    )

    def __init__(
        self,
        master: StreamID,
        fields: Sequence[bytes],
        field_list: list[bytes] | None = None,
        lp_bytes: int = -1,
        lazy: LazySource | None = None,
    ) -> None:
        """A new empty node, or (from a snapshot) one with its counters to be set and its
        buffers in ``lazy``; ``field_list`` may be shared by nodes with the same fields."""
        self._lazy = lazy
        self.master = master
        self.fields: tuple[bytes, ...] = tuple(fields)
        #: for one C-level comparison per append (only read)
        self.field_list: list[bytes] = list(fields) if field_list is None else field_list
        if lazy is None:
            self.ms = array("Q")
            self.seq = array("Q")
            self.offsets = array("I")
            self.blob = bytearray()
        else:
            self.ms = self.seq = _PLACEHOLDER_IDS
            self.offsets = _PLACEHOLDER_OFFSETS
            self.blob = _PLACEHOLDER_BLOB
        self.tomb: bytearray | None = None
        self.count = 0  # live entries
        self.deleted = 0  # tombstoned entries still in the node
        self.lp_bytes = master_lp_bytes(self.fields) if lp_bytes < 0 else lp_bytes

    def __len__(self) -> int:
        """Entries in the node, live and deleted."""
        lazy = self._lazy
        return len(self.ms) if lazy is None else lazy[2] - lazy[1]

    @property
    def is_lazy(self) -> bool:
        """Its buffers are still in the snapshot's bytes."""
        return self._lazy is not None

    @property
    def lazy_source(self) -> LazySource | None:
        """Where a lazy node's buffers lie in its snapshot's bytes (None once it has its own)."""
        return self._lazy

    def materialize(self) -> None:
        """Copy a lazy node's buffers from its snapshot now (nothing for other nodes)."""
        if self._lazy is not None:
            self._materialize(self._lazy)

    def snapshot_columns(self) -> tuple[Buffer, Buffer, Buffer, Buffer, Buffer | None]:
        """The node's ms, seq, offsets, blob and tomb bytes as a snapshot stores them
        (little-endian), without materializing a lazy node: a snapshot written right after a
        load (a full sync's child) copies them from the loaded bytes as they are."""
        lazy = self._lazy
        if lazy is not None:
            (ms_v, seq_v, off_v, blob_v, tomb_v), e0, e1, b0, b1, t0, t1 = lazy
            tomb_lazy = tomb_v[t0:t1] if t1 > t0 else None
            return (
                ms_v[e0 * 8 : e1 * 8],
                seq_v[e0 * 8 : e1 * 8],
                off_v[e0 * 4 : e1 * 4],
                blob_v[b0:b1],
                tomb_lazy,
            )
        ms, seq, offsets = self.wide_columns()
        if _SWAP:
            columns = [array(a.typecode, a) for a in (ms, seq, offsets)]
            for column in columns:
                column.byteswap()
            return columns[0], columns[1], columns[2], self.blob, self.tomb
        return ms, seq, offsets, self.blob, self.tomb

    def _materialize(self, source: LazySource) -> None:
        # All five are set at once: every write of a buffer in this class reads one first,
        # so a lazy node is never half materialized.
        (ms_v, seq_v, off_v, blob_v, tomb_v), e0, e1, b0, b1, t0, t1 = source
        self.ms = ms = array("Q")
        ms.frombytes(ms_v[e0 * 8 : e1 * 8])
        self.seq = seq = array("Q")
        seq.frombytes(seq_v[e0 * 8 : e1 * 8])
        self.offsets = offsets = array("I")
        offsets.frombytes(off_v[e0 * 4 : e1 * 4])
        if _SWAP:
            ms.byteswap()
            seq.byteswap()
            offsets.byteswap()
        # narrowed as ``seal`` does (the tail node too: its next append widens it back)
        self.seq = _narrowest(seq, "BHIQ")
        self.offsets = _narrowest(offsets, "HI")
        self.blob = bytearray(blob_v[b0:b1])
        self.tomb = bytearray(tomb_v[t0:t1]) if t1 > t0 else None
        self._lazy = None

    def copy(self) -> Node:
        """An independent twin with buffers of its own (COPY of a stream); the field names,
        which nothing writes, are shared."""
        if self._lazy is not None:
            self._materialize(self._lazy)
        twin = Node(self.master, self.fields, self.field_list, self.lp_bytes)
        twin.ms = array("Q", self.ms)
        twin.seq = array(self.seq.typecode, self.seq)
        twin.offsets = array(self.offsets.typecode, self.offsets)
        twin.blob = bytearray(self.blob)
        twin.tomb = bytearray(self.tomb) if self.tomb is not None else None
        twin.count = self.count
        twin.deleted = self.deleted
        return twin

    # -- writing ---------------------------------------------------------------------------

    def takes(self, size: int, limit: int, max_entries: int) -> bool:
        """The node has room for one more entry of raw size ``size`` (``room``'s rule)."""
        free, bytes_left, entries_left = room(len(self), self.lp_bytes, limit, max_entries)
        return fits(free, bytes_left, entries_left, 0, 0, size)

    def append(
        self, sid: StreamID, pairs: Sequence[bytes], packer: Packer | None = NATIVE_PACKER
    ) -> None:
        """Append an entry the caller placed here (``takes``); pairs is the flat field/value
        list. One with the node's field names by the packer where there is one (XADD's usual
        entry), any other in Python."""
        if self._lazy is not None:
            self._materialize(self._lazy)
        if self.seq.typecode != "Q" or self.offsets.typecode != "I":
            self._widen()
        if packer is not None:
            master_ms, master_seq = self.master
            lp = packer.append_one(
                self.blob, self.ms, self.seq, self.offsets, sid, pairs, self.field_list,
                master_ms, master_seq, self.count,
            )  # fmt: skip
            if lp >= 0:
                self.count += 1
                self.lp_bytes += lp
                return
        self._append_packed(sid, pairs)

    def _append_packed(self, sid: StreamID, pairs: Sequence[bytes]) -> None:
        """``append`` in Python (the pure build; entries with field names of their own)."""
        ms, seq = sid
        self.ms.append(ms)
        self.seq.append(seq)
        blob = self.blob
        self.offsets.append(len(blob))
        master_ms, master_seq = self.master
        # flags (2 bytes as an element) + ms and seq deltas, usually small non-negative ints
        lp = 2 + _delta_lp(ms - master_ms) + _delta_lp(seq - master_seq)
        field_list = self.field_list
        nfields = len(pairs) >> 1
        if nfields == 1 and len(field_list) == 1:  # the usual shape, compared without a copy
            same = pairs[0] == field_list[0]
        else:
            same = nfields == len(field_list) and list(pairs[0::2]) == field_list
        if same:
            blob.append(_SAME_FIELDS)
            if nfields == 1:
                value = pairs[1]
                blob += _U32.pack(len(value)) + value
                lp += _value_lp(value)
            else:
                lp += _pack_values(blob, pairs)
            lp += lp_int(nfields + 3)
        else:
            pack = _U32.pack
            blob.append(_OWN_FIELDS)
            blob += pack(nfields)
            for item in pairs:
                blob += pack(len(item)) + item
                lp += lp_str(item)
            lp += lp_int(nfields) + lp_int(2 * nfields + 4)
        count = self.count + 1
        if count in _LP_INT_STEPS:  # the master's count just needs a wider encoding
            lp += lp_int(count) - lp_int(count - 1)
        self.count = count
        self.lp_bytes += lp

    def extend(
        self, entries: Sequence[tuple[StreamID, Sequence[bytes], int]], start: int, limit: int,
        max_entries: int, packer: Packer | None = NATIVE_PACKER,
    ) -> int:  # fmt: skip
        """``append`` for ``entries[start:]`` (``(ID, pairs, total length of pairs)``, IDs
        increasing) while the node ``takes`` them; returns the index of the first entry not
        taken. The packer, where there is one, packs the runs of entries with the node's field
        names in one call each (a replica's link, AOF replay and a restart append millions),
        within the budget ``room`` gives it; the others go one by one."""
        if self._lazy is not None:
            self._materialize(self._lazy)
        if self.seq.typecode != "Q" or self.offsets.typecode != "I":
            self._widen()
        if packer is None or type(entries) is not list:
            return self._extend_loop(entries, start, limit, max_entries, packer)
        i, end = start, len(entries)
        master_ms, master_seq = self.master
        while i < end:
            free, bytes_left, entries_left = room(len(self.ms), self.lp_bytes, limit, max_entries)
            stop, spent, ms, seq, offsets = packer.pack_run(
                self.blob, entries, i, free, bytes_left, entries_left, master_ms, master_seq,
                self.field_list, self.count,
            )  # fmt: skip
            self.ms.frombytes(ms)
            self.seq.frombytes(seq)
            self.offsets.frombytes(offsets)
            self.count += stop - i
            self.lp_bytes += spent
            i = stop
            if i >= end:
                break
            # the run stopped at an entry the budget has no room for, or at one the packer
            # leaves to Python (field names of its own)
            sid, pairs, size = entries[i]
            if not self.takes(size, limit, max_entries):
                break
            self._append_packed(sid, pairs)
            i += 1
        return i

    def _extend_loop(
        self, entries: Sequence[tuple[StreamID, Sequence[bytes], int]], start: int, limit: int,
        max_entries: int, packer: Packer | None,
    ) -> int:  # fmt: skip
        """``extend`` in Python, the loop's lookups hoisted (the pure build, and entries not
        in a list)."""
        ms_append, seq_append, offsets_append = self.ms.append, self.seq.append, self.offsets.append
        blob = self.blob
        master_ms, master_seq = self.master
        field_list = self.field_list
        nfields = len(field_list)
        first_field = field_list[0] if nfields == 1 else None  # the usual shape, tested cheaper
        same_tail = lp_int(nfields + 3)
        pack = _U32.pack
        count, lp_bytes = self.count, self.lp_bytes
        free, bytes_left, entries_left = room(len(self.ms), lp_bytes, limit, max_entries)
        lp_start = lp_bytes
        i, end = start, len(entries)
        while i < end:
            sid, pairs, size = entries[i]
            if not fits(free, bytes_left, entries_left, lp_bytes - lp_start, i - start, size):
                break
            i += 1
            if (
                len(pairs) != 2 or pairs[0] != first_field
                if first_field is not None
                else len(pairs) != 2 * nfields or list(pairs[0::2]) != field_list
            ):
                self.count, self.lp_bytes = count, lp_bytes
                self.append(sid, pairs, packer)
                count, lp_bytes = self.count, self.lp_bytes
                continue
            ms, seq = sid
            ms_append(ms)
            seq_append(seq)
            offsets_append(len(blob))
            lp = 2 + _delta_lp(ms - master_ms) + _delta_lp(seq - master_seq)
            blob.append(_SAME_FIELDS)
            if first_field is None:
                lp += _pack_values(blob, pairs)
            else:
                value = pairs[1]
                blob += pack(len(value)) + value
                lp += _value_lp(value)
            lp += same_tail
            count += 1
            if count in _LP_INT_STEPS:  # the master's count just needs a wider encoding
                lp += lp_int(count) - lp_int(count - 1)
            lp_bytes += lp
        self.count, self.lp_bytes = count, lp_bytes
        return i

    def _set_counts(self, count: int, deleted: int) -> None:
        self.lp_bytes += lp_int(count) - lp_int(self.count) + lp_int(deleted) - lp_int(self.deleted)
        self.count = count
        self.deleted = deleted

    def delete_at(self, index: int) -> bool:
        """Tombstone entry index; False if it already was."""
        if self._lazy is not None:
            self._materialize(self._lazy)
        if self.tomb is None:
            self.tomb = bytearray(len(self.ms))
        elif len(self.tomb) < len(self.ms):
            self.tomb.extend(bytes(len(self.ms) - len(self.tomb)))
        if self.tomb[index]:
            return False
        self.tomb[index] = 1
        self._set_counts(self.count - 1, self.deleted + 1)
        return True

    def seal(self) -> None:
        """The node will not grow again: drop the buffers' spare capacity (arrays grow by
        an eighth and more at a time: ~2 B an entry of a 16-byte value's ~45)."""
        if self._lazy is not None:
            self._materialize(self._lazy)
        self.blob = bytearray(bytes(self.blob))
        self.ms = array("Q", self.ms)
        self.seq = _narrowest(self.seq, "BHIQ")
        self.offsets = _narrowest(self.offsets, "HI")

    def wide_columns(self) -> tuple[array[int], array[int], array[int]]:
        """``ms``, ``seq`` and ``offsets`` as 8-, 8- and 4-byte arrays (what C code and files
        read), narrowed ones copied."""
        if self._lazy is not None:
            self._materialize(self._lazy)
        seq, offsets = self.seq, self.offsets
        if seq.typecode != "Q":
            seq = array("Q", seq)
        if offsets.typecode != "I":
            offsets = array("I", offsets)
        return self.ms, seq, offsets

    def _widen(self) -> None:
        """Back to the types appends write (``seal`` narrowed them)."""
        _, self.seq, self.offsets = self.wide_columns()

    # -- reading ---------------------------------------------------------------------------

    def is_live(self, index: int) -> bool:
        if self._lazy is not None:
            self._materialize(self._lazy)
        tomb = self.tomb
        return tomb is None or index >= len(tomb) or not tomb[index]

    def id_at(self, index: int) -> StreamID:
        if self._lazy is not None:
            self._materialize(self._lazy)
        return (self.ms[index], self.seq[index])

    def last_id(self) -> StreamID:
        if self._lazy is not None:
            self._materialize(self._lazy)
        return (self.ms[-1], self.seq[-1])

    def index_of(self, sid: StreamID) -> int:
        """Index of the first entry with ID >= sid (len(self) if none)."""
        if self._lazy is not None:
            self._materialize(self._lazy)
        if sid <= self.master:
            return 0
        ms, seq = sid
        lo = bisect_left(self.ms, ms)
        hi = bisect_right(self.ms, ms, lo)
        return bisect_left(self.seq, seq, lo, hi) if lo < hi else lo

    def pairs_at(self, index: int) -> list[bytes]:
        """The flat field/value list of entry index."""
        if self._lazy is not None:
            self._materialize(self._lazy)
        blob = self.blob
        pos = self.offsets[index]
        unpack = _U32.unpack_from
        out: list[bytes] = []
        if blob[pos] == _SAME_FIELDS:
            pos += 1
            for field in self.fields:
                (n,) = unpack(blob, pos)
                pos += 4
                out.append(field)
                out.append(bytes(blob[pos : pos + n]))
                pos += n
            return out
        (count,) = unpack(blob, pos + 1)
        pos += 5
        for _ in range(2 * count):
            (n,) = unpack(blob, pos)
            pos += 4
            out.append(bytes(blob[pos : pos + n]))
            pos += n
        return out

    def collect(
        self, lo: int, hi: int, reverse: bool, limit: int, out: list[tuple[StreamID, list[bytes]]]
    ) -> int:
        """Append the live entries with index in [lo, hi) to out (in reverse order if asked),
        at most ``limit`` of them (-1: no limit). Returns the limit left. This is the hot loop
        of XRANGE/XREAD: one pass, no per-entry generator or method call."""
        if self._lazy is not None:
            self._materialize(self._lazy)
        ms, seq, offsets, blob, tomb = self.ms, self.seq, self.offsets, self.blob, self.tomb
        fields = self.fields
        unpack = _U32.unpack_from
        indexes = range(hi - 1, lo - 1, -1) if reverse else range(lo, hi)
        for i in indexes:
            if not limit:
                break
            if tomb is not None and i < len(tomb) and tomb[i]:
                continue
            pos = offsets[i]
            pairs: list[bytes] = []
            if blob[pos] == _SAME_FIELDS:
                pos += 1
                for field in fields:
                    (n,) = unpack(blob, pos)
                    pos += 4
                    pairs.append(field)
                    pairs.append(bytes(blob[pos : pos + n]))
                    pos += n
            else:
                pairs = self.pairs_at(i)
            out.append(((ms[i], seq[i]), pairs))
            limit -= 1
        return limit

    def live_indexes(self, start: int, stop: int, reverse: bool = False) -> Iterator[int]:
        if self._lazy is not None:
            self._materialize(self._lazy)
        indexes = range(stop - 1, start - 1, -1) if reverse else range(start, stop)
        tomb = self.tomb
        if tomb is None:
            yield from indexes
            return
        n = len(tomb)
        for i in indexes:
            if i >= n or not tomb[i]:
                yield i

    def entry_bytes(self) -> int:
        """Approximate memory held by the node's buffers (for INFO/MEMORY estimates)."""
        if self._lazy is not None:
            self._materialize(self._lazy)
        return (
            len(self.ms) * (8 + self.seq.itemsize + self.offsets.itemsize)
            + len(self.blob)
            + (len(self.tomb) if self.tomb else 0)
        )

    @classmethod
    def restore_many(
        cls,
        rows: Iterable[tuple[int, ...]],
        fieldsets: Sequence[tuple[tuple[bytes, ...], list[bytes]]],
        columns: tuple[memoryview, memoryview, memoryview, memoryview, memoryview],
        out: list[Node],
        firsts: list[StreamID],
        lazy: bool = False,
    ) -> tuple[int, int, int]:
        """Rebuild nodes from a snapshot (``persistence/snapshot.py``) without any per-entry
        work: each row is ``(master ms, master seq, fieldset, count, deleted, lp_bytes,
        entries, blob bytes, tomb bytes)`` and the columns hold the rows' ``ms``, ``seq``,
        ``offsets``, ``blob`` and ``tomb`` bytes back to back (little-endian). Each node's
        share is one C-level copy of each, or with ``lazy`` none until it is used (module
        doc). Nodes with the same master fields share their ``fields`` tuple and list
        (``append`` only reads them). Appends the nodes to ``out`` and their master IDs to
        ``firsts``; returns how much of the columns was used (entries, blob, tomb bytes)."""
        e0 = b0 = t0 = 0
        for master_ms, master_seq, fieldset, count, deleted, lp_bytes, n, blen, tlen in rows:
            master = (master_ms, master_seq)
            fields, field_list = fieldsets[fieldset]
            source = (columns, e0, e0 + n, b0, b0 + blen, t0, t0 + tlen)
            node = cls(master, fields, field_list, lp_bytes, source)
            node.count = count
            node.deleted = deleted
            if not lazy:
                node._materialize(source)
            e0 += n
            b0 += blen
            t0 += tlen
            out.append(node)
            firsts.append(master)
        return e0, b0, t0

    def check_invariants(self) -> None:
        require(
            not (_PLACEHOLDER_IDS or _PLACEHOLDER_OFFSETS or _PLACEHOLDER_BLOB),
            "a lazy node's placeholder buffer was written",
        )
        if self._lazy is not None:
            self._materialize(self._lazy)
        n = len(self.ms)
        require(n == len(self.seq) == len(self.offsets), "parallel arrays out of step")
        require(self.count + self.deleted == n, "live + deleted != entries")
        require(self.count >= 0, "negative live count")
        ids = list(zip(self.ms, self.seq, strict=True))
        require(ids == sorted(set(ids)), "IDs not strictly increasing")
        require(ids[0] == self.master, "master ID is not the first entry's")
        dead = sum(self.tomb) if self.tomb else 0
        require(dead == self.deleted, "tombstone count mismatch")
        offsets = list(self.offsets)
        require(offsets == sorted(offsets), "offsets not increasing")
        require(offsets[0] == 0, "first entry does not start the blob")
