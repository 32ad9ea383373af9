"""MULTI/EXEC/DISCARD/WATCH/UNWATCH (Redis ``multi.c``).

Queueing itself is the engine's job (it decides, before dispatch, whether a command is queued);
EXEC asks the engine to run the queue. WATCH keeps a ``WatchedKey`` in the database's watch list
and in the client; any write to the key marks the client ``dirty_cas`` and EXEC then fails.
"""

from __future__ import annotations

from headwater.commands.context import Client, spec
from headwater.errors import (
    DISCARD_WITHOUT_MULTI,
    EXEC_WITHOUT_MULTI,
    EXECABORT,
    MULTI_NESTED,
    WATCH_IN_MULTI,
    ReplyError,
)
from headwater.keyspace import WatchedKey
from headwater.resp.types import NULL_ARRAY, OK, Reply


def watch_key(c: Client, key: bytes) -> None:
    db = c.db
    for wk in c.watched:
        if wk.db is db and wk.key == key:
            return
    expired = key in db.data and db.is_expired(key)
    wk = WatchedKey(c, db, key, expired)
    db.watched.setdefault(key, []).append(wk)
    c.watched.append(wk)


def unwatch_all(c: Client) -> None:
    for wk in c.watched:
        watchers = wk.db.watched.get(wk.key)
        if watchers is not None:
            watchers.remove(wk)
            if not watchers:
                del wk.db.watched[wk.key]
    c.watched.clear()
    c.dirty_cas = False


def watched_key_expired(c: Client) -> bool:
    """A key that was live when watched has expired since (Redis: isWatchedKeyExpired)."""
    return any(not wk.expired and wk.db.is_expired(wk.key) for wk in c.watched)


def discard(c: Client) -> None:
    c.in_multi = False
    c.multi_error = False
    c.queued = []
    unwatch_all(c)


def exec_abort(refusal: ReplyError) -> ReplyError:
    """EXEC refused as a whole (Redis: execCommandAbort)."""
    return ReplyError("EXECABORT", f"Transaction discarded because of: {refusal}")


def cmd_multi(c: Client, argv: list[bytes]) -> Reply:
    if c.in_multi:
        raise MULTI_NESTED
    c.in_multi = True
    return OK


def cmd_discard(c: Client, argv: list[bytes]) -> Reply:
    if not c.in_multi:
        raise DISCARD_WITHOUT_MULTI
    discard(c)
    return OK


def cmd_exec(c: Client, argv: list[bytes]) -> Reply:
    if not c.in_multi:
        raise EXEC_WITHOUT_MULTI
    refusal = c.server.exec_refusal(c)
    if refusal is not None:  # (before the queue's own errors, as Redis checks EXEC first)
        discard(c)
        raise exec_abort(refusal)
    if c.multi_error:
        discard(c)
        raise EXECABORT
    if c.dirty_cas or watched_key_expired(c):
        discard(c)
        return NULL_ARRAY
    queued = c.queued
    discard(c)
    return c.server.exec_queued(c, queued)


def cmd_watch(c: Client, argv: list[bytes]) -> Reply:
    if c.in_multi:
        raise WATCH_IN_MULTI
    for key in argv[1:]:
        watch_key(c, key)
    return OK


def cmd_unwatch(c: Client, argv: list[bytes]) -> Reply:
    unwatch_all(c)
    return OK


_TX = "noscript loading stale fast allow_busy"

SPECS = (
    spec("multi", 1, _TX + " x_immediate", handler=cmd_multi),
    spec("exec", 1, "noscript loading stale skip_slowlog x_immediate", handler=cmd_exec),
    spec("discard", 1, _TX + " x_immediate", handler=cmd_discard),
    spec("watch", -2, _TX + " x_immediate", (1, -1, 1), cmd_watch),
    spec("unwatch", 1, _TX, handler=cmd_unwatch),
)
