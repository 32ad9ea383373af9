"""Keyspace notifications: the events commands fire, published on ``__keyspace@<db>__:<key>``
(the event as message) and ``__keyevent@<db>__:<event>`` (the key) as Redis publishes them.

Handlers say which events happened (only the handler knows: an XADD that also trimmed fires
``xadd`` then ``xtrim``, a DEL fires ``del`` for each key it found, XREADGROUP fires
``xgroup-createconsumer`` for a new consumer): ``notify`` adds the event to the engine's
``events``, in order. The engine publishes them once the command's change went through its
choke point (``Engine.call`` after ``apply_change``, ``_publish_events``), so that with
appendfsync always the receivers' output waits for exactly the effects the command made
(before the command's reply, as Redis publishes them). With nothing configured an event costs
the handler one flag test (``keyspace.notify_flags``).
"""

from __future__ import annotations

from typing import Any, TypeVar

from headwater.commands.context import Client
from headwater.commands.pubsub import PubSub
from headwater.errors import WRONGTYPE
from headwater.keyevents import GENERIC, KEY_MISS, KEYEVENT, KEYSPACE

T = TypeVar("T")


def notify(c: Client, event_class: int, event: bytes, key: bytes) -> None:
    """Fire ``event`` on ``key`` of the client's database, if its class is configured."""
    server = c.server
    if server.keyspace.notify_flags & event_class:
        server.events.append((event, key, c.db.index))


def notify_in(c: Client, db: int, event_class: int, event: bytes, key: bytes) -> None:
    """``notify`` for a key of another database than the client's (MOVE, COPY … DB)."""
    server = c.server
    if server.keyspace.notify_flags & event_class:
        server.events.append((event, key, db))


def publish_event(
    pubsub: PubSub, flags: int, event: bytes, key: bytes, db: int, hold: int = 0
) -> None:
    """Publish one event (its class is configured) as K and E ask. ``hold``: with
    appendfsync always, the effect of the change, which the receivers' output waits for."""
    if flags & KEYSPACE:
        pubsub.publish(b"__keyspace@%d__:%s" % (db, key), event, hold)
    if flags & KEYEVENT:
        pubsub.publish(b"__keyevent@%d__:%s" % (db, event), key, hold)


def lookup_read(c: Client, key: bytes, notify_miss: bool = True) -> Any:
    """A read command's lookup (Redis's ``lookupKeyRead``): the value, or None; a hit or a
    miss in INFO stats, and a miss fires ``keymiss`` (not for OBJECT: ``notify_miss``). A key
    of the wrong type is a hit. Writes look their keys up with ``c.db.get`` and count
    nothing, as in Redis."""
    value = c.db.get(key)
    count_read(c, key, value, notify_miss)
    return value


def read_as(c: Client, key: bytes, kind: type[T]) -> T | None:
    """``lookup_read`` of a value of type ``kind`` (exactly): None for a missing key,
    WRONGTYPE for another type."""
    value = c.db.get(key)
    count_read(c, key, value)
    if value is None or type(value) is kind:
        return value
    raise WRONGTYPE


def write_as(c: Client, key: bytes, kind: type[T]) -> T | None:
    """A write's lookup (``c.db.get``, counted nowhere) of a value of type ``kind``: None for
    a missing key, WRONGTYPE for another type. (The body is ``read_as``'s, not a call of a
    shared check: it is on SADD's, ZADD's and LPUSH's path.)"""
    value = c.db.get(key)
    if value is None or type(value) is kind:
        return value
    raise WRONGTYPE


def peek_read(c: Client, key: bytes, notify_miss: bool = True) -> Any:
    """``lookup_read`` without the access (Redis's LOOKUP_NOTOUCH: TYPE, EXISTS, the TTL
    family, OBJECT): the key's LRU time and LFU counter stay as they were."""
    value = c.db.peek(key)
    count_read(c, key, value, notify_miss)
    return value


def count_read(c: Client, key: bytes, value: object, notify_miss: bool = True) -> None:
    """Count a read lookup whose value the caller already holds (a hit unless None), as
    ``lookup_read`` does, without looking the key up again."""
    if value is None:
        c.server.stats.keyspace_misses += 1
        if notify_miss:
            notify(c, KEY_MISS, b"keymiss", key)
    else:
        c.server.stats.keyspace_hits += 1


def emptied(c: Client, key: bytes, empty: bool) -> None:
    """After a removal from a collection: an empty one is deleted (and ``del`` fired, as
    Redis's callers of dbDelete do), else WATCH is told of the change."""
    if empty:
        c.db.delete(key)
        notify(c, GENERIC, b"del", key)
    else:
        c.db.signal_modified(key)
