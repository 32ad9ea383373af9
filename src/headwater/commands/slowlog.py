"""SLOWLOG: the last commands that ran longer than ``slowlog-log-slower-than`` microseconds
(Redis's slowlog.c, 7.x replies).

The engine times every call already (COMMANDSTATS); ``Engine.call`` hands a call at or over
the threshold to ``SlowLog.push``, so a server whose commands are fast pays one comparison.
A blocked command is logged when it is served (its run, not its wait); EXEC is not logged
(its commands are); neither is what the AOF replays. Arguments are shown as Redis keeps them:
passwords redacted (``commands/redact.py``), at most 32 of them and 128 bytes each.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

from headwater.commands.args import parse_int
from headwater.commands.context import Client, help_handler, reject_subcommand, spec
from headwater.commands.redact import redacted
from headwater.errors import err, subcommand_syntax
from headwater.resp.types import OK, Reply

#: Redis's SLOWLOG_ENTRY_MAX_ARGC and SLOWLOG_ENTRY_MAX_STRING
MAX_ARGC = 32
MAX_STRING = 128
_DEFAULT_COUNT = 10
#: what Redis names a client without a connection (a script's commands)
_NO_PEER = b"?:0"
_COUNT_RANGE = err("count should be greater than or equal to -1")


@dataclass(frozen=True, slots=True)
class SlowEntry:
    id: int
    unix_time: int
    duration_us: int
    argv: list[bytes]
    addr: bytes
    name: bytes


def shown_arguments(argv: list[bytes]) -> list[bytes]:
    """The arguments an entry keeps: the last of 32 counts the rest, long ones are cut."""
    kept = argv
    if len(argv) > MAX_ARGC:
        more = len(argv) - MAX_ARGC + 1
        kept = [*argv[: MAX_ARGC - 1], b"... (%d more arguments)" % more]
    return [
        arg[:MAX_STRING] + b"... (%d more bytes)" % (len(arg) - MAX_STRING)
        if len(arg) > MAX_STRING
        else arg
        for arg in kept
    ]


class SlowLog:
    """The entries, newest first, and the two settings (the engine's config listener sets
    them). ``floor`` is the threshold the engine compares with (infinite: disabled)."""

    def __init__(self) -> None:
        self.entries: deque[SlowEntry] = deque()
        self.next_id = 0
        self.max_len = 128
        self.floor = 10000.0

    def set_threshold(self, microseconds: int) -> None:
        self.floor = float("inf") if microseconds < 0 else float(microseconds)

    def push(self, argv: list[bytes], duration_us: float, addr: str, name: bytes) -> None:
        entry = SlowEntry(
            self.next_id,
            int(time.time()),
            int(duration_us),
            shown_arguments(redacted(argv)),
            addr.encode() if addr else _NO_PEER,
            name,
        )
        self.next_id += 1
        self.entries.appendleft(entry)
        self.trim()

    def trim(self) -> None:
        """Keep the newest ``max_len`` entries. Redis trims after every call while the log
        is on: the engine calls this after a push and when either setting changes (the
        CONFIG SET's own call would trim), not while the log is off."""
        if self.floor == float("inf"):
            return
        while len(self.entries) > self.max_len:
            self.entries.pop()

    def check_invariants(self) -> None:
        ids = [entry.id for entry in self.entries]
        if ids != sorted(ids, reverse=True) or len(set(ids)) != len(ids):
            raise AssertionError(f"slowlog ids out of order: {ids}")
        if ids and ids[0] >= self.next_id:
            raise AssertionError("an entry's id is not below the next id")
        for entry in self.entries:
            if len(entry.argv) > MAX_ARGC or any(
                len(arg) > MAX_STRING + len(b"... (%d more bytes)" % (2**63)) for arg in entry.argv
            ):
                raise AssertionError(f"an entry keeps more than it may: {entry}")


def cmd_slowlog_get(c: Client, argv: list[bytes]) -> Reply:
    """SLOWLOG GET [count]: the newest ``count`` entries (default 10, -1: all)."""
    if len(argv) > 3:
        raise subcommand_syntax(argv[1], "SLOWLOG")
    count = _DEFAULT_COUNT
    if len(argv) == 3:
        count = parse_int(argv[2], _COUNT_RANGE)
        if count < -1:
            raise _COUNT_RANGE
    entries = c.server.slowlog.entries
    shown = list(entries) if count == -1 else [entries[i] for i in range(min(count, len(entries)))]
    return [[e.id, e.unix_time, e.duration_us, list(e.argv), e.addr, e.name] for e in shown]


def cmd_slowlog_len(c: Client, argv: list[bytes]) -> Reply:
    return len(c.server.slowlog.entries)


def cmd_slowlog_reset(c: Client, argv: list[bytes]) -> Reply:
    c.server.slowlog.entries.clear()
    return OK


SLOWLOG_HELP = [
    b"SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    b"GET [<count>]",
    b"    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    b"    Entries are made of:",
    b"    id, timestamp, time in microseconds, arguments array, client IP and port,",
    b"    client name",
    b"LEN",
    b"    Return the length of the slowlog.",
    b"RESET",
    b"    Reset the slowlog.",
    b"HELP",
    b"    Prints this help.",
]

SPECS = (
    spec(
        "slowlog",
        -2,
        "",
        handler=reject_subcommand,
        subcommands=(
            spec("slowlog|get", -2, "admin loading stale", handler=cmd_slowlog_get),
            spec("slowlog|len", 2, "admin loading stale", handler=cmd_slowlog_len),
            spec("slowlog|reset", 2, "admin loading stale", handler=cmd_slowlog_reset),
            spec("slowlog|help", 2, "loading stale", handler=help_handler(SLOWLOG_HELP)),
        ),
    ),
)
