"""Stateful model test: the replication backlog (a byte ring) against a plain bytes model of
the whole stream, with tiny sizes so that wrapping, overruns and resizes happen all the time
(issue 17)."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from headwater.replication.backlog import Backlog

chunks = st.binary(max_size=40)


class BacklogMachine(RuleBasedStateMachine):
    @initialize(size=st.integers(1, 32), start=st.integers(0, 1000))
    def setup(self, size: int, start: int) -> None:
        self.backlog = Backlog(size, start)
        self.size = size
        self.start = start  # offset of the byte before the model's first
        self.stream = b""  # every byte fed since (offsets start + 1 ...)
        self.held = 0  # how many of its newest bytes the backlog must hold

    @rule(data=chunks)
    def feed(self, data: bytes) -> None:
        self.backlog.feed(data)
        self.stream += data
        self.held = min(self.size, self.held + len(data))

    @rule(size=st.integers(1, 32))
    def resize(self, size: int) -> None:
        self.backlog.resize(size)
        self.size = size
        self.held = min(self.held, size)  # the newest bytes that fit

    @rule(offset=st.integers(0, 2000))
    def reset(self, offset: int) -> None:
        self.backlog.reset(offset)
        self.start = offset
        self.stream = b""
        self.held = 0

    @rule(back=st.integers(-3, 40))
    def read(self, back: int) -> None:
        offset = self.start + len(self.stream)
        wanted = offset + 1 - back
        covered = 0 <= back <= self.held
        assert self.backlog.covers(wanted) == covered
        if covered:
            expected = self.stream[len(self.stream) - back :] if back else b""
            assert self.backlog.read_from(wanted) == expected

    @invariant()
    def agrees(self) -> None:
        backlog = self.backlog
        backlog.check_invariants()
        assert backlog.offset == self.start + len(self.stream)
        assert backlog.histlen == self.held
        if backlog.histlen:
            newest = self.stream[len(self.stream) - backlog.histlen :]
            assert backlog.read_from(backlog.first_byte_offset) == newest


TestBacklog = BacklogMachine.TestCase
