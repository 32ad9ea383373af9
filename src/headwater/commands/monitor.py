"""MONITOR: every command run, shown to the monitors as Redis shows it.

A line is a status reply ``+<unix seconds>.<micros> [<db> <addr>] "arg" ...`` with each
argument quoted as Redis's ``sdscatrepr`` quotes it. Commands are shown after they ran (as in
Redis 7: a transaction's commands before its EXEC, rejected commands never), except admin
commands and what an AOF replays; passwords are redacted as Redis redacts them
(``commands/redact.py``). While a monitor is open every client is ``hooked``
(commands/pubsub.py), so a server without one pays nothing for this.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from headwater.commands.context import Client, spec
from headwater.commands.redact import redacted
from headwater.resp.types import Raw, Reply

if TYPE_CHECKING:
    from headwater.commands.context import CommandSpec
    from headwater.commands.pubsub import PubSub

_ESCAPES = {
    ord("\\"): b"\\\\",
    ord('"'): b'\\"',
    ord("\n"): b"\\n",
    ord("\r"): b"\\r",
    ord("\t"): b"\\t",
    ord("\a"): b"\\a",
    ord("\b"): b"\\b",
}
#: each byte as sdscatrepr prints it
_REPR = [_ESCAPES.get(b, bytes([b]) if 32 <= b < 127 else b"\\x%02x" % b) for b in range(256)]
_PLAIN = frozenset(b for b in range(32, 127) if b not in _ESCAPES)


def quote(arg: bytes) -> bytes:
    if all(b in _PLAIN for b in arg):
        return b'"%s"' % arg
    return b'"%s"' % b"".join(_REPR[b] for b in arg)


def monitor_line(c: Client, argv: list[bytes], now_us: int, source: str | None = None) -> bytes:
    """``source``: what the line names instead of the client's address (``lua`` for the
    commands a script runs, as Redis shows them)."""
    seconds, micros = divmod(now_us, 1_000_000)
    args = b" ".join(quote(arg) for arg in redacted(argv))
    shown = c.addr if source is None else source
    head = b"+%d.%06d [%d %s] " % (seconds, micros, c.db.index, shown.encode())
    return head + args + b"\r\n"


def feed_monitors(
    pubsub: PubSub, c: Client, row: CommandSpec, argv: list[bytes], source: str | None = None
) -> None:
    """Show a command that ran to every monitor (not admin ones, as in Redis)."""
    if row.admin or "skip_monitor" in row.flags:
        return
    show_command(pubsub, c, argv, source)


def show_command(pubsub: PubSub, c: Client, argv: list[bytes], source: str | None = None) -> None:
    """One line to every monitor, whatever the command's flags (EVAL and FCALL, flagged
    ``skip_monitor``, show themselves before their script runs, as Redis does). Commands
    replayed from the AOF are not shown."""
    if not pubsub.monitors or c.replaying:
        return
    line = monitor_line(c, argv, time.time_ns() // 1000, source)
    pending = pubsub.pending
    hold = output_hold(c)
    for monitor in pubsub.monitors:
        monitor.out.append(line)
        pending.add(monitor)
        if monitor.seen_seq < hold:
            monitor.seen_seq = hold


def output_hold(c: Client) -> int:
    """With appendfsync always, output that ``c``'s command causes (a monitor line, a
    message it publishes) may show what it wrote or read: it waits until that is on disk,
    as Redis writes no output before the fsync. 0 otherwise: nothing to wait for."""
    return max(c.effect_seq, c.seen_seq) if c.server.replies_wait_for_disk else 0


def cmd_monitor(c: Client, argv: list[bytes]) -> Reply:
    pubsub = c.server.pubsub
    if c.monitor:
        return Raw(b"")  # Redis ignores a second MONITOR, with no reply
    first = not pubsub.monitors
    pubsub.monitors[c] = None
    c.monitor = True
    if first:
        for client in c.server.clients.values():
            client.update_hooked()
    c.update_hooked()
    return Raw(b"+OK\r\n")


def stop_monitor(c: Client) -> None:
    """``c`` is no monitor any more (RESET, closed): with the last one gone, no client
    takes the slow path for them."""
    pubsub = c.server.pubsub
    if c not in pubsub.monitors:
        return
    del pubsub.monitors[c]
    c.monitor = False
    if not pubsub.monitors:
        for client in c.server.clients.values():
            client.update_hooked()
    c.update_hooked()


SPECS = (spec("monitor", 1, "admin noscript loading stale", handler=cmd_monitor),)
