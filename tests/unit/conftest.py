from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import hiredis
import pytest

from headwater.clock import FakeClock
from headwater.commands.context import Client, CommandSpec
from headwater.config import Config
from headwater.engine import Engine
from headwater.ops.change import NO_DB, ForReplicas, Line
from headwater.persistence.aof import encode_command


class FakeTimer:
    def __init__(self, when: float, callback: Callable[[], None]) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class FakeScheduler:
    """Timers that fire only when the test advances time."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self.timers: list[FakeTimer] = []

    def call_later(self, delay: float, callback: Callable[[], None]) -> FakeTimer:
        timer = FakeTimer(self.clock.monotonic_ms() + delay * 1000, callback)
        self.timers.append(timer)
        return timer

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        due = [t for t in self.timers if not t.cancelled and t.when <= self.clock.monotonic_ms()]
        self.timers = [t for t in self.timers if t not in due]
        for timer in sorted(due, key=lambda t: t.when):
            timer.callback()


class Harness:
    """Drive the engine like a network client would, decoding replies with hiredis."""

    def __init__(self, extra: tuple[CommandSpec, ...] = (), config: Config | None = None) -> None:
        self.clock = FakeClock()
        self.scheduler = FakeScheduler(self.clock)
        self.engine = Engine(config, self.clock, self.scheduler, extra)
        self.effects: list[tuple[int, list[bytes]]] = []
        self.for_replicas: list[tuple[int, list[bytes]]] = []
        self.engine.effect_sinks.append(self._record_effect)

    def _record_effect(self, db: int, line: Line) -> None:
        """Each effect as its words (a region's own effects come encoded already), as the
        AOF gets them; those for the replicas only (PUBLISH) go to ``for_replicas``."""
        if isinstance(line, ForReplicas):
            self.for_replicas.append((db, line.argv))
            return
        self.effects.append((db, line if isinstance(line, list) else decode_all(line)))

    def client(self) -> Client:
        return self.engine.new_client("127.0.0.1:5000", "127.0.0.1:6379")

    def raw(self, c: Client) -> bytes:
        data = b"".join(c.out)
        c.out.clear()
        return data

    def effect_lines(self) -> list[list[bytes]]:
        """The effects' argvs without the MULTI/EXEC that wrap a command's several effects."""
        return [argv for _, argv in self.effects if argv not in ([b"MULTI"], [b"EXEC"])]

    def write_aof(self, path: Path) -> None:
        """The effects so far as an AOF (with SELECT where the database changes, none before
        a MULTI or an EXEC)."""
        with open(path, "wb") as f:
            db = None
            for index, argv in self.effects:
                if index != db and index != NO_DB:
                    f.write(encode_command([b"SELECT", b"%d" % index]))
                    db = index
                f.write(encode_command(argv))

    def call(self, c: Client, *args: bytes | str | int) -> Any:
        argv = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        self.engine.execute(c, argv)
        return decode_all(self.raw(c))


def error_text(value: object) -> str:
    """The text of an error reply (fails the test if the reply is not an error)."""
    assert isinstance(value, hiredis.ReplyError), value
    return str(value)


def decode_all(data: bytes) -> Any:
    reader = hiredis.Reader()
    reader.feed(data)
    replies = []
    while (reply := reader.gets()) is not False:
        replies.append(reply)
    if not replies:
        return None
    return replies[0] if len(replies) == 1 else replies


@pytest.fixture
def h() -> Harness:
    return Harness()
