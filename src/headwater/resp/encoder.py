"""Encode reply values (see ``types``) to RESP2 or RESP3 bytes.

``encode_into(out, reply, resp)`` appends byte chunks to a list; the connection joins the list
once per event-loop iteration, so a pipeline of N replies costs one socket write.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Final, cast

from headwater.errors import ReplyError
from headwater.resp.types import PairMap, Raw, Reply, RSet, Status, Verbatim, _NullArray

_INT_CACHE = [b":%d\r\n" % i for i in range(1024)]
_NULL2 = b"$-1\r\n"
_NULL3 = b"_\r\n"
#: bulk headers of the short lengths most arguments have: a list lookup costs less than a
#: ``%d`` format, and a logged XREADGROUP encodes ~150 arguments (its XCLAIM effects)
_BULK_HEADERS = [b"$%d\r\n" % i for i in range(256)]


def encode_command(argv: list[bytes]) -> bytes:
    """A command as clients send it (and the AOF stores it): an array of bulk strings."""
    parts = [b"*%d\r\n" % len(argv)]
    headers = _BULK_HEADERS
    for arg in argv:
        size = len(arg)
        parts.append(headers[size] if size < 256 else b"$%d\r\n" % size)
        parts.append(arg)
        parts.append(b"\r\n")
    return b"".join(parts)


def _command_into_pure(buf: bytearray, argv: list[bytes]) -> None:
    buf += encode_command(argv)


def _native_command_into() -> Callable[[bytearray, list[bytes]], None] | None:
    """The C encoder (``_encode.c``), or None when it is not built (the pure build)."""
    try:
        module = importlib.import_module("headwater.resp._encode")
    except ImportError:
        return None
    return cast(Callable[[bytearray, list[bytes]], None], module.command_into)


#: ``buf += encode_command(argv)``, in C where built: the AOF's and the replication
#: stream's buffers take every effect this way (the compiled Python ways made a bytes
#: object, or a buffer-protocol concatenation, per word: ~4k instructions for an XADD)
encode_command_into: Final[Callable[[bytearray, list[bytes]], None]] = (
    _native_command_into() or _command_into_pure
)


def encode_into(out: list[bytes], reply: Reply, resp: int) -> None:
    kind = type(reply)
    if kind is bytes:
        data: bytes = reply  # type: ignore[assignment]
        size = len(data)
        # (a header from the table and two concatenations: half a ``%d`` format's cost)
        out.append(
            _BULK_HEADERS[size] + data + b"\r\n" if size < 256 else b"$%d\r\n%s\r\n" % (size, data)
        )
    elif kind is Raw:
        out.append(reply)  # type: ignore[arg-type]
    elif kind is int:
        n: int = reply  # type: ignore[assignment]
        out.append(_INT_CACHE[n] if 0 <= n < 1024 else b":%d\r\n" % n)
    elif reply is None:
        out.append(_NULL3 if resp == 3 else _NULL2)
    elif kind is list or kind is tuple:
        items: list[Reply] = reply  # type: ignore[assignment]
        out.append(b"*%d\r\n" % len(items))
        for item in items:
            encode_into(out, item, resp)
    else:
        _encode_other(out, reply, resp)


def _encode_other(out: list[bytes], reply: Reply, resp: int) -> None:
    if isinstance(reply, ReplyError):
        out.append(b"-%s\r\n" % reply.line())
    elif isinstance(reply, Status):
        out.append(b"+%s\r\n" % reply)
    elif isinstance(reply, dict):
        out.append(b"%%%d\r\n" % len(reply) if resp == 3 else b"*%d\r\n" % (2 * len(reply)))
        for key, value in reply.items():
            encode_into(out, key, resp)
            encode_into(out, value, resp)
    elif isinstance(reply, Verbatim):
        if resp == 3:
            out.append(b"=%d\r\ntxt:%s\r\n" % (len(reply) + 4, reply))
        else:
            out.append(b"$%d\r\n%s\r\n" % (len(reply), reply))
    elif isinstance(reply, PairMap):
        out.append(b"%%%d\r\n" % len(reply) if resp == 3 else b"*%d\r\n" % (2 * len(reply)))
        for key, value in reply:
            encode_into(out, key, resp)
            encode_into(out, value, resp)
    elif isinstance(reply, RSet):
        out.append(b"~%d\r\n" % len(reply) if resp == 3 else b"*%d\r\n" % len(reply))
        for item in reply:
            encode_into(out, item, resp)
    elif isinstance(reply, bool):
        if resp == 3:
            out.append(b"#t\r\n" if reply else b"#f\r\n")
        else:
            out.append(b":1\r\n" if reply else b":0\r\n")
    elif isinstance(reply, float):
        text = format_double(reply)
        out.append(b",%s\r\n" % text if resp == 3 else b"$%d\r\n%s\r\n" % (len(text), text))
    elif isinstance(reply, _NullArray):
        out.append(_NULL3 if resp == 3 else b"*-1\r\n")
    elif isinstance(reply, (bytes, int, list, tuple)):
        # Subclasses of the fast-path types (bytes/int/list subclasses other than ours).
        encode_into(out, _plain(reply), resp)
    else:
        raise TypeError(f"cannot encode reply of type {type(reply).__name__}")


def _plain(reply: bytes | int | list[Reply] | tuple[Reply, ...]) -> Reply:
    if isinstance(reply, bytes):
        return bytes(reply)
    if isinstance(reply, int):
        return int(reply)
    return list(reply)


def format_double(value: float) -> bytes:
    """Doubles as Redis prints them: ``inf``/``-inf``/``nan`` and the shortest round-trip form."""
    if abs(value) < 1e17:  # (false for nan and the infinities)
        whole = int(value)
        return b"%d" % whole if whole == value else repr(value).encode()
    if value != value:
        return b"nan"
    if math.isinf(value):
        return b"inf" if value > 0 else b"-inf"
    return repr(value).encode()


def encode(reply: Reply, resp: int = 2) -> bytes:
    out: list[bytes] = []
    encode_into(out, reply, resp)
    return b"".join(out)
