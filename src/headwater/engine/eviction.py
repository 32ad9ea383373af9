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
has grown a quarter past it or a quarter of its samples missed: O(1) a sample, the O(n)
copy spread over many evictions.
"""

from __future__ import annotations

import bisect
import random
import time
from typing import TYPE_CHECKING, Any, Final

from headwater.commands.getkeys import command_keys, fixed_single_key
from headwater.commands.introspection import key_specs_of
from headwater.commands.notify import publish_event
from headwater.keyevents import EVICTED
from headwater.ops.memory import key_usage

if TYPE_CHECKING:
    from headwater.commands.context import Client, CommandSpec
    from headwater.engine.core import Engine
    from headwater.keyspace import Database

#: what an empty Redis server counts (its used_memory_startup, about a MiB)
EMPTY_SERVER: Final = 1024 * 1024
POOL_SIZE: Final = 16
_INT64_MAX: Final = (1 << 63) - 1
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


class Sampler:
    """Random keys of a database's keys or of its keys with a TTL (module doc)."""

    def __init__(self) -> None:
        self._snapshots: dict[tuple[int, bool], list[bytes]] = {}
        self._misses: dict[tuple[int, bool], int] = {}

    def sample(self, db: Database, volatile: bool, count: int) -> list[bytes]:
        source: dict[bytes, Any] = db.expires if volatile else db.data
        if not source:
            return []
        slot = (db.index, volatile)
        keys = self._snapshots.get(slot)
        stale = keys is None or len(source) > len(keys) * 5 // 4 + 8
        if stale or self._misses.get(slot, 0) > len(keys or ()) // 4:
            keys = self._snapshots[slot] = list(source)
            self._misses[slot] = 0
        assert keys is not None
        found = []
        size = len(keys)
        for _ in range(count):
            key = keys[int(random.random() * size)]
            if key in source:
                found.append(key)
            else:
                self._misses[slot] = self._misses.get(slot, 0) + 1
        return found

    def forget(self) -> None:
        self._snapshots.clear()
        self._misses.clear()


class Evictor:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self.meter = Meter(engine)
        self.sampler = Sampler()
        #: maxmemory is set: the meter runs and commands may evict
        self.active = False
        #: (score, db, key): the best candidates seen, ascending, and the same as a set
        self.pool: list[tuple[int, int, bytes]] = []
        self.pooled: set[tuple[int, bytes]] = set()
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
        self.pooled = set()
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
        for _ in range(2):  # (a second pass after a refresh: every sample may have missed)
            for step in range(len(dbs)):
                db = dbs[(self._next_db + step) % len(dbs)]
                keys = self.sampler.sample(db, volatile, 1)
                if keys:
                    self._next_db = (db.index + 1) % len(dbs)
                    return db.index, keys[0]
            self.sampler.forget()
        return None

    def _from_pool(self, policy: str, volatile: bool) -> tuple[int, bytes] | None:
        """A sampling round into the pool, then its best candidate that still exists (Redis's
        evictionPoolPopulate and the pick that follows)."""
        keyspace = self.engine.keyspace
        samples = self.samples
        retried = False
        while True:
            candidates = 0
            for db in keyspace.dbs:
                if not (db.expires if volatile else db.data):
                    continue
                keys = self.sampler.sample(db, volatile, samples)
                candidates += len(keys)
                for key in keys:
                    self._into_pool(self._score(policy, db, key), db.index, key)
            victim = self._best(volatile)
            if victim is not None:
                return victim
            if not candidates:
                if retried or not any(db.expires if volatile else db.data for db in keyspace.dbs):
                    return None
                self.sampler.forget()  # (every sample missed: the snapshots are stale)
                retried = True

    def _best(self, volatile: bool) -> tuple[int, bytes] | None:
        """Pop the pool's best candidates until one still exists."""
        keyspace = self.engine.keyspace
        while self.pool:
            _, index, key = self.pool.pop()
            self.pooled.discard((index, key))
            db = keyspace.dbs[index]
            if key in (db.expires if volatile else db.data):
                return index, key
        return None

    def _into_pool(self, score: int, index: int, key: bytes) -> None:
        pool = self.pool
        full = len(pool) >= POOL_SIZE
        if full and score <= pool[0][0]:
            return
        if (index, key) in self.pooled:
            return
        if full:
            _, gone_index, gone_key = pool.pop(0)
            self.pooled.discard((gone_index, gone_key))
        bisect.insort(pool, (score, index, key))
        self.pooled.add((index, key))

    def _score(self, policy: str, db: Database, key: bytes) -> int:
        """Higher: a better victim (Redis's idle: LRU idle time, 255 minus the LFU counter,
        or the nearness of the TTL)."""
        keyspace = self.engine.keyspace
        kind = self.kind
        if kind == _LRU:
            word = db.lru.get(key)  # (a key without one: loaded, never used since: old)
            return keyspace.now_ms - word if word is not None else _INT64_MAX
        if kind == _LFU:
            return 255 - keyspace.lfu_counter(db.access_word(key))
        return _INT64_MAX - db.expires.get(key, _INT64_MAX)  # volatile-ttl

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
