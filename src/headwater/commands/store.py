"""The stream store: one set of stream and consumer-group operations, two implementations.

The handlers (``streams.py``, ``groups.py``, ``idmp.py``, ``xinfo.py``) are the only stream
and group command family. Each parses its arguments, makes Redis's checks in Redis's order
(looking streams and groups up through the store), then calls one operation of
``c.server.streams`` and returns what it returns: the reply, with the ``Change`` when data
changed (``Written``). Two stores implement the operations:

- ``plain_store.PlainStreams``: a server without ``region-id`` (``stream.Stream`` values);
- ``region_store.RegionStreams``: an active-active region (``activeactive.rstream``
  records; seed 004's rules: strict per-region IDs, OR-delete, delete-wins, the XACK prefix).

A store's handles (``S``, a stream; ``G``, one of its groups) are opaque to the handlers: they
get them from ``stream``/``find_group``/``group`` and hand them back.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Generic, TypeVar

if TYPE_CHECKING:
    from headwater.commands.context import Block, Client
    from headwater.commands.groups import XClaimOpts, XNackOpts, XPendingOpts
    from headwater.commands.streams import TrimOpts, XAddOpts, XReadOpts
    from headwater.keyspace import Database
    from headwater.ops.change import Change, Written
    from headwater.resp.types import Reply
    from headwater.stream.ids import StreamID

S = TypeVar("S")
G = TypeVar("G")


class StreamStore(Generic[S, G]):
    """The operations; every one is overridden by both stores."""

    # -- lookups (WRONGTYPE for a key of another type) --------------------------------------

    def stream(self, c: Client, key: bytes, read: bool = True) -> S | None:
        """The stream at key; ``read``: a read's lookup (counted in INFO's keyspace hits)."""
        raise NotImplementedError

    def group(self, stream: S, name: bytes) -> G | None:
        raise NotImplementedError

    def last_id(self, stream: S) -> StreamID:
        """What ``$`` stands for."""
        raise NotImplementedError

    # -- entries ----------------------------------------------------------------------------

    def add(self, c: Client, argv: list[bytes], opts: XAddOpts) -> Reply | Written:
        """XADD: the ID, or None (NOMKSTREAM on a missing key)."""
        raise NotImplementedError

    def range(
        self, c: Client, stream: S, start: StreamID, end: StreamID, count: int, reverse: bool
    ) -> Reply:
        raise NotImplementedError

    def length(self, stream: S) -> int:
        raise NotImplementedError

    def delete(self, c: Client, key: bytes, stream: S, ids: list[StreamID]) -> Reply | Written:
        """XDEL: how many were deleted."""
        raise NotImplementedError

    def delete_ex(
        self, c: Client, key: bytes, stream: S, ids: list[StreamID], ref: bytes
    ) -> Reply | Written:
        """XDELEX: a result per ID (1 deleted, -1 none, 2 still referenced)."""
        raise NotImplementedError

    def trim(self, c: Client, argv: list[bytes], stream: S, trim: TrimOpts) -> Reply | Written:
        """XTRIM: how many were removed."""
        raise NotImplementedError

    def set_id(
        self,
        c: Client,
        key: bytes,
        stream: S,
        last: StreamID,
        entries_added: int | None,
        max_deleted: StreamID | None,
    ) -> Reply | Written:
        raise NotImplementedError

    def read(self, c: Client, argv: list[bytes], opts: XReadOpts) -> Reply | Block:
        """XREAD, its options parsed."""
        raise NotImplementedError

    # -- IDMP -------------------------------------------------------------------------------

    def idmp_settings(self, c: Client, stream: S) -> tuple[int, int]:
        """(duration, maxsize) in force."""
        raise NotImplementedError

    def configure_idmp(
        self, c: Client, key: bytes, stream: S, duration: int | None, maxsize: int | None
    ) -> Reply | Written:
        """XCFGSET / XIDMP CFGSET: OK, a change only when a setting differs."""
        raise NotImplementedError

    def record_iid(self, c: Client, argv: list[bytes], stream: S, sid: StreamID) -> Reply | Written:
        """XIDMPRECORD key pid iid id."""
        raise NotImplementedError

    # -- groups -----------------------------------------------------------------------------

    def create_group(
        self,
        c: Client,
        argv: list[bytes],
        stream: S | None,
        last: StreamID,
        entries_read: int,
        mkstream: bool,
    ) -> Reply | Written:
        """XGROUP CREATE (the group is new; ``stream`` None: MKSTREAM makes it)."""
        raise NotImplementedError

    def set_group_id(
        self, c: Client, argv: list[bytes], stream: S, group: G, last: StreamID, entries_read: int
    ) -> Reply | Written:
        raise NotImplementedError

    def destroy_group(self, c: Client, argv: list[bytes], stream: S, group: G) -> Reply | Written:
        raise NotImplementedError

    def create_consumer(self, c: Client, argv: list[bytes], stream: S, group: G) -> Reply | Written:
        raise NotImplementedError

    def delete_consumer(self, c: Client, argv: list[bytes], stream: S, group: G) -> Reply | Written:
        raise NotImplementedError

    def read_group(
        self,
        c: Client,
        argv: list[bytes],
        opts: XReadOpts,
        targets: list[tuple[S, G, StreamID]],
    ) -> Reply | Block | Written:
        """XREADGROUP, every stream's group found and ID checked (``NEW_ONLY``: ``>``)."""
        raise NotImplementedError

    def ack(
        self, c: Client, key: bytes, stream: S, group: G, ids: list[StreamID]
    ) -> Reply | Written:
        raise NotImplementedError

    def ack_delete(
        self, c: Client, key: bytes, stream: S, group: G, ids: list[StreamID], ref: bytes
    ) -> Reply | Written:
        raise NotImplementedError

    def nack(
        self, c: Client, key: bytes, stream: S, group: G, ids: list[StreamID], opts: XNackOpts
    ) -> Reply | Written:
        raise NotImplementedError

    def pending(
        self, c: Client, key: bytes, stream: S, group: G, opts: XPendingOpts | None
    ) -> Reply | Written:
        raise NotImplementedError

    def claim(
        self,
        c: Client,
        argv: list[bytes],
        stream: S,
        group: G,
        ids: list[StreamID],
        opts: XClaimOpts,
    ) -> Reply | Written:
        raise NotImplementedError

    def autoclaim(
        self,
        c: Client,
        argv: list[bytes],
        stream: S,
        group: G,
        options: tuple[int, StreamID, int, bool],
    ) -> Reply | Written:
        """XAUTOCLAIM's (min-idle, start, count, justid)."""
        raise NotImplementedError

    def expire_idmp(self, dbs: list[Database], now_ms: int, duration_s: int) -> int:
        """The once-a-second cron (a primary only): iids older than their stream's duration
        (``duration_s``: the server's default) forgotten; how many."""
        raise NotImplementedError

    def reclaim_idle(self, db: Database, now_ms: int, idle_ms: int) -> list[Change]:
        """The cron's pass (``stream-consumer-idle-reclaim-ms``): idle consumers with nothing
        pending dropped from every group; a change per consumer."""
        raise NotImplementedError

    # -- XINFO ------------------------------------------------------------------------------

    def info_stream(self, c: Client, stream: S, full: bool, count: int) -> Reply:
        raise NotImplementedError

    def info_groups(self, c: Client, stream: S) -> Reply:
        raise NotImplementedError

    def info_consumers(self, c: Client, stream: S, group: G) -> Reply:
        raise NotImplementedError


def find_group(c: Client, key: bytes, name: bytes) -> tuple[Any, Any] | None:
    """The stream at key and its group (a read's lookup), None if either is missing."""
    store = c.server.streams
    stream = store.stream(c, key)
    if stream is None:
        return None
    group = store.group(stream, name)
    return None if group is None else (stream, group)
