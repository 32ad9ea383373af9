"""A list, laid out as Redis 7.2 lays it out (``quicklist.c``, ``t_list.c``).

Why this shape
--------------
A list of a million short members must cost about what Redis's costs (a quicklist of 8 KB
listpacks: ~18 bytes a 16-byte member), and must not give the cyclic GC a million objects to
walk. So no member is a Python object at rest. The list is a Python list of ``Node``\\ s, each
node one of Redis's listpacks in spirit::

    buf     bytearray   | member 0 | member 1 | member 2 | ... |   (members back to back)
    starts  array('i')  [ p0,        p1,        p2, ... ]       (where each member starts)
    base    int         the position of buf[0]

Positions are *virtual*: member ``i`` is ``buf[starts[i] - base : starts[i + 1] - base]`` (the
last one ends at the end of ``buf``). Pushing at the head writes in front of ``buf`` and moves
``base`` down, so no other start changes; popping the head moves ``base`` up (``del buf[:n]``
is O(1) in CPython). Both ends are O(1) amortized plus one memmove of the node (at most a few
KB, as Redis's ``lpPrepend``). Positions drift with traffic through one node (a queue that is
never empty); past ±2**30 the node renumbers its starts from 0 (once per GB of traffic).

``size`` is the node's listpack size in bytes exactly as Redis counts it (``lpBytes``: the
6-byte header, each entry with its encoding and backlen, integers as integers, the end byte),
because every rule below is written in terms of it.

Redis 7.2's rules, reproduced
-----------------------------
- Encoding: a list starts as one listpack (``listpack``). Before elements are added it turns
  into a quicklist when the listpack's bytes plus the new members' lengths, or its count plus
  theirs, exceed ``list-max-listpack-size`` (``listTypeTryConvertListpack``). After a removal a
  quicklist of one node turns back into a listpack when the node is within *half* the limits
  (``listTypeTryConvertQuicklist``, shrinking); a loaded list within the whole limits.
- Quicklist nodes (``fill``: the ``list-max-listpack-size`` the quicklist was made with,
  clamped to -5..32767): negative fill limits a node to 4/8/16/32/64 KB; a positive one to
  ``fill`` entries and 8 KB. A push goes into the end node when its size plus the member's
  length plus 8 stays within the limit (``_quicklistNodeAllowInsert``), else into a new node.
  LINSERT follows ``_quicklistInsert`` (the neighbour node, a new node, or a split of a full
  node followed by ``_quicklistMergeNodes``); LSET replaces in place; removals drop emptied
  nodes and never merge.
- Not reproduced: plain nodes (Redis 7.2 makes one only for an element of 1 GB or more, which
  ``proto-max-bulk-len`` refuses by default) and ``list-compress-depth`` (LZF compression of
  interior nodes: accepted by the configuration, not applied; it changes memory, not replies).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator

#: listpack sizes of the negative fills -1..-5 (``optimization_level``)
_SIZE_LIMITS = (4096, 8192, 16384, 32768, 65536)
#: a count-limited node's size cap (``SIZE_SAFETY_LIMIT``)
SAFETY_LIMIT = 8192
#: what ``_quicklistNodeAllowInsert`` adds to a member's length (``SIZE_ESTIMATE_OVERHEAD``)
_INSERT_OVERHEAD = 8
#: an empty listpack: the 6-byte header and the end byte
EMPTY_SIZE = 7
#: renumber a node's starts past this drift
_DRIFT = 1 << 30
_NO_LIMIT = 1 << 64
_DIGITS = frozenset(b"-0123456789")


class ListInvariantError(Exception):
    """A list broke one of its invariants (a bug, never bad input)."""


def clamp_fill(fill: int) -> int:
    """``quicklistSetFill``: the fill a quicklist keeps."""
    return max(-5, min(fill, 32767))


def node_limits(fill: int) -> tuple[int, int]:
    """``quicklistNodeLimit``: (size limit, count limit); ``_NO_LIMIT`` where none."""
    if fill >= 0:
        return _NO_LIMIT, fill if fill else 1
    return _SIZE_LIMITS[min(-fill - 1, 4)], _NO_LIMIT


def exceeds(fill: int, size: int, count: int) -> bool:
    """``quicklistNodeExceedsLimit``."""
    if fill < 0:
        return size > _SIZE_LIMITS[min(-fill - 1, 4)]
    if size > SAFETY_LIMIT:
        return True
    return count > (fill if fill else 1)


def _int_entry_size(value: int) -> int:
    if 0 <= value <= 127:
        return 2
    if -4096 <= value <= 4095:
        return 3
    if -32768 <= value <= 32767:
        return 4
    if -8388608 <= value <= 8388607:
        return 5
    if -(2**31) <= value < 2**31:
        return 6
    return 10


def entry_size(member: bytes) -> int:
    """The bytes ``member`` takes in a listpack (encoding, data, backlen), as ``lpAppend``
    stores it (strict decimal int64 text as an integer)."""
    n = len(member)
    if n < 64:
        if n and member[0] in _DIGITS and n <= 20:
            digits = member[1:] if member[0] == 45 else member
            if digits.isdigit() and digits.isascii() and (digits[0] != 48 or n == 1):
                value = int(member)
                if -(2**63) <= value < 2**63:
                    return _int_entry_size(value)
        return n + 2
    body = n + (2 if n < 4096 else 5)
    if body <= 127:
        return body + 1
    if body < 16383:
        return body + 2
    if body < 2097151:
        return body + 3
    if body < 268435455:
        return body + 4
    return body + 5


class Node:
    """One listpack's worth of members (module docstring)."""

    __slots__ = ("base", "buf", "size", "starts")

    def __init__(self) -> None:
        self.buf = bytearray()
        self.starts = array("i")
        self.base = 0
        self.size = EMPTY_SIZE

    @classmethod
    def of(cls, members: list[bytes]) -> Node:
        node = cls()
        # (the starts in a list, then one array: compiled, ``array.append`` is a method
        # call by name per member, ~700 instructions)
        starts = [0] * len(members)
        position = 0
        size = EMPTY_SIZE
        for i, member in enumerate(members):
            starts[i] = position
            position += len(member)
            size += entry_size(member)
        node.starts = array("i", starts)
        node.buf = bytearray(b"".join(members))
        node.size = size
        return node

    @classmethod
    def packed(cls, buf: bytes | memoryview, starts: bytes | memoryview, size: int) -> Node:
        """A node from its snapshot form: the members back to back, the starts (from 0) as
        native 4-byte integers, the listpack size."""
        node = cls()
        node.buf = bytearray(buf)
        node.starts.frombytes(starts)
        node.size = size
        return node

    @property
    def count(self) -> int:
        return len(self.starts)

    def _end(self, i: int) -> int:
        """Where member i ends in ``buf``."""
        starts = self.starts
        return starts[i + 1] - self.base if i + 1 < len(starts) else len(self.buf)

    def item(self, i: int) -> bytes:
        return bytes(self.buf[self.starts[i] - self.base : self._end(i)])

    def items(self, lo: int = 0, hi: int = -1) -> list[bytes]:
        """Members lo..hi-1 (hi -1: to the end)."""
        starts = self.starts
        n = len(starts)
        if hi < 0:
            hi = n
        if lo >= hi:
            return []
        base = self.base
        data = bytes(self.buf)
        bounds = [s - base for s in starts[lo:hi]]
        bounds.append(starts[hi] - base if hi < n else len(data))
        return [data[bounds[k] : bounds[k + 1]] for k in range(hi - lo)]

    def spans(self) -> tuple[bytes, list[int]]:
        """The node's bytes and the ``count + 1`` bounds of its members in them."""
        base = self.base
        data = bytes(self.buf)
        bounds = [s - base for s in self.starts]
        bounds.append(len(data))
        return data, bounds

    def normalized_starts(self) -> array[int]:
        """The starts counted from ``buf[0]`` (the snapshot form)."""
        base = self.base
        if base == 0:
            return self.starts
        return array("i", [s - base for s in self.starts])

    def compact(self) -> None:
        """Give back what the buffers over-allocated as they grew (~12%): for a node that
        stops growing, when a push opens a new node next to it."""
        self.buf = bytearray(self.buf)
        self.starts = array("i", self.starts)

    def _renumber(self) -> None:
        self.starts = self.normalized_starts()
        self.base = 0

    # -- the ends --------------------------------------------------------------------------

    def append(self, member: bytes, size: int) -> None:
        position = self.base + len(self.buf)
        if position > _DRIFT:
            self._renumber()
            position = len(self.buf)
        self.starts.append(position)
        self.buf += member
        self.size += size

    def prepend(self, member: bytes, size: int) -> None:
        base = self.base - len(member)
        if base < -_DRIFT:
            self._renumber()
            base = -len(member)
        self.buf[0:0] = member
        self.base = base
        self.starts.insert(0, base)
        self.size += size

    def pop_front(self) -> bytes:
        starts = self.starts
        n = (starts[1] if len(starts) > 1 else self.base + len(self.buf)) - self.base
        member = bytes(self.buf[:n])
        del self.buf[:n]
        self.base += n
        del starts[0]
        self.size -= entry_size(member)
        return member

    def pop_back(self) -> bytes:
        start = self.starts.pop() - self.base
        member = bytes(self.buf[start:])
        del self.buf[start:]
        self.size -= entry_size(member)
        return member

    # -- the middle ------------------------------------------------------------------------

    def insert(self, i: int, member: bytes, size: int) -> None:
        """Member becomes member i."""
        n = len(self.starts)
        if i == 0:
            self.prepend(member, size)
            return
        if i >= n:
            self.append(member, size)
            return
        at = self.starts[i]
        self.buf[at - self.base : at - self.base] = member
        grow = len(member)
        tail = self.starts[i:]
        self.starts[i:] = array("i", [at, *(s + grow for s in tail)])
        self.size += size

    def replace(self, i: int, member: bytes) -> None:
        old = self.item(i)
        start = self.starts[i] - self.base
        self.buf[start : start + len(old)] = member
        grow = len(member) - len(old)
        if grow and i + 1 < len(self.starts):
            self.starts[i + 1 :] = array("i", [s + grow for s in self.starts[i + 1 :]])
        self.size += entry_size(member) - entry_size(old)

    def delete(self, lo: int, hi: int) -> list[bytes]:
        """Remove members lo..hi-1; returns them."""
        gone = self.items(lo, hi)
        if not gone:
            return gone
        starts = self.starts
        cut_lo = starts[lo] - self.base
        cut_hi = self._end(hi - 1)
        shrink = cut_hi - cut_lo
        del self.buf[cut_lo:cut_hi]
        if lo == 0:
            self.base += shrink
            del starts[:hi]
        else:
            rest = [s - shrink for s in starts[hi:]]
            del starts[lo:]
            starts.extend(rest)
        self.size -= sum(entry_size(m) for m in gone)
        return gone

    def split(self, at: int) -> Node:
        """A new node with members ``at``.. ; this one keeps the ones before."""
        tail = Node.of(self.items(at))
        self.delete(at, len(self.starts))
        return tail

    def absorb(self, other: Node) -> None:
        """Append other's members (a merge: ``lpMerge``)."""
        data, bounds = other.spans()
        shift = self.base + len(self.buf)
        if shift > _DRIFT:
            self._renumber()
            shift = len(self.buf)
        self.starts.extend(array("i", [b + shift for b in bounds[:-1]]))
        self.buf += data
        self.size += other.size - EMPTY_SIZE

    def check(self) -> None:
        starts = self.starts
        if not starts:
            return
        if starts[0] != self.base:
            raise ListInvariantError("a node's first start is not its base")
        end = self.base + len(self.buf)
        previous = self.base
        for s in starts:
            if s < previous or s > end:
                raise ListInvariantError("a node's starts are out of order")
            previous = s
        size = EMPTY_SIZE + sum(entry_size(m) for m in self.items())
        if size != self.size:
            raise ListInvariantError(f"node size {self.size}, its members take {size}")


class ListValue:
    """A list: its nodes, its length, its encoding (module docstring)."""

    TYPE_NAME = b"list"
    __slots__ = ("count", "fill", "listpack", "nodes")

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.count = 0
        self.listpack = True
        #: the quicklist's fill (meaningful once a quicklist)
        self.fill = -2

    def __len__(self) -> int:
        return self.count

    def encoding_name(self) -> bytes:
        return b"listpack" if self.listpack else b"quicklist"

    # -- encoding --------------------------------------------------------------------------

    def prepare(self, add_bytes: int, add_count: int, fill: int) -> None:
        """Before adding members of ``add_bytes`` bytes in all (listTypeTryConversionAppend,
        ``fill`` the configured ``list-max-listpack-size``)."""
        if not self.listpack:
            return
        size = self.nodes[0].size if self.nodes else EMPTY_SIZE
        if exceeds(fill, size + add_bytes, self.count + add_count):
            self.listpack = False
            self.fill = clamp_fill(fill)
            if self.nodes and not self.nodes[0].count:
                self.nodes.clear()

    def shrunk(self, fill: int, halve: bool = True) -> None:
        """After a removal (listTypeTryConversion SHRINKING; ``halve`` False: AUTO, after a
        load): one node within the limits (halved when shrinking) becomes a listpack."""
        if self.listpack or len(self.nodes) != 1:
            return
        size_limit, count_limit = node_limits(fill)
        if halve:
            size_limit //= 2
            count_limit //= 2
        if self.nodes[0].size <= size_limit and self.count <= count_limit:
            self.listpack = True

    @classmethod
    def quicklist(cls, fill: int) -> ListValue:
        """An empty quicklist (what Redis's loader fills before LIST_CONV_AUTO: ``shrunk``
        with ``halve`` False)."""
        lst = cls()
        lst.listpack = False
        lst.fill = clamp_fill(fill)
        return lst

    # -- the ends --------------------------------------------------------------------------

    def _allows(self, node: Node, length: int) -> bool:
        return not exceeds(self.fill, node.size + length + _INSERT_OVERHEAD, len(node.starts) + 1)

    def push(self, member: bytes, head: bool) -> None:
        nodes = self.nodes
        size = entry_size(member)
        if self.listpack:
            if not nodes:
                nodes.append(Node())
            node = nodes[0]
        elif nodes and self._allows(nodes[0] if head else nodes[-1], len(member)):
            node = nodes[0] if head else nodes[-1]
        else:
            if nodes:
                (nodes[0] if head else nodes[-1]).compact()
            node = Node()
            if head:
                nodes.insert(0, node)
            else:
                nodes.append(node)
        if head:
            node.prepend(member, size)
        else:
            node.append(member, size)
        self.count += 1

    def pop(self, head: bool) -> bytes:
        """Remove and return the first (head) or last member; the list must not be empty."""
        nodes = self.nodes
        node = nodes[0] if head else nodes[-1]
        member = node.pop_front() if head else node.pop_back()
        if not node.starts:
            if head:
                del nodes[0]
            else:
                nodes.pop()
        self.count -= 1
        return member

    # -- positions -------------------------------------------------------------------------

    def locate(self, index: int) -> tuple[int, int]:
        """(node number, offset in it) of member ``index`` (0 <= index < count), walking from
        the nearer end."""
        nodes = self.nodes
        if index < self.count // 2:
            for k, node in enumerate(nodes):
                n = len(node.starts)
                if index < n:
                    return k, index
                index -= n
        else:
            index = self.count - 1 - index  # from the tail
            for k in range(len(nodes) - 1, -1, -1):
                n = len(nodes[k].starts)
                if index < n:
                    return k, n - 1 - index
                index -= n
        raise ListInvariantError("index past the end")

    def get(self, index: int) -> bytes | None:
        """LINDEX: negative from the tail; None out of range."""
        if index < 0:
            index += self.count
        if not 0 <= index < self.count:
            return None
        k, offset = self.locate(index)
        return self.nodes[k].item(offset)

    def range(self, start: int, stop: int) -> list[bytes]:
        """Members start..stop inclusive (already within 0..count-1)."""
        out: list[bytes] = []
        if start > stop:
            return out
        k, offset = self.locate(start)
        left = stop - start + 1
        nodes = self.nodes
        while left > 0:
            node = nodes[k]
            take = min(left, len(node.starts) - offset)
            out += node.items(offset, offset + take)
            left -= take
            k += 1
            offset = 0
        return out

    def spans(self, start: int, stop: int) -> Iterator[tuple[bytes, list[int]]]:
        """Members start..stop inclusive, node by node: (node bytes, bounds) with bounds cut
        to the members wanted (for replies encoded without a member object each)."""
        if start > stop:
            return
        k, offset = self.locate(start)
        left = stop - start + 1
        nodes = self.nodes
        while left > 0:
            data, bounds = nodes[k].spans()
            take = min(left, len(bounds) - 1 - offset)
            yield data, bounds[offset : offset + take + 1]
            left -= take
            k += 1
            offset = 0

    def __iter__(self) -> Iterator[bytes]:
        for node in self.nodes:
            yield from node.items()

    def reversed_items(self) -> Iterator[bytes]:
        for node in reversed(self.nodes):
            yield from reversed(node.items())

    def node_items(self) -> list[list[bytes]]:
        return [node.items() for node in self.nodes]

    # -- COPY and SORT (commands/sort.py, ops/generic.py) ----------------------------------

    #: SORT … BY nosort keeps a list's order
    SORT_ORDERED = True

    def sort_elements(self) -> list[bytes]:
        return list(self)

    def copy(self) -> ListValue:
        """An independent twin, node for node (same encoding, same layout)."""
        twin = ListValue()
        twin.nodes = [
            Node.packed(memoryview(node.buf), node.starts.tobytes(), node.size)
            for node in self.nodes
        ]
        for node, original in zip(twin.nodes, self.nodes, strict=True):
            node.base = original.base
        twin.count, twin.listpack, twin.fill = self.count, self.listpack, self.fill
        return twin

    @classmethod
    def of(cls, members: list[bytes], fill: int) -> ListValue:
        """A list of these members, as Redis builds one and then converts it (SORT … STORE:
        a quicklist pushed at the tail, then listTypeTryConversion AUTO)."""
        lst = cls.quicklist(fill)
        for member in members:
            lst.push(member, False)
        lst.shrunk(fill, halve=False)
        return lst

    # -- the middle ------------------------------------------------------------------------

    def set(self, index: int, member: bytes) -> bool:
        """LSET (index already made non-negative); False out of range."""
        if not 0 <= index < self.count:
            return False
        k, offset = self.locate(index)
        self.nodes[k].replace(offset, member)
        return True

    def insert(self, index: int, member: bytes, after: bool) -> None:
        """LINSERT next to member ``index`` (_quicklistInsert in a quicklist)."""
        k, offset = self.locate(index)
        nodes = self.nodes
        node = nodes[k]
        size = entry_size(member)
        self.count += 1
        if self.listpack:
            node.insert(offset + after, member, size)
            return
        length = len(member)
        full = not self._allows(node, length)
        if not full:
            node.insert(offset + after, member, size)
            return
        at_tail = after and offset == len(node.starts) - 1
        at_head = not after and offset == 0
        if at_tail and k + 1 < len(nodes) and self._allows(nodes[k + 1], length):
            nodes[k + 1].prepend(member, size)
        elif at_head and k > 0 and self._allows(nodes[k - 1], length):
            nodes[k - 1].append(member, size)
        elif at_tail or at_head:
            fresh = Node()
            fresh.append(member, size)
            nodes.insert(k + 1 if after else k, fresh)
        else:  # split the full node at the pivot, the new member on the new side
            if after:
                fresh = node.split(offset + 1)
                fresh.prepend(member, size)
                nodes.insert(k + 1, fresh)
            else:
                head = node.split(offset)
                head, node = node, head  # (the new node holds the members before the pivot)
                nodes[k] = node
                head.append(member, size)
                nodes.insert(k, head)
                k += 1
            self._merge_around(k)

    def _can_merge(self, a: Node, b: Node) -> bool:
        return not exceeds(self.fill, a.size + b.size - EMPTY_SIZE, len(a.starts) + len(b.starts))

    def _merge(self, k: int) -> None:
        """Nodes k and k+1 become one (at k)."""
        self.nodes[k].absorb(self.nodes[k + 1])
        del self.nodes[k + 1]

    def _merge_around(self, c: int) -> None:
        """_quicklistMergeNodes around node c."""
        nodes = self.nodes
        if c >= 2 and self._can_merge(nodes[c - 1], nodes[c - 2]):
            self._merge(c - 2)
            c -= 1
        if c + 2 < len(nodes) and self._can_merge(nodes[c + 1], nodes[c + 2]):
            self._merge(c + 1)
        if c >= 1 and self._can_merge(nodes[c], nodes[c - 1]):
            self._merge(c - 1)
            c -= 1
        if c + 1 < len(nodes) and self._can_merge(nodes[c], nodes[c + 1]):
            self._merge(c)

    def delete_range(self, start: int, count: int) -> None:
        """Remove ``count`` members from ``start`` (both within the list): quicklistDelRange,
        emptied nodes dropped."""
        if count <= 0:
            return
        k, offset = self.locate(start)
        nodes = self.nodes
        left = count
        while left > 0:
            node = nodes[k]
            n = len(node.starts)
            take = min(left, n - offset)
            if take == n:
                del nodes[k]
            else:
                node.delete(offset, offset + take)
                k += 1
            left -= take
            offset = 0
        self.count -= count

    def remove(self, member: bytes, limit: int, from_tail: bool) -> int:
        """LREM: remove up to ``limit`` members equal to member (0: all), scanning from the
        head or the tail; returns how many."""
        removed = 0
        nodes = self.nodes
        order = range(len(nodes) - 1, -1, -1) if from_tail else range(len(nodes))
        emptied: list[int] = []
        for k in order:
            node = nodes[k]
            items = node.items()
            if member not in items:
                continue
            hits = [i for i, m in enumerate(items) if m == member]
            if from_tail:
                hits.reverse()
            if limit:
                hits = hits[: limit - removed]
            for i in sorted(hits, reverse=True):
                node.delete(i, i + 1)
            removed += len(hits)
            if not node.starts:
                emptied.append(k)
            if limit and removed >= limit:
                break
        for k in sorted(emptied, reverse=True):
            del nodes[k]
        self.count -= removed
        return removed

    def positions(self, member: bytes, rank: int, count: int, maxlen: int) -> list[int]:
        """LPOS: indexes of the matches from the ``rank``-th (negative: from the tail), at most
        ``count`` of them (0: all), scanning at most ``maxlen`` members (0: all)."""
        out: list[int] = []
        from_tail = rank < 0
        skip = (-rank if from_tail else rank) - 1
        scanned = 0
        total = self.count
        nodes = reversed(self.nodes) if from_tail else iter(self.nodes)
        position = total if from_tail else 0
        for node in nodes:
            items = node.items()
            n = len(items)
            if from_tail:
                position -= n
            if member in items:
                indexes = range(n - 1, -1, -1) if from_tail else range(n)
                for i in indexes:
                    index = position + i
                    seen = (total - 1 - index) if from_tail else index
                    if maxlen and seen >= maxlen:
                        return out
                    if items[i] == member:
                        if skip:
                            skip -= 1
                        else:
                            out.append(index)
                            if count and len(out) >= count:
                                return out
            scanned += n
            if maxlen and scanned >= maxlen:
                return out
            if not from_tail:
                position += n
        return out

    # -- checks ----------------------------------------------------------------------------

    def check_invariants(self) -> None:
        counted = 0
        for node in self.nodes:
            node.check()
            if not node.starts and not self.listpack:
                raise ListInvariantError("an empty quicklist node")
            counted += len(node.starts)
        if counted != self.count:
            raise ListInvariantError(f"count {self.count}, nodes hold {counted}")
        if self.listpack and len(self.nodes) > 1:
            raise ListInvariantError(f"a listpack of {len(self.nodes)} nodes")
        if not self.listpack and self.fill != clamp_fill(self.fill):
            raise ListInvariantError(f"fill {self.fill} out of range")
