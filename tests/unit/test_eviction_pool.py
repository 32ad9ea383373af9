"""The eviction pool (engine/eviction.py) against a model: one sampling round puts into the
pool exactly the keys a plain top-16 of the old pool and the drawn keys' true scores would
hold, although under LRU most draws are judged by the access word the snapshot kept (older
than the true one) and never looked up; keys gone since the snapshot never get in."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from headwater.engine.eviction import POOL_SIZE
from tests.unit.conftest import Harness

KEYS = 64


def _loaded(touches: list[int], gone: set[int]) -> Harness:
    """KEYS keys, each touched as ``touches`` says (one clock tick between), then ``gone``
    deleted; the snapshot is taken before the touches, so its words are older."""
    h = Harness()
    c = h.client()
    h.call(c, "CONFIG", "SET", "maxmemory", "1gb")
    h.call(c, "CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    for i in range(KEYS):
        h.clock.advance(1)
        h.call(c, "SET", f"k{i}", "v")
    db = h.engine.keyspace.dbs[0]
    h.engine.evictor.sampler.snapshot(db, False, True)  # (words as of now)
    for i in touches:
        h.clock.advance(1)
        h.call(c, "GET", f"k{i}")
    for i in gone:
        h.call(c, "DEL", f"k{i}")
    h.clock.advance(1)
    h.engine.keyspace.now_ms = h.clock.now_ms()
    return h


def _model_pool(h: Harness, old: list[tuple[int, bytes]], drawn: list[int]) -> list[bytes]:
    db = h.engine.keyspace.dbs[0]
    snap = h.engine.evictor.sampler.snapshot(db, False, True)
    now = h.engine.keyspace.now_ms
    scored = dict((key, score) for score, key in old)
    for at in drawn:
        key = snap.keys[at]
        if key in db.data:
            scored.setdefault(key, now - db.lru[key])
    best = sorted(scored.items(), key=lambda item: (item[1], item[0]))[-POOL_SIZE:]
    return sorted(key for key, _ in best)


@settings(max_examples=200, deadline=None)
@given(
    touches=st.lists(st.integers(0, KEYS - 1), max_size=200),
    gone=st.sets(st.integers(0, KEYS - 1), max_size=KEYS // 8),
    rounds=st.integers(1, 12),
    seed=st.integers(0, 2**32),
)
def test_a_round_fills_the_pool_as_the_model(
    touches: list[int], gone: set[int], rounds: int, seed: int
) -> None:
    h = _loaded(touches, gone)
    evictor = h.engine.evictor
    db = h.engine.keyspace.dbs[0]
    samples = evictor.samples
    for _ in range(rounds):
        random.seed(seed)
        seed += 1
        snap = evictor.sampler.snapshot(db, False, True)
        old = [(score, key) for score, _, key, _ in evictor.pool]
        state = random.getstate()
        draws = [int(random.random() * len(snap.keys)) for _ in range(4 * samples)]
        random.setstate(state)
        if any(snap.keys[at] not in db.data for at in draws):
            return  # (a gone key drawn twice is drawn again: keys_gone_… checks those)
        drawn = draws[:samples]
        evictor._populate(db, False)
        assert sorted(key for _, _, key, _ in evictor.pool) == _model_pool(h, old, drawn)
        evictor.check_invariants()


def test_keys_gone_since_the_snapshot_never_enter_and_are_marked() -> None:
    h = _loaded([], set(range(KEYS)) - {7})
    evictor = h.engine.evictor
    db = h.engine.keyspace.dbs[0]
    random.seed(1)
    for _ in range(40):
        evictor._populate(db, False)
        evictor.check_invariants()
    assert [key for _, _, key, _ in evictor.pool] == [b"k7"]
    # (a quarter of the snapshot gone: it was taken again)
    assert evictor.sampler.snapshot(db, False, True).keys == [b"k7"]
