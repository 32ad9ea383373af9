"""CLIENT PAUSE and CLIENT UNPAUSE (Redis 7.0 ``networking.c`` pauseClients, ``server.c``
processCommand's postponement).

Theory of operation
-------------------
A pause has a mode and an end (absolute wall-clock ms). While it lasts, a client's command
that the mode covers is *held*, not refused: the engine parks the client (its gate's
``blocked`` is a ``Held``, so the transport runs none of what it pipelined after it, as for a
client blocked on keys), and no reply is sent. ``WRITE`` covers what Redis 7.0 holds under
``CLIENT PAUSE … WRITE``: commands flagged write or may-replicate (PUBLISH, SPUBLISH, PFCOUNT,
EVAL, EVALSHA, FCALL), EXEC of a transaction holding one, and scripts and functions by their
declared flags (a ``no-writes`` script runs; a script without a shebang is judged by its
command). ``ALL`` covers every command, CLIENT UNPAUSE and QUIT included (as in Redis, only
the end of the pause, or a command that was queued in a transaction before it, lifts it).
Replicas attached to this server and AOF replay are never held.

Checks happen where Redis makes them: after arity, authentication and the refusals (busy
script, -MISCONF, -READONLY), before MULTI queueing, so a write sent inside MULTI waits for
its QUEUED. A second pause merges with the first as Redis 7.0 merges them: the stricter mode
and the later end win. A timeout that overflows (Redis adds it to the clock in 64 bits)
gives an end in the past, which pauses nothing.

When the pause ends (UNPAUSE, or its end passes: a timer, or the next command that finds it
over), the held clients are released in the order they were held, after the current loop
callback (the client that unpaused finishes what it sent first, as Redis releases them in
``beforeSleep``). Each released client's command runs again through the whole dispatch path
(it may be held again by a newer pause, queued in MULTI, or block on keys), then what it
pipelined meanwhile, before the next held client's: their replies come in order, late and
not lost.

While paused (either mode) the data set stays still: an expired key or hash field reads as
absent but is not deleted (no DEL or HDEL is logged or replicated), and the cron expires
nothing and reclaims no idle consumers, until the pause ends (Redis: expireIfNeeded and
activeExpireCycle under checkClientPauseTimeoutAndReturnIfPaused). Headwater has no
eviction, so nothing else changes by itself.

The dispatch path pays one attribute test (``Engine.pause_mode``) when no pause is on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from headwater.commands.context import Client, CommandSpec
from headwater.commands.pubsub import restriction
from headwater.scripting.commands import declared_write as script_declared_write
from headwater.scripting.function_commands import declared_write as function_declared_write

if TYPE_CHECKING:
    from headwater.engine.core import Engine

PAUSE_OFF = 0
PAUSE_WRITE = 1
PAUSE_ALL = 2
INT64_MAX = (1 << 63) - 1

_SCRIPTS = frozenset(("eval", "eval_ro", "evalsha", "evalsha_ro"))
_FUNCTIONS = frozenset(("fcall", "fcall_ro"))


class Held:
    """A client's command postponed by a pause (the client's ``gate.blocked`` meanwhile)."""

    __slots__ = ("argv", "client")

    def __init__(self, client: Client, argv: list[bytes]) -> None:
        self.client = client
        self.argv = argv


class Pause:
    """The pause in force and the clients it holds, in the order they were held."""

    def __init__(self) -> None:
        self.end_ms = 0
        self.held: list[Held] = []
        self.timer: Any = None
        #: a release of the held clients is scheduled (after the current loop callback)
        self.release_scheduled = False


def pause_end(now_ms: int, timeout_ms: int) -> int:
    """The end of a pause of ``timeout_ms`` from ``now_ms`` as Redis 7.0 computes it: a 64-bit
    sum that wraps (a huge timeout ends in the past), 0 for a timeout of 0."""
    if timeout_ms <= 0:
        return 0
    end = (now_ms + timeout_ms) & ((1 << 64) - 1)
    return end - (1 << 64) if end > INT64_MAX else end


def covers(engine: Engine, c: Client, row: CommandSpec, argv: list[bytes]) -> bool:
    """Whether the pause in force holds this command (the pause is on and not over)."""
    if c.is_replica or c.replaying or c.is_script:
        return False
    if c.hooked and restriction(c, row) is not None:
        return False  # refused in its mode before any pause is considered, as in Redis
    if engine.pause_mode == PAUSE_ALL:
        return True
    return may_replicate(c, row, argv)


def may_replicate(c: Client, row: CommandSpec, argv: list[bytes]) -> bool:
    """Redis's ``is_may_replicate_command`` for this call: the command's write or may-replicate
    flag, a script's or function's declared flags instead when it has them, and for EXEC
    those of the commands it queued."""
    name = row.name
    if name in _SCRIPTS:
        declared = script_declared_write(c, argv)
        return row.may_replicate if declared is None else declared
    if name in _FUNCTIONS:
        declared = function_declared_write(c, argv)
        return row.may_replicate if declared is None else declared
    if name == "exec" and c.in_multi:
        return any(may_replicate(c, queued, qargv) for queued, qargv in c.queued)
    return row.may_replicate
