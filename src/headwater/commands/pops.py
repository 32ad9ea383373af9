"""What the pops of lists and sorted sets share (Redis's ``t_list.c`` and ``t_zset.c`` use
the same helpers): a blocking command's timeout, the wait on its keys, the grammar of
``numkeys key [key ...] <side> [COUNT count]`` of LMPOP/ZMPOP and their blocking forms, and
the commands' flow: the first key that holds something is popped, else the command waits.

What a pop of one key does (its reply, its events, the effect line Redis rewrites it to) is
the family's ``PopFrom``: LPOP/RPOP and ZPOPMIN/ZPOPMAX of the key.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from headwater.commands.args import INT64_MAX, parse_double, parse_int
from headwater.commands.context import Block, Client
from headwater.errors import SYNTAX, err
from headwater.ops.change import Written
from headwater.resp.types import NULL_ARRAY, Reply

#: A family's pop from one key: ``(c, key, side, count)``, None when the key holds nothing
#: (missing or empty; a key of another type is WRONGTYPE). ``side`` is LEFT/MIN (True) or
#: RIGHT/MAX; count 0 is the one-member form of BLPOP/BZPOPMIN (reply ``key member [score]``),
#: a count the M form's (reply ``key [members]``).
PopFrom = Callable[[Client, bytes, bool, int], "Written | None"]

NUMKEYS_NOT_POSITIVE = err("numkeys should be greater than 0")
COUNT_NOT_POSITIVE = err("count should be greater than 0")
TIMEOUT_NOT_FLOAT = err("timeout is not a float or out of range")
TIMEOUT_OUT_OF_RANGE = err("timeout is out of range")


def parse_seconds_timeout(c: Client, raw: bytes) -> int:
    """A blocking command's timeout in seconds (getTimeoutFromObjectOrReply, UNIT_SECONDS):
    milliseconds, rounded up; 0 waits for ever."""
    seconds = parse_double(raw, TIMEOUT_NOT_FLOAT)
    ms = seconds * 1000.0
    if ms >= 2.0**63:  # (Redis 7.2+; 7.0 cast it to LLONG_MIN and said "negative")
        raise TIMEOUT_OUT_OF_RANGE
    # (below -2**63, Redis's cast to long long gives LLONG_MIN on x86: "negative")
    whole = math.ceil(ms) if ms >= -(2.0**63) else -(2**63)
    if whole < 0:
        raise err("timeout is negative")
    if whole > 0 and whole > INT64_MAX - c.server.keyspace.now_ms:
        raise TIMEOUT_OUT_OF_RANGE
    return whole


def block_on(
    c: Client, keys: list[bytes], timeout_ms: int, wakes_on: type, null_if_denied: bool = False
) -> Block:
    """Wait on keys until one holds a ``wakes_on`` value; a null array on timeout, and where
    the client may not wait (a null bulk string there with ``null_if_denied``)."""
    deadline = c.server.clock.monotonic_ms() + timeout_ms if timeout_ms else 0
    return Block(list(keys), deadline, NULL_ARRAY, wakes_on=wakes_on, null_if_denied=null_if_denied)


def parse_mpop(
    argv: list[bytes], at: int, first: bytes, second: bytes
) -> tuple[list[bytes], bool, int]:
    """``numkeys key [key ...] <first>|<second> [COUNT count]`` from ``at`` (LEFT|RIGHT for
    lists, MIN|MAX for sorted sets): (keys, whether the side is ``first``, count)."""
    numkeys = parse_int(argv[at], NUMKEYS_NOT_POSITIVE)
    if numkeys <= 0:
        raise NUMKEYS_NOT_POSITIVE
    where = at + 1 + numkeys
    if where >= len(argv):
        raise SYNTAX
    side = argv[where].upper()
    if side != first and side != second:
        raise SYNTAX
    count = -1
    j = where + 1
    while j < len(argv):
        if count == -1 and argv[j].upper() == b"COUNT" and j + 1 < len(argv):
            count = parse_int(argv[j + 1], COUNT_NOT_POSITIVE)
            if count <= 0:
                raise COUNT_NOT_POSITIVE
            j += 2
        else:
            raise SYNTAX
    return argv[at + 1 : where], side == first, max(count, 1)


def first_popped(
    c: Client, keys: list[bytes], side: bool, count: int, pop_from: PopFrom
) -> Written | None:
    """The pop from the first key in order that holds something (None: none does)."""
    for key in keys:
        popped = pop_from(c, key, side, count)
        if popped is not None:
            return popped
    return None


def mpop(
    c: Client, argv: list[bytes], first: bytes, second: bytes, pop_from: PopFrom
) -> Reply | Written:
    """LMPOP/ZMPOP numkeys key [key ...] <first>|<second> [COUNT count]: a null array when
    every key is empty."""
    keys, side, count = parse_mpop(argv, 1, first, second)
    popped = first_popped(c, keys, side, count, pop_from)
    return popped if popped is not None else NULL_ARRAY


def blocking_mpop(
    c: Client, argv: list[bytes], first: bytes, second: bytes, pop_from: PopFrom, wakes_on: type
) -> Reply | Written | Block:
    """BLMPOP/BZMPOP timeout numkeys key [key ...] <first>|<second> [COUNT count]."""
    keys, side, count = parse_mpop(argv, 2, first, second)
    timeout_ms = parse_seconds_timeout(c, argv[1])  # (after the rest, as in Redis)
    popped = first_popped(c, keys, side, count, pop_from)
    return popped if popped is not None else block_on(c, keys, timeout_ms, wakes_on)


def blocking_pop(
    c: Client, argv: list[bytes], side: bool, pop_from: PopFrom, wakes_on: type
) -> Reply | Written | Block:
    """BLPOP/BRPOP/BZPOPMIN/BZPOPMAX key [key ...] timeout: one member of the first key that
    holds any, else wait."""
    timeout_ms = parse_seconds_timeout(c, argv[-1])
    keys = argv[1:-1]
    popped = first_popped(c, keys, side, 0, pop_from)
    return popped if popped is not None else block_on(c, keys, timeout_ms, wakes_on)
