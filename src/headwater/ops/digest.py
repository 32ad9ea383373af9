"""DEBUG DIGEST-VALUE (Redis's debug.c ``xorObjectDigest``): a value's SHA1-based digest,
the same 20 bytes Redis computes for the same value, so that ``redis-cli --cluster`` can
compare a key on two nodes (it does when a key being moved exists on both).

``mix`` folds data in order (SHA1 of the digest xor SHA1(data)); ``xor`` folds it in
without order (sets, and each hash field's or sorted-set member's own digest).
"""

from __future__ import annotations

import hashlib
import struct

from headwater.stream.ids import MAX_ID, MIN_ID
from headwater.stream.stream import Stream
from headwater.structures.lists import ListValue
from headwater.structures.sets import SetValue
from headwater.structures.zsets import ZSetValue
from headwater.values import Hash

# Redis's OBJ_* type numbers
_STRING, _LIST, _SET, _ZSET, _HASH, _STREAM = 0, 1, 2, 3, 4, 6


def _xor(digest: bytearray, data: bytes) -> None:
    for i, byte in enumerate(hashlib.sha1(data).digest()):
        digest[i] ^= byte


def _mix(digest: bytearray, data: bytes) -> None:
    _xor(digest, data)
    digest[:] = hashlib.sha1(bytes(digest)).digest()


def _text(item: bytes | int) -> bytes:
    return item if isinstance(item, bytes) else b"%d" % item


def value_digest(value: object, has_expire: bool) -> bytes:
    """The 40 hex digits DEBUG DIGEST-VALUE shows for ``value`` (all zeros for None)."""
    digest = bytearray(20)
    if value is None:
        return b"0" * 40
    if isinstance(value, bytes):
        _mix(digest, struct.pack(">I", _STRING))
        _mix(digest, value)
    elif isinstance(value, ListValue):
        _mix(digest, struct.pack(">I", _LIST))
        for item in value:
            _mix(digest, _text(item))
    elif isinstance(value, SetValue):
        _mix(digest, struct.pack(">I", _SET))
        for member in value.ordered():
            _xor(digest, _text(member))
    elif isinstance(value, ZSetValue):
        _mix(digest, struct.pack(">I", _ZSET))
        for score, member in value:
            element = bytearray(20)
            _mix(element, _text(member))
            _mix(element, (b"%.17g" % score))
            _xor(digest, bytes(element))
    elif isinstance(value, Hash):
        _mix(digest, struct.pack(">I", _HASH))
        for field, item in value.items():
            element = bytearray(20)
            _mix(element, field)
            _mix(element, item)
            _xor(digest, bytes(element))
    elif isinstance(value, Stream):
        _mix(digest, struct.pack(">I", _STREAM))
        for (ms, seq), pairs in value.range(MIN_ID, MAX_ID):
            _mix(digest, b"%d.%d" % (ms, seq))
            for part in pairs:
                _mix(digest, part)
    if has_expire:
        _xor(digest, b"!!expire!!")
    return digest.hex().encode()
