"""Keyspace structures against simple reference models."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from headwater.keyspace import Keyspace

keys_st = st.sets(st.binary(min_size=1, max_size=6), max_size=60)


@given(keys_st, st.integers(min_value=1, max_value=7), st.data())
def test_scan_returns_every_stable_key_despite_churn(
    keys: set[bytes], count: int, data: st.DataObject
) -> None:
    ks = Keyspace(1)
    db = ks.dbs[0]
    for key in keys:
        db.set(key, b"v")
    stable = set(keys)
    seen: set[bytes] = set()
    cursor = 0
    for _ in range(1000):
        cursor, batch = db.scan(cursor, count)
        seen.update(batch)
        # churn: delete and add keys between calls (never touching a subset we track)
        victim = data.draw(st.sampled_from(sorted(db.data)) if db.data else st.none())
        if victim is not None and data.draw(st.booleans()):
            db.delete(victim)
            stable.discard(victim)
        db.set(data.draw(st.binary(min_size=7, max_size=8)), b"new")
        if cursor == 0:
            break
    assert cursor == 0
    assert stable <= seen
