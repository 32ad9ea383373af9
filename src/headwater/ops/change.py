"""What a write changed, as values: the one way effects travel to the engine.

An operation returns a ``Change``: how many changes it made (Redis's ``server.dirty``
increment, which INFO shows as ``rdb_changes_since_last_save``) and the effect lines to log
and propagate. ``lines is None`` means "the command as given" (propagated only when it changed
something); a list is exactly what to propagate, maybe nothing. A write handler returns
``Written(reply, change)``; the engine alone (``Engine.call``, the cron) turns the change into
the dirty counter and the effect stream, as Redis's ``call()`` does with ``alsoPropagate``.

A ``Change`` or ``Written`` is never modified once built (the shared constants below are
returned by many handlers); only an ``Effects``, which one command builds step by step, grows.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias


class ForReplicas:
    """An effect for the replicas only, never the AOF (PUBLISH and SPUBLISH, Redis's
    PROPAGATE_REPL): in the stream in its place among the others (inside a transaction's
    MULTI … EXEC), and no reply waits for the disk because of it."""

    __slots__ = ("argv",)

    def __init__(self, argv: list[bytes]) -> None:
        self.argv = argv

    def __repr__(self) -> str:
        return f"ForReplicas({self.argv!r})"


#: one effect line: its words, the RESP command already encoded (an active-active region's
#: own effects: made once for the AOF, the replicas and the peer links), or a command for
#: the replicas only
Line: TypeAlias = "list[bytes] | bytes | ForReplicas"

#: the database of an effect that applies to none (the MULTI and EXEC around several
#: effects): the sinks write no SELECT before it, so that, as in Redis 7.2+, the SELECT a
#: transaction needs comes inside it, just before its first command
NO_DB: Final = -1


def server_del(key: bytes, lazy: bool) -> list[bytes]:
    """A deletion the server decided, as Redis propagates it: UNLINK with
    ``lazyfree-lazy-server-del`` (``lazy``), DEL otherwise."""
    return [b"UNLINK" if lazy else b"DEL", key]


class Change:
    __slots__ = ("dirty", "lines")

    def __init__(self, dirty: int, lines: list[Line] | None = None) -> None:
        self.dirty = dirty
        self.lines = lines

    def __repr__(self) -> str:
        return f"Change({self.dirty}, {self.lines!r})"


class Written:
    """A write handler's answer: the reply (or a ``Block``) and what the command changed."""

    __slots__ = ("change", "reply")

    def __init__(self, reply: Any, change: Change) -> None:
        self.reply = reply
        self.change = change


#: one change, propagated as given (SET key value, XSETID …)
ONE: Final = Change(1)
#: ``as_given(n)`` for small n, built once (XACK, XDEL, MSET… of a few IDs or keys)
_AS_GIVEN: Final = [ONE if n == 1 else Change(n) for n in range(128)]


def as_given(dirty: int) -> Change:
    """``dirty`` changes, propagated as the command was given (nothing when 0)."""
    return _AS_GIVEN[dirty] if 0 <= dirty < 128 else Change(dirty)


def one_line(dirty: int, line: list[bytes]) -> Change:
    """``dirty`` changes whose effect is the one line given (a rewritten command)."""
    return Change(dirty, [line])


class Effects(Change):
    """A change built step by step by one command (the consumer-group commands: a consumer
    created, idle ones dropped, entries claimed…). Its lines are always a list: what was
    added is exactly what propagates, never the command as given."""

    def __init__(self) -> None:
        super().__init__(0, [])

    def add(self, dirty: int, line: list[bytes] | None = None) -> None:
        self.dirty += dirty
        lines = self.lines
        if line is not None and lines is not None:
            lines.append(line)
