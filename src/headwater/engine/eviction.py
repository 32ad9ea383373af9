"""maxmemory, enforced: the meter that says how much memory the data takes, the eviction of
keys by Redis's eight policies, and client eviction (``maxmemory-clients``).

Theory of operation
-------------------
**What counts.** A Python process's resident set does not shrink when keys go (the
allocator keeps the pages), so it cannot decide evictions: evicting until the RSS drops
would empty the database. With ``maxmemory`` set, the meter counts what Redis would count:
each key at MEMORY USAGE's estimate (``ops/memory.py``: Redis's own structure sizes and
jemalloc's size classes, the same figure MEMORY USAGE reports), the main and expires hash
tables of each database, a fixed 1 MiB for the empty server (Redis's ``used_memory`` at
startup is about that), and the clients' output buffers. A key is measured again after
every command that names it as written; keys removed in any way (DEL, expiry, eviction,
RENAME's source) come off at once (``Keyspace.removed``); a flushed, swapped or replaced
database is measured again whole. INFO's ``used_memory`` is this count while ``maxmemory``
is set (the replication backlog's size added), the resident set otherwise.

**Evicting.** Before each command (not a replica's, not the AOF's, not while clients are
paused), as Redis's performEvictions: while the count is over ``maxmemory``, pick a key by
the policy and delete it, for at most ``maxmemory-eviction-tenacity``'s time budget (then
the command runs, and the cron goes on). LRU, LFU and TTL choose with Redis's sampled
approximation: ``maxmemory-samples`` random keys of each database go into a pool of the 16
best candidates kept across calls, and the best one that still exists goes. Random policies
take a random key, the databases in turn. An evicted key is propagated as DEL (UNLINK with
``lazyfree-lazy-eviction``), fires the ``evicted`` event, invalidates tracking clients and
WATCHes, and counts in ``evicted_keys``. With nothing left to evict (``noeviction``, or no
volatile key for a ``volatile-*`` policy) the state is out of memory: commands flagged
``denyoom`` get ``-OOM`` (a transaction's EXEC too, and a script's first write).

Random keys come from a snapshot of each database's keys, taken again when the database
has grown a quarter past it or a quarter of it is known gone (drawn and missing, or
evicted): O(1) a sample, the O(n) copy spread over many evictions. A round whose samples
all missed is drawn again rather than the snapshot retaken (that copied every key for each
unlucky round: 20 us a SET under allkeys-random). What a sample costs is memory latency,
not computation: a random key of a large dict is a cache and TLB miss for the key, one
for the dict's index and one for its entry (~0.3 us each on the benchmark machines), so
under LRU the snapshot also keeps each key's access word as of then, in an array: a word
only grows, so when the old word cannot place the key in a full pool (its idle time then
was no longer than the pool's worst), the true one cannot either, and the key is never
looked up. Most samples then cost one read of the array; the pool gets exactly what
looking every sample up would give it (tests/unit/test_eviction_pool.py).
"""

from __future__ import annotations

import bisect
import time
from array import array
from random import random as _random
from typing import TYPE_CHECKING, Any, Final

from headwater.commands.getkeys import command_keys, fixed_single_key
from headwater.commands.introspection import key_specs_of
from headwater.commands.notify import publish_event
from headwater.errors import require
from headwater.keyevents import EVICTED
from headwater.ops.memory import key_usage

if TYPE_CHECKING:
    from headwater.commands.context import Client, CommandSpec
    from headwater.engine.core import Engine
    from headwater.keyspace import Database

#: what an empty Redis server counts (its used_memory_startup, about a MiB)
EMPTY_SERVER: Final = 1024 * 1024
POOL_SIZE: Final = 16
#: sampling rounds for one victim before giving up (half-way, the snapshots are taken again)
_ATTEMPTS: Final = 256
_INT64_MAX: Final = (1 << 63) - 1
#: an access word in a snapshot whose key is gone
_GONE: Final = _INT64_MAX
#: how a policy scores keys
_LRU: Final = 0
_LFU: Final = 1
_TTL: Final = 2
_KINDS: Final = {"lru": _LRU, "lfu": _LFU, "ttl": _TTL}


class Meter:
    """The memory the data takes, as Redis would count it (module doc)."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.sizes: list[dict[bytes, int]] = [{} for _ in engine.keyspace.dbs]
        self.total = 0
        self.dirty: list[tuple[int, bytes]] = []
        self._plans: dict[str, tuple[Any, int]] = {}

    def start(self) -> None:
        keyspace = self.engine.keyspace
        keyspace.removed = []
        keyspace.remeasure.update(range(len(keyspace.dbs)))
        self.settle()

    def stop(self) -> None:
        self.engine.keyspace.removed = None
        self.sizes = [{} for _ in self.engine.keyspace.dbs]
        self.total = 0
        self.dirty = []

    def written(self, db: int, row: CommandSpec, argv: list[bytes]) -> None:
        """A write command ran: its keys are measured again at the next ``settle``."""
        if row.first_key > 0 and row.step == 1 and row.last_key == row.first_key:
            if row.first_key < len(argv):  # (one key at a fixed place: most writes)
                self.dirty.append((db, argv[row.first_key]))
            return
        plan = self._plans.get(row.name)
        if plan is None:
            specs = key_specs_of(row)
            one = fixed_single_key(specs)
            plan = self._plans[row.name] = (specs, one[0] if one is not None else -1)
        specs, at = plan
        if at >= 0:
            if at < len(argv):
                self.dirty.append((db, argv[at]))
            return
        for index, _ in command_keys(row, specs, argv):
            self.dirty.append((db, argv[index]))

    def settle(self) -> int:
        """Bring the count up to date; returns it."""
        keyspace = self.engine.keyspace
        node_bytes = self.engine.config["stream-node-max-bytes"]
        if keyspace.remeasure:
            for index in keyspace.remeasure:
                self._measure_db(index, node_bytes)
            keyspace.remeasure.clear()
        removed = keyspace.removed
        if removed:
            for index, key in removed:
                self.total -= self.sizes[index].pop(key, 0)
            removed.clear()
        if self.dirty:
            dbs = keyspace.dbs
            for index, key in self.dirty:
                sizes = self.sizes[index]
                value = dbs[index].data.get(key)
                new = key_usage(key, value, 5, node_bytes) if value is not None else 0
                self.total += new - sizes.get(key, 0)
                if value is not None:
                    sizes[key] = new
                else:
                    sizes.pop(key, None)
            self.dirty.clear()
        return self.total

    def _measure_db(self, index: int, node_bytes: int) -> None:
        sizes = self.sizes[index]
        self.total -= sum(sizes.values())
        fresh = {
            key: key_usage(key, value, 5, node_bytes)
            for key, value in self.engine.keyspace.dbs[index].data.items()
        }
        self.sizes[index] = fresh
        self.total += sum(fresh.values())

    def tables(self) -> int:
        """The databases' hash tables (8 bytes a slot, a power of two at least the size)."""
        total = 0
        for db in self.engine.keyspace.dbs:
            for table in (db.data, db.expires):
                if table:
                    total += 8 * (1 << (len(table) - 1).bit_length())
        return total


class Snapshot:
    """A database's keys (or its keys with a TTL) as of a moment, and for LRU their access
    words as of then: a word only grows, so an old one overstates the key's idle time and
    a key it cannot place in the pool would not get there with its true word either."""

    def __init__(self, keys: list[bytes], words: array[int] | None, epoch: int) -> None:
        self.keys = keys
        self.words = words
        self.epoch = epoch
        #: entries known or found gone since (without words to mark them, an entry drawn
        #: gone again counts again: a count of misses, which only renews the snapshot sooner)
        self.dead = 0

    def stale(self, source: dict[bytes, Any]) -> bool:
        """Taken again once the keys grew a quarter past it, or a quarter of it is gone."""
        size = len(self.keys)
        return len(source) > size * 5 // 4 + 8 or self.dead > size // 4

    def check_invariants(self) -> None:
        words = self.words
        require(words is None or len(words) == len(self.keys), "a word for each key")
        require(self.dead >= 0, f"dead {self.dead}")
        if words is not None:  # (each entry marked once: never more dead than entries)
            require(self.dead <= len(self.keys), f"dead {self.dead} of {len(self.keys)}")

    def kill(self, at: int) -> None:
        """The entry at ``at`` is gone (its word, if any, marked so it is not drawn again)."""
        words = self.words
        if words is not None:
            if words[at] == _GONE:
                return  # (known already: a pooled key found gone when drawn again)
            words[at] = _GONE
        self.dead += 1


class Sampler:
    """Random keys of a database's keys or of its keys with a TTL (module doc)."""

    def __init__(self) -> None:
        #: by ``2 * db + volatile``
        self._snapshots: list[Snapshot | None] = []
        self._epoch = 0

    def snapshot(self, db: Database, volatile: bool, with_words: bool) -> Snapshot:
        """The keys to draw from (some may be gone: ``Snapshot.kill`` counts them); with the
        access words if ``with_words``."""
        source: dict[bytes, Any] = db.expires if volatile else db.data
        slot = 2 * db.index + volatile
        snapshots = self._snapshots
        if slot >= len(snapshots):
            snapshots.extend([None] * (slot + 1 - len(snapshots)))
        snap = snapshots[slot]
        if snap is None or snap.stale(source) or (with_words and snap.words is None):
            self._epoch += 1
            snap = snapshots[slot] = _take(db, volatile, with_words, self._epoch)
        return snap

    def kill(self, db: int, volatile: bool, position: int) -> None:
        """A key drawn from a snapshot at ``position`` (``epoch << 32 | index``) is gone."""
        slot = 2 * db + volatile
        if slot < len(self._snapshots):
            snap = self._snapshots[slot]
            if snap is not None and snap.epoch == position >> 32:
                snap.kill(position & 0xFFFFFFFF)

    def sample(self, db: Database, volatile: bool, count: int) -> list[bytes]:
        source: dict[bytes, Any] = db.expires if volatile else db.data
        if not source:
            return []
        snap = self.snapshot(db, volatile, False)
        keys = snap.keys
        size = len(keys)
        found = []
        for _ in range(count):
            at = int(_random() * size)
            key = keys[at]
            if key in source:
                found.append(key)
            else:
                snap.kill(at)
        return found

    def check_invariants(self) -> None:
        for snap in self._snapshots:
            if snap is not None:
                snap.check_invariants()

    def forget(self) -> None:
        self._snapshots.clear()


def _take(db: Database, volatile: bool, with_words: bool, epoch: int) -> Snapshot:
    if not with_words:
        return Snapshot(list(db.expires if volatile else db.data), None, epoch)
    lru = db.lru
    if not volatile and len(lru) == len(db.data):
        # (every key has its word: both in one pass over the words, no lookups)
        return Snapshot(list(lru), array("q", lru.values()), epoch)
    keys = list(db.expires if volatile else db.data)
    return Snapshot(keys, array("q", [lru.get(key, 0) for key in keys]), epoch)


class Evictor:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.meter = Meter(engine)
        self.sampler = Sampler()
        #: maxmemory is set: the meter runs and commands may evict
        self.active = False
        #: (score, db, key, where it was drawn: ``Sampler.kill``): the best candidates seen,
        #: ascending; their keys by database
        self.pool: list[tuple[int, int, bytes, int]] = []
        self.pooled: list[set[bytes]] = [set() for _ in engine.keyspace.dbs]
        self._next_db = 0
        #: the last check found the data over maxmemory with nothing to evict
        self.out_of_memory = False
        #: lazyfree-lazy-eviction: evictions propagate as UNLINK
        self.lazy = False
        #: the settings, read when they change (``configure``)
        self.limit = 0
        self.policy = "noeviction"
        self.kind = _LRU
        self.samples = 5
        self.budget_s = 0.0
        self._overhead_ms = -1
        self._overhead_bytes = 0

    def configure(self) -> None:
        active = bool(self.engine.config["maxmemory"])
        if active and not self.active:
            self.meter.start()
        elif not active and self.active:
            self.meter.stop()
        self.active = active
        config = self.engine.config
        self.lazy = bool(config["lazyfree-lazy-eviction"])
        # (read once: asked for every command, and for every sampled key)
        self.limit = int(config["maxmemory"])
        self.policy = str(config["maxmemory-policy"])
        self.kind = _KINDS.get(self.policy[self.policy.find("-") + 1 :], _TTL)
        self.samples = int(config["maxmemory-samples"])
        self.budget_s = self._budget_s()
        self.pool = []
        self.pooled = [set() for _ in self.engine.keyspace.dbs]
        self.sampler.forget()

    # -- the count ------------------------------------------------------------------------

    def used(self) -> int:
        """The memory counted against maxmemory: the data, its tables, the empty server,
        the normal clients' output (Redis leaves replicas' and the AOF's buffers out)."""
        return self.meter.settle() + self._overhead()

    def _recent_overhead(self) -> int:
        """``_overhead`` as of this millisecond (clients and tables move slowly; it is
        asked before every command)."""
        now = self.engine.keyspace.now_ms
        if now != self._overhead_ms:
            self._overhead_ms = now
            self._overhead_bytes = self._overhead()
        return self._overhead_bytes

    def _overhead(self) -> int:
        engine = self.engine
        clients = sum(c.out_bytes for c in engine.clients.values() if not c.is_replica)
        return EMPTY_SERVER + self.meter.tables() + clients

    # -- evicting -------------------------------------------------------------------------

    def may_evict(self) -> bool:
        """Redis's isSafeToPerformEvictions: not on a replica, not while clients are
        paused, not while a slow script holds the server."""
        engine = self.engine
        busy = engine.busy_reply is not None
        return not (engine.keyspace.replica or engine.pause_mode or busy)

    def make_room(self) -> bool:
        """Evict until under maxmemory (within the time budget); True when still over with
        nothing left to evict: out of memory."""
        limit = self.limit
        overhead = self._recent_overhead()
        if self.meter.settle() + overhead <= limit or not self.may_evict():
            self.out_of_memory = False
            return False
        used = limit + 1
        policy = self.policy
        if policy == "noeviction":
            self.out_of_memory = True
            return True
        deadline = time.perf_counter() + self.budget_s
        while used > limit:
            victim = self._pick(policy)
            if victim is None:
                self.out_of_memory = True
                return True
            self._evict(*victim)
            used = self.meter.settle() + overhead  # (the tables barely move meanwhile)
            if time.perf_counter() > deadline:
                break  # (the command runs; the cron goes on evicting)
        self.out_of_memory = False
        return False

    def _budget_s(self) -> float:
        """Redis's evictionTimeLimitUs: 50 us a step of tenacity up to 10, then growing
        fast; 100: no limit."""
        tenacity: int = self.engine.config["maxmemory-eviction-tenacity"]
        if tenacity <= 10:
            return 50e-6 * tenacity
        if tenacity < 100:
            growth: float = 1.15 ** (tenacity - 10)
            return 500e-6 * growth
        return float("inf")

    def _pick(self, policy: str) -> tuple[int, bytes] | None:
        volatile = policy.startswith("volatile-")
        if policy.endswith("random"):
            return self._random(volatile)
        return self._from_pool(policy, volatile)

    def _random(self, volatile: bool) -> tuple[int, bytes] | None:
        dbs = self.engine.keyspace.dbs
        for attempt in range(_ATTEMPTS):
            anything = False
            for step in range(len(dbs)):
                db = dbs[(self._next_db + step) % len(dbs)]
                if not (db.expires if volatile else db.data):
                    continue
                anything = True
                keys = self.sampler.sample(db, volatile, 1)
                if keys:
                    self._next_db = (db.index + 1) % len(dbs)
                    return db.index, keys[0]
            if not anything:
                return None
            if attempt == _ATTEMPTS // 2:
                self.sampler.forget()  # (a guard: the misses renew a stale snapshot first)
        return None

    def _from_pool(self, policy: str, volatile: bool) -> tuple[int, bytes] | None:
        """Sampling rounds into the pool, then its best candidate that still exists (Redis's
        evictionPoolPopulate and the pick that follows). A round whose samples all missed
        (keys gone since the snapshot) is tried again: the misses renew the snapshot when a
        quarter of it is gone, so forgetting it at once would copy every key for each
        unlucky round."""
        keyspace = self.engine.keyspace
        for attempt in range(_ATTEMPTS):
            anything = False
            for db in keyspace.dbs:
                if db.expires if volatile else db.data:
                    anything = True
                    self._populate(db, volatile)
            victim = self._best(volatile)
            if victim is not None or not anything:
                return victim
            if attempt == _ATTEMPTS // 2:
                self.sampler.forget()
        return None

    def _populate(self, db: Database, volatile: bool) -> None:
        """``maxmemory-samples`` random keys of the database scored into the pool (those gone
        since the snapshot are marked). A key's access word is found first: a key without
        one is gone, or was loaded and not used since (then it is the oldest). Under LRU a
        key whose word in the snapshot cannot place it in the full pool is not looked up
        (``Snapshot``): most samples cost one read of an array."""
        kind = self.kind
        snap = self.sampler.snapshot(db, volatile, kind == _LRU)
        keys = snap.keys
        stale_words = snap.words
        size = len(keys)
        source: dict[bytes, Any] = db.expires if volatile else db.data
        words = db.lru
        now = self.engine.keyspace.now_ms
        pool = self.pool
        tag = snap.epoch << 32
        drawn = 0
        for _ in range(4 * self.samples):  # (an entry known gone is drawn again, cheaply)
            if drawn == self.samples:
                break
            at = int(_random() * size)
            if stale_words is not None:
                stale = stale_words[at]
                if stale == _GONE:
                    continue
                drawn += 1
                if len(pool) >= POOL_SIZE and now - stale <= pool[0][0]:
                    continue  # (its true idle time is no longer: it would not get in)
            else:
                drawn += 1
            key = keys[at]
            if kind == _TTL:
                when = source.get(key)
                if when is None:
                    snap.kill(at)
                    continue
                score = _INT64_MAX - when
            else:
                word = words.get(key)
                if word is None:
                    if key not in source:
                        snap.kill(at)
                        continue
                    if kind == _LRU:
                        score = _INT64_MAX  # (loaded, never used since: old)
                    else:
                        score = 255 - self.engine.keyspace.lfu_counter(db.access_word(key))
                elif kind == _LRU:
                    score = now - word
                else:
                    score = 255 - self.engine.keyspace.lfu_counter(word)
            self._into_pool(score, db.index, key, tag | at)

    def _best(self, volatile: bool) -> tuple[int, bytes] | None:
        """Pop the pool's best candidates until one still exists (the one taken, or any
        found gone, marked gone in its snapshot)."""
        keyspace = self.engine.keyspace
        pool = self.pool
        while pool:
            _, index, key, position = pool.pop()
            self.pooled[index].discard(key)
            self.sampler.kill(index, volatile, position)
            db = keyspace.dbs[index]
            if key in (db.expires if volatile else db.data):
                return index, key
        return None

    def check_invariants(self) -> None:
        pool = self.pool
        require(len(pool) <= POOL_SIZE and pool == sorted(pool), f"pool {pool!r}")
        by_db: list[set[bytes]] = [set() for _ in self.pooled]
        for _, index, key, _ in pool:
            require(key not in by_db[index], f"{key!r} twice in the pool")
            by_db[index].add(key)
        require(by_db == self.pooled, "the pooled keys are not the pool's")
        self.sampler.check_invariants()

    def _into_pool(self, score: int, index: int, key: bytes, position: int) -> None:
        pool = self.pool
        full = len(pool) >= POOL_SIZE
        if full and score <= pool[0][0]:
            return
        pooled = self.pooled[index]
        if key in pooled:
            return
        if full:
            gone = pool.pop(0)
            self.pooled[gone[1]].discard(gone[2])
        bisect.insort(pool, (score, index, key, position))
        pooled.add(key)

    def _evict(self, index: int, key: bytes) -> None:
        engine = self.engine
        db = engine.keyspace.dbs[index]
        if key not in db.data:
            return
        db._remove(key)
        db.signal_modified(key)  # (WATCH, tracking: an eviction invalidates)
        engine.stats.evicted_keys += 1
        flags = engine.keyspace.notify_flags
        if flags & EVICTED:
            publish_event(engine.pubsub, flags, b"evicted", key, index, 0)
        engine.emit_eviction(index, [b"UNLINK" if self.lazy else b"DEL", key])

    # -- clients (maxmemory-clients) ----------------------------------------------------------

    def evict_clients(self) -> None:
        """Redis's evictClients: while the clients' memory is over ``maxmemory-clients``,
        the one using the most goes (not replicas, the primary's link, or clients with
        CLIENT NO-EVICT on)."""
        engine = self.engine
        setting = engine.config["maxmemory-clients"]
        if not setting:
            return
        limit = setting if setting > 0 else -setting * engine.config["maxmemory"] // 100
        if limit <= 0:
            return
        clients = [c for c in engine.clients.values() if _evictable(c)]
        total = sum(client_memory(c) for c in clients)
        for client in sorted(clients, key=client_memory, reverse=True):
            if total <= limit:
                return
            total -= client_memory(client)
            engine.stats.evicted_clients += 1
            engine.log("notice", f"Evicting client: id={client.id} addr={client.addr}")
            engine.kill_client(client)


def _evictable(c: Client) -> bool:
    return not (c.is_replica or c.is_master or c.no_evict or c.closed or c.replaying)


def client_memory(c: Client) -> int:
    """What a client holds: its query buffer's allocation, its output, its transaction's
    queued arguments, and the reply buffer every client has (CLIENT LIST's tot-mem)."""
    queued = sum(sum(map(len, argv)) + 8 * len(argv) for _, argv in c.queued)
    return c.qbuf_alloc + c.out_bytes + queued + 16384
