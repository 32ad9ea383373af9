"""Reply values that handlers return, and how each maps to RESP2 and RESP3.

=================  ====================  ======================
Python value       RESP2                 RESP3
=================  ====================  ======================
``bytes``          ``$len`` bulk         ``$len`` bulk
``int``            ``:n``                ``:n``
``None``           ``$-1`` null bulk     ``_`` null
``NULL_ARRAY``     ``*-1`` null array    ``_`` null
``list``/``tuple`` ``*n`` array          ``*n`` array
``dict``           flat ``*2n`` array    ``%n`` map
``Status``         ``+text``             ``+text``
``Verbatim``       ``$len`` bulk         ``=len txt:…`` verbatim
``RSet``           ``*n`` array          ``~n`` set
``PairMap``        flat ``*2n`` array    ``%n`` map (keys may repeat)
``float``          bulk of the number    ``,`` double
``bool``           ``:1``/``:0``         ``#t``/``#f``
``ReplyError``     ``-CODE msg``         ``-CODE msg``
``Raw``            pre-encoded bytes, written as they are
=================  ====================  ======================
"""

from __future__ import annotations

from typing import Any

from headwater.errors import ReplyError


class Status(bytes):
    """A simple string reply (``+OK``)."""

    __slots__ = ()


class Verbatim(bytes):
    """Text shown as a verbatim string in RESP3 (INFO, CLIENT LIST)."""

    __slots__ = ()


class Raw(bytes):
    """Bytes already encoded as RESP, identical in both protocol versions."""

    __slots__ = ()


class RSet(list):  # type: ignore[type-arg]
    """An unordered collection: a set in RESP3, an array in RESP2."""

    __slots__ = ()


class PairMap(list):  # type: ignore[type-arg]
    """A map given as (key, value) pairs, for replies whose keys may repeat (XREAD of one key
    twice): ``%n`` in RESP3, a flat array in RESP2."""

    __slots__ = ()


class _NullArray:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ARRAY"


NULL_ARRAY = _NullArray()

# Containers are typed loosely (``list[Any]``): list invariance would otherwise force every
# handler to annotate its lists as ``list[Reply]``.
Reply = (
    bytes
    | int
    | float
    | bool
    | None
    | _NullArray
    | ReplyError
    | list[Any]
    | tuple[Any, ...]
    | dict[Any, Any]
)

OK = Raw(b"+OK\r\n")
PONG = Raw(b"+PONG\r\n")
QUEUED = Raw(b"+QUEUED\r\n")
