"""The generic write rules of Redis's ``db.c`` that move values between keys and databases:
COPY, MOVE and SWAPDB. Each is deterministic given the keyspace, so its effect is the command
as given (the engine propagates it; AOF replay and the replica link run the same handler).

What a value type must provide to be copied
-------------------------------------------
``duplicate`` copies strings (immutable ``bytes``: shared) and ``Hash``; any other type is
copied by its own ``copy()`` method (``Copyable``), which must return an independent twin:
same type, same contents, same encoding label (Redis's ``*Dup`` keep the encoding), sharing
nothing a later write to either would change. Sets, sorted sets and streams (with their
groups, PELs, consumers and IDMP maps) have one; a list type needs one too. A value without
``copy()`` is refused with ``NOT_COPYABLE`` rather than shared between two keys.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from headwater.errors import err
from headwater.keyspace import Database
from headwater.ops.hashttl import track_field_ttls

NOT_COPYABLE = err("COPY of a value of this type is not supported")


@runtime_checkable
class Copyable(Protocol):
    def copy(self) -> object: ...


def duplicate(value: object) -> object:
    """An independent copy of a keyspace value (module doc)."""
    if isinstance(value, bytes):
        return value  # (immutable: RawString stays RawString, so its encoding is kept)
    if isinstance(value, Copyable):
        return value.copy()
    raise NOT_COPYABLE


def copy_key(src: Database, key: bytes, dst: Database, new_key: bytes, replace: bool) -> bool:
    """COPY's write: ``key`` of ``src`` duplicated at ``new_key`` of ``dst`` with its TTL;
    False (nothing done) when ``key`` is missing or ``new_key`` exists without ``replace``.
    The caller checked that the two are not the same key of the same database."""
    value = src.get(key)
    if value is None:
        return False
    when = src.expires.get(key)
    if dst.get(new_key) is not None:
        if not replace:
            return False
        twin = duplicate(value)  # (before deleting: a refused type changes nothing)
        dst.delete(new_key)
    else:
        twin = duplicate(value)
    dst.set(new_key, twin)
    if when is not None:
        dst.set_expire(new_key, when)
    track_field_ttls(dst, new_key, twin)
    return True


def move_key(src: Database, key: bytes, dst: Database) -> bool:
    """MOVE's write: ``key`` leaves ``src`` for ``dst`` with its TTL and access word; False
    when it is missing or ``dst`` already has the key. The databases differ."""
    value = src.get(key)
    if value is None:
        return False
    when = src.expires.get(key)
    if dst.get(key) is not None:
        return False
    word = src.lru.get(key)
    dst.set(key, value)
    if word is not None:  # (the same object moves: it keeps its LRU time / LFU counter)
        dst.lru[key] = word
    if when is not None:
        dst.set_expire(key, when)
    track_field_ttls(dst, key, value)
    src.delete(key)
    dst.signal_modified(key)
    return True
