"""The keyspace: numbered databases mapping keys to typed values, with expiry.

Rules
-----
* Every write goes through a ``Database`` method or ends with ``signal_modified(key)``, so WATCH
  sees it (Redis: ``signalModifiedKey``).
* Time is ``Keyspace.now_ms``, set once per command by the engine (Redis caches ``mstime`` per
  command so a key cannot expire half-way through a MULTI/EXEC).
* A key whose deadline has passed is gone: lookups delete it lazily; ``active_expire`` deletes
  it from the cron. Each deletion by expiry is logged in ``Keyspace.expired`` so the engine can
  propagate a ``DEL`` (AOF and replicas must not rely on their own clocks).
* Hash fields expire too (Redis 7.4): the hash commands delete due fields when they touch a
  hash and the cron deletes them from ``Database.field_deadlines`` (a heap of each such
  hash's earliest deadline, maybe stale: the cron checks what is really there); each such
  deletion is logged in ``Keyspace.expired`` as ``(db, key, fields, emptied)``, which the
  engine propagates as ``HDEL``s.

Value types live in ``headwater.values`` (this module is compiled by mypyc; they subclass
builtins, which compiled classes cannot).
"""

from __future__ import annotations

import heapq
import random
import zlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from headwater.glob import compile_glob
from headwater.keyevents import NEW


class PersistedState(Protocol):
    """State beside the databases that snapshots carry (an active-active region's)."""

    def dump_state(self) -> bytes: ...
    def load_state(self, data: bytes) -> None: ...


class Watcher(Protocol):
    dirty_cas: bool


class WatchedKey:
    __slots__ = ("client", "db", "expired", "key")

    def __init__(self, client: Watcher, db: Database, key: bytes, expired: bool) -> None:
        self.client = client
        self.db = db
        self.key = key
        self.expired = expired  # the key was already logically expired when watched


class Database:
    def __init__(self, keyspace: Keyspace, index: int) -> None:
        self.keyspace = keyspace
        self.index = index
        self.data: dict[bytes, Any] = {}
        self.expires: dict[bytes, int] = {}
        self._deadlines: list[tuple[int, bytes]] = []  # heap; stale entries skipped lazily
        #: (earliest field deadline, key) of hashes with field TTLs: a heap, maybe stale
        self.field_deadlines: list[tuple[int, bytes]] = []
        self.watched: dict[bytes, list[WatchedKey]] = {}
        self.blocking: dict[bytes, Any] = {}  # key -> waiters, owned by the blocking registry
        #: keys of streams that may hold IDMP iids, for the expiry cron (may be stale)
        self.idmp_keys: set[bytes] = set()
        self.ready: list[bytes] = []  # keys with waiters that a write made ready

    # -- lookups -----------------------------------------------------------------------------

    def get(self, key: bytes) -> Any:
        """The live value at key, or None (deleting it first if it has expired)."""
        if self.expires and key in self.expires and self.is_expired(key):
            if not self.keyspace.replica:
                self._expire(key)
            return None
        return self.data.get(key)

    def exists(self, key: bytes) -> bool:
        return self.get(key) is not None

    def is_expired(self, key: bytes) -> bool:
        when = self.expires.get(key)
        return when is not None and when <= self.keyspace.now_ms and not self.keyspace.loading

    def ttl_ms(self, key: bytes) -> int | None:
        """Milliseconds left, or None without an expiry. The key must exist."""
        when = self.expires.get(key)
        return None if when is None else max(when - self.keyspace.now_ms, 0)

    def __len__(self) -> int:
        return len(self.data)

    # -- writes ------------------------------------------------------------------------------

    def set(self, key: bytes, value: Any, keep_ttl: bool = False) -> None:
        """Store value at key (overwriting, and clearing the TTL unless keep_ttl)."""
        if self.keyspace.notify_flags & NEW:
            self._announce_if_new(key)
        self.data[key] = value
        if not keep_ttl and self.expires:
            self.expires.pop(key, None)
        if self.watched:
            self.signal_modified(key)
        if self.blocking:
            self.signal_ready(key)  # a type change: blocked XREADGROUP clients get WRONGTYPE

    def delete(self, key: bytes) -> bool:
        if self.get(key) is None:
            return False
        self._remove(key)
        self.signal_modified(key)
        return True

    def set_expire(self, key: bytes, when_ms: int) -> None:
        self.expires[key] = when_ms
        heapq.heappush(self._deadlines, (when_ms, key))
        self.signal_modified(key)

    def schedule_fields(self, key: bytes, when_ms: int) -> None:
        """The hash at key has a field due at ``when_ms`` (for the cron)."""
        heapq.heappush(self.field_deadlines, (when_ms, key))

    def persist(self, key: bytes) -> bool:
        if self.expires.pop(key, None) is None:
            return False
        self.signal_modified(key)
        return True

    def _announce_if_new(self, key: bytes) -> None:
        """The ``new`` keyspace event (class n), fired as Redis's dbAdd fires it: a key is
        added that did not exist (or had expired), before the command's own event."""
        if key not in self.data or self.is_expired(key):
            self.keyspace.on_new_key(self.index, key)

    def rename(self, src: bytes, dst: bytes) -> None:
        value = self.data[src]
        when = self.expires.get(src)
        self._remove(src)
        self.expires.pop(dst, None)
        if self.keyspace.notify_flags & NEW:
            self._announce_if_new(dst)
        self.data[dst] = value
        if when is not None:
            self.set_expire(dst, when)
        self.signal_modified(src)
        self.signal_modified(dst)

    def flush(self) -> int:
        removed = len(self.data)
        for key in list(self.watched):
            if key in self.data:
                self.signal_modified(key)
        for key in list(self.blocking):
            if key in self.data:
                self.signal_ready(key)
        self.data.clear()
        self.expires.clear()
        self._deadlines.clear()
        self.field_deadlines.clear()
        return removed

    def take_contents(self, other: Database) -> None:
        """Replace every key with those of ``other`` (a replica's full sync, loaded into a
        fresh keyspace beside this one); WATCHers of any key and waiters on keys that now
        exist hear of it."""
        before = set(self.data)
        self.data = other.data
        self.expires = other.expires
        self._deadlines = other._deadlines
        self.field_deadlines = other.field_deadlines
        self.idmp_keys = other.idmp_keys
        for key in list(self.watched):
            if key in before or key in self.data:
                self.signal_modified(key)
        for key in list(self.blocking):
            if key in self.data:
                self.signal_ready(key)

    def _remove(self, key: bytes) -> None:
        del self.data[key]
        if self.expires:
            self.expires.pop(key, None)
        if self.blocking:
            # Clients blocked on the key run again: XREAD keeps waiting, XREADGROUP gets
            # NOGROUP (Redis 7.2+ re-executes blocked commands when their key is deleted).
            self.signal_ready(key)

    def _expire(self, key: bytes) -> None:
        self._remove(key)
        self.keyspace.expired.append((self.index, key, None, True))
        self.signal_modified(key)

    # -- WATCH and blocking hooks ------------------------------------------------------------

    def signal_modified(self, key: bytes) -> None:
        watchers = self.watched.get(key)
        if not watchers:
            return
        for wk in watchers:
            if wk.expired and key not in self.data:
                wk.expired = False  # the stale key was deleted: logically no change
                continue
            wk.client.dirty_cas = True

    def signal_ready(self, key: bytes) -> None:
        """A write made key able to serve clients blocked on it."""
        if key in self.blocking and key not in self.ready:
            if not self.ready:
                self.keyspace.ready_dbs.append(self)
            self.ready.append(key)

    # -- iteration ---------------------------------------------------------------------------

    def keys(self, pattern: bytes) -> list[bytes]:
        match = compile_glob(pattern).match if pattern != b"*" else None
        now = self.keyspace.now_ms
        expires = self.expires
        return [
            key
            for key in self.data
            if (match is None or match(key)) and not (key in expires and expires[key] <= now)
        ]

    def random_key(self) -> bytes | None:
        while self.data:
            key = random.choice(list(self.data))
            if not self.is_expired(key):
                return key
            self._expire(key)
        return None

    def scan(self, cursor: int, count: int) -> tuple[int, list[bytes]]:
        """One SCAN step. Keys are visited in order of a fixed hash of their name, and the
        cursor is the next hash to visit plus one, so a key present for the whole iteration is
        returned at least once whatever is added or deleted in between (Redis's guarantee).
        Keys of equal hash are always returned together."""
        floor = cursor - 1 if cursor else 0
        crc = zlib.crc32
        batch = heapq.nsmallest(count, ((h, key) for key in self.data if (h := crc(key)) >= floor))
        if not batch:
            return 0, []
        last = batch[-1][0]
        taken = [key for h, key in batch if h < last]
        taken += [key for key in self.data if crc(key) == last]
        more = any(crc(key) > last for key in self.data)
        return (last + 2 if more else 0), taken

    def active_expire(self, budget: int) -> int:
        """Delete up to budget keys whose deadline has passed; returns how many were deleted."""
        now = self.keyspace.now_ms
        heap = self._deadlines
        deleted = 0
        while heap and heap[0][0] <= now and deleted < budget:
            when, key = heapq.heappop(heap)
            if self.expires.get(key) == when:
                self._expire(key)
                deleted += 1
        if len(heap) > 2 * len(self.expires) + 64:
            self._deadlines = [(w, k) for k, w in self.expires.items()]
            heapq.heapify(self._deadlines)
        return deleted


def _no_new_key_listener(db: int, key: bytes) -> None:
    """A keyspace without an engine (tools, tests) publishes nothing."""


class Keyspace:
    def __init__(self, databases: int = 16) -> None:
        self.now_ms = 0
        #: replaying a log: nothing expires (a command logged while its key was alive must
        #: find it alive, as Redis's loader does); the cron expires such keys afterwards
        self.loading = False
        #: a replica: an expired key reads as absent but stays until its primary's DEL
        #: (Redis: expireIfNeeded on a replica), and the cron expires nothing
        self.replica = False
        self.dbs = [Database(self, i) for i in range(databases)]
        #: deleted by expiry, to propagate: (db, key, None, True) for a key, (db, key, fields,
        #: emptied) for fields of a hash (emptied: the hash went with its last field)
        self.expired: list[tuple[int, bytes, list[bytes] | None, bool]] = []
        self.ready_dbs: list[Database] = []  # databases with keys in their ``ready`` list
        #: ``notify-keyspace-events`` (headwater.keyevents flags): handlers test it before
        #: firing an event, so that nothing configured costs nothing more
        self.notify_flags = 0
        #: fires the ``new`` event (the engine publishes it); called only with class n on
        self.on_new_key: Callable[[int, bytes], None] = _no_new_key_listener
        #: what snapshots save beside the databases (an active-active region; None: nothing)
        self.persisted: PersistedState | None = None

    def __iter__(self) -> Iterator[Database]:
        return iter(self.dbs)

    def flush_all(self) -> int:
        return sum(db.flush() for db in self.dbs)

    def total_keys(self) -> int:
        return sum(len(db) for db in self.dbs)
