"""Hashes with field TTLs (Redis 7.4) against a plain model, field -> (value, deadline),
under random writes, TTL changes, time passing and cron runs (hypothesis). After each step:
``Hash.check_invariants()`` (its deadlines belong to its fields and are all in the heap),
the database's schedule holds an entry no later than each hash's earliest deadline (else the
cron would miss it), and what the commands show is the model without its expired fields."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from headwater.values import Hash
from tests.unit.conftest import Harness

FIELDS = [b"a", b"b", b"c", b"d"]
KEYS = [b"h1", b"h2"]
field = st.sampled_from(FIELDS)
key = st.sampled_from(KEYS)


class HashTtlMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.c = self.h.client()
        self.model: dict[bytes, dict[bytes, tuple[bytes, int | None]]] = {}

    def now(self) -> int:
        return self.h.engine.keyspace.now_ms

    def live(self, k: bytes) -> dict[bytes, tuple[bytes, int | None]]:
        """The model's hash at k without expired fields (dropping them, as the server does)."""
        fields = self.model.get(k, {})
        now = self.h.clock.now_ms()
        kept = {f: (v, w) for f, (v, w) in fields.items() if w is None or w >= now}
        if kept:
            self.model[k] = kept
        else:
            self.model.pop(k, None)
        return kept

    @rule(k=key, f=field, v=st.sampled_from([b"1", b"x", b"20"]))
    def hset(self, k: bytes, f: bytes, v: bytes) -> None:
        self.live(k)
        self.h.call(self.c, "HSET", k, f, v)
        self.model.setdefault(k, {})[f] = (v, None)

    @rule(k=key, f=field)
    def hdel(self, k: bytes, f: bytes) -> None:
        self.live(k).pop(f, None)
        self.h.call(self.c, "HDEL", k, f)
        if not self.model.get(k):
            self.model.pop(k, None)

    @rule(
        k=key,
        fs=st.lists(field, min_size=1, max_size=3),
        ms=st.sampled_from([0, 1, 50, 200, 1000]),
        cond=st.sampled_from([None, b"NX", b"XX", b"GT", b"LT"]),
    )
    def hpexpire(self, k: bytes, fs: list[bytes], ms: int, cond: bytes | None) -> None:
        fields = self.live(k)
        now = self.h.clock.now_ms()
        when = now + ms
        expected = []
        for f in fs:
            if f not in fields:
                expected.append(-2)
                continue
            value, prev = fields[f]
            if prev is None:
                met = cond not in (b"XX", b"GT")
            else:
                met = not (
                    (cond == b"GT" and prev >= when)
                    or (cond == b"LT" and prev <= when)
                    or cond == b"NX"
                )
            if not met:
                expected.append(0)
            elif when <= now:
                del fields[f]
                expected.append(2)
            else:
                fields[f] = (value, when)
                expected.append(1)
        if k in self.model and not self.model[k]:
            del self.model[k]
        args = [k, ms, *([cond] if cond else []), "FIELDS", len(fs), *fs]
        assert self.h.call(self.c, "HPEXPIRE", *args) == expected

    @rule(k=key, f=field)
    def hpersist(self, k: bytes, f: bytes) -> None:
        fields = self.live(k)
        expected = -2 if f not in fields else (-1 if fields[f][1] is None else 1)
        if expected == 1:
            fields[f] = (fields[f][0], None)
        assert self.h.call(self.c, "HPERSIST", k, "FIELDS", 1, f) == [expected]

    @rule(ms=st.integers(1, 300))
    def advance(self, ms: int) -> None:
        self.h.clock.advance(ms)

    @rule()
    def cron(self) -> None:
        self.h.engine.cron()

    @rule(k=key)
    def read(self, k: bytes) -> None:
        fields = self.live(k)
        got = self.h.call(self.c, "HGETALL", k) or []
        assert dict(zip(got[::2], got[1::2], strict=True)) == {f: v for f, (v, _) in fields.items()}
        assert self.h.call(self.c, "HLEN", k) == len(fields)
        now = self.h.clock.now_ms()
        ttls = self.h.call(self.c, "HPTTL", k, "FIELDS", len(FIELDS), *FIELDS)
        want = [
            -2 if f not in fields else (-1 if fields[f][1] is None else fields[f][1] - now)
            for f in FIELDS
        ]
        assert ttls == want

    @invariant()
    def structures_hold(self) -> None:
        db = self.h.engine.keyspace.dbs[0]
        scheduled: dict[bytes, int] = {}
        for when, k in db.field_deadlines:
            scheduled[k] = min(when, scheduled.get(k, when))
        assert _is_heap(db.field_deadlines)
        for k, value in db.data.items():
            assert type(value) is Hash
            value.check_invariants()
            nxt = None if value.ttls is None else value.ttls.next_deadline()
            if nxt is not None:
                assert k in scheduled and scheduled[k] <= nxt, (k, nxt, scheduled)


def _is_heap(heap: list[tuple[int, bytes]]) -> bool:
    return all(heap[(i - 1) // 2] <= heap[i] for i in range(1, len(heap)))


TestHashTtl = HashTtlMachine.TestCase
TestHashTtl.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
