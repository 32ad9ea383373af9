"""The stream: an ordered index of packed nodes plus the stream's counters.

Theory of operation
-------------------
``nodes`` holds the nodes in ID order and ``firsts`` their master (first) IDs, so finding the
node that may hold an ID is one ``bisect`` (O(log n)); appends go to the last node until it is
full by Redis's rule (``stream-node-max-entries`` / ``-bytes``, written once: ``node.room``),
then a new node starts.

XDEL tombstones entries in place (they keep occupying node slots, as in Redis) and frees a node
whose live entries reach zero. Trimming walks nodes from the head: whole nodes go while they may;
with ``~`` it stops at the first node that cannot go whole, exactly as Redis's ``streamTrim``.

Counters (STREAMS-REFERENCE §1.2): ``length`` live entries; ``last_id`` the last ID ever
generated (never decreases, except XSETID on an empty stream); ``first_id`` the first live entry
(0-0 if empty); ``max_deleted_id`` the highest ID removed by XDEL (not by trimming);
``entries_added`` all successful appends.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

from headwater.errors import require
from headwater.stream.idmp import IdmpState
from headwater.stream.ids import MIN_ID, StreamID, above
from headwater.stream.node import NATIVE_PACKER, Node, Packer, byte_limit, total_size

if TYPE_CHECKING:
    from headwater.stream.groups import Group

Entry = tuple[StreamID, list[bytes]]


class Stream:
    TYPE_NAME = b"stream"
    ENCODING = b"stream"

    __slots__ = (
        "entries_added",
        "first_id",
        "firsts",
        "groups",
        "idmp",
        "idmp_duration",
        "idmp_maxsize",
        "last_id",
        "last_trimmed",
        "length",
        "max_deleted_id",
        "nodes",
        "packer",
    )

    def __init__(self, packer: Packer | None = NATIVE_PACKER) -> None:
        """An empty stream whose nodes are packed by ``packer`` (the build's; None packs in
        Python, as the pure build does)."""
        self.packer = packer
        self.nodes: list[Node] = []
        self.firsts: list[StreamID] = []
        self.length = 0
        self.last_id: StreamID = MIN_ID
        #: the greatest ID the last ``trim`` removed (None: it removed nothing); a MINID
        #: trim's exact rewrite for replay is just past it
        self.last_trimmed: StreamID | None = None
        self.first_id: StreamID = MIN_ID
        self.max_deleted_id: StreamID = MIN_ID
        self.entries_added = 0
        self.groups: dict[bytes, Group] = {}
        self.idmp: IdmpState | None = None  # created by the first XADD IDMP/IDMPAUTO
        self.idmp_duration = 100  # seconds; copied from stream-idmp-duration at creation
        self.idmp_maxsize = 100  # iids per producer; from stream-idmp-maxsize

    def __len__(self) -> int:
        return self.length

    def copy(self) -> Stream:
        """An independent twin (Redis's streamDup, for COPY): the entries in nodes of their
        own, the counters, the consumer groups with their PELs and consumers, and the IDMP
        maps and settings."""
        twin = Stream(self.packer)
        twin.nodes = [node.copy() for node in self.nodes]
        twin.firsts = list(self.firsts)
        twin.length = self.length
        twin.last_id = self.last_id
        twin.last_trimmed = self.last_trimmed
        twin.first_id = self.first_id
        twin.max_deleted_id = self.max_deleted_id
        twin.entries_added = self.entries_added
        twin.groups = {name: group.copy() for name, group in self.groups.items()}
        twin.idmp = self.idmp.copy() if self.idmp is not None else None
        twin.idmp_duration = self.idmp_duration
        twin.idmp_maxsize = self.idmp_maxsize
        return twin

    # -- appending -------------------------------------------------------------------------

    def append(
        self,
        sid: StreamID,
        pairs: Sequence[bytes],
        max_bytes: int,
        max_entries: int,
        size: int | None = None,
    ) -> None:
        """Append an entry whose ID is above last_id (else ID_TOO_SMALL, nothing changed);
        ``size`` is the total length of pairs, if the caller already has it. It goes to the
        tail if the tail ``takes`` it, else to a new node (which takes any first entry)."""
        above(sid, self.last_id)
        if size is None:
            size = total_size(pairs)
        nodes = self.nodes
        tail = nodes[-1] if nodes else None
        if tail is None or not tail.takes(size, byte_limit(max_bytes), max_entries):
            tail = self._new_node(sid, pairs)
        tail.append(sid, pairs, self.packer)
        self.length += 1
        self.entries_added += 1
        self.last_id = sid
        if self.length == 1:
            self.first_id = sid

    def extend(
        self,
        entries: Sequence[tuple[StreamID, Sequence[bytes], int]],
        max_bytes: int,
        max_entries: int,
    ) -> None:
        """``append`` for each of ``(ID, pairs, total length of pairs)`` in turn, with the
        same nodes as a result (AOF replay), the IDs increasing past last_id (else
        ID_TOO_SMALL, nothing changed). The tail takes what it has room for
        (``Node.extend``), then a new node (which takes at least its first entry), and so
        on."""
        if not entries:
            return
        last = self.last_id
        for entry in entries:  # (all checked before any is appended: nothing half-done)
            last = above(entry[0], last)
        limit = byte_limit(max_bytes)
        was_empty = self.length == 0
        i, end = 0, len(entries)
        while True:
            if self.nodes:
                i = self.nodes[-1].extend(entries, i, limit, max_entries, self.packer)
            if i >= end:
                break
            sid, pairs, _ = entries[i]
            self._new_node(sid, pairs)
        self.length += len(entries)
        self.entries_added += len(entries)
        self.last_id = entries[-1][0]
        if was_empty:
            self.first_id = entries[0][0]

    def _new_node(self, sid: StreamID, pairs: Sequence[bytes]) -> Node:
        """Seal the tail (if any) and start an empty node for the entry ``sid``, ``pairs``
        (its master ID and field names)."""
        if self.nodes:
            self.nodes[-1].seal()
        tail = Node(sid, pairs[0::2])
        self.nodes.append(tail)
        self.firsts.append(sid)
        return tail

    # -- lookups ---------------------------------------------------------------------------

    def _node_for(self, sid: StreamID) -> int:
        """Index of the last node whose first ID is <= sid (0 if none)."""
        return max(bisect_right(self.firsts, sid) - 1, 0)

    def find(self, sid: StreamID) -> tuple[Node, int] | None:
        """The node and index of the entry with this ID, live or not."""
        if not self.nodes:
            return None
        node = self.nodes[self._node_for(sid)]
        i = node.index_of(sid)
        if i < len(node) and node.id_at(i) == sid:
            return node, i
        return None

    def get(self, sid: StreamID) -> list[bytes] | None:
        """The pairs of the live entry with this ID."""
        found = self.find(sid)
        if found is None or not found[0].is_live(found[1]):
            return None
        return found[0].pairs_at(found[1])

    def iter_ids(self, start: StreamID = MIN_ID, reverse: bool = False) -> Iterator[StreamID]:
        for node, i in self._walk(start, reverse):
            yield node.id_at(i)

    def _walk(self, edge: StreamID, reverse: bool) -> Iterator[tuple[Node, int]]:
        """Live entries from edge onward (forward: ID >= edge; reverse: ID <= edge)."""
        nodes = self.nodes
        if not nodes:
            return
        n = self._node_for(edge)
        if reverse:
            for k in range(n, -1, -1):
                node = nodes[k]
                stop = _upper_index(node, edge) if k == n else len(node)
                for i in node.live_indexes(0, stop, reverse=True):
                    yield node, i
        else:
            for k in range(n, len(nodes)):
                node = nodes[k]
                start = node.index_of(edge) if k == n else 0
                for i in node.live_indexes(start, len(node)):
                    yield node, i

    def spans(
        self, start: StreamID, end: StreamID, reverse: bool = False
    ) -> Iterator[tuple[Node, int, int]]:
        """``(node, lo, hi)``: the index ranges ``[lo, hi)`` of the entries (live or not) with
        start <= ID <= end, node by node in ascending order (descending with reverse). Readers
        skip tombstones themselves, so the hot loops stay in one function."""
        nodes = self.nodes
        if start > end or not nodes:
            return
        if reverse:
            k = self._node_for(end)
            hi = _upper_index(nodes[k], end)
            while k >= 0:
                node = nodes[k]
                lo = node.index_of(start)
                yield node, lo, hi
                if lo > 0:
                    return  # start lies inside this node
                k -= 1
                hi = len(nodes[k]) if k >= 0 else 0
        else:
            k = self._node_for(start)
            lo = nodes[k].index_of(start)
            while k < len(nodes):
                node = nodes[k]
                hi = _upper_index(node, end)
                yield node, lo, hi
                if hi < len(node):
                    return  # end lies inside this node
                k += 1
                lo = 0

    def range(
        self, start: StreamID, end: StreamID, count: int | None = None, reverse: bool = False
    ) -> list[Entry]:
        """Live entries with start <= ID <= end, ascending (or descending with reverse)."""
        out: list[Entry] = []
        limit = count if count is not None else -1
        if not limit:
            return out
        for node, lo, hi in self.spans(start, end, reverse):
            limit = node.collect(lo, hi, reverse, limit, out)
            if not limit:
                break
        return out

    def first_entry(self) -> Entry | None:
        entries = self.range(MIN_ID, (2**64 - 1, 2**64 - 1), 1)
        return entries[0] if entries else None

    def last_entry(self) -> Entry | None:
        entries = self.range(MIN_ID, (2**64 - 1, 2**64 - 1), 1, reverse=True)
        return entries[0] if entries else None

    def last_live_id(self) -> StreamID:
        """The ID of the last entry not deleted (0-0 if none). Empty nodes are freed, so the
        last node holds it."""
        if not self.nodes:
            return MIN_ID
        node = self.nodes[-1]
        i = len(node) - 1
        while not node.is_live(i):
            i -= 1
        return node.id_at(i)

    # -- deleting --------------------------------------------------------------------------

    def delete(self, sid: StreamID) -> bool:
        """XDEL one ID: tombstone it; free its node when nothing live is left."""
        found = self.find(sid)
        if found is None:
            return False
        node, i = found
        if not node.is_live(i) or not node.delete_at(i):
            return False
        self.length -= 1
        if node.count == 0:
            self._drop_node(self._node_for(node.master))
        self.max_deleted_id = max(self.max_deleted_id, sid)
        self._refresh_first_id()
        return True

    def _drop_node(self, k: int) -> None:
        del self.nodes[k]
        del self.firsts[k]

    def _refresh_first_id(self) -> None:
        first = next(self.iter_ids(), None)
        self.first_id = MIN_ID if first is None or self.length == 0 else first

    def trim(
        self,
        maxlen: int | None = None,
        minid: StreamID | None = None,
        approx: bool = False,
        limit: int = 0,
        keep: Callable[[StreamID], bool] | None = None,
        on_remove: Callable[[StreamID], None] | None = None,
    ) -> int:
        """Redis's streamTrim: returns the number of entries removed.

        With neither callback this is KEEPREF: whole nodes go while they may, and ``~`` stops
        at the first node that cannot go whole. ``keep`` (ACKED: entries a consumer group still
        needs) or ``on_remove`` (DELREF: drop the entry's PEL references) make the trim work
        entry by entry, even with ``~``."""
        self.last_trimmed = None
        if maxlen is None and minid is None:
            return 0  # no bound: nothing to trim
        if keep is not None or on_remove is not None:
            return self._trim_entries(maxlen, minid, limit, keep, on_remove)
        removed = 0
        while self.nodes:
            if maxlen is not None and self.length <= maxlen:
                break
            node = self.nodes[0]
            if limit and removed + node.count > limit:
                break
            if maxlen is not None:
                whole = self.length - node.count >= maxlen
            else:
                whole = minid is not None and node.last_id() < minid
            if whole:
                self._drop_node(0)
                self.length -= node.count
                removed += node.count
                self.last_trimmed = node.last_id()
                continue
            if not approx:
                removed += self._trim_inside(node, maxlen, minid)
            break
        self._refresh_first_id()
        return removed

    def _trim_entries(
        self,
        maxlen: int | None,
        minid: StreamID | None,
        limit: int,
        keep: Callable[[StreamID], bool] | None,
        on_remove: Callable[[StreamID], None] | None,
    ) -> int:
        removed = 0
        k = 0
        while k < len(self.nodes):
            node = self.nodes[k]
            if limit and removed + node.count > limit:
                break
            done = False
            for i in range(len(node)):
                sid = node.id_at(i)
                if (maxlen is not None and self.length <= maxlen) or (
                    minid is not None and sid >= minid
                ):
                    done = True
                    break
                if not node.is_live(i) or (keep is not None and keep(sid)):
                    continue
                node.delete_at(i)
                self.length -= 1
                removed += 1
                self.last_trimmed = sid
                if on_remove is not None:
                    on_remove(sid)
            if node.count == 0:
                self._drop_node(k)
            else:
                k += 1
            if done:
                break
        self._refresh_first_id()
        return removed

    def _trim_inside(self, node: Node, maxlen: int | None, minid: StreamID | None) -> int:
        removed = 0
        for i in range(len(node)):
            if maxlen is not None and self.length <= maxlen:
                break
            if minid is not None and node.id_at(i) >= minid:
                break
            if node.is_live(i):
                node.delete_at(i)
                self.length -= 1
                removed += 1
                self.last_trimmed = node.id_at(i)
        return removed

    def first_id_any(self) -> StreamID | None:
        """ID of the first entry of the first node, tombstoned or not (for trim rewrites)."""
        return self.nodes[0].id_at(0) if self.nodes else None

    # -- introspection ---------------------------------------------------------------------

    def check_invariants(self) -> None:
        require(len(self.nodes) == len(self.firsts), "nodes and index out of step")
        live = 0
        previous: StreamID | None = None
        for node, first in zip(self.nodes, self.firsts, strict=True):
            node.check_invariants()
            require(node.master == first, "index key differs from the node's master ID")
            if previous is not None:
                require(first > previous, "nodes overlap or are out of order")
            previous = node.last_id()
            live += node.count
        require(live == self.length, f"length {self.length} but {live} live entries")
        if previous is not None:
            require(previous <= self.last_id, "an entry above last_id")
        first_live = next(self.iter_ids(), None)
        require(self.first_id == (first_live or MIN_ID), "first_id is stale")
        require(self.entries_added >= self.length, "fewer entries added than live")


def _upper_index(node: Node, sid: StreamID) -> int:
    """Number of entries in node with ID <= sid."""
    if sid >= node.last_id():
        return len(node)
    i = node.index_of(sid)
    return i + 1 if i < len(node) and node.id_at(i) == sid else i
