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
* Every key has an access word in ``Database.lru`` (Redis keeps it in the object's 24-bit
  ``lru`` field), set when the key is created and on each lookup by ``get`` (``peek`` looks
  without touching, as Redis's ``LOOKUP_NOTOUCH``). Under an LRU (or no) maxmemory-policy it is
  the command time in ms of the last access; under an LFU policy it is Redis's LFU word,
  ``(minutes & 0xFFFF) << 8 | counter``, the counter growing logarithmically with accesses
  (``lfu-log-factor``) and decaying one per ``lfu-decay-time`` minutes. As in Redis a switch
  of policy reinterprets the words already there. A key loaded from a snapshot has none until
  it is used (OBJECT IDLETIME then counts from that moment). The cost on the hot path is one
  dict store per lookup.
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

from headwater.cluster.slot_index import SlotIndex
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
        #: key -> access word (module doc): last access ms, or the LFU word under LFU
        self.lru: dict[bytes, int] = {}
        #: cluster mode, database 0: the keys of each hash slot (None otherwise)
        self.slots: SlotIndex | None = None

    # -- lookups -----------------------------------------------------------------------------

    def get(self, key: bytes) -> Any:
        """The live value at key, or None (deleting it first if it has expired); an access
        (Redis's lookupKey: the key's LRU time or LFU counter is updated)."""
        if self.expires and key in self.expires and self.is_expired(key):
            if not self.keyspace.replica and not self.keyspace.expiry_paused:
                self._expire(key)
            return None
        value = self.data.get(key)
        if value is not None:
            keyspace = self.keyspace
            if keyspace.touch:
                if keyspace.lfu:
                    self.lru[key] = keyspace.lfu_touched(self.lru.get(key, -1))
                else:
                    self.lru[key] = keyspace.now_ms
        return value

    def peek(self, key: bytes) -> Any:
        """``get`` without the access (Redis's LOOKUP_NOTOUCH: TYPE, EXISTS, TTL, OBJECT,
        SCAN …); an expired key is still deleted."""
        if self.expires and key in self.expires and self.is_expired(key):
            if not self.keyspace.replica and not self.keyspace.expiry_paused:
                self._expire(key)
            return None
        return self.data.get(key)

    def exists(self, key: bytes) -> bool:
        return self.peek(key) is not None

    def access_word(self, key: bytes) -> int:
        """The key's access word (module doc); a key without one (loaded from a snapshot
        and not used since) gets a fresh one now. The key must exist."""
        word = self.lru.get(key)
        if word is None:
            word = self.lru[key] = self.keyspace.fresh_word()
        return word

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
        keyspace = self.keyspace
        if keyspace.notify_flags & NEW:
            self._announce_if_new(key)
        if self.slots is not None:
            self.slots.add(key)
        self.data[key] = value
        if not keyspace.lfu or key not in self.lru:  # (LFU: an overwrite keeps the counter)
            self.lru[key] = keyspace.now_ms if not keyspace.lfu else keyspace.fresh_word()
        if not keep_ttl and self.expires:
            self.expires.pop(key, None)
        if self.watched or keyspace.tracking_on:
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
        word = self.lru.get(src)
        self._remove(src)
        self.expires.pop(dst, None)
        if self.keyspace.notify_flags & NEW:
            self._announce_if_new(dst)
        if self.slots is not None:
            self.slots.add(dst)
        self.data[dst] = value
        if word is not None:  # (the value keeps its access word, as Redis's object does)
            self.lru[dst] = word
        else:
            self.lru.pop(dst, None)
        if when is not None:
            self.set_expire(dst, when)
        self.signal_modified(src)
        self.signal_modified(dst)

    def flush(self) -> int:
        """Delete every key (FLUSHDB: ``Keyspace.signal_flushed`` after it, once)."""
        removed = len(self.data)
        for key in list(self.watched):
            if key in self.data:
                self.touch_watchers(key)
        for key in list(self.blocking):
            if key in self.data:
                self.signal_ready(key)
        self.data.clear()
        if self.slots is not None:
            self.slots.clear()
        self.expires.clear()
        self._deadlines.clear()
        self.lru.clear()
        self.field_deadlines.clear()
        self.keyspace.remeasure.add(self.index)
        return removed

    def take_contents(self, other: Database) -> None:
        """Replace every key with those of ``other`` (a replica's full sync, loaded into a
        fresh keyspace beside this one); WATCHers of any key and waiters on keys that now
        exist hear of it."""
        before = set(self.data)
        self.keyspace.remeasure.add(self.index)
        self.data = other.data
        self.expires = other.expires
        self._deadlines = other._deadlines
        self.field_deadlines = other.field_deadlines
        self.idmp_keys = other.idmp_keys
        self.lru = other.lru
        if self.slots is not None:
            self.slots.rebuild(self.data)
        for key in list(self.watched):
            if key in before or key in self.data:
                self.touch_watchers(key)
        for key in list(self.blocking):
            if key in self.data:
                self.signal_ready(key)

    def swap_contents(self, other: Database) -> None:
        """SWAPDB: the two databases exchange their keys (with their TTLs and access words);
        their clients, WATCHes and blocked clients stay where they are. Before the swap,
        WATCHers of a key that exists in either database are told (Redis's
        touchAllWatchedKeysInDb, expired keys as it judges them); after it, clients blocked
        on a key that exists now, or existed before, run again (a key appearing through the
        swap serves them; a vanished one lets XREADGROUP answer as Redis 7.2 does)."""
        self._touch_for_swap(other)
        other._touch_for_swap(self)
        self.keyspace.remeasure.update((self.index, other.index))
        mine, theirs = self.data, other.data
        self.data, other.data = other.data, self.data
        self.expires, other.expires = other.expires, self.expires
        self._deadlines, other._deadlines = other._deadlines, self._deadlines
        self.idmp_keys, other.idmp_keys = other.idmp_keys, self.idmp_keys
        self.lru, other.lru = other.lru, self.lru
        self.field_deadlines, other.field_deadlines = other.field_deadlines, self.field_deadlines
        for db, before in ((self, mine), (other, theirs)):
            for key in list(db.blocking):
                if key in db.data or key in before:
                    db.signal_ready(key)

    def _touch_for_swap(self, replaced_with: Database) -> None:
        """WATCHers of this database's keys, before its contents become ``replaced_with``'s
        (Redis's touchAllWatchedKeysInDb(emptied, replaced_with))."""
        for key, watchers in list(self.watched.items()):
            exists_here = key in self.data
            exists_there = key in replaced_with.data
            if not (exists_here or exists_there):
                continue
            for wk in watchers:
                if wk.expired:
                    if not exists_there:
                        wk.expired = False  # an expired key deleted: no logical change
                        continue
                    if replaced_with.is_expired(key):
                        continue  # still an expired key
                elif not exists_here and replaced_with.is_expired(key):
                    wk.expired = True  # nothing replaced by an expired key
                    continue
                wk.client.dirty_cas = True

    def _remove(self, key: bytes) -> None:
        del self.data[key]
        if self.slots is not None:
            self.slots.discard(key)
        removed = self.keyspace.removed
        if removed is not None:  # (maxmemory's meter: engine/eviction.py)
            removed.append((self.index, key))
        self.lru.pop(key, None)
        if self.expires:
            self.expires.pop(key, None)
        if self.blocking:
            # Clients blocked on the key run again: XREAD keeps waiting, XREADGROUP gets
            # NOGROUP (Redis 7.2+ re-executes blocked commands when their key is deleted).
            self.signal_ready(key)

    def _expire(self, key: bytes) -> None:
        self._remove(key)
        self.keyspace.expired.append((self.index, key, None, True))
        self.signal_modified(key, expired=True)

    # -- WATCH, tracking and blocking hooks --------------------------------------------------

    def signal_modified(self, key: bytes, expired: bool = False) -> None:
        """The key changed: its WATCHers' transactions fail, and clients that cache it are
        told (``expired``: deleted by expiry, which nobody did; Redis's signalModifiedKey)."""
        keyspace = self.keyspace
        if keyspace.tracking_on:
            keyspace.on_key_modified(key, expired)
        if key in self.watched:
            self.touch_watchers(key)

    def touch_watchers(self, key: bytes) -> None:
        """WATCHers of the key: their transactions fail (a flush tells tracking clients
        once, not per key)."""
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
        match = compile_glob(pattern) if pattern != b"*" else None
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


#: Redis's LFU_INIT_VAL: the counter of a new key under an LFU policy
LFU_INIT_VAL = 5
#: Redis's LRU_CLOCK_MAX: the LRU clock is 24 bits of seconds and wraps (~194 days)
LRU_CLOCK_MAX = (1 << 24) - 1
#: LFU's logarithmic increments draw from this (a test may seed it)
lfu_rng = random.Random()


def lru_clock(ms: int) -> int:
    """Redis's LRU clock at ms: seconds, 24 bits."""
    return (ms // 1000) & LRU_CLOCK_MAX


def _no_new_key_listener(db: int, key: bytes) -> None:
    """A keyspace without an engine (tools, tests) publishes nothing."""


def _no_modified_key_listener(key: bytes, expired: bool) -> None:
    """A keyspace without an engine (tools, tests) tracks nothing."""


def _no_flush_listener() -> None:
    """A keyspace without an engine (tools, tests) tracks nothing."""


class Keyspace:
    def __init__(self, databases: int = 16) -> None:
        self.now_ms = 0
        #: replaying a log: nothing expires (a command logged while its key was alive must
        #: find it alive, as Redis's loader does); the cron expires such keys afterwards
        self.loading = False
        #: a replica: an expired key reads as absent but stays until its primary's DEL
        #: (Redis: expireIfNeeded on a replica), and the cron expires nothing
        self.replica = False
        #: a CLIENT PAUSE is on: expired keys and fields read as absent and stay (nothing is
        #: deleted, logged or replicated) until it ends, as on a replica
        self.expiry_paused = False
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
        #: a client tracks keys or the tracking table holds some (commands/tracking.py):
        #: every change and flush is then told to ``on_key_modified`` / ``on_flushed``
        self.tracking_on = False
        self.on_key_modified: Callable[[bytes, bool], None] = _no_modified_key_listener
        self.on_flushed: Callable[[], None] = _no_flush_listener
        #: maxmemory's meter (engine/eviction.py): keys removed since it last looked (None:
        #: no meter), and databases replaced whole (flush, swap, full sync) to measure again
        self.removed: list[tuple[int, bytes]] | None = None
        self.remeasure: set[int] = set()
        #: what snapshots save beside the databases (an active-active region; None: nothing)
        self.persisted: PersistedState | None = None
        #: lookups update access words (off for the commands of a CLIENT NO-TOUCH client)
        self.touch = True
        #: an LFU maxmemory-policy is set: access words are LFU words (``Database.lru``)
        self.lfu = False
        self.lfu_log_factor = 10  # lfu-log-factor
        self.lfu_decay_time = 1  # lfu-decay-time (minutes)

    # -- access words (``Database.lru``) -------------------------------------------------------

    def fresh_word(self) -> int:
        """The access word of a value created now (Redis's createObject)."""
        if self.lfu:
            return ((self.now_ms // 60000) & 0xFFFF) << 8 | LFU_INIT_VAL
        return self.now_ms

    def lfu_counter(self, word: int) -> int:
        """The LFU counter of a word, decayed by the minutes elapsed since its last access
        (Redis's LFUDecrAndReturn; nothing is stored)."""
        counter = word & 255
        if self.lfu_decay_time:
            ldt = (word >> 8) & 0xFFFF
            now = (self.now_ms // 60000) & 0xFFFF
            elapsed = now - ldt if now >= ldt else 65535 - ldt + now
            periods = elapsed // self.lfu_decay_time
            counter = max(counter - periods, 0)
        return counter

    def lfu_touched(self, word: int) -> int:
        """The LFU word after one more access (Redis's updateLFU: decay, then a logarithmic
        increment); ``word`` -1: a key without one, taken as new."""
        if word < 0:
            word = self.fresh_word()
        counter = self.lfu_counter(word)
        if counter < 255:
            base = max(counter - LFU_INIT_VAL, 0)
            if lfu_rng.random() < 1.0 / (base * self.lfu_log_factor + 1):
                counter += 1
        return ((self.now_ms // 60000) & 0xFFFF) << 8 | counter

    def restored_word(self, idle_s: int, freq: int) -> int | None:
        """The access word RESTORE's IDLETIME or FREQ gives a key (Redis's
        objectSetLRUOrLFU: FREQ counts under an LFU policy, IDLETIME otherwise); None when
        the one given does not apply (-1: not given)."""
        if self.lfu:
            return ((self.now_ms // 60000) & 0xFFFF) << 8 | freq if freq >= 0 else None
        return self.now_ms - idle_s * 1000 if idle_s >= 0 else None

    def idle_ms(self, word: int) -> int:
        """Milliseconds since the access a word records, on Redis's wrapping 24-bit clock
        of seconds (estimateObjectIdleTime)."""
        now, then = lru_clock(self.now_ms), lru_clock(word)
        if now >= then:
            return (now - then) * 1000
        return (now + (LRU_CLOCK_MAX - then)) * 1000

    def swap(self, first: int, second: int) -> None:
        """SWAPDB first second (indexes already checked)."""
        if first != second:
            self.dbs[first].swap_contents(self.dbs[second])

    def __iter__(self) -> Iterator[Database]:
        return iter(self.dbs)

    def flush_all(self) -> int:
        removed = sum(db.flush() for db in self.dbs)
        self.signal_flushed()
        return removed

    def signal_flushed(self) -> None:
        """Databases were emptied (FLUSHALL, FLUSHDB, a replica's full sync): every
        tracking client hears of it (Redis's signalFlushedDb)."""
        if self.tracking_on:
            self.on_flushed()

    def total_keys(self) -> int:
        return sum(len(db) for db in self.dbs)
