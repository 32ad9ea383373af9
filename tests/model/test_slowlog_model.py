"""SlowLog against a reference list: pushes over and under the threshold, max-len changes
(applied at once while the log is on, else when it is turned on, as Redis's trim
after every call applies them), RESET; after each step the entries equal
the model's and ``check_invariants()`` holds. Each kept entry's arguments follow Redis's cut
(32 arguments, 128 bytes) of what was pushed."""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from headwater.commands.slowlog import MAX_ARGC, MAX_STRING, SlowLog

_ARG = st.binary(max_size=140)


def _expected_args(argv: list[bytes]) -> list[bytes]:
    if len(argv) > MAX_ARGC:
        more = len(argv) - MAX_ARGC + 1
        argv = [*argv[: MAX_ARGC - 1], f"... ({more} more arguments)".encode()]
    cut = [a[:MAX_STRING] + f"... ({len(a) - MAX_STRING} more bytes)".encode() for a in argv]
    return [a if len(a) <= MAX_STRING else cut[i] for i, a in enumerate(argv)]


class SlowLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.log = SlowLog()
        self.model: list[tuple[int, list[bytes], int]] = []  # newest first: id, args, µs
        self.next_id = 0
        self.threshold = 10000
        self.max_len = 128

    @rule(threshold=st.integers(-1, 50))
    def set_threshold(self, threshold: int) -> None:
        self.log.set_threshold(threshold)
        self.log.trim()
        self.threshold = threshold
        self._trim()

    @rule(max_len=st.integers(0, 6))
    def set_max_len(self, max_len: int) -> None:
        self.log.max_len = self.max_len = max_len
        self.log.trim()
        self._trim()

    def _trim(self) -> None:
        if self.threshold >= 0:
            del self.model[self.max_len :]

    @rule(
        name=st.sampled_from([b"SET", b"get", b"CONFIG"]),
        args=st.lists(_ARG, max_size=40),
        micros=st.integers(0, 60),
    )
    def call(self, name: bytes, args: list[bytes], micros: int) -> None:
        argv = [name, *args]
        # (what Engine.call does: only a call at or over the floor is pushed)
        if micros >= self.log.floor:
            self.log.push(argv, micros, "127.0.0.1:1", b"n")
        if self.threshold >= 0 and micros >= self.threshold:
            self.model.insert(0, (self.next_id, _expected_args(argv), micros))
            self.next_id += 1
            self._trim()

    @rule()
    def reset(self) -> None:
        self.log.entries.clear()
        self.model.clear()

    @invariant()
    def same_entries(self) -> None:
        self.log.check_invariants()
        got = [(e.id, e.argv, e.duration_us) for e in self.log.entries]
        assert got == self.model


TestSlowLog = SlowLogMachine.TestCase
TestSlowLog.settings = settings(max_examples=150, stateful_step_count=30, deadline=None)
