"""Stateful model test: the packed Stream against a plain sorted list of entries."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from headwater.stream.ids import MIN_ID, StreamID
from headwater.stream.stream import Stream

MAX: StreamID = (2**64 - 1, 2**64 - 1)
values = st.binary(max_size=12)
field_names = st.sampled_from([b"a", b"b", b"c", b"12", b"-5"])
pairs_st = st.lists(st.tuples(field_names, values), min_size=1, max_size=3).map(
    lambda fv: [x for pair in fv for x in pair]
)


class StreamMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.stream = Stream()
        self.model: list[tuple[StreamID, list[bytes]]] = []
        self.max_entries = 4
        self.max_bytes = 120

    @rule(pairs=pairs_st, gap_ms=st.integers(0, 3), seq=st.integers(0, 2))
    def append(self, pairs: list[bytes], gap_ms: int, seq: int) -> None:
        last = self.stream.last_id
        sid = (last[0] + gap_ms, seq) if gap_ms else (last[0], last[1] + 1 + seq)
        self.stream.append(sid, pairs, self.max_bytes, self.max_entries)
        self.model.append((sid, pairs))

    @rule(data=st.data())
    @precondition(lambda self: self.model)
    def delete_existing(self, data: st.DataObject) -> None:
        sid, _ = data.draw(st.sampled_from(self.model))
        assert self.stream.delete(sid)
        self.model = [e for e in self.model if e[0] != sid]

    @rule(ms=st.integers(0, 40), seq=st.integers(0, 4))
    def delete_any(self, ms: int, seq: int) -> None:
        present = any(sid == (ms, seq) for sid, _ in self.model)
        assert self.stream.delete((ms, seq)) == present
        self.model = [e for e in self.model if e[0] != (ms, seq)]

    @rule(maxlen=st.integers(0, 12))
    def trim_maxlen_exact(self, maxlen: int) -> None:
        removed = self.stream.trim(maxlen=maxlen)
        expected = max(len(self.model) - maxlen, 0)
        assert removed == expected
        self.model = self.model[expected:]

    @rule(ms=st.integers(0, 40))
    def trim_minid_exact(self, ms: int) -> None:
        removed = self.stream.trim(minid=(ms, 0))
        kept = [e for e in self.model if e[0] >= (ms, 0)]
        assert removed == len(self.model) - len(kept)
        self.model = kept

    @rule(maxlen=st.integers(0, 12), limit=st.integers(0, 10))
    def trim_maxlen_approx(self, maxlen: int, limit: int) -> None:
        removed = self.stream.trim(maxlen=maxlen, approx=True, limit=limit)
        assert 0 <= removed <= max(len(self.model) - maxlen, 0)
        if limit:
            assert removed <= limit
        self.model = self.model[removed:]  # approx trims only whole head nodes

    @rule(
        start=st.tuples(st.integers(0, 40), st.integers(0, 4)),
        end=st.tuples(st.integers(0, 40), st.integers(0, 4)),
        count=st.one_of(st.none(), st.integers(0, 5)),
        reverse=st.booleans(),
    )
    def range_query(self, start: StreamID, end: StreamID, count: int | None, reverse: bool) -> None:
        got = self.stream.range(start, end, count, reverse)
        want = [e for e in self.model if start <= e[0] <= end]
        if reverse:
            want.reverse()
        if count is not None:
            want = want[:count]
        assert got == want

    @invariant()
    def agrees(self) -> None:
        self.stream.check_invariants()
        assert len(self.stream) == len(self.model)
        assert self.stream.range(MIN_ID, MAX) == self.model
        assert self.stream.first_id == (self.model[0][0] if self.model else MIN_ID)


TestStream = StreamMachine.TestCase
TestStream.settings = settings(max_examples=500, stateful_step_count=50, deadline=None)
