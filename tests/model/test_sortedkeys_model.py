"""Stateful model test: SortedKeys against a plain Python set, with tiny chunks so that chunk
splits and empty-chunk removal happen all the time."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from headwater.stream import sortedkeys
from headwater.stream.sortedkeys import SortedKeys

keys = st.integers(0, 200)


class SortedKeysMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.keys = SortedKeys()
        self.model: set[int] = set()

    @rule(key=keys)
    def add(self, key: int) -> None:
        assert self.keys.add(key) == (key not in self.model)
        self.model.add(key)

    @rule(key=keys)
    def remove(self, key: int) -> None:
        assert self.keys.remove(key) == (key in self.model)
        self.model.discard(key)

    @rule(batch=st.lists(keys, max_size=12, unique=True), above=st.booleans())
    def extend(self, batch: list[int], above: bool) -> None:
        batch.sort()
        if above and self.model:  # the delivery fast path: all larger than every key
            batch = [max(self.model) + 1 + k for k in batch]
        self.keys.extend(batch)
        self.model.update(batch)

    @rule(lo=keys, hi=st.none() | keys)
    def irange(self, lo: int, hi: int | None) -> None:
        want = sorted(k for k in self.model if k >= lo and (hi is None or k <= hi))
        assert list(self.keys.irange(lo, hi)) == want

    @rule(key=keys)
    def contains(self, key: int) -> None:
        assert (key in self.keys) == (key in self.model)

    @invariant()
    def agrees(self) -> None:
        self.keys.check_invariants()
        assert list(self.keys) == sorted(self.model)
        assert len(self.keys) == len(self.model)
        if self.model:
            assert self.keys.first() == min(self.model)
            assert self.keys.last() == max(self.model)


TestSortedKeys = SortedKeysMachine.TestCase
TestSortedKeys.settings = settings(max_examples=300, stateful_step_count=60, deadline=None)


def setup_module() -> None:
    sortedkeys.CHUNK = 4


def teardown_module() -> None:
    sortedkeys.CHUNK = 512
