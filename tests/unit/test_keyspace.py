"""Keyspace structures against simple reference models."""

from __future__ import annotations

import fnmatch
import re

from hypothesis import given
from hypothesis import strategies as st

from headwater.glob import glob_match
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


def _reference_glob(pattern: bytes, subject: bytes) -> bool:
    # fnmatch on latin-1 text with Redis's ^ negation mapped to fnmatch's !
    text = pattern.decode("latin-1").replace("[^", "[!")
    return re.fullmatch(fnmatch.translate(text), subject.decode("latin-1"), re.S) is not None


@given(
    st.text(alphabet="ab?*[]^", max_size=8).map(str.encode),
    st.text(alphabet="ab", max_size=8).map(str.encode),
)
def test_glob_agrees_with_fnmatch_on_escape_free_patterns(pattern: bytes, subject: bytes) -> None:
    balanced = pattern.count(b"[") == pattern.count(b"]") and b"[]" not in pattern
    if not balanced or b"[^]" in pattern or b"[!" in pattern:
        return
    assert glob_match(pattern, subject) == _reference_glob(pattern, subject)


def test_glob_escapes_and_ranges() -> None:
    assert glob_match(b"h\\*llo", b"h*llo") and not glob_match(b"h\\*llo", b"hello")
    assert glob_match(b"h[a-c]llo", b"hbllo") and glob_match(b"h[c-a]llo", b"hbllo")
    assert not glob_match(b"h[^e]llo", b"hello") and glob_match(b"h[^e]llo", b"hallo")


def test_active_expiry_deletes_due_keys_and_logs_them() -> None:
    ks = Keyspace(2)
    db = ks.dbs[1]
    for i in range(100):
        db.set(b"k%d" % i, b"v")
        db.set_expire(b"k%d" % i, 1000 + i)
    ks.now_ms = 1049
    assert db.active_expire(budget=1000) == 50
    assert len(db) == 50 and len(ks.expired) == 50
    assert all(dbi == 1 and fields is None for dbi, _, fields, _ in ks.expired)


def test_persist_and_reset_expiry_leave_no_stale_deadline() -> None:
    ks = Keyspace(1)
    db = ks.dbs[0]
    db.set(b"k", b"v")
    db.set_expire(b"k", 10)
    db.persist(b"k")
    ks.now_ms = 100
    assert db.active_expire(budget=10) == 0 and db.get(b"k") == b"v"
