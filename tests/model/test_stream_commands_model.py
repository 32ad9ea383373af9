"""Stateful model test of the stream commands, through the engine, against a sorted list.

Small node sizes (set per run) make node splits and ``~`` trims happen all the time; IDs are
both explicit and generated (with a fake clock that also goes backwards); the stream's
``check_invariants()`` runs after every step.
"""

from __future__ import annotations

from typing import Any

import hiredis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from headwater.stream.stream import Stream
from tests.unit.conftest import Harness

StreamID = tuple[int, int]
MAX_SEQ = 2**64 - 1


def fmt(sid: StreamID) -> bytes:
    return b"%d-%d" % sid


def parse(raw: bytes) -> StreamID:
    ms, seq = raw.split(b"-")
    return int(ms), int(seq)


class StreamCommands(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.c = self.h.client()
        self.model: list[tuple[StreamID, list[bytes]]] = []
        self.last: StreamID = (0, 0)
        self.max_deleted: StreamID = (0, 0)
        self.added = 0
        self.exists = False

    def call(self, *args: Any) -> Any:
        return self.h.call(self.c, *args)

    @initialize(entries=st.integers(1, 6), max_bytes=st.sampled_from([0, 60, 200, 4096]))
    def configure(self, entries: int, max_bytes: int) -> None:
        self.call("CONFIG", "SET", "stream-node-max-entries", entries)
        self.call("CONFIG", "SET", "stream-node-max-bytes", max_bytes)

    def _appended(self, sid: StreamID, pairs: list[bytes]) -> None:
        self.model.append((sid, pairs))
        self.last = sid
        self.added += 1
        self.exists = True

    @rule(
        ms=st.integers(0, 30),
        seq=st.one_of(st.integers(0, 3), st.just(None)),
        value=st.binary(max_size=30),
    )
    def xadd_explicit(self, ms: int, seq: int | None, value: bytes) -> None:
        raw = b"%d-*" % ms if seq is None else b"%d-%d" % (ms, seq)
        reply = self.call("XADD", "s", raw, "f", value)
        if seq is None:
            expected: StreamID | None = (ms, self.last[1] + 1) if ms == self.last[0] else (ms, 0)
        else:
            expected = (ms, seq)
        if (ms, seq) == (0, 0):
            assert isinstance(reply, hiredis.ReplyError)
            return
        assert expected is not None
        if expected <= self.last:
            assert isinstance(reply, hiredis.ReplyError), reply
            return
        assert reply == fmt(expected)
        self._appended(expected, [b"f", value])

    @rule(step=st.integers(-3, 3), fields=st.integers(1, 3))
    def xadd_auto(self, step: int, fields: int) -> None:
        self.h.clock.now = max(self.h.clock.now + step, 0)
        pairs = [x for i in range(fields) for x in (b"k%d" % i, b"%d" % (i * 100))]
        reply = self.call("XADD", "s", "*", *pairs)
        now = self.h.clock.now
        expected = (now, 0) if now > self.last[0] else (self.last[0], self.last[1] + 1)
        assert reply == fmt(expected)
        self._appended(expected, pairs)

    @rule(data=st.data())
    def xdel(self, data: st.DataObject) -> None:
        known = [sid for sid, _ in self.model]
        picks = data.draw(
            st.lists(
                st.one_of(
                    st.sampled_from(known) if known else st.nothing(),
                    st.tuples(st.integers(0, 30), st.integers(0, 3)),
                ),
                min_size=1,
                max_size=3,
            )
        )
        reply = self.call("XDEL", "s", *[fmt(p) for p in picks])
        gone = {p for p in picks if p in dict(self.model)}
        assert reply == (len(gone) if self.exists else 0)
        if gone:
            self.model = [e for e in self.model if e[0] not in gone]
            self.max_deleted = max(self.max_deleted, *gone)

    @rule(maxlen=st.integers(0, 10), approx=st.booleans())
    def xtrim_maxlen(self, maxlen: int, approx: bool) -> None:
        op = "~" if approx else "="
        removed = self.call("XTRIM", "s", "MAXLEN", op, maxlen)
        exact = max(len(self.model) - maxlen, 0) if self.exists else 0
        if approx:
            assert 0 <= removed <= exact
        else:
            assert removed == exact
        self.model = self.model[removed:]

    @rule(ms=st.integers(0, 30))
    def xtrim_minid(self, ms: int) -> None:
        removed = self.call("XTRIM", "s", "MINID", ms)
        kept = [e for e in self.model if e[0] >= (ms, 0)]
        assert removed == (len(self.model) - len(kept) if self.exists else 0)
        self.model = kept

    @rule(bump=st.integers(0, 5), entries_added=st.one_of(st.none(), st.integers(0, 50)))
    def xsetid(self, bump: int, entries_added: int | None) -> None:
        target = (max(self.last[0], self.max_deleted[0]) + bump, 0)
        args = ["XSETID", "s", fmt(target)]
        if entries_added is not None:
            args += ["ENTRIESADDED", entries_added]
        reply = self.call(*args)
        if not self.exists:
            assert str(reply) == "ERR no such key"
            return
        live_top = self.model[-1][0] if self.model else (0, 0)
        if target < self.max_deleted or (self.model and target < live_top):
            assert isinstance(reply, hiredis.ReplyError)
            return
        if entries_added is not None and self.model and entries_added < len(self.model):
            assert isinstance(reply, hiredis.ReplyError)
            return
        assert reply == b"OK"
        self.last = target
        if entries_added is not None:
            self.added = entries_added

    @rule(
        start=st.tuples(st.integers(0, 30), st.integers(0, 3)),
        end=st.tuples(st.integers(0, 30), st.integers(0, 3)),
        count=st.one_of(st.none(), st.integers(1, 4)),
        reverse=st.booleans(),
        exclusive=st.booleans(),
    )
    def ranges(
        self,
        start: StreamID,
        end: StreamID,
        count: int | None,
        reverse: bool,
        exclusive: bool,
    ) -> None:
        lo, hi = fmt(start), fmt(end)
        if exclusive:
            lo, hi = b"(" + lo, b"(" + hi
        args = ["XREVRANGE", "s", hi, lo] if reverse else ["XRANGE", "s", lo, hi]
        if count is not None:
            args += ["COUNT", count]
        reply = self.call(*args)
        if exclusive and end == (0, 0):
            assert str(reply) == "ERR invalid end ID for the interval"
            return
        want = [
            e for e in self.model if (start < e[0] < end if exclusive else start <= e[0] <= end)
        ]
        if reverse:
            want.reverse()
        if count is not None:
            want = want[:count]
        assert reply == [[fmt(sid), pairs] for sid, pairs in want]

    @rule(after=st.tuples(st.integers(0, 30), st.integers(0, 3)), count=st.integers(0, 3))
    def xread(self, after: StreamID, count: int) -> None:
        reply = self.call("XREAD", "COUNT", count, "STREAMS", "s", fmt(after))
        want = [e for e in self.model if e[0] > after]
        if count:
            want = want[:count]
        if not want:
            assert reply is None
        else:
            assert reply == [[b"s", [[fmt(sid), pairs] for sid, pairs in want]]]

    @invariant()
    def agrees(self) -> None:
        stream = self.h.engine.keyspace.dbs[0].get(b"s")
        if not self.exists:
            assert stream is None
            return
        assert isinstance(stream, Stream)
        stream.check_invariants()
        assert stream.length == len(self.model)
        assert stream.last_id == self.last
        assert stream.max_deleted_id == self.max_deleted
        assert stream.entries_added == self.added
        assert stream.first_id == (self.model[0][0] if self.model else (0, 0))


StreamCommands.TestCase.settings = settings(max_examples=500, stateful_step_count=50, deadline=None)
TestStreamCommands = StreamCommands.TestCase
