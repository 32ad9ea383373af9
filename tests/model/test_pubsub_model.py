"""Stateful model test of Pub/Sub through the engine: clients (RESP2 or RESP3) subscribe and
unsubscribe to channels, patterns and shard channels, RESET, close, start MONITOR, and publish;
a plain model (sets per client, fnmatch-free glob on a tiny alphabet) predicts PUBLISH's count,
the messages each client receives, PUBSUB's answers and which commands a client may run.
``PubSub.check_invariants`` runs after every step."""

from __future__ import annotations

from dataclasses import dataclass, field

import hiredis
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from headwater.commands.context import Client
from headwater.glob import glob_match
from tests.unit.conftest import Harness

CHANNELS = st.sampled_from([b"a", b"b", b"ab", b"ba"])
PATTERNS = st.sampled_from([b"a*", b"*", b"?", b"b?", b"[ab]b"])
NAMES = st.lists(CHANNELS, max_size=3)
SLOTS = st.integers(0, 3)


@dataclass
class Model:
    resp: int = 2
    channels: set[bytes] = field(default_factory=set)
    patterns: set[bytes] = field(default_factory=set)
    shards: set[bytes] = field(default_factory=set)
    monitor: bool = False

    def subscribed(self) -> bool:
        return bool(self.channels or self.patterns or self.shards)


def _decode(raw: bytes) -> list[object]:
    reader = hiredis.Reader()
    reader.feed(raw)
    out = []
    while (item := reader.gets()) is not False:
        out.append(item)
    return out


class PubSubMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.publisher = self.h.client()
        self.clients: list[Client | None] = [None] * 4
        self.models: list[Model] = [Model() for _ in range(4)]

    def _client(self, slot: int) -> Client:
        c = self.clients[slot]
        if c is None:
            c = self.clients[slot] = self.h.client()
            self.models[slot] = Model()
        return c

    def _run(self, c: Client, *argv: bytes) -> list[object]:
        """The replies to one command (a monitor's lines, which are status replies, left out
        when the command's own replies are arrays)."""
        self.h.raw(c)  # what it received before (monitor lines, messages)
        self.h.engine.execute(c, list(argv))
        return _decode(self.h.raw(c))

    def _frames(self, c: Client, *argv: bytes) -> list[list[object]]:
        return [r for r in self._run(c, *argv) if isinstance(r, list)]

    @rule(slot=SLOTS)
    def hello3(self, slot: int) -> None:
        c, m = self._client(slot), self.models[slot]
        if m.monitor or (m.resp == 2 and m.subscribed()):
            return  # HELLO is refused there
        self._run(c, b"HELLO", b"3")
        m.resp = 3

    @rule(slot=SLOTS, names=NAMES.filter(bool), kind=st.sampled_from(["", "s"]))
    def subscribe(self, slot: int, names: list[bytes], kind: str) -> None:
        c, m = self._client(slot), self.models[slot]
        replies = self._frames(c, kind.upper().encode() + b"SUBSCRIBE", *names)
        mine = m.shards if kind else m.channels
        counts = []
        for name in names:
            mine.add(name)
            counts.append(len(m.shards) if kind else len(m.channels) + len(m.patterns))
        assert [r[2] for r in replies] == counts

    @rule(slot=SLOTS, patterns=st.lists(PATTERNS, min_size=1, max_size=2))
    def psubscribe(self, slot: int, patterns: list[bytes]) -> None:
        c, m = self._client(slot), self.models[slot]
        self._run(c, b"PSUBSCRIBE", *patterns)
        m.patterns.update(patterns)

    @rule(slot=SLOTS, names=NAMES, kind=st.sampled_from(["", "p", "s"]))
    def unsubscribe(self, slot: int, names: list[bytes], kind: str) -> None:
        c, m = self._client(slot), self.models[slot]
        mine = {"": m.channels, "p": m.patterns, "s": m.shards}[kind]
        targets = names or sorted(mine)
        replies = self._frames(c, kind.upper().encode() + b"UNSUBSCRIBE", *names)
        assert len(replies) == max(len(targets), 1)
        if names:
            mine.difference_update(names)
        else:
            mine.clear()
        last = replies[-1]
        shown = len(m.shards) if kind == "s" else len(m.channels) + len(m.patterns)
        assert last[2] == shown

    @rule(slot=SLOTS)
    def reset(self, slot: int) -> None:
        c = self._client(slot)
        assert self._run(c, b"RESET")[0] == b"RESET"
        self.models[slot] = Model()

    @rule(slot=SLOTS)
    def close(self, slot: int) -> None:
        c = self.clients[slot]
        if c is not None:
            self.h.engine.client_closed(c)
            self.clients[slot] = None
            self.models[slot] = Model()

    @rule(slot=SLOTS)
    def monitor(self, slot: int) -> None:
        c, m = self._client(slot), self.models[slot]
        if m.resp == 2 and m.subscribed():
            return
        self._run(c, b"MONITOR")
        m.monitor = True

    @rule(slot=SLOTS)
    def get(self, slot: int) -> None:
        c, m = self._client(slot), self.models[slot]
        reply = self._run(c, b"GET", b"k")[0]
        if m.monitor:
            assert isinstance(reply, hiredis.ReplyError)
            assert str(reply) == "ERR Replica can't interact with the keyspace"
        elif m.resp == 2 and m.subscribed():
            assert isinstance(reply, hiredis.ReplyError)
            assert str(reply).startswith("ERR Can't execute 'get'")
        else:
            assert reply is None

    @rule(channel=CHANNELS, shard=st.booleans())
    def publish(self, channel: bytes, shard: bool) -> None:
        for c in self.clients:
            if c is not None:
                self.h.raw(c)  # (monitor lines of earlier steps)
        command = b"SPUBLISH" if shard else b"PUBLISH"
        count = self._run(self.publisher, command, channel, b"m")[0]
        expected = 0
        for c, m in zip(self.clients, self.models, strict=True):
            if c is None:
                continue
            want: list[object] = []
            if shard and channel in m.shards:
                want.append([b"smessage", channel, b"m"])
            if not shard and channel in m.channels:
                want.append([b"message", channel, b"m"])
            if not shard:
                for pattern in self.h.engine.pubsub.patterns:
                    if pattern in m.patterns and glob_match(pattern, channel):
                        want.append([b"pmessage", pattern, channel, b"m"])
            expected += len(want)
            got = [r for r in _decode(self.h.raw(c)) if not isinstance(r, bytes)]
            assert sorted(map(repr, got)) == sorted(map(repr, want))
        assert count == expected

    @invariant()
    def pubsub_answers(self) -> None:
        live = [m for c, m in zip(self.clients, self.models, strict=True) if c is not None]
        ps = self.h.engine.pubsub
        channels = {ch for m in live for ch in m.channels}
        assert set(ps.channels) == channels
        assert set(ps.patterns) == {p for m in live for p in m.patterns}
        assert set(ps.shard_channels) == {s for m in live for s in m.shards}
        numsub = self._frames(self.publisher, b"PUBSUB", b"NUMSUB", b"a", b"ab")[0]
        assert numsub == [
            b"a",
            sum(b"a" in m.channels for m in live),
            b"ab",
            sum(b"ab" in m.channels for m in live),
        ]
        ps.check_invariants(self.h.engine.clients.values())


PubSubMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestPubSubModel = PubSubMachine.TestCase
